package main

import (
	"context"
	"os"

	"github.com/spf13/cobra"

	"github.com/orch-dev/orch/demo"
	"github.com/orch-dev/orch/internal/runner"
)

func newAgentCmd(s streams) *cobra.Command {
	return &cobra.Command{
		Use:    "agent",
		Short:  "The built-in scripted agent (what orch demo runs in each pane)",
		Hidden: true,
		Args:   exactArgs(0, "no arguments"),
		RunE:   func(cmd *cobra.Command, _ []string) error { return agentRun(cmd.Context(), s) },
	}
}

func agentRun(ctx context.Context, s streams) error {
	wd, err := os.Getwd()
	if err != nil {
		return err
	}
	a := &demo.Agent{Dir: wd, In: s.In, Out: s.Out, Runner: runner.OS{}}
	return a.Run(ctx)
}
