package notify

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/orch-dev/orch/event"
	"github.com/orch-dev/orch/telemetry"
)

// MaxHookInput bounds the hook JSON orch-notify reads.
const MaxHookInput = 1 << 20

// PlanBranchPrefix is the branch prefix of a worker's plan branch: a
// linked worktree on orch/<plan> is working on <plan>.
const PlanBranchPrefix = "orch/"

// errHookInput marks hook input orch-notify cannot use.
var errHookInput = errors.New("unusable hook input")

// Hook is orch-notify hook: an agent's hook runner calls it.
//
//	orch-notify hook claude          (Claude Code: the hook's JSON on stdin)
//	orch-notify hook codex <json>    (Codex: its notify program, JSON as the last argument)
//
// A hook must never block or break the agent, so Hook always returns 0 and
// writes nothing on stdout (Claude Code reads a hook's stdout, and exit 2
// from a Stop hook would keep the agent going). What went wrong goes to
// stderr. The event is kept like any orch-notify event: acknowledged by
// the broker, or spooled.
func Hook(args []string, env Env, stdin io.Reader, stderr io.Writer) int {
	e, send, data, err := hookEvent(args, env, stdin)
	if err != nil {
		fmt.Fprintf(stderr, "orch-notify hook: %v; nothing sent\n", err)
		return exitKept
	}
	if !send {
		return exitKept
	}
	cwd, err := os.Getwd()
	if err != nil {
		fmt.Fprintf(stderr, "orch-notify hook: %v; nothing sent\n", err)
		return exitKept
	}
	// A headless run knows its plan and attempt (orch sets them in its
	// environment): a hook that fires late is tied to that attempt.
	if p := env("ORCH_PLAN"); p != "" && e.Kind != event.Ready && (e.Plan == "" || e.Plan == p) {
		if n, err := strconv.Atoi(env("ORCH_ATTEMPT")); err == nil && n > 0 {
			e.Plan, e.Attempt = p, n
		}
	}
	e.Usage = hookUsage(args[0], data, e, env)
	if u := e.Usage; u != nil && u.Plan != "" && claudePaneStop(args[0], e, env) {
		// The turn that ended is the last plan dispatched to the session
		// (its transcript says), not the checkout's: orch may have handed
		// the worker its next plan, and switched the branch, already.
		e.Plan = u.Plan
	}
	cfg, err := WorkerConfig(env, cwd)
	if err != nil {
		fmt.Fprintf(stderr, "orch-notify hook: %s not kept: %v\n", e.Kind, err)
		return exitKept
	}
	res, err := Send(cfg, e)
	switch {
	case err != nil:
		fmt.Fprintf(stderr, "orch-notify hook: %s not kept: %v\n", e.Kind, err)
	case res.Spooled != "":
		fmt.Fprintf(stderr, "orch-notify hook: broker not reachable (%v); %s spooled to %s\n", res.PubErr, e.Kind, res.Spooled)
	case args[0] != "gemini":
		// Gemini CLI shows a hook's stderr in its transcript: only
		// problems are said there.
		fmt.Fprintf(stderr, "orch-notify hook: %s %s kept (event %s)\n", e.Kind, e.Plan, e.ID)
	}
	return exitKept
}

func hookEvent(args []string, env Env, stdin io.Reader) (e event.Event, send bool, data []byte, err error) {
	if len(args) == 0 {
		return e, false, nil, fmt.Errorf("%w: want orch-notify hook claude (JSON on stdin) or orch-notify hook codex <json>", errUsage)
	}
	worker := env("ORCH_WORKER")
	if !event.ValidWorker(worker) {
		return e, false, nil, fmt.Errorf("%w: ORCH_WORKER=%q is not a worker id like w1 (orch serve sets it in every worker's pane)", errUsage, worker)
	}
	switch args[0] {
	case "claude":
		if len(args) != 1 {
			return e, false, nil, fmt.Errorf("%w: hook claude reads its JSON on stdin and takes no arguments", errUsage)
		}
		data, err = readBounded(stdin)
		if err != nil {
			return e, false, nil, err
		}
		e, send, err = ClaudeHookEvent(data, worker)
		return e, send, data, err
	case "gemini":
		if len(args) != 1 {
			return e, false, nil, fmt.Errorf("%w: hook gemini reads its JSON on stdin and takes no arguments", errUsage)
		}
		data, err = readBounded(stdin)
		if err != nil {
			return e, false, nil, err
		}
		e, send, err = GeminiHookEvent(data, worker)
		return e, send, data, err
	case "codex":
		if len(args) != 2 {
			return e, false, nil, fmt.Errorf("%w: hook codex takes one JSON argument", errUsage)
		}
		if len(args[1]) > MaxHookInput {
			return e, false, nil, fmt.Errorf("%w: over %d bytes", errHookInput, MaxHookInput)
		}
		data = []byte(args[1])
		e, send, err = CodexHookEvent(data, worker)
		return e, send, data, err
	}
	return e, false, nil, fmt.Errorf("%w: unknown hook style %q (want claude, codex or gemini)", errUsage, args[0])
}

