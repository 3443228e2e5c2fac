package lead

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/orch-dev/orch/config"
	"github.com/orch-dev/orch/event"
	"github.com/orch-dev/orch/fleet"
	"github.com/orch-dev/orch/internal/runner"
	"github.com/orch-dev/orch/internal/runner/fake"
	"github.com/orch-dev/orch/internal/state"
	"github.com/orch-dev/orch/tmux"
)

// msg is a delivery of the lead's consumer that records how it was
// settled.
type msg struct {
	jetstream.Msg
	acks, naks int
	subject    string
}

func (m *msg) Subject() string { return m.subject }

func (m *msg) DoubleAck(context.Context) error  { m.acks++; return nil }
func (m *msg) Ack() error                       { m.acks++; return nil }
func (m *msg) NakWithDelay(time.Duration) error { m.naks++; return nil }
func (m *msg) Metadata() (*jetstream.MsgMetadata, error) {
	return &jetstream.MsgMetadata{NumDelivered: 1}, nil
}
func (m *msg) Headers() nats.Header { return nil }

// orderly is the strict fake with a check run before each call.
type orderly struct {
	*fake.Runner
	before func(runner.Cmd)
}

func (o orderly) Run(ctx context.Context, c runner.Cmd) ([]byte, error) {
	o.before(c)
	return o.Runner.Run(ctx, c)
}

// paneLoop is testLoop with a tmux fleet whose tmux is the strict fake
// tf, w2 dead, plan q queued behind p, and callbacks recorded in *sent.
func paneLoop(t *testing.T, before func(runner.Cmd)) (l *Loop, gf, tf *fake.Runner, sent *[]*event.Callback) {
	t.Helper()
	l, gf = testLoop(t)
	tf = fake.New(t)
	if before == nil {
		before = func(runner.Cmd) {}
	}
	withTmuxFleet(t, l, orderly{tf, before})
	l.st.Worker("w2").State = state.WorkerDead
	l.st.Plans["q"] = &state.Run{Name: "q", State: state.PlanQueued, Queued: testNow}
	writeFile(t, l.cfg.Root, "plans/q/PLAN.md", "# q\n\nnext\n")
	writeFile(t, l.cfg.Root, "plans/p/RESULT.md", "# Result\nok\n")
	sent = new([]*event.Callback)
	l.publish = func(cb *event.Callback) error { *sent = append(*sent, cb); return nil }
	return l, gf, tf, sent
}

func expectTyped(tf *fake.Runner, pane, worker, line string) {
	tf.Expect("tmux", []string{"-u", "-L", "t", "display-message", "-p", "-t", pane, "#{pane_id}\t#{" + tmux.WorkerOption + "}\t#{pane_dead}"}, pane+"\t"+worker+"\t0\n", nil).
		Expect("tmux", []string{"-u", "-L", "t", "send-keys", "-t", pane, "-l", "--", line}, "", nil).
		Expect("tmux", []string{"-u", "-L", "t", "send-keys", "-t", pane, "Enter"}, "", nil)
}

// A done whose worker gets the next plan: the harvest and the dispatch are
// recorded with one save, the event is acknowledged after it, and the line
// is typed after that.
func TestHarvestAndDispatchOneSave(t *testing.T) {
	m := &msg{}
	var l *Loop
	typed := 0
	l, gf, tf, sent := paneLoop(t, func(c runner.Cmd) {
		if len(c.Args) < 4 || c.Args[3] != "send-keys" {
			return
		}
		// Typing comes after the save that records the dispatch, and after the ack.
		typed++
		saved, err := state.Load(l.orchDir)
		if err != nil || saved.Plans["q"].State != state.PlanDispatched || saved.Handled == nil || m.acks != 1 {
			t.Errorf("typed before the dispatch was saved and the done acknowledged (acks %d, err %v)", m.acks, err)
		}
	})
	e := workerEvent(event.Done, "p", "w1", "ok")
	expectTrailers(gf, "")
	expectCommit(gf, "harvest p: ok\n\nWorker: w1\nOrch-Event: "+e.ID+"\n", "r1", "plans/p/RESULT.md")
	expectFirstLedger(gf, "ledger #1: p (ok)\n\nOrch-Ledger-Event: "+e.ID+"\n", "l1")
	line, err := fleet.DispatchLine("q", filepath.Join("/bin", "orch-notify"))
	if err != nil {
		t.Fatal(err)
	}
	expectTyped(tf, "%1", "w1", line)
	l.harvestDone(context.Background(), []inbound{{m: m, e: e}})
	if typed != 2 {
		t.Errorf("%d send-keys, want the line and its Enter", typed)
	}
	gf.CheckForMissingCalls()
	tf.CheckForMissingCalls()
	if l.saves != 1 {
		t.Errorf("%d state saves for one harvest and the dispatch it freed, want 1", l.saves)
	}
	if m.acks != 1 || m.naks != 0 || len(*sent) != 1 || (*sent)[0].Line != "WORKER-DONE p: ok" {
		t.Errorf("acks %d naks %d callbacks %+v", m.acks, m.naks, *sent)
	}
	saved, err := state.Load(l.orchDir)
	if err != nil {
		t.Fatal(err)
	}
	if p, q := saved.Plans["p"], saved.Plans["q"]; p.State != state.PlanDone || q.State != state.PlanDispatched || q.Worker != "w1" || q.Attempts != 1 {
		t.Errorf("saved p %+v, q %+v", p, q)
	}
}

