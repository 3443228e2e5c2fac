package lead

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/orch-dev/orch/event"
	"github.com/orch-dev/orch/fleet"
	"github.com/orch-dev/orch/internal/atomicfile"
	"github.com/orch-dev/orch/internal/orchdir"
	"github.com/orch-dev/orch/internal/state"
	"github.com/orch-dev/orch/plans"
)

// This file runs commands the lead loop runs itself: a plan's acceptance
// gates (off the loop, in their own goroutine) and bet metric commands.
// Each runs as `sh -c` in its own process group, and a timeout kills the
// whole group from outside: a gate cannot outlive its deadline by forking.

// DefaultGateTimeout bounds one acceptance command.
const DefaultGateTimeout = 10 * time.Minute

// metricTimeout bounds one metric command. Metric commands run on the
// event loop (a baseline must be taken before the line is typed), so they
// are kept short.
const metricTimeout = 10 * time.Second

// maxCapture bounds the stdout and stderr kept of a command (the tail).
const maxCapture = 8 << 10

// GatesFile is the evidence committed next to RESULT.md.
const GatesFile = "GATES.md"

// CmdResult is one command the lead loop ran.
type CmdResult struct {
	Cmd      string        `json:"cmd"`
	Exit     int           `json:"exit"` // -1 when killed or not started
	Wall     time.Duration `json:"wall_ns"`
	TimedOut bool          `json:"timed_out,omitempty"`
	Stdout   string        `json:"stdout,omitempty"`
	Stderr   string        `json:"stderr,omitempty"`
	Err      string        `json:"error,omitempty"`
}

// Failed says whether the command did not succeed.
func (r CmdResult) Failed() bool { return r.Exit != 0 || r.TimedOut || r.Err != "" }

// Summary is the one-line verdict on a failed command, as orch wait shows it.
func (r CmdResult) Summary() string {
	switch {
	case r.TimedOut:
		return fmt.Sprintf("gate %q timed out after %s", r.Cmd, r.Wall.Round(time.Millisecond))
	case r.Err != "":
		return fmt.Sprintf("gate %q did not run: %s", r.Cmd, r.Err)
	}
	return fmt.Sprintf("gate %q exit %d", r.Cmd, r.Exit)
}

// runCmd runs one shell command in dir with a deadline enforced by killing
// its process group.
func runCmd(dir, cmdline string, timeout time.Duration) CmdResult {
	return runCmdGroup(dir, cmdline, timeout, nil)
}

