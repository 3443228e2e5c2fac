// Package hostd is orch host: what runs on another machine that works for
// a lead. It joins with the token orch hosts add printed, runs the host's
// server (broker.StartHost: a leaf node of the lead's, with the host's own
// JetStream stream) in the clone's .orch/, and keeps it up until asked to
// stop. The host's workers run orch-notify as a lead's workers do; their
// events are kept here and reach the lead when its link is up.
//
// The lead's fleet work for this host's workers is done here, asked over
// the link (hosts.OpsSubject): a run fetches the plan's base from the
// clone's remote, readies the worker's worktree and starts the agent's
// headless command (package fleet, as the lead would), or, on a host
// joined with --tmux, types the dispatch line into the worker's pane on
// the host's own tmux server (panes.go: the lead's fleet and session
// code); a process's exit goes into the host's stream as an exited
// record, a pane's death as died; a log request reads a pane's screen, or
// a headless run's output; a bundle commits what a worker left on its
// plan branch and puts a git bundle of it into the host's work store for
// the lead to take. A worktree gets the files the clone's .worktreeinclude
// names, from the clone (never committed). Not built yet (named in the
// README): the setup command on a host.
package hostd

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/fsnotify/fsnotify"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/orch-dev/orch/agent"
	"github.com/orch-dev/orch/broker"
	"github.com/orch-dev/orch/config"
	"github.com/orch-dev/orch/event"
	"github.com/orch-dev/orch/fleet"
	"github.com/orch-dev/orch/git"
	"github.com/orch-dev/orch/hosts"
	"github.com/orch-dev/orch/internal/atomicfile"
	"github.com/orch-dev/orch/internal/flock"
	"github.com/orch-dev/orch/internal/orchdir"
	"github.com/orch-dev/orch/plans"
	"github.com/orch-dev/orch/session"
)

// Config is one orch host join.
type Config struct {
	Root    string // the host's clone
	LeadURL string // nats-leaf://ADDR:PORT, as orch hosts add printed it
	Token   string
	Port    int // loopback port for the workers; 0: the last one if free
	// Agent and Profile are the agent this host's workers run headless,
	// as orch serve's --agent; BinDir holds orch-notify.
	Agent   string
	Profile *agent.Profile
	BinDir  string
	// Remote is the clone's remote the lead's commits are fetched from.
	Remote string
	// Tmux runs each worker in a pane of its own on this host's tmux
	// server (TmuxSocket, tmux -L; "" for the user's default), its agent's
	// interactive command, instead of a headless run per plan.
	Tmux       bool
	TmuxSocket string
	Log        *slog.Logger
	// Ready is called once the host serves, with its server.
	Ready func(h *broker.HostServer)
}

