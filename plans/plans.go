// Package plans reads and writes plan folders: plans/<name>/PLAN.md, the task
// packet a worker executes, and plans/<name>/RESULT.md, the report it writes
// back.
//
// A PLAN.md is markdown with optional YAML front matter for the machine
// (depends_on, acceptance, verify, priority, bet). Parse and Render convert
// between bytes and Plan; Load, LoadAll, ReadResult and Write do the file
// work. Plan folders arrive from workers and branches, so every name is
// checked with ValidateName before it is joined into a path, and no symlink
// under plans/ is ever followed.
package plans

import (
	"maps"
	"math"

	"github.com/orch-dev/orch/event"

	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"
)

// Dir is the folder under the repository root that holds the plan folders.
const Dir = "plans"

// MaxNameLen is the longest plan name accepted.
const MaxNameLen = 63

// MaxPlanSize bounds the size of a PLAN.md that Load reads.
const MaxPlanSize = 1 << 20

// Names of the files inside a plan folder.
const (
	PlanFile   = "PLAN.md"
	ResultFile = "RESULT.md"
)

// NamePattern is the shape of a plan name. ValidateName also refuses "..".
var NamePattern = regexp.MustCompile(`^[a-z0-9][a-z0-9._-]{0,62}$`)

// Bet is a plan's claim that its change moves a metric.
type Bet struct {
	Metric    string   `yaml:"metric,omitempty" json:"metric,omitempty"`
	Baseline  *float64 `yaml:"baseline,omitempty" json:"baseline,omitempty"`
	MetricCmd string   `yaml:"metric_cmd,omitempty" json:"metric_cmd,omitempty"`
	Direction string   `yaml:"direction,omitempty" json:"direction,omitempty"` // "lower" | "higher"
	Target    *float64 `yaml:"target,omitempty" json:"target,omitempty"`
	CheckBy   string   `yaml:"check_by,omitempty" json:"check_by,omitempty"` // YYYY-MM-DD
}

// Plan is a parsed PLAN.md.
type Plan struct {
	Name      string   `yaml:"-" json:"name"`
	DependsOn []string `yaml:"depends_on,omitempty" json:"depends_on,omitempty"`
	// DependsOnState is how far each dependency must have come before this
	// plan goes out: done (the default; verified and integrated count too),
	// verified (or integrated), or integrated (its code is on the base
	// branch, so this plan's branch starts from it).
	DependsOnState string   `yaml:"depends_on_state,omitempty" json:"depends_on_state,omitempty"`
	Acceptance     []string `yaml:"acceptance,omitempty" json:"acceptance,omitempty"`
	Verify         int      `yaml:"verify,omitempty" json:"verify,omitempty"` // rounds of verification: 0, 1 or 3
	Priority       int      `yaml:"priority,omitempty" json:"priority,omitempty"`
	Bet            *Bet     `yaml:"bet,omitempty" json:"bet,omitempty"`
	// Timeout bounds how long a worker may hold the plan, from its
	// dispatch: a Go duration ("45m", "1h30m"). Past it the lead loop
	// interrupts the agent and the plan is timed-out. Empty: orch.yaml's
	// plan_timeout, if any.
	Timeout string `yaml:"timeout,omitempty" json:"timeout,omitempty"`
	// Agent routes the plan to workers of these agent profiles (route.go);
	// VerifyWith picks its verifiers' agent: OtherAgent, or a profile.
	Agent      Agents `yaml:"agent,omitempty" json:"agent,omitempty"`
	VerifyWith string `yaml:"verify_with,omitempty" json:"verify_with,omitempty"`
	Body       string `yaml:"-" json:"body,omitempty"` // markdown after the front matter
}

// ValidateName reports whether name may be used as a plan name. The error
// wraps ErrBadName, quotes the name with %q (so control characters show
// escaped) and states the rule.
func ValidateName(name string) error { return event.CheckPlanName(name) }

// PlanPath is root/plans/<name>/PLAN.md.
func PlanPath(root, name string) string { return filepath.Join(root, Dir, name, PlanFile) }

// ResultPath is root/plans/<name>/RESULT.md.
func ResultPath(root, name string) string { return filepath.Join(root, Dir, name, ResultFile) }

