package watch

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	tea "charm.land/bubbletea/v2"
	"github.com/charmbracelet/x/ansi"

	"github.com/orch-dev/orch/board"
	"github.com/orch-dev/orch/event"
	"github.com/orch-dev/orch/internal/runner"
	"github.com/orch-dev/orch/internal/runner/fake"
)

var t0 = time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)

// fixedView is a fleet with one of everything a person must look at.
func fixedView() board.View {
	long := strings.Repeat("a very long reason that goes on ", 10)
	return board.View{
		Serving: true, Session: "orch-repo", Time: t0,
		Attention: []board.Alert{
			{Kind: "needs-input", Plan: "ask", Worker: "w2", Text: "Claude Code asks permission to use Bash: rm -rf build " + long, Since: t0.Add(-time.Minute)},
			{Kind: "dead", Worker: "w3", Text: "its agent is gone", Since: t0.Add(-2 * time.Minute)},
		},
		Workers: []board.WorkerRow{
			{WorkerFrame: board.WorkerFrame{ID: "w2", State: "busy", Plan: "ask", Since: t0.Add(-3 * time.Minute), Last: "needs-input ask"}, Alert: true},
			{WorkerFrame: board.WorkerFrame{ID: "w3", State: "dead", Since: t0.Add(-2 * time.Minute), Reason: "its agent is gone"}, Alert: true},
			{WorkerFrame: board.WorkerFrame{ID: "w1", State: "busy", Plan: "build", Since: t0.Add(-90 * time.Second), Last: "started build"}},
		},
		Plans: []board.PlanRow{
			{Name: "ask", State: "needs-input", Attempt: 1, Worker: "w2", Reason: "Claude Code asks permission " + long, Alert: true},
			{Name: "build", State: "running", Attempt: 2, Worker: "w1", Since: t0.Add(-90 * time.Second), Gates: "1 gate", Tokens: "12k in, 4.1k out"},
			{Name: "docs", State: "queued", DependsOn: []string{"build"}, Waiting: "waits for build (running)"},
			{Name: "draft-one", State: "draft"},
			{Name: "schema-with-a-name-longer-than-its-column", State: "done", Attempt: 1, Worker: "w1", Status: "1 table", Verdict: "verified"},
		},
		Callbacks: []board.Said{
			{Time: t0.Add(-time.Minute), Callback: event.Callback{Kind: event.CallbackNeedsInput, Plan: "ask", Line: "WORKER-NEEDS-INPUT ask: Claude Code asks permission"}},
			{Time: t0.Add(-5 * time.Minute), Callback: event.Callback{Kind: event.CallbackDone, Plan: "schema", Line: "WORKER-DONE schema: 1 table"}},
		},
		// w3 died before it ran anything: a row without bars.
		Timeline: board.Timeline{Start: t0.Add(-20 * time.Minute), End: t0, Rows: []board.Row{
			{Worker: "w1", Bars: []board.Bar{
				{Plan: "schema-with-a-name-longer-than-its-column", Attempt: 1, Start: t0.Add(-20 * time.Minute), End: t0.Add(-12 * time.Minute), Outcome: "done", Critical: true},
				{Plan: "build", Attempt: 2, Start: t0.Add(-90 * time.Second), Outcome: "running", Running: true, Critical: true},
			}},
			{Worker: "w2", Bars: []board.Bar{
				{Plan: "build", Attempt: 1, Start: t0.Add(-12 * time.Minute), End: t0.Add(-6 * time.Minute), Outcome: "taken back", Critical: true},
				{Plan: "ask", Attempt: 1, Start: t0.Add(-5 * time.Minute), Outcome: "needs-input", Running: true},
			}},
			{Worker: "w3", Bars: []board.Bar{}},
		}},
		Critical: []string{"schema-with-a-name-longer-than-its-column", "build"}, CriticalS: 20 * 60,
	}
}

func newModel(t *testing.T, r runner.Runner, w, h int) Model {
	t.Helper()
	m := New(Config{Orch: "orch", Dir: "/repo", Runner: r, Now: func() time.Time { return t0 }}, nil)
	m = m.SetView(fixedView())
	nm, _ := m.Update(tea.WindowSizeMsg{Width: w, Height: h})
	return nm.(Model)
}

// plain is the rendered board without its styles, one string per line.
func plain(m Model) []string {
	return strings.Split(ansi.Strip(m.Render()), "\n")
}

