package web

import (
	"context"
	"encoding/json"
	"sync"

	"github.com/orch-dev/orch/board"
	"github.com/orch-dev/orch/plans"
)

// loadDefs is where a view's plan definitions come from.
var loadDefs = plans.LoadEach

// encodeView is the one encoding of a view, for the event stream and
// view.json alike.
func encodeView(v board.View) []byte {
	b, _ := json.Marshal(v) // only plain data
	return b
}

// hub keeps the newest view and hands it to every page's stream. Each
// client has a one-slot channel: a view it has not taken yet is replaced
// by the newer one, so the hub never waits on a browser.
type hub struct {
	mu      sync.Mutex
	latest  []byte
	clients map[chan []byte]struct{}
}

func newHub() *hub { return &hub{clients: map[chan []byte]struct{}{}} }

// run builds a view from each frame until ctx ends or frames is closed.
func (h *hub) run(ctx context.Context, frames <-chan []byte, build func([]byte) []byte) {
	for {
		select {
		case <-ctx.Done():
			return
		case f, ok := <-frames:
			if !ok {
				return
			}
			if v := build(f); v != nil {
				h.publish(v)
			}
		}
	}
}

// publish makes v the newest view and offers it to every client.
func (h *hub) publish(v []byte) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.latest = v
	for ch := range h.clients {
		board.Replace(ch, v) // under mu: publish is each channel's only sender
	}
}

// join returns a channel holding the newest view (if any) and then each
// newer one, and a function to leave.
func (h *hub) join() (<-chan []byte, func()) {
	ch := make(chan []byte, 1)
	h.mu.Lock()
	h.clients[ch] = struct{}{}
	if h.latest != nil {
		ch <- h.latest
	}
	h.mu.Unlock()
	return ch, func() {
		h.mu.Lock()
		delete(h.clients, ch)
		h.mu.Unlock()
	}
}

// view is the newest view, nil before the first frame.
func (h *hub) view() []byte {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.latest
}
