package fleet

import (
	"errors"
	"testing"

	"github.com/orch-dev/orch/agent"
	"github.com/orch-dev/orch/config"
	"github.com/orch-dev/orch/internal/state"
)

func profile(name, cmd string) *agent.Profile {
	return &agent.Profile{Name: name, Profile: config.Profile{Interactive: cmd, Headless: cmd + " {prompt}"}}
}

// Each group's workers run its agent, the lowest ids first, skipping the
// ids other hosts run; a worker nothing names runs the --agent.
func TestGroupsAssignAgents(t *testing.T) {
	a, b := profile("a", "agent-a --x"), profile("b", "/opt/bin/agent-b")
	f := testFleet(t, Config{Agent: "fallback", Remote: []string{"w2"},
		Groups: []Group{{Agent: "a", Profile: a, Count: 2}, {Agent: "b", Profile: b, Count: 1}}})
	for id, want := range map[string]string{"w1": "agent-a", "w3": "agent-a", "w4": "/opt/bin/agent-b", "w5": "fallback"} {
		if got := f.Program(id); got != want {
			t.Errorf("%s runs %q, want %q", id, got, want)
		}
	}
	cmd, _, err := f.headlessCommand("w4", "Read plans/p/PLAN.md")
	if err != nil || cmd != "/opt/bin/agent-b 'Read plans/p/PLAN.md'" {
		t.Errorf("w4's headless command: %q, %v", cmd, err)
	}
	// A worker an earlier start left running keeps its own agent.
	f.Adopt("w5", Group{Agent: "b", Profile: b})
	f.Adopt("w1", Group{Agent: "b", Profile: b}) // this start's groups win
	if f.Profile("w5") != b || f.Profile("w1") != a {
		t.Errorf("adopted: w5 %v, w1 %v", f.Profile("w5"), f.Profile("w1"))
	}
}

func TestGroupLabel(t *testing.T) {
	for _, tc := range []struct {
		g    Group
		want string
	}{
		{Group{Agent: "claude", Profile: profile("claude", "claude")}, "claude"},
		{Group{Agent: "orch agent", Profile: profile("", "/usr/bin/orch agent")}, "orch"},
		{Group{Agent: "FOO=1 /x/mybot --fast"}, "mybot"},
	} {
		if got := tc.g.Label(); got != tc.want {
			t.Errorf("%+v: label %q, want %q", tc.g, got, tc.want)
		}
	}
}

// A live pane is never re-adopted as another agent than it runs; a dead
// one, or one recorded before agents were, is.
func TestCheckAgents(t *testing.T) {
	f := testFleet(t, Config{Groups: []Group{{Agent: "b", Profile: profile("b", "b"), Count: 2}}})
	st := state.New()
	st.Workers = []*state.Worker{{ID: "w1", Agent: "a"}, {ID: "w2"}}
	if err := f.checkAgents(st, map[string]bool{"w1": true, "w2": true}); !errors.Is(err, ErrNoFleet) {
		t.Errorf("w1's live pane runs a, b asked: %v", err)
	}
	if err := f.checkAgents(st, map[string]bool{"w2": true}); err != nil {
		t.Errorf("w1's pane is gone: %v", err)
	}
	f.recordAgent(st.Workers[0])
	if w := st.Workers[0]; w.Agent != "b" || w.Profile != "b" {
		t.Errorf("recorded %+v", w)
	}
}
