package fleet

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/orch-dev/orch/event"
	"github.com/orch-dev/orch/internal/orchdir"
	"github.com/orch-dev/orch/internal/state"
	"github.com/orch-dev/orch/tmux"
)

// The tmux fleet: one pane per worker in the repo's session. A worker's
// death is noticed from two independent events: the tmux pane-died hook
// (which runs orch-notify died), and the exit of the pane's process
// itself, seen here through a pidfd and reported on Deaths. The second
// exists because tmux 3.3 does not fire pane-died every time (a SIGKILLed
// process was missed in about one case out of five here). Both become a
// "died" event; the second one to arrive finds the worker already dead
// and has no effect.

// Up brings up the tmux session with one pane per worker w1..wN in st, or
// re-adopts the panes of a session that is already there. A pane is
// adopted only if its @orch_worker option names the worker: a pane that
// cannot be proven to be the right worker is never typed into. It returns
// the workers whose new pane's agent is starting (their start deadline is
// the loop's); plans whose pane was gone are kept for TakeLost. The
// caller saves st.
func (f *Fleet) Up(ctx context.Context, st *state.State, workers int) ([]*state.Worker, error) {
	name, has, err := f.sessionFor(ctx)
	if err != nil {
		return nil, fmt.Errorf("fleet: %w", err)
	}
	st.Session = name
	found := map[string]tmux.Pane{}
	if err := f.adoptIsolation(st, has); err != nil {
		return nil, err
	}
	if has {
		panes, err := f.tmux.ListPanes(ctx, name)
		if err != nil {
			return nil, fmt.Errorf("fleet: %w", err)
		}
		killed := 0
		for _, p := range panes {
			switch {
			case p.Worker != "" && !p.Dead:
				found[p.Worker] = p
			case p.Worker != "" && p.Dead:
				// A worker's pane from before, kept by remain-on-exit: its
				// worker gets a new pane below.
				if err := f.tmux.KillPane(ctx, p.ID); err != nil {
					f.log.Warn("fleet: remove dead pane", "pane", p.ID, "err", err)
				}
				killed++
			}
		}
		if killed == len(panes) {
			// Every pane was a dead worker's (all of them ended while tmux
			// did not answer, say): the session, and perhaps its server,
			// went with the last one.
			if has, err = f.tmux.HasSession(ctx, name); err != nil {
				return nil, fmt.Errorf("fleet: %w", err)
			}
		}
	}
	live := map[string]bool{}
	for id := range found {
		live[id] = true
	}
	if err := f.checkAgents(st, live); err != nil {
		return nil, err
	}
	var started []*state.Worker
	starting := func(w *state.Worker, now time.Time) {
		if f.WaitsForPrompt(w.ID) {
			markStarting(w, now)
			started = append(started, w)
		}
	}
	now := f.cfg.Now().UTC()
	for _, id := range f.LocalIDs(workers) {
		w := st.EnsureWorker(id, now)
		if w.Headless {
			if pid := LivePID(f.cfg.OrchDir, w); pid != 0 && st.TmuxDown != nil {
				return nil, fmt.Errorf("%w: %s's headless process %d, started when tmux stopped answering (%s), still runs: orch serve --headless --workers N watches it until it ends (orch serve --workers N started after that brings the panes back), or stop it with orch down",
					ErrNoFleet, id, pid, st.TmuxDown.Since.Format("2006-01-02 15:04:05 MST"))
			} else if pid != 0 {
				return nil, fmt.Errorf("%w: %s's headless process %d from an earlier orch serve --headless still runs; wait for it or stop it with orch down", ErrNoFleet, id, pid)
			}
			// Its process is gone: a plan it held is decided below, with
			// the panes lost at start.
			w.Headless, w.PID, w.Pane = false, 0, ""
		}
		f.recordAgent(w)
		if p, ok := found[id]; ok {
			if w.Pane != p.ID {
				f.log.Info("worker re-adopted in a renumbered pane", "worker", id, "pane", p.ID, "was", w.Pane)
			}
			w.Pane = p.ID
			if w.State == state.WorkerDead {
				w.State, w.Reason = state.WorkerIdle, ""
			}
			f.WatchPane(id, p.ID, p.PID)
			continue
		}
		pane, pid, err := f.startPane(ctx, name, id, has)
		if err != nil {
			return nil, fmt.Errorf("fleet: start %s: %w", id, err)
		}
		if !has {
			if err := f.tmux.SetOption(ctx, name, RootOption, f.cfg.Root); err != nil {
				return nil, fmt.Errorf("fleet: %w", err)
			}
		}
		has = true
		f.WatchPane(id, pane, pid)
		w.Starting, w.Asked = false, ""
		if p := st.Plans[w.Plan]; p != nil && p.Preparing != 0 && p.Worker == id {
			// Only its setup was running, in the worktree (which outlives
			// the pane): it runs again, and this pane gets the line.
			w.Pane, w.Reason, w.Since, w.Host = pane, "", now, event.Hostname()
			starting(w, now)
			continue
		}
		if w.Plan != "" {
			// Its old pane is gone, and with it the work in progress. The
			// plan is not queued again here: a "done" it sent may still be
			// waiting in the spool or the stream. The loop puts the loss
			// into the stream behind those (TakeLost), and decides then.
			f.lost = append(f.lost, Lost{Worker: id, Pane: w.Pane, Plan: w.Plan, Attempt: attemptOf(st, w.Plan)})
			w.Pane, w.Reason, w.Since, w.Host = pane, "", now, event.Hostname()
			starting(w, now)
			f.log.Info("worker up in a new pane; its plan's fate is decided once earlier events are in", "worker", id, "pane", pane, "plan", w.Plan)
			continue
		}
		w.Pane, w.State, w.Plan, w.Reason, w.Since, w.Host = pane, state.WorkerIdle, "", "", now, event.Hostname()
		starting(w, now)
		f.log.Info("worker up", "worker", id, "pane", pane, "starting", w.Starting)
	}
	if f.cfg.NoDeathHook {
		return started, nil
	}
	if err := f.setDeathHook(ctx, name); err != nil {
		f.log.Warn("fleet", "err", err)
	}
	return started, nil
}