func TestRenderFits(t *testing.T) {
	for _, size := range [][2]int{{80, 24}, {60, 12}, {120, 40}, {40, 8}} {
		t.Run(fmt.Sprintf("%dx%d", size[0], size[1]), func(t *testing.T) {
			m := newModel(t, nil, size[0], size[1])
			lines := plain(m)
			if len(lines) != size[1] {
				t.Errorf("%d lines, want %d", len(lines), size[1])
			}
			for i, l := range lines {
				if w := ansi.StringWidth(l); w > size[0] {
					t.Errorf("line %d is %d wide, over %d: %q", i, w, size[0], l)
				}
			}
			// The styled text fits too: styles are applied after the cut.
			for i, l := range strings.Split(m.Render(), "\n") {
				if w := ansi.StringWidth(l); w > size[0] {
					t.Errorf("styled line %d is %d wide", i, w)
				}
			}
			if !strings.HasPrefix(lines[len(lines)-1], "↑/↓ select") {
				t.Errorf("last line %q is not the keys", lines[len(lines)-1])
			}
		})
	}
}

func TestRenderAttentionFirst(t *testing.T) {
	lines := plain(newModel(t, nil, 80, 24))
	at := func(prefix string) int {
		for i, l := range lines {
			if strings.HasPrefix(strings.TrimSpace(l), prefix) {
				return i
			}
		}
		t.Fatalf("no line starting with %q in\n%s", prefix, strings.Join(lines, "\n"))
		return -1
	}
	if !strings.HasPrefix(lines[0], "orch watch · orch-repo · serving · 3 workers, 2 busy · 5 plans: 1 running") {
		t.Errorf("header = %q", lines[0])
	}
	att, ask, dead, workers, plansAt, cbs := at("ATTENTION (2)"), at("! needs-input ask w2"), at("! dead"), at("WORKERS"), at("PLANS"), at("CALLBACKS")
	if !(att == 1 && ask == 2 && dead == 3 && dead < workers && workers < plansAt && plansAt < cbs) {
		t.Errorf("order attention %d, %d, %d, workers %d, plans %d, callbacks %d:\n%s", att, ask, dead, workers, plansAt, cbs, strings.Join(lines, "\n"))
	}
	if !strings.Contains(lines[ask], "1m  Claude Code asks permission to use Bash") {
		t.Errorf("attention line %q lacks the elapsed time and the text", lines[ask])
	}
	if l := lines[at("build")]; !strings.Contains(l, "running     #2  w1      1m  1 gate · 12k in, 4.1k out") {
		t.Errorf("plan line %q", l)
	}
	if l := lines[at("docs")]; !strings.Contains(l, "waits for build (running)") {
		t.Errorf("queued plan line %q does not say what it waits for", l)
	}
}

func TestRenderTruncates(t *testing.T) {
	lines := plain(newModel(t, nil, 80, 24))
	cut := 0
	for _, l := range lines {
		if strings.HasSuffix(l, "…") {
			cut++
			if ansi.StringWidth(l) != 80 {
				t.Errorf("cut line %q is not 80 wide", l)
			}
		}
	}
	if cut < 2 {
		t.Errorf("%d lines cut, want the long attention and plan lines:\n%s", cut, strings.Join(lines, "\n"))
	}
	// A control character from a worker's text never reaches the terminal.
	m := newModel(t, nil, 80, 24)
	v := fixedView()
	v.Attention[0].Text = "evil \x1b]0;title\x07 \x1b[2J text"
	m = m.SetView(v)
	if out := m.Render(); strings.Contains(out, "\x1b]0;") || strings.Contains(out, "\x1b[2J") || strings.Contains(out, "\x07") {
		t.Errorf("a worker's escape sequence reached the screen: %q", out)
	}
}

func TestRenderNotServing(t *testing.T) {
	m := newModel(t, nil, 80, 24)
	v := fixedView()
	v.Serving, v.Note = false, "orch serve is not running: this is its last record; the board comes back by itself when it starts"
	lines := plain(m.SetView(v))
	if !strings.Contains(lines[0], "NOT SERVING") || !strings.HasPrefix(lines[1], "orch serve is not running: this is its last record") {
		t.Errorf("header does not say orch serve is down:\n%s", strings.Join(lines[:3], "\n"))
	}
}

// TestRenderManyRows: more workers and plans than lines; the selected
// row stays on the board.
func TestRenderManyRows(t *testing.T) {
	v := board.View{Serving: true, Attention: []board.Alert{}}
	for i := 1; i <= 30; i++ {
		v.Workers = append(v.Workers, board.WorkerRow{WorkerFrame: board.WorkerFrame{ID: fmt.Sprintf("w%d", i), State: "idle"}})
		v.Plans = append(v.Plans, board.PlanRow{Name: fmt.Sprintf("p%02d", i), State: "draft"})
	}
	m := New(Config{Now: func() time.Time { return t0 }}, nil).SetView(v)
	for range 44 { // from w1 down to plan p15
		m.move(1)
	}
	lines := plain(m)
	if len(lines) != 24 {
		t.Fatalf("%d lines", len(lines))
	}
	found := false
	for _, l := range lines {
		if strings.HasPrefix(l, "› p15") {
			found = true
		}
	}
	if !found {
		t.Errorf("selected p15 not shown:\n%s", strings.Join(lines, "\n"))
	}
}

