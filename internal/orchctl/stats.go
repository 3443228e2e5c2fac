package orchctl

import (
	"bytes"
	"context"
	"fmt"

	"github.com/orch-dev/orch/git"
	"github.com/orch-dev/orch/ledger"
	"github.com/orch-dev/orch/plans"
	"github.com/orch-dev/orch/stats"
)

// Stats is orch stats' report of the repo at root: the ledger as orch
// ledger list reads it (the work tree's, where the lead loop appends and
// at once commits), the plans' depends_on, and the verdicts of the
// verification matrices as committed (a worker may write the file in the
// work tree; a refuted plan has no ledger entry, its matrix is its only
// record). note is advice for stderr: the ledger read is not HEAD's.
func Stats(ctx context.Context, root string) (r stats.Report, note string, err error) {
	entries, err := ledger.Load(root)
	if err != nil {
		return r, "", fmt.Errorf("stats: %w", err)
	}
	repo, err := git.Open(ctx, root)
	if err != nil {
		return r, "", fmt.Errorf("stats: %w", err)
	}
	current, err := ledger.Read(root)
	if err != nil {
		return r, "", fmt.Errorf("stats: %w", err)
	}
	committed, _, err := repo.ShowCommitted(ctx, "HEAD", ledger.File)
	switch {
	case err != nil:
		note = fmt.Sprintf("%s not compared with HEAD (%v); counted as it is in the work tree", ledger.File, err)
	case !bytes.Equal(committed, current):
		note = fmt.Sprintf("%s differs from HEAD's; counted as it is in the work tree", ledger.File)
	}
	all, _, err := plans.LoadEach(root) // a broken plan folder only loses its depends_on fallback
	if err != nil {
		return r, note, fmt.Errorf("stats: %w", err)
	}
	deps := map[string][]string{}
	var verdicts []stats.Verdict
	for name, p := range all {
		deps[name] = p.DependsOn
		if data, ok, err := repo.ShowCommitted(ctx, "HEAD", plans.Dir+"/"+name+"/"+plans.VerificationFile); err == nil && ok {
			if author, outcome, ok := plans.MatrixOutcome(data); ok {
				verdicts = append(verdicts, stats.Verdict{Plan: name, Author: author, Outcome: outcome})
			}
		}
	}
	return stats.Compute(entries, deps, verdicts), note, nil
}
