package git

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestRefsAgreeWithGit: the in-process ref reader gives what git rev-parse
// gives, through loose refs, packed refs, a detached HEAD, an unborn
// branch, a deleted branch and a linked worktree; or it says it cannot
// tell.
func TestRefsAgreeWithGit(t *testing.T) {
	ctx := context.Background()
	r := newRepo(t)
	if r.refs.gitDir == "" {
		t.Fatal("a plain repository's refs are not read in process")
	}
	// asGit is what git says, with the reader out of the way.
	asGit := &Repo{Root: r.Root, Runner: r.Runner}
	check := func(step string, names ...string) {
		t.Helper()
		for _, name := range names {
			want, werr := asGit.RevParse(ctx, name)
			sha, found, ok := r.refs.resolve(name)
			if !ok {
				t.Errorf("%s: %s: the reader could not tell", step, name)
				continue
			}
			if found != (werr == nil) || sha != want {
				t.Errorf("%s: %s: reader %q found=%v, git %q (%v)", step, name, sha, found, want, werr)
			}
			got, gerr := r.RevParse(ctx, name)
			if got != want || errors.Is(gerr, ErrNoRef) != errors.Is(werr, ErrNoRef) {
				t.Errorf("%s: RevParse(%s) = %q, %v; git %q, %v", step, name, got, gerr, want, werr)
			}
		}
		wantHead, herr := (&Repo{Root: r.Root, Runner: r.Runner}).Head(ctx)
		if got, err := r.Head(ctx); got != wantHead || errors.Is(err, ErrNoCommits) != errors.Is(herr, ErrNoCommits) {
			t.Errorf("%s: Head = %q, %v; git %q, %v", step, got, err, wantHead, herr)
		}
	}
	check("unborn", "HEAD", "refs/heads/main", "refs/heads/orch/p1")

	write(t, r, map[string]string{"a.txt": "a\n"})
	if _, err := r.Commit(ctx, "one", "a.txt"); err != nil {
		t.Fatal(err)
	}
	gitOut(t, r, "branch", "orch/p1")
	check("loose", "HEAD", "refs/heads/main", "refs/heads/orch/p1", "refs/heads/orch/p2")

	gitOut(t, r, "pack-refs", "--all")
	write(t, r, map[string]string{"a.txt": "b\n"})
	if _, err := r.Commit(ctx, "two", "a.txt"); err != nil {
		t.Fatal(err)
	}
	gitOut(t, r, "-c", "user.name=t", "-c", "user.email=t@example.com", "tag", "-a", "-m", "t", "v1") // a peeled line in packed-refs
	gitOut(t, r, "pack-refs", "--all")
	check("packed, main loose again then packed", "HEAD", "refs/heads/main", "refs/heads/orch/p1")

	gitOut(t, r, "branch", "-D", "orch/p1")
	check("deleted from packed-refs", "refs/heads/orch/p1")

	gitOut(t, r, "switch", "-q", "--detach", "HEAD~1")
	check("detached", "HEAD", "refs/heads/main")
	gitOut(t, r, "switch", "-q", "main")

	// A linked worktree: its branch is seen from the main repo and from
	// the worktree's Repo; its own HEAD is left to git.
	wdir := filepath.Join(t.TempDir(), "w")
	gitOut(t, r, "worktree", "add", "-q", "-b", "orch/p3", wdir)
	wt := r.At(wdir)
	if sha, _, ok := wt.refs.resolve("HEAD"); ok {
		t.Errorf("a worktree's HEAD read in process (%s), not by git", sha)
	}
	if got, err := wt.RevParse(ctx, "refs/heads/orch/p3"); err != nil || got != gitOut(t, r, "rev-parse", "orch/p3") {
		t.Errorf("worktree RevParse(refs/heads/orch/p3) = %q, %v", got, err)
	}
	check("linked worktree", "refs/heads/orch/p3")
	opened, err := Open(ctx, wdir)
	if err != nil {
		t.Fatal(err)
	}
	if opened.refs != r.refs {
		t.Errorf("opened from the worktree: refs %+v, want the main repo's %+v", opened.refs, r.refs)
	}
}

// TestRefsCannotTell: what the reader does not know goes to git.
func TestRefsCannotTell(t *testing.T) {
	ctx := context.Background()
	r := newRepo(t)
	write(t, r, map[string]string{"a.txt": "a\n"})
	head, err := r.Commit(ctx, "one", "a.txt")
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"HEAD~1", "main", "refs/tags/v1", "refs/heads/../x", "refs/heads/a..b"} {
		if _, _, ok := r.refs.resolve(name); ok {
			t.Errorf("%s: read in process; only HEAD and refs/heads/ are", name)
		}
	}
	gitDir := filepath.Join(r.Root, ".git")
	os.WriteFile(filepath.Join(gitDir, "refs", "heads", "junk"), []byte("not a hash\n"), 0o644)
	if _, _, ok := r.refs.resolve("refs/heads/junk"); ok {
		t.Error("a ref file that is not a hash was believed")
	}
	os.WriteFile(filepath.Join(gitDir, "refs", "heads", "sym"), []byte("ref: refs/remotes/origin/main\n"), 0o644)
	if _, _, ok := r.refs.resolve("refs/heads/sym"); ok {
		t.Error("a symref out of refs/heads/ was followed")
	}
	// A reftable store is never read as files.
	os.Mkdir(filepath.Join(gitDir, "reftable"), 0o755)
	if rf := refsAt(gitDir); rf.gitDir != "" {
		t.Errorf("refsAt with a reftable directory: %+v", rf)
	}
	if got, err := r.Head(ctx); err != nil || !strings.HasPrefix(got, head[:7]) {
		t.Errorf("Head = %q, %v", got, err)
	}
}
