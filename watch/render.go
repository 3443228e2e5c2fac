package watch

import (
	"cmp"
	"fmt"
	"strings"
	"time"
	"unicode"

	"charm.land/lipgloss/v2"
	"github.com/charmbracelet/x/ansi"

	"github.com/orch-dev/orch/board"
	"github.com/orch-dev/orch/internal/state"
)

// Styles are applied to a whole line after it was cut to the width (on
// the timeline, to each run of cells laid out within it), so a style
// never counts toward the width and a line never wraps.
var (
	bold     = lipgloss.NewStyle().Bold(true)
	title    = lipgloss.NewStyle().Bold(true).Underline(true)
	alert    = lipgloss.NewStyle().Foreground(lipgloss.Red).Bold(true)
	alertRow = lipgloss.NewStyle().Foreground(lipgloss.Red)
	good     = lipgloss.NewStyle().Foreground(lipgloss.Green)
	faint    = lipgloss.NewStyle().Faint(true)
	selected = lipgloss.NewStyle().Reverse(true)
	offline  = lipgloss.NewStyle().Foreground(lipgloss.BrightWhite).Background(lipgloss.Red).Bold(true)
)

// maxCallbackRows is how many of the latest callbacks the board shows when
// the rest needs the room.
const maxCallbackRows = 5

// Render is the board as text, at most the terminal's height in lines, no
// line wider than it.
func (m Model) Render() string {
	w, h := m.width, m.high
	if w <= 0 {
		w = 80
	}
	if h <= 0 {
		h = 24
	}
	head := m.header(w)
	foot := m.footer(w)
	n := max(0, h-len(head)-len(foot))
	var body []string
	switch {
	case m.mode == screenMode:
		body = m.screenLines(w, n)
	case !m.have:
		body = []string{fit("waiting for the lead loop's record…", w)}
	default:
		body = m.board(w, n)
	}
	if len(body) > n {
		body = body[:n]
	}
	for len(body) < n {
		body = append(body, "")
	}
	lines := append(append(head, body...), foot...)
	if len(lines) > h {
		lines = lines[:h]
	}
	return strings.Join(lines, "\n")
}

// header is the first line (session, serving or not, counts) and, while
// orch serve is not running, the note saying so.
func (m Model) header(w int) []string {
	v := m.view
	parts := []string{"orch watch"}
	if v.Session != "" {
		parts = append(parts, clean(v.Session))
	}
	if !m.have {
		return []string{bold.Render(fit(strings.Join(parts, " · "), w))}
	}
	if v.Serving {
		parts = append(parts, "serving")
	} else {
		parts = append(parts, "NOT SERVING")
	}
	busy := 0
	for _, wk := range v.Workers {
		if wk.State == string(state.WorkerBusy) {
			busy++
		}
	}
	parts = append(parts, fmt.Sprintf("%d workers, %d busy", len(v.Workers), busy))
	byState := map[string]int{}
	for _, p := range v.Plans {
		byState[p.State]++
	}
	var ps []string
	for _, s := range []state.PlanState{state.PlanRunning, state.PlanQueued, state.PlanDone} {
		if byState[string(s)] > 0 {
			ps = append(ps, fmt.Sprintf("%d %s", byState[string(s)], s))
		}
	}
	pl := fmt.Sprintf("%d plans", len(v.Plans))
	if len(ps) > 0 {
		pl += ": " + strings.Join(ps, ", ")
	}
	// The attention's count is its title's, the line below.
	parts = append(parts, pl)
	line := fit(strings.Join(parts, " · "), w)
	out := []string{bold.Render(line)}
	if !v.Serving {
		out[0] = offline.Render(line)
		note := v.Note
		if note == "" {
			note = "orch serve is not running"
		}
		out = append(out, alert.Render(fit(clean(note), w)))
	}
	for _, p := range v.Problems {
		out = append(out, alertRow.Render(fit(clean(p), w)))
	}
	return out
}

