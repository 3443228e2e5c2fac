package fleet

import (
	"bytes"
	"cmp"
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
	"github.com/orch-dev/orch/internal/atomicfile"
	"github.com/orch-dev/orch/internal/orchdir"
	"github.com/orch-dev/orch/internal/state"
)

// The headless backend: no tmux. Each plan runs the agent's headless
// command (the dispatch line as its prompt) as a child process in the
// worker's worktree. Its exit is reported on Exits, its log cut to MaxLog
// first; the loop puts it into the stream, behind the worker's own
// orch-notify done, and decides there. Its output goes to
// .orch/logs/<plan>-<attempt>.log, written by the process itself (so it
// survives a lead loop that dies).

// MaxLog bounds one headless run's captured output.
const MaxLog = 1 << 20

// UnknownStatus marks the exit of a process this fleet did not start.
const UnknownStatus = "status unknown: started by an earlier orch serve"

// UpHeadless records the headless workers w1..wN in st. A process
// recorded by an earlier lead loop (it outlives orch serve, like an agent
// in a pane) is watched again; if it is gone, its exit is kept for
// TakeExits. Plans whose pane or unstarted process was gone are kept for
// TakeLost. The caller saves st.
func (f *Fleet) UpHeadless(st *state.State, workers int) error {
	if f.cfg.Profile == nil && f.cfg.Agent == "" && len(f.agents) == 0 {
		return errors.New("headless: no agent command")
	}
	busy := false
	for _, w := range st.Workers {
		busy = busy || w.PID != 0 || w.Plan != ""
	}
	if err := f.adoptIsolation(st, busy); err != nil {
		return err
	}
	now := f.cfg.Now().UTC()
	for _, id := range f.LocalIDs(workers) {
		w := st.EnsureWorker(id, now)
		// Each plan starts a process of its own: a process of another
		// agent an earlier start left running ends its plan as it is.
		f.recordAgent(w)
		if w.Pane != "" {
			if f.PaneAlive(w) {
				return fmt.Errorf("headless: %s's tmux pane %s from an earlier orch serve is still there; stop that fleet with orch down first", id, w.Pane)
			}
			// The tmux fleet is gone; a plan its pane held is decided once
			// the events sent before are in (TakeLost).
			had := w.Pane
			w.Pane, w.Headless, w.Host = "", true, event.Hostname()
			if p := st.Plans[w.Plan]; p != nil && p.Preparing != 0 && p.Worker == id {
				continue // only its setup was running: it runs again (the loop's resumeSetups)
			}
			if w.Plan != "" {
				f.lost = append(f.lost, Lost{Worker: id, Pane: had, Plan: w.Plan, Attempt: attemptOf(st, w.Plan)})
				continue // decided by the lost record, once
			}
		}
		w.Headless, w.Host = true, event.Hostname()
		if w.State == state.WorkerDead {
			w.State, w.Reason = state.WorkerIdle, ""
		}
		if p := st.Plans[w.Plan]; p != nil && p.Preparing != 0 && p.Worker == w.ID {
			continue // its setup command runs again (the loop's resumeSetups); no process yet
		}
		if w.PID == 0 && w.Plan != "" {
			// Dispatched, but the lead stopped before it recorded the
			// process: that process never started its agent (it waits for
			// the lead's go first). The plan was lost; decided once the
			// events sent before are in.
			f.lost = append(f.lost, Lost{Worker: id, Plan: w.Plan, Attempt: attemptOf(st, w.Plan)})
			continue
		}
		if w.PID != 0 {
			f.rewatch(w, attemptOf(st, w.Plan))
		} else if w.Plan == "" {
			w.State = state.WorkerIdle
		}
	}
	sort.Slice(st.Workers, func(i, j int) bool { return state.WorkerNum(st.Workers[i].ID) < state.WorkerNum(st.Workers[j].ID) })
	return nil
}

