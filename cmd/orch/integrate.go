package main

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"

	"github.com/orch-dev/orch/gates"
	"github.com/orch-dev/orch/integrate"
	"github.com/orch-dev/orch/plans"
)

type integrateOptions struct {
	Plans       []string
	DryRun      bool
	GateTimeout time.Duration
	JSON        bool
}

func newIntegrateCmd(s streams) *cobra.Command {
	o := &integrateOptions{}
	cmd := &cobra.Command{
		Use:   "integrate [<name>...]",
		Short: "Merge approved plan branches into the checked-out branch in dependency order, re-running their gates",
		RunE: func(cmd *cobra.Command, args []string) error {
			for _, a := range args {
				if err := plans.ValidateName(a); err != nil {
					return usageError{err}
				}
			}
			o.Plans = args
			return integrateRun(cmd.Context(), o, s)
		},
	}
	cmd.Flags().BoolVar(&o.DryRun, "dry-run", false, "print the order and what would happen (predicted conflicts included); change nothing")
	cmd.Flags().DurationVar(&o.GateTimeout, "gate-timeout", gates.DefaultGateTimeout, "how long each acceptance command may run on the combined code")
	cmd.Flags().BoolVar(&o.JSON, "json", false, "print the steps as JSON")
	return cmd
}

func integrateRun(ctx context.Context, o *integrateOptions, s streams) error {
	root, err := repoRoot(ctx)
	if err != nil {
		return err
	}
	var progress io.Writer = s.Out
	if o.JSON {
		progress = nil
	}
	steps, err := integrate.Run(ctx, root, integrate.Options{Plans: o.Plans, DryRun: o.DryRun, GateTimeout: o.GateTimeout, Progress: progress})
	if err != nil {
		return err
	}
	if o.JSON {
		if steps == nil {
			steps = []integrate.Step{}
		}
		if err := writeJSON(s.Out, steps); err != nil {
			return err
		}
	} else if len(steps) == 0 {
		fmt.Fprintln(s.Out, "nothing to integrate: no plan is done or verified")
	}
	var bad []string
	for _, st := range steps {
		if st.Outcome != integrate.Integrated && st.Outcome != integrate.WouldIntegrate && st.Outcome != integrate.WouldConflict {
			bad = append(bad, st.Plan+" ("+st.Outcome+")")
		}
		if st.Spooled {
			fmt.Fprintf(s.Err, "orch integrate: %s's outcome waits in the spool: orch serve is not running\n", st.Plan)
		}
	}
	if len(bad) > 0 && !o.DryRun {
		return fmt.Errorf("integrate: %d plan(s) not integrated: %v", len(bad), bad)
	}
	return nil
}