// footer is the outcome of the last command (or the text being typed)
// and the keys.
func (m Model) footer(w int) []string {
	var out []string
	switch {
	case m.mode == typingMode:
		prompt := "type into " + m.typingTo + ": "
		m.input.SetWidth(max(1, w-ansi.StringWidth(prompt)-1))
		out = append(out, ansi.Truncate(bold.Render(prompt)+m.input.View(), w, ""))
	case m.status != "":
		st := fit(clean(m.status), w)
		if m.statusBad {
			st = alertRow.Render(st)
		}
		out = append(out, st)
	}
	var keys string
	switch m.mode {
	case typingMode:
		keys = "enter send · esc cancel"
	case screenMode:
		keys = "esc close · r read again · t type into it · ctrl+c quit"
	default:
		keys = "↑/↓ select · o/enter screen · t type · d dispatch · q quit · T timeline"
	}
	return append(out, faint.Render(fit(keys, w)))
}

// screenLines is the open worker's screen: its last lines that fit.
func (m Model) screenLines(w, n int) []string {
	out := []string{title.Render(fit(m.screenWorker+"'s screen (orch read "+m.screenWorker+")", w))}
	lines := strings.Split(strings.TrimRight(m.screen, "\n \t"), "\n")
	if keep := n - 1; len(lines) > keep {
		lines = lines[len(lines)-max(keep, 0):]
	}
	for _, l := range lines {
		out = append(out, fit(clean(l), w))
	}
	return out
}

// board lays out attention, workers, plans, the timeline and callbacks
// in n lines. The room goes in that order: the timeline and the callbacks
// get only what the workers and plans leave.
func (m Model) board(w, n int) []string {
	v := m.view
	var out []string

	// Attention first, at most a third of the room (a row says how many
	// more there are), the rest below in the plans and workers.
	if a := len(v.Attention); a > 0 && n > 1 {
		rows := min(a, max(1, n/3))
		out = append(out, alert.Render(fit(fmt.Sprintf("ATTENTION (%d)", a), w)))
		for i, al := range v.Attention[:rows] {
			if i == rows-1 && rows < a {
				out = append(out, alertRow.Render(fit(fmt.Sprintf("  … %d more below", a-rows+1), w)))
				break
			}
			out = append(out, alertRow.Render(fit(m.alertLine(al), w)))
		}
	}
	rem := n - len(out)
	nw, np, nc := len(v.Workers), len(v.Plans), len(v.Callbacks)
	wr, pr, tr, cr := nw, np, 0, 0
	if need := 2 + nw + np; need < rem {
		left := rem - need
		if want := m.timelineWant(); want > 0 && left >= 2 {
			tr = min(want, left)
			left -= tr
		}
		if nc > 0 && left >= 2 {
			cr = min(nc, left-1)
		}
	} else if need > rem {
		space := max(0, rem-2)
		wr = min(nw, max(min(1, space), space*nw/max(1, nw+np)))
		pr = min(np, space-wr)
		wr = min(nw, space-pr)
	}
	items := m.items()
	sel := m.selIndex(items)

	out = append(out, title.Render(fit(sectionTitle("WORKERS", wr, nw), w)))
	wsel := sel
	if sel >= nw {
		wsel = -1 // a plan is selected: the workers' list stays at its top
	}
	start := window(wsel, wr, nw)
	for i := start; i < start+wr; i++ {
		out = append(out, m.styleRow(m.workerLine(v.Workers[i]), w, i == sel, v.Workers[i].Alert))
	}
	out = append(out, title.Render(fit(sectionTitle("PLANS", pr, np), w)))
	start = window(sel-nw, pr, np)
	for i := start; i < start+pr; i++ {
		p := v.Plans[i]
		line := m.styleRow(m.planLine(p), w, i+nw == sel, p.Alert)
		if !p.Alert && i+nw != sel && (p.State == string(state.PlanDone) || p.State == string(state.PlanVerified) || p.State == string(state.PlanIntegrated)) {
			line = good.Render(ansi.Strip(line))
		}
		out = append(out, line)
	}
	out = append(out, m.timelineLines(w, tr)...)
	if cr > 0 {
		out = append(out, title.Render(fit("CALLBACKS", w)))
		for _, c := range v.Callbacks[:cr] {
			out = append(out, fit(c.Time.Local().Format("15:04:05")+"  "+clean(c.Line), w))
		}
	}
	return out
}

