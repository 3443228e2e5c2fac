package config

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"
)

// MaxWorkers bounds a fleet's size.
const MaxWorkers = 64

// Group is Count workers that run one agent: a profile name (built-in or
// orch.yaml's), or "" for the agent orch serve --agent names.
type Group struct {
	Agent string `json:"agent,omitempty"`
	Count int    `json:"count"`
}

// Fleet is what orch serve --workers (or orch.yaml's workers:) asks for:
// groups of workers in order, w1 onwards. "3" is three workers of the
// --agent; "claude:3,codex:2" is w1-w3 running Claude Code and w4-w5 Codex.
type Fleet []Group

// ParseFleet reads --workers: a number, or agent:count groups separated by
// commas. Each group's agent is a profile name; whether it is a known
// profile is checked where the profiles are (package agent).
func ParseFleet(spec string) (Fleet, error) {
	spec = strings.TrimSpace(spec)
	if spec == "" {
		return nil, nil
	}
	if n, err := strconv.Atoi(spec); err == nil {
		if n < 0 || n > MaxWorkers {
			return nil, fmt.Errorf("%w: %d workers: want 0 to %d", ErrWorkers, n, MaxWorkers)
		}
		if n == 0 {
			return nil, nil
		}
		return Fleet{{Count: n}}, nil
	}
	var f Fleet
	for _, part := range strings.Split(spec, ",") {
		name, count, ok := strings.Cut(strings.TrimSpace(part), ":")
		n, err := strconv.Atoi(strings.TrimSpace(count))
		if !ok || err != nil {
			return nil, fmt.Errorf("%w: %q: want a number (--workers 3) or agent:count groups (--workers claude:3,codex:2)", ErrWorkers, part)
		}
		f = append(f, Group{Agent: strings.TrimSpace(name), Count: n})
	}
	return f, f.check()
}

// check validates the groups: known shapes of names, counts at least 1,
// each agent once, at most MaxWorkers in all.
func (f Fleet) check() error {
	total := 0
	for i, g := range f {
		if !profileName.MatchString(g.Agent) {
			return fmt.Errorf("%w: agent %q: a profile name (lower-case letters, digits, - and _); a command with arguments goes in an orch.yaml profile", ErrWorkers, g.Agent)
		}
		if g.Count < 1 {
			return fmt.Errorf("%w: %s:%d: each group needs at least one worker", ErrWorkers, g.Agent, g.Count)
		}
		if slices.ContainsFunc(f[:i], func(o Group) bool { return o.Agent == g.Agent }) {
			return fmt.Errorf("%w: agent %s is named twice: give it one count", ErrWorkers, g.Agent)
		}
		total += g.Count
	}
	if total > MaxWorkers {
		return fmt.Errorf("%w: %d workers in all: want at most %d", ErrWorkers, total, MaxWorkers)
	}
	return nil
}

// Total is the number of workers the groups make.
func (f Fleet) Total() int {
	n := 0
	for _, g := range f {
		n += g.Count
	}
	return n
}

// Mixed says whether the groups name their agents (agent:count), rather
// than being a count of --agent workers.
func (f Fleet) Mixed() bool { return len(f) > 0 && f[0].Agent != "" }

// String writes the groups as --workers takes them.
func (f Fleet) String() string {
	var parts []string
	for _, g := range f {
		if g.Agent == "" {
			parts = append(parts, strconv.Itoa(g.Count))
			continue
		}
		parts = append(parts, g.Agent+":"+strconv.Itoa(g.Count))
	}
	return strings.Join(parts, ",")
}

// UnmarshalYAML reads workers: in orch.yaml: a mapping of profile names to
// counts, kept in the file's order ({claude: 3, codex: 2}), or the string
// --workers takes ("claude:3,codex:2").
func (f *Fleet) UnmarshalYAML(n *yaml.Node) error {
	switch n.Kind {
	case yaml.ScalarNode:
		g, err := ParseFleet(n.Value)
		if err != nil {
			return fmt.Errorf("line %d: workers: %w", n.Line, err)
		}
		if len(g) > 0 && !g.Mixed() {
			return fmt.Errorf("line %d: workers: %w: name each group's agent (workers: {claude: 3}), or give the count with --workers N --agent X", n.Line, ErrWorkers)
		}
		*f = g
		return nil
	case yaml.MappingNode:
		var g Fleet
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, v := n.Content[i], n.Content[i+1]
			c, err := strconv.Atoi(v.Value)
			if v.Kind != yaml.ScalarNode || err != nil {
				return fmt.Errorf("line %d: workers: %s: %w: want a count of workers", v.Line, k.Value, ErrWorkers)
			}
			g = append(g, Group{Agent: k.Value, Count: c})
		}
		if err := g.check(); err != nil {
			return fmt.Errorf("line %d: workers: %w", n.Line, err)
		}
		*f = g
		return nil
	}
	return fmt.Errorf("line %d: workers: %w: want a mapping of agent to count (workers: {claude: 3, codex: 2})", n.Line, ErrWorkers)
}
