package gates

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/orch-dev/orch/internal/eventually"
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
			v, why := Measure(dir, tc.cmd, nil)
			if tc.wantErr != "" {
				if v != nil || !strings.Contains(why, tc.wantErr) {
					t.Errorf("Measure(%q) = %v, %q; want no value and %q", tc.cmd, v, why, tc.wantErr)
				}
				return
			}
			if v == nil || *v != tc.want || why != "" {
				t.Errorf("Measure(%q) = %v, %q; want %v", tc.cmd, v, why, tc.want)
			}
		})
	}
}

func TestRunKillsTheGroupOnTimeout(t *testing.T) {
	dir := t.TempDir()
	start := time.Now()
	r := Run(dir, "sleep 30 & echo $! > bg.pid; sleep 30", 300*time.Millisecond)
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

// A gate that leaves a background child holding its output open is judged
// by its own exit, not by the child: it neither hangs nor times out.
func TestRunDoesNotWaitForBackgroundChildren(t *testing.T) {
	start := time.Now()
	r := Run(t.TempDir(), "sleep 30 & echo started", 20*time.Second)
	if r.Failed() || r.TimedOut || time.Since(start) > 10*time.Second {
		t.Fatalf("result %+v after %s, want exit 0 within a few seconds", r, time.Since(start))
	}
}

func TestRunTrackedStartsOnlyOnceRecorded(t *testing.T) {
	dir := t.TempDir()
	marker := filepath.Join(dir, "ran")
	var calls []string
	r := RunTracked(dir, "echo $$ > ran", 10*time.Second, nil, func(pgid int, running bool) error {
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
	r = RunTracked(dir, "echo $$ > ran", 10*time.Second, nil, func(pgid int, running bool) error {
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

func TestTrackRefusesWhatItCannotRecord(t *testing.T) {
	root := t.TempDir()
	dir := filepath.Join(root, ".orch")
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	l := New(Config{Root: root})
	pid := os.Getpid() // any live process: only its start time is read
	if err := l.Track(pid, true); err != nil {
		t.Fatalf("recording: %v", err)
	}
	data, err := os.ReadFile(filepath.Join(dir, groupsFile))
	if err != nil || !strings.HasPrefix(string(data), fmt.Sprint(pid)+" ") {
		t.Fatalf("%s = %q, %v; want the group with its start time", groupsFile, data, err)
	}
	if err := l.Track(pid, false); err != nil {
		t.Fatal(err)
	}

	// The file cannot be written (here .orch is a regular file, which
	// stops root too): refused, nothing kept in memory.
	brokenRoot := t.TempDir()
	if err := os.WriteFile(filepath.Join(brokenRoot, ".orch"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	broken := New(Config{Root: brokenRoot})
	if err := broken.Track(pid, true); err == nil {
		t.Error("recording where the file cannot be written: no error")
	}
	if len(broken.groups) != 0 {
		t.Errorf("groups %v after a failed record, want none", broken.groups)
	}

	// The loop is stopping: refused, so nothing starts after the stop's kill.
	l.Stop()
	if err := l.Track(pid, true); err == nil || !strings.Contains(err.Error(), "stopping") {
		t.Errorf("recording while stopping: err=%v, want a refusal", err)
	}
	if len(l.groups) != 0 {
		t.Errorf("groups %v while stopping, want none", l.groups)
	}
}

// A Runner reports each Job's verdict on Finished, its evidence written
// first; it stops at the first failing command.
func TestRunnerReportsOnFinished(t *testing.T) {
	root := t.TempDir()
	if err := os.MkdirAll(filepath.Join(root, ".orch"), 0o700); err != nil {
		t.Fatal(err)
	}
	r := New(Config{Root: root, Timeout: 10 * time.Second})
	defer r.Stop()
	tests := []struct {
		plan    string
		cmds    []string
		verdict string
	}{
		{"ok", []string{"true", "echo fine"}, "passed"},
		{"bad", []string{"exit 3", "touch ran"}, `gate "exit 3" exit 3`},
	}
	for _, tc := range tests {
		t.Run(tc.plan, func(t *testing.T) {
			if err := os.MkdirAll(filepath.Join(root, "plans", tc.plan), 0o755); err != nil {
				t.Fatal(err)
			}
			r.Start(Job{Plan: tc.plan, Attempt: 1, Cmds: tc.cmds, Dir: root})
			var f Finished
			select {
			case f = <-r.Finished():
			case <-time.After(20 * time.Second):
				t.Fatal("no verdict")
			}
			if f.Plan != tc.plan || f.Attempt != 1 || f.Verdict != tc.verdict {
				t.Errorf("finished %+v, want plan %s attempt 1 verdict %q", f, tc.plan, tc.verdict)
			}
			data, err := os.ReadFile(filepath.Join(root, "plans", tc.plan, GatesFile))
			if err != nil || !strings.Contains(string(data), "Verdict: **"+tc.verdict+"**") {
				t.Errorf("%s = %q, %v; want the verdict", GatesFile, data, err)
			}
		})
	}
	if _, err := os.Stat(filepath.Join(root, "ran")); err == nil {
		t.Error("a command after the failing one ran")
	}
}

// A Runner measures off the caller's goroutine, the outcome on Measured; a
// second Measure of a run under way is a no-op.
func TestRunnerMeasuresOnce(t *testing.T) {
	root := t.TempDir()
	if err := os.MkdirAll(filepath.Join(root, ".orch"), 0o700); err != nil {
		t.Fatal(err)
	}
	fifo := filepath.Join(root, "go")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	r := New(Config{Root: root, Timeout: 10 * time.Second})
	defer r.Stop()
	next := func() Measured {
		t.Helper()
		select {
		case m := <-r.Measured():
			return m
		case <-time.After(20 * time.Second):
			t.Fatal("nothing measured")
		}
		return Measured{}
	}
	// Each run reads a line of the fifo, kept open here: the first is
	// held until it is written; a second run would read the next line and
	// print 7 too.
	j := MeasureJob{Plan: "p", Phase: "harvest", Run: 1, Dir: root, Cmd: "read x < go; echo 7"}
	r.Measure(j)
	r.Measure(j)
	f, err := os.OpenFile(fifo, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteString("go\ngo\n"); err != nil {
		t.Fatal(err)
	}
	if m := next(); m.Value == nil || *m.Value != 7 || m.Plan != "p" || m.Run != 1 {
		t.Fatalf("measured %+v, want 7 for p run 1", m)
	}
	// Another run, after: the next outcome is its own, not a second 7.
	r.Measure(MeasureJob{Plan: "p", Phase: "harvest", Run: 2, Dir: root, Cmd: "echo 8"})
	if m := next(); m.Value == nil || *m.Value != 8 || m.Run != 2 {
		t.Fatalf("measured %+v, want 8 from run 2 (not a second run 1)", m)
	}
}
