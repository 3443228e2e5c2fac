package plans

import (
	"strings"
	"testing"
)

// Record grows the matrix by one row per verdict and names the first
// verdict that does not confirm its claim.
func TestRecord(t *testing.T) {
	v := &Verification{Rounds: 3, Round: 1, Claims: []string{"it builds", "tests pass"}}
	if g := v.Record(1, "w2", "", []Verdict{{Claim: 1, Verdict: Confirmed, Evidence: "go build"}, {Claim: 2, Verdict: Confirmed, Evidence: "go test"}}); g != nil {
		t.Fatalf("all confirmed, got %+v", g)
	}
	g := v.Record(2, "w3", "", []Verdict{{Claim: 1, Verdict: Confirmed, Evidence: "ok"}, {Claim: 2, Verdict: "REFUTED", Evidence: "TestX fails"}})
	if g == nil || g.Claim != 2 || g.Evidence != "TestX fails" {
		t.Fatalf("refuted: got %+v", g)
	}
	if len(v.Matrix) != 4 || v.Matrix[3].Text != "tests pass" || v.Matrix[3].Verifier != "w3" || v.Matrix[3].Round != 2 {
		t.Errorf("matrix %+v", v.Matrix)
	}
	// The next round's brief shows the earlier verdicts as no evidence.
	v.Round = 2
	b := Brief("p", v, "p.v1r2")
	for _, want := range []string{"# Verify the claims of p (round 2 of 3)", "1. it builds", "A verdict is not evidence", "claim 2, round 2: REFUTED (TestX fails)", "Write plans/p.v1r2/RESULT.md"} {
		if !strings.Contains(b, want) {
			t.Errorf("brief lacks %q:\n%s", want, b)
		}
	}
}

func TestMatrixOutcome(t *testing.T) {
	v := &Verification{Rounds: 3, Round: 1, Author: "w2", Outcome: "refuted"}
	a, o, ok := MatrixOutcome([]byte(RenderMatrix("x", v)))
	if !ok || a != "w2" || o != "refuted" {
		t.Errorf("MatrixOutcome = %q, %q, %v; want w2, refuted", a, o, ok)
	}
	if _, _, ok := MatrixOutcome([]byte("# notes\nAuthor: me\n")); ok {
		t.Error("a file RenderMatrix did not write was read as a matrix")
	}
}
