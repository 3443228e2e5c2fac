package git

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// At returns a Repo for another work tree of the same repository (a linked
// worktree), sharing r's runner. Branches are shared by all worktrees; its
// HEAD is its own, and read by git.
func (r *Repo) At(dir string) *Repo {
	return &Repo{Root: dir, Runner: r.Runner, refs: refFiles{commonDir: r.refs.commonDir}}
}

// RevParse returns the full sha rev names, or ErrNoRef.
func (r *Repo) RevParse(ctx context.Context, rev string) (string, error) {
	if sha, found, ok := r.refs.resolve(rev); ok {
		if !found {
			return "", fmt.Errorf("rev-parse %s: %w", rev, ErrNoRef)
		}
		return sha, nil
	}
	out, err := r.git(ctx, "rev-parse", "--verify", "-q", rev+"^{commit}")
	if err != nil {
		if exitCode(err) == 1 {
			return "", fmt.Errorf("rev-parse %s: %w", rev, ErrNoRef)
		}
		return "", fmt.Errorf("rev-parse %s: %w", rev, err)
	}
	return strings.TrimSpace(string(out)), nil
}

// CurrentBranch returns the short name of the checked-out branch, or "" on
// a detached HEAD.
func (r *Repo) CurrentBranch(ctx context.Context) (string, error) {
	if b, ok := r.refs.headBranch(); ok {
		return b, nil
	}
	out, err := r.git(ctx, "symbolic-ref", "-q", "--short", "HEAD")
	if err != nil {
		if exitCode(err) == 1 {
			return "", nil
		}
		return "", fmt.Errorf("current branch: %w", err)
	}
	return strings.TrimSpace(string(out)), nil
}

// AddWorktree makes dir a linked worktree with a detached HEAD at rev.
func (r *Repo) AddWorktree(ctx context.Context, dir, rev string) error {
	if err := os.MkdirAll(filepath.Dir(dir), 0o700); err != nil {
		return fmt.Errorf("worktree add %s: %w", dir, err)
	}
	if _, err := r.git(ctx, "worktree", "add", "-q", "--detach", dir, rev); err != nil {
		return fmt.Errorf("worktree add %s: %w", dir, err)
	}
	return nil
}

// RemoveWorktree removes a linked worktree, even one with changes (only
// for orch's own scratch worktrees).
func (r *Repo) RemoveWorktree(ctx context.Context, dir string) error {
	if _, err := r.git(ctx, "worktree", "remove", "--force", dir); err != nil {
		if _, statErr := os.Stat(dir); errors.Is(statErr, os.ErrNotExist) {
			_, _ = r.git(ctx, "worktree", "prune")
			return nil
		}
		return fmt.Errorf("worktree remove %s: %w", dir, err)
	}
	return nil
}

// WorktreeOf returns the work tree that has branch checked out, or "".
func (r *Repo) WorktreeOf(ctx context.Context, branch string) (string, error) {
	out, err := r.git(ctx, "worktree", "list", "--porcelain", "-z")
	if err != nil {
		return "", fmt.Errorf("worktree list: %w", err)
	}
	var dir string
	for _, f := range strings.Split(string(out), "\x00") {
		switch {
		case strings.HasPrefix(f, "worktree "):
			dir = strings.TrimPrefix(f, "worktree ")
		case f == "branch refs/heads/"+branch:
			return dir, nil
		}
	}
	return "", nil
}

// SwitchNew checks out branch, creating it at base when it does not exist
// yet. Local changes are carried along as git does (CommitAll first to
// keep them where they were made).
func (r *Repo) SwitchNew(ctx context.Context, branch, base string) (created bool, err error) {
	if _, err := r.RevParse(ctx, "refs/heads/"+branch); err == nil {
		if _, err := r.git(ctx, "switch", "-q", branch); err != nil {
			return false, fmt.Errorf("switch %s: %w", branch, err)
		}
		return false, nil
	} else if !errors.Is(err, ErrNoRef) {
		return false, err
	}
	if _, err := r.git(ctx, "switch", "-q", "-c", branch, base); err != nil {
		return false, fmt.Errorf("switch -c %s %s: %w", branch, base, err)
	}
	return true, nil
}

// Detach leaves the current branch for a detached HEAD at rev.
func (r *Repo) Detach(ctx context.Context, rev string) error {
	if _, err := r.git(ctx, "switch", "-q", "--detach", rev); err != nil {
		return fmt.Errorf("switch --detach %s: %w", rev, err)
	}
	return nil
}

