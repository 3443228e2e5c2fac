package board

import (
	"cmp"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/orch-dev/orch/internal/state"
	"github.com/orch-dev/orch/plans"
)

// View is one board's picture of the fleet: what needs a person first,
// then workers, plans, the latest callbacks and the timeline.
type View struct {
	Serving bool `json:"serving"`
	// Note says why the view may be stale (orch serve is not running).
	Note      string      `json:"note,omitempty"`
	Serve     string      `json:"serve,omitempty"`
	Seq       uint64      `json:"seq"`
	Time      time.Time   `json:"time"`
	Session   string      `json:"session,omitempty"`
	Isolation string      `json:"isolation,omitempty"`
	Attention []Alert     `json:"attention"`
	Workers   []WorkerRow `json:"workers"`
	Plans     []PlanRow   `json:"plans"`
	Callbacks []Said      `json:"callbacks"`
	Timeline  Timeline    `json:"timeline"`
	// Critical is the critical path: the chain of dependent plans with the
	// longest total time, first plan first.
	Critical []string `json:"critical,omitempty"`
	// CriticalS is the critical path's plans' time added up, in seconds.
	CriticalS float64  `json:"critical_s,omitempty"`
	Rejected  int      `json:"rejected,omitempty"`
	Problems  []string `json:"problems,omitempty"`
}

// Alert is something a person should look at: a plan that needs input,
// is blocked, failed or conflicts, or a worker that died.
type Alert struct {
	Kind   string    `json:"kind"`
	Plan   string    `json:"plan,omitempty"`
	Worker string    `json:"worker,omitempty"`
	Text   string    `json:"text"`
	Since  time.Time `json:"since"`
}

// WorkerRow is one worker: its frame, and whether it needs a look (dead,
// or its plan does).
type WorkerRow struct {
	WorkerFrame
	Alert bool `json:"alert,omitempty"`
}

// PlanRow is one plan.
type PlanRow struct {
	Name      string    `json:"name"`
	State     string    `json:"state"`
	Attempt   int       `json:"attempt,omitempty"`
	Worker    string    `json:"worker,omitempty"`
	DependsOn []string  `json:"depends_on,omitempty"`
	Waiting   string    `json:"waiting,omitempty"`
	Gates     string    `json:"gates,omitempty"`
	Verdict   string    `json:"verdict,omitempty"`
	Reason    string    `json:"reason,omitempty"`
	Status    string    `json:"status,omitempty"`
	Since     time.Time `json:"since,omitzero"`
	Updated   time.Time `json:"updated,omitzero"`
	Tokens    string    `json:"tokens,omitempty"`
	Alert     bool      `json:"alert,omitempty"`
}

// Timeline is one row per worker, one bar per plan attempt.
type Timeline struct {
	Start time.Time `json:"start,omitzero"`
	End   time.Time `json:"end,omitzero"`
	Rows  []Row     `json:"rows"`
}

// Row is one worker's attempts, oldest first.
type Row struct {
	Worker string `json:"worker"`
	Bars   []Bar  `json:"bars"`
}

// Bar is one attempt of a plan on the row's worker. End is zero while it
// runs; Outcome is how it ended (done, failed, blocked, taken back) or the
// plan's state while it runs.
type Bar struct {
	Plan     string    `json:"plan"`
	Attempt  int       `json:"attempt"`
	Start    time.Time `json:"start"`
	End      time.Time `json:"end,omitzero"`
	Outcome  string    `json:"outcome"`
	Running  bool      `json:"running,omitempty"`
	Critical bool      `json:"critical,omitempty"`
}

// alertStates are the plan states a person must act on, most urgent first.
var alertStates = map[string]int{
	string(state.PlanNeedsInput): 0, string(state.PlanBlocked): 1, string(state.PlanFailed): 2, string(state.PlanTimedOut): 2,
	string(state.PlanConflict): 3, string(state.PlanRefuted): 4,
}

// rank orders plans on a board: alerts, then work going on, queued,
// finished, drafts.
func rank(s string) int {
	if r, ok := alertStates[s]; ok {
		return r
	}
	switch state.PlanState(s) {
	case state.PlanRunning, state.PlanDispatched, state.PlanVerifying:
		return 10
	case state.PlanQueued:
		return 20
	case state.PlanDone, state.PlanVerified, state.PlanIntegrated:
		return 30
	}
	return 40
}

