package watch

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"charm.land/lipgloss/v2"
	"github.com/charmbracelet/x/ansi"

	"github.com/orch-dev/orch/board"
)

// The timeline's glyphs: a bar on the critical path is solid, the others
// shaded, so the path shows without colour too.
const (
	critGlyph = "█"
	barGlyph  = "▒"
)

// barStyles colour a bar by its outcome, as the web board does.
var barStyles = map[string]lipgloss.Style{
	"running": lipgloss.NewStyle().Foreground(lipgloss.Blue),
	"done":    lipgloss.NewStyle().Foreground(lipgloss.Green),
	"failed":  lipgloss.NewStyle().Foreground(lipgloss.Red),
	"blocked": lipgloss.NewStyle().Foreground(lipgloss.Yellow),
	"taken":   lipgloss.NewStyle().Foreground(lipgloss.BrightBlack),
}

// barClass is the colour of bar b: a running bar is running whatever its
// plan's state; an ended one is coloured by how it ended.
func barClass(b board.Bar) string {
	if b.Running {
		return "running"
	}
	switch b.Outcome {
	case "done", "verified", "integrated", "verifying":
		return "done"
	case "failed", "timed-out", "conflict", "refuted":
		return "failed"
	case "blocked", "needs-input":
		return "blocked"
	case "taken back":
		return "taken"
	}
	return ""
}

// timelineWant is how many lines the whole timeline takes: its title, a
// row per worker and the critical path's line. Zero when it is hidden or
// nothing has run yet.
func (m Model) timelineWant() int {
	tl := m.view.Timeline
	if m.noTimeline || tl.Start.IsZero() || len(tl.Rows) == 0 {
		return 0
	}
	n := 1 + len(tl.Rows)
	if len(m.view.Critical) > 0 {
		n++
	}
	return n
}

// timelineLines is the timeline in at most n lines of at most w cells:
// the title, one line per worker (its id, then each bar over its share of
// the time from the first attempt's start to now) and the critical path.
// With less room than it wants, rows go first (workers without bars
// before workers with bars) until one is left, then the critical path's
// line.
func (m Model) timelineLines(w, n int) []string {
	tl := m.view.Timeline
	if n < 2 || m.timelineWant() == 0 {
		return nil
	}
	end := tl.End
	if m.now.After(end) {
		end = m.now
	}
	crit := len(m.view.Critical) > 0 && n >= 3
	room := n - 1
	if crit {
		room--
	}
	rows := keepRows(tl.Rows, room)

	var head strings.Builder
	head.WriteString(sectionTitle("TIMELINE", len(rows), len(tl.Rows)))
	fmt.Fprintf(&head, "  since %s (%s)", tl.Start.Local().Format("15:04:05"), dur(end.Sub(tl.Start)))
	out := []string{title.Render(fit(head.String(), w))}

	idw := 0
	for _, r := range rows {
		idw = max(idw, ansi.StringWidth(pad(clean(r.Worker), 8)))
	}
	for _, r := range rows {
		id := pad(clean(r.Worker), 8)
		id += strings.Repeat(" ", idw-ansi.StringWidth(id)+1)
		if sw := w - idw - 1; sw > 0 {
			out = append(out, id+strip(r.Bars, tl.Start, end, sw))
		} else {
			out = append(out, fit(id, w))
		}
	}
	if crit {
		out = append(out, fit(m.criticalLine(end), w))
	}
	return out
}

// keepRows is up to n of rows, in their order, those with bars first.
func keepRows(rows []board.Row, n int) []board.Row {
	if n >= len(rows) {
		return rows
	}
	var keep []int
	for _, busy := range []bool{true, false} {
		for i, r := range rows {
			if len(keep) < n && (len(r.Bars) > 0) == busy {
				keep = append(keep, i)
			}
		}
	}
	slices.Sort(keep)
	out := make([]board.Row, 0, len(keep))
	for _, i := range keep {
		out = append(out, rows[i])
	}
	return out
}

// strip draws bars in sw cells over [start, end]: cell i is the time from
// start+i·d/sw to start+(i+1)·d/sw, and a bar fills every cell it touches
// (at least one, so a short attempt still shows; a later bar on the same
// cell wins). A running bar ends at end, the board's clock. Each run of
// cells is styled on its own, within the width, so the line never wraps.
func strip(bars []board.Bar, start, end time.Time, sw int) string {
	d := int64(end.Sub(start))
	if d <= 0 {
		d = 1
	}
	type cell struct {
		class string
		crit  bool
		on    bool
	}
	cells := make([]cell, sw)
	for _, b := range bars {
		e := b.End
		if b.Running || e.IsZero() {
			e = end
		}
		c0 := int(int64(b.Start.Sub(start)) * int64(sw) / d)
		c1 := int((int64(e.Sub(start))*int64(sw) + d - 1) / d)
		c0 = min(max(c0, 0), sw-1)
		c1 = min(max(c1, c0+1), sw)
		for c := c0; c < c1; c++ {
			cells[c] = cell{class: barClass(b), crit: b.Critical, on: true}
		}
	}
	last := len(cells)
	for last > 0 && !cells[last-1].on {
		last--
	}
	var s strings.Builder
	for i := 0; i < last; {
		j := i
		for j < last && cells[j] == cells[i] {
			j++
		}
		c := cells[i]
		switch {
		case !c.on:
			s.WriteString(strings.Repeat(" ", j-i))
		case c.crit:
			s.WriteString(barStyles[c.class].Render(strings.Repeat(critGlyph, j-i)))
		default:
			s.WriteString(barStyles[c.class].Render(strings.Repeat(barGlyph, j-i)))
		}
		i = j
	}
	return s.String()
}

// criticalLine names the critical path and how long its plans took
// (board.View.CriticalS: each plan's latest run) of the whole timeline.
func (m Model) criticalLine(end time.Time) string {
	names := make([]string, 0, len(m.view.Critical))
	for _, p := range m.view.Critical {
		names = append(names, clean(p))
	}
	on := time.Duration(m.view.CriticalS * float64(time.Second))
	return fmt.Sprintf("critical path: %s (%s of %s)", strings.Join(names, " → "), dur(on), dur(end.Sub(m.view.Timeline.Start)))
}
