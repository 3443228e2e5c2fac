package orchctl

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/orch-dev/orch/bus"
	"github.com/orch-dev/orch/event"
	"github.com/orch-dev/orch/internal/orchdir"
	"github.com/orch-dev/orch/notify"
)

// This file is orch send (a line for a worker's agent, handed over at its
// prompt by the lead loop) and orch bus (what the workers said).

// Send asks the lead loop to type text, as one escaped line, into worker
// id's pane once its agent is at its prompt, and waits up to wait for
// its verdict: typed, queued (and why), or refused. With now it types at
// once, as orch send always did, into a pane that proves to be the
// worker's. A worker on another host is refused either way.
func Send(ctx context.Context, root, socket, id, text string, now bool, wait time.Duration) (DispatchResult, error) {
	res := DispatchResult{}
	if !event.ValidWorker(id) {
		return res, fmt.Errorf("send: %w: %q is not a worker id like w1", ErrNoFleet, id)
	}
	line := bus.Escape(text) // cut at event.MaxStatus and marked
	if strings.TrimSpace(line) == "" {
		return res, fmt.Errorf("send to %s: %w: the text is empty", id, ErrEmptyText)
	}
	if host := remoteOf(root, id); host != "" {
		return res, fmt.Errorf("send to %s: %w: %s runs on host %s, and orch send does not reach a host's panes yet; nothing typed", id, ErrNoFleet, id, host)
	}
	if now {
		if err := SendPane(ctx, root, socket, id, line); err != nil {
			return res, err
		}
		res.Answered, res.Note = true, "typed into "+id+"'s pane"
		return res, nil
	}
	return SendCommand(root, event.New(event.Send, "", line, id, ""), wait)
}

// BusOptions says which says orch bus shows.
type BusOptions struct {
	Topic  string // as event.SayTopic writes it; "" for all
	Follow bool
}

// Bus hands the says on the bus to show, oldest first; with Follow it
// waits for new ones until ctx ends. It needs orch serve running (the
// bus is in its broker); .orch/bus.md keeps a copy for when it is not.
func Bus(ctx context.Context, root string, o BusOptions, show func(bus.Message) error, bad func(seq uint64, err error)) error {
	od := orchdir.Of(root)
	if !Serving(root) {
		return fmt.Errorf("bus: %w; the last copy of the bus is %s", ErrNotServing, od+"/"+bus.File)
	}
	cfg, err := notify.LeadConfig(od)
	if err != nil {
		return fmt.Errorf("bus: %w", err)
	}
	nc, err := notify.Connect(cfg, "orch-bus")
	if err != nil {
		return fmt.Errorf("bus: %w", err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		return fmt.Errorf("bus: %w", err)
	}
	return bus.Reader{JS: js, Prefix: cfg.Prefix}.Each(ctx, 0, o.Topic, o.Follow, show, bad)
}
