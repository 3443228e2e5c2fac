package watch

import (
	tea "charm.land/bubbletea/v2"

	"github.com/orch-dev/orch/board"
)

// feed hands views from Follow to the program: one slot, latest wins.
// offer never blocks (a view the board has not taken yet is replaced),
// so a slow terminal drops frames, never events: every view is the whole
// picture, and the newest one says all the dropped ones did.
type feed struct {
	slot chan board.View
	done chan struct{}
}

func newFeed() *feed {
	return &feed{slot: make(chan board.View, 1), done: make(chan struct{})}
}

// offer puts v in the slot. Follow calls it from one goroutine, and the
// program only takes from the slot, so after the drain the send cannot
// block.
func (f *feed) offer(v board.View) { board.Replace(f.slot, v) }

// next is the command that waits for the next view; the model runs it
// again after each one it takes.
func (f *feed) next() tea.Cmd {
	return func() tea.Msg {
		select {
		case v := <-f.slot:
			return viewMsg{v}
		case <-f.done:
			return nil
		}
	}
}

// close ends a waiting next.
func (f *feed) close() { close(f.done) }

// viewMsg is a view taken from the feed.
type viewMsg struct{ v board.View }

// followEnded says Follow returned an error: the board cannot go on.
type followEnded struct{ err error }
