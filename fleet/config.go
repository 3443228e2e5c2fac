package fleet

import (
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"

	"github.com/orch-dev/orch/agent"
	"github.com/orch-dev/orch/git"
	"github.com/orch-dev/orch/internal/runas"
	"github.com/orch-dev/orch/tmux"
)

// Config is what a fleet is built from.
type Config struct {
	Root    string // repo root
	OrchDir string // its .orch/
	Repo    *git.Repo
	// Panes says whether the fleet talks to tmux: a tmux fleet, or one
	// from an earlier run that may still be there.
	Panes      bool
	TmuxSocket string // tmux -L socket, empty for the user's default server
	// Tmux is the client the fleet talks through (nil: one on TmuxSocket
	// with the OS runner); unit tests give it the strict fake.
	Tmux  *tmux.Client
	Agent string // the --agent command, when Profile is nil
	// Profile, when set, is what Agent resolved to: each worker runs its
	// interactive (or headless) command with its hooks installed.
	Profile *agent.Profile
	// Groups, when set, are the agents of the workers this start brings
	// up, in order (a mixed fleet: agents.go); Agent and Profile are then
	// only for workers no group and no Adopt names.
	Groups []Group
	BinDir string // holds orch-notify; put first on the workers' PATH
	// Isolation is config.Worktree or config.Shared; Permissions are
	// orch.yaml's, handed to the agent's preparation.
	Isolation   string
	Permissions string
	// Users are the workers' own Unix users by id (orch.yaml's run_as); a
	// worker not in it runs as the lead's.
	Users map[string]*runas.User
	// Remote are the worker ids other hosts run (package hosts): this
	// fleet's own workers are the lowest ids that are not among them.
	Remote []string
	// Own, when set, are this fleet's workers by id (an orch host's, as
	// its token names them) instead of the lowest ids no host runs.
	Own []string
	// NoDeathHook leaves tmux's pane-died hook unset: an orch host reports
	// its panes' deaths itself (its pidfd watch), and its workers' keys
	// may not send died.
	NoDeathHook bool
	// BrokerURL and Prefix are how a worker reaches the broker.
	BrokerURL, Prefix string
	// Setup runs orch.yaml's setup command in a worktree (nil: none). It
	// is the one piece of the setup run the fleet does not own: the
	// command's process group is tracked with the gates'.
	Setup  func(dir, plan, worker string) error
	Logger *slog.Logger
	Now    func() time.Time
	// Fault kills the process at a fault-injection point (tests only).
	Fault func(point string)
}

// LocalIDs are the ids of this fleet's n workers: the n lowest that no
// other host runs (Own, when set: an orch host's workers).
func (f *Fleet) LocalIDs(n int) []string {
	if len(f.cfg.Own) > 0 {
		return slices.Clone(f.cfg.Own)
	}
	var ids []string
	for i := 1; len(ids) < n; i++ {
		if id := fmt.Sprintf("w%d", i); !slices.Contains(f.cfg.Remote, id) {
			ids = append(ids, id)
		}
	}
	return ids
}

// Death is a pane process that exited.
type Death struct {
	Worker, Pane string
	PID          int
}

// Exit is a headless process that ended.
type Exit struct {
	Worker, Plan string
	Attempt, PID int
	How          string // "exit status 0", "killed by signal ...", or UnknownStatus in it
}

// SetupDone is the end of one setup command run.
type SetupDone struct {
	Plan, Worker string
	Attempt      int   // the plan's Preparing when it started
	Err          error // nil: it passed
}

// Lost is a plan whose worker's pane (or unstarted headless process) was
// gone when the fleet came up.
type Lost struct {
	Worker, Pane, Plan string
	Attempt            int // the plan's attempt the worker held
}

