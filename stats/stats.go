// Package stats turns the bet ledger into a report on how the fleet
// worked: per agent profile, per worker, and for the fleet as a whole.
// Compute is a pure function of the ledger's entries (as ledger.Load
// returns them, later records folded in); it reads nothing, never fails.
//
// The ledger holds one entry per harvest, and one plan can have several
// (a new attempt after its gates failed or its claims were refuted, a
// re-verification), each listing the plan's attempts so far. What counts
// once:
//
//   - A plan is a plan name. A verification round (an entry with
//     VerifyOf) is a plan of its own, run by its verifier, and is also
//     counted as a verification.
//   - An attempt is a (plan, attempt number), counted once however many
//     entries list it; the latest entry's copy is used, with what only an
//     earlier copy knew (end, gates, usage). The harvested attempt (the one
//     numbered Attempt, else the last) takes its entry's worker, profile,
//     gates and usage where it lacks them. An entry without Attempts
//     (written before they were recorded) is one attempt with no times.
//   - A harvest is an entry, in the group of its harvested attempt.
//
// Per group (a profile, a worker; the fleet is the group of everything):
//
//   - Plans: plans with a harvest in the group; one harvested by two
//     workers counts in both rows, once for the fleet.
//   - Attempts, NeedsInput: over the group's attempts, failed, blocked and
//     taken-back ones included.
//   - FirstPass: a plan's first gate run is that of its lowest-numbered
//     attempt with a gate outcome, and belongs to that attempt's group. Of
//     the plans whose first gate run is in the group, those where it
//     passed: an attempt that never reached its gates (blocked, its worker
//     lost) is no failed pass of the one that did.
//   - Refuted: of the plans whose verification was decided (verified or
//     refuted), those refuted, in the group of the author's attempt. The
//     verdicts come from the plans' committed VERIFICATION.md (a refuted
//     plan has no ledger entry), else from an entry's verdict; an author
//     with no attempt in the ledger counts under the profile its other
//     attempts ran.
//   - MedianWallS: over the group's harvests, the harvested attempt's
//     start to end; harvests without both are left out (Have of Of).
//   - InputTokens, OutputTokens, CacheRead, CacheWrite, CostUSD: for each
//     of the group's plans, the sum over its attempts in the group; the
//     plan has the number only if every one of those attempts reported
//     it. The mean is over the plans that have it, Have of Of (the Plans):
//     missing telemetry is never taken as 0, cost is only the agent's own.
//
// For the fleet (Time): an attempt with a start and an end is timed; the
// span runs from the first timed start to the last timed end; plan time
// is the sum of every timed attempt's length, so speed-up (plan time over
// span) counts retries as work done. The critical path is the heaviest
// chain of plans through depends_on (the plan's latest entry's, else the
// deps given to Compute, from plans/), where a plan weighs the time from
// its first attempt's start to its latest harvest's end. A worker's idle
// share is 1 − (the union of its timed attempts) ÷ span; MeanIdle is the
// mean over the workers in the ledger (one that never ran a plan is not).
package stats

import (
	"cmp"
	"maps"
	"slices"
	"time"

	"github.com/orch-dev/orch/ledger"
	"github.com/orch-dev/orch/telemetry"
)

// Report is the whole of orch stats.
type Report struct {
	Fleet    Row   `json:"fleet"`
	Profiles []Row `json:"profiles"`
	Workers  []Row `json:"workers"`
	Time     Time  `json:"time"`
}

// Row is one group's numbers: an agent profile, a worker, or the fleet.
type Row struct {
	Name          string  `json:"name"`
	Plans         int     `json:"plans"`
	Verifications int     `json:"verifications"` // of Plans, verification rounds
	Harvests      int     `json:"harvests"`
	Attempts      int     `json:"attempts"`
	NeedsInput    int     `json:"needs_input"`
	FirstPass     Share   `json:"first_pass"`
	Refuted       Share   `json:"refuted"`
	MedianWallS   Measure `json:"median_wall_s"` // of: harvests
	InputTokens   Measure `json:"input_tokens"`  // per plan; of: plans
	OutputTokens  Measure `json:"output_tokens"`
	CacheRead     Measure `json:"cache_read_tokens"`
	CacheWrite    Measure `json:"cache_write_tokens"`
	CostUSD       Measure `json:"cost_usd"`
}

