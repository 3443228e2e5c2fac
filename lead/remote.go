package lead

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/orch-dev/orch/broker"
	"github.com/orch-dev/orch/fleet"
	"github.com/orch-dev/orch/hosts"
	"github.com/orch-dev/orch/internal/state"
	"github.com/orch-dev/orch/plans"
)

// Workers on other hosts. Each is a headless worker of the record with
// Remote set to its host. The lead keeps a worktree of its own for it
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
			if w.Remote != h.Name {
				w.Remote, w.Headless, w.Pane, w.Host = h.Name, true, "", h.Name
				if w.Plan == "" {
					w.State, w.Reason = state.WorkerIdle, ""
				}
			}
		}
	}
	for _, w := range l.st.Workers {
		if w.Remote != "" && hosts.Owner(l.hosts, w.ID) != w.Remote && w.State != state.WorkerDead {
			w.State, w.Reason, w.Since = state.WorkerDead, "host "+w.Remote+" removed (orch hosts remove)", now
		}
	}
}

// linked is told of a new leaf link: remote workers taken out of use
// while their host could not be reached are tried again.
func (l *Loop) linked(ctx context.Context) {
	changed := false
	for _, w := range l.st.Workers {
		if w.Remote != "" && w.State == state.WorkerDead && strings.HasPrefix(w.Reason, unreachable) {
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
	if r.Error != "" {
		return r, fmt.Errorf("host %s: %s", host, r.Error)
	}
	return r, nil
}

// runTimeout bounds a host's run: a fetch from its remote, a worktree, a
// process start.
const runTimeout = 60 * time.Second

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
	w.PID = r.PID
	return l.save()
}

// fetchRemote brings worker w's work on plan p from its host into the
// worktree the lead keeps for w, so the harvest finds it there.
func (l *Loop) fetchRemote(ctx context.Context, w *state.Worker, p *state.Run) error {
	r, err := l.ask(w.Remote, hosts.OpBundle, hosts.Bundle{Worker: w.ID, Plan: p.Name, Base: p.Base}, runTimeout)
	if err != nil {
		return err
	}
	mirror := l.repo.At(l.workDir(w.ID))
	if r.Object == "" {
		return mirror.ResetHard(ctx, r.Head)
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
	if err := mirror.ResetHard(ctx, r.Head); err != nil {
		return err
	}
	// The host deletes it (its store takes writes from the host only).
	if _, err := l.ask(w.Remote, hosts.OpTaken, hosts.TakenBundle{Object: r.Object}, 10*time.Second); err != nil {
		l.log.Warn("host's bundle left in its work store", "host", w.Remote, "object", r.Object, "err", err)
	}
	return nil
}
