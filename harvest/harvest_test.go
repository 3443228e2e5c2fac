package harvest

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/orch-dev/orch/event"
	"github.com/orch-dev/orch/git"
	"github.com/orch-dev/orch/internal/orchdir"
	"github.com/orch-dev/orch/internal/runner"
	"github.com/orch-dev/orch/internal/runner/fake"
	"github.com/orch-dev/orch/internal/state"
	"github.com/orch-dev/orch/ledger"
	"github.com/orch-dev/orch/plans"
)

// Unit tests: the git processes a harvest runs, where, and with what,
// checked by the strict fake; the files it writes are real, in a temporary
// folder.

func exit(code int) error { return &runner.Error{ExitCode: code, Err: errors.New("exit")} }

var ident = []string{"config", "--get-regexp", `^user\.(name|email)$`}

func trailers(key string) []string {
	return []string{"log", "--ignore-missing", "-n", "200", "--format=%H%x00%(trailers:key=" + key + ",valueonly,unfold)%x1e", "HEAD", "--"}
}

// setup is a repo root with .orch/ and, for each plan named, a RESULT.md.
func setup(t *testing.T, f *fake.Runner, results ...string) *Harvester {
	t.Helper()
	root := t.TempDir()
	if err := os.MkdirAll(orchdir.Of(root), 0o700); err != nil {
		t.Fatal(err)
	}
	for _, p := range results {
		writeResult(t, root, p)
	}
	f.In(root)
	return New(Config{Root: root, Repo: &git.Repo{Root: root, Runner: f}})
}

