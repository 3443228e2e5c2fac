package inbox

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/orch-dev/orch/broker"
	"github.com/orch-dev/orch/event"
	"github.com/orch-dev/orch/internal/eventually"
)

// A real embedded broker; callbacks published as the lead loop does.
func setup(t *testing.T) (*nats.Conn, string, Record) {
	t.Helper()
	dir := filepath.Join(t.TempDir(), ".orch")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	b, err := broker.Start(context.Background(), broker.Config{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(b.Shutdown)
	nc, err := b.ConnectLead()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	rec, err := NewRecord("claude", time.Now().Add(-time.Second))
	if err != nil {
		t.Fatal(err)
	}
	return nc, b.Prefix(), rec
}

func publish(t *testing.T, nc *nats.Conn, prefix string, plans ...string) {
	t.Helper()
	js, _ := jetstream.New(nc)
	for _, p := range plans {
		cb := event.NewCallback(event.CallbackDone, "ev-"+p, p, "w1", p+" ok", "")
		data, _ := json.Marshal(cb)
		if _, err := js.Publish(context.Background(), broker.CallbackSubject(prefix, "done"), data, jetstream.WithMsgID("cb-"+p)); err != nil {
			t.Fatal(err)
		}
	}
}

func lines(bt *Batch) string { return fmt.Sprint(bt.Lines()) }

func TestTakeAckOnceAndOwnPosition(t *testing.T) {
	nc, prefix, rec := setup(t)
	ctx := context.Background()
	b, err := Open(ctx, nc, prefix, rec)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.Take(ctx, false, 0); !errors.Is(err, ErrEmpty) {
		t.Fatalf("empty inbox: err = %v", err)
	}
	publish(t, nc, prefix, "a", "b")
	bt, err := b.Take(ctx, true, 50*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	if got := lines(bt); got != "[WORKER-DONE a: a ok WORKER-DONE b: b ok]" {
		t.Fatalf("took %s", got)
	}
	if err := bt.Ack(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Take(ctx, false, 0); !errors.Is(err, ErrEmpty) {
		t.Fatalf("after ack: err = %v", err)
	}
	// orch wait's consumer still has both: its own position.
	js, _ := jetstream.New(nc)
	wc, err := js.PushConsumer(ctx, broker.StreamName, broker.WaitConsumer)
	if err != nil {
		t.Fatal(err)
	}
	if info, _ := wc.Info(ctx); info.NumPending != 2 {
		t.Errorf("orch wait's consumer has %d pending, want 2", info.NumPending)
	}
}

// A waiting take goes on gathering for settle after the first callback:
// one that arrives just after it is in the same batch (the lead is woken
// once for both).
func TestWaitingTakeGathersABurst(t *testing.T) {
	nc, prefix, rec := setup(t)
	ctx := context.Background()
	b, err := Open(ctx, nc, prefix, rec)
	if err != nil {
		t.Fatal(err)
	}
	type took struct {
		bt  *Batch
		err error
	}
	done := make(chan took, 1)
	go func() {
		bt, err := b.Take(ctx, true, 2*time.Second)
		done <- took{bt, err}
	}()
	publish(t, nc, prefix, "a")
	// a is out to the waiting take (pending its ack) before b is stored.
	eventually.True(t, 10*time.Second, func() bool {
		info, err := b.cons.Info(ctx)
		return err == nil && info.NumAckPending == 1
	}, "a handed to the waiting take")
	publish(t, nc, prefix, "b")
	got := <-done
	if got.err != nil {
		t.Fatal(got.err)
	}
	if l := lines(got.bt); l != "[WORKER-DONE a: a ok WORKER-DONE b: b ok]" {
		t.Errorf("took %s, want a and b together", l)
	}
}

func TestTakenNotAckedComesAgainOnce(t *testing.T) {
	nc, prefix, rec := setup(t)
	ctx := context.Background()
	b, err := Open(ctx, nc, prefix, rec)
	if err != nil {
		t.Fatal(err)
	}
	publish(t, nc, prefix, "a")
	if _, err := b.Take(ctx, false, 0); err != nil { // a taker that dies before its write
		t.Fatal(err)
	}
	publish(t, nc, prefix, "b")
	peek, err := b.Peek(ctx, 10)
	if err != nil || len(peek) != 2 {
		t.Fatalf("peek = %v, %v; want a and b", peek, err)
	}
	// The next taker (holding the lock) rewinds: a comes again, with b.
	b2, err := Open(ctx, nc, prefix, rec)
	if err != nil {
		t.Fatal(err)
	}
	if n, err := b2.Rewind(ctx); err != nil || n != 1 {
		t.Fatalf("rewind = %d, %v; want 1", n, err)
	}
	bt, err := b2.Take(ctx, false, 0)
	if err != nil {
		t.Fatal(err)
	}
	if got := lines(bt); got != "[WORKER-DONE a: a ok WORKER-DONE b: b ok]" {
		t.Fatalf("took %s", got)
	}
	if err := bt.Ack(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := b2.Take(ctx, false, 0); !errors.Is(err, ErrEmpty) {
		t.Fatalf("after ack: err = %v", err)
	}
}

func TestReinstallStartsAgain(t *testing.T) {
	nc, prefix, rec := setup(t)
	ctx := context.Background()
	publish(t, nc, prefix, "old")
	rec2, _ := NewRecord("claude", time.Now().Add(time.Second)) // installed after "old" was stored
	b, err := Open(ctx, nc, prefix, rec)
	if err != nil {
		t.Fatal(err)
	}
	bt, err := b.Take(ctx, false, 0)
	if err != nil || len(bt.Items) != 1 {
		t.Fatalf("first install: %v %v", bt, err)
	}
	b2, err := Open(ctx, nc, prefix, rec2)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b2.Take(ctx, false, 0); !errors.Is(err, ErrEmpty) {
		t.Fatalf("a new install sees callbacks from before it: %v", err)
	}
}

func TestTakenList(t *testing.T) {
	dir := t.TempDir()
	items := []Item{{Seq: 1, Callback: event.Callback{Event: "e1", Line: "WORKER-DONE a: ok"}},
		{Seq: 2, Callback: event.Callback{Event: "e2", Line: "WORKER-DONE b: ok"}}}
	if err := AddTaken(dir, "claude", items); err != nil {
		t.Fatal(err)
	}
	if err := AddTaken(dir, "claude", items[:1]); err != nil { // handed over again after a crash
		t.Fatal(err)
	}
	if got, _ := LoadTaken(dir, "claude"); len(got) != 2 {
		t.Fatalf("taken = %v, want 2", got)
	}
	if _, unknown, _ := AckTaken(dir, "claude", []string{"e1", "nope"}, false); len(unknown) != 1 {
		t.Errorf("unknown = %v", unknown)
	}
	if got, _ := LoadTaken(dir, "claude"); len(got) != 2 {
		t.Fatalf("a refused ack changed the list: %v", got)
	}
	acked, _, err := AckTaken(dir, "claude", []string{"e1"}, false)
	if err != nil || len(acked) != 1 {
		t.Fatalf("ack e1 = %v, %v", acked, err)
	}
	if got, _ := LoadTaken(dir, "claude"); len(got) != 1 || got[0].Callback.Event != "e2" {
		t.Errorf("left %v", got)
	}
}

// Consumers names every installed inbox's consumer, an unreadable record's
// too, and nothing for the other files beside the records.
func TestConsumers(t *testing.T) {
	od := t.TempDir()
	rec, err := NewRecord("claude", time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if err := SaveRecord(od, rec); err != nil {
		t.Fatal(err)
	}
	for name, data := range map[string]string{"pane.json": "{", "claude.taken.json": "[]", "pane.typing.json": "{}"} {
		if err := os.WriteFile(filepath.Join(Dir(od), name), []byte(data), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if got := Consumers(od); !slices.Equal(got, []string{"lead-claude", "lead-pane"}) {
		t.Fatalf("consumers %q, want lead-claude and lead-pane", got)
	}
	if got := Consumers(t.TempDir()); len(got) != 0 {
		t.Fatalf("consumers %q with no inbox installed", got)
	}
}
