package lead

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"testing"

	"github.com/orch-dev/orch/broker"
	"github.com/orch-dev/orch/event"
	"github.com/orch-dev/orch/internal/orchdir"
)

// A lead record the broker does not take (here: the lead's connection is
// gone) is kept in the spool, to be published again, never dropped.
func TestPublishRecordSpoolsWhenNotPublished(t *testing.T) {
	orchDir := filepath.Join(t.TempDir(), orchdir.Name)
	spool := filepath.Join(orchDir, orchdir.Spool)
	if err := os.MkdirAll(spool, 0o700); err != nil {
		t.Fatal(err)
	}
	b, err := broker.Start(context.Background(), broker.Config{Dir: orchDir, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Shutdown()
	nc, err := b.ConnectLead()
	if err != nil {
		t.Fatal(err)
	}
	nc.Close()
	l := &Loop{orchDir: orchDir, log: slog.New(slog.DiscardHandler), nc: nc, b: b}
	e := event.New(event.Gated, "p", "passed", "", "")
	e.Attempt = 1
	l.publishRecord(e)
	files, err := os.ReadDir(spool)
	if err != nil || len(files) != 1 {
		t.Fatalf("spool holds %d files (%v), want 1", len(files), err)
	}
	got, err := event.ReadSpoolFile(filepath.Join(spool, files[0].Name()))
	if err != nil {
		t.Fatal(err)
	}
	if got.Event.ID != e.ID || got.Event.Kind != event.Gated || got.Event.Attempt != 1 {
		t.Fatalf("spooled %+v, want %+v", got.Event, e)
	}
}
