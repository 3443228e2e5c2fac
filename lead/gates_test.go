package lead

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/orch-dev/orch/internal/eventually"
	"github.com/orch-dev/orch/internal/state"
	"github.com/orch-dev/orch/ledger"
)

func TestMeasure(t *testing.T) {
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "m.txt"), []byte("noise\n  42.5 \n"), 0o644)
	tests := []struct {
		cmd     string
		want    float64
		wantErr string
	}{
		{"cat m.txt", 42.5, ""},
		{"echo nan", 0, "printed no number"},
		{"echo +Inf", 0, "printed no number"},
		{"echo fast", 0, "printed no number"},
		{"true", 0, "printed no number"},
		{"exit 3", 0, "exit 3"},
	}
	for _, tc := range tests {
		t.Run(tc.cmd, func(t *testing.T) {
			v, why := measure(dir, tc.cmd)
			if tc.wantErr != "" {
				if v != nil || !strings.Contains(why, tc.wantErr) {
					t.Errorf("measure(%q) = %v, %q; want no value and %q", tc.cmd, v, why, tc.wantErr)
				}
				return
			}
			if v == nil || *v != tc.want || why != "" {
				t.Errorf("measure(%q) = %v, %q; want %v", tc.cmd, v, why, tc.want)
			}
		})
	}
}

func TestRunCmdKillsTheGroupOnTimeout(t *testing.T) {
	dir := t.TempDir()
	start := time.Now()
	r := runCmd(dir, "sleep 30 & echo $! > bg.pid; sleep 30", 300*time.Millisecond)
	if !r.TimedOut || !r.Failed() || time.Since(start) > 5*time.Second {
		t.Fatalf("result %+v after %s, want a timeout", r, time.Since(start))
	}
	data, err := os.ReadFile(filepath.Join(dir, "bg.pid"))
	if err != nil {
		t.Fatal(err)
	}
	pid := strings.TrimSpace(string(data))
	// SIGKILL is sent at the timeout; the kernel takes a moment to end it.
	eventually.True(t, 2*time.Second, func() bool {
		st, err := os.ReadFile("/proc/" + pid + "/stat")
		return err != nil || strings.Contains(string(st), ") Z ") // gone, or a zombie
	}, "background child %s of the gate to die with its group", pid)
	if !strings.Contains(r.Summary(), "timed out") {
		t.Errorf("summary %q", r.Summary())
	}
}

func TestJudge(t *testing.T) {
	f := func(v float64) *float64 { return &v }
	tests := []struct {
		dir      string
		target   float64
		measured float64
		want     string
	}{
		{"lower", 100, 90, ledger.Won},
		{"lower", 100, 100, ledger.Won},
		{"lower", 100, 101, ledger.Lost},
		{"higher", 0.9, 0.95, ledger.Won},
		{"higher", 0.9, 0.5, ledger.Lost},
	}
	for _, tc := range tests {
		e := ledger.Entry{ID: 1, Metric: "m", Direction: tc.dir, Target: f(tc.target)}
		if got, err := e.Judge(tc.measured); err != nil || got != tc.want {
			t.Errorf("%s is better, target %g, measured %g: %q, %v; want %q", tc.dir, tc.target, tc.measured, got, err, tc.want)
		}
	}
	if _, err := (ledger.Entry{ID: 1, Metric: "m"}).Judge(1); err == nil {
		t.Error("a bet without target and direction was judged")
	}
}

func TestEligibleNeverTheAuthor(t *testing.T) {
	l := &Loop{st: state.New()}
	for _, id := range []string{"w1", "w2", "w3"} {
		l.st.Workers = append(l.st.Workers, &state.Worker{ID: id, State: state.WorkerIdle, Pane: "%1"})
	}
	vp := &state.Run{Name: "p.v1r2", Exclude: []string{"w1"}, Avoid: []string{"w2"}}
	want := map[string]bool{"w1": false, "w2": false, "w3": true}
	for _, w := range l.st.Workers {
		if got := l.eligible(vp, w); got != want[w.ID] {
			t.Errorf("eligible(%s) = %v, want %v", w.ID, got, want[w.ID])
		}
	}
	// With w3 dead, an earlier verifier may verify again; the author never.
	l.st.Workers[2].State = state.WorkerDead
	if !l.eligible(vp, l.st.Workers[1]) || l.eligible(vp, l.st.Workers[0]) {
		t.Error("with w3 dead: w2 should be eligible and w1 never")
	}
}