// RelPlanPath is "plans/<name>/PLAN.md" in slash form, as git and the
// dispatch line name it.
func RelPlanPath(name string) string { return path.Join(Dir, name, PlanFile) }

// RelResultPath is "plans/<name>/RESULT.md" in slash form.
func RelResultPath(name string) string { return path.Join(Dir, name, ResultFile) }

// Parse parses the content of plans/<name>/PLAN.md. Front matter is optional:
// if the first line is "---", YAML runs until the next line "---". Unknown
// keys are refused. Errors wrap ErrFrontMatter and name the file line,
// counting the opening "---" as line 1.
func Parse(name string, data []byte) (*Plan, error) {
	if err := ValidateName(name); err != nil {
		return nil, err
	}
	rel := RelPlanPath(name)
	fm, body, ok, err := splitFrontMatter(data)
	if err != nil {
		return nil, fmt.Errorf("%s line 1: %w: %w", rel, ErrFrontMatter, err)
	}
	p := &Plan{Name: name, Body: string(body)}
	if !ok {
		return p, nil
	}
	dec := yaml.NewDecoder(bytes.NewReader(fm))
	dec.KnownFields(true)
	if err := dec.Decode(p); err != nil && !errors.Is(err, io.EOF) {
		return nil, yamlError(rel, err)
	}
	if fe := p.check(); fe != nil {
		var node yaml.Node
		// The decode above succeeded, so this one does too; the node is only
		// needed to point at the offending line.
		_ = yaml.Unmarshal(fm, &node)
		return nil, fmt.Errorf("%s line %d: %w: %s: %w", rel, lineOf(&node, fe), ErrFrontMatter, fe.field(), fe.err)
	}
	return p, nil
}

// splitFrontMatter splits data into the YAML between a first line "---" and
// the next line "---", and the body after it. ok is false when data has no
// front matter.
func splitFrontMatter(data []byte) (fm, body []byte, ok bool, err error) {
	first, _, found := bytes.Cut(data, []byte("\n"))
	if !isDelim(first) {
		return nil, data, false, nil
	}
	if !found {
		return nil, nil, false, errors.New(`opening "---" has no closing "---" line`)
	}
	start := len(first) + 1
	for pos := start; pos < len(data); {
		line, _, more := bytes.Cut(data[pos:], []byte("\n"))
		end := pos + len(line)
		if more {
			end++
		}
		if isDelim(line) {
			return data[start:pos], data[end:], true, nil
		}
		pos = end
	}
	return nil, nil, false, errors.New(`opening "---" has no closing "---" line`)
}

func isDelim(line []byte) bool {
	return string(bytes.TrimSuffix(line, []byte("\r"))) == "---"
}

var (
	yamlLineRE     = regexp.MustCompile(`(?s)^(?:yaml: )?line (\d+): (.*)$`)
	unknownFieldRE = regexp.MustCompile(`^field (\S+) not found in type \S+$`)
)

// yamlError turns a yaml.v3 error into one that names the PLAN.md line:
// yaml counts lines from the start of the YAML, which is file line 2.
var atLineRE = regexp.MustCompile(`at line [0-9]+`)

func yamlError(rel string, err error) error {
	var msgs []string
	var te *yaml.TypeError
	if errors.As(err, &te) {
		msgs = te.Errors
	} else {
		msgs = []string{err.Error()}
	}
	first := ""
	var more []string
	for i, m := range msgs {
		text := strings.TrimPrefix(m, "yaml: ")
		line := 0
		if sub := yamlLineRE.FindStringSubmatch(m); sub != nil {
			n, _ := strconv.Atoi(sub[1])
			line = n + 1 // the opening "---" is line 1 of the file
			text = sub[2]
			// yaml.v3 numbers scanner errors from 1 but parser errors that
			// carry a context (an unclosed collection) from 0.
			for _, p := range []string{"did not find expected ',' or", "did not find expected key", "did not find expected '-' indicator"} {
				if strings.HasPrefix(text, p) {
					line++
				}
			}
			// Line numbers inside the text ("already defined at line 2")
			// are relative to the YAML too.
			text = atLineRE.ReplaceAllStringFunc(text, func(m string) string {
				n, _ := strconv.Atoi(strings.TrimPrefix(m, "at line "))
				return "at line " + strconv.Itoa(n+1)
			})
		}
		if sub := unknownFieldRE.FindStringSubmatch(text); sub != nil {
			text = fmt.Sprintf("unknown key %q", sub[1])
		}
		if line > 0 {
			if i == 0 {
				first = fmt.Sprintf("%s line %d", rel, line)
				more = append(more, text)
			} else {
				more = append(more, fmt.Sprintf("line %d: %s", line, text))
			}
		} else {
			if i == 0 {
				first = rel
			}
			more = append(more, text)
		}
	}
	return fmt.Errorf("%s: %w: %s", first, ErrFrontMatter, strings.Join(more, "; "))
}

