package main

import (
	"context"
	"strings"

	"github.com/spf13/cobra"

	"github.com/orch-dev/orch/event"
	"github.com/orch-dev/orch/internal/orchctl"
)

type sendOptions struct {
	Worker string
	Text   string
}

func newSendCmd(s streams) *cobra.Command {
	o := &sendOptions{}
	cmd := &cobra.Command{
		Use:   "send <wN> <text...>",
		Short: "Type one line into a worker's pane (then Enter)",
		Args: func(_ *cobra.Command, args []string) error {
			if len(args) < 2 {
				return usagef("want a worker id and the text to type")
			}
			if !event.ValidWorker(args[0]) {
				return usagef("%q is not a worker id like w1", args[0])
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			o.Worker, o.Text = args[0], strings.Join(args[1:], " ")
			return sendRun(cmd.Context(), o)
		},
	}
	return cmd
}

func sendRun(ctx context.Context, o *sendOptions) error {
	root, err := repoRoot(ctx)
	if err != nil {
		return err
	}
	return orchctl.SendPane(ctx, root, tmuxSocket(), o.Worker, o.Text)
}

func leadReadPane(ctx context.Context, root, worker string, lines int) (string, error) {
	return orchctl.ReadPane(ctx, root, tmuxSocket(), worker, lines)
}
