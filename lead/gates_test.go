package lead

import (
	"testing"

	"github.com/orch-dev/orch/internal/state"
	"github.com/orch-dev/orch/ledger"
)

func TestJudge(t *testing.T) {
	f := func(v float64) *float64 { return &v }
	tests := []struct {
		dir      string
		target   float64
		measured float64
		want     string
	}{
		{"lower", 100, 90, ledger.Won},
		{"lower", 100, 100, ledger.Won},
		{"lower", 100, 101, ledger.Lost},
		{"higher", 0.9, 0.95, ledger.Won},
		{"higher", 0.9, 0.5, ledger.Lost},
	}
	for _, tc := range tests {
		e := ledger.Entry{ID: 1, Metric: "m", Direction: tc.dir, Target: f(tc.target)}
		if got, err := e.Judge(tc.measured); err != nil || got != tc.want {
			t.Errorf("%s is better, target %g, measured %g: %q, %v; want %q", tc.dir, tc.target, tc.measured, got, err, tc.want)
		}
	}
	if _, err := (ledger.Entry{ID: 1, Metric: "m"}).Judge(1); err == nil {
		t.Error("a bet without target and direction was judged")
	}
}

func TestEligibleNeverTheAuthor(t *testing.T) {
	l := &Loop{st: state.New()}
	for _, id := range []string{"w1", "w2", "w3"} {
		l.st.Workers = append(l.st.Workers, &state.Worker{ID: id, State: state.WorkerIdle, Pane: "%1"})
	}
	vp := &state.Run{Name: "p.v1r2", Exclude: []string{"w1"}, Avoid: []string{"w2"}}
	want := map[string]bool{"w1": false, "w2": false, "w3": true}
	for _, w := range l.st.Workers {
		if got := l.eligible(vp, nil, w); got != want[w.ID] {
			t.Errorf("eligible(%s) = %v, want %v", w.ID, got, want[w.ID])
		}
	}
	// With w3 dead, an earlier verifier may verify again; the author never.
	l.st.Workers[2].State = state.WorkerDead
	if !l.eligible(vp, nil, l.st.Workers[1]) || l.eligible(vp, nil, l.st.Workers[0]) {
		t.Error("with w3 dead: w2 should be eligible and w1 never")
	}
}
