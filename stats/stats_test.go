package stats

import (
	"bytes"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/orch-dev/orch/ledger"
	"github.com/orch-dev/orch/telemetry"
)

// The fixture, testdata/LEDGER.jsonl, hand-written (all times 2026-03-02,
// UTC; w1 and w3 run claude, w2 codex):
//
//	id plan       worker attempts (start-end)               gates         usage (in/out/cache r/cache w/cost)
//	1  schema     w1     1: 10:00-10:20                     passed        1000/200/5000/300/$0.50
//	2  docs       w3     1: 10:00-10:40, needs input 2      passed        none; verdict refuted (record)
//	3  api        w2     1: 10:20-10:50, needs input 1      exit status 1 2000/400/1000/-/-
//	4  docs.v1r1  w1     1: 10:40-10:55 (verifies docs)     -             300/50/100/20/$0.05
//	5  api        w2     1 again, 2: 10:55-11:15            passed        1500/300/-/-/-; verdict verified
//	6  bench      w2     1: 11:15-11:45                     timed out     800/missing output
//	7  ui         w1     1 (w3): 11:15-11:25 blocked, ni 1;
//	                     2 (w1): 11:30-11:55                passed        missing: no counts (record)
//	8  api.v1r1   w3     1: 11:35-12:00 (verifies api)      -             400/80/200/40/$0.08
//
// api depends on schema, ui and bench on api.
func fixture(t *testing.T) Report {
	t.Helper()
	entries, err := ledger.Load("testdata")
	if err != nil {
		t.Fatal(err)
	}
	return Compute(entries, nil, nil)
}

func val(m Measure) float64 {
	if m.Value == nil {
		return math.NaN()
	}
	return *m.Value
}

func near(a, b float64) bool { return math.Abs(a-b) < 1e-9 || math.IsNaN(a) && math.IsNaN(b) }

