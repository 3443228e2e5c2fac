package fleet

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"

	"github.com/orch-dev/orch/git"
	"github.com/orch-dev/orch/internal/orchdir"
	"github.com/orch-dev/orch/internal/state"
	"github.com/orch-dev/orch/plans"
)

// Job is one plan for one worker's worktree.
type Job struct {
	Plan, Worker string
	// Base is the commit the plan's branch was made from, "" at the plan's
	// first dispatch: then it is the base branch's head, or for a
	// verification round the head of the branch of Verifies (the plan it
	// verifies), so the verifier sees the work.
	Base, Verifies string
	// Includes is the .worktreeinclude list (Includes), read once by the
	// caller for every plan of one pass.
	Includes []string
	// PlanText, when set, is the plan's PLAN.md to bring over (a host's
	// checkout need not have it); else the repo's checkout's is.
	PlanText []byte
	// Tidy says the harvest of the worker's last plan found its worktree
	// clean, or committed it, moments ago in the same pass: nothing is
	// left to save, and one git status less is run.
	Tidy bool
	// Deps are the plan's dependencies: a plan branch made now starts from
	// their work (stackBase), not from the base branch's head.
	Deps []Dep
}

// Prepared is what a plan's worktree was readied with: the base its branch
// was made from, and for a stacked plan what each dependency gave (nil when
// the branch was there already or has no dependencies).
type Prepared struct {
	Base  string
	Stack []state.StackDep
}

// Prepare readies a worker's worktree for a plan before the dispatch line
// is typed: what the worker left from its last plan is committed on that
// plan's branch, the plan's branch is checked out (made at its base the
// first time; a later attempt goes on where the last one stopped), the
// plan folder is brought over, .worktreeinclude files are copied, and the
// setup command runs (the loop starts it). Prepare returns the base. An
// error means the worker does not get the plan; its kind (ErrWorkerTree,
// ErrBranchHeld, ErrPlanContent, ErrInclude, ErrStackConflict) says whose
// fault it is.
func (f *Fleet) Prepare(ctx context.Context, j Job) (Prepared, error) {
	repo := f.cfg.Repo
	// What is wrong with the plan or the repo is found before any worker's
	// worktree is touched, so it is never blamed on a worker.
	branch := PlanBranch(j.Plan)
	if err := repo.CheckBranchName(ctx, branch); err != nil {
		return Prepared{}, fmt.Errorf("%w: %v (git's branch rules are stricter than plan names: rename the plan)", ErrPlanContent, err)
	}
	_, err := repo.RevParse(ctx, "refs/heads/"+branch)
	exists := err == nil
	if err != nil && !errors.Is(err, git.ErrNoRef) {
		return Prepared{}, err
	}
	out := Prepared{Base: j.Base}
	if out.Base == "" && !exists && j.Verifies == "" && len(j.Deps) > 0 {
		// A conflict between the dependencies stops the plan here, before
		// the worker's worktree is touched.
		if out.Base, out.Stack, err = f.stackBase(ctx, j.Plan, j.Deps); err != nil {
			return Prepared{}, err
		}
	}
	dir, err := f.EnsureWorktree(ctx, j.Worker)
	if err != nil {
		return Prepared{}, fmt.Errorf("%w: %w", ErrWorkerTree, err)
	}
	wt := repo.At(dir)
	if !j.Tidy {
		if err := saveLeftovers(ctx, wt, j.Worker, j.Includes, f.log); err != nil {
			return Prepared{}, fmt.Errorf("%w: %w", ErrWorkerTree, err)
		}
	}
	// A branch is checked out in one worktree at a time: the worker that
	// had this plan before lets go of it (its leftovers saved first). A
	// branch not made yet is nowhere.
	if exists {
		if err := f.takeBranch(ctx, branch, dir, j); err != nil {
			return Prepared{}, err
		}
	}
	if out.Base == "" {
		if j.Verifies != "" {
			if sha, err := repo.RevParse(ctx, "refs/heads/"+PlanBranch(j.Verifies)); err == nil {
				out.Base = sha
			}
		}
		if out.Base == "" {
			if out.Base, err = repo.Head(ctx); err != nil {
				return Prepared{}, err
			}
		}
	}
	created, err := wt.SwitchNew(ctx, branch, out.Base)
	if err != nil {
		// The worker's fault only if its worktree fails on its own, too;
		// otherwise the plan's branch is what git refused.
		if serr := wt.Healthy(ctx); serr != nil {
			return Prepared{}, fmt.Errorf("%w: %w", ErrWorkerTree, err)
		}
		return Prepared{}, err
	}
	if err := f.syncPlanFolder(j.Plan, dir, j.PlanText); err != nil {
		return Prepared{}, fmt.Errorf("%w: %w", ErrPlanContent, err)
	}
	if err := copyIncluded(repo.Root, j.Includes, dir); err != nil {
		return Prepared{}, err
	}
	// What git and the copies just wrote is the lead's: the worker's user
	// gets it before the line is typed.
	if err := f.User(j.Worker).GiveTree(dir); err != nil {
		return Prepared{}, fmt.Errorf("%w: %w", ErrWorkerTree, err)
	}
	f.log.Info("worktree ready", "plan", j.Plan, "worker", j.Worker, "branch", branch, "base", git.Short(out.Base), "new", created, "stacked", len(out.Stack) > 0)
	return out, nil
}

