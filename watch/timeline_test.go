package watch

import (
	"fmt"
	"strings"
	"testing"
	"time"

	tea "charm.land/bubbletea/v2"
	"github.com/charmbracelet/x/ansi"

	"github.com/orch-dev/orch/board"
)

// tlView is a timeline of 40 minutes, from t0-40m to t0: at 44 columns
// (a 4-cell id column, "w10 ") each of the 40 cells is one minute.
func tlView() board.View {
	at := func(min int) time.Time { return t0.Add(time.Duration(min-40) * time.Minute) }
	return board.View{
		Serving:  true,
		Workers:  []board.WorkerRow{{WorkerFrame: board.WorkerFrame{ID: "w1", State: "busy", Plan: "c"}}, {WorkerFrame: board.WorkerFrame{ID: "w2", State: "idle"}}, {WorkerFrame: board.WorkerFrame{ID: "w10", State: "idle"}}},
		Plans:    []board.PlanRow{{Name: "c", State: "running"}, {Name: "a", State: "done"}, {Name: "b", State: "failed"}},
		Critical: []string{"a", "c"}, CriticalS: 20 * 60,
		Timeline: board.Timeline{Start: at(0), End: at(40), Rows: []board.Row{
			{Worker: "w1", Bars: []board.Bar{
				{Plan: "a", Attempt: 1, Start: at(0), End: at(10), Outcome: "done", Critical: true},
				{Plan: "c", Attempt: 1, Start: at(30), Outcome: "running", Running: true, Critical: true},
			}},
			{Worker: "w2", Bars: []board.Bar{
				{Plan: "b", Attempt: 1, Start: at(10), End: at(20), Outcome: "failed"},
				{Plan: "b", Attempt: 2, Start: at(20), End: at(25), Outcome: "taken back"},
			}},
			{Worker: "w10", Bars: []board.Bar{}},
		}},
	}
}

// tlModel is a board of tlView at w×h whose clock reads *now.
func tlModel(t *testing.T, now *time.Time, w, h int) Model {
	t.Helper()
	m := New(Config{Now: func() time.Time { return *now }}, nil).SetView(tlView())
	nm, _ := m.Update(tea.WindowSizeMsg{Width: w, Height: h})
	return nm.(Model)
}

func rep(s string, n int) string { return strings.Repeat(s, n) }

func TestTimelineColumns(t *testing.T) {
	now := t0
	m := tlModel(t, &now, 44, 24)
	got := m.timelineLines(44, 10)
	want := []string{
		"TIMELINE  since " + t0.Add(-40*time.Minute).Local().Format("15:04:05") + " (40m)",
		// a, done, minutes 0-10; c, running since minute 30, up to now.
		"w1  " + rep("█", 10) + rep(" ", 20) + rep("█", 10),
		// b failed (10-20), then taken back (20-25): not critical, shaded.
		"w2  " + rep(" ", 10) + rep("▒", 15),
		"w10 ", // a worker with no bars: its id and nothing after it
		"critical path: a → c (20m of 40m)",
	}
	if len(got) != len(want) {
		t.Fatalf("%d lines, want %d:\n%s", len(got), len(want), ansi.Strip(strings.Join(got, "\n")))
	}
	for i := range want {
		if g := ansi.Strip(got[i]); g != want[i] {
			t.Errorf("line %d\n got %q\nwant %q", i, g, want[i])
		}
	}
	// The colours: each run of cells in its outcome's, critical or not.
	if barStyles["done"].Render("x") == "x" {
		t.Fatal("styles render no colour: the comparison below would prove nothing")
	}
	if w1 := "w1  " + barStyles["done"].Render(rep(critGlyph, 10)) + rep(" ", 20) + barStyles["running"].Render(rep(critGlyph, 10)); got[1] != w1 {
		t.Errorf("w1's styled line\n got %q\nwant %q", got[1], w1)
	}
	if w2 := "w2  " + rep(" ", 10) + barStyles["failed"].Render(rep(barGlyph, 10)) + barStyles["taken"].Render(rep(barGlyph, 5)); got[2] != w2 {
		t.Errorf("w2's styled line\n got %q\nwant %q", got[2], w2)
	}
}

// A running bar grows with the display clock: the next tick redraws it
// against the new now, and the rest of the strip scales down to fit.
func TestTimelineGrowsWithTheClock(t *testing.T) {
	now := t0
	m := tlModel(t, &now, 44, 24)
	now = t0.Add(40 * time.Minute) // 80 minutes in all: 2 a cell
	nm, _ := m.Update(tickMsg(now))
	got := ansi.Strip(nm.(Model).timelineLines(44, 10)[1])
	if want := "w1  " + rep("█", 5) + rep(" ", 10) + rep("█", 25); got != want {
		t.Errorf("after the tick\n got %q\nwant %q", got, want)
	}
}

