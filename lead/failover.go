package lead

// When the stream lives on an external cluster (orch serve --nats), a
// request to it may fail for a few seconds while the cluster elects a new
// leader for the stream after one of its servers died. Nothing may be lost
// or doubled then: every message the lead loop stores carries a message id
// (an event's id, or "cb-" and the event's for a callback), so a try that
// did get in before its acknowledgement was lost makes the next try a copy
// the stream drops; an ack is idempotent. A message still not stored after
// the tries goes where it would go with the embedded broker (the spool, a
// redelivery), and the spool is read again after a pause.

import (
	"context"
	"errors"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/orch-dev/orch/event"
	"github.com/orch-dev/orch/notify"
)

// storeWindow is how long the lead loop goes on offering a message to
// the stream, or an ack to its consumer, before it gives up on this turn:
// longer than a cluster takes to elect a new leader for the stream after
// one of three servers died (about 6 s measured in cluster_test.go). A
// failed callback is otherwise redelivered only after broker.AckWait, as
// its nak is lost too.
const storeWindow = 15 * time.Second

// storeRetryGap is the pause before another try of a request the broker
// did not answer at once (no responders: no stream leader yet).
const storeRetryGap = time.Second

// spoolRetry is when the spool is read again after an event in it could
// not be published.
const spoolRetry = 2 * time.Second

// store publishes msg (with its message id) into the stream and waits for
// the stream's acknowledgement, trying again while the broker does not
// answer, for storeWindow. A refusal (the stream full, a bad message) is
// not tried again.
func (l *Loop) store(msg *nats.Msg, timeout time.Duration) error {
	first := time.Now()
	for try := 1; ; try++ {
		start := time.Now()
		_, _, err := notify.PublishMsg(l.nc, msg, timeout)
		// The embedded broker lives in this process: no failover to wait
		// out, one try.
		if err == nil || l.cfg.Upstream == nil || !errors.Is(err, notify.ErrNoBroker) || l.nc.IsClosed() || time.Since(first) >= storeWindow {
			return err
		}
		l.log.Warn("the stream did not take a message; trying again under the same id", "subject", msg.Subject, "try", try, "err", err)
		if time.Since(start) < storeRetryGap {
			// Not polling: this retries a request that failed at once (no
			// stream leader to answer); the cluster needs a moment to
			// elect one, so the next try waits for it.
			time.Sleep(storeRetryGap) // a bounded retry (storeWindow), --nats only
		}
	}
}

// storeEvent is store for an event the lead loop makes or takes from the
// spool: the event id is the message id.
func (l *Loop) storeEvent(e event.Event, timeout time.Duration) error {
	return l.store(notify.EventMsg(l.prefix, e), timeout)
}

// ack acknowledges m and waits for the consumer to confirm, trying again
// when the confirmation does not come: the ack of a message the consumer
// took already is a no-op, while one lost means a redelivery only after
// broker.AckWait (a no-op too, but late).
func (l *Loop) ack(ctx context.Context, m jetstream.Msg) error {
	first := time.Now()
	for {
		start := time.Now()
		// Each try has a deadline of its own (nats.go adds none to a
		// context that has one, like the harvest's two minutes).
		actx, cancel := context.WithTimeout(ctx, ackTryTimeout)
		err := m.DoubleAck(actx)
		cancel()
		if err == nil || errors.Is(err, jetstream.ErrMsgAlreadyAckd) {
			return nil
		}
		if l.cfg.Upstream == nil || errors.Is(err, jetstream.ErrMsgNotBound) || errors.Is(err, jetstream.ErrMsgNoReply) ||
			ctx.Err() != nil || l.nc.IsClosed() || time.Since(first) >= storeWindow {
			return err
		}
		if time.Since(start) < storeRetryGap {
			// Not polling: this retries an ack that failed at once (no
			// consumer leader to answer yet).
			time.Sleep(storeRetryGap) // a bounded retry (storeWindow), --nats only
		}
	}
}

// ackTryTimeout bounds one try of an ack.
const ackTryTimeout = 5 * time.Second

// maxSpoolRetry caps the back-off of retrySpool.
const maxSpoolRetry = 30 * time.Second

// retrySpool has the spool read again in a while, once, after an event in
// it was not published because an external cluster did not answer (no
// file event may come to try again). Not polling: one timer per failure,
// its gap doubling to maxSpoolRetry while the cluster stays away, back to
// spoolRetry after a publish succeeds. A refusal (the stream full) or the
// embedded broker arms nothing: the next file event or start tries again.
func (l *Loop) retrySpool(err error) {
	if l.cfg.Upstream == nil || !errors.Is(err, notify.ErrNoBroker) || l.spoolArmed {
		return
	}
	l.spoolArmed = true
	l.spoolGap = min(max(2*l.spoolGap, spoolRetry), maxSpoolRetry)
	time.AfterFunc(l.spoolGap, func() { send(l, l.spoolDue, struct{}{}) })
}