// takeBranch has the worktree that holds branch, if another of orch's
// own, let go of it so that dir can check it out.
func (f *Fleet) takeBranch(ctx context.Context, branch, dir string, j Job) error {
	holder, err := f.cfg.Repo.WorktreeOf(ctx, branch)
	if err != nil || holder == "" || filepath.Clean(holder) == filepath.Clean(dir) {
		return err
	}
	if filepath.Dir(filepath.Clean(holder)) != filepath.Join(f.cfg.OrchDir, orchdir.Worktrees) {
		// Someone's own checkout: never commit in it or move it.
		return fmt.Errorf("%w: %s is checked out in %s; switch that checkout to another branch, then orch dispatch %s again", ErrBranchHeld, branch, holder, j.Plan)
	}
	other := f.cfg.Repo.At(holder)
	if err := saveLeftovers(ctx, other, filepath.Base(holder), j.Includes, f.log); err != nil {
		return err
	}
	if err := other.Detach(ctx, "HEAD"); err != nil {
		return err
	}
	return f.User(filepath.Base(holder)).GiveTree(holder)
}

// saveLeftovers commits whatever is uncommitted in a worktree onto its
// branch, so switching branches never carries or loses work. On a detached
// HEAD there is no branch to keep it on: it is left in place.
// skip: the .worktreeinclude paths, never committed.
func saveLeftovers(ctx context.Context, wt *git.Repo, id string, skip []string, log *slog.Logger) error {
	branch, clean, err := wt.Status(ctx)
	if err != nil || branch == "" || clean {
		return err
	}
	sha, err := wt.CommitAll(ctx, fmt.Sprintf("%s: work left by %s\n\nWorker: %s\n", branch, id, id), skip...)
	if err == nil && sha != "" {
		log.Info("leftover work committed on its branch", "worker", id, "branch", branch, "commit", git.Short(sha))
	}
	return err
}

// LetGo has the worktree at dir (worker id's) let go of plan's branch once
// the plan is integrated: what the worker left since its done is
// committed on the branch, then the worktree is detached where the branch
// is. A worktree on another branch is left as it is.
func LetGo(ctx context.Context, repo *git.Repo, dir, id, plan string, log *slog.Logger) error {
	wt := repo.At(dir)
	if b, err := wt.CurrentBranch(ctx); err != nil || b != PlanBranch(plan) {
		return err
	}
	skip, err := Includes(ctx, repo)
	if err != nil {
		return err
	}
	if err := saveLeftovers(ctx, wt, id, skip, log); err != nil {
		return err
	}
	return wt.Detach(ctx, "HEAD")
}

// syncPlanFolder copies the repo's PLAN.md of a plan into a worktree when
// the branch does not have it as it is (a verification round's plan is
// committed on the base branch, not on the branch it verifies).
func (f *Fleet) syncPlanFolder(name, dir string, text []byte) error {
	rel := filepath.Join(plans.Dir, name, plans.PlanFile)
	src := text
	if src == nil {
		var err error
		if src, err = os.ReadFile(filepath.Join(f.cfg.Root, rel)); err != nil {
			return fmt.Errorf("plan %s: %w", name, err)
		}
	}
	return WriteIn(dir, filepath.ToSlash(rel), src, 0o644)
}
