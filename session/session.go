// Package session is what orch knows of an agent's session in a worker:
// when its agent is ready for a line, how the dispatch line is typed and
// submitted, whether a dispatch was acknowledged, and what the agent's
// own hooks (needs-input, idle, failed, ready) and its screen mean for the
// plan it works on.
//
// How the pieces fit. The lead loop makes one Sessions from a Config and
// calls it on its own goroutine, with the record (internal/state) it
// holds: the handlers (Ready, NeedsInput, Idle, Failed) from its event
// handling, TypeLine from its dispatch, ScreenChanged when fleet reports
// a pane's output, Expired when one of its one-shot deadlines fires (on
// Checks, which the loop selects on: an agent's start, a typed line's echo
// or submission, a turn end that waits for the screen, a dispatch's
// acknowledgement), and Resume at start for what was under way. It reads
// and types through package fleet and changes the records it is given;
// what only the loop does it asks for through the Config's functions:
// save the record, tell the lead (the outbox), run work once the current
// event is recorded, and schedule.
package session

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/orch-dev/orch/agent"
	"github.com/orch-dev/orch/event"
	"github.com/orch-dev/orch/fleet"
	"github.com/orch-dev/orch/harvest"
	"github.com/orch-dev/orch/internal/state"
	"github.com/orch-dev/orch/plans"
	"github.com/orch-dev/orch/tmux"
	"github.com/orch-dev/orch/verify"
)

// Config is what a Sessions works with.
type Config struct {
	// Fleet runs the workers; each worker's agent profile is its own
	// (fleet.Profile).
	Fleet *fleet.Fleet
	// StartTimeout is how long an agent has to reach its prompt before the
	// lead is told what its screen shows (negative: no check);
	// AckTimeout how long a worker has to say "started" after a dispatch
	// before the line is re-sent once, then the plan fails (0 or negative:
	// no check).
	StartTimeout, AckTimeout time.Duration
	Log                      *slog.Logger
	Now                      func() time.Time
	WorkDir                  func(worker string) string // where the worker edits
	// The loop's part.
	Save     func() error                // save the record
	Tell     func(cb *event.Callback)    // add cb (if not nil) to the outbox, publish it, save the record
	After    func(fn func(*state.State)) // run fn once the current event is recorded, with the record then
	Schedule func(ctx context.Context)   // hand ready plans to idle workers
}

// Sessions is the agents' sessions of one lead loop.
type Sessions struct {
	cfg     Config
	fleet   *fleet.Fleet
	log     *slog.Logger
	checks  chan Check
	stopped chan struct{}
}

// New makes the sessions of a lead loop.
func New(cfg Config) *Sessions {
	return &Sessions{cfg: cfg, fleet: cfg.Fleet, log: cfg.Log, checks: make(chan Check, 64), stopped: make(chan struct{})}
}

// Close lets every deadline still out go without being delivered.
func (s *Sessions) Close() { close(s.stopped) }

// A Check is a one-shot deadline that fired, to be passed back to Expired.
type Check struct {
	start *startCheck
	ack   *ackCheck
}

// Checks delivers the deadlines that fired.
func (s *Sessions) Checks() <-chan Check { return s.checks }

func (s *Sessions) send(c Check) {
	select {
	case s.checks <- c:
	case <-s.stopped:
	}
}

// Expired handles a deadline that fired.
func (s *Sessions) Expired(ctx context.Context, st *state.State, c Check) {
	if c.ack != nil {
		s.ackExpired(ctx, st, *c.ack)
	} else if c.start != nil {
		s.startExpired(ctx, st, *c.start)
	}
}

// Ready handles a ready event (the agent's SessionStart hook).
func (s *Sessions) Ready(st *state.State, e event.Event) state.Note { return s.ready(st, e) }

// NeedsInput handles a needs-input event.
func (s *Sessions) NeedsInput(st *state.State, e event.Event) (*event.Callback, state.Note) {
	return s.needsInput(st, e)
}

