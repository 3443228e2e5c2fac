package fleet

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/orch-dev/orch/internal/runner"
	"github.com/orch-dev/orch/internal/runner/fake"
	"github.com/orch-dev/orch/internal/state"
	"github.com/orch-dev/orch/tmux"
)

func tmuxArgs(args ...string) []string { return append([]string{"-u", "-L", "t"}, args...) }

// Up re-adopts the live pane its @orch_worker option names (renumbered
// since), takes a dead worker back into use, removes a dead pane kept by
// remain-on-exit, watches the pane's process and sets the death hooks. It
// touches only the tmux calls listed here, and saves nothing.
func TestUpReadoptsPanes(t *testing.T) {
	f := fake.New(t)
	fl := testFleet(t, Config{Panes: true, Tmux: &tmux.Client{Socket: "t", Runner: f}})
	session := tmux.SessionName(fl.cfg.Root)
	sleeper := exec.Command("sleep", "30")
	if err := sleeper.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sleeper.Process.Kill(); sleeper.Wait() })
	f.Expect("tmux", tmuxArgs("has-session", "-t", "="+session), "", nil)
	f.Expect("tmux", tmuxArgs("show-options", "-q", "-v", "-t", "="+session+":", RootOption), fl.cfg.Root+"\n", nil)
	f.Expect("tmux", tmuxArgs("list-panes", "-s", "-t", "="+session+":", "-F", "#{pane_id}\t#{pane_title}\t#{pane_dead}\t#{pane_pid}\t#{pane_index}\t#{"+tmux.WorkerOption+"}\t#{pane_current_command}"),
		fmt.Sprintf("%%7\tw1\t0\t%d\t0\tw1\tsleep\n%%3\tw1\t1\t1\t1\tw1\tsh\n", sleeper.Process.Pid), nil)
	f.Expect("tmux", tmuxArgs("kill-pane", "-t", "%3"), "", nil)
	hook := fmt.Sprintf(`run-shell -b 'ORCH_DIR="%s" ORCH_WORKER="#{%s}" ORCH_CREDS="%s/creds/workers/#{%s}.nk" ORCH_PANE="#{pane_id}" "orch-notify" died "pane #{pane_id} exited with #{?pane_dead_signal,signal #{pane_dead_signal},status #{pane_dead_status}}"'`,
		fl.cfg.OrchDir, tmux.WorkerOption, fl.cfg.OrchDir, tmux.WorkerOption)
	f.Expect("tmux", tmuxArgs("set-hook", "-t", "="+session+":", "pane-died", hook), "", nil)
	f.Expect("tmux", tmuxArgs("set-hook", "-t", "="+session+":", "pane-exited", hook), "", nil)

	st := state.New()
	st.Workers = []*state.Worker{{ID: "w1", State: state.WorkerDead, Reason: "gone", Pane: "%3"}}
	started, err := fl.Up(context.Background(), st, 1)
	if err != nil {
		t.Fatal(err)
	}
	if len(started) != 0 {
		t.Fatalf("re-adopted workers are not starting: %v", started)
	}
	if w := st.Worker("w1"); w.Pane != "%7" || w.State != state.WorkerIdle || w.Reason != "" {
		t.Fatalf("worker %+v", w)
	}
	if st.Session != session || st.Isolation != fl.cfg.Isolation {
		t.Fatalf("session %q isolation %q", st.Session, st.Isolation)
	}
	if lost := fl.TakeLost(); len(lost) != 0 {
		t.Fatalf("lost %v", lost)
	}
	sleeper.Process.Kill()
	if d := within(t, fl.Deaths()); d.Pane != "%7" || d.Worker != "w1" {
		t.Fatalf("death %+v", d)
	}
}

// A session of the same name that belongs to another repo is never
// touched: the fleet goes to the name with the root's hash.
func TestSessionForSkipsAnotherRepos(t *testing.T) {
	f := fake.New(t)
	fl := testFleet(t, Config{Panes: true, Tmux: &tmux.Client{Socket: "t", Runner: f}})
	session := tmux.SessionName(fl.cfg.Root)
	sum := sha256.Sum256([]byte(fl.cfg.Root))
	second := session + "-" + hex.EncodeToString(sum[:3])
	f.Expect("tmux", tmuxArgs("has-session", "-t", "="+session), "", nil)
	f.Expect("tmux", tmuxArgs("show-options", "-q", "-v", "-t", "="+session+":", RootOption), "/elsewhere\n", nil)
	f.Expect("tmux", tmuxArgs("has-session", "-t", "="+second), "", &runner.Error{ExitCode: 1, Err: errors.New("exit status 1")})
	name, has, err := fl.sessionFor(context.Background())
	if err != nil || has || name != second {
		t.Fatalf("session %q, there %v, err %v; want %q, new", name, has, err, second)
	}
}

