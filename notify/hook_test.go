package notify

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/orch-dev/orch/event"
	"github.com/orch-dev/orch/internal/orchdir"
	"github.com/orch-dev/orch/telemetry"
)

// worktreeOnPlan makes a linked worktree of root on branch orch/<plan>.
func worktreeOnPlan(t *testing.T, root, plan string) string {
	t.Helper()
	wt := filepath.Join(filepath.Dir(root), "wt-"+plan)
	gitRun(t, root, "worktree", "add", "-q", "-b", PlanBranchPrefix+plan, wt)
	return wt
}

func TestPlanFromCheckout(t *testing.T) {
	root := repoWithOrch(t)
	wt := worktreeOnPlan(t, root, "fix-auth")
	deep := filepath.Join(wt, "a", "b")
	os.MkdirAll(deep, 0o755)
	other := filepath.Join(filepath.Dir(root), "wt-other")
	gitRun(t, root, "worktree", "add", "-q", "-b", "feature", other)
	bad := filepath.Join(filepath.Dir(root), "wt-bad")
	gitRun(t, root, "worktree", "add", "-q", "-b", "orch/Bad_Name", bad)
	gitRun(t, root, "checkout", "-q", "-b", "orch/main-checkout")
	for dir, want := range map[string]string{
		wt:          "fix-auth",
		deep:        "fix-auth",
		other:       "",
		bad:         "",
		root:        "", // the main checkout names no worker's plan, whatever its branch
		t.TempDir(): "",
	} {
		if got := PlanFromCheckout(dir); got != want {
			t.Errorf("PlanFromCheckout(%s) = %q; want %q", dir, got, want)
		}
	}
}