// Idle handles an idle event (the agent's turn ended).
func (s *Sessions) Idle(st *state.State, e event.Event) (*event.Callback, state.Note) {
	return s.idle(st, e)
}

// Failed handles a failed event (the agent stopped on an error).
func (s *Sessions) Failed(st *state.State, e event.Event) (*event.Callback, state.Note) {
	return s.agentFailed(st, e)
}

// Holder is the plan a hook's event is about and the worker that holds
// it, when that worker holds it and still works on it (an event that names
// no plan means the worker's); a non-empty note says why the event has no
// effect.
func (s *Sessions) Holder(st *state.State, e *event.Event) (*state.Run, *state.Worker, state.Note) {
	return s.hookHolder(st, e)
}

// ScreenChanged reads the screen of a pane that wrote, if what it shows
// matters now (screenChanged).
func (s *Sessions) ScreenChanged(ctx context.Context, st *state.State, pane string) {
	s.screenChanged(ctx, st, pane)
}

// TypeLine types plan's dispatch line into w's pane (typeLine) and arms
// the acknowledgement deadline.
func (s *Sessions) TypeLine(ctx context.Context, st *state.State, w *state.Worker, plan string) error {
	if err := s.typeLine(ctx, st, w, plan); err != nil {
		return err
	}
	if p := st.Plans[plan]; p != nil {
		s.armAck(p, false)
	}
	return nil
}

// Started arms the start deadline of workers whose agent is starting.
func (s *Sessions) Started(ws []*state.Worker) {
	for _, w := range ws {
		s.armStart(w)
	}
}

// Resume takes up what was under way when the last lead loop stopped:
// each dispatch gets its acknowledgement deadline back, a starting agent
// its start deadline (and its screen is read once: a dialog writes
// nothing more), a typed line its echo deadline, a turn end that waited
// for the screen is decided.
func (s *Sessions) Resume(ctx context.Context, st *state.State) {
	for _, p := range st.Plans {
		if p.State == state.PlanDispatched {
			s.armAck(p, p.Resent)
		}
	}
	for _, w := range st.Workers {
		if w.Starting && w.Pane != "" && s.fleet.Panes() {
			s.armStart(w)
			s.screenChanged(ctx, st, w.Pane)
		}
		if p := st.Plans[w.Plan]; p != nil && p.Worker == w.ID && p.State == state.PlanDispatched && p.Typed && w.Pane != "" {
			s.armEcho(w, p) // typed before the restart, Enter not yet pressed
		}
		if p := st.Plans[w.Plan]; p != nil && p.Worker == w.ID && p.IdleEvent != "" {
			s.settled(st, p, w) // a turn end that waited for the screen
		}
	}
}

func (s *Sessions) refuse(st *state.State, e event.Event, reason string) state.Note {
	s.log.Warn("refused", "kind", e.Kind, "plan", e.Plan, "worker", e.Worker, "event", e.ID, "reason", reason)
	return st.Refuse(e, reason, s.cfg.Now())
}

func (s *Sessions) holder(st *state.State, e event.Event) (*state.Run, *state.Worker, string) {
	return st.Holder(e.Plan, e.Worker, e.Time)
}

func (s *Sessions) free(st *state.State, w *state.Worker) { w.Free(s.cfg.Now()) }

func (s *Sessions) verificationFailed(st *state.State, p *state.Run, cb *event.Callback) *event.Callback {
	return verify.Failed(st, p, cb, s.cfg.Now())
}

// record is an event the lead makes about plan and worker, now.
func (s *Sessions) record(kind event.Kind, id, plan, worker, status string) event.Event {
	return event.Record(kind, id, plan, worker, status, s.cfg.Now())
}

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

func (s *Sessions) armStart(w *state.Worker) {
	if s.cfg.StartTimeout < 0 {
		return
	}
	c := startCheck{worker: w.ID, since: w.Since}
	time.AfterFunc(s.cfg.StartTimeout, func() { s.send(Check{start: &c}) })
}

