package orchctl

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"syscall"
	"time"

	"github.com/orch-dev/orch/event"
	"github.com/orch-dev/orch/fleet"
	"github.com/orch-dev/orch/internal/flock"
	"github.com/orch-dev/orch/internal/orchdir"
	"github.com/orch-dev/orch/internal/state"
	"github.com/orch-dev/orch/ledger"
	"github.com/orch-dev/orch/plans"
	"github.com/orch-dev/orch/tmux"
)

// StatusView is orch status: workers and plans from the lead loop's record
// and the plan folders in git. It never reads a screen.
type StatusView struct {
	Serving bool   `json:"serving"`
	PID     int    `json:"pid,omitempty"`
	Session string `json:"session,omitempty"`
	// Isolation is how the fleet's workers edit: worktree or shared.
	Isolation string            `json:"isolation,omitempty"`
	Workers   []*state.Worker   `json:"workers"`
	Plans     []PlanView        `json:"plans"`
	Rejected  []state.Rejection `json:"rejected,omitempty"`
	Errors    map[string]string `json:"errors,omitempty"`
	Problems  []string          `json:"problems,omitempty"`
	// Rebuilt is set when the record was made again from git.
	Rebuilt *state.Rebuilt `json:"rebuilt,omitempty"`
	// TmuxDown is set once the tmux server stopped answering: the panes'
	// workers run their plans headless.
	TmuxDown *state.TmuxDown `json:"tmux_down,omitempty"`
	// SetAside counts the spool files set aside as not events.
	SetAside int `json:"spool_set_aside,omitempty"`
	// External is the external cluster that keeps the stream (orch serve
	// --nats), nil with the embedded broker.
	External *ExternalView `json:"external,omitempty"`
	// Hosts are the other machines registered (orch hosts), with their
	// links as the running loop sees them.
	Hosts []HostView `json:"hosts,omitempty"`
}

// PlanView is one plan in orch status.
type PlanView struct {
	state.Run
	DependsOn []string `json:"depends_on,omitempty"`
	Waiting   string   `json:"waiting,omitempty"` // why a queued plan is not dispatched yet
	Branch    string   `json:"branch,omitempty"`  // its branch, in worktree isolation
	// Stale names the dependencies that went on to a new attempt after
	// this plan's branch was made from them: its branch lacks their new
	// work (orch never rebases under a worker; see README).
	Stale []string `json:"stale,omitempty"`
}

