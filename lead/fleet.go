package lead

import (
	"context"
	"errors"
	"fmt"

	"github.com/orch-dev/orch/event"
	"github.com/orch-dev/orch/fleet"
	"github.com/orch-dev/orch/tmux"
)

// The loop's side of the fleet (package fleet): it brings the fleet up,
// and turns what the fleet reports (a pane's death, a headless exit, a
// setup's end, a plan lost at start) into records in the stream, handled
// like any event.

// fleetUp brings up the tmux fleet (fleet.Up) and records it; a worker
// whose new pane's agent is starting gets its start deadline.
func (l *Loop) fleetUp(ctx context.Context) error {
	started, err := l.fleet.Up(ctx, l.st, l.cfg.Workers)
	if errors.Is(err, tmux.ErrNotAnswering) {
		return fmt.Errorf("%w (make the tmux server answer again, or start orch serve --headless to go on without tmux)", err)
	}
	if err != nil {
		return err
	}
	if d := l.st.TmuxDown; d != nil {
		l.log.Info("tmux answers again: the fleet is back in panes", "down_since", d.Since)
		l.st.TmuxDown = nil
	}
	l.sessions.Started(started)
	return l.save()
}

// headlessUp records the headless workers (fleet.UpHeadless).
func (l *Loop) headlessUp() error {
	if err := l.fleet.UpHeadless(l.st, l.cfg.Workers); err != nil {
		return err
	}
	l.st.TmuxDown = nil // a headless fleet does not need it
	return l.save()
}

// reportLost publishes one "lost" record per plan the fleet found lost at
// start, behind everything already in the stream and the spool.
func (l *Loop) reportLost() {
	for _, lp := range l.fleet.TakeLost() {
		status := fmt.Sprintf("pane %s was gone when orch serve started", lp.Pane)
		if lp.Pane == "" {
			status = "orch serve stopped while starting its headless process (the agent never started)"
		}
		e := l.record(event.Lost, event.DerivedID("lost "+lp.Worker+" "+lp.Pane+" "+lp.Plan+" "+l.cfg.Now().String()), lp.Plan, lp.Worker, status)
		e.Pane, e.Attempt = lp.Pane, lp.Attempt
		l.publishRecord(e)
	}
}

// reportDeath turns an exited pane process into a died event in the stream,
// so it is handled (and recorded) like one from the tmux hook; the second of
// the two reports finds the worker dead already.
func (l *Loop) reportDeath(d fleet.Death) {
	l.paneEnded[d.Pane] = true
	e := l.record(event.Died, event.NewID(), "", d.Worker, fmt.Sprintf("pane %s exited (process %d)", d.Pane, d.PID))
	e.Pane = d.Pane
	l.publishRecord(e)
}

// reportSetup puts a setup's end into the stream as a prepared record with
// an id of its own (a run after a restart is another run, with its own
// outcome); the handler's check of the plan's state gives the attempt one
// effect, whichever record comes first.
func (l *Loop) reportSetup(s fleet.SetupDone) {
	status := "ok"
	if s.Err != nil {
		status = "failed: " + s.Err.Error()
	}
	e := l.record(event.Prepared, event.NewID(), s.Plan, s.Worker, status)
	e.Attempt = s.Attempt
	l.publishRecord(e)
}

// record is an event the lead makes about plan and worker, now.
func (l *Loop) record(kind event.Kind, id, plan, worker, status string) event.Event {
	return event.Record(kind, id, plan, worker, status, l.cfg.Now())
}
