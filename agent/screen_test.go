package agent

import (
	"strings"
	"testing"
)

// Screens as the real programs showed them (Claude Code 2.1.332, Codex
// 0.171.0), trimmed.
const (
	claudeTrust = `
 Accessing workspace:
 /tmp/repo
 Quick safety check: Is this a project you created or one you trust?
 ❯ 1. No, exit
   2. Yes, I trust this folder
`
	claudePrompt = `
╭───────────────────────────╮
│ ✻ Welcome to Claude Code! │
╰───────────────────────────╯
❯ 
  ⏵⏵ accept edits on (shift+tab to cycle)
`
	codexPrompt = `
  >_ OpenAI Codex (v0.171.0)
     /tmp/repo/.orch/worktrees/w1
› Ask Codex to do anything
  GPT-5.5 default · /tmp/repo/.orch/worktrees/w1 · modelsim
`
	codexApproval = `
› Read plans/perm/PLAN.md and execute it exactly.
• Running curl -fsS http://127.0.0.1:9/probe
  Would you like to run the following command?
  Environment: local
  Reason: the plan needs this command to run outside the sandbox.
  $ curl -fsS http://127.0.0.1:9/probe
› 1. Yes, proceed (y)
  3. No, and tell Codex what to do differently (esc)
› Ask Codex to do anything
`
	codexError = `
› Read plans/p1/PLAN.md and execute it exactly.
■ {"error":{"code":null,"message":"bad request","param":null,"type":"invalid_request_error"}}
› Read plans/p2/PLAN.md and execute it exactly.
• Ran orch-notify started p2
› Ask Codex to do anything
`
)

func TestReadScreen(t *testing.T) {
	claude, _ := Resolve("claude", nil)
	codex, _ := Resolve("codex", nil)
	plain, _ := Resolve("my-agent", nil)
	tests := []struct {
		name   string
		p      Profile
		screen string
		kind   ScreenKind
		what   string
	}{
		{"claude trust", claude, claudeTrust, ScreenDialog, "Claude Code asks whether to trust this folder: Quick safety check"},
		// Claude Code's readiness is its SessionStart hook, never its prompt.
		{"claude prompt", claude, claudePrompt, ScreenOther, ""},
		{"codex prompt", codex, codexPrompt, ScreenPrompt, ""},
		// The composer shows behind the dialog: the dialog wins.
		{"codex approval", codex, codexApproval, ScreenDialog, "Codex asks approval to run a command: Would you like to run the following command? | Environment: local | Reason: the plan needs this command to run outside the sandbox. | $ curl -fsS http://127.0.0.1:9/probe"},
		{"plain command", plain, codexApproval, ScreenOther, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			kind, what := tt.p.ReadScreen(tt.screen)
			if kind != tt.kind || !strings.HasPrefix(what, tt.what) {
				t.Errorf("ReadScreen = %v, %q; want %v, %q...", kind, what, tt.kind, tt.what)
			}
		})
	}
	// A profile of orch.yaml that uses Codex's hooks reads Codex's screens.
	mine, _ := Resolve("mine", nil)
	mine.Hooks = HooksCodex
	if kind, _ := mine.ReadScreen(codexPrompt); kind != ScreenPrompt {
		t.Errorf("codex-hooked profile: %v; want the prompt", kind)
	}
}

func TestScreenFailure(t *testing.T) {
	codex, _ := Resolve("codex", nil)
	if msg, ok := codex.ScreenFailure(codexError, "plans/p1/PLAN.md"); !ok || msg != "invalid_request_error: bad request" {
		t.Errorf("p1: %q, %v; want its error", msg, ok)
	}
	// p2's line comes after the error: the error is p1's, not p2's.
	if msg, ok := codex.ScreenFailure(codexError, "plans/p2/PLAN.md"); ok {
		t.Errorf("p2: %q; want no failure", msg)
	}
	if _, ok := codex.ScreenFailure(codexError, "plans/p3/PLAN.md"); ok {
		t.Error("p3 is not on the screen: no failure")
	}
	if msg, ok := codex.ScreenFailure("› Read plans/x/PLAN.md\n■ stream disconnected before completion\n", "plans/x/PLAN.md"); !ok || msg != "stream disconnected before completion" {
		t.Errorf("plain text error: %q, %v", msg, ok)
	}
	if msg, ok := codex.ScreenFailure("› Read plans/x/PLAN.md\n■ Conversation interrupted - tell the model what to do differently.\n", "plans/x/PLAN.md"); ok {
		t.Errorf("an interruption by a person is no failure: %q", msg)
	}
	claude, _ := Resolve("claude", nil)
	if _, ok := claude.ScreenFailure(codexError, "plans/p1/PLAN.md"); ok {
		t.Error("Claude Code's failures come from its StopFailure hook, not the screen")
	}
}

func TestWaitsForPrompt(t *testing.T) {
	for name, want := range map[string]bool{"claude": true, "codex": true, "gemini": true, "aider": false, "my-agent --tui": false} {
		p, _ := Resolve(name, nil)
		if got := p.WaitsForPrompt(); got != want {
			t.Errorf("%s: WaitsForPrompt = %v; want %v", name, got, want)
		}
	}
	claude, _ := Resolve("claude", nil)
	if !claude.PromptLate(claudePrompt) || claude.PromptLate(claudeTrust) {
		t.Error("Claude Code's prompt, at the deadline: seen on its prompt screen only")
	}
	codex, _ := Resolve("codex", nil)
	if claude.ScreenAsks() || !codex.ScreenAsks() {
		t.Error("only Codex's running screens are read for dialogs")
	}
}

// Shown counts a typed line on a screen however it was wrapped: by tmux
// (joined by capture -J already) or by the agent itself, its continuation
// indented (Codex's composer and history).
func TestShown(t *testing.T) {
	line := "please rebase on main first, the schema moved to db/v2 and the old tables are gone"
	for _, c := range []struct {
		name, screen string
		want         int
	}{
		{"one row", "› " + line + "\n", 1},
		{"wrapped by the agent", "› please rebase on main first, the schema moved to db/v2\n  and the old tables are gone\n", 1},
		{"in the history and on the prompt", "› " + line + "\n• ok\n› please rebase on main first, the schema\n  moved to db/v2 and the old tables are gone", 2},
		{"not there", "› please rebase on main first\n", 0},
		{"empty text", "anything", 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			text := line
			if c.name == "empty text" {
				text = " "
			}
			if got := Shown(c.screen, text); got != c.want {
				t.Errorf("Shown = %d, want %d", got, c.want)
			}
		})
	}
}