// PressEnter proves the pane is the worker's before it presses Enter; a
// pane that belongs to someone else gets nothing.
func TestPressEnterProvesPane(t *testing.T) {
	f := fake.New(t)
	fl := testFleet(t, Config{Panes: true, Tmux: &tmux.Client{Socket: "t", Runner: f}})
	w := &state.Worker{ID: "w1", Pane: "%4"}
	prove := tmuxArgs("display-message", "-p", "-t", "%4", "#{pane_id}\t#{"+tmux.WorkerOption+"}\t#{pane_dead}")
	f.Expect("tmux", prove, "%4\tw1\t0\n", nil)
	f.Expect("tmux", tmuxArgs("send-keys", "-t", "%4", "Enter"), "", nil)
	if err := fl.PressEnter(context.Background(), w); err != nil {
		t.Fatal(err)
	}
	f.Expect("tmux", prove, "%4\tw2\t0\n", nil)
	if err := fl.PressEnter(context.Background(), w); err == nil {
		t.Fatal("Enter pressed in another worker's pane")
	}
}

// A host's worker's pane is its host's: this machine's tmux is never
// asked about it (the strict fake fails on any call), even to read it.
// An orch host's fleet is the workers its token names.
func TestRemoteWorkerPane(t *testing.T) {
	f := fake.New(t)
	fl := testFleet(t, Config{Panes: true, Tmux: &tmux.Client{Socket: "t", Runner: f}, Own: []string{"w3", "w4"}})
	w := &state.Worker{ID: "w3", Pane: "%4", Remote: "alpha"}
	if _, err := fl.Capture(context.Background(), w); !errors.Is(err, ErrRemote) {
		t.Fatalf("capture of a host's pane: %v", err)
	}
	if err := fl.PressEnter(context.Background(), w); !errors.Is(err, ErrRemote) {
		t.Fatalf("Enter in a host's pane: %v", err)
	}
	if fl.ShowsFailures(w) {
		t.Fatal("a host's pane read for failures here")
	}
	if ids := fl.LocalIDs(2); fmt.Sprint(ids) != "[w3 w4]" {
		t.Fatalf("an orch host's workers: %v", ids)
	}
}

// A tmux fleet cannot start while a worker's headless process, started
// when tmux stopped answering, still runs: the error says where the
// process came from and how to go on (watch it headless, or stop it).
func TestUpRefusesHeadlessRunFromTmuxDown(t *testing.T) {
	f := fake.New(t)
	fl := testFleet(t, Config{Panes: true, Tmux: &tmux.Client{Socket: "t", Runner: f}})
	session := tmux.SessionName(fl.cfg.Root)
	f.Expect("tmux", tmuxArgs("has-session", "-t", "="+session), "", &runner.Error{ExitCode: 1, Err: errors.New("exit status 1")})
	run := exec.Command("sleep", "30")
	run.Env = append(os.Environ(), "ORCH_DIR="+fl.cfg.OrchDir, "ORCH_WORKER=w1")
	if err := run.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { run.Process.Kill(); run.Wait() })
	st := state.New()
	st.TmuxDown = &state.TmuxDown{Since: time.Date(2026, 12, 5, 9, 0, 0, 0, time.UTC), Reason: "tmux server not answering"}
	st.Workers = []*state.Worker{{ID: "w1", State: state.WorkerBusy, Plan: "p", Headless: true, PID: run.Process.Pid}}
	_, err := fl.Up(context.Background(), st, 1)
	want := fmt.Sprintf("w1's headless process %d, started when tmux stopped answering (2026-12-05 09:00:00 UTC), still runs: orch serve --headless --workers N watches it until it ends (orch serve --workers N started after that brings the panes back), or stop it with orch down", run.Process.Pid)
	if !errors.Is(err, ErrNoFleet) || !strings.Contains(err.Error(), want) {
		t.Fatalf("err = %v\nwant it to say %q", err, want)
	}
}
