package hostd

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/orch-dev/orch/event"
)

// A host's workers spool an event their host's server did not take (it
// was down, or slow), as a lead's do. The host takes its spool into its
// stream when it starts and whenever a file appears (fsnotify), checked as
// the lead checks its own: signed by one of this host's workers, a
// worker's kind of event, naming that worker. What fails the check is set
// aside in spool/rejected with the reason.

// ingestSpool publishes every spooled event, oldest first.
func (d *daemon) ingestSpool(ctx context.Context, atStart bool) {
	good, bad, err := event.ReadSpool(d.spool)
	if err != nil {
		d.log.Error("spool", "err", err)
		return
	}
	for _, b := range bad {
		d.notTaken(b.Path, b.Err, atStart)
	}
	for _, s := range good {
		d.take(ctx, s)
	}
}

// ingestFile publishes one spool file fsnotify reported.
func (d *daemon) ingestFile(ctx context.Context, path string) {
	if !event.IsSpoolFile(filepath.Base(path)) {
		return
	}
	s, err := event.ReadSpoolFile(path)
	if err != nil {
		d.notTaken(path, err, false)
		return
	}
	d.take(ctx, s)
}

func (d *daemon) notTaken(path string, err error, atStart bool) {
	switch {
	case errors.Is(err, os.ErrNotExist):
	case errors.Is(err, event.ErrBadSpoolFile), errors.Is(err, event.ErrUnsigned), atStart && errors.Is(err, event.ErrMalformed):
		d.setAside(path, err)
	case errors.Is(err, event.ErrMalformed):
		d.log.Warn("spool: not an event yet, kept", "file", filepath.Base(path), "err", err)
	default:
		d.log.Error("spool: unreadable, kept for the next start", "file", filepath.Base(path), "err", err)
	}
}

func (d *daemon) setAside(path string, why error) {
	to, err := event.SetAside(path, why)
	if to == "" || err != nil {
		d.log.Error("spool: a file that is not an event could not be set aside", "file", filepath.Base(path), "why", why, "err", err)
		return
	}
	d.log.Warn("spool: not an event, set aside", "file", filepath.Base(path), "why", why, "to", to)
}

func (d *daemon) take(ctx context.Context, s event.Spooled) {
	if err := d.allowed(s); err != nil {
		d.setAside(s.Path, err)
		return
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	e := s.Event
	if _, err := d.js.Publish(ctx, event.Subject(d.tok.Prefix, e), e.Marshal(), jetstreamMsgID(e.ID)); err != nil {
		d.log.Error("spool: publish failed, file kept for the next start", "file", filepath.Base(s.Path), "err", err)
		return
	}
	if err := os.Remove(s.Path); err != nil && !errors.Is(err, os.ErrNotExist) {
		d.log.Warn("spool: remove", "file", s.Path, "err", err)
	}
	d.log.Info("spool: delivered", "kind", e.Kind, "plan", e.Plan, "event", e.ID)
}

func (d *daemon) allowed(s event.Spooled) error {
	name := filepath.Base(s.Path)
	if !slices.Contains(d.tok.Workers, s.By) {
		return fmt.Errorf("spool file %s: %w: signed by %q, which is not a worker of this host", name, event.ErrBadSignature, s.By)
	}
	pub := d.signer(s.By)
	if pub == "" {
		return fmt.Errorf("spool file %s: %w: no key of worker %s here", name, event.ErrBadSignature, s.By)
	}
	if err := s.CheckWorkerFile(pub); err != nil {
		return err
	}
	if s.Event.Kind == event.Died {
		// The host reports its panes' deaths (its workers' keys may not).
		return fmt.Errorf("spool file %s: %w: a pane's death is its host's to report", name, event.ErrNotSignersEvent)
	}
	return nil
}