// Share is N of Of; Rate is N/Of, nil when Of is 0.
type Share struct {
	N    int      `json:"n"`
	Of   int      `json:"of"`
	Rate *float64 `json:"rate"`
}

// Measure is a median or mean over the Have of Of items that had the
// number; Value is nil when none had it.
type Measure struct {
	Value *float64 `json:"value"`
	Have  int      `json:"have"`
	Of    int      `json:"of"`
}

// Time is how the fleet's time was spent. Durations are in seconds.
type Time struct {
	Timed         int        `json:"timed_attempts"` // attempts with a start and an end
	Attempts      int        `json:"attempts"`
	Start         *time.Time `json:"start,omitempty"`
	End           *time.Time `json:"end,omitempty"`
	SpanS         float64    `json:"span_s"`
	PlanTimeS     float64    `json:"plan_time_s"`
	SpeedUp       *float64   `json:"speed_up"`
	CriticalPath  []string   `json:"critical_path"` // first plan first
	CriticalS     float64    `json:"critical_path_s"`
	CriticalShare *float64   `json:"critical_path_share"` // of the span
	Idle          []Idle     `json:"idle"`
	MeanIdle      *float64   `json:"mean_idle"`
}

// Idle is one worker's time inside the span.
type Idle struct {
	Worker string   `json:"worker"`
	BusyS  float64  `json:"busy_s"`
	Share  *float64 `json:"idle_share"` // nil when the span is empty
}

// The gate outcome and the verdict Compute counts.
const (
	gatesPassed = "passed"
	refuted     = "refuted"
	verified    = "verified"
)

// plan is one plan name's entries and attempts.
type plan struct {
	name     string
	verify   bool
	entries  []ledger.Entry
	attempts map[int]ledger.Attempt
}

// harvest is one entry with its harvested attempt, as merged.
type harvest struct {
	plan *plan
	e    ledger.Entry
	at   ledger.Attempt
}

// Compute builds the report from the entries in ledger order. deps gives
// a plan's depends_on where its entries do not record one (ledgers from
// before they did); it may be nil.
func Compute(entries []ledger.Entry, deps map[string][]string, verdicts []Verdict) Report {
	var order []*plan
	byName := map[string]*plan{}
	var hs []harvest
	for _, e := range entries {
		p := byName[e.Plan]
		if p == nil {
			p = &plan{name: e.Plan, attempts: map[int]ledger.Attempt{}}
			byName[e.Plan] = p
			order = append(order, p)
		}
		p.verify = p.verify || e.VerifyOf != ""
		p.entries = append(p.entries, e)
		ats, h := attemptsOf(e)
		for _, a := range ats {
			p.attempts[a.N] = merge(p.attempts[a.N], a)
		}
		hs = append(hs, harvest{plan: p, e: e, at: h})
	}
	// A harvest's attempt is read after all entries are merged, so a later
	// entry's fuller copy (an end, a needs-input count) is seen.
	for i := range hs {
		hs[i].at = hs[i].plan.attempts[hs[i].at.N]
	}
	var all []ledger.Attempt
	for _, p := range order {
		for _, n := range sortedKeys(p.attempts) {
			all = append(all, p.attempts[n])
		}
	}

	judged := judgedAttempts(verdicts, hs, all)
	r := Report{Profiles: []Row{}, Workers: []Row{}}
	r.Fleet = row("fleet", order, hs, all, judged, func(ledger.Attempt) bool { return true })
	for _, name := range distinct(all, func(a ledger.Attempt) string { return a.Profile }) {
		r.Profiles = append(r.Profiles, row(name, order, hs, all, judged, func(a ledger.Attempt) bool { return a.Profile == name }))
	}
	for _, name := range distinct(all, func(a ledger.Attempt) string { return a.Worker }) {
		r.Workers = append(r.Workers, row(name, order, hs, all, judged, func(a ledger.Attempt) bool { return a.Worker == name }))
	}
	r.Time = fleetTime(order, all, deps)
	return r
}

// Verdict is how a plan's verification ended (VERIFICATION.md's header):
// its author and the outcome (verified, refuted, failed).
type Verdict struct {
	Plan    string `json:"plan"`
	Author  string `json:"author"`
	Outcome string `json:"outcome"`
}

