package watch

import (
	"cmp"
	"context"
	"errors"
	"strings"
	"time"

	"charm.land/bubbles/v2/textinput"
	tea "charm.land/bubbletea/v2"

	"github.com/orch-dev/orch/board"
	"github.com/orch-dev/orch/internal/runner"
	"github.com/orch-dev/orch/internal/state"
)

// cmdTimeout bounds one command a key runs; orch dispatch waits up to 30 s
// for the lead loop's verdict.
const cmdTimeout = 45 * time.Second

// mode is what the keys go to.
type mode int

const (
	boardMode  mode = iota
	screenMode      // a worker's screen is open
	typingMode      // a line for a worker is being typed
)

// item is one selectable row: a worker or a plan.
type item struct {
	worker bool
	id     string
}

// Model is the board's bubbletea model.
type Model struct {
	cfg  Config
	feed *feed

	view  board.View
	have  bool
	now   time.Time
	width int
	high  int

	sel  item
	mode mode
	// noTimeline hides the timeline (the T key).
	noTimeline bool
	// screen is the open worker's screen, as orch read printed it.
	screen       string
	screenWorker string
	input        textinput.Model
	typingTo     string
	// status is the last command's outcome (or what it is doing), one line.
	status    string
	statusBad bool
	// failed ends the program: Follow could not go on.
	failed error
}

// New makes the board's model; f gives it views (nil: none, for tests
// that set one with SetView).
func New(cfg Config, f *feed) Model {
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	in := textinput.New()
	in.Prompt = ""
	in.CharLimit = 4096
	st := in.Styles()
	st.Cursor.Blink = false // a steady cursor: no timer of its own
	in.SetStyles(st)
	return Model{cfg: cfg, feed: f, now: cfg.Now(), width: 80, high: 24, input: in}
}

// SetView gives the model a view, as a frame from Follow would.
func (m Model) SetView(v board.View) Model {
	m.view, m.have = v, true
	m.keepSelection()
	return m
}

// tickMsg is the display clock's second.
type tickMsg time.Time

// tick redraws the elapsed times once a second. It is a display clock,
// not a poll: nothing is read when it fires, the data only ever comes
// from Follow.
func tick() tea.Cmd {
	return tea.Tick(time.Second, func(t time.Time) tea.Msg { return tickMsg(t) })
}

// doneMsg is the outcome of a command a key ran.
type doneMsg struct {
	verb   string // read, send, dispatch
	target string // the worker or plan
	out    string
	err    error
}

// Init implements tea.Model.
func (m Model) Init() tea.Cmd {
	cmds := []tea.Cmd{tick()}
	if m.feed != nil {
		cmds = append(cmds, m.feed.next())
	}
	return tea.Batch(cmds...)
}

// Update implements tea.Model.
func (m Model) Update(msg tea.Msg) (tea.Model, tea.Cmd) {
	switch msg := msg.(type) {
	case viewMsg:
		m = m.SetView(msg.v)
		m.now = m.cfg.Now()
		return m, m.feed.next()
	case followEnded:
		m.failed = msg.err
		return m, tea.Quit
	case tickMsg:
		m.now = m.cfg.Now()
		return m, tick()
	case tea.WindowSizeMsg:
		m.width, m.high = msg.Width, msg.Height
		m.input.SetWidth(max(10, m.width-20))
		return m, nil
	case doneMsg:
		return m.done(msg), nil
	case tea.KeyPressMsg:
		return m.key(msg)
	}
	if m.mode == typingMode {
		var cmd tea.Cmd
		m.input, cmd = m.input.Update(msg)
		return m, cmd
	}
	return m, nil
}

