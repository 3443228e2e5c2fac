// Package inbox is a lead agent's own queue of callbacks: a durable
// consumer of the lead loop's callbacks (<prefix>.cb.>) with a position of
// its own, beside orch wait's, so an agent lead and a script running orch
// wait each see every callback once.
//
// How the pieces fit. orch lead install writes a Record (record.go): the
// consumer's name and the time the inbox starts. Open connects with the
// lead's credential and makes sure the consumer exists as the record says
// (a new install starts a new position). Take hands out what is waiting,
// blocking or not; the caller writes the batch out and only then calls
// Ack, so a taker that dies before it has written (a hook killed, a
// closed pipe) leaves the batch for the next one. Rewind gives back at
// once what a dead taker held. Peek reads what is waiting without taking
// it, for orch inbox. Taken (taken.go) keeps the callbacks handed over and
// not yet acknowledged by the lead (orch ack).
//
// One taker at a time is the caller's rule (orch's hooks take a file lock
// before they Open); Rewind depends on it.
package inbox

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/orch-dev/orch/broker"
	"github.com/orch-dev/orch/event"
)

// AckWait is how long a taken batch may stay unacknowledged before the
// server hands it out again: far above a hook's write, short enough that
// a taker killed without a successor costs little.
const AckWait = 30 * time.Second

// maxBatch bounds one batch; more waiting come in the next.
const maxBatch = 256

// Box is an open inbox.
type Box struct {
	js     jetstream.JetStream
	rec    Record
	prefix string
	cons   jetstream.Consumer
}

// Item is one callback taken or waiting, with its stream sequence.
type Item struct {
	Seq      uint64         `json:"seq"`
	Time     time.Time      `json:"time"`
	Callback event.Callback `json:"callback"`
}

// Open makes sure rec's consumer exists on the connection's stream and
// returns the inbox. prefix is the broker's subject prefix.
func Open(ctx context.Context, nc *nats.Conn, prefix string, rec Record) (*Box, error) {
	js, err := jetstream.New(nc)
	if err != nil {
		return nil, fmt.Errorf("inbox %s: %w", rec.Consumer, err)
	}
	b := &Box{js: js, rec: rec, prefix: prefix}
	c, err := js.Consumer(ctx, broker.StreamName, rec.Consumer)
	switch {
	case errors.Is(err, jetstream.ErrConsumerNotFound):
		c, err = js.CreateConsumer(ctx, broker.StreamName, b.config(0))
	case err == nil && c.CachedInfo().Config.Metadata[metaInstall] != rec.ID:
		// Installed again: the new install starts where its record says.
		if err = js.DeleteConsumer(ctx, broker.StreamName, rec.Consumer); err == nil {
			c, err = js.CreateConsumer(ctx, broker.StreamName, b.config(0))
		}
	}
	if err != nil {
		return nil, fmt.Errorf("inbox %s: %w", rec.Consumer, err)
	}
	b.cons = c
	return b, nil
}

const metaInstall = "orch-install"

// config is the consumer: every callback since the install (from startSeq
// when given), acknowledged one by one, never given up on.
func (b *Box) config(startSeq uint64) jetstream.ConsumerConfig {
	cfg := jetstream.ConsumerConfig{
		Durable:       b.rec.Consumer,
		Description:   "callbacks for the lead agent " + b.rec.Agent,
		FilterSubject: b.prefix + ".cb.>",
		DeliverPolicy: jetstream.DeliverByStartTimePolicy,
		OptStartTime:  &b.rec.Since,
		AckPolicy:     jetstream.AckExplicitPolicy,
		AckWait:       AckWait,
		MaxDeliver:    -1,
		MaxAckPending: 4 * maxBatch,
		Metadata:      map[string]string{metaInstall: b.rec.ID},
	}
	if startSeq > 0 {
		cfg.DeliverPolicy, cfg.OptStartTime, cfg.OptStartSeq = jetstream.DeliverByStartSequencePolicy, nil, startSeq
	}
	return cfg
}

// Rewind hands out again, at once, what a taker that died held: the
// consumer is made again just above its acknowledgement floor. Only for a
// caller that is the one taker (it holds the takers' lock).
func (b *Box) Rewind(ctx context.Context) (int, error) {
	info, err := b.cons.Info(ctx)
	if err != nil {
		return 0, fmt.Errorf("inbox rewind: %w", err)
	}
	if info.NumAckPending == 0 {
		return 0, nil
	}
	if err := b.js.DeleteConsumer(ctx, broker.StreamName, b.rec.Consumer); err != nil {
		return 0, fmt.Errorf("inbox rewind: %w", err)
	}
	c, err := b.js.CreateConsumer(ctx, broker.StreamName, b.config(info.AckFloor.Stream+1))
	if err != nil {
		return 0, fmt.Errorf("inbox rewind: %w", err)
	}
	b.cons = c
	return info.NumAckPending, nil
}

// Batch is callbacks taken together.
type Batch struct {
	Items []Item
	msgs  []jetstream.Msg
}

// Lines are the batch's callback lines, one each.
func (bt *Batch) Lines() []string {
	out := make([]string, len(bt.Items))
	for i, it := range bt.Items {
		out[i] = it.Callback.Line
	}
	return out
}

