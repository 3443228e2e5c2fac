package board

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/orch-dev/orch/internal/state"
	"github.com/orch-dev/orch/ledger"
	"github.com/orch-dev/orch/plans"
	"github.com/orch-dev/orch/telemetry"
)

func TestBuildPutsAlertsFirst(t *testing.T) {
	t0 := time.Date(2026, 12, 4, 10, 0, 0, 0, time.UTC)
	end := func(m int) *time.Time { e := t0.Add(time.Duration(m) * time.Minute); return &e }
	in := int64(1200)
	st := state.New()
	st.Workers = []*state.Worker{{ID: "w2", State: state.WorkerBusy, Plan: "ask"}, {ID: "w1", State: state.WorkerIdle}, {ID: "w3", State: state.WorkerDead, Reason: "pane gone"}}
	st.Plans = map[string]*state.Run{
		"base": {Name: "base", State: state.PlanDone, Attempts: 1,
			History: []ledger.Attempt{{N: 1, Worker: "w1", Start: t0, End: end(10), Outcome: "done", Usage: &telemetry.Usage{Input: &in}}}},
		"ask": {Name: "ask", State: state.PlanNeedsInput, Worker: "w2", Attempts: 1, Reason: "Claude Code asks permission to use Bash",
			History: []ledger.Attempt{{N: 1, Worker: "w2", Start: t0.Add(10 * time.Minute)}}},
		"next": {Name: "next", State: state.PlanQueued},
		"side": {Name: "side", State: state.PlanDone, Attempts: 2,
			History: []ledger.Attempt{{N: 1, Worker: "w1", Start: t0, End: end(2), Outcome: "failed"}, {N: 2, Worker: "w1", Start: end(2).Add(0), End: end(4), Outcome: "done", Usage: &telemetry.Usage{Missing: "no transcript"}}}},
	}
	defs := map[string]*plans.Plan{"ask": {Name: "ask", DependsOn: []string{"base"}}, "next": {Name: "next", DependsOn: []string{"ask"}}, "draft": {Name: "draft"}}
	v := Build(FrameOf(st, nil, t0), defs, t0.Add(30*time.Minute))

	var order []string
	for _, p := range v.Plans {
		order = append(order, p.Name+":"+p.State)
	}
	if want := []string{"ask:needs-input", "next:queued", "base:done", "side:done", "draft:draft"}; !slices.Equal(order, want) {
		t.Errorf("plans in order %v, want %v", order, want)
	}
	if len(v.Attention) != 2 || v.Attention[0].Kind != "needs-input" || v.Attention[0].Plan != "ask" || v.Attention[1].Kind != "dead" {
		t.Errorf("attention = %+v, want needs-input of ask, then dead w3", v.Attention)
	}
	if v.Workers[0].Alert != true || v.Workers[0].ID != "w2" && v.Workers[0].ID != "w3" {
		t.Errorf("workers start with %+v, want an alerted one", v.Workers[0])
	}
	if got := v.Plans[1].Waiting; got != "waits for ask (needs-input)" {
		t.Errorf("next waits %q", got)
	}
	if got := v.Plans[2].Tokens; got != "1.2k in" {
		t.Errorf("base tokens %q", got)
	}
	if got := v.Plans[3].Tokens; got != "tokens missing" {
		t.Errorf("side tokens %q: a usage without counts is missing, never 0", got)
	}
	// base (10m) then ask (running, 20m to now): the chain outweighs side (4m).
	if !slices.Equal(v.Critical, []string{"base", "ask"}) {
		t.Errorf("critical path %v, want [base ask]", v.Critical)
	}
	rows := map[string]Row{}
	for _, r := range v.Timeline.Rows {
		rows[r.Worker] = r
	}
	if w1 := rows["w1"]; len(w1.Bars) != 3 || w1.Bars[0].Plan != "base" && w1.Bars[0].Plan != "side" {
		t.Errorf("w1's bars = %+v", w1.Bars)
	}
	if w2 := rows["w2"]; len(w2.Bars) != 1 || !w2.Bars[0].Running || !w2.Bars[0].Critical || w2.Bars[0].Outcome != "needs-input" {
		t.Errorf("w2's bars = %+v, want ask running, critical", w2.Bars)
	}
}

func TestCriticalPathSkipsCycles(t *testing.T) {
	span := map[string]time.Duration{"a": time.Minute, "b": 2 * time.Minute, "c": 5 * time.Minute}
	deps := map[string][]string{"a": {"b"}, "b": {"a"}, "c": nil}
	got := CriticalPath(span, func(n string) []string { return deps[n] })
	if !slices.Equal(got, []string{"c"}) {
		t.Errorf("critical path %v, want [c] (the a-b cycle is cut: 3m)", got)
	}
}

