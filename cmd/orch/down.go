package main

import (
	"context"
	"fmt"
	"time"

	"github.com/orch-dev/orch/internal/orchctl"
	"github.com/spf13/cobra"
)

type downOptions struct{ Timeout time.Duration }

func newDownCmd(s streams) *cobra.Command {
	o := &downOptions{}
	cmd := &cobra.Command{
		Use:   "down",
		Short: "Stop the lead loop, then the fleet (its tmux session, or its headless processes)",
		Args:  exactArgs(0, "no arguments"),
		RunE:  func(cmd *cobra.Command, _ []string) error { return downRun(cmd.Context(), o, s) },
	}
	cmd.Flags().DurationVar(&o.Timeout, "timeout", 15*time.Second, "how long to wait for orch serve to exit")
	return cmd
}

func downRun(ctx context.Context, o *downOptions, s streams) error {
	root, err := repoRoot(ctx)
	if err != nil {
		return err
	}
	stopped, err := orchctl.Down(ctx, root, tmuxSocket(), o.Timeout)
	for _, x := range stopped {
		fmt.Fprintf(s.Out, "stopped %s\n", x)
	}
	if err == nil && len(stopped) == 0 {
		fmt.Fprintln(s.Out, "nothing was running")
	}
	return err
}
