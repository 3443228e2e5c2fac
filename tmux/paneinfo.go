package tmux

import (
	"context"
	"fmt"
	"strconv"
	"strings"
)

// PaneInfo is what orch reads about a pane that is not a worker's (the
// lead's, orch serve --lead-pane): where it lives, what runs in it, and
// where its cursor is.
type PaneInfo struct {
	ID      string
	Session string // the session holding its window
	Worker  string // its WorkerOption: non-empty for a worker's pane
	Dead    bool
	PID     int
	Command string // pane_current_command
	CursorY int    // the cursor's row on the visible screen, 0 at the top
	Height  int
}

const paneInfoFormat = "#{pane_id}\t#{session_name}\t#{" + WorkerOption + "}\t#{pane_dead}\t#{pane_pid}\t#{pane_current_command}\t#{cursor_y}\t#{pane_height}"

// Info reads pane's PaneInfo; ErrNoPane when tmux has no such pane.
func (c *Client) Info(ctx context.Context, pane string) (PaneInfo, error) {
	if !ValidPaneID(pane) {
		return PaneInfo{}, fmt.Errorf("pane info: %w: %q", ErrBadPane, pane)
	}
	out, err := c.run(ctx, "display-message", "-p", "-t", pane, paneInfoFormat)
	if err != nil {
		if strings.Contains(err.Error(), "can't find pane") {
			return PaneInfo{}, fmt.Errorf("pane info %s: %w", pane, ErrNoPane)
		}
		return PaneInfo{}, fmt.Errorf("pane info %s: %w", pane, noSession(err))
	}
	// For a pane that does not exist tmux 3.3 prints empty fields and exits 0.
	f := strings.Split(strings.TrimRight(out, "\n"), "\t")
	if len(f) != 8 || f[0] != pane {
		return PaneInfo{}, fmt.Errorf("pane info %s: %w", pane, ErrNoPane)
	}
	pid, _ := strconv.Atoi(f[4])
	cy, _ := strconv.Atoi(f[6])
	h, _ := strconv.Atoi(f[7])
	return PaneInfo{ID: f[0], Session: f[1], Worker: f[2], Dead: f[3] == "1", PID: pid, Command: f[5], CursorY: cy, Height: h}, nil
}

// CaptureRows returns the pane's visible screen row by row, wrapped lines
// not joined (so that row n is the cursor's row n), trailing blank rows
// dropped.
func (c *Client) CaptureRows(ctx context.Context, pane string) ([]string, error) {
	if !ValidPaneID(pane) {
		return nil, fmt.Errorf("capture: %w: %q", ErrBadPane, pane)
	}
	out, err := c.run(ctx, "capture-pane", "-p", "-t", pane)
	if err != nil {
		return nil, fmt.Errorf("capture %s: %w", pane, err)
	}
	out = strings.TrimRight(out, "\n")
	if out == "" {
		return nil, nil
	}
	return strings.Split(out, "\n"), nil
}
