// Package fleet is the workers orch serve runs: tmux panes and headless
// processes, their deaths and exits, their worktrees and setup commands,
// and the names they go by (branches, folders, the session's tmux
// option), which the CLI uses too.
//
// How the pieces fit. The lead loop builds one Fleet from a Config and
// owns the record: Up (panes.go) or UpHeadless (headless.go) bring the
// workers of a state up, and every later step takes the worker or plan it
// acts on and never saves or publishes. What happens off the loop is
// reported on channels the loop selects on, never by calling back into it:
// a pane process's exit on Deaths (WatchPane, a pidfd), a headless
// process's exit on Exits (Spawn and Release, or the rewatch of one an
// earlier loop started), a pane's output on Screens (WatchScreens, one
// control-mode client), a setup command's end on Setups (RunSetup). What
// Up found gone at start waits for the loop (TakeLost, TakeExits) until
// the stream has caught up. A worker's worktree is made by EnsureWorktree
// (worktree.go) and gets the .worktreeinclude files (include.go). Typing
// into a pane (screens.go, panes.go) and a worker's command line and
// environment (agentcmd.go) are mechanics; what a screen means for a plan
// is the loop's to decide. Close wakes every watcher and lets every
// pending report go.
package fleet

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"

	"github.com/orch-dev/orch/internal/orchdir"
	"github.com/orch-dev/orch/internal/state"
)

// IncludeFile lists files (git-ignored ones, like .env) copied from the
// repo into each worktree before a plan is dispatched.
const IncludeFile = ".worktreeinclude"

// BranchPrefix starts the name of every plan branch.
const BranchPrefix = "orch/"

// PlanBranch is the branch a plan is worked on in worktree isolation.
func PlanBranch(plan string) string { return BranchPrefix + plan }

// WorktreeDir is worker id's worktree in the repo at root.
func WorktreeDir(root, id string) string {
	return filepath.Join(orchdir.Of(root), orchdir.Worktrees, id)
}

// RootOption is the session option that names the repo a fleet belongs to.
const RootOption = "@orch_root"

// ShellQuote quotes s for a POSIX shell.
func ShellQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// LivePID is the running headless process of worker w, if any. Every
// agent process has its pid saved before it starts (see Spawn).
func LivePID(orchDir string, w *state.Worker) int {
	if w.PID != 0 && IsWorkerProcess(w.PID, w.ID, orchDir) {
		return w.PID
	}
	return 0
}

// IsWorkerProcess says whether pid runs with worker id's environment for
// this repo (ORCH_WORKER and ORCH_DIR): a process of that worker, not an
// unrelated one that got the same pid later. (Its own descendants carry
// the same environment; the pid itself is what orch recorded.)
func IsWorkerProcess(pid int, id, orchDir string) bool {
	env, err := os.ReadFile(fmt.Sprintf("/proc/%d/environ", pid))
	if err != nil {
		return false
	}
	vars := strings.Split(string(env), "\x00")
	return slices.Contains(vars, "ORCH_WORKER="+id) && slices.Contains(vars, "ORCH_DIR="+orchDir)
}

// StopHeadless ends the headless processes recorded in the state (their
// process groups get SIGTERM), for orch down. Only processes that prove
// to be this repo's workers are signalled.
func StopHeadless(root string) ([]string, error) {
	st, err := state.Load(orchdir.Of(root))
	if err != nil {
		return nil, err
	}
	var stopped []string
	for _, w := range st.Workers {
		pid := LivePID(orchdir.Of(root), w)
		if !w.Headless || pid == 0 {
			continue
		}
		if err := syscall.Kill(-pid, syscall.SIGTERM); err == nil {
			stopped = append(stopped, fmt.Sprintf("headless %s (pid %d, plan %s)", w.ID, pid, w.Plan))
		}
	}
	return stopped, nil
}

// LogName is the file, under .orch/logs, of one headless run.
func LogName(plan string, attempt int) string { return fmt.Sprintf("%s-%d.log", plan, attempt) }
