package hostd

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/nats-io/nkeys"

	"github.com/orch-dev/orch/event"
	"github.com/orch-dev/orch/internal/orchdir"
)

// A host takes from its spool only what one of its workers' keys may send
// its server: an event of the worker's own, signed by it. A died (its
// pane's death is the host's to report), an exited, or an event naming
// the other worker is set aside, never published.
func TestSpoolRefusesHostRecords(t *testing.T) {
	d := testDaemon(t)
	d.spool = filepath.Join(orchdir.Of(d.repo.Root), orchdir.Spool)
	kp, err := nkeys.CreateUser()
	if err != nil {
		t.Fatal(err)
	}
	pub, _ := kp.PublicKey()
	d.signer = func(w string) string {
		if w == "w3" {
			return pub
		}
		return ""
	}
	spool := func(e event.Event) event.Spooled {
		t.Helper()
		if e.Kind == event.Died {
			e.Pane = "%5"
		}
		path, err := event.WriteSpool(d.spool, e, event.SpoolSigner{By: "w3", Sign: kp.Sign})
		if err != nil {
			t.Fatal(err)
		}
		s, err := event.ReadSpoolFile(path)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	if err := d.allowed(spool(event.New(event.Started, "p", "", "w3", "alpha"))); err != nil {
		t.Fatalf("w3's own started: %v", err)
	}
	for _, e := range []event.Event{
		event.New(event.Died, "", "pane %5 exited", "w3", "alpha"),
		event.New(event.Exited, "p", "process 7 exited 0", "w3", "alpha"),
		event.New(event.Done, "p", "ok", "w4", "alpha"),
	} {
		s := spool(e)
		if err := d.allowed(s); !errors.Is(err, event.ErrNotSignersEvent) {
			t.Errorf("w3's spooled %s about %s: %v", e.Kind, e.Worker, err)
			continue // taking it would publish it
		}
		d.take(t.Context(), s) // set aside before anything is published (no stream here)
		if _, err := os.Stat(s.Path); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("w3's spooled %s left in the spool: %v", e.Kind, err)
		}
		if _, err := os.Stat(filepath.Join(d.spool, event.Rejected, filepath.Base(s.Path))); err != nil {
			t.Errorf("w3's spooled %s not set aside: %v", e.Kind, err)
		}
	}
}
