package lead

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/fsnotify/fsnotify"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/orch-dev/orch/broker"
	"github.com/orch-dev/orch/event"
	"github.com/orch-dev/orch/hosts"
)

// The lead's side of other hosts (package hosts has the register, package
// broker the links): which host an event may come from, the register
// followed while the loop runs, and the links' state for orch status.

// skews keeps, per host, how far its clock seems from the lead's: the
// smallest (receipt − sent) of its recent events, i.e. the offset plus
// the quickest transit (an event that waited out a cut link counts for
// little: the smallest wins). Read by orch status's request, on a NATS
// goroutine, hence the lock.
type skews struct {
	mu   sync.Mutex
	last map[string][]time.Duration
}

// skewWindow is how many recent events of a host the estimate uses.
const skewWindow = 16

func (s *skews) note(host string, d time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.last == nil {
		s.last = map[string][]time.Duration{}
	}
	v := append(s.last[host], d)
	if len(v) > skewWindow {
		v = v[len(v)-skewWindow:]
	}
	s.last[host] = v
}

// of is host's estimate, ok false before any event of its.
func (s *skews) of(host string) (time.Duration, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	v := s.last[host]
	if len(v) == 0 {
		return 0, false
	}
	return slices.Min(v), true
}

// hostRefusal says why an event m carries may not be taken from where it
// came, "" when it may: a host speaks only for its own workers and sends
// no commands; a host's worker speaks only through its host. An event a
// host may pass on also goes into that host's clock estimate.
func (l *Loop) hostRefusal(m jetstream.Msg, e event.Event) string {
	host, ok := broker.HostOf(m.Headers())
	if !ok {
		return "it was sourced from a stream that is not a host's"
	}
	owner := hosts.Owner(l.hosts, e.Worker)
	switch {
	case host == "" && event.IsCommand(e.Kind):
		return "" // the lead's own (only its key publishes commands), about any worker
	case host == "" && owner != "":
		return fmt.Sprintf("worker %s runs on host %s, and this did not come from there", e.Worker, owner)
	case host == "":
		return ""
	case event.IsCommand(e.Kind) && e.Kind != event.Exited:
		return fmt.Sprintf("host %s sent a %s command (a host sends only its workers' events, and their processes' exits)", host, e.Kind)
	case !slices.ContainsFunc(l.hosts, func(h hosts.Host) bool { return h.Name == host }):
		return fmt.Sprintf("it came from host %s, which is not registered (removed?)", host)
	case owner == host:
		l.skew.note(host, l.cfg.Now().Sub(e.Time))
		return ""
	case owner != host:
		var mine []string
		for _, h := range l.hosts {
			if h.Name == host {
				mine = h.Workers
			}
		}
		return fmt.Sprintf("it came from host %s, which runs %s, but names worker %s", host, strings.Join(mine, ","), e.Worker)
	}
	return ""
}

// wantSubject is the subject e must have come on: a host's record of its
// worker's process (exited) comes under the worker's subjects, where the
// host lets no worker send it.
func (l *Loop) wantSubject(m jetstream.Msg, e event.Event) string {
	if host, _ := broker.HostOf(m.Headers()); host != "" && e.Kind == event.Exited {
		return hosts.RecordSubject(l.prefix, e.Worker, string(e.Kind))
	}
	return event.Subject(l.prefix, e)
}

// watchHosts follows the register: orch hosts add and remove write it
// while the loop runs, and the broker takes the change at once.
func (l *Loop) watchHosts(w *fsnotify.Watcher) error {
	return w.Add(filepath.Join(l.orchDir, hosts.Dir))
}

// hostsChanged reloads the register after a change under .orch/hosts/.
func (l *Loop) hostsChanged(ctx context.Context) {
	hs, err := hosts.List(l.orchDir)
	if err != nil {
		// Nothing is let in that the last good register did not: a broken
		// entry keeps the links as they were until it is fixed.
		l.log.Error("hosts register unreadable; links left as they were", "err", err)
		return
	}
	if slices.EqualFunc(hs, l.hosts, func(a, b hosts.Host) bool {
		return a.Name == b.Name && a.Key == b.Key && slices.Equal(a.Workers, b.Workers)
	}) {
		return
	}
	if err := l.b.SetHosts(ctx, hs); err != nil {
		// The keys changed (or nothing did, when the error says reload):
		// what a removed host still sends is refused below either way.
		l.log.Error("hosts: links not all changed", "err", err)
	}
	for _, old := range l.hosts {
		if !slices.ContainsFunc(hs, func(h hosts.Host) bool { return h.Name == old.Name && h.Key == old.Key }) {
			l.log.Warn("host revoked: its key and its workers' events refused from now on", "host", old.Name, "workers", strings.Join(old.Workers, ","))
		}
	}
	for _, h := range hs {
		if !slices.ContainsFunc(l.hosts, func(o hosts.Host) bool { return h.Name == o.Name && h.Key == o.Key }) {
			l.log.Info("host added", "host", h.Name, "workers", strings.Join(h.Workers, ","))
		}
	}
	l.hosts = hs
	l.remoteUp()
	if err := l.save(); err != nil {
		l.log.Error("save state", "err", err)
	}
	if len(l.st.Outbox) > 0 {
		l.flushOutbox() // a removed host's plans, queued again: the lead is told
	}
	l.schedule(ctx)
}

// answerLinks replies to orch status with each host's link.
func (l *Loop) answerLinks() (*nats.Subscription, error) {
	return l.nc.Subscribe(broker.LinksSubject(l.prefix), func(m *nats.Msg) {
		if m.Reply == "" {
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		links, err := l.b.Links(ctx)
		if err != nil {
			data, _ := json.Marshal(map[string]string{"error": err.Error()})
			m.Respond(data)
			return
		}
		for i := range links {
			if d, ok := l.skew.of(links[i].Host); ok {
				links[i].Skew, links[i].SkewKnown = d, true
			}
		}
		data, _ := json.Marshal(links)
		m.Respond(data)
	})
}
