package lead

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/orch-dev/orch/event"
	"github.com/orch-dev/orch/fleet"
	"github.com/orch-dev/orch/internal/orchdir"
	"github.com/orch-dev/orch/internal/state"
	"github.com/orch-dev/orch/notify"
	"github.com/orch-dev/orch/tmux"
)

// fleetUp brings up the tmux session with one pane per worker, or re-adopts
// the panes of a session that is already there. A pane is adopted only if
// its @orch_worker option names the worker: a pane that cannot be proven to
// be the right worker is never typed into.
func (l *Loop) fleetUp(ctx context.Context) error {
	name, has, err := l.sessionFor(ctx)
	if err != nil {
		return fmt.Errorf("fleet: %w", err)
	}
	l.st.Session = name
	found := map[string]tmux.Pane{}
	if err := l.adoptIsolation(has); err != nil {
		return err
	}
	if has {
		panes, err := l.tmux.ListPanes(ctx, name)
		if err != nil {
			return fmt.Errorf("fleet: %w", err)
		}
		for _, p := range panes {
			switch {
			case p.Worker != "" && !p.Dead:
				found[p.Worker] = p
			case p.Worker != "" && p.Dead:
				// A worker's pane from before, kept by remain-on-exit: its
				// worker gets a new pane below.
				if err := l.tmux.KillPane(ctx, p.ID); err != nil {
					l.log.Warn("fleet: remove dead pane", "pane", p.ID, "err", err)
				}
			}
		}
	}
	now := l.cfg.Now().UTC()
	for i := 1; i <= l.cfg.Workers; i++ {
		id := fmt.Sprintf("w%d", i)
		w := l.st.EnsureWorker(id, now)
		if w.Headless {
			if pid := fleet.LivePID(l.orchDir, w); pid != 0 {
				return fmt.Errorf("%w: %s's headless process %d from an earlier orch serve --headless still runs; wait for it or stop it with orch down", ErrNoFleet, id, pid)
			}
			// Its process is gone: a plan it held is decided below, with
			// the panes lost at start.
			w.Headless, w.PID, w.Pane = false, 0, ""
		}
		if p, ok := found[id]; ok {
			if w.Pane != p.ID {
				l.log.Info("worker re-adopted in a renumbered pane", "worker", id, "pane", p.ID, "was", w.Pane)
			}
			w.Pane = p.ID
			if w.State == state.WorkerDead {
				w.State, w.Reason = state.WorkerIdle, ""
			}
			l.watchPane(id, p.ID, p.PID)
			continue
		}
		pane, pid, err := l.startPane(ctx, name, id, has)
		if err != nil {
			return fmt.Errorf("fleet: start %s: %w", id, err)
		}
		if !has {
			if err := l.tmux.SetOption(ctx, name, fleet.RootOption, l.cfg.Root); err != nil {
				return fmt.Errorf("fleet: %w", err)
			}
		}
		has = true
		l.watchPane(id, pane, pid)
		w.Starting, w.Asked = false, ""
		if p := l.st.Plans[w.Plan]; p != nil && p.Preparing != 0 && p.Worker == id {
			// Only its setup was running, in the worktree (which outlives
			// the pane): it runs again, and this pane gets the line.
			w.Pane, w.Reason, w.Since, w.Host = pane, "", now, hostname()
			if l.waitsForPrompt() {
				l.starting(w, now)
			}
			continue
		}
		if w.Plan != "" {
			// Its old pane is gone, and with it the work in progress. The
			// plan is not queued again here: a "done" it sent may still be
			// waiting in the spool or the stream. reportLost puts the loss
			// into the stream behind those, and the loop decides then.
			l.lost = append(l.lost, lostPlan{worker: id, pane: w.Pane, plan: w.Plan, attempt: l.attemptOf(w.Plan)})
			w.Pane, w.Reason, w.Since, w.Host = pane, "", now, hostname()
			if l.waitsForPrompt() {
				l.starting(w, now)
			}
			l.log.Info("worker up in a new pane; its plan's fate is decided once earlier events are in", "worker", id, "pane", pane, "plan", w.Plan)
			continue
		}
		w.Pane, w.State, w.Plan, w.Reason, w.Since, w.Host = pane, state.WorkerIdle, "", "", now, hostname()
		if l.waitsForPrompt() {
			l.starting(w, now)
		}
		l.log.Info("worker up", "worker", id, "pane", pane, "starting", w.Starting)
	}
	if err := l.setDeathHook(ctx, name); err != nil {
		l.log.Warn("fleet", "err", err)
	}
	return l.save()
}

// sessionFor picks the tmux session of this repo's fleet: orch-<repo>, or,
// when a session of that name belongs to another repo (same folder name
// elsewhere), orch-<repo>-<hash of the root>. A session is this repo's only
// if its @orch_root option says so.
func (l *Loop) sessionFor(ctx context.Context) (string, bool, error) {
	base := tmux.SessionName(l.cfg.Root)
	sum := sha256.Sum256([]byte(l.cfg.Root))
	for _, name := range []string{base, base + "-" + hex.EncodeToString(sum[:3])} {
		has, err := l.tmux.HasSession(ctx, name)
		if err != nil {
			return "", false, err
		}
		if !has {
			return name, false, nil
		}
		root, err := l.tmux.SessionOption(ctx, name, fleet.RootOption)
		if err != nil {
			return "", false, err
		}
		if root == l.cfg.Root {
			return name, true, nil
		}
		l.log.Warn("tmux session belongs to another repo; not touching it", "session", name, "root", root)
	}
	return "", false, fmt.Errorf("%w: sessions %s and %s-* belong to other repos", ErrNoFleet, base, base)
}