func TestRows(t *testing.T) {
	r := fixture(t)
	nan := math.NaN()
	type want struct {
		plans, verifs, harvests, attempts, needs int
		first, refuted                           [2]int // n, of
		wall                                     float64
		wallHave                                 int
		in, out, cr, cw, cost                    float64
		have                                     [5]int // in, out, cr, cw, cost
	}
	cases := []struct {
		row  Row
		name string
		want want
	}{
		// claude: plans schema, docs, docs.v1r1, ui, api.v1r1 (2 rounds);
		// attempts schema1 docs1 docs.v1r1 ui1 ui2 api.v1r1 = 6; needs
		// input docs 2 + ui1 1 = 3. First gate runs: schema a1 passed,
		// docs a1 passed, ui a2 passed (its first gate run) = 3/3. Verdicts:
		// docs refuted = 1/1. Walls 20,40,15,25,25 min: median 25 min.
		// Tokens per plan (schema, docs.v1r1, api.v1r1 reported; docs
		// none; ui missing and its attempt 1 nothing): in
		// (1000+300+400)/3, out (200+50+80)/3 = 110, cache read
		// (5000+100+200)/3, cache write (300+20+40)/3 = 120, cost
		// (0.50+0.05+0.08)/3 = 0.21.
		{r.Profiles[0], "claude", want{5, 2, 5, 6, 3, [2]int{3, 3}, [2]int{1, 1}, 25 * 60, 5,
			1700.0 / 3, 110, 5300.0 / 3, 120, 0.21, [5]int{3, 3, 3, 3, 3}}},
		// codex: plans api (two harvests), bench; attempts api1 api2
		// bench1 = 3 (api1 listed twice, counted once, and its needs
		// input 1 once). First gate runs: api a1 failed, bench a1 timed
		// out = 0/2. Verdicts: api#2 verified = 0/1. Walls 30,20,30:
		// median 30 min. api is 2000+1500 in, 400+300 out, cache read
		// only on attempt 1 (so not reported); bench 800 in, no output:
		// in (3500+800)/2 = 2150, out 700/1.
		{r.Profiles[1], "codex", want{2, 0, 3, 3, 1, [2]int{0, 2}, [2]int{0, 1}, 30 * 60, 3,
			2150, 700, nan, nan, nan, [5]int{2, 1, 0, 0, 0}}},
		// w1: schema, docs.v1r1, ui (harvested attempt 2); attempts
		// schema1 docs.v1r1 ui2. First gate runs: schema passed, ui
		// passed on attempt 2 = 2/2. Walls 20,15,25: 20 min. Tokens: schema and
		// docs.v1r1: in 1300/2, out 250/2, cr 5100/2, cw 320/2, cost 0.55/2.
		{r.Workers[0], "w1", want{3, 1, 3, 3, 0, [2]int{2, 2}, [2]int{0, 0}, 20 * 60, 3,
			650, 125, 2550, 160, 0.275, [5]int{2, 2, 2, 2, 2}}},
		// w2 is codex.
		{r.Workers[1], "w2", want{2, 0, 3, 3, 1, [2]int{0, 2}, [2]int{0, 1}, 30 * 60, 3,
			2150, 700, nan, nan, nan, [5]int{2, 1, 0, 0, 0}}},
		// w3: docs, api.v1r1 harvested; attempts docs1, ui1 (blocked),
		// api.v1r1 = 3; needs input 2+1. First gate run: docs = 1/1 (ui's
		// is w1's). Walls 40,25: 32.5 min. Tokens: api.v1r1 only.
		{r.Workers[2], "w3", want{2, 1, 2, 3, 3, [2]int{1, 1}, [2]int{1, 1}, 32.5 * 60, 2,
			400, 80, 200, 40, 0.08, [5]int{1, 1, 1, 1, 1}}},
		// fleet: 7 plans, 8 harvests, 9 attempts, needs input 2+1+1 = 4.
		// First pass 3/5, refuted 1/2. Walls 15,20,20,25,25,30,30,40:
		// median 25 min. Tokens: in (1000+300+400+3500+800)/5 = 1200, out
		// (200+50+80+700)/4 = 257.5, cr 5300/3, cw 360/3, cost 0.63/3.
		{r.Fleet, "fleet", want{7, 2, 8, 9, 4, [2]int{3, 5}, [2]int{1, 2}, 25 * 60, 8,
			1200, 257.5, 5300.0 / 3, 120, 0.21, [5]int{5, 4, 3, 3, 3}}},
	}
	if len(r.Profiles) != 2 || len(r.Workers) != 3 {
		t.Fatalf("got %d profiles and %d workers, want 2 and 3", len(r.Profiles), len(r.Workers))
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			x, w := c.row, c.want
			if x.Name != c.name {
				t.Fatalf("row %q, want %q", x.Name, c.name)
			}
			counts := [][2]int{{x.Plans, w.plans}, {x.Verifications, w.verifs}, {x.Harvests, w.harvests},
				{x.Attempts, w.attempts}, {x.NeedsInput, w.needs}, {x.FirstPass.N, w.first[0]}, {x.FirstPass.Of, w.first[1]},
				{x.Refuted.N, w.refuted[0]}, {x.Refuted.Of, w.refuted[1]}, {x.MedianWallS.Have, w.wallHave}}
			for i, g := range counts {
				if g[0] != g[1] {
					t.Errorf("count %d (plans, verifications, harvests, attempts, needs input, first pass n/of, refuted n/of, walls): got %d, want %d", i, g[0], g[1])
				}
			}
			if !near(val(x.MedianWallS), w.wall) {
				t.Errorf("median wall %v s, want %v", val(x.MedianWallS), w.wall)
			}
			ms := []Measure{x.InputTokens, x.OutputTokens, x.CacheRead, x.CacheWrite, x.CostUSD}
			vs := []float64{w.in, w.out, w.cr, w.cw, w.cost}
			for i, m := range ms {
				if !near(val(m), vs[i]) || m.Have != w.have[i] || m.Of != w.plans {
					t.Errorf("usage field %d: got %v (%d of %d), want %v (%d of %d)", i, val(m), m.Have, m.Of, vs[i], w.have[i], w.plans)
				}
			}
		})
	}
}

func TestTime(t *testing.T) {
	tm := fixture(t).Time
	// Attempts: 20+40+30+15+20+30+10+25+25 = 215 min of plan time; span
	// 10:00 to 12:00 = 120 min; speed-up 215/120.
	if tm.Timed != 9 || tm.Attempts != 9 {
		t.Errorf("timed %d of %d attempts, want 9 of 9", tm.Timed, tm.Attempts)
	}
	if tm.PlanTimeS != 215*60 || tm.SpanS != 120*60 || !near(*tm.SpeedUp, 215.0/120) {
		t.Errorf("plan time %v s, span %v s, speed-up %v; want 12900, 7200, 1.7917", tm.PlanTimeS, tm.SpanS, *tm.SpeedUp)
	}
	// schema 10:00-10:20 (20) + api 10:20-11:15 (its first attempt's
	// start to its last harvest's end, 55) + ui 11:15-11:55 (40) = 115
	// min; bench's chain is 20+55+30 = 105, docs alone 40.
	if got := strings.Join(tm.CriticalPath, " > "); got != "schema > api > ui" || tm.CriticalS != 115*60 {
		t.Errorf("critical path %q, %v s; want schema > api > ui, 6900", got, tm.CriticalS)
	}
	if !near(*tm.CriticalShare, 115.0/120) {
		t.Errorf("critical share %v, want 115/120", *tm.CriticalShare)
	}
	// Busy: w1 20+15+25 = 60, w2 30+20+30 = 80, w3 40+10+25 = 75 of 120.
	want := []struct {
		w    string
		busy float64
	}{{"w1", 60}, {"w2", 80}, {"w3", 75}}
	if len(tm.Idle) != len(want) {
		t.Fatalf("idle for %d workers, want 3", len(tm.Idle))
	}
	sum := 0.0
	for i, w := range want {
		id := tm.Idle[i]
		if id.Worker != w.w || id.BusyS != w.busy*60 || !near(*id.Share, 1-w.busy/120) {
			t.Errorf("idle %d: %s busy %v s share %v; want %s %v s %v", i, id.Worker, id.BusyS, *id.Share, w.w, w.busy*60, 1-w.busy/120)
		}
		sum += 1 - w.busy/120
	}
	// (0.5 + 0.3333 + 0.375) / 3 = 0.4028
	if !near(*tm.MeanIdle, sum/3) || math.Abs(*tm.MeanIdle-0.4028) > 1e-4 {
		t.Errorf("mean idle %v, want 0.4028", *tm.MeanIdle)
	}
}

