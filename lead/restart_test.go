package lead

import (
	"context"
	"fmt"
	"os/exec"
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

func TestRestartDelay(t *testing.T) {
	ago := func(d ...time.Duration) []time.Time {
		var ts []time.Time
		for _, x := range d {
			ts = append(ts, testNow.Add(-x))
		}
		return ts
	}
	tests := []struct {
		name  string
		past  []time.Time
		kept  int
		delay time.Duration
		ok    bool
	}{
		{"first death", nil, 0, time.Second, true},
		{"second", ago(time.Minute), 1, 2 * time.Second, true},
		{"third", ago(2*time.Minute, time.Minute), 2, 4 * time.Second, true},
		{"budget spent", ago(3*time.Minute, 2*time.Minute, time.Minute), 3, 0, false},
		{"old restarts forgotten", ago(RestartWindow+time.Second, RestartWindow, time.Minute), 1, 2 * time.Second, true},
		{"all old", ago(time.Hour, 2*time.Hour, 3*time.Hour), 0, time.Second, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			kept, delay, ok := restartDelay(tt.past, testNow)
			if len(kept) != tt.kept || delay != tt.delay || ok != tt.ok {
				t.Errorf("restartDelay = %d kept, %s, %v; want %d, %s, %v", len(kept), delay, ok, tt.kept, tt.delay, tt.ok)
			}
		})
	}
}

// killed is the exited record of w1's process pid for attempt n of p,
// killed by SIGKILL.
func killed(pid, n int) event.Event {
	e := event.Record(event.Exited, event.DerivedID(fmt.Sprintf("exited w1 p %d %d", n, pid)), "p", "w1", fmt.Sprintf("process %d killed by signal killed", pid), testNow)
	e.Attempt = n
	return e
}

// A headless worker killed mid-plan comes back after its back-off, its
// plan runs once more; killed again, the plan fails; and a worker killed
// in a loop stays dead once its budget is spent.
func TestHeadlessKilledComesBackWithinBudget(t *testing.T) {
	l, _ := testLoop(t)
	l.restartDue = make(chan string, 4)
	w := l.st.Worker("w1")
	w.Headless, w.Pane, w.PID = true, "", 100
	p := l.st.Plans["p"]

	cb, _ := l.exited(killed(100, 1))
	if cb == nil || cb.Kind != event.CallbackDied || !strings.Contains(cb.Line, "plan p queued again (attempt 2); w1 restarts in 1s (restart 1 of 3") {
		t.Fatalf("first kill: callback %+v", cb)
	}
	if p.State != state.PlanQueued || p.Requeued != 1 || !strings.HasPrefix(p.Retry, "attempt 2: w1 died (headless process 100 killed by signal killed") {
		t.Fatalf("first kill: plan %+v", p)
	}
	if w.State != state.WorkerDead || !w.RestartAt.Equal(testNow.Add(time.Second)) || len(w.Restarts) != 1 || len(l.pending) != 1 {
		t.Fatalf("first kill: worker %+v, %d pending", w, len(l.pending))
	}

	// The timer fires: the worker is usable again; the plan goes to it.
	l.pending = nil
	l.cfg.Now = func() time.Time { return testNow.Add(time.Second) }
	w.RestartAt = testNow.Add(time.Second)
	l.restartNow(t.Context(), "w1") // saves; nothing is dispatched without a fleet
	if w.State != state.WorkerIdle || !w.RestartAt.IsZero() {
		t.Fatalf("after the restart: worker %+v", w)
	}
	p.State, p.Worker, p.Attempts = state.PlanRunning, "w1", 2
	w.State, w.Plan, w.PID = state.WorkerBusy, "p", 200

	cb, _ = l.exited(killed(200, 2))
	if cb == nil || cb.Kind != event.CallbackFailed || !strings.Contains(cb.Status, "on attempt 2; not retried") || !strings.Contains(cb.Status, "w1 restarts in 2s (restart 2 of 3") {
		t.Fatalf("second kill: callback %+v", cb)
	}
	if p.State != state.PlanFailed {
		t.Fatalf("second kill: plan %s", p.State)
	}

	// Two more deaths within the window: the third restart, then none.
	for i, want := range []string{"restarts in 4s (restart 3 of 3", "stays dead: restart budget spent"} {
		w.State, w.RestartAt, w.Plan, w.PID = state.WorkerIdle, time.Time{}, "", 300+i
		then := l.grantRestart(w, "killed")
		if !strings.Contains(then, want) {
			t.Fatalf("death %d: %q, want %q", i+3, then, want)
		}
	}
	if w.State != state.WorkerDead || !w.RestartAt.IsZero() || !strings.Contains(w.Reason, "not restarted: it died 4 times within 10m0s (restart budget 3; orch serve started again brings it back)") {
		t.Fatalf("worker after the budget: %+v", w)
	}
}

