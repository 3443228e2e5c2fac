// Package lead is the lead loop, orch serve: the daemon that owns the
// embedded broker, the fleet and the record of what happened, and reacts
// to events; nothing in it polls. The CLI's side is internal/orchctl; the
// mechanics the loop drives are packages of their own (fleet: panes and
// headless processes; harvest: committing what workers finished; gates:
// acceptance and setup commands; verify: verification rounds; session:
// each worker's agent session, its readiness, typing and hooks;
// internal/state: the record).
//
// How the pieces fit. Run (lead.go) takes the repo's lock, starts the
// broker, brings up (or re-adopts) the fleet, and then waits in one select
// for: messages the broker pushes to the lead's durable consumer (worker
// events and the lead's own commands), fsnotify events on the spool
// directory (spool.go: events written while the broker was unreachable,
// published into the stream to arrive like any other), the fleet's and the
// gates' reports (a pane died, a process exited, a screen changed, a setup,
// a gate run or a metric command ended, a tmux command got no answer:
// stuck.go), the outcomes of integrations it
// runs by itself (autointegrate.go, integrate: auto), one-shot timers (a
// plan's deadline: timeout.go; a dead worker's restart: restart.go), and
// cancellation. Every message is
// handled in that one goroutine, in order: its effect (a harvest commit, a
// ledger entry, a state change) is committed, its callback for the lead is
// published, one state save records both, and only then is the message
// acknowledged. A crash anywhere in between means redelivery, and the
// record of handled event ids, the commits' trailers and the ledger's event
// ids turn it into a no-op that sends the same callback again (dropped by
// the stream as a copy). After each message the scheduler hands ready plans
// to idle workers.
//
// The path of one done, from the worker to the next dispatch:
//
//  1. cmd/orch-notify main → notify Send: publish on <prefix>.ev.done and
//     wait for the stream's ack (event.WriteSpool to .orch/spool if the
//     broker cannot be reached).
//  2. broker: the stream keeps it; the lead's push consumer delivers it.
//  3. lead.go Run: the select's message case.
//  4. harvest.go handleWaiting: each waiting message parsed once (parse);
//     plainDone groups dones that can share commits; harvestDone →
//     harvestAll checks each against the record (handle.go holder, revive).
//  5. harvest package: Collect (the worktree's work on the plan's branch,
//     RESULT.md read once), Results (one commit of the batch's RESULT.md
//     files), Entry and Ledger (one ledger commit), called from harvestAll
//     and settle.
//  6. handle.go publishCallback: the callback orch wait will print.
//  7. back in harvestDone, schedule.go assign → nextReady (planDef: PLAN.md
//     parsed once while it stays as it is) → assignTo: the freed worker's
//     next plan in the record; worktree.go prepare → fleet Prepare readies
//     its worktree.
//  8. lead.go save → internal/state Save: one save records the harvest,
//     that its callback is out, and the dispatch; then the ack.
//  9. schedule.go handOver → session TypeLine → fleet SendText/SendEnter
//     (a tmux pane), or headless.go startHeadless → fleet Spawn (a
//     headless process, its pid saved before it is let go).
package lead

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/fsnotify/fsnotify"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/orch-dev/orch/agent"
	"github.com/orch-dev/orch/board"
	"github.com/orch-dev/orch/broker"
	"github.com/orch-dev/orch/config"
	"github.com/orch-dev/orch/event"
	"github.com/orch-dev/orch/fleet"
	"github.com/orch-dev/orch/gates"
	"github.com/orch-dev/orch/git"
	"github.com/orch-dev/orch/harvest"
	"github.com/orch-dev/orch/hosts"
	"github.com/orch-dev/orch/internal/flock"
	"github.com/orch-dev/orch/internal/orchdir"
	"github.com/orch-dev/orch/internal/state"
	"github.com/orch-dev/orch/session"
	"github.com/orch-dev/orch/verify"
)