// Status builds the status view of the repo at root.
func Status(root string) (StatusView, error) {
	v := StatusView{Workers: []*state.Worker{}, Plans: []PlanView{}}
	st, err := state.Load(orchdir.Of(root))
	if err != nil {
		return v, err
	}
	v.PID = ServePID(root)
	v.Serving = v.PID != 0
	v.External = External(context.Background(), root)
	if v.Hosts, err = Hosts(root); err != nil {
		v.Problems = append(v.Problems, err.Error())
	}
	v.Session, v.Isolation, v.Rebuilt, v.TmuxDown = st.Session, st.Isolation, st.Rebuilt, st.TmuxDown
	if _, err := os.Lstat(filepath.Join(orchdir.Of(root), orchdir.State)); errors.Is(err, os.ErrNotExist) {
		if entries, err := ledger.Load(root); err == nil && len(entries) > 0 {
			v.Problems = append(v.Problems, fmt.Sprintf("the lead loop's record (.orch/state.json) is missing, so every plan reads as a draft here; git holds %d ledger entries: orch serve rebuilds the record from git when it starts", len(entries)))
		}
	}
	if ents, err := os.ReadDir(filepath.Join(orchdir.Of(root), orchdir.Spool, event.Rejected)); err == nil {
		for _, e := range ents {
			if !strings.HasSuffix(e.Name(), ".why") {
				v.SetAside++
			}
		}
	}
	if st.Workers != nil {
		v.Workers = st.Workers
	}
	defs, bad, err := plans.LoadEach(root)
	if err != nil {
		v.Problems = append(v.Problems, err.Error())
		defs = map[string]*plans.Plan{}
	}
	broken := map[string]bool{}
	for _, b := range bad {
		v.Problems = append(v.Problems, b.Err.Error())
		broken[b.Name] = true
	}
	names := map[string]bool{}
	for n := range defs {
		names[n] = true
	}
	for n := range st.Plans {
		names[n] = true
	}
	sorted := make([]string, 0, len(names))
	for n := range names {
		sorted = append(sorted, n)
	}
	sort.Strings(sorted)
	for _, n := range sorted {
		pv := PlanView{Run: state.Run{Name: n, State: state.PlanDraft}}
		if p := st.Plans[n]; p != nil {
			pv.Run = *p
			if p.Base != "" {
				pv.Branch = fleet.PlanBranch(n)
				pv.Stale = st.StaleStack(p)
			}
		}
		if d := defs[n]; d != nil {
			pv.DependsOn = d.DependsOn
			if pv.State == state.PlanQueued {
				pv.Waiting = waiting(st, d)
			}
		} else if !broken[n] && err == nil {
			v.Problems = append(v.Problems, fmt.Sprintf("plan %s is recorded but plans/%s/PLAN.md is gone", n, n))
		}
		v.Plans = append(v.Plans, pv)
	}
	if n := len(st.Rejected); n > 10 {
		v.Rejected = st.Rejected[n-10:]
	} else {
		v.Rejected = st.Rejected
	}
	if len(st.Errors) > 0 {
		v.Errors = st.Errors
	}
	return v, nil
}

func waiting(st *state.State, d *plans.Plan) string {
	var deps []string
	for _, dep := range d.DependsOn {
		p := st.Plans[dep]
		ps := state.PlanDraft
		if p != nil {
			ps = p.State
		}
		if !plans.Reached(string(ps), d.DependsOnState) {
			deps = append(deps, dep+" ("+string(ps)+")")
		}
	}
	if len(deps) > 0 {
		want := d.DependsOnState
		if want == "" {
			want = string(state.PlanDone)
		}
		return "dependencies not " + want + ": " + strings.Join(deps, ", ")
	}
	if p := st.Plans[d.Name]; p != nil && p.Preparing != 0 {
		return "setup running in " + p.Worker + "'s worktree"
	}
	if len(st.Workers) == 0 {
		return "no fleet: start orch serve --workers N"
	}
	route := ""
	if p := st.Plans[d.Name]; p != nil {
		if why := st.RouteWait(p, d.Agent); why != "" {
			return why
		}
		route = st.RouteNote(p, d.Agent)
	}
	if p := st.Plans[d.Name]; p != nil && len(p.Exclude) > 0 {
		free := 0
		for _, w := range st.Workers {
			if w.State != state.WorkerDead && !slices.Contains(p.Exclude, w.ID) {
				free++
			}
		}
		if free == 0 {
			return fmt.Sprintf("waiting: no live worker other than %s (the author) to verify it", strings.Join(p.Exclude, ", "))
		}
		return "waiting for an idle worker" + route + " other than " + strings.Join(p.Exclude, ", ")
	}
	if p := st.Plans[d.Name]; p != nil && p.Target != "" {
		return "waiting for " + p.Target + " to be idle"
	}
	return "waiting for an idle worker" + route
}

// pane finds a worker's pane from the lead loop's record.
func pane(root, id string) (string, *state.State, error) {
	st, err := state.Load(orchdir.Of(root))
	if err != nil {
		return "", nil, err
	}
	w := st.Worker(id)
	if w != nil && w.Headless {
		return "", nil, fmt.Errorf("%w: %s is a headless worker: it has no screen and reads no input; its output is in %s/%s/<plan>-<attempt>.log", ErrNoFleet, id, orchdir.Name, orchdir.Logs)
	}
	if w == nil || w.Pane == "" {
		return "", nil, fmt.Errorf("%w: %q (orch status lists the workers)", ErrNoFleet, id)
	}
	return w.Pane, st, nil
}