// readBounded reads at most MaxHookInput bytes; more is an error (and the
// rest is read and dropped, so the writer never sees a broken pipe).
func readBounded(r io.Reader) ([]byte, error) {
	if r == nil {
		return nil, fmt.Errorf("%w: no input on stdin", errHookInput)
	}
	data, err := io.ReadAll(io.LimitReader(r, MaxHookInput+1))
	if err != nil {
		return nil, fmt.Errorf("%w: reading stdin: %v", errHookInput, err)
	}
	if len(data) > MaxHookInput {
		io.Copy(io.Discard, r)
		return nil, fmt.Errorf("%w: over %d bytes on stdin", errHookInput, MaxHookInput)
	}
	return data, nil
}

// claudeInput is the part of Claude Code's hook JSON orch reads. The
// field names are the ones Claude Code 2.1 sends (captured from the real
// binary, see the README's Claude Code section).
type claudeInput struct {
	HookEventName    string `json:"hook_event_name"`
	SessionID        string `json:"session_id"`
	Cwd              string `json:"cwd"`
	Source           string `json:"source"`            // SessionStart: startup, resume, clear, compact
	Trigger          string `json:"trigger"`           // PreCompact: auto (the context is full) or manual (/compact)
	Prompt           string `json:"prompt"`            // UserPromptSubmit
	Message          string `json:"message"`           // Notification
	Title            string `json:"title"`             // Notification
	NotificationType string `json:"notification_type"` // Notification: permission_prompt, idle_prompt, ...
	ToolName         string `json:"tool_name"`         // PermissionRequest
	ToolInput        struct {
		Command  string `json:"command"`   // Bash
		FilePath string `json:"file_path"` // Write, Edit, Read
		URL      string `json:"url"`       // WebFetch
		Pattern  string `json:"pattern"`   // Grep, Glob
	} `json:"tool_input"`
	// StopFailure: error is the error's kind ("rate_limit",
	// "authentication_failed", "unknown", ...), last_assistant_message the
	// text the agent showed ("API Error: 400 ..."). error_type and
	// error_message are read too, for older versions.
	Error                json.RawMessage `json:"error"`
	LastAssistantMessage string          `json:"last_assistant_message"`
	ErrorType            string          `json:"error_type"`
	ErrorMessage         string          `json:"error_message"`
}

