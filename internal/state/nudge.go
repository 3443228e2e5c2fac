package state

import "time"

// Nudge is a line orch send hands to a worker's agent at its prompt: kept
// in the record until it is typed, so a restart of orch serve neither
// loses nor repeats it.
type Nudge struct {
	Event  string    `json:"event"` // the send command's event id
	Worker string    `json:"worker"`
	Text   string    `json:"text"` // one line, escaped
	Queued time.Time `json:"queued"`
	// Typing is saved just before the line is typed, with Echo, how many
	// times the worker's screen showed it then: a lead loop that stops in
	// between finds it on the screen once more (typed: done) or not
	// (typed again).
	Typing bool `json:"typing,omitempty"`
	Echo   int  `json:"echo,omitempty"`
}

// NudgesFor returns the nudges waiting for worker id, oldest first.
func (st *State) NudgesFor(id string) []*Nudge {
	var out []*Nudge
	for _, n := range st.Nudges {
		if n.Worker == id {
			out = append(out, n)
		}
	}
	return out
}

// DropNudge takes the nudge of event id out of the record.
func (st *State) DropNudge(id string) {
	for i, n := range st.Nudges {
		if n.Event == id {
			st.Nudges = append(st.Nudges[:i], st.Nudges[i+1:]...)
			return
		}
	}
}

// Nudge returns the nudge of event id, or nil.
func (st *State) Nudge(id string) *Nudge {
	for _, n := range st.Nudges {
		if n.Event == id {
			return n
		}
	}
	return nil
}
