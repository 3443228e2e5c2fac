package lead

import (
	"context"
	"fmt"
	"time"

	"github.com/orch-dev/orch/agent"
	"github.com/orch-dev/orch/event"
	"github.com/orch-dev/orch/internal/state"
	"github.com/orch-dev/orch/plans"
)

// Plans stop when their time is up. A plan's timeout (PLAN.md, or
// orch.yaml's plan_timeout) becomes a deadline recorded with its dispatch
// (state.Run.Deadline), and one timer per attempt (armDeadline) fires at
// it: also after a restart, from the recorded deadline (resumeDeadlines),
// at once if it passed meanwhile. The timer's firing becomes a timed-out
// record in the stream (deadlineDue), handled like any event, behind a
// done that came first: the plan is timed-out with how long it ran, the
// lead is told (WORKER-TIMED-OUT), and the worker, busy and marked
// Interrupting, has its agent interrupted (fleet.Interrupt: Escape and
// Ctrl-C into its pane, SIGINT to its headless process group). After
// InterruptGrace a second timer looks (interruptDue): a pane agent that is
// back (its pane alive; for an agent whose prompt orch knows, its prompt
// on screen) frees the worker; one that is not has its process killed,
// and its pane's death is handled like any; a headless process that has
// not exited by then is killed (its exit frees the worker).

// DefaultInterruptGrace is how long an interrupted agent has to come back
// before its process is ended.
const DefaultInterruptGrace = 5 * time.Second

// deadline is the one timer of a plan attempt's time limit.
type deadline struct {
	plan    string
	attempt int
}

// interruptCheck is the one timer after a worker's agent was interrupted.
type interruptCheck struct {
	worker string
	since  time.Time
}

// timeLimit is a plan's time limit: its own timeout, else orch.yaml's
// plan_timeout; 0 for none.
func (l *Loop) timeLimit(def *plans.Plan) time.Duration {
	if d := def.TimeLimit(); d > 0 {
		return d
	}
	return time.Duration(l.conf.PlanTimeout)
}

// armDeadline arms the timer of p's current attempt, if it has a deadline.
func (l *Loop) armDeadline(p *state.Run) {
	if p.Deadline.IsZero() {
		return
	}
	d := deadline{plan: p.Name, attempt: p.Attempts}
	time.AfterFunc(max(p.Deadline.Sub(l.cfg.Now()), 0), func() { send(l, l.deadlines, d) })
}

// resumeDeadlines re-arms, at start, the deadlines of the plans at work
// and the interrupts that were under way.
func (l *Loop) resumeDeadlines(ctx context.Context) {
	for _, p := range l.st.Plans {
		if p.State.Working() {
			l.armDeadline(p)
		}
	}
	for _, w := range l.st.Workers {
		if w.Interrupting == "" {
			continue
		}
		// A new pane (idle, or starting its agent: never one to interrupt,
		// nor to kill when its prompt is slow to come), or its process's
		// exit, settled it.
		if w.State != state.WorkerBusy || w.Plan != "" || w.Starting {
			w.Interrupting = ""
			continue
		}
		l.interrupt(ctx, w.ID)
	}
}

// deadlineDue puts a timed-out record into the stream for an attempt still
// at work when its timer fires; its id is the attempt's, so a second
// firing (after a restart) has one effect.
func (l *Loop) deadlineDue(d deadline) {
	p := l.st.Plans[d.plan]
	if p == nil || p.Attempts != d.attempt || !p.State.Working() {
		return
	}
	e := l.record(event.TimedOut, event.DerivedID(fmt.Sprintf("timed-out %s %d", p.Name, p.Attempts)), p.Name, p.Worker, "")
	e.Attempt = p.Attempts
	l.publishRecord(e)
}