// Rewatch watches worker id's process pid, running attempt of plan,
// started by an earlier run of this program (orch host after a restart):
// its end is reported on Exits, as one already ended is by TakeExits.
func (f *Fleet) Rewatch(id, plan string, attempt, pid int) {
	f.rewatch(&state.Worker{ID: id, Plan: plan, PID: pid}, attempt)
}

// rewatch watches a process recorded by an earlier lead loop. It is not
// this fleet's child, so its exit status is unknown: only that it ended.
func (f *Fleet) rewatch(w *state.Worker, attempt int) {
	n := Exit{Worker: w.ID, Plan: w.Plan, Attempt: attempt, PID: w.PID}
	fd, err := unix.PidfdOpen(w.PID, 0)
	if err == nil && !IsWorkerProcess(w.PID, w.ID, f.cfg.OrchDir) {
		unix.Close(fd) // the pid was reused by an unrelated process: ours is gone
		err = unix.ESRCH
	}
	if err != nil {
		// Reported by the loop, once the stream is caught up; the lead
		// that would have cut its log was not there.
		n.How = "ended while orch serve was down (" + UnknownStatus + ")"
		f.capLog(n)
		f.pending = append(f.pending, n)
		return
	}
	f.log.Info("headless process from an earlier orch serve still runs; watching it", "worker", w.ID, "pid", w.PID, "plan", w.Plan)
	go func() {
		defer unix.Close(fd)
		fds := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}, {Fd: int32(f.stopR), Events: unix.POLLIN}}
		for {
			_, err := unix.Poll(fds, -1) // -1: block until the process ends or the fleet closes
			if !errors.Is(err, unix.EINTR) {
				break
			}
		}
		if fds[0].Revents != 0 && fds[1].Revents == 0 {
			n.How = "ended (" + UnknownStatus + ")"
			f.capLog(n)
			send(f, f.exits, n)
		}
	}()
}

// Proc is a headless process that has started and waits at its gate: its
// agent runs only once Release says go, after the caller has recorded PID.
type Proc struct {
	PID  int
	f    *Fleet
	cmd  *exec.Cmd
	gate *os.File
	n    Exit
	log  string
}

// Spawn starts the agent's headless command for attempt of plan on worker
// id, with line as its prompt. The shell waits on a pipe (fd 3) until
// Release: a lead that dies before that closes the pipe, and the shell
// exits without starting the agent. So no agent ever runs unrecorded.
func (f *Fleet) Spawn(id, plan string, attempt int, line string) (*Proc, error) {
	env := f.workerEnv(id)
	logs := filepath.Join(f.cfg.OrchDir, orchdir.Logs)
	if err := os.MkdirAll(logs, 0o700); err != nil {
		return nil, err
	}
	logPath := filepath.Join(logs, LogName(plan, attempt))
	out, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o600)
	if err != nil {
		return nil, err
	}
	cmdline, agentEnv, err := f.headlessCommand(id, line)
	if err != nil {
		out.Close()
		return nil, err
	}
	for k, v := range agentEnv {
		env[k] = v
	}
	gateR, gateW, err := os.Pipe()
	if err != nil {
		out.Close()
		return nil, err
	}
	cmdline = "read -r _ <&3 || exit 97; exec 3<&-; " + cmdline
	if f.cfg.BinDir != "" {
		cmdline = "export PATH=" + ShellQuote(f.cfg.BinDir) + ":\"$PATH\"; " + cmdline
	}
	cmd := exec.Command("sh", "-c", cmdline)
	cmd.Dir = f.WorkDir(id)
	cmd.Env = os.Environ()
	for k, v := range env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	cmd.Env = append(cmd.Env, "ORCH_PLAN="+plan, "ORCH_ATTEMPT="+strconv.Itoa(attempt), "ORCH_PROMPT="+line)
	// The file itself, not a pipe to this process: a pipe would break (and
	// SIGPIPE the agent) if orch serve died while the agent works on.
	cmd.Stdout, cmd.Stderr = out, out
	// Its own process group: a Ctrl-C meant for orch serve does not stop
	// the agent, which, like one in a pane, outlives a lead loop restart.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Credential: f.User(id).Credential()}
	cmd.WaitDelay = 2 * time.Second
	cmd.ExtraFiles = []*os.File{gateR}
	err = cmd.Start()
	out.Close() // the child has its own descriptors
	gateR.Close()
	if err != nil {
		gateW.Close()
		return nil, err
	}
	f.cfg.Fault("headless-started")
	pid := cmd.Process.Pid
	return &Proc{PID: pid, f: f, cmd: cmd, gate: gateW, n: Exit{Worker: id, Plan: plan, Attempt: attempt, PID: pid}, log: logPath}, nil
}

