package lead

import (
	"bytes"
	"context"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/orch-dev/orch/board"
	"github.com/orch-dev/orch/event"
	"github.com/orch-dev/orch/fleet"
	"github.com/orch-dev/orch/internal/orchdir"
	"github.com/orch-dev/orch/internal/state"
	"github.com/orch-dev/orch/ledger"
	"github.com/orch-dev/orch/telemetry"
)

// The loop's side of the boards (package board) and of the record they
// and orch stats read: each attempt's history, each worker's last event,
// the agents' own token counts.

// boardUp starts the frames' publisher on the loop's connection and
// offers the first frame, so a board that asks gets the record at once.
func (l *Loop) boardUp(ctx context.Context) error {
	p, err := board.NewPublisher(l.nc, l.prefix, board.SaidOf(l.st))
	if err != nil {
		return err
	}
	l.board = p
	go p.Run(ctx)
	l.offerFrame()
	if l.cfg.OnBoard != nil {
		l.cfg.OnBoard(p)
	}
	return nil
}

// offerFrame hands the boards the record as saved. It costs the loop a
// copy and an encoding; sending is the publisher's.
func (l *Loop) offerFrame() {
	if l.board != nil {
		l.board.Offer(board.FrameOf(l.st, l.board.Callbacks(), l.cfg.Now()))
	}
}

// profile is the agent profile the fleet runs, as the ledger names it:
// the profile's name (claude, codex) or its command's program.
func (l *Loop) profile() string {
	f := strings.Fields(l.cfg.Agent)
	if len(f) == 0 {
		return ""
	}
	return filepath.Base(f[0])
}

// noteEvent records on the worker that sent e what it last said, and
// keeps the usage e reports (an agent's turn end) on the attempt it
// belongs to: the plan the usage names (the turn's own dispatch line),
// else the event's.
func (l *Loop) noteEvent(ctx context.Context, e event.Event) {
	if e.Worker == "" || event.IsCommand(e.Kind) {
		return
	}
	l.noteLast(e)
	if e.Usage == nil {
		return
	}
	plan := e.Usage.Plan
	if plan == "" {
		plan = e.Plan
		if plan == "" {
			if w := l.st.Worker(e.Worker); w != nil {
				plan = w.Plan
			}
		}
	}
	p := l.st.Plans[plan]
	if p == nil {
		return
	}
	var a *ledger.Attempt
	for i := len(p.History) - 1; i >= 0; i-- {
		if p.History[i].Worker == e.Worker {
			a = &p.History[i]
			break
		}
	}
	if a == nil || a.N != p.Attempts || e.Time.Before(a.Start) {
		return // an earlier attempt's, or another worker's: not this one's
	}
	u := *e.Usage
	a.Usage, p.Usage = &u, &u
	if p.Ledger == 0 {
		return // the harvest puts it in the entry
	}
	f := ledger.Fact{Type: ledger.FactUsage, ID: p.Ledger, Event: e.ID, Usage: &u, Time: l.cfg.Now()}
	if err := l.harvester.Fact(ctx, f, p.Name); err != nil {
		// Telemetry is never worth an event: it is logged and let go.
		l.log.Warn("usage not ledgered", "plan", p.Name, "err", err)
	}
}

// noteLast records on e's worker what it last said, for the boards.
func (l *Loop) noteLast(e event.Event) {
	if w := l.st.Worker(e.Worker); w != nil && e.Worker != "" {
		w.Last, w.LastAt = strings.TrimSpace(string(e.Kind)+" "+e.Plan), e.Time.UTC()
	}
}

// headlessCost takes what a headless run's agent stated it cost from the
// end of its output (claude -p --output-format json prints a result
// object last) onto the attempt that ran: the cost beside the tokens its
// transcript gave, or the result's own counts when nothing else came.
func (l *Loop) headlessCost(ctx context.Context, e event.Event) {
	p := l.st.Plans[e.Plan]
	if p == nil || e.Attempt == 0 {
		return
	}
	data := lastResult(filepath.Join(l.orchDir, orchdir.Logs, fleet.LogName(e.Plan, e.Attempt)))
	if data == nil {
		return
	}
	r := telemetry.ClaudeResult(data)
	r.Plan = e.Plan
	var a *ledger.Attempt
	for i := range p.History {
		if h := &p.History[i]; h.N == e.Attempt && h.Worker == e.Worker {
			a = h
		}
	}
	if a == nil {
		return
	}
	u := r
	if a.Usage != nil && a.Usage.Input != nil {
		u = *a.Usage
		u.CostUSD, u.Model = r.CostUSD, firstNonEmpty(u.Model, r.Model)
		if u.Missing == "" && r.CostUSD == nil {
			u.Missing = r.Missing
		}
	}
	a.Usage = &u
	if p.Attempts != e.Attempt {
		return
	}
	p.Usage = &u
	if p.Ledger == 0 {
		return
	}
	f := ledger.Fact{Type: ledger.FactUsage, ID: p.Ledger, Event: e.ID, Usage: &u, Time: l.cfg.Now()}
	if err := l.harvester.Fact(ctx, f, p.Name); err != nil {
		l.log.Warn("cost not ledgered", "plan", p.Name, "err", err)
	}
}

// lastResult is the last line of a headless log that is a JSON result
// object, from the log's last 256 KiB; nil when there is none.
func lastResult(path string) []byte {
	f, err := os.Open(path)
	if err != nil {
		return nil
	}
	defer f.Close()
	const tail = 256 << 10
	if fi, err := f.Stat(); err == nil && fi.Size() > tail {
		f.Seek(fi.Size()-tail, io.SeekStart)
	}
	data, _ := io.ReadAll(io.LimitReader(f, tail))
	lines := bytes.Split(data, []byte("\n"))
	for i := len(lines) - 1; i >= 0; i-- {
		line := bytes.TrimSpace(lines[i])
		if bytes.HasPrefix(line, []byte("{")) && bytes.Contains(line, []byte(`"type":"result"`)) {
			return line
		}
	}
	return nil
}

func firstNonEmpty(s ...string) string {
	for _, x := range s {
		if x != "" {
			return x
		}
	}
	return ""
}

// recordGates keeps a gate run's outcome on the run and its attempt.
func recordGates(p *state.Run, status string) {
	p.GateStatus = status
	if n := len(p.History); n > 0 && p.History[n-1].N == p.Attempts {
		p.History[n-1].Gates = status
	}
}
