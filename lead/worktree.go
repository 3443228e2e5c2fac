package lead

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/orch-dev/orch/config"
	"github.com/orch-dev/orch/event"
	"github.com/orch-dev/orch/fleet"
	"github.com/orch-dev/orch/gates"
	"github.com/orch-dev/orch/git"
	"github.com/orch-dev/orch/integrate"
	"github.com/orch-dev/orch/internal/state"
	"github.com/orch-dev/orch/plans"
)

// Worktree isolation. Each worker wN edits its own linked git worktree,
// .orch/worktrees/wN; a plan is worked on a branch orch/<plan> made from a
// recorded base commit (the base branch's head when it is dispatched; for a
// verification round, the head of the verified plan's branch, so the
// verifier sees the work). At the harvest the lead commits what the worker
// left in its worktree onto that branch and copies RESULT.md into the repo,
// where it is committed on the base branch as in shared isolation. The code
// stays on the branch until orch integrate merges it.

// isolated reports whether workers edit their own worktrees.
func (l *Loop) isolated() bool { return l.conf.Isolation == config.Worktree }

// workDir is where worker id edits: its worktree, or the repo itself in
// shared isolation.
func (l *Loop) workDir(id string) string { return fleet.WorkDir(l.cfg.Root, l.conf.Isolation, id) }

// prepare readies worker w's worktree for plan p (fleet.Prepare) and
// records the plan's base commit.
func (l *Loop) prepare(ctx context.Context, p *state.Run, w *state.Worker) error {
	verifies := ""
	if parent := l.st.Plans[p.VerifyOf]; parent != nil {
		verifies = parent.Name
	}
	includes, err := l.includes(ctx)
	if err != nil {
		return err
	}
	tidy := l.turn.tidy[w.ID]
	delete(l.turn.tidy, w.ID) // once: the new plan's work starts now
	got, err := l.fleet.Prepare(ctx, fleet.Job{Plan: p.Name, Worker: w.ID, Base: p.Base, Verifies: verifies, Includes: includes, Tidy: tidy, Deps: l.deps(p)})
	if err != nil {
		return err
	}
	p.Base, p.Unmerged = got.Base, nil
	if got.Stack != nil {
		p.Stack = got.Stack
	}
	return nil
}

// deps are p's dependencies as its branch is stacked on them (fleet
// Prepare), from the definition it is dispatched with (p.Def).
func (l *Loop) deps(p *state.Run) []fleet.Dep {
	if p.Def == nil || p.VerifyOf != "" {
		return nil
	}
	var out []fleet.Dep
	for _, name := range p.Def.DependsOn {
		d := fleet.Dep{Plan: name}
		if dp := l.st.Plans[name]; dp != nil {
			d.Attempt, d.Integrated = dp.Attempts, dp.State == state.PlanIntegrated
		}
		out = append(out, d)
	}
	return out
}

// prepareFailed records a plan whose worktree could not be readied, and
// says whether the scheduler may try the next worker. A failed setup
// command, a bad .worktreeinclude, a branch held by someone's checkout or
// a plan folder that cannot be brought over fail the plan (the user must
// act; it would fail on any worker). Git refusing in this worker's own
// worktree (a stale lock, a broken checkout) takes the worker out of use,
// with the reason, and the plan goes to the next worker. Anything else
// (the repo itself, another worktree) keeps the plan queued with the
// reason, every worker as it was, until the next event.
func (l *Loop) prepareFailed(p *state.Run, w *state.Worker, err error) outcome {
	reason := event.Clean("worktree for " + w.ID + ": " + err.Error())
	now := l.cfg.Now().UTC()
	deps := l.deps(p) // from the definition, let go of here
	p.Def = nil
	// Ids unique per occurrence: the same refusal after a restart must
	// wake the lead again, not be dropped as a copy.
	stamp := now.UnixNano()
	next := holdPlan
	var ce *git.ConflictError
	switch {
	case errors.Is(err, fleet.ErrStackConflict) && errors.As(err, &ce):
		// Its dependencies' work cannot be combined: it does not start
		// (nothing typed, the worker stays free) until one of them
		// changes (restack) or it is dispatched again.
		p.State, p.Unmerged, p.Updated = state.PlanConflict, ce.Files, now
		p.Stack = nil
		var names []string
		for _, d := range deps {
			names = append(names, d.Plan)
			p.Stack = append(p.Stack, state.StackDep{Plan: d.Plan, Attempt: d.Attempt})
		}
		p.Reason = "its dependencies' branches (" + strings.Join(names, ", ") + ") conflict in " + strings.Join(ce.Files, ", ") +
			": dispatch one of them again to agree with the others (" + p.Name + " follows by itself once it is done), or merge one's branch into another's by hand and orch dispatch " + p.Name
		l.st.Outbox = append(l.st.Outbox, event.NewCallback(event.CallbackConflict, fmt.Sprintf("stack-%s-%d", p.Name, stamp), p.Name, "", strings.Join(ce.Files, ", "), ""))
		l.log.Warn("dependencies conflict: plan not dispatched", "plan", p.Name, "files", strings.Join(ce.Files, ","))
	case errors.Is(err, gates.ErrSetup), errors.Is(err, fleet.ErrInclude), errors.Is(err, fleet.ErrBranchHeld), errors.Is(err, fleet.ErrPlanContent):
		p.Attempts++
		p.State, p.Reason, p.Worker, p.Updated = state.PlanFailed, reason, w.ID, now
		cb := event.NewCallback(event.CallbackFailed, fmt.Sprintf("prepare-%s-%d-%d", p.Name, p.Attempts, stamp), p.Name, w.ID, reason, "")
		l.st.Outbox = append(l.st.Outbox, l.verificationFailed(p, cb))
		l.log.Warn("plan not dispatched", "plan", p.Name, "worker", w.ID, "err", err)
		if errors.Is(err, gates.ErrSetup) || errors.Is(err, fleet.ErrInclude) {
			// Likely the same for the next plan (a network down, a file to
			// fix): one plan per event fails, not the whole queue at once.
			next = stop
		}
	case errors.Is(err, fleet.ErrWorkerTree):
		p.Reason = reason
		if p.Target == w.ID {
			p.Target = "" // pinned to a worker now out of use: free to go elsewhere
		}
		w.State, w.Reason, w.Since = state.WorkerDead, reason, now
		l.st.Outbox = append(l.st.Outbox, event.NewCallback(event.CallbackDied, fmt.Sprintf("worktree-%s-%d", w.ID, stamp), w.ID, w.ID, reason+"; plan "+p.Name+" stays queued", ""))
		l.log.Error("worktree refused: worker out of use, plan stays queued", "plan", p.Name, "worker", w.ID, "err", err)
		next = goOn
	default:
		p.Reason = reason
		l.log.Error("worktree not ready: plan stays queued", "plan", p.Name, "worker", w.ID, "err", err)
	}
	// Saved and told by the scheduler's caller, with the pass (handOver).
	return next
}

