package lead

import (
	"bytes"
	"cmp"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/orch-dev/orch/event"
	"github.com/orch-dev/orch/fleet"
	"github.com/orch-dev/orch/internal/atomicfile"
	"github.com/orch-dev/orch/internal/orchdir"
	"github.com/orch-dev/orch/internal/state"
)

// The headless backend: no tmux. Each plan runs the agent's headless
// command (the dispatch line as its prompt) as a child process in the
// worker's worktree. The process's exit is an event: the waiting goroutine
// publishes an exited record into the stream, behind the worker's own
// orch-notify done, and the loop decides: a plan still held then failed
// (the agent stopped without saying done). Its output goes to
// .orch/logs/<plan>-<attempt>.log, written by the process itself (so it
// survives a lead loop that dies) and cut to MaxLog when it ends.

// MaxLog bounds one headless run's captured output.
const MaxLog = 1 << 20

// headlessUp records the headless workers. A process recorded by an
// earlier lead loop (it outlives orch serve, like an agent in a pane) is
// watched again; if it is gone, its exit is reported at start.
func (l *Loop) headlessUp() error {
	if l.cfg.Profile == nil && l.cfg.Agent == "" {
		return errors.New("headless: no agent command")
	}
	busy := false
	for _, w := range l.st.Workers {
		busy = busy || w.PID != 0 || w.Plan != ""
	}
	if err := l.adoptIsolation(busy); err != nil {
		return err
	}
	now := l.cfg.Now().UTC()
	for i := 1; i <= l.cfg.Workers; i++ {
		id := fmt.Sprintf("w%d", i)
		w := l.st.EnsureWorker(id, now)
		if w.Pane != "" {
			if l.paneAlive(w) {
				return fmt.Errorf("headless: %s's tmux pane %s from an earlier orch serve is still there; stop that fleet with orch down first", id, w.Pane)
			}
			// The tmux fleet is gone; a plan its pane held is decided once
			// the events sent before are in (reportLost).
			had := w.Pane
			w.Pane, w.Headless, w.Host = "", true, hostname()
			if p := l.st.Plans[w.Plan]; p != nil && p.Preparing != 0 && p.Worker == id {
				continue // only its setup was running: it runs again (resumeSetups)
			}
			if w.Plan != "" {
				l.lost = append(l.lost, lostPlan{worker: id, pane: had, plan: w.Plan, attempt: l.attemptOf(w.Plan)})
				continue // decided by the lost record, once
			}
		}
		w.Headless, w.Host = true, hostname()
		if w.State == state.WorkerDead {
			w.State, w.Reason = state.WorkerIdle, ""
		}
		if p := l.st.Plans[w.Plan]; p != nil && p.Preparing != 0 && p.Worker == w.ID {
			continue // its setup command runs again (resumeSetups); no process yet
		}
		if w.PID == 0 && w.Plan != "" {
			// Dispatched, but the lead stopped before it recorded the
			// process: that process never started its agent (it waits for
			// the lead's go first). The plan was lost; decided once the
			// events sent before are in.
			l.lost = append(l.lost, lostPlan{worker: id, plan: w.Plan, attempt: l.attemptOf(w.Plan)})
			continue
		}
		if w.PID != 0 {
			l.rewatch(w)
		} else if w.Plan == "" {
			w.State = state.WorkerIdle
		}
	}
	sort.Slice(l.st.Workers, func(i, j int) bool { return state.WorkerNum(l.st.Workers[i].ID) < state.WorkerNum(l.st.Workers[j].ID) })
	return l.save()
}

// unknownStatus marks the exit of a process this lead loop did not start.
const unknownStatus = "status unknown: started by an earlier orch serve"

// exitNote is a headless process that ended, to be published.
type exitNote struct {
	worker, plan string
	attempt, pid int
	how          string
}

