package plans

import (
	"fmt"
	"regexp"
	"slices"

	"go.yaml.in/yaml/v3"
)

// OtherAgent is verify_with's value asking that each verification round
// run on a worker whose agent differs from the author's.
const OtherAgent = "other-agent"

// agentName is the shape of an agent profile name (as orch.yaml's agents:
// keys). Whether the profile exists is checked against orch.yaml by the
// CLI and the lead loop (plans knows no profiles).
var agentName = regexp.MustCompile(`^[a-z0-9][a-z0-9_-]{0,31}$`)

// Agents is agent: in a PLAN.md's front matter: the profiles whose workers
// may take the plan, in order of preference. The plan goes only to a
// worker of the first one the fleet has; a later one takes it over only
// when the fleet has none of the earlier ones, or when an earlier one is
// out of service (a quota or rate limit, an outage) and its retries are
// spent. Written as one name or a list.
type Agents []string

// UnmarshalYAML reads one profile name or a list of them.
func (a *Agents) UnmarshalYAML(n *yaml.Node) error {
	switch n.Kind {
	case yaml.ScalarNode:
		*a = Agents{n.Value}
		return nil
	case yaml.SequenceNode:
		var names []string
		if err := n.Decode(&names); err != nil {
			return err
		}
		*a = names
		return nil
	}
	return fmt.Errorf("line %d: agent is a profile name or a list of them", n.Line)
}

// MarshalYAML writes one name as a scalar, several as a list.
func (a Agents) MarshalYAML() (any, error) {
	if len(a) == 1 {
		return a[0], nil
	}
	return []string(a), nil
}

// checkRoute validates agent: and verify_with: by shape.
func (p *Plan) checkRoute() *fieldError {
	for i, a := range p.Agent {
		if !agentName.MatchString(a) {
			return &fieldError{[]string{"agent"}, i, fmt.Errorf("%q is not a profile name (lower-case letters, digits, - and _; orch doctor lists the profiles)", a)}
		}
		if slices.Contains(p.Agent[:i], a) {
			return &fieldError{[]string{"agent"}, i, fmt.Errorf("%s is named twice", a)}
		}
	}
	if v := p.VerifyWith; v != "" && v != OtherAgent && !agentName.MatchString(v) {
		return &fieldError{[]string{"verify_with"}, -1, fmt.Errorf("got %q, want %s or a profile name", v, OtherAgent)}
	}
	return nil
}

// CheckAgents checks that every profile p names (agent:, verify_with:) is
// one of known: the error names the unknown one and the known ones.
func (p *Plan) CheckAgents(known []string) error {
	for _, a := range p.Agent {
		if !slices.Contains(known, a) {
			return fmt.Errorf("%s: %w: agent %s is not a profile (known: %v); add it to orch.yaml's agents: or name a known one", RelPlanPath(p.Name), ErrUnknownAgent, a, known)
		}
	}
	if v := p.VerifyWith; v != "" && v != OtherAgent && !slices.Contains(known, v) {
		return fmt.Errorf("%s: %w: verify_with %s is not a profile (known: %v); use %s or a known profile", RelPlanPath(p.Name), ErrUnknownAgent, v, known, OtherAgent)
	}
	return nil
}