// ready handles a ready event: the agent in w's pane is at its prompt.
func (s *Sessions) ready(st *state.State, e event.Event) state.Note {
	w := st.Worker(e.Worker)
	if w == nil {
		return s.refuse(st, e, "unknown worker "+e.Worker)
	}
	if !w.Starting {
		return state.Ignoring(w.ID + " is not starting")
	}
	if e.Time.Before(w.Since) {
		return state.Ignoring("sent before " + w.ID + "'s pane started")
	}
	// The hook may fire while a dialog is up (Claude Code's fullscreen
	// offer): the screen has the last word.
	w.Hooked = true
	if s.fleet.Panes() && w.Pane != "" {
		if kind, what := s.fleet.ReadScreen(context.Background(), w); kind == agent.ScreenDialog {
			id := w.ID
			s.cfg.After(func(st *state.State) {
				if w := st.Worker(id); w != nil {
					s.asks(st, w, what)
				}
			})
			return state.Noted("ready, but a dialog is up: " + what)
		}
	}
	s.isReady(st, w, "its hook said so")
	id := w.ID
	s.cfg.After(func(st *state.State) {
		if w := st.Worker(id); w != nil {
			s.resumeLine(context.Background(), st, w)
		}
	})
	return state.Noted("ready")
}

// isReady ends a worker's start: it is idle, or, if it holds a plan (its
// pane was new while it held one, or its setup ran meanwhile), busy with
// it, and the line that waited for the prompt goes in (resumeLine).
func (s *Sessions) isReady(st *state.State, w *state.Worker, how string) {
	w.Starting, w.Asked, w.Reason, w.Hooked = false, "", "", false
	if w.State != state.WorkerDead && w.Plan == "" {
		w.State = state.WorkerIdle
	}
	s.log.Info("worker ready", "worker", w.ID, "how", how, "after", s.cfg.Now().Sub(w.Since).Round(time.Millisecond).String())
}

// resumeLine types the dispatch line that waited for w's prompt.
func (s *Sessions) resumeLine(ctx context.Context, st *state.State, w *state.Worker) {
	p := st.Plans[w.Plan]
	if w.Starting || p == nil || !p.Waiting || p.Worker != w.ID || p.State != state.PlanDispatched {
		return
	}
	p.Waiting = false
	if err := s.typeLine(ctx, st, w, p.Name); err != nil {
		s.log.Error("type the dispatch line that waited for the prompt", "plan", p.Name, "worker", w.ID, "err", err)
	}
	if err := s.cfg.Save(); err != nil {
		s.log.Error("save state", "err", err)
	}
}

// startExpired runs when a worker's agent did not reach its prompt in
// time, or when a typed line did not show or was not submitted: the
// screen says why.
func (s *Sessions) startExpired(ctx context.Context, st *state.State, c startCheck) {
	w := st.Worker(c.worker)
	if w == nil || !s.fleet.Panes() || w.State == state.WorkerDead {
		return
	}
	if c.idle != "" {
		if p := st.Plans[c.idle]; p != nil && p.Attempts == c.attempt && p.IdleEvent != "" {
			s.settled(st, p, w)
		}
		return
	}
	if c.submit != "" {
		if p := st.Plans[c.submit]; p != nil && p.Attempts == c.attempt && p.Worker == w.ID && p.State == state.PlanDispatched && !p.Typed {
			s.log.Warn("dispatch line not submitted yet (no prompt hook); pressing Enter again", "plan", p.Name, "worker", w.ID, "enters", p.Enters)
			s.submit(ctx, st, w, p)
		}
		return
	}
	if c.echo != "" {
		if p := st.Plans[c.echo]; p != nil && p.Attempts == c.attempt && p.Typed && p.Worker == w.ID && p.State == state.PlanDispatched {
			s.log.Warn("dispatch line not seen on screen; pressing Enter anyway", "plan", p.Name, "worker", w.ID)
			s.submit(ctx, st, w, p)
		}
		return
	}
	if !w.Starting || !w.Since.Equal(c.since) {
		return
	}
	screen, err := s.fleet.Capture(ctx, w)
	if errors.Is(err, tmux.ErrNotAnswering) {
		return // the worker asks nothing: tmux does not answer, and the loop decides (its stuck.go)
	}
	kind, what := s.fleet.Classify(w.ID, screen, err)
	// Its hook may have been missed: a prompt on screen (and no dialog)
	// is enough at the deadline.
	if kind == agent.ScreenPrompt || (kind == agent.ScreenOther && err == nil && s.fleet.PromptLate(w.ID, screen)) {
		s.isReady(st, w, "its prompt was on screen at the start deadline")
		s.resumeLine(ctx, st, w)
		s.cfg.Save()
		return
	}
	if what == "" {
		what = "not at its prompt after " + s.cfg.StartTimeout.String()
	}
	s.asks(st, w, what)
}