// A follower that does not take frames gets the newest when it does, never
// a backlog, and Offer never blocks.
func TestPublisherDropsFramesNotTheLoop(t *testing.T) {
	p, err := NewPublisher(nil, "orch", nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	ch, stop := p.Follow()
	defer stop()
	for i := 0; i < 50; i++ {
		p.Offer(Frame{Session: "s"})
		p.send()
	}
	f, err := ParseFrame(<-ch)
	if err != nil || f.Seq != 50 {
		t.Fatalf("follower got seq %d (%v), want the newest, 50", f.Seq, err)
	}
	select {
	case b := <-ch:
		t.Fatalf("a second frame was queued: %s", b)
	default:
	}
}

// A frame over the broker's payload limit goes in parts and comes back
// whole; a part of a newer frame drops an older one's.
func TestPartsRoundTrip(t *testing.T) {
	big := make([]byte, 3*MaxPart+17)
	for i := range big {
		big[i] = byte('a' + i%26)
	}
	ms := Parts("orch.board", "s.2", big)
	if len(ms) != 4 {
		t.Fatalf("%d parts, want 4", len(ms))
	}
	for _, m := range ms {
		if len(m.Data) > MaxPart {
			t.Fatalf("a part of %d bytes", len(m.Data))
		}
	}
	var a Assembler
	old := Parts("orch.board", "s.1", big)
	a.Add(old[0]) // an older frame, never finished
	for i, m := range ms {
		b, done := a.Add(m)
		if done != (i == len(ms)-1) {
			t.Fatalf("part %d: done %v", i+1, done)
		}
		if done && string(b) != string(big) {
			t.Fatal("frame put together differs")
		}
	}
	if _, done := a.Add(old[1]); done {
		t.Error("a stale part finished a frame")
	}
}

// A frame of many plans with long texts stays small per plan: texts are
// cut, attempts carry no usage.
func TestFrameIsLean(t *testing.T) {
	st := state.New()
	long := strings.Repeat("x", 4000)
	for i := 0; i < 100; i++ {
		n := fmt.Sprintf("plan-%03d", i)
		st.Plans[n] = &state.Run{Name: n, State: state.PlanFailed, Reason: long, Status: long, Attempts: 1,
			History: []ledger.Attempt{{N: 1, Worker: "w1", Start: time.Now(), Usage: &telemetry.Usage{Missing: long}}}}
	}
	b := FrameOf(st, nil, time.Now()).Marshal()
	if per := len(b) / 100; per > 1200 {
		t.Errorf("%d bytes per plan", per)
	}
}

// Alerts of the same kind and time come in one order, whatever the order
// of the record's map: the terminal and the page agree, rows do not jump.
func TestAttentionOrderIsStable(t *testing.T) {
	st := state.New()
	at := time.Date(2026, 12, 4, 10, 0, 0, 0, time.UTC)
	for _, n := range []string{"d", "b", "a", "c", "e"} {
		st.Plans[n] = &state.Run{Name: n, State: state.PlanFailed, Updated: at}
	}
	var first []string
	for i := 0; i < 20; i++ {
		var got []string
		for _, a := range Build(FrameOf(st, nil, at), nil, at).Attention {
			got = append(got, a.Plan)
		}
		if i == 0 {
			first = got
			if !slices.Equal(got, []string{"a", "b", "c", "d", "e"}) {
				t.Fatalf("attention %v, want by name", got)
			}
		} else if !slices.Equal(got, first) {
			t.Fatalf("attention order changed: %v then %v", first, got)
		}
	}
}

// A dispatched plan's dependencies are the ones it was dispatched with,
// not its folder's now.
func TestDependenciesAreTheEnforcedOnes(t *testing.T) {
	st := state.New()
	st.Plans["b"] = &state.Run{Name: "b", State: state.PlanQueued, Def: &state.Def{DependsOn: []string{"a"}}}
	defs := map[string]*plans.Plan{"b": {Name: "b", DependsOn: []string{"x"}}, "a": {Name: "a"}}
	v := Build(FrameOf(st, nil, time.Now()), defs, time.Now())
	for _, p := range v.Plans {
		if p.Name == "b" && (!slices.Equal(p.DependsOn, []string{"a"}) || p.Waiting != "waits for a (draft)") {
			t.Errorf("b: depends on %v, waiting %q; want [a], waits for a", p.DependsOn, p.Waiting)
		}
	}
}

// A plan dispatched again once done weighs its latest run on the critical
// path, not the time since its first.
func TestCriticalPathWeighsTheLatestRun(t *testing.T) {
	t0 := time.Date(2026, 12, 4, 10, 0, 0, 0, time.UTC)
	at := func(m int) *time.Time { x := t0.Add(time.Duration(m) * time.Minute); return &x }
	st := state.New()
	st.Plans["a"] = &state.Run{Name: "a", State: state.PlanDone, Attempts: 2, History: []ledger.Attempt{
		{N: 1, Worker: "w1", Start: *at(0), End: at(1), Outcome: "done"}, {N: 2, Worker: "w1", Start: *at(10), End: at(11), Outcome: "done"}}}
	st.Plans["b"] = &state.Run{Name: "b", State: state.PlanDone, Attempts: 2, History: []ledger.Attempt{
		{N: 1, Worker: "w2", Start: *at(0), End: at(2), Outcome: "failed"}, {N: 2, Worker: "w2", Start: *at(3), End: at(5), Outcome: "done"}}}
	v := Build(FrameOf(st, nil, *at(12)), nil, *at(12))
	// a: 1 minute (its second run); b: 5 minutes (a failure then a pass, one run).
	if !slices.Equal(v.Critical, []string{"b"}) {
		t.Errorf("critical path %v, want [b]", v.Critical)
	}
}