// A gate that leaves a background child holding its output open is judged
// by its own exit, not by the child: it neither hangs nor times out.
func TestRunCmdDoesNotWaitForBackgroundChildren(t *testing.T) {
	start := time.Now()
	r := runCmd(t.TempDir(), "sleep 30 & echo started", 20*time.Second)
	if r.Failed() || r.TimedOut || time.Since(start) > 10*time.Second {
		t.Fatalf("result %+v after %s, want exit 0 within a few seconds", r, time.Since(start))
	}
}

func TestRunCmdGroupStartsOnlyOnceRecorded(t *testing.T) {
	dir := t.TempDir()
	marker := filepath.Join(dir, "ran")
	var calls []string
	r := runCmdGroup(dir, "echo $$ > ran", 10*time.Second, func(pgid int, running bool) error {
		if running {
			// The shell is up, in its own group, and waits for the go. (That
			// it cannot run the command before the go is shown by the
			// second half here and by reliability/gates_unrecorded_tmux.)
			if st := startTime(pgid); st == "" {
				t.Errorf("process group leader %d not running when reported", pgid)
			}
			if _, err := os.Stat(marker); err == nil {
				t.Error("the command ran before its process group was recorded")
			}
		}
		calls = append(calls, fmt.Sprint(running))
		return nil
	})
	if r.Failed() {
		t.Fatalf("result %+v", r)
	}
	if got := strings.Join(calls, ","); got != "true,false" {
		t.Errorf("started calls %s, want true,false", got)
	}
	if _, err := os.Stat(marker); err != nil {
		t.Errorf("the command did not run after the go: %v", err)
	}

	// Not recorded (the loop is stopping, the file cannot be written): the
	// shell gets no go and ends without running the command.
	os.Remove(marker)
	calls = nil
	r = runCmdGroup(dir, "echo $$ > ran", 10*time.Second, func(pgid int, running bool) error {
		calls = append(calls, fmt.Sprint(running))
		return errors.New("disk full")
	})
	if !r.Failed() || r.Exit != 97 || !strings.Contains(r.Err, "not started") || !strings.Contains(r.Err, "disk full") {
		t.Errorf("result %+v, want exit 97 and an error saying it was not started, and why", r)
	}
	if got := strings.Join(calls, ","); got != "true" {
		t.Errorf("started calls %s, want only true", got)
	}
	if _, err := os.Stat(marker); err == nil {
		t.Error("the command ran although its process group was not recorded")
	}
}

func TestTrackGroupRefusesWhatItCannotRecord(t *testing.T) {
	dir := t.TempDir()
	l := &Loop{orchDir: dir}
	pid := os.Getpid() // any live process: only its start time is read
	if err := l.trackGroup(pid, true); err != nil {
		t.Fatalf("recording: %v", err)
	}
	data, err := os.ReadFile(filepath.Join(dir, groupsFile))
	if err != nil || !strings.HasPrefix(string(data), fmt.Sprint(pid)+" ") {
		t.Fatalf("%s = %q, %v; want the group with its start time", groupsFile, data, err)
	}
	if err := l.trackGroup(pid, false); err != nil {
		t.Fatal(err)
	}

	// The file cannot be written (here .orch is a regular file, which
	// stops root too): refused, nothing kept in memory.
	notDir := filepath.Join(dir, "not-a-dir")
	if err := os.WriteFile(notDir, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	broken := &Loop{orchDir: notDir}
	if err := broken.trackGroup(pid, true); err == nil {
		t.Error("recording where the file cannot be written: no error")
	}
	if len(broken.groups) != 0 {
		t.Errorf("groups %v after a failed record, want none", broken.groups)
	}

	// The loop is stopping: refused, so nothing starts after the stop's kill.
	l.stopping.Store(true)
	if err := l.trackGroup(pid, true); err == nil || !strings.Contains(err.Error(), "stopping") {
		t.Errorf("recording while stopping: err=%v, want a refusal", err)
	}
	if len(l.groups) != 0 {
		t.Errorf("groups %v while stopping, want none", l.groups)
	}
}
