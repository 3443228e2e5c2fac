// Package leadpane wakes a lead agent that has no hooks orch installs
// (Codex, Gemini CLI, aider, a Claude Code lead without orch lead install)
// by typing its callbacks into its tmux pane, only when it waits at an
// empty prompt (orch serve --lead-pane %N).
//
// How the pieces fit. Check (check.go) proves the pane at start: a pane
// id, alive, not a worker's, not orch serve's own. Run (this file) takes
// callbacks from a durable consumer of its own (package inbox, lead agent
// "pane": its position beside orch wait's and a hook lead's) and watches
// the pane's output through a tmux control-mode client: each burst of
// output is one reading of the screen (screen.go: busy, idle, typed,
// dialog). Nothing is typed but at an idle prompt; what is waiting then is
// typed as one line (line.go: escaped, cut), its echo awaited, Enter
// pressed (never into a dialog), and only when the prompt no longer holds
// the line are the callbacks acknowledged: taken. The line and where it
// stood (typed, entered) are written to .orch/lead/pane.typing.json before
// each step, so that after a crash of orch serve a line on the prompt gets
// its Enter, a line submitted is not typed twice, and one lost is typed
// again; the consumer hands back whatever was not acknowledged.
package leadpane

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/orch-dev/orch/inbox"
	"github.com/orch-dev/orch/internal/atomicfile"
	"github.com/orch-dev/orch/internal/flock"
	"github.com/orch-dev/orch/internal/orchdir"
	"github.com/orch-dev/orch/notify"
	"github.com/orch-dev/orch/tmux"
)

// Agent is the lead agent name of the pane's inbox: orch inbox --agent
// pane and orch ack --agent pane read it.
const Agent = "pane"

// Config is what Run works with.
type Config struct {
	Root   string
	Pane   string
	Tmux   *tmux.Client
	Reader Reader
	Log    *slog.Logger
	Fault  string // ORCH_FAULT, tests only
}

// Timings. Each is a one-shot timer started by an event (output, a line
// typed, an Enter pressed), never a poll.
const (
	// quiet is how long after a burst of the pane's output its screen is
	// read: one reading per burst.
	quiet = 100 * time.Millisecond
	// settle gathers callbacks that arrive together into one line.
	settle = 150 * time.Millisecond
	// echoTimeout: a typed line not on the screen by then, with the
	// prompt empty, was lost (the lead restarted) and is typed again.
	echoTimeout = 3 * time.Second
	// enterTimeout: a line still on the prompt this long after its Enter
	// gets Enter again, at most maxEnters times in all.
	enterTimeout = 2 * time.Second
	maxEnters    = 3
)

type phase string

const (
	phaseNone    phase = ""
	phaseTyped   phase = "typed"   // the text is sent, its echo awaited
	phaseEntered phase = "entered" // Enter is pressed, its taking awaited
)

// typing is the line on its way, as written to TypingPath.
type typing struct {
	Pane   string   `json:"pane"`
	Line   string   `json:"line"`
	Events []string `json:"events"`
	Phase  phase    `json:"phase"`
	Echoes int      `json:"echoes"` // the line's count on the screen before it was typed
	Enters int      `json:"enters"`
	At     time.Time
}

// TypingPath is where the line on its way is kept.
func TypingPath(orchDir string) string {
	return filepath.Join(inbox.Dir(orchDir), Agent+".typing.json")
}

type deliverer struct {
	cfg     Config
	od      string
	log     *slog.Logger
	box     *inbox.Box
	rec     inbox.Record
	held    *inbox.Batch // taken from the consumer, not yet typed in full
	cur     *typing      // the line on its way
	old     *typing      // a line from before a crash, to be decided
	done    takenRecord  // the callbacks the lead took
	gen     int          // names the current one-shot timer
	fired   bool         // the current timer fired
	gone    bool         // the pane is gone: said once
	checks  chan int
	screens chan struct{}
}