func (m Model) key(k tea.KeyPressMsg) (tea.Model, tea.Cmd) {
	if k.String() == "ctrl+c" {
		return m, tea.Quit
	}
	switch m.mode {
	case typingMode:
		switch k.String() {
		case "esc":
			m.mode, m.typingTo = boardMode, ""
			m.input.Blur()
			return m, nil
		case "enter":
			text, to := strings.TrimSpace(m.input.Value()), m.typingTo
			m.mode, m.typingTo = boardMode, ""
			m.input.Blur()
			m.input.Reset()
			if text == "" {
				return m, nil
			}
			m.setStatus("sending to "+to+"…", false)
			args := []string{"send"}
			if m.asks(to) {
				// Its agent waits for an answer: a person answering it
				// types at once, as into the pane itself (orch send --now).
				args = append(args, "--now")
			}
			return m, m.run("send", to, append(args, "--", to, text)...)
		}
		var cmd tea.Cmd
		m.input, cmd = m.input.Update(k)
		return m, cmd
	case screenMode:
		switch k.String() {
		case "esc", "q", "o":
			m.mode, m.screen, m.screenWorker = boardMode, "", ""
		case "r":
			return m, m.run("read", m.screenWorker, "read", "--", m.screenWorker)
		case "t":
			return m.startTyping(m.screenWorker)
		}
		return m, nil
	}
	switch k.String() {
	case "q":
		return m, tea.Quit
	case "up", "k":
		m.move(-1)
	case "down", "j":
		m.move(1)
	case "home", "g":
		m.move(-1 << 30)
	case "end", "G":
		m.move(1 << 30)
	case "esc":
		m.status = ""
	case "enter":
		if m.sel.worker {
			return m.open(m.sel.id)
		}
	case "o":
		if w := m.selectedWorker(); w != "" {
			return m.open(w)
		}
		m.setStatus("o opens a worker's screen: select a worker, or a plan a worker holds", true)
	case "t":
		if w := m.selectedWorker(); w != "" {
			return m.startTyping(w)
		}
		m.setStatus("t types into a worker: select a worker, or a plan a worker holds", true)
	case "d":
		return m.dispatch()
	case "T":
		m.noTimeline = !m.noTimeline
	}
	return m, nil
}

// selectedWorker is the selected worker, or the worker of the selected plan.
func (m Model) selectedWorker() string {
	if m.sel.id == "" {
		return ""
	}
	if m.sel.worker {
		return m.sel.id
	}
	for _, p := range m.view.Plans {
		if p.Name == m.sel.id {
			return p.Worker
		}
	}
	return ""
}

// asks says whether worker's plan waits for a person's answer
// (needs-input): the one case the board types at once, mid-turn.
func (m Model) asks(worker string) bool {
	for _, p := range m.view.Plans {
		if p.Worker == worker && p.State == string(state.PlanNeedsInput) {
			return true
		}
	}
	return false
}

func (m Model) open(worker string) (tea.Model, tea.Cmd) {
	m.setStatus("reading "+worker+"'s screen…", false)
	return m, m.run("read", worker, "read", "--", worker)
}

func (m Model) startTyping(worker string) (tea.Model, tea.Cmd) {
	m.mode, m.typingTo = typingMode, worker
	m.input.Reset()
	return m, m.input.Focus()
}

// dispatch runs orch dispatch on the selected plan when the lead would
// take it: a draft, or a plan that stopped short (blocked, failed,
// conflict, refuted), which is dispatched again. A plan queued or in
// flight is refused without a call, and a finished one is left to the
// command line.
func (m Model) dispatch() (tea.Model, tea.Cmd) {
	if m.sel.worker || m.sel.id == "" {
		m.setStatus("d dispatches a plan: a draft, or one blocked, failed, timed out, in conflict or refuted", true)
		return m, nil
	}
	for _, p := range m.view.Plans {
		if p.Name != m.sel.id {
			continue
		}
		switch state.PlanState(p.State) {
		case state.PlanDraft, state.PlanBlocked, state.PlanFailed, state.PlanTimedOut, state.PlanConflict, state.PlanRefuted:
		case state.PlanQueued:
			// The lead refuses it (already queued): say what it waits for.
			m.setStatus(p.Name+" is queued already: "+cmp.Or(p.Waiting, "it waits for a worker"), true)
			return m, nil
		case state.PlanDone, state.PlanVerified, state.PlanIntegrated:
			// Its work is finished: running it again is not one key's call.
			m.setStatus(p.Name+" is "+p.State+"; to run it again: orch dispatch "+p.Name, true)
			return m, nil
		default: // in flight: the lead refuses it
			m.setStatus(p.Name+" is "+p.State+": in flight; d dispatches a draft or a plan that stopped", true)
			return m, nil
		}
		m.setStatus("dispatching "+p.Name+"…", false)
		return m, m.run("dispatch", p.Name, "dispatch", "--", p.Name)
	}
	return m, nil
}

