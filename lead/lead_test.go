package lead

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/orch-dev/orch/broker"
	"github.com/orch-dev/orch/event"
	"github.com/orch-dev/orch/internal/eventually"
	"github.com/orch-dev/orch/internal/orchctl"
	"github.com/orch-dev/orch/internal/orchdir"
	"github.com/orch-dev/orch/internal/state"
	"github.com/orch-dev/orch/notify"
	"github.com/orch-dev/orch/plans"
)

// startLoop runs a lead loop without a fleet on a fresh repo with plan p.
func startLoop(t *testing.T) (root string) {
	t.Helper()
	return startLoopWith(t, nil)
}

// startLoopWith is startLoop with prep run on the repo before the loop
// starts.
func startLoopWith(t *testing.T, prep func(root string)) (root string) {
	t.Helper()
	root = filepath.Join(t.TempDir(), "repo")
	os.MkdirAll(root, 0o755)
	t.Setenv("GIT_CONFIG_NOSYSTEM", "1")
	t.Setenv("HOME", t.TempDir())
	if out, err := exec.Command("git", "init", "-q", "-b", "main", root).CombinedOutput(); err != nil {
		t.Fatalf("git init: %v %s", err, out)
	}
	ctx := context.Background()
	if _, err := orchctl.Init(ctx, root); err != nil {
		t.Fatal(err)
	}
	if _, err := orchctl.NewPlan(ctx, root, &plans.Plan{Name: "p", Body: "x\n"}); err != nil {
		t.Fatal(err)
	}
	// No fleet: w1's key is made by hand, for the tests to send as w1.
	if err := broker.EnsureCreds(orchdir.Of(root), "w1"); err != nil {
		t.Fatal(err)
	}
	if prep != nil {
		prep(root)
	}
	ctx, cancel := context.WithCancel(ctx)
	ready := make(chan struct{})
	errc := make(chan error, 1)
	go func() { errc <- Run(ctx, Config{Root: root, Ready: func(string) { close(ready) }}) }()
	select {
	case <-ready:
	case err := <-errc:
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cancel()
		if err := <-errc; err != nil {
			t.Error(err)
		}
	})
	return root
}

func workerConn(t *testing.T, root string) (*nats.Conn, notify.Config) {
	t.Helper()
	cfg, err := notify.WorkerConfig(func(k string) string { return map[string]string{"ORCH_WORKER": "w1"}[k] }, root)
	if err != nil {
		t.Fatal(err)
	}
	nc, err := notify.Connect(cfg, "test-worker")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	return nc, cfg
}

// A worker may publish only events; a lead command dressed as an event (on
// a subject workers may use) is refused, not obeyed.
func TestWorkerCannotDispatch(t *testing.T) {
	root := startLoop(t)
	nc, cfg := workerConn(t, root)
	e := event.New(event.Dispatch, "p", "", "w1", "h")
	msg := nats.NewMsg(cfg.Prefix + ".ev.w1.dispatch")
	msg.Header.Set(nats.MsgIdHdr, e.ID)
	msg.Data = e.Marshal()
	if _, _, err := notify.PublishMsg(nc, msg, 2*time.Second); err != nil {
		t.Fatal(err)
	}
	eventually.True(t, 5*time.Second, func() bool {
		st, err := state.Load(orchdir.Of(root))
		return err == nil && len(st.Rejected) == 1 && strings.Contains(st.Rejected[0].Reason, "must arrive on orch.cmd.dispatch")
	}, "the forged dispatch to be refused")
	st, _ := state.Load(orchdir.Of(root))
	if p := st.Plans["p"]; p != nil {
		t.Errorf("plan p was touched by a worker's command: %+v", p)
	}
}

