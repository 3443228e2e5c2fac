package orchctl

import (
	"os/exec"
	"testing"
	"time"
)

// TestExitWaiter: the board learns that an orch serve it could not reach
// has exited from the process's exit itself, and stop ends a wait.
func TestExitWaiter(t *testing.T) {
	exited := make(chan struct{}, 1)
	w, err := newExitWaiter(exited)
	if err != nil {
		t.Fatal(err)
	}
	live := exec.Command("sleep", "60")
	dying := exec.Command("sleep", "60")
	for _, c := range []*exec.Cmd{live, dying} {
		if err := c.Start(); err != nil {
			t.Fatal(err)
		}
	}
	defer live.Process.Kill()
	w.wait(live.Process.Pid)
	w.wait(dying.Process.Pid)
	w.wait(dying.Process.Pid) // one waiter per pid
	select {
	case <-exited:
		t.Fatal("exited before any process did")
	case <-time.After(100 * time.Millisecond):
	}
	dying.Process.Kill()
	dying.Wait()
	select {
	case <-exited:
	case <-time.After(10 * time.Second):
		t.Fatal("no word of the exit")
	}
	stopped := make(chan struct{})
	go func() { w.stop(); close(stopped) }()
	select {
	case <-stopped: // the wait on the live process ended too
	case <-time.After(10 * time.Second):
		t.Fatal("stop did not end the waits")
	}
}