// An agent out of context: its plan is given again once as its next
// attempt (held by the same worker); the second time it fails.
func TestExhaustedOnceThenFailed(t *testing.T) {
	l, _ := testLoop(t)
	w := l.st.Worker("w1")
	w.Headless, w.Pane, w.PID = true, "", 100
	l.sessions = l.newSessions()
	p := l.st.Plans["p"]

	e := workerEvent(event.Exhausted, "p", "w1", "context full")
	cb, _ := l.exhausted(e)
	if cb == nil || cb.Kind != event.CallbackRestarted || cb.Line != "WORKER-RESTARTED p: w1 ran out of context (context full); fresh session in the same worktree, plan given again (attempt 2)" {
		t.Fatalf("first: callback %+v", cb)
	}
	if p.State != state.PlanDispatched || p.Attempts != 2 || p.Refreshed != 1 || w.Plan != "p" || w.State != state.WorkerBusy || len(l.pending) != 1 {
		t.Fatalf("first: plan %+v, worker %+v, %d pending", p, w, len(l.pending))
	}
	// A late signal of the old session is about attempt 1.
	old := workerEvent(event.Exhausted, "p", "w1", "context full")
	old.Attempt = 1
	if cb, n := l.exhausted(old); cb != nil || n.None() {
		t.Fatalf("old session's signal: %+v %+v", cb, n)
	}
	l.pending = nil
	p.State = state.PlanRunning
	e = workerEvent(event.Exhausted, "p", "w1", "context full")
	e.Time = testNow
	cb, _ = l.exhausted(e)
	if cb == nil || cb.Kind != event.CallbackFailed || !strings.Contains(cb.Status, "ran out of context again (context full) on attempt 2") {
		t.Fatalf("second: callback %+v", cb)
	}
	if p.State != state.PlanFailed {
		t.Fatalf("second: plan %s", p.State)
	}
}

// A plan queued again after an outage keeps the count of its deaths and
// fresh sessions: its worker dying now fails it if it was queued again
// once already (an outage is no orch dispatch).
func TestOutageKeepsRetryCounts(t *testing.T) {
	l, _ := testLoop(t)
	writeFile(t, l.cfg.Root, "plans/p/PLAN.md", "---\nagent: [a, b]\n---\n# p\n\nwork\n")
	p := l.st.Plans["p"]
	p.State, p.Attempts, p.Requeued, p.Refreshed = state.PlanFailed, 2, 1, 1
	e := workerEvent(event.Failed, "p", "w1", "rate_limit: try later")
	cb := l.outage(e, event.NewCallback(event.CallbackFailed, e.ID, "p", "w1", e.Status, ""))
	if p.State != state.PlanQueued || cb == nil {
		t.Fatalf("outage: plan %s, callback %+v", p.State, cb)
	}
	if p.Requeued != 1 || p.Refreshed != 1 {
		t.Fatalf("after the outage: requeued %d, refreshed %d; want 1, 1", p.Requeued, p.Refreshed)
	}
	p.State, p.Worker = state.PlanRunning, "w1"
	cb, _ = l.requeueOrFail(e, l.st.Worker("w1"), p, "process ended", "")
	if p.State != state.PlanFailed || cb == nil || cb.Kind != event.CallbackFailed {
		t.Fatalf("death after the outage: plan %s, callback %+v", p.State, cb)
	}
}

