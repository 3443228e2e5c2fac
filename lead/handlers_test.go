package lead

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/orch-dev/orch/config"
	"github.com/orch-dev/orch/event"
	"github.com/orch-dev/orch/gates"
	"github.com/orch-dev/orch/git"
	"github.com/orch-dev/orch/harvest"
	"github.com/orch-dev/orch/internal/orchdir"
	"github.com/orch-dev/orch/internal/runner"
	"github.com/orch-dev/orch/internal/runner/fake"
	"github.com/orch-dev/orch/internal/state"
	"github.com/orch-dev/orch/ledger"
	"github.com/orch-dev/orch/plans"
	"github.com/orch-dev/orch/verify"
)

// Unit tests of the loop's handlers: each event's effect on the record,
// its callback, and every git process it runs (program, arguments and
// directory), checked by the strict fake. Files are real, in a temporary
// repo root; nothing else runs.

var (
	testNow  = time.Date(2026, 12, 3, 12, 0, 0, 0, time.UTC)
	identity = []string{"config", "--get-regexp", `^user\.(name|email)$`}
)

func gitExit(code int) error { return &runner.Error{ExitCode: code, Err: errors.New("exit")} }

// testLoop is a loop on a temporary root in shared isolation whose git is
// the strict fake, with plan p dispatched to w1 and running.
func testLoop(t *testing.T) (*Loop, *fake.Runner) {
	t.Helper()
	root := t.TempDir()
	if err := os.MkdirAll(orchdir.Of(root), 0o700); err != nil {
		t.Fatal(err)
	}
	f := fake.New(t).In(root)
	repo := &git.Repo{Root: root, Runner: f}
	l := &Loop{
		cfg:     Config{Root: root, Now: func() time.Time { return testNow }, Logger: slog.New(slog.DiscardHandler)},
		conf:    &config.Config{Isolation: config.Shared},
		orchDir: orchdir.Of(root),
		log:     slog.New(slog.DiscardHandler),
		repo:    repo,
		st:      state.New(),
	}
	l.harvester = harvest.New(harvest.Config{Root: root, Repo: repo})
	l.rounds = &verify.Rounds{Root: root, Repo: repo, Harvester: l.harvester, Log: l.log, Now: l.cfg.Now}
	l.st.Workers = []*state.Worker{{ID: "w1", State: state.WorkerBusy, Plan: "p", Pane: "%1"}, {ID: "w2", State: state.WorkerIdle, Pane: "%2"}}
	l.st.Plans["p"] = &state.Run{Name: "p", State: state.PlanRunning, Worker: "w1", Attempts: 1, AttemptSince: testNow.Add(-time.Hour), Def: &state.Def{}}
	return l, f
}