// asks reports once what a starting worker's screen asks.
func (s *Sessions) asks(st *state.State, w *state.Worker, what string) {
	if w.Asked == what {
		return
	}
	w.Asked, w.Reason = what, "needs input: "+what
	s.log.Warn("worker needs input before it can start", "worker", w.ID, "screen", what)
	id := fmt.Sprintf("asks-%s-%d", w.ID, s.cfg.Now().UnixNano())
	s.cfg.Tell(event.NewCallback(event.CallbackNeedsInput, id, w.ID, w.ID, what, ""))
}

// screenChanged reads the screen of a pane that wrote, if orch waits on
// what it shows: a starting worker's prompt or dialog, a typed line's echo,
// a plan's approval prompt.
func (s *Sessions) screenChanged(ctx context.Context, st *state.State, pane string) {
	var w *state.Worker
	for _, c := range st.Workers {
		if c.Pane == pane && c.Remote == "" { // a host's pane ids are its own tmux server's
			w = c
		}
	}
	if w == nil || w.State == state.WorkerDead {
		return
	}
	p := st.Plans[w.Plan]
	switch {
	case w.Starting:
		kind, what := s.fleet.ReadScreen(ctx, w)
		switch {
		case kind == agent.ScreenDialog:
			s.asks(st, w, what)
		case kind == agent.ScreenPrompt, w.Hooked:
			s.isReady(st, w, "its prompt is on screen")
			s.resumeLine(ctx, st, w)
			s.cfg.Save()
			s.cfg.Schedule(ctx)
		}
	case p != nil && p.Worker == w.ID && p.IdleEvent != "":
		// A change that draws the error decides the turn's end at once;
		// any other (a spinner going, the prompt redrawn) leaves it to the
		// settle timer, since the error may still be on its way.
		if _, failed := s.fleet.FailedOnScreen(ctx, w, p.Name); failed {
			s.settled(st, p, w)
			s.cfg.Schedule(ctx)
		}
	case p != nil && p.Worker == w.ID && p.Typed && p.State == state.PlanDispatched:
		if screen, err := s.fleet.Capture(ctx, w); err == nil && fleet.CountLine(screen, p.Name) > p.Echo {
			s.submit(ctx, st, w, p)
		}
	case p != nil && p.Worker == w.ID && p.State.Working() && s.fleet.WatchesWork(w.ID):
		var cb *event.Callback
		if asks, msg, failed := s.fleet.WorkSays(ctx, w, p.Name); asks != "" {
			cb, _ = s.needsInput(st, event.New(event.NeedsInput, p.Name, asks, w.ID, event.Hostname()))
		} else if failed {
			cb, _ = s.agentFailed(st, event.New(event.Failed, p.Name, msg, w.ID, event.Hostname()))
		}
		if cb != nil {
			s.cfg.Tell(cb)
			s.cfg.Schedule(ctx)
		}
	}
}

