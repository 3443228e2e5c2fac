package lead

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/orch-dev/orch/config"
	"github.com/orch-dev/orch/event"
	"github.com/orch-dev/orch/fleet"
	"github.com/orch-dev/orch/internal/runner"
	"github.com/orch-dev/orch/internal/state"
	"github.com/orch-dev/orch/tmux"
)

// The one decision when tmux stops answering: every pane worker of this
// machine becomes headless, a plan its pane held is reported lost (to be
// queued again once by its lost record), a setup under way and a dead
// worker are left to their own paths, and a second decision changes
// nothing.
func TestGoHeadless(t *testing.T) {
	now := time.Date(2026, 12, 5, 9, 0, 0, 0, time.UTC)
	st := state.New()
	st.Workers = []*state.Worker{
		{ID: "w1", State: state.WorkerIdle, Pane: "%0", Starting: true},
		{ID: "w2", State: state.WorkerBusy, Pane: "%1", Plan: "run"},
		{ID: "w3", State: state.WorkerBusy, Pane: "%2", Plan: "setup"},
		{ID: "w4", State: state.WorkerDead, Pane: "%3", Reason: "pane exited"},
		{ID: "w5", State: state.WorkerBusy, Remote: "h1", Pane: "%9", Plan: "far"},
		{ID: "w6", State: state.WorkerBusy, Headless: true, PID: 42, Plan: "proc"},
	}
	st.Plans = map[string]*state.Run{
		"run":   {Name: "run", State: state.PlanRunning, Worker: "w2", Attempts: 1},
		"setup": {Name: "setup", State: state.PlanQueued, Worker: "w3", Preparing: 1},
		"far":   {Name: "far", State: state.PlanRunning, Worker: "w5", Attempts: 1},
		"proc":  {Name: "proc", State: state.PlanRunning, Worker: "w6", Attempts: 1},
	}
	lost, first := goHeadless(st, "tmux server not answering: tmux send-keys", now)
	if !first {
		t.Fatal("first decision reported as a repeat")
	}
	if st.TmuxDown == nil || !st.TmuxDown.Since.Equal(now) || st.TmuxDown.Reason != "tmux server not answering: tmux send-keys" {
		t.Fatalf("TmuxDown = %+v", st.TmuxDown)
	}
	want := []fleet.Lost{{Worker: "w2", Pane: "%1", Plan: "run", Attempt: 1}}
	if len(lost) != 1 || lost[0] != want[0] {
		t.Fatalf("lost = %+v, want %+v", lost, want)
	}
	for _, id := range []string{"w1", "w2", "w3", "w4"} {
		w := st.Worker(id)
		if !w.Headless || w.Pane != "" || w.Starting {
			t.Errorf("%s not made headless: %+v", id, w)
		}
	}
	if w := st.Worker("w1"); w.State != state.WorkerIdle {
		t.Errorf("w1 = %s, want idle", w.State)
	}
	if w := st.Worker("w2"); w.State != state.WorkerBusy || w.Plan != "run" {
		t.Errorf("w2 (its plan lost, not yet handled) = %s %q, want busy with run", w.State, w.Plan)
	}
	if w := st.Worker("w3"); w.State != state.WorkerBusy || w.Plan != "setup" {
		t.Errorf("w3 (setup running) = %s %q, want busy with setup", w.State, w.Plan)
	}
	if w := st.Worker("w4"); w.State != state.WorkerDead {
		t.Errorf("w4 = %s, want dead still", w.State)
	}
	if w := st.Worker("w5"); w.Headless || w.Pane != "%9" {
		t.Errorf("a host's worker changed: %+v", w)
	}
	if w := st.Worker("w6"); w.PID != 42 || w.Plan != "proc" {
		t.Errorf("a headless worker changed: %+v", w)
	}

	// Once decided, a second report changes nothing.
	st.Workers = append(st.Workers, &state.Worker{ID: "w7", State: state.WorkerIdle, Pane: "%7"})
	if lost, first := goHeadless(st, "again", now.Add(time.Minute)); first || lost != nil {
		t.Fatalf("second decision: lost %v first %v", lost, first)
	}
	if st.TmuxDown.Reason != "tmux server not answering: tmux send-keys" || st.Worker("w7").Headless {
		t.Fatalf("second decision changed the record: %+v", st.TmuxDown)
	}
}

