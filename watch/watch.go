// Package watch is orch watch: the live board in a terminal. A bubbletea
// program draws the board.View that Follow hands it, and the keys act on
// the fleet by running the orch binary itself (read, send, dispatch).
//
// How the pieces fit. Run starts Follow (the caller's: orchctl.Follow in
// orch watch) and the program. Follow calls show with each new view; show
// puts it in a one-slot hand-off (feed.go) that keeps only the latest, so
// a slow terminal drops frames and never holds Follow up. The model
// (model.go) takes views out of the slot one at a time, keeps the
// selection and the open screen or text input, and runs commands in
// tea.Cmds, so the board never waits for one. render.go lays a view out
// to the terminal's size: one line never wraps, the attention first;
// timeline.go draws the timeline's bars in the room the rest leaves.
package watch

import (
	"context"
	"errors"
	"os"
	"time"

	tea "charm.land/bubbletea/v2"
	"github.com/charmbracelet/x/term"

	"github.com/orch-dev/orch/board"
	"github.com/orch-dev/orch/internal/runner"
)

// Config is what the board needs from its caller.
type Config struct {
	// Follow feeds show with views until ctx ends (orchctl.Follow, on
	// the repo).
	Follow func(ctx context.Context, show func(board.View)) error
	// Orch is the orch binary the keys run (orch read, send, dispatch),
	// in Dir, through Runner.
	Orch   string
	Dir    string
	Runner runner.Runner
	// In and Out are the terminal.
	In  *os.File
	Out *os.File
	// Now is the board's clock (time.Now when nil).
	Now func() time.Time
}

// Run shows the board until the person quits or Follow fails.
func Run(ctx context.Context, cfg Config) error {
	if cfg.In == nil || cfg.Out == nil || !term.IsTerminal(cfg.In.Fd()) || !term.IsTerminal(cfg.Out.Fd()) {
		return ErrNoTerminal
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	f := newFeed()
	defer f.close()
	p := tea.NewProgram(New(cfg, f), tea.WithInput(cfg.In), tea.WithOutput(cfg.Out))
	followed := make(chan error, 1)
	go func() {
		err := cfg.Follow(ctx, f.offer)
		followed <- err
		if err != nil && ctx.Err() == nil {
			p.Send(followEnded{err}) // a no-op once the program has ended
		}
	}()
	m, err := p.Run()
	cancel()
	ferr := <-followed
	if err != nil {
		return err
	}
	if wm, ok := m.(Model); ok && wm.failed != nil {
		return wm.failed
	}
	if ferr != nil && !errors.Is(ferr, context.Canceled) {
		return ferr
	}
	return nil
}
