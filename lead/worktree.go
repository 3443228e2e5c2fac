package lead

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/orch-dev/orch/config"
	"github.com/orch-dev/orch/event"
	"github.com/orch-dev/orch/fleet"
	"github.com/orch-dev/orch/gates"
	"github.com/orch-dev/orch/git"
	"github.com/orch-dev/orch/integrate"
	"github.com/orch-dev/orch/internal/orchdir"
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

// prepare readies worker w's worktree for plan p before the dispatch line
// is typed: what the worker left from its last plan is committed on that
// plan's branch, the plan's branch is checked out (made at its base the
// first time; a later attempt goes on where the last one stopped), the
// plan folder is brought over, .worktreeinclude files are copied, and the
// setup command runs. An error means the worker does not get the plan.
func (l *Loop) prepare(ctx context.Context, p *state.Run, w *state.Worker) error {
	// What is wrong with the plan or the repo is found before any worker's
	// worktree is touched, so it is never blamed on a worker.
	if _, err := fleet.Includes(ctx, l.repo); err != nil {
		return err
	}
	branch := fleet.PlanBranch(p.Name)
	if err := l.repo.CheckBranchName(ctx, branch); err != nil {
		return fmt.Errorf("%w: %v (git's branch rules are stricter than plan names: rename the plan)", ErrPlanContent, err)
	}
	dir, err := l.fleet.EnsureWorktree(ctx, w.ID)
	if err != nil {
		return fmt.Errorf("%w: %w", ErrWorkerTree, err)
	}
	wt := l.repo.At(dir)
	if err := l.saveLeftovers(ctx, wt, w.ID); err != nil {
		return fmt.Errorf("%w: %w", ErrWorkerTree, err)
	}
	// A branch is checked out in one worktree at a time: the worker that
	// had this plan before lets go of it (its leftovers saved first).
	if holder, err := l.repo.WorktreeOf(ctx, branch); err != nil {
		return err
	} else if holder != "" && filepath.Clean(holder) != filepath.Clean(dir) {
		if filepath.Dir(filepath.Clean(holder)) != filepath.Join(l.orchDir, orchdir.Worktrees) {
			// Someone's own checkout: never commit in it or move it.
			return fmt.Errorf("%w: %s is checked out in %s; switch that checkout to another branch, then orch dispatch %s again", ErrBranchHeld, branch, holder, p.Name)
		}
		other := l.repo.At(holder)
		if err := l.saveLeftovers(ctx, other, filepath.Base(holder)); err != nil {
			return err
		}
		if err := other.Detach(ctx, "HEAD"); err != nil {
			return err
		}
	}
	if p.Base == "" {
		base := "HEAD"
		if parent := l.st.Plans[p.VerifyOf]; parent != nil {
			if sha, err := l.repo.RevParse(ctx, "refs/heads/"+fleet.PlanBranch(parent.Name)); err == nil {
				base = sha
			}
		}
		if p.Base, err = l.repo.RevParse(ctx, base); err != nil {
			return err
		}
	}
	created, err := wt.SwitchNew(ctx, branch, p.Base)
	if err != nil {
		// The worker's fault only if its worktree fails on its own, too;
		// otherwise the plan's branch is what git refused.
		if serr := wt.Healthy(ctx); serr != nil {
			return fmt.Errorf("%w: %w", ErrWorkerTree, err)
		}
		return err
	}
	if err := l.syncPlanFolder(p.Name, dir); err != nil {
		return fmt.Errorf("%w: %w", ErrPlanContent, err)
	}
	if err := fleet.CopyIncludes(ctx, l.repo, dir); err != nil {
		return err
	}
	l.log.Info("worktree ready", "plan", p.Name, "worker", w.ID, "branch", branch, "base", short(p.Base), "new", created)
	return nil
}

// ErrBranchHeld is a plan branch checked out outside orch's worktrees.
var ErrBranchHeld = errors.New("plan branch in use")

// ErrWorkerTree is git refusing in the worker's own worktree.
var ErrWorkerTree = errors.New("worktree refused")

// ErrPlanContent is a plan whose branch cannot take its plan folder (a
// symlink where plans/<name> should be).
var ErrPlanContent = errors.New("plan folder cannot be brought over")

