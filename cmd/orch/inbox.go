package main

import (
	"context"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/orch-dev/orch/internal/orchctl"
)

type inboxOptions struct {
	Agent string
	JSON  bool
}

func newInboxCmd(s streams) *cobra.Command {
	o := &inboxOptions{}
	cmd := &cobra.Command{
		Use:   "inbox",
		Short: "The lead agent's callbacks: handed over and not yet acknowledged, and still waiting",
		Long: "List the callbacks the lead agent's hooks handed over that it has not acknowledged with\n" +
			"orch ack, and those waiting to be handed over. Nothing is taken or marked.",
		Args: exactArgs(0, "no arguments"),
		RunE: func(cmd *cobra.Command, _ []string) error { return inboxRun(cmd.Context(), o, s) },
	}
	cmd.Flags().StringVar(&o.Agent, "agent", "claude", "the lead agent installed with orch lead install")
	cmd.Flags().BoolVar(&o.JSON, "json", false, "print the inbox as JSON")
	return cmd
}

func inboxRun(ctx context.Context, o *inboxOptions, s streams) error {
	root, err := repoRoot(ctx)
	if err != nil {
		return err
	}
	v, err := orchctl.Inbox(ctx, root, o.Agent)
	if err != nil {
		return err
	}
	if o.JSON {
		return writeJSON(s.Out, v)
	}
	if v.Note != "" {
		fmt.Fprintln(s.Err, "orch: "+v.Note)
	}
	fmt.Fprintf(s.Out, "handed over, not acknowledged: %d\n", len(v.Taken))
	for _, it := range v.Taken {
		fmt.Fprintf(s.Out, "  %s  %s\n", it.Callback.Event, it.Callback.Line)
	}
	fmt.Fprintf(s.Out, "waiting: %d\n", len(v.Waiting))
	for _, it := range v.Waiting {
		fmt.Fprintf(s.Out, "  %s  %s\n", it.Callback.Event, it.Callback.Line)
	}
	if v.Armed {
		fmt.Fprintf(s.Out, "a hook is waiting to wake the lead (pid %d)\n", v.HookPID)
	} else {
		fmt.Fprintln(s.Out, "no hook is waiting to wake the lead (it wakes at its next turn's end)")
	}
	return nil
}

type ackOptions struct {
	Agent string
	All   bool
	JSON  bool
}

func newAckCmd(s streams) *cobra.Command {
	o := &ackOptions{}
	cmd := &cobra.Command{
		Use:   "ack <event>... | --all",
		Short: "Mark callbacks handed over to the lead agent as acted on",
		Args: func(_ *cobra.Command, args []string) error {
			if (len(args) == 0) != o.All {
				return usagef("want the event ids orch inbox shows, or --all")
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			root, err := repoRoot(cmd.Context())
			if err != nil {
				return err
			}
			acked, err := orchctl.AckLead(root, o.Agent, args, o.All)
			if err != nil {
				return err
			}
			if o.JSON {
				return writeJSON(s.Out, acked)
			}
			for _, it := range acked {
				fmt.Fprintf(s.Out, "acknowledged %s  %s\n", it.Callback.Event, it.Callback.Line)
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&o.Agent, "agent", "claude", "the lead agent installed with orch lead install")
	cmd.Flags().BoolVar(&o.All, "all", false, "acknowledge every callback handed over")
	cmd.Flags().BoolVar(&o.JSON, "json", false, "print the callbacks acknowledged as JSON")
	return cmd
}