// withTmuxFleet gives l a tmux fleet (shared isolation) whose tmux runs
// on r, and its sessions.
func withTmuxFleet(t *testing.T, l *Loop, r runner.Runner) {
	t.Helper()
	fl, err := fleet.New(fleet.Config{Root: l.cfg.Root, OrchDir: l.orchDir, Panes: true, Tmux: &tmux.Client{Socket: "t", Runner: r},
		Isolation: config.Shared, BinDir: "/bin"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(fl.Close)
	l.fleet = fl
	l.sessions = l.newSessions()
	t.Cleanup(l.sessions.Close)
}

// paneTmux answers a pane fleet's tmux calls for a worker w1 moved from
// pane %1 to a new pane %9 whose process is pid, and counts kill-pane.
type paneTmux struct {
	pid    int
	killed []string
}

func (m *paneTmux) Run(_ context.Context, c runner.Cmd) ([]byte, error) {
	a := c.Args[3:] // after -u -L t
	switch a[0] {
	case "split-window":
		return []byte("%9\n"), nil
	case "display-message":
		if strings.Contains(a[len(a)-1], "pane_pid") {
			return []byte(fmt.Sprintf("%s\t%d\n", a[3], m.pid)), nil
		}
		return []byte(a[3] + "\tw1\t0\n"), nil
	case "capture-pane":
		return []byte("the old screen\n"), nil
	case "kill-pane":
		m.killed = append(m.killed, a[2])
	}
	return nil, nil
}

// The session that ran out of context is killed with its pane once the
// new one is up; an event it sent until then (here a done, sent after the
// exhausted event was handled) is stale, never the new attempt's.
func TestRefreshOldSessionStale(t *testing.T) {
	l, _ := testLoop(t)
	sleeper := exec.Command("sleep", "30")
	if err := sleeper.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sleeper.Process.Kill(); sleeper.Wait() })
	m := &paneTmux{pid: sleeper.Process.Pid}
	withTmuxFleet(t, l, m)
	l.st.Session = "s"
	writeFile(t, l.cfg.Root, "plans/p/PLAN.md", "# p\n\nwork\n")

	if cb, _ := l.exhausted(workerEvent(event.Exhausted, "p", "w1", "context full")); cb == nil || cb.Kind != event.CallbackRestarted {
		t.Fatalf("exhausted: %+v", cb)
	}
	// The old agent sends done a second after; the new pane is made a
	// second after that.
	late := workerEvent(event.Done, "p", "w1", "ok")
	late.Time = testNow.Add(time.Second)
	l.cfg.Now = func() time.Time { return testNow.Add(2 * time.Second) }
	for _, fn := range l.pending {
		fn()
	}
	w := l.st.Worker("w1")
	if w.Pane != "%9" || w.Refresh || len(m.killed) != 1 || m.killed[0] != "%1" {
		t.Fatalf("worker %+v, panes killed %v; want w1 in %%9, %%1 killed", w, m.killed)
	}
	if _, _, why := l.holder(late); !strings.Contains(why, "stale") {
		t.Fatalf("the old session's done is taken for attempt 2 (%q)", why)
	}
	fresh := workerEvent(event.Done, "p", "w1", "ok")
	fresh.Time = testNow.Add(3 * time.Second)
	if _, _, why := l.holder(fresh); why != "" {
		t.Fatalf("the new session's done is refused: %s", why)
	}
}

// noTmux fails the test on any tmux call.
type noTmux struct{ t *testing.T }

func (n noTmux) Run(_ context.Context, c runner.Cmd) ([]byte, error) {
	n.t.Errorf("unexpected tmux call %v", c.Args)
	return nil, fmt.Errorf("no tmux here")
}

// A pane that dies after its agent ran out of context, before the fresh
// session is made (its save failed, say): the death decides (a restart
// within the budget, the plan queued again); the fresh session is not
// made on top of it, and the queued plan is typed nowhere.
func TestDeathBeforeRefresh(t *testing.T) {
	l, _ := testLoop(t)
	withTmuxFleet(t, l, noTmux{t})
	l.paneEnded = map[string]bool{"%1": true}
	l.restartDue = make(chan string, 4)
	var sent []*event.Callback
	l.publish = func(cb *event.Callback) error { sent = append(sent, cb); return nil }
	l.exhausted(workerEvent(event.Exhausted, "p", "w1", "context full"))
	refresh := l.pending
	l.pending = nil
	d := workerEvent(event.Died, "", "w1", "pane %1 exited with status 1")
	d.Pane = "%1"
	l.st.Session = "" // no session to ask tmux about: not restarted
	l.died(d)
	for _, fn := range refresh {
		fn()
	}
	w, p := l.st.Worker("w1"), l.st.Plans["p"]
	if w.State != state.WorkerDead || w.Plan != "" || w.Refresh {
		t.Fatalf("worker %+v", w)
	}
	if p.State != state.PlanQueued || p.Worker != "" {
		t.Fatalf("plan %s held by %q; want queued", p.State, p.Worker)
	}
	if len(sent) != 0 || strings.Contains(w.Reason, "fresh session") {
		t.Fatalf("a fresh session was tried after the death: %q, callbacks %v", w.Reason, sent)
	}
}
