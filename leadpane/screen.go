package leadpane

import (
	"strings"

	"github.com/orch-dev/orch/agent"
)

// Kind is what the lead's screen says about typing into it.
type Kind int

const (
	// Busy: the lead works (or its screen is one orch does not know):
	// nothing is typed.
	Busy Kind = iota
	// Idle: the lead waits at an empty prompt: a line may be typed.
	Idle
	// Typed: the prompt holds text (a person's half-typed line, or the
	// line orch typed and has not submitted yet).
	Typed
	// Dialog: the lead asks a person something; nothing is typed and no
	// Enter pressed.
	Dialog
)

func (k Kind) String() string {
	return [...]string{"busy", "idle", "typed", "dialog"}[k]
}

// Screen is one reading of the lead's pane.
type Screen struct {
	Kind Kind
	// Input is what the prompt holds, when the reader can tell (a
	// --lead-prompt reader); InputKnown says it can.
	Input      string
	InputKnown bool
	// Joined is the screen with wrapped lines joined, for counting a
	// typed line's echoes.
	Joined string
	What   string // a dialog's text
}

// Holds says whether the screen shows line typed and not yet submitted.
func (s Screen) Holds(line string, echoes int) bool {
	if s.Kind != Typed {
		return false
	}
	if s.InputKnown {
		return s.Input == line
	}
	return Count(s.Joined, line) > echoes
}

// Count is how many times the screen shows line, however tmux or the
// agent wrapped it (agent.Shown).
func Count(screen, line string) int { return agent.Shown(screen, line) }

// busyMarkers show while a known agent works (its interrupt hint).
var busyMarkers = map[string][]string{
	"codex":  {"esc to interrupt"},
	"claude": {"esc to interrupt"},
	"gemini": {"esc to cancel"},
}

// idleMarkers show only at a known agent's empty prompt: its input's
// placeholder or a hint it hides once something is typed. (Not Claude
// Code's "accept edits on": its mode footer shows under a typed line too.)
var idleMarkers = map[string][]string{
	"codex":  {"Ask Codex to do anything", "? for shortcuts"},
	"claude": {"? for shortcuts"},
	"gemini": {"Type your message or @path/to/file"},
}

// readyMarkers, where an agent has them, must show too (one of them) for
// its empty prompt to be idle: without, the prompt is drawn but takes no
// input yet (busy).
//
// Codex 0.171.0 (read off its real screens in
// cmd/orch/testdata/agents/codex_lead_pane_tmux.txtar, kept in
// testdata/codex-*.txt): while it starts it draws its composer with the
// placeholder "Ask Codex to do anything" and a bare "? for shortcuts"
// before it reads its input (a line typed then showed seconds later, after
// a second copy was typed as lost); once it takes input its footer reads
// "← for agents · ? for shortcuts" under the status line (model ·
// folder). A line typed takes the placeholder and that footer away.
var readyMarkers = map[string][]string{
	"codex": {"← for agents"},
}

// Reader reads the lead's screen: by the prompt text it was given
// (--lead-prompt: the line the cursor is on starts with it), or else by
// the markers of a known agent's screens (package agent: its dialogs, and
// the hints it shows only at an empty prompt).
type Reader struct {
	Prompt  string         // --lead-prompt, "" for the profile's markers
	Profile *agent.Profile // the lead's agent, for its dialogs; may be nil
}

// NewReader checks that the lead's prompt can be seen: a prompt text, or
// a profile whose screens orch knows.
func NewReader(prompt string, p *agent.Profile) (Reader, error) {
	r := Reader{Prompt: strings.TrimRight(prompt, " "), Profile: p}
	if r.Prompt == "" && (p == nil || busyMarkers[p.Name] == nil) {
		return r, ErrNoPrompt
	}
	return r, nil
}

// Read says what rows (the visible screen, one row each), joined (the
// same with wrapped lines joined) and the cursor's row show.
func (r Reader) Read(rows []string, joined string, cursorY int) Screen {
	s := Screen{Kind: Busy, Joined: joined}
	if r.Profile != nil {
		if kind, what := r.Profile.ReadScreen(joined); kind == agent.ScreenDialog {
			s.Kind, s.What = Dialog, what
			return s
		}
	}
	if r.Prompt != "" {
		return r.readPrompt(s, rows, joined, cursorY)
	}
	for _, m := range busyMarkers[r.Profile.Name] {
		if strings.Contains(joined, m) {
			return s
		}
	}
	for _, m := range idleMarkers[r.Profile.Name] {
		if strings.Contains(joined, m) {
			if ready := readyMarkers[r.Profile.Name]; ready != nil && !containsAny(joined, ready) {
				return s // the empty prompt is drawn but takes no input yet
			}
			s.Kind = Idle // a hint an empty prompt shows
			return s
		}
	}
	s.Kind = Typed
	return s
}

func containsAny(s string, subs []string) bool {
	for _, m := range subs {
		if strings.Contains(s, m) {
			return true
		}
	}
	return false
}

// readPrompt: the input is the last line of the screen when the cursor is
// on it and it starts with the prompt; a cursor below it (the line was
// submitted, the agent has not written since) or any other last line is
// busy.
func (r Reader) readPrompt(s Screen, rows []string, joined string, cursorY int) Screen {
	last := -1
	for i, row := range rows {
		if strings.TrimSpace(row) != "" {
			last = i
		}
	}
	if last < 0 || cursorY > last {
		return s
	}
	lines := strings.Split(strings.TrimRight(joined, "\n"), "\n")
	l := strings.TrimRight(lines[len(lines)-1], " ")
	in, ok := strings.CutPrefix(l, r.Prompt)
	if !ok {
		return s
	}
	s.InputKnown, s.Input = true, strings.TrimSpace(in)
	if s.Input == "" {
		s.Kind = Idle
	} else {
		s.Kind = Typed
	}
	return s
}