// timedOut handles a timed-out record: the plan is timed-out, its worker
// busy while its agent is interrupted (once the record counts).
func (l *Loop) timedOut(e event.Event) (*event.Callback, state.Note) {
	p := l.st.Plans[e.Plan]
	if p == nil || p.Attempts != e.Attempt || !p.State.Working() || p.Deadline.IsZero() {
		return nil, state.Ignoring(fmt.Sprintf("attempt %d of %s is no longer at work", e.Attempt, e.Plan))
	}
	now := l.cfg.Now()
	limit, _ := time.ParseDuration(p.Limit)
	reason := fmt.Sprintf("ran %s, limit %s", ranFor(now.Sub(p.Deadline.Add(-limit))), p.Limit)
	p.State, p.Reason, p.Updated = state.PlanTimedOut, reason, now.UTC()
	if w := l.st.Worker(p.Worker); w != nil && w.Plan == p.Name && w.State != state.WorkerDead {
		l.free(w)
		if w.Remote != "" {
			// Its agent runs on another host, which has no way yet to be
			// told to interrupt it: the worker stays busy until the host
			// reports its process's end or its pane's death, and says so.
			w.State, w.Reason = state.WorkerBusy, fmt.Sprintf("%s timed out; its agent on host %s was not interrupted (orch does not interrupt another host's agents yet): busy until it ends", p.Name, w.Remote)
		} else {
			w.State, w.Interrupting, w.Reason = state.WorkerBusy, p.Name, "interrupting its agent: "+p.Name+" timed out"
			id := w.ID
			l.after(func() { l.interrupt(context.Background(), id) })
		}
	}
	l.log.Warn("plan timed out; interrupting its agent", "plan", p.Name, "worker", p.Worker, "reason", reason)
	cb := l.verificationFailed(p, event.NewCallback(event.CallbackTimedOut, e.ID, p.Name, p.Worker, reason, ""))
	return cb, state.Noted("timed-out: " + reason)
}

// ranFor says how long a plan ran: tenths of a second under a minute.
func ranFor(d time.Duration) string {
	if d < time.Minute {
		return fmt.Sprintf("%.1fs", d.Seconds())
	}
	return d.Round(time.Second).String()
}

// interrupt interrupts the agent of worker id and arms the look at it
// after the grace.
func (l *Loop) interrupt(ctx context.Context, id string) {
	w := l.st.Worker(id)
	if w == nil || w.Interrupting == "" {
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	if err := l.fleet.Interrupt(ctx, w); err != nil {
		l.log.Warn("interrupt", "worker", id, "plan", w.Interrupting, "err", err)
	} else {
		l.log.Info("agent interrupted", "worker", id, "plan", w.Interrupting)
	}
	c := interruptCheck{worker: id, since: w.Since}
	time.AfterFunc(l.cfg.InterruptGrace, func() { send(l, l.interrupts, c) })
}

// interruptDue looks at an interrupted worker once the grace is over: back
// at work it is free; otherwise its agent's process is ended.
func (l *Loop) interruptDue(ctx context.Context, c interruptCheck) {
	w := l.st.Worker(c.worker)
	if w == nil || w.Interrupting == "" || !w.Since.Equal(c.since) {
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	plan := w.Interrupting
	switch {
	case w.State != state.WorkerBusy || w.Plan != "":
		w.Interrupting = "" // settled otherwise meanwhile (a death, a new pane)
	case w.Headless:
		if w.PID == 0 {
			w.Interrupting, w.Reason, w.State = "", "", state.WorkerIdle
			break
		}
		// Its exit frees it (exited).
		l.log.Warn("headless agent still running after its interrupt; killing its process group", "worker", w.ID, "plan", plan, "pid", w.PID)
		if err := l.fleet.Kill(ctx, w); err != nil {
			l.log.Warn("kill", "worker", w.ID, "err", err)
		}
		w.Reason = fmt.Sprintf("process %d killed: it ran on after its interrupt (%s timed out)", w.PID, plan)
	case l.backAfterInterrupt(ctx, w):
		w.Interrupting, w.Reason, w.State, w.Since = "", "", state.WorkerIdle, l.cfg.Now().UTC()
		l.log.Info("interrupted agent is back; worker free", "worker", w.ID, "plan", plan)
	default:
		// Its process ends; the pane's death is handled as any worker's.
		l.log.Warn("interrupted agent did not come back; ending its process", "worker", w.ID, "plan", plan)
		if err := l.fleet.Kill(ctx, w); err != nil {
			l.log.Warn("kill", "worker", w.ID, "err", err)
		}
		w.Interrupting, w.Reason = "", "its agent did not come back after "+plan+" timed out: process killed"
	}
	if err := l.save(); err != nil {
		l.log.Error("save state", "err", err)
	}
}

// backAfterInterrupt says whether w's pane agent is back: its pane alive
// and, for an agent whose prompt orch knows, the prompt on its screen.
func (l *Loop) backAfterInterrupt(ctx context.Context, w *state.Worker) bool {
	if !l.fleet.PaneAlive(w) {
		return false
	}
	if !l.fleet.WaitsForPrompt(w.ID) || !l.fleet.ScreenWatch() {
		return true
	}
	kind, _ := l.fleet.ReadScreen(ctx, w)
	return kind == agent.ScreenPrompt
}