// run runs the orch binary with args in a tea.Cmd: the board goes on
// drawing while it runs, and its outcome comes back as a doneMsg.
func (m Model) run(verb, target string, args ...string) tea.Cmd {
	r, c := m.cfg.Runner, runner.Cmd{Name: m.cfg.Orch, Args: args, Dir: m.cfg.Dir}
	return func() tea.Msg {
		ctx, cancel := context.WithTimeout(context.Background(), cmdTimeout)
		defer cancel()
		out, err := r.Run(ctx, c)
		return doneMsg{verb: verb, target: target, out: string(out), err: err}
	}
}

func (m Model) done(d doneMsg) Model {
	if d.err != nil {
		m.setStatus(d.verb+" "+d.target+": "+errLine(d.err), true)
		return m
	}
	switch d.verb {
	case "read":
		m.mode, m.screen, m.screenWorker = screenMode, d.out, d.target
		m.status = ""
	case "send":
		m.setStatus(firstLine(d.out, "sent to "+d.target), false)
	default:
		m.setStatus(firstLine(d.out, d.verb+" "+d.target+": ok"), false)
	}
	return m
}

func (m *Model) setStatus(s string, bad bool) { m.status, m.statusBad = s, bad }

// errLine is the one line of a failed command worth showing: the last
// thing it said on stderr (orch's own "orch: ..." message).
func errLine(err error) string {
	var re *runner.Error
	if errors.As(err, &re) {
		if l := lastLine(re.Stderr); l != "" {
			return strings.TrimPrefix(l, "orch: ")
		}
	}
	return err.Error()
}

func lastLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return strings.TrimSpace(lines[len(lines)-1])
}

func firstLine(s, otherwise string) string {
	s = strings.TrimSpace(s)
	if s == "" {
		return otherwise
	}
	l, _, _ := strings.Cut(s, "\n")
	return l
}

// items are the selectable rows in the order the board shows them.
func (m Model) items() []item {
	out := make([]item, 0, len(m.view.Workers)+len(m.view.Plans))
	for _, w := range m.view.Workers {
		out = append(out, item{worker: true, id: w.ID})
	}
	for _, p := range m.view.Plans {
		out = append(out, item{id: p.Name})
	}
	return out
}

func (m Model) selIndex(items []item) int {
	for i, it := range items {
		if it == m.sel {
			return i
		}
	}
	return -1
}

// move moves the selection by d rows, within the list.
func (m *Model) move(d int) {
	items := m.items()
	if len(items) == 0 {
		return
	}
	i := m.selIndex(items) + d
	m.sel = items[min(max(i, 0), len(items)-1)]
}

// keepSelection keeps the selected worker or plan selected when a new view
// reorders the rows (a plan that needs input moves to the top); if it is
// gone, the first row is.
func (m *Model) keepSelection() {
	items := m.items()
	if m.selIndex(items) < 0 {
		m.sel = item{}
		if len(items) > 0 {
			m.sel = items[0]
		}
	}
}

// View implements tea.Model.
func (m Model) View() tea.View {
	v := tea.NewView(m.Render())
	v.AltScreen = true
	return v
}
