package lead

import (
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/orch-dev/orch/internal/orchdir"
)

func TestTaggedWorker(t *testing.T) {
	dir := "/r/repo/.orch"
	for env, want := range map[string]bool{
		"A=1\x00ORCH_DIR=/r/repo/.orch\x00ORCH_WORKER=w2\x00": true,
		"ORCH_WORKER=w1\x00ORCH_DIR=/r/repo/.orch":            true,
		"ORCH_DIR=/r/repo/.orch\x00":                          false, // orch serve, a gate: no worker
		"ORCH_DIR=/r/repo/.orch2\x00ORCH_WORKER=w1\x00":       false, // another repo sharing the prefix
		"ORCH_DIR=/r/repo\x00ORCH_WORKER=w1\x00":              false,
		"ORCH_DIR=/r/repo/.orch\x00ORCH_WORKER=wx\x00":        false,
		"XORCH_DIR=/r/repo/.orch\x00ORCH_WORKER=w1\x00":       false,
		"ORCH_DIR=/r/repo/.orch\x00NOT_ORCH_WORKER=w1\x00":    false,
		"ORCH_DIR=/r/repo/.orch/x\x00ORCH_WORKER=w1\x00":      false,
		"ORCH_DIR=/r/repo/.orch\x00ORCH_WORKER=w1\x00ZZ=\x00": true,
	} {
		if got := taggedWorker([]byte(env), dir); got != want {
			t.Errorf("%q: %v; want %v", env, got, want)
		}
	}
}

// TestStopWorkerProcs starts a process tagged as a worker's (in its own
// session, as an agent's helper would be) and one that is not: only the
// first is stopped.
func TestStopWorkerProcs(t *testing.T) {
	orchDir := filepath.Join(t.TempDir(), ".orch")
	start := func(env ...string) *exec.Cmd {
		c := exec.Command("sleep", "300")
		c.Env = append(os.Environ(), env...)
		if err := c.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Process.Kill(); c.Wait() })
		return c
	}
	tagged := start("ORCH_DIR="+orchDir, "ORCH_WORKER=w3")
	other := start("ORCH_DIR="+orchDir+"x", "ORCH_WORKER=w3")
	stopped := stopWorkerProcs(orchDir, 2*time.Second)
	if len(stopped) != 1 {
		t.Fatalf("stopped %v; want the tagged process only", stopped)
	}
	done := make(chan error, 1)
	go func() { done <- tagged.Wait() }()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("the tagged process still runs")
	}
	if err := syscall.Kill(other.Process.Pid, 0); err != nil {
		t.Fatalf("the untagged process is gone: %v", err)
	}
}

// TestOrchDirLayout: what a running lead loop has made in .orch/ is named
// by package orchdir, and everything but the worktrees is private (a
// Claude Code worker may not edit it without asking).
func TestOrchDirLayout(t *testing.T) {
	root := startLoop(t)
	private := map[string]bool{}
	for _, n := range append(append([]string{}, orchdir.PrivateDirs...), orchdir.PrivateFiles...) {
		if n == orchdir.Worktrees || private[n] {
			t.Errorf("orchdir private lists hold %q wrongly or twice", n)
		}
		private[n] = true
	}
	entries, err := os.ReadDir(orchdir.Of(root))
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) < 5 {
		t.Fatalf(".orch/ holds only %d entries", len(entries))
	}
	for _, e := range entries {
		if !private[e.Name()] && e.Name() != orchdir.Worktrees {
			t.Errorf(".orch/%s is not in orchdir.PrivateDirs or PrivateFiles", e.Name())
		}
	}
}

func TestLastLogLine(t *testing.T) {
	dir := t.TempDir()
	for name, tt := range map[string]struct{ log, want string }{
		"gemini": {`Ripgrep is not available.
Error when talking to Gemini API Full report available at: /tmp/x.json _ApiError: {"error":{"code":400,"message":"bad plan","status":"INVALID_ARGUMENT"}}
    at throwErrorIfNotOK (file:///x.js:1:2)
    at async Turn.run (file:///x.js:3:4) {
  status: 400
}
An unexpected critical error occurred:[object Object]
`, "INVALID_ARGUMENT: bad plan"},
		"codex": {"ERROR: unexpected status 400 Bad Request: {\"error\":{\"code\":null,\"message\":\"no\",\"type\":\"invalid_request_error\"}}\n", "invalid_request_error: no"},
		"plain": {"working\nsomething broke: disk full\n\n", "something broke: disk full"},
		"empty": {"", ""},
	} {
		p := filepath.Join(dir, name)
		os.WriteFile(p, []byte(tt.log), 0o600)
		if got := lastLogLine(p); got != tt.want {
			t.Errorf("%s: %q; want %q", name, got, tt.want)
		}
	}
}