var t0 = time.Date(2026, 3, 2, 9, 0, 0, 0, time.UTC)

// at is minute m after t0.
func at(m int) time.Time { return t0.Add(time.Duration(m) * time.Minute) }

func attempt(n int, worker string, from, to int) ledger.Attempt {
	end := at(to)
	return ledger.Attempt{N: n, Worker: worker, Profile: "p", Start: at(from), End: &end, Outcome: "done"}
}

func entry(plan string, deps []string, as ...ledger.Attempt) ledger.Entry {
	h := as[len(as)-1]
	return ledger.Entry{Plan: plan, Worker: h.Worker, Profile: h.Profile, Attempt: h.N, Attempts: as, DependsOn: deps}
}

func TestEdges(t *testing.T) {
	cases := []struct {
		name    string
		entries []ledger.Entry
		deps    map[string][]string
		path    string  // critical path
		crit    float64 // its minutes
		busy    float64 // minutes of the first worker
		span    float64 // minutes
	}{
		{
			// b's dependency on a is known only from plans/: a 0-10 then b
			// 10-40 = 40 beats c 0-30.
			name: "deps from plans",
			entries: []ledger.Entry{
				entry("a", nil, attempt(1, "w1", 0, 10)),
				entry("c", nil, attempt(1, "w2", 0, 30)),
				entry("b", nil, attempt(1, "w1", 10, 40)),
			},
			deps: map[string][]string{"b": {"a"}},
			path: "a > b", crit: 40, busy: 40, span: 40,
		},
		{
			// The entry's own depends_on wins over plans/, and a
			// dependency on a plan not in the ledger is skipped.
			name: "entry deps first",
			entries: []ledger.Entry{
				entry("a", nil, attempt(1, "w1", 0, 10)),
				entry("c", nil, attempt(1, "w2", 0, 30)),
				entry("b", []string{"c", "gone"}, attempt(1, "w1", 30, 40)),
			},
			deps: map[string][]string{"b": {"a"}},
			path: "c > b", crit: 40, busy: 20, span: 40,
		},
		{
			// A cycle (plans refuses one; a hand-edited ledger may not)
			// ends the walk rather than looping; overlapping attempts of
			// one worker are busy once: 0-20 and 10-30 are 30 minutes.
			name: "cycle and overlap",
			entries: []ledger.Entry{
				entry("a", []string{"b"}, attempt(1, "w1", 0, 20)),
				entry("b", []string{"a"}, attempt(1, "w1", 10, 30)),
			},
			path: "b > a", crit: 40, busy: 30, span: 30,
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			tm := Compute(c.entries, c.deps, nil).Time
			if got := strings.Join(tm.CriticalPath, " > "); got != c.path || tm.CriticalS != c.crit*60 {
				t.Errorf("critical path %q %v s, want %q %v s", got, tm.CriticalS, c.path, c.crit*60)
			}
			if tm.Idle[0].BusyS != c.busy*60 || tm.SpanS != c.span*60 {
				t.Errorf("busy %v s of span %v s, want %v of %v", tm.Idle[0].BusyS, tm.SpanS, c.busy*60, c.span*60)
			}
		})
	}
}

// An entry from before attempts were recorded is one attempt with no
// times: counted, never timed, its usage used.
func TestOldEntry(t *testing.T) {
	in := int64(10)
	r := Compute([]ledger.Entry{{Plan: "old", Worker: "w1", Usage: &telemetry.Usage{Input: &in}}}, nil, nil)
	if r.Fleet.Plans != 1 || r.Fleet.Attempts != 1 || r.Time.Timed != 0 || r.Time.Start != nil {
		t.Errorf("plans %d attempts %d timed %d start %v; want 1 1 0 nil", r.Fleet.Plans, r.Fleet.Attempts, r.Time.Timed, r.Time.Start)
	}
	if val(r.Fleet.InputTokens) != 10 || r.Fleet.MedianWallS.Value != nil || r.Fleet.MedianWallS.Of != 1 {
		t.Errorf("input %v, wall %v of %d; want 10, none of 1", val(r.Fleet.InputTokens), r.Fleet.MedianWallS.Value, r.Fleet.MedianWallS.Of)
	}
	if len(r.Workers) != 1 || r.Workers[0].Name != "w1" || len(r.Profiles) != 1 || r.Profiles[0].Name != "" {
		t.Errorf("workers %+v profiles %+v, want w1 and one without a name", r.Workers, r.Profiles)
	}
}

