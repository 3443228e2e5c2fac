package fleet

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/orch-dev/orch/agent"
	"github.com/orch-dev/orch/event"
	"github.com/orch-dev/orch/internal/state"
	"github.com/orch-dev/orch/plans"
)

// A pane's screen is read only when tmux says the pane's program wrote to
// it (a control-mode client, tmux -C, see WatchScreens): an event, not a
// poll. What a screen means (a prompt, a dialog, an error) is the agent
// profile's to say, and what to do about it the loop's.

// screenQuiet is how long a pane's output must pause before its screen is
// read (a burst of output is one read); screenMaxDelay bounds the wait
// while output goes on (a spinner never pauses).
const (
	screenQuiet    = 150 * time.Millisecond
	screenMaxDelay = 2 * time.Second
)

// WatchScreens attaches one control-mode client to the fleet's session
// and turns each pane's output into (at most) one report on Screens per
// burst: a one-shot timer per pane, started by output and not by time.
func (f *Fleet) WatchScreens(ctx context.Context, session string) {
	type pending struct {
		timer *time.Timer
		first time.Time
	}
	var mu sync.Mutex
	panes := map[string]*pending{}
	onOutput := func(pane string) {
		mu.Lock()
		defer mu.Unlock()
		p := panes[pane]
		if p == nil {
			p = &pending{first: time.Now()}
			panes[pane] = p
			p.timer = time.AfterFunc(screenQuiet, func() {
				mu.Lock()
				delete(panes, pane)
				mu.Unlock()
				send(f, f.screens, pane)
			})
			return
		}
		// More output of the same burst: wait for its pause, but never
		// longer than screenMaxDelay from its start.
		if time.Since(p.first) < screenMaxDelay && p.timer.Stop() {
			p.timer.Reset(screenQuiet)
		}
	}
	f.screenWatch.Store(true)
	go func() {
		defer f.screenWatch.Store(false)
		for tries := 0; ; tries++ {
			start := time.Now()
			err := f.tmux.WatchOutput(ctx, session, onOutput)
			if ctx.Err() != nil {
				return
			}
			if time.Since(start) > time.Minute {
				tries = 0 // it ran a while: a fresh failure, not a repeated one
			}
			if tries == 4 {
				f.log.Warn("screen watch ended for good; typed lines get Enter at once, dialogs are seen at the start deadline", "err", err)
				return
			}
			// Re-attach after a one-shot pause (the tmux server may be
			// busy or restarting): a bounded reconnect, not a poll.
			f.log.Warn("screen watch ended; attaching again", "err", err)
			select {
			case <-ctx.Done():
				return
			case <-time.After(time.Second << tries):
			}
		}
	}()
}

// Capture returns w's screen. A host's worker's screen is its host's to
// read (its pane id means nothing to this machine's tmux).
func (f *Fleet) Capture(ctx context.Context, w *state.Worker) (string, error) {
	if w.Remote != "" {
		return "", fmt.Errorf("%w: %s runs on host %s", ErrRemote, w.ID, w.Remote)
	}
	cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	return f.tmux.Capture(cctx, w.Pane, 0)
}

// ReadScreen captures w's pane and says what it shows.
func (f *Fleet) ReadScreen(ctx context.Context, w *state.Worker) (agent.ScreenKind, string) {
	screen, err := f.Capture(ctx, w)
	return f.Classify(w.ID, screen, err)
}

// Classify says what a screen captured from worker id's pane shows, for
// its agent's profile; for anything else, its last lines.
func (f *Fleet) Classify(id, screen string, err error) (agent.ScreenKind, string) {
	if err != nil {
		return agent.ScreenOther, ""
	}
	p := f.Profile(id)
	if p == nil {
		return agent.ScreenOther, LastLines(screen, 8)
	}
	kind, what := p.ReadScreen(screen)
	if kind == agent.ScreenOther {
		what = LastLines(screen, 8)
	}
	return kind, event.Clean(what)
}

// CountLine counts the places the screen shows plan's dispatch line (its
// plan file's path), with wrapped lines joined.
func CountLine(screen, plan string) int {
	return strings.Count(strings.ReplaceAll(screen, "\n", ""), plans.RelPlanPath(plan))
}

// LastLines is the last n lines of a screen, cleaned into one line.
func LastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return event.Clean(strings.Join(lines, " | "))
}

// ShowsFailures says whether w's agent shows some errors only on its
// screen (agent.Profile.ScreenFails): a pane the loop must read when a
// turn ends.
func (f *Fleet) ShowsFailures(w *state.Worker) bool {
	p := f.Profile(w.ID)
	return f.Panes() && !w.Headless && w.Pane != "" && w.Remote == "" && p != nil && p.ScreenFails()
}

// FailedOnScreen says whether w's screen shows an error after plan's
// dispatch line, for agents whose errors only the screen shows.
func (f *Fleet) FailedOnScreen(ctx context.Context, w *state.Worker, plan string) (string, bool) {
	if !f.ShowsFailures(w) {
		return "", false
	}
	screen, err := f.Capture(ctx, w)
	if err != nil {
		return "", false
	}
	msg, failed := f.Profile(w.ID).ScreenFailure(screen, plans.RelPlanPath(plan))
	return event.Clean(msg), failed
}

// WatchesWork says whether the screen of worker id, working on a plan,
// is read when it changes: its agent shows dialogs or errors only there.
func (f *Fleet) WatchesWork(id string) bool {
	p := f.Profile(id)
	return p != nil && (p.ScreenAsks() || p.ScreenFails())
}

// WorkSays reads the screen of w, working on plan, and says what it
// shows that the agent's hooks do not: a dialog it waits on (asks), or the
// error it stopped on (failed, with its message).
func (f *Fleet) WorkSays(ctx context.Context, w *state.Worker, plan string) (asks, msg string, failed bool) {
	screen, err := f.Capture(ctx, w)
	p := f.Profile(w.ID)
	if err != nil || p == nil {
		return "", "", false
	}
	if kind, what := p.ReadScreen(screen); kind == agent.ScreenDialog && p.ScreenAsks() {
		return what, "", false
	}
	msg, failed = p.ScreenFailure(screen, plans.RelPlanPath(plan))
	return "", msg, failed
}

// PromptLate says whether screen, worker id's, shows its agent's prompt
// in a form its profile accepts only at the start deadline
// (agent.Profile.PromptLate).
func (f *Fleet) PromptLate(id, screen string) bool {
	p := f.Profile(id)
	return p != nil && p.PromptLate(screen)
}
