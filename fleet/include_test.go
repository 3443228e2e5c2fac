package fleet

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/orch-dev/orch/git"
)

// A worker may commit a symlink on its branch; a file orch copies into the
// worktree (.worktreeinclude, PLAN.md) or out of it (RESULT.md into the
// repo) must never be written through it to a place outside.
func TestWriteInRefusesSymlinkEscape(t *testing.T) {
	dir, outside := t.TempDir(), t.TempDir()
	if err := os.Symlink(outside, filepath.Join(dir, "config")); err != nil {
		t.Fatal(err)
	}
	if err := WriteIn(dir, "config/.env", []byte("SECRET=1\n"), 0o600); err == nil {
		t.Fatal("WriteIn followed a symlink out of the directory")
	}
	if _, err := os.Stat(filepath.Join(outside, ".env")); err == nil {
		t.Fatal("the file was written outside")
	}
	// Inside the directory, folders are made and the content lands.
	if err := WriteIn(dir, "plans/p/RESULT.md", []byte("ok\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if got, _ := os.ReadFile(filepath.Join(dir, "plans", "p", "RESULT.md")); string(got) != "ok\n" {
		t.Fatalf("content %q", got)
	}
	if _, err := os.Stat(filepath.Join(dir, "plans", "p", "RESULT.md.orch-tmp")); err == nil {
		t.Fatal("temporary file left")
	}
}

// The .worktreeinclude files are copied into a worktree, never through a
// symlink the worktree holds to a place outside it; a line that leaves
// the repo is refused before anything is copied.
func TestCopyIncludes(t *testing.T) {
	// Run under git (a rebase's exec, a hook), the test must not reach the
	// repo git points to: its own git commands, and the package's, would
	// commit there.
	for _, k := range []string{"GIT_DIR", "GIT_WORK_TREE", "GIT_INDEX_FILE", "GIT_COMMON_DIR", "GIT_PREFIX"} {
		t.Setenv(k, "")
		os.Unsetenv(k)
	}
	t.Setenv("GIT_CONFIG_NOSYSTEM", "1")
	root, dir, outside := t.TempDir(), t.TempDir(), t.TempDir()
	run := func(args ...string) {
		t.Helper()
		cmd := exec.Command("git", append([]string{"-c", "user.name=t", "-c", "user.email=t@t"}, args...)...)
		cmd.Dir = root
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
	}
	write := func(path, body string) {
		t.Helper()
		os.MkdirAll(filepath.Dir(path), 0o755)
		if err := os.WriteFile(path, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	run("init", "-q", "-b", "main")
	write(filepath.Join(root, IncludeFile), "# secrets\n.env\nmissing.txt\nconfig/.env\n")
	run("add", IncludeFile)
	run("commit", "-q", "-m", "include")
	write(filepath.Join(root, ".env"), "TOKEN=1\n")
	write(filepath.Join(root, "config", ".env"), "SECRET=1\n")
	repo, err := git.Open(context.Background(), root)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside, filepath.Join(dir, "config")); err != nil {
		t.Fatal(err)
	}
	if err := CopyIncludes(context.Background(), repo, dir); !errors.Is(err, ErrInclude) {
		t.Fatalf("copy through a symlink: %v, want %v", err, ErrInclude)
	}
	if _, err := os.Stat(filepath.Join(outside, ".env")); err == nil {
		t.Fatal("written outside the worktree")
	}
	if got, _ := os.ReadFile(filepath.Join(dir, ".env")); string(got) != "TOKEN=1\n" {
		t.Fatalf(".env in the worktree: %q", got)
	}
	if fi, err := os.Stat(filepath.Join(dir, ".env")); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf(".env mode: %v %v", fi, err)
	}

	write(filepath.Join(root, IncludeFile), "../up\n")
	run("commit", "-q", "-am", "escape")
	if _, err := Includes(context.Background(), repo); !errors.Is(err, ErrInclude) {
		t.Fatalf("a path out of the repo: %v, want %v", err, ErrInclude)
	}
}