// Build makes the view of frame f. defs are the plans' definitions from
// the plan folders (for dependencies and gates; nil is none); now is the
// board's clock, for bars still running.
func Build(f Frame, defs map[string]*plans.Plan, now time.Time) View {
	v := View{Serving: true, Serve: f.Serve, Seq: f.Seq, Time: f.Time, Session: f.Session, Isolation: f.Isolation,
		Attention: []Alert{}, Workers: []WorkerRow{}, Plans: []PlanRow{}, Callbacks: f.Callbacks, Rejected: f.Rejected}
	if v.Callbacks == nil {
		v.Callbacks = []Said{}
	}
	if f.Errors > 0 {
		v.Problems = append(v.Problems, fmt.Sprintf("%d events could not be committed yet (orch status says why)", f.Errors))
	}
	runs := map[string]*PlanFrame{}
	for i := range f.Plans {
		runs[f.Plans[i].Name] = &f.Plans[i]
	}
	defs = enforced(defs, runs)
	names := map[string]bool{}
	for n := range runs {
		names[n] = true
	}
	for n := range defs {
		names[n] = true
	}
	for n := range names {
		row := PlanRow{Name: n, State: string(state.PlanDraft)}
		d := defs[n]
		if d != nil {
			row.DependsOn = d.DependsOn
		}
		if p := runs[n]; p != nil {
			row.State, row.Attempt, row.Worker, row.Status, row.Updated = p.State, p.Attempt, p.Worker, p.Status, p.Updated
			row.Since, row.Reason, row.Gates, row.Verdict, row.Tokens = p.Since, p.Reason, p.Gates, p.Verdict, p.Tokens
		}
		if row.State == string(state.PlanQueued) && d != nil {
			row.Waiting = waiting(d, runs)
		}
		if _, ok := alertStates[row.State]; ok {
			row.Alert = true
			v.Attention = append(v.Attention, Alert{Kind: row.State, Plan: n, Worker: row.Worker, Text: cmp.Or(row.Reason, row.Status, row.State), Since: row.Updated})
		}
		v.Plans = append(v.Plans, row)
	}
	sort.Slice(v.Plans, func(i, j int) bool {
		a, b := v.Plans[i], v.Plans[j]
		if rank(a.State) != rank(b.State) {
			return rank(a.State) < rank(b.State)
		}
		return a.Name < b.Name
	})
	for _, w := range f.Workers {
		row := WorkerRow{WorkerFrame: w}
		if p := runs[w.Plan]; p != nil {
			if _, ok := alertStates[p.State]; ok {
				row.Alert = true
			}
		}
		if w.State == string(state.WorkerDead) {
			row.Alert = true
			v.Attention = append(v.Attention, Alert{Kind: "dead", Worker: w.ID, Text: cmp.Or(w.Reason, "its agent is gone"), Since: w.Since})
		}
		v.Workers = append(v.Workers, row)
	}
	sort.SliceStable(v.Workers, func(i, j int) bool {
		a, b := v.Workers[i], v.Workers[j]
		if a.Alert != b.Alert {
			return a.Alert
		}
		return state.WorkerNum(a.ID) < state.WorkerNum(b.ID)
	})
	sort.SliceStable(v.Attention, func(i, j int) bool {
		ri, rj := alertRank(v.Attention[i].Kind), alertRank(v.Attention[j].Kind)
		a, b := v.Attention[i], v.Attention[j]
		switch {
		case ri != rj:
			return ri < rj
		case !a.Since.Equal(b.Since):
			return a.Since.Before(b.Since)
		case a.Plan != b.Plan:
			return a.Plan < b.Plan
		}
		return a.Worker < b.Worker
	})
	var crit time.Duration
	v.Timeline, v.Critical, crit = timeline(f, defs, now)
	v.CriticalS = crit.Seconds()
	return v
}

// enforced is defs with each dispatched run's own dependencies in place
// of its folder's: what the loop holds the plan to (its PLAN.md when it
// was dispatched), not what the work tree's file says now.
func enforced(defs map[string]*plans.Plan, runs map[string]*PlanFrame) map[string]*plans.Plan {
	out := make(map[string]*plans.Plan, len(defs)+len(runs))
	for n, d := range defs {
		out[n] = d
	}
	for n, p := range runs {
		if p.Def {
			out[n] = &plans.Plan{Name: n, DependsOn: p.DependsOn, DependsOnState: p.DependsOnState}
		}
	}
	return out
}

func alertRank(kind string) int {
	if r, ok := alertStates[kind]; ok {
		return r
	}
	return len(alertStates)
}

// waiting says which dependencies hold a queued plan back.
func waiting(d *plans.Plan, runs map[string]*PlanFrame) string {
	var held []string
	for _, dep := range d.DependsOn {
		s := string(state.PlanDraft)
		if p := runs[dep]; p != nil {
			s = p.State
		}
		if !plans.Reached(s, d.DependsOnState) {
			held = append(held, dep+" ("+s+")")
		}
	}
	if len(held) == 0 {
		return ""
	}
	return "waits for " + strings.Join(held, ", ")
}
