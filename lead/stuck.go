package lead

import (
	"context"
	"fmt"
	"time"

	"github.com/orch-dev/orch/event"
	"github.com/orch-dev/orch/fleet"
	"github.com/orch-dev/orch/internal/state"
)

// A tmux server that stops answering. Every tmux command is bounded
// (tmux.CommandTimeout, 10 s, or its caller's shorter deadline), so a
// stopped or wedged server costs the loop one bounded wait, never a
// freeze. The first command killed at its deadline (whichever goroutine
// ran it; fleet.Stuck) is the one decision (tmuxStuck): the record says
// since when tmux is not answering (orch status shows it), every pane
// worker of this machine becomes a headless worker of the same agent
// profile in the same worktree, the programs of their panes are ended
// without asking tmux (fleet.StopPane: an agent the lead can no longer
// see must not go on with a plan given to another), and the plans those
// panes held go into the stream as lost records, behind whatever their
// agents sent before, so each is queued again once (lostPane,
// requeueOrFail) or harvested if its done was in. Queued plans then go
// to the headless workers as every headless dispatch does.
//
// There is no way back within this run: tmux is not probed to see whether
// it answers again (that would be a poll). orch serve started again
// brings a tmux fleet up (and clears the mark) if the server answers then;
// orch serve --headless goes on without tmux.

// goHeadless records, at now, that tmux stopped answering (why) and turns
// the pane workers of this machine into headless ones. It returns the
// plans their panes held, which the caller reports lost, and false when
// tmux was marked down already (nothing changes then).
func goHeadless(st *state.State, why string, now time.Time) ([]fleet.Lost, bool) {
	if st.TmuxDown != nil {
		return nil, false
	}
	st.TmuxDown = &state.TmuxDown{Since: now, Reason: why}
	var lost []fleet.Lost
	for _, w := range st.Workers {
		if w.Remote != "" || w.Headless {
			continue
		}
		had := w.Pane
		w.Pane, w.Headless, w.PID = "", true, 0
		w.Starting, w.Asked, w.Hooked, w.Interrupting = false, "", false, ""
		if w.State == state.WorkerDead {
			// A granted restart still comes (restartNow: headless, the
			// worker is usable again); one not granted stays dead.
			continue
		}
		p := st.Plans[w.Plan]
		held := p != nil && p.Worker == w.ID && p.State.Working()
		switch {
		case p != nil && p.Worker == w.ID && p.Preparing != 0, held && w.Refresh:
			// Its setup or baseline runs on without tmux, and its end
			// starts the plan headless; a fresh session decided and not
			// made yet is made headless (refresh).
			continue
		case held:
			lost = append(lost, fleet.Lost{Worker: w.ID, Pane: had, Plan: p.Name, Attempt: p.Attempts})
			continue // busy until the lost record is handled
		}
		w.State, w.Plan, w.Reason, w.Since = state.WorkerIdle, "", "", now
	}
	return lost, true
}

// tmuxStuck makes the decision once tmux did not answer (err): see
// above. It changes nothing when tmux was marked down already or the
// fleet has no panes.
func (l *Loop) tmuxStuck(err error) {
	if l.st.TmuxDown != nil || !l.fleet.Panes() {
		return
	}
	panes := map[string]string{}
	for _, w := range l.st.Workers {
		if w.Remote == "" && !w.Headless && w.Pane != "" {
			panes[w.ID] = w.Pane
		}
	}
	why := event.Clean(err.Error())
	lost, _ := goHeadless(l.st, why, l.cfg.Now().UTC())
	l.log.Error("tmux server not answering: the panes' workers run their plans as headless processes from now on (orch serve started again brings tmux back)",
		"err", err, "workers", len(panes), "plans_lost", len(lost))
	if err := l.save(); err != nil {
		l.log.Error("save state", "err", err)
	}
	for id, pane := range panes {
		pid, err := l.fleet.StopPane(id, pane)
		switch {
		case err != nil:
			l.log.Error("end the agent of a pane tmux no longer answers for", "worker", id, "pane", pane, "err", err)
		case pid != 0:
			l.log.Warn("ended the agent of a pane tmux no longer answers for", "worker", id, "pane", pane, "pid", pid)
		}
	}
	// What the ended agents spooled goes in before the lost records.
	l.ingestSpool(false)
	for _, lp := range lost {
		status := fmt.Sprintf("tmux server not answering; the agent in pane %s was ended and the plan goes to a headless worker", lp.Pane)
		e := l.record(event.Lost, event.DerivedID("tmux-lost "+lp.Worker+" "+lp.Pane+" "+lp.Plan+fmt.Sprint(lp.Attempt)), lp.Plan, lp.Worker, status)
		e.Pane, e.Attempt = lp.Pane, lp.Attempt
		l.publishRecord(e)
	}
}

// tmuxStuckNow is tmuxStuck followed by a scheduling pass, for the loop's
// select (a report on fleet.Stuck).
func (l *Loop) tmuxStuckNow(ctx context.Context, err error) {
	if l.st.TmuxDown != nil {
		return
	}
	l.tmuxStuck(err)
	l.schedule(ctx)
}
