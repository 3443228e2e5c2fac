package main

import (
	"context"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/orch-dev/orch/internal/orchctl"
)

type statsOptions struct{ JSON bool }

func newStatsCmd(s streams) *cobra.Command {
	o := &statsOptions{}
	cmd := &cobra.Command{
		Use:   "stats",
		Short: "How the fleet worked, from the ledger: per profile, per worker, critical path, idle time",
		Args:  exactArgs(0, "no arguments"),
		RunE:  func(cmd *cobra.Command, _ []string) error { return statsRun(cmd.Context(), o, s) },
	}
	cmd.Flags().BoolVar(&o.JSON, "json", false, "print the report as one JSON document")
	return cmd
}

// statsRun prints orch stats (orchctl.Stats); a ledger that differs from
// HEAD's is said so on stderr, since the numbers then include lines not
// committed (or miss ones edited away).
func statsRun(ctx context.Context, o *statsOptions, s streams) error {
	root, err := repoRoot(ctx)
	if err != nil {
		return err
	}
	r, note, err := orchctl.Stats(ctx, root)
	if err != nil {
		return err
	}
	if note != "" {
		fmt.Fprintln(s.Err, "orch stats: "+note)
	}
	if o.JSON {
		return writeJSON(s.Out, r)
	}
	return r.WriteText(s.Out)
}