// rewatch watches a process recorded by an earlier lead loop. It is not
// this loop's child, so its exit status is unknown: only that it ended.
func (l *Loop) rewatch(w *state.Worker) {
	n := exitNote{worker: w.ID, plan: w.Plan, attempt: l.attemptOf(w.Plan), pid: w.PID}
	fd, err := unix.PidfdOpen(w.PID, 0)
	if err == nil && !fleet.IsWorkerProcess(w.PID, w.ID, l.orchDir) {
		unix.Close(fd) // the pid was reused by an unrelated process: ours is gone
		err = unix.ESRCH
	}
	if err != nil {
		// Published by reportExits, once the stream is caught up.
		n.how = "ended while orch serve was down (" + unknownStatus + ")"
		l.pendingExits = append(l.pendingExits, n)
		return
	}
	l.log.Info("headless process from an earlier orch serve still runs; watching it", "worker", w.ID, "pid", w.PID, "plan", w.Plan)
	go func() {
		defer unix.Close(fd)
		fds := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}, {Fd: int32(l.stopR), Events: unix.POLLIN}}
		for {
			_, err := unix.Poll(fds, -1) // -1: block until the process ends or the loop stops
			if !errors.Is(err, unix.EINTR) {
				break
			}
		}
		if fds[0].Revents != 0 && fds[1].Revents == 0 {
			n.how = "ended (" + unknownStatus + ")"
			send(l, l.exits, n)
		}
	}()
}

func (l *Loop) attemptOf(plan string) int {
	if p := l.st.Plans[plan]; p != nil {
		return p.Attempts
	}
	return 0
}

// startHeadless starts the agent's headless command for a plan.
func (l *Loop) startHeadless(w *state.Worker, plan, line string) error {
	p := l.st.Plans[plan]
	attempt := 0
	if p != nil {
		attempt = p.Attempts
	}
	env, err := l.workerEnv(w.ID)
	if err != nil {
		return err
	}
	logs := filepath.Join(l.orchDir, orchdir.Logs)
	if err := os.MkdirAll(logs, 0o700); err != nil {
		return err
	}
	logPath := filepath.Join(logs, fleet.LogName(plan, attempt))
	f, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o600)
	if err != nil {
		return err
	}
	cmdline, agentEnv, err := l.headlessCommand(w.ID, line)
	if err != nil {
		f.Close()
		return err
	}
	for k, v := range agentEnv {
		env[k] = v
	}
	// The shell waits on a pipe (fd 3) until the lead has saved its pid:
	// a lead that dies before that closes the pipe, and the shell exits
	// without starting the agent. So no agent ever runs unrecorded.
	gateR, gateW, err := os.Pipe()
	if err != nil {
		f.Close()
		return err
	}
	cmdline = "read -r _ <&3 || exit 97; exec 3<&-; " + cmdline
	if l.cfg.BinDir != "" {
		cmdline = "export PATH=" + fleet.ShellQuote(l.cfg.BinDir) + ":\"$PATH\"; " + cmdline
	}
	cmd := exec.Command("sh", "-c", cmdline)
	cmd.Dir = l.workDir(w.ID)
	cmd.Env = os.Environ()
	for k, v := range env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	cmd.Env = append(cmd.Env, "ORCH_PLAN="+plan, "ORCH_ATTEMPT="+strconv.Itoa(attempt), "ORCH_PROMPT="+line)
	// The file itself, not a pipe to this process: a pipe would break (and
	// SIGPIPE the agent) if orch serve died while the agent works on.
	cmd.Stdout, cmd.Stderr = f, f
	// Its own process group: a Ctrl-C meant for orch serve does not stop
	// the agent, which, like one in a pane, outlives a lead loop restart.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.WaitDelay = 2 * time.Second
	cmd.ExtraFiles = []*os.File{gateR}
	err = cmd.Start()
	f.Close() // the child has its own descriptors
	gateR.Close()
	if err != nil {
		gateW.Close()
		return err
	}
	l.fault("headless-started")
	n := exitNote{worker: w.ID, plan: plan, attempt: attempt, pid: cmd.Process.Pid}
	w.PID = cmd.Process.Pid
	err = l.save()
	if err == nil {
		_, err = gateW.Write([]byte("go\n"))
	}
	gateW.Close() // on error: the shell reads end of file and exits, no agent started
	if err != nil {
		w.PID = 0
		go func() { cmd.Wait() }() // reaped; its exit names a pid no worker holds
		return fmt.Errorf("headless start: %w", err)
	}
	l.log.Info("headless agent started", "plan", plan, "worker", w.ID, "pid", w.PID, "log", logPath)
	go func() {
		err := cmd.Wait() // the process's exit is the event; nothing is polled
		n.how = "exit status 0"
		var ee *exec.ExitError
		switch {
		case errors.As(err, &ee):
			if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
				n.how = "killed by signal " + ws.Signal().String()
			} else {
				n.how = fmt.Sprintf("exit status %d", ee.ExitCode())
			}
		case err != nil:
			n.how = err.Error()
		}
		send(l, l.exits, n)
	}()
	return nil
}

