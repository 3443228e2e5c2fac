package state

import (
	"time"

	"github.com/orch-dev/orch/event"
)

// A Note is what handling an event came to, kept in the record (its text
// is Handled's Note). An event that changed nothing (stale, a repeat,
// about a plan that moved on) is ignored; one that may not have any effect
// is refused (and listed in orch status). A refusal is a value, not a
// string prefix.
type Note struct {
	Text string
	Kind NoteKind
}

// NoteKind says whether an event had its effect.
type NoteKind int

// The kinds of notes.
const (
	Applied NoteKind = iota
	Ignored
	Refused
)

// Noted is the note of an event that had its effect.
func Noted(text string) Note { return Note{Text: text} }

// Ignoring is the note of an event that changes nothing, and why.
func Ignoring(why string) Note { return Note{Text: "ignored: " + why, Kind: Ignored} }

// None says the note is empty: nothing has been decided yet.
func (n Note) None() bool { return n.Text == "" }

// Refuse records e, well-formed but not acceptable now, among the
// rejections, and returns its note.
func (st *State) Refuse(e event.Event, reason string, now time.Time) Note {
	st.Reject(Rejection{Event: e.ID, Kind: string(e.Kind), Plan: e.Plan, Worker: e.Worker, Reason: reason, Time: now.UTC()})
	return Note{Text: "refused: " + reason, Kind: Refused}
}
