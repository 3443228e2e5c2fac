package main

import (
	"bytes"
	"context"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/orch-dev/orch/git"
	"github.com/orch-dev/orch/ledger"
	"github.com/orch-dev/orch/plans"
	"github.com/orch-dev/orch/stats"
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

// statsRun reads the ledger as orch ledger list does, from the main work
// tree, where the lead loop appends and at once commits it; a ledger that
// differs from HEAD's is said so on stderr, since the numbers then include
// lines not committed (or miss ones edited away).
func statsRun(ctx context.Context, o *statsOptions, s streams) error {
	root, err := repoRoot(ctx)
	if err != nil {
		return err
	}
	entries, err := ledger.Load(root)
	if err != nil {
		return fmt.Errorf("stats: %w", err)
	}
	if err := noteUncommitted(ctx, root, s); err != nil {
		return fmt.Errorf("stats: %w", err)
	}
	all, _, err := plans.LoadEach(root) // a broken plan folder only loses its depends_on fallback
	if err != nil {
		return fmt.Errorf("stats: %w", err)
	}
	repo, err := git.Open(ctx, root)
	if err != nil {
		return fmt.Errorf("stats: %w", err)
	}
	deps := map[string][]string{}
	var verdicts []stats.Verdict
	for name, p := range all {
		deps[name] = p.DependsOn
		// The matrix as the lead loop committed it (a worker may write the
		// file in the work tree): a refuted plan's only record.
		if data, ok, err := repo.ShowCommitted(ctx, "HEAD", plans.Dir+"/"+name+"/"+plans.VerificationFile); err == nil && ok {
			if author, outcome, ok := plans.MatrixOutcome(data); ok {
				verdicts = append(verdicts, stats.Verdict{Plan: name, Author: author, Outcome: outcome})
			}
		}
	}
	r := stats.Compute(entries, deps, verdicts)
	if o.JSON {
		return writeJSON(s.Out, r)
	}
	return r.WriteText(s.Out)
}

// noteUncommitted says on stderr when the ledger read is not HEAD's. It
// is advice: a repository without commits, or a git that fails, only
// changes the note.
func noteUncommitted(ctx context.Context, root string, s streams) error {
	current, err := ledger.Read(root)
	if err != nil {
		return err
	}
	repo, err := git.Open(ctx, root)
	if err != nil {
		return err
	}
	committed, _, err := repo.ShowCommitted(ctx, "HEAD", ledger.File)
	switch {
	case err != nil:
		fmt.Fprintf(s.Err, "orch stats: %s not compared with HEAD (%v); counted as it is in the work tree\n", ledger.File, err)
	case !bytes.Equal(committed, current):
		fmt.Fprintf(s.Err, "orch stats: %s differs from HEAD's; counted as it is in the work tree\n", ledger.File)
	}
	return nil
}