// judged is a decided verification: the author's attempt it judged.
type judged struct {
	at      ledger.Attempt
	refuted bool
}

// judgedAttempts pairs each decided verdict with the author's attempt:
// the given verdicts first, then those only an entry records.
func judgedAttempts(verdicts []Verdict, hs []harvest, all []ledger.Attempt) []judged {
	byPlan := map[string]Verdict{}
	for _, v := range verdicts {
		byPlan[v.Plan] = v
	}
	for _, h := range hs {
		if _, ok := byPlan[h.plan.name]; !ok && h.e.Verdict != "" {
			byPlan[h.plan.name] = Verdict{Plan: h.plan.name, Author: h.at.Worker, Outcome: h.e.Verdict}
		}
	}
	profile := map[string]string{}
	for _, a := range all {
		if a.Profile != "" {
			profile[a.Worker] = a.Profile
		}
	}
	var out []judged
	for _, name := range slices.Sorted(maps.Keys(byPlan)) {
		v := byPlan[name]
		if v.Outcome != refuted && v.Outcome != verified {
			continue // failed: nobody's claims were judged
		}
		at := ledger.Attempt{Worker: v.Author, Profile: profile[v.Author]}
		for _, a := range all {
			if a.Worker == v.Author && a.Start.After(at.Start) && planOf(hs, a, name) {
				at = a
			}
		}
		out = append(out, judged{at: at, refuted: v.Outcome == refuted})
	}
	return out
}

// planOf says whether attempt a is one of plan name's.
func planOf(hs []harvest, a ledger.Attempt, name string) bool {
	for _, h := range hs {
		if h.plan.name == name {
			for _, b := range h.plan.attempts {
				if b.N == a.N && b.Worker == a.Worker && b.Start.Equal(a.Start) {
					return true
				}
			}
		}
	}
	return false
}

// attemptsOf returns e's attempts, with the entry's worker and profile
// filled in on its harvested attempt where the attempt lacks them, and
// which attempt was harvested.
func attemptsOf(e ledger.Entry) ([]ledger.Attempt, ledger.Attempt) {
	ats := slices.Clone(e.Attempts)
	if len(ats) == 0 {
		ats = []ledger.Attempt{{N: max(e.Attempt, 1)}}
	}
	h := len(ats) - 1
	for i, a := range ats {
		if e.Attempt > 0 && a.N == e.Attempt {
			h = i
		}
	}
	a := &ats[h]
	a.Worker = cmp.Or(a.Worker, e.Worker)
	a.Profile = cmp.Or(a.Profile, e.Profile)
	a.Gates = cmp.Or(a.Gates, e.Gates)
	if e.Usage != nil {
		a.Usage = e.Usage
	}
	return ats, *a
}

// merge keeps the later copy of an attempt, with what only the earlier
// one knew.
func merge(old, a ledger.Attempt) ledger.Attempt {
	if a.End == nil {
		a.End = old.End
	}
	if a.Usage == nil {
		a.Usage = old.Usage
	}
	a.Gates = cmp.Or(a.Gates, old.Gates)
	a.NeedsInput = max(a.NeedsInput, old.NeedsInput)
	return a
}

func row(name string, order []*plan, hs []harvest, all []ledger.Attempt, judged []judged, in func(ledger.Attempt) bool) Row {
	r := Row{Name: name}
	for _, a := range all {
		if in(a) {
			r.Attempts++
			r.NeedsInput += a.NeedsInput
		}
	}
	var walls []float64
	planHs := map[*plan][]harvest{}
	for _, h := range hs {
		if !in(h.at) {
			continue
		}
		r.Harvests++
		planHs[h.plan] = append(planHs[h.plan], h)
		if d, ok := length(h.at); ok {
			walls = append(walls, d.Seconds())
		}
	}
	for _, j := range judged {
		if in(j.at) {
			r.Refuted.Of++
			if j.refuted {
				r.Refuted.N++
			}
		}
	}
	r.MedianWallS = median(walls, r.Harvests)
	r.Refuted.Rate = rate(r.Refuted.N, r.Refuted.Of)

	fields := []func(*telemetry.Usage) *float64{
		func(u *telemetry.Usage) *float64 { return f64(u.Input) },
		func(u *telemetry.Usage) *float64 { return f64(u.Output) },
		func(u *telemetry.Usage) *float64 { return f64(u.CacheRead) },
		func(u *telemetry.Usage) *float64 { return f64(u.CacheWrite) },
		func(u *telemetry.Usage) *float64 { return u.CostUSD },
	}
	sums := make([][]float64, len(fields))
	for _, p := range order {
		if a, ok := firstGated(p); ok && in(a) {
			r.FirstPass.Of++
			if a.Gates == gatesPassed {
				r.FirstPass.N++
			}
		}
		phs := planHs[p]
		if len(phs) == 0 {
			continue
		}
		r.Plans++
		if p.verify {
			r.Verifications++
		}
		for i, field := range fields {
			if v, ok := planSum(p, in, field); ok {
				sums[i] = append(sums[i], v)
			}
		}
	}
	r.FirstPass.Rate = rate(r.FirstPass.N, r.FirstPass.Of)
	ms := []*Measure{&r.InputTokens, &r.OutputTokens, &r.CacheRead, &r.CacheWrite, &r.CostUSD}
	for i, m := range ms {
		*m = mean(sums[i], r.Plans)
	}
	return r
}