// markStarting marks w as starting in a new pane: busy until its agent is
// at its prompt.
func markStarting(w *state.Worker, now time.Time) {
	w.State, w.Starting, w.Asked, w.Hooked, w.Since = state.WorkerBusy, true, "", false, now
	w.Reason = "starting: waiting for the agent's prompt"
}

func attemptOf(st *state.State, plan string) int {
	if p := st.Plans[plan]; p != nil {
		return p.Attempts
	}
	return 0
}

// sessionFor picks the tmux session of this repo's fleet: orch-<repo>, or,
// when a session of that name belongs to another repo (same folder name
// elsewhere), orch-<repo>-<hash of the root>. A session is this repo's only
// if its @orch_root option says so.
func (f *Fleet) sessionFor(ctx context.Context) (string, bool, error) {
	base := tmux.SessionName(f.cfg.Root)
	sum := sha256.Sum256([]byte(f.cfg.Root))
	for _, name := range []string{base, base + "-" + hex.EncodeToString(sum[:3])} {
		has, err := f.tmux.HasSession(ctx, name)
		if err != nil {
			return "", false, err
		}
		if !has {
			return name, false, nil
		}
		root, err := f.tmux.SessionOption(ctx, name, RootOption)
		if err != nil {
			return "", false, err
		}
		if root == f.cfg.Root {
			return name, true, nil
		}
		f.log.Warn("tmux session belongs to another repo; not touching it", "session", name, "root", root)
	}
	return "", false, fmt.Errorf("%w: sessions %s and %s-* belong to other repos", ErrNoFleet, base, base)
}

func (f *Fleet) startPane(ctx context.Context, session, id string, split bool) (string, int, error) {
	env := f.workerEnv(id)
	command, agentEnv, err := f.paneCommand(id)
	if err != nil {
		return "", 0, err
	}
	for k, v := range agentEnv {
		env[k] = v
	}
	if f.cfg.BinDir != "" {
		// The pane's shell may be a login shell that resets PATH from the
		// user's profile; set it again right before the agent starts.
		command = "export PATH=" + ShellQuote(f.cfg.BinDir) + ":\"$PATH\"; exec " + command
	}
	dir := f.cfg.Root
	if f.Isolated() {
		if dir, err = f.EnsureWorktree(ctx, id); err != nil {
			return "", 0, err
		}
		if err := f.User(id).GiveTree(dir); err != nil {
			return "", 0, err
		}
	}
	// The tmux server runs as the lead: the pane becomes the worker's user
	// (setpriv) before anything of the agent's runs.
	command = f.User(id).Command(command)
	var pane string
	if split {
		pane, err = f.tmux.SplitWindow(ctx, session, dir, env, command)
	} else {
		pane, err = f.tmux.NewSession(ctx, session, dir, env, command)
	}
	if err != nil {
		return "", 0, err
	}
	if err := f.tmux.SetPaneOption(ctx, pane, tmux.WorkerOption, id); err != nil {
		return "", 0, err
	}
	if err := f.tmux.SetPaneTitle(ctx, pane, id); err != nil {
		return "", 0, err
	}
	// Keep a dead pane (and its last screen) so that pane-died fires and
	// the evidence stays readable with orch read.
	if err := f.tmux.SetPaneOption(ctx, pane, "remain-on-exit", "on"); err != nil {
		return "", 0, err
	}
	pid, err := f.tmux.PanePID(ctx, pane)
	if err != nil {
		return "", 0, err
	}
	return pane, pid, nil
}

