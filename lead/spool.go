package lead

import (
	"errors"
	"os"
	"path/filepath"
	"time"

	"github.com/orch-dev/orch/event"
	"github.com/orch-dev/orch/internal/orchdir"
	"github.com/orch-dev/orch/notify"
)

// ingestSpool publishes every spooled event, oldest first, and sets aside
// every file that is not one: at the start nobody is still writing it.
func (l *Loop) ingestSpool() {
	dir := filepath.Join(l.orchDir, orchdir.Spool)
	good, bad, err := event.ReadSpool(dir)
	if err != nil {
		l.log.Error("spool", "err", err)
		return
	}
	for _, b := range bad {
		l.setAside(b.Path, b.Err)
	}
	for _, s := range good {
		l.publishSpooled(s)
	}
}

// ingestFile publishes one spool file that fsnotify reported.
func (l *Loop) ingestFile(path string) {
	if !event.IsSpoolFile(filepath.Base(path)) {
		return
	}
	s, err := event.ReadSpoolFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return // already ingested (the initial scan and the watcher both saw it)
	}
	if errors.Is(err, event.ErrBadSpoolFile) {
		l.setAside(path, err)
		return
	}
	if err != nil {
		// A file copied in by hand is seen as soon as it is created, before
		// its content is all there: it is read again at its next write, and
		// set aside at the next start if it is still not an event then.
		l.log.Warn("spool: not an event yet, kept", "file", filepath.Base(path), "err", err)
		return
	}
	l.publishSpooled(s)
}

// setAside moves a spool file that is not an event into the spool's
// rejected folder, with the reason beside it.
func (l *Loop) setAside(path string, why error) {
	to, err := event.SetAside(path, why)
	if err != nil {
		l.log.Error("spool: a file that is not an event could not be set aside", "file", filepath.Base(path), "why", why, "err", err)
		return
	}
	l.log.Warn("spool: not an event, set aside", "file", filepath.Base(path), "why", why, "to", to)
}

// publishSpooled moves a spooled event into the stream and deletes the file
// once the broker has stored it. If publishing fails the file stays, to be
// retried at the next start.
func (l *Loop) publishSpooled(s event.Spooled) {
	if _, _, err := notify.PublishOn(l.nc, l.prefix, s.Event, 5*time.Second); err != nil {
		l.log.Error("spool: publish failed, file kept", "file", filepath.Base(s.Path), "err", err)
		return
	}
	if err := os.Remove(s.Path); err != nil && !errors.Is(err, os.ErrNotExist) {
		l.log.Warn("spool: remove", "file", s.Path, "err", err)
	}
	l.log.Info("spool: delivered", "kind", s.Event.Kind, "plan", s.Event.Plan, "event", s.Event.ID)
}

// publishRecord puts a lead record (gates' verdict, a headless exit, a
// setup's end) into the stream. If the broker does not take it (it is
// stopping, or the stream is full), the record goes to the spool instead:
// published again by the spool watcher, or at the next start, never lost.
// Its id makes a copy that did get in before a no-op.
func (l *Loop) publishRecord(e event.Event) {
	_, _, err := notify.PublishOn(l.nc, l.prefix, e, 10*time.Second)
	if err == nil {
		return
	}
	path, serr := event.WriteSpool(filepath.Join(l.orchDir, orchdir.Spool), e)
	if serr != nil {
		l.log.Error("record neither published nor spooled; the next start repeats its work", "kind", e.Kind, "plan", e.Plan, "err", err, "spool_err", serr)
		return
	}
	l.log.Warn("record not published; spooled", "kind", e.Kind, "plan", e.Plan, "err", err, "file", filepath.Base(path))
}
