package fleet

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/orch-dev/orch/config"
	"github.com/orch-dev/orch/internal/state"
)

// Worktree isolation. Each worker wN edits its own linked git worktree,
// .orch/worktrees/wN (WorktreeDir); a plan is worked on a branch
// orch/<plan> (PlanBranch). The fleet makes the worktrees (the
// .worktreeinclude files are copied in by CopyIncludes); what goes on
// their branches is the loop's and the harvest's.

// Isolated reports whether workers edit their own worktrees.
func (f *Fleet) Isolated() bool { return f.cfg.Isolation == config.Worktree }

// WorkDir is where worker id edits: its worktree, or the repo itself in
// shared isolation.
func (f *Fleet) WorkDir(id string) string { return WorkDir(f.cfg.Root, f.cfg.Isolation, id) }

// EnsureWorktree makes worker id's worktree if it is not there (detached
// at HEAD) and returns its directory.
func (f *Fleet) EnsureWorktree(ctx context.Context, id string) (string, error) {
	dir := WorktreeDir(f.cfg.Root, id)
	if _, err := os.Stat(filepath.Join(dir, ".git")); err == nil {
		return dir, nil
	}
	// A folder left without its .git file is moved aside, never deleted
	// (it may hold work); a stale registration is pruned.
	if _, err := os.Lstat(dir); err == nil {
		aside := fmt.Sprintf("%s.broken-%d", dir, f.cfg.Now().UnixNano())
		if err := os.Rename(dir, aside); err != nil {
			return "", fmt.Errorf("worktree %s: %w", id, err)
		}
		f.log.Warn("worktree folder without .git moved aside", "worker", id, "to", aside)
	}
	_ = f.cfg.Repo.RemoveWorktree(ctx, dir)
	head, err := f.cfg.Repo.Head(ctx)
	if err != nil {
		return "", fmt.Errorf("worktree %s: %w", id, err)
	}
	if err := f.cfg.Repo.AddWorktree(ctx, dir, head); err != nil {
		return "", err
	}
	if err := f.cfg.Repo.At(dir).CacheUntracked(ctx); err != nil {
		return "", err
	}
	f.log.Info("worktree made", "worker", id, "dir", dir)
	return dir, nil
}

// adoptIsolation records the isolation the fleet runs with. A fleet still
// at work (live panes, running processes) keeps the one it started with:
// its agents would edit where the lead no longer looks.
func (f *Fleet) adoptIsolation(st *state.State, inUse bool) error {
	if inUse && st.Isolation != "" && st.Isolation != f.cfg.Isolation {
		return fmt.Errorf("%w: the fleet runs with isolation %s, not %s; stop it with orch down first", ErrNoFleet, st.Isolation, f.cfg.Isolation)
	}
	st.Isolation = f.cfg.Isolation
	return nil
}

// WorkDir is where worker id of the repo at root edits with isolation:
// its worktree, or the repo itself in shared isolation.
func WorkDir(root, isolation, id string) string {
	if isolation != config.Worktree || id == "" {
		return root
	}
	return WorktreeDir(root, id)
}