// integrated records orch integrate's outcome for a plan. A worker's
// worktree that still has the plan's branch checked out lets go of it
// (detached where the branch is) once the plan is in: the branch is kept.
func (l *Loop) integrated(ctx context.Context, e event.Event) (*event.Callback, state.Note) {
	delete(l.inFlight, e.Plan) // an auto run's record has come
	p := l.st.Plans[e.Plan]
	if p == nil {
		return nil, state.Ignoring("unknown plan")
	}
	switch {
	case p.State == state.PlanConflict && p.Unmerged != nil:
		return nil, state.Ignoring("plan never ran: its dependencies conflict")
	case p.State == state.PlanDone, p.State == state.PlanVerified, p.State == state.PlanConflict, p.State == state.PlanIntegrated, integrate.FailedOnIntegration(p):
	default:
		return nil, state.Ignoring("plan is " + string(p.State))
	}
	now := l.cfg.Now().UTC()
	kind, status, ok := strings.Cut(e.Status, " ")
	if p.State == state.PlanIntegrated {
		return nil, state.Ignoring("already integrated") // its code is in; a later try cannot take that back
	}
	switch {
	case kind == "integrated" && ok:
		p.State, p.Merged, p.Reason, p.Updated = state.PlanIntegrated, status, "", now
		if w := l.st.Worker(p.Worker); w != nil && w.Plan == "" && l.isolated() {
			// What the worker left since its done stays on the branch; then
			// the worktree lets go of it.
			if err := fleet.LetGo(ctx, l.repo, l.workDir(w.ID), w.ID, p.Name, l.log); err != nil {
				l.log.Warn("worktree keeps the integrated branch", "worker", w.ID, "err", err)
			}
		}
		l.log.Info("integrated", "plan", p.Name, "commit", git.Short(status))
		return event.NewCallback(event.CallbackIntegrated, e.ID, p.Name, p.Worker, git.Short(status), status), state.Noted("integrated")
	case kind == "conflict:":
		p.State, p.Reason, p.Updated = state.PlanConflict, "conflict with the base branch in "+status, now
		l.log.Warn("integration conflict", "plan", p.Name, "files", status)
		return event.NewCallback(event.CallbackConflict, e.ID, p.Name, p.Worker, status, ""), state.Noted("conflict")
	case kind == "failed:":
		p.State, p.Reason, p.Updated = state.PlanFailed, integrate.Reason+status, now
		return event.NewCallback(event.CallbackFailed, e.ID, p.Name, p.Worker, p.Reason, ""), state.Noted("failed")
	}
	return nil, l.refuse(e, fmt.Sprintf("integrated record with status %q", e.Status))
}

// restack puts back in the queue the plans stopped before dispatch because
// their dependencies' branches conflicted, once one of those dependencies
// has a new attempt that reached the state the plan waits for: its base
// is made again from their work then. It says whether the record changed.
func (l *Loop) restack() bool {
	changed := false
	for _, p := range l.st.Plans {
		if p.State != state.PlanConflict || p.Unmerged == nil {
			continue
		}
		want := ""
		if d, err := l.planDef(p.Name); err == nil {
			want = d.DependsOnState
		}
		for _, s := range p.Stack {
			dep := l.st.Plans[s.Plan]
			if dep == nil || dep.Attempts <= s.Attempt || !plans.Reached(string(dep.State), want) {
				continue
			}
			now := l.cfg.Now().UTC()
			p.State, p.Unmerged, p.Stack, p.Updated = state.PlanQueued, nil, nil, now
			p.Reason = fmt.Sprintf("queued again: %s changed (attempt %d) since its dependencies conflicted", s.Plan, dep.Attempts)
			l.log.Info("dependency changed: plan queued again to be stacked anew", "plan", p.Name, "dependency", s.Plan, "attempt", dep.Attempts)
			changed = true
			break
		}
	}
	return changed
}