func TestClaudeHookEvent(t *testing.T) {
	root := repoWithOrch(t)
	wt := worktreeOnPlan(t, root, "p1")
	tests := []struct {
		name   string
		json   string
		send   bool
		kind   event.Kind
		plan   string
		status string
	}{
		// The permission prompt's own notification names no command; the
		// PermissionRequest for the same prompt does, and is the one sent.
		{"permission notification", `{"session_id":"s","cwd":"` + root + `","hook_event_name":"Notification","message":"Claude needs your permission to use Bash","notification_type":"permission_prompt"}`,
			false, "", "", ""},
		{"permission request", `{"session_id":"s","cwd":"` + wt + `","hook_event_name":"PermissionRequest","tool_name":"Bash","tool_input":{"command":"curl -fsS http://127.0.0.1:9/x","description":"probe"},"permission_suggestions":[]}`,
			true, event.NeedsInput, "p1", "Claude Code asks permission to use Bash: curl -fsS http://127.0.0.1:9/x"},
		{"permission request for a file", `{"hook_event_name":"PermissionRequest","tool_name":"Write","tool_input":{"file_path":"/etc/passwd","content":"x"}}`,
			true, event.NeedsInput, "", "Claude Code asks permission to use Write: /etc/passwd"},
		{"permission request for an unknown tool", `{"hook_event_name":"PermissionRequest","tool_name":"mcp__x__y","tool_input":{"q":1}}`,
			true, event.NeedsInput, "", "Claude Code asks permission to use mcp__x__y"},
		// idle_prompt comes about a minute after a turn ended: a reminder,
		// never a new reason.
		{"idle reminder in a plan worktree", `{"cwd":"` + wt + `","hook_event_name":"Notification","message":"Claude is waiting for your input","notification_type":"idle_prompt"}`,
			true, event.Idle, "p1", event.StillIdle},
		{"session start", `{"session_id":"s","cwd":"` + wt + `","hook_event_name":"SessionStart","source":"startup"}`,
			true, event.Ready, "", "claude startup"},
		{"dispatch line submitted", `{"cwd":"` + root + `","hook_event_name":"UserPromptSubmit","prompt":"Read plans/q-2/PLAN.md and execute it exactly. First run /x/orch-notify started q-2."}`,
			true, event.Started, "q-2", ""},
		{"notification without message", `{"hook_event_name":"Notification","title":"Permission needed"}`,
			true, event.NeedsInput, "", "Permission needed"},
		{"notification message with escapes", `{"hook_event_name":"Notification","message":"run \u001b[31mrm\u001b[0m?\nyes"}`,
			true, event.NeedsInput, "", `run \x1b[31mrm\x1b[0m?\nyes`},
		{"stop", `{"session_id":"s","cwd":"` + root + `","hook_event_name":"Stop","stop_hook_active":false}`,
			true, event.Idle, "", ""},
		{"stop in a plan worktree", `{"cwd":"` + wt + `","hook_event_name":"Stop"}`,
			true, event.Idle, "p1", ""},
		{"stop failure (older field names)", `{"cwd":"` + root + `","hook_event_name":"StopFailure","error_type":"rate_limit","error":"429","error_message":"Rate limit exceeded"}`,
			true, event.Failed, "", "rate_limit: Rate limit exceeded"},
		// As Claude Code 2.1 sends it: the kind in error, the text shown in
		// last_assistant_message; "unknown" says nothing and is left out.
		{"stop failure", `{"cwd":"` + wt + `","hook_event_name":"StopFailure","error":"unknown","last_assistant_message":"API Error: 400 bad request"}`,
			true, event.Failed, "p1", "API Error: 400 bad request"},
		{"stop failure with a kind", `{"hook_event_name":"StopFailure","error":"rate_limit","last_assistant_message":"API Error: 429 slow down"}`,
			true, event.Failed, "", "rate_limit: API Error: 429 slow down"},
		{"stop failure with an error object", `{"hook_event_name":"StopFailure","error":{"code":500,"msg":"overloaded"}}`,
			true, event.Failed, "", `{"code":500,"msg":"overloaded"}`},
		{"stop failure without details", `{"hook_event_name":"StopFailure"}`,
			true, event.Failed, "", "the turn ended on an API error"},
		// Out of context: the agent's own signals (see ContextError).
		{"compaction because the context is full", `{"cwd":"` + wt + `","hook_event_name":"PreCompact","trigger":"auto","custom_instructions":""}`,
			true, event.Exhausted, "p1", "context full: Claude Code began compacting its conversation (PreCompact auto)"},
		{"compaction asked for by a person", `{"cwd":"` + wt + `","hook_event_name":"PreCompact","trigger":"manual","custom_instructions":"keep it short"}`,
			false, "", "", ""},
		{"stop failure at the output limit", `{"cwd":"` + wt + `","hook_event_name":"StopFailure","error":"max_output_tokens","last_assistant_message":"API Error: Claude's response exceeded the output token maximum"}`,
			true, event.Exhausted, "p1", "out of context: max_output_tokens: API Error: Claude's response exceeded the output token maximum"},
		{"stop failure on a prompt too long", `{"hook_event_name":"StopFailure","error":"invalid_request","last_assistant_message":"API Error: 400 prompt is too long: 210000 tokens > 200000 maximum"}`,
			true, event.Exhausted, "", "out of context: invalid_request: API Error: 400 prompt is too long: 210000 tokens > 200000 maximum"},
		{"prompt in a plan worktree", `{"cwd":"` + wt + `","hook_event_name":"UserPromptSubmit","prompt":"yes, go on"}`,
			true, event.Started, "p1", ""},
		{"prompt without a known plan", `{"cwd":"` + root + `","hook_event_name":"UserPromptSubmit","prompt":"yes"}`,
			false, "", "", ""},
		{"other event", `{"hook_event_name":"PreToolUse","tool_name":"Bash"}`, false, "", "", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e, send, err := ClaudeHookEvent([]byte(tt.json), "w3")
			if err != nil {
				t.Fatal(err)
			}
			if send != tt.send {
				t.Fatalf("send = %v; want %v (event %+v)", send, tt.send, e)
			}
			if !send {
				return
			}
			if e.Kind != tt.kind || e.Plan != tt.plan || e.Status != tt.status || e.Worker != "w3" {
				t.Errorf("event %+v; want kind %s plan %q status %q worker w3", e, tt.kind, tt.plan, tt.status)
			}
			if err := e.Check(); err != nil {
				t.Errorf("event does not pass the lead's check: %v", err)
			}
		})
	}
	for _, bad := range []string{``, `not json`, `{"hook_event_name": 3}`, `{}`, `[1,2]`} {
		if _, send, err := ClaudeHookEvent([]byte(bad), "w3"); err == nil || send {
			t.Errorf("ClaudeHookEvent(%q): send %v, err %v; want an error and nothing to send", bad, send, err)
		}
	}
}