// Run types the callbacks into the pane until ctx ends. It connects to
// orch serve's broker as the lead (call it once orch serve is ready).
func Run(ctx context.Context, cfg Config) error {
	od := orchdir.Of(cfg.Root)
	d := &deliverer{cfg: cfg, od: od, log: cfg.Log.With("lead_pane", cfg.Pane), checks: make(chan int, 4), screens: make(chan struct{}, 1)}
	rec, err := inbox.LoadRecord(od, Agent)
	if errors.Is(err, inbox.ErrNotInstalled) {
		// The first --lead-pane: the pane's inbox starts now.
		if rec, err = inbox.NewRecord(Agent, time.Now()); err == nil {
			err = inbox.SaveRecord(od, rec)
		}
	}
	if err != nil {
		return fmt.Errorf("lead pane: %w", err)
	}
	d.rec = rec
	lock, _, err := flock.TryExclusive(inbox.LockPath(od, Agent))
	if err != nil {
		return fmt.Errorf("lead pane: the pane's inbox is taken by another process: %w", err)
	}
	defer lock.Unlock()
	ncfg, err := notify.LeadConfig(od)
	if err != nil {
		return fmt.Errorf("lead pane: %w", err)
	}
	nc, err := notify.Connect(ncfg, "orch-lead-pane")
	if err != nil {
		return fmt.Errorf("lead pane: %w", err)
	}
	defer nc.Close()
	d.done = loadTaken(od)
	if d.box, err = inbox.Open(ctx, nc, ncfg.Prefix, rec); err == nil {
		// What the last orch serve held comes back now: everything stored
		// since the last callback the lead took, those it took dropped by
		// id. (A position by sequence alone is not enough: a broker killed
		// with SIGKILL may lose the stream's last messages, and the lead
		// loop's copies of them are then numbered below it.)
		if d.done.Last.IsZero() {
			_, err = d.box.Rewind(ctx)
		} else {
			err = d.box.RewindTo(ctx, d.done.Last)
		}
	}
	if err != nil {
		return fmt.Errorf("lead pane: %w", err)
	}
	if floor, held, waiting, err := d.box.Position(ctx); err == nil {
		d.log.Debug("lead pane: inbox", "floor", floor, "held", held, "waiting", waiting)
	}
	d.old = loadTyping(od, cfg.Pane)
	return d.loop(ctx, nc)
}

func loadTyping(od, pane string) *typing {
	data, err := os.ReadFile(TypingPath(od))
	if err != nil {
		return nil
	}
	var t typing
	if json.Unmarshal(data, &t) != nil || t.Pane != pane || t.Phase == phaseNone {
		os.Remove(TypingPath(od)) // another pane's, or unreadable: nothing to decide
		return nil
	}
	return &t
}

type taken struct {
	bt  *inbox.Batch
	err error
}

func (d *deliverer) loop(ctx context.Context, nc *nats.Conn) error {
	batches := make(chan taken, 1)
	waiting := false
	go d.watch(ctx)
	d.poke() // a quiet idle prompt writes nothing: read it once now
	d.log.Info("lead pane: typing callbacks into it when its prompt is idle", "consumer", d.rec.Consumer)
	for {
		if d.held == nil && !waiting && !nc.IsClosed() {
			waiting = true
			go func() {
				bt, err := d.box.Take(ctx, true, settle)
				if err != nil && ctx.Err() == nil && !nc.IsClosed() {
					// One pause before taking again (a broker that
					// refuses at once is not asked in a tight loop).
					t := time.NewTimer(time.Second)
					select {
					case <-t.C:
					case <-ctx.Done():
						t.Stop()
					}
				}
				batches <- taken{bt, err}
			}()
		}
		select {
		case <-ctx.Done():
			if d.held != nil {
				d.held.Nak()
			}
			return nil
		case t := <-batches:
			waiting = false
			if t.err != nil {
				if ctx.Err() != nil {
					return nil
				}
				if nc.IsClosed() {
					return fmt.Errorf("lead pane: %w", t.err)
				}
				d.log.Warn("lead pane: take callbacks", "err", t.err)
				continue
			}
			d.held = t.bt
			d.dropDone(ctx)
		case <-d.screens:
		case g := <-d.checks:
			if g != d.gen {
				continue // an earlier timer
			}
			d.fired = true
		}
		d.step(ctx)
	}
}

