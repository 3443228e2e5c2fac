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
	"github.com/orch-dev/orch/git"
	"github.com/orch-dev/orch/internal/state"
	"github.com/orch-dev/orch/ledger"
	"github.com/orch-dev/orch/plans"
)

// Batched harvests. When several "done" events are already waiting, their
// RESULT.md files go into one commit and their ledger entries into one
// more, with one state save, instead of two commits and a save each. Every
// commit still names each event it carries (one Orch-Event trailer per
// event), so each harvest stays traceable and a redelivery after a crash
// finds its own earlier completion. Only plain harvests are batched: a plan
// with gates, verification, a metric command, or a verification plan goes
// through the one-event path.

// maxBatch bounds how many waiting messages are taken at once.
const maxBatch = 64

// trailerDepth is how far back the crash check looks for a batch's commit:
// a crash leaves it at most a few commits behind HEAD.
const trailerDepth = 200

// handleWaiting handles m and whatever else is already waiting, in order,
// harvesting runs of plain "done" events together.
func (l *Loop) handleWaiting(ctx context.Context, m jetstream.Msg) {
	msgs := []jetstream.Msg{m}
	for len(msgs) < maxBatch {
		select {
		case more := <-l.msgs:
			msgs = append(msgs, more)
			continue
		default:
		}
		break
	}
	var group []batchItem
	inGroup, groupWorkers := map[string]bool{}, map[string]bool{}
	flush := func() {
		if len(group) > 0 {
			l.harvestBatch(ctx, group)
			group, inGroup, groupWorkers = nil, map[string]bool{}, map[string]bool{}
			l.schedule(ctx)
		}
	}
	for _, m := range msgs {
		if it, ok := l.batchable(m); ok && !inGroup[it.e.Plan] {
			group = append(group, it)
			inGroup[it.e.Plan], groupWorkers[it.e.Worker] = true, true
			continue
		}
		// An event about another plan (a started, a dispatch) may go ahead of
		// the group's harvests; anything about a plan in the group, or about
		// a worker as a whole, waits for the group first.
		if !independent(m, inGroup, groupWorkers) {
			flush()
		}
		l.handleMsg(ctx, m)
		l.runPending()
		l.schedule(ctx) // as after any event: the next message may be about what this one dispatched
	}
	flush()
}

type batchItem struct {
	m jetstream.Msg
	e event.Event
}

// batchable says whether m is a plain harvest: a new done event, on its
// subject, from the worker holding a plan that has no gates, no
// verification and no metric command, with a readable RESULT.md.
func (l *Loop) batchable(m jetstream.Msg) (batchItem, bool) {
	e, err := event.Parse(m.Data())
	if err != nil || e.Kind != event.Done || m.Subject() != event.Subject(l.b.Prefix(), e.Kind) || plans.ValidateName(e.Plan) != nil {
		return batchItem{}, false
	}
	if _, handled := l.st.Handled[e.ID]; handled {
		return batchItem{}, false
	}
	p, _, why := l.holder(e)
	if why != "" || (p.State != state.PlanDispatched && p.State != state.PlanRunning) || p.VerifyOf != "" {
		return batchItem{}, false
	}
	def := l.def(p)
	if len(def.Acceptance) > 0 || def.Verify > 0 || (def.Bet != nil && def.Bet.MetricCmd != "") {
		return batchItem{}, false
	}
	if err := l.collect(context.Background(), e); err != nil {
		return batchItem{}, false // the one-event path says what is wrong
	}
	if _, err := plans.ReadResult(l.cfg.Root, e.Plan, MaxResult); err != nil {
		return batchItem{}, false
	}
	return batchItem{m: m, e: e}, true
}