// submit presses Enter for a typed dispatch line, unless a dialog is on
// the screen: an Enter there would answer it (often "Yes"). The plan then
// needs input instead.
func (s *Sessions) submit(ctx context.Context, st *state.State, w *state.Worker, p *state.Run) {
	p.Typed = false
	if err := s.cfg.Save(); err != nil {
		s.log.Error("save state", "err", err)
	}
	if err := s.fleet.CheckPane(ctx, w); err != nil {
		s.log.Error("submit dispatch line", "plan", p.Name, "err", err)
		return
	}
	if kind, what := s.fleet.ReadScreen(ctx, w); kind == agent.ScreenDialog {
		s.log.Warn("a dialog is on screen: no Enter", "plan", p.Name, "worker", w.ID, "dialog", what)
		if cb, _ := s.needsInput(st, event.New(event.NeedsInput, p.Name, what, w.ID, event.Hostname())); cb != nil {
			s.cfg.Tell(cb)
		}
		return
	}
	if err := s.fleet.SendEnter(ctx, w); err != nil {
		s.log.Error("submit dispatch line", "plan", p.Name, "err", err)
		return
	}
	p.Enters++
	if prof := s.fleet.Profile(w.ID); prof != nil && prof.SubmitFromHook() && p.Enters < maxEnters {
		c := startCheck{worker: w.ID, submit: p.Name, attempt: p.Attempts}
		time.AfterFunc(submitTimeout, func() { s.send(Check{start: &c}) })
	}
}

// submitTimeout is how long an agent whose hook confirms a submitted line
// (agent.Profile.SubmitFromHook) has before Enter is pressed again, at
// most maxEnters times in all: an Enter on an empty prompt does nothing.
const (
	submitTimeout = 2 * time.Second
	maxEnters     = 3
)

// What an agent's own hooks report (orch-notify hook, see package agent):
// needs-input (it waits for a person), idle (its turn ended) and failed (it
// stopped on an error). They may leave the plan out; it is then the plan
// the worker holds. Like every worker event they count only from the
// worker holding the plan.

// hookHolder finds the plan a hook event is about and checks that its
// worker holds it and is still working on it. A non-empty note means the
// event has no effect (refused or ignored) and says why.
func (s *Sessions) hookHolder(st *state.State, e *event.Event) (*state.Run, *state.Worker, state.Note) {
	if e.Plan == "" {
		w := st.Worker(e.Worker)
		if w == nil {
			return nil, nil, s.refuse(st, *e, "unknown worker "+e.Worker)
		}
		if w.Plan == "" {
			return nil, nil, state.Ignoring(w.ID + " holds no plan")
		}
		// A hook that names no plan and fired before the worker took its
		// plan was about the one before (a turn that ended after its done).
		if e.Time.Before(w.Since) {
			return nil, nil, state.Ignoring(fmt.Sprintf("sent at %s, before %s took plan %s at %s",
				e.Time.Format(time.RFC3339Nano), w.ID, w.Plan, w.Since.Format(time.RFC3339Nano)))
		}
		e.Plan = w.Plan
	}
	p, w, why := s.holder(st, *e)
	if why != "" {
		return nil, nil, s.refuse(st, *e, why)
	}
	if e.Attempt != 0 && e.Attempt != p.Attempts {
		return nil, nil, state.Ignoring(fmt.Sprintf("about attempt %d of %s, which is at attempt %d", e.Attempt, p.Name, p.Attempts))
	}
	if !p.State.Working() {
		return nil, nil, state.Ignoring("plan " + p.Name + " is " + string(p.State))
	}
	return p, w, state.Note{}
}

