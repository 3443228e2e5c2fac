package fleet

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"time"

	"github.com/orch-dev/orch/event"
	"github.com/orch-dev/orch/internal/orchdir"
	"github.com/orch-dev/orch/internal/state"
)

// A worker brought back while orch serve runs: after its pane died (the
// loop decides whether and when, within its restart budget), or because
// its agent ran out of context and starts afresh. Either way the worker
// gets a new pane, with a new id, in the same worktree: the old pane's
// death, reported by its watcher or the tmux hook, names a pane that is no
// longer the worker's and has no effect.

// Respawn gives worker w a new pane in the fleet's session, running its
// agent in its own worktree (or the repo, in shared isolation), then
// removes its old pane, if any: a dead one is kept as evidence only until
// then, its last screen saved in .orch/logs/<worker>-pane-<n>.screen; a
// live one (an agent out of context) is killed with its agent. The new
// pane is split off first, so that a fleet of one worker keeps its
// session. It says whether the new agent is starting (busy until its
// prompt shows: the loop arms its start deadline). The caller records w.
// It runs on the lead loop's goroutine: it takes at most RespawnTimeout
// (a tmux server that stops answering must not stop the loop), and is not
// cut short by a stopping loop (a pane half made is worse than a late one).
func (f *Fleet) Respawn(ctx context.Context, session string, w *state.Worker) (starting bool, err error) {
	if f.tmux == nil || session == "" {
		return false, fmt.Errorf("%w: no tmux fleet to give %s a new pane in", ErrNoFleet, w.ID)
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), RespawnTimeout)
	defer cancel()
	has, err := f.tmux.HasSession(ctx, session)
	if err != nil {
		return false, fmt.Errorf("respawn %s: %w", w.ID, err)
	}
	if !has {
		return false, fmt.Errorf("%w: tmux session %s is gone (orch serve --workers N started again brings the fleet up)", ErrNoFleet, session)
	}
	pane, pid, err := f.startPane(ctx, session, w.ID, true)
	if err != nil {
		return false, fmt.Errorf("respawn %s: %w", w.ID, err)
	}
	if old := w.Pane; old != "" {
		// Only a pane still provably w's is touched (a dead one counts).
		if err := f.tmux.ProvePane(ctx, old, w.ID, true); err == nil {
			f.keepScreen(ctx, w.ID, old)
			if err := f.tmux.KillPane(ctx, old); err != nil {
				f.log.Warn("respawn: old pane not removed", "worker", w.ID, "pane", old, "err", err)
			}
		}
	}
	f.WatchPane(w.ID, pane, pid)
	f.recordAgent(w)
	now := f.cfg.Now().UTC()
	w.Pane, w.PID, w.Reason, w.Since, w.Host, w.Starting, w.Asked, w.Hooked = pane, 0, "", now, event.Hostname(), false, "", false
	if f.WaitsForPrompt(w.ID) {
		markStarting(w, now)
		return true, nil
	}
	w.State = state.WorkerIdle
	return false, nil
}

// RespawnTimeout bounds Respawn: its tmux commands (about 8) and, when
// the worker's worktree is gone, the git commands that make it again.
const RespawnTimeout = 30 * time.Second

// keepScreen saves the last screen of a worker's pane before it is
// removed (best effort: the pane may be gone already).
func (f *Fleet) keepScreen(ctx context.Context, worker, pane string) {
	cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	screen, err := f.tmux.Capture(cctx, pane, 0)
	if err != nil || screen == "" {
		return
	}
	dir := filepath.Join(f.cfg.OrchDir, orchdir.Logs)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return
	}
	name := fmt.Sprintf("%s-pane-%s.screen", worker, pane[1:])
	if err := os.WriteFile(filepath.Join(dir, name), []byte(screen), 0o600); err != nil {
		f.log.Warn("respawn: last screen not kept", "worker", worker, "pane", pane, "err", err)
	}
}

// StopRun ends the headless process pid of worker id (its process group
// gets SIGKILL), if it still is that worker's: its exit is reported on
// Exits like any other.
func (f *Fleet) StopRun(id string, pid int) error {
	if pid <= 0 || !IsWorkerProcess(pid, id, f.cfg.OrchDir) {
		return nil // gone already
	}
	if err := syscall.Kill(-pid, syscall.SIGKILL); err != nil && err != syscall.ESRCH {
		return fmt.Errorf("stop %s's process %d: %w", id, pid, err)
	}
	return nil
}

// SessionUp says whether the fleet's tmux session is there (false when
// tmux does not answer within 5 s, or its server is gone).
func (f *Fleet) SessionUp(session string) bool {
	if !f.Panes() || session == "" {
		return false
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	has, err := f.tmux.HasSession(ctx, session)
	return err == nil && has
}