// runCmdGroup is runCmd that reports the process group it started, so the
// lead loop can kill it when it stops (the group outlives a dead parent).
// The command starts only once started has recorded the group: until then
// its shell waits on a pipe (fd 3). A lead that dies first closes the pipe,
// and started failing closes it too: the shell then exits (97) without
// running the command. No gate runs unrecorded.
func runCmdGroup(dir, cmdline string, timeout time.Duration, started func(pgid int, running bool) error) CmdResult {
	res := CmdResult{Cmd: cmdline, Exit: -1}
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
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
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

// gateJob is one plan's acceptance run, for one attempt.
type gateJob struct {
	plan    string
	attempt int
	cmds    []string
	dir     string // where they run in shared isolation: the repo
	// rev, in worktree isolation, is the plan branch's harvested commit:
	// the gates run in a scratch worktree of it, so nothing they write
	// ends up in the worker's worktree (and on its branch).
	rev    string
	worker string // whose work it is (the setup command's ORCH_WORKER)
}

// gateJob is the gate run for p's current attempt.
func (l *Loop) gateJob(ctx context.Context, p *state.Run, cmds []string) gateJob {
	j := gateJob{plan: p.Name, attempt: p.Attempts, cmds: cmds, dir: l.cfg.Root, worker: p.Worker}
	if l.isolated() {
		if sha, err := l.repo.RevParse(ctx, "refs/heads/"+fleet.PlanBranch(p.Name)); err == nil {
			j.rev = sha
		} else {
			j.dir = l.workDir(p.Worker) // no branch (a worker that never switched): its worktree
		}
	}
	return j
}

// gateTree makes the scratch worktree for j and returns it and how to
// remove it; the included files are copied and the setup command runs.
func (l *Loop) gateTree(j gateJob) (string, func(), error) {
	ctx := context.Background()
	dir := filepath.Join(l.orchDir, orchdir.Gates, fmt.Sprintf("%s-%d", j.plan, j.attempt))
	_ = l.repo.RemoveWorktree(ctx, dir) // left by a lead loop that died
	os.RemoveAll(dir)
	if err := l.repo.AddWorktree(ctx, dir, j.rev); err != nil {
		return "", nil, err
	}
	done := func() { l.repo.RemoveWorktree(ctx, dir) }
	if err := fleet.CopyIncludes(ctx, l.repo, dir); err != nil {
		done()
		return "", nil, err
	}
	if err := runSetup(l.conf, dir, j.plan, j.worker, l.trackGroup); err != nil {
		done()
		return "", nil, err
	}
	return dir, done, nil
}

// startGates runs the plan's acceptance commands in their own goroutine.
// When they are done, the evidence is written and a "gated" record goes
// into the stream, to be handled like any event (and redelivered after a
// crash). A crash while they run leaves the plan verifying; the next start
// runs them again.
func (l *Loop) startGates(j gateJob) {
	timeout := l.cfg.GateTimeout
	key := fmt.Sprintf("%s/%d", j.plan, j.attempt)
	l.groupsMu.Lock()
	if l.gateRuns == nil {
		l.gateRuns = map[string]bool{}
	}
	if l.gateRuns[key] {
		l.groupsMu.Unlock()
		return // already running: a second regate must not start a second run
	}
	l.gateRuns[key] = true
	l.groupsMu.Unlock()
	go func() {
		defer func() {
			l.groupsMu.Lock()
			delete(l.gateRuns, key)
			l.groupsMu.Unlock()
		}()
		var results []CmdResult
		verdict := "passed"
		dir, remove := j.dir, func() {}
		if j.rev != "" {
			d, rm, err := l.gateTree(j)
			if err != nil {
				verdict = "gates not run: " + err.Error()
				j.cmds = nil
			} else {
				dir, remove = d, rm
			}
		}
		for _, c := range j.cmds {
			r := runCmdGroup(dir, c, timeout, l.trackGroup)
			results = append(results, r)
			if r.Failed() {
				verdict = r.Summary()
				break
			}
		}
		remove() // before the verdict goes out: nothing of the run is left after it
		if l.stopping.Load() {
			return // killed because the lead loop stops: the next start runs them again
		}
		if err := writeGates(l.cfg.Root, j.plan, j.attempt, results, verdict); err != nil {
			verdict = "gate evidence not written: " + err.Error()
		}
		sum := sha256.Sum256([]byte(fmt.Sprintf("gated %s %d", j.plan, j.attempt)))
		e := event.Event{V: event.Version, ID: hex.EncodeToString(sum[:16]), Kind: event.Gated, Plan: j.plan,
			Attempt: j.attempt, Status: verdict, Host: hostname(), Time: time.Now().UTC()}
		l.publishRecord(e)
	}()
}

// writeGates writes the evidence file: each command, its exit code, wall
// time and the tail of its output.
func writeGates(root, plan string, attempt int, results []CmdResult, verdict string) error {
	var b strings.Builder
	fmt.Fprintf(&b, "# Acceptance gates: %s (attempt %d)\n\nRun by the lead loop in the plan's code (a scratch worktree of its branch; the repo itself in shared isolation). Verdict: **%s**\n", plan, attempt, verdict)
	for i, r := range results {
		fmt.Fprintf(&b, "\n## %d. `%s`\n\n- exit: %d\n- wall: %s\n", i+1, r.Cmd, r.Exit, r.Wall.Round(time.Millisecond))
		if r.TimedOut {
			b.WriteString("- timed out: the process group was killed\n")
		}
		if r.Err != "" {
			fmt.Fprintf(&b, "- error: %s\n", r.Err)
		}
		for _, out := range []struct{ name, text string }{{"stdout", r.Stdout}, {"stderr", r.Stderr}} {
			if out.text != "" {
				fmt.Fprintf(&b, "\n%s (last %d bytes at most):\n\n```\n%s\n```\n", out.name, maxCapture, strings.ReplaceAll(out.text, `\n`, "\n"))
			}
		}
	}
	return atomicfile.Write(filepath.Join(root, plans.Dir, plan, GatesFile), []byte(b.String()), 0o644)
}

// measure runs a bet's metric command and reads the one number it prints
// (the last non-empty line of its output). A failure or no number is an
// error that says so; it is never turned into a value.
func measure(root, cmdline string) (*float64, string) {
	r := runCmd(root, cmdline, metricTimeout)
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

// trackGroup records the process groups of running gates and setup
// commands, so a lead loop that stops (or dies) leaves none running past
// its deadline: they are killed when it stops, and at the next start. An
// error (the loop is stopping, the record cannot be written) means the
// command must not start.
func (l *Loop) trackGroup(pgid int, running bool) error {
	if running {
		l.fault("gate-started") // started, not yet recorded: its shell is still waiting for the go
	}
	l.groupsMu.Lock()
	defer l.groupsMu.Unlock()
	if l.groups == nil {
		l.groups = map[int]bool{}
	}
	if !running {
		delete(l.groups, pgid)
		writeGroups(l.orchDir, l.groups) // a group left listed is only killed again, if its leader is still the same
		return nil
	}
	if l.stopping.Load() {
		// The stop has killed the groups it knew; this one would outlive it.
		return errors.New("the lead loop is stopping")
	}
	l.groups[pgid] = true
	if err := writeGroups(l.orchDir, l.groups); err != nil {
		delete(l.groups, pgid)
		return err
	}
	return nil
}

// groupsFile lists the process groups of running gates, one per line.
const groupsFile = "gates.pgids"

func writeGroups(orchDir string, groups map[int]bool) error {
	var b strings.Builder
	for g := range groups {
		// With the leader's start time, so that a later kill can tell the
		// group from another that reuses the number.
		fmt.Fprintf(&b, "%d %s\n", g, startTime(g))
	}
	// Written whole or not at all: a crash mid-write must not lose the
	// groups already recorded.
	return atomicfile.Write(filepath.Join(orchDir, groupsFile), []byte(b.String()), 0o600)
}

// startTime is a process's start time (field 22 of /proc/<pid>/stat), or ""
// when it is gone.
func startTime(pid int) string {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return ""
	}
	s := string(data)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return ""
	}
	f := strings.Fields(s[i+1:])
	if len(f) < 20 {
		return ""
	}
	return f[19] // fields after the command start at field 3
}

// killGroups kills the gate process groups recorded by this or an earlier
// lead loop.
func killGroups(orchDir string) {
	data, err := os.ReadFile(filepath.Join(orchDir, groupsFile))
	if err != nil {
		return
	}
	for _, line := range strings.Split(string(data), "\n") {
		f := strings.Fields(line)
		if len(f) != 2 {
			continue
		}
		g, err := strconv.Atoi(f[0])
		// Only the very group that was recorded: same leader, same start.
		if err == nil && g > 1 && startTime(g) == f[1] {
			syscall.Kill(-g, syscall.SIGKILL)
		}
	}
	os.Remove(filepath.Join(orchDir, groupsFile))
}