// lostPlan is a plan whose worker's pane was gone when orch serve started.
type lostPlan struct {
	worker, pane, plan string
	attempt            int // the plan's attempt the worker held
}

// reportLost publishes one "lost" record per lost plan, behind everything
// already in the stream and the spool.
func (l *Loop) reportLost() {
	for _, lp := range l.lost {
		sum := sha256.Sum256([]byte("lost " + lp.worker + " " + lp.pane + " " + lp.plan + " " + l.cfg.Now().String()))
		status := fmt.Sprintf("pane %s was gone when orch serve started", lp.pane)
		if lp.pane == "" {
			status = "orch serve stopped while starting its headless process (the agent never started)"
		}
		e := event.Event{V: event.Version, ID: hex.EncodeToString(sum[:16]), Kind: event.Lost, Worker: lp.worker, Pane: lp.pane,
			Plan: lp.plan, Attempt: lp.attempt, Host: hostname(), Status: status, Time: l.cfg.Now().UTC()}
		if _, _, err := notify.PublishOn(l.nc, l.b.Prefix(), e, 5*time.Second); err != nil {
			l.log.Error("report lost pane", "worker", lp.worker, "err", err)
		}
	}
	l.lost = nil
}

func (l *Loop) startPane(ctx context.Context, session, id string, split bool) (string, int, error) {
	env, err := l.workerEnv(id)
	if err != nil {
		return "", 0, err
	}
	command, agentEnv, err := l.paneCommand(id)
	if err != nil {
		return "", 0, err
	}
	for k, v := range agentEnv {
		env[k] = v
	}
	if l.cfg.BinDir != "" {
		// The pane's shell may be a login shell that resets PATH from the
		// user's profile; set it again right before the agent starts.
		command = "export PATH=" + fleet.ShellQuote(l.cfg.BinDir) + ":\"$PATH\"; exec " + command
	}
	dir := l.cfg.Root
	if l.isolated() {
		if dir, err = l.ensureWorktree(ctx, id); err != nil {
			return "", 0, err
		}
	}
	var pane string
	if split {
		pane, err = l.tmux.SplitWindow(ctx, session, dir, env, command)
	} else {
		pane, err = l.tmux.NewSession(ctx, session, dir, env, command)
	}
	if err != nil {
		return "", 0, err
	}
	if err := l.tmux.SetPaneOption(ctx, pane, tmux.WorkerOption, id); err != nil {
		return "", 0, err
	}
	if err := l.tmux.SetPaneTitle(ctx, pane, id); err != nil {
		return "", 0, err
	}
	// Keep a dead pane (and its last screen) so that pane-died fires and
	// the evidence stays readable with orch read.
	if err := l.tmux.SetPaneOption(ctx, pane, "remain-on-exit", "on"); err != nil {
		return "", 0, err
	}
	pid, err := l.tmux.PanePID(ctx, pane)
	if err != nil {
		return "", 0, err
	}
	return pane, pid, nil
}

// setDeathHook makes tmux tell the lead loop, through orch-notify, the
// moment a worker's program exits: an event, not a poll of the panes.
func (l *Loop) setDeathHook(ctx context.Context, session string) error {
	notifyBin := l.notifyBin()
	for _, s := range []string{notifyBin, l.orchDir} {
		if strings.ContainsAny(s, "'\"$`\\\n#") {
			return fmt.Errorf("death hook: path %q has quote, $ or # characters; pane deaths are noticed from the pane process only", s)
		}
	}
	// tmux expands the #{...} formats for the pane that died; the single
	// quotes keep tmux from expanding anything else.
	sh := fmt.Sprintf(`ORCH_DIR="%s" ORCH_WORKER="#{%s}" ORCH_PANE="#{pane_id}" "%s" died "pane #{pane_id} exited with #{?pane_dead_signal,signal #{pane_dead_signal},status #{pane_dead_status}}"`,
		l.orchDir, tmux.WorkerOption, notifyBin)
	for _, hook := range []string{"pane-died", "pane-exited"} {
		if err := l.tmux.SetHook(ctx, session, hook, "run-shell -b '"+sh+"'"); err != nil {
			return err
		}
	}
	return nil
}

// workerEnv is what each worker's process gets: how to reach the broker,
// which credentials to use, who it is, and orch-notify on its PATH. The
// credentials travel as a file path, never as a value on a command line.
func (l *Loop) workerEnv(id string) (map[string]string, error) {
	env := map[string]string{
		"ORCH_URL":    l.b.URL(),
		"ORCH_CREDS":  filepath.Join(l.orchDir, orchdir.Creds, orchdir.WorkerCreds),
		"ORCH_WORKER": id,
		"ORCH_DIR":    l.orchDir,
		// With ORCH_URL and ORCH_PREFIX both given, orch-notify need not
		// read broker.json.
		"ORCH_PREFIX": l.b.Prefix(),
		// The tmux server may have been started by a client running in the
		// C locale; the agent should see the user's locale instead.
		"LC_ALL": os.Getenv("LC_ALL"),
	}
	path := os.Getenv("PATH")
	if l.cfg.BinDir != "" && !strings.HasPrefix(path, l.cfg.BinDir+string(os.PathListSeparator)) {
		path = l.cfg.BinDir + string(os.PathListSeparator) + path
	}
	env["PATH"] = path
	return env, nil
}

func hostname() string {
	h, _ := os.Hostname()
	return h
}

// paneAlive says whether w's recorded pane is still there and provably w's
// (false when tmux itself is missing or its server is gone).
func (l *Loop) paneAlive(w *state.Worker) bool {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	return tmux.New(l.cfg.TmuxSocket).ProvePane(ctx, w.Pane, w.ID, false) == nil
}
