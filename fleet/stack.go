package fleet

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/orch-dev/orch/git"
	"github.com/orch-dev/orch/internal/orchdir"
	"github.com/orch-dev/orch/internal/state"
)

// Stacked branches. A plan with dependencies starts from their work, not
// from the base branch's head alone: each dependency gives the head of its
// branch orch/<dep>, or the base branch's head once it is integrated (its
// code is there, with everything integrated before it). Commits that
// another one already holds are dropped; one left is the base, several
// are merged in a scratch worktree (.orch/stack/<plan>) into a commit no
// branch names until the plan's branch is made on it.

// Dep is one dependency of a plan, as the lead loop records it.
type Dep struct {
	Plan       string
	Attempt    int
	Integrated bool
}

// starts returns the commits a stacked plan's base combines, before those
// held by another are dropped: each dependency's branch head (tips), the
// base branch's head (head) for one integrated, or without a branch (a
// plan run in shared isolation). The order is the dependencies', each
// commit once.
func starts(deps []Dep, tips map[string]string, head string) []string {
	var out []string
	for _, d := range deps {
		c := tips[d.Plan]
		if d.Integrated || c == "" {
			c = head
		}
		if !slices.Contains(out, c) {
			out = append(out, c)
		}
	}
	return out
}

// stackBase makes the base of plan from its dependencies: the commit and
// what each dependency gave. A conflict between their branches is an
// ErrStackConflict wrapping *git.ConflictError (nothing is left behind).
func (f *Fleet) stackBase(ctx context.Context, plan string, deps []Dep) (string, []state.StackDep, error) {
	repo := f.cfg.Repo
	head, err := repo.Head(ctx)
	if err != nil {
		return "", nil, err
	}
	tips := map[string]string{}
	for _, d := range deps {
		sha, err := repo.RevParse(ctx, "refs/heads/"+PlanBranch(d.Plan))
		switch {
		case err == nil:
			tips[d.Plan] = sha
		case !errors.Is(err, git.ErrNoRef):
			return "", nil, err
		}
	}
	var stack []state.StackDep
	for _, d := range deps {
		c := tips[d.Plan]
		if d.Integrated || c == "" {
			c = head
		}
		stack = append(stack, state.StackDep{Plan: d.Plan, Attempt: d.Attempt, Commit: c})
	}
	all := starts(deps, tips, head)
	// Drop each commit another one holds (a dependency's dependency, a
	// branch already merged into the base branch).
	var keep []string
	for i, c := range all {
		held := false
		for j, o := range all {
			if i == j {
				continue
			}
			in, err := repo.IsAncestor(ctx, c, o)
			if err != nil {
				return "", nil, err
			}
			if in { // all are distinct: c is in o
				held = true
				break
			}
		}
		if !held {
			keep = append(keep, c)
		}
	}
	if len(keep) == 1 {
		return keep[0], stack, nil
	}
	base, err := f.mergeStack(ctx, plan, deps, keep)
	return base, stack, err
}

// mergeStack merges commits (the first checked out, the others merged in
// one by one) in a scratch worktree and returns the merge.
func (f *Fleet) mergeStack(ctx context.Context, plan string, deps []Dep, commits []string) (string, error) {
	repo := f.cfg.Repo
	dir := filepath.Join(f.cfg.OrchDir, orchdir.Stack, plan)
	_ = repo.RemoveWorktree(ctx, dir) // one left by an interrupted start
	os.RemoveAll(dir)
	if err := repo.AddWorktree(ctx, dir, commits[0]); err != nil {
		return "", err
	}
	defer repo.RemoveWorktree(context.WithoutCancel(ctx), dir)
	names := make([]string, len(deps))
	for i, d := range deps {
		names[i] = d.Plan
	}
	wt := repo.At(dir)
	var base string
	for _, c := range commits[1:] {
		var err error
		base, err = wt.Merge(ctx, c, fmt.Sprintf("stack %s on %s\n\nOrch-Stack: %s\n", plan, strings.Join(names, ", "), plan))
		var ce *git.ConflictError
		if errors.As(err, &ce) {
			return "", fmt.Errorf("%w: %s: %w", ErrStackConflict, strings.Join(names, ", "), err)
		}
		if err != nil {
			return "", err
		}
	}
	f.log.Info("dependencies merged into a base", "plan", plan, "dependencies", strings.Join(names, ","), "base", git.Short(base))
	return base, nil
}