// Fleet is the workers of one orch serve. Its goroutines (pane and
// process watchers, the screen watch, setup runs) report on its channels
// and never block once it is closed.
type Fleet struct {
	cfg    Config
	log    *slog.Logger
	tmux   *tmux.Client // nil without panes
	deaths chan Death
	exits  chan Exit
	// screens are panes whose screen changed (WatchScreens).
	screens chan string
	setups  chan SetupDone
	// screenWatch is set while the control-mode client that reports the
	// panes' output runs.
	screenWatch atomic.Bool
	// stopR is readable once the fleet is closed: it wakes the watchers.
	stopR, stopW int
	// done is closed by Close, so no goroutine blocks on a send.
	done      chan struct{}
	closeOnce sync.Once
	// lost and pending are what Up found gone, for the loop to report once
	// the stream is caught up (TakeLost, TakeExits).
	lost    []Lost
	pending []Exit
	// agents are the workers' own agents (agents.go), set before Up and
	// read on the loop's goroutine only.
	agents map[string]Group
	// stuck reports tmux commands that got no answer (tmux.ErrNotAnswering),
	// at most one waiting: the loop decides once (stuck.go).
	stuck chan error
	// panePIDs are the programs of the panes WatchPane watches, by worker:
	// what StopPanes ends without asking tmux.
	paneMu   sync.Mutex
	panePIDs map[string]panePID
}

// New builds the fleet; Close releases it.
func New(cfg Config) (*Fleet, error) {
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Fault == nil {
		cfg.Fault = func(string) {}
	}
	f := &Fleet{cfg: cfg, log: cfg.Logger, deaths: make(chan Death, 64), exits: make(chan Exit, 64),
		screens: make(chan string, 256), setups: make(chan SetupDone, 64), done: make(chan struct{}),
		stuck: make(chan error, 1), panePIDs: map[string]panePID{}}
	var stop [2]int
	if err := unix.Pipe2(stop[:], unix.O_CLOEXEC); err != nil {
		return nil, fmt.Errorf("fleet: %w", err)
	}
	f.stopR, f.stopW = stop[0], stop[1]
	f.assignGroups()
	if cfg.Panes {
		f.tmux = cfg.Tmux
		if f.tmux == nil {
			f.tmux = tmux.New(cfg.TmuxSocket)
		}
		if f.tmux.OnStuck == nil {
			f.tmux.OnStuck = f.reportStuck
		}
	}
	return f, nil
}

// Close stops the watchers (closing the pipe's write end wakes every one)
// and lets every pending report go. A second Close does nothing.
func (f *Fleet) Close() {
	f.closeOnce.Do(func() {
		close(f.done)
		unix.Close(f.stopW)
		unix.Close(f.stopR)
	})
}

// User is the Unix user worker id runs as (nil: the lead's).
func (f *Fleet) User(id string) *runas.User { return f.cfg.Users[id] }

// Deaths reports pane processes that exited.
func (f *Fleet) Deaths() <-chan Death { return f.deaths }

// Exits reports headless processes that ended.
func (f *Fleet) Exits() <-chan Exit { return f.exits }

// Screens reports panes whose screen changed.
func (f *Fleet) Screens() <-chan string { return f.screens }

// Stuck reports that a tmux command got no answer in time
// (tmux.ErrNotAnswering): the tmux server has stopped answering.
func (f *Fleet) Stuck() <-chan error { return f.stuck }

// Setups reports setup commands that ended.
func (f *Fleet) Setups() <-chan SetupDone { return f.setups }

// Panes says whether the fleet talks to tmux (a loop without a fleet, as
// in a handler's unit test, has no panes).
func (f *Fleet) Panes() bool { return f != nil && f.tmux != nil }

// ScreenWatch says whether the screen watch runs (typed lines wait for
// their echo only then).
func (f *Fleet) ScreenWatch() bool { return f.screenWatch.Load() }

// TakeLost returns, once, the plans Up found lost.
func (f *Fleet) TakeLost() []Lost {
	l := f.lost
	f.lost = nil
	return l
}

// TakeExits returns, once, the headless processes Up found gone.
func (f *Fleet) TakeExits() []Exit {
	p := f.pending
	f.pending = nil
	return p
}

// send delivers v on ch unless the fleet is closed.
func send[T any](f *Fleet, ch chan T, v T) {
	select {
	case ch <- v:
	case <-f.done:
	}
}
