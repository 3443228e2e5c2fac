package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/rogpeppe/go-internal/testscript"

	"github.com/orch-dev/orch/internal/eventually"
	"github.com/orch-dev/orch/internal/orchctl"
)

// TestReliability runs the fault-injection scripts of RELIABILITY.md.
func TestReliability(t *testing.T) {
	if _, err := exec.LookPath("tmux"); err != nil && requireTmux() {
		t.Fatal("tmux is not installed and ORCH_REQUIRE_TMUX=1: install tmux (apt-get install -y tmux)")
	}
	p := scriptParams("testdata/reliability")
	p.Cmds["outlast"] = cmdOutlast
	p.Cmds["noseeds"] = cmdNoSeeds
	p.Cmds["waitfilecount"] = cmdWaitFileCount
	p.Cmds["waitlines"] = cmdWaitLines
	p.Cmds["deadpid"] = cmdDeadPID
	testscript.Run(t, p)
}

// killworker <wN>: kill the process running in the worker's pane, or
// its headless process group, with SIGKILL, as a crash would.
func cmdKillWorker(ts *testscript.TestScript, neg bool, args []string) {
	if len(args) != 1 {
		ts.Fatalf("usage: killworker <wN>")
	}
	v, err := orchctl.Status(ts.MkAbs("."))
	ts.Check(err)
	for _, w := range v.Workers {
		if w.ID != args[0] {
			continue
		}
		if w.Headless {
			if w.PID == 0 {
				ts.Fatalf("headless worker %s runs no process", w.ID)
			}
			ts.Check(syscall.Kill(-w.PID, syscall.SIGKILL))
			return
		}
		out, err := tmuxCmd(ts, "display-message", "-p", "-t", w.Pane, "#{pane_pid}").Output()
		ts.Check(err)
		pid, err := strconv.Atoi(string(out[:len(out)-1]))
		ts.Check(err)
		ts.Check(syscall.Kill(pid, syscall.SIGKILL))
		return
	}
	ts.Fatalf("no worker %s", args[0])
}

// waitworker <wN> <state> <within>: the worker reaches state within the
// given duration (the bound is what is being tested, not a margin).
func cmdWaitWorker(ts *testscript.TestScript, neg bool, args []string) {
	if len(args) != 3 {
		ts.Fatalf("usage: waitworker <wN> <state> <within>")
	}
	within, err := time.ParseDuration(args[2])
	ts.Check(err)
	root := ts.MkAbs(".")
	eventually.True(ts, within, func() bool {
		v, err := orchctl.Status(root)
		if err != nil {
			return false
		}
		for _, w := range v.Workers {
			if w.ID == args[0] {
				return string(w.State) == args[1]
			}
		}
		return false
	}, "worker %s to be %s", args[0], args[1])
}

// outlast <duration>: let the duration pass. The scripts that use it test
// what happens after a window of time (the broker's duplicate window), so
// the time itself is the condition.
func cmdOutlast(ts *testscript.TestScript, neg bool, args []string) {
	d, err := time.ParseDuration(args[0])
	ts.Check(err)
	start := time.Now()
	eventually.True(ts, d+5*time.Second, func() bool { return time.Since(start) > d }, "time to pass")
}

// noseeds <file>...: none of the files holds a credential seed of the repo.
func cmdNoSeeds(ts *testscript.TestScript, neg bool, args []string) {
	seeds, err := filepath.Glob(ts.MkAbs(".orch/creds/*.nk"))
	ts.Check(err)
	if len(seeds) == 0 {
		ts.Fatalf("no seeds found to look for")
	}
	for _, sf := range seeds {
		seed := strings.TrimSpace(ts.ReadFile(sf))
		for _, f := range args {
			if strings.Contains(ts.ReadFile(f), seed) {
				ts.Fatalf("%s contains the seed of %s", f, filepath.Base(sf))
			}
		}
	}
}

// waitstatus <regexp>: wait until orch status (text) matches. The bound is
// long: a retried harvest backs off up to a minute between attempts.
func cmdWaitStatus(ts *testscript.TestScript, neg bool, args []string) {
	re, err := regexp.Compile(args[0])
	ts.Check(err)
	dir := ts.MkAbs(".")
	eventually.True(ts, 90*time.Second, func() bool {
		cmd := exec.Command("orch", "status")
		cmd.Dir = dir
		out, _ := cmd.CombinedOutput()
		return re.Match(out)
	}, "orch status to match %q", args[0])
}