// poke asks for a reading of the screen.
func (d *deliverer) poke() {
	select {
	case d.screens <- struct{}{}:
	default: // one is due: it covers this
	}
}

// arm starts the one-shot timer of the current step.
func (d *deliverer) arm(after time.Duration) {
	d.gen++
	d.fired = false
	g := d.gen
	time.AfterFunc(after, func() {
		select {
		case d.checks <- g:
		default:
		}
	})
}

// watch reads the pane's screen after each burst of its output, seen by
// a control-mode client attached to its session.
func (d *deliverer) watch(ctx context.Context) {
	var mu sync.Mutex
	armed := false
	onOutput := func(pane string) {
		if pane != d.cfg.Pane {
			return
		}
		mu.Lock()
		defer mu.Unlock()
		if armed {
			return // the reading due covers this output
		}
		armed = true
		time.AfterFunc(quiet, func() {
			mu.Lock()
			armed = false
			mu.Unlock()
			d.poke()
		})
	}
	for tries := 0; ; tries++ {
		info, err := d.cfg.Tmux.Info(ctx, d.cfg.Pane)
		if err == nil {
			start := time.Now()
			err = d.cfg.Tmux.WatchOutput(ctx, info.Session, onOutput)
			if time.Since(start) > time.Minute {
				tries = 0
			}
		}
		if ctx.Err() != nil {
			return
		}
		d.poke() // the reading says whether the pane is gone
		if errors.Is(err, tmux.ErrNoPane) || tries == 6 {
			d.log.Error("lead pane: no longer watched; callbacks wait in its inbox (orch inbox --agent pane): give orch serve --lead-pane a live pane", "err", err)
			return
		}
		// Attach again after a one-shot pause (the session moved or the
		// server restarts): a bounded reconnect, not a poll.
		select {
		case <-ctx.Done():
			return
		case <-time.After(time.Second << tries):
		}
	}
}

// step reads the screen and moves the line on its way one step.
func (d *deliverer) step(ctx context.Context) {
	if d.held == nil {
		return
	}
	scr, ok := d.read(ctx)
	if !ok {
		return
	}
	d.log.Debug("lead pane: screen", "kind", scr.Kind.String(), "held", len(d.held.Items), "phase", d.phaseName(), "last", lastLine(scr.Joined))
	if d.old != nil && d.cur == nil {
		d.decideOld(ctx, scr)
		if d.held == nil {
			return
		}
	}
	switch {
	case d.cur == nil:
		if scr.Kind == Idle {
			d.typeLine(ctx, scr)
		}
	case d.cur.Phase == phaseTyped:
		switch {
		case scr.Kind == Dialog:
			d.log.Warn("lead pane: a dialog came up over the typed line: no Enter", "dialog", scr.What)
		case scr.Holds(d.cur.Line, d.cur.Echoes):
			d.enter(ctx, scr)
		case d.fired && scr.Kind == Idle:
			// The line never showed and the prompt is empty: it was lost
			// (the lead restarted meanwhile). Typed again.
			d.log.Warn("lead pane: the typed line did not show; typing it again")
			d.cur = nil
			d.typeLine(ctx, scr)
		}
	case d.cur.Phase == phaseEntered:
		if !scr.Holds(d.cur.Line, d.cur.Echoes) {
			d.taken(ctx, len(d.cur.Events))
			return
		}
		if d.fired && scr.Kind != Dialog && d.cur.Enters < maxEnters {
			d.log.Warn("lead pane: the line is still on the prompt; pressing Enter again", "enters", d.cur.Enters)
			d.enter(ctx, scr)
		}
	}
}

