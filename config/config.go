// Package config reads orch.yaml, the repo's optional, committed settings
// for the fleet: how workers are isolated, the setup command a worktree gets,
// how orch integrate brings branches in, and agent profiles that add to or
// override the built-in ones. A missing file means the defaults.
package config

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/orch-dev/orch/internal/runas"
)

// File is the config file's name at the repo root.
const File = "orch.yaml"

// Isolation modes.
const (
	Worktree = "worktree" // default: each worker edits its own git worktree, one branch per plan
	Shared   = "shared"   // every worker edits the repo's own checkout, on its branch
)

// Integration strategies.
const (
	Merge  = "merge"  // default: a merge commit per plan; plan branches are never rewritten
	Rebase = "rebase" // the plan's commits replayed onto the base; the plan branch itself is kept as it was
)

// Values of integrate that also make the lead loop integrate approved
// plans by itself (AutoIntegrate), with the method they name: auto is
// auto-merge.
const (
	Auto       = "auto"
	AutoMerge  = "auto-merge"
	AutoRebase = "auto-rebase"
)

// Permission modes: what orch lets a worker's agent do without asking a
// person (see package agent for what each means per agent).
const (
	// PermWorktree (default): run orch-notify and edit files in its own
	// checkout; everything else asks (and the plan is needs-input).
	PermWorktree = "worktree"
	// PermAgent: orch adds no permission of its own; the agent's own
	// settings decide (the user's and the repo's).
	PermAgent = "agent"
	// PermSkip: the agent asks nothing (Claude Code's
	// --dangerously-skip-permissions, Codex's
	// --dangerously-bypass-approvals-and-sandbox). Only when asked for.
	PermSkip = "skip"
)

// DefaultSetupTimeout bounds the setup command when the file gives none.
const DefaultSetupTimeout = 5 * time.Minute

// Profile is how to run one agent. Commands are shell command lines. In
// Headless, {prompt} stands for the dispatch line, shell-quoted. Hooks
// names the hook style orch installs for it: "claude", "codex", "gemini"
// or "" (none).
type Profile struct {
	Interactive string `yaml:"interactive,omitempty" json:"interactive,omitempty"`
	Headless    string `yaml:"headless,omitempty" json:"headless,omitempty"`
	Version     string `yaml:"version,omitempty" json:"version,omitempty"`
	Hooks       string `yaml:"hooks,omitempty" json:"hooks,omitempty"`
}

// Config is orch.yaml.
type Config struct {
	Isolation    string   `yaml:"isolation,omitempty" json:"isolation"`
	Setup        string   `yaml:"setup,omitempty" json:"setup,omitempty"`
	SetupTimeout Duration `yaml:"setup_timeout,omitempty" json:"setup_timeout,omitempty"`
	// Integrate is the method, merge or rebase (an auto value in the file
	// is read into AutoIntegrate and its method).
	Integrate string `yaml:"integrate,omitempty" json:"integrate"`
	// AutoIntegrate: orch serve integrates each approved plan by itself.
	AutoIntegrate bool               `yaml:"-" json:"auto_integrate,omitempty"`
	Permissions   string             `yaml:"permissions,omitempty" json:"permissions"`
	Agents        map[string]Profile `yaml:"agents,omitempty" json:"agents,omitempty"`
	// RunAs names the Unix users workers run as: one for every worker, or
	// one per worker in order (w1 the first). Empty: the lead's own user.
	RunAs Users `yaml:"run_as,omitempty" json:"run_as,omitempty"`
	// PlanTimeout bounds how long a worker may hold a plan whose PLAN.md
	// gives no timeout of its own; 0: no bound.
	PlanTimeout Duration `yaml:"plan_timeout,omitempty" json:"plan_timeout,omitempty"`
	// Workers is the fleet orch serve brings up when --workers is not
	// given: groups of workers per agent profile, in order (workers.go).
	Workers Fleet `yaml:"workers,omitempty" json:"workers,omitempty"`
}

// Users is run_as: a user name, or a list of them.
type Users []string

// UnmarshalYAML reads one name or a list of names.
func (u *Users) UnmarshalYAML(n *yaml.Node) error {
	switch n.Kind {
	case yaml.ScalarNode:
		*u = Users{n.Value}
		return nil
	case yaml.SequenceNode:
		var names []string
		if err := n.Decode(&names); err != nil {
			return err
		}
		*u = names
		return nil
	}
	return fmt.Errorf("line %d: run_as is a user name or a list of them", n.Line)
}

// For is the user worker number n (1 for w1) runs as, "" for the lead's
// own. A list shorter than the fleet is an error.
func (u Users) For(n int) (string, error) {
	switch {
	case len(u) == 0:
		return "", nil
	case len(u) == 1:
		return u[0], nil
	case n >= 1 && n <= len(u):
		return u[n-1], nil
	}
	return "", fmt.Errorf("%w: run_as names %d users, and there is a worker w%d: name one user per worker, or one for all", ErrInvalid, len(u), n)
}

// Duration is a time.Duration written as "90s" or "5m".
type Duration time.Duration