func writeResult(t *testing.T, dir, plan string) {
	t.Helper()
	path := filepath.Join(dir, filepath.FromSlash(plans.RelResultPath(plan)))
	os.MkdirAll(filepath.Dir(path), 0o755)
	if err := os.WriteFile(path, []byte("# Result of "+plan+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
}

func done(plan, worker, id string) event.Event {
	return event.Event{ID: id, Kind: event.Done, Plan: plan, Worker: worker, Status: "tests pass", Time: time.Date(2026, 12, 3, 10, 0, 0, 0, time.UTC)}
}

// One event: one commit of its RESULT.md, the message naming the worker
// and the event; no status check (the commit itself says if nothing
// changed).
func TestResultsOne(t *testing.T) {
	f := fake.New(t)
	h := setup(t, f, "a")
	msg := "harvest a: tests pass\n\nWorker: w1\nOrch-Event: e1\n"
	f.Expect("git", trailers(TrailerEvent), "", nil).
		Expect("git", []string{"add", "--", "plans/a/RESULT.md"}, "", nil).
		Expect("git", []string{"diff", "--cached", "--quiet", "--", "plans/a/RESULT.md"}, "", exit(1)).
		Expect("git", ident, "user.name me\nuser.email me@x\n", nil).
		Expect("git", []string{"commit", "-q", "--only", "-m", msg, "--", "plans/a/RESULT.md"}, "", nil).
		Expect("git", []string{"rev-parse", "--verify", "-q", "HEAD"}, "c0ffee\n", nil)
	shas, err := h.Results(context.Background(), []event.Event{done("a", "w1", "e1")})
	if err != nil {
		t.Fatal(err)
	}
	if shas["e1"] != "c0ffee" {
		t.Errorf("shas = %v", shas)
	}
}

// A batch: events already committed (a crash after the commit) are found
// by their trailer, an unchanged RESULT.md (the worker committed it) by its
// last commit, and the rest go into one commit naming each event.
func TestResultsBatch(t *testing.T) {
	f := fake.New(t)
	h := setup(t, f, "a", "b", "c", "d")
	msg := "harvest 2 plans: a, c\n\nOrch-Event: e1\nOrch-Event: e3\n"
	f.Expect("git", trailers(TrailerEvent), "old\x00e4\n\x1e", nil).
		Expect("git", []string{"status", "--porcelain=v1", "-z", "--untracked-files=all", "--", "plans/a/RESULT.md", "plans/b/RESULT.md", "plans/c/RESULT.md"},
			"?? plans/a/RESULT.md\x00 M plans/c/RESULT.md\x00", nil).
		Expect("git", []string{"log", "--ignore-missing", "--format=%H%x00%ct%x00%s%x1e", "-n", "1", "HEAD", "--", "plans/b/RESULT.md"},
			"bbb\x001764756000\x00b: my result\x1e", nil).
		Expect("git", []string{"add", "--", "plans/a/RESULT.md", "plans/c/RESULT.md"}, "", nil).
		Expect("git", []string{"diff", "--cached", "--quiet", "--", "plans/a/RESULT.md", "plans/c/RESULT.md"}, "", exit(1)).
		Expect("git", ident, "", exit(1)).
		Expect("git", []string{"-c", "user.name=orch", "-c", "user.email=orch@localhost", "commit", "-q", "--only", "-m", msg, "--", "plans/a/RESULT.md", "plans/c/RESULT.md"}, "", nil).
		Expect("git", []string{"rev-parse", "--verify", "-q", "HEAD"}, "new\n", nil)
	shas, err := h.Results(context.Background(), []event.Event{done("a", "w1", "e1"), done("b", "w2", "e2"), done("c", "w3", "e3"), done("d", "w4", "e4")})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"e1": "new", "e2": "bbb", "e3": "new", "e4": "old"}
	for id, sha := range want {
		if shas[id] != sha {
			t.Errorf("shas[%s] = %q, want %q (all: %v)", id, shas[id], sha, shas)
		}
	}
}

// In worktree isolation the worker's work is committed on the plan's
// branch, in its worktree (not the root), and RESULT.md is copied into
// the repo; a worktree on another branch is left alone.
func TestCollectWorktree(t *testing.T) {
	f := fake.New(t)
	h := setup(t, f)
	wt := filepath.Join(h.cfg.Root, ".orch", "worktrees", "w1")
	writeResult(t, wt, "a")
	msg := "a: tests pass\n\nWorker: w1\nOrch-Event: e1\n"
	f.In(wt).
		Expect("git", []string{"--no-optional-locks", "status", "--porcelain=v2", "--branch", "-z", "--untracked-files=normal", "--no-renames"}, "# branch.oid 1\x00# branch.head orch/a\x00? plans/a/RESULT.md\x00", nil).
		Expect("git", []string{"add", "-A", "--", "."}, "", nil).
		Expect("git", []string{"reset", "-q", "--", ":(literal).env"}, "", nil).
		Expect("git", []string{"diff", "--cached", "--quiet"}, "", exit(1)).
		Expect("git", ident, "user.name me\nuser.email me@x\n", nil).
		Expect("git", []string{"commit", "-q", "--no-verify", "-m", msg}, "", nil).
		Expect("git", []string{"rev-parse", "--verify", "-q", "HEAD"}, "w1sha\n", nil).
		// The second plan of the same worktree does not ask for the
		// (configured) identity again.
		Expect("git", []string{"--no-optional-locks", "status", "--porcelain=v2", "--branch", "-z", "--untracked-files=normal", "--no-renames"}, "# branch.oid 1\x00# branch.head orch/b\x00? plans/b/RESULT.md\x00", nil).
		Expect("git", []string{"add", "-A", "--", "."}, "", nil).
		Expect("git", []string{"diff", "--cached", "--quiet"}, "", exit(1)).
		Expect("git", []string{"commit", "-q", "--no-verify", "-m", "b: tests pass\n\nWorker: w1\nOrch-Event: e2\n"}, "", nil).
		Expect("git", []string{"rev-parse", "--verify", "-q", "HEAD"}, "w1sha2\n", nil).
		Expect("git", []string{"--no-optional-locks", "status", "--porcelain=v2", "--branch", "-z", "--untracked-files=normal", "--no-renames"}, "# branch.oid 1\x00# branch.head orch/other\x00", nil).
		// A worker that left nothing to commit: nothing more runs.
		Expect("git", []string{"--no-optional-locks", "status", "--porcelain=v2", "--branch", "-z", "--untracked-files=normal", "--no-renames"}, "# branch.oid 1\x00# branch.head orch/d\x00", nil)
	c, err := h.Collect(context.Background(), Item{Event: done("a", "w1", "e1"), Dir: wt}, []string{".env"})
	if err != nil || c.Problem != "" {
		t.Fatalf("collect: %+v, %v", c, err)
	}
	got, err := os.ReadFile(filepath.Join(h.cfg.Root, "plans", "a", "RESULT.md"))
	if err != nil || string(got) != "# Result of a\n" || string(c.Result) != string(got) {
		t.Errorf("RESULT.md in the repo = %q (%v), collected %q", got, err, c.Result)
	}
	writeResult(t, wt, "b")
	if _, err := h.Collect(context.Background(), Item{Event: done("b", "w1", "e2"), Dir: wt}, nil); err != nil {
		t.Fatal(err)
	}
	// A worktree on another branch: nothing committed; no RESULT.md of c
	// anywhere is a problem, not an error.
	c, err = h.Collect(context.Background(), Item{Event: done("c", "w1", "e3"), Dir: wt}, nil)
	if err != nil || !strings.Contains(c.Problem, "plans/c/RESULT.md is missing") {
		t.Errorf("collect c: %+v, %v", c, err)
	}
	writeResult(t, wt, "d")
	if c, err := h.Collect(context.Background(), Item{Event: done("d", "w1", "e4"), Dir: wt}, nil); err != nil || c.Problem != "" {
		t.Errorf("collect d: %+v, %v", c, err)
	}
}

// In shared isolation nothing runs: the repo's RESULT.md is read.
func TestCollectShared(t *testing.T) {
	f := fake.New(t)
	h := setup(t, f, "a")
	c, err := h.Collect(context.Background(), Item{Event: done("a", "w1", "e1"), Dir: h.cfg.Root}, nil)
	if err != nil || c.Problem != "" || !strings.Contains(string(c.Result), "Result of a") {
		t.Errorf("collect: %+v, %v", c, err)
	}
}

// The ledger: one append and one commit for the batch; the same events
// again add nothing and commit nothing (a redelivery after a crash).
func TestLedger(t *testing.T) {
	f := fake.New(t)
	h := setup(t, f)
	a := &state.Run{Name: "a", Worker: "w1", Status: "ok", Result: "sa", DoneEvent: "e1", DoneTime: time.Date(2026, 12, 3, 10, 0, 0, 0, time.UTC)}
	b := &state.Run{Name: "b", Worker: "w2", Status: "ok", Result: "sb", DoneEvent: "e2", DoneTime: time.Date(2026, 12, 3, 10, 0, 1, 0, time.UTC)}
	entries := []ledger.Entry{Entry(a, &state.Def{}), Entry(b, &state.Def{})}
	// No LEDGER.jsonl in HEAD yet: asked once; the second batch finds the
	// ledger still starts with what the first committed, and asks nothing.
	f.Expect("git", []string{"show", "HEAD:" + ledger.File}, "", exit(128)).
		Expect("git", []string{"ls-tree", "--name-only", "HEAD", "--", ledger.File}, "", nil).
		Expect("git", []string{"add", "--", ledger.File}, "", nil).
		Expect("git", []string{"diff", "--cached", "--quiet", "--", ledger.File}, "", exit(1)).
		Expect("git", ident, "", exit(1)).
		Expect("git", []string{"-c", "user.name=orch", "-c", "user.email=orch@localhost", "commit", "-q", "--only", "-m",
			"ledger: 2 entries\n\nOrch-Ledger-Event: e1\nOrch-Ledger-Event: e2\n", "--", ledger.File}, "", nil).
		Expect("git", []string{"rev-parse", "--verify", "-q", "HEAD"}, "l1\n", nil).
		Expect("git", []string{"add", "--", ledger.File}, "", nil).
		Expect("git", []string{"diff", "--cached", "--quiet", "--", ledger.File}, "", nil)
	got, err := h.Ledger(context.Background(), entries)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[0].ID != 1 || got[1].ID != 2 || got[0].Commit != "sa" || got[1].Event != "e2" {
		t.Errorf("entries = %+v", got)
	}
	again, err := h.Ledger(context.Background(), []ledger.Entry{Entry(a, &state.Def{}), Entry(b, &state.Def{})})
	if err != nil || len(again) != 2 || again[0].ID != 1 || again[1].ID != 2 {
		t.Errorf("again = %+v, %v", again, err)
	}
}

// A hand edit of a committed ledger line is refused, with nothing written:
// orch's commit would sweep it in. Lines appended and not committed (orch's
// own, before a crash) are not an edit.
func TestLedgerRefusesAnEditedLine(t *testing.T) {
	f := fake.New(t)
	h := setup(t, f)
	committed := `{"type":"entry","id":1,"plan":"a","worker":"w1","status":"ok","commit":"sa","time":"2026-12-03T10:00:00Z","event":"e1"}` + "\n"
	edited := strings.Replace(committed, `"ok"`, `"great"`, 1)
	path := filepath.Join(h.cfg.Root, ledger.File)
	if err := os.WriteFile(path, []byte(edited), 0o644); err != nil {
		t.Fatal(err)
	}
	b := &state.Run{Name: "b", Worker: "w2", Status: "ok", Result: "sb", DoneEvent: "e2", DoneTime: time.Date(2026, 12, 3, 10, 0, 1, 0, time.UTC)}
	f.Expect("git", []string{"show", "HEAD:" + ledger.File}, committed, nil)
	_, err := h.Ledger(context.Background(), []ledger.Entry{Entry(b, &state.Def{})})
	if !errors.Is(err, ledger.ErrEdited) || !strings.Contains(err.Error(), "line 1 differs") || !strings.Contains(err.Error(), "git checkout -- LEDGER.jsonl") {
		t.Fatalf("ledger over an edited line: %v; want ErrEdited naming line 1 and the fix", err)
	}
	if data, _ := os.ReadFile(path); string(data) != edited {
		t.Errorf("the refused append wrote to the ledger:\n%s", data)
	}

	// The committed lines plus orch's own uncommitted append: taken.
	pending := committed + `{"type":"entry","id":2,"plan":"c","worker":"w1","status":"ok","commit":"sc","time":"2026-12-03T10:00:02Z","event":"e3"}` + "\n"
	if err := os.WriteFile(path, []byte(pending), 0o644); err != nil {
		t.Fatal(err)
	}
	f.Expect("git", []string{"show", "HEAD:" + ledger.File}, committed, nil).
		Expect("git", []string{"add", "--", ledger.File}, "", nil).
		Expect("git", []string{"diff", "--cached", "--quiet", "--", ledger.File}, "", exit(1)).
		Expect("git", ident, "", exit(1)).
		Expect("git", []string{"-c", "user.name=orch", "-c", "user.email=orch@localhost", "commit", "-q", "--only", "-m",
			"ledger #3: b (ok)\n\nOrch-Ledger-Event: e2\n", "--", ledger.File}, "", nil).
		Expect("git", []string{"rev-parse", "--verify", "-q", "HEAD"}, "l2\n", nil)
	got, err := h.Ledger(context.Background(), []ledger.Entry{Entry(b, &state.Def{})})
	if err != nil || len(got) != 1 || got[0].ID != 3 {
		t.Fatalf("ledger after orch's own pending append: %+v, %v; want entry #3", got, err)
	}
}

// Entry takes the bet from the plan's definition, and a bet with a metric
// command takes the lead loop's own measurements, whatever the worker wrote.
func TestEntry(t *testing.T) {
	base, at, target := 10.0, 7.0, 5.0
	p := &state.Run{Name: "a", Worker: "w1", Status: "faster", Result: "s", DoneEvent: "e", Baseline: &base, AtHarvest: &at}
	claimed := 99.0
	def := &state.Def{Bet: &plans.Bet{Metric: "ms", Baseline: &claimed, Target: &target, Direction: "down", MetricCmd: "./m"}}
	en := Entry(p, def)
	if en.Metric != "ms" || en.MetricCmd != "./m" || en.Baseline == nil || *en.Baseline != 10 || en.AtHarvest == nil || *en.AtHarvest != 7 || en.Target == nil || *en.Target != 5 {
		t.Errorf("entry = %+v", en)
	}
	if en := Entry(p, &state.Def{}); en.Metric != "" || en.Baseline != nil {
		t.Errorf("no bet: entry = %+v", en)
	}
}

// Message is the one commit message: subject, the worker for one event,
// a trailer per event.
func TestMessage(t *testing.T) {
	tests := []struct {
		subject string
		events  []event.Event
		want    string
	}{
		{"harvest a: ok", []event.Event{{ID: "e1", Worker: "w1"}}, "harvest a: ok\n\nWorker: w1\nOrch-Event: e1\n"},
		{"gates a: passed", []event.Event{{ID: "e1"}}, "gates a: passed\n\nOrch-Event: e1\n"},
		{"harvest 2 plans: a, b", []event.Event{{ID: "e1", Worker: "w1"}, {ID: "e2", Worker: "w2"}}, "harvest 2 plans: a, b\n\nOrch-Event: e1\nOrch-Event: e2\n"},
	}
	for _, tt := range tests {
		if got := Message(tt.subject, tt.events, TrailerEvent); got != tt.want {
			t.Errorf("Message(%q) = %q, want %q", tt.subject, got, tt.want)
		}
	}
	if got := SubjectLine(strings.Repeat("x", 80) + "\nmore"); len([]rune(got)) != 72 || !strings.HasSuffix(got, "...") {
		t.Errorf("SubjectLine = %q", got)
	}
}

// A RESULT.md in the worktree that is there but not usable is reported as
// what it is (too large, a symlink), never as missing.
func TestCollectWorktreeUnusableResult(t *testing.T) {
	f := fake.New(t)
	h := setup(t, f)
	wt := filepath.Join(h.cfg.Root, ".orch", "worktrees", "w1")
	status := []string{"--no-optional-locks", "status", "--porcelain=v2", "--branch", "-z", "--untracked-files=normal", "--no-renames"}
	big := filepath.Join(wt, "plans", "a", "RESULT.md")
	if err := os.MkdirAll(filepath.Dir(big), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(big, make([]byte, MaxResult+1), 0o644); err != nil {
		t.Fatal(err)
	}
	f.In(wt).Expect("git", status, "# branch.oid 1\x00# branch.head orch/other\x00", nil)
	c, err := h.Collect(context.Background(), Item{Event: done("a", "w1", "e1"), Dir: wt}, nil)
	if err != nil || !strings.Contains(c.Problem, "plans/a/RESULT.md is too large") {
		t.Errorf("a RESULT.md over the limit: %+v, %v; want it reported too large", c, err)
	}
	link := filepath.Join(wt, "plans", "b", "RESULT.md")
	if err := os.MkdirAll(filepath.Dir(link), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("/etc/hostname", link); err != nil {
		t.Fatal(err)
	}
	f.In(wt).Expect("git", status, "# branch.oid 1\x00# branch.head orch/other\x00", nil)
	c, err = h.Collect(context.Background(), Item{Event: done("b", "w1", "e2"), Dir: wt}, nil)
	if err != nil || !strings.Contains(c.Problem, "plans/b/RESULT.md is a symlink") {
		t.Errorf("a symlinked RESULT.md: %+v, %v; want it reported a symlink", c, err)
	}
}