// Join runs the host until ctx ends.
func Join(ctx context.Context, cfg Config) error {
	tok, err := hosts.ParseToken(cfg.Token)
	if err != nil {
		return err
	}
	if cfg.Remote == "" {
		cfg.Remote = "origin"
	}
	log := cfg.Log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	repo, err := git.Open(ctx, cfg.Root)
	if err != nil {
		return fmt.Errorf("host: %w (run orch host join in your clone of the lead's repo)", err)
	}
	dir := orchdir.Of(repo.Root)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("host: %w", err)
	}
	if _, held := flock.Holder(filepath.Join(dir, orchdir.ServeLock)); held {
		return fmt.Errorf("host: %w: orch serve runs here; a host needs a clone of its own (git clone the lead's repo elsewhere)", ErrBusy)
	}
	lock, pid, err := flock.TryExclusive(filepath.Join(dir, orchdir.HostLock))
	if errors.Is(err, flock.ErrHeld) {
		return fmt.Errorf("host: %w: orch host (pid %d) runs here already", ErrBusy, pid)
	}
	if err != nil {
		return fmt.Errorf("host: %w", err)
	}
	defer lock.Unlock()
	srv, err := broker.StartHost(ctx, broker.HostConfig{Dir: dir, LeadURL: cfg.LeadURL, Token: tok, Port: cfg.Port, Logger: log})
	if err != nil {
		return fmt.Errorf("host: %w", err)
	}
	defer srv.Shutdown()
	// The lead may ask as soon as the link is up: the subscription is made
	// first, its requests wait until the daemon below is ready.
	d := &daemon{ready: make(chan struct{})}
	nc, err := srv.Connect()
	if err != nil {
		return fmt.Errorf("host: %w", err)
	}
	defer nc.Close()
	sub, err := nc.Subscribe(hosts.OpsSubject(tok.Prefix, tok.Host, "*"), d.serve)
	if err != nil {
		return fmt.Errorf("host: %w", err)
	}
	defer sub.Unsubscribe()
	fl, err := fleet.New(fleet.Config{Root: repo.Root, OrchDir: dir, Repo: repo, Agent: cfg.Agent, Profile: cfg.Profile, BinDir: cfg.BinDir,
		Isolation: config.Worktree, BrokerURL: srv.URL(), Prefix: tok.Prefix, Logger: log,
		Panes: cfg.Tmux, TmuxSocket: cfg.TmuxSocket, Own: tok.Workers, NoDeathHook: true})
	if err != nil {
		return fmt.Errorf("host: %w", err)
	}
	defer fl.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		return fmt.Errorf("host: %w", err)
	}
	store, err := js.ObjectStore(ctx, hosts.WorkBucket)
	if err != nil {
		return fmt.Errorf("host: %w", err)
	}
	d.cfg, d.tok, d.repo, d.fleet, d.js, d.store, d.log = cfg, tok, repo, fl, js, store, log
	d.publish = d.publishJS
	d.spool, d.signer, d.running, d.lastLog = filepath.Join(dir, orchdir.Spool), srv.SignerKey, map[string]int{}, map[string]string{}
	d.runs = d.loadRuns()
	// Runs an earlier orch host started: their agents outlive it (their
	// own process groups); their ends are reported as any other's.
	for w, r := range d.runs {
		d.running[w], d.lastLog[w] = r.PID, fleet.LogName(r.Plan, r.Attempt)
		fl.Rewatch(w, r.Plan, r.Attempt, r.PID)
	}
	var checks <-chan session.Check
	if cfg.Tmux {
		psub, err := d.upPanes(ctx, nc)
		if err != nil {
			return fmt.Errorf("host: %w", err)
		}
		defer psub.Unsubscribe()
		defer d.panes.sessions.Close()
		checks = d.panes.sessions.Checks()
	}
	close(d.ready)
	for _, n := range fl.TakeExits() {
		d.ended(ctx, n)
	}
	// Watched before it is read: a file written between the two is seen
	// by one or the other (and published once: its id is the message id).
	watcher, err := fsnotify.NewWatcher()
	if err != nil {
		return fmt.Errorf("host: spool watch: %w", err)
	}
	defer watcher.Close()
	if err := os.MkdirAll(d.spool, 0o700); err != nil {
		return fmt.Errorf("host: %w", err)
	}
	if err := watcher.Add(d.spool); err != nil {
		return fmt.Errorf("host: spool watch: %w", err)
	}
	d.ingestSpool(ctx, true)
	log.Info("host up", "host", tok.Host, "workers", strings.Join(tok.Workers, ","), "url", srv.URL(), "lead", cfg.LeadURL)
	if cfg.Ready != nil {
		cfg.Ready(srv)
	}
	for {
		select {
		case <-ctx.Done():
			log.Info("host stopping", "host", tok.Host)
			return nil
		case n := <-fl.Exits():
			d.ended(ctx, n)
		case x := <-fl.Deaths():
			d.locked(func() { d.died(ctx, x) })
		case pane := <-fl.Screens():
			d.locked(func() { d.panes.sessions.ScreenChanged(ctx, d.panes.st, pane); d.runAfter() })
		case c := <-checks:
			d.locked(func() { d.panes.sessions.Expired(ctx, d.panes.st, c); d.runAfter() })
		case e := <-d.heardCh():
			d.locked(func() { d.heard(ctx, e) })
		case ev, ok := <-watcher.Events:
			if !ok {
				return nil
			}
			if ev.Has(fsnotify.Create) || ev.Has(fsnotify.Write) {
				d.ingestFile(ctx, ev.Name)
			}
		case err, ok := <-watcher.Errors:
			if !ok {
				return nil
			}
			log.Warn("spool watch", "err", err) // an overflow: read it all again
			d.ingestSpool(ctx, false)
		}
	}
}