// read captures the pane and says what it shows; false when it cannot be
// read (gone, dead: the line waits for a live prompt).
func (d *deliverer) read(ctx context.Context) (Screen, bool) {
	info, err := d.cfg.Tmux.Info(ctx, d.cfg.Pane)
	if err != nil || info.Dead {
		if !d.gone {
			d.gone = true
			d.log.Warn("lead pane: not live; callbacks wait for its next idle prompt", "dead", info.Dead, "err", err)
		}
		return Screen{}, false
	}
	d.gone = false
	rows, err := d.cfg.Tmux.CaptureRows(ctx, d.cfg.Pane)
	if err != nil {
		return Screen{}, false
	}
	joined, err := d.cfg.Tmux.Capture(ctx, d.cfg.Pane, 0)
	if err != nil {
		return Screen{}, false
	}
	return d.cfg.Reader.Read(rows, joined, info.CursorY), true
}

// decideOld settles a line a crashed orch serve had on its way: still on
// the prompt, it gets its Enter; submitted, its callbacks are taken; lost,
// they are typed again.
func (d *deliverer) decideOld(ctx context.Context, scr Screen) {
	old := d.old
	d.old = nil
	n := 0
	for n < len(d.held.Items) && slices.Contains(old.Events, d.held.Items[n].Callback.Event) {
		n++
	}
	switch {
	case n == 0:
		d.log.Info("lead pane: the line of the last run was taken already")
		d.clearTyping()
	case scr.Holds(old.Line, old.Echoes):
		d.log.Info("lead pane: the line of the last run is on the prompt; pressing Enter")
		old.Events = old.Events[:0]
		for _, it := range d.held.Items[:n] {
			old.Events = append(old.Events, it.Callback.Event)
		}
		d.cur = old
		d.enter(ctx, scr)
	case old.Phase == phaseEntered:
		d.log.Info("lead pane: the line of the last run was submitted", "callbacks", n)
		d.taken(ctx, n)
	default:
		d.log.Info("lead pane: the line of the last run never reached the prompt; typing it again")
		d.clearTyping()
	}
}

// typeLine types what is waiting, as one line, at the idle prompt.
func (d *deliverer) typeLine(ctx context.Context, scr Screen) {
	if more, err := d.box.Take(ctx, false, 0); err == nil {
		d.held.Merge(more) // what came since the batch was taken
		d.dropDone(ctx)
		if d.held == nil {
			return
		}
	}
	line, n := Join(d.held.Lines())
	t := &typing{Pane: d.cfg.Pane, Line: line, Phase: phaseTyped, Echoes: Count(scr.Joined, line), At: time.Now().UTC()}
	for _, it := range d.held.Items[:n] {
		t.Events = append(t.Events, it.Callback.Event)
	}
	if err := d.save(t); err != nil {
		d.log.Error("lead pane: record the line before typing it; not typed", "err", err)
		return
	}
	d.cur = t
	if err := d.cfg.Tmux.SendText(ctx, d.cfg.Pane, line); err != nil {
		d.log.Error("lead pane: type", "err", err)
	}
	d.log.Info("lead pane: typed", "callbacks", n, "line", line)
	d.fault("lead-pane-after-type")
	d.arm(echoTimeout)
}

// enter submits the typed line, unless a dialog is up.
func (d *deliverer) enter(ctx context.Context, scr Screen) {
	if scr.Kind == Dialog {
		return
	}
	d.cur.Phase = phaseEntered
	d.cur.Enters++
	if err := d.save(d.cur); err != nil {
		d.log.Error("lead pane: record the Enter before pressing it; not pressed", "err", err)
		return
	}
	if err := d.cfg.Tmux.SendEnter(ctx, d.cfg.Pane); err != nil {
		d.log.Error("lead pane: Enter", "err", err)
	}
	d.fault("lead-pane-after-enter")
	d.arm(enterTimeout)
}

