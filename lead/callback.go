package lead

import (
	"encoding/json"
	"fmt"
	"strings"
)

// Callback kinds: what the lead is woken for.
const (
	CallbackDone     = "done"
	CallbackBlocked  = "blocked"
	CallbackFailed   = "failed"
	CallbackDied     = "died" // Plan holds the worker id
	CallbackVerified = "verified"
	CallbackRefuted  = "refuted"
	// From orch integrate.
	CallbackIntegrated = "integrated"
	CallbackConflict   = "conflict"
	// From an agent's hooks (see hooks.go).
	CallbackNeedsInput = "needs-input" // the agent waits for a person
	CallbackIdle       = "idle"        // the agent's turn ended without orch-notify done
)

// Callback is what orch wait prints: one line for the lead, plus the fields
// behind it for --json.
type Callback struct {
	Event  string `json:"event"`
	Kind   string `json:"kind"`
	Plan   string `json:"plan"`
	Worker string `json:"worker,omitempty"`
	Status string `json:"status,omitempty"`
	Commit string `json:"commit,omitempty"`
	Line   string `json:"line"`
}

func newCallback(kind, eventID, plan, worker, status, commit string) *Callback {
	word := map[string]string{CallbackDone: "WORKER-DONE", CallbackBlocked: "WORKER-BLOCKED", CallbackFailed: "WORKER-FAILED", CallbackDied: "WORKER-DIED",
		CallbackVerified: "VERIFIED", CallbackRefuted: "REFUTED", CallbackIntegrated: "INTEGRATED", CallbackConflict: "CONFLICT",
		CallbackNeedsInput: "WORKER-NEEDS-INPUT", CallbackIdle: "WORKER-IDLE"}[kind]
	line := fmt.Sprintf("%s %s: %s", word, plan, oneLine(status))
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

// oneLine keeps a status on one line; statuses are already cleaned of
// control characters by the event package, this is a second guard.
func oneLine(s string) string {
	return strings.Map(func(r rune) rune {
		if r < 0x20 || r == 0x7f {
			return ' '
		}
		return r
	}, s)
}