// ClaudeHookEvent maps one Claude Code hook input to the event to send:
//   - SessionStart → ready (the agent is at its prompt);
//   - UserPromptSubmit → started, for the plan its prompt's dispatch line
//     names (the line was submitted), or else the plan of the checkout's
//     branch (a person typed into it: it works again); nothing without one;
//   - PermissionRequest → needs-input naming the tool and its command;
//   - Notification → needs-input with its message, except permission_prompt
//     (the PermissionRequest for the same prompt names the command) and
//     idle_prompt (a reminder that it still waits: idle with StillIdle);
//   - Stop → idle (the turn ended);
//   - StopFailure → failed with the error's kind and the agent's message,
//     or exhausted when the error says the context ran out (ContextError);
//   - PreCompact with trigger auto → exhausted (the context is full and
//     Claude Code is about to summarise it); a /compact typed by a person
//     (trigger manual) sends nothing.
//
// send is false for events orch does not use.
func ClaudeHookEvent(data []byte, worker string) (e event.Event, send bool, err error) {
	var in claudeInput
	if err := json.Unmarshal(bytes.TrimSpace(data), &in); err != nil {
		return e, false, fmt.Errorf("%w: not Claude Code hook JSON: %v", errHookInput, err)
	}
	plan := PlanFromCheckout(in.Cwd)
	host, _ := os.Hostname()
	switch in.HookEventName {
	case "SessionStart":
		return event.New(event.Ready, "", "claude "+firstNonEmpty(in.Source, "startup"), worker, host), true, nil
	case "PermissionRequest":
		return event.New(event.NeedsInput, plan, permissionReason(in), worker, host), true, nil
	case "Notification":
		switch in.NotificationType {
		case "permission_prompt":
			return e, false, nil
		case "idle_prompt":
			return event.New(event.Idle, plan, event.StillIdle, worker, host), true, nil
		case "auth_success":
			return e, false, nil // a login went through: nothing waits
		}
		msg := firstNonEmpty(in.Message, in.Title, "Claude Code is waiting for input")
		return event.New(event.NeedsInput, plan, msg, worker, host), true, nil
	case "Stop":
		return event.New(event.Idle, plan, "", worker, host), true, nil
	case "StopFailure":
		if reason := failureReason(in); ContextError(firstNonEmpty(in.ErrorType, rawText(in.Error)), reason) {
			return event.New(event.Exhausted, plan, "out of context: "+reason, worker, host), true, nil
		}
		return event.New(event.Failed, plan, failureReason(in), worker, host), true, nil
	case "PreCompact":
		if in.Trigger != "auto" {
			return e, false, nil
		}
		return event.New(event.Exhausted, plan, "context full: Claude Code began compacting its conversation (PreCompact auto)", worker, host), true, nil
	case "UserPromptSubmit":
		if p := event.DispatchedPlan(in.Prompt); p != "" {
			return event.New(event.Started, p, "", worker, host), true, nil
		}
		// The person (or the lead) typed into the agent: it works again.
		// started names its plan; without one there is nothing to send.
		if plan == "" {
			return e, false, nil
		}
		return event.New(event.Started, plan, "", worker, host), true, nil
	case "":
		return e, false, fmt.Errorf("%w: no hook_event_name", errHookInput)
	}
	return e, false, nil
}

// permissionReason says what a PermissionRequest asks: the tool and what
// it would run or touch.
func permissionReason(in claudeInput) string {
	tool := firstNonEmpty(in.ToolName, "a tool")
	what := firstNonEmpty(in.ToolInput.Command, in.ToolInput.FilePath, in.ToolInput.URL, in.ToolInput.Pattern)
	if what == "" {
		return "Claude Code asks permission to use " + tool
	}
	return "Claude Code asks permission to use " + tool + ": " + what
}

// ContextError says whether an agent's error (its kind and message) means
// its context ran out: the output limit (max_output_tokens) or a prompt
// too long for the model's window.
func ContextError(kind, msg string) bool {
	if kind == "max_output_tokens" {
		return true
	}
	m := strings.ToLower(msg)
	for _, s := range []string{"max_output_tokens", "prompt is too long", "context window", "context length", "context limit", "context_length_exceeded"} {
		if strings.Contains(m, s) {
			return true
		}
	}
	return false
}

// failureReason is a StopFailure's reason: the agent's own message,
// prefixed by the error's kind unless that is "unknown" or already said.
func failureReason(in claudeInput) string {
	kind := firstNonEmpty(in.ErrorType, rawText(in.Error))
	msg := firstNonEmpty(in.LastAssistantMessage, in.ErrorMessage)
	switch {
	case msg == "" && kind == "":
		return "the turn ended on an API error"
	case msg == "":
		return kind
	case kind == "" || kind == "unknown" || strings.HasPrefix(msg, kind):
		return msg
	}
	return kind + ": " + msg
}

// CodexHookEvent maps Codex's notify JSON to the event to send:
// agent-turn-complete → idle, for the plan whose dispatch line the turn's
// input is. A turn whose input only quotes a dispatch line is Codex's own
// side thread (its task-title request) and sends nothing; a turn with no
// dispatch line (a person's follow-up) is about the plan of the checkout's
// branch, or the one the worker holds. Other types are not used.
func CodexHookEvent(data []byte, worker string) (e event.Event, send bool, err error) {
	var in struct {
		Type  string   `json:"type"`
		Cwd   string   `json:"cwd"`
		Input []string `json:"input-messages"`
	}
	if err := json.Unmarshal(bytes.TrimSpace(data), &in); err != nil {
		return e, false, fmt.Errorf("%w: not Codex notify JSON: %v", errHookInput, err)
	}
	if in.Type != "agent-turn-complete" {
		return e, false, nil
	}
	plan, quoted := "", false
	for _, m := range in.Input {
		p := event.DispatchedPlan(m)
		switch {
		case p == "":
		case strings.HasPrefix(strings.TrimSpace(m), "Read plans/"+p+"/"):
			plan = p
		default:
			quoted = true
		}
	}
	if plan == "" && quoted {
		return e, false, nil
	}
	if plan == "" {
		plan = PlanFromCheckout(in.Cwd)
	}
	host, _ := os.Hostname()
	return event.New(event.Idle, plan, "", worker, host), true, nil
}

