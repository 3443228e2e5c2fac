package fleet

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/orch-dev/orch/event"
)

// Processes an agent leaves behind. Killing a worker's pane (or a headless
// process group) stops the agent, but an agent may start helpers in their
// own session or process group (Codex's app-server, a dev server a worker
// started), which outlive it. Every process started under a worker carries
// the worker's environment, ORCH_DIR and ORCH_WORKER among it, unless it
// cleared its environment: orch down finds them by that tag in /proc and
// stops them.

// workerProcs returns the pids of this machine's processes whose
// environment names orchDir as ORCH_DIR and has an ORCH_WORKER: processes
// started under one of this repo's workers. The calling process is never
// among them.
func workerProcs(orchDir string) []int {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	self := os.Getpid()
	var out []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == self {
			continue
		}
		env, err := os.ReadFile(filepath.Join("/proc", e.Name(), "environ"))
		if err != nil {
			continue // gone, or not ours to read
		}
		if taggedWorker(env, orchDir) {
			out = append(out, pid)
		}
	}
	return out
}

// taggedWorker says whether a process environment (NUL-separated, as in
// /proc/<pid>/environ) has ORCH_DIR=orchDir exactly and a valid
// ORCH_WORKER.
func taggedWorker(environ []byte, orchDir string) bool {
	dir, worker := false, false
	for _, kv := range bytes.Split(environ, []byte{0}) {
		if v, ok := bytes.CutPrefix(kv, []byte("ORCH_DIR=")); ok {
			dir = string(v) == orchDir
		}
		if v, ok := bytes.CutPrefix(kv, []byte("ORCH_WORKER=")); ok {
			worker = event.ValidWorker(string(v))
		}
	}
	return dir && worker
}

// StopWorkerProcs sends SIGTERM to every process left under this repo's
// workers, waits up to grace for them to end (a pidfd per process, woken
// by the kernel at its exit), then kills what is left. It returns what it
// stopped, for orch down's report.
func StopWorkerProcs(orchDir string, grace time.Duration) []string {
	pids := workerProcs(orchDir)
	if len(pids) == 0 {
		return nil
	}
	var fds []unix.PollFd
	var stopped []string
	for _, pid := range pids {
		cmd, _ := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "comm"))
		fd, err := unix.PidfdOpen(pid, 0)
		if err != nil {
			continue // already gone
		}
		if unix.PidfdSendSignal(fd, unix.SIGTERM, nil, 0) != nil {
			unix.Close(fd)
			continue
		}
		stopped = append(stopped, fmt.Sprintf("process %d (%s) left by an agent", pid, bytes.TrimSpace(cmd)))
		fds = append(fds, unix.PollFd{Fd: int32(fd), Events: unix.POLLIN})
	}
	deadline := time.Now().Add(grace)
	for live := len(fds); live > 0; {
		left := time.Until(deadline)
		if left <= 0 {
			break
		}
		n, err := unix.Poll(fds, int(left.Milliseconds())+1)
		if err == syscall.EINTR {
			continue
		}
		if err != nil || n == 0 {
			break
		}
		for i := range fds {
			if fds[i].Fd >= 0 && fds[i].Revents&unix.POLLIN != 0 {
				unix.Close(int(fds[i].Fd))
				fds[i].Fd = -1 // poll ignores negative fds
				live--
			}
		}
	}
	for _, f := range fds {
		if f.Fd >= 0 {
			unix.PidfdSendSignal(int(f.Fd), unix.SIGKILL, nil, 0)
			unix.Close(int(f.Fd))
		}
	}
	return stopped
}
