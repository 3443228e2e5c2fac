package modelsim

import (
	"encoding/json"
	"fmt"
	"regexp"
	"strings"
)

// This file is the lead's part: a Claude Code session that is orch's
// lead gets callback lines (WORKER-DONE <plan>: <status>, ...) from its
// hooks, in a wake-up notification or as context added to its next step;
// a Codex lead (orch serve --lead-pane) gets them typed at its prompt, in
// a user message. The server records the lines each request brings new
// and answers with a short text, or, for a callback about a plan whose
// scenario is LeadHold, with a command that blocks until the test lets it
// go, so the lead is mid-turn while more callbacks arrive, or, for one
// whose scenario is LeadAsk, with a command the lead must ask a person
// about (an approval dialog on its screen).

// LeadHold: when the lead is told of this plan, it runs a command that
// blocks on the server's hold FIFO (SetHold), keeping its turn open.
const LeadHold Scenario = "leadhold"

// LeadAsk: when the lead is told of this plan, it runs PermissionCommand
// outside its sandbox, which Codex asks a person about.
const LeadAsk Scenario = "leadask"

// callbackRE finds orch's callback lines in text.
var callbackRE = regexp.MustCompile(`(?m)(?:WORKER-(?:DONE|BLOCKED|FAILED|DIED|NEEDS-INPUT|IDLE)|VERIFIED|REFUTED|INTEGRATED|CONFLICT) ([a-z0-9][a-z0-9._-]{0,62})(?:: [^\n"\\]*|$)`)

// SetHold names the FIFO a LeadHold command reads from (cat blocks until
// the test writes to it).
func (s *Server) SetHold(path string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.hold = path
}

// newCallbacks returns the callback lines in the messages after the last
// assistant message: what this request brings that the model has not
// answered yet (a conversation's earlier lines are sent again each time).
func (r *anthropicRequest) newCallbacks() []string {
	start := 0
	for i, m := range r.Messages {
		if m.Role == "assistant" {
			start = i + 1
		}
	}
	var out []string
	for _, m := range r.Messages[start:] {
		// 2.1.332 puts a hook's added context in a message of role
		// "system" after the tool result.
		if m.Role != "user" && m.Role != "system" {
			continue
		}
		// The raw content: the lines may sit in text blocks, in a
		// tool_result's content or in a system reminder.
		var raw any
		json.Unmarshal(m.Content, &raw)
		for _, t := range texts(raw) {
			// A --lead-pane lead gets the callbacks typed as one line,
			// joined by " | ".
			for _, l := range callbackRE.FindAllString(strings.ReplaceAll(t, " | ", "\n"), -1) {
				out = append(out, l)
			}
		}
	}
	return out
}

// texts collects every string in a decoded JSON value.
func texts(v any) []string {
	switch x := v.(type) {
	case string:
		return []string{x}
	case []any:
		var out []string
		for _, e := range x {
			out = append(out, texts(e)...)
		}
		return out
	case map[string]any:
		var out []string
		for _, e := range x {
			out = append(out, texts(e)...)
		}
		return out
	}
	return nil
}

// leadAnswer is the lead's step for a request that brings callbacks, and
// false when it brings none.
func (s *Server) leadAnswer(req *anthropicRequest) (Action, []string, bool) {
	lines := req.newCallbacks()
	if len(lines) == 0 {
		return Action{}, nil, false
	}
	return s.leadStep(lines), lines, true
}

// leadStep is the lead's answer to the callback lines a request brings.
func (s *Server) leadStep(lines []string) Action {
	s.mu.Lock()
	hold := s.hold
	s.mu.Unlock()
	for _, l := range lines {
		m := callbackRE.FindStringSubmatch(l)
		if m == nil {
			continue
		}
		switch s.scenario(m[1]) {
		case LeadHold:
			if hold != "" {
				return Action{Kind: RunCommand, Command: "cat " + hold}
			}
		case LeadAsk:
			return Action{Kind: RunCommand, Command: PermissionCommand}
		}
	}
	return Action{Kind: Say, Text: fmt.Sprintf("Noted %d callback(s).", len(lines))}
}
