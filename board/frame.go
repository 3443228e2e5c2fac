// Package board is what the live boards show — orch watch in a terminal
// and the web page of orch serve --http — and how it reaches them: the
// lead loop publishes a Frame (its record of workers and runs) after a
// save while a board follows, and when one asks, on the broker and to
// in-process followers; a board turns a frame into a View (attention
// first, a timeline of attempts, the critical path) and redraws. Nothing
// here reads state on a timer: a frame comes because the lead saved.
package board

import (
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"time"
	"unicode/utf8"

	"github.com/orch-dev/orch/event"
	"github.com/orch-dev/orch/internal/state"
)

// MaxCallbacks is how many of the latest callbacks a frame carries.
const MaxCallbacks = 20

// Frame is the lead loop's record as a board needs it, and no more: no
// handled-event index, no outbox, texts cut to MaxText, attempts without
// their usage. Seq grows with every frame of one orch serve; Serve tells
// one orch serve's frames from the next one's.
type Frame struct {
	Serve     string        `json:"serve"`
	Seq       uint64        `json:"seq"`
	Time      time.Time     `json:"time"`
	Session   string        `json:"session,omitempty"`
	Isolation string        `json:"isolation,omitempty"`
	Workers   []WorkerFrame `json:"workers"`
	Plans     []PlanFrame   `json:"plans"`
	Callbacks []Said        `json:"callbacks"`
	Rejected  int           `json:"rejected,omitempty"`
	Errors    int           `json:"errors,omitempty"`
}

// MaxText bounds each text a frame carries (a status, a reason): a board
// line shows less, and orch status has the whole.
const MaxText = 240

// WorkerFrame is one worker in a frame.
type WorkerFrame struct {
	ID       string    `json:"id"`
	State    string    `json:"state"`
	Plan     string    `json:"plan,omitempty"`
	Pane     string    `json:"pane,omitempty"`
	Host     string    `json:"host,omitempty"`
	Profile  string    `json:"profile,omitempty"`
	Headless bool      `json:"headless,omitempty"`
	Reason   string    `json:"reason,omitempty"`
	Since    time.Time `json:"since"`
	Last     string    `json:"last,omitempty"`
	LastAt   time.Time `json:"last_at,omitzero"`
}

// PlanFrame is one plan run in a frame.
type PlanFrame struct {
	Name    string    `json:"name"`
	State   string    `json:"state"`
	Attempt int       `json:"attempt,omitempty"`
	Worker  string    `json:"worker,omitempty"`
	Status  string    `json:"status,omitempty"`
	Reason  string    `json:"reason,omitempty"`
	Since   time.Time `json:"since,omitzero"`
	Updated time.Time `json:"updated,omitzero"`
	// Gates is where its acceptance gates stand ("2 gates passed"),
	// Verdict its verification ("verified", "round 1 of 3"), Tokens what
	// its current attempt's agent used (Tokens).
	Gates    string `json:"gates,omitempty"`
	Verdict  string `json:"verdict,omitempty"`
	Tokens   string `json:"tokens,omitempty"`
	VerifyOf string `json:"verify_of,omitempty"`
	Spans    []Span `json:"spans,omitempty"`
	// Def says the run carries what it was dispatched with: its
	// dependencies (DependsOn, DependsOnState) are the ones enforced.
	Def            bool     `json:"def,omitempty"`
	DependsOn      []string `json:"depends_on,omitempty"`
	DependsOnState string   `json:"depends_on_state,omitempty"`
}

// Span is one attempt of a plan on a worker; End is nil while it runs.
type Span struct {
	N       int        `json:"n"`
	Worker  string     `json:"worker"`
	Start   time.Time  `json:"start"`
	End     *time.Time `json:"end,omitempty"`
	Outcome string     `json:"outcome,omitempty"`
}

// Said is a callback the lead was given, and when.
type Said struct {
	Time time.Time `json:"time"`
	event.Callback
}