// firstGated is plan p's first attempt with a gate outcome.
func firstGated(p *plan) (ledger.Attempt, bool) {
	for _, n := range sortedKeys(p.attempts) {
		if a := p.attempts[n]; a.Gates != "" {
			return a, true
		}
	}
	return ledger.Attempt{}, false
}

// planSum adds one usage field over plan p's attempts in the group; ok is
// false when any of them did not report it.
func planSum(p *plan, in func(ledger.Attempt) bool, field func(*telemetry.Usage) *float64) (float64, bool) {
	sum := 0.0
	for _, a := range p.attempts {
		if !in(a) {
			continue
		}
		if a.Usage == nil {
			return 0, false
		}
		v := field(a.Usage)
		if v == nil {
			return 0, false
		}
		sum += *v
	}
	return sum, true
}

func fleetTime(order []*plan, all []ledger.Attempt, deps map[string][]string) Time {
	t := Time{Attempts: len(all), CriticalPath: []string{}, Idle: []Idle{}}
	var start, end time.Time
	for _, a := range all {
		d, ok := length(a)
		if !ok {
			continue
		}
		t.Timed++
		t.PlanTimeS += d.Seconds()
		if start.IsZero() || a.Start.Before(start) {
			start = a.Start
		}
		if a.End.After(end) {
			end = *a.End
		}
	}
	if t.Timed == 0 {
		return t
	}
	t.Start, t.End = &start, &end
	span := end.Sub(start)
	t.SpanS = span.Seconds()
	t.CriticalPath, t.CriticalS = criticalPath(order, deps)
	if span > 0 {
		t.SpeedUp = ptr(t.PlanTimeS / t.SpanS)
		t.CriticalShare = ptr(t.CriticalS / t.SpanS)
	}
	sum := 0.0
	for _, w := range distinct(all, func(a ledger.Attempt) string { return a.Worker }) {
		var ivs [][2]time.Time
		for _, a := range all {
			if _, ok := length(a); ok && a.Worker == w {
				ivs = append(ivs, [2]time.Time{a.Start, *a.End})
			}
		}
		busy := union(ivs)
		id := Idle{Worker: w, BusyS: busy.Seconds()}
		if span > 0 {
			id.Share = ptr(1 - busy.Seconds()/t.SpanS)
			sum += *id.Share
		}
		t.Idle = append(t.Idle, id)
	}
	if span > 0 && len(t.Idle) > 0 {
		t.MeanIdle = ptr(sum / float64(len(t.Idle)))
	}
	return t
}

