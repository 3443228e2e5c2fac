package main

import (
	"context"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/orch-dev/orch/event"
)

type readOptions struct {
	Worker string
	Lines  int
}

func newReadCmd(s streams) *cobra.Command {
	o := &readOptions{}
	cmd := &cobra.Command{
		Use:   "read <wN>",
		Short: "Show a worker's screen",
		Args:  exactArgs(1, "one worker id"),
		RunE: func(cmd *cobra.Command, args []string) error {
			o.Worker = args[0]
			if !event.ValidWorker(o.Worker) {
				return usagef("%q is not a worker id like w1", o.Worker)
			}
			return readRun(cmd.Context(), o, s)
		},
	}
	cmd.Flags().IntVarP(&o.Lines, "lines", "n", 0, "also show this many lines of history")
	return cmd
}

func readRun(ctx context.Context, o *readOptions, s streams) error {
	root, err := repoRoot(ctx)
	if err != nil {
		return err
	}
	out, err := leadReadPane(ctx, root, o.Worker, o.Lines)
	if err != nil {
		return err
	}
	_, err = fmt.Fprint(s.Out, out)
	return err
}