// reportExit puts an exited record into the stream, on the loop's
// goroutine once it runs: behind everything the process sent before it
// ended, including a done it had to spool (the spool is read first: its
// file may be waiting for the watcher). Its id is derived from the process
// and the attempt, so reporting it twice has one effect.
func (l *Loop) reportExit(n exitNote) {
	l.ingestSpool()
	if n.plan != "" {
		capLog(filepath.Join(l.orchDir, orchdir.Logs, fleet.LogName(n.plan, n.attempt)))
	}
	l.publishExit(n)
}

// reportExits publishes the exits found at start, their logs cut first
// (the lead that would have cut them was not there).
func (l *Loop) reportExits() {
	pending := l.pendingExits
	l.pendingExits = nil
	for _, n := range pending {
		if n.plan != "" {
			capLog(filepath.Join(l.orchDir, orchdir.Logs, fleet.LogName(n.plan, n.attempt)))
		}
		l.publishExit(n)
	}
}

func (l *Loop) publishExit(n exitNote) {
	sum := sha256.Sum256([]byte(fmt.Sprintf("exited %s %s %d %d", n.worker, n.plan, n.attempt, n.pid)))
	e := event.Event{V: event.Version, ID: hex.EncodeToString(sum[:16]), Kind: event.Exited, Worker: n.worker, Plan: n.plan,
		Attempt: n.attempt, Status: fmt.Sprintf("process %d %s", n.pid, n.how), Host: hostname(), Time: time.Now().UTC()}
	l.publishRecord(e)
}

// exited handles a headless process's end: the worker is free again, and a
// plan it still held (no done came first) failed.
func (l *Loop) exited(e event.Event) (*event.Callback, string) {
	w := l.st.Worker(e.Worker)
	if w == nil || !w.Headless {
		return nil, "ignored: not a headless worker"
	}
	pid := 0
	fmt.Sscanf(e.Status, "process %d", &pid)
	if w.PID != pid {
		return nil, "ignored: an earlier process of " + w.ID
	}
	now := l.cfg.Now().UTC()
	w.PID, w.Reason, w.Since = 0, "", now
	if w.State != state.WorkerDead {
		w.State = state.WorkerIdle
	}
	p := l.st.Plans[e.Plan]
	if p == nil || w.Plan != e.Plan || p.Worker != w.ID || p.Attempts != e.Attempt ||
		(p.State != state.PlanDispatched && p.State != state.PlanRunning && p.State != state.PlanNeedsInput) {
		w.Plan = ""
		return nil, "worker free: " + e.Status
	}
	w.Plan = ""
	log := filepath.Join(orchdir.Name, orchdir.Logs, fleet.LogName(p.Name, p.Attempts))
	if strings.Contains(e.Status, unknownStatus) {
		// It ended while no lead loop watched it as its parent: stopped by
		// orch down, killed with the tmux server's machine, or crashed. Like
		// a lost pane: the plan goes out once more, then fails.
		return l.requeueOrFail(e, w, p, fmt.Sprintf("headless process %s without orch-notify done (output: %s)", strings.TrimPrefix(e.Status, fmt.Sprintf("process %d ", pid)), log))
	}
	how := strings.TrimPrefix(e.Status, fmt.Sprintf("process %d ", pid))
	if p.State == state.PlanNeedsInput {
		// The lead was told already why the run stopped (its turn ended
		// without done, or it asked for a permission nobody can give a
		// headless run): the exit ends the plan without waking it again.
		p.State, p.Reason, p.Updated = state.PlanFailed, fmt.Sprintf("%s; headless agent ended (%s; output: %s)", p.Reason, how, log), now
		l.log.Warn("headless agent ended after it stopped without done", "plan", p.Name, "worker", w.ID, "how", e.Status)
		return l.verificationFailed(p, nil), "failed, lead already told: " + p.Reason
	}
	said := ""
	if how != "exit status 0" {
		if last := lastLogLine(filepath.Join(l.orchDir, orchdir.Logs, fleet.LogName(p.Name, p.Attempts))); last != "" {
			said = ": " + last
		}
	}
	p.State, p.Reason, p.Updated = state.PlanFailed, fmt.Sprintf("headless agent %s without orch-notify done%s (output: %s)", how, said, log), now
	l.log.Warn("headless agent ended without done", "plan", p.Name, "worker", w.ID, "how", e.Status)
	return l.verificationFailed(p, event.NewCallback(event.CallbackFailed, e.ID, p.Name, w.ID, p.Reason, "")), "failed: " + p.Reason
}

