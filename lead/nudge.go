package lead

import (
	"context"
	"encoding/json"
	"strings"

	"github.com/orch-dev/orch/agent"
	"github.com/orch-dev/orch/bus"
	"github.com/orch-dev/orch/event"
	"github.com/orch-dev/orch/internal/state"
)

// orch send's lines (nudges) reach a worker's agent only at its prompt.
// The send command is recorded (state.Nudge) with the event that brought
// it; after each pass of the loop, deliverNudges types the next line for
// every worker whose agent is at its prompt by the record, unless its
// screen shows a dialog. An agent whose hooks tell its turns (Claude
// Code, Codex, Gemini CLI) is in a turn from a line typed or a started
// until its turn-end or ready hook (state.Worker.InTurn), and takes one
// nudge per prompt; any other agent is at its prompt while its worker is
// idle, and takes all that wait.

// nudge handles orch send: the line waits in the record for the worker's
// prompt.
func (l *Loop) nudge(e event.Event) state.Note {
	l.sendVerdicts = append(l.sendVerdicts, e.ID)
	w := l.st.Worker(e.Worker)
	switch {
	case w == nil:
		return l.refuse(e, "unknown worker "+e.Worker+" (orch status lists the workers)")
	case w.Remote != "":
		return l.refuse(e, e.Worker+" runs on host "+w.Remote+": orch send does not reach a host's panes yet; nothing typed")
	case w.Headless:
		return l.refuse(e, e.Worker+" is a headless worker: it has no screen and reads no input; nothing typed")
	}
	l.st.Nudges = append(l.st.Nudges, &state.Nudge{Event: e.ID, Worker: w.ID, Text: bus.Escape(e.Status), Queued: e.Time.UTC()})
	return state.Noted("queued for " + w.ID)
}

// turnSignal keeps each worker's InTurn from the events it sends: a
// started begins a turn, a turn end or a fresh session ends it.
func (l *Loop) turnSignal(e event.Event) {
	w := l.st.Worker(e.Worker)
	if w == nil || e.Worker == "" {
		return
	}
	switch e.Kind {
	case event.Started:
		w.InTurn = true
	case event.Idle, event.Ready, event.Died, event.Failed:
		w.InTurn = false
	}
}

// hookedTurns says whether worker id's agent reports its turns' ends.
func (l *Loop) hookedTurns(id string) bool {
	p := l.fleet.Profile(id)
	return p != nil && p.Hooks != ""
}

// atPrompt says whether w's agent waits at its prompt by the record, and
// if not, why.
func (l *Loop) atPrompt(w *state.Worker) (bool, string) {
	p := l.st.Plans[w.Plan]
	busy := p != nil && p.Worker == w.ID && (p.State == state.PlanDispatched || p.State == state.PlanRunning)
	switch {
	case w.State == state.WorkerDead:
		return false, w.ID + " is dead; typed once its agent is back at its prompt"
	case w.Starting, w.Refresh:
		return false, w.ID + "'s agent is starting; typed once it is at its prompt"
	case w.Interrupting != "":
		return false, w.ID + "'s agent is being interrupted; typed once it is back at its prompt"
	case !l.hookedTurns(w.ID):
		if w.State != state.WorkerIdle || w.Plan != "" {
			return false, w.ID + " is busy with " + w.Plan + "; typed once it is idle"
		}
		return true, ""
	case busy:
		return false, w.ID + " is mid-turn (plan " + w.Plan + " " + string(p.State) + "); typed at its next prompt"
	case w.InTurn:
		return false, w.ID + " is mid-turn; typed at its next prompt"
	}
	return true, ""
}

