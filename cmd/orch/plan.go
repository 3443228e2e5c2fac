package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/spf13/cobra"

	"github.com/orch-dev/orch/internal/orchctl"
	"github.com/orch-dev/orch/plans"
)

type planNewOptions struct {
	Name       string
	DependsOn  []string
	Accept     []string
	Priority   int
	Verify     int
	Timeout    string
	Agent      []string
	VerifyWith string
	Body       string
	BodyFile   string
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
	newCmd.Flags().IntVar(&o.Verify, "verify", 0, "rounds of independent verification after harvest: 0, 1 or 3")
	newCmd.Flags().StringVar(&o.Timeout, "timeout", "", "how long a worker may hold the plan before the lead loop interrupts it (e.g. 45m; default: orch.yaml's plan_timeout)")
	newCmd.Flags().StringSliceVar(&o.Agent, "agent", nil, "send the plan only to workers of this agent profile; several (comma-separated or repeated) in order of preference")
	newCmd.Flags().StringVar(&o.VerifyWith, "verify-with", "", "whose workers verify it: other-agent (an agent other than the author's) or a profile name")
	newCmd.Flags().StringVar(&o.BodyFile, "body-file", "", "read the task text from this file (- for stdin)")
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
	if o.BodyFile != "" {
		if o.Body != "" {
			return usagef("give --body or --body-file, not both")
		}
		var data []byte
		if o.BodyFile == "-" {
			data, err = io.ReadAll(io.LimitReader(s.In, plans.MaxPlanSize+1))
		} else {
			data, err = os.ReadFile(o.BodyFile)
		}
		if err != nil {
			return err
		}
		body = string(data)
	}
	if body == "" {
		body = fmt.Sprintf("# %s\n\nGoal:\n\nScope:\n\nAcceptance:\n", o.Name)
	}
	if !strings.HasSuffix(body, "\n") {
		body += "\n"
	}
	p := &plans.Plan{Name: o.Name, DependsOn: o.DependsOn, Acceptance: o.Accept, Priority: o.Priority, Verify: o.Verify,
		Timeout: o.Timeout, Agent: o.Agent, VerifyWith: o.VerifyWith, Body: body}
	sha, err := orchctl.NewPlan(ctx, root, p)
	if err != nil {
		return err
	}
	fmt.Fprintf(s.Out, "wrote %s (commit %.10s)\n", plans.RelPlanPath(o.Name), sha)
	return nil
}
