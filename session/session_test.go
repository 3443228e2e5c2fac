package session

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/orch-dev/orch/config"
	"github.com/orch-dev/orch/event"
	"github.com/orch-dev/orch/fleet"
	"github.com/orch-dev/orch/internal/orchdir"
	"github.com/orch-dev/orch/internal/runner"
	"github.com/orch-dev/orch/internal/runner/fake"
	"github.com/orch-dev/orch/internal/state"
	"github.com/orch-dev/orch/tmux"
)

// Unit tests of the sessions' handlers and of typing, on a record in
// memory; tmux is the strict fake, nothing else runs.

var testNow = time.Date(2026, 12, 3, 12, 0, 0, 0, time.UTC)

type harness struct {
	s       *Sessions
	st      *state.State
	tf      *fake.Runner
	root    string
	saves   int
	told    []*event.Callback
	pending []func()
}

// newHarness: w1 holds plan p (running), w2 is idle; with panes, the
// fleet's tmux is the strict fake.
func newHarness(t *testing.T, panes bool) *harness {
	t.Helper()
	var tf *fake.Runner
	var tc *tmux.Client
	if panes {
		tf = fake.New(t)
		tc = &tmux.Client{Socket: "t", Runner: tf}
	}
	h := newHarnessWith(t, tc)
	h.tf = tf
	return h
}

// newHarnessWith is newHarness with tc as the fleet's tmux (nil: no panes).
func newHarnessWith(t *testing.T, tc *tmux.Client) *harness {
	t.Helper()
	h := &harness{st: state.New(), root: t.TempDir()}
	if err := os.MkdirAll(orchdir.Of(h.root), 0o700); err != nil {
		t.Fatal(err)
	}
	fc := fleet.Config{Root: h.root, OrchDir: orchdir.Of(h.root), Isolation: config.Shared, BinDir: "/bin"}
	if tc != nil {
		fc.Panes, fc.Tmux = true, tc
	}
	fl, err := fleet.New(fc)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(fl.Close)
	h.s = New(Config{Fleet: fl, StartTimeout: -1, Log: slog.New(slog.DiscardHandler), Now: func() time.Time { return testNow },
		WorkDir:  func(string) string { return h.root },
		Save:     func() error { h.saves++; return nil },
		Tell:     func(cb *event.Callback) { h.told = append(h.told, cb); h.saves++ },
		After:    func(fn func(*state.State)) { h.pending = append(h.pending, func() { fn(h.st) }) },
		Schedule: func(context.Context) {}})
	t.Cleanup(h.s.Close)
	h.st.Workers = []*state.Worker{{ID: "w1", State: state.WorkerBusy, Plan: "p", Pane: "%1", Since: testNow.Add(-time.Hour)},
		{ID: "w2", State: state.WorkerIdle, Pane: "%2", Since: testNow.Add(-time.Hour)}}
	h.st.Plans["p"] = &state.Run{Name: "p", State: state.PlanRunning, Worker: "w1", Attempts: 1, AttemptSince: testNow.Add(-time.Hour)}
	return h
}

func hook(kind event.Kind, plan, worker, status string) event.Event {
	e := event.New(kind, plan, status, worker, "h")
	e.Time = testNow.Add(-time.Minute)
	return e
}

// needs-input: the plan waits for a person with the agent's question, the
// lead is told; the same question again changes nothing; a worker that
// does not hold the plan is refused.
func TestNeedsInput(t *testing.T) {
	h := newHarness(t, false)
	cb, n := h.s.NeedsInput(h.st, hook(event.NeedsInput, "p", "w1", "allow rm -rf build?"))
	p := h.st.Plans["p"]
	if p.State != state.PlanNeedsInput || p.Reason != "allow rm -rf build?" || cb == nil || cb.Kind != event.CallbackNeedsInput || n.Kind != state.Applied {
		t.Fatalf("plan %+v, callback %+v, note %+v", p, cb, n)
	}
	if cb, n := h.s.NeedsInput(h.st, hook(event.NeedsInput, "p", "w1", "allow rm -rf build?")); cb != nil || n.Kind != state.Ignored {
		t.Errorf("repeat: callback %+v, note %+v", cb, n)
	}
	if cb, n := h.s.NeedsInput(h.st, hook(event.NeedsInput, "p", "w2", "x")); cb != nil || n.Kind != state.Refused || len(h.st.Rejected) != 1 {
		t.Errorf("another worker: callback %+v, note %+v, rejected %+v", cb, n, h.st.Rejected)
	}
}