// daemon answers the lead's requests; one at a time (git in one clone).
type daemon struct {
	cfg   Config
	tok   hosts.Token
	repo  *git.Repo
	fleet *fleet.Fleet
	js    jetstream.JetStream
	store jetstream.ObjectStore
	log   *slog.Logger
	mu    sync.Mutex
	// spool is the clone's .orch/spool; signer the public key of one of
	// this host's workers.
	spool  string
	signer func(worker string) string
	// running is each busy worker's process (a run is refused on it);
	// ready is closed once the fields above are set.
	running map[string]int
	lastLog map[string]string // each worker's last run's log, by name
	runs    map[string]run    // the runs still going, as saved in orchdir.HostRuns
	// publish keeps a record of the host's in its stream (publishJS;
	// unit tests look at what it is given).
	publish func(ctx context.Context, subject string, e event.Event) error
	// panes is the host's tmux fleet's record and sessions (nil: its
	// workers run headless).
	panes *panes
	ready chan struct{}
}

// locked runs fn with the daemon's lock held: the loop's reports and the
// lead's requests change the same record.
func (d *daemon) locked(fn func()) {
	d.mu.Lock()
	defer d.mu.Unlock()
	fn()
}

// heardCh delivers the workers' events a pane host follows (nil, never
// ready, for a headless host).
func (d *daemon) heardCh() <-chan event.Event {
	if d.panes == nil {
		return nil
	}
	return d.panes.heard
}

func (d *daemon) serve(m *nats.Msg) {
	if m.Reply == "" {
		return
	}
	<-d.ready
	data, _ := json.Marshal(d.answer(m.Subject, m.Data))
	m.Respond(data)
}

// answer does the lead's request op (the subject's last token) with
// data, and says what came of it.
func (d *daemon) answer(subject string, data []byte) hosts.Reply {
	d.mu.Lock()
	defer d.mu.Unlock()
	// Under the lead's wait, so a run it gave up on does not start later.
	ctx, cancel := context.WithTimeout(context.Background(), hosts.RunTimeout)
	defer cancel()
	var r hosts.Reply
	var err error
	switch op := subject[strings.LastIndexByte(subject, '.')+1:]; op {
	case hosts.OpRun:
		var req hosts.Run
		if err = decode(data, &req); err == nil {
			r, err = d.run(ctx, req)
		}
	case hosts.OpBundle:
		var req hosts.Bundle
		if err = decode(data, &req); err == nil {
			r, err = d.bundle(ctx, req)
		}
	case hosts.OpLog:
		var req hosts.Log
		if err = decode(data, &req); err == nil {
			var pane bool
			if r, pane, err = d.screen(ctx, req); !pane && err == nil {
				r, err = d.logTail(req)
			}
		}
	case hosts.OpTaken:
		var req hosts.TakenBundle
		if err = decode(data, &req); err == nil {
			err = d.store.Delete(ctx, req.Object)
		}
	default:
		err = fmt.Errorf("%w: %q", ErrRequest, op)
	}
	if err != nil {
		d.log.Warn("lead's request not done", "subject", subject, "err", err)
		r = hosts.Reply{Error: err.Error(), Dead: r.Dead}
	}
	return r
}

func decode(data []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return fmt.Errorf("%w: %v", ErrRequest, err)
	}
	return nil
}

// check says what is wrong with a request about worker's plan at base.
func (d *daemon) check(worker, plan, base string) error {
	if !slices.Contains(d.tok.Workers, worker) {
		return fmt.Errorf("%w: worker %q is not this host's (%s)", ErrRequest, worker, strings.Join(d.tok.Workers, ","))
	}
	if err := plans.ValidateName(plan); err != nil {
		return fmt.Errorf("%w: %v", ErrRequest, err)
	}
	if !shaPattern.MatchString(base) {
		return fmt.Errorf("%w: base %q is not a commit id", ErrRequest, base)
	}
	return nil
}

var shaPattern = regexp.MustCompile(`^[0-9a-f]{40}$`)