func key(s string) tea.KeyPressMsg {
	switch s {
	case "enter":
		return tea.KeyPressMsg{Code: tea.KeyEnter}
	case "esc":
		return tea.KeyPressMsg{Code: tea.KeyEscape}
	case "down":
		return tea.KeyPressMsg{Code: tea.KeyDown}
	}
	r := []rune(s)[0]
	return tea.KeyPressMsg{Code: r, Text: s}
}

// withPlanState gives plan a new state in m's view.
func withPlanState(m Model, plan, st string) Model {
	v := m.view
	v.Plans = append([]board.PlanRow(nil), v.Plans...)
	for i := range v.Plans {
		if v.Plans[i].Name == plan {
			v.Plans[i].State, v.Plans[i].Waiting = st, ""
		}
	}
	return m.SetView(v)
}

// press sends keys and runs the commands they return (not the display
// clock's), as the program would, one after the other.
func press(t *testing.T, m Model, keys ...string) Model {
	t.Helper()
	for _, k := range keys {
		nm, cmd := m.Update(key(k))
		m = nm.(Model)
		if cmd == nil {
			continue
		}
		if msg, ok := cmd().(doneMsg); ok {
			nm, _ = m.Update(msg)
			m = nm.(Model)
		}
	}
	return m
}

func TestKeys(t *testing.T) {
	// Rows: w2 w3 w1 ask build docs draft-one schema...
	t.Run("dispatch a draft plan", func(t *testing.T) {
		f := fake.New(t).In("/repo").Expect("orch", []string{"dispatch", "--", "draft-one"}, "queued draft-one\n", nil)
		m := press(t, newModel(t, f, 80, 24), "j", "j", "j", "j", "j", "j", "d")
		if m.status != "queued draft-one" || m.statusBad {
			t.Errorf("status %q (bad %v)", m.status, m.statusBad)
		}
	})
	// A plan that stopped short is dispatched again: the lead takes it.
	for _, st := range []string{"blocked", "failed", "timed-out", "conflict", "refuted"} {
		t.Run("dispatch a "+st+" plan again", func(t *testing.T) {
			f := fake.New(t).In("/repo").Expect("orch", []string{"dispatch", "--", "docs"}, "queued docs\n", nil)
			m := press(t, withPlanState(newModel(t, f, 80, 24), "docs", st), "j", "j", "j", "j", "j", "d")
			if m.status != "queued docs" || m.statusBad {
				t.Errorf("status %q (bad %v)", m.status, m.statusBad)
			}
		})
	}
	t.Run("dispatch refused", func(t *testing.T) {
		err := &runner.Error{Cmd: runner.Cmd{Name: "orch"}, ExitCode: 1, Stderr: "orch: dispatch docs: refused by the lead loop: a cycle\n"}
		f := fake.New(t).In("/repo").Expect("orch", []string{"dispatch", "--", "docs"}, "", err)
		m := press(t, withPlanState(newModel(t, f, 80, 24), "docs", "failed"), "j", "j", "j", "j", "j", "d")
		if m.status != "dispatch docs: dispatch docs: refused by the lead loop: a cycle" || !m.statusBad {
			t.Errorf("status %q (bad %v)", m.status, m.statusBad)
		}
		if !strings.Contains(ansi.Strip(m.Render()), "refused by the lead loop: a cycle") {
			t.Errorf("error line not on the board")
		}
	})
	// No call (the strict fake fails on one), and the line says why.
	for _, tt := range []struct{ name, keys, want string }{
		{"no dispatch of a running plan", "jjjjd", "build is running: in flight; d dispatches a draft or a plan that stopped"},
		{"no dispatch of a queued plan", "jjjjjd", "docs is queued already: waits for build (running)"},
		{"no dispatch of a done plan", "jjjjjjjd", "schema-with-a-name-longer-than-its-column is done; to run it again: orch dispatch schema-with-a-name-longer-than-its-column"},
		{"no dispatch of a worker", "jd", "d dispatches a plan: a draft, or one blocked, failed, timed out, in conflict or refuted"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			m := press(t, newModel(t, fake.New(t), 80, 24), strings.Split(tt.keys, "")...)
			if !m.statusBad || !strings.Contains(m.status, tt.want) {
				t.Errorf("status %q; want %q", m.status, tt.want)
			}
		})
	}
	t.Run("open a worker's screen", func(t *testing.T) {
		f := fake.New(t).In("/repo").Expect("orch", []string{"read", "--", "w1"}, "scripted agent w1 ready\n→ plan build\n", nil).
			Expect("orch", []string{"read", "--", "w1"}, "again\n", nil)
		m := press(t, newModel(t, f, 80, 24), "j", "j", "enter")
		lines := plain(m)
		if m.mode != screenMode || !strings.HasPrefix(lines[1], "w1's screen") || lines[3] != "→ plan build" {
			t.Fatalf("screen not open:\n%s", strings.Join(lines, "\n"))
		}
		m = press(t, m, "r")
		if m.screen != "again\n" {
			t.Errorf("r did not read again: %q", m.screen)
		}
		m = press(t, m, "esc")
		if m.mode != boardMode {
			t.Errorf("esc did not close the screen")
		}
	})
	t.Run("o on a plan opens its worker", func(t *testing.T) {
		f := fake.New(t).In("/repo").Expect("orch", []string{"read", "--", "w2"}, "asks\n", nil)
		m := press(t, newModel(t, f, 80, 24), "j", "j", "j", "o")
		if m.screenWorker != "w2" {
			t.Errorf("opened %q, want w2 (ask's worker)", m.screenWorker)
		}
	})
	t.Run("type a line", func(t *testing.T) {
		// q is typed, not a quit, while the text input is open. w2's plan
		// needs input: the line answers it, at once (--now).
		f := fake.New(t).In("/repo").Expect("orch", []string{"send", "--now", "--", "w2", "quit, go on"}, "", nil)
		m := press(t, newModel(t, f, 80, 24), "t")
		if m.mode != typingMode {
			t.Fatalf("t did not open the text input")
		}
		for _, r := range "quit, go on" {
			m = press(t, m, string(r))
		}
		if !strings.Contains(ansi.Strip(m.Render()), "type into w2: quit, go on") {
			t.Errorf("text input not shown:\n%s", ansi.Strip(m.Render()))
		}
		m = press(t, m, "enter")
		if m.mode != boardMode || m.status != "sent to w2" {
			t.Errorf("mode %v, status %q", m.mode, m.status)
		}
	})
	t.Run("a line to a worker mid-turn waits for its prompt", func(t *testing.T) {
		// w1 runs build and asks nothing: orch send's waiting path, and
		// the board shows what orch send said of it.
		f := fake.New(t).In("/repo").Expect("orch", []string{"send", "--", "w1", "go on"}, "queued: w1 is mid-turn; typed at its next prompt\n", nil)
		m := press(t, newModel(t, f, 80, 24), "j", "j", "t")
		for _, r := range "go on" {
			m = press(t, m, string(r))
		}
		m = press(t, m, "enter")
		if m.status != "queued: w1 is mid-turn; typed at its next prompt" {
			t.Errorf("status %q, want orch send's own line", m.status)
		}
	})
	t.Run("q quits", func(t *testing.T) {
		_, cmd := newModel(t, fake.New(t), 80, 24).Update(key("q"))
		if cmd == nil {
			t.Fatal("q returned no command")
		}
		if _, ok := cmd().(tea.QuitMsg); !ok {
			t.Errorf("q did not quit")
		}
	})
}