// criticalPath is the heaviest chain through the plans' dependencies,
// first plan first, and its weight in seconds. Dependencies on plans not
// in the ledger are skipped; a cycle (which plans refuses) is cut where
// the walk meets it. Ties go to the plan earlier in the ledger.
func criticalPath(order []*plan, deps map[string][]string) ([]string, float64) {
	byName := map[string]*plan{}
	for _, p := range order {
		byName[p.name] = p
	}
	best := map[string]float64{}
	next := map[string]string{} // the dependency the chain continues to
	visiting := map[string]bool{}
	var walk func(p *plan) float64
	walk = func(p *plan) float64 {
		if w, ok := best[p.name]; ok {
			return w
		}
		if visiting[p.name] {
			return 0
		}
		visiting[p.name] = true
		ds := p.entries[len(p.entries)-1].DependsOn
		if len(ds) == 0 {
			ds = deps[p.name]
		}
		top := 0.0
		for _, d := range ds {
			if dp := byName[d]; dp != nil && dp != p {
				if w := walk(dp); w > top || next[p.name] == "" && w == top {
					top, next[p.name] = w, d
				}
			}
		}
		visiting[p.name] = false
		best[p.name] = weight(p) + top
		return best[p.name]
	}
	var tail *plan
	for _, p := range order {
		if w := walk(p); tail == nil || w > best[tail.name] {
			tail = p
		}
	}
	if tail == nil {
		return []string{}, 0
	}
	chain := []string{}
	seen := map[string]bool{}
	for n := tail.name; n != "" && !seen[n]; n = next[n] {
		seen[n] = true
		chain = append(chain, n)
	}
	slices.Reverse(chain)
	return chain, best[tail.name]
}

// weight is a plan's time from its first attempt's start to its latest
// harvest's end, in seconds; 0 when either is unknown.
func weight(p *plan) float64 {
	// The latest run: the attempts after the one the previous harvest
	// took (a plan dispatched again once done starts a new run; the time
	// between two runs is not the plan's).
	prev := 0
	for _, e := range p.entries[:len(p.entries)-1] {
		if _, h := attemptsOf(e); e.Gates == "" || e.Gates == gatesPassed {
			prev = max(prev, h.N) // a finished run (not one its gates failed)
		}
	}
	var first time.Time
	for _, a := range p.attempts {
		if a.N > prev && !a.Start.IsZero() && (first.IsZero() || a.Start.Before(first)) {
			first = a.Start
		}
	}
	_, h := attemptsOf(p.entries[len(p.entries)-1])
	end := p.attempts[h.N].End
	if first.IsZero() || end == nil || end.Before(first) {
		return 0
	}
	return end.Sub(first).Seconds()
}

// length is an attempt's start to end, if it has both.
func length(a ledger.Attempt) (time.Duration, bool) {
	if a.Start.IsZero() || a.End == nil || a.End.Before(a.Start) {
		return 0, false
	}
	return a.End.Sub(a.Start), true
}

// union is the total length of the intervals, overlaps counted once.
func union(ivs [][2]time.Time) time.Duration {
	slices.SortFunc(ivs, func(a, b [2]time.Time) int { return a[0].Compare(b[0]) })
	var total time.Duration
	var cur [2]time.Time
	for i, iv := range ivs {
		switch {
		case i == 0:
			cur = iv
		case !iv[0].After(cur[1]):
			if iv[1].After(cur[1]) {
				cur[1] = iv[1]
			}
		default:
			total += cur[1].Sub(cur[0])
			cur = iv
		}
	}
	if len(ivs) > 0 {
		total += cur[1].Sub(cur[0])
	}
	return total
}

func distinct(all []ledger.Attempt, key func(ledger.Attempt) string) []string {
	var out []string
	for _, a := range all {
		if k := key(a); !slices.Contains(out, k) {
			out = append(out, k)
		}
	}
	slices.Sort(out)
	return out
}

func sortedKeys(m map[int]ledger.Attempt) []int {
	ks := make([]int, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	slices.Sort(ks)
	return ks
}

func median(vs []float64, of int) Measure {
	m := Measure{Have: len(vs), Of: of}
	if len(vs) == 0 {
		return m
	}
	s := slices.Sorted(slices.Values(vs))
	n := len(s)
	if n%2 == 1 {
		m.Value = ptr(s[n/2])
	} else {
		m.Value = ptr((s[n/2-1] + s[n/2]) / 2)
	}
	return m
}

func mean(vs []float64, of int) Measure {
	m := Measure{Have: len(vs), Of: of}
	if len(vs) == 0 {
		return m
	}
	sum := 0.0
	for _, v := range vs {
		sum += v
	}
	m.Value = ptr(sum / float64(len(vs)))
	return m
}

func rate(n, of int) *float64 {
	if of == 0 {
		return nil
	}
	return ptr(float64(n) / float64(of))
}

func f64(n *int64) *float64 {
	if n == nil {
		return nil
	}
	return ptr(float64(*n))
}

func ptr(f float64) *float64 { return &f }