// fieldError is a front matter value that parsed but is not allowed.
type fieldError struct {
	path  []string // keys from the top mapping down
	index int      // element of a sequence, or -1
	err   error
}

func (fe *fieldError) field() string {
	s := strings.Join(fe.path, ".")
	if fe.index >= 0 {
		s += "[" + strconv.Itoa(fe.index) + "]"
	}
	return s
}

// check validates the front matter values.
func (p *Plan) check() *fieldError {
	for i, d := range p.DependsOn {
		if err := ValidateName(d); err != nil {
			return &fieldError{[]string{"depends_on"}, i, err}
		}
	}
	switch p.DependsOnState {
	case "", "done", "verified", "integrated":
	default:
		return &fieldError{[]string{"depends_on_state"}, -1, fmt.Errorf("got %q, want done, verified or integrated", p.DependsOnState)}
	}
	for i, a := range p.Acceptance {
		if strings.TrimSpace(a) == "" {
			return &fieldError{[]string{"acceptance"}, i, errors.New("command is empty")}
		}
	}
	if p.Verify != 0 && p.Verify != 1 && p.Verify != 3 {
		return &fieldError{[]string{"verify"}, -1, fmt.Errorf("got %d, want 0, 1 or 3 rounds", p.Verify)}
	}
	if p.Timeout != "" {
		if d, err := time.ParseDuration(p.Timeout); err != nil || d <= 0 {
			return &fieldError{[]string{"timeout"}, -1, fmt.Errorf("got %q, want a positive duration like 45m, 2h or 1h30m", p.Timeout)}
		}
	}
	if fe := p.checkRoute(); fe != nil {
		return fe
	}
	if b := p.Bet; b != nil {
		if b.Direction != "" && b.Direction != "lower" && b.Direction != "higher" {
			return &fieldError{[]string{"bet", "direction"}, -1, fmt.Errorf("got %q, want \"lower\" or \"higher\"", b.Direction)}
		}
		for _, f := range []struct {
			name string
			v    *float64
		}{{"baseline", b.Baseline}, {"target", b.Target}} {
			if f.v != nil && (math.IsNaN(*f.v) || math.IsInf(*f.v, 0)) {
				return &fieldError{[]string{"bet", f.name}, -1, fmt.Errorf("got %v, want a finite number", *f.v)}
			}
		}
		if b.CheckBy != "" {
			if _, err := time.Parse(time.DateOnly, b.CheckBy); err != nil {
				return &fieldError{[]string{"bet", "check_by"}, -1, fmt.Errorf("got %q, want a date YYYY-MM-DD", b.CheckBy)}
			}
		}
		// A bet is checked as a whole: one that names no metric, no
		// direction or no target could never be settled, and would leave
		// the ledger without it.
		switch {
		case strings.TrimSpace(b.Metric) == "":
			return &fieldError{[]string{"bet", "metric"}, -1, errors.New("missing: name what the bet moves (e.g. metric: p95_ms)")}
		case b.Direction == "":
			return &fieldError{[]string{"bet", "direction"}, -1, errors.New("missing: lower or higher (which way the metric should go)")}
		case b.Target == nil:
			return &fieldError{[]string{"bet", "target"}, -1, errors.New("missing: the number the metric should reach (e.g. target: 100)")}
		}
	}
	return nil
}

