package lead

import (
	"context"
	"fmt"
	"time"

	"github.com/orch-dev/orch/agent"
	"github.com/orch-dev/orch/event"
	"github.com/orch-dev/orch/fleet"
	"github.com/orch-dev/orch/internal/state"
)

// A worker is ready before anything is typed. An agent whose prompt orch
// knows (agent.Profile.WaitsForPrompt) starts as a busy, Starting worker;
// it becomes idle when its SessionStart hook says so (a ready event) or
// its prompt shows on screen. A dialog on screen meanwhile (a first-run
// question, a trust prompt) is reported to the lead as needs-input with
// the dialog's text and never answered by orch. The screen is read only
// when tmux says the pane's program wrote to it (fleet.WatchScreens): an
// event, not a poll.

// DefaultStartTimeout is how long an agent has to reach its prompt before
// the lead is told what its screen shows.
const DefaultStartTimeout = 45 * time.Second

// echoTimeout is how long a typed dispatch line may take to show on the
// screen before Enter is pressed anyway.
const echoTimeout = 3 * time.Second

// startCheck is the one timer armed when a worker's agent starts.
type startCheck struct {
	worker string
	since  time.Time
	echo   string // set for an echo check: the plan whose line was typed
	// Set for a submission check: the plan whose line got Enter. attempt
	// is the plan's attempt for both checks.
	submit  string
	attempt int
	idle    string // set for a settle check: the plan whose turn end waits
}

func (l *Loop) armStart(w *state.Worker) {
	if l.cfg.StartTimeout < 0 {
		return
	}
	c := startCheck{worker: w.ID, since: w.Since}
	time.AfterFunc(l.cfg.StartTimeout, func() { send(l, l.starts, c) })
}

// ready handles a ready event: the agent in w's pane is at its prompt.
func (l *Loop) ready(e event.Event) note {
	w := l.st.Worker(e.Worker)
	if w == nil {
		return l.refuse(e, "unknown worker "+e.Worker)
	}
	if !w.Starting {
		return ignoring(w.ID + " is not starting")
	}
	if e.Time.Before(w.Since) {
		return ignoring("sent before " + w.ID + "'s pane started")
	}
	// The hook may fire while a dialog is up (Claude Code's fullscreen
	// offer): the screen has the last word.
	w.Hooked = true
	if l.fleet.Panes() && w.Pane != "" {
		if kind, what := l.fleet.ReadScreen(context.Background(), w); kind == agent.ScreenDialog {
			l.after(func() { l.asks(w, what) })
			return noted("ready, but a dialog is up: " + what)
		}
	}
	l.isReady(w, "its hook said so")
	l.after(func() { l.resumeLine(context.Background(), w) })
	return noted("ready")
}

// isReady ends a worker's start: it is idle, or, if it holds a plan (its
// pane was new while it held one, or its setup ran meanwhile), busy with
// it, and the line that waited for the prompt goes in (resumeLine).
func (l *Loop) isReady(w *state.Worker, how string) {
	w.Starting, w.Asked, w.Reason, w.Hooked = false, "", "", false
	if w.State != state.WorkerDead && w.Plan == "" {
		w.State = state.WorkerIdle
	}
	l.log.Info("worker ready", "worker", w.ID, "how", how, "after", l.cfg.Now().Sub(w.Since).Round(time.Millisecond).String())
}

// resumeLine types the dispatch line that waited for w's prompt.
func (l *Loop) resumeLine(ctx context.Context, w *state.Worker) {
	p := l.st.Plans[w.Plan]
	if w.Starting || p == nil || !p.Waiting || p.Worker != w.ID || p.State != state.PlanDispatched {
		return
	}
	p.Waiting = false
	if err := l.typeLine(ctx, w, p.Name); err != nil {
		l.log.Error("type the dispatch line that waited for the prompt", "plan", p.Name, "worker", w.ID, "err", err)
	}
	if err := l.save(); err != nil {
		l.log.Error("save state", "err", err)
	}
}

// startExpired runs when a worker's agent did not reach its prompt in
// time, or when a typed line did not show or was not submitted: the
// screen says why.
func (l *Loop) startExpired(ctx context.Context, c startCheck) {
	w := l.st.Worker(c.worker)
	if w == nil || !l.fleet.Panes() || w.State == state.WorkerDead {
		return
	}
	if c.idle != "" {
		if p := l.st.Plans[c.idle]; p != nil && p.Attempts == c.attempt && p.IdleEvent != "" {
			l.settled(p, w)
		}
		return
	}
	if c.submit != "" {
		if p := l.st.Plans[c.submit]; p != nil && p.Attempts == c.attempt && p.Worker == w.ID && p.State == state.PlanDispatched && !p.Typed {
			l.log.Warn("dispatch line not submitted yet (no prompt hook); pressing Enter again", "plan", p.Name, "worker", w.ID, "enters", p.Enters)
			l.submit(ctx, w, p)
		}
		return
	}
	if c.echo != "" {
		if p := l.st.Plans[c.echo]; p != nil && p.Attempts == c.attempt && p.Typed && p.Worker == w.ID && p.State == state.PlanDispatched {
			l.log.Warn("dispatch line not seen on screen; pressing Enter anyway", "plan", p.Name, "worker", w.ID)
			l.submit(ctx, w, p)
		}
		return
	}
	if !w.Starting || !w.Since.Equal(c.since) {
		return
	}
	screen, err := l.fleet.Capture(ctx, w)
	kind, what := l.fleet.Classify(screen, err)
	// Its hook may have been missed: a prompt on screen (and no dialog)
	// is enough at the deadline.
	if kind == agent.ScreenPrompt || (kind == agent.ScreenOther && err == nil && l.fleet.PromptLate(screen)) {
		l.isReady(w, "its prompt was on screen at the start deadline")
		l.resumeLine(ctx, w)
		l.save()
		return
	}
	if what == "" {
		what = "not at its prompt after " + l.cfg.StartTimeout.String()
	}
	l.asks(w, what)
}

