// Package rebuild makes the lead loop's record (.orch/state.json) again
// from what git keeps when the file is lost: the ledger's entries, the
// harvest commits' Orch-Event trailers and orch integrate's
// Orch-Integrated ones. What git does not keep (which worker holds a plan
// now, what is queued) is not invented: those plans come back as drafts.
package rebuild

import (
	"context"
	"fmt"
	"maps"
	"path"
	"slices"
	"strings"
	"time"

	"github.com/orch-dev/orch/event"
	"github.com/orch-dev/orch/git"
	"github.com/orch-dev/orch/harvest"
	"github.com/orch-dev/orch/internal/state"
	"github.com/orch-dev/orch/ledger"
	"github.com/orch-dev/orch/plans"
)

// TrailerIntegrated is the trailer of orch integrate's merge commits.
const TrailerIntegrated = "Orch-Integrated"

// Report says what a rebuild found, plan by plan.
type Report struct {
	Done       []string // ledgered: done, with their harvest and ledger entry
	Integrated []string // merged by orch integrate
	Unfinished []string // harvested without a ledger entry: failed, to be dispatched again
}

// Empty says whether git held nothing to rebuild from.
func (r Report) Empty() bool {
	return len(r.Done)+len(r.Integrated)+len(r.Unfinished) == 0
}

func (r Report) String() string {
	if r.Empty() {
		return "nothing in git to rebuild from"
	}
	var parts []string
	add := func(n []string, what string) {
		if len(n) > 0 {
			parts = append(parts, fmt.Sprintf("%d %s (%s)", len(n), what, strings.Join(n, ", ")))
		}
	}
	add(r.Done, "done")
	add(r.Integrated, "integrated")
	add(r.Unfinished, "harvested without a ledger entry, now failed")
	return strings.Join(parts, "; ")
}

// Rebuild returns the record git implies for the repo at root, and what it
// found. Every event id git names is recorded as handled, so a redelivery
// of a harvested done has no second effect.
func Rebuild(ctx context.Context, root string, repo *git.Repo, now time.Time) (*state.State, Report, error) {
	st := state.New()
	var rep Report
	entries, err := ledger.Load(root)
	if err != nil {
		return nil, rep, fmt.Errorf("rebuild: %w", err)
	}
	history, err := repo.History(ctx, harvest.TrailerEvent, TrailerIntegrated)
	if err != nil {
		return nil, rep, fmt.Errorf("rebuild: %w", err)
	}
	handled := func(id, plan, note string) {
		if id != "" {
			st.Handled[id] = &state.Handled{Kind: string(event.Done), Plan: plan, Time: now, Note: note}
		}
	}
	// The ledger first: the latest entry of each plan says it was done.
	for _, en := range entries {
		if plans.ValidateName(en.Plan) != nil {
			continue
		}
		st.Plans[en.Plan] = &state.Run{Name: en.Plan, State: state.PlanDone, Worker: en.Worker, Status: en.Status,
			Result: en.Commit, Ledger: en.ID, DoneEvent: en.Event, DoneTime: en.Time, Updated: now, Attempts: 1}
		handled(en.Event, en.Plan, "rebuilt from the ledger")
	}
	// Then the history, oldest first, so the newest commit of a plan wins.
	slices.Reverse(history)
	at := map[string]int{} // each commit's place, oldest first
	for i, c := range history {
		at[c.SHA] = i
	}
	for i, c := range history {
		for _, p := range c.Trailers[TrailerIntegrated] {
			// Only a merge after the plan's latest harvest: a plan done
			// again after it was integrated waits to be integrated again.
			if r := st.Plans[p]; r != nil && r.State == state.PlanDone && (at[r.Result] < i || !inHistory(at, r.Result)) {
				r.State, r.Merged, r.Reason = state.PlanIntegrated, c.SHA, ""
			}
		}
		harvested := resultPlans(c.Files)
		for _, id := range c.Trailers[harvest.TrailerEvent] {
			if _, ok := st.Handled[id]; ok {
				continue // ledgered
			}
			for _, p := range harvested {
				if r := st.Plans[p]; r != nil && r.State != state.PlanFailed {
					continue // a later attempt's ledger entry, or already integrated
				}
				st.Plans[p] = &state.Run{Name: p, State: state.PlanFailed, Result: c.SHA, DoneEvent: id, DoneTime: c.Time, Updated: now, Attempts: 1,
					Reason: fmt.Sprintf("rebuilt after state.json was lost: harvested in %s, but no ledger entry followed (its gates or verification failed or did not finish); orch dispatch it again", git.Short(c.SHA))}
			}
			handled(id, strings.Join(harvested, ","), "rebuilt from a harvest commit")
		}
	}
	for _, name := range slices.Sorted(maps.Keys(st.Plans)) {
		switch st.Plans[name].State {
		case state.PlanDone:
			rep.Done = append(rep.Done, name)
		case state.PlanIntegrated:
			rep.Integrated = append(rep.Integrated, name)
		case state.PlanFailed:
			rep.Unfinished = append(rep.Unfinished, name)
		}
	}
	return st, rep, nil
}

// resultPlans are the plans whose RESULT.md a harvest commit holds.
func resultPlans(files []string) []string {
	var names []string
	for _, f := range files {
		dir, file := path.Split(f)
		if file != plans.ResultFile {
			continue
		}
		parent, name := path.Split(strings.TrimSuffix(dir, "/"))
		if parent == plans.Dir+"/" && plans.ValidateName(name) == nil {
			names = append(names, name)
		}
	}
	return names
}

// inHistory says whether sha is one of the history's commits (a harvest
// commit outside it, in a shallow clone, say, cannot be ordered).
func inHistory(at map[string]int, sha string) bool {
	_, ok := at[sha]
	return ok
}