// stuckTmux is a tmux server that does not answer: each command returns
// only once its context is done, as a killed client does.
type stuckTmux struct{}

func (stuckTmux) Run(ctx context.Context, c runner.Cmd) ([]byte, error) {
	<-ctx.Done()
	return nil, &runner.Error{Cmd: c, ExitCode: -1, Err: errors.New("signal: killed")}
}

// stuckLoop is testLoop with a tmux fleet whose server has stopped
// answering, found out already (one command got no answer, the report of
// it waits on fleet.Stuck), and whose headless command is "true";
// callbacks are recorded in *sent.
func stuckLoop(t *testing.T) (*Loop, *[]*event.Callback) {
	t.Helper()
	l, _ := testLoop(t)
	tc := &tmux.Client{Socket: "t", Runner: stuckTmux{}}
	fl, err := fleet.New(fleet.Config{Root: l.cfg.Root, OrchDir: l.orchDir, Panes: true, Tmux: tc,
		Isolation: config.Shared, BinDir: "/bin", Agent: "true"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(fl.Close)
	l.fleet = fl
	l.sessions = l.newSessions()
	t.Cleanup(l.sessions.Close)
	l.st.Session = "s"
	sent := new([]*event.Callback)
	l.publish = func(cb *event.Callback) error { *sent = append(*sent, cb); return nil }
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Millisecond)
	defer cancel()
	if _, err := tc.HasSession(ctx, "s"); !errors.Is(err, tmux.ErrNotAnswering) {
		t.Fatalf("stuck tmux answered: %v", err)
	}
	return l, sent
}

// waitExit waits for the exit of w's headless process, so that nothing
// the test started outlives it.
func waitExit(t *testing.T, l *Loop) {
	t.Helper()
	select {
	case <-l.fleet.Exits():
	case <-time.After(10 * time.Second):
		t.Fatal("the headless process did not exit")
	}
}

// An agent out of context whose fresh session cannot be had because tmux
// does not answer: its worker becomes headless with every pane worker,
// and the fresh session is a headless process running the plan; the
// worker is not dead, the plan not counted as lost.
func TestRefreshWhenTmuxStuck(t *testing.T) {
	l, _ := stuckLoop(t)
	writeFile(t, l.cfg.Root, "plans/p/PLAN.md", "# p\n\nwork\n")
	if cb, _ := l.exhausted(workerEvent(event.Exhausted, "p", "w1", "context full")); cb == nil || cb.Kind != event.CallbackRestarted {
		t.Fatalf("exhausted: %+v", cb)
	}
	for _, fn := range l.pending {
		fn()
	}
	w, p := l.st.Worker("w1"), l.st.Plans["p"]
	if l.st.TmuxDown == nil {
		t.Fatal("tmux not marked down")
	}
	if w.State != state.WorkerBusy || !w.Headless || w.PID == 0 || w.Plan != "p" || w.Refresh {
		t.Fatalf("worker %+v; want busy with p in a headless process", w)
	}
	waitExit(t, l)
	if p.State != state.PlanDispatched || p.Attempts != 2 || p.Requeued != 0 {
		t.Fatalf("plan %+v; want attempt 2 dispatched, not requeued", p)
	}
}

// A pane that dies while tmux does not answer: its session is not taken
// for gone (which would leave the worker dead for the run); the restart
// is granted, and brings the worker back headless.
func TestDeathWhenTmuxStuck(t *testing.T) {
	l, _ := stuckLoop(t)
	l.paneEnded = map[string]bool{"%1": true}
	e := workerEvent(event.Died, "", "w1", "pane %1 exited")
	e.Pane = "%1"
	cb, _ := l.died(e)
	w := l.st.Worker("w1")
	if cb == nil || !strings.Contains(cb.Line, "w1 restarts in 1s") || w.RestartAt.IsZero() {
		t.Fatalf("callback %+v, worker %+v; want a restart granted", cb, w)
	}
	l.cfg.Now = func() time.Time { return testNow.Add(time.Second) }
	l.tmuxStuckNow(context.Background(), <-l.fleet.Stuck())
	l.restartNow(context.Background(), "w1")
	if w.State != state.WorkerIdle || !w.Headless || w.Pane != "" {
		t.Fatalf("worker %+v; want idle, headless", w)
	}
}