func writeFile(t *testing.T, root, rel, body string) {
	t.Helper()
	path := filepath.Join(root, filepath.FromSlash(rel))
	os.MkdirAll(filepath.Dir(path), 0o755)
	if err := os.WriteFile(path, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
}

func workerEvent(kind event.Kind, plan, worker, status string) event.Event {
	e := event.New(kind, plan, status, worker, "h")
	e.Time = testNow.Add(-time.Minute)
	return e
}

func inboundOf(e event.Event) inbound { return inbound{e: e} }

// expectCommit adds the git processes of one git.Repo.Commit of paths
// with msg, answering sha (no identity configured: the fallback's -c).
func expectCommit(f *fake.Runner, msg, sha string, paths ...string) {
	f.Expect("git", append([]string{"add", "--"}, paths...), "", nil).
		Expect("git", append([]string{"diff", "--cached", "--quiet", "--"}, paths...), "", gitExit(1)).
		Expect("git", identity, "", gitExit(1)).
		Expect("git", append([]string{"-c", "user.name=orch", "-c", "user.email=orch@localhost", "commit", "-q", "--only", "-m", msg, "--"}, paths...), "", nil).
		Expect("git", []string{"rev-parse", "--verify", "-q", "HEAD"}, sha+"\n", nil)
}

// expectFirstLedger is the first ledger commit of a loop: git is asked
// what HEAD holds of LEDGER.jsonl (nothing yet) before the append.
func expectFirstLedger(f *fake.Runner, msg, sha string) {
	f.Expect("git", []string{"show", "HEAD:" + ledger.File}, "", gitExit(128)).
		Expect("git", []string{"ls-tree", "--name-only", "HEAD", "--", ledger.File}, "", nil)
	expectCommit(f, msg, sha, ledger.File)
}

func expectTrailers(f *fake.Runner, out string) {
	f.Expect("git", []string{"log", "--ignore-missing", "-n", "200", "--format=%H%x00%(trailers:key=Orch-Event,valueonly,unfold)%x1e", "HEAD", "--"}, out, nil)
}

// done: RESULT.md committed, a ledger entry committed, the plan done, its
// worker idle, the lead told WORKER-DONE.
func TestHandleDone(t *testing.T) {
	l, f := testLoop(t)
	writeFile(t, l.cfg.Root, "plans/p/RESULT.md", "# Result\nok\n")
	e := workerEvent(event.Done, "p", "w1", "tests pass")
	expectTrailers(f, "")
	expectCommit(f, "harvest p: tests pass\n\nWorker: w1\nOrch-Event: "+e.ID+"\n", "r1", "plans/p/RESULT.md")
	expectFirstLedger(f, "ledger #1: p (tests pass)\n\nOrch-Ledger-Event: "+e.ID+"\n", "l1")
	hs, err := l.harvestAll(context.Background(), []inbound{inboundOf(e)})
	if err != nil {
		t.Fatal(err)
	}
	p, w := l.st.Plans["p"], l.st.Worker("w1")
	if p.State != state.PlanDone || p.Result != "r1" || p.Ledger != 1 || p.DoneEvent != e.ID || w.State != state.WorkerIdle || w.Plan != "" {
		t.Errorf("plan %+v, worker %+v", p, w)
	}
	if len(hs) != 1 || hs[0].cb == nil || hs[0].cb.Line != "WORKER-DONE p: tests pass" || hs[0].note.Text != "harvested r1" {
		t.Errorf("harvested %+v", hs[0])
	}
}

// A batch: one RESULT commit and one ledger commit for both plans.
func TestHandleDoneBatch(t *testing.T) {
	l, f := testLoop(t)
	l.st.Worker("w2").State, l.st.Worker("w2").Plan = state.WorkerBusy, "q"
	l.st.Plans["q"] = &state.Run{Name: "q", State: state.PlanDispatched, Worker: "w2", Attempts: 1, Def: &state.Def{}}
	writeFile(t, l.cfg.Root, "plans/p/RESULT.md", "p\n")
	writeFile(t, l.cfg.Root, "plans/q/RESULT.md", "q\n")
	ep, eq := workerEvent(event.Done, "p", "w1", "ok"), workerEvent(event.Done, "q", "w2", "ok")
	expectTrailers(f, "")
	f.Expect("git", []string{"status", "--porcelain=v1", "-z", "--untracked-files=all", "--", "plans/p/RESULT.md", "plans/q/RESULT.md"},
		"?? plans/p/RESULT.md\x00?? plans/q/RESULT.md\x00", nil)
	expectCommit(f, "harvest 2 plans: p, q\n\nOrch-Event: "+ep.ID+"\nOrch-Event: "+eq.ID+"\n", "r1", "plans/p/RESULT.md", "plans/q/RESULT.md")
	expectFirstLedger(f, "ledger: 2 entries\n\nOrch-Ledger-Event: "+ep.ID+"\nOrch-Ledger-Event: "+eq.ID+"\n", "l1")
	hs, err := l.harvestAll(context.Background(), []inbound{inboundOf(ep), inboundOf(eq)})
	if err != nil {
		t.Fatal(err)
	}
	for i, name := range []string{"p", "q"} {
		p := l.st.Plans[name]
		if p.State != state.PlanDone || p.Result != "r1" || p.Ledger != i+1 || hs[i].cb == nil {
			t.Errorf("%s: %+v", name, p)
		}
	}
	if l.st.Worker("w1").State != state.WorkerIdle || l.st.Worker("w2").State != state.WorkerIdle {
		t.Errorf("workers %+v %+v", l.st.Worker("w1"), l.st.Worker("w2"))
	}
}

// done without a RESULT.md: nothing committed, the plan failed naming
// the file, the worker free.
func TestHandleDoneNoResult(t *testing.T) {
	l, _ := testLoop(t)
	hs, err := l.harvestAll(context.Background(), []inbound{inboundOf(workerEvent(event.Done, "p", "w1", "ok"))})
	if err != nil {
		t.Fatal(err)
	}
	p := l.st.Plans["p"]
	if p.State != state.PlanFailed || !strings.Contains(p.Reason, "plans/p/RESULT.md is missing") || l.st.Worker("w1").State != state.WorkerIdle {
		t.Errorf("plan %+v", p)
	}
	if hs[0].cb == nil || hs[0].cb.Kind != event.CallbackFailed {
		t.Errorf("callback %+v", hs[0].cb)
	}
}

// done from a worker that does not hold the plan: refused and recorded,
// nothing run, nothing changed.
func TestHandleDoneForged(t *testing.T) {
	l, _ := testLoop(t)
	hs, err := l.harvestAll(context.Background(), []inbound{inboundOf(workerEvent(event.Done, "p", "w2", "ok"))})
	if err != nil {
		t.Fatal(err)
	}
	if hs[0].cb != nil || hs[0].note.Kind != state.Refused || !strings.HasPrefix(hs[0].note.Text, "refused: plan p is held by w1, not w2") || l.st.Plans["p"].State != state.PlanRunning {
		t.Errorf("harvested %+v, plan %+v", hs[0], l.st.Plans["p"])
	}
	if len(l.st.Rejected) != 1 || l.st.Rejected[0].Worker != "w2" {
		t.Errorf("rejected %+v", l.st.Rejected)
	}
}

// blocked: the plan blocked with the reason, the worker free, the lead
// told; a second blocked changes nothing.
func TestHandleBlocked(t *testing.T) {
	l, _ := testLoop(t)
	e := workerEvent(event.Blocked, "p", "w1", "needs a key")
	cb, _, err := l.apply(context.Background(), e)
	if err != nil {
		t.Fatal(err)
	}
	p := l.st.Plans["p"]
	if p.State != state.PlanBlocked || p.Reason != "needs a key" || l.st.Worker("w1").State != state.WorkerIdle || cb == nil || cb.Line != "WORKER-BLOCKED p: needs a key" {
		t.Errorf("plan %+v, callback %+v", p, cb)
	}
	if h := l.st.Handled[e.ID]; h == nil || h.Note != "blocked" {
		t.Errorf("handled %+v", h)
	}
	again := workerEvent(event.Blocked, "p", "w1", "again")
	l.st.Worker("w1").Plan = "p"
	if cb, _, err := l.apply(context.Background(), again); err != nil || cb != nil || l.st.Plans["p"].Reason != "needs a key" {
		t.Errorf("second blocked: %+v, %v, plan %+v", cb, err, l.st.Plans["p"])
	}
}

// gated: the gates' evidence committed next to RESULT.md; passed gates
// finish the plan with its ledger entry, failed ones fail it.
func TestHandleGated(t *testing.T) {
	for _, tt := range []struct {
		status string
		want   state.PlanState
		line   string
	}{
		{"passed", state.PlanDone, "WORKER-DONE p: ok"},
		{"gate 1 failed: go test ./...", state.PlanFailed, "WORKER-FAILED p: gate 1 failed: go test ./..."},
	} {
		t.Run(tt.status, func(t *testing.T) {
			l, f := testLoop(t)
			p := l.st.Plans["p"]
			p.State, p.Gates, p.Status, p.Result, p.DoneEvent = state.PlanVerifying, true, "ok", "r1", "d1"
			p.Def = &state.Def{Acceptance: []string{"go test ./..."}}
			writeFile(t, l.cfg.Root, "plans/p/"+gates.GatesFile, "# Gates\n")
			e := event.New(event.Gated, "p", tt.status, "", "h")
			e.Attempt = 1
			expectTrailers(f, "")
			expectCommit(f, "gates p: "+tt.status+"\n\nOrch-Event: "+e.ID+"\n", "g1", "plans/p/"+gates.GatesFile)
			if tt.want == state.PlanDone {
				expectFirstLedger(f, "ledger #1: p (ok)\n\nOrch-Ledger-Event: d1\n", "l1")
			}
			cb, _, err := l.apply(context.Background(), e)
			if err != nil {
				t.Fatal(err)
			}
			if p.State != tt.want || p.Gates || cb == nil || cb.Line != tt.line || l.st.Worker("w1").State != state.WorkerIdle {
				t.Errorf("plan %+v, callback %+v", p, cb)
			}
		})
	}
}

// verify: a done plan's claims, read from its harvest commit, go to a
// round-1 verification plan, written and committed, queued for anyone but
// the author.
func TestHandleVerify(t *testing.T) {
	l, f := testLoop(t)
	p := l.st.Plans["p"]
	p.State, p.Result, p.DoneEvent = state.PlanDone, "r1", "d1"
	l.st.Worker("w1").State, l.st.Worker("w1").Plan = state.WorkerIdle, ""
	e := event.New(event.Verify, "p", "1", "", "h")
	f.Expect("git", []string{"show", "r1:plans/p/RESULT.md"}, "# Result\n\n## Claims\n1. it builds\n2. tests pass\n", nil)
	expectCommit(f, "verify p: round 1 of 1\n", "v1", "plans/p.v1r1/PLAN.md")
	cb, _, err := l.apply(context.Background(), e)
	if err != nil {
		t.Fatal(err)
	}
	if cb != nil || p.State != state.PlanVerifying || p.Verification == nil || len(p.Verification.Claims) != 2 || p.Verification.Author != "w1" {
		t.Fatalf("plan %+v, verification %+v, callback %+v", p, p.Verification, cb)
	}
	vp := l.st.Plans["p.v1r1"]
	if vp == nil || vp.State != state.PlanQueued || vp.VerifyOf != "p" || len(vp.Exclude) != 1 || vp.Exclude[0] != "w1" {
		t.Fatalf("round plan %+v", vp)
	}
	def, err := plans.Load(l.cfg.Root, "p.v1r1")
	if err != nil || !strings.Contains(def.Body, "1. it builds") {
		t.Errorf("round plan on disk: %v %+v", err, def)
	}
}

// A queued plan's definition is parsed once, and parsed again when its
// PLAN.md changes: an edit counts at the next pass, as orch status shows.
func TestPlanDefFollowsEdits(t *testing.T) {
	l, _ := testLoop(t)
	if err := plans.Write(l.cfg.Root, &plans.Plan{Name: "a", DependsOn: []string{"b"}, Body: "x\n"}); err != nil {
		t.Fatal(err)
	}
	d, err := l.planDef("a")
	if err != nil || len(d.DependsOn) != 1 {
		t.Fatalf("first: %+v, %v", d, err)
	}
	if again, _ := l.planDef("a"); again != d {
		t.Error("an unchanged PLAN.md was parsed again")
	}
	if err := os.WriteFile(plans.PlanPath(l.cfg.Root, "a"), plans.Render(&plans.Plan{Name: "a", Body: "x, now without the dependency\n"}), 0o644); err != nil {
		t.Fatal(err)
	}
	if d, err := l.planDef("a"); err != nil || len(d.DependsOn) != 0 {
		t.Errorf("after the edit: %+v, %v", d, err)
	}
}
