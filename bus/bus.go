// Package bus is the workers' bus: what workers say to each other
// (orch-notify say), read back from the broker (orch bus) and mirrored to
// .orch/bus.md for agents that read files.
//
// How the pieces fit. A say is an event (event.Say) that orch-notify
// publishes with the worker's own key on <prefix>.bus.<wN>.<topic>; the
// broker lets a worker publish there only under its own id, and stores
// says in a stream of their own (broker.BusStream). Nothing here types
// into a pane: a say is text to read, and everything shown of it is
// escaped first (Escape). Read serves orch bus; Mirror runs in orch serve
// and appends each say to bus.md, once: the file itself records how far
// it got (each line starts with the say's stream sequence).
package bus

import (
	"fmt"
	"time"

	"github.com/orch-dev/orch/event"
)

// Message is one say as it is shown: who sent it is the worker whose
// credential published it (the subject), not what its payload claims.
type Message struct {
	Seq   uint64    `json:"seq"`
	Event string    `json:"event"`
	Time  time.Time `json:"time"`
	From  string    `json:"from"`
	Topic string    `json:"topic"`
	Text  string    `json:"text"` // escaped (Escape)
}

// Parse reads the say stored at seq on subject. The payload is never
// trusted: the sender and topic come from the subject, which the broker
// lets only the sender's key publish on, the topic must be a plan's or a
// named topic's (the sender picks the subject's tail), and the text is
// escaped.
func Parse(prefix, subject string, data []byte, seq uint64) (Message, error) {
	from, topic, ok := event.BusSender(prefix, subject)
	if !ok {
		return Message{}, fmt.Errorf("%w: subject %s is not a worker's bus subject", ErrNotSay, subject)
	}
	e, err := event.Parse(data) // its fields checked, a named topic's too
	if err != nil {
		return Message{}, fmt.Errorf("%w: %v", ErrNotSay, err)
	}
	if e.Plan != "" {
		if err := event.CheckPlanName(e.Plan); err != nil {
			return Message{}, fmt.Errorf("%w: plan topic: %v", ErrNotSay, err)
		}
	}
	if e.Kind != event.Say || e.Worker != from || event.BusSubject(prefix, e) != subject {
		return Message{}, fmt.Errorf("%w: a %q from %q on %s", ErrNotSay, Escape(string(e.Kind)), Escape(e.Worker), subject)
	}
	return Message{Seq: seq, Event: Escape(e.ID), Time: e.Time.UTC(), From: from, Topic: topic, Text: Escape(e.Status)}, nil
}

// Line is m as one line of text: sequence, time, sender, topic, text.
func (m Message) Line() string {
	return fmt.Sprintf("#%d %s %s [%s]: %s", m.Seq, m.Time.Format(time.RFC3339), m.From, m.Topic, m.Text)
}

// Escape makes a worker's text safe to show anywhere, on one line:
// event.Clean, which writes control characters, ESC, newlines, C1
// controls, invalid UTF-8 and the invisible format characters (bidi
// overrides, zero-width ones, tags) and line separators as visible escapes.
func Escape(s string) string { return event.Clean(s) }