// lineOf finds the PLAN.md line of the value fe points at; failing that, the
// line of the nearest enclosing node.
func lineOf(doc *yaml.Node, fe *fieldError) int {
	n := doc
	if n.Kind == yaml.DocumentNode && len(n.Content) > 0 {
		n = n.Content[0]
	}
	for _, key := range fe.path {
		if n.Kind != yaml.MappingNode {
			break
		}
		var next *yaml.Node
		for i := 0; i+1 < len(n.Content); i += 2 {
			if n.Content[i].Value == key {
				next = n.Content[i+1]
			}
		}
		if next == nil {
			break
		}
		n = next
	}
	if fe.index >= 0 && n.Kind == yaml.SequenceNode && fe.index < len(n.Content) {
		n = n.Content[fe.index]
	}
	if n.Line == 0 {
		return 1
	}
	return n.Line + 1
}

// Validate checks the name and front matter values of p, as Parse does for a
// file. Errors about values wrap ErrFrontMatter.
func (p *Plan) Validate() error {
	if err := ValidateName(p.Name); err != nil {
		return err
	}
	if fe := p.check(); fe != nil {
		return fmt.Errorf("%w: %s: %w", ErrFrontMatter, fe.field(), fe.err)
	}
	return nil
}

func (p *Plan) hasFrontMatter() bool {
	return len(p.DependsOn) > 0 || p.DependsOnState != "" || len(p.Acceptance) > 0 || p.Verify != 0 || p.Priority != 0 || p.Bet != nil ||
		p.Timeout != "" || len(p.Agent) > 0 || p.VerifyWith != ""
}

// TimeLimit is the plan's timeout, 0 when it gives none (or one that
// does not parse: Parse and Validate refuse those).
func (p *Plan) TimeLimit() time.Duration {
	d, err := time.ParseDuration(p.Timeout)
	if err != nil || d <= 0 {
		return 0
	}
	return d
}

// Render returns the PLAN.md bytes for p: front matter when any of its
// fields is set, then Body. Parse(p.Name, Render(p)) gives p back (empty
// slices come back nil).
func Render(p *Plan) []byte {
	if p == nil {
		return nil
	}
	var b bytes.Buffer
	// A body whose first line is "---" would read as front matter, so it
	// gets an empty block in front of it.
	first, _, _ := strings.Cut(p.Body, "\n")
	if p.hasFrontMatter() || isDelim([]byte(first)) {
		b.WriteString("---\n")
		if p.hasFrontMatter() {
			enc := yaml.NewEncoder(&b)
			enc.SetIndent(2)
			// Strings, ints and floats always encode; there is no error to
			// report.
			_ = enc.Encode(p)
			_ = enc.Close()
		}
		b.WriteString("---\n")
	}
	b.WriteString(p.Body)
	return b.Bytes()
}

// Load reads and parses root/plans/<name>/PLAN.md. It checks the name first,
// refuses (ErrSymlink) when plans/, plans/<name>/ or PLAN.md is a symlink,
// returns ErrNoPlan when the file is missing and ErrTooLarge beyond
// MaxPlanSize.
func Load(root, name string) (*Plan, error) {
	if err := ValidateName(name); err != nil {
		return nil, fmt.Errorf("load plan: %w", err)
	}
	data, err := readFile(root, name, PlanFile, MaxPlanSize, ErrNoPlan)
	if err != nil {
		return nil, fmt.Errorf("load plan %s: %w", name, err)
	}
	p, err := Parse(name, data)
	if err != nil {
		return nil, fmt.Errorf("load plan %s: %w", name, err)
	}
	return p, nil
}

// LoadAll loads every plan folder under root/plans, by name. Files beside the
// folders are skipped; a folder with a bad name, or a symlink, is an error.
// A missing plans/ folder means no plans.
func LoadAll(root string) (map[string]*Plan, error) {
	all, bad, err := LoadEach(root)
	if err != nil {
		return nil, err
	}
	if len(bad) > 0 {
		return nil, bad[0]
	}
	return all, nil
}

// BadFolder is a folder of plans/ that is not a plan orch can use (a
// symlink, a bad name, a PLAN.md that does not parse), and why.
type BadFolder struct {
	Name string // the folder's name under plans/
	Err  error
}

func (b BadFolder) Error() string { return "load plans: " + b.Err.Error() }
func (b BadFolder) Unwrap() error { return b.Err }