// FrameOf copies what a board shows out of st. A span's End points into
// the record: the frame is for encoding at once (Publisher.Offer does),
// not for keeping.
func FrameOf(st *state.State, said []Said, now time.Time) Frame {
	f := Frame{Time: now.UTC(), Session: st.Session, Isolation: st.Isolation,
		Workers: make([]WorkerFrame, 0, len(st.Workers)), Plans: make([]PlanFrame, 0, len(st.Plans)),
		Callbacks: slices.Clone(said), Rejected: len(st.Rejected), Errors: len(st.Errors)}
	for _, w := range st.Workers {
		f.Workers = append(f.Workers, WorkerFrame{ID: w.ID, State: string(w.State), Plan: w.Plan, Pane: w.Pane, Host: w.Host,
			Profile: w.Profile, Headless: w.Headless, Reason: cut(w.Reason), Since: w.Since, Last: cut(w.Last), LastAt: w.LastAt})
	}
	for _, p := range st.Plans {
		pf := PlanFrame{Name: p.Name, State: string(p.State), Attempt: p.Attempts, Worker: p.Worker, Status: cut(p.Status),
			Reason: cut(p.Reason), Since: p.AttemptSince, Updated: p.Updated, Gates: gates(p), VerifyOf: p.VerifyOf}
		if p.Def != nil {
			pf.Def, pf.DependsOn, pf.DependsOnState = true, p.Def.DependsOn, p.Def.DependsOnState
		}
		if v := p.Verification; v != nil {
			pf.Verdict = v.Outcome
			if pf.Verdict == "" {
				pf.Verdict = fmt.Sprintf("round %d of %d", v.Round, v.Rounds)
			}
		}
		if a := p.Current(); a != nil {
			pf.Tokens = Tokens(a.Usage)
		}
		for _, a := range p.History {
			pf.Spans = append(pf.Spans, Span{N: a.N, Worker: a.Worker, Start: a.Start, End: a.End, Outcome: a.Outcome})
		}
		f.Plans = append(f.Plans, pf)
	}
	sort.Slice(f.Plans, func(i, j int) bool { return f.Plans[i].Name < f.Plans[j].Name })
	return f
}

// cut bounds s to MaxText bytes at a rune boundary, marked.
func cut(s string) string {
	if len(s) <= MaxText {
		return s
	}
	n := MaxText - len("…")
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "…"
}

// gates says where a run's acceptance gates stand.
func gates(p *state.Run) string {
	if p.Def == nil || len(p.Def.Acceptance) == 0 {
		return ""
	}
	n := len(p.Def.Acceptance)
	status := ""
	if a := p.Current(); a != nil {
		status = a.Gates
	}
	word := "gates"
	if n == 1 {
		word = "gate"
	}
	switch {
	case p.Gates:
		return fmt.Sprintf("%d %s running", n, word)
	case status == "passed":
		return fmt.Sprintf("%d %s passed", n, word)
	case status != "":
		return fmt.Sprintf("%d %s: %s", n, word, cut(status))
	}
	return fmt.Sprintf("%d %s", n, word)
}

// SaidOf is the latest callbacks st records as sent, newest first: what a
// board shows before the loop has sent any itself.
func SaidOf(st *state.State) []Said {
	var out []Said
	for _, h := range st.Handled {
		if h.Callback != nil {
			cb := *h.Callback
			cb.Status, cb.Line = cut(cb.Status), cut(cb.Line)
			out = append(out, Said{Time: h.Time, Callback: cb})
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Time.After(out[j].Time) })
	if len(out) > MaxCallbacks {
		out = out[:MaxCallbacks]
	}
	return out
}

// Marshal encodes the frame.
func (f Frame) Marshal() []byte {
	b, _ := json.Marshal(f) // only plain data
	return b
}

// ParseFrame decodes a frame.
func ParseFrame(data []byte) (Frame, error) {
	var f Frame
	err := json.Unmarshal(data, &f)
	return f, err
}