// UnmarshalYAML reads a duration string.
func (d *Duration) UnmarshalYAML(n *yaml.Node) error {
	v, err := time.ParseDuration(n.Value)
	if err != nil || v <= 0 {
		return &durationError{line: n.Line, col: n.Column, value: n.Value}
	}
	*d = Duration(v)
	return nil
}

// durationError is a duration that does not parse; Parse names its key.
type durationError struct {
	line, col int
	key       string
	value     string
}

func (e *durationError) Error() string {
	at := fmt.Sprintf("line %d", e.line)
	if e.key != "" {
		at = e.key + " (line " + fmt.Sprint(e.line) + ")"
	}
	return fmt.Sprintf("%s: %q is not a positive duration like 90s, 5m or 1h30m", at, e.value)
}

// keyOf finds the key of the top-level value at line and col of data.
func keyOf(data []byte, line, col int) string {
	var doc yaml.Node
	if yaml.Unmarshal(data, &doc) != nil || len(doc.Content) == 0 {
		return ""
	}
	m := doc.Content[0]
	for i := 0; m.Kind == yaml.MappingNode && i+1 < len(m.Content); i += 2 {
		if v := m.Content[i+1]; v.Line == line && v.Column == col {
			return m.Content[i].Value
		}
	}
	return ""
}

var profileName = regexp.MustCompile(`^[a-z0-9][a-z0-9_-]{0,31}$`)

// Default is the configuration without a file.
func Default() *Config {
	return &Config{Isolation: Worktree, Integrate: Merge, Permissions: PermWorktree, SetupTimeout: Duration(DefaultSetupTimeout)}
}

// Load reads root/orch.yaml; a missing file gives Default. Unknown keys
// are errors (a typo must not silently fall back to a default).
func Load(root string) (*Config, error) {
	data, err := os.ReadFile(filepath.Join(root, File))
	if errors.Is(err, fs.ErrNotExist) {
		return Default(), nil
	}
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrInvalid, err)
	}
	return Parse(data)
}

// Parse reads the bytes of an orch.yaml.
func Parse(data []byte) (*Config, error) {
	c := Default()
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(c); err != nil && !errors.Is(err, io.EOF) {
		var de *durationError
		if errors.As(err, &de) {
			de.key = keyOf(data, de.line, de.col)
		}
		return nil, fmt.Errorf("%w: %v (fix %s at the repo root)", ErrInvalid, err, File)
	}
	if c.Isolation == "" {
		c.Isolation = Worktree
	}
	if c.Integrate == "" {
		c.Integrate = Merge
	}
	if c.SetupTimeout == 0 {
		c.SetupTimeout = Duration(DefaultSetupTimeout)
	}
	if c.Permissions == "" {
		c.Permissions = PermWorktree
	}
	if c.Permissions != PermWorktree && c.Permissions != PermAgent && c.Permissions != PermSkip {
		return nil, fmt.Errorf("%w: permissions %q: want %s (default), %s or %s", ErrInvalid, c.Permissions, PermWorktree, PermAgent, PermSkip)
	}
	if c.Isolation != Worktree && c.Isolation != Shared {
		return nil, fmt.Errorf("%w: isolation %q: want %s or %s", ErrInvalid, c.Isolation, Worktree, Shared)
	}
	switch c.Integrate {
	case Merge, Rebase:
	case Auto, AutoMerge:
		c.Integrate, c.AutoIntegrate = Merge, true
	case AutoRebase:
		c.Integrate, c.AutoIntegrate = Rebase, true
	default:
		return nil, fmt.Errorf("%w: integrate %q: want %s (default), %s, %s (orch serve integrates approved plans by merging them), %s or %s", ErrInvalid, c.Integrate, Merge, Rebase, Auto, AutoMerge, AutoRebase)
	}
	for i, n := range c.RunAs {
		if !runas.ValidName(n) {
			return nil, fmt.Errorf("%w: run_as %q: not a Unix user name (lower-case letters, digits, - and _)", ErrInvalid, n)
		}
		if slices.Contains(c.RunAs[:i], n) {
			return nil, fmt.Errorf("%w: run_as names %s twice: two workers of one user can read each other's keys; give each its own, or name one user for all", ErrInvalid, n)
		}
	}
	if len(c.RunAs) > 0 && c.Isolation != Worktree {
		return nil, fmt.Errorf("%w: run_as needs isolation: %s (a worker of its own user edits its own worktree, not the repo's checkout)", ErrInvalid, Worktree)
	}
	for _, n := range slices.Sorted(maps.Keys(c.Agents)) {
		p := c.Agents[n]
		if !profileName.MatchString(n) {
			return nil, fmt.Errorf("%w: agent profile name %q: use lower-case letters, digits, - and _", ErrInvalid, n)
		}
		if p.Hooks != "" && p.Hooks != "claude" && p.Hooks != "codex" && p.Hooks != "gemini" {
			return nil, fmt.Errorf("%w: agent %s: hooks %q: want claude, codex, gemini or nothing", ErrInvalid, n, p.Hooks)
		}
	}
	return c, nil
}
