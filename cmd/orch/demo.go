package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/orch-dev/orch/demo"
)

type demoOptions struct {
	Dir     string
	Workers int
	Keep    bool
}

func newDemoCmd(s streams) *cobra.Command {
	o := &demoOptions{}
	cmd := &cobra.Command{
		Use:   "demo",
		Short: "Run the whole loop on a scratch repo with scripted agents in tmux (under a minute)",
		Args:  exactArgs(0, "no arguments"),
		RunE:  func(cmd *cobra.Command, _ []string) error { return demoRun(cmd.Context(), o, s) },
	}
	cmd.Flags().StringVar(&o.Dir, "dir", "", "scratch directory (default: a new temporary one)")
	cmd.Flags().IntVar(&o.Workers, "workers", 3, "number of scripted workers")
	cmd.Flags().BoolVar(&o.Keep, "keep", false, "leave the tmux fleet running at the end")
	return cmd
}

func demoRun(ctx context.Context, o *demoOptions, s streams) error {
	ctx, stop := signal.NotifyContext(ctx, syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	exe, err := os.Executable()
	if err != nil {
		return err
	}
	return demo.Run(ctx, demo.Options{Out: s.Out, OrchBin: exe, BinDir: binDir(), Dir: o.Dir, Workers: o.Workers, Keep: o.Keep})
}