// taken acknowledges the first n callbacks held: the lead has them.
func (d *deliverer) taken(ctx context.Context, n int) {
	rest := d.held.Split(n)
	if err := inbox.AddTaken(d.od, Agent, d.held.Items); err != nil {
		d.log.Error("lead pane: record the callbacks taken", "err", err)
	}
	if err := d.held.Ack(context.WithoutCancel(ctx)); err != nil {
		d.log.Error("lead pane: acknowledge (they may be typed once more)", "err", err)
	}
	events := make([]string, 0, n)
	for _, it := range d.held.Items {
		events = append(events, it.Callback.Event)
	}
	d.log.Info("lead pane: taken", "callbacks", n, "events", events)
	d.done.add(d.held.Items)
	if err := d.done.save(d.od); err != nil {
		d.log.Error("lead pane: record the callbacks taken", "err", err)
	}
	d.held, d.cur = rest, nil
	d.gen++ // the step's timer is moot
	d.clearTyping()
	if d.held != nil {
		d.poke() // the rest at the next idle prompt
	}
}

func (d *deliverer) save(t *typing) error {
	data, _ := json.MarshalIndent(t, "", "  ")
	return atomicfile.Write(TypingPath(d.od), append(data, '\n'), 0o600)
}

func (d *deliverer) clearTyping() {
	if err := os.Remove(TypingPath(d.od)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		d.log.Error("lead pane: remove the typing record", "err", err)
	}
}

// fault kills orch serve at the named point if ORCH_FAULT asks for it.
func (d *deliverer) fault(point string) {
	if d.cfg.Fault == point {
		d.log.Warn("fault injection: SIGKILL", "point", point)
		syscall.Kill(os.Getpid(), syscall.SIGKILL)
		select {}
	}
}

func (d *deliverer) phaseName() string {
	if d.cur == nil {
		return "none"
	}
	return string(d.cur.Phase)
}

func lastLine(screen string) string {
	lines := strings.Split(strings.TrimRight(screen, "\n"), "\n")
	return strings.TrimRight(lines[len(lines)-1], " ")
}

// dropDone drops from what is held the callbacks the lead took already
// (copies handed out again after a restart).
func (d *deliverer) dropDone(ctx context.Context) {
	if d.held == nil {
		return
	}
	if n := d.held.Drop(ctx, func(it inbox.Item) bool { return slices.Contains(d.done.Events, it.Callback.Event) }); n > 0 {
		d.log.Info("lead pane: dropped copies of callbacks taken already", "callbacks", n)
	}
	if len(d.held.Items) == 0 {
		d.held = nil
	}
}

// maxDone bounds the ids kept of callbacks taken.
const maxDone = 1000

// takenRecord is what the lead took: the latest stream time and the
// latest ids, in .orch/lead/pane.done.json.
type takenRecord struct {
	Last   time.Time `json:"last"`
	Events []string  `json:"events"`
}

func donePath(od string) string { return filepath.Join(inbox.Dir(od), Agent+".done.json") }

// Files are the files of the pane's inbox besides its record: the line on
// its way and the callbacks taken (orch lead uninstall pane removes them).
func Files(od string) []string { return []string{TypingPath(od), donePath(od)} }

func loadTaken(od string) takenRecord {
	var r takenRecord
	if data, err := os.ReadFile(donePath(od)); err == nil {
		json.Unmarshal(data, &r) // unreadable: start from the consumer's own position
	}
	return r
}

func (r *takenRecord) add(items []inbox.Item) {
	for _, it := range items {
		r.Events = append(r.Events, it.Callback.Event)
		if it.Time.After(r.Last) {
			r.Last = it.Time
		}
	}
	if len(r.Events) > maxDone {
		r.Events = r.Events[len(r.Events)-maxDone:]
	}
}

func (r takenRecord) save(od string) error {
	data, _ := json.MarshalIndent(r, "", "  ")
	return atomicfile.Write(donePath(od), append(data, '\n'), 0o600)
}