// deliverNudges types the waiting lines of every worker at its prompt,
// then answers the send commands of this pass.
func (l *Loop) deliverNudges(ctx context.Context) {
	defer l.answerSends()
	if !l.fleet.Panes() {
		return
	}
	for _, w := range l.st.Workers {
		if p := l.st.Plans[w.Plan]; p != nil && p.Worker == w.ID && (p.State == state.PlanDispatched || p.State == state.PlanRunning) && l.hookedTurns(w.ID) {
			w.InTurn = true // its turn began with the dispatch; saved with the next save
		}
		ns := l.st.NudgesFor(w.ID)
		if len(ns) == 0 || w.Remote != "" || w.Headless || w.Pane == "" {
			continue
		}
		if ok, _ := l.atPrompt(w); !ok {
			continue
		}
		for _, n := range ns {
			if !l.typeNudge(ctx, w, n) || l.hookedTurns(w.ID) {
				break // one line per prompt for an agent whose turns orch follows
			}
		}
	}
}

// typeNudge types n into w's pane, unless its screen shows a dialog: an
// Enter there would answer it.
func (l *Loop) typeNudge(ctx context.Context, w *state.Worker, n *state.Nudge) bool {
	if err := l.fleet.CheckPane(ctx, w); err != nil {
		l.log.Warn("nudge not typed: pane not proven", "worker", w.ID, "event", n.Event, "err", err)
		return false
	}
	screen, err := l.fleet.Capture(ctx, w)
	if err != nil {
		l.log.Warn("nudge not typed: screen unreadable", "worker", w.ID, "event", n.Event, "err", err)
		return false
	}
	if kind, what := l.fleet.Classify(w.ID, screen, nil); kind == agent.ScreenDialog {
		l.log.Info("nudge waits: a dialog is on screen", "worker", w.ID, "event", n.Event, "dialog", what)
		return false
	}
	n.Typing, n.Echo = true, agent.Shown(screen, n.Text)
	if err := l.save(); err != nil {
		n.Typing = false
		l.log.Error("save state before a nudge; nothing typed", "worker", w.ID, "err", err)
		return false
	}
	if err := l.fleet.SendLine(ctx, w, n.Text); err != nil {
		n.Typing = false
		l.log.Error("nudge not typed", "worker", w.ID, "event", n.Event, "err", err)
		l.save()
		return false
	}
	l.st.DropNudge(n.Event)
	if l.hookedTurns(w.ID) {
		w.InTurn = true
	}
	if err := l.save(); err != nil {
		l.log.Error("save state after a nudge", "err", err)
	}
	l.log.Info("nudge typed", "worker", w.ID, "event", n.Event)
	return true
}

// resumeNudges settles the lines a stopped lead loop was typing: one
// shown on its worker's screen once more than before went in; any other
// is typed again.
func (l *Loop) resumeNudges(ctx context.Context) {
	for _, n := range append([]*state.Nudge(nil), l.st.Nudges...) {
		if !n.Typing {
			continue
		}
		w := l.st.Worker(n.Worker)
		n.Typing = false
		if w == nil || w.Pane == "" || !l.fleet.Panes() {
			continue
		}
		if screen, err := l.fleet.Capture(ctx, w); err == nil && agent.Shown(screen, n.Text) > n.Echo {
			l.log.Info("nudge was typed before the last stop", "worker", w.ID, "event", n.Event)
			l.st.DropNudge(n.Event)
		}
	}
}

// answerSends tells each orch send of this pass what came of its line.
func (l *Loop) answerSends() {
	ids := l.sendVerdicts
	l.sendVerdicts = nil
	for _, id := range ids {
		h := l.st.Handled[id]
		if h == nil {
			continue
		}
		v := event.Verdict{Event: id, Kind: event.Send, Refused: h.Refused, Note: h.Note}
		if n := l.st.Nudge(id); n != nil {
			v.Note = "queued"
			if w := l.st.Worker(n.Worker); w != nil {
				if ok, why := l.atPrompt(w); !ok {
					v.Note = "queued: " + why
				} else {
					v.Note = "queued: " + w.ID + "'s screen shows a dialog or could not be read; typed at its next prompt"
				}
			}
		} else if !h.Refused {
			v.Note = "typed into " + strings.TrimPrefix(h.Note, "queued for ") + "'s pane"
		}
		data, err := json.Marshal(v)
		if err == nil {
			err = l.nc.Publish(event.VerdictSubject(l.prefix, id), data)
		}
		if err != nil {
			l.log.Warn("verdict not sent", "kind", event.Send, "event", id, "err", err)
		}
	}
}