// lastLogLine is what a headless run's output (its last 4 KiB) says
// last, cleaned for a reason: the message of the last API error document
// ({"error":{...,"message":...}}) printed, or else its last line that is
// not a stack frame, a lone brace or Node's "[object Object]".
func lastLogLine(path string) string {
	f, err := os.Open(path)
	if err != nil {
		return ""
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return ""
	}
	buf := make([]byte, min(fi.Size(), 4096))
	if _, err := f.ReadAt(buf, fi.Size()-int64(len(buf))); err != nil {
		return ""
	}
	lines := strings.Split(string(buf), "\n")
	for i := len(lines) - 1; i >= 0; i-- {
		if msg := apiErrorIn(lines[i]); msg != "" {
			return event.Clean(msg)
		}
	}
	for i := len(lines) - 1; i >= 0; i-- {
		l := strings.TrimSpace(lines[i])
		if l == "" || strings.HasPrefix(l, "at ") || strings.Trim(l, "{}[](),;") == "" || strings.HasSuffix(l, "[object Object]") {
			continue
		}
		return event.Clean(l)
	}
	return ""
}

// apiErrorIn returns "<type or status>: <message>" of an API error
// document in line (OpenAI's and Google's shapes), or "".
func apiErrorIn(line string) string {
	i := strings.Index(line, `{"error":`)
	if i < 0 {
		return ""
	}
	var doc struct {
		Error struct {
			Type    string `json:"type"`
			Status  string `json:"status"`
			Message string `json:"message"`
		} `json:"error"`
	}
	if json.NewDecoder(strings.NewReader(line[i:])).Decode(&doc) != nil || doc.Error.Message == "" {
		return ""
	}
	if kind := cmp.Or(doc.Error.Type, doc.Error.Status); kind != "" {
		return kind + ": " + doc.Error.Message
	}
	return doc.Error.Message
}

// capLog cuts a finished run's log to MaxLog: its first and last halves,
// with a line saying how much was left out between them.
func capLog(path string) error {
	fi, err := os.Stat(path)
	if err != nil || fi.Size() <= MaxLog {
		return err
	}
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	half := int64(MaxLog / 2)
	head := make([]byte, half)
	tail := make([]byte, half)
	if _, err := f.ReadAt(head, 0); err != nil {
		return err
	}
	if _, err := f.ReadAt(tail, fi.Size()-half); err != nil {
		return err
	}
	var b bytes.Buffer
	b.Write(head)
	fmt.Fprintf(&b, "\n…[%d bytes of output left out]…\n", fi.Size()-2*half)
	b.Write(tail)
	return atomicfile.Write(path, b.Bytes(), 0o600)
}