func TestSelectionFollowsRow(t *testing.T) {
	m := newModel(t, nil, 80, 24)
	m = press(t, m, "j", "j", "j", "j") // build
	v := fixedView()
	v.Plans = append(v.Plans[1:2], v.Plans...) // build first now
	m = m.SetView(v)
	if m.sel != (item{id: "build"}) {
		t.Errorf("selection moved to %+v", m.sel)
	}
}

func TestFeedLatestWins(t *testing.T) {
	f := newFeed()
	for i := uint64(1); i <= 3; i++ {
		f.offer(board.View{Seq: i}) // never blocks, nobody takes
	}
	msg := f.next()()
	if v, ok := msg.(viewMsg); !ok || v.v.Seq != 3 {
		t.Errorf("next = %+v, want the latest view (seq 3)", msg)
	}
	done := make(chan tea.Msg)
	go func() { done <- f.next()() }()
	f.close()
	if msg := <-done; msg != nil {
		t.Errorf("a closed feed gave %+v", msg)
	}
}

func TestErrLine(t *testing.T) {
	if got := errLine(errors.New("plain")); got != "plain" {
		t.Errorf("errLine = %q", got)
	}
}

// A worker's text cannot reorder a board line (bidi overrides) or move
// the cursor (escapes): both become spaces.
func TestCleanFormatCharacters(t *testing.T) {
	if got := clean("ok\u202egnp.exe\x1b[2J"); got != "ok gnp.exe [2J" {
		t.Errorf("clean = %q", got)
	}
}