// Abort closes the gate without a go: the shell reads end of file and
// exits, no agent started. Its exit names a pid no worker holds.
func (p *Proc) Abort() {
	p.gate.Close()
	go func() { p.cmd.Wait() }()
}

// Release lets the agent start, and reports its exit on Exits (the exit
// is the event; nothing is polled). An error means it did not start.
func (p *Proc) Release() error {
	_, err := p.gate.Write([]byte("go\n"))
	p.gate.Close()
	if err != nil {
		go func() { p.cmd.Wait() }() // reaped; its exit names a pid no worker holds
		return err
	}
	f := p.f
	f.log.Info("headless agent started", "plan", p.n.Plan, "worker", p.n.Worker, "pid", p.PID, "log", p.log)
	go func() {
		err := p.cmd.Wait()
		n := p.n
		n.How = "exit status 0"
		var ee *exec.ExitError
		switch {
		case errors.As(err, &ee):
			if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
				n.How = "killed by signal " + ws.Signal().String()
			} else {
				n.How = fmt.Sprintf("exit status %d", ee.ExitCode())
			}
		case err != nil:
			n.How = err.Error()
		}
		f.capLog(n)
		send(f, f.exits, n)
	}()
	return nil
}

// LogPath is the output file of attempt of plan.
func (f *Fleet) LogPath(plan string, attempt int) string {
	return filepath.Join(f.cfg.OrchDir, orchdir.Logs, LogName(plan, attempt))
}

// capLog cuts the log of a run that ended.
func (f *Fleet) capLog(n Exit) {
	if n.Plan != "" {
		capLog(f.LogPath(n.Plan, n.Attempt))
	}
}

// LastLogLine is what a headless run's output (its last 4 KiB) says
// last, cleaned for a reason: the message of the last API error document
// ({"error":{...,"message":...}}) printed, or else its last line that is
// not a stack frame, a lone brace or Node's "[object Object]".
func LastLogLine(path string) string {
	lines := tailLines(path, 4096)
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

// tailLines are the lines of the last n bytes of the file at path (the
// first may be cut), none when it cannot be read.
func tailLines(path string, n int64) []string {
	f, err := os.Open(path)
	if err != nil {
		return nil
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil
	}
	buf := make([]byte, min(fi.Size(), n))
	if _, err := f.ReadAt(buf, fi.Size()-int64(len(buf))); err != nil {
		return nil
	}
	return strings.Split(string(buf), "\n")
}

// AgentError is the error a headless agent's run ended with, as the agent
// itself stated it in its log's last lines, "" if it stated none: Claude
// Code's -p --output-format json result document with is_error set (its
// "result" is the message it also gives its StopFailure hook). A run
// whose exit is judged before that hook's event is failed with the same
// words as one whose hook came first.
func AgentError(path string) string {
	lines := tailLines(path, 16<<10)
	for i := len(lines) - 1; i >= 0; i-- {
		l := strings.TrimSpace(lines[i])
		if !strings.HasPrefix(l, "{") {
			continue
		}
		var doc struct {
			Type    string `json:"type"`
			IsError bool   `json:"is_error"`
			Result  string `json:"result"`
		}
		if json.Unmarshal([]byte(l), &doc) == nil && doc.Type == "result" && doc.IsError && doc.Result != "" {
			return event.Clean(doc.Result)
		}
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