func sectionTitle(name string, shown, total int) string {
	switch {
	case total == 0:
		return name + "  none"
	case shown < total:
		return fmt.Sprintf("%s  %d of %d", name, shown, total)
	}
	return name
}

// window is the first row shown of a list of total rows when n fit and
// row sel (maybe outside the list) should be among them.
func window(sel, n, total int) int {
	if n >= total || sel < 0 || sel < n {
		return 0
	}
	return min(sel-n+1, total-n)
}

func (m Model) styleRow(s string, w int, sel, bad bool) string {
	mark := "  "
	if sel {
		mark = "› "
	}
	line := fit(mark+s, w)
	switch {
	case sel:
		return selected.Render(line)
	case bad:
		return alertRow.Render(line)
	}
	return line
}

func (m Model) alertLine(a board.Alert) string {
	who := a.Plan
	if a.Worker != "" {
		who = strings.TrimSpace(who + " " + a.Worker)
	}
	return fmt.Sprintf("! %-11s %-18s %5s  %s", a.Kind, clean(who), ago(a.Since, m.now), clean(a.Text))
}

func (m Model) workerLine(wk board.WorkerRow) string {
	plan := wk.Plan
	if plan == "" {
		plan = "-"
	}
	last := wk.Last
	if wk.Reason != "" && wk.State == string(state.WorkerDead) {
		last = wk.Reason
	}
	if wk.Headless {
		last = strings.TrimSpace("(headless) " + last)
	}
	return fmt.Sprintf("%-4s %-5s %-16s %5s  %s", wk.ID, wk.State, pad(clean(plan), 16), ago(wk.Since, m.now), clean(last))
}

func (m Model) planLine(p board.PlanRow) string {
	att := ""
	if p.Attempt > 0 {
		att = fmt.Sprintf("#%d", p.Attempt)
	}
	since := p.Since
	if since.IsZero() || p.Updated.After(since) {
		since = p.Updated
	}
	var detail []string
	switch {
	case p.Waiting != "":
		detail = append(detail, p.Waiting)
	case len(p.DependsOn) > 0:
		detail = append(detail, "after "+strings.Join(p.DependsOn, ","))
	}
	for _, d := range []string{p.Gates, p.Verdict, p.Tokens} {
		if d != "" {
			detail = append(detail, d)
		}
	}
	if t := cmp.Or(p.Reason, p.Status); t != "" {
		detail = append(detail, t)
	}
	return fmt.Sprintf("%-16s %-11s %-3s %-4s %5s  %s", pad(clean(p.Name), 16), p.State, att, p.Worker, ago(since, m.now), clean(strings.Join(detail, " · ")))
}

// ago is how long ago t was, as dur puts it. Zero is "-".
func ago(t, now time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return dur(now.Sub(t))
}

// dur is d, short: 45s, 12m, 3h05m, 2d (less than zero is 0s).
func dur(d time.Duration) string {
	d = max(d, 0)
	switch {
	case d < time.Minute:
		return fmt.Sprintf("%ds", int(d.Seconds()))
	case d < time.Hour:
		return fmt.Sprintf("%dm", int(d.Minutes()))
	case d < 24*time.Hour:
		return fmt.Sprintf("%dh%02dm", int(d.Hours()), int(d.Minutes())%60)
	}
	return fmt.Sprintf("%dd", int(d.Hours())/24)
}

// fit cuts s to w cells, marking a cut with an ellipsis.
func fit(s string, w int) string {
	if w <= 0 {
		return ""
	}
	return ansi.Truncate(s, w, "…")
}

// pad cuts s to w cells (for a column), so the columns after it stay put.
func pad(s string, w int) string {
	if ansi.StringWidth(s) <= w {
		return s
	}
	return ansi.Truncate(s, w, "…")
}

// clean makes text from a worker, a pane or a plan one line of printable
// characters: a control character (an escape sequence a status carried,
// a tab, a newline) becomes a space, so nothing but the board moves the
// cursor or colours the terminal.
func clean(s string) string {
	return strings.Map(func(r rune) rune {
		if r < 0x20 || r == 0x7f || (r >= 0x80 && r < 0xa0) || unicode.Is(unicode.Cf, r) {
			return ' ' // Cf: bidi overrides and other format characters reorder a line
		}
		return r
	}, s)
}
