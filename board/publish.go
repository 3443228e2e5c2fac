package board

import (
	"context"
	"sync"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/orch-dev/orch/event"
)

// Subject is where frames are published under prefix (core NATS, not the
// stream: a frame is a picture, the next one replaces it, and a board
// that missed one asks for the latest on NowSubject).
func Subject(prefix string) string { return prefix + ".board" }

// NowSubject answers a request with the latest frame.
func NowSubject(prefix string) string { return prefix + ".board.now" }

// MinGap is the least time between two frames sent: frames offered
// meanwhile are folded into the next one. A board is a picture for a
// person; a burst of events must cost the lead one frame, not hundreds.
const MinGap = 100 * time.Millisecond

// Publisher sends the lead loop's frames to boards: on the broker for
// orch watch, and to in-process followers (the web board). Offer never
// blocks the loop: the latest frame is kept, and a sender goroutine sends
// it; a follower too slow to take a frame gets the next one instead.
type Publisher struct {
	nc      *nats.Conn
	subject string
	serve   string

	mu     sync.Mutex
	seq    uint64
	latest []byte
	said   []Said
	subs   map[chan []byte]struct{}

	kick chan struct{}
	sub  *nats.Subscription
}

// NewPublisher starts a publisher on nc (nil: in-process followers only)
// for one orch serve, with the callbacks already sent (SaidOf).
func NewPublisher(nc *nats.Conn, prefix string, said []Said) (*Publisher, error) {
	p := &Publisher{nc: nc, subject: Subject(prefix), serve: event.NewID()[:12], said: said,
		subs: map[chan []byte]struct{}{}, kick: make(chan struct{}, 1)}
	if nc != nil {
		sub, err := nc.Subscribe(NowSubject(prefix), func(m *nats.Msg) {
			if b := p.Latest(); b != nil && m.Reply != "" {
				m.Respond(b)
			}
		})
		if err != nil {
			return nil, err
		}
		p.sub = sub
	}
	return p, nil
}

// Said records a callback given to the lead, for the next frame.
func (p *Publisher) Said(cb event.Callback, at time.Time) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.said = append([]Said{{Time: at.UTC(), Callback: cb}}, p.said...)
	if len(p.said) > MaxCallbacks {
		p.said = p.said[:MaxCallbacks]
	}
}

// Callbacks is the latest callbacks, newest first, for FrameOf.
func (p *Publisher) Callbacks() []Said {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.said
}

// Offer takes a frame to send. It encodes it (the caller owns nothing
// of it after) and returns at once.
func (p *Publisher) Offer(f Frame) {
	p.mu.Lock()
	p.seq++
	f.Serve, f.Seq = p.serve, p.seq
	p.latest = f.Marshal()
	p.mu.Unlock()
	select {
	case p.kick <- struct{}{}:
	default: // a send is due already and will take this frame
	}
}

// Latest is the last frame offered, nil before the first.
func (p *Publisher) Latest() []byte {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.latest
}

// Follow returns a channel that gets every frame sent from now on (a
// follower that is behind gets the newest, never a backlog), the latest
// frame first if there is one, and a function to stop.
func (p *Publisher) Follow() (<-chan []byte, func()) {
	ch := make(chan []byte, 1)
	p.mu.Lock()
	p.subs[ch] = struct{}{}
	if p.latest != nil {
		ch <- p.latest
	}
	p.mu.Unlock()
	return ch, func() {
		p.mu.Lock()
		delete(p.subs, ch)
		p.mu.Unlock()
	}
}

// Run sends frames until ctx ends. After each send it waits MinGap before
// the next (a one-shot timer per send, armed only when a frame was sent:
// a rate limit, not a poll).
func (p *Publisher) Run(ctx context.Context) {
	defer func() {
		if p.sub != nil {
			p.sub.Unsubscribe()
		}
	}()
	for {
		select {
		case <-ctx.Done():
			return
		case <-p.kick:
		}
		p.send()
		t := time.NewTimer(MinGap)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
	}
}

func (p *Publisher) send() {
	p.mu.Lock()
	b := p.latest
	for ch := range p.subs {
		select {
		case <-ch: // drop the frame it has not taken: this one replaces it
		default:
		}
		ch <- b
	}
	p.mu.Unlock()
	if p.nc != nil && b != nil {
		// Core NATS: the server drops what a slow board cannot take; the
		// lead's connection never waits for one.
		p.nc.Publish(p.subject, b)
	}
}
