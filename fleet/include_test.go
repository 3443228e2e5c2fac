package fleet

import (
	"os"
	"path/filepath"
	"testing"
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
