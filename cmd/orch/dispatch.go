package main

import (
	"context"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/orch-dev/orch/internal/orchctl"
	"github.com/orch-dev/orch/plans"
)

type dispatchOptions struct {
	Names []string
	To    string
	JSON  bool
}

func newDispatchCmd(s streams) *cobra.Command {
	o := &dispatchOptions{}
	cmd := &cobra.Command{
		Use:   "dispatch <name>...",
		Short: "Queue plans; the lead loop hands each to an idle worker once its dependencies are done",
		Args: func(_ *cobra.Command, args []string) error {
			if len(args) == 0 {
				return usagef("want at least one plan name")
			}
			for _, a := range args {
				if err := plans.ValidateName(a); err != nil {
					return usageError{err}
				}
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			o.Names = args
			return dispatchRun(cmd.Context(), o, s)
		},
	}
	cmd.Flags().StringVar(&o.To, "to", "", "worker to give the plan to (e.g. w2)")
	cmd.Flags().BoolVar(&o.JSON, "json", false, "print the result as JSON")
	return cmd
}

func dispatchRun(ctx context.Context, o *dispatchOptions, s streams) error {
	root, err := repoRoot(ctx)
	if err != nil {
		return err
	}
	var out []orchctl.DispatchResult
	for _, n := range o.Names {
		res, err := orchctl.Dispatch(ctx, root, n, o.To)
		if err != nil {
			return err
		}
		out = append(out, res)
		if !o.JSON {
			if res.Spooled {
				fmt.Fprintf(s.Out, "queued %s (spooled: orch serve is not running; it takes effect when it starts)\n", n)
			} else {
				fmt.Fprintf(s.Out, "queued %s\n", n)
			}
		}
	}
	if o.JSON {
		return writeJSON(s.Out, out)
	}
	return nil
}