// Config is what orch serve was asked to do.
type Config struct {
	Root       string // repo root (holds .orch/)
	Workers    int    // fleet size; 0 runs the lead loop without a fleet
	Agent      string // the agent command each worker pane runs
	TmuxSocket string // tmux -L socket, empty for the user's default server
	BinDir     string // directory holding orch-notify, put first on the workers' PATH
	Port       int    // broker port; 0 reuses the last one when free
	// Upstream, when set, keeps the stream on an external NATS cluster
	// (orch serve --nats); the broker links to it as a leaf node.
	Upstream *broker.Upstream
	// Leaf is the HOST:PORT other hosts link to (orch serve --leaf); ""
	// lets none in.
	Leaf   string
	Logger *slog.Logger
	Now    func() time.Time
	Ready  func(url string) // called once the loop is consuming; optional
	// AckTimeout is how long a worker has to say "started" after a
	// dispatch before the line is re-sent once (then the plan fails).
	// 0 means DefaultAckTimeout; negative disables the check.
	AckTimeout time.Duration
	Fault      string        // fault-injection point (ORCH_FAULT), tests only
	DupeWindow time.Duration // the stream's duplicate window; 0: broker.DupeWindow
	// GateTimeout bounds each acceptance command; 0 means gates.DefaultGateTimeout.
	GateTimeout time.Duration
	// Stagger spreads dispatches: at most one per Stagger (0: no limit).
	Stagger time.Duration
	// Headless runs each plan as a child process (the agent's headless
	// command with the dispatch line as its prompt) instead of typing into
	// a tmux pane.
	Headless bool
	// Isolation overrides orch.yaml's isolation (config.Worktree or
	// config.Shared); empty keeps the file's (default: worktree).
	Isolation string
	// Profile, when set, is what Agent resolved to (package agent): each
	// pane runs its interactive command with its hooks installed.
	Profile *agent.Profile
	// Groups, when set, is a mixed fleet: the agent of each group of
	// workers, w1 onwards (mixed.go); Workers, Agent and Profile are then
	// not used for the fleet.
	Groups []fleet.Group
	// TrimEvery is how many events are handled between trims of the
	// stream (broker.Trim); 0 means DefaultTrimEvery.
	TrimEvery int
	// StartTimeout is how long a worker's agent has to reach its prompt
	// before the lead is told what its screen shows; 0 means
	// session.DefaultStartTimeout, negative disables the check.
	StartTimeout time.Duration
	// Rebuild makes the record again from git even though state.json is
	// there (an unreadable one is moved aside first). Without it, a missing
	// state.json is rebuilt by itself (see loadState).
	Rebuild bool
	// OnBoard, when set, is given the boards' publisher once it runs
	// (orch serve --http follows it).
	OnBoard func(*board.Publisher)
	// InterruptGrace is how long an agent interrupted at its plan's
	// timeout has to come back; 0 means DefaultInterruptGrace.
	InterruptGrace time.Duration
}

// DefaultAckTimeout is the default dispatch acknowledgement deadline: an
// interactive agent may take a while to read its first line.
const DefaultAckTimeout = 2 * time.Minute

