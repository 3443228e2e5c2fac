package plans

import (
	"strings"
	"testing"
)

func TestIndependence(t *testing.T) {
	ok := []Verdict{{Claim: 1, Verdict: Confirmed, Evidence: "ran it"}}
	for _, tc := range []struct {
		name     string
		author   string
		agents   []string // one round each
		rows     []string // each row's label
		overall  string
		rendered string
	}{
		{"another agent", "a", []string{"b"}, []string{Independent}, Independent, "| ran it | b |"},
		{"the author's agent", "a", []string{"a"}, []string{NotIndependent}, NotIndependent, "| a (not independent: the author's agent) |"},
		{"one of three rounds by the author's agent", "a", []string{"b", "a", "b"}, []string{Independent, NotIndependent, Independent}, NotIndependent, "**not-independent**"},
		{"author's agent unknown", "", []string{"b"}, []string{UnknownAgent}, UnknownAgent, "| ran it | b |"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v := &Verification{Rounds: len(tc.agents), Author: "w1", AuthorAgent: tc.author, Claims: []string{"it runs"}}
			for i, a := range tc.agents {
				v.Record(i+1, "w2", a, ok)
			}
			for i, want := range tc.rows {
				if got := v.Matrix[i].Independence; got != want || v.Matrix[i].Agent != tc.agents[i] {
					t.Errorf("row %d: %q by %q, want %q by %q", i, got, v.Matrix[i].Agent, want, tc.agents[i])
				}
			}
			if got := v.Independence(); got != tc.overall {
				t.Errorf("Independence() = %q, want %q", got, tc.overall)
			}
			m := RenderMatrix("p", v)
			if !strings.Contains(m, tc.rendered) {
				t.Errorf("matrix lacks %q:\n%s", tc.rendered, m)
			}
			if a, _, ok := MatrixOutcome([]byte(m)); !ok || a != "w1" {
				t.Errorf("MatrixOutcome reads author %q, %v", a, ok)
			}
		})
	}
}