// The worker is the one whose key sent the event (its subject), not the
// one the payload names: w1 claiming to be w2 is refused, and says so.
func TestSubjectNamesTheWorker(t *testing.T) {
	root := startLoop(t)
	nc, cfg := workerConn(t, root)
	e := event.New(event.Done, "p", "ok", "w2", "h")
	msg := nats.NewMsg(cfg.Prefix + ".ev.w1.done")
	msg.Header.Set(nats.MsgIdHdr, e.ID)
	msg.Data = e.Marshal()
	if _, _, err := notify.PublishMsg(nc, msg, 2*time.Second); err != nil {
		t.Fatal(err)
	}
	eventually.True(t, 5*time.Second, func() bool {
		st, err := state.Load(orchdir.Of(root))
		return err == nil && len(st.Rejected) == 1
	}, "the event to be refused")
	st, _ := state.Load(orchdir.Of(root))
	if want := `sent with w1's credential, but it names worker "w2"`; !strings.Contains(st.Rejected[0].Reason, want) {
		t.Errorf("reason %q, want it to contain %q", st.Rejected[0].Reason, want)
	}
}

// A worker pointing a publish's reply at the lead's delivery subject must
// not feed the lead loop a message that is not a delivery.
func TestReplyToDeliverySubjectIsDropped(t *testing.T) {
	root := startLoop(t)
	nc, cfg := workerConn(t, root)
	// The worker may not even send it there: its publish permission covers
	// events only, and the reply (the broker's ack) is what would land.
	e := event.New(event.Started, "p", "", "w1", "h")
	msg := nats.NewMsg(event.Subject(cfg.Prefix, e))
	msg.Reply = broker.LeadDeliver(cfg.Prefix)
	msg.Data = e.Marshal()
	if err := nc.PublishMsg(msg); err != nil {
		t.Fatal(err)
	}
	nc.Flush()
	// The real event is handled (refused: p was never dispatched) and the
	// stray ack on the delivery subject is not recorded as a malformed event.
	eventually.True(t, 5*time.Second, func() bool {
		st, err := state.Load(orchdir.Of(root))
		return err == nil && len(st.Rejected) >= 1
	}, "the started event to be handled")
	st, _ := state.Load(orchdir.Of(root))
	for _, r := range st.Rejected {
		if r.Kind == "malformed" {
			t.Errorf("a stray message was taken for an event: %+v", r)
		}
	}
}

// A client probing whether orch serve runs (orch status, dispatch, the
// tests' waitserving) at the instant an orch serve starts does not turn it
// away as "already running". Here a client probes without a pause while
// orch serve starts, twenty times over, from four goroutines.
func TestProbeDoesNotTurnServeAway(t *testing.T) {
	root := filepath.Join(t.TempDir(), "repo")
	os.MkdirAll(root, 0o755)
	t.Setenv("GIT_CONFIG_NOSYSTEM", "1")
	t.Setenv("HOME", t.TempDir())
	if out, err := exec.Command("git", "init", "-q", "-b", "main", root).CombinedOutput(); err != nil {
		t.Fatalf("git init: %v %s", err, out)
	}
	if _, err := orchctl.Init(context.Background(), root); err != nil {
		t.Fatal(err)
	}
	for i := range 20 {
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		for range 4 {
			go func() {
				for {
					select {
					case <-done:
						return
					default:
					}
					orchctl.Serving(root)
				}
			}()
		}
		ready := make(chan struct{})
		errc := make(chan error, 1)
		go func() { errc <- Run(ctx, Config{Root: root, Ready: func(string) { close(ready) }}) }()
		select {
		case <-ready:
		case err := <-errc:
			close(done)
			cancel()
			t.Fatalf("start %d: orch serve turned away by a probe: %v", i, err)
		case <-time.After(20 * time.Second):
			t.Fatalf("start %d: orch serve did not start", i)
		}
		close(done)
		if pid := orchctl.ServePID(root); pid != os.Getpid() {
			t.Errorf("start %d: orchctl.ServePID = %d, want this process %d", i, pid, os.Getpid())
		}
		cancel()
		if err := <-errc; err != nil {
			t.Fatal(err)
		}
		if orchctl.Serving(root) {
			t.Errorf("start %d: still serving after the loop returned", i)
		}
	}
}
