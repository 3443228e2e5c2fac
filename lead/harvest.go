package lead

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/orch-dev/orch/event"
	"github.com/orch-dev/orch/fleet"
	"github.com/orch-dev/orch/git"
	"github.com/orch-dev/orch/harvest"
	"github.com/orch-dev/orch/internal/state"
	"github.com/orch-dev/orch/ledger"
	"github.com/orch-dev/orch/plans"
)

// The harvest path. Every done event goes through harvestDone, alone or
// with others: when several plain done events (no gates, no verification,
// no metric command: nothing between the harvest and the ledger entry) are
// waiting at once, their RESULT.md files go into one commit and their
// ledger entries into one more, with one state save, instead of two
// commits and a save each. A done that is not plain is a batch of one.
// Each commit names every event it carries, so each harvest stays
// traceable and a redelivery after a crash finds its own earlier work.

// maxBatch bounds how many waiting messages are taken at once.
const maxBatch = 64

// inbound is a message of the lead's consumer, parsed once.
type inbound struct {
	m   jetstream.Msg
	e   event.Event
	err error // why it is malformed; nil: e is valid, its plan name checked
}

func parse(m jetstream.Msg) inbound {
	e, err := event.Parse(m.Data())
	if err == nil && (e.Plan != "" || !event.PlanOptional(e.Kind)) {
		err = plans.ValidateName(e.Plan)
	}
	return inbound{m: m, e: e, err: err}
}

// handleWaiting handles m and whatever else is already waiting, in order,
// harvesting runs of plain "done" events together.
func (l *Loop) handleWaiting(ctx context.Context, m jetstream.Msg) {
	msgs := []inbound{parse(m)}
	for len(msgs) < maxBatch {
		select {
		case more := <-l.msgs:
			msgs = append(msgs, parse(more))
			continue
		default:
		}
		break
	}
	var group []inbound
	inGroup, groupWorkers := map[string]bool{}, map[string]bool{}
	flush := func() {
		if len(group) > 0 {
			l.harvestDone(ctx, group)
			group, inGroup, groupWorkers = nil, map[string]bool{}, map[string]bool{}
			l.runPending()
			l.schedule(ctx)
		}
	}
	for _, in := range msgs {
		if l.plainDone(in) && !inGroup[in.e.Plan] {
			group = append(group, in)
			inGroup[in.e.Plan], groupWorkers[in.e.Worker] = true, true
			continue
		}
		// An event about another plan (a started, a dispatch) may go ahead of
		// the group's harvests; anything about a plan in the group, or about
		// a worker as a whole, waits for the group first.
		if !independent(in, inGroup, groupWorkers) {
			flush()
		}
		l.handleMsg(ctx, in)
		l.runPending()
		l.schedule(ctx) // as after any event: the next message may be about what this one dispatched
	}
	flush()
}

// isDone says whether in is a well-formed done event on its own subject.
func (l *Loop) isDone(in inbound) bool {
	return in.err == nil && in.e.Kind == event.Done && in.m.Subject() == event.Subject(l.prefix, in.e) && l.hostRefusal(in.m, in.e) == ""
}

func (l *Loop) handledAlready(in inbound) bool {
	_, ok := l.st.Handled[in.e.ID]
	return ok
}

// plainDone says whether in is a new done event from the worker holding a
// plan with nothing between its harvest and its ledger entry: it may be
// harvested with others. It only looks.
func (l *Loop) plainDone(in inbound) bool {
	if !l.isDone(in) || l.handledAlready(in) {
		return false
	}
	p, _, why := l.holder(in.e)
	if why != "" || (p.State != state.PlanDispatched && p.State != state.PlanRunning) || p.VerifyOf != "" {
		return false
	}
	def := l.def(p)
	return len(def.Acceptance) == 0 && def.Verify == 0 && (def.Bet == nil || def.Bet.MetricCmd == "")
}

// independent says whether in can be handled before the harvests of the
// plans in group without changing any outcome.
func independent(in inbound, group map[string]bool, workers map[string]bool) bool {
	if in.err != nil {
		return true // refused whatever happens
	}
	switch in.e.Kind {
	case event.Started:
		return !group[in.e.Plan] && !workers[in.e.Worker]
	case event.Dispatch:
		return !group[in.e.Plan]
	}
	return false
}

