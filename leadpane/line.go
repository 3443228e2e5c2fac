package leadpane

import (
	"strings"
	"unicode/utf8"

	"github.com/orch-dev/orch/agent"
	"github.com/orch-dev/orch/event"
)

// MaxLine bounds the line typed into the lead's pane: well under a
// terminal's line limit (4095 bytes in Linux's canonical mode) and short
// enough to stay on the screen while its echo is checked.
const MaxLine = 2000

// maxItem bounds one callback within the line; a longer one is cut and
// marked (orch inbox and orch wait have it whole).
const maxItem = 600

// Sep joins the callbacks typed together.
const Sep = " | "

// Safe makes one callback line safe to type: control characters, escape
// sequences and newlines written as visible escapes (event.Clean, the
// cleaning every status had when it arrived, done again), an @ written
// (at) (it opens the agent's file picker, whose Enter picks a file instead
// of submitting), the texts orch reads the lead's screen by written with
// _ for their blanks (Defang), cut to maxItem bytes.
func Safe(line string) string {
	s := event.Clean(line)
	s = strings.ReplaceAll(s, "@", "(at)")
	s = strings.Join(strings.Fields(s), " ") // no leading, trailing or runs of blanks
	s = Defang(s)
	if len(s) <= maxItem {
		return s
	}
	cut := maxItem - len(event.TruncMarker)
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + event.TruncMarker
}

// Join types lines as one: as many as fit MaxLine, the rest left for the
// next prompt. It returns the line and how many it holds (at least one).
func Join(lines []string) (string, int) {
	var b strings.Builder
	n := 0
	for _, l := range lines {
		s := Safe(l)
		if n > 0 && b.Len()+len(Sep)+len(s) > MaxLine {
			break
		}
		if n > 0 {
			b.WriteString(Sep)
		}
		b.WriteString(s)
		n++
	}
	return b.String(), n
}

// Defang writes each text by which orch reads the lead's screen (an
// agent's interrupt hint, its empty prompt's hints, its dialogs' questions:
// package agent's markers, busyMarkers and idleMarkers) with _ for its blanks: a
// worker's status typed onto the lead's prompt, or left in its history,
// must never make the screen read busy, idle or a dialog.
func Defang(s string) string {
	for _, m := range markers {
		if strings.Contains(s, m) {
			s = strings.ReplaceAll(s, m, strings.ReplaceAll(m, " ", "_"))
		}
	}
	return s
}

// markers are the texts Defang breaks; every one holds a blank.
var markers = func() []string {
	out := agent.Markers()
	for _, ms := range busyMarkers {
		out = append(out, ms...)
	}
	for _, ms := range idleMarkers {
		out = append(out, ms...)
	}
	return out
}()