// asks reports once what a starting worker's screen asks.
func (l *Loop) asks(w *state.Worker, what string) {
	if w.Asked == what {
		return
	}
	w.Asked, w.Reason = what, "needs input: "+what
	l.log.Warn("worker needs input before it can start", "worker", w.ID, "screen", what)
	id := fmt.Sprintf("asks-%s-%d", w.ID, l.cfg.Now().UnixNano())
	l.st.Outbox = append(l.st.Outbox, event.NewCallback(event.CallbackNeedsInput, id, w.ID, w.ID, what, ""))
	l.flushOutbox()
}

// screenChanged reads the screen of a pane that wrote, if orch waits on
// what it shows: a starting worker's prompt or dialog, a typed line's echo,
// a plan's approval prompt.
func (l *Loop) screenChanged(ctx context.Context, pane string) {
	var w *state.Worker
	for _, c := range l.st.Workers {
		if c.Pane == pane {
			w = c
		}
	}
	if w == nil || w.State == state.WorkerDead {
		return
	}
	p := l.st.Plans[w.Plan]
	switch {
	case w.Starting:
		kind, what := l.fleet.ReadScreen(ctx, w)
		switch {
		case kind == agent.ScreenDialog:
			l.asks(w, what)
		case kind == agent.ScreenPrompt, w.Hooked:
			l.isReady(w, "its prompt is on screen")
			l.resumeLine(ctx, w)
			l.save()
			l.schedule(ctx)
		}
	case p != nil && p.Worker == w.ID && p.IdleEvent != "":
		l.settled(p, w) // the screen settled after the turn's end
		l.schedule(ctx)
	case p != nil && p.Worker == w.ID && p.Typed && p.State == state.PlanDispatched:
		if screen, err := l.fleet.Capture(ctx, w); err == nil && fleet.CountLine(screen, p.Name) > p.Echo {
			l.submit(ctx, w, p)
		}
	case p != nil && p.Worker == w.ID && p.State.Working() && l.fleet.WatchesWork():
		var cb *event.Callback
		if asks, msg, failed := l.fleet.WorkSays(ctx, w, p.Name); asks != "" {
			cb, _ = l.needsInput(event.New(event.NeedsInput, p.Name, asks, w.ID, event.Hostname()))
		} else if failed {
			cb, _ = l.agentFailed(event.New(event.Failed, p.Name, msg, w.ID, event.Hostname()))
		}
		if cb != nil {
			l.st.Outbox = append(l.st.Outbox, cb)
			l.flushOutbox()
			l.schedule(ctx)
		}
	}
}

// submit presses Enter for a typed dispatch line, unless a dialog is on
// the screen: an Enter there would answer it (often "Yes"). The plan then
// needs input instead.
func (l *Loop) submit(ctx context.Context, w *state.Worker, p *state.Run) {
	p.Typed = false
	if err := l.save(); err != nil {
		l.log.Error("save state", "err", err)
	}
	if err := l.fleet.CheckPane(ctx, w); err != nil {
		l.log.Error("submit dispatch line", "plan", p.Name, "err", err)
		return
	}
	if kind, what := l.fleet.ReadScreen(ctx, w); kind == agent.ScreenDialog {
		l.log.Warn("a dialog is on screen: no Enter", "plan", p.Name, "worker", w.ID, "dialog", what)
		if cb, _ := l.needsInput(event.New(event.NeedsInput, p.Name, what, w.ID, event.Hostname())); cb != nil {
			l.st.Outbox = append(l.st.Outbox, cb)
			l.flushOutbox()
		}
		return
	}
	if err := l.fleet.SendEnter(ctx, w); err != nil {
		l.log.Error("submit dispatch line", "plan", p.Name, "err", err)
		return
	}
	p.Enters++
	if l.cfg.Profile != nil && l.cfg.Profile.SubmitFromHook() && p.Enters < maxEnters {
		c := startCheck{worker: w.ID, submit: p.Name, attempt: p.Attempts}
		time.AfterFunc(submitTimeout, func() { send(l, l.starts, c) })
	}
}

// submitTimeout is how long an agent whose hook confirms a submitted line
// (agent.Profile.SubmitFromHook) has before Enter is pressed again, at
// most maxEnters times in all: an Enter on an empty prompt does nothing.
const (
	submitTimeout = 2 * time.Second
	maxEnters     = 3
)