// Loop is a running lead loop.
type Loop struct {
	cfg     Config
	conf    *config.Config // orch.yaml, read at start
	orchDir string
	log     *slog.Logger
	repo    *git.Repo
	// harvester commits the harvests (package harvest).
	harvester *harvest.Harvester
	rounds    *verify.Rounds // verification rounds (package verify)
	// defs are the queued plans' definitions, kept while PLAN.md is unchanged.
	defs  map[string]parsedDef
	fleet *fleet.Fleet // the workers; it reports on channels the loop selects on
	st    *state.State
	b     *broker.Broker
	hosts []hosts.Host // the register as the broker has it
	// hostConns are the connections for requests to each host.
	hostConns map[string]*nats.Conn
	skew      skews // each host's clock against the lead's, from its events
	// linkUp is told of each new leaf link (the broker's OnLink).
	linkUp chan struct{}
	prefix string // the broker's subject prefix
	nc     *nats.Conn
	js     jetstream.JetStream
	msgs   chan jetstream.Msg
	// sinceTrim counts the events handled since the stream was last
	// trimmed (stream.go).
	sinceTrim int
	// paneEnded holds the panes whose process this loop saw end (a
	// pidfd): their died records need no look at tmux.
	paneEnded map[string]bool
	// sessions is what orch knows of each worker's agent session (package
	// session): readiness, typing, the hooks' meaning, its deadlines.
	sessions *session.Sessions
	// stopped is closed when Run returns, so that goroutines (timers, the
	// NATS callback) never block sending to a loop that is gone.
	stopped chan struct{}
	// sendVerdicts are the orch send commands of this pass, answered
	// once their lines are typed or found waiting (nudge.go).
	sendVerdicts []string
	// pending runs once the current event's effect is recorded.
	pending []func()
	// restartDue names a dead worker whose granted restart is due
	// (restart.go).
	restartDue chan string
	// wake re-runs the scheduler when a stagger interval has passed.
	wake         chan struct{}
	nextDispatch time.Time
	staggerArmed bool
	// After a setup command failed, no new setup starts before
	// setupHoldUntil (a back-off that doubles while setups keep failing,
	// and resets when one passes): one failure does not fail the whole
	// queue at once. holdArmed is set while its one wake-up timer is out.
	setupHoldUntil time.Time
	setupBackoff   time.Duration
	holdArmed      bool
	retryArmed     bool // a wake-up after a pass whose save failed
	// spoolDue fires when the spool is to be read again after a publish
	// from it failed (failover.go retrySpool); spoolArmed while it is out.
	spoolDue   chan struct{}
	spoolArmed bool
	spoolGap   time.Duration // retrySpool's current back-off
	// unsaved says the last save failed: the record in memory is ahead of
	// the file. saves counts the saves (tests, and the bench's figure).
	unsaved bool
	saves   int
	// deadlines delivers the plans' time limits as they fire, interrupts
	// the looks at interrupted agents after their grace (timeout.go).
	deadlines  chan deadline
	interrupts chan interruptCheck
	// publish stores a callback for the lead (toBroker).
	publish func(*event.Callback) error
	// gates runs the acceptance gates and setup commands and owns their
	// process groups (killed when the loop stops).
	gates *gates.Runner
	// turn is what one turn of the loop (one event or wake-up, its
	// harvests and the dispatches they free) reads once and shares.
	turn turn
	// board sends the record to the live boards after saves (frameSoon):
	// boardDue fires when a frame held back by MinGap is due.
	board      *board.Publisher
	boardDue   chan struct{}
	frameArmed bool
	lastFrame  time.Time
	// integrations reports the outcomes of integrations by themselves
	// (autointegrate.go); integrating is set while one runs, inFlight
	// holds the plans whose record is out and not handled yet, and
	// integrateHeld those a run could not take (by their Updated then).
	integrations  chan integrationReport
	integrating   bool
	inFlight      map[string]bool
	integrateHeld map[string]time.Time
}

// turn is kept for one turn of the loop, then dropped.
type turn struct {
	includes     []string // the .worktreeinclude list (fleet.Includes)
	includesErr  error
	includesRead bool
	// tidy: workers whose worktrees this turn's harvests found clean or
	// committed; their next plan's preparation has nothing to save.
	tidy map[string]bool
}

// includes returns the .worktreeinclude list, read once per turn.
func (l *Loop) includes(ctx context.Context) ([]string, error) {
	if t := &l.turn; !t.includesRead {
		t.includes, t.includesErr = fleet.Includes(ctx, l.repo)
		t.includesRead = true
	}
	return l.turn.includes, l.turn.includesErr
}

// after runs fn once the current event is recorded (state saved): work
// started from an event must not start before the event counts as handled.
func (l *Loop) after(fn func()) { l.pending = append(l.pending, fn) }

func (l *Loop) runPending() {
	if l.unsaved {
		return // not recorded yet: they run after the next save that succeeds
	}
	p := l.pending
	l.pending = nil
	for _, fn := range p {
		fn()
	}
}

// send delivers v on ch unless the loop has stopped.
func send[T any](l *Loop, ch chan T, v T) {
	select {
	case ch <- v:
	case <-l.stopped:
	}
}

