package event

import (
	"encoding/json"
	"fmt"
)

// Verdict is the lead loop's answer to a command (orch dispatch, orch
// verify), sent once the command's effect is recorded to whoever waits on
// VerdictSubject: not stored (the command is; the answer only saves the
// sender a look at orch status).
type Verdict struct {
	Event   string `json:"event"`
	Kind    Kind   `json:"kind"`
	Plan    string `json:"plan"`
	Refused bool   `json:"refused,omitempty"`
	// Note is what the command came to: "queued", or the refusal's reason.
	Note string `json:"note"`
}

// VerdictSubject is where the verdict on the command with id eventID is
// sent. It is outside the stream's subjects, and only the lead role may
// publish or subscribe there.
func VerdictSubject(prefix, eventID string) string { return prefix + ".verdict." + eventID }

// ParseVerdict decodes a verdict message.
func ParseVerdict(data []byte) (Verdict, error) {
	var v Verdict
	if err := json.Unmarshal(data, &v); err != nil {
		return v, fmt.Errorf("verdict: %w", err)
	}
	if v.Event == "" || v.Note == "" {
		return v, fmt.Errorf("verdict: missing event or note")
	}
	return v, nil
}