func TestCodexHookEvent(t *testing.T) {
	e, send, err := CodexHookEvent([]byte(`{"type":"agent-turn-complete","thread-id":"t","turn-id":"1","cwd":"/tmp","input-messages":["x"],"last-assistant-message":"ok"}`), "w1")
	if err != nil || !send || e.Kind != event.Idle || e.Worker != "w1" || e.Plan != "" {
		t.Errorf("agent-turn-complete: %+v, %v, %v; want idle from w1", e, send, err)
	}
	// As Codex 0.171.0 sends them: the plan's turn (its input is the
	// dispatch line), the task-title side thread (its input quotes it),
	// a person's follow-up in a plan's worktree.
	root := repoWithOrch(t)
	wt := worktreeOnPlan(t, root, "p7")
	line := `Read plans/p1/PLAN.md and execute it exactly. First run /x/orch-notify started p1. Write plans/p1/RESULT.md.`
	for _, tt := range []struct {
		name, json string
		send       bool
		plan       string
	}{
		{"the plan's turn", `{"type":"agent-turn-complete","cwd":"` + wt + `","client":"codex-tui","input-messages":["` + line + `"],"last-assistant-message":"Finished p1."}`, true, "p1"},
		{"title thread", `{"type":"agent-turn-complete","cwd":"` + wt + `","input-messages":["Generate a concise, single-line task title of at most 36 characters.\n\nUser prompt:\n` + line + `"],"last-assistant-message":"{\"title\":\"x\"}"}`, false, ""},
		{"a person's follow-up", `{"type":"agent-turn-complete","cwd":"` + wt + `","input-messages":["go on"]}`, true, "p7"},
	} {
		e, send, err := CodexHookEvent([]byte(tt.json), "w2")
		if err != nil || send != tt.send || (send && (e.Plan != tt.plan || e.Kind != event.Idle)) {
			t.Errorf("%s: %+v, send %v, err %v; want send %v plan %q", tt.name, e, send, err, tt.send, tt.plan)
		}
	}
	if _, send, err := CodexHookEvent([]byte(`{"type":"approval-requested"}`), "w1"); send || err != nil {
		t.Errorf("other type: send %v, err %v; want nothing", send, err)
	}
	if _, send, err := CodexHookEvent([]byte(`{`), "w1"); send || err == nil {
		t.Errorf("malformed: send %v, err %v; want an error", send, err)
	}
}

// TestHookNeverFails runs orch-notify hook with input it cannot use: it
// exits 0, prints the reason on stderr, and keeps nothing (the spool stays
// empty, and no broker is needed to find that out).
func TestHookNeverFails(t *testing.T) {
	root := repoWithOrch(t)
	spool := filepath.Join(root, orchdir.Name, orchdir.Spool)
	env := func(worker string) Env {
		return func(k string) string {
			switch k {
			case "ORCH_WORKER":
				return worker
			case "ORCH_DIR":
				return filepath.Join(root, orchdir.Name)
			case "ORCH_NOTIFY_TIMEOUT":
				return "200ms"
			}
			return ""
		}
	}
	big := `{"hook_event_name":"Notification","message":"` + strings.Repeat("x", MaxHookInput) + `"}`
	tests := []struct {
		name   string
		args   []string
		worker string
		stdin  string
		stderr string
	}{
		{"malformed JSON", []string{"claude"}, "w1", "{not json", "not Claude Code hook JSON"},
		{"empty stdin", []string{"claude"}, "w1", "", "not Claude Code hook JSON"},
		{"too large", []string{"claude"}, "w1", big, "over 1048576 bytes"},
		{"no worker", []string{"claude"}, "", `{"hook_event_name":"Stop"}`, "ORCH_WORKER"},
		{"bad worker", []string{"claude"}, "%3", `{"hook_event_name":"Stop"}`, "ORCH_WORKER"},
		{"unknown style", []string{"aider"}, "w1", `{}`, "unknown hook style"},
		{"gemini malformed", []string{"gemini"}, "w1", `{`, "not Gemini CLI hook JSON"},
		{"no style", nil, "w1", ``, "want orch-notify hook claude"},
		{"codex without json", []string{"codex"}, "w1", ``, "one JSON argument"},
		{"codex malformed", []string{"codex", "{"}, "w1", ``, "not Codex notify JSON"},
		{"unused event", []string{"claude"}, "w1", `{"hook_event_name":"PreToolUse"}`, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var stderr bytes.Buffer
			var code int
			if len(tt.args) > 0 && tt.args[0] == "claude" {
				// Main would read os.Stdin: run the hook on the test's input.
				code = Hook(tt.args, env(tt.worker), strings.NewReader(tt.stdin), &stderr)
			} else {
				code = Main(append([]string{"hook"}, tt.args...), env(tt.worker), &stderr)
			}
			if code != 0 {
				t.Errorf("exit %d; a hook must always exit 0", code)
			}
			if tt.stderr == "" && stderr.Len() != 0 || !strings.Contains(stderr.String(), tt.stderr) {
				t.Errorf("stderr %q; want it to say %q", stderr.String(), tt.stderr)
			}
			if entries, _ := os.ReadDir(spool); len(entries) != 0 {
				t.Errorf("spool holds %d events; want none", len(entries))
			}
		})
	}
}