// Ack marks the batch handed over, in stream order, each confirmed by the
// server.
func (bt *Batch) Ack(ctx context.Context) error {
	for _, m := range bt.msgs {
		actx, cancel := context.WithTimeout(ctx, 5*time.Second)
		err := m.DoubleAck(actx)
		cancel()
		if err != nil {
			return fmt.Errorf("inbox ack: %w", err)
		}
	}
	return nil
}

// Nak gives the batch back at once, for the next taker.
func (bt *Batch) Nak() {
	for _, m := range bt.msgs {
		m.Nak()
	}
}

// Take returns what is waiting. With wait it blocks until something is
// (or ctx ends), then goes on gathering for settle, so callbacks that
// arrive together are taken together; without, it returns ErrEmpty when
// nothing is waiting.
func (b *Box) Take(ctx context.Context, wait bool, settle time.Duration) (*Batch, error) {
	bt := &Batch{}
	if wait {
		// One long pull, renewed when it runs out: the server answers it
		// the moment a callback is stored, so this is not polling.
		for len(bt.msgs) == 0 {
			fctx, cancel := context.WithTimeout(ctx, 10*time.Minute)
			mb, err := b.cons.Fetch(1, jetstream.FetchContext(fctx))
			if err != nil {
				cancel()
				return nil, fmt.Errorf("inbox take: %w", err)
			}
			for m := range mb.Messages() {
				b.add(bt, m)
			}
			cancel()
			if err := mb.Error(); err != nil && ctx.Err() == nil && !errors.Is(err, nats.ErrTimeout) && !errors.Is(err, context.DeadlineExceeded) {
				bt.Nak()
				return nil, fmt.Errorf("inbox take: %w", err)
			}
			if ctx.Err() != nil {
				bt.Nak()
				return nil, ctx.Err()
			}
		}
		if settle > 0 {
			// One more pull bounded by settle (a single deadline) for the
			// rest of a burst.
			mb, err := b.cons.Fetch(maxBatch-1, jetstream.FetchMaxWait(settle))
			if err == nil {
				for m := range mb.Messages() {
					b.add(bt, m)
				}
			}
		}
	}
	for len(bt.msgs) < maxBatch {
		mb, err := b.cons.FetchNoWait(maxBatch - len(bt.msgs))
		if err != nil {
			bt.Nak()
			return nil, fmt.Errorf("inbox take: %w", err)
		}
		n := 0
		for m := range mb.Messages() {
			b.add(bt, m)
			n++
		}
		if n == 0 {
			break
		}
	}
	if len(bt.msgs) == 0 {
		return nil, ErrEmpty
	}
	return bt, nil
}

// add puts m into the batch, or drops it for good when it cannot be a
// callback of this lead loop's (one sourced from a host's stream is a
// forgery; one that does not parse never will).
func (b *Box) add(bt *Batch, m jetstream.Msg) {
	if host, ok := broker.HostOf(m.Headers()); host != "" || !ok {
		m.Term()
		return
	}
	cb, err := event.ParseCallback(m.Data())
	if err != nil {
		m.Term()
		return
	}
	it := Item{Callback: cb}
	if md, err := m.Metadata(); err == nil {
		it.Seq, it.Time = md.Sequence.Stream, md.Timestamp
	}
	bt.Items = append(bt.Items, it)
	bt.msgs = append(bt.msgs, m)
}

// Peek lists what is waiting, oldest first, without taking it: up to max
// callbacks from just above the acknowledgement floor.
func (b *Box) Peek(ctx context.Context, max int) ([]Item, error) {
	info, err := b.cons.Info(ctx)
	if err != nil {
		return nil, fmt.Errorf("inbox peek: %w", err)
	}
	// An ephemeral consumer of its own that acknowledges nothing: reading
	// through it moves no one's position.
	oc, err := b.js.CreateConsumer(ctx, broker.StreamName, jetstream.ConsumerConfig{
		FilterSubject:     b.prefix + ".cb.>",
		DeliverPolicy:     jetstream.DeliverByStartSequencePolicy,
		OptStartSeq:       info.AckFloor.Stream + 1,
		AckPolicy:         jetstream.AckNonePolicy,
		InactiveThreshold: time.Minute,
	})
	if err != nil {
		return nil, fmt.Errorf("inbox peek: %w", err)
	}
	defer b.js.DeleteConsumer(context.WithoutCancel(ctx), broker.StreamName, oc.CachedInfo().Name)
	var out []Item
	for len(out) < max {
		mb, err := oc.FetchNoWait(max - len(out))
		if err != nil {
			return out, fmt.Errorf("inbox peek: %w", err)
		}
		got := 0
		for m := range mb.Messages() {
			got++
			if host, ok := broker.HostOf(m.Headers()); host != "" || !ok {
				continue
			}
			cb, err := event.ParseCallback(m.Data())
			if err != nil {
				continue
			}
			it := Item{Callback: cb}
			if md, err := m.Metadata(); err == nil {
				it.Seq, it.Time = md.Sequence.Stream, md.Timestamp
			}
			out = append(out, it)
		}
		if got == 0 {
			break
		}
	}
	return out, nil
}