// harvested is what harvesting one done event came to.
type harvested struct {
	in   inbound
	p    *state.Run
	w    *state.Worker
	def  *state.Def
	cb   *event.Callback
	note state.Note
}

// harvestDone harvests a batch of done events (new ones, each on its own
// subject, each about another plan), publishes their callbacks, records
// them with one state save and acknowledges them. When a batch of several
// cannot be committed, the record is restored and each is harvested alone:
// one bad item must not hold up the others. When one alone cannot, it is
// redelivered later, finding what was already committed.
func (l *Loop) harvestDone(ctx context.Context, group []inbound) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Minute)
	defer cancel()
	before, pending := l.st.Snapshot(), len(l.pending)
	hs, err := l.harvestAll(ctx, group)
	if err != nil {
		// Nothing of this batch was recorded: nothing may start from it.
		// Work of earlier events, kept in memory, still waits for a save.
		l.pending = l.pending[:pending]
		l.st = before.Restore(l.st)
		if len(group) > 1 {
			l.log.Warn("batch harvest not committed; harvesting one by one", "events", len(group), "err", err)
			for _, in := range group {
				l.harvestDone(ctx, []inbound{in})
			}
			return
		}
		l.notYet(group[0], err)
		return
	}
	now := l.cfg.Now().UTC()
	for _, h := range hs {
		if h.note.Kind == state.Ignored {
			l.log.Info(h.note.Text, "kind", h.in.e.Kind, "plan", h.in.e.Plan, "worker", h.in.e.Worker, "event", h.in.e.ID)
		}
		l.st.Handled[h.in.e.ID] = &state.Handled{Kind: string(event.Done), Plan: h.in.e.Plan, Time: now, Callback: h.cb, Note: h.note.Text}
		l.noteLast(h.in.e)
		delete(l.st.Errors, h.in.e.ID)
	}
	// The callbacks go out first, then one save records the harvests and
	// that their callbacks are out, then the acks. A crash between the
	// callbacks and the save means redelivery: each harvest is found done
	// (trailers, the ledger's event ids) and its callback is sent again
	// under the same message id, which the broker drops as a copy.
	published := make([]bool, len(hs))
	for i, h := range hs {
		if h.cb == nil {
			published[i] = true
			continue
		}
		if err := l.publishCallback(h.cb); err != nil {
			l.log.Error("callback not published; the event will be redelivered", "plan", h.in.e.Plan, "err", err)
			continue
		}
		l.st.Handled[h.in.e.ID].Published, published[i] = true, true
	}
	if len(hs) > 1 {
		l.fault("batch-before-published-save")
	}
	// The workers the harvests freed get their next plans in the same
	// save; the lines are typed after the acks.
	next, _ := l.assign(ctx)
	if err := l.save(); err != nil {
		// The callbacks are out: the record in memory keeps what the lead
		// was told. The events come again, and are acknowledged once a
		// save succeeds; nothing is typed before then.
		l.undo(next)
		l.log.Error("save state after a harvest; its events will be redelivered", "events", len(group), "err", err)
		for _, in := range group {
			in.m.NakWithDelay(retryBackoff(in.m))
		}
		return
	}
	for i, h := range hs {
		if !published[i] {
			h.in.m.NakWithDelay(retryBackoff(h.in.m))
			continue
		}
		l.fault("before-ack")
		if len(hs) == 1 {
			if err := l.ack(ctx, h.in.m); err != nil {
				// The effect is committed and recorded; a redelivery will be a no-op.
				l.log.Warn("ack", "event", h.in.e.ID, "err", err)
			}
			continue
		}
		// Acked without waiting for each confirmation: an ack lost in a
		// crash means a redelivery, which the record makes a no-op.
		if err := h.in.m.Ack(); err != nil {
			l.log.Warn("ack", "event", h.in.e.ID, "err", err)
		}
	}
	if len(hs) > 1 {
		if err := l.nc.Flush(); err != nil {
			l.log.Warn("flush acks", "err", err)
		}
	}
	l.runPending()
	l.handOver(ctx, next)
}

