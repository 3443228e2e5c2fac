package lead

import (
	"context"

	"github.com/orch-dev/orch/broker"
	"github.com/orch-dev/orch/inbox"
)

// DefaultTrimEvery is how many events (a batch counts once) the loop handles between two trims
// of the stream: a trim is a few requests to the in-process server, and a
// stream holds at most this many handled events beside the unhandled ones.
const DefaultTrimEvery = 64

// handledOne counts an event handled, and trims the stream once enough
// have been and nothing else is waiting: trimming never delays an event.
func (l *Loop) handledOne(ctx context.Context) {
	l.sinceTrim++
	if l.sinceTrim >= l.cfg.TrimEvery && len(l.msgs) == 0 {
		l.trim(ctx)
	}
}

// trim removes what the lead loop, orch wait and the lead agents' inboxes
// have acknowledged from the stream (broker.Trim), and raises the alarm when what is left fills
// it: a full stream refuses every new event.
func (l *Loop) trim(ctx context.Context) {
	l.sinceTrim = 0
	u, err := broker.Trim(ctx, l.js, l.prefix, inbox.Consumers(l.orchDir))
	if err != nil {
		l.log.Warn("stream trim", "err", err)
		return
	}
	if u.Trimmed > 0 {
		l.log.Info("stream trimmed", "removed", u.Trimmed, "left", u.Msgs, "unhandled", u.Unhandled, "untaken", u.Untaken)
	}
	if u.Alarm() {
		l.log.Error("event stream nearly full: when it is full, new events are refused (workers spool them)", "usage", u.String(), "fix", u.Fix())
	}
}
