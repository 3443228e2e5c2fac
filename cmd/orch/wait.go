package main

import (
	"context"
	"fmt"
	"os/signal"
	"syscall"
	"time"

	"github.com/orch-dev/orch/event"
	"github.com/orch-dev/orch/internal/orchctl"
	"github.com/spf13/cobra"
)

type waitOptions struct {
	Timeout time.Duration
	JSON    bool
}

func newWaitCmd(s streams) *cobra.Command {
	o := &waitOptions{}
	cmd := &cobra.Command{
		Use:   "wait",
		Short: "Block until the next callback the lead has not seen, and print it",
		Long: "Block until the lead loop has a callback the lead has not seen yet and print it as\n" +
			"WORKER-DONE <plan>: <status>, WORKER-BLOCKED <plan>: <reason>, WORKER-FAILED <plan>: <why>,\n" +
			"WORKER-NEEDS-INPUT <plan>: <what the agent asks> or WORKER-IDLE <plan>: <why> (from agent hooks).\n" +
			"Each callback is printed by exactly one orch wait. Exit 1 on --timeout.",
		Args: exactArgs(0, "no arguments"),
		RunE: func(cmd *cobra.Command, _ []string) error { return waitRun(cmd.Context(), o, s) },
	}
	cmd.Flags().DurationVar(&o.Timeout, "timeout", 0, "give up after this long (e.g. 30s); 0 waits forever")
	cmd.Flags().BoolVar(&o.JSON, "json", false, "print the callback as JSON")
	return cmd
}

func waitRun(ctx context.Context, o *waitOptions, s streams) error {
	root, err := repoRoot(ctx)
	if err != nil {
		return err
	}
	// A write into a closed pipe must fail as an error, not kill orch by
	// SIGPIPE before it could give the callback back (Nak): the next orch
	// wait gets it.
	signal.Ignore(syscall.SIGPIPE)
	_, err = orchctl.Wait(ctx, root, o.Timeout, func(cb event.Callback) error {
		if o.JSON {
			return writeJSON(s.Out, cb)
		}
		_, err := fmt.Fprintln(s.Out, cb.Line)
		return err
	})
	return err
}