// run readies the worker's worktree for the plan at its base and starts
// the agent's headless command.
func (d *daemon) run(ctx context.Context, req hosts.Run) (hosts.Reply, error) {
	if err := d.check(req.Worker, req.Plan, req.Base); err != nil {
		return hosts.Reply{}, err
	}
	if len(req.PlanMD) == 0 || len(req.PlanMD) > hosts.MaxPlanMD {
		return hosts.Reply{}, fmt.Errorf("%w: PLAN.md of %d bytes", ErrRequest, len(req.PlanMD))
	}
	if pid := d.running[req.Worker]; pid != 0 {
		return hosts.Reply{}, fmt.Errorf("%w: worker %s still runs process %d", ErrBusy, req.Worker, pid)
	}
	if r, err := d.deadPane(req.Worker); err != nil {
		return r, err
	}
	if !d.repo.HasCommit(ctx, req.Base) {
		if err := d.repo.Fetch(ctx, d.cfg.Remote); err != nil {
			return hosts.Reply{}, err
		}
		if !d.repo.HasCommit(ctx, req.Base) {
			return hosts.Reply{}, fmt.Errorf("%w: commit %s is not on remote %s of this clone (it must be the lead's repo, or hold the lead's branches)", ErrBase, git.Short(req.Base), d.cfg.Remote)
		}
	}
	// The clone's own .worktreeinclude (at its HEAD) names the files of
	// this machine's (git-ignored, like .env) each worktree gets.
	inc, err := fleet.Includes(ctx, d.repo)
	if err != nil {
		return hosts.Reply{}, err
	}
	if _, err := d.fleet.Prepare(ctx, fleet.Job{Plan: req.Plan, Worker: req.Worker, Base: req.Base, PlanText: req.PlanMD, Includes: inc}); err != nil {
		return hosts.Reply{}, err
	}
	if d.panes != nil {
		return d.runPane(ctx, req)
	}
	line, err := fleet.DispatchLine(req.Plan, d.fleet.NotifyBin())
	if err != nil {
		return hosts.Reply{}, err
	}
	proc, err := d.fleet.Spawn(req.Worker, req.Plan, req.Attempt, line)
	if err != nil {
		return hosts.Reply{}, err
	}
	// The lead records the pid it is told; a lead that never hears it
	// (the link lost now) finds the run by its events and its exit.
	if ctx.Err() != nil {
		proc.Abort() // the lead has stopped waiting: not started
		return hosts.Reply{}, ctx.Err()
	}
	if err := proc.Release(); err != nil {
		return hosts.Reply{}, err
	}
	d.running[req.Worker] = proc.PID
	d.lastLog[req.Worker] = fleet.LogName(req.Plan, req.Attempt)
	d.runs[req.Worker] = run{Plan: req.Plan, Attempt: req.Attempt, PID: proc.PID}
	d.saveRuns()
	d.log.Info("plan started", "plan", req.Plan, "worker", req.Worker, "attempt", req.Attempt, "pid", proc.PID)
	return hosts.Reply{PID: proc.PID}, nil
}

// bundle commits what the worker left on the plan's branch and stores a
// bundle of the branch's commits beyond base for the lead.
func (d *daemon) bundle(ctx context.Context, req hosts.Bundle) (hosts.Reply, error) {
	if err := d.check(req.Worker, req.Plan, req.Base); err != nil {
		return hosts.Reply{}, err
	}
	branch := fleet.PlanBranch(req.Plan)
	wt := d.repo.At(fleet.WorktreeDir(d.repo.Root, req.Worker))
	at, clean, err := wt.Status(ctx)
	if err != nil {
		return hosts.Reply{}, err
	}
	if at == branch && !clean {
		inc, err := fleet.Includes(ctx, d.repo)
		if err != nil {
			return hosts.Reply{}, err
		}
		// The included files are this machine's, never committed.
		if _, err := wt.CommitAll(ctx, req.Plan+": "+req.Worker+"'s work on host "+d.tok.Host, inc...); err != nil {
			return hosts.Reply{}, err
		}
	}
	tmp, err := os.CreateTemp(orchdir.Of(d.repo.Root), ".bundle-*")
	if err != nil {
		return hosts.Reply{}, err
	}
	tmp.Close()
	defer os.Remove(tmp.Name())
	head, ok, err := d.repo.Bundle(ctx, tmp.Name(), req.Base, branch)
	if err != nil || !ok {
		return hosts.Reply{Head: head}, err
	}
	f, err := os.Open(tmp.Name())
	if err != nil {
		return hosts.Reply{}, err
	}
	defer f.Close()
	name := req.Plan + "-" + head
	if _, err := d.store.Put(ctx, jetstream.ObjectMeta{Name: name, Opts: &jetstream.ObjectMetaOptions{ChunkSize: broker.WorkChunk}}, f); err != nil {
		return hosts.Reply{}, fmt.Errorf("work store: %w", err)
	}
	return hosts.Reply{Head: head, Object: name}, nil
}

