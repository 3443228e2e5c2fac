package git

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"testing"
)

// Behaviour tests with the real git: worktrees, branches, merges.

func TestWorktreeBranchCommitMerge(t *testing.T) {
	ctx := context.Background()
	r := newRepo(t)
	write(t, r, map[string]string{"a.txt": "one\n", "b.txt": "b\n"})
	base, err := r.Commit(ctx, "base", "a.txt", "b.txt")
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "wt", "w1")
	if err := r.AddWorktree(ctx, dir, base); err != nil {
		t.Fatal(err)
	}
	w := r.At(dir)
	if b, err := w.CurrentBranch(ctx); err != nil || b != "" {
		t.Fatalf("new worktree should be detached: %q %v", b, err)
	}
	if created, err := w.SwitchNew(ctx, "orch/p1", base); err != nil || !created {
		t.Fatalf("switch new: %v %v", created, err)
	}
	if got, _ := r.WorktreeOf(ctx, "orch/p1"); !sameDir(t, got, dir) {
		t.Fatalf("WorktreeOf = %q, want %q", got, dir)
	}
	if err := os.WriteFile(filepath.Join(dir, "a.txt"), []byte("two\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, ".env"), []byte("SECRET=1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	sha, err := w.CommitAll(ctx, "work", ".env")
	if err != nil || sha == "" {
		t.Fatalf("commit all: %q %v", sha, err)
	}
	if files := gitOut(t, w, "show", "--name-only", "--format=", "HEAD"); files != "a.txt" {
		t.Fatalf("committed %q, want only a.txt (.env skipped)", files)
	}
	if again, err := w.CommitAll(ctx, "nothing", ".env"); err != nil || again != "" {
		t.Fatalf("nothing to commit: %q %v", again, err)
	}
	if n, err := r.CountCommits(ctx, base, "orch/p1"); err != nil || n != 1 {
		t.Fatalf("count = %d %v", n, err)
	}
	// A second branch edits the same line: merging both conflicts.
	dir2 := filepath.Join(t.TempDir(), "w2")
	if err := r.AddWorktree(ctx, dir2, base); err != nil {
		t.Fatal(err)
	}
	w2 := r.At(dir2)
	if _, err := w2.SwitchNew(ctx, "orch/p2", base); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(dir2, "a.txt"), []byte("three\n"), 0o644)
	if _, err := w2.CommitAll(ctx, "other"); err != nil {
		t.Fatal(err)
	}
	if _, err := r.MergeTree(ctx, base, "orch/p1"); err != nil {
		t.Fatalf("merge-tree of a clean merge: %v", err)
	}
	m1, err := r.Merge(ctx, "orch/p1", "integrate p1")
	if err != nil {
		t.Fatal(err)
	}
	if ok, _ := r.IsAncestor(ctx, "orch/p1", m1); !ok {
		t.Fatal("p1 should be an ancestor of the merge")
	}
	var ce *ConflictError
	if _, err := r.MergeTree(ctx, m1, "orch/p2"); !errors.As(err, &ce) || !slices.Equal(ce.Files, []string{"a.txt"}) {
		t.Fatalf("merge-tree should predict the conflict in a.txt: %v", err)
	}
	_, err = r.Merge(ctx, "orch/p2", "integrate p2")
	if !errors.As(err, &ce) || !errors.Is(err, ErrConflict) || !slices.Equal(ce.Files, []string{"a.txt"}) {
		t.Fatalf("merge p2: %v", err)
	}
	if st := gitOut(t, r, "status", "--porcelain"); st != "" {
		t.Fatalf("after an aborted merge the tree must be clean: %q", st)
	}
	if head, _ := r.Head(ctx); head != m1 {
		t.Fatal("HEAD moved")
	}
	// Rebase in a scratch worktree also stops cleanly on the conflict.
	dir3 := filepath.Join(t.TempDir(), "w3")
	if err := r.AddWorktree(ctx, dir3, "orch/p2"); err != nil {
		t.Fatal(err)
	}
	if _, err := r.At(dir3).Rebase(ctx, m1); !errors.As(err, &ce) {
		t.Fatalf("rebase: %v", err)
	}
	if err := r.RemoveWorktree(ctx, dir3); err != nil {
		t.Fatal(err)
	}
	if err := w.Detach(ctx, m1); err != nil {
		t.Fatal(err)
	}
	if got, _ := r.WorktreeOf(ctx, "orch/p1"); got != "" {
		t.Fatalf("detached, yet %q holds orch/p1", got)
	}
	if _, err := r.RevParse(ctx, "orch/nope"); !errors.Is(err, ErrNoRef) {
		t.Fatalf("rev-parse of a missing branch: %v", err)
	}
}

// The in-process check agrees with git check-ref-format on names plan
// names allow and on the rules' edges.
func TestValidRefNameAgreesWithGit(t *testing.T) {
	for _, b := range []string{"orch/a", "orch/foo.lock", "orch/a.b", "orch/a-", "orch/a_", "orch/x.", "orch/a..b", "orch/.a",
		"orch/a b", "orch/a~1", "orch/a^", "orch/a:b", "orch/a?", "orch/a*", "orch/a[", "orch/a\\b", "orch/a@{1}", "orch//a", "orch/a/", "orch/a.lock/b", "orch/@", "orch/a@b"} {
		err := exec.Command("git", "check-ref-format", "refs/heads/"+b).Run()
		if got := validRefName("refs/heads/" + b); got != (err == nil) {
			t.Errorf("%q: in process %v, git %v", b, got, err)
		}
	}
}

// Status: the branch and whether anything is to commit, in one process;
// ignored files do not count, a detached HEAD has no branch.
func TestStatus(t *testing.T) {
	ctx := context.Background()
	r := newRepo(t)
	write(t, r, map[string]string{"a.txt": "a\n", ".gitignore": "*.log\n"})
	if _, err := r.CommitAll(ctx, "first\n"); err != nil {
		t.Fatal(err)
	}
	want, _ := r.CurrentBranch(ctx)
	if b, clean, err := r.Status(ctx); err != nil || b != want || b == "" || !clean {
		t.Fatalf("after commit: %q %v %v (branch %q)", b, clean, err, want)
	}
	write(t, r, map[string]string{"x.log": "ignored\n"})
	if _, clean, _ := r.Status(ctx); !clean {
		t.Error("an ignored file counts as a change")
	}
	write(t, r, map[string]string{"dir/new.txt": "new\n"})
	if _, clean, _ := r.Status(ctx); clean {
		t.Error("a new file in a new folder is not seen")
	}
	os.Remove(filepath.Join(r.Root, "dir", "new.txt"))
	write(t, r, map[string]string{"a.txt": "changed\n"})
	if _, clean, _ := r.Status(ctx); clean {
		t.Error("a changed file is not seen")
	}
	// A path that looks like a header, renamed: still the branch.
	write(t, r, map[string]string{"a.txt": "a\n", "# branch.head main": "x\n"})
	if _, err := r.CommitAll(ctx, "odd name\n"); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("git", "-C", r.Root, "mv", "# branch.head main", "renamed").CombinedOutput(); err != nil {
		t.Fatalf("git mv: %v %s", err, out)
	}
	if b, clean, err := r.Status(ctx); err != nil || b != want || clean {
		t.Errorf("after a rename of %q: branch %q (want %q), clean %v, %v", "# branch.head main", b, want, clean, err)
	}
	if err := r.Detach(ctx, "HEAD"); err != nil {
		t.Fatal(err)
	}
	if b, _, err := r.Status(ctx); err != nil || b != "" {
		t.Errorf("detached: branch %q, %v", b, err)
	}
}