func TestBarClass(t *testing.T) {
	for _, c := range []struct {
		bar  board.Bar
		want string
	}{
		{board.Bar{Outcome: "done"}, "done"},
		{board.Bar{Outcome: "verified"}, "done"},
		{board.Bar{Outcome: "failed"}, "failed"},
		{board.Bar{Outcome: "conflict"}, "failed"},
		{board.Bar{Outcome: "blocked"}, "blocked"},
		{board.Bar{Outcome: "needs-input"}, "blocked"},
		{board.Bar{Outcome: "taken back"}, "taken"},
		{board.Bar{Outcome: "needs-input", Running: true}, "running"},
		{board.Bar{Outcome: "running", Running: true}, "running"},
	} {
		t.Run(c.bar.Outcome, func(t *testing.T) {
			if got := barClass(c.bar); got != c.want {
				t.Errorf("barClass(%+v) = %q, want %q", c.bar, got, c.want)
			}
		})
	}
}

// A short bar still shows: an attempt of a few seconds in a long
// timeline takes one cell, where it started.
func TestTimelineShortBar(t *testing.T) {
	bars := []board.Bar{{Plan: "x", Start: t0.Add(20 * time.Minute), End: t0.Add(20*time.Minute + time.Second), Outcome: "done"}}
	if got := ansi.Strip(strip(bars, t0, t0.Add(40*time.Minute), 40)); got != rep(" ", 20)+barGlyph {
		t.Errorf("strip = %q", got)
	}
}

// With less room than it wants, the timeline gives way first: the
// workers and plans stay whole, the timeline keeps its rows with bars,
// then goes; and at every size the board fits.
func TestTimelineRoom(t *testing.T) {
	now := t0
	section := func(lines []string, name string) (int, string) {
		for i, l := range lines {
			if strings.HasPrefix(l, name) {
				return i, l
			}
		}
		return -1, ""
	}
	for _, c := range []struct {
		w, h      int
		title     string // the TIMELINE line; "" is none
		critical  bool
		plansFull bool
	}{
		// The header, 2 titles, 3 workers, 3 plans and the keys take 10
		// lines; the timeline wants 5 more (title, 3 rows, critical path).
		{80, 24, "TIMELINE  since", true, true},
		{44, 15, "TIMELINE  since", true, true},
		{44, 14, "TIMELINE  2 of 3", true, true}, // w10, without bars, goes first
		{44, 13, "TIMELINE  1 of 3", true, true},
		{44, 12, "TIMELINE  1 of 3", false, true}, // then the critical path's line
		{44, 11, "", false, true},                 // then the timeline
		{44, 10, "", false, true},
		{44, 8, "", false, false},
		{20, 5, "", false, false},
		{10, 3, "", false, false},
	} {
		t.Run(fmt.Sprintf("%dx%d", c.w, c.h), func(t *testing.T) {
			m := tlModel(t, &now, c.w, c.h)
			lines := plain(m)
			if len(lines) != c.h {
				t.Errorf("%d lines, want %d", len(lines), c.h)
			}
			for i, l := range strings.Split(m.Render(), "\n") {
				if w := ansi.StringWidth(l); w > c.w {
					t.Errorf("line %d is %d wide, over %d: %q", i, w, c.w, ansi.Strip(l))
				}
			}
			board := strings.Join(lines, "\n")
			_, tl := section(lines, "TIMELINE")
			if c.title == "" && tl != "" || !strings.HasPrefix(tl, c.title) {
				t.Errorf("timeline title %q, want %q:\n%s", tl, c.title, board)
			}
			if i, _ := section(lines, "critical path: a → c"); (i >= 0) != c.critical {
				t.Errorf("critical path shown %v, want %v:\n%s", i >= 0, c.critical, board)
			}
			if _, p := section(lines, "PLANS"); (p == "PLANS") != c.plansFull {
				t.Errorf("plans title %q, all plans shown want %v:\n%s", p, c.plansFull, board)
			}
			if i, _ := section(lines, "w10 "); c.title == "TIMELINE  2 of 3" && i >= 0 {
				t.Errorf("w10, without bars, kept over a worker with bars:\n%s", board)
			}
		})
	}
}

// T hides the timeline and shows it again; the keys line says so.
func TestTimelineToggle(t *testing.T) {
	m := newModel(t, nil, 80, 24)
	has := func(m Model) bool { return strings.Contains(strings.Join(plain(m), "\n"), "\nTIMELINE") }
	lines := plain(m)
	if !strings.Contains(lines[len(lines)-1], "T timeline") {
		t.Errorf("keys line %q does not name T", lines[len(lines)-1])
	}
	if !has(m) {
		t.Fatalf("no timeline at 80×24:\n%s", strings.Join(plain(m), "\n"))
	}
	m = press(t, m, "T")
	if has(m) {
		t.Errorf("T did not hide the timeline:\n%s", strings.Join(plain(m), "\n"))
	}
	if m = press(t, m, "T"); !has(m) {
		t.Errorf("T again did not show it")
	}
}