// LoadEach loads every plan folder under root/plans that it can, and names
// each one it cannot, with the reason: one broken folder fails only
// itself. err is for plans/ itself (a symlink, unreadable).
func LoadEach(root string) (map[string]*Plan, []BadFolder, error) {
	dir := filepath.Join(root, Dir)
	fi, err := os.Lstat(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return map[string]*Plan{}, nil, nil
	}
	if err != nil {
		return nil, nil, fmt.Errorf("load plans: %w", err)
	}
	if fi.Mode()&fs.ModeSymlink != 0 {
		return nil, nil, fmt.Errorf("load plans: %s/ %w", Dir, ErrSymlink)
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, nil, fmt.Errorf("load plans: %w", err)
	}
	all := make(map[string]*Plan, len(entries))
	var bad []BadFolder
	for _, e := range entries {
		rel := path.Join(Dir, e.Name())
		if e.Type()&fs.ModeSymlink != 0 {
			bad = append(bad, BadFolder{e.Name(), fmt.Errorf("%s %w", rel, ErrSymlink)})
			continue
		}
		if !e.IsDir() {
			continue
		}
		if err := ValidateName(e.Name()); err != nil {
			bad = append(bad, BadFolder{e.Name(), fmt.Errorf("folder %s: %w", rel, err)})
			continue
		}
		p, err := Load(root, e.Name())
		if err != nil {
			bad = append(bad, BadFolder{e.Name(), err})
			continue
		}
		all[e.Name()] = p
	}
	return all, bad, nil
}

// CheckGraph checks that every depends_on names a plan in all
// (ErrUnknownDep) and that the dependencies have no cycle (ErrCycle, with the
// cycle spelled out). Plans are visited in name order, so the error is the
// same on every run.
func CheckGraph(all map[string]*Plan) error {
	names := slices.Sorted(maps.Keys(all))
	deps := func(n string) []string {
		if p := all[n]; p != nil {
			return p.DependsOn
		}
		return nil
	}
	for _, n := range names {
		for _, d := range deps(n) {
			if _, ok := all[d]; !ok {
				return fmt.Errorf("plan %q depends on %w %q", n, ErrUnknownDep, d)
			}
		}
	}
	const (
		unseen = iota
		onStack
		finished
	)
	state := make(map[string]int, len(all))
	var stack []string
	var visit func(n string) []string
	visit = func(n string) []string {
		state[n] = onStack
		stack = append(stack, n)
		for _, d := range deps(n) {
			switch state[d] {
			case onStack:
				i := slices.Index(stack, d)
				return append(slices.Clone(stack[i:]), d)
			case unseen:
				if c := visit(d); c != nil {
					return c
				}
			}
		}
		stack = stack[:len(stack)-1]
		state[n] = finished
		return nil
	}
	for _, n := range names {
		if state[n] == unseen {
			if c := visit(n); c != nil {
				return fmt.Errorf("%w: %s", ErrCycle, strings.Join(c, " -> "))
			}
		}
	}
	return nil
}

// ReadResult reads root/plans/<name>/RESULT.md, refusing symlinks as Load
// does. It returns ErrNoResult when the file is absent and ErrTooLarge when
// it holds more than limit bytes.
func ReadResult(root, name string, limit int64) ([]byte, error) {
	if err := ValidateName(name); err != nil {
		return nil, fmt.Errorf("read result: %w", err)
	}
	if limit <= 0 {
		return nil, fmt.Errorf("read result %s: size bound %d must be positive", name, limit)
	}
	data, err := readFile(root, name, ResultFile, limit, ErrNoResult)
	if err != nil {
		return nil, fmt.Errorf("read result %s: %w", name, err)
	}
	return data, nil
}

