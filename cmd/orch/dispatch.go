package main

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/orch-dev/orch/internal/orchctl"
	"github.com/orch-dev/orch/plans"
)

type dispatchOptions struct {
	Names []string
	To    string
	JSON  bool
	Wait  time.Duration
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
	cmd.Flags().DurationVar(&o.Wait, "wait", orchctl.DefaultVerdictWait, "how long to wait for the lead loop's verdict (a refusal exits 1); 0: do not wait")
	return cmd
}

func dispatchRun(ctx context.Context, o *dispatchOptions, s streams) error {
	root, err := repoRoot(ctx)
	if err != nil {
		return err
	}
	// Each plan is sent and answered for itself: a refusal of one does not
	// keep the others from being queued; it makes the exit status 1.
	var out []orchctl.DispatchResult
	var errs []error
	for _, n := range o.Names {
		res, err := orchctl.Dispatch(ctx, root, n, o.To, o.Wait)
		if err != nil && !res.Refused {
			return errors.Join(append(errs, err)...)
		}
		out = append(out, res)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if !o.JSON {
			fmt.Fprintln(s.Out, commandLine("queued "+n, res, o.Wait))
		}
	}
	if o.JSON {
		if err := writeJSON(s.Out, out); err != nil {
			return err
		}
	}
	return errors.Join(errs...)
}

// commandLine is what orch dispatch and orch verify print for a command
// the lead loop took (or has not answered yet).
func commandLine(done string, res orchctl.DispatchResult, wait time.Duration) string {
	switch {
	case res.Spooled:
		return done + " (spooled: orch serve is not running; it takes effect when it starts)"
	case !res.Answered && wait > 0:
		return fmt.Sprintf("%s: sent; the lead loop has not answered within %s (it is busy): it takes effect when the loop reaches it, and orch status shows it", done, wait)
	}
	return done
}
