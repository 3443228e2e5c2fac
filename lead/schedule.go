package lead

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"sort"
	"strconv"
	"time"

	"github.com/orch-dev/orch/event"
	"github.com/orch-dev/orch/fleet"
	"github.com/orch-dev/orch/gates"
	"github.com/orch-dev/orch/internal/state"
	"github.com/orch-dev/orch/plans"
	"github.com/orch-dev/orch/tmux"
)

// schedule hands ready plans to idle workers: highest priority first, then
// the oldest queued. A plan is ready when every plan it depends on is done.
// The hand-offs are recorded with one save before anything is typed, so a
// crash can leave a plan marked dispatched but never typed (found by its
// missing "started"), but never typed twice.
func (l *Loop) schedule(ctx context.Context) {
	defer l.deliverNudges(ctx) // orch send's lines, once the plans are handed out
	hs, changed := l.assign(ctx)
	if len(hs) == 0 && !changed && !l.unsaved {
		if len(l.st.Outbox) > 0 {
			l.flushOutbox() // told after an earlier pass's save failed
		}
		return
	}
	if err := l.save(); err != nil {
		l.log.Error("save state before dispatch; nothing typed", "err", err)
		l.undo(hs)
		if !l.retryArmed {
			// No message may come to try again: one wake-up does (a
			// one-shot deadline, not a poll).
			l.retryArmed = true
			time.AfterFunc(saveRetry, func() { send(l, l.wake, struct{}{}) })
		}
		return
	}
	l.handOver(ctx, hs)
}

// saveRetry is when a scheduling pass whose save failed runs again.
const saveRetry = 2 * time.Second

// assign decides the next dispatches in the record (see assignTo) and
// says whether the record changed otherwise (a plan held with a reason).
// Nothing reaches a worker and nothing is saved: the caller saves, then
// hands over (or undoes) what it returns. A handler's event and the
// dispatches that follow it share that one save.
func (l *Loop) assign(ctx context.Context) (hs []*handoff, changed bool) {
	if !l.fleet.Panes() && !l.cfg.Headless && len(l.hosts) == 0 {
		return nil, false
	}
	if wait := l.setupHoldUntil.Sub(l.cfg.Now()); wait > 0 && l.isolated() && l.conf.Setup != "" {
		// A setup just failed: new ones wait out the back-off; one timer
		// wakes the scheduler then (a one-shot deadline, not a poll).
		if !l.holdArmed {
			l.holdArmed = true
			time.AfterFunc(wait, func() { send(l, l.wake, struct{}{}) })
		}
		return nil, false
	}
	changed = l.restack()
	held := map[string]bool{} // plans that cannot go this pass
	for {
		idle := l.st.IdleWorkers()
		if len(idle) == 0 {
			return hs, changed
		}
		p, w := l.nextReady(idle, held)
		if p == nil {
			return hs, changed
		}
		// --stagger: at most one dispatch per interval, so that results
		// (and reviews) do not all arrive in one burst. One timer wakes
		// the scheduler when the next dispatch may go.
		if wait := l.nextDispatch.Sub(l.cfg.Now()); l.cfg.Stagger > 0 && wait > 0 {
			if !l.staggerArmed {
				l.staggerArmed = true
				time.AfterFunc(wait, func() { send(l, l.wake, struct{}{}) })
			}
			return hs, changed
		}
		out, h := l.assignTo(ctx, p, w)
		if h != nil {
			hs = append(hs, h)
		} else {
			changed = true
		}
		switch out {
		case stop:
			return hs, changed // it could not go out; the next event tries again, no spinning
		case holdPlan:
			held[p.Name] = true // the others may still go; each turn holds one plan
		}
		// Dispatched, or this worker was taken out of use (its own worktree
		// refused), or this plan held: go on. Each turn uses up one idle
		// worker or one plan, so the pass ends.
		if l.cfg.Stagger > 0 && (p.State == state.PlanDispatched || p.Preparing != 0) {
			l.nextDispatch = l.cfg.Now().Add(l.cfg.Stagger)
		}
	}
}

type candidate struct {
	p        *state.Run
	priority int
	agents   plans.Agents // the plan's agent: list (routing)
}

