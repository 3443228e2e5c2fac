package hostd

import (
	"context"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/orch-dev/orch/config"
	"github.com/orch-dev/orch/event"
	"github.com/orch-dev/orch/fleet"
	"github.com/orch-dev/orch/hosts"
	"github.com/orch-dev/orch/internal/state"
	"github.com/orch-dev/orch/session"
)

// A host whose workers run in tmux panes (orch host join --tmux): one
// pane per worker on the host's own tmux server, brought up (or re-adopted)
// by the lead's own fleet code (fleet.Up), and driven by the lead's own
// session code (package session) on a record the host keeps of its
// workers and the plans it was asked to run: the dispatch line waits for
// the agent's prompt and its echo as on the lead, a dialog on screen is
// reported, never answered. The host hears its workers' events on its own
// server (a ready hook, started, done), its panes' output through tmux's
// control mode (fleet.WatchScreens), and their deaths through a pidfd
// (fleet.WatchPane). What the lead must know goes into the host's stream
// as events about the worker: a death as died (the host's workers' keys
// may not send it), a dialog or an unacknowledged dispatch as needs-input
// or failed about the plan. The record lives as long as the orch host
// process: a restarted host re-adopts its panes, and a dispatch line that
// waited for a prompt then is not typed (the lead's plan waits).

// ackTimeout is how long a host's pane worker has to say started after
// its line was typed before the line is typed once more (then the plan
// fails): the lead's default (lead.DefaultAckTimeout).
const ackTimeout = 2 * time.Minute

// panes is the host's part of the session work; its fields are used with
// the daemon's lock held.
type panes struct {
	st       *state.State
	sessions *session.Sessions
	heard    chan event.Event
	after    []func(*state.State)
}

// upPanes brings up the host's panes and the sessions that type into
// them, and listens to its workers' events on its own server.
func (d *daemon) upPanes(ctx context.Context, nc *nats.Conn) (*nats.Subscription, error) {
	p := d.newPanes()
	started, err := d.fleet.Up(ctx, p.st, len(d.tok.Workers))
	if err != nil {
		return nil, err
	}
	p.sessions.Started(started)
	sub, err := nc.Subscribe(d.tok.Prefix+".ev.*.*", func(m *nats.Msg) {
		e, err := event.Parse(m.Data)
		if err != nil || event.SubjectWorker(d.tok.Prefix, m.Subject) != e.Worker {
			return // the lead's loop says why; the host only follows
		}
		select {
		case p.heard <- e:
		default:
			d.log.Warn("worker event not followed (too many at once)", "kind", e.Kind, "worker", e.Worker)
		}
	})
	if err != nil {
		return nil, err
	}
	d.fleet.WatchScreens(ctx, p.st.Session)
	for _, w := range p.st.Workers {
		d.log.Info("worker pane", "worker", w.ID, "pane", w.Pane, "starting", w.Starting)
	}
	return sub, nil
}

// newPanes makes the host's record and the sessions working on it.
func (d *daemon) newPanes() *panes {
	p := &panes{st: state.New(), heard: make(chan event.Event, 256)}
	p.sessions = session.New(session.Config{Fleet: d.fleet, StartTimeout: session.DefaultStartTimeout, AckTimeout: ackTimeout,
		Log: d.log, Now: time.Now, WorkDir: func(id string) string { return fleet.WorkDir(d.repo.Root, config.Worktree, id) },
		Save:     func() error { return nil }, // the record is this process's (see above)
		Schedule: func(context.Context) {},    // the lead schedules
		After:    func(fn func(*state.State)) { p.after = append(p.after, fn) },
		Tell:     d.tell})
	d.panes = p
	return p
}

// runPane types plan's dispatch line into the worker's pane (the
// worktree readied already), as the lead types into its own: once the
// agent is at its prompt, Enter once the line shows.
func (d *daemon) runPane(ctx context.Context, req hosts.Run) (hosts.Reply, error) {
	p := d.panes
	w := p.st.Worker(req.Worker)
	if w == nil || w.Pane == "" {
		return hosts.Reply{}, fmt.Errorf("%w: %s has no pane on this host", ErrRequest, req.Worker)
	}
	if old := p.st.Plans[w.Plan]; old != nil && old.Worker == w.ID {
		delete(p.st.Plans, old.Name) // the lead has moved on from it
	}
	now := time.Now().UTC()
	run := &state.Run{Name: req.Plan, State: state.PlanDispatched, Worker: w.ID, Attempts: req.Attempt, Updated: now}
	p.st.Plans[req.Plan] = run
	w.Plan = req.Plan
	if !w.Starting {
		w.State, w.Since = state.WorkerBusy, now
	}
	if err := p.sessions.TypeLine(ctx, p.st, w, req.Plan); err != nil {
		delete(p.st.Plans, req.Plan)
		w.Plan = ""
		if !w.Starting {
			w.State = state.WorkerIdle
		}
		return hosts.Reply{}, err
	}
	d.log.Info("plan typed", "plan", req.Plan, "worker", w.ID, "attempt", req.Attempt, "pane", w.Pane, "waiting", run.Waiting)
	return hosts.Reply{Pane: w.Pane}, nil
}

