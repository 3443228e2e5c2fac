package leadpane

import (
	"maps"
	"slices"
	"strings"

	"context"
	"errors"
	"fmt"
	"github.com/orch-dev/orch/agent"

	"github.com/orch-dev/orch/tmux"
)

// Check proves pane fit to be the lead's before orch serve starts: a pane
// id (%N), a live pane of the tmux server orch uses, not a worker's, not
// own (the pane orch serve runs in, $TMUX_PANE; "" when none).
func Check(ctx context.Context, c *tmux.Client, pane, own string) (tmux.PaneInfo, error) {
	if !tmux.ValidPaneID(pane) {
		return tmux.PaneInfo{}, fmt.Errorf("--lead-pane %q: %w: give the lead's pane id, %%N (run tmux display-message -p '#{pane_id}' in the lead's pane)", pane, ErrBadPane)
	}
	info, err := c.Info(ctx, pane)
	if errors.Is(err, tmux.ErrNoPane) || errors.Is(err, tmux.ErrNoSession) || (err == nil && info.Dead) {
		server := "the default tmux server"
		if c.Socket != "" {
			server = "tmux server -L " + c.Socket + " (ORCH_TMUX_SOCKET)"
		}
		return info, fmt.Errorf("--lead-pane %s: %w on %s: start the lead in a pane there and give its id (tmux list-panes -a lists them)", pane, ErrNoPane, server)
	}
	if err != nil {
		return info, fmt.Errorf("--lead-pane %s: %w", pane, err)
	}
	if info.Worker != "" {
		return info, fmt.Errorf("--lead-pane %s: %w (%s): give the pane the lead agent runs in, not a worker's", pane, ErrWorkerPane, info.Worker)
	}
	if pane == own {
		return info, fmt.Errorf("--lead-pane %s: %w: run orch serve in another pane, or give the lead's", pane, ErrOwnPane)
	}
	return info, nil
}

// Prepare checks the pane (Check) and makes the reader of its screen: by
// prompt (--lead-prompt), else by the screens of agentName (--lead-agent),
// else of the agent the pane runs now when orch knows its screens.
func Prepare(ctx context.Context, c *tmux.Client, pane, agentName, prompt, own string) (Reader, error) {
	info, err := Check(ctx, c, pane, own)
	if err != nil {
		return Reader{}, err
	}
	name := agentName
	if name == "" && busyMarkers[info.Command] != nil {
		name = info.Command
	}
	var p *agent.Profile
	if name != "" {
		if busyMarkers[name] == nil && prompt == "" {
			return Reader{}, fmt.Errorf("--lead-agent %s: %w: orch knows the lead screens of %s; for another agent give --lead-prompt TEXT, what its empty input line starts with", name, ErrNoPrompt, strings.Join(slices.Sorted(maps.Keys(busyMarkers)), ", "))
		}
		prof, err := agent.Resolve(name, nil)
		if err != nil {
			return Reader{}, fmt.Errorf("--lead-agent: %w", err)
		}
		p = &prof
	}
	r, err := NewReader(prompt, p)
	if err != nil {
		return r, fmt.Errorf("--lead-pane %s runs %q: %w: give --lead-agent (%s) or --lead-prompt TEXT, what its empty input line starts with", pane, info.Command, err, strings.Join(slices.Sorted(maps.Keys(busyMarkers)), ", "))
	}
	return r, nil
}
