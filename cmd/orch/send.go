package main

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/orch-dev/orch/event"
	"github.com/orch-dev/orch/internal/orchctl"
)

type sendOptions struct {
	Worker string
	Text   string
	Now    bool
	Wait   time.Duration
	JSON   bool
}

func newSendCmd(s streams) *cobra.Command {
	o := &sendOptions{}
	cmd := &cobra.Command{
		Use:   "send <wN> <text...>",
		Short: "Hand one line to a worker's agent at its next prompt (--now: type it at once)",
		Long: "The line (escaped to one line: control characters, ESC and newlines as visible text) goes to\n" +
			"the lead loop, which types it into the worker's pane when its agent is at its prompt: at once\n" +
			"if it is, else at the end of its turn; never into a dialog. It is kept across orch serve\n" +
			"restarts and typed once. --now types it at once, whatever the agent is doing (to answer a\n" +
			"dialog by hand).",
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
			return sendRun(cmd.Context(), o, s)
		},
	}
	cmd.Flags().BoolVar(&o.Now, "now", false, "type it at once, even mid-turn (not into a pane that is not the worker's)")
	cmd.Flags().DurationVar(&o.Wait, "wait", orchctl.DefaultVerdictWait, "how long to wait for the lead loop's answer (typed or queued); 0: do not wait")
	cmd.Flags().BoolVar(&o.JSON, "json", false, "print the result as JSON")
	return cmd
}

func sendRun(ctx context.Context, o *sendOptions, s streams) error {
	root, err := repoRoot(ctx)
	if err != nil {
		return err
	}
	res, err := orchctl.Send(ctx, root, tmuxSocket(), o.Worker, o.Text, o.Now, o.Wait)
	if err != nil {
		return err
	}
	if o.JSON {
		return writeJSON(s.Out, res)
	}
	switch {
	case res.Spooled:
		fmt.Fprintf(s.Out, "sent to %s (spooled: orch serve is not running; typed at %s's prompt once it runs)\n", o.Worker, o.Worker)
	case !res.Answered && o.Wait > 0:
		fmt.Fprintf(s.Out, "sent to %s: the lead loop has not answered within %s; it is kept, and typed at %s's prompt\n", o.Worker, o.Wait, o.Worker)
	case !res.Answered:
		fmt.Fprintf(s.Out, "sent to %s\n", o.Worker)
	default:
		fmt.Fprintln(s.Out, res.Note)
	}
	return nil
}

func leadReadPane(ctx context.Context, root, worker string, lines int) (string, error) {
	return orchctl.ReadPane(ctx, root, tmuxSocket(), worker, lines)
}