// notYet records why an event's effect could not be committed and has it
// redelivered after a back-off.
func (l *Loop) notYet(in inbound, err error) {
	l.st.Errors[in.e.ID] = event.Clean(err.Error())
	if err := l.save(); err != nil {
		l.log.Error("save state", "err", err)
	}
	l.log.Error("event not handled yet; it will be redelivered", "kind", in.e.Kind, "plan", in.e.Plan, "event", in.e.ID, "err", err)
	in.m.NakWithDelay(retryBackoff(in.m))
}

// harvestAll gives every done event of the batch its effect: the worker's
// work collected, the RESULT.md files committed together, then for each
// plan its gates started, its verification begun, or its ledger entry
// made. An error means the batch as a whole is to be tried again.
func (l *Loop) harvestAll(ctx context.Context, group []inbound) ([]*harvested, error) {
	// Collecting copies RESULT.md files into the work tree: not while the
	// repo is on another branch, where they would wait to be swept into
	// someone's commit.
	if err := l.harvester.OnBranch(ctx); err != nil {
		return nil, err
	}
	hs := make([]*harvested, len(group))
	var toCommit []*harvested
	now := l.cfg.Now().UTC()
	for i, in := range group {
		h := &harvested{in: in}
		hs[i] = h
		e := in.e
		p, w, why := l.holder(e)
		if why != "" {
			h.note = l.refuse(e, why)
			continue
		}
		l.revive(p, w)
		if !p.State.Working() {
			h.note = state.Ignoring(fmt.Sprintf("plan is already %s", p.State))
			continue
		}
		h.p, h.w, h.def = p, w, l.def(p)
		var skip []string
		var skipErr error
		if l.isolated() {
			skip, skipErr = l.includes(ctx)
		}
		if errors.Is(skipErr, fleet.ErrInclude) {
			// Redelivery would not help: the file must be fixed.
			l.fail(h, fmt.Sprintf("reported done (%s) but its work was not committed: %v", e.Status, skipErr), now)
			continue
		} else if skipErr != nil {
			return nil, skipErr
		}
		if w.Remote != "" {
			// The work is on the host: it comes over first (an error is
			// its host or its link failing: the event comes again).
			if err := l.fetchRemote(ctx, w, p); err != nil {
				return nil, err
			}
		}
		c, err := l.harvester.Collect(ctx, harvest.Item{Event: e, Dir: l.workDir(e.Worker)}, skip)
		if err != nil {
			return nil, err
		}
		if c.Tidy {
			if l.turn.tidy == nil {
				l.turn.tidy = map[string]bool{}
			}
			l.turn.tidy[e.Worker] = true
		}
		if c.Problem != "" {
			l.log.Warn("done without a usable RESULT.md: not harvested", "plan", e.Plan, "worker", e.Worker, "reason", c.Problem)
			l.fail(h, c.Problem, now)
			continue
		}
		toCommit = append(toCommit, h)
	}
	if len(toCommit) == 0 {
		return hs, nil
	}
	events := make([]event.Event, len(toCommit))
	for i, h := range toCommit {
		events[i] = h.in.e
	}
	shas, err := l.harvester.Results(ctx, events)
	if err != nil {
		return nil, err
	}
	var settling []*harvested
	for _, h := range toCommit {
		e, p := h.in.e, h.p
		sha := shas[e.ID]
		p.Status, p.Result, p.DoneEvent, p.DoneTime, p.Updated = e.Status, sha, e.ID, e.Time, now
		h.note = state.Noted("harvested " + git.Short(sha))
		if b := h.def.Bet; b != nil && b.MetricCmd != "" && p.AtHarvest == nil && p.AtHarvestErr == "" {
			// Measured off the loop (measure.go): its record starts the
			// gates, or makes the ledger entry. The worker stays busy: the
			// command runs in its checkout.
			p.State, p.Reason, p.Measuring = state.PlanVerifying, "metric command running", true
			j := l.measureJob(p, phaseHarvest, p.Attempts, p.Worker, b.MetricCmd)
			l.after(func() { l.gates.Measure(j) })
			delete(l.turn.tidy, p.Worker) // the metric command may leave files
			h.note.Text += "; metric command running"
			continue
		}
		if len(h.def.Acceptance) > 0 {
			// The worker stays busy while its gates run in its checkout: in a
			// shared tree its next plan would change what the gates test.
			p.State, p.Reason, p.Gates = state.PlanVerifying, "acceptance gates running", true
			j := l.gateJob(ctx, p, h.def.Acceptance)
			l.after(func() { l.gates.Start(j) })
			h.note.Text += "; gates running"
			continue
		}
		settling = append(settling, h)
	}
	l.logHarvests(toCommit)
	if err := l.settle(ctx, settling); err != nil {
		return nil, err
	}
	return hs, nil
}

