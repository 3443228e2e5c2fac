package fleet

import (
	"context"
	"fmt"
	"syscall"

	"github.com/orch-dev/orch/internal/state"
)

// A plan past its time limit is stopped from outside its agent: the lead
// loop interrupts the agent (Interrupt), gives it a moment to come back
// (at its prompt, or its headless process ended), and ends its process
// (Kill) if it did not.

// Interrupt asks w's agent to stop what it does: Escape then Ctrl-C into
// its pane (after proving the pane is w's), or SIGINT to its headless
// process group.
func (f *Fleet) Interrupt(ctx context.Context, w *state.Worker) error {
	if w.Headless {
		return f.signal(w, syscall.SIGINT)
	}
	if err := f.CheckPane(ctx, w); err != nil {
		return err
	}
	return f.tmux.SendInterrupt(ctx, w.Pane)
}

// Kill ends w's agent: SIGKILL to its headless process group, or to the
// process group of its pane's program (the pane stays, dead, and its death
// is reported like any other).
func (f *Fleet) Kill(ctx context.Context, w *state.Worker) error {
	if w.Headless {
		return f.signal(w, syscall.SIGKILL)
	}
	if err := f.CheckPane(ctx, w); err != nil {
		return err
	}
	pid, err := f.tmux.PanePID(ctx, w.Pane)
	if err != nil {
		return err
	}
	// The pane's program leads its own session and process group.
	if err := syscall.Kill(-pid, syscall.SIGKILL); err != nil {
		return fmt.Errorf("kill %s's pane process %d: %w", w.ID, pid, err)
	}
	return nil
}

// signal sends sig to the process group of w's headless process, once it
// proves to be w's (a pid can be reused once the process is gone).
func (f *Fleet) signal(w *state.Worker, sig syscall.Signal) error {
	pid := LivePID(f.cfg.OrchDir, w)
	if pid == 0 {
		return fmt.Errorf("%s has no headless process running: %w", w.ID, syscall.ESRCH)
	}
	// Spawn started it as the leader of its own process group.
	if err := syscall.Kill(-pid, sig); err != nil {
		return fmt.Errorf("signal %s's process group %d: %w", w.ID, pid, err)
	}
	return nil
}
