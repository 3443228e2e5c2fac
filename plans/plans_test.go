package plans

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
)

func TestValidateName(t *testing.T) {
	good := []string{"a", "0", "fix-auth", "v1.2_rc", "a.b", strings.Repeat("a", 63)}
	for _, name := range good {
		t.Run("good/"+name, func(t *testing.T) {
			if err := ValidateName(name); err != nil {
				t.Errorf("ValidateName(%q) = %v, want nil", name, err)
			}
		})
	}
	bad := []struct {
		label, name string
	}{
		{"dotdot-slash", "../x"},
		{"space", "a b"},
		{"shell", "x;rm -rf ~"},
		{"200 chars", strings.Repeat("a", 200)},
		{"64 chars", strings.Repeat("a", 64)},
		{"empty", ""},
		{"inner dotdot", "a..b"},
		{"upper", "A"},
		{"leading dash", "-x"},
		{"leading dot", ".x"},
		{"newline", "a\nb"},
		{"trailing newline", "a\n"},
		{"escape", "a\x1b[31m"},
		{"slash", "a/b"},
	}
	for _, tc := range bad {
		t.Run("bad/"+tc.label, func(t *testing.T) {
			err := ValidateName(tc.name)
			if !errors.Is(err, ErrBadName) {
				t.Fatalf("ValidateName(%q) = %v, want ErrBadName", tc.name, err)
			}
			msg := err.Error()
			if want := fmt.Sprintf("plan name %q is invalid", tc.name) + ": use 1-63 characters"; !strings.HasPrefix(msg, want) {
				t.Errorf("message %q does not start with %q", msg, want)
			}
			if strings.ContainsAny(msg, "\n\x1b") {
				t.Errorf("message %q holds a raw control character", msg)
			}
		})
	}
}

func TestValidateNameExactText(t *testing.T) {
	want := `plan name "../x" is invalid: use 1-63 characters of a-z, 0-9, '.', '_', '-', starting with a letter or digit, without ".."`
	if got := ValidateName("../x").Error(); got != want {
		t.Errorf("got %q, want %q", got, want)
	}
}

func f64(v float64) *float64 { return &v }

func TestRenderParseRoundTrip(t *testing.T) {
	tests := []struct {
		name string
		plan Plan
	}{
		{"body only", Plan{Name: "a", Body: "# Do it\n\nsteps\n"}},
		{"empty", Plan{Name: "a"}},
		{"body starts with delimiter", Plan{Name: "a", Body: "---\nnot yaml: [\n"}},
		{"all fields", Plan{
			Name:       "fix-auth",
			DependsOn:  []string{"a", "b.c"},
			Acceptance: []string{"go test ./...", "echo '---' && grep -q 'x: y' f", "line1\nline2\n---\n"},
			Verify:     3,
			Priority:   -2,
			Bet: &Bet{Metric: "p95 ms", Baseline: f64(120.5), MetricCmd: "./bench", Direction: "lower",
				Target: f64(1e-9), CheckBy: "2026-03-01"},
			Body: "Do the thing.\n---\nmore\n",
		}},
		{"smallest bet", Plan{Name: "a", Bet: &Bet{Metric: "m", Direction: "lower", Target: f64(1)}, Body: "x"}},
		{"zero baseline", Plan{Name: "a", Bet: &Bet{Metric: "m", Direction: "higher", Target: f64(0), Baseline: f64(0)}}},
		{"timeout alone", Plan{Name: "a", Timeout: "1h30m", Body: "x"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			data := Render(&tc.plan)
			got, err := Parse(tc.plan.Name, data)
			if err != nil {
				t.Fatalf("Parse(Render) error: %v\n%s", err, data)
			}
			if !reflect.DeepEqual(*got, tc.plan) {
				t.Errorf("round trip:\n got %+v\nwant %+v\nrendered:\n%s", *got, tc.plan, data)
			}
		})
	}
}

