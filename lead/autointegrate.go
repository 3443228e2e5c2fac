package lead

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/orch-dev/orch/event"
	"github.com/orch-dev/orch/integrate"
	"github.com/orch-dev/orch/internal/state"
)

// Integration by itself (integrate: auto in orch.yaml). After each turn the
// loop looks for approved plans (done with their gates passed, or
// verified) whose dependencies are integrated or approved too, and runs
// integrate.Run on them on a goroutine of its own, exactly as orch
// integrate would: one run at a time, in dependency order, under the
// integrate lock (waiting for an orch integrate typed meanwhile). Each
// outcome comes back on the integrations channel the loop selects on; the
// loop puts it into the stream as an integrated record (publishRecord),
// handled like orch integrate's (integrated: INTEGRATED or CONFLICT for orch
// wait), so a crash between the base branch moving and the record loses
// nothing: the plan is still approved at the next start, its branch is
// found in the base branch and recorded, never merged twice.

// integrationReport is one outcome of an auto run (rec), or its end.
type integrationReport struct {
	rec   *event.Event // an integrated record to publish
	end   bool
	names []string
	steps []integrate.Step
	err   error
}

// autoIntegrate starts an auto run if orch.yaml asks for them, none runs,
// the record is saved (integrate.Run reads it) and some plan is ready.
func (l *Loop) autoIntegrate(ctx context.Context) {
	if !l.conf.AutoIntegrate || !l.isolated() || l.integrating || l.unsaved || ctx.Err() != nil {
		return
	}
	names := l.toIntegrate()
	if len(names) == 0 {
		return
	}
	l.integrating = true
	l.log.Info("integrating by itself", "plans", strings.Join(names, ","))
	o := integrate.Options{Plans: names, GateTimeout: l.cfg.GateTimeout, WaitLock: true,
		Record: func(e event.Event) (bool, error) {
			send(l, l.integrations, integrationReport{rec: &e})
			return false, nil
		}}
	go func() {
		// The git it runs is never killed half-way (a killed git leaves
		// index.lock behind): a stopping loop stops waiting for it instead.
		steps, err := integrate.Run(context.WithoutCancel(ctx), l.cfg.Root, o)
		send(l, l.integrations, integrationReport{end: true, names: names, steps: steps, err: err})
	}()
}

// toIntegrate returns the plans an auto run takes: approved, not waiting
// for a record already sent, not held back after an earlier run could not
// take them, and each of whose dependencies is integrated or taken too. A
// plan in conflict or failed at integration stays out (and so do its
// dependents) until it is dispatched again or integrated by hand.
func (l *Loop) toIntegrate() []string {
	ok := map[string]bool{}
	for n, p := range l.st.Plans {
		if p.VerifyOf == "" && (p.State == state.PlanDone || p.State == state.PlanVerified) && !l.inFlight[n] {
			if at, held := l.integrateHeld[n]; !held || !at.Equal(p.Updated) {
				ok[n] = true
			}
		}
	}
	// Drop, until nothing changes, the plans with a dependency that is
	// neither integrated nor taken.
	for changed := true; changed; {
		changed = false
		for n := range ok {
			for _, d := range l.dependsOn(n) {
				if dp := l.st.Plans[d]; !ok[d] && (dp == nil || dp.State != state.PlanIntegrated) {
					delete(ok, n)
					changed = true
					break
				}
			}
		}
	}
	var out []string
	for n := range ok {
		out = append(out, n)
	}
	return out // integrate.Run puts them in dependency order
}

// dependsOn is what plan name depends on: what it was dispatched with, or
// its PLAN.md.
func (l *Loop) dependsOn(name string) []string {
	if p := l.st.Plans[name]; p != nil && p.Def != nil {
		return p.Def.DependsOn
	}
	if d, err := l.planDef(name); err == nil {
		return d.DependsOn
	}
	return nil
}

// integrationReported handles one report of an auto run.
func (l *Loop) integrationReported(ctx context.Context, r integrationReport) {
	if r.rec != nil {
		// The same outcome of the same attempt, found again after a crash,
		// is one record; the same outcome of a later attempt (dispatched
		// again, conflicting in the same files) is a new one, or the broker
		// would drop it as a copy and the plan would wait for it forever.
		attempt := 0
		if p := l.st.Plans[r.rec.Plan]; p != nil {
			attempt = p.Attempts
		}
		e := l.record(event.Integrated, event.DerivedID(fmt.Sprintf("integrated %s %d %s", r.rec.Plan, attempt, r.rec.Status)), r.rec.Plan, "", r.rec.Status)
		l.inFlight[e.Plan] = true
		l.fault("before-integrated-record") // the base branch has moved; the record is not out
		l.publishRecord(e)
		return
	}
	l.integrating = false
	if r.err != nil {
		// The whole run refused (a plan no longer approved, a detached
		// HEAD): these plans wait until their record changes.
		l.log.Error("integration by itself failed", "plans", strings.Join(r.names, ","), "err", r.err)
		for _, n := range r.names {
			l.holdIntegration(n)
		}
	}
	notIn := map[string]bool{}
	for _, s := range r.steps {
		if s.Outcome != integrate.Integrated {
			notIn[s.Plan] = true
		}
	}
	for _, s := range r.steps {
		// What was not recorded (a missing branch, a git error) is not
		// tried again by itself until the
		// plan changes: orch integrate tries it when asked.
		if s.Outcome == integrate.Skipped && slices.ContainsFunc(l.dependsOn(s.Plan), func(d string) bool { return notIn[d] }) {
			// Skipped for a dependency that did not go in: it waits for that
			// one (toIntegrate), and goes once it is in, by itself or by
			// orch integrate, with its own record unchanged.
			continue
		}
		if s.Moved {
			// Harvest commits came between its gates and the base branch's
			// move: the next run (after this report) tries it again.
			l.log.Info("base branch moved while integrating; trying again", "plan", s.Plan)
			continue
		}
		if s.Outcome != integrate.Integrated && s.Outcome != integrate.Conflict && !s.Gates {
			l.log.Warn("not integrated by itself; orch integrate tries again", "plan", s.Plan, "outcome", s.Outcome, "reason", s.Reason)
			l.holdIntegration(s.Plan)
		}
	}
	l.autoIntegrate(ctx)
}

// holdIntegration keeps plan name out of auto runs while its record stays
// as it is.
func (l *Loop) holdIntegration(name string) {
	if p := l.st.Plans[name]; p != nil {
		l.integrateHeld[name] = p.Updated
	}
}