// harvestBatch commits a group of plain harvests together. On any error the
// record is restored and every message is redelivered later, each then
// finding what was already committed.
func (l *Loop) harvestBatch(ctx context.Context, items []batchItem) {
	if len(items) == 1 {
		l.handleMsg(ctx, items[0].m)
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Minute)
	defer cancel()
	// A RESULT.md that is already committed as it is (an agent that commits
	// its own work) goes the one-event way, which knows that case.
	paths := make([]string, len(items))
	for i, it := range items {
		paths[i] = plans.RelResultPath(it.e.Plan)
	}
	changed, err := l.repo.Changed(ctx, paths...)
	if err != nil {
		for _, it := range items {
			l.handleMsg(ctx, it.m)
		}
		return
	}
	var rest []batchItem
	for _, it := range items {
		if changed[plans.RelResultPath(it.e.Plan)] {
			rest = append(rest, it)
		} else {
			l.handleMsg(ctx, it.m)
		}
	}
	if items = rest; len(items) < 2 {
		for _, it := range items {
			l.handleMsg(ctx, it.m)
		}
		return
	}
	before := l.st.Snapshot()
	err = l.withGitLock(func() error {
		done, err := l.repo.RecentTrailers(ctx, TrailerEvent, trailerDepth)
		if err != nil {
			return err
		}
		var paths, names, trailers []string
		for _, it := range items {
			if _, ok := done[it.e.ID]; !ok {
				paths = append(paths, plans.RelResultPath(it.e.Plan))
				names = append(names, it.e.Plan)
				trailers = append(trailers, fmt.Sprintf("%s: %s", TrailerEvent, it.e.ID))
			}
		}
		if len(paths) > 0 {
			l.fault("before-harvest-commit")
			msg := fmt.Sprintf("harvest %d plans: %s\n\n%s\n", len(names), subjectLine(strings.Join(names, ", ")), strings.Join(trailers, "\n"))
			if _, err := l.repo.Commit(ctx, msg, paths...); err != nil {
				return err
			}
			l.fault("after-harvest-commit")
			if done, err = l.repo.RecentTrailers(ctx, TrailerEvent, trailerDepth); err != nil {
				return err
			}
		}
		var ledgerTrailers []string
		entries := make([]ledger.Entry, len(items))
		for i, it := range items {
			sha := done[it.e.ID]
			if sha == "" {
				return fmt.Errorf("harvest %s: %w: its commit is not among the last %d", it.e.Plan, ErrNoHarvest, trailerDepth)
			}
			p := l.st.Plans[it.e.Plan]
			p.Status, p.Result, p.DoneEvent, p.DoneTime = it.e.Status, sha, it.e.ID, it.e.Time
			entries[i] = ledger.Entry{Plan: p.Name, Worker: p.Worker, Status: p.Status, Commit: sha, Time: p.DoneTime, Event: p.DoneEvent}
			if b := l.def(p).Bet; b != nil && b.Metric != "" {
				entries[i].Metric, entries[i].Baseline, entries[i].Target, entries[i].Direction, entries[i].CheckBy = b.Metric, b.Baseline, b.Target, b.Direction, b.CheckBy
			}
			ledgerTrailers = append(ledgerTrailers, fmt.Sprintf("%s: %s", TrailerLedger, it.e.ID))
		}
		got, err := ledger.AppendAll(l.cfg.Root, entries)
		if err != nil {
			return err
		}
		for i, it := range items {
			l.st.Plans[it.e.Plan].Ledger = got[i].ID
		}
		msg := fmt.Sprintf("ledger: %d entries\n\n%s\n", len(items), strings.Join(ledgerTrailers, "\n"))
		_, err = l.repo.Commit(ctx, msg, ledger.File)
		if errors.Is(err, git.ErrNothingToCommit) {
			err = nil
		}
		l.fault("after-ledger-commit")
		return err
	})
	if err != nil {
		// One bad item must not hold up the others: each goes the one-event
		// way, which commits what it can and retries the rest alone.
		l.st = before.Restore(l.st)
		l.log.Warn("batch harvest not committed; harvesting one by one", "events", len(items), "err", err)
		for _, it := range items {
			l.handleMsg(ctx, it.m)
		}
		return
	}
	now := l.cfg.Now().UTC()
	cbs := make([]*event.Callback, len(items))
	for i, it := range items {
		p := l.st.Plans[it.e.Plan]
		p.State, p.Reason, p.Updated = state.PlanDone, "", now
		l.free(l.st.Worker(it.e.Worker))
		cbs[i] = event.NewCallback(event.CallbackDone, it.e.ID, p.Name, p.Worker, p.Status, p.Result)
		l.st.Handled[it.e.ID] = &state.Handled{Kind: string(event.Done), Plan: it.e.Plan, Time: now, Callback: cbs[i], Note: "harvested " + short(p.Result) + " (batch)"}
		delete(l.st.Errors, it.e.ID)
	}
	names := make([]string, len(items))
	for i, it := range items {
		names[i] = it.e.Plan
	}
	sort.Strings(names)
	l.log.Info("harvested together", "plans", strings.Join(names, ","), "count", len(items))
	// Recorded first, then the callbacks, then recorded as published, then
	// the acks: a failed save rolls back nothing the lead has already seen,
	// and a redelivery, even past the broker's duplicate window, publishes
	// no callback twice.
	if err := l.save(); err != nil {
		l.st = before.Restore(l.st)
		l.log.Error("save state after a batch harvest; its events will be redelivered", "err", err)
		for _, it := range items {
			it.m.NakWithDelay(retryBackoff(it.m))
		}
		return
	}
	published := make([]bool, len(items))
	for i, it := range items {
		if err := l.publishCallback(cbs[i]); err != nil {
			l.log.Error("callback not published; the event will be redelivered", "plan", it.e.Plan, "err", err)
			continue
		}
		l.st.Handled[it.e.ID].Published, published[i] = true, true
	}
	l.fault("batch-before-published-save")
	if err := l.save(); err != nil {
		l.log.Error("save state", "err", err)
	}
	for i, it := range items {
		if !published[i] {
			it.m.NakWithDelay(retryBackoff(it.m))
			continue
		}
		l.fault("before-ack")
		// Acked without waiting for each confirmation: an ack lost in a
		// crash means a redelivery, which the record makes a no-op.
		if err := it.m.Ack(); err != nil {
			l.log.Warn("ack", "event", it.e.ID, "err", err)
		}
	}
	if err := l.nc.Flush(); err != nil {
		l.log.Warn("flush acks", "err", err)
	}
}

// independent says whether m can be handled before the harvests of the
// plans in group without changing any outcome.
func independent(m jetstream.Msg, group map[string]bool, workers map[string]bool) bool {
	e, err := event.Parse(m.Data())
	if err != nil {
		return true // refused whatever happens
	}
	switch e.Kind {
	case event.Started:
		return !group[e.Plan] && !workers[e.Worker]
	case event.Dispatch:
		return !group[e.Plan]
	}
	return false
}
