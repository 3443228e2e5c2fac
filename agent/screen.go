package agent

import (
	"encoding/json"
	"strings"
)

// What a worker's screen shows, as far as orch can tell from its text.
type ScreenKind int

const (
	// ScreenOther: nothing orch recognises (the agent is working, or a
	// screen orch does not know).
	ScreenOther ScreenKind = iota
	// ScreenPrompt: the agent waits at its prompt for a line.
	ScreenPrompt
	// ScreenDialog: the agent shows a dialog (first-run, trust, a
	// permission or approval prompt) that a person must answer; orch never
	// answers it by typing.
	ScreenDialog
)

// dialog is one known dialog: the text that identifies it on screen and
// what orch says about it.
type dialog struct {
	marker string // case-sensitive text on the screen
	what   string
}

// screens are the known screens of the built-in profiles. The markers were
// read off the real programs (the versions the README names).
var screens = map[string]struct {
	prompt []string // any of these on the screen (and no dialog) is the prompt
	// late are prompt markers trusted only at the start deadline, for an
	// agent whose readiness comes from a hook that may have been missed.
	late    []string
	dialogs []dialog
	// failed starts the line an agent shows when its turn ended on an
	// error that no hook reports (Codex: "■ <error>").
	failed string
}{
	// Claude Code's readiness comes from its SessionStart hook (its prompt
	// on screen comes before it takes a typed Enter); the screen only
	// tells its dialogs.
	"claude": {
		late: []string{"accept edits on", "? for shortcuts"},
		dialogs: []dialog{
			{"Do you trust the files in this folder?", "Claude Code asks whether to trust this folder"},
			{"Is this a project you created or one you trust", "Claude Code asks whether to trust this folder"},
			{"Detected a custom API key", "Claude Code asks whether to use the API key in its environment"},
			{"Bypass Permissions mode", "Claude Code asks to confirm bypass-permissions mode"},
			{"Choose the text style", "Claude Code's first-run onboarding (theme)"},
			{"Unable to connect to Anthropic services", "Claude Code's first-run onboarding cannot reach Anthropic"},
			{"Try the new fullscreen renderer?", "Claude Code offers its fullscreen renderer"},
			{"isn't eligible because your requests go through", "Claude Code asks about auto mode"},
			{"Select login method", "Claude Code asks how to log in"},
			{"Do you want to proceed?", "Claude Code asks permission"},
			{"Do you want to make this edit", "Claude Code asks permission to edit a file"},
			{"Do you want to create", "Claude Code asks permission to create a file"},
		},
	},
	// Codex shows its composer's placeholder once it takes input (also
	// behind a dialog, which is checked first).
	"codex": {
		prompt: []string{"Ask Codex to do anything", "? for shortcuts"},
		failed: "■ ",
		dialogs: []dialog{
			{"Do you trust the contents of this directory?", "Codex asks whether to trust this folder"},
			{"Trust this folder", "Codex asks whether to trust this folder"},
			{"Sign in with ChatGPT", "Codex asks how to sign in"},
			{"Would you like to run the following command?", "Codex asks approval to run a command"},
			{"Would you like to make the following edits?", "Codex asks approval to edit files"},
			{"needs review before it can run", "Codex asks to review hooks"},
			{"Use existing model", "Codex offers a newer model"},
		},
	},
	// Gemini CLI's readiness is its SessionStart hook; an API error shows
	// only on screen ("✕ [API Error: ...]"), its hooks carry none.
	"gemini": {
		late: []string{"Type your message or @path/to/file"},
		dialogs: []dialog{
			{"Do you trust the files in this folder?", "Gemini CLI asks whether to trust this folder"},
			{"How would you like to authenticate", "Gemini CLI asks how to log in"},
			{"Enter Gemini API Key", "Gemini CLI asks for an API key"},
			{"Allow execution of", "Gemini CLI asks permission"},
		},
		failed: "✕ ",
	},
}

// Markers are all the texts by which orch reads the built-in agents'
// screens (their prompts' hints and their dialogs), for a caller that
// types other text into a screen and must keep it from reading as one.
func Markers() []string {
	var out []string
	for _, sc := range screens {
		out = append(out, sc.prompt...)
		out = append(out, sc.late...)
		for _, d := range sc.dialogs {
			out = append(out, d.marker)
		}
	}
	return out
}

// Shown counts the times text shows on screen (a pane's capture, tmux's
// wrapped lines joined), however it was wrapped: an agent that wraps its
// input and history itself (Codex) breaks a long line into rows of its
// own, the continuation indented, which tmux cannot join. Blanks and
// line ends are left out of both before counting.
func Shown(screen, text string) int {
	t := strings.Join(strings.Fields(text), "")
	if t == "" {
		return 0
	}
	return strings.Count(strings.Join(strings.Fields(screen), ""), t)
}

