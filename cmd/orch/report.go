package main

import (
	"context"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/orch-dev/orch/internal/orchctl"
	"github.com/orch-dev/orch/plans"
)

type reportOptions struct {
	Name string
	JSON bool
}

func newReportCmd(s streams) *cobra.Command {
	o := &reportOptions{}
	cmd := &cobra.Command{
		Use:   "report [<name>]",
		Short: "The verification matrix: claim × round × verifier × verdict × evidence",
		Args: func(_ *cobra.Command, args []string) error {
			if len(args) > 1 {
				return usagef("want at most one plan name")
			}
			if len(args) == 1 {
				if err := plans.ValidateName(args[0]); err != nil {
					return usageError{err}
				}
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) == 1 {
				o.Name = args[0]
			}
			return reportRun(cmd.Context(), o, s)
		},
	}
	cmd.Flags().BoolVar(&o.JSON, "json", false, "print a JSON list of matrices")
	return cmd
}

func reportRun(ctx context.Context, o *reportOptions, s streams) error {
	root, err := repoRoot(ctx)
	if err != nil {
		return err
	}
	reps, err := orchctl.Reports(root, o.Name)
	if err != nil {
		return err
	}
	if o.JSON {
		return writeJSON(s.Out, reps)
	}
	for i, r := range reps {
		if i > 0 {
			fmt.Fprintln(s.Out)
		}
		fmt.Fprint(s.Out, plans.RenderMatrix(r.Plan, r.Verification))
	}
	if len(reps) == 0 {
		fmt.Fprintln(s.Out, "no plan has been put to verification")
	}
	return nil
}
