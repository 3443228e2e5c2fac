package integrate

import (
	"errors"
	"slices"
	"testing"

	"github.com/orch-dev/orch/internal/state"
)

func TestApproved(t *testing.T) {
	st := state.New()
	st.Plans = map[string]*state.Run{
		"done":     {Name: "done", State: state.PlanDone},
		"verified": {Name: "verified", State: state.PlanVerified},
		"conflict": {Name: "conflict", State: state.PlanConflict},
		"in":       {Name: "in", State: state.PlanIntegrated},
		"retry":    {Name: "retry", State: state.PlanFailed, Reason: Reason + "gate fails"},
		"failed":   {Name: "failed", State: state.PlanFailed, Reason: "worker died"},
		"round":    {Name: "round", State: state.PlanDone, VerifyOf: "done"},
	}
	got, err := approved(st, nil)
	if want := []string{"conflict", "done", "retry", "verified"}; err != nil || !slices.Equal(got, want) {
		t.Errorf("approved(all) = %v, %v; want %v", got, err, want)
	}
	tests := []struct {
		named []string
		ok    bool
	}{
		{[]string{"in", "retry"}, true},
		{[]string{"failed"}, false},
		{[]string{"round"}, false},
		{[]string{"never"}, false},
	}
	for _, tc := range tests {
		_, err := approved(st, tc.named)
		if tc.ok != (err == nil) || (!tc.ok && !errors.Is(err, ErrNotApproved)) {
			t.Errorf("approved(%v): %v; want ok=%v, else ErrNotApproved", tc.named, err, tc.ok)
		}
	}
}

func TestStepLine(t *testing.T) {
	tests := []struct {
		s    Step
		want string
	}{
		{Step{Plan: "p", Branch: "orch/p", Base: "main", Commits: 1, Outcome: Integrated, Commit: "0123456789abcdef"},
			"Integrated p: orch/p (1 commit) into main at 0123456789"},
		{Step{Plan: "p", Branch: "orch/p", Base: "main", Commits: 2, Outcome: WouldIntegrate, Commit: "abc", Reason: "its 1 acceptance gates would run on the merged code"},
			"Would integrate p: orch/p (2 commits) into main at abc; its 1 acceptance gates would run on the merged code"},
		{Step{Plan: "p", Branch: "orch/p", Base: "main", Outcome: Conflict, Files: []string{"a.go", "b.go"}},
			"Conflict p: orch/p with main in a.go, b.go"},
		{Step{Plan: "p", Outcome: Skipped, Reason: "depends on q"}, "Skipped p: depends on q"},
	}
	for _, tc := range tests {
		if got := tc.s.Line(); got != tc.want {
			t.Errorf("Line() = %q, want %q", got, tc.want)
		}
	}
}