func TestText(t *testing.T) {
	var b bytes.Buffer
	if err := Compute(nil, nil, nil).WriteText(&b); err != nil || b.String() != "no plans harvested yet\n" {
		t.Errorf("empty ledger: %q, %v", b.String(), err)
	}
	b.Reset()
	if err := fixture(t).WriteText(&b); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"critical path 1h55m (96% of the span): schema > api > ui\n",
		"plan time 3h35m over a span of 2h00m: speed-up 1.79x\n",
		"idle: w1 50%, w2 33%, w3 38%\n",
	} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("text lacks %q:\n%s", want, b.String())
		}
	}
	for i, l := range strings.Split(b.String(), "\n") {
		if len(l) > Width {
			t.Errorf("line %d is %d wide: %q", i+1, len(l), l)
		}
	}
	// A long chain wraps under its heading.
	var es []ledger.Entry
	prev := []string(nil)
	for i := range 12 {
		name := "a-rather-long-plan-name-" + string(rune('a'+i))
		es = append(es, entry(name, prev, attempt(1, "w1", i*10, i*10+10)))
		prev = []string{name}
	}
	b.Reset()
	Compute(es, nil, nil).WriteText(&b)
	for i, l := range strings.Split(b.String(), "\n") {
		if len(l) > Width {
			t.Errorf("long chain: line %d is %d wide: %q", i+1, len(l), l)
		}
	}
	if !strings.Contains(b.String(), "a-rather-long-plan-name-l\n") {
		t.Errorf("long chain lost its end:\n%s", b.String())
	}
}

// A refuted plan has no ledger entry: its verdict, read from its
// VERIFICATION.md, counts against its author, under the profile the
// author's other attempts ran; a verdict given overrides the entry's.
func TestVerdictsFromTheMatrix(t *testing.T) {
	entries, err := ledger.Load("testdata")
	if err != nil {
		t.Fatal(err)
	}
	r := Compute(entries, nil, []Verdict{
		{Plan: "gone", Author: "w2", Outcome: "refuted"}, // no entry: codex's w2
		{Plan: "api", Author: "w2", Outcome: "refuted"},  // the matrix says refuted (entry: verified)
		{Plan: "other", Author: "w9", Outcome: "failed"}, // not decided: not counted
	})
	rows := map[string]Row{}
	for _, x := range append(r.Profiles, r.Workers...) {
		rows[x.Name] = x
	}
	// codex: gone and api, both refuted (the fixture alone: api verified, 0/1).
	if c := rows["codex"].Refuted; c.N != 2 || c.Of != 2 {
		t.Errorf("codex refuted %d/%d, want 2/2", c.N, c.Of)
	}
	if w := rows["w2"].Refuted; w.N != 2 || w.Of != 2 {
		t.Errorf("w2 refuted %d/%d, want 2/2", w.N, w.Of)
	}
	// fleet: docs (entry verdict, refuted), gone, api: 3 of 3.
	if f := r.Fleet.Refuted; f.N != 3 || f.Of != 3 {
		t.Errorf("fleet refuted %d/%d, want 3/3", f.N, f.Of)
	}
}

// A plan dispatched again once done starts a new run: on the critical
// path it weighs its latest run, not the time since its first.
func TestCriticalPathTakesTheLatestRun(t *testing.T) {
	t0 := time.Date(2026, 12, 4, 10, 0, 0, 0, time.UTC)
	at := func(m int) *time.Time { x := t0.Add(time.Duration(m) * time.Minute); return &x }
	a1 := ledger.Attempt{N: 1, Worker: "w1", Start: *at(0), End: at(1), Outcome: "done"}
	a2 := ledger.Attempt{N: 2, Worker: "w1", Start: *at(10), End: at(11), Outcome: "done"}
	es := []ledger.Entry{
		{ID: 1, Plan: "a", Worker: "w1", Attempt: 1, Attempts: []ledger.Attempt{a1}},
		{ID: 2, Plan: "a", Worker: "w1", Attempt: 2, Attempts: []ledger.Attempt{a1, a2}},
	}
	tm := Compute(es, nil, nil).Time
	if tm.CriticalS != 60 {
		t.Errorf("critical path %v s, want 60 (the second run alone)", tm.CriticalS)
	}
}
