package lead

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nkeys"

	"github.com/orch-dev/orch/broker"
	"github.com/orch-dev/orch/event"
	"github.com/orch-dev/orch/internal/eventually"
	"github.com/orch-dev/orch/internal/orchdir"
	"github.com/orch-dev/orch/internal/state"
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

// The spool is as strict as the bus: a file is taken only if it is signed
// by the lead or by a worker this repo knows, and a worker's file only
// with a worker's kind of event naming that worker. Everything else is set
// aside with its reason and has no effect.
func TestSpoolTakesOnlyWhatTheBusWould(t *testing.T) {
	root := startLoop(t)
	od := orchdir.Of(root)
	spool := filepath.Join(od, orchdir.Spool)
	signer := func(by, seedFile string) event.SpoolSigner {
		seed, err := os.ReadFile(seedFile)
		if err != nil {
			t.Fatal(err)
		}
		kp, err := nkeys.FromSeed(bytes.TrimSpace(seed))
		if err != nil {
			t.Fatal(err)
		}
		return event.SpoolSigner{By: by, Sign: kp.Sign}
	}
	w1 := signer("w1", orchdir.WorkerKey(od, "w1"))
	lead := signer(event.LeadSigner, filepath.Join(od, orchdir.Creds, orchdir.LeadCreds))
	stranger, _ := nkeys.CreateUser()
	strangerSeed, _ := stranger.Seed()
	strangerFile := filepath.Join(t.TempDir(), "w7.nk")
	os.WriteFile(strangerFile, strangerSeed, 0o600)

	integrated := event.New(event.Integrated, "p", "integrated 0123456789", "", "")
	dispatch := event.New(event.Dispatch, "p", "", "", "")
	asW2 := event.New(event.Done, "p", "ok", "w2", "")
	fromW7 := event.New(event.Done, "p", "ok", "w7", "")
	cases := []struct {
		e    event.Event
		s    event.SpoolSigner
		want string
	}{
		{integrated, w1, "signed by worker w1, but integrated is the lead's kind of event"},
		{dispatch, w1, "signed by worker w1, but dispatch is the lead's kind of event"},
		{asW2, w1, `signed by worker w1, but it names worker "w2"`},
		{fromW7, signer("w7", strangerFile), `signed by "w7", which is neither the lead nor a worker of this repo`},
		{event.New(event.Integrated, "p", "integrated 0123456789", "", ""), event.SpoolSigner{By: event.LeadSigner, Sign: stranger.Sign}, "not signed by lead's key"},
	}
	for _, c := range cases {
		if _, err := event.WriteSpool(spool, c.e, c.s); err != nil {
			t.Fatal(err)
		}
	}
	bare := event.New(event.Integrated, "p", "integrated 0123456789", "", "")
	if err := os.WriteFile(filepath.Join(spool, event.SpoolFile(bare)), bare.Marshal(), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, c := range cases {
		why := filepath.Join(spool, event.Rejected, event.SpoolFile(c.e)+".why")
		var got []byte
		eventually.True(t, 5*time.Second, func() bool {
			got, _ = os.ReadFile(why)
			return len(got) > 0
		}, "the file to be set aside: "+c.want)
		if !strings.Contains(string(got), c.want) {
			t.Errorf("%s: %q, want it to say %q", filepath.Base(why), got, c.want)
		}
	}
	eventually.True(t, 5*time.Second, func() bool {
		got, _ := os.ReadFile(filepath.Join(spool, event.Rejected, event.SpoolFile(bare)+".why"))
		return strings.Contains(string(got), "a bare event")
	}, "the unsigned file to be set aside")

	// The lead's own, signed with its key, is taken.
	if _, err := event.WriteSpool(spool, dispatch, lead); err != nil {
		t.Fatal(err)
	}
	eventually.True(t, 5*time.Second, func() bool {
		st, err := state.Load(od)
		return err == nil && st.Plans["p"] != nil && st.Plans["p"].State == state.PlanQueued
	}, "the lead's dispatch to be taken")
	st, _ := state.Load(od)
	if p := st.Plans["p"]; p.State != state.PlanQueued || p.Result != "" {
		t.Errorf("plan p %+v: a refused spool file had an effect", p)
	}
}

// Only a file that is shown not to be an event is set aside: one that does
// not parse is kept while serving (it may still be being written), and one
// that could not be read for a passing reason (too many open files, an
// I/O error) is kept for the next start.
func TestNotTakenSetsAsideOnlyWhatIsNoEvent(t *testing.T) {
	spool := filepath.Join(t.TempDir(), "spool")
	os.MkdirAll(spool, 0o700)
	l := &Loop{log: slog.New(slog.DiscardHandler)}
	for _, c := range []struct {
		err     error
		atStart bool
		aside   bool
	}{
		{fmt.Errorf("open: %w", syscall.EMFILE), true, false},
		{fmt.Errorf("read: %w", syscall.EIO), false, false},
		{fmt.Errorf("x: %w", event.ErrMalformed), false, false},
		{fmt.Errorf("x: %w", event.ErrMalformed), true, true},
		{fmt.Errorf("x: %w", event.ErrBadSpoolFile), false, true},
		{fmt.Errorf("x: %w", event.ErrUnsigned), false, true},
	} {
		path := filepath.Join(spool, "f.json")
		os.WriteFile(path, []byte("{}"), 0o600)
		l.notTaken(path, c.err, c.atStart)
		_, err := os.Stat(path)
		if kept := err == nil; kept == c.aside {
			t.Errorf("%v (at start %v): kept %v, want set aside %v", c.err, c.atStart, kept, c.aside)
		}
		os.RemoveAll(filepath.Join(spool, event.Rejected))
	}
}
