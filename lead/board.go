package lead

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

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

// boardUp starts the frames' publisher on a connection of its own: a
// board that stops reading (orch watch suspended) can slow the connection
// it reads from, and that must never be the one the loop acks on.
func (l *Loop) boardUp(ctx context.Context) error {
	nc, err := l.b.ConnectLead()
	if err != nil {
		return err
	}
	context.AfterFunc(ctx, nc.Close)
	p, err := board.NewPublisher(nc, l.prefix, board.SaidOf(l.st), l.b.Interest)
	if err != nil {
		nc.Close()
		return err
	}
	l.board, l.boardDue = p, make(chan struct{}, 1)
	go p.Run(ctx)
	if l.cfg.OnBoard != nil {
		l.cfg.OnBoard(p)
	}
	return nil
}

// frameSoon gives the boards the record as saved, if any board follows:
// at once when the last frame is MinGap old, else once MinGap has passed
// (one timer that fires once, armed only while a frame is due). Building
// a frame costs the loop a copy and an encoding; nobody watching, none.
func (l *Loop) frameSoon() {
	if l.board == nil || !l.board.Watched() {
		return
	}
	l.frameGate()
}

// frameGate offers a frame now, or arms the timer for one MinGap after
// the last (a board's ask goes through it too: asks cost at most one
// frame per MinGap).
func (l *Loop) frameGate() {
	since := time.Since(l.lastFrame) // the wall clock: a rate, not a record
	if since >= board.MinGap {
		l.offerFrame()
		return
	}
	if !l.frameArmed {
		l.frameArmed = true
		time.AfterFunc(board.MinGap-since, func() {
			select {
			case l.boardDue <- struct{}{}:
			default:
			}
		})
	}
}

// offerFrame hands the boards a frame of the record now.
func (l *Loop) offerFrame() {
	l.frameArmed, l.lastFrame = false, time.Now()
	l.board.Offer(board.FrameOf(l.st, l.board.Callbacks(), l.cfg.Now()))
}

// profile is the agent profile the fleet runs, as the ledger names it:
// the profile's name (claude, codex, one of orch.yaml's), or the program
// of a command given instead ("orch" for '/usr/bin/orch' agent).
func (l *Loop) profile() string {
	if len(l.cfg.Groups) != 1 {
		return "" // each worker of a mixed fleet has its own (fleet.Group)
	}
	return l.cfg.Groups[0].Label()
}

// noteEvent records on the worker that sent e what it last said, and
// keeps the usage e reports (an agent's turn end) on the attempt it
// belongs to: the plan the usage names (the turn's own dispatch line),
// else the event's; a usage naming neither is dropped, never guessed. An
// error (the ledger's fact not committed) means nothing was kept: the
// event comes again.
func (l *Loop) noteEvent(ctx context.Context, e event.Event) error {
	if e.Worker == "" || event.IsCommand(e.Kind) {
		return nil
	}
	l.noteLast(e)
	if e.Usage == nil {
		return nil
	}
	plan := cmp.Or(e.Usage.Plan, e.Plan)
	p := l.st.Plans[plan]
	if p == nil {
		return nil
	}
	a := p.Current()
	if a == nil || a.Worker != e.Worker || e.Time.Before(a.Start) || e.Attempt != 0 && e.Attempt != a.N {
		return nil // an earlier attempt's, or another worker's: not this one's
	}
	return l.keepUsage(ctx, p, a, *e.Usage, e.ID)
}

// keepUsage puts u on attempt a of run p, and into the ledger entry when
// the attempt was already ledgered (the turn-end hook, the process exit
// come after the harvest). A usage without counts never replaces one with
// counts (a later turn end whose record could not be read).
func (l *Loop) keepUsage(ctx context.Context, p *state.Run, a *ledger.Attempt, u telemetry.Usage, id string) error {
	if a.Usage != nil && counted(a.Usage) && !counted(&u) {
		return nil
	}
	if p.Ledger == 0 || p.LedgeredAttempt != a.N {
		a.Usage = &u
		return nil // the harvest puts it in the entry
	}
	// Ledgered already: a commit each. The same numbers again, or numbers
	// long after the attempt ended (its turn-end and exit come within
	// seconds), are not worth one: a worker cannot fill the history.
	if a.Usage != nil && sameUsage(a.Usage, &u) || a.End != nil && l.cfg.Now().Sub(*a.End) > lateUsage {
		return nil
	}
	f := ledger.Fact{Type: ledger.FactUsage, ID: p.Ledger, Plan: p.Name, Event: id, Usage: &u, Time: l.cfg.Now()}
	if err := l.harvester.Fact(ctx, f); err != nil {
		return fmt.Errorf("usage of %s: %w", p.Name, err)
	}
	a.Usage = &u
	return nil
}

// lateUsage is how long after its attempt ended a usage is still ledgered.
const lateUsage = 10 * time.Minute

// sameUsage says whether a and b record the same numbers.
func sameUsage(a, b *telemetry.Usage) bool {
	ja, _ := json.Marshal(a)
	jb, _ := json.Marshal(b)
	return bytes.Equal(ja, jb)
}

// counted says whether u holds any count.
func counted(u *telemetry.Usage) bool {
	return u.Input != nil || u.Output != nil || u.CacheRead != nil || u.CacheWrite != nil || u.CostUSD != nil
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
// transcript gave, or the result's own counts when nothing else came. The
// log is the worker's output: the result is checked and cleaned as an
// event's usage is.
func (l *Loop) headlessCost(ctx context.Context, e event.Event) error {
	p := l.st.Plans[e.Plan]
	if p == nil || e.Attempt == 0 {
		return nil
	}
	data := lastResult(filepath.Join(l.orchDir, orchdir.Logs, fleet.LogName(e.Plan, e.Attempt)))
	if data == nil {
		return nil
	}
	r := telemetry.ClaudeResult(data)
	r.Plan = e.Plan
	if err := r.Check(); err != nil {
		l.log.Warn("headless result not taken", "plan", e.Plan, "err", err)
		return nil
	}
	r.Model, r.Missing = event.Clean(r.Model), event.Clean(r.Missing)
	var a *ledger.Attempt
	for i := range p.History {
		if h := &p.History[i]; h.N == e.Attempt && h.Worker == e.Worker {
			a = h
		}
	}
	if a == nil {
		return nil
	}
	u := r
	if a.Usage != nil && counted(a.Usage) {
		u = *a.Usage
		u.CostUSD, u.Model = r.CostUSD, cmp.Or(u.Model, r.Model)
	}
	return l.keepUsage(ctx, p, a, u, e.ID)
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

// recordGates keeps a gate run's outcome on its attempt.
func recordGates(p *state.Run, status string) {
	if a := p.Current(); a != nil {
		a.Gates = status
	}
}