// Run runs the lead loop until ctx is cancelled. Cancelled while it
// starts (orch down right after orch serve), it stops without an error.
func Run(ctx context.Context, cfg Config) (err error) {
	defer func() {
		if err != nil && ctx.Err() != nil && errors.Is(err, context.Canceled) {
			cfg.Logger.Info("stopped while starting", "err", err)
			err = nil
		}
	}()
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.AckTimeout == 0 {
		cfg.AckTimeout = DefaultAckTimeout
	}
	if cfg.StartTimeout == 0 {
		cfg.StartTimeout = session.DefaultStartTimeout
	}
	if cfg.GateTimeout <= 0 {
		cfg.GateTimeout = gates.DefaultGateTimeout
	}
	if cfg.TrimEvery <= 0 {
		cfg.TrimEvery = DefaultTrimEvery
	}
	if cfg.InterruptGrace <= 0 {
		cfg.InterruptGrace = DefaultInterruptGrace
	}
	cfg.Groups, cfg.Workers = groupsOf(cfg)
	l := &Loop{cfg: cfg, orchDir: orchdir.Of(cfg.Root), log: cfg.Logger, msgs: make(chan jetstream.Msg, 4096),
		stopped: make(chan struct{}), wake: make(chan struct{}, 1), restartDue: make(chan string, 16), spoolDue: make(chan struct{}, 1), linkUp: make(chan struct{}, 1), paneEnded: map[string]bool{},
		integrations: make(chan integrationReport), inFlight: map[string]bool{}, integrateHeld: map[string]time.Time{},
		deadlines: make(chan deadline, 64), interrupts: make(chan interruptCheck, 64)}
	defer close(l.stopped)
	l.publish = l.toBroker
	if fi, err := os.Stat(l.orchDir); err != nil || !fi.IsDir() {
		return fmt.Errorf("serve: %w: no %s in %s (run orch init first)", ErrNotInitialised, orchdir.Name, cfg.Root)
	}
	lock, pid, err := flock.TryExclusive(filepath.Join(l.orchDir, orchdir.ServeLock))
	if errors.Is(err, flock.ErrHeld) {
		if p, _ := flock.Holder(filepath.Join(l.orchDir, orchdir.ServePID)); p != 0 {
			pid = p
		}
		return fmt.Errorf("serve: %w (pid %d); stop it with orch down, or wait for it to exit", ErrAlreadyServing, pid)
	}
	if err != nil {
		return fmt.Errorf("serve: %w", err)
	}
	// Clients (orch status, dispatch, down) probe serve.pid, never
	// serve.lock: a probe takes its lock for an instant, and on serve.lock
	// that instant would turn away an orch serve starting then. Waiting for
	// serve.pid is safe: only the holder of serve.lock takes it, and a
	// probe lets go at once. It is released last, so a client that sees it
	// free finds serve.lock free too.
	served, err := flock.Exclusive(filepath.Join(l.orchDir, orchdir.ServePID))
	if err != nil {
		lock.Unlock()
		return fmt.Errorf("serve: %w", err)
	}
	served.RecordPID()
	defer served.Unlock()
	defer lock.Unlock()

	if l.repo, err = git.Open(ctx, cfg.Root); err != nil {
		return fmt.Errorf("serve: %w", err)
	}
	branch, err := l.repo.CurrentBranch(ctx)
	if err != nil {
		return fmt.Errorf("serve: %w", err)
	}
	if branch == "" {
		return fmt.Errorf("serve: %w: harvests and ledger entries are commits on a branch, and would be orphaned here; git switch to the branch the plans go on (e.g. git switch main), then orch serve", ErrDetached)
	}
	l.harvester = harvest.New(harvest.Config{Root: cfg.Root, Repo: l.repo, Branch: branch, Log: l.log, Fault: l.fault})
	l.rounds = &verify.Rounds{Root: cfg.Root, Repo: l.repo, Harvester: l.harvester, Log: l.log, Now: cfg.Now}
	if l.conf, err = config.Load(cfg.Root); err != nil {
		return fmt.Errorf("serve: %w", err)
	}
	switch cfg.Isolation {
	case "":
	case config.Worktree, config.Shared:
		l.conf.Isolation = cfg.Isolation
	default:
		return fmt.Errorf("serve: %w: isolation %q: want %s or %s", config.ErrInvalid, cfg.Isolation, config.Worktree, config.Shared)
	}
	if len(l.conf.RunAs) > 0 && l.conf.Isolation != config.Worktree {
		return fmt.Errorf("serve: %w: run_as needs isolation %s (a worker of its own user edits its own worktree, not the repo's checkout)", config.ErrInvalid, config.Worktree)
	}
	if _, err := fleet.Includes(ctx, l.repo); err != nil {
		return fmt.Errorf("serve: %w (fix it and commit)", err)
	}
	if l.st, err = l.loadState(ctx); err != nil {
		return fmt.Errorf("serve: %w", err)
	}
	l.st.Prune(cfg.Now())
	if l.hosts, err = hosts.List(l.orchDir); err != nil {
		return fmt.Errorf("serve: %w", err)
	}
	if len(l.hosts) > 0 && l.conf.Isolation != config.Worktree {
		return fmt.Errorf("serve: %w: hosts are registered (orch hosts), and their workers' work comes to worktrees of the lead's: use isolation %s", config.ErrInvalid, config.Worktree)
	}
	if cfg.Upstream != nil && (cfg.Leaf != "" || len(l.hosts) > 0) {
		// A host's stream is sourced by the lead's own JetStream, which a
		// broker linked to an external cluster does not run.
		return fmt.Errorf("serve: %w: hosts (orch hosts, --leaf) and an external cluster (--nats) do not go together yet: remove the hosts, or serve without --nats", config.ErrInvalid)
	}
	if len(l.hosts) > 0 && cfg.Leaf == "" {
		l.log.Warn("hosts are registered but orch serve has no --leaf address: they cannot link", "hosts", len(l.hosts))
	}
	ids := workerIDs(cfg.Workers, l.st, hosts.Workers(l.hosts))
	users, err := l.workerUsers(ids)
	if err != nil {
		return fmt.Errorf("serve: %w", err)
	}
	l.b, err = broker.Start(ctx, broker.Config{Dir: l.orchDir, Port: cfg.Port, DupeWindow: cfg.DupeWindow, Workers: ids, Logger: l.log, Upstream: cfg.Upstream,
		Leaf: cfg.Leaf, Hosts: l.hosts, OnLink: func() {
			select {
			case l.linkUp <- struct{}{}:
			default: // one is waiting: it covers this link too
			}
		}})
	if err != nil {
		return fmt.Errorf("serve: %w", err)
	}
	defer l.b.Shutdown()
	l.prefix = l.b.Prefix()
	connLost := make(chan struct{})
	if l.nc, err = l.b.ConnectLead(nats.ClosedHandler(func(*nats.Conn) { close(connLost) })); err != nil {
		return fmt.Errorf("serve: %w", err)
	}
	defer l.nc.Close()
	l.log.Info("broker up", "url", l.b.URL(), "upstream", strings.Join(l.b.Upstream().Hosts(), ","))
	if u := l.b.LeafURL(); u != "" {
		l.log.Info("hosts link here", "leaf", u, "hosts", len(l.hosts))
	}
	if sub, err := l.answerLinks(); err != nil {
		return fmt.Errorf("serve: %w", err)
	} else {
		defer sub.Unsubscribe()
	}
	if err := l.boardUp(ctx); err != nil {
		return fmt.Errorf("serve: board: %w", err)
	}

	headless := cfg.Workers > 0 && cfg.Headless
	// A tmux fleet from an earlier run may still be there with no workers
	// asked for: the loop keeps talking to it.
	panes := !headless && (cfg.Workers > 0 || l.st.Session != "")
	l.fleet, err = fleet.New(fleet.Config{Root: cfg.Root, OrchDir: l.orchDir, Repo: l.repo, Panes: panes,
		TmuxSocket: cfg.TmuxSocket, Agent: cfg.Agent, Profile: cfg.Profile, Groups: cfg.Groups, BinDir: cfg.BinDir,
		Isolation: l.conf.Isolation, Permissions: l.conf.Permissions, BrokerURL: l.b.URL(), Prefix: l.prefix, Users: users,
		Remote: hosts.Workers(l.hosts),
		// The gates' runner, made below, tracks the setup's process group.
		Setup: func(dir, plan, worker string) error {
			return gates.Setup(l.conf, dir, plan, worker, l.fleet.User(worker), l.gates.Track)
		},
		Logger: l.log, Now: cfg.Now, Fault: l.fault})
	if err != nil {
		return fmt.Errorf("serve: %w", err)
	}
	defer l.fleet.Close() // wakes every pane and process watcher
	l.adoptAgents()
	// Before any worker starts: the folders, keys and checks its user needs.
	if err := l.shareWithWorkers(users); err != nil {
		return fmt.Errorf("serve: %w", err)
	}
	l.sessions = l.newSessions()
	defer l.sessions.Close()

	if headless {
		if err := l.headlessUp(); err != nil {
			return fmt.Errorf("serve: %w", err)
		}
	} else if cfg.Workers > 0 {
		if err := l.fleetUp(ctx); err != nil {
			return fmt.Errorf("serve: %w", err)
		}
	}
	if panes {
		l.fleet.WatchScreens(ctx, l.st.Session)
	}
	l.resumeRestarts()
	l.remoteUp()
	defer func() {
		for _, nc := range l.hostConns {
			nc.Close()
		}
	}()

	// Watch the spool before reading it, so that a file written between the
	// two is seen by one or the other (and published once: the event id is
	// the message id).
	watcher, err := fsnotify.NewWatcher()
	if err != nil {
		return fmt.Errorf("serve: spool watch: %w", err)
	}
	defer watcher.Close()
	spool := filepath.Join(l.orchDir, orchdir.Spool)
	if err := os.MkdirAll(spool, 0o700); err != nil {
		return fmt.Errorf("serve: %w", err)
	}
	if err := watcher.Add(spool); err != nil {
		return fmt.Errorf("serve: spool watch: %w", err)
	}
	if err := os.MkdirAll(filepath.Join(l.orchDir, hosts.Dir), 0o700); err != nil {
		return fmt.Errorf("serve: %w", err)
	}
	if err := l.watchHosts(watcher); err != nil {
		return fmt.Errorf("serve: hosts watch: %w", err)
	}
	// A change made between the start's read and the watch.
	l.hostsChanged(ctx)
	l.ingestSpool(true)
	// Gates that were running when the last lead loop stopped: their
	// processes go, and a regate record behind everything already in the
	// stream runs them again, unless their result turns out to be in.
	gates.KillRecorded(l.orchDir)
	l.gates = gates.New(gates.Config{Root: cfg.Root, Repo: l.repo, Conf: l.conf, Timeout: cfg.GateTimeout, Fault: l.fault})
	defer l.gates.Stop()
	l.reportRegates()
	l.resumeSetups()
	l.resumeMeasures()
	// Pane losses found at start go into the stream after everything the
	// workers sent before (pending messages, the spool), so a "done" that was
	// waiting is harvested before its plan could be queued again.
	l.reportLost()
	l.reportExits()

	if n, err := l.b.RewindLead(ctx); err != nil {
		return fmt.Errorf("serve: %w", err)
	} else if n > 0 {
		l.log.Info("catching up: events delivered but not acknowledged before the last stop come again now", "pending", n)
	}
	if l.js, err = jetstream.New(l.nc); err != nil {
		return fmt.Errorf("serve: %w", err)
	}
	l.trim(ctx)
	defer l.mirrorBus(ctx)()
	pc, err := l.js.PushConsumer(ctx, broker.StreamName, broker.LeadConsumer)
	if err != nil {
		return fmt.Errorf("serve: %w", err)
	}
	cc, err := pc.Consume(func(m jetstream.Msg) {
		// Only deliveries of the consumer count: anything else on the
		// delivery subject (a reply a worker pointed here) is dropped.
		if _, err := m.Metadata(); err != nil {
			l.log.Warn("dropped a message that is not a delivery", "subject", m.Subject())
			return
		}
		send(l, l.msgs, m)
	})
	if err != nil {
		return fmt.Errorf("serve: consume: %w", err)
	}
	defer cc.Stop()

	l.flushOutbox()
	l.sessions.Resume(ctx, l.st)
	l.resumeNudges(ctx)
	l.resumeDeadlines(ctx)
	l.resumeRefreshes(ctx)
	l.schedule(ctx)
	// Approved plans left by the last run (a crash mid-integration too).
	if l.conf.AutoIntegrate && !l.isolated() {
		l.log.Warn("integrate: auto has no effect in shared isolation: the workers' work is on the base branch already", "isolation", l.conf.Isolation)
	}
	l.autoIntegrate(ctx)
	if cfg.Ready != nil {
		cfg.Ready(l.b.URL())
	}
	l.log.Info("lead loop ready", "workers", len(l.st.Workers), "repo", cfg.Root)
	// A board that asked before the publisher listened gets its frame.
	l.frameSoon()
	for {
		l.turn = turn{}
		select {
		case <-ctx.Done():
			l.log.Info("lead loop stopping")
			l.drain()
			return nil
		case <-connLost:
			return fmt.Errorf("serve: %w", ErrConnLost)
		case m := <-l.msgs:
			l.handleWaiting(ctx, m)
			l.runPending()
			l.schedule(ctx)
			l.handledOne(ctx)
			l.autoIntegrate(ctx)
		case r := <-l.integrations:
			l.integrationReported(ctx, r)
		case <-l.wake:
			l.staggerArmed, l.holdArmed, l.retryArmed = false, false, false
			l.schedule(ctx)
		case <-l.spoolDue:
			l.spoolArmed = false
			l.ingestSpool(false)
		case <-l.linkUp:
			l.linked(ctx)
		case <-l.boardDue:
			l.offerFrame() // held back by MinGap, due now
		case <-l.board.Wanted():
			l.frameGate()
		case d := <-l.fleet.Deaths():
			l.reportDeath(d)
		case err := <-l.fleet.Stuck():
			l.tmuxStuckNow(ctx, err)
		case n := <-l.fleet.Exits():
			l.reportExit(n)
		case id := <-l.restartDue:
			l.restartNow(ctx, id)
		case s := <-l.fleet.Setups():
			l.reportSetup(s)
		case f := <-l.gates.Finished():
			l.publishGated(f)
		case m := <-l.gates.Measured():
			l.publishMeasured(m)
		case d := <-l.deadlines:
			l.deadlineDue(d)
		case c := <-l.interrupts:
			l.interruptDue(ctx, c)
			l.schedule(ctx)
		case c := <-l.sessions.Checks():
			l.sessions.Expired(ctx, l.st, c)
			l.schedule(ctx)
		case pane := <-l.fleet.Screens():
			l.sessions.ScreenChanged(ctx, l.st, pane)
		case ev, ok := <-watcher.Events:
			if !ok {
				return nil
			}
			if filepath.Base(filepath.Dir(ev.Name)) == hosts.Dir && filepath.Dir(filepath.Dir(ev.Name)) == l.orchDir {
				l.hostsChanged(ctx)
				continue
			}
			if ev.Has(fsnotify.Create) || ev.Has(fsnotify.Write) {
				l.ingestFile(ev.Name)
			}
		case err, ok := <-watcher.Errors:
			if !ok {
				return nil
			}
			// An overflow means events may have been missed: read the
			// whole spool again.
			l.log.Warn("spool watch", "err", err)
			l.ingestSpool(false)
		}
	}
}

