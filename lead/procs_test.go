package lead

import (
	"github.com/orch-dev/orch/agent"
	"github.com/orch-dev/orch/notify"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"
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

// TestOrchPrivateDirs: the folders Claude Code workers may not edit
// without asking are the ones the lead makes, and never the worktrees.
func TestOrchPrivateDirs(t *testing.T) {
	want := map[string]bool{agent.AgentsDir: true, notify.CredsDir: true, GatesDir: true, IntegrateDir: true, "jetstream": true, LogsDir: true, notify.SpoolDir: true}
	for _, d := range agent.OrchPrivateDirs {
		if !want[d] || d == WorktreesDir {
			t.Errorf("agent.OrchPrivateDirs holds %q", d)
		}
		delete(want, d)
	}
	if len(want) != 0 {
		t.Errorf("agent.OrchPrivateDirs lacks %v", want)
	}
}

func TestOrchPrivateFiles(t *testing.T) {
	want := map[string]bool{notify.BrokerFile: true, GitLockFile: true, LockFile: true, PIDFile: true, StateFile: true}
	for _, f := range agent.OrchPrivateFiles {
		if !want[f] {
			t.Errorf("agent.OrchPrivateFiles holds %q", f)
		}
		delete(want, f)
	}
	if len(want) != 0 {
		t.Errorf("agent.OrchPrivateFiles lacks %v", want)
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
