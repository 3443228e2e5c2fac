package broker

// The lead's side of other hosts. A host's orch host runs its own server
// as a leaf node of this one, with a JetStream domain named after the host
// and a stream HOST_<name> of its workers' events; the ORCH stream here
// sources each host's stream. The host's key (hosts.Host.Key) may, across
// its link, only answer this server's JetStream requests for its own
// domain and deliver the sourced messages on its own subjects: it cannot
// publish an event, a command or a callback here, nor read anything.
// Which host a sourced message came from is in the Nats-Stream-Source
// header, which this server writes itself (it drops one a message brings
// along), so HostOf can be trusted where the payload cannot.

import (
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/orch-dev/orch/hosts"
)

// HostStreamPrefix starts the name of each host's own stream.
const HostStreamPrefix = "HOST_"

// HostStream is the name of host's own stream, on the host.
func HostStream(host string) string { return HostStreamPrefix + host }

// hostDomain is the JetStream domain of host's server.
func hostDomain(host string) string { return host }

// hostAPI is the prefix this server reaches host's JetStream API under.
func hostAPI(host string) string { return "$JS." + hostDomain(host) + ".API" }

// hostDeliver is where host's server delivers the messages this server
// sources from it.
func hostDeliver(prefix, host string) string { return prefix + ".dlv." + host }

// leafOpts is the leaf listener of Config.Leaf ("" none).
func leafOpts(addr string) (server.LeafNodeOpts, error) {
	if addr == "" {
		return server.LeafNodeOpts{}, nil
	}
	h, p, err := net.SplitHostPort(addr)
	port, perr := strconv.Atoi(p)
	if err != nil || perr != nil || port < 0 || port > 65535 || h == "" {
		return server.LeafNodeOpts{}, fmt.Errorf("%w: leaf address %q: want HOST:PORT, e.g. 10.0.0.5:7422 (an address of this machine the hosts reach)", ErrLeafAddr, addr)
	}
	if ip := net.ParseIP(h); ip == nil {
		return server.LeafNodeOpts{}, fmt.Errorf("%w: leaf address %q: give an IP address of this machine, not a name", ErrLeafAddr, addr)
	} else if ip.IsUnspecified() {
		return server.LeafNodeOpts{}, fmt.Errorf("%w: leaf address %q: give the one address the hosts reach (the join line names it), not %s", ErrLeafAddr, addr, h)
	}
	if port == 0 {
		// A free port now, so the URL hosts are given names it (the
		// server reports no leaf port it picked itself).
		l, err := net.Listen("tcp", net.JoinHostPort(h, "0"))
		if err != nil {
			return server.LeafNodeOpts{}, fmt.Errorf("%w: leaf address %q: %v", ErrLeafAddr, addr, err)
		}
		port = l.Addr().(*net.TCPAddr).Port
		l.Close()
	}
	// NoAdvertise: a host dials the address it was given and no other
	// (this server's other addresses may not be reachable, or meant, for it).
	return server.LeafNodeOpts{Host: h, Port: port, NoAdvertise: true}, nil
}

// hostUsers are the hosts' leaf identities.
func hostUsers(hs []hosts.Host, prefix string) []*server.NkeyUser {
	var out []*server.NkeyUser
	for _, h := range hs {
		out = append(out, &server.NkeyUser{Nkey: h.Key, Permissions: &server.Permissions{
			// What the host's server may send here: replies to this
			// server's requests to its JetStream, and the sourced messages.
			// (and the lead's: to its fleet requests, under their own
			// reply prefix).
			// The replies are scoped to the host's domain (the server's
			// js_api_reply_v2): a host cannot answer another's requests.
			Publish: &server.SubjectPermission{Allow: []string{"$JSC.R." + hostDomain(h.Name) + ".>", hostDeliver(prefix, h.Name) + ".>", hosts.ReplyPrefix(prefix, h.Name) + ".>"}},
			// What it may ask to be sent: this server's requests to its
			// own domain's API, the flow control of its deliveries, and
			// the lead's fleet requests to it.
			Subscribe: &server.SubjectPermission{Allow: []string{hostAPI(h.Name) + ".>", "$JS.FC.>", hosts.OpsSubject(prefix, h.Name, ">")}},
		}})
	}
	return out
}

// hostSources are the ORCH stream's sources: one per host.
func hostSources(hs []hosts.Host, prefix string) []*jetstream.StreamSource {
	var out []*jetstream.StreamSource
	for _, h := range hs {
		out = append(out, &jetstream.StreamSource{Name: HostStream(h.Name),
			External: &jetstream.ExternalStream{APIPrefix: hostAPI(h.Name), DeliverPrefix: hostDeliver(prefix, h.Name)}})
	}
	return out
}

