package main

import (
	"context"
	"os"
	"os/signal"
	"strings"

	"github.com/spf13/cobra"

	"github.com/orch-dev/orch/demo"
	"github.com/orch-dev/orch/internal/runner"
)

func newAgentCmd(s streams) *cobra.Command {
	return &cobra.Command{
		Use:    "agent",
		Short:  "The built-in scripted agent (what orch demo runs in each pane)",
		Hidden: true,
		Args:   cobra.MaximumNArgs(1),
		RunE:   func(cmd *cobra.Command, args []string) error { return agentRun(cmd.Context(), s, args) },
	}
}

// agentRun reads dispatch lines from stdin, as an agent in a pane does, or,
// given one as its argument (headless), runs that plan and exits.
func agentRun(ctx context.Context, s streams, args []string) error {
	wd, err := os.Getwd()
	if err != nil {
		return err
	}
	in := s.In
	if len(args) == 1 {
		in = strings.NewReader(args[0] + "\n")
	}
	// An interrupt stops the plan at work, not the agent (as Escape does a
	// real agent's turn).
	interrupts := make(chan os.Signal, 1)
	signal.Notify(interrupts, os.Interrupt)
	defer signal.Stop(interrupts)
	a := &demo.Agent{Dir: wd, In: in, Out: s.Out, Runner: runner.OS{}, Interrupts: interrupts}
	return a.Run(ctx)
}
