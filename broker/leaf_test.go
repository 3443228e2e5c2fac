package broker

import (
	"context"
	"io"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/orch-dev/orch/event"
	"github.com/orch-dev/orch/hosts"
	"github.com/orch-dev/orch/internal/eventually"
	"github.com/orch-dev/orch/internal/orchdir"
	"github.com/orch-dev/orch/notify"
)

// proxy is a TCP relay the test can stop and start again: a leaf link cut
// and restored. Stopping closes every relayed connection.
type proxy struct {
	t      *testing.T
	to     string
	addr   string
	mu     sync.Mutex
	ln     net.Listener
	conns  []net.Conn
	copies sync.WaitGroup
}

func newProxy(t *testing.T, to string) *proxy {
	p := &proxy{t: t, to: to}
	p.start()
	t.Cleanup(p.stop)
	return p
}

func (p *proxy) start() {
	addr := p.addr
	if addr == "" {
		addr = "127.0.0.1:0"
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		p.t.Fatal(err)
	}
	p.mu.Lock()
	p.ln, p.addr = ln, ln.Addr().String()
	p.mu.Unlock()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			up, err := net.Dial("tcp", p.to)
			if err != nil {
				c.Close()
				continue
			}
			p.mu.Lock()
			p.conns = append(p.conns, c, up)
			p.mu.Unlock()
			go func() { io.Copy(up, c); up.Close() }()
			go func() { io.Copy(c, up); c.Close() }()
		}
	}()
}

func (p *proxy) stop() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.ln != nil {
		p.ln.Close()
		p.ln = nil
	}
	for _, c := range p.conns {
		c.Close()
	}
	p.conns = nil
}

type testHost struct {
	h    hosts.Host
	tok  hosts.Token
	dir  string
	srv  *HostServer
	link *proxy
}

// leafSetup starts a lead's broker with a leaf listener and n hosts, each
// joined through a proxy of its own.
func leafSetup(t *testing.T, names ...string) (*Broker, []*testHost) {
	t.Helper()
	dir := filepath.Join(t.TempDir(), ".orch")
	os.MkdirAll(dir, 0o700)
	var ths []*testHost
	var hs []hosts.Host
	for _, name := range names {
		h, tok, err := hosts.Add(dir, name, 2, []string{"w1"}, "orch")
		if err != nil {
			t.Fatal(err)
		}
		parsed, err := hosts.ParseToken(tok)
		if err != nil {
			t.Fatal(err)
		}
		ths = append(ths, &testHost{h: h, tok: parsed})
		hs = append(hs, h)
	}
	b, err := Start(context.Background(), Config{Dir: dir, Workers: []string{"w1"}, Leaf: "127.0.0.1:0", Hosts: hs})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(b.Shutdown)
	leaf := strings.TrimPrefix(b.LeafURL(), "nats-leaf://")
	for _, th := range ths {
		th.link = newProxy(t, leaf)
		th.dir = filepath.Join(t.TempDir(), ".orch")
		os.MkdirAll(th.dir, 0o700)
		th.srv, err = StartHost(context.Background(), HostConfig{Dir: th.dir, LeadURL: "nats-leaf://" + th.link.addr, Token: th.tok})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(th.srv.Shutdown)
	}
	return b, ths
}

// send publishes e as worker on host th, as its orch-notify would.
func (th *testHost) send(t *testing.T, worker string, e event.Event) notify.Result {
	t.Helper()
	seed, err := os.ReadFile(orchdir.WorkerKey(th.dir, worker))
	if err != nil {
		t.Fatal(err)
	}
	res, err := notify.Send(notify.Config{URL: th.srv.URL(), Prefix: "orch", Seed: []byte(strings.TrimSpace(string(seed))),
		Inbox: event.WorkerInboxOf(worker), Timeout: 2 * time.Second}, e)
	if err != nil {
		t.Fatalf("send: %v", err)
	}
	return res
}