// TestHookSpoolsWhenNoBroker: a usable hook event is kept like any other,
// here in the spool because no broker runs, and the hook still exits 0.
func TestHookSpoolsWhenNoBroker(t *testing.T) {
	root := repoWithOrch(t)
	env := func(k string) string {
		switch k {
		case "ORCH_WORKER":
			return "w1"
		case "ORCH_DIR":
			return filepath.Join(root, orchdir.Name)
		case "ORCH_NOTIFY_TIMEOUT":
			return "200ms"
		}
		return ""
	}
	var stderr bytes.Buffer
	code := Hook([]string{"claude"}, env, strings.NewReader(`{"hook_event_name":"Notification","message":"May I?"}`), &stderr)
	if code != 0 || !strings.Contains(stderr.String(), "spooled") {
		t.Fatalf("exit %d, stderr %q; want 0 and spooled", code, stderr.String())
	}
	events, bad, err := event.ReadSpool(filepath.Join(root, orchdir.Name, orchdir.Spool))
	if err != nil || len(bad) != 0 || len(events) != 1 {
		t.Fatalf("spool: %v, %v, %v; want one event", events, bad, err)
	}
	if e := events[0].Event; e.Kind != event.NeedsInput || e.Worker != "w1" || e.Status != "May I?" || e.Plan != "" {
		t.Errorf("spooled %+v", e)
	}
}

// TestGeminiHookEvent maps hook inputs as Gemini CLI 0.61.0 sends them.
func TestGeminiHookEvent(t *testing.T) {
	root := repoWithOrch(t)
	wt := worktreeOnPlan(t, root, "p5")
	line := `Read plans/p1/PLAN.md and execute it exactly. First run /x/orch-notify started p1. Write plans/p1/RESULT.md.`
	for _, tt := range []struct {
		name, json string
		send       bool
		kind       event.Kind
		plan       string
		status     string
	}{
		{"session start", `{"session_id":"s","cwd":"` + wt + `","hook_event_name":"SessionStart","timestamp":"2026-12-03T08:37:31.492Z","source":"startup"}`, true, event.Ready, "", "gemini startup"},
		{"dispatch submitted", `{"cwd":"` + wt + `","hook_event_name":"BeforeAgent","prompt":"` + line + `"}`, true, event.Started, "p1", ""},
		{"a person typed", `{"cwd":"` + wt + `","hook_event_name":"BeforeAgent","prompt":"go on"}`, true, event.Started, "p5", ""},
		{"a person typed, no plan known", `{"cwd":"` + root + `","hook_event_name":"BeforeAgent","prompt":"go on"}`, false, "", "", ""},
		{"turn ended", `{"cwd":"` + wt + `","hook_event_name":"AfterAgent","prompt":"` + line + `","prompt_response":"Finished p1.","stop_hook_active":false}`, true, event.Idle, "p1", ""},
		{"permission", `{"cwd":"` + wt + `","hook_event_name":"Notification","notification_type":"ToolPermission","message":"Tool Confirm Shell Command requires execution","details":{"type":"exec","title":"Confirm Shell Command","command":"curl -fsS http://127.0.0.1:9/x","rootCommand":"curl"}}`,
			true, event.NeedsInput, "p5", "Gemini CLI asks permission to run: curl -fsS http://127.0.0.1:9/x"},
		{"other notification", `{"hook_event_name":"Notification","notification_type":"Other","message":"x"}`, false, "", "", ""},
		{"tool hook", `{"hook_event_name":"BeforeTool","tool_name":"run_shell_command"}`, false, "", "", ""},
	} {
		e, send, err := GeminiHookEvent([]byte(tt.json), "w4")
		if err != nil || send != tt.send {
			t.Errorf("%s: send %v, err %v; want send %v", tt.name, send, err, tt.send)
			continue
		}
		if send && (e.Kind != tt.kind || e.Plan != tt.plan || e.Status != tt.status || e.Worker != "w4" || e.Check() != nil) {
			t.Errorf("%s: %+v; want %s plan %q status %q", tt.name, e, tt.kind, tt.plan, tt.status)
		}
	}
	if _, send, err := GeminiHookEvent([]byte(`{}`), "w4"); send || err == nil {
		t.Errorf("no hook_event_name: send %v, err %v; want an error", send, err)
	}
}