// ReadScreen says what screen (the text of a worker's pane) shows for this
// profile, and for a dialog, what it asks: the dialog's description and
// the screen's lines around it. Profiles without known screens (plain
// commands, aider, orch.yaml's own) give ScreenOther.
func (p Profile) ReadScreen(screen string) (ScreenKind, string) {
	sc, ok := screens[p.screensName()]
	if !ok {
		return ScreenOther, ""
	}
	for _, d := range sc.dialogs {
		if i := strings.Index(screen, d.marker); i >= 0 {
			return ScreenDialog, d.what + ": " + around(screen, i, 6)
		}
	}
	for _, m := range sc.prompt {
		if strings.Contains(screen, m) {
			return ScreenPrompt, ""
		}
	}
	return ScreenOther, ""
}

// ScreenFailure returns the error the agent shows on screen after the
// last line holding since (the plan's dispatch line), for agents whose
// errors no hook reports: Codex prints "■ <error>" and waits at its
// prompt. An OpenAI error document is shortened to its type and message.
func (p Profile) ScreenFailure(screen, since string) (string, bool) {
	sc, ok := screens[p.screensName()]
	if !ok || sc.failed == "" {
		return "", false
	}
	i := strings.LastIndex(screen, since)
	if i < 0 {
		return "", false
	}
	for _, l := range strings.Split(screen[i:], "\n")[1:] {
		msg, ok := strings.CutPrefix(strings.TrimLeft(l, " │"), sc.failed)
		if !ok || strings.HasPrefix(msg, "Conversation interrupted") {
			continue // a person pressed Esc: not an error, the turn's end says the rest
		}
		if m, ok := strings.CutPrefix(msg, "[API Error: "); ok {
			msg = strings.TrimSuffix(strings.TrimSpace(m), "]")
		}
		var doc struct {
			Error struct {
				Type    string `json:"type"`   // OpenAI
				Status  string `json:"status"` // Google
				Message string `json:"message"`
			} `json:"error"`
		}
		if json.Unmarshal([]byte(msg), &doc) == nil && doc.Error.Message != "" {
			msg = doc.Error.Message
			if kind := firstNonBlank(doc.Error.Type, doc.Error.Status); kind != "" {
				msg = kind + ": " + msg
			}
		}
		return strings.TrimSpace(msg), true
	}
	return "", false
}

// screensName is the built-in whose screens this profile shows: its own
// name for a built-in, else the built-in whose hooks it uses.
func (p Profile) screensName() string {
	if p.Builtin {
		return p.Name
	}
	switch p.Hooks {
	case HooksClaude:
		return "claude"
	case HooksCodex:
		return "codex"
	case HooksGemini:
		return "gemini"
	}
	return ""
}

// WaitsForPrompt says whether orch waits for this profile's agent to reach
// its prompt before typing: profiles whose prompt orch knows from a hook
// (Claude Code's SessionStart) or from the screen (Codex). Others (Gemini
// CLI, aider, plain commands) are typed into as soon as their pane is up.
func (p Profile) WaitsForPrompt() bool {
	sc, ok := screens[p.screensName()]
	return ok && (len(sc.prompt) > 0 || p.ReadyFromHook())
}

// PromptLate says whether screen shows the agent's prompt by the markers
// trusted at the start deadline (its hook may have been missed).
func (p Profile) PromptLate(screen string) bool {
	sc := screens[p.screensName()]
	for _, m := range append(append([]string(nil), sc.prompt...), sc.late...) {
		if strings.Contains(screen, m) {
			return true
		}
	}
	return false
}

// ScreenAsks says whether orch reads a running plan's screen for dialogs:
// for agents whose hooks do not report their permission prompts (Codex);
// Claude Code's PermissionRequest and Gemini CLI's ToolPermission
// notification do, naming the command.
func (p Profile) ScreenAsks() bool {
	_, ok := screens[p.screensName()]
	return ok && p.Hooks == HooksCodex
}

// ScreenFails says whether orch reads a running plan's screen for an error
// no hook reports (Codex, Gemini CLI).
func (p Profile) ScreenFails() bool {
	return screens[p.screensName()].failed != ""
}

// ReadyFromHook says whether the agent's hooks say when it is up (Claude
// Code's and Gemini CLI's SessionStart; a dialog on screen still holds it
// back).
func (p Profile) ReadyFromHook() bool { return p.Hooks == HooksClaude || p.Hooks == HooksGemini }

// SubmitFromHook says whether the agent's hooks confirm that a typed line
// was submitted (Claude Code's UserPromptSubmit, Gemini CLI's BeforeAgent
// name it), so a lost Enter can be pressed again.
func (p Profile) SubmitFromHook() bool { return p.Hooks == HooksClaude || p.Hooks == HooksGemini }

func firstNonBlank(s ...string) string {
	for _, v := range s {
		if v != "" {
			return v
		}
	}
	return ""
}

// around returns up to n non-blank lines of screen starting at the line
// holding byte offset i, trimmed of box-drawing borders and joined with
// " | ".
func around(screen string, i, n int) string {
	start := strings.LastIndexByte(screen[:i], '\n') + 1
	var out []string
	for _, l := range strings.Split(screen[start:], "\n") {
		l = strings.Trim(l, " \t│╭╮╰╯─┃━┏┓┗┛")
		if l == "" {
			continue
		}
		out = append(out, l)
		if len(out) == n {
			break
		}
	}
	return strings.Join(out, " | ")
}
