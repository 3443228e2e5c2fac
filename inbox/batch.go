package inbox

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/orch-dev/orch/broker"
)

// Merge adds o's callbacks that bt does not hold yet (by stream sequence:
// one redelivered while bt held it comes once), in stream order.
func (bt *Batch) Merge(o *Batch) {
	for i, it := range o.Items {
		if slices.ContainsFunc(bt.Items, func(h Item) bool { return h.Seq == it.Seq }) {
			continue
		}
		bt.Items = append(bt.Items, it)
		bt.msgs = append(bt.msgs, o.msgs[i])
	}
}

// Split cuts the batch after its first n callbacks: bt keeps those, the
// rest is returned (nil when none are left).
func (bt *Batch) Split(n int) *Batch {
	if n >= len(bt.Items) {
		return nil
	}
	rest := &Batch{Items: slices.Clone(bt.Items[n:]), msgs: slices.Clone(bt.msgs[n:])}
	bt.Items, bt.msgs = bt.Items[:n], bt.msgs[:n]
	return rest
}

// Position says where the consumer stands, for logs: the stream sequence
// of its acknowledgement floor, how many it has handed out and not had
// acknowledged, and how many wait.
func (b *Box) Position(ctx context.Context) (floor uint64, ackPending int, pending uint64, err error) {
	info, err := b.cons.Info(ctx)
	if err != nil {
		return 0, 0, 0, err
	}
	return info.AckFloor.Stream, info.NumAckPending, info.NumPending, nil
}

// RewindTo makes the consumer again from the first callback stored at or
// after t: for a taker that keeps the ids it took (and drops those again,
// Drop), this survives a broker that lost the stream's last messages
// while the consumer's position above them was kept (SIGKILL), when the
// stream numbers the copies published again below that position.
func (b *Box) RewindTo(ctx context.Context, t time.Time) error {
	if err := b.js.DeleteConsumer(ctx, broker.StreamName, b.rec.Consumer); err != nil {
		return fmt.Errorf("inbox rewind: %w", err)
	}
	cfg := b.config(0)
	t = t.UTC()
	cfg.OptStartTime = &t
	c, err := b.js.CreateConsumer(ctx, broker.StreamName, cfg)
	if err != nil {
		return fmt.Errorf("inbox rewind: %w", err)
	}
	b.cons = c
	return nil
}

// Drop acknowledges and removes the callbacks for which gone is true (a
// taker's copies of what it took already).
func (bt *Batch) Drop(ctx context.Context, gone func(Item) bool) int {
	n := 0
	for i := 0; i < len(bt.Items); {
		if !gone(bt.Items[i]) {
			i++
			continue
		}
		bt.msgs[i].Ack()
		bt.Items = slices.Delete(bt.Items, i, i+1)
		bt.msgs = slices.Delete(bt.msgs, i, i+1)
		n++
	}
	return n
}