// readFile reads root/plans/<name>/<file> without following a symlink at
// plans/, plans/<name>/ or the file, and at most limit bytes. missing is the
// sentinel for an absent file.
func readFile(root, name, file string, limit int64, missing error) ([]byte, error) {
	rel := path.Join(Dir, name, file)
	for _, d := range []string{Dir, path.Join(Dir, name)} {
		fi, err := os.Lstat(filepath.Join(root, filepath.FromSlash(d)))
		if errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("%s: %w", rel, missing)
		}
		if err != nil {
			return nil, err
		}
		if fi.Mode()&fs.ModeSymlink != 0 {
			return nil, fmt.Errorf("%s %w", d, ErrSymlink)
		}
		if !fi.IsDir() {
			return nil, fmt.Errorf("%s is not a directory", d)
		}
	}
	full := filepath.Join(root, filepath.FromSlash(rel))
	fi, err := os.Lstat(full)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("%s: %w", rel, missing)
	}
	if err != nil {
		return nil, err
	}
	if fi.Mode()&fs.ModeSymlink != 0 {
		return nil, fmt.Errorf("%s %w", rel, ErrSymlink)
	}
	if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("%s is not a regular file", rel)
	}
	if fi.Size() > limit {
		return nil, tooLarge(rel, fi.Size(), limit)
	}
	f, err := os.Open(full)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	// The file could have been swapped for a symlink between Lstat and Open.
	if !os.SameFile(fi, st) {
		return nil, fmt.Errorf("%s changed while it was being opened", rel)
	}
	data, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", rel, err)
	}
	if int64(len(data)) > limit {
		return nil, tooLarge(rel, max(st.Size(), int64(len(data))), limit)
	}
	return data, nil
}

func tooLarge(rel string, size, bound int64) error {
	return fmt.Errorf("%s is %d bytes, more than the %d-byte bound: %w", rel, size, bound, ErrTooLarge)
}

// Write creates root/plans/<name>/ and writes PLAN.md = Render(p) atomically.
// It never overwrites: an existing PLAN.md is an error wrapping
// ErrPlanExists.
func Write(root string, p *Plan) error {
	if p == nil {
		return errors.New("write plan: no plan given")
	}
	if err := ValidateName(p.Name); err != nil {
		return fmt.Errorf("write plan: %w", err)
	}
	if err := p.Validate(); err != nil {
		return fmt.Errorf("write plan %s: %w", p.Name, err)
	}
	if err := writePlan(root, p); err != nil {
		return fmt.Errorf("write plan %s: %w", p.Name, err)
	}
	return nil
}

func writePlan(root string, p *Plan) error {
	for _, d := range []string{Dir, path.Join(Dir, p.Name)} {
		full := filepath.Join(root, filepath.FromSlash(d))
		fi, err := os.Lstat(full)
		if errors.Is(err, fs.ErrNotExist) {
			if err := os.Mkdir(full, 0o755); err != nil && !errors.Is(err, fs.ErrExist) {
				return err
			}
			fi, err = os.Lstat(full)
		}
		if err != nil {
			return err
		}
		if fi.Mode()&fs.ModeSymlink != 0 {
			return fmt.Errorf("%s %w", d, ErrSymlink)
		}
		if !fi.IsDir() {
			return fmt.Errorf("%s is not a directory", d)
		}
	}
	rel := RelPlanPath(p.Name)
	final := filepath.Join(root, filepath.FromSlash(rel))
	if _, err := os.Lstat(final); err == nil {
		return fmt.Errorf("%s %w", rel, ErrPlanExists)
	} else if !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	dir := filepath.Dir(final)
	tmp, err := os.CreateTemp(dir, ".PLAN.md.tmp-*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(Render(p)); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Chmod(0o644); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	// A hard link publishes the complete file and, unlike rename, fails if
	// PLAN.md appeared since the check above. Filesystems without hard links
	// fall back to rename.
	err = os.Link(tmp.Name(), final)
	if errors.Is(err, fs.ErrExist) {
		return fmt.Errorf("%s %w", rel, ErrPlanExists)
	}
	if err != nil {
		if err := os.Rename(tmp.Name(), final); err != nil {
			return err
		}
	}
	return nil
}

// Ready returns the dependencies of p that have not reached the state p
// asks for yet (see DependsOnState), in depends_on order; none means p may
// be dispatched. state gives a plan's state ("" if it has none).
func Ready(p *Plan, state func(name string) string) (missing []string) {
	if p == nil {
		return nil
	}
	for _, d := range p.DependsOn {
		if !Reached(state(d), p.DependsOnState) && !slices.Contains(missing, d) {
			missing = append(missing, d)
		}
	}
	return missing
}

// Reached says whether a dependency in state has come as far as want
// (a DependsOnState; empty means done).
func Reached(state, want string) bool {
	switch want {
	case "integrated":
		return state == "integrated"
	case "verified":
		return state == "verified" || state == "integrated"
	}
	return state == "done" || state == "verified" || state == "integrated"
}
