package main

import (
	"os/exec"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/rogpeppe/go-internal/testscript"

	"github.com/orch-dev/orch/internal/eventually"
	"github.com/orch-dev/orch/lead"
)

// TestReliability runs the fault-injection scripts of RELIABILITY.md.
func TestReliability(t *testing.T) {
	if _, err := exec.LookPath("tmux"); err != nil && requireTmux() {
		t.Fatal("tmux is not installed and ORCH_REQUIRE_TMUX=1: install tmux (apt-get install -y tmux)")
	}
	p := scriptParams("testdata/reliability")
	p.Cmds["killworker"] = cmdKillWorker
	p.Cmds["waitworker"] = cmdWaitWorker
	testscript.Run(t, p)
}

// killworker <wN>: kill the process running in the worker's pane, as a
// crash would.
func cmdKillWorker(ts *testscript.TestScript, neg bool, args []string) {
	if len(args) != 1 {
		ts.Fatalf("usage: killworker <wN>")
	}
	v, err := lead.Status(ts.MkAbs("."))
	ts.Check(err)
	for _, w := range v.Workers {
		if w.ID != args[0] {
			continue
		}
		out, err := exec.Command("tmux", "-L", ts.Getenv("ORCH_TMUX_SOCKET"), "display-message", "-p", "-t", w.Pane, "#{pane_pid}").Output()
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
		v, err := lead.Status(root)
		if err != nil {
			return false
		}
		for _, w := range v.Workers {
			if w.ID == args[0] {
				return w.State == args[1]
			}
		}
		return false
	}, "worker %s to be %s", args[0], args[1])
}