// GeminiHookEvent maps one Gemini CLI hook input to the event to send:
//   - SessionStart → ready;
//   - BeforeAgent → started, for the plan its prompt's dispatch line
//     names, or else the checkout's plan (a person typed);
//   - Notification of type ToolPermission → needs-input naming the
//     command (its details);
//   - AfterAgent → idle (the turn ended).
func GeminiHookEvent(data []byte, worker string) (e event.Event, send bool, err error) {
	var in struct {
		HookEventName    string `json:"hook_event_name"`
		Cwd              string `json:"cwd"`
		Source           string `json:"source"`
		Prompt           string `json:"prompt"`
		NotificationType string `json:"notification_type"`
		Message          string `json:"message"`
		Details          struct {
			Title   string `json:"title"`
			Command string `json:"command"`
		} `json:"details"`
	}
	if err := json.Unmarshal(bytes.TrimSpace(data), &in); err != nil {
		return e, false, fmt.Errorf("%w: not Gemini CLI hook JSON: %v", errHookInput, err)
	}
	plan := PlanFromCheckout(in.Cwd)
	host, _ := os.Hostname()
	switch in.HookEventName {
	case "SessionStart":
		return event.New(event.Ready, "", "gemini "+firstNonEmpty(in.Source, "startup"), worker, host), true, nil
	case "BeforeAgent":
		if p := event.DispatchedPlan(in.Prompt); p != "" {
			return event.New(event.Started, p, "", worker, host), true, nil
		}
		if plan == "" {
			return e, false, nil
		}
		return event.New(event.Started, plan, "", worker, host), true, nil
	case "Notification":
		if in.NotificationType != "ToolPermission" {
			return e, false, nil
		}
		what := firstNonEmpty(in.Details.Command, in.Details.Title, in.Message)
		return event.New(event.NeedsInput, plan, "Gemini CLI asks permission to run: "+what, worker, host), true, nil
	case "AfterAgent":
		if p := event.DispatchedPlan(in.Prompt); p != "" {
			plan = p
		}
		return event.New(event.Idle, plan, "", worker, host), true, nil
	case "":
		return e, false, fmt.Errorf("%w: no hook_event_name", errHookInput)
	}
	return e, false, nil
}

// hookUsage is what the agent recorded it used for e's plan (Claude Code
// in a pane: the last plan dispatched to the session; headless: its run's
// plan; Codex: the plan of the turn's input), on the events that end a turn: Claude Code's Stop and
// StopFailure read its transcript, Codex's agent-turn-complete its
// rollout. Gemini CLI's hook input carries no usage (0.61: AfterAgent has
// the prompt and the response, not their tokens; its transcript_path, a
// chat recording, is not read here): nil. Reading never
// fails the hook: what cannot be read is said in the Usage's Missing.
func hookUsage(style string, data []byte, e event.Event, env Env) *telemetry.Usage {
	if !event.CarriesUsage(e.Kind) || e.Status == event.StillIdle {
		return nil
	}
	var u *telemetry.Usage
	switch style {
	case "claude":
		// In a pane, the turn is the last dispatched plan's: when Stop
		// runs, the checkout may be on the next plan's branch already
		// (orch hands the worker its next plan on done). A headless run
		// has one plan, ORCH_PLAN.
		plan := e.Plan
		if claudePaneStop(style, e, env) {
			plan = ""
		}
		u = ClaudeHookUsage(data, plan)
	case "codex":
		u = CodexHookUsage(data, e.Plan, env)
	}
	if u != nil && u.Check() != nil {
		// A usage the lead would refuse must not cost it the event.
		return &telemetry.Usage{Source: u.Source, Plan: u.Plan, Missing: "the agent's record does not add up: " + u.Check().Error()}
	}
	return u
}