// CommitAll commits every change in the work tree (new, changed and
// deleted files that git does not ignore), except the paths in skip, and
// returns the new commit, or "" when there was nothing to commit.
func (r *Repo) CommitAll(ctx context.Context, msg string, skip ...string) (string, error) {
	if _, err := r.git(ctx, "add", "-A", "--", "."); err != nil {
		return "", fmt.Errorf("commit all: %w", err)
	}
	if len(skip) > 0 {
		// Back to HEAD's version in the index: a skipped file that is new is
		// not added, one that is tracked keeps its committed content. (An
		// exclude pathspec would make git refuse ignored paths.)
		args := []string{"reset", "-q", "--"}
		for _, s := range skip {
			args = append(args, ":(literal)"+s) // a path, never a pattern
		}
		if _, err := r.git(ctx, args...); err != nil {
			return "", fmt.Errorf("commit all: %w", err)
		}
	}
	_, err := r.git(ctx, "diff", "--cached", "--quiet")
	switch {
	case err == nil:
		return "", nil
	case exitCode(err) != 1:
		return "", fmt.Errorf("commit all: %w", err)
	}
	id, err := r.identityArgs(ctx)
	if err != nil {
		return "", fmt.Errorf("commit all: %w", err)
	}
	if _, err := r.git(ctx, append(id, "commit", "-q", "--no-verify", "-m", msg)...); err != nil {
		return "", fmt.Errorf("commit all: %w", err)
	}
	return r.Head(ctx)
}

// IsAncestor reports whether commit a is an ancestor of (or equal to) b.
func (r *Repo) IsAncestor(ctx context.Context, a, b string) (bool, error) {
	_, err := r.git(ctx, "merge-base", "--is-ancestor", a, b)
	switch {
	case err == nil:
		return true, nil
	case exitCode(err) == 1:
		return false, nil
	}
	return false, fmt.Errorf("merge-base %s %s: %w", a, b, err)
}

// CountCommits returns how many commits are in to but not in from.
func (r *Repo) CountCommits(ctx context.Context, from, to string) (int, error) {
	out, err := r.git(ctx, "rev-list", "--count", from+".."+to)
	if err != nil {
		return 0, fmt.Errorf("rev-list %s..%s: %w", from, to, err)
	}
	var n int
	_, err = fmt.Sscan(strings.TrimSpace(string(out)), &n)
	return n, err
}

// ConflictError names the files a merge or rebase could not combine.
type ConflictError struct{ Files []string }

func (e *ConflictError) Error() string {
	return "conflict in " + strings.Join(e.Files, ", ")
}

// Unwrap makes errors.Is(err, ErrConflict) true.
func (e *ConflictError) Unwrap() error { return ErrConflict }

// Merge merges rev into the checked-out HEAD with a merge commit (never a
// fast-forward, so each integration is one commit that names its plan). A
// conflict is aborted, leaving the work tree as it was, and returned as a
// *ConflictError.
func (r *Repo) Merge(ctx context.Context, rev, msg string) (string, error) {
	id, err := r.identityArgs(ctx)
	if err != nil {
		return "", err
	}
	return r.combine(ctx, "merge "+rev, "merge", append(id, "merge", "-q", "--no-ff", "--no-verify", "-m", msg, rev))
}

// Rebase replays the commits of the checked-out (detached) HEAD onto onto.
// A conflict is aborted and returned as a *ConflictError.
func (r *Repo) Rebase(ctx context.Context, onto string) (string, error) {
	id, err := r.identityArgs(ctx)
	if err != nil {
		return "", err
	}
	return r.combine(ctx, "rebase onto "+onto, "rebase", append(id, "rebase", "-q", "--no-verify", onto))
}

// combine runs a merge or rebase (cmd, args) and returns the new HEAD. A
// conflict is aborted (git <cmd> --abort) and returned as a *ConflictError;
// what names the operation in errors.
func (r *Repo) combine(ctx context.Context, what, cmd string, args []string) (string, error) {
	if _, err := r.git(ctx, args...); err != nil {
		files, ferr := r.unmerged(ctx)
		if ferr == nil && len(files) > 0 {
			if _, aerr := r.git(ctx, cmd, "--abort"); aerr != nil {
				return "", fmt.Errorf("%s: conflict in %s, and %s --abort failed: %w", what, strings.Join(files, ", "), cmd, aerr)
			}
			return "", fmt.Errorf("%s: %w", what, &ConflictError{Files: files})
		}
		return "", fmt.Errorf("%s: %w", what, err)
	}
	return r.Head(ctx)
}

// FastForward moves the checked-out branch to rev, updating the work tree;
// it refuses (and changes nothing) if that is not a fast-forward or would
// overwrite local changes.
func (r *Repo) FastForward(ctx context.Context, rev string) error {
	if _, err := r.git(ctx, "merge", "-q", "--ff-only", rev); err != nil {
		return fmt.Errorf("fast-forward to %s: %w", rev, err)
	}
	return nil
}

// MergeTree predicts the merge of b into a without touching any work
// tree, index or ref: the tree it would produce, or a *ConflictError.
func (r *Repo) MergeTree(ctx context.Context, a, b string) (string, error) {
	out, err := r.git(ctx, "merge-tree", "--write-tree", "--name-only", "-z", a, b)
	f := strings.Split(string(out), "\x00")
	if err != nil {
		if exitCode(err) == 1 && len(f) > 1 {
			var files []string
			for _, s := range f[1:] {
				if s == "" {
					break // the file list ends with an empty field, then messages
				}
				files = append(files, s)
			}
			return "", &ConflictError{Files: files}
		}
		return "", fmt.Errorf("merge-tree %s %s: %w", a, b, err)
	}
	return strings.TrimSpace(f[0]), nil
}

