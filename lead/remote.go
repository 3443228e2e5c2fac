package lead

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/orch-dev/orch/broker"
	"github.com/orch-dev/orch/event"
	"github.com/orch-dev/orch/fleet"
	"github.com/orch-dev/orch/hosts"
	"github.com/orch-dev/orch/internal/state"
	"github.com/orch-dev/orch/plans"
)

// Workers on other hosts. Each is a worker of the record with Remote set
// to its host: headless, or, once its host answered a run with the pane it
// typed into (orch host join --tmux), with that pane, a pane of the
// host's tmux server that only the host reads or types into. The lead keeps a worktree of its own for it
// (prepared as any worker's: the plan's branch at its base), asks the host
// to run each attempt (hosts.OpRun: the host fetches the base from its
// clone's remote and starts the agent there), and at the worker's done
// takes the host's plan branch from a bundle in the host's work store
// into that worktree before the harvest reads it (hosts.OpBundle). The
// host reports the process's exit as an exited record through its stream.

// unreachable starts the reason of a remote worker taken out of use while
// its host cannot be reached; a new leaf link brings it back.
const unreachable = "host unreachable: "

// remoteUp puts the hosts' workers into the record: idle when new, out of
// use (with the reason) when their host is no longer registered.
func (l *Loop) remoteUp() {
	now := l.cfg.Now().UTC()
	for _, h := range l.hosts {
		for _, id := range h.Workers {
			w := l.st.EnsureWorker(id, now)
			if w.Remote != h.Name || (w.State == state.WorkerDead && strings.HasPrefix(w.Reason, removed(h.Name))) {
				w.Remote, w.Headless, w.Pane, w.Host = h.Name, true, "", h.Name
				if w.Plan == "" {
					w.State, w.Reason = state.WorkerIdle, ""
				}
			}
		}
	}
	for _, w := range l.st.Workers {
		if w.Remote == "" || hosts.Owner(l.hosts, w.ID) == w.Remote || w.State == state.WorkerDead {
			continue
		}
		why := removed(w.Remote) + " (orch hosts remove)"
		w.State, w.Reason, w.Since = state.WorkerDead, why, now
		// What it held goes back to the queue (once), visibly: its host's
		// events are refused from now on.
		if p := l.st.Plans[w.Plan]; p != nil && p.Worker == w.ID && p.State.Working() {
			e := event.New(event.Lost, p.Name, why, w.ID, "")
			e.ID = event.DerivedID(fmt.Sprintf("host removed %s %s %d", w.ID, p.Name, p.Attempts))
			cb, _ := l.requeueOrFail(e, w, p, why, "")
			if cb != nil {
				l.st.Outbox = append(l.st.Outbox, cb)
			}
		}
		w.Plan, w.PID = "", 0
	}
}

// removed starts the reason of a worker whose host was removed.
func removed(host string) string { return "host " + host + " removed" }

// linked is told of a new leaf link: remote workers taken out of use
// while their host could not be reached are tried again.
func (l *Loop) linked(ctx context.Context) {
	lctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	links, err := l.b.Links(lctx)
	cancel()
	if err != nil {
		return
	}
	up := map[string]bool{}
	for _, k := range links {
		// Heard from, or a link claiming its name: worth one more try (a
		// connection that only knocked, unauthenticated, is neither).
		up[k.Host] = k.Up || k.Addr != ""
	}
	changed := false
	for _, w := range l.st.Workers {
		if w.Remote != "" && up[w.Remote] && w.State == state.WorkerDead && strings.HasPrefix(w.Reason, unreachable) {
			w.State, w.Reason, w.Since = state.WorkerIdle, "", l.cfg.Now().UTC()
			changed = true
		}
	}
	if changed {
		l.log.Info("a host linked: its workers are tried again")
		l.save()
		l.schedule(ctx)
	}
}

// hostConn is the lead's connection for requests to host, made once.
func (l *Loop) hostConn(host string) (*nats.Conn, error) {
	if nc := l.hostConns[host]; nc != nil && !nc.IsClosed() {
		return nc, nil
	}
	nc, err := l.b.ConnectHost(host)
	if err != nil {
		return nil, err
	}
	if l.hostConns == nil {
		l.hostConns = map[string]*nats.Conn{}
	}
	l.hostConns[host] = nc
	return nc, nil
}

