package main

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/orch-dev/orch/bus"
	"github.com/orch-dev/orch/event"
	"github.com/orch-dev/orch/internal/orchctl"
)

type busOptions struct {
	Follow bool
	Plan   string
	Topic  string
	Fleet  bool
	JSON   bool
}

func newBusCmd(s streams) *cobra.Command {
	o := &busOptions{}
	cmd := &cobra.Command{
		Use:   "bus",
		Short: "What the workers said to each other (orch-notify say), oldest first",
		Long: "Print the says on the bus, one line each: #<seq> <time> <worker> [<topic>]: <text>, the text\n" +
			"escaped. The worker is the one whose key sent it. --follow waits for new ones. The same lines\n" +
			"are mirrored to .orch/bus.md.",
		Args: exactArgs(0, "no arguments"),
		RunE: func(cmd *cobra.Command, _ []string) error { return busRun(cmd.Context(), o, s) },
	}
	cmd.Flags().BoolVarP(&o.Follow, "follow", "f", false, "wait for new says until interrupted")
	cmd.Flags().StringVar(&o.Plan, "plan", "", "only the says on this plan's topic (orch-notify say --plan)")
	cmd.Flags().StringVar(&o.Topic, "topic", "", "only the says on this named topic (orch-notify say --topic)")
	cmd.Flags().BoolVar(&o.Fleet, "fleet", false, "only the fleet-wide says")
	cmd.Flags().BoolVar(&o.JSON, "json", false, "print one JSON object per say")
	return cmd
}

func busRun(ctx context.Context, o *busOptions, s streams) error {
	n := 0
	for _, set := range []bool{o.Plan != "", o.Topic != "", o.Fleet} {
		if set {
			n++
		}
	}
	if n > 1 {
		return usagef("--plan, --topic and --fleet pick one topic: give one of them")
	}
	if o.Plan != "" {
		if err := event.CheckPlanName(o.Plan); err != nil {
			return usageError{err}
		}
	}
	if o.Topic != "" {
		if err := event.CheckTopic(o.Topic); err != nil {
			return usageError{err}
		}
	}
	topic := ""
	if n == 1 {
		topic = event.SayTopic(o.Plan, o.Topic)
	}
	root, err := repoRoot(ctx)
	if err != nil {
		return err
	}
	enc := json.NewEncoder(s.Out)
	return orchctl.Bus(ctx, root, orchctl.BusOptions{Topic: topic, Follow: o.Follow}, func(m bus.Message) error {
		if o.JSON {
			return enc.Encode(m)
		}
		_, err := fmt.Fprintln(s.Out, m.Line())
		return err
	}, func(seq uint64, err error) {
		fmt.Fprintf(s.Err, "orch: bus message #%d skipped: %v\n", seq, err)
	})
}