// fail ends a harvest that cannot be: the plan failed with reason.
func (l *Loop) fail(h *harvested, reason string, now time.Time) {
	e, p := h.in.e, h.p
	p.State, p.Status, p.Reason, p.Updated = state.PlanFailed, e.Status, reason, now
	l.free(h.w)
	h.cb = l.verificationFailed(p, event.NewCallback(event.CallbackFailed, e.ID, e.Plan, e.Worker, reason, ""))
	h.note = state.Noted("failed: " + reason)
}

// logHarvests logs one line per harvest commit: "harvested" for a plan on
// its own, "harvested together" for plans that share one.
func (l *Loop) logHarvests(hs []*harvested) {
	var order []string
	by := map[string][]*harvested{}
	for _, h := range hs {
		if by[h.p.Result] == nil {
			order = append(order, h.p.Result)
		}
		by[h.p.Result] = append(by[h.p.Result], h)
	}
	for _, sha := range order {
		if g := by[sha]; len(g) == 1 {
			e := g[0].in.e
			l.log.Info("harvested", "plan", e.Plan, "worker", e.Worker, "commit", git.Short(sha), "status", e.Status)
		} else {
			names := make([]string, len(g))
			for i, h := range g {
				names[i] = h.p.Name
			}
			sort.Strings(names)
			l.log.Info("harvested together", "plans", strings.Join(names, ","), "count", len(g))
		}
	}
}

// settle finishes harvested plans whose gates (if any) passed: a
// verification plan's verdicts are read, a plan to be verified goes to its
// first round, and every other one gets its ledger entry, is done and its
// worker free. Plans harvested in one commit get their entries in one
// ledger commit.
func (l *Loop) settle(ctx context.Context, hs []*harvested) error {
	var order []string
	byCommit := map[string][]*harvested{}
	for _, h := range hs {
		p := h.p
		switch {
		case p.VerifyOf != "":
			l.free(h.w)
			cb, err := l.rounds.Verdicts(ctx, l.st, p)
			if err != nil {
				return err
			}
			h.cb = cb
		case h.def.Verify > 0:
			// Not done until someone else has tried to tear it apart: the
			// ledger entry waits for the verdict.
			l.free(h.w)
			cb, err := l.rounds.Start(ctx, l.st, p, h.def.Verify, false)
			if err != nil {
				return err
			}
			h.cb = cb
		default:
			if byCommit[p.Result] == nil {
				order = append(order, p.Result)
			}
			byCommit[p.Result] = append(byCommit[p.Result], h)
		}
	}
	for _, sha := range order {
		g := byCommit[sha]
		entries := make([]ledger.Entry, len(g))
		for i, h := range g {
			entries[i] = harvest.Entry(h.p, h.def)
		}
		got, err := l.harvester.Ledger(ctx, entries)
		if err != nil {
			return err
		}
		now := l.cfg.Now().UTC()
		for i, h := range g {
			p := h.p
			p.State, p.Reason, p.Ledger, p.LedgeredAttempt, p.Updated = state.PlanDone, "", got[i].ID, p.Attempts, now
			l.free(h.w)
			h.cb = event.NewCallback(event.CallbackDone, p.DoneEvent, p.Name, p.Worker, p.Status, p.Result)
		}
	}
	return nil
}

// def is what the plan was dispatched with (harvest.Def).
func (l *Loop) def(p *state.Run) *state.Def { return harvest.Def(l.cfg.Root, p) }
