package lead

import (
	"testing"

	"github.com/orch-dev/orch/internal/state"
)

// A mixed fleet: w1, w2 run agent a, w3 runs b.
func mixedLoop() *Loop {
	l := &Loop{st: state.New()}
	for _, w := range []struct{ id, agent string }{{"w1", "a"}, {"w2", "a"}, {"w3", "b"}} {
		l.st.Workers = append(l.st.Workers, &state.Worker{ID: w.id, State: state.WorkerIdle, Pane: "%1", Profile: w.agent})
	}
	return l
}

func TestEligibleRoutes(t *testing.T) {
	for _, tc := range []struct {
		name   string
		p      *state.Run
		agents []string
		want   string // the eligible workers
	}{
		{"any agent", &state.Run{Name: "p"}, nil, "w1w2w3"},
		{"agent b only", &state.Run{Name: "p"}, []string{"b"}, "w3"},
		{"first listed agent the fleet has", &state.Run{Name: "p"}, []string{"codex", "b", "a"}, "w3"},
		{"an agent the fleet lacks", &state.Run{Name: "p"}, []string{"codex"}, ""},
		{"a round on another agent than a", &state.Run{Name: "p.v1r1", Exclude: []string{"w1"}, OtherThan: "a"}, nil, "w3"},
		{"a round on another agent than b", &state.Run{Name: "p.v1r1", Exclude: []string{"w3"}, OtherThan: "b"}, nil, "w1w2"},
		// w2 verified before, but the only other worker is of the author's
		// agent: w2 may go again rather than wait for ever.
		{"avoid yields to the route", &state.Run{Name: "p.v1r2", Exclude: []string{"w1"}, Avoid: []string{"w3"}, OtherThan: "a"}, nil, "w3"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l := mixedLoop()
			got := ""
			for _, w := range l.st.Workers {
				if l.eligible(tc.p, tc.agents, w) {
					got += w.ID
				}
			}
			if got != tc.want {
				t.Errorf("eligible: %q, want %q", got, tc.want)
			}
		})
	}
}

func TestRouteWait(t *testing.T) {
	l := mixedLoop()
	for _, tc := range []struct {
		p      *state.Run
		agents []string
		want   string
	}{
		{&state.Run{Name: "p"}, []string{"b"}, ""},
		{&state.Run{Name: "p"}, []string{"codex", "gemini"}, "waiting: no worker of agent codex or gemini in the fleet"},
		{&state.Run{Name: "r", OtherThan: "b", Exclude: []string{"w3"}}, nil, ""},
	} {
		if got := l.st.RouteWait(tc.p, tc.agents); got != tc.want {
			t.Errorf("%s %v: %q, want %q", tc.p.Name, tc.agents, got, tc.want)
		}
	}
	one := &Loop{st: state.New()}
	one.st.Workers = []*state.Worker{{ID: "w1", Profile: "a"}, {ID: "w2", Profile: "a"}}
	want := "waiting: no worker of an agent other than a (the author's) to verify it"
	if got := one.st.RouteWait(&state.Run{Name: "r", OtherThan: "a", Exclude: []string{"w1"}}, nil); got != want {
		t.Errorf("one agent only: %q, want %q", got, want)
	}
}
