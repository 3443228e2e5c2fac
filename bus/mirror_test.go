package bus

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/orch-dev/orch/broker"
	"github.com/orch-dev/orch/event"
	"github.com/orch-dev/orch/internal/eventually"
	"github.com/orch-dev/orch/notify"
)

// A bus.md written from another stream (the bus was made anew: a new
// .orch/jetstream, another cluster) ends with a sequence the stream has
// not reached: the mirror starts again from the stream's first say,
// instead of skipping every say until the numbers pass the old ones, and
// a restart after that goes on from its last line.
func TestMirrorOfANewBusStartsAgain(t *testing.T) {
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
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	say := func(text string) {
		t.Helper()
		if _, _, err := notify.PublishOn(nc, b.Prefix(), event.New(event.Say, "", text, "w1", "h"), 2*time.Second); err != nil {
			t.Fatal(err)
		}
	}
	path := filepath.Join(dir, File)
	old := header + "#7 2026-01-01T00:00:00Z w2 [fleet]: from the old bus\n"
	if err := os.WriteFile(path, []byte(old), 0o644); err != nil {
		t.Fatal(err)
	}
	say("first")
	say("second")
	mirror := func(want string) {
		t.Helper()
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- Mirror(ctx, Reader{JS: js, Prefix: b.Prefix()}, path, nil) }()
		eventually.True(t, 5*time.Second, func() bool {
			data, _ := os.ReadFile(path)
			return strings.Contains(string(data), want)
		}, "bus.md holds %q", want)
		cancel()
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}
	mirror("]: second\n")
	say("third")
	mirror("]: third\n")
	data, _ := os.ReadFile(path)
	got := string(data)
	if !strings.HasPrefix(got, old) {
		t.Errorf("the old lines are not kept as they were:\n%s", got)
	}
	for _, text := range []string{"first", "second", "third"} {
		if n := strings.Count(got, "]: "+text+"\n"); n != 1 {
			t.Errorf("%q mirrored %d times, want once:\n%s", text, n, got)
		}
	}
}
