package leadpane

import (
	"os"
	"strings"
	"testing"

	"github.com/orch-dev/orch/agent"
)

func TestReadPrompt(t *testing.T) {
	r, err := NewReader("lead> ", nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name   string
		screen string
		cursor int
		want   Kind
		input  string
	}{
		{"empty prompt", "started\nlead> ", 1, Idle, ""},
		{"half typed", "started\nlead> half a thought", 1, Typed, "half a thought"},
		{"submitted, nothing written since", "lead> WORKER-DONE p: ok\n", 1, Busy, ""},
		{"working", "lead> x\nworking", 1, Busy, ""},
		{"dialog", "lead> dialog\nAllow it? (y/n) ", 1, Busy, ""},
		{"blank screen", "", 0, Busy, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			rows := strings.Split(strings.TrimRight(c.screen, "\n"), "\n")
			s := r.Read(rows, c.screen, c.cursor)
			if s.Kind != c.want || s.Input != c.input {
				t.Fatalf("got %v %q, want %v %q", s.Kind, s.Input, c.want, c.input)
			}
		})
	}
}

// A known agent's screens read by its markers. Claude Code's accept-edits
// footer shows at every prompt, empty or not: it is no sign of an empty prompt, so neither a person's half-typed line
// nor orch's own line on the prompt reads idle (orch would type onto the
// one, and type its line again behind the other). Only "? for shortcuts",
// which shows at an empty prompt alone, is.
func TestReadProfile(t *testing.T) {
	for _, c := range []struct {
		agent, name, screen string
		want                Kind
	}{
		{"codex", "placeholder", "› Ask Codex to do anything\n\n  GPT-5.5 default · ~/repo · modelsim\n  ← for agents · ? for shortcuts", Idle},
		{"codex", "starting, input not read yet", "  >_ OpenAI Codex (v0.171.0)\n     loading\n› Ask Codex to do anything\n  ? for shortcuts", Busy},
		{"codex", "working", "• Working (3s • esc to interrupt)\n› Ask Codex to do anything\n  ← for agents · ? for shortcuts", Busy},
		{"codex", "approval", "Would you like to run the following command?\n› 1. Yes", Dialog},
		{"codex", "typed", "› WORKER-DONE p: ok", Typed},
		{"claude", "a person's line, accept edits on", "❯ half a thought\n  ⏵⏵ accept edits on (shift+tab to cycle)", Typed},
		{"claude", "orch's line, accept edits on", "❯ WORKER-DONE p: ok\n  ⏵⏵ accept edits on (shift+tab to cycle)", Typed},
		{"claude", "empty, default mode", "❯ \n  ? for shortcuts", Idle},
	} {
		t.Run(c.agent+" "+c.name, func(t *testing.T) {
			p, err := agent.Resolve(c.agent, nil)
			if err != nil {
				t.Fatal(err)
			}
			r, err := NewReader("", &p)
			if err != nil {
				t.Fatal(err)
			}
			if s := r.Read(strings.Split(c.screen, "\n"), c.screen, 0); s.Kind != c.want {
				t.Fatalf("got %v, want %v", s.Kind, c.want)
			}
		})
	}
	if _, err := NewReader("", nil); err == nil {
		t.Fatal("a reader with neither prompt nor profile was made")
	}
}

// TestReadCodexScreens reads the screens the real Codex 0.171.0 showed as
// the lead (testdata/codex-*.txt: tmux capture-pane of
// cmd/orch/testdata/agents/codex_lead_pane_tmux.txtar, its logo of braille
// characters left out; codex-starting.txt is the first screen of a run
// where a line typed then showed only seconds later; codex-typed.txt a
// line typed by hand at the prompt).
func TestReadCodexScreens(t *testing.T) {
	p, err := agent.Resolve("codex", nil)
	if err != nil {
		t.Fatal(err)
	}
	r, err := NewReader("", &p)
	if err != nil {
		t.Fatal(err)
	}
	for file, want := range map[string]Kind{
		"codex-starting.txt":  Busy,   // its prompt drawn, its input not read yet
		"codex-idle.txt":      Idle,   // a turn ended: placeholder and "← for agents"
		"codex-busy-held.txt": Busy,   // a command runs: "esc to interrupt"
		"codex-dialog.txt":    Dialog, // its approval dialog
		"codex-typed.txt":     Typed,  // a line on the prompt: no placeholder, no hint
	} {
		t.Run(file, func(t *testing.T) {
			data, err := os.ReadFile("testdata/" + file)
			if err != nil {
				t.Fatal(err)
			}
			screen := string(data)
			if s := r.Read(strings.Split(screen, "\n"), screen, 0); s.Kind != want {
				t.Fatalf("got %v, want %v", s.Kind, want)
			}
		})
	}
}

