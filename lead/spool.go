package lead

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/orch-dev/orch/event"
	"github.com/orch-dev/orch/internal/orchdir"
	"github.com/orch-dev/orch/notify"
)

// ingestSpool publishes every spooled event, oldest first, and sets aside
// every file that is not one. atStart: nobody is writing into the spool,
// so a file that does not parse is set aside too; later it may be a copy
// still being written, and is kept.
func (l *Loop) ingestSpool(atStart bool) {
	dir := filepath.Join(l.orchDir, orchdir.Spool)
	good, bad, err := event.ReadSpool(dir)
	if err != nil {
		l.log.Error("spool", "err", err)
		return
	}
	for _, b := range bad {
		l.notTaken(b.Path, b.Err, atStart)
	}
	for _, s := range good {
		if !l.takeSpooled(s) {
			return // the broker does not answer: the rest waits for the retry
		}
	}
}

// ingestFile publishes one spool file that fsnotify reported.
func (l *Loop) ingestFile(path string) {
	if !event.IsSpoolFile(filepath.Base(path)) {
		return
	}
	s, err := event.ReadSpoolFile(path)
	if err != nil {
		l.notTaken(path, err, false)
		return
	}
	l.takeSpooled(s)
}

// notTaken decides about a spool file that could not be read as an event:
// one no writer of the spool makes (not a regular file, too big, unsigned)
// is set aside at once; one that does not parse is set aside at the start
// and kept while serving (a file copied in by hand is seen as soon as it is
// created, before its content is all there: it is read again at its next
// write); anything else (too many open files, an I/O error) may pass, and
// the file is kept for the next start.
func (l *Loop) notTaken(path string, err error, atStart bool) {
	switch {
	case errors.Is(err, os.ErrNotExist):
		// already taken (the initial scan and the watcher both saw it)
	case errors.Is(err, event.ErrBadSpoolFile), errors.Is(err, event.ErrUnsigned),
		atStart && errors.Is(err, event.ErrMalformed):
		l.setAside(path, err)
	case errors.Is(err, event.ErrMalformed):
		l.log.Warn("spool: not an event yet, kept", "file", filepath.Base(path), "err", err)
	default:
		l.log.Error("spool: unreadable, kept for the next start", "file", filepath.Base(path), "err", err)
	}
}

// takeSpooled publishes a spooled event once its file is shown to be what
// the bus would take from its signer: signed with the key of the lead or
// of a worker this broker knows; from a worker, only a worker's kind of
// event, naming that worker. Anything else is set aside with the reason.
func (l *Loop) takeSpooled(s event.Spooled) bool {
	if err := l.spoolAllowed(s); err != nil {
		l.setAside(s.Path, err)
		return true
	}
	return l.publishSpooled(s)
}

func (l *Loop) spoolAllowed(s event.Spooled) error {
	name := filepath.Base(s.Path)
	pub := l.b.SignerKey(s.By)
	if pub == "" {
		return fmt.Errorf("spool file %s: %w: signed by %q, which is neither the lead nor a worker of this repo", name, event.ErrBadSignature, s.By)
	}
	if s.By == event.LeadSigner {
		return s.Verify(pub)
	}
	return s.CheckWorkerFile(pub)
}

// setAside moves a spool file that is not an event into the spool's
// rejected folder, with the reason beside it.
func (l *Loop) setAside(path string, why error) {
	to, err := event.SetAside(path, why)
	switch {
	case to == "":
		l.log.Error("spool: a file that is not an event could not be set aside", "file", filepath.Base(path), "why", why, "err", err)
	case err != nil:
		l.log.Error("spool: set aside, but its reason could not be written beside it", "file", filepath.Base(path), "why", why, "to", to, "err", err)
	default:
		l.log.Warn("spool: not an event, set aside", "file", filepath.Base(path), "why", why, "to", to)
	}
}

// publishSpooled moves a spooled event into the stream and deletes the file
// once the broker has stored it. If publishing fails the file stays, and
// the spool is read again in a while (an external cluster may be electing
// a leader), and at the next start.
func (l *Loop) publishSpooled(s event.Spooled) bool {
	if err := l.storeEvent(s.Event, 5*time.Second); err != nil {
		l.log.Error("spool: publish failed, file kept", "file", filepath.Base(s.Path), "err", err)
		l.retrySpool(err)
		return !errors.Is(err, notify.ErrNoBroker)
	}
	l.spoolGap = 0
	if err := os.Remove(s.Path); err != nil && !errors.Is(err, os.ErrNotExist) {
		l.log.Warn("spool: remove", "file", s.Path, "err", err)
	}
	l.log.Info("spool: delivered", "kind", s.Event.Kind, "plan", s.Event.Plan, "event", s.Event.ID)
	return true
}

// publishRecord puts a lead record (gates' verdict, a headless exit, a
// setup's end) into the stream. If the broker does not take it (it is
// stopping, or the stream is full), the record goes to the spool instead:
// published again by the spool watcher, or at the next start, never lost.
// Its id makes a copy that did get in before a no-op.
func (l *Loop) publishRecord(e event.Event) {
	err := l.storeEvent(e, 10*time.Second)
	if err == nil {
		return
	}
	path, serr := event.WriteSpool(filepath.Join(l.orchDir, orchdir.Spool), e, l.b.SpoolSigner())
	if serr != nil {
		l.log.Error("record neither published nor spooled; the next start repeats its work", "kind", e.Kind, "plan", e.Plan, "err", err, "spool_err", serr)
		return
	}
	l.log.Warn("record not published; spooled", "kind", e.Kind, "plan", e.Plan, "err", err, "file", filepath.Base(path))
}