// The fixtures of package telemetry: a real Claude Code transcript (p1,
// p2, apierr) and a real Codex rollout (p1, p2, p1 again).
const (
	claudeFixture = "../telemetry/testdata/claude-transcript.jsonl"
	codexFixture  = "../telemetry/testdata/codex-rollout.jsonl"
	codexThread   = "01a24278-7b92-7780-8ef1-45cfe046725f"
)

// codexHome makes a CODEX_HOME holding the fixture rollout where Codex
// 0.171.0 writes it.
func codexHome(t *testing.T) string {
	t.Helper()
	home := t.TempDir()
	data, err := os.ReadFile(codexFixture)
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(home, "sessions", "2026", "12", "04")
	os.MkdirAll(dir, 0o755)
	if err := os.WriteFile(filepath.Join(dir, "rollout-2026-12-04T19-12-01-"+codexThread+".jsonl"), data, 0o644); err != nil {
		t.Fatal(err)
	}
	return home
}

func TestClaudeHookUsage(t *testing.T) {
	abs, _ := filepath.Abs(claudeFixture)
	fifo := filepath.Join(t.TempDir(), "fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name, json, plan string
		nilUsage         bool
		output           int64  // -1: unknown
		missing          string // a part of Missing
	}{
		// As Claude Code 2.1.332 sends it, headless (-p) too.
		{"stop", `{"session_id":"81c11f0e","transcript_path":"` + abs + `","cwd":"/x","hook_event_name":"Stop","stop_hook_active":false,"last_assistant_message":"Finished p2."}`,
			"p2", false, 161, ""},
		{"stop, plan unknown: the last dispatched", `{"transcript_path":"` + abs + `","hook_event_name":"Stop"}`, "", false, 0, ""},
		{"stop failure", `{"transcript_path":"` + abs + `","hook_event_name":"StopFailure","error":"unknown"}`, "apierr", false, 0, ""},
		{"no transcript_path", `{"hook_event_name":"Stop"}`, "p1", false, -1, "names no transcript_path"},
		{"transcript gone", `{"transcript_path":"/nonexistent/t.jsonl","hook_event_name":"Stop"}`, "p1", false, -1, "transcript unreadable"},
		{"a FIFO is not read (it would block)", `{"transcript_path":"` + fifo + `","hook_event_name":"Stop"}`, "p1", false, -1, "not a regular file"},
		{"not a turn's end", `{"transcript_path":"` + abs + `","hook_event_name":"UserPromptSubmit"}`, "p1", true, 0, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			u := ClaudeHookUsage([]byte(tt.json), tt.plan)
			if tt.nilUsage {
				if u != nil {
					t.Errorf("usage %+v; want none", u)
				}
				return
			}
			if u == nil {
				t.Fatal("no usage")
			}
			if u.Source != telemetry.SourceClaudeTranscript || !strings.Contains(u.Missing, tt.missing) || tt.missing == "" && u.Missing != "" {
				t.Errorf("source %q missing %q; want %q", u.Source, u.Missing, tt.missing)
			}
			switch {
			case tt.output < 0 && u.Output != nil:
				t.Errorf("output %d; want unknown", *u.Output)
			case tt.output >= 0 && (u.Output == nil || *u.Output != tt.output):
				t.Errorf("output %v; want %d", u.Output, tt.output)
			}
		})
	}
}

