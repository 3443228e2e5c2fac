package main

import (
	"context"
	"errors"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/orch-dev/orch/lead"
)

type doctorOptions struct {
	Agent string
	JSON  bool
}

var errDoctor = errors.New("some checks failed")

func newDoctorCmd(s streams) *cobra.Command {
	o := &doctorOptions{}
	cmd := &cobra.Command{
		Use:   "doctor",
		Short: "Check tmux, git, orch-notify, the agent command and the lead loop; say how to fix what is missing",
		Args:  exactArgs(0, "no arguments"),
		RunE:  func(cmd *cobra.Command, _ []string) error { return doctorRun(cmd.Context(), o, s) },
	}
	cmd.Flags().StringVar(&o.Agent, "agent", "", "the agent command the workers will run")
	cmd.Flags().BoolVar(&o.JSON, "json", false, "print the checks as JSON")
	return cmd
}

func doctorRun(ctx context.Context, o *doctorOptions, s streams) error {
	root, _ := repoRoot(ctx)
	checks := lead.Doctor(ctx, root, o.Agent, binDir())
	failed := 0
	for _, c := range checks {
		if !c.OK {
			failed++
		}
	}
	if o.JSON {
		if err := writeJSON(s.Out, checks); err != nil {
			return err
		}
	} else {
		for _, c := range checks {
			mark := "ok  "
			if !c.OK {
				mark = "FAIL"
			}
			line := fmt.Sprintf("%s %-24s %s", mark, c.Name, c.Info)
			if c.Fix != "" {
				line += " — fix: " + c.Fix
			}
			fmt.Fprintln(s.Out, line)
		}
	}
	if failed > 0 {
		return fmt.Errorf("%w (%d)", errDoctor, failed)
	}
	return nil
}
