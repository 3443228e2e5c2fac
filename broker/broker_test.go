package broker

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/orch-dev/orch/event"
	"github.com/orch-dev/orch/internal/orchdir"
	"github.com/orch-dev/orch/notify"
)

func startBroker(t testing.TB) (*Broker, string) {
	t.Helper()
	dir := filepath.Join(t.TempDir(), ".orch")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	b, err := Start(context.Background(), Config{Dir: dir, Workers: []string{"w1", "w2"}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(b.Shutdown)
	return b, dir
}

func TestCredentialFilesArePrivate(t *testing.T) {
	_, dir := startBroker(t)
	for _, path := range []string{filepath.Join(dir, orchdir.Creds, orchdir.LeadCreds), orchdir.WorkerKey(dir, "w1"), orchdir.WorkerKey(dir, "w2")} {
		name := filepath.Base(path)
		fi, err := os.Stat(path)
		if err != nil {
			t.Fatal(err)
		}
		if got := fi.Mode().Perm(); got != 0o600 {
			t.Errorf("%s mode = %o, want 600", name, got)
		}
	}
	fi, err := os.Stat(filepath.Join(dir, orchdir.Broker))
	if err != nil {
		t.Fatal(err)
	}
	if got := fi.Mode().Perm(); got != 0o600 {
		t.Errorf("broker.json mode = %o, want 600", got)
	}
}

func TestRefusesWorldReadableSeed(t *testing.T) {
	dir := t.TempDir()
	if err := EnsureCreds(dir, "w1"); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(orchdir.WorkerKey(dir, "w1"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := EnsureCreds(dir, "w1"); !errors.Is(err, ErrCredsMode) {
		t.Errorf("EnsureCreds with a 0644 seed = %v, want ErrCredsMode", err)
	}
}

func TestListensOnLoopbackOnly(t *testing.T) {
	b, _ := startBroker(t)
	if got := b.URL(); len(got) < 17 || got[:17] != "nats://127.0.0.1:" {
		t.Errorf("URL = %q, want nats://127.0.0.1:<port>", got)
	}
}

func TestUnauthenticatedClientRefused(t *testing.T) {
	b, _ := startBroker(t)
	nc, err := nats.Connect(b.URL(), nats.NoReconnect(), nats.Timeout(2*time.Second))
	if err == nil {
		nc.Close()
		t.Fatal("a client without credentials connected")
	}
	if !errors.Is(err, nats.ErrAuthorization) {
		t.Errorf("err = %v, want an authorization violation", err)
	}
}

func workerConn(t testing.TB, dir string) *nats.Conn {
	t.Helper()
	cfg, err := notify.WorkerConfig(func(k string) string { return map[string]string{"ORCH_WORKER": "w1"}[k] }, filepath.Dir(dir))
	if err != nil {
		t.Fatal(err)
	}
	errs := make(chan error, 10)
	cfg.Timeout = 2 * time.Second
	nc, err := notify.Connect(cfg, "test-worker")
	if err != nil {
		t.Fatal(err)
	}
	nc.SetErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) { errs <- err })
	t.Cleanup(nc.Close)
	return nc
}

func TestWorkerCanPublishEventsAndGetsAck(t *testing.T) {
	b, dir := startBroker(t)
	nc := workerConn(t, dir)
	e := event.New(event.Done, "p1", "ok", "w1", "h")
	seq, dup, err := notify.PublishOn(nc, b.Prefix(), e, 2*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if seq == 0 || dup {
		t.Errorf("seq=%d dup=%v, want a fresh stored message", seq, dup)
	}
	_, dup, err = notify.PublishOn(nc, b.Prefix(), e, 2*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if !dup {
		t.Error("the same event id published twice was not reported as a duplicate")
	}
}

// A worker's say is stored in the bus stream, under its own id, and never
// in the event stream the lead loop consumes.
func TestWorkerSaysOnItsOwnBusSubject(t *testing.T) {
	ctx := context.Background()
	b, dir := startBroker(t)
	nc := workerConn(t, dir)
	for _, e := range []event.Event{
		event.New(event.Say, "", "fleet-wide", "w1", "h"),
		event.New(event.Say, "p.v2", "for plan p.v2", "w1", "h"),
	} {
		if _, _, err := notify.PublishOn(nc, b.Prefix(), e, 2*time.Second); err != nil {
			t.Fatalf("say %q: %v", e.Status, err)
		}
	}
	lc, err := b.ConnectLead()
	if err != nil {
		t.Fatal(err)
	}
	defer lc.Close()
	js, _ := jetstream.New(lc)
	bus, err := js.Stream(ctx, BusStream)
	if err != nil {
		t.Fatal(err)
	}
	for seq, want := range map[uint64]string{1: b.Prefix() + ".bus.w1.fleet", 2: b.Prefix() + ".bus.w1.plan.p.v2"} {
		m, err := bus.GetMsg(ctx, seq)
		if err != nil {
			t.Fatal(err)
		}
		if m.Subject != want {
			t.Errorf("say %d on %s, want %s", seq, m.Subject, want)
		}
	}
	ev, err := js.Stream(ctx, StreamName)
	if err != nil {
		t.Fatal(err)
	}
	if n := ev.CachedInfo().State.Msgs; n != 0 {
		t.Errorf("the event stream holds %d messages, want none: says are not events", n)
	}
}

// notify.Send is orch-notify's one connection: connect, publish, wait for
// the stream's acknowledgement on its own reply subject.
func TestSendIsAckedOnce(t *testing.T) {
	_, dir := startBroker(t)
	cfg, err := notify.WorkerConfig(func(k string) string { return map[string]string{"ORCH_WORKER": "w1"}[k] }, filepath.Dir(dir))
	if err != nil {
		t.Fatal(err)
	}
	e := event.New(event.Done, "p1", "ok", "w1", "h")
	res, err := notify.Send(cfg, e)
	if err != nil || !res.Acked || res.Seq == 0 || res.Duplicate || res.Spooled != "" {
		t.Fatalf("first send: %+v, %v; want acked, stored", res, err)
	}
	res, err = notify.Send(cfg, e)
	if err != nil || !res.Acked || !res.Duplicate {
		t.Fatalf("second send of the same event: %+v, %v; want acked as a duplicate", res, err)
	}
	// A subject no stream stores gets the server's no-responders answer at
	// once, not a timeout; the event is then spooled.
	lead, err := notify.LeadConfig(dir)
	if err != nil {
		t.Fatal(err)
	}
	lead.Prefix, lead.Timeout = "nostream", time.Minute
	start := time.Now()
	res, err = notify.Send(lead, e)
	if err != nil || res.Acked || res.Spooled == "" || !errors.Is(res.PubErr, notify.ErrNoBroker) || !strings.Contains(res.PubErr.Error(), "no stream stores") {
		t.Fatalf("send to a subject without a stream: %+v, %v; want spooled after ErrNoBroker, no stream stores", res, err)
	}
	if waited := time.Since(start); waited > 10*time.Second {
		t.Errorf("no-responders took %v: it waited for the timeout", waited)
	}
}

// A worker must not read the lead's deliveries, consume, change the stream,
// or speak for another worker.
func TestWorkerRoleIsPublishOnly(t *testing.T) {
	b, dir := startBroker(t)
	cases := []struct {
		name string
		try  func(nc *nats.Conn) error
	}{
		{"subscribe to the lead's delivery", func(nc *nats.Conn) error {
			_, err := nc.SubscribeSync(LeadDeliver(b.Prefix()))
			if err != nil {
				return err
			}
			return nc.Flush()
		}},
		{"subscribe to the wait delivery", func(nc *nats.Conn) error {
			_, err := nc.SubscribeSync(WaitDeliver(b.Prefix()))
			if err != nil {
				return err
			}
			return nc.Flush()
		}},
		{"subscribe to all events", func(nc *nats.Conn) error {
			_, err := nc.SubscribeSync(b.Prefix() + ".>")
			if err != nil {
				return err
			}
			return nc.Flush()
		}},
		{"delete the stream", func(nc *nats.Conn) error {
			_, err := nc.Request("$JS.API.STREAM.DELETE."+StreamName, nil, time.Second)
			return err
		}},
		{"publish a lead command", func(nc *nats.Conn) error {
			_, err := nc.Request(b.Prefix()+".cmd.dispatch", []byte("{}"), time.Second)
			return err
		}},
		{"publish a callback", func(nc *nats.Conn) error {
			_, err := nc.Request(CallbackSubject(b.Prefix(), "done"), []byte("{}"), time.Second)
			return err
		}},
		{"publish as another worker", func(nc *nats.Conn) error {
			e := event.New(event.Done, "p1", "ok", "w2", "h")
			_, _, err := notify.PublishOn(nc, b.Prefix(), e, time.Second)
			return err
		}},
		{"say as another worker", func(nc *nats.Conn) error {
			e := event.New(event.Say, "", "a finding", "w2", "h")
			_, _, err := notify.PublishOn(nc, b.Prefix(), e, time.Second)
			return err
		}},
		{"say as itself on another worker's bus subject", func(nc *nats.Conn) error {
			e := event.New(event.Say, "", "a finding", "w1", "h")
			msg := notify.EventMsg(b.Prefix(), e)
			msg.Subject = b.Prefix() + ".bus.w2." + event.FleetTopic
			_, _, err := notify.PublishMsg(nc, msg, time.Second)
			return err
		}},
		{"read the bus", func(nc *nats.Conn) error {
			_, err := nc.SubscribeSync(b.Prefix() + ".bus.>")
			if err != nil {
				return err
			}
			return nc.Flush()
		}},
		{"purge the bus", func(nc *nats.Conn) error {
			_, err := nc.Request("$JS.API.STREAM.PURGE."+BusStream, nil, time.Second)
			return err
		}},
		{"publish on the old shared subject", func(nc *nats.Conn) error {
			_, err := nc.Request(b.Prefix()+".ev.done", []byte("{}"), time.Second)
			return err
		}},
		{"read another worker's replies", func(nc *nats.Conn) error {
			_, err := nc.SubscribeSync(event.WorkerInboxOf("w2") + ".>")
			if err != nil {
				return err
			}
			return nc.Flush()
		}},
		{"answer a command for the lead", func(nc *nats.Conn) error {
			if err := nc.Publish(event.VerdictSubject(b.Prefix(), "0123456789abcdef"), []byte("{}")); err != nil {
				return err
			}
			return nc.Flush()
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			nc := workerConn(t, dir)
			errs := make(chan error, 4)
			nc.SetErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) { errs <- err })
			err := tc.try(nc)
			if err == nil {
				select {
				case err = <-errs:
				case <-time.After(2 * time.Second):
				}
			}
			if err == nil {
				t.Fatal("allowed, want a permissions violation")
			}
		})
	}
	// The stream must still be there after the worker tried to delete it.
	nc, err := b.ConnectLead()
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, _ := jetstream.New(nc)
	if _, err := js.Stream(context.Background(), StreamName); err != nil {
		t.Errorf("stream gone: %v", err)
	}
}

func TestRestartKeepsPortAndEvents(t *testing.T) {
	dir := filepath.Join(t.TempDir(), ".orch")
	os.MkdirAll(dir, 0o700)
	b, err := Start(context.Background(), Config{Dir: dir, Workers: []string{"w1"}})
	if err != nil {
		t.Fatal(err)
	}
	url := b.URL()
	nc := workerConn(t, dir)
	if _, _, err := notify.PublishOn(nc, b.Prefix(), event.New(event.Started, "p", "", "w1", "h"), 2*time.Second); err != nil {
		t.Fatal(err)
	}
	nc.Close()
	b.Shutdown()
	b2, err := Start(context.Background(), Config{Dir: dir, Workers: []string{"w1"}})
	if err != nil {
		t.Fatal(err)
	}
	defer b2.Shutdown()
	if b2.URL() != url {
		t.Errorf("URL after restart = %s, want the same %s", b2.URL(), url)
	}
	lc, _ := b2.ConnectLead()
	defer lc.Close()
	js, _ := jetstream.New(lc)
	s, err := js.Stream(context.Background(), StreamName)
	if err != nil {
		t.Fatal(err)
	}
	if n := s.CachedInfo().State.Msgs; n != 1 {
		t.Errorf("messages after restart = %d, want 1", n)
	}
}
