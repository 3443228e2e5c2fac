package fleet

import (
	"fmt"
	"syscall"
)

// A tmux server that stops answering. Every tmux command is bounded
// (tmux.CommandTimeout, or its caller's shorter deadline); one killed at
// its deadline is reported on Stuck, whichever goroutine ran it, and the
// loop decides what becomes of the panes' workers (lead's stuck.go). Their
// agents are ended without tmux: the pane programs' process groups, whose
// pids WatchPane was given, are killed directly, so that no agent in a
// pane the lead can no longer see goes on working on a plan that is given
// to someone else.

// panePID is the program of one worker's pane.
type panePID struct {
	pane string
	pid  int
}

// reportStuck tells the loop, without blocking, that tmux did not answer;
// one report waiting is enough.
func (f *Fleet) reportStuck(err error) {
	select {
	case f.stuck <- err:
	default:
	}
}

// NotAnswering is the error of the first tmux command that got no answer
// (tmux.ErrNotAnswering), nil while tmux answers or without panes.
func (f *Fleet) NotAnswering() error {
	if f.tmux == nil {
		return nil
	}
	return f.tmux.NotAnswering()
}

// StopPane ends the program of worker id's pane (its process group gets
// SIGKILL) without asking tmux, once it proves to be id's (its
// environment names the worker and this repo). The pane's death is
// reported on Deaths as any other. It returns the pid it killed, 0 when
// there was none to kill (never watched, gone, or not provably id's).
func (f *Fleet) StopPane(id, pane string) (int, error) {
	f.paneMu.Lock()
	pp, ok := f.panePIDs[id]
	f.paneMu.Unlock()
	if !ok || pp.pane != pane || !IsWorkerProcess(pp.pid, id, f.cfg.OrchDir) {
		return 0, nil
	}
	// The pane's program leads its own session and process group.
	if err := syscall.Kill(-pp.pid, syscall.SIGKILL); err != nil {
		return 0, fmt.Errorf("kill %s's pane process %d: %w", id, pp.pid, err)
	}
	return pp.pid, nil
}