// A save that fails after the callback went out: the harvest stays in
// memory (the lead was told), the dispatch is taken back and nothing is
// typed, the event is not acknowledged; its redelivery saves and is
// acknowledged, and only then does q go out.
func TestHarvestSaveFails(t *testing.T) {
	l, gf, tf, sent := paneLoop(t, nil)
	e := workerEvent(event.Done, "p", "w1", "ok")
	expectTrailers(gf, "")
	expectCommit(gf, "harvest p: ok\n\nWorker: w1\nOrch-Event: "+e.ID+"\n", "r1", "plans/p/RESULT.md")
	expectFirstLedger(gf, "ledger #1: p (ok)\n\nOrch-Ledger-Event: "+e.ID+"\n", "l1")
	// Work an earlier event left to start once it is recorded.
	ran := 0
	l.after(func() { ran++ })
	// A directory where state.json goes: the rename over it fails.
	stateFile := filepath.Join(l.orchDir, "state.json")
	if err := os.MkdirAll(filepath.Join(stateFile, "x"), 0o700); err != nil {
		t.Fatal(err)
	}
	m := &msg{subject: event.Subject(event.DefaultPrefix, e)}
	l.prefix = event.DefaultPrefix
	in := inbound{m: m, e: e}
	l.harvestDone(context.Background(), []inbound{in})
	gf.CheckForMissingCalls()
	tf.CheckForMissingCalls() // nothing typed
	if m.acks != 0 || m.naks != 1 || len(*sent) != 1 {
		t.Errorf("acks %d naks %d callbacks %d", m.acks, m.naks, len(*sent))
	}
	if p, q, w := l.st.Plans["p"], l.st.Plans["q"], l.st.Worker("w1"); p.State != state.PlanDone || q.State != state.PlanQueued || q.Attempts != 0 || w.State != state.WorkerIdle {
		t.Errorf("in memory: p %+v, q %+v, w1 %+v", p, q, w)
	}
	if !l.unsaved {
		t.Error("a failed save is not remembered")
	}
	// Another event fails to take effect meanwhile (git cannot read its
	// log): what the first one left waiting is kept.
	g := workerEvent(event.Gated, "p", "", "passed")
	g.Attempt = 1
	l.st.Plans["p"].State, l.st.Plans["p"].Gates = state.PlanVerifying, true
	gf.Expect("git", []string{"log", "--ignore-missing", "-n", "200", "--format=%H%x00%(trailers:key=Orch-Event,valueonly,unfold)%x1e", "HEAD", "--"}, "", gitExit(128))
	if _, _, err := l.apply(context.Background(), g); err == nil {
		t.Fatal("gated took effect although git failed")
	}
	gf.CheckForMissingCalls()
	l.st.Plans["p"].State, l.st.Plans["p"].Gates = state.PlanDone, false
	l.runPending()
	if ran != 0 {
		t.Error("work started from an event whose save failed")
	}

	// The disk is fixed; the event comes again.
	if err := os.RemoveAll(stateFile); err != nil {
		t.Fatal(err)
	}
	line, err := fleet.DispatchLine("q", filepath.Join("/bin", "orch-notify"))
	if err != nil {
		t.Fatal(err)
	}
	expectTyped(tf, "%1", "w1", line)
	l.handleMsg(context.Background(), in)
	tf.CheckForMissingCalls()
	if ran != 1 {
		t.Errorf("the kept work ran %d times once the save succeeded, want 1", ran)
	}
	if m.acks != 1 || len(*sent) != 1 {
		t.Errorf("redelivery: acks %d, callbacks %d (the callback was out already)", m.acks, len(*sent))
	}
	saved, err := state.Load(l.orchDir)
	if err != nil {
		t.Fatal(err)
	}
	if h := saved.Handled[e.ID]; h == nil || saved.Plans["p"].State != state.PlanDone || saved.Plans["q"].State != state.PlanDispatched {
		t.Errorf("saved: handled %+v, p %+v, q %+v", h, saved.Plans["p"], saved.Plans["q"])
	}
}