// ask sends a request of kind op to host and reads its reply.
func (l *Loop) ask(host, op string, req any, timeout time.Duration) (hosts.Reply, error) {
	var r hosts.Reply
	nc, err := l.hostConn(host)
	if err != nil {
		return r, err
	}
	data, err := json.Marshal(req)
	if err != nil {
		return r, err
	}
	m, err := nc.Request(hosts.OpsSubject(l.prefix, host, op), data, timeout)
	if err != nil {
		return r, fmt.Errorf("host %s: %s: %w", host, op, err)
	}
	if err := json.Unmarshal(m.Data, &r); err != nil {
		return r, fmt.Errorf("host %s: %s: unreadable reply: %w", host, op, err)
	}
	return r, replyErr(host, r)
}

// replyErr is the error a host's reply r carries, nil for none: one
// saying the worker's pane there has died is ErrHostWorkerDead.
func replyErr(host string, r hosts.Reply) error {
	switch {
	case r.Error != "" && r.Dead:
		return fmt.Errorf("host %s: %w: %s", host, ErrHostWorkerDead, r.Error)
	case r.Error != "":
		return fmt.Errorf("host %s: %s", host, r.Error)
	}
	return nil
}

// Timeouts of a host's requests. A host gives up on a run sooner than
// the lead waits for it (hosts.RunTimeout), so a late start is rare; a
// bundle and its transfer are bounded below the event's ack wait.
const (
	runTimeout    = hosts.RunTimeout + 15*time.Second
	bundleTimeout = 20 * time.Second
	fetchTimeout  = 45 * time.Second
	// maxBundle bounds a plan branch's bundle the lead takes into memory.
	maxBundle = 64 << 20
)

var (
	shaPattern = regexp.MustCompile(`^[0-9a-f]{40}$`)
	validPane  = regexp.MustCompile(`^%[0-9]{1,9}$`)
)

// remoteStartFailed handles a host's run that did not start. Nobody
// answered (the host is not linked, or not listening yet): no attempt, the
// plan waits, and the worker is out of use until a host links again. The
// host answered with an error (the base not there, a worktree it cannot
// make): the plan fails with it, as a worktree the lead cannot ready
// fails it, unless the host says the worker's pane has died (the plan
// waits, the worker is dead). No answer in time counts as not reachable: the host drops a
// run it could not start within hosts.RunTimeout, shorter than the
// lead's wait.
func (l *Loop) remoteStartFailed(h *handoff, err error) {
	p, w := h.p, h.w
	now := l.cfg.Now().UTC()
	switch {
	case errors.Is(err, nats.ErrNoResponders), errors.Is(err, nats.ErrConnectionClosed), errors.Is(err, nats.ErrTimeout):
		// A host gives up on a run before the lead stops waiting
		// (hosts.RunTimeout): no answer in time is no start.
		l.log.Error("host not reachable; plan queued again", "plan", p.Name, "worker", w.ID, "host", w.Remote, "err", err)
		p.State, p.Worker, p.Reason = state.PlanQueued, "", "start on "+w.ID+" (host "+w.Remote+") failed: "+err.Error()
		p.Attempts--
		w.State, w.Plan, w.PID, w.Reason, w.Since = state.WorkerDead, "", 0, unreachable+err.Error(), now
		h.unverify()
		l.nextDispatch = h.next
	case errors.Is(err, ErrHostWorkerDead):
		// The host typed nothing: no attempt, and the plan is not the
		// worker's fault; the worker is out of use, as its died (which may
		// come later, or named a pane the lead never recorded) makes it.
		l.log.Error("worker's pane on its host has died; plan queued again", "plan", p.Name, "worker", w.ID, "host", w.Remote, "err", err)
		p.State, p.Worker, p.Reason = state.PlanQueued, "", "start on "+w.ID+" (host "+w.Remote+") failed: "+err.Error()
		p.Attempts--
		w.State, w.Plan, w.PID, w.Reason, w.Since = state.WorkerDead, "", 0, err.Error(), now
		h.unverify()
		l.nextDispatch = h.next
	default:
		l.log.Error("host could not start the plan; plan failed", "plan", p.Name, "worker", w.ID, "host", w.Remote, "err", err)
		p.State, p.Reason, p.Updated = state.PlanFailed, "start on "+w.ID+" (host "+w.Remote+"): "+err.Error(), now
		w.State, w.Plan, w.PID = state.WorkerIdle, "", 0
		cb := event.NewCallback(event.CallbackFailed, fmt.Sprintf("remote-%s-%d-%d", p.Name, p.Attempts, now.UnixNano()), p.Name, w.ID, p.Reason, "")
		l.st.Outbox = append(l.st.Outbox, l.verificationFailed(p, cb))
	}
	l.save()
}