// claudePaneStop says a Claude Code Stop in a pane: its turn is the
// transcript's last dispatched plan. Not a StopFailure: an API error on a
// plan's first request can end the turn before Claude Code has written
// that plan's prompt to the transcript (seen in CI: the failure went to the
// plan before), so a failure keeps the checkout's plan and reads its part.
func claudePaneStop(style string, e event.Event, env Env) bool {
	return style == "claude" && e.Kind == event.Idle && env("ORCH_PLAN") == ""
}

// ClaudeHookUsage reads the transcript a Stop or StopFailure hook input
// names (transcript_path, given in interactive and -p sessions alike) for
// plan's attempt; nil for other hook events.
func ClaudeHookUsage(data []byte, plan string) *telemetry.Usage {
	var in struct {
		HookEventName  string `json:"hook_event_name"`
		TranscriptPath string `json:"transcript_path"`
	}
	if json.Unmarshal(bytes.TrimSpace(data), &in) != nil || (in.HookEventName != "Stop" && in.HookEventName != "StopFailure") {
		return nil
	}
	if in.TranscriptPath == "" {
		return &telemetry.Usage{Source: telemetry.SourceClaudeTranscript, Plan: plan, Missing: "the hook input names no transcript_path"}
	}
	u := telemetry.ClaudeTranscriptFile(in.TranscriptPath, plan)
	return &u
}

// CodexHookUsage reads the rollout of the thread an agent-turn-complete
// notify names (thread-id), under CODEX_HOME (orch sets it in a worker's
// environment, and Codex passes it on to its notify program) or else
// ~/.codex, for plan's attempt; nil for other notify types.
func CodexHookUsage(data []byte, plan string, env Env) *telemetry.Usage {
	var in struct {
		Type     string `json:"type"`
		ThreadID string `json:"thread-id"`
	}
	if json.Unmarshal(bytes.TrimSpace(data), &in) != nil || in.Type != "agent-turn-complete" {
		return nil
	}
	missing := func(why string) *telemetry.Usage {
		return &telemetry.Usage{Source: telemetry.SourceCodexRollout, Plan: plan, Missing: why}
	}
	if in.ThreadID == "" {
		return missing("the notify names no thread-id")
	}
	home := env("CODEX_HOME")
	if home == "" {
		if h := env("HOME"); h != "" {
			home = filepath.Join(h, ".codex")
		}
	}
	if home == "" {
		return missing("neither CODEX_HOME nor HOME is set: no rollout to read")
	}
	path, err := telemetry.FindCodexRollout(home, in.ThreadID)
	if err != nil {
		return missing(err.Error())
	}
	u := telemetry.CodexRolloutFile(path, plan)
	return &u
}

func firstNonEmpty(s ...string) string {
	for _, v := range s {
		if strings.TrimSpace(v) != "" {
			return v
		}
	}
	return ""
}

// rawText renders a JSON value as text: a string as itself, anything else
// as compact JSON.
func rawText(raw json.RawMessage) string {
	if len(raw) == 0 || string(raw) == "null" {
		return ""
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	var b bytes.Buffer
	if json.Compact(&b, raw) == nil {
		return b.String()
	}
	return string(raw)
}

// PlanFromCheckout returns the plan a linked git worktree at (or above)
// dir works on: the <plan> of its branch orch/<plan>, read from the .git
// file's gitdir and its HEAD without running git. The main checkout, a
// detached HEAD, another branch or an invalid plan name give "" (the lead
// loop then uses the plan the worker holds).
func PlanFromCheckout(dir string) string {
	if dir == "" {
		var err error
		if dir, err = os.Getwd(); err != nil {
			return ""
		}
	}
	dir, err := filepath.Abs(dir)
	if err != nil {
		return ""
	}
	for d := dir; ; d = filepath.Dir(d) {
		gitPath := filepath.Join(d, ".git")
		if fi, err := os.Lstat(gitPath); err == nil {
			if !fi.Mode().IsRegular() {
				return "" // the main checkout: shared by workers, its branch names no one's plan
			}
			gitdir, ok := gitdirFromFile(gitPath)
			if !ok {
				return ""
			}
			head, err := os.ReadFile(filepath.Join(gitdir, "HEAD"))
			if err != nil {
				return ""
			}
			ref, ok := strings.CutPrefix(strings.TrimSpace(string(head)), "ref: refs/heads/"+PlanBranchPrefix)
			if !ok || event.CheckPlanName(ref) != nil {
				return ""
			}
			return ref
		}
		if filepath.Dir(d) == d {
			return ""
		}
	}
}
