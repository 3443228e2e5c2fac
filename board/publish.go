package board

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/orch-dev/orch/event"
)

// Subject is where frames are published under prefix (core NATS, not the
// stream: a frame is a picture, the next one replaces it).
func Subject(prefix string) string { return prefix + ".board" }

// NowSubject is where a board that has just subscribed asks for a frame:
// the loop answers with a fresh one on Subject.
func NowSubject(prefix string) string { return prefix + ".board.now" }

// MinGap is the least time between two frames the loop makes: a burst of
// events costs it one frame per MinGap, not one per event. A board is a
// picture for a person.
const MinGap = 100 * time.Millisecond

// MaxPart is the largest piece of a frame in one message, under the
// broker's payload limit (event.MaxBytes); a larger frame goes in parts.
const MaxPart = 60 << 10

// Frame message headers: the frame a part belongs to (serve.seq), and
// which part it is of how many ("2/3").
const (
	HeaderFrame = "Orch-Frame"
	HeaderPart  = "Orch-Part"
)

// Publisher sends the lead loop's frames to boards: on the broker for
// orch watch, and to in-process followers (the web board). Offer never
// blocks the loop: the latest frame is kept and a sender goroutine sends
// it; a follower too slow to take a frame gets the next one instead.
type Publisher struct {
	nc       *nats.Conn
	subject  string
	serve    string
	interest func(subject string) bool

	mu     sync.Mutex
	seq    uint64
	latest []byte
	said   []Said
	subs   map[chan []byte]struct{}

	kick   chan struct{}
	wanted chan struct{}
	sub    *nats.Subscription
}

// NewPublisher starts a publisher on nc (nil: in-process followers only)
// for one orch serve, with the callbacks already sent (SaidOf). interest
// says whether anyone subscribes to a subject (the broker knows; nil:
// nobody on the broker).
func NewPublisher(nc *nats.Conn, prefix string, said []Said, interest func(string) bool) (*Publisher, error) {
	p := &Publisher{nc: nc, subject: Subject(prefix), serve: event.NewID()[:12], said: said, interest: interest,
		subs: map[chan []byte]struct{}{}, kick: make(chan struct{}, 1), wanted: make(chan struct{}, 1)}
	if nc != nil {
		sub, err := nc.Subscribe(NowSubject(prefix), func(*nats.Msg) { p.want() })
		if err != nil {
			return nil, err
		}
		p.sub = sub
		// The server has the subscription once Flush returns: a board's
		// ask from then on is heard (the loop offers a frame anyway when
		// it is ready, for one that asked before).
		if err := nc.Flush(); err != nil {
			sub.Unsubscribe()
			return nil, err
		}
	}
	return p, nil
}

// Wanted gets a value when a board asks for a frame now (it has just
// subscribed, or started following): the loop offers one.
func (p *Publisher) Wanted() <-chan struct{} { return p.wanted }

func (p *Publisher) want() {
	select {
	case p.wanted <- struct{}{}:
	default:
	}
}

// Watched says whether any board follows: the loop makes no frame for
// nobody.
func (p *Publisher) Watched() bool {
	p.mu.Lock()
	n := len(p.subs)
	p.mu.Unlock()
	return n > 0 || p.interest != nil && p.interest(p.subject)
}

// Said records a callback given to the lead, for the next frame.
func (p *Publisher) Said(cb event.Callback, at time.Time) {
	p.mu.Lock()
	defer p.mu.Unlock()
	cb.Status, cb.Line = cut(cb.Status), cut(cb.Line)
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
// follower that is behind gets the newest, never a backlog), and a
// function to stop. The loop is asked for a fresh frame at once.
func (p *Publisher) Follow() (<-chan []byte, func()) {
	ch := make(chan []byte, 1)
	p.mu.Lock()
	p.subs[ch] = struct{}{}
	if p.latest != nil {
		ch <- p.latest
	}
	p.mu.Unlock()
	p.want()
	return ch, func() {
		p.mu.Lock()
		delete(p.subs, ch)
		p.mu.Unlock()
	}
}

// Run sends frames until ctx ends, each as it is offered (the loop
// spaces them).
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
			p.send()
		}
	}
}

func (p *Publisher) send() {
	p.mu.Lock()
	b, id := p.latest, p.serve+"."+strconv.FormatUint(p.seq, 10)
	for ch := range p.subs {
		Replace(ch, b) // under mu: send is each channel's only sender
	}
	p.mu.Unlock()
	if p.nc == nil || b == nil {
		return
	}
	// Core NATS: the server drops what a slow board cannot take; the
	// lead's connection never waits for one.
	for _, m := range Parts(p.subject, id, b) {
		p.nc.PublishMsg(m)
	}
}

// Parts splits frame b (id serve.seq) into messages of at most MaxPart.
func Parts(subject, id string, b []byte) []*nats.Msg {
	n := (len(b) + MaxPart - 1) / MaxPart
	out := make([]*nats.Msg, 0, n)
	for i := 0; i < n; i++ {
		m := nats.NewMsg(subject)
		m.Data = b[i*MaxPart : min(len(b), (i+1)*MaxPart)]
		m.Header.Set(HeaderFrame, id)
		m.Header.Set(HeaderPart, fmt.Sprintf("%d/%d", i+1, n))
		out = append(out, m)
	}
	return out
}

// Assembler puts a frame's parts back together. It keeps one frame at a
// time: a part of a newer frame drops the older one's.
type Assembler struct {
	id    string
	parts [][]byte
	got   int
}

// Add takes a message; it returns the whole frame once its last part came.
func (a *Assembler) Add(m *nats.Msg) ([]byte, bool) {
	id := m.Header.Get(HeaderFrame)
	i, n, ok := part(m.Header.Get(HeaderPart))
	if id == "" || !ok {
		return nil, false
	}
	if id != a.id || len(a.parts) != n {
		a.id, a.parts, a.got = id, make([][]byte, n), 0
	}
	if a.parts[i] == nil {
		a.parts[i] = append([]byte(nil), m.Data...)
		a.got++
	}
	if a.got < n {
		return nil, false
	}
	var b []byte
	for _, x := range a.parts {
		b = append(b, x...)
	}
	a.id, a.parts, a.got = "", nil, 0
	return b, true
}

// part reads "i/n" (1-based) as a 0-based index and a count.
func part(s string) (int, int, bool) {
	a, b, ok := strings.Cut(s, "/")
	i, err1 := strconv.Atoi(a)
	n, err2 := strconv.Atoi(b)
	if !ok || err1 != nil || err2 != nil || n < 1 || n > 1024 || i < 1 || i > n {
		return 0, 0, false
	}
	return i - 1, n, true
}

// Replace puts v in the one-slot channel ch, dropping a value not taken
// yet: the newest picture replaces an older one, and the sender never
// waits. The caller must be ch's only sender (then the send after the
// drain cannot block).
func Replace[T any](ch chan T, v T) {
	select {
	case <-ch:
	default:
	}
	ch <- v
}