func TestJoinSafe(t *testing.T) {
	line, n := Join([]string{"WORKER-DONE a: ok\x1b[2J\nrm -rf /", "WORKER-DONE b: mail me@host"})
	if n != 2 || line != `WORKER-DONE a: ok\x1b[2J\nrm -rf / | WORKER-DONE b: mail me(at)host` {
		t.Fatalf("got %d %q", n, line)
	}
	long := "WORKER-DONE c: " + strings.Repeat("x", 5000)
	line, n = Join([]string{long, long, long, long, long})
	if len(line) > MaxLine || n != 3 || !strings.Contains(line, "[truncated]") {
		t.Fatalf("got %d callbacks in %d bytes", n, len(line))
	}
}

// A worker's status is text, never a sign on the lead's screen: a callback
// line that quotes an agent's screen markers (its interrupt hint, an empty
// prompt's hint, a dialog's question), typed onto the lead's prompt or
// left in its history, does not make the screen read busy, idle or a
// dialog. Else a line on the prompt would never get its Enter, or would
// be typed again and again behind itself, or a person's half-typed line
// would read idle.
func TestWorkerTextIsNoScreenMarker(t *testing.T) {
	status := "WORKER-DONE p: esc to interrupt, esc to cancel, ? for shortcuts, Ask Codex to do anything, accept edits on, " +
		"Would you like to run the following command? Do you want to proceed? Allow execution of rm"
	line, _ := Join([]string{status})
	for _, m := range markers {
		if Defang(m) == m {
			t.Errorf("marker %q has no blank: Defang leaves it as it is", m)
		}
	}
	for _, name := range []string{"codex", "claude", "gemini"} {
		p, err := agent.Resolve(name, nil)
		if err != nil {
			t.Fatal(err)
		}
		r, err := NewReader("", &p)
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range []struct {
			what, screen string
		}{
			{"the line on the prompt", "> " + line},
			{"the line in the history, a person's line on the prompt", "> " + line + "\n\n  on it\n\n> half a thought"},
		} {
			if s := r.Read(strings.Split(c.screen, "\n"), c.screen, 0); s.Kind != Typed {
				t.Errorf("%s, %s: read %v, want typed (line %q)", name, c.what, s.Kind, line)
			}
		}
	}
}

// Codex wraps its composer itself, the continuation indented (read off
// Codex 0.171.0 in a 100-column pane): tmux's -J does not join such
// lines, and a line longer than the composer was never found on the
// prompt, so it got no Enter, and every later callback waited behind it.
func TestHoldsALineTheAgentWrapped(t *testing.T) {
	p, err := agent.Resolve("codex", nil)
	if err != nil {
		t.Fatal(err)
	}
	r, err := NewReader("", &p)
	if err != nil {
		t.Fatal(err)
	}
	line, n := Join([]string{
		"WORKER-DONE plan-alpha: all tests pass after the refactor of the storage layer, see RESULT.md for the list",
		"WORKER-DONE plan-beta: blocked on the schema migration, needs a decision",
	})
	if n != 2 {
		t.Fatalf("joined %d", n)
	}
	empty := "› Ask Codex to do anything\n\n  ? for shortcuts\n"
	typed := "› WORKER-DONE plan-alpha: all tests pass after the refactor of the storage layer, see RESULT.md for\n" +
		"  the list | WORKER-DONE plan-beta: blocked on the schema migration, needs a decision\n\n" +
		"  GPT-5.5 default · /tmp/repo\n"
	echoes := Count(empty, line)
	s := r.Read(strings.Split(typed, "\n"), typed, 1)
	if !s.Holds(line, echoes) {
		t.Fatalf("the wrapped line on the prompt: read %v, holds %v (shown %d times, %d before)", s.Kind, s.Holds(line, echoes), Count(typed, line), echoes)
	}
}