// needsInput: the agent shows a permission or input prompt. The plan waits
// for a person, and the lead is told what the agent asks.
func (s *Sessions) needsInput(st *state.State, e event.Event) (*event.Callback, state.Note) {
	p, _, note := s.hookHolder(st, &e)
	if !note.None() {
		return nil, note
	}
	if p.State == state.PlanNeedsInput && p.Reason == e.Status {
		return nil, state.Ignoring("plan " + p.Name + " already needs input for this")
	}
	p.State, p.Reason, p.Updated = state.PlanNeedsInput, e.Status, s.cfg.Now().UTC()
	s.log.Info("needs input", "plan", p.Name, "worker", e.Worker, "message", e.Status)
	return event.NewCallback(event.CallbackNeedsInput, e.ID, p.Name, e.Worker, e.Status, ""), state.Noted("needs-input")
}

// idle: the agent's turn ended. If no done came for the plan, the agent
// stopped without finishing: the plan needs a person, and the lead is told
// whether RESULT.md is there. After a done the plan is no longer working,
// so the turn end that follows every done is ignored, never doubled.
func (s *Sessions) idle(st *state.State, e event.Event) (*event.Callback, state.Note) {
	p, w, note := s.hookHolder(st, &e)
	if !note.None() {
		return nil, note
	}
	if e.Status == event.StillIdle && p.State == state.PlanNeedsInput {
		// A reminder that the agent still waits: the plan already waits,
		// for the reason given when it began to.
		return nil, state.Ignoring("plan " + p.Name + " already waits: " + p.Reason)
	}
	if msg, failed := s.fleet.FailedOnScreen(context.Background(), w, p.Name); failed {
		// The turn ended on an error that only the screen shows (Gemini
		// CLI's hooks fire AfterAgent after an API error, and say nothing
		// of it): the plan failed, it does not wait for a person.
		e.Kind, e.Status = event.Failed, msg
		return s.agentFailed(st, e)
	} else if s.fleet.ShowsFailures(w) && p.IdleEvent == "" {
		// The error may not be drawn yet: the turn's end is decided when
		// the screen draws it, or else at settleTimeout, from the state
		// saved with this event.
		p.IdleEvent = e.ID
		c := startCheck{worker: w.ID, idle: p.Name, attempt: p.Attempts}
		s.cfg.After(func(*state.State) { time.AfterFunc(settleTimeout, func() { s.send(Check{start: &c}) }) })
		return nil, state.Noted("turn ended: decided once " + w.ID + "'s screen settles")
	}
	return s.turnEnded(st, e, p, w)
}

// settleTimeout bounds the wait for an agent's screen to show the error a
// turn may have ended on.
const settleTimeout = time.Second

// settled decides a turn end that waited for p's screen: the error the
// screen shows, or else the turn's end without done.
func (s *Sessions) settled(st *state.State, p *state.Run, w *state.Worker) {
	id := p.IdleEvent
	p.IdleEvent = ""
	if !p.State.Working() || p.Worker != w.ID {
		s.cfg.Save()
		return
	}
	e := s.record(event.Idle, id, p.Name, w.ID, "")
	var cb *event.Callback
	if msg, failed := s.fleet.FailedOnScreen(context.Background(), w, p.Name); failed {
		e.Kind, e.Status = event.Failed, msg
		cb, _ = s.agentFailed(st, e)
	} else {
		cb, _ = s.turnEnded(st, e, p, w)
	}
	s.cfg.Tell(cb) // the record is saved even with no callback
}

