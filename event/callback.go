package event

import (
	"encoding/json"
	"fmt"
	"strings"
)

// CallbackKind is what the lead is woken for.
type CallbackKind string

// Callback kinds.
const (
	CallbackDone    CallbackKind = "done"
	CallbackBlocked CallbackKind = "blocked"
	CallbackFailed  CallbackKind = "failed"
	CallbackDied    CallbackKind = "died" // Plan holds the worker id
	// The plan reached its timeout; its agent was interrupted.
	CallbackTimedOut CallbackKind = "timed-out"
	CallbackVerified CallbackKind = "verified"
	CallbackRefuted  CallbackKind = "refuted"
	// From orch integrate.
	CallbackIntegrated CallbackKind = "integrated"
	CallbackConflict   CallbackKind = "conflict"
	// From an agent's hooks (see hooks.go).
	CallbackNeedsInput CallbackKind = "needs-input" // the agent waits for a person
	CallbackIdle       CallbackKind = "idle"        // the agent's turn ended without orch-notify done
	// The agent ran out of context: its worker got a fresh session and
	// the plan its line again.
	CallbackRestarted CallbackKind = "restarted"
)

// Callback is what the lead loop tells the lead, and orch wait prints: one
// line, plus the fields behind it for --json. Event is the id of the event
// that caused it (and the callback's message id).
type Callback struct {
	Event  string       `json:"event"`
	Kind   CallbackKind `json:"kind"`
	Plan   string       `json:"plan"`
	Worker string       `json:"worker,omitempty"`
	Status string       `json:"status,omitempty"`
	Commit string       `json:"commit,omitempty"`
	Line   string       `json:"line"`
}

// NewCallback builds the callback of kind for the event with id eventID.
func NewCallback(kind CallbackKind, eventID, plan, worker, status, commit string) *Callback {
	word := map[CallbackKind]string{CallbackDone: "WORKER-DONE", CallbackBlocked: "WORKER-BLOCKED", CallbackFailed: "WORKER-FAILED", CallbackDied: "WORKER-DIED", CallbackTimedOut: "WORKER-TIMED-OUT",
		CallbackVerified: "VERIFIED", CallbackRefuted: "REFUTED", CallbackIntegrated: "INTEGRATED", CallbackConflict: "CONFLICT",
		CallbackNeedsInput: "WORKER-NEEDS-INPUT", CallbackIdle: "WORKER-IDLE", CallbackRestarted: "WORKER-RESTARTED"}[kind]
	line := fmt.Sprintf("%s %s: %s", word, plan, OneLine(status))
	if status == "" {
		line = word + " " + plan
	}
	return &Callback{Event: eventID, Kind: kind, Plan: plan, Worker: worker, Status: status, Commit: commit, Line: line}
}

// ParseCallback decodes a callback message.
func ParseCallback(data []byte) (Callback, error) {
	var cb Callback
	if err := json.Unmarshal(data, &cb); err != nil {
		return cb, fmt.Errorf("callback: %w", err)
	}
	if cb.Line == "" || cb.Plan == "" {
		return cb, fmt.Errorf("callback: missing line or plan")
	}
	return cb, nil
}

// OneLine keeps a status on one line; statuses are already cleaned of
// control characters by the event package, this is a second guard.
func OneLine(s string) string {
	return strings.Map(func(r rune) rune {
		if r < 0x20 || r == 0x7f {
			return ' '
		}
		return r
	}, s)
}
