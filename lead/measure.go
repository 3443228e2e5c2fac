package lead

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	"github.com/orch-dev/orch/event"
	"github.com/orch-dev/orch/gates"
	"github.com/orch-dev/orch/internal/state"
)

// A bet's metric command (metric_cmd) is measured by the lead loop twice,
// in the worker's checkout, never on the loop's goroutine: other events go
// on while it runs (up to 10 s), as they do while gates run.
//
//   - Its baseline, before the line is typed (assignTo): the plan stays
//     queued and its worker busy, Preparing naming the run and Measuring
//     set, as while a setup command runs; the measured record dispatches it
//     (dispatchPrepared).
//   - After the harvest (harvestAll): the plan is verifying with Measuring
//     set, its worker busy; the measured record starts its gates, or makes
//     its ledger entry and says WORKER-DONE (finish).
//
// The command runs in package gates (Runner.Measure), its process group
// tracked; its outcome goes into the stream as a measured record (one id
// per run), handled like any event. A lead loop that stops meanwhile kills
// it, and the next one measures again (resumeSetups for a baseline,
// resumeMeasures after a harvest): the record of either run has one effect.

// The phases of a measurement (gates.MeasureJob.Phase).
const (
	phaseBaseline = "baseline"
	phaseHarvest  = "harvest"
)

// measureJob is the run of p's metric command cmd on worker in phase.
func (l *Loop) measureJob(p *state.Run, phase string, run int, worker, cmd string) gates.MeasureJob {
	return gates.MeasureJob{Plan: p.Name, Phase: phase, Run: run, Worker: worker, Dir: l.workDir(worker), Cmd: cmd, As: l.fleet.User(worker)}
}

// publishMeasured puts a measurement's outcome into the stream.
func (l *Loop) publishMeasured(m gates.Measured) {
	status := m.Phase + " " + fmtValue(m.Value)
	if m.Value == nil {
		status = m.Phase + " error: " + m.Err
	}
	e := l.record(event.Measured, event.DerivedID(fmt.Sprintf("measured %s %s %d", m.Plan, m.Phase, m.Run)), m.Plan, m.Worker, status)
	e.Attempt = m.Run
	l.publishRecord(e)
}

// resumeMeasures measures again the metrics that were being measured after
// a harvest when the last lead loop stopped.
func (l *Loop) resumeMeasures() {
	for _, p := range l.st.Plans {
		if p.State != state.PlanVerifying || !p.Measuring || p.Def == nil || p.Def.Bet == nil {
			continue
		}
		l.gates.Measure(l.measureJob(p, phaseHarvest, p.Attempts, p.Worker, p.Def.Bet.MetricCmd))
	}
}

// measured handles a measured record: the value (or its error) is kept,
// and the plan goes on where it waited for it.
func (l *Loop) measured(ctx context.Context, e event.Event) (*event.Callback, state.Note, error) {
	phase, rest, _ := strings.Cut(e.Status, " ")
	var v *float64
	why, failed := strings.CutPrefix(rest, "error: ")
	if !failed {
		why = ""
		f, err := strconv.ParseFloat(rest, 64)
		if err != nil {
			return nil, l.refuse(e, fmt.Sprintf("measured record with status %q", e.Status)), nil
		}
		v = &f
	}
	p := l.st.Plans[e.Plan]
	switch phase {
	case phaseBaseline:
		if p == nil || p.State != state.PlanQueued || !p.Measuring || p.Preparing != e.Attempt || p.Worker != e.Worker {
			return nil, state.Ignoring("no baseline being measured for this run"), nil
		}
		p.Measuring = false
		w := l.st.Worker(e.Worker)
		if w == nil || w.State == state.WorkerDead || w.Plan != p.Name {
			p.DropSetup()
			return nil, state.Noted("worker gone: plan queued again"), nil
		}
		p.Baseline, p.BaselineErr = v, why
		l.log.Info("baseline measured", "plan", p.Name, "value", fmtValue(v), "error", why)
		// Dispatched once this record counts as handled: assignTo finds
		// the baseline in.
		name := p.Name
		l.after(func() { l.dispatchPrepared(ctx, name) })
		return nil, state.Noted("baseline measured"), nil
	case phaseHarvest:
		if p == nil || p.State != state.PlanVerifying || !p.Measuring || p.Attempts != e.Attempt {
			return nil, state.Ignoring("no metric being measured for this attempt"), nil
		}
		p.Measuring = false
		p.AtHarvest, p.AtHarvestErr = v, why
		l.log.Info("metric measured after the harvest", "plan", p.Name, "value", fmtValue(v), "error", why)
		def := l.def(p)
		if len(def.Acceptance) > 0 {
			p.Reason, p.Gates = "acceptance gates running", true
			j := l.gateJob(ctx, p, def.Acceptance)
			l.after(func() { l.gates.Start(j) })
			return nil, state.Noted("measured; gates running"), nil
		}
		cb, err := l.finish(ctx, p, def, l.st.Worker(p.Worker))
		if err != nil {
			return nil, state.Note{}, err
		}
		if cb != nil {
			cb.Event = e.ID
		}
		return cb, state.Noted("measured"), nil
	}
	return nil, l.refuse(e, fmt.Sprintf("measured record of phase %q", phase)), nil
}