// turnEnded: the agent's turn ended without done.
func (s *Sessions) turnEnded(st *state.State, e event.Event, p *state.Run, w *state.Worker) (*event.Callback, state.Note) {
	if p.State == state.PlanDispatched {
		// The dispatch line may have been typed while the agent was still
		// ending its previous turn; that turn's end says nothing about this
		// plan. An agent that never starts is caught by the ack deadline.
		return nil, state.Ignoring("plan " + p.Name + " is not started yet (a turn that ended now may be the previous plan's)")
	}
	reason := "turn ended without orch-notify done (" + plans.RelResultPath(p.Name) + " written but no done sent)"
	if _, err := plans.ReadResult(s.cfg.WorkDir(w.ID), p.Name, harvest.MaxResult); err != nil {
		reason = "turn ended without orch-notify done (" + harvest.ResultProblem(p.Name, err) + ")"
	}
	if p.State == state.PlanNeedsInput && p.Reason == reason {
		return nil, state.Ignoring("plan " + p.Name + " already waits: " + reason)
	}
	p.State, p.Reason, p.Updated = state.PlanNeedsInput, reason, s.cfg.Now().UTC()
	s.log.Warn("turn ended without done", "plan", p.Name, "worker", e.Worker, "reason", reason)
	return event.NewCallback(event.CallbackIdle, e.ID, p.Name, e.Worker, reason, ""), state.Noted("needs-input: " + reason)
}

// agentFailed: the agent stopped on an error (an API error, say). The plan
// fails with the reason and the worker is free for the next plan.
func (s *Sessions) agentFailed(st *state.State, e event.Event) (*event.Callback, state.Note) {
	p, w, note := s.hookHolder(st, &e)
	if !note.None() {
		return nil, note
	}
	reason := e.Status
	if reason == "" {
		reason = "the agent reported a failure"
	}
	p.State, p.Reason, p.Updated = state.PlanFailed, "agent failed: "+reason, s.cfg.Now().UTC()
	s.free(st, w)
	s.log.Warn("agent failed", "plan", p.Name, "worker", e.Worker, "reason", reason)
	return s.verificationFailed(st, p, event.NewCallback(event.CallbackFailed, e.ID, p.Name, e.Worker, p.Reason, "")), state.Noted("failed: " + reason)
}

// ackCheck is the one timer armed per dispatch: if the plan is still only
// dispatched when it fires, the worker never said "started".
type ackCheck struct {
	plan    string
	attempt int
	resent  bool
}

func (s *Sessions) armAck(p *state.Run, resent bool) {
	if s.cfg.AckTimeout <= 0 {
		return
	}
	c := ackCheck{plan: p.Name, attempt: p.Attempts, resent: resent}
	time.AfterFunc(s.cfg.AckTimeout, func() { s.send(Check{ack: &c}) })
}

// ackExpired runs when a dispatch was not acknowledged in time: the pane is
// captured as evidence, the line is re-sent once, and the second time the
// plan fails with what the screen showed.
func (s *Sessions) ackExpired(ctx context.Context, st *state.State, c ackCheck) {
	p := st.Plans[c.plan]
	if p == nil || p.State != state.PlanDispatched || p.Attempts != c.attempt {
		return // acknowledged, or moved on since
	}
	if !c.resent && p.Resent {
		return // a first deadline armed twice (a line typed again at start): the re-send's own deadline decides
	}
	w := st.Worker(p.Worker)
	if w == nil || w.Remote != "" || w.Headless || !s.fleet.Panes() {
		return // a host's worker's dispatch is its host's to check; a headless one has no pane (tmux stopped answering)
	}
	screen, err := s.fleet.Capture(ctx, w)
	if errors.Is(err, tmux.ErrNotAnswering) {
		return // not the worker's doing: the loop's decision (its stuck.go) gives the plan its lost record
	}
	if err != nil {
		screen = "(pane unreadable: " + err.Error() + ")"
	}
	if kind, what := s.fleet.Classify(w.ID, screen, nil); kind == agent.ScreenDialog {
		// A dialog holds the line: the worker waits for a person, it is
		// not dead, and nothing more is typed into the dialog.
		if cb, _ := s.needsInput(st, event.New(event.NeedsInput, p.Name, what, w.ID, event.Hostname())); cb != nil {
			s.cfg.Tell(cb)
		}
		return
	}
	shown := fleet.CountLine(screen, p.Name) > 0
	if !c.resent && !p.Resent {
		// The line on screen means it was typed but perhaps not submitted
		// (an Enter lost to a crash): press Enter only, never type it twice.
		s.log.Warn("no started within the deadline; re-sending the dispatch line once", "plan", p.Name, "worker", w.ID, "line_on_screen", shown)
		p.Resent = true
		if err := s.cfg.Save(); err != nil {
			s.log.Error("save state", "err", err)
		}
		if err := s.retype(ctx, st, w, p.Name, shown); err != nil {
			s.log.Error("re-send", "plan", p.Name, "err", err)
		}
		s.armAck(p, true)
		return
	}
	evidence := fleet.LastLines(screen, 8)
	p.State, p.Reason, p.Updated = state.PlanFailed, fmt.Sprintf("no started from %s within %s of dispatch, line re-sent once (dispatch line on screen: %v); screen: %s",
		w.ID, s.cfg.AckTimeout, shown, evidence), s.cfg.Now().UTC()
	p.Unacked = true
	w.State, w.Plan, w.Reason = state.WorkerDead, "", "did not acknowledge dispatch of "+p.Name
	s.log.Warn("dispatch not acknowledged: plan failed", "plan", p.Name, "worker", w.ID)
	st.Outbox = append(st.Outbox, s.verificationFailed(st, p, event.NewCallback(event.CallbackFailed, fmt.Sprintf("ack-%s-%d", p.Name, p.Attempts), p.Name, w.ID, "no started after dispatch and one re-send", "")))
	if err := s.cfg.Save(); err != nil {
		s.log.Error("save state", "err", err)
	}
	s.cfg.Tell(nil)
}

