package fleet

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/orch-dev/orch/internal/runner"
	"github.com/orch-dev/orch/internal/state"
	"github.com/orch-dev/orch/tmux"
)

// seen is a tmux that records the context of each call, as it is when
// the call is made, and fails the call.
type seen struct{ calls []call }

type call struct {
	deadline time.Time
	bounded  bool
	err      error
}

func (s *seen) Run(ctx context.Context, _ runner.Cmd) ([]byte, error) {
	dl, ok := ctx.Deadline()
	s.calls = append(s.calls, call{dl, ok, ctx.Err()})
	return nil, errors.New("tmux: no answer")
}

// Respawn runs on the lead loop's goroutine: each tmux call it makes has
// a deadline at most RespawnTimeout away (a tmux that stops answering must
// not hold the loop), even under a context without one, and a stopping
// loop (its context cancelled) does not cut a new pane short.
func TestRespawnBounded(t *testing.T) {
	s := &seen{}
	fl := testFleet(t, Config{Panes: true, Tmux: &tmux.Client{Socket: "t", Runner: s}})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := fl.Respawn(ctx, "s", &state.Worker{ID: "w1", Pane: "%1"}); err == nil {
		t.Fatal("Respawn without a tmux answer succeeded")
	}
	if len(s.calls) != 1 {
		t.Fatalf("%d tmux calls after has-session failed; want 1", len(s.calls))
	}
	c := s.calls[0]
	if !c.bounded || c.deadline.After(time.Now().Add(RespawnTimeout)) {
		t.Errorf("has-session's deadline %v (set: %v); want at most %s away", c.deadline, c.bounded, RespawnTimeout)
	}
	if c.err != nil {
		t.Errorf("has-session ran under a cancelled context: %v", c.err)
	}
}