// TestPlanValidate: what orch plan new writes is checked as Parse checks
// a file, naming the field; a plan's time limit is read as a duration.
func TestPlanValidate(t *testing.T) {
	tests := []struct {
		name   string
		plan   Plan
		wantIn string // "" when valid
		limit  time.Duration
	}{
		{"no timeout", Plan{Name: "a"}, "", 0},
		{"timeout", Plan{Name: "a", Timeout: "3s"}, "", 3 * time.Second},
		{"timeout with units", Plan{Name: "a", Timeout: "1h30m"}, "", 90 * time.Minute},
		{"timeout bad", Plan{Name: "a", Timeout: "3 seconds"}, `timeout: got "3 seconds", want a positive duration`, 0},
		{"timeout negative", Plan{Name: "a", Timeout: "-1s"}, `timeout: got "-1s"`, 0},
		{"bet bad date", Plan{Name: "a", Bet: &Bet{Metric: "m", Direction: "lower", Target: f64(1), CheckBy: "2026-02-30"}}, "bet.check_by", 0},
		{"bet no metric", Plan{Name: "a", Bet: &Bet{MetricCmd: "./m", Direction: "lower", Target: f64(1)}}, "bet.metric: missing", 0},
		{"bet no direction", Plan{Name: "a", Bet: &Bet{Metric: "m", Target: f64(1)}}, "bet.direction: missing", 0},
		{"bet no target", Plan{Name: "a", Bet: &Bet{Metric: "m", Direction: "higher"}}, "bet.target: missing", 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.plan.Validate()
			if tc.wantIn == "" {
				if err != nil {
					t.Fatalf("Validate() = %v, want nil", err)
				}
			} else if err == nil || !errors.Is(err, ErrFrontMatter) || !strings.Contains(err.Error(), tc.wantIn) {
				t.Fatalf("Validate() = %v, want ErrFrontMatter containing %q", err, tc.wantIn)
			}
			if got := tc.plan.TimeLimit(); got != tc.limit {
				t.Errorf("TimeLimit() = %s, want %s", got, tc.limit)
			}
		})
	}
}

func TestParse(t *testing.T) {
	data := "---\r\ndepends_on: [a, b]\nverify: 1\nbet:\n  metric: m\n  direction: higher\n  target: 2\n  check_by: 2026-01-31\n---\r\nBody\n"
	p, err := Parse("x", []byte(data))
	if err != nil {
		t.Fatal(err)
	}
	if got, want := p.DependsOn, []string{"a", "b"}; !reflect.DeepEqual(got, want) {
		t.Errorf("DependsOn = %q, want %q", got, want)
	}
	if p.Verify != 1 || p.Bet == nil || p.Bet.Direction != "higher" || p.Bet.CheckBy != "2026-01-31" {
		t.Errorf("parsed %+v bet %+v", p, p.Bet)
	}
	if p.Body != "Body\n" {
		t.Errorf("Body = %q, want %q", p.Body, "Body\n")
	}
	if p.Name != "x" {
		t.Errorf("Name = %q", p.Name)
	}
}

