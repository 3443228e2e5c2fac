// Package board is what the live boards show — orch watch in a terminal
// and the web page of orch serve --http — and how it reaches them: the
// lead loop publishes a Frame (its record of workers and runs) after each
// save that changed something, on the broker and to in-process followers;
// a board turns a frame into a View (attention first, a timeline of
// attempts, the critical path) and redraws. Nothing here reads state on
// a timer: a frame comes because the lead saved.
package board

import (
	"encoding/json"
	"slices"
	"sort"
	"time"

	"github.com/orch-dev/orch/event"
	"github.com/orch-dev/orch/internal/state"
)

// MaxCallbacks is how many of the latest callbacks a frame carries.
const MaxCallbacks = 20

// Frame is the lead loop's record as a board needs it: no handled-event
// index, no outbox. Seq grows with every frame of one orch serve; Serve
// tells one orch serve's frames from the next one's.
type Frame struct {
	Serve     string         `json:"serve"`
	Seq       uint64         `json:"seq"`
	Time      time.Time      `json:"time"`
	Session   string         `json:"session,omitempty"`
	Isolation string         `json:"isolation,omitempty"`
	Workers   []state.Worker `json:"workers"`
	Plans     []state.Run    `json:"plans"`
	Callbacks []Said         `json:"callbacks"`
	Rejected  int            `json:"rejected,omitempty"`
	Errors    int            `json:"errors,omitempty"`
}

// Said is a callback the lead was given, and when.
type Said struct {
	Time time.Time `json:"time"`
	event.Callback
}

// FrameOf copies what a board shows out of st: the frame shares nothing
// with the record, so the loop may change st while it is sent.
func FrameOf(st *state.State, said []Said, now time.Time) Frame {
	f := Frame{Time: now.UTC(), Session: st.Session, Isolation: st.Isolation,
		Workers: make([]state.Worker, 0, len(st.Workers)), Plans: make([]state.Run, 0, len(st.Plans)),
		Callbacks: slices.Clone(said), Rejected: len(st.Rejected), Errors: len(st.Errors)}
	for _, w := range st.Workers {
		f.Workers = append(f.Workers, *w)
	}
	for _, p := range st.Plans {
		r := *p
		r.History = slices.Clone(p.History)
		f.Plans = append(f.Plans, r)
	}
	sort.Slice(f.Plans, func(i, j int) bool { return f.Plans[i].Name < f.Plans[j].Name })
	return f
}

// SaidOf is the latest callbacks st records as sent, newest first: what a
// board shows before the loop has sent any itself.
func SaidOf(st *state.State) []Said {
	var out []Said
	for _, h := range st.Handled {
		if h.Callback != nil {
			out = append(out, Said{Time: h.Time, Callback: *h.Callback})
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Time.After(out[j].Time) })
	if len(out) > MaxCallbacks {
		out = out[:MaxCallbacks]
	}
	return out
}

// Marshal encodes the frame.
func (f Frame) Marshal() []byte {
	b, _ := json.Marshal(f) // only plain data
	return b
}

// ParseFrame decodes a frame.
func ParseFrame(data []byte) (Frame, error) {
	var f Frame
	err := json.Unmarshal(data, &f)
	return f, err
}
