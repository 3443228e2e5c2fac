package fleet

import (
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
	stopped := StopWorkerProcs(orchDir, 2*time.Second)
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