func TestParseErrors(t *testing.T) {
	tests := []struct {
		name     string
		data     string
		wantIn   []string
		wantWrap error
	}{
		{"unclosed flow", "---\nverify: 1\ndepends_on: [a,\n---\n", []string{"plans/x/PLAN.md line 3:"}, ErrFrontMatter},
		{"tab indent", "---\nverify: 1\n\tdepends_on: [a]\n---\n", []string{"plans/x/PLAN.md line 3:", "tab"}, ErrFrontMatter},
		{"unknown key", "---\nverify: 1\npriority: 2\nowner: me\n---\n", []string{"line 4:", `unknown key "owner"`}, ErrFrontMatter},
		{"unknown bet key", "---\nbet:\n  metric: x\n  base: 1\n---\n", []string{"line 4:", `unknown key "base"`}, ErrFrontMatter},
		{"name key", "---\nname: x\n---\n", []string{"line 2:", `unknown key "name"`}, ErrFrontMatter},
		{"wrong type", "---\nverify: lots\n---\n", []string{"line 2:", "lots"}, ErrFrontMatter},
		{"not a mapping", "---\n- a\n---\n", []string{"line 2:"}, ErrFrontMatter},
		{"unterminated", "---\nverify: 1\nbody\n", []string{"plans/x/PLAN.md line 1:", "closing"}, ErrFrontMatter},
		{"only opening", "---", []string{"line 1:"}, ErrFrontMatter},
		{"bad verify", "---\npriority: 1\nverify: 2\n---\n", []string{"line 3:", "verify", "0, 1 or 3"}, ErrFrontMatter},
		{"bad direction", "---\nbet:\n  metric: m\n  direction: up\n---\n", []string{"line 4:", "bet.direction", `"up"`}, ErrFrontMatter},
		{"bad check_by", "---\nbet:\n  check_by: 2026-13-01\n---\n", []string{"line 3:", "bet.check_by", "YYYY-MM-DD"}, ErrFrontMatter},
		{"bet without metric", "---\nbet:\n  metric_cmd: ./bench\n  direction: lower\n  target: 1\n---\n", []string{"line 3:", "bet.metric", "missing"}, ErrFrontMatter},
		{"bet without direction", "---\nbet:\n  metric: m\n  target: 1\n---\n", []string{"bet.direction", "missing"}, ErrFrontMatter},
		{"bet without target", "---\nbet:\n  metric: m\n  direction: lower\n---\n", []string{"bet.target", "missing"}, ErrFrontMatter},
		{"bet with a bad date", "---\nbet:\n  metric: m\n  direction: lower\n  target: 1\n  check_by: next week\n---\n", []string{"line 6:", "bet.check_by", `"next week"`, "YYYY-MM-DD"}, ErrFrontMatter},
		{"timeout not a duration", "---\npriority: 1\ntimeout: soon\n---\n", []string{"line 3:", "timeout", `"soon"`, "45m"}, ErrFrontMatter},
		{"timeout without a unit", "---\ntimeout: 30\n---\n", []string{"line 2:", "timeout", `"30"`}, ErrFrontMatter},
		{"timeout zero", "---\ntimeout: 0s\n---\n", []string{"timeout", "positive"}, ErrFrontMatter},
		{"timeout negative", "---\ntimeout: -5m\n---\n", []string{"timeout", `"-5m"`}, ErrFrontMatter},
		{"check_by datetime", "---\nbet:\n  check_by: 2026-01-01T00:00:00Z\n---\n", []string{"line 3:", "bet.check_by"}, ErrFrontMatter},
		{"bad dep name", "---\ndepends_on:\n  - ok\n  - ../etc\n---\n", []string{"line 4:", "depends_on[1]", `"../etc"`}, ErrBadName},
		{"bad dep name wraps front matter", "---\ndepends_on: [A]\n---\n", []string{"line 2:"}, ErrFrontMatter},
		{"empty acceptance", "---\nacceptance:\n  - go test\n  - ''\n---\n", []string{"line 4:", "acceptance[1]"}, ErrFrontMatter},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse("x", []byte(tc.data))
			if !errors.Is(err, tc.wantWrap) {
				t.Fatalf("Parse error = %v, want it to wrap %v", err, tc.wantWrap)
			}
			for _, w := range tc.wantIn {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not contain %q", err, w)
				}
			}
		})
	}
}

func TestParseNoFrontMatter(t *testing.T) {
	tests := []string{"", "just text\n", "--- \nnot a delimiter\n", "text\n---\nmore\n"}
	for _, data := range tests {
		t.Run(data, func(t *testing.T) {
			p, err := Parse("x", []byte(data))
			if err != nil {
				t.Fatal(err)
			}
			if p.Body != data {
				t.Errorf("Body = %q, want %q", p.Body, data)
			}
		})
	}
}

func TestParseBadName(t *testing.T) {
	if _, err := Parse("../x", []byte("")); !errors.Is(err, ErrBadName) {
		t.Errorf("Parse(../x) = %v, want ErrBadName", err)
	}
}

func TestCheckGraph(t *testing.T) {
	plan := func(deps ...string) *Plan { return &Plan{DependsOn: deps} }
	tests := []struct {
		name     string
		all      map[string]*Plan
		wantWrap error
		wantMsg  string
	}{
		{"empty", map[string]*Plan{}, nil, ""},
		{"dag", map[string]*Plan{"a": plan(), "b": plan("a"), "c": plan("a", "b")}, nil, ""},
		{"unknown", map[string]*Plan{"a": plan(), "b": plan("a", "zz")}, ErrUnknownDep, `plan "b" depends on unknown plan "zz"`},
		{"cycle", map[string]*Plan{"a": plan("b"), "b": plan("c"), "c": plan("a")}, ErrCycle, "dependency cycle: a -> b -> c -> a"},
		{"cycle off the start", map[string]*Plan{"a": plan("b"), "b": plan("c"), "c": plan("b")}, ErrCycle, "dependency cycle: b -> c -> b"},
		{"self", map[string]*Plan{"a": plan("a")}, ErrCycle, "dependency cycle: a -> a"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := CheckGraph(tc.all)
			if tc.wantWrap == nil {
				if err != nil {
					t.Fatalf("CheckGraph = %v, want nil", err)
				}
				return
			}
			if !errors.Is(err, tc.wantWrap) {
				t.Fatalf("CheckGraph = %v, want %v", err, tc.wantWrap)
			}
			if got := err.Error(); got != tc.wantMsg {
				t.Errorf("message %q, want %q", got, tc.wantMsg)
			}
		})
	}
}

