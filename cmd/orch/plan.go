package main

import (
	"context"
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/orch-dev/orch/lead"
	"github.com/orch-dev/orch/plans"
)

type planNewOptions struct {
	Name      string
	DependsOn []string
	Accept    []string
	Priority  int
	Body      string
}

func newPlanCmd(s streams) *cobra.Command {
	cmd := &cobra.Command{Use: "plan", Short: "Write plans"}
	o := &planNewOptions{}
	newCmd := &cobra.Command{
		Use:   "new <name>",
		Short: "Write and commit plans/<name>/PLAN.md",
		Args:  exactArgs(1, "one plan name"),
		RunE: func(cmd *cobra.Command, args []string) error {
			o.Name = args[0]
			if err := plans.ValidateName(o.Name); err != nil {
				return usageError{err}
			}
			return planNewRun(cmd.Context(), o, s)
		},
	}
	newCmd.Flags().StringSliceVar(&o.DependsOn, "depends-on", nil, "plans that must be done first (comma-separated)")
	newCmd.Flags().StringArrayVar(&o.Accept, "accept", nil, "acceptance command the lead loop runs (repeatable)")
	newCmd.Flags().IntVar(&o.Priority, "priority", 0, "higher is dispatched first")
	newCmd.Flags().StringVar(&o.Body, "body", "", "the task text for the worker (default: a template to edit)")
	cmd.AddCommand(newCmd)
	return cmd
}

func planNewRun(ctx context.Context, o *planNewOptions, s streams) error {
	root, err := repoRoot(ctx)
	if err != nil {
		return err
	}
	body := o.Body
	if body == "" {
		body = fmt.Sprintf("# %s\n\nGoal:\n\nScope:\n\nAcceptance:\n", o.Name)
	}
	if !strings.HasSuffix(body, "\n") {
		body += "\n"
	}
	p := &plans.Plan{Name: o.Name, DependsOn: o.DependsOn, Acceptance: o.Accept, Priority: o.Priority, Body: body}
	sha, err := lead.NewPlan(ctx, root, p)
	if err != nil {
		return err
	}
	fmt.Fprintf(s.Out, "wrote %s (commit %.10s)\n", plans.RelPlanPath(o.Name), sha)
	return nil
}