// received collects the lead stream's events by id, with the host each
// came from.
type received struct {
	mu   sync.Mutex
	byID map[string][]string // event id -> hosts it came from, once per copy
	got  chan struct{}
}

func consumeLead(t *testing.T, b *Broker) *received {
	t.Helper()
	nc, err := b.ConnectLead()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	r := &received{byID: map[string][]string{}, got: make(chan struct{}, 1000)}
	sub, err := nc.Subscribe(LeadDeliver("orch"), func(m *nats.Msg) {
		if m.Header.Get("Nats-Stream-Source") == "" && len(m.Data) == 0 {
			return
		}
		e, err := event.Parse(m.Data)
		if err != nil {
			return
		}
		host, ok := HostOf(m.Header)
		if !ok {
			host = "?"
		}
		r.mu.Lock()
		r.byID[e.ID] = append(r.byID[e.ID], host)
		r.mu.Unlock()
		m.Ack()
		r.got <- struct{}{}
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sub.Unsubscribe() })
	return r
}

// copies is how many times event id came, and from where.
func (r *received) copies(id string) []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.byID[id])
}

// wait waits for n more events, or fails after d.
func (r *received) wait(t *testing.T, n int, d time.Duration) {
	t.Helper()
	deadline := time.After(d)
	for i := 0; i < n; i++ {
		select {
		case <-r.got:
		case <-deadline:
			t.Fatalf("got %d of %d events in %v", i, n, d)
		}
	}
}

func TestHostEventsReachTheLeadOnce(t *testing.T) {
	b, ths := leafSetup(t, "alpha", "beta")
	r := consumeLead(t, b)
	var ids []string
	for _, th := range ths {
		for _, w := range th.h.Workers {
			e := event.New(event.Started, "p-"+w, "", w, th.h.Name)
			if res := th.send(t, w, e); !res.Acked {
				t.Fatalf("%s on %s not acked by its host: %+v", w, th.h.Name, res)
			}
			ids = append(ids, e.ID)
		}
	}
	r.wait(t, len(ids), 20*time.Second)
	for i, id := range ids {
		want := ths[i/2].h.Name
		if got := r.copies(id); len(got) != 1 || got[0] != want {
			t.Errorf("event %s came %v, want once from %s", id, got, want)
		}
	}
	links, err := b.Links(context.Background())
	if err != nil || len(links) != 2 || !links[0].Up || !links[1].Up {
		t.Errorf("links %+v %v", links, err)
	}
}