// setDeathHook makes tmux tell the lead loop, through orch-notify, the
// moment a worker's program exits: an event, not a poll of the panes.
func (f *Fleet) setDeathHook(ctx context.Context, session string) error {
	notifyBin := f.NotifyBin()
	for _, s := range []string{notifyBin, f.cfg.OrchDir} {
		if strings.ContainsAny(s, "'\"$`\\\n#") {
			return fmt.Errorf("death hook: path %q has quote, $ or # characters; pane deaths are noticed from the pane process only", s)
		}
	}
	// tmux expands the #{...} formats for the pane that died; the single
	// quotes keep tmux from expanding anything else.
	// The hook runs in the session's environment, which carries the first
	// pane's ORCH_CREDS: the dead pane's worker key is named here.
	sh := fmt.Sprintf(`ORCH_DIR="%s" ORCH_WORKER="#{%s}" ORCH_CREDS="%s" ORCH_PANE="#{pane_id}" "%s" died "pane #{pane_id} exited with #{?pane_dead_signal,signal #{pane_dead_signal},status #{pane_dead_status}}"`,
		f.cfg.OrchDir, tmux.WorkerOption, orchdir.WorkerKey(f.cfg.OrchDir, "#{"+tmux.WorkerOption+"}"), notifyBin)
	for _, hook := range []string{"pane-died", "pane-exited"} {
		if err := f.tmux.SetHook(ctx, session, hook, "run-shell -b '"+sh+"'"); err != nil {
			return err
		}
	}
	return nil
}

// WatchPane waits, in its own goroutine, for the pane's process to exit:
// a blocking poll(2) on a pidfd with no timeout, woken by the kernel when
// the process ends or by Close. Nothing runs in between. The exit is
// reported on Deaths.
func (f *Fleet) WatchPane(worker, pane string, pid int) {
	if pid <= 0 {
		return
	}
	f.paneMu.Lock()
	f.panePIDs[worker] = panePID{pane: pane, pid: pid}
	f.paneMu.Unlock()
	fd, err := unix.PidfdOpen(pid, 0)
	if errors.Is(err, unix.ESRCH) {
		go send(f, f.deaths, Death{Worker: worker, Pane: pane, PID: pid})
		return
	}
	if err != nil {
		f.log.Warn("cannot watch the pane's process; relying on the tmux hook alone", "worker", worker, "pid", pid, "err", err)
		return
	}
	go func() {
		defer unix.Close(fd)
		fds := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}, {Fd: int32(f.stopR), Events: unix.POLLIN}}
		for {
			_, err := unix.Poll(fds, -1) // -1: block until one of them is ready
			if !errors.Is(err, unix.EINTR) {
				break // a signal interrupted the wait: wait again, anything else ends it
			}
		}
		if fds[1].Revents != 0 {
			return // the fleet is closing
		}
		if fds[0].Revents != 0 {
			send(f, f.deaths, Death{Worker: worker, Pane: pane, PID: pid})
		}
	}()
}

// PaneAlive says whether w's recorded pane is still there and provably w's
// (false when tmux itself is missing or its server is gone).
func (f *Fleet) PaneAlive(w *state.Worker) bool {
	c := f.cfg.Tmux // a headless fleet has no client of its own
	if c == nil {
		c = tmux.New(f.cfg.TmuxSocket)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	return c.ProvePane(ctx, w.Pane, w.ID, false) == nil
}

// CheckPane proves that w's pane is w's: a live pane whose @orch_worker
// option names it.
func (f *Fleet) CheckPane(ctx context.Context, w *state.Worker) error {
	if w.Remote != "" {
		return fmt.Errorf("%w: %s runs on host %s", ErrRemote, w.ID, w.Remote)
	}
	return f.tmux.ProvePane(ctx, w.Pane, w.ID, false)
}

// SendLine types line into w's pane with its Enter.
func (f *Fleet) SendLine(ctx context.Context, w *state.Worker, line string) error {
	return f.tmux.SendLine(ctx, w.Pane, line)
}

// SendText types text into w's pane, without Enter.
func (f *Fleet) SendText(ctx context.Context, w *state.Worker, text string) error {
	return f.tmux.SendText(ctx, w.Pane, text)
}

// SendEnter presses Enter in w's pane. It finishes even if ctx is
// cancelled meanwhile (a line half submitted is worse than a late one),
// within 10 s.
func (f *Fleet) SendEnter(ctx context.Context, w *state.Worker) error {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	return f.tmux.SendEnter(ctx, w.Pane)
}

// PressEnter proves that w's pane is w's and presses Enter in it: a line
// already typed there is submitted.
func (f *Fleet) PressEnter(ctx context.Context, w *state.Worker) error {
	if err := f.CheckPane(ctx, w); err != nil {
		return err
	}
	return f.SendEnter(ctx, w)
}