// startRemote asks w's host to start the recorded attempt of plan.
func (l *Loop) startRemote(w *state.Worker, p *state.Run) error {
	text, err := os.ReadFile(filepath.Join(l.cfg.Root, plans.Dir, p.Name, plans.PlanFile))
	if err != nil {
		return err
	}
	if len(text) > hosts.MaxPlanMD {
		return fmt.Errorf("PLAN.md is %d bytes; a host takes at most %d", len(text), hosts.MaxPlanMD)
	}
	r, err := l.ask(w.Remote, hosts.OpRun, hosts.Run{Worker: w.ID, Plan: p.Name, Attempt: p.Attempts, Base: p.Base, PlanMD: text}, runTimeout)
	if err != nil {
		return err
	}
	// A host joined with --tmux typed the line into the worker's pane
	// (its death comes as died, its screen through orch read); another
	// started a headless process (its end comes as exited).
	w.PID, w.Pane, w.Headless = r.PID, r.Pane, r.Pane == ""
	if r.Pane != "" && !validPane.MatchString(r.Pane) {
		w.Pane, w.Headless = "", true
		return fmt.Errorf("host %s: run of %s: pane %q is not a tmux pane id", w.Remote, p.Name, r.Pane)
	}
	return l.save()
}

// fetchRemote brings worker w's work on plan p from its host into the
// worktree the lead keeps for w, so the harvest finds it there.
func (l *Loop) fetchRemote(ctx context.Context, w *state.Worker, p *state.Run) error {
	ctx, cancel := context.WithTimeout(ctx, fetchTimeout)
	defer cancel()
	r, err := l.ask(w.Remote, hosts.OpBundle, hosts.Bundle{Worker: w.ID, Plan: p.Name, Base: p.Base}, bundleTimeout)
	if err != nil {
		return err
	}
	// What the host says is checked, never used as it comes: a commit id,
	// and for nothing to take, the base itself.
	if !shaPattern.MatchString(r.Head) {
		return fmt.Errorf("host %s: bundle of %s: head %q is not a commit id", w.Remote, p.Name, r.Head)
	}
	mirror := l.repo.At(l.workDir(w.ID))
	if r.Object == "" {
		if r.Head != p.Base {
			return fmt.Errorf("host %s: bundle of %s: nothing to take, but its head %s is not the base %s", w.Remote, p.Name, r.Head, p.Base)
		}
		return nil // the worktree is at the base already
	}
	nc, err := l.hostConn(w.Remote)
	if err != nil {
		return err
	}
	js, err := broker.HostJetStream(nc, w.Remote)
	if err != nil {
		return err
	}
	store, err := js.ObjectStore(ctx, hosts.WorkBucket)
	if err != nil {
		return fmt.Errorf("host %s: work store: %w", w.Remote, err)
	}
	info, err := store.GetInfo(ctx, r.Object)
	if err != nil {
		return fmt.Errorf("host %s: bundle of %s: %w", w.Remote, p.Name, err)
	}
	if info.Size > maxBundle {
		return fmt.Errorf("host %s: bundle of %s is %d bytes, over the %d a lead takes", w.Remote, p.Name, info.Size, maxBundle)
	}
	data, err := store.GetBytes(ctx, r.Object)
	if err != nil {
		return fmt.Errorf("host %s: bundle of %s: %w", w.Remote, p.Name, err)
	}
	tmp, err := os.CreateTemp(l.orchDir, ".bundle-*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return err
	}
	tmp.Close()
	ref := "refs/orch/hosts/" + w.Remote + "/" + p.Name
	if err := l.repo.FetchBundle(ctx, tmp.Name(), fleet.PlanBranch(p.Name), ref, r.Head); err != nil {
		return err
	}
	if ok, err := l.repo.IsAncestor(ctx, p.Base, ref); err != nil || !ok {
		return fmt.Errorf("host %s: bundle of %s: its head %s does not build on the plan's base %s (%v)", w.Remote, p.Name, r.Head, p.Base, err)
	}
	if err := mirror.ResetHard(ctx, ref); err != nil {
		return err
	}
	// The host deletes it (its store takes writes from the host only).
	if _, err := l.ask(w.Remote, hosts.OpTaken, hosts.TakenBundle{Object: r.Object}, 10*time.Second); err != nil {
		l.log.Warn("host's bundle left in its work store", "host", w.Remote, "object", r.Object, "err", err)
	}
	return nil
}