func TestCodexHookUsage(t *testing.T) {
	home := codexHome(t)
	notify := `{"type":"agent-turn-complete","thread-id":"` + codexThread + `","turn-id":"t","cwd":"/x","client":"codex_exec","input-messages":["Read plans/p2/PLAN.md and execute it exactly."],"last-assistant-message":"Finished p2."}`
	env := func(vars ...string) Env {
		return func(k string) string {
			for i := 0; i+1 < len(vars); i += 2 {
				if vars[i] == k {
					return vars[i+1]
				}
			}
			return ""
		}
	}
	u := CodexHookUsage([]byte(notify), "p2", env("CODEX_HOME", home))
	// 80062-39068 input, 16000 of it cached; 433-215 output (see package
	// telemetry's test).
	if u == nil || u.Missing != "" || u.Input == nil || *u.Input != 24994 || *u.CacheRead != 16000 || *u.Output != 218 || u.Model != "gpt-5.5" {
		t.Errorf("CODEX_HOME: usage %+v", u)
	}
	// Without CODEX_HOME: ~/.codex.
	hd := t.TempDir()
	os.Rename(home, filepath.Join(hd, ".codex"))
	if u := CodexHookUsage([]byte(notify), "p2", env("HOME", hd)); u == nil || u.Input == nil || *u.Input != 24994 {
		t.Errorf("HOME: usage %+v", u)
	}
	for name, tc := range map[string]struct {
		json, missing string
		env           Env
	}{
		"unknown thread": {strings.Replace(notify, codexThread, "0000aaaa-0000-0000-0000-000000000000", 1), "no Codex rollout", env("HOME", hd)},
		"no thread-id":   {`{"type":"agent-turn-complete"}`, "no thread-id", env("HOME", hd)},
		"no home":        {notify, "neither CODEX_HOME nor HOME", env()},
	} {
		u := CodexHookUsage([]byte(tc.json), "p2", tc.env)
		if u == nil || u.Input != nil || !strings.Contains(u.Missing, tc.missing) {
			t.Errorf("%s: usage %+v; want unknown counts and Missing saying %q", name, u, tc.missing)
		}
	}
	if u := CodexHookUsage([]byte(`{"type":"approval-requested"}`), "p2", env("HOME", hd)); u != nil {
		t.Errorf("other notify: usage %+v; want none", u)
	}
}