// worktreeLoop is paneLoop in worktree isolation: w1 has its worktree.
func worktreeLoop(t *testing.T) (l *Loop, gf, tf *fake.Runner, wdir string) {
	t.Helper()
	l, gf, tf, _ = paneLoop(t, nil)
	l.conf.Isolation = config.Worktree
	fl, err := fleet.New(fleet.Config{Root: l.cfg.Root, OrchDir: l.orchDir, Repo: l.repo, Panes: true,
		Tmux: &tmux.Client{Socket: "t", Runner: tf}, Isolation: config.Worktree, BinDir: "/bin", Logger: l.log})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(fl.Close)
	l.fleet = fl
	wdir = fleet.WorktreeDir(l.cfg.Root, "w1")
	writeFile(t, wdir, ".git", "gitdir: elsewhere\n")
	return l, gf, tf, wdir
}

// expectPrepare is the git of readying wdir for plan q, a first attempt,
// on base "b0"; status says whether the leftovers are looked for first.
func expectPrepare(gf *fake.Runner, root, wdir string, status bool) {
	// Not a branch yet (asked before the worktree is touched): nobody
	// holds it, and it is made at the base.
	gf.In(root).Expect("git", []string{"rev-parse", "--verify", "-q", "refs/heads/orch/q^{commit}"}, "", gitExit(1))
	if status {
		gf.In(wdir).Expect("git", []string{"--no-optional-locks", "status", "--porcelain=v2", "--branch", "-z", "--untracked-files=normal", "--no-renames"}, "# branch.head orch/p\x00", nil)
	}
	gf.In(root).Expect("git", []string{"rev-parse", "--verify", "-q", "HEAD"}, "b0\n", nil)
	gf.In(wdir).Expect("git", []string{"rev-parse", "--verify", "-q", "refs/heads/orch/q^{commit}"}, "", gitExit(1)).
		Expect("git", []string{"switch", "-q", "-c", "orch/q", "b0"}, "", nil)
}

// A harvest in worktree isolation that frees its worker for the next plan:
// the worktree's status is read once (the harvest's), .worktreeinclude
// once, and no worktree list is asked for a branch that does not exist.
func TestHarvestAndDispatchWorktreeTidy(t *testing.T) {
	l, gf, tf, wdir := worktreeLoop(t)
	root := l.cfg.Root
	e := workerEvent(event.Done, "p", "w1", "ok")
	gf.In(root).Expect("git", []string{"show", "HEAD:" + fleet.IncludeFile}, "", gitExit(128))
	gf.In(wdir).Expect("git", []string{"--no-optional-locks", "status", "--porcelain=v2", "--branch", "-z", "--untracked-files=normal", "--no-renames"}, "# branch.oid b0\x00# branch.head orch/p\x00", nil)
	gf.In(root)
	expectTrailers(gf, "")
	expectCommit(gf, "harvest p: ok\n\nWorker: w1\nOrch-Event: "+e.ID+"\n", "r1", "plans/p/RESULT.md")
	expectFirstLedger(gf, "ledger #1: p (ok)\n\nOrch-Ledger-Event: "+e.ID+"\n", "l1")
	expectPrepare(gf, root, wdir, false)
	line, err := fleet.DispatchLine("q", filepath.Join("/bin", "orch-notify"))
	if err != nil {
		t.Fatal(err)
	}
	expectTyped(tf, "%1", "w1", line)
	l.harvestDone(context.Background(), []inbound{{m: &msg{}, e: e}})
	gf.CheckForMissingCalls()
	tf.CheckForMissingCalls()
	if q := l.st.Plans["q"]; q.State != state.PlanDispatched || q.Base != "b0" {
		t.Errorf("q %+v", q)
	}
	if _, err := os.Stat(filepath.Join(wdir, "plans", "q", "PLAN.md")); err != nil {
		t.Errorf("plan folder not brought over: %v", err)
	}
}

// A worker freed in an earlier turn gets its next plan in a later one:
// what it may have left since is looked for first.
func TestDispatchWorktreeLaterTurn(t *testing.T) {
	l, gf, tf, wdir := worktreeLoop(t)
	root := l.cfg.Root
	l.turn.tidy = map[string]bool{"w1": true} // from a turn before this one
	l.turn = turn{}                           // what Run does at each turn
	p := l.st.Plans["p"]
	p.State, p.Worker = state.PlanDone, ""
	w := l.st.Worker("w1")
	w.State, w.Plan = state.WorkerIdle, ""
	gf.In(root).Expect("git", []string{"show", "HEAD:" + fleet.IncludeFile}, "", gitExit(128))
	expectPrepare(gf, root, wdir, true)
	line, err := fleet.DispatchLine("q", filepath.Join("/bin", "orch-notify"))
	if err != nil {
		t.Fatal(err)
	}
	expectTyped(tf, "%1", "w1", line)
	l.schedule(context.Background())
	gf.CheckForMissingCalls()
	tf.CheckForMissingCalls()
}