// ReadPane returns what worker id's pane shows, with lines of history. A
// pane that is not provably the worker's (ids are reused after a tmux
// restart) is not read: it may be someone else's screen.
func ReadPane(ctx context.Context, root, socket, id string, lines int) (string, error) {
	if host := remoteOf(root, id); host != "" {
		return readRemote(root, host, id, lines)
	}
	p, _, err := pane(root, id)
	if err != nil {
		return "", err
	}
	tc := tmux.New(socket)
	// A dead pane is still the worker's: its last screen is the evidence.
	if err := tc.ProvePane(ctx, p, id, true); err != nil {
		return "", fmt.Errorf("read %s: %w", id, err)
	}
	return tc.Capture(ctx, p, lines)
}

// SendPane types one line into worker id's pane.
func SendPane(ctx context.Context, root, socket, id, text string) error {
	if host := remoteOf(root, id); host != "" {
		return fmt.Errorf("send to %s: %w: %s runs on host %s, and orch send does not reach a host's panes yet; nothing typed", id, ErrNoFleet, id, host)
	}
	p, _, err := pane(root, id)
	if err != nil {
		return err
	}
	tc := tmux.New(socket)
	// Type only into a pane that proves to be this worker's.
	if err := tc.ProvePane(ctx, p, id, false); err != nil {
		return fmt.Errorf("send to %s: %w; nothing typed", id, err)
	}
	return tc.SendLine(ctx, p, text)
}

// Down stops the lead loop, then the fleet's tmux session, and returns once
// both are gone. The loop goes first: with the panes killed under it, it
// would record every worker as dead and queue their plans again.
func Down(ctx context.Context, root, socket string, timeout time.Duration) (stopped []string, err error) {
	if pid := ServePID(root); pid != 0 {
		if err := syscall.Kill(pid, syscall.SIGTERM); err != nil {
			return stopped, fmt.Errorf("stop orch serve (pid %d): %w", pid, err)
		}
		// Wait for the lock: a blocking flock in another goroutine returns
		// the moment orch serve exits; the timer is a one-shot deadline.
		released := make(chan error, 1)
		go func() {
			lk, err := flock.Exclusive(filepath.Join(orchdir.Of(root), orchdir.ServePID))
			if err == nil {
				lk.Unlock()
			}
			released <- err
		}()
		t := time.NewTimer(timeout)
		defer t.Stop()
		select {
		case err := <-released:
			if err != nil {
				return stopped, err
			}
			stopped = append(stopped, fmt.Sprintf("orch serve (pid %d)", pid))
		case <-t.C:
			return stopped, fmt.Errorf("orch serve (pid %d) did not stop within %s", pid, timeout)
		case <-ctx.Done():
			return stopped, ctx.Err()
		}
	}
	hl, err := fleet.StopHeadless(root)
	stopped = append(stopped, hl...)
	if err != nil {
		return stopped, err
	}
	st, err := state.Load(orchdir.Of(root))
	if err != nil {
		return stopped, err
	}
	// Whatever the agents started and left running goes last, once their
	// panes and headless processes are gone.
	defer func() { stopped = append(stopped, fleet.StopWorkerProcs(orchdir.Of(root), 3*time.Second)...) }()
	if st.Session == "" {
		return stopped, nil
	}
	tc := tmux.New(socket)
	if has, _ := tc.HasSession(ctx, st.Session); has {
		// Only this repo's fleet: a session of the same name may be another's.
		if owner, err := tc.SessionOption(ctx, st.Session, fleet.RootOption); err != nil || owner != root {
			return stopped, fmt.Errorf("tmux session %s belongs to %q, not this repo; left alone", st.Session, owner)
		}
		if err := tc.KillSession(ctx, st.Session); err != nil {
			return stopped, err
		}
		stopped = append(stopped, "tmux session "+st.Session)
	}
	return stopped, nil
}