// streamSourceHeader is where this server says which stream a sourced
// message came from.
const streamSourceHeader = "Nats-Stream-Source"

// HostOf is the host a message of the ORCH stream was sourced from: "" for
// one published here, ok false for one sourced from something that is not
// a host's stream (it must be refused).
func HostOf(headers map[string][]string) (host string, ok bool) {
	v := headers[streamSourceHeader]
	if len(v) == 0 || v[0] == "" {
		return "", true
	}
	name, _, _ := strings.Cut(strings.Fields(v[0] + " ")[0], ":")
	host, found := strings.CutPrefix(name, HostStreamPrefix)
	if !found || hosts.ValidateName(host) != nil {
		return "", false
	}
	return host, true
}

// SetHosts makes the registered hosts hs the ones let in: their keys are
// accepted from now on, their streams sourced; a host no longer among them
// loses its key, its source, and its link. Every leaf link is cut, the
// remaining hosts' reconnect by themselves within a second (their events
// wait on their side meanwhile): a leaf link does not say which key it
// came with, and a revoked host must not keep its link by claiming another
// host's server name.
func (b *Broker) SetHosts(ctx context.Context, hs []hosts.Host) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	removed := false
	for _, old := range b.cfg.Hosts {
		if !slices.ContainsFunc(hs, func(h hosts.Host) bool { return h.Name == old.Name && h.Key == old.Key }) {
			removed = true
		}
	}
	opts := b.opts.Clone()
	opts.Nkeys = users(b.keys, b.cfg.Prefix, hs)
	if err := b.srv.ReloadOptions(opts); err != nil {
		return fmt.Errorf("hosts: reload: %w", err)
	}
	b.opts, b.cfg.Hosts = opts.Clone(), hs
	// The keys are in force: the links go next (a revoked host must not
	// keep the one it has), then the sources.
	var cutErr error
	if removed {
		lz, err := b.srv.Leafz(nil)
		if err != nil {
			cutErr = fmt.Errorf("hosts: links not cut: %w", err)
		} else {
			for _, l := range lz.Leafs {
				b.srv.DisconnectClientByID(l.ID)
			}
		}
	}
	return errors.Join(cutErr, b.updateSources(ctx))
}