// reportExit puts a worker's exit into the host's stream, for the lead:
// its id is derived from the run, so a report made twice counts once.
func (d *daemon) reportExit(ctx context.Context, n fleet.Exit) {
	status := fmt.Sprintf("process %d %s", n.PID, n.How)
	e := event.New(event.Exited, n.Plan, status, n.Worker, d.tok.Host)
	e.ID = event.DerivedID(fmt.Sprintf("exited %s %s %d %d on %s", n.Worker, n.Plan, n.Attempt, n.PID, d.tok.Host))
	e.Attempt = n.Attempt
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if _, err := d.js.Publish(ctx, hosts.RecordSubject(d.tok.Prefix, n.Worker, string(event.Exited)), e.Marshal(), jetstream.WithMsgID(e.ID)); err != nil {
		d.log.Error("exit not kept", "plan", n.Plan, "worker", n.Worker, "err", err)
		return
	}
	d.log.Info("plan's process ended", "plan", n.Plan, "worker", n.Worker, "how", n.How)
}

func jetstreamMsgID(id string) jetstream.PublishOpt { return jetstream.WithMsgID(id) }

// logTail is the end of worker's last run's output: its last lines (all
// of the last MaxLogReply bytes when lines is 0).
func (d *daemon) logTail(req hosts.Log) (hosts.Reply, error) {
	if !slices.Contains(d.tok.Workers, req.Worker) {
		return hosts.Reply{}, fmt.Errorf("%w: worker %q is not this host's", ErrRequest, req.Worker)
	}
	name := d.lastLog[req.Worker]
	if name == "" {
		return hosts.Reply{}, fmt.Errorf("%w: %s has run nothing since this orch host started", ErrRequest, req.Worker)
	}
	f, err := os.Open(filepath.Join(orchdir.Of(d.repo.Root), orchdir.Logs, name))
	if err != nil {
		return hosts.Reply{}, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return hosts.Reply{}, err
	}
	n := min(fi.Size(), hosts.MaxLogReply)
	buf := make([]byte, n)
	if _, err := f.ReadAt(buf, fi.Size()-n); err != nil {
		return hosts.Reply{}, err
	}
	text := string(buf)
	if req.Lines > 0 {
		text = lastLines(text, req.Lines)
	}
	return hosts.Reply{Text: text, Name: name}, nil
}

// lastLines is the last n lines of text.
func lastLines(text string, n int) string {
	lines := strings.SplitAfter(text, "\n")
	if len(lines) > 0 && lines[len(lines)-1] == "" {
		lines = lines[:len(lines)-1]
	}
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "")
}

// run is one recorded run.
type run struct {
	Plan    string `json:"plan"`
	Attempt int    `json:"attempt"`
	PID     int    `json:"pid"`
}

func (d *daemon) loadRuns() map[string]run {
	runs := map[string]run{}
	data, err := os.ReadFile(filepath.Join(orchdir.Of(d.repo.Root), orchdir.HostRuns))
	if err != nil {
		return runs
	}
	if err := json.Unmarshal(data, &runs); err != nil {
		d.log.Error("runs record unreadable; the runs it held are not watched", "file", orchdir.HostRuns, "err", err)
		return map[string]run{}
	}
	for w, r := range runs {
		if !slices.Contains(d.tok.Workers, w) || r.PID <= 0 || plans.ValidateName(r.Plan) != nil {
			delete(runs, w)
		}
	}
	return runs
}

// saveRuns writes the runs record, d.mu held (or before serving).
func (d *daemon) saveRuns() {
	data, _ := json.Marshal(d.runs)
	if err := atomicfile.Write(filepath.Join(orchdir.Of(d.repo.Root), orchdir.HostRuns), data, 0o600); err != nil {
		d.log.Error("runs record not saved: a restart of orch host would not report these runs' end", "err", err)
	}
}

// ended reports a run's end and forgets the run.
func (d *daemon) ended(ctx context.Context, n fleet.Exit) {
	d.mu.Lock()
	if d.running[n.Worker] == n.PID {
		delete(d.running, n.Worker)
	}
	if d.runs[n.Worker].PID == n.PID {
		delete(d.runs, n.Worker)
		d.saveRuns()
	}
	d.mu.Unlock()
	d.reportExit(ctx, n)
}