// CommitTree makes a commit object of tree with the given parents, without
// moving any ref (for dry runs that chain predicted merges).
func (r *Repo) CommitTree(ctx context.Context, tree, msg string, parents ...string) (string, error) {
	id, err := r.identityArgs(ctx)
	if err != nil {
		return "", err
	}
	args := append(id, "commit-tree", tree, "-m", msg)
	for _, p := range parents {
		args = append(args, "-p", p)
	}
	out, err := r.git(ctx, args...)
	if err != nil {
		return "", fmt.Errorf("commit-tree: %w", err)
	}
	return strings.TrimSpace(string(out)), nil
}

func (r *Repo) unmerged(ctx context.Context) ([]string, error) {
	out, err := r.git(ctx, "diff", "--name-only", "-z", "--diff-filter=U")
	if err != nil {
		return nil, err
	}
	var files []string
	for _, f := range strings.Split(string(out), "\x00") {
		if f != "" {
			files = append(files, f)
		}
	}
	return files, nil
}

// HasMerges reports whether to has merge commits that from has not.
func (r *Repo) HasMerges(ctx context.Context, from, to string) (bool, error) {
	out, err := r.git(ctx, "rev-list", "--merges", "-n", "1", from+".."+to)
	if err != nil {
		return false, fmt.Errorf("rev-list --merges %s..%s: %w", from, to, err)
	}
	return strings.TrimSpace(string(out)) != "", nil
}

// CheckBranchName refuses a branch name git would refuse (plan names allow
// some, like "x.lock").
func (r *Repo) CheckBranchName(ctx context.Context, branch string) error {
	if !validRefName("refs/heads/" + branch) {
		return fmt.Errorf("%q is not a valid git branch name", branch)
	}
	return nil
}

// validRefName applies git check-ref-format's rules (git-check-ref-format(1))
// to a full ref name, in process: no git runs for it.
func validRefName(ref string) bool {
	if ref == "@" || strings.HasSuffix(ref, ".") || strings.HasSuffix(ref, "/") || strings.HasPrefix(ref, "/") ||
		strings.Contains(ref, "..") || strings.Contains(ref, "//") || strings.Contains(ref, "@{") || !strings.Contains(ref, "/") {
		return false
	}
	for _, c := range ref {
		if c < 0x20 || c == 0x7f || strings.ContainsRune(" ~^:?*[\\", c) {
			return false
		}
	}
	for _, part := range strings.Split(ref, "/") {
		if strings.HasPrefix(part, ".") || strings.HasSuffix(part, ".lock") {
			return false
		}
	}
	return true
}

// Status reads, with one git process, the work tree's branch ("" on a
// detached HEAD) and whether it has anything to commit (changed, deleted
// or new files git does not ignore).
func (r *Repo) Status(ctx context.Context) (branch string, clean bool, err error) {
	// No rename detection (a rename's second path could read as a
	// header), untracked folders as one entry, and no optional index
	// lock (an agent's own git may run beside it).
	out, err := r.git(ctx, "--no-optional-locks", "status", "--porcelain=v2", "--branch", "-z", "--untracked-files=normal", "--no-renames")
	if err != nil {
		return "", false, fmt.Errorf("status: %w", err)
	}
	clean = true
	for _, f := range strings.Split(string(out), "\x00") {
		switch {
		case clean && strings.HasPrefix(f, "# branch.head "): // headers come first
			if b := strings.TrimPrefix(f, "# branch.head "); b != "(detached)" {
				branch = b
			}
		case f == "" || strings.HasPrefix(f, "# "):
		default:
			clean = false
		}
	}
	return branch, clean, nil
}

// CacheUntracked turns on git's untracked cache in this work tree and
// fills it (a status that writes the index). Later statuses, orch's and
// the agent's own, then look into only the folders that changed: in a
// worktree of a few thousand files, about half the time of one. For a
// work tree orch owns, when nothing else runs git in it.
func (r *Repo) CacheUntracked(ctx context.Context) error {
	if _, err := r.git(ctx, "-c", "core.untrackedCache=true", "status", "--porcelain", "--untracked-files=normal"); err != nil {
		return fmt.Errorf("untracked cache: %w", err)
	}
	return nil
}

// Healthy says whether this work tree can take a checkout at all: git can
// read it, and no index.lock (left by a git that was killed) blocks it.
func (r *Repo) Healthy(ctx context.Context) error {
	out, err := r.git(ctx, "rev-parse", "--path-format=absolute", "--git-path", "index.lock")
	if err != nil {
		return err
	}
	if lock := strings.TrimSpace(string(out)); lock != "" {
		if _, err := os.Stat(lock); err == nil {
			return fmt.Errorf("%s exists (a git command was killed in it?)", lock)
		}
	}
	if _, err := r.git(ctx, "status", "--porcelain"); err != nil {
		return err
	}
	return nil
}
