package plans

import (
	"errors"
	"slices"
	"strings"
	"testing"
)

func TestParseRoute(t *testing.T) {
	for _, tc := range []struct {
		front      string
		agents     []string
		verifyWith string
	}{
		{"agent: codex\n", []string{"codex"}, ""},
		{"agent: [claude, codex]\nverify_with: other-agent\n", []string{"claude", "codex"}, OtherAgent},
		{"agent:\n  - b\n  - a\nverify_with: gemini\n", []string{"b", "a"}, "gemini"},
	} {
		p, err := Parse("p", []byte("---\n"+tc.front+"---\nbody\n"))
		if err != nil {
			t.Errorf("%q: %v", tc.front, err)
			continue
		}
		if !slices.Equal(p.Agent, tc.agents) || p.VerifyWith != tc.verifyWith {
			t.Errorf("%q: got %v %q", tc.front, p.Agent, p.VerifyWith)
		}
		// Render gives the same plan back.
		back, err := Parse("p", Render(p))
		if err != nil || !slices.Equal(back.Agent, p.Agent) || back.VerifyWith != p.VerifyWith {
			t.Errorf("%q: rendered %q came back as %+v, %v", tc.front, Render(p), back, err)
		}
	}
}

func TestParseRouteRefuses(t *testing.T) {
	for _, tc := range []struct{ front, want string }{
		{"agent: Claude\n", "line 2: invalid front matter: agent[0]"},
		{"agent: [a, a]\n", "agent[1]: a is named twice"},
		{"agent: {a: 1}\n", "agent is a profile name or a list"},
		{"verify_with: other\n", ""},
		{"verify_with: Other Agent\n", "verify_with: got"},
	} {
		_, err := Parse("p", []byte("---\n"+tc.front+"---\nbody\n"))
		if !errors.Is(err, ErrFrontMatter) || !strings.Contains(err.Error(), tc.want) {
			if tc.want == "" && err == nil {
				continue // "other" is a fine profile name by shape
			}
			t.Errorf("%q: got %v, want ErrFrontMatter with %q", tc.front, err, tc.want)
		}
	}
}

func TestCheckAgents(t *testing.T) {
	known := []string{"a", "b", "claude"}
	ok := []*Plan{{Name: "p"}, {Name: "p", Agent: Agents{"b", "a"}, VerifyWith: OtherAgent}, {Name: "p", VerifyWith: "claude"}}
	for _, p := range ok {
		if err := p.CheckAgents(known); err != nil {
			t.Errorf("%+v: %v", p, err)
		}
	}
	for _, p := range []*Plan{{Name: "p", Agent: Agents{"a", "codex"}}, {Name: "p", VerifyWith: "codex"}} {
		err := p.CheckAgents(known)
		if !errors.Is(err, ErrUnknownAgent) || !strings.Contains(err.Error(), "codex") || !strings.Contains(err.Error(), "plans/p/PLAN.md") {
			t.Errorf("%+v: got %v, want ErrUnknownAgent naming codex and the file", p, err)
		}
	}
}
