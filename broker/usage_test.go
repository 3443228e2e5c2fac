package broker

import (
	"context"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/orch-dev/orch/event"
	"github.com/orch-dev/orch/internal/eventually"
	"github.com/orch-dev/orch/notify"
)

// Trim takes from the stream what each reader has acknowledged, and only
// that: unacknowledged events and callbacks stay, and are still delivered.
func TestTrimKeepsWhatIsNotAcknowledged(t *testing.T) {
	ctx := context.Background()
	b, _ := startBroker(t)
	lc, err := b.ConnectLead()
	if err != nil {
		t.Fatal(err)
	}
	defer lc.Close()
	js, err := jetstream.New(lc)
	if err != nil {
		t.Fatal(err)
	}
	p := b.Prefix()
	for i := 0; i < 5; i++ {
		if _, _, err := notify.PublishOn(lc, p, event.New(event.Started, "p", "", "w1", "h"), 2*time.Second); err != nil {
			t.Fatal(err)
		}
	}
	for i := 0; i < 3; i++ {
		if _, err := js.Publish(ctx, CallbackSubject(p, "done"), []byte(`{"n":1}`)); err != nil {
			t.Fatal(err)
		}
	}
	events := consume(t, js, LeadConsumer, 5)
	for _, m := range events[:3] {
		if err := m.DoubleAck(ctx); err != nil {
			t.Fatal(err)
		}
	}
	// orch wait's consumer hands out one at a time: take the first
	// callback, and hold the second.
	cbs := consume(t, js, WaitConsumer, 1)
	if err := cbs[0].DoubleAck(ctx); err != nil {
		t.Fatal(err)
	}

	u, err := Trim(ctx, js, p, nil)
	if err != nil {
		t.Fatal(err)
	}
	if u.Msgs != 4 || u.Trimmed != 4 || u.Unhandled != 2 || u.Untaken != 2 {
		t.Fatalf("after trim: %+v; want 4 messages left (2 events, 2 callbacks), 4 trimmed, 2 unhandled, 2 untaken", u)
	}
	// What was not acknowledged is still there to acknowledge.
	for _, m := range events[3:] {
		if err := m.DoubleAck(ctx); err != nil {
			t.Fatalf("ack of an event kept by the trim: %v", err)
		}
	}
	if u, err = Trim(ctx, js, p, nil); err != nil {
		t.Fatal(err)
	}
	if u.Unhandled != 0 || u.Untaken != 2 || u.Msgs != 2 {
		t.Fatalf("after the rest of the events are handled: %+v; want the 2 callbacks only", u)
	}
	// And the next callback still comes to orch wait.
	if got := consume(t, js, WaitConsumer, 1); len(got) != 1 {
		t.Fatal("no callback after the trim")
	}
}

// consume takes n deliveries from a durable push consumer, unacknowledged.
func consume(t *testing.T, js jetstream.JetStream, name string, n int) []jetstream.Msg {
	t.Helper()
	ctx := context.Background()
	pc, err := js.PushConsumer(ctx, StreamName, name)
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan jetstream.Msg, 64)
	cc, err := pc.Consume(func(m jetstream.Msg) { got <- m })
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Stop()
	var out []jetstream.Msg
	eventually.True(t, 5*time.Second, func() bool {
		for {
			select {
			case m := <-got:
				out = append(out, m)
			default:
				return len(out) >= n
			}
		}
	}, "deliveries from %s", name)
	return out[:n]
}

func TestUsageAlarm(t *testing.T) {
	for _, c := range []struct {
		bytes uint64
		alarm bool
	}{{0, false}, {74, false}, {75, true}, {100, true}} {
		u := Usage{Bytes: c.bytes, MaxBytes: 100}
		if u.Alarm() != c.alarm {
			t.Errorf("%d of 100 bytes: alarm %v, want %v", c.bytes, u.Alarm(), c.alarm)
		}
	}
	if (Usage{Bytes: 5}).Alarm() {
		t.Error("a stream without a byte limit raised the alarm")
	}
}

// A lead agent's inbox (a consumer lead-<agent> of the callbacks) holds
// back the trimming of callbacks orch wait took: while it has not
// acknowledged them, and while its consumer is missing because it is
// being made again (an inbox's rewind deletes it and makes it anew), the
// callbacks stay.
func TestTrimKeepsCallbacksForLeadInboxes(t *testing.T) {
	ctx := context.Background()
	b, _ := startBroker(t)
	lc, err := b.ConnectLead()
	if err != nil {
		t.Fatal(err)
	}
	defer lc.Close()
	js, err := jetstream.New(lc)
	if err != nil {
		t.Fatal(err)
	}
	p := b.Prefix()
	for i := 0; i < 3; i++ {
		if _, err := js.Publish(ctx, CallbackSubject(p, "done"), []byte(`{"n":1}`)); err != nil {
			t.Fatal(err)
		}
	}
	inboxCfg := jetstream.ConsumerConfig{Durable: "lead-pane", FilterSubject: p + ".cb.>", AckPolicy: jetstream.AckExplicitPolicy}
	if _, err := js.CreateConsumer(ctx, StreamName, inboxCfg); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 3; i++ { // orch wait takes every callback
		if err := consume(t, js, WaitConsumer, 1)[0].DoubleAck(ctx); err != nil {
			t.Fatal(err)
		}
	}
	u, err := Trim(ctx, js, p, []string{"lead-pane"})
	if err != nil {
		t.Fatal(err)
	}
	if u.Msgs != 3 {
		t.Fatalf("after trim with the lead pane's inbox behind: %+v; want the 3 callbacks kept", u)
	}
	// The inbox's consumer is being made again: still nothing goes.
	if err := js.DeleteConsumer(ctx, StreamName, "lead-pane"); err != nil {
		t.Fatal(err)
	}
	if u, err = Trim(ctx, js, p, []string{"lead-pane"}); err != nil {
		t.Fatal(err)
	}
	if u.Msgs != 3 {
		t.Fatalf("after trim with the lead pane's inbox consumer missing: %+v; want the 3 callbacks kept", u)
	}
	// An inbox nobody has installed holds nothing back.
	if u, err = Trim(ctx, js, p, nil); err != nil {
		t.Fatal(err)
	}
	if u.Msgs != 0 {
		t.Fatalf("after trim with no lead inbox: %+v; want the callbacks gone", u)
	}
}