// waitfilecount <dir> <n>: wait until dir holds n files.
func cmdWaitFileCount(ts *testscript.TestScript, neg bool, args []string) {
	n, err := strconv.Atoi(args[1])
	ts.Check(err)
	dir := ts.MkAbs(args[0])
	eventually.True(ts, 20*time.Second, func() bool {
		ents, _ := os.ReadDir(dir)
		return len(ents) == n
	}, "%s to hold %d files", args[0], n)
}

// waitlines <file> <n>: wait until file has at least n lines.
func cmdWaitLines(ts *testscript.TestScript, neg bool, args []string) {
	n, err := strconv.Atoi(args[1])
	ts.Check(err)
	path := ts.MkAbs(args[0])
	eventually.True(ts, 20*time.Second, func() bool {
		data, _ := os.ReadFile(path)
		return strings.Count(string(data), "\n") >= n
	}, "%s to have %d lines", args[0], n)
}

// deadpid <file> <line>: the pid on that line (1-based) of file is gone.
func cmdDeadPID(ts *testscript.TestScript, neg bool, args []string) {
	k, err := strconv.Atoi(args[1])
	ts.Check(err)
	lines := strings.Split(strings.TrimSpace(ts.ReadFile(args[0])), "\n")
	if k < 1 || k > len(lines) {
		ts.Fatalf("%s has no line %d", args[0], k)
	}
	pid := strings.TrimSpace(lines[k-1])
	eventually.True(ts, 5*time.Second, func() bool {
		st, err := os.ReadFile("/proc/" + pid + "/stat")
		return err != nil || strings.Contains(string(st), ") Z ")
	}, "gate process %s to be gone", pid)
}

// TestScriptsIgnoreCallerTmux runs a tmux script with TMUX_TMPDIR and TMUX
// set in the caller's environment: the script and this process's helpers
// still meet on the script's own server, and nothing is left in the
// caller's tmux directory.
func TestScriptsIgnoreCallerTmux(t *testing.T) {
	if _, err := exec.LookPath("tmux"); err != nil {
		if requireTmux() {
			t.Fatal("tmux is not installed and ORCH_REQUIRE_TMUX=1: install tmux (apt-get install -y tmux)")
		}
		t.Skip("tmux not installed")
	}
	callers, err := os.MkdirTemp("/tmp", "orch-caller-")
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv("TMUX_TMPDIR", callers)
	t.Setenv("TMUX", filepath.Join(callers, "default")+",1,0")
	// After the script (it runs as a parallel subtest, once this returns).
	t.Cleanup(func() {
		defer os.RemoveAll(callers)
		var left []string
		filepath.WalkDir(callers, func(path string, d os.DirEntry, err error) error {
			if err == nil && path != callers {
				left = append(left, path)
			}
			return nil
		})
		if len(left) > 0 {
			t.Errorf("left in the caller's TMUX_TMPDIR: %v", left)
		}
	})
	p := scriptParams("testdata/reliability")
	p.Dir, p.Files = "", []string{"testdata/reliability/pane_died.txtar"}
	testscript.Run(t, p)
}

// tmuxstop [cont]: stop the script's tmux server with SIGSTOP, so that it
// stops answering as a wedged server does; with cont, let it go on. The
// server is let go and ended when the script ends, whatever happens.
func cmdTmuxStop(ts *testscript.TestScript, neg bool, args []string) {
	if len(args) == 1 && args[0] == "cont" {
		pid, err := strconv.Atoi(ts.Getenv("TMUX_SERVER_PID"))
		ts.Check(err)
		ts.Check(syscall.Kill(pid, syscall.SIGCONT))
		return
	}
	if len(args) != 0 {
		ts.Fatalf("usage: tmuxstop [cont]")
	}
	out, err := tmuxCmd(ts, "display-message", "-p", "#{pid}").Output()
	ts.Check(err)
	pid, err := strconv.Atoi(strings.TrimSpace(string(out)))
	ts.Check(err)
	ts.Setenv("TMUX_SERVER_PID", strconv.Itoa(pid))
	ts.Defer(func() {
		syscall.Kill(pid, syscall.SIGCONT)
		syscall.Kill(pid, syscall.SIGTERM)
	})
	ts.Check(syscall.Kill(pid, syscall.SIGSTOP))
}