// saveLeftovers commits whatever is uncommitted in a worktree onto its
// branch, so switching branches never carries or loses work. On a detached
// HEAD there is no branch to keep it on: it is left in place.
func (l *Loop) saveLeftovers(ctx context.Context, wt *git.Repo, id string) error {
	branch, err := wt.CurrentBranch(ctx)
	if err != nil || branch == "" {
		return err
	}
	skip, err := fleet.Includes(ctx, l.repo)
	if err != nil {
		return err
	}
	sha, err := wt.CommitAll(ctx, fmt.Sprintf("%s: work left by %s\n\nWorker: %s\n", branch, id, id), skip...)
	if err == nil && sha != "" {
		l.log.Info("leftover work committed on its branch", "worker", id, "branch", branch, "commit", short(sha))
	}
	return err
}

// syncPlanFolder copies the repo's PLAN.md of a plan into a worktree when
// the branch does not have it as it is (a verification round's plan is
// committed on the base branch, not on the branch it verifies).
func (l *Loop) syncPlanFolder(name, dir string) error {
	rel := filepath.Join(plans.Dir, name, plans.PlanFile)
	src, err := os.ReadFile(filepath.Join(l.cfg.Root, rel))
	if err != nil {
		return fmt.Errorf("plan %s: %w", name, err)
	}
	return fleet.WriteIn(dir, filepath.ToSlash(rel), src, 0o644)
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
	p.Def = nil
	// Ids unique per occurrence: the same refusal after a restart must
	// wake the lead again, not be dropped as a copy.
	stamp := now.UnixNano()
	next := holdPlan
	switch {
	case errors.Is(err, gates.ErrSetup), errors.Is(err, fleet.ErrInclude), errors.Is(err, ErrBranchHeld), errors.Is(err, ErrPlanContent):
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
	case errors.Is(err, ErrWorkerTree):
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
	if err := l.save(); err != nil {
		l.log.Error("save state", "err", err)
	}
	l.flushOutbox()
	return next
}

// integrated records orch integrate's outcome for a plan. A worker's
// worktree that still has the plan's branch checked out lets go of it
// (detached where the branch is) once the plan is in: the branch is kept.
func (l *Loop) integrated(ctx context.Context, e event.Event) (*event.Callback, string) {
	p := l.st.Plans[e.Plan]
	if p == nil {
		return nil, "ignored: unknown plan"
	}
	switch {
	case p.State == state.PlanDone, p.State == state.PlanVerified, p.State == state.PlanConflict, p.State == state.PlanIntegrated, integrate.FailedOnIntegration(p):
	default:
		return nil, "ignored: plan is " + string(p.State)
	}
	now := l.cfg.Now().UTC()
	kind, status, ok := strings.Cut(e.Status, " ")
	if p.State == state.PlanIntegrated {
		return nil, "ignored: already integrated" // its code is in; a later try cannot take that back
	}
	switch {
	case kind == "integrated" && ok:
		p.State, p.Merged, p.Reason, p.Updated = state.PlanIntegrated, status, "", now
		if w := l.st.Worker(p.Worker); w != nil && w.Plan == "" && l.isolated() {
			// What the worker left since its done stays on the branch; then
			// the worktree lets go of it.
			wt := l.repo.At(l.workDir(w.ID))
			if b, err := wt.CurrentBranch(ctx); err == nil && b == fleet.PlanBranch(p.Name) {
				if err := l.saveLeftovers(ctx, wt, w.ID); err != nil {
					l.log.Warn("worktree keeps the integrated branch", "worker", w.ID, "err", err)
				} else if err := wt.Detach(ctx, "HEAD"); err != nil {
					l.log.Warn("worktree keeps the integrated branch", "worker", w.ID, "err", err)
				}
			}
		}
		l.log.Info("integrated", "plan", p.Name, "commit", short(status))
		return event.NewCallback(event.CallbackIntegrated, e.ID, p.Name, p.Worker, short(status), status), "integrated"
	case kind == "conflict:":
		p.State, p.Reason, p.Updated = state.PlanConflict, "conflict with the base branch in "+status, now
		l.log.Warn("integration conflict", "plan", p.Name, "files", status)
		return event.NewCallback(event.CallbackConflict, e.ID, p.Name, p.Worker, status, ""), "conflict"
	case kind == "failed:":
		p.State, p.Reason, p.Updated = state.PlanFailed, integrate.Reason+status, now
		return event.NewCallback(event.CallbackFailed, e.ID, p.Name, p.Worker, p.Reason, ""), "failed"
	}
	return nil, l.refuse(e, fmt.Sprintf("integrated record with status %q", e.Status))
}
