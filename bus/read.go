package bus

import (
	"context"
	"errors"
	"fmt"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/orch-dev/orch/broker"
	"github.com/orch-dev/orch/event"
)

// Reader reads the bus of one broker.
type Reader struct {
	JS     jetstream.JetStream
	Prefix string
}

// Each hands every say from sequence from on (0: the first kept) to show,
// in order; topic "" means every topic, else a topic as event.SayTopic
// writes it ("fleet", "plan.<P>", "topic.<T>"). Without follow it returns
// once it has shown what the bus held when it began; with follow it waits
// for new says until ctx ends or show fails. A message on the bus that is
// not a say (bad returns it) is skipped and reported, never shown raw.
//
// It reads through an ordered consumer: the server pushes each say as it
// is stored (the library keeps one pull request open for it, with
// heartbeats); nothing here asks again on a timer.
func (r Reader) Each(ctx context.Context, from uint64, topic string, follow bool, show func(Message) error, bad func(seq uint64, err error)) error {
	cfg := jetstream.OrderedConsumerConfig{FilterSubjects: []string{event.BusFilter(r.Prefix, topic)}, DeliverPolicy: jetstream.DeliverAllPolicy}
	if from > 1 {
		cfg.DeliverPolicy, cfg.OptStartSeq = jetstream.DeliverByStartSequencePolicy, from
	}
	c, err := r.JS.OrderedConsumer(ctx, broker.BusStream, cfg)
	if err != nil {
		return fmt.Errorf("bus: %w", err)
	}
	info, err := c.Info(ctx)
	if err != nil {
		return fmt.Errorf("bus: %w", err)
	}
	if !follow && info.NumPending == 0 {
		return nil
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	done := make(chan error, 1)
	finish := func(err error) {
		select {
		case done <- err:
		default:
		}
		cancel()
	}
	cc, err := c.Consume(func(m jetstream.Msg) {
		md, err := m.Metadata()
		if err != nil {
			finish(fmt.Errorf("bus: %w", err))
			return
		}
		msg, perr := Parse(r.Prefix, m.Subject(), m.Data(), md.Sequence.Stream)
		if perr != nil {
			if bad != nil {
				bad(md.Sequence.Stream, perr)
			}
		} else if err := show(msg); err != nil {
			finish(err)
			return
		}
		if !follow && md.NumPending == 0 {
			finish(nil)
		}
	}, jetstream.ConsumeErrHandler(func(_ jetstream.ConsumeContext, err error) {
		if errors.Is(err, jetstream.ErrConsumerDeleted) || errors.Is(err, jetstream.ErrConnectionClosed) {
			finish(fmt.Errorf("bus: %w", err))
		}
	}))
	if err != nil {
		return fmt.Errorf("bus: %w", err)
	}
	defer cc.Stop()
	<-ctx.Done()
	select {
	case err := <-done:
		return err
	default:
	}
	return nil
}