// nextReady returns the best ready plan and the worker to take it.
func (l *Loop) nextReady(idle []*state.Worker, held map[string]bool) (*state.Run, *state.Worker) {
	var ready []candidate
	for _, p := range l.st.Plans {
		if p.State != state.PlanQueued || held[p.Name] || p.Preparing != 0 {
			continue
		}
		def, err := l.planDef(p.Name)
		if err != nil {
			l.log.Warn("queued plan unreadable", "plan", p.Name, "err", err)
			continue
		}
		if len(plans.Ready(def, l.planState)) > 0 {
			continue
		}
		ready = append(ready, candidate{p: p, priority: def.Priority, agents: def.Agent})
	}
	sort.Slice(ready, func(i, j int) bool {
		a, b := ready[i], ready[j]
		if a.priority != b.priority {
			return a.priority > b.priority
		}
		if !a.p.Queued.Equal(b.p.Queued) {
			return a.p.Queued.Before(b.p.Queued)
		}
		return a.p.Name < b.p.Name
	})
	for _, c := range ready {
		for _, w := range idle {
			if l.eligible(c.p, c.agents, w) {
				return c.p, w
			}
		}
	}
	return nil, nil
}

// eligible says whether w may take p: the --to target, a worker of the
// agent p is routed to (state.Fits), never a worker p excludes (a
// verification's author), and not one it would rather avoid (earlier
// verifiers) while another live worker could take it.
func (l *Loop) eligible(p *state.Run, agents []string, w *state.Worker) bool {
	if p.Target != "" && p.Target != w.ID {
		return false
	}
	if !l.st.Fits(p, agents, w) {
		return false
	}
	if slices.Contains(p.Exclude, w.ID) {
		return false
	}
	if slices.Contains(p.Avoid, w.ID) {
		for _, o := range l.st.Workers {
			if o.State != state.WorkerDead && !slices.Contains(p.Exclude, o.ID) && !slices.Contains(p.Avoid, o.ID) && l.st.Fits(p, agents, o) {
				return false // someone fresh exists: wait for them
			}
		}
	}
	return true
}

// planDef is the definition of a queued plan, parsed once and kept while
// PLAN.md stays as it was (one stat per pass, no parse): an edit to a
// queued plan counts at the next pass, as orch status shows it.
func (l *Loop) planDef(name string) (*plans.Plan, error) {
	fi, err := os.Stat(plans.PlanPath(l.cfg.Root, name))
	if c, ok := l.defs[name]; ok && err == nil && fi.ModTime().Equal(c.mtime) && fi.Size() == c.size {
		return c.def, nil
	}
	d, err := plans.Load(l.cfg.Root, name)
	if err != nil {
		return nil, err
	}
	l.keepDef(name, d)
	return d, nil
}

// parsedDef is a plan definition and the PLAN.md it was parsed from.
type parsedDef struct {
	def   *plans.Plan
	mtime time.Time
	size  int64
}

// keepDef keeps d, just parsed from name's PLAN.md, for planDef.
func (l *Loop) keepDef(name string, d *plans.Plan) {
	fi, err := os.Stat(plans.PlanPath(l.cfg.Root, name))
	if err != nil {
		return
	}
	if l.defs == nil {
		l.defs = map[string]parsedDef{}
	}
	l.defs[name] = parsedDef{def: d, mtime: fi.ModTime(), size: fi.Size()}
}

func (l *Loop) planState(name string) string {
	if p := l.st.Plans[name]; p != nil {
		return string(p.State)
	}
	return ""
}

// What the scheduler does after a dispatch attempt.
type outcome int

const (
	goOn     outcome = iota // p went out, or w alone was at fault and is out of use
	holdPlan                // p cannot go now (its reason says why); others may
	stop                    // nothing more this pass
)

// A handoff is a plan given to a worker in the record and not carried out
// yet: once the record is saved, its line is typed, its process started
// or its setup run (handOver); if the save fails, undo puts the record
// back as it was.
type handoff struct {
	p, parent   *state.Run // parent: the plan p verifies, if any
	w           *state.Worker
	was, wasPar state.Run
	wasW        state.Worker
	setup       bool              // the setup command runs first
	measure     *gates.MeasureJob // the bet's baseline is measured first
	next        time.Time         // the stagger's next dispatch before this one
}

// undo takes back hand-offs whose record could not be saved, and the
// stagger interval they took.
func (l *Loop) undo(hs []*handoff) {
	for i := len(hs) - 1; i >= 0; i-- {
		h := hs[i]
		*h.p, *h.w = h.was, h.wasW
		if h.parent != nil {
			*h.parent = h.wasPar
		}
		l.nextDispatch = h.next
	}
}

