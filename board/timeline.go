package board

import (
	"sort"
	"time"

	"github.com/orch-dev/orch/internal/state"
	"github.com/orch-dev/orch/plans"
)

// timeline lays the frame's attempts out one row per worker, and marks
// the critical path: the chain through depends_on whose plans took the
// longest in total (a plan's time runs from the start of its latest run,
// the attempts since it was last done, to its last attempt's end, or now
// while it runs).
func timeline(f Frame, defs map[string]*plans.Plan, now time.Time) (Timeline, []string, time.Duration) {
	tl := Timeline{Rows: []Row{}}
	rows := map[string]*Row{}
	for _, w := range f.Workers {
		rows[w.ID] = &Row{Worker: w.ID, Bars: []Bar{}}
	}
	span := map[string]time.Duration{}
	for _, p := range f.Plans {
		var first, last, run time.Time
		done := true // a plan dispatched again once done starts a new run
		for _, a := range p.Spans {
			if done {
				run = a.Start
			}
			done = a.Outcome == string(state.PlanDone)
			b := Bar{Plan: p.Name, Attempt: a.N, Start: a.Start, Outcome: a.Outcome}
			end := now
			if a.End != nil {
				b.End, end = *a.End, *a.End
			} else {
				b.Running, b.Outcome = true, p.State
			}
			r := rows[a.Worker]
			if r == nil {
				r = &Row{Worker: a.Worker, Bars: []Bar{}}
				rows[a.Worker] = r
			}
			r.Bars = append(r.Bars, b)
			if first.IsZero() || a.Start.Before(first) {
				first = a.Start
			}
			if end.After(last) {
				last = end
			}
		}
		if !first.IsZero() {
			// On the critical path a plan weighs its latest run: the time
			// between two runs was not the plan's.
			span[p.Name] = last.Sub(run)
			if tl.Start.IsZero() || first.Before(tl.Start) {
				tl.Start = first
			}
			if last.After(tl.End) {
				tl.End = last
			}
		}
	}
	chain := CriticalPath(span, func(n string) []string {
		if d := defs[n]; d != nil {
			return d.DependsOn
		}
		return nil
	})
	on := map[string]bool{}
	var total time.Duration
	for _, n := range chain {
		total += span[n]
	}
	for _, n := range chain {
		on[n] = true
	}
	for _, r := range rows {
		for i := range r.Bars {
			r.Bars[i].Critical = on[r.Bars[i].Plan]
		}
		sort.Slice(r.Bars, func(i, j int) bool { return r.Bars[i].Start.Before(r.Bars[j].Start) })
		tl.Rows = append(tl.Rows, *r)
	}
	sort.Slice(tl.Rows, func(i, j int) bool { return state.WorkerNum(tl.Rows[i].Worker) < state.WorkerNum(tl.Rows[j].Worker) })
	return tl, chain, total
}

// CriticalPath is the chain of plans, each depending on the one before,
// whose times (span) add up to the most: the part of the work no number of
// workers could have made shorter. Plans without a time are left out; a
// dependency cycle (refused by orch dispatch, but possible in the files)
// is cut where it closes.
func CriticalPath(span map[string]time.Duration, deps func(string) []string) []string {
	best := map[string]time.Duration{}
	prev := map[string]string{}
	visiting := map[string]bool{}
	var walk func(n string) time.Duration
	walk = func(n string) time.Duration {
		if d, ok := best[n]; ok {
			return d
		}
		visiting[n] = true
		var longest time.Duration
		for _, dep := range deps(n) {
			if _, timed := span[dep]; !timed || visiting[dep] {
				continue
			}
			if d := walk(dep); d > longest || (d == longest && prev[n] == "") {
				longest, prev[n] = d, dep
			}
		}
		visiting[n] = false
		best[n] = longest + span[n]
		return best[n]
	}
	names := make([]string, 0, len(span))
	for n := range span {
		names = append(names, n)
	}
	sort.Strings(names)
	end, most := "", time.Duration(-1)
	for _, n := range names {
		if d := walk(n); d > most {
			end, most = n, d
		}
	}
	var chain []string
	for n := end; n != ""; n = prev[n] {
		chain = append([]string{n}, chain...)
	}
	return chain
}
