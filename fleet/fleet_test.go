package fleet

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/orch-dev/orch/config"
	"github.com/orch-dev/orch/internal/orchdir"
)

func testFleet(t *testing.T, cfg Config) *Fleet {
	t.Helper()
	root := t.TempDir()
	cfg.Root, cfg.OrchDir = root, orchdir.Of(root)
	if cfg.Isolation == "" {
		cfg.Isolation = config.Shared
	}
	if err := os.MkdirAll(cfg.OrchDir, 0o700); err != nil {
		t.Fatal(err)
	}
	f, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(f.Close)
	return f
}

// within waits for one report on ch, or fails the test.
func within[T any](t *testing.T, ch <-chan T) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(10 * time.Second):
		t.Fatal("no report")
	}
	var zero T
	return zero
}

// A pane's process that exits is a death on Deaths: the pidfd wakes the
// watcher, nothing polls.
func TestWatchPaneReportsDeath(t *testing.T) {
	f := testFleet(t, Config{})
	cmd := exec.Command("sleep", "30")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	f.WatchPane("w1", "%1", cmd.Process.Pid)
	cmd.Process.Kill()
	cmd.Wait()
	if d := within(t, f.Deaths()); d != (Death{Worker: "w1", Pane: "%1", PID: cmd.Process.Pid}) {
		t.Fatalf("death %+v", d)
	}
	// A process already gone is reported at once.
	f.WatchPane("w2", "%2", cmd.Process.Pid)
	if d := within(t, f.Deaths()); d.Worker != "w2" {
		t.Fatalf("death %+v", d)
	}
}

// A headless process runs its agent only once Release says go; its exit,
// with how it ended, is reported on Exits, and its output is in its log.
func TestSpawnRelease(t *testing.T) {
	f := testFleet(t, Config{Agent: "echo"})
	p, err := f.Spawn("w1", "p", 1, "the line")
	if err != nil {
		t.Fatal(err)
	}
	if p.PID == 0 {
		t.Fatal("no pid")
	}
	if err := p.Release(); err != nil {
		t.Fatal(err)
	}
	if n := within(t, f.Exits()); n != (Exit{Worker: "w1", Plan: "p", Attempt: 1, PID: p.PID, How: "exit status 0"}) {
		t.Fatalf("exit %+v", n)
	}
	if out, _ := os.ReadFile(f.LogPath("p", 1)); string(out) != "the line\n" {
		t.Fatalf("log %q", out)
	}

	f = testFleet(t, Config{Agent: "exit 3; echo"})
	p, err = f.Spawn("w1", "p", 2, "x")
	if err != nil {
		t.Fatal(err)
	}
	p.Release()
	if n := within(t, f.Exits()); n.How != "exit status 3" {
		t.Fatalf("exit %+v", n)
	}
}

// A process whose pid could not be recorded is aborted at its gate: its
// agent never runs, and no exit is reported for it.
func TestSpawnAbort(t *testing.T) {
	f := testFleet(t, Config{Agent: "echo"})
	p, err := f.Spawn("w1", "p", 1, "ran")
	if err != nil {
		t.Fatal(err)
	}
	p.Abort()
	select {
	case n := <-f.Exits():
		t.Fatalf("an aborted process reported %+v", n)
	case <-time.After(300 * time.Millisecond):
	}
	if out, _ := os.ReadFile(f.LogPath("p", 1)); strings.Contains(string(out), "ran") {
		t.Fatalf("the agent ran: %q", out)
	}
}

// A setup command's end is reported on Setups, run in the worker's
// directory.
func TestRunSetupReports(t *testing.T) {
	failed := errors.New("setup failed")
	var ran string
	f := testFleet(t, Config{Setup: func(dir, plan, worker string) error {
		ran = filepath.Base(dir) + " " + plan + " " + worker
		return failed
	}})
	f.RunSetup("p", 2, "w1")
	s := within(t, f.Setups())
	if s.Plan != "p" || s.Attempt != 2 || s.Worker != "w1" || !errors.Is(s.Err, failed) {
		t.Fatalf("setup %+v", s)
	}
	if want := filepath.Base(f.cfg.Root) + " p w1"; ran != want {
		t.Fatalf("ran %q; want %q", ran, want)
	}
}

// Once the fleet is closed, a report nobody reads never blocks its sender.
func TestClosedFleetDropsReports(t *testing.T) {
	f := testFleet(t, Config{})
	for range cap(f.deaths) {
		f.deaths <- Death{}
	}
	done := make(chan struct{})
	go func() { send(f, f.deaths, Death{Worker: "late"}); close(done) }()
	f.Close()
	within(t, done)
}

// A claude -p run that ended on an API error says so in its JSON result:
// AgentError finds the agent's own words; a result without is_error, or
// another line, is no error.
func TestAgentError(t *testing.T) {
	dir := t.TempDir()
	write := func(name, s string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(s), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	failed := write("failed.log", "starting\n"+`{"type":"result","subtype":"success","is_error":true,"api_error_status":400,"result":"API Error: 400 bad request"}`+"\n")
	if got := AgentError(failed); got != "API Error: 400 bad request" {
		t.Errorf("failed run: %q", got)
	}
	ok := write("ok.log", `{"type":"result","is_error":false,"result":"all done"}`+"\n")
	if got := AgentError(ok); got != "" {
		t.Errorf("a run without error: %q", got)
	}
	other := write("other.log", "Error: something\n{\"error\":{\"message\":\"x\"}}\n")
	if got := AgentError(other); got != "" {
		t.Errorf("not a claude result: %q", got)
	}
	if got := AgentError(filepath.Join(dir, "missing.log")); got != "" {
		t.Errorf("no log: %q", got)
	}
}
