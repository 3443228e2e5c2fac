package gates

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/orch-dev/orch/event"
	"github.com/orch-dev/orch/internal/runas"
)

// DefaultGateTimeout bounds one acceptance command.
const DefaultGateTimeout = 10 * time.Minute

// metricTimeout bounds one metric command: a baseline holds up its plan's
// dispatch, so they are kept short. (The lead loop runs them off its
// goroutine: Runner.Measure.)
const metricTimeout = 10 * time.Second

// maxCapture bounds the stdout and stderr kept of a command (the tail).
const maxCapture = 8 << 10

// Result is one command run as a gate, a setup or a metric.
type Result struct {
	Cmd      string        `json:"cmd"`
	Exit     int           `json:"exit"` // -1 when killed or not started
	Wall     time.Duration `json:"wall_ns"`
	TimedOut bool          `json:"timed_out,omitempty"`
	Stdout   string        `json:"stdout,omitempty"`
	Stderr   string        `json:"stderr,omitempty"`
	Err      string        `json:"error,omitempty"`
}

// Failed says whether the command did not succeed.
func (r Result) Failed() bool { return r.Exit != 0 || r.TimedOut || r.Err != "" }

// Summary is the one-line verdict on a failed command, as orch wait shows it.
func (r Result) Summary() string {
	switch {
	case r.TimedOut:
		return fmt.Sprintf("gate %q timed out after %s", r.Cmd, r.Wall.Round(time.Millisecond))
	case r.Err != "":
		return fmt.Sprintf("gate %q did not run: %s", r.Cmd, r.Err)
	}
	return fmt.Sprintf("gate %q exit %d", r.Cmd, r.Exit)
}

// Run runs one shell command in dir with a deadline enforced by killing
// its process group.
func Run(dir, cmdline string, timeout time.Duration) Result {
	return RunTracked(dir, cmdline, timeout, nil, nil)
}

// RunTracked is Run that reports the process group it started (running
// true, then false once it is over), so that its owner can kill it when it
// stops (the group outlives a dead parent); Runner.Track is such a
// started. The command starts only once started has recorded the group:
// until then its shell waits on a pipe (fd 3). An owner that dies first
// closes the pipe, and started failing closes it too: the shell then exits
// (97) without running the command. No command runs unrecorded.
//
// as, when set, is the worker's user the command runs as (orch.yaml's
// run_as), with its HOME and git's leave to work in dir.
//
// The wall time is a duration read off the monotonic clock, not a time of
// day, so it takes no injected clock.
func RunTracked(dir, cmdline string, timeout time.Duration, as *runas.User, started func(pgid int, running bool) error) Result {
	res := Result{Cmd: cmdline, Exit: -1}
	script := cmdline
	var goR, goW *os.File
	if started != nil {
		var err error
		if goR, goW, err = os.Pipe(); err != nil {
			res.Err = err.Error()
			return res
		}
		script = "read -r _ <&3 || exit 97; exec 3<&-; " + cmdline
	}
	cmd := exec.Command("sh", "-c", script)
	cmd.Dir = dir
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Credential: as.Credential()}
	if as != nil {
		cmd.Env = as.Environ(os.Environ(), dir)
	}
	// A background child that keeps the output pipes open must not hold the
	// result: once sh has exited, Wait gives up on the pipes after this.
	cmd.WaitDelay = 2 * time.Second
	var stdout, stderr tailBuffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if goR != nil {
		cmd.ExtraFiles = []*os.File{goR}
	}
	start := time.Now()
	err := cmd.Start()
	if goR != nil {
		goR.Close() // the child has its own
	}
	if err != nil {
		if goW != nil {
			goW.Close()
		}
		res.Err = err.Error()
		return res
	}
	var notRecorded error
	if started != nil {
		if notRecorded = started(cmd.Process.Pid, true); notRecorded == nil {
			defer started(cmd.Process.Pid, false)
			goW.Write([]byte("go\n")) // a failed write leaves the shell at end of file: it exits 97
		}
		goW.Close()
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t := time.NewTimer(timeout) // the deadline: one timer, fired at most once
	defer t.Stop()
	select {
	case err = <-exited:
	case <-t.C:
		res.TimedOut = true
		syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		err = <-exited
	}
	res.Wall = time.Since(start)
	res.Stdout, res.Stderr = event.Clean(stdout.String()), event.Clean(stderr.String())
	var ee *exec.ExitError
	switch {
	case err == nil:
		res.Exit = 0
	case errors.Is(err, exec.ErrWaitDelay) && cmd.ProcessState != nil:
		// sh itself exited; a background child kept the output open.
		res.Exit = cmd.ProcessState.ExitCode()
	case errors.As(err, &ee):
		res.Exit = ee.ExitCode()
	default:
		res.Err = err.Error()
	}
	if notRecorded != nil {
		res.Err = "not started: its process group could not be recorded: " + notRecorded.Error()
	}
	// Whatever the command left running in its group goes too.
	syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	return res
}

// tailBuffer keeps the last maxCapture bytes written to it.
type tailBuffer struct {
	b       bytes.Buffer
	dropped bool
}

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.b.Write(p)
	if over := t.b.Len() - maxCapture; over > 0 {
		t.b.Next(over)
		t.dropped = true
	}
	return len(p), nil
}

func (t *tailBuffer) String() string {
	if t.dropped {
		return "…" + t.b.String()
	}
	return t.b.String()
}

// Measure runs a bet's metric command and reads the one number it prints
// (the last non-empty line of its output). A failure or no number is an
// error that says so; it is never turned into a value.
// It runs as as when that is set (the worker's user, in its worktree).
func Measure(root, cmdline string, as *runas.User) (*float64, string) {
	return measure(root, cmdline, as, nil)
}

// measure is Measure with its process group reported to track.
func measure(root, cmdline string, as *runas.User, track func(pgid int, running bool) error) (*float64, string) {
	r := RunTracked(root, cmdline, metricTimeout, as, track)
	if r.Failed() {
		return nil, fmt.Sprintf("metric command %q: %s", cmdline, strings.TrimPrefix(r.Summary(), "gate "+strconv.Quote(cmdline)+" "))
	}
	lines := strings.Split(strings.TrimSpace(strings.ReplaceAll(r.Stdout, `\n`, "\n")), "\n")
	last := strings.TrimSpace(lines[len(lines)-1])
	v, err := strconv.ParseFloat(last, 64)
	if err != nil || last == "" || math.IsNaN(v) || math.IsInf(v, 0) {
		return nil, fmt.Sprintf("metric command %q printed no number (last line %q)", cmdline, last)
	}
	return &v, ""
}
