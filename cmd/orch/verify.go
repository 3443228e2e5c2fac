package main

import (
	"context"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/orch-dev/orch/internal/orchctl"
	"github.com/orch-dev/orch/plans"
)

type verifyOptions struct {
	Name   string
	Rounds int
	JSON   bool
	Wait   time.Duration
}

func newVerifyCmd(s streams) *cobra.Command {
	o := &verifyOptions{}
	cmd := &cobra.Command{
		Use:   "verify <name>",
		Short: "Have workers other than the author try to refute a harvested plan's claims",
		Args:  exactArgs(1, "one plan name"),
		RunE: func(cmd *cobra.Command, args []string) error {
			o.Name = args[0]
			if err := plans.ValidateName(o.Name); err != nil {
				return usageError{err}
			}
			if o.Rounds != 1 && o.Rounds != 3 {
				return usagef("--rounds must be 1 or 3")
			}
			return verifyRun(cmd.Context(), o, s)
		},
	}
	cmd.Flags().IntVar(&o.Rounds, "rounds", 1, "1 (audit) or 3 (audit, refute, confirm)")
	cmd.Flags().BoolVar(&o.JSON, "json", false, "print the result as JSON")
	cmd.Flags().DurationVar(&o.Wait, "wait", orchctl.DefaultVerdictWait, "how long to wait for the lead loop's verdict (a refusal exits 1); 0: do not wait")
	return cmd
}

func verifyRun(ctx context.Context, o *verifyOptions, s streams) error {
	root, err := repoRoot(ctx)
	if err != nil {
		return err
	}
	res, err := orchctl.Verify(ctx, root, o.Name, o.Rounds, o.Wait)
	if err != nil {
		return err
	}
	if o.JSON {
		return writeJSON(s.Out, res)
	}
	fmt.Fprintln(s.Out, commandLine(fmt.Sprintf("verification of %s asked (%d round(s))", o.Name, o.Rounds), res, o.Wait))
	return nil
}
