package lead

import (
	"fmt"
	"path/filepath"
	"strings"

	"github.com/orch-dev/orch/event"
	"github.com/orch-dev/orch/fleet"
	"github.com/orch-dev/orch/internal/orchdir"
	"github.com/orch-dev/orch/internal/state"
)

// The headless backend's side in the loop: a plan is started as a child
// process (fleet.Spawn, from schedule.go handOver, once the attempt is
// recorded) whose pid is saved before its agent may run, and
// its exit (fleet.Exits) goes into the stream as an exited record, behind
// the worker's own orch-notify done; the loop decides there: a plan still
// held then failed (the agent stopped without saying done).

// startHeadless starts the agent's headless command for a plan: its pid
// is saved before the process is let go, so no agent ever runs
// unrecorded.
func (l *Loop) startHeadless(w *state.Worker, plan, line string) error {
	attempt := 0
	if p := l.st.Plans[plan]; p != nil {
		attempt = p.Attempts
	}
	proc, err := l.fleet.Spawn(w.ID, plan, attempt, line)
	if err != nil {
		return err
	}
	w.PID = proc.PID
	if err := l.save(); err != nil {
		w.PID = 0
		proc.Abort()
		return fmt.Errorf("headless start: %w", err)
	}
	if err := proc.Release(); err != nil {
		w.PID = 0
		return fmt.Errorf("headless start: %w", err)
	}
	return nil
}

// reportExit puts an exited record into the stream, on the loop's
// goroutine once it runs: behind everything the process sent before it
// ended, including a done it had to spool (the spool is read first: its
// file may be waiting for the watcher). Its id is derived from the process
// and the attempt, so reporting it twice has one effect.
func (l *Loop) reportExit(n fleet.Exit) {
	l.ingestSpool(false)
	l.publishExit(n)
}

// reportExits publishes the exits the fleet found at start.
func (l *Loop) reportExits() {
	for _, n := range l.fleet.TakeExits() {
		l.publishExit(n)
	}
}

func (l *Loop) publishExit(n fleet.Exit) {
	e := l.record(event.Exited, event.DerivedID(fmt.Sprintf("exited %s %s %d %d", n.Worker, n.Plan, n.Attempt, n.PID)), n.Plan, n.Worker, fmt.Sprintf("process %d %s", n.PID, n.How))
	e.Attempt = n.Attempt
	l.publishRecord(e)
}

// exited handles a headless process's end: the worker is free again, and a
// plan it still held (no done came first) failed.
func (l *Loop) exited(e event.Event) (*event.Callback, state.Note) {
	w := l.st.Worker(e.Worker)
	if w == nil || !w.Headless {
		return nil, state.Ignoring("not a headless worker")
	}
	pid := 0
	fmt.Sscanf(e.Status, "process %d", &pid)
	if w.PID != pid {
		return nil, state.Ignoring("an earlier process of " + w.ID)
	}
	now := l.cfg.Now().UTC()
	w.PID, w.Reason, w.Since, w.Interrupting = 0, "", now, ""
	if w.State != state.WorkerDead {
		w.State = state.WorkerIdle
	}
	p := l.st.Plans[e.Plan]
	if p == nil || w.Plan != e.Plan || p.Worker != w.ID || p.Attempts != e.Attempt ||
		!p.State.Working() {
		w.Plan = ""
		return nil, state.Noted("worker free: " + e.Status)
	}
	w.Plan = ""
	log := filepath.Join(orchdir.Name, orchdir.Logs, fleet.LogName(p.Name, p.Attempts))
	if strings.Contains(e.Status, fleet.UnknownStatus) {
		// It ended while no lead loop watched it as its parent: stopped by
		// orch down, killed with the tmux server's machine, or crashed. Like
		// a lost pane: the plan goes out once more, then fails.
		return l.requeueOrFail(e, w, p, fmt.Sprintf("headless process %s without orch-notify done (output: %s)", strings.TrimPrefix(e.Status, fmt.Sprintf("process %d ", pid)), log), "")
	}
	how := strings.TrimPrefix(e.Status, fmt.Sprintf("process %d ", pid))
	if strings.HasPrefix(how, "killed by signal") && w.Remote == "" {
		// Killed mid-plan (by a person, the OOM killer, a crash): a death,
		// not the agent giving up. The worker comes back within its
		// budget, the plan goes out once more (restart.go).
		why := fmt.Sprintf("headless process %d %s (output: %s)", pid, how, log)
		w.Plan = ""
		then := l.grantRestart(w, why)
		l.log.Warn("headless worker died", "worker", w.ID, "plan", p.Name, "how", how)
		return l.requeueOrFail(e, w, p, why, then)
	}
	if p.State == state.PlanNeedsInput {
		// The lead was told already why the run stopped (its turn ended
		// without done, or it asked for a permission nobody can give a
		// headless run): the exit ends the plan without waking it again.
		p.State, p.Reason, p.Updated = state.PlanFailed, fmt.Sprintf("%s; headless agent ended (%s; output: %s)", p.Reason, how, log), now
		l.log.Warn("headless agent ended after it stopped without done", "plan", p.Name, "worker", w.ID, "how", e.Status)
		return l.verificationFailed(p, nil), state.Noted("failed, lead already told: " + p.Reason)
	}
	if msg := fleet.AgentError(filepath.Join(l.orchDir, orchdir.Logs, fleet.LogName(p.Name, p.Attempts))); msg != "" && how != "exit status 0" {
		// The agent said why it stopped (its StopFailure hook's event may
		// still be on its way): the plan fails as that event would fail it.
		p.State, p.Reason, p.Updated = state.PlanFailed, fmt.Sprintf("agent failed: %s (headless agent %s; output: %s)", msg, how, log), now
		l.log.Warn("headless agent failed", "plan", p.Name, "worker", w.ID, "how", e.Status, "said", msg)
		return l.verificationFailed(p, event.NewCallback(event.CallbackFailed, e.ID, p.Name, w.ID, p.Reason, "")), state.Noted("failed: " + p.Reason)
	}
	said := ""
	if how != "exit status 0" {
		if last := fleet.LastLogLine(filepath.Join(l.orchDir, orchdir.Logs, fleet.LogName(p.Name, p.Attempts))); last != "" {
			said = ": " + last
		}
	}
	p.State, p.Reason, p.Updated = state.PlanFailed, fmt.Sprintf("headless agent %s without orch-notify done%s (output: %s)", how, said, log), now
	l.log.Warn("headless agent ended without done", "plan", p.Name, "worker", w.ID, "how", e.Status)
	return l.verificationFailed(p, event.NewCallback(event.CallbackFailed, e.ID, p.Name, w.ID, p.Reason, "")), state.Noted("failed: " + p.Reason)
}
