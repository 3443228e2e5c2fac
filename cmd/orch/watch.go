package main

import (
	"context"
	"fmt"
	"os"

	"github.com/spf13/cobra"

	"github.com/orch-dev/orch/board"
	"github.com/orch-dev/orch/internal/orchctl"
	"github.com/orch-dev/orch/internal/runner"
	"github.com/orch-dev/orch/watch"
)

type watchOptions struct{}

func newWatchCmd(s streams) *cobra.Command {
	o := &watchOptions{}
	return &cobra.Command{
		Use:   "watch",
		Short: "The live board in the terminal: attention, workers, plans, callbacks (needs a TTY; orch status for a snapshot)",
		Args:  exactArgs(0, "no arguments"),
		RunE:  func(cmd *cobra.Command, _ []string) error { return watchRun(cmd.Context(), o, s) },
	}
}

func watchRun(ctx context.Context, _ *watchOptions, s streams) error {
	// The board draws on the terminal itself: streams that are not the
	// process's own files (a test's buffers) are no terminal.
	in, _ := s.In.(*os.File)
	out, _ := s.Out.(*os.File)
	if in == nil || out == nil {
		return watch.ErrNoTerminal
	}
	root, err := repoRoot(ctx)
	if err != nil {
		return err
	}
	exe, err := os.Executable()
	if err != nil {
		return fmt.Errorf("watch: %w", err)
	}
	return watch.Run(ctx, watch.Config{
		Follow: func(ctx context.Context, show func(board.View)) error { return orchctl.Follow(ctx, root, show) },
		Orch:   exe, Dir: root, Runner: runner.OS{}, In: in, Out: out,
	})
}