// dispatchTo hands p to w at once: assigned, saved, handed over.
func (l *Loop) dispatchTo(ctx context.Context, p *state.Run, w *state.Worker) outcome {
	out, h := l.assignTo(ctx, p, w)
	var hs []*handoff
	if h != nil {
		hs = append(hs, h)
	}
	if err := l.save(); err != nil {
		l.log.Error("save state before dispatch; nothing typed", "plan", p.Name, "err", err)
		l.undo(hs)
		return stop
	}
	l.handOver(ctx, hs)
	return out
}

// assignTo gives p to w in the record and says how the scheduler goes on.
// The worktree is readied here; the line is typed, the headless process
// started or the setup command run only by handOver, after the save. A nil handoff means p did not go (its
// record says why).
func (l *Loop) assignTo(ctx context.Context, p *state.Run, w *state.Worker) (outcome, *handoff) {
	if _, err := fleet.DispatchLine(p.Name, l.fleet.NotifyBin()); err != nil { // names are validated on the way in; this is a second guard
		p.State, p.Reason = state.PlanFailed, err.Error()
		return stop, nil
	}
	def, err := l.planDef(p.Name)
	if err != nil {
		p.State, p.Reason = state.PlanFailed, "cannot dispatch: "+err.Error()
		id := fmt.Sprintf("load-%s-%d-%d", p.Name, p.Attempts, l.cfg.Now().UnixNano())
		l.st.Outbox = append(l.st.Outbox, l.verificationFailed(p, event.NewCallback(event.CallbackFailed, id, p.Name, "", p.Reason, "")))
		return stop, nil // saved and told with the pass (handOver)
	}
	h := &handoff{p: p, w: w, was: *p, wasW: *w, parent: l.st.Plans[p.VerifyOf], next: l.nextDispatch}
	if h.parent != nil {
		h.wasPar = *h.parent
	}
	p.Def = state.DefOf(def)
	delete(l.defs, p.Name) // this attempt holds it now; the next one reads PLAN.md again
	if l.isolated() && p.Preparing == 0 {
		// Git is never killed half-way (a stopping loop waits for it): a
		// killed git leaves index.lock behind.
		pctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Minute)
		err := l.prepare(pctx, p, w)
		cancel()
		if err != nil {
			return l.prepareFailed(p, w, err), nil
		}
		if l.conf.Setup != "" && w.Remote == "" {
			// (A host's worker gets no setup yet: named in the README.)
			// The setup command runs off the loop; its end is a prepared
			// record, which dispatches the plan (or fails it).
			now := l.cfg.Now().UTC()
			p.SetupRuns++
			p.Preparing, p.Worker, p.Reason, p.Updated = p.SetupRuns, w.ID, "setup running in "+w.ID+"'s worktree", now
			w.State, w.Plan, w.Since = state.WorkerBusy, p.Name, now
			h.setup = true
			return goOn, h
		}
	}
	// A bet with a metric command gets its baseline measured by the lead
	// loop, before the worker can change anything, off the loop (measure.go);
	// a second attempt keeps the first baseline (the first worker may have
	// changed things).
	if b := def.Bet; b != nil && b.MetricCmd != "" && p.Baseline == nil && p.BaselineErr == "" {
		now := l.cfg.Now().UTC()
		p.SetupRuns++
		p.Preparing, p.Measuring, p.Worker, p.Reason, p.Updated = p.SetupRuns, true, w.ID, "measuring the bet's baseline in "+w.ID+"'s checkout", now
		w.State, w.Plan, w.Since = state.WorkerBusy, p.Name, now
		j := l.measureJob(p, phaseBaseline, p.Preparing, w.ID, b.MetricCmd)
		h.measure = &j
		return goOn, h
	}
	p.Preparing, p.Measuring = 0, false
	now := l.cfg.Now().UTC()
	p.State, p.Worker, p.Reason, p.Updated, p.Resent, p.Unacked = state.PlanDispatched, w.ID, "", now, false, false
	p.Typed, p.Enters, p.Echo, p.Waiting, p.IdleEvent = false, 0, 0, false, ""
	p.Deadline, p.Limit = time.Time{}, ""
	if d := l.timeLimit(def); d > 0 {
		// From the dispatch: the setup and the baseline are the lead's time.
		p.Deadline, p.Limit = now.Add(d), d.String()
	}
	p.Attempts++
	w.State, w.Plan, w.Since = state.WorkerBusy, p.Name, now
	if parent := h.parent; parent != nil && parent.Verification != nil {
		v := parent.Verification
		parent.Verifier, parent.Reason = w.ID, fmt.Sprintf("verification round %d of %d: %s verifying (%s)", v.Round, v.Rounds, w.ID, p.Name)
	}
	return goOn, h
}