// A hook that names no plan is about the plan its worker holds, unless it
// was sent before the worker took it.
func TestHookWithoutPlan(t *testing.T) {
	h := newHarness(t, false)
	if cb, _ := h.s.NeedsInput(h.st, hook(event.NeedsInput, "", "w1", "question")); cb == nil || cb.Plan != "p" {
		t.Fatalf("callback %+v", cb)
	}
	h.st.Worker("w1").Since = testNow
	h.st.Plans["p"].State = state.PlanRunning
	if cb, n := h.s.Idle(h.st, hook(event.Idle, "", "w1", "")); cb != nil || n.Kind != state.Ignored || !strings.Contains(n.Text, "before w1 took plan p") {
		t.Errorf("old hook: callback %+v, note %+v", cb, n)
	}
}

// idle: a turn that ended without done leaves the plan waiting, with
// whether RESULT.md is there; a plan only dispatched ignores it (the turn
// may be the previous plan's).
func TestIdleWithoutDone(t *testing.T) {
	h := newHarness(t, false)
	cb, _ := h.s.Idle(h.st, hook(event.Idle, "p", "w1", ""))
	p := h.st.Plans["p"]
	if cb == nil || cb.Kind != event.CallbackIdle || p.State != state.PlanNeedsInput || !strings.Contains(p.Reason, "plans/p/RESULT.md is missing") {
		t.Fatalf("plan %+v, callback %+v", p, cb)
	}
	p.State = state.PlanRunning
	if err := os.MkdirAll(filepath.Join(h.root, "plans", "p"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(h.root, "plans", "p", "RESULT.md"), []byte("ok\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if cb, _ := h.s.Idle(h.st, hook(event.Idle, "p", "w1", "")); cb == nil || !strings.Contains(p.Reason, "written but no done sent") {
		t.Errorf("with RESULT.md: plan %+v, callback %+v", p, cb)
	}
	p.State = state.PlanDispatched
	if cb, n := h.s.Idle(h.st, hook(event.Idle, "p", "w1", "")); cb != nil || n.Kind != state.Ignored {
		t.Errorf("dispatched: callback %+v, note %+v", cb, n)
	}
}

// failed: the plan fails with the agent's reason and the worker is free.
func TestAgentFailed(t *testing.T) {
	h := newHarness(t, false)
	cb, _ := h.s.Failed(h.st, hook(event.Failed, "p", "w1", "API error 529"))
	p, w := h.st.Plans["p"], h.st.Worker("w1")
	if cb == nil || cb.Kind != event.CallbackFailed || p.State != state.PlanFailed || p.Reason != "agent failed: API error 529" || w.State != state.WorkerIdle || w.Plan != "" {
		t.Fatalf("plan %+v, worker %+v, callback %+v", p, w, cb)
	}
}

// ready: a starting worker becomes idle; one that is not starting, or a
// hook sent before its pane started, changes nothing.
func TestReady(t *testing.T) {
	h := newHarness(t, false)
	w := h.st.Worker("w2")
	if n := h.s.Ready(h.st, hook(event.Ready, "", "w2", "")); n.Kind != state.Ignored {
		t.Errorf("not starting: %+v", n)
	}
	w.Starting, w.State, w.Since = true, state.WorkerBusy, testNow
	if n := h.s.Ready(h.st, hook(event.Ready, "", "w2", "")); n.Kind != state.Ignored || !w.Starting {
		t.Errorf("sent before the pane started: %+v, worker %+v", n, w)
	}
	w.Since = testNow.Add(-time.Hour)
	if n := h.s.Ready(h.st, hook(event.Ready, "", "w2", "")); n.Kind != state.Applied || w.Starting || w.State != state.WorkerIdle || len(h.pending) != 1 {
		t.Errorf("ready: %+v, worker %+v, pending %d", n, w, len(h.pending))
	}
}

// Typing: the pane is proven to be the worker's before the line goes in;
// for an agent still starting, the line waits for its prompt (nothing is
// typed); a pane that is someone else's gets nothing.
func TestTypeLine(t *testing.T) {
	h := newHarness(t, true)
	h.st.Plans["q"] = &state.Run{Name: "q", State: state.PlanDispatched, Worker: "w2", Attempts: 1}
	w := h.st.Worker("w2")
	line, err := fleet.DispatchLine("q", "/bin/orch-notify")
	if err != nil {
		t.Fatal(err)
	}
	prove := []string{"-u", "-L", "t", "display-message", "-p", "-t", "%2", "#{pane_id}\t#{" + tmux.WorkerOption + "}\t#{pane_dead}"}
	h.tf.Expect("tmux", prove, "%2\tw2\t0\n", nil).
		Expect("tmux", []string{"-u", "-L", "t", "send-keys", "-t", "%2", "-l", "--", line}, "", nil).
		Expect("tmux", []string{"-u", "-L", "t", "send-keys", "-t", "%2", "Enter"}, "", nil)
	if err := h.s.TypeLine(context.Background(), h.st, w, "q"); err != nil {
		t.Fatal(err)
	}
	h.tf.CheckForMissingCalls()

	w.Starting = true
	h.tf.Expect("tmux", prove, "%2\tw2\t0\n", nil)
	if err := h.s.TypeLine(context.Background(), h.st, w, "q"); err != nil || !h.st.Plans["q"].Waiting || h.saves != 1 {
		t.Errorf("starting: err %v, plan %+v, saves %d", err, h.st.Plans["q"], h.saves)
	}
	h.tf.CheckForMissingCalls()

	w.Starting = false
	h.tf.Expect("tmux", prove, "%2\tw1\t0\n", nil)
	if err := h.s.TypeLine(context.Background(), h.st, w, "q"); err == nil {
		t.Error("typed into another worker's pane")
	}
	h.st.Worker("w1").Headless = true
	if err := h.s.TypeLine(context.Background(), h.st, h.st.Worker("w1"), "p"); err == nil {
		t.Error("typed for a headless worker")
	}
}

// stuckTmux is a tmux server that does not answer: each command returns
// only once its context is done, as a killed client does.
type stuckTmux struct{}

func (stuckTmux) Run(ctx context.Context, c runner.Cmd) ([]byte, error) {
	<-ctx.Done()
	return nil, &runner.Error{Cmd: c, ExitCode: -1, Err: errors.New("signal: killed")}
}

// A deadline that fires while tmux does not answer, before the loop has
// made its decision (stuck.go in lead): the plan is not failed for an
// unreadable pane, nor is the lead told the worker asks something; the
// decision (the plan lost with its pane, queued again) is the loop's.
func TestDeadlinesWhenTmuxStuck(t *testing.T) {
	tc := &tmux.Client{Socket: "t", Runner: stuckTmux{}}
	h := newHarnessWith(t, tc)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Millisecond)
	defer cancel()
	if _, err := tc.HasSession(ctx, "s"); !errors.Is(err, tmux.ErrNotAnswering) {
		t.Fatalf("stuck tmux answered: %v", err)
	}
	p, w := h.st.Plans["p"], h.st.Worker("w1")
	p.State, p.Resent = state.PlanDispatched, true
	h.s.ackExpired(context.Background(), h.st, ackCheck{plan: "p", attempt: 1, resent: true})
	if p.State != state.PlanDispatched || w.State != state.WorkerBusy || len(h.told) != 0 {
		t.Fatalf("ack deadline: plan %s, worker %s, told %+v; want both untouched", p.State, w.State, h.told)
	}
	w2 := h.st.Worker("w2")
	w2.Starting, w2.Since = true, testNow
	h.s.startExpired(context.Background(), h.st, startCheck{worker: "w2", since: testNow})
	if len(h.told) != 0 || w2.Asked != "" {
		t.Fatalf("start deadline: told %+v, asked %q; want nothing", h.told, w2.Asked)
	}
}