// mkPlan writes root/plans/<name>/PLAN.md with content.
func mkPlan(t *testing.T, root, name, content string) {
	t.Helper()
	dir := filepath.Join(root, Dir, name)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, PlanFile), []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestLoad(t *testing.T) {
	root := t.TempDir()
	mkPlan(t, root, "good", "---\nverify: 1\n---\nbody\n")
	mkPlan(t, root, "big", strings.Repeat("x", MaxPlanSize+1))
	mkPlan(t, root, "broken", "---\nverify: 1\nfoo: 1\n---\n")
	if err := os.MkdirAll(filepath.Join(root, Dir, "empty"), 0o755); err != nil {
		t.Fatal(err)
	}
	// plans/linkdir -> a directory outside plans/ that holds a PLAN.md.
	outside := t.TempDir()
	mkPlan(t, outside, "target", "stolen\n")
	if err := os.Symlink(filepath.Join(outside, Dir, "target"), filepath.Join(root, Dir, "linkdir")); err != nil {
		t.Fatal(err)
	}
	// plans/linkfile/PLAN.md -> a file elsewhere.
	if err := os.MkdirAll(filepath.Join(root, Dir, "linkfile"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(PlanPath(outside, "target"), PlanPath(root, "linkfile")); err != nil {
		t.Fatal(err)
	}

	tests := []struct {
		name     string
		wantWrap error
		wantIn   string
	}{
		{"good", nil, ""},
		{"missing", ErrNoPlan, "plans/missing/PLAN.md"},
		{"empty", ErrNoPlan, "plans/empty/PLAN.md"},
		{"big", ErrTooLarge, "1048576"},
		{"broken", ErrFrontMatter, "load plan broken: plans/broken/PLAN.md line 3:"},
		{"linkdir", ErrSymlink, "plans/linkdir is a symlink"},
		{"linkfile", ErrSymlink, "plans/linkfile/PLAN.md is a symlink"},
		{"../x", ErrBadName, `"../x"`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p, err := Load(root, tc.name)
			if tc.wantWrap == nil {
				if err != nil {
					t.Fatalf("Load = %v", err)
				}
				if p.Verify != 1 || p.Body != "body\n" || p.Name != tc.name {
					t.Errorf("Load = %+v", p)
				}
				return
			}
			if !errors.Is(err, tc.wantWrap) {
				t.Fatalf("Load = %v, want %v", err, tc.wantWrap)
			}
			if !strings.Contains(err.Error(), tc.wantIn) {
				t.Errorf("error %q does not contain %q", err, tc.wantIn)
			}
		})
	}
}

func TestLoadPlansDirSymlink(t *testing.T) {
	root := t.TempDir()
	outside := t.TempDir()
	mkPlan(t, outside, "a", "x\n")
	if err := os.Symlink(filepath.Join(outside, Dir), filepath.Join(root, Dir)); err != nil {
		t.Fatal(err)
	}
	if _, err := Load(root, "a"); !errors.Is(err, ErrSymlink) {
		t.Errorf("Load = %v, want ErrSymlink", err)
	}
	if _, err := LoadAll(root); !errors.Is(err, ErrSymlink) {
		t.Errorf("LoadAll = %v, want ErrSymlink", err)
	}
}

func TestLoadAll(t *testing.T) {
	t.Run("missing plans dir", func(t *testing.T) {
		all, err := LoadAll(t.TempDir())
		if err != nil || len(all) != 0 {
			t.Errorf("LoadAll = %v, %v; want empty, nil", all, err)
		}
	})
	t.Run("plans", func(t *testing.T) {
		root := t.TempDir()
		mkPlan(t, root, "a", "a\n")
		mkPlan(t, root, "b", "---\ndepends_on: [a]\n---\nb\n")
		if err := os.WriteFile(filepath.Join(root, Dir, "README.md"), []byte("notes"), 0o644); err != nil {
			t.Fatal(err)
		}
		all, err := LoadAll(root)
		if err != nil {
			t.Fatal(err)
		}
		if len(all) != 2 || all["a"].Body != "a\n" || all["b"].DependsOn[0] != "a" {
			t.Errorf("LoadAll = %+v", all)
		}
	})
	t.Run("bad folder name", func(t *testing.T) {
		root := t.TempDir()
		mkPlan(t, root, "a", "a\n")
		if err := os.MkdirAll(filepath.Join(root, Dir, "Bad Name"), 0o755); err != nil {
			t.Fatal(err)
		}
		_, err := LoadAll(root)
		if !errors.Is(err, ErrBadName) || !strings.Contains(err.Error(), `"Bad Name"`) {
			t.Errorf("LoadAll = %v, want ErrBadName naming the folder", err)
		}
	})
}

func TestReadResult(t *testing.T) {
	root := t.TempDir()
	mkPlan(t, root, "a", "plan\n")
	mkPlan(t, root, "b", "plan\n")
	if err := os.WriteFile(ResultPath(root, "a"), []byte("done: all good\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(ResultPath(root, "a"), ResultPath(root, "b")); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		label, name string
		max         int64
		want        string
		wantWrap    error
		wantIn      string
	}{
		{"present", "a", 100, "done: all good\n", nil, ""},
		{"exact bound", "a", 15, "done: all good\n", nil, ""},
		{"too large", "a", 10, "", ErrTooLarge, "plans/a/RESULT.md is 15 bytes, more than the 10-byte bound"},
		{"absent", "c", 100, "", ErrNoResult, "plans/c/RESULT.md"},
		{"symlink", "b", 100, "", ErrSymlink, "plans/b/RESULT.md is a symlink"},
		{"bad name", "../a", 100, "", ErrBadName, `"../a"`},
	}
	for _, tc := range tests {
		t.Run(tc.label, func(t *testing.T) {
			got, err := ReadResult(root, tc.name, tc.max)
			if tc.wantWrap == nil {
				if err != nil {
					t.Fatalf("ReadResult = %v", err)
				}
				if string(got) != tc.want {
					t.Errorf("ReadResult = %q, want %q", got, tc.want)
				}
				return
			}
			if !errors.Is(err, tc.wantWrap) {
				t.Fatalf("ReadResult = %v, want %v", err, tc.wantWrap)
			}
			if !strings.Contains(err.Error(), tc.wantIn) {
				t.Errorf("error %q does not contain %q", err, tc.wantIn)
			}
		})
	}
}

func TestWrite(t *testing.T) {
	root := t.TempDir()
	p := &Plan{Name: "new-plan", DependsOn: []string{"a"}, Acceptance: []string{"go test ./..."}, Body: "do it\n"}
	if err := Write(root, p); err != nil {
		t.Fatalf("Write = %v", err)
	}
	got, err := Load(root, "new-plan")
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, p) {
		t.Errorf("Load after Write = %+v, want %+v", got, p)
	}
	fi, err := os.Stat(PlanPath(root, "new-plan"))
	if err != nil {
		t.Fatal(err)
	}
	if got, want := fi.Mode().Perm(), os.FileMode(0o644); got != want {
		t.Errorf("PLAN.md mode = %v, want %v", got, want)
	}
	entries, err := os.ReadDir(filepath.Join(root, Dir, "new-plan"))
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != 1 {
		t.Errorf("plan folder holds %d entries, want only PLAN.md", len(entries))
	}

	tests := []struct {
		label    string
		plan     *Plan
		wantWrap error
		wantIn   string
	}{
		{"exists", &Plan{Name: "new-plan", Body: "other\n"}, ErrPlanExists, "plans/new-plan/PLAN.md already exists"},
		{"bad name", &Plan{Name: "../x"}, ErrBadName, `"../x"`},
		{"bad verify", &Plan{Name: "v", Verify: 2}, ErrFrontMatter, "verify"},
		{"bad dep", &Plan{Name: "v", DependsOn: []string{"a b"}}, ErrBadName, `"a b"`},
	}
	for _, tc := range tests {
		t.Run(tc.label, func(t *testing.T) {
			err := Write(root, tc.plan)
			if !errors.Is(err, tc.wantWrap) {
				t.Fatalf("Write = %v, want %v", err, tc.wantWrap)
			}
			if !strings.Contains(err.Error(), tc.wantIn) {
				t.Errorf("error %q does not contain %q", err, tc.wantIn)
			}
		})
	}
	data, err := os.ReadFile(PlanPath(root, "new-plan"))
	if err != nil {
		t.Fatal(err)
	}
	if string(data) != string(Render(p)) {
		t.Errorf("refused Write changed PLAN.md to %q", data)
	}
	if _, err := os.Stat(filepath.Join(root, Dir, "v")); err == nil {
		t.Errorf("invalid plan created its folder")
	}
}

func TestWriteSymlinkFolder(t *testing.T) {
	root := t.TempDir()
	outside := t.TempDir()
	if err := os.MkdirAll(filepath.Join(root, Dir), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside, filepath.Join(root, Dir, "x")); err != nil {
		t.Fatal(err)
	}
	if err := Write(root, &Plan{Name: "x", Body: "b"}); !errors.Is(err, ErrSymlink) {
		t.Errorf("Write = %v, want ErrSymlink", err)
	}
	if _, err := os.Stat(filepath.Join(outside, PlanFile)); err == nil {
		t.Errorf("Write followed the symlink")
	}
}

func TestReady(t *testing.T) {
	states := map[string]string{"a": "done", "v": "verified", "i": "integrated", "r": "refuted"}
	tests := []struct {
		name string
		deps []string
		want string
		miss []string
	}{
		{"none", nil, "", nil},
		{"all done", []string{"a", "v", "i"}, "", nil},
		{"missing", []string{"b", "a", "c", "b", "r"}, "", []string{"b", "c", "r"}},
		{"verified wanted", []string{"a", "v", "i"}, "verified", []string{"a"}},
		{"integrated wanted", []string{"a", "v", "i"}, "integrated", []string{"a", "v"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := Ready(&Plan{DependsOn: tc.deps, DependsOnState: tc.want}, func(n string) string { return states[n] })
			if !reflect.DeepEqual(got, tc.miss) {
				t.Errorf("Ready = %q, want %q", got, tc.miss)
			}
		})
	}
	if _, err := Parse("x", []byte("---\ndepends_on: [a]\ndepends_on_state: merged\n---\nx\n")); err == nil || !strings.Contains(err.Error(), "depends_on_state") {
		t.Errorf("a bad depends_on_state: %v", err)
	}
}

func TestPaths(t *testing.T) {
	tests := []struct{ got, want string }{
		{RelPlanPath("a"), "plans/a/PLAN.md"},
		{RelResultPath("a"), "plans/a/RESULT.md"},
		{PlanPath("/r", "a"), filepath.Join("/r", "plans", "a", "PLAN.md")},
		{ResultPath("/r", "a"), filepath.Join("/r", "plans", "a", "RESULT.md")},
	}
	for _, tc := range tests {
		if tc.got != tc.want {
			t.Errorf("got %q, want %q", tc.got, tc.want)
		}
	}
}

// The rule is written twice: as NamePattern (the contract's regexp, for
// readers) and as event.CheckPlanName (what runs). They must agree.
func FuzzNameRuleAgrees(f *testing.F) {
	for _, s := range []string{"a", "a.b", "a..b", "../x", "-x", "x-", "A", "a b", strings.Repeat("a", 63), strings.Repeat("a", 64), "é", ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, name string) {
		want := NamePattern.MatchString(name) && !strings.Contains(name, "..")
		if got := ValidateName(name) == nil; got != want {
			t.Errorf("ValidateName(%q) ok=%v, NamePattern says %v", name, got, want)
		}
	})
}

func TestParseRefusesNonFiniteBetValues(t *testing.T) {
	for _, v := range []string{".inf", "-.inf", ".nan"} {
		doc := "---\nbet:\n  metric: m\n  target: " + v + "\n---\nbody\n"
		if _, err := Parse("x", []byte(doc)); !errors.Is(err, ErrFrontMatter) {
			t.Errorf("target %s: err = %v, want ErrFrontMatter", v, err)
		}
	}
}