// retype re-sends a dispatch: Enter alone when the line is already on the
// worker's screen, the whole line otherwise.
func (s *Sessions) retype(ctx context.Context, st *state.State, w *state.Worker, plan string, shown bool) error {
	if !shown {
		return s.typeLine(ctx, st, w, plan)
	}
	return s.fleet.PressEnter(ctx, w)
}

// typeLine types the dispatch line for plan into w's pane, after checking
// that the pane is still w's: a pane that cannot be proven to be the right
// worker is never typed into.
func (s *Sessions) typeLine(ctx context.Context, st *state.State, w *state.Worker, plan string) error {
	line, err := fleet.DispatchLine(plan, s.fleet.NotifyBin())
	if err != nil {
		return err
	}
	// A line half typed (text without its Enter) is worse than a late one:
	// finish typing even if orch serve is asked to stop meanwhile.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	if w.Headless {
		return fmt.Errorf("%s is headless: its plan goes to a process (handOver), not a pane", w.ID)
	}
	if err := s.fleet.CheckPane(ctx, w); err != nil {
		return err
	}
	p := st.Plans[plan]
	if w.Starting && p != nil {
		// The agent is not at its prompt yet: the line goes in once it is
		// (resumeLine).
		p.Waiting = true
		return s.cfg.Save()
	}
	if !s.fleet.WaitsForPrompt(w.ID) || !s.fleet.ScreenWatch() || p == nil {
		return s.fleet.SendLine(ctx, w, line)
	}
	// An agent's input box may take the Enter of a fast send-keys as part
	// of the text, or drop it: type the text, and press Enter once the
	// line shows on the screen one more time than before (screenChanged),
	// or after echoTimeout.
	p.Typed, p.Echo = true, 0
	if screen, err := s.fleet.Capture(ctx, w); err == nil {
		p.Echo = fleet.CountLine(screen, plan)
	}
	if err := s.cfg.Save(); err != nil {
		return err
	}
	if err := s.fleet.SendText(ctx, w, line); err != nil {
		return err
	}
	s.armEcho(w, p)
	return nil
}

// armEcho arms the one timer that presses Enter for p's typed line if it
// never shows on the screen.
func (s *Sessions) armEcho(w *state.Worker, p *state.Run) {
	c := startCheck{worker: w.ID, echo: p.Name, attempt: p.Attempts}
	time.AfterFunc(echoTimeout, func() { s.send(Check{start: &c}) })
}