// The link cut while a host's workers send: their events are kept on the
// host and reach the lead once, after the link is back; and again with the
// lead's server restarted while the link was down.
func TestHostEventsSurviveACutLink(t *testing.T) {
	b, ths := leafSetup(t, "alpha")
	th := ths[0]
	r := consumeLead(t, b)
	send := func(n int) []string {
		var ids []string
		for i := 0; i < n; i++ {
			w := th.h.Workers[i%2]
			e := event.New(event.Started, "p", "", w, th.h.Name)
			if res := th.send(t, w, e); !res.Acked {
				t.Fatalf("not kept on the host while its link is down: %+v", res)
			}
			ids = append(ids, e.ID)
		}
		return ids
	}
	check := func(ids []string) {
		t.Helper()
		for _, id := range ids {
			if got := r.copies(id); len(got) != 1 {
				t.Errorf("event %s came %d times", id, len(got))
			}
		}
	}
	ids := send(5)
	r.wait(t, 5, 20*time.Second)

	th.link.stop()
	cut := send(50)
	th.link.start()
	began := time.Now()
	r.wait(t, 50, 60*time.Second)
	t.Logf("50 events kept through the cut, delivered %v after the link came back", time.Since(began).Round(time.Millisecond))
	check(append(ids, cut...))

	// The lead's server restarted while the link is down.
	th.link.stop()
	leaf := strings.TrimPrefix(b.LeafURL(), "nats-leaf://")
	dir := b.cfg.Dir
	b.Shutdown()
	cut2 := send(30)
	b2, err := Start(context.Background(), Config{Dir: dir, Workers: []string{"w1"}, Leaf: leaf, Hosts: []hosts.Host{th.h}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(b2.Shutdown)
	r2 := consumeLead(t, b2)
	th.link.start()
	began = time.Now()
	r2.wait(t, 30, 90*time.Second)
	t.Logf("30 events kept through a cut and a lead restart, delivered %v after the link came back", time.Since(began).Round(time.Millisecond))
	for _, id := range cut2 {
		if got := r2.copies(id); len(got) != 1 {
			t.Errorf("event %s came %d times after the restart", id, len(got))
		}
	}
}

// A host's worker cannot send as another worker (its host's server
// refuses it), and a removed host's link is cut and refused from then on:
// what its workers send stays on it.
func TestHostRefusals(t *testing.T) {
	b, ths := leafSetup(t, "alpha", "beta")
	alpha, beta := ths[0], ths[1]
	r := consumeLead(t, b)

	// w2 on alpha signs as w4 (alpha's other worker): not taken.
	seed, _ := os.ReadFile(orchdir.WorkerKey(alpha.dir, alpha.h.Workers[0]))
	forged := event.New(event.Done, "p", "ok", alpha.h.Workers[1], "alpha")
	res, err := notify.Send(notify.Config{URL: alpha.srv.URL(), Prefix: "orch", Seed: []byte(strings.TrimSpace(string(seed))),
		Inbox: event.WorkerInboxOf(alpha.h.Workers[0]), Timeout: time.Second}, forged)
	if err == nil && res.Acked {
		t.Fatalf("%s's key sent %s's done: %+v", alpha.h.Workers[0], alpha.h.Workers[1], res)
	}

	// Both links carry events; then beta is removed.
	ok := event.New(event.Started, "p", "", beta.h.Workers[0], "beta")
	beta.send(t, beta.h.Workers[0], ok)
	r.wait(t, 1, 20*time.Second)
	if err := b.SetHosts(context.Background(), []hosts.Host{alpha.h}); err != nil {
		t.Fatal(err)
	}
	late := event.New(event.Started, "q", "", beta.h.Workers[0], "beta")
	if res := beta.send(t, beta.h.Workers[0], late); !res.Acked {
		t.Fatalf("beta's own server did not keep it: %+v", res)
	}
	// alpha, still registered, is back at once and delivers.
	after := event.New(event.Started, "q", "", alpha.h.Workers[0], "alpha")
	alpha.send(t, alpha.h.Workers[0], after)
	r.wait(t, 1, 20*time.Second)
	if got := r.copies(after.ID); len(got) != 1 || got[0] != "alpha" {
		t.Errorf("alpha after beta's removal: %v", got)
	}
	// beta's reconnects are refused (it retries every second): nothing
	// of its comes in a few of its tries.
	select {
	case <-r.got:
		t.Errorf("an event came after beta's removal: %v", r.copies(late.ID))
	case <-time.After(3 * time.Second): // long enough for beta to try its link three times
	}
	if len(r.copies(late.ID)) > 0 {
		t.Error("the removed host's event reached the lead")
	}
	if beta.srv.Linked() {
		t.Error("the removed host is still linked")
	}
	if links, _ := b.Links(context.Background()); len(links) != 1 || links[0].Host != "alpha" {
		t.Errorf("links after removal: %+v", links)
	}
}

// A host's key lets it publish nothing on the lead's server (events,
// commands, callbacks); and a host that makes its own stream carry a
// callback gets it sourced with its name on it, which orch wait drops.
func TestHostKeyPublishesNothingHere(t *testing.T) {
	b, ths := leafSetup(t, "alpha")
	th := ths[0]
	seed := []byte(th.tok.Seed)
	hc, err := notify.Connect(notify.Config{URL: b.URL(), Prefix: "orch", Seed: seed, Timeout: time.Second}, "forger")
	if err != nil {
		t.Fatal(err)
	}
	defer hc.Close()
	hjs, _ := jetstream.New(hc)
	for _, subj := range []string{"orch.ev." + th.h.Workers[0] + ".done", "orch.cmd.dispatch", "orch.cb.done"} {
		e := event.New(event.Done, "p", "ok", th.h.Workers[0], "alpha")
		pctx, cancel := context.WithTimeout(context.Background(), time.Second)
		_, err := hjs.Publish(pctx, subj, e.Marshal())
		cancel()
		if err == nil {
			t.Errorf("the host's key stored %s on the lead's server", subj)
		}
	}
	// The host widens its own stream and puts a callback in it.
	nc, err := th.srv.Connect()
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, _ := jetstream.New(nc)
	ctx := context.Background()
	s, err := js.Stream(ctx, HostStream("alpha"))
	if err != nil {
		t.Fatal(err)
	}
	cfg := s.CachedInfo().Config
	cfg.Subjects = append(cfg.Subjects, "orch.cb.>")
	if _, err := js.UpdateStream(ctx, cfg); err != nil {
		t.Fatal(err)
	}
	if _, err := js.Publish(ctx, "orch.cb.done", []byte(`{"kind":"WORKER-DONE"}`)); err != nil {
		t.Fatal(err)
	}
	lead, err := b.ConnectLead()
	if err != nil {
		t.Fatal(err)
	}
	defer lead.Close()
	ljs, _ := jetstream.New(lead)
	eventually.True(t, 20*time.Second, func() bool {
		st, err := ljs.Stream(ctx, StreamName)
		if err != nil {
			return false
		}
		m, err := st.GetLastMsgForSubject(ctx, "orch.cb.done")
		if err != nil {
			return false
		}
		host, ok := HostOf(m.Header)
		if host != "alpha" || !ok {
			t.Fatalf("a sourced callback carries host %q (%v): orch wait could not tell it from the lead's", host, ok)
		}
		return true
	}, "the host's forged callback to be sourced, marked as the host's")
}

// On a host's server a worker's key may not send the records its host
// makes about it (its process's exit, its pane's death), not even about
// itself: they reach the lead under the worker's subjects, taken there
// as the host's word. Its own events go in; the host's local key may
// send both records.
func TestHostWorkersMayNotSendHostRecords(t *testing.T) {
	_, ths := leafSetup(t, "alpha")
	th := ths[0]
	w := th.h.Workers[0]
	seed, err := os.ReadFile(orchdir.WorkerKey(th.dir, w))
	if err != nil {
		t.Fatal(err)
	}
	wc, err := notify.Connect(notify.Config{URL: th.srv.URL(), Prefix: "orch", Seed: []byte(strings.TrimSpace(string(seed))),
		Inbox: event.WorkerInboxOf(w), Timeout: 2 * time.Second}, w)
	if err != nil {
		t.Fatal(err)
	}
	defer wc.Close()
	hc, err := th.srv.Connect()
	if err != nil {
		t.Fatal(err)
	}
	defer hc.Close()
	publish := func(nc *nats.Conn, kind event.Kind) error {
		js, _ := jetstream.New(nc)
		e := event.New(kind, "p", "", w, "alpha")
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		_, err := js.Publish(ctx, hosts.RecordSubject("orch", w, string(kind)), e.Marshal())
		return err
	}
	if err := publish(wc, event.Started); err != nil {
		t.Fatalf("%s's own started: %v", w, err)
	}
	for _, k := range []event.Kind{event.Exited, event.Died} {
		if err := publish(wc, k); err == nil {
			t.Errorf("%s's key stored a %s about itself on its host", w, k)
		}
		if err := publish(hc, k); err != nil {
			t.Errorf("the host's own %s record: %v", k, err)
		}
	}
}
