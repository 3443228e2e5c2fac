package broker

import (
	"context"
	"fmt"
	"strings"

	"github.com/nats-io/nats.go/jetstream"
)

// AlarmPercent is the share of the stream's byte limit at which the lead
// loop and orch doctor raise the alarm: the stream refuses new events when
// it is full, so the alarm comes while there is still room.
const AlarmPercent = 75

// Usage is how full the stream is, and with what.
type Usage struct {
	Msgs, Bytes, MaxBytes uint64
	// Unhandled counts events and commands the lead loop has not
	// acknowledged; Untaken counts callbacks orch wait has not taken.
	Unhandled, Untaken uint64
	// Trimmed is how many messages the Trim that read this removed.
	Trimmed uint64
}

// Percent is the share of the byte limit in use.
func (u Usage) Percent() int {
	if u.MaxBytes == 0 {
		return 0
	}
	return int(u.Bytes * 100 / u.MaxBytes)
}

// Alarm says the stream is full enough to warn about.
func (u Usage) Alarm() bool { return u.Percent() >= AlarmPercent }

// String reads as a sentence fragment: what the stream holds.
func (u Usage) String() string {
	return fmt.Sprintf("%d messages, %s of %s (%d%%): %d events not handled by the lead loop, %d callbacks not taken by orch wait",
		u.Msgs, size(u.Bytes), size(u.MaxBytes), u.Percent(), u.Unhandled, u.Untaken)
}

// size writes a byte count for people: 0 B, 12.3 KiB, 512.0 MiB.
func size(n uint64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	v, i := float64(n)/unit, 0
	for ; v >= unit && i < 3; i++ {
		v /= unit
	}
	return fmt.Sprintf("%.1f %ciB", v, "KMGT"[i])
}

// Fix names what brings a full stream down, from what fills it.
func (u Usage) Fix() string {
	if u.Untaken >= u.Unhandled {
		return "take the waiting callbacks: run orch wait until it times out (each run takes one), or orch status to see them"
	}
	return "the lead loop is behind: see orch status and the serve log for the events it keeps retrying"
}

// ReadUsage reads the stream's state and both consumers' backlogs.
func ReadUsage(ctx context.Context, js jetstream.JetStream) (Usage, error) {
	s, err := js.Stream(ctx, StreamName)
	if err != nil {
		return Usage{}, fmt.Errorf("stream usage: %w", err)
	}
	u, _, _, err := usage(ctx, s)
	return u, err
}

// usage returns the stream's usage and the two consumers' acknowledgement
// floors (stream sequences at and below which every message of theirs is
// acknowledged).
func usage(ctx context.Context, s jetstream.Stream) (u Usage, leadFloor, waitFloor uint64, err error) {
	si, err := s.Info(ctx)
	if err != nil {
		return Usage{}, 0, 0, fmt.Errorf("stream usage: %w", err)
	}
	u = Usage{Msgs: si.State.Msgs, Bytes: si.State.Bytes}
	if si.Config.MaxBytes > 0 {
		u.MaxBytes = uint64(si.Config.MaxBytes)
	}
	lead, err := consumerInfo(ctx, s, LeadConsumer)
	if err != nil {
		return Usage{}, 0, 0, err
	}
	wait, err := consumerInfo(ctx, s, WaitConsumer)
	if err != nil {
		return Usage{}, 0, 0, err
	}
	u.Unhandled = lead.NumPending + uint64(lead.NumAckPending)
	u.Untaken = wait.NumPending + uint64(wait.NumAckPending)
	return u, lead.AckFloor.Stream, wait.AckFloor.Stream, nil
}

func consumerInfo(ctx context.Context, s jetstream.Stream, name string) (*jetstream.ConsumerInfo, error) {
	c, err := s.PushConsumer(ctx, name)
	if err != nil {
		return nil, fmt.Errorf("stream usage: consumer %s: %w", name, err)
	}
	info, err := c.Info(ctx)
	if err != nil {
		return nil, fmt.Errorf("stream usage: consumer %s: %w", name, err)
	}
	return info, nil
}

// Trim removes from the stream what its one reader is done with: events
// and commands at or below the lead consumer's acknowledgement floor,
// callbacks at or below orch wait's. Each subject is purged only up to its
// own reader's floor, so nothing unacknowledged goes, and callbacks nobody
// waited for do not hold back the trimming of handled events. The
// duplicate window is the broker's memory of message ids, kept apart from
// the messages; copies after it are caught by the lead's record of
// handled ids.
//
// Callbacks are the lead agents' inboxes' too (package inbox: a consumer
// lead-<agent> each): they go only below every inbox's floor. inboxes
// names the consumers of the inboxes installed; one of them missing (an
// inbox's rewind deletes its consumer and makes it again) or any inbox
// that cannot be read keeps every callback this time.
func Trim(ctx context.Context, js jetstream.JetStream, prefix string, inboxes []string) (Usage, error) {
	s, err := js.Stream(ctx, StreamName)
	if err != nil {
		return Usage{}, fmt.Errorf("trim: %w", err)
	}
	before, leadFloor, waitFloor, err := usage(ctx, s)
	if err != nil {
		return Usage{}, err
	}
	if floor, ok := inboxFloor(ctx, s, prefix, inboxes); !ok {
		waitFloor = 0
	} else {
		waitFloor = min(waitFloor, floor)
	}
	first := s.CachedInfo().State.FirstSeq
	for _, p := range []struct {
		subject string
		floor   uint64
	}{{prefix + ".ev.>", leadFloor}, {prefix + ".cmd.>", leadFloor}, {prefix + ".cb.>", waitFloor}} {
		if p.floor == 0 || p.floor < first {
			continue // nothing of it is below the floor any more
		}
		if err := s.Purge(ctx, jetstream.WithPurgeSubject(p.subject), jetstream.WithPurgeSequence(p.floor+1)); err != nil {
			return Usage{}, fmt.Errorf("trim %s: %w", p.subject, err)
		}
	}
	after, _, _, err := usage(ctx, s)
	if err != nil {
		return Usage{}, err
	}
	if before.Msgs > after.Msgs {
		after.Trimmed = before.Msgs - after.Msgs
	}
	return after, nil
}

// inboxFloor is the lowest acknowledgement floor of the lead agents'
// inboxes (consumers lead-* of the callbacks); ok is false when one of
// inboxes is missing or any cannot be read: then none may be trimmed.
func inboxFloor(ctx context.Context, s jetstream.Stream, prefix string, inboxes []string) (floor uint64, ok bool) {
	floor = ^uint64(0)
	seen := map[string]bool{}
	names := s.ConsumerNames(ctx)
	for name := range names.Name() {
		if !strings.HasPrefix(name, "lead-") {
			continue
		}
		c, err := s.Consumer(ctx, name)
		if err != nil {
			return 0, false
		}
		info, err := c.Info(ctx)
		if err != nil {
			return 0, false
		}
		if info.Config.FilterSubject == prefix+".cb.>" {
			seen[name] = true
			floor = min(floor, info.AckFloor.Stream)
		}
	}
	if names.Err() != nil {
		return 0, false
	}
	for _, name := range inboxes {
		if !seen[name] {
			return 0, false
		}
	}
	return floor, true
}
