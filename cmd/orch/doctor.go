package main

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/orch-dev/orch/internal/orchctl"
	"github.com/spf13/cobra"
)

type doctorOptions struct {
	Agent        string
	JSON         bool
	ProbeTimeout time.Duration
}

var errDoctor = errors.New("some checks failed")

func newDoctorCmd(s streams) *cobra.Command {
	o := &doctorOptions{}
	cmd := &cobra.Command{
		Use:   "doctor",
		Short: "Check tmux, git, orch-notify, the agent profiles and the lead loop; say how to fix what is missing",
		Long: "Check tmux, git, orch-notify, the agent command and the lead loop, and probe every agent profile\n" +
			"(built-in and orch.yaml) for real: is it on PATH, does its version command answer. Profiles are\n" +
			"optional (marked warn when unusable); any other failed check makes orch doctor exit 1.",
		Args: exactArgs(0, "no arguments"),
		RunE: func(cmd *cobra.Command, _ []string) error { return doctorRun(cmd.Context(), o, s) },
	}
	cmd.Flags().StringVar(&o.Agent, "agent", "", "the agent profile or command the workers will run (a failure if unusable)")
	cmd.Flags().DurationVar(&o.ProbeTimeout, "probe-timeout", orchctl.DefaultProbeTimeout, "how long each agent's version command may take before its process group is killed")
	cmd.Flags().BoolVar(&o.JSON, "json", false, "print the checks as JSON")
	return cmd
}

func doctorRun(ctx context.Context, o *doctorOptions, s streams) error {
	root, _ := repoRoot(ctx)
	checks := orchctl.Doctor(ctx, orchctl.DoctorConfig{Root: root, Agent: o.Agent, BinDir: binDir(), Probe: o.ProbeTimeout})
	failed := 0
	for _, c := range checks {
		if !c.OK && !c.Optional {
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
			switch {
			case !c.OK && c.Optional:
				mark = "warn"
			case !c.OK:
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
