package lead

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
	if err := writeIn(dir, "config/.env", []byte("SECRET=1\n"), 0o600); err == nil {
		t.Fatal("writeIn followed a symlink out of the directory")
	}
	if _, err := os.Stat(filepath.Join(outside, ".env")); err == nil {
		t.Fatal("the file was written outside")
	}
	// Inside the directory, folders are made and the content lands.
	if err := writeIn(dir, "plans/p/RESULT.md", []byte("ok\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if got, _ := os.ReadFile(filepath.Join(dir, "plans", "p", "RESULT.md")); string(got) != "ok\n" {
		t.Fatalf("content %q", got)
	}
	if _, err := os.Stat(filepath.Join(dir, "plans", "p", "RESULT.md.orch-tmp")); err == nil {
		t.Fatal("temporary file left")
	}
}

func TestCapLog(t *testing.T) {
	path := filepath.Join(t.TempDir(), "p-1.log")
	big := make([]byte, MaxLog+1000)
	for i := range big {
		big[i] = 'a'
	}
	copy(big[len(big)-4:], "tail")
	if err := os.WriteFile(path, big, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := capLog(path); err != nil {
		t.Fatal(err)
	}
	got, _ := os.ReadFile(path)
	if len(got) > MaxLog+100 || string(got[len(got)-4:]) != "tail" {
		t.Fatalf("cut log: %d bytes, ends %q", len(got), got[len(got)-4:])
	}
	small := filepath.Join(t.TempDir(), "s.log")
	os.WriteFile(small, []byte("short\n"), 0o600)
	if err := capLog(small); err != nil {
		t.Fatal(err)
	}
	if got, _ := os.ReadFile(small); string(got) != "short\n" {
		t.Fatalf("a short log changed: %q", got)
	}
}
