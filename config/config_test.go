package config

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestLoadMissingIsDefault(t *testing.T) {
	c, err := Load(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if c.Isolation != Worktree || c.Integrate != Merge || time.Duration(c.SetupTimeout) != DefaultSetupTimeout {
		t.Fatalf("defaults: %+v", c)
	}
}

func TestParse(t *testing.T) {
	c, err := Parse([]byte("isolation: shared\nsetup: make deps\nsetup_timeout: 90s\nintegrate: rebase\nagents:\n  mine:\n    interactive: mybot\n    headless: mybot -p {prompt}\n    hooks: claude\n"))
	if err != nil {
		t.Fatal(err)
	}
	if c.Isolation != Shared || c.Setup != "make deps" || time.Duration(c.SetupTimeout) != 90*time.Second || c.Integrate != Rebase {
		t.Fatalf("parsed: %+v", c)
	}
	if p := c.Agents["mine"]; p.Interactive != "mybot" || p.Headless != "mybot -p {prompt}" || p.Hooks != "claude" {
		t.Fatalf("profile: %+v", p)
	}
	if c, err := Parse(nil); err != nil || c.Isolation != Worktree {
		t.Fatalf("empty file: %+v %v", c, err)
	}
}

func TestIntegrateAuto(t *testing.T) {
	for _, tc := range []struct {
		in     string
		method string
		auto   bool
	}{
		{"", Merge, false},
		{"integrate: merge\n", Merge, false},
		{"integrate: rebase\n", Rebase, false},
		{"integrate: auto\n", Merge, true},
		{"integrate: auto-merge\n", Merge, true},
		{"integrate: auto-rebase\n", Rebase, true},
	} {
		c, err := Parse([]byte(tc.in))
		if err != nil {
			t.Fatalf("%q: %v", tc.in, err)
		}
		if c.Integrate != tc.method || c.AutoIntegrate != tc.auto {
			t.Errorf("%q: got %s auto=%v, want %s auto=%v", tc.in, c.Integrate, c.AutoIntegrate, tc.method, tc.auto)
		}
	}
}

func TestParseRefuses(t *testing.T) {
	for _, bad := range []string{
		"isolation: none\n",
		"integrate: squash\n",
		"integrate: auto rebase\n",
		"isolaton: shared\n", // typo: unknown key
		"setup_timeout: soon\n",
		"setup_timeout: -1s\n",
		"agents:\n  Bad Name:\n    interactive: x\n",
		"agents:\n  x:\n    hooks: vim\n",
		"isolation: [\n",
		"run_as: Root User\n",
		"run_as: [orch-w1, orch-w1]\n",
		"run_as: {a: b}\n",
		"isolation: shared\nrun_as: orch-w1\n",
	} {
		if _, err := Parse([]byte(bad)); !errors.Is(err, ErrInvalid) {
			t.Errorf("%q: got %v, want ErrInvalid", bad, err)
		}
	}
}

// TestPlanTimeout: the fleet's default time limit per plan, and a bad
// one refused naming its key and line.
func TestPlanTimeout(t *testing.T) {
	c, err := Parse([]byte("isolation: shared\nplan_timeout: 45m\n"))
	if err != nil {
		t.Fatal(err)
	}
	if got := time.Duration(c.PlanTimeout); got != 45*time.Minute {
		t.Errorf("PlanTimeout = %s, want 45m", got)
	}
	if c, _ := Parse(nil); c.PlanTimeout != 0 {
		t.Errorf("default PlanTimeout = %s, want none", time.Duration(c.PlanTimeout))
	}
	for _, tc := range []struct{ data, want string }{
		{"isolation: shared\nplan_timeout: 45\n", `plan_timeout (line 2): "45" is not a positive duration`},
		{"plan_timeout: -3s\n", `plan_timeout (line 1): "-3s"`},
		{"plan_timeout: 0s\n", `plan_timeout (line 1): "0s"`},
		{"setup: x\nsetup_timeout: soon\n", `setup_timeout (line 2): "soon"`},
	} {
		_, err := Parse([]byte(tc.data))
		if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "fix orch.yaml") {
			t.Errorf("%q: got %v, want ErrInvalid saying %q", tc.data, err, tc.want)
		}
	}
}

func TestRunAs(t *testing.T) {
	one, err := Parse([]byte("run_as: orch\n"))
	if err != nil {
		t.Fatal(err)
	}
	list, err := Parse([]byte("run_as: [orch-w1, orch-w2]\n"))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		u    Users
		n    int
		want string
	}{{one.RunAs, 3, "orch"}, {list.RunAs, 1, "orch-w1"}, {list.RunAs, 2, "orch-w2"}, {nil, 1, ""}} {
		if got, err := tc.u.For(tc.n); err != nil || got != tc.want {
			t.Errorf("%v.For(%d) = %q, %v; want %q", tc.u, tc.n, got, err, tc.want)
		}
	}
	if _, err := list.RunAs.For(3); !errors.Is(err, ErrInvalid) {
		t.Errorf("a third worker of two users: %v, want ErrInvalid", err)
	}
}

func TestLoadUnreadable(t *testing.T) {
	dir := t.TempDir()
	if err := os.Mkdir(filepath.Join(dir, File), 0o700); err != nil {
		t.Fatal(err)
	}
	if _, err := Load(dir); !errors.Is(err, ErrInvalid) {
		t.Fatalf("a directory named %s: %v", File, err)
	}
}