// workerIDs are the workers that get a credential: the n of this start
// (the n lowest ids, skipping remote, the ids the hosts own) and every one
// the record knows (their panes may still run).
func workerIDs(n int, st *state.State, remote []string) []string {
	ids := map[string]bool{}
	// The n lowest ids no host owns.
	for i := 1; len(ids) < n; i++ {
		if id := fmt.Sprintf("w%d", i); !slices.Contains(remote, id) {
			ids[id] = true
		}
	}
	for _, w := range st.Workers {
		if !slices.Contains(remote, w.ID) && w.Remote == "" {
			ids[w.ID] = true // a host's worker has its key on its host only
		}
	}
	return slices.Sorted(maps.Keys(ids))
}

// newSessions makes the agents' sessions on the loop's fleet; what only
// the loop does it does for them (save, tell the lead, after, schedule).
func (l *Loop) newSessions() *session.Sessions {
	return session.New(session.Config{Fleet: l.fleet, StartTimeout: l.cfg.StartTimeout, AckTimeout: l.cfg.AckTimeout,
		Log: l.log, Now: l.cfg.Now, WorkDir: l.workDir, Save: l.save, Schedule: l.schedule,
		// A record restored after a failed effect is another record: the
		// work is given the one there is when it runs.
		After: func(fn func(*state.State)) { l.after(func() { fn(l.st) }) },
		Tell: func(cb *event.Callback) {
			if cb != nil {
				l.st.Outbox = append(l.st.Outbox, cb)
			}
			l.flushOutbox()
		}})
}

// drain puts the gate verdicts already reported, and not yet taken, into
// the stream before the loop stops: handled at the next start, before its
// regate records, rather than run again. (A setup that ended meanwhile
// runs again at the next start whatever: resumeSetups.)
func (l *Loop) drain() {
	for {
		select {
		case f := <-l.gates.Finished():
			l.publishGated(f)
		case m := <-l.gates.Measured():
			l.publishMeasured(m)
		default:
			return
		}
	}
}

// save writes the record. After a failed save, events are acknowledged
// and pending work started only once a save succeeds (unsaved).
func (l *Loop) save() error {
	l.saves++
	l.st.Track(l.cfg.Now(), l.profile())
	err := l.st.Save(l.orchDir)
	l.unsaved = err != nil
	if err == nil {
		l.frameSoon()
	}
	return err
}