// TestHookSendsUsage: the idle event orch-notify hook keeps carries the
// usage of the turn's plan, and passes the lead's check; a Codex turn's
// plan comes from its dispatch line.
func TestHookSendsUsage(t *testing.T) {
	root := repoWithOrch(t)
	spool := filepath.Join(root, orchdir.Name, orchdir.Spool)
	home := codexHome(t)
	env := func(k string) string {
		switch k {
		case "ORCH_WORKER":
			return "w1"
		case "ORCH_DIR":
			return filepath.Join(root, orchdir.Name)
		case "ORCH_NOTIFY_TIMEOUT":
			return "200ms"
		case "CODEX_HOME":
			return home
		}
		return ""
	}
	abs, _ := filepath.Abs(claudeFixture)
	var stderr bytes.Buffer
	if code := Hook([]string{"claude"}, env, strings.NewReader(`{"transcript_path":"`+abs+`","cwd":"`+root+`","hook_event_name":"Stop"}`), &stderr); code != 0 {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	notify := `{"type":"agent-turn-complete","thread-id":"` + codexThread + `","cwd":"` + root + `","input-messages":["Read plans/p2/PLAN.md and execute it exactly. First run orch-notify started p2."]}`
	if code := Main([]string{"hook", "codex", notify}, env, &stderr); code != 0 {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	events, bad, err := event.ReadSpool(spool)
	if err != nil || len(bad) != 0 || len(events) != 2 {
		t.Fatalf("spool: %v, %v, %v; want two events", events, bad, err)
	}
	got := map[string]*telemetry.Usage{}
	for _, se := range events {
		e := se.Event
		if e.Kind != event.Idle || e.Usage == nil {
			t.Fatalf("spooled %+v; want idle with usage", e)
		}
		if err := e.Check(); err != nil {
			t.Errorf("spooled event fails the lead's check: %v", err)
		}
		got[e.Usage.Source] = e.Usage
	}
	// The main checkout names no plan: the transcript's last plan (apierr,
	// which used nothing); the Codex turn's dispatch line names p2.
	if u := got[telemetry.SourceClaudeTranscript]; u == nil || u.Plan != "apierr" || u.Output == nil || *u.Output != 0 {
		t.Errorf("claude usage %+v", u)
	}
	if u := got[telemetry.SourceCodexRollout]; u == nil || u.Plan != "p2" || u.Output == nil || *u.Output != 218 {
		t.Errorf("codex usage %+v", u)
	}
}

// A Stop hook that fires after orch handed the worker its next plan (the
// checkout is on that plan's branch already) names the plan whose turn
// ended, the transcript's last dispatched one, not the checkout's.
func TestStopNamesTheTurnsPlan(t *testing.T) {
	root := repoWithOrch(t)
	wt := worktreeOnPlan(t, root, "next")
	spool := filepath.Join(root, orchdir.Name, orchdir.Spool)
	env := func(k string) string {
		return map[string]string{"ORCH_WORKER": "w1", "ORCH_DIR": filepath.Join(root, orchdir.Name), "ORCH_NOTIFY_TIMEOUT": "200ms"}[k]
	}
	abs, _ := filepath.Abs(claudeFixture)
	var stderr bytes.Buffer
	if code := Hook([]string{"claude"}, env, strings.NewReader(`{"transcript_path":"`+abs+`","cwd":"`+wt+`","hook_event_name":"Stop"}`), &stderr); code != 0 {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	events, _, err := event.ReadSpool(spool)
	if err != nil || len(events) != 1 {
		t.Fatalf("spool: %v, %v", events, err)
	}
	if e := events[0].Event; e.Kind != event.Idle || e.Plan != "apierr" {
		t.Errorf("Stop sent %s for %q, want idle for apierr (the transcript's last dispatch), not the checkout's next", e.Kind, e.Plan)
	}
}

// A StopFailure whose plan's prompt is not in the transcript yet (an API
// error on the plan's first request) fails the checkout's plan, not the
// transcript's last dispatched one, and says its usage is missing.
func TestStopFailureKeepsTheCheckoutsPlan(t *testing.T) {
	root := repoWithOrch(t)
	wt := worktreeOnPlan(t, root, "next")
	spool := filepath.Join(root, orchdir.Name, orchdir.Spool)
	env := func(k string) string {
		return map[string]string{"ORCH_WORKER": "w1", "ORCH_DIR": filepath.Join(root, orchdir.Name), "ORCH_NOTIFY_TIMEOUT": "200ms"}[k]
	}
	abs, _ := filepath.Abs(claudeFixture)
	in := `{"transcript_path":"` + abs + `","cwd":"` + wt + `","hook_event_name":"StopFailure","error":"unknown","last_assistant_message":"API Error: 400 bad request"}`
	var stderr bytes.Buffer
	if code := Hook([]string{"claude"}, env, strings.NewReader(in), &stderr); code != 0 {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	events, _, err := event.ReadSpool(spool)
	if err != nil || len(events) != 1 {
		t.Fatalf("spool: %v, %v", events, err)
	}
	e := events[0].Event
	if e.Kind != event.Failed || e.Plan != "next" {
		t.Fatalf("StopFailure sent %s for %q, want failed for next (the checkout's plan)", e.Kind, e.Plan)
	}
	if e.Usage == nil || e.Usage.Plan != "next" || e.Usage.Missing == "" {
		t.Errorf("usage %+v, want next's, missing (the transcript has no dispatch of it)", e.Usage)
	}
}