// deadPane refuses a run on a worker whose pane has died, before anything
// is fetched or readied: Dead, so the lead queues the plan again (no
// attempt) and takes the worker out of use, even if the host's died has
// not reached it, or named a pane it never recorded.
func (d *daemon) deadPane(worker string) (hosts.Reply, error) {
	if d.panes == nil {
		return hosts.Reply{}, nil
	}
	if w := d.panes.st.Worker(worker); w != nil && w.State == state.WorkerDead {
		return hosts.Reply{Dead: true}, fmt.Errorf("%w: %s's pane %s has died (%s); it gets a new one when orch host starts again", ErrBusy, w.ID, w.Pane, w.Reason)
	}
	return hosts.Reply{}, nil
}

// screen is a pane worker's screen, for orch read.
func (d *daemon) screen(ctx context.Context, req hosts.Log) (hosts.Reply, bool, error) {
	if d.panes == nil {
		return hosts.Reply{}, false, nil
	}
	w := d.panes.st.Worker(req.Worker)
	if w == nil || w.Pane == "" {
		return hosts.Reply{}, false, nil
	}
	screen, err := d.fleet.Capture(ctx, w)
	if err != nil {
		return hosts.Reply{}, true, err
	}
	if req.Lines > 0 {
		screen = lastLines(screen, req.Lines)
	}
	return hosts.Reply{Text: screen, Pane: w.Pane}, true, nil
}

// heard follows one of the host's workers' events: a ready hook ends an
// agent's start; started, and the plan's end, move the host's record on.
func (d *daemon) heard(ctx context.Context, e event.Event) {
	p := d.panes
	w := p.st.Worker(e.Worker)
	if w == nil {
		return
	}
	run := p.st.Plans[e.Plan]
	held := run != nil && run.Worker == w.ID && w.Plan == run.Name
	switch e.Kind {
	case event.Ready:
		p.sessions.Ready(p.st, e)
	case event.Started:
		if held && run.State == state.PlanDispatched {
			run.State = state.PlanRunning
		}
	case event.Done, event.Blocked, event.Failed:
		if held {
			delete(p.st.Plans, run.Name)
			w.Free(time.Now())
			w.Plan = ""
		}
	case event.NeedsInput:
		if held {
			run.State = state.PlanNeedsInput
		}
	}
	d.runAfter()
}

// runAfter runs what the sessions left for after the current event (the
// host records nothing in between).
func (d *daemon) runAfter() {
	p := d.panes
	for len(p.after) > 0 {
		fn := p.after[0]
		p.after = p.after[1:]
		fn(p.st)
	}
}

// died reports a pane whose process ended: the worker is dead on the
// host, and the lead is told through the host's stream.
func (d *daemon) died(ctx context.Context, x fleet.Death) {
	p := d.panes
	w := p.st.Worker(x.Worker)
	if w == nil || w.Pane != x.Pane || w.State == state.WorkerDead {
		return
	}
	status := fmt.Sprintf("pane %s exited (process %d) on host %s", x.Pane, x.PID, d.tok.Host)
	w.State, w.Reason, w.Since = state.WorkerDead, status, time.Now().UTC()
	if run := p.st.Plans[w.Plan]; run != nil && run.Worker == w.ID {
		delete(p.st.Plans, run.Name)
	}
	plan := w.Plan
	w.Plan = ""
	e := event.New(event.Died, "", status, w.ID, d.tok.Host)
	e.ID = event.DerivedID(fmt.Sprintf("died %s %s %d on %s", w.ID, x.Pane, x.PID, d.tok.Host))
	e.Pane = x.Pane
	d.record(ctx, e)
	d.log.Warn("worker's pane died", "worker", w.ID, "pane", x.Pane, "plan", plan)
}

// tell passes what the sessions would tell the lead (a dialog a plan
// waits on, a dispatch never acknowledged) to the lead, as an event about
// the worker's plan; one about a worker with no plan (a dialog while its
// agent starts) is the host's to log.
func (d *daemon) tell(cb *event.Callback) {
	p := d.panes
	if cb != nil {
		p.st.Outbox = append(p.st.Outbox, cb)
	}
	out := p.st.Outbox
	p.st.Outbox = nil
	for _, cb := range out {
		var kind event.Kind
		switch cb.Kind {
		case event.CallbackNeedsInput:
			kind = event.NeedsInput
		case event.CallbackFailed:
			kind = event.Failed
		default:
			continue
		}
		plan := cb.Plan
		if w := p.st.Worker(cb.Worker); w != nil && plan == w.ID {
			plan = w.Plan // asks: about the worker, while its plan waited
		}
		if plan == "" || event.CheckPlanName(plan) != nil {
			d.log.Warn("worker needs input before its agent is up", "worker", cb.Worker, "screen", cb.Status)
			continue
		}
		e := event.New(kind, plan, cb.Status, cb.Worker, d.tok.Host)
		e.ID = event.DerivedID("host " + d.tok.Host + " " + cb.Event)
		d.record(context.Background(), e)
	}
}

// publishJS keeps e in the host's stream under subject, its id the
// message id.
func (d *daemon) publishJS(ctx context.Context, subject string, e event.Event) error {
	_, err := d.js.Publish(ctx, subject, e.Marshal(), jetstream.WithMsgID(e.ID))
	return err
}

// record puts the host's record e about one of its workers into its
// stream, for the lead: under the worker's subjects, with its id as the
// message id (a record made twice counts once).
func (d *daemon) record(ctx context.Context, e event.Event) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := d.publish(ctx, hosts.RecordSubject(d.tok.Prefix, e.Worker, string(e.Kind)), e); err != nil {
		d.log.Error("record not kept", "kind", e.Kind, "plan", e.Plan, "worker", e.Worker, "err", err)
	}
}