// updateSources sets the ORCH stream's sources to the hosts', b.mu held.
// skip, when set, leaves that host's out (to put it back afterwards).
func (b *Broker) updateSources(ctx context.Context, skip ...string) error {
	nc, err := b.ConnectLead()
	if err != nil {
		return fmt.Errorf("hosts: %w", err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		return fmt.Errorf("hosts: %w", err)
	}
	s, err := js.Stream(ctx, StreamName)
	if err != nil {
		return fmt.Errorf("hosts: %w", err)
	}
	cfg := s.CachedInfo().Config
	cfg.Sources = hostSources(slices.DeleteFunc(slices.Clone(b.cfg.Hosts), func(h hosts.Host) bool { return slices.Contains(skip, h.Name) }), b.cfg.Prefix)
	if _, err := js.UpdateStream(ctx, cfg); err != nil {
		return fmt.Errorf("hosts: sources: %w", err)
	}
	return nil
}

// Link is what the lead knows of one host's link.
type Link struct {
	Host string `json:"host"`
	// Up: the host's stream answered within the last few seconds (this
	// server checks each source's heartbeat every second).
	Up bool `json:"up"`
	// Seen is how long ago the host's stream was last heard from; Lag is
	// how many of its messages are not here yet, as last known.
	Seen time.Duration `json:"seen_ns"`
	Lag  uint64        `json:"lag"`
	// Addr and RTT are the link's, while one claims the host's name.
	Addr  string `json:"addr,omitempty"`
	RTT   string `json:"rtt,omitempty"`
	Error string `json:"error,omitempty"`
	// Skew is how far the host's clock seems behind the lead's (negative:
	// ahead), from its recent events, once SkewKnown (filled in by the
	// lead loop).
	Skew      time.Duration `json:"skew_ns,omitempty"`
	SkewKnown bool          `json:"skew_known,omitempty"`
}

// linkUpWithin is how recent a host's last heartbeat is for its link to
// count as up.
const linkUpWithin = 5 * time.Second

// Links says, for each registered host, how its link stands.
func (b *Broker) Links(ctx context.Context) ([]Link, error) {
	nc, err := b.ConnectLead()
	if err != nil {
		return nil, err
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		return nil, err
	}
	s, err := js.Stream(ctx, StreamName)
	if err != nil {
		return nil, err
	}
	info := s.CachedInfo()
	lz, _ := b.srv.Leafz(&server.LeafzOptions{})
	b.mu.Lock()
	hs := b.cfg.Hosts
	b.mu.Unlock()
	var out []Link
	for _, h := range hs {
		l := Link{Host: h.Name, Seen: -1}
		for _, si := range info.Sources {
			if si != nil && si.Name == HostStream(h.Name) {
				l.Lag, l.Seen = si.Lag, si.Active
				l.Up = si.Active >= 0 && si.Active < linkUpWithin
				if si.Error != nil {
					l.Error = si.Error.Description
				}
			}
		}
		if lz != nil {
			for _, lf := range lz.Leafs {
				if lf.Name == HostServerName(h.Name) {
					l.Addr, l.RTT = net.JoinHostPort(lf.IP, strconv.Itoa(lf.Port)), lf.RTT
				}
			}
		}
		out = append(out, l)
	}
	return out, nil
}

// LeafURL is the URL hosts dial, "" without a leaf listener.
func (b *Broker) LeafURL() string {
	o := b.opts.LeafNode
	if o.Port == 0 {
		return ""
	}
	return "nats-leaf://" + net.JoinHostPort(o.Host, strconv.Itoa(o.Port))
}

// ConnectHost opens an in-process lead connection for requests to host:
// its replies come under the host's own reply prefix, the only inbox the
// host may publish to.
func (b *Broker) ConnectHost(host string) (*nats.Conn, error) {
	return b.ConnectLead(nats.CustomInboxPrefix(hosts.ReplyPrefix(b.cfg.Prefix, host)), nats.Name("orch-serve-host-"+host))
}

// HostJetStream is host's JetStream, reached through nc (ConnectHost's).
func HostJetStream(nc *nats.Conn, host string) (jetstream.JetStream, error) {
	return jetstream.NewWithAPIPrefix(nc, hostAPI(host))
}

// LinksSubject is where orch status asks the lead loop how its hosts'
// links stand (the lead's key only: workers and hosts may not publish
// there).
func LinksSubject(prefix string) string { return prefix + ".lead.links" }

// HostServerName is the server name host's orch host runs under.
func HostServerName(host string) string { return "orch-host-" + host }

// kickAfter is how long after a leaf link is made the stalled sources are
// set up again: the link's authentication and interest exchange take a
// few milliseconds on a LAN; a link slower than this is picked up by the
// server's own retries, later.
const kickAfter = time.Second

// leafLinked is told of each new leaf link. A source whose setup request
// went out while its host's link was down waits for that request's
// timeout and the server's back-off (40 s and more, measured) before it
// tries again; once the link is back, such a source is taken out and put
// back, which sets it up at once, from where it stopped (the stream knows
// the last sequence it holds from each source). One timer, fired once per
// burst of links; not a poll.
func (b *Broker) leafLinked() {
	// Called inside the server's log call, with its connection's lock
	// held: only kickMu here, never b.mu.
	b.kickMu.Lock()
	defer b.kickMu.Unlock()
	if b.kickOnce != nil || b.stopped {
		return
	}
	// Any TCP connection to the leaf port makes the notice, before it
	// authenticates (a revoked host tries every second): at most one kick
	// per kickGap.
	wait := max(kickAfter, kickGap-time.Since(b.lastKick))
	b.kickOnce = time.AfterFunc(wait, func() {
		b.kickMu.Lock()
		b.kickOnce, b.lastKick = nil, time.Now()
		b.kickMu.Unlock()
		b.kickStalled(context.Background())
		if b.cfg.OnLink != nil {
			b.cfg.OnLink()
		}
	})
}

// kickGap is the least time between two kicks.
const kickGap = 5 * time.Second

// stalledAfter is how long a source may go unheard before it counts as
// stalled (its host's server sends a heartbeat every second).
const stalledAfter = 3 * time.Second

func (b *Broker) kickStalled(ctx context.Context) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	links, err := b.Links(ctx)
	if err != nil {
		return
	}
	var stalled []string
	for _, l := range links {
		if l.Seen < 0 || l.Seen > stalledAfter {
			stalled = append(stalled, l.Host)
		}
	}
	if len(stalled) == 0 {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	err = b.updateSources(ctx, stalled...)
	if err == nil {
		err = b.updateSources(ctx)
	}
	if err != nil {
		b.cfg.Logger.Error("hosts: stalled sources not set up again; the server retries them itself", "hosts", strings.Join(stalled, ","), "err", err)
	}
}