// handOver carries out hand-offs whose record is saved: each setup
// command starts, each headless process starts (its pid saved before it is
// let go: a second save), each line is typed.
func (l *Loop) handOver(ctx context.Context, hs []*handoff) {
	var stuck error
	defer func() {
		if stuck != nil {
			l.tmuxStuck(stuck)
			if l.st.TmuxDown == nil {
				return // no decision made: a pass now would fail the same way at once
			}
			select { // one scheduling pass gives the queued plans to the headless workers
			case l.wake <- struct{}{}:
			default:
			}
		}
	}()
	for _, h := range hs {
		p, w := h.p, h.w
		switch {
		case h.setup:
			l.fleet.RunSetup(p.Name, p.Preparing, w.ID)
			continue
		case h.measure != nil:
			l.gates.Measure(*h.measure)
			continue
		case w.Remote != "":
			if err := l.startRemote(w, p); err != nil {
				l.remoteStartFailed(h, err)
				continue
			}
		case w.Headless:
			// The attempt is recorded: the process starts, held at its gate
			// until its pid is saved too.
			line, _ := fleet.DispatchLine(p.Name, l.fleet.NotifyBin())
			if err := l.startHeadless(w, p.Name, line); err != nil {
				// Starting a process fails for reasons of this machine (a log
				// file that cannot be opened, fork), not of the worker: the
				// plan waits, with the reason, and the worker stays usable.
				l.log.Error("headless start failed; plan queued again", "plan", p.Name, "worker", w.ID, "err", err)
				p.State, p.Worker, p.Reason = state.PlanQueued, "", "headless start on "+w.ID+" failed: "+err.Error()
				p.Attempts--
				w.State, w.Plan, w.PID = state.WorkerIdle, "", 0
				h.unverify()
				l.nextDispatch = h.next
				l.save()
				continue
			}
		default:
			err := stuck // tmux did not answer earlier in this pass: nothing more is typed
			if err == nil {
				err = l.sessions.TypeLine(ctx, l.st, w, p.Name)
			}
			if errors.Is(err, tmux.ErrNotAnswering) {
				// Not the worker's fault: the plan goes back as it was (no
				// attempt), and, once this pass is over, the panes' workers
				// become headless ones (stuck.go).
				stuck = err
				l.log.Error("dispatch failed: tmux not answering; plan queued again for a headless worker", "plan", p.Name, "worker", w.ID, "err", err)
				p.State, p.Worker, p.Reason = state.PlanQueued, "", "tmux server not answering; goes to a headless worker"
				p.Attempts--
				w.State, w.Plan = state.WorkerIdle, ""
				h.unverify()
				l.nextDispatch = h.next
				l.save()
				continue
			}
			if err != nil {
				l.log.Error("dispatch failed; worker marked dead, plan queued again", "plan", p.Name, "worker", w.ID, "err", err)
				// Nothing reached a worker: this was no attempt.
				p.State, p.Worker, p.Reason = state.PlanQueued, "", "dispatch to "+w.ID+" failed: "+err.Error()
				p.Attempts--
				w.State, w.Plan, w.Reason = state.WorkerDead, "", err.Error()
				h.unverify()
				l.nextDispatch = h.next
				l.save()
				continue
			}
		}
		l.armDeadline(p)
		l.log.Info("dispatched", "plan", p.Name, "worker", w.ID, "pane", w.Pane)
	}
	if len(l.st.Outbox) > 0 && !l.unsaved {
		l.flushOutbox() // what the pass decided to tell the lead (prepareFailed), once saved
	}
}

// unverify takes back what a verification round's hand-off said of its
// parent, when the round did not go out after all.
func (h *handoff) unverify() {
	if h.parent != nil {
		h.parent.Verifier, h.parent.Reason = h.wasPar.Verifier, h.wasPar.Reason
	}
}

func fmtValue(v *float64) string {
	if v == nil {
		return "none"
	}
	return strconv.FormatFloat(*v, 'g', -1, 64)
}
