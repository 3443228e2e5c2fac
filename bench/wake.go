package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/orch-dev/orch/broker"
	"github.com/orch-dev/orch/event"
	"github.com/orch-dev/orch/inbox"
	"github.com/orch-dev/orch/internal/orchdir"
	"github.com/orch-dev/orch/leadagent"
	"github.com/orch-dev/orch/notify"
	"github.com/orch-dev/orch/plans"
)

// This file is the wake section: how long a worker's done takes to reach
// an agent lead through the hooks orch lead install claude writes, beside
// the seed's path (tmux send-keys of the line into the lead's pane), in
// the same run. The lead is played by the bench: it runs the installed
// hook commands exactly as Claude Code runs them (/bin/sh -c <command>
// from .claude/settings.local.json, the hook's JSON on stdin,
// CLAUDE_PROJECT_DIR set, stderr a pipe it keeps reading), against a real
// orch serve process.

const wakePlan = "wake"

// wakeResult is the wake section's figures.
type wakeResult struct {
	N, Warm int
	Step    time.Duration // mid-turn: time from the done's exec to each of the lead's steps
	Load    string        // load average before the timed rounds
	LoadEnd string

	// Idle lead: a Stop hook armed and waiting; all from orch-notify done's exec.
	NotifyExit dist // orch-notify reaped (its event acked)
	Callback   dist // the lead loop's callback seen by a core subscriber
	HookLine   dist // the line read from the hook's stderr
	HookExit   dist // the hook reaped, exit 2, the line on its stderr
	CbToExit   dist // callback seen → hook reaped

	// The seed's path, one sample after each idle round: tmux send-keys of
	// the same line into a pane running cat, seen on a control-mode client.
	KeysExit, KeysAppear, KeysRead dist

	// Mid-turn lead: no hook waiting; a PostToolUse hook at each step.
	MidCallback   dist // done exec → callback seen (the earliest a step can carry it)
	MidHookOwn    dist // the step's hook, its exec → reaped with the line in its output
	MidDoneToExit dist // done exec → that hook reaped
	MidEmpty      int  // steps that came before the callback and carried nothing
}

// wakeRig is orch serve with a Claude Code lead installed, the bench's
// subscriptions on its broker, and the send-keys pane.
type wakeRig struct {
	root, orchDir, notifyBin string
	env                      []string
	stopCmd, stepCmd         string // the installed hook commands
	lines                    chan logLine
	nc                       *nats.Conn
	cbs                      chan cbSeen
	pulls                    chan time.Time
	workerEnv                []string
	keys                     *keysPane
	ctl                      *ctlClient
	closers                  []func()
}

type cbSeen struct {
	line string
	at   time.Time
}

func (w *wakeRig) close() {
	for i := len(w.closers) - 1; i >= 0; i-- {
		w.closers[i]()
	}
}

func wake(ctx context.Context, o options, root, dir string) (res wakeResult, err error) {
	res.N, res.Warm, res.Step = o.wakeN, min(o.warmup, 5), o.wakeStep
	w, err := startWakeRig(ctx, o, root, dir)
	if err != nil {
		return res, err
	}
	defer w.close()

	var notifyExit, cb, hookLine, hookExit, cbToExit, keysExit, keysAppear, keysRead []time.Duration
	logf("wake: idle lead, %d rounds (a Stop hook waiting; then one tmux send-keys of the same line)", o.wakeN)
	for r := 1; r <= res.Warm+o.wakeN; r++ {
		if r == res.Warm+1 {
			res.Load = loadAvg()
		}
		s, err := w.idleRound(ctx, r)
		if err != nil {
			return res, fmt.Errorf("idle round %d: %w", r, err)
		}
		k, err := w.keysRound(ctx, r)
		if err != nil {
			return res, fmt.Errorf("send-keys round %d: %w", r, err)
		}
		if r <= res.Warm {
			continue
		}
		notifyExit = append(notifyExit, s.notifyExit)
		cb = append(cb, s.callback)
		hookLine = append(hookLine, s.line)
		hookExit = append(hookExit, s.exit)
		cbToExit = append(cbToExit, s.exit-s.callback)
		keysExit, keysAppear, keysRead = append(keysExit, k.exit), append(keysAppear, k.appear), append(keysRead, k.read)
	}
	var midCb, midOwn, midExit []time.Duration
	logf("wake: mid-turn lead, %d rounds (a PostToolUse hook %v after the done, and every %v after until it carries the line)", o.wakeN, o.wakeStep, o.wakeStep)
	for r := 1; r <= res.Warm+o.wakeN; r++ {
		s, err := w.midRound(ctx, 100000+r, o.wakeStep)
		if err != nil {
			return res, fmt.Errorf("mid-turn round %d: %w", r, err)
		}
		if r <= res.Warm {
			continue
		}
		res.MidEmpty += s.empty
		midCb, midOwn, midExit = append(midCb, s.callback), append(midOwn, s.own), append(midExit, s.exit)
	}
	res.LoadEnd = loadAvg()
	res.NotifyExit, res.Callback, res.HookLine, res.HookExit, res.CbToExit = distOf(notifyExit), distOf(cb), distOf(hookLine), distOf(hookExit), distOf(cbToExit)
	res.KeysExit, res.KeysAppear, res.KeysRead = distOf(keysExit), distOf(keysAppear), distOf(keysRead)
	res.MidCallback, res.MidHookOwn, res.MidDoneToExit = distOf(midCb), distOf(midOwn), distOf(midExit)
	return res, nil
}

func startWakeRig(ctx context.Context, o options, root, dir string) (w *wakeRig, err error) {
	w = &wakeRig{}
	defer func() {
		if err != nil {
			w.close()
		}
	}()
	bin := filepath.Join(dir, "wake-bin")
	build := exec.CommandContext(ctx, "go", "build", "-o", bin+string(filepath.Separator), "./cmd/orch", "./cmd/orch-notify")
	build.Dir = root
	build.Env = append(os.Environ(), "CGO_ENABLED=0") // as the README builds them
	if out, err := build.CombinedOutput(); err != nil {
		return w, fmt.Errorf("CGO_ENABLED=0 go build ./cmd/orch ./cmd/orch-notify: %v\n%s", err, out)
	}
	w.notifyBin = filepath.Join(bin, "orch-notify")
	socket := fmt.Sprintf("orch-bench-%d-wake", os.Getpid())
	w.env = append(cleanEnv(), "PATH="+bin+string(os.PathListSeparator)+os.Getenv("PATH"), "ORCH_TMUX_SOCKET="+socket)
	if w.root, err = makeRepo(ctx, filepath.Join(dir, "wake"), []string{wakePlan}); err != nil {
		return w, err
	}
	w.orchDir = orchdir.Of(w.root)
	install := exec.CommandContext(ctx, filepath.Join(bin, "orch"), "lead", "install", "claude")
	install.Dir, install.Env = w.root, w.env
	if out, err := install.CombinedOutput(); err != nil {
		return w, fmt.Errorf("orch lead install claude: %v\n%s", err, out)
	}
	if w.stopCmd, err = installedHook(w.root, leadagent.EventStop); err != nil {
		return w, err
	}
	if w.stepCmd, err = installedHook(w.root, leadagent.EventPostTool); err != nil {
		return w, err
	}

	serve := exec.Command(filepath.Join(bin, "orch"), "serve", "--workers", "1", "--agent", "cat", "--isolation", "shared")
	serve.Dir, serve.Env = w.root, w.env
	serveErr, err := serve.StderrPipe()
	if err != nil {
		return w, err
	}
	if err := serve.Start(); err != nil {
		return w, err
	}
	w.lines = make(chan logLine, 4096)
	go func() {
		sc := bufio.NewScanner(serveErr)
		for sc.Scan() {
			if o.verbose {
				fmt.Fprintln(os.Stderr, "serve:", sc.Text())
			}
			w.lines <- parseLogLine(sc.Text())
		}
		close(w.lines)
	}()
	w.closers = append(w.closers, func() {
		serve.Process.Signal(syscall.SIGTERM)
		for range w.lines {
		}
		serve.Wait()
		killTmux(socket)
	})
	if _, err := waitLine(ctx, w.lines, 30*time.Second, func(l logLine) bool { return l.Msg == "lead loop ready" }); err != nil {
		return w, fmt.Errorf("orch serve: %w", err)
	}
	ep, err := notify.ReadEndpoint(w.orchDir)
	if err != nil {
		return w, err
	}
	w.workerEnv = workerEnv(ep.URL, w.orchDir, benchWorker, ep.Prefix)
	cfg, err := notify.LeadConfig(w.orchDir)
	if err != nil {
		return w, err
	}
	if w.nc, err = notify.Connect(cfg, "bench-wake"); err != nil {
		return w, err
	}
	w.closers = append(w.closers, w.nc.Close)
	// The callbacks as the lead loop publishes them (to the stream, which
	// the lead's inbox consumer reads), seen by a core subscriber.
	w.cbs = make(chan cbSeen, 64)
	if _, err := w.nc.Subscribe(cfg.Prefix+".cb.>", func(m *nats.Msg) {
		at := time.Now()
		if cb, err := event.ParseCallback(m.Data); err == nil {
			select {
			case w.cbs <- cbSeen{line: cb.Line, at: at}:
			default:
			}
		}
	}); err != nil {
		return w, err
	}
	// A waiting hook is armed once its pull request for the inbox's
	// consumer reaches the server: a core subscriber on the JetStream API
	// subject sees that request too.
	rec, err := inbox.LoadRecord(w.orchDir, "claude")
	if err != nil {
		return w, err
	}
	w.pulls = make(chan time.Time, 64)
	if _, err := w.nc.Subscribe("$JS.API.CONSUMER.MSG.NEXT."+broker.StreamName+"."+rec.Consumer, func(*nats.Msg) {
		select {
		case w.pulls <- time.Now():
		default:
		}
	}); err != nil {
		return w, err
	}
	if err := w.nc.Flush(); err != nil {
		return w, err
	}
	if w.keys, err = startKeysPane(ctx, dir); err != nil {
		return w, fmt.Errorf("send-keys target: %w", err)
	}
	w.closers = append(w.closers, w.keys.close)
	if w.ctl, err = attachControl(w.keys.socket, "keys"); err != nil {
		return w, err
	}
	w.closers = append(w.closers, w.ctl.close)
	return w, nil
}

// installedHook is the command orch lead install wrote for event, read
// back from the settings file as Claude Code reads it.
func installedHook(root, ev string) (string, error) {
	data, err := os.ReadFile(filepath.Join(root, leadagent.SettingsPath))
	if err != nil {
		return "", err
	}
	var s struct {
		Hooks map[string][]struct {
			Hooks []struct {
				Command string `json:"command"`
			} `json:"hooks"`
		} `json:"hooks"`
	}
	if err := json.Unmarshal(data, &s); err != nil {
		return "", fmt.Errorf("%s: %w", leadagent.SettingsPath, err)
	}
	for _, g := range s.Hooks[ev] {
		for _, h := range g.Hooks {
			if leadagent.IsOrchHook(h.Command) {
				return h.Command, nil
			}
		}
	}
	return "", fmt.Errorf("%s: no orch hook for %s", leadagent.SettingsPath, ev)
}

// dispatch writes a new RESULT.md and dispatches the plan to w1 again,
// returning once orch serve has logged the dispatch (untimed).
func (w *wakeRig) dispatch(ctx context.Context, r int) error {
	if err := os.WriteFile(plans.ResultPath(w.root, wakePlan), []byte(fmt.Sprintf("# wake, round %d\n\nok\n", r)), 0o644); err != nil {
		return err
	}
	cmd := exec.CommandContext(ctx, filepath.Join(filepath.Dir(w.notifyBin), "orch"), "dispatch", wakePlan, "--to", benchWorker)
	cmd.Dir, cmd.Env = w.root, w.env
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("orch dispatch: %v: %s", err, out)
	}
	l, err := waitLine(ctx, w.lines, 15*time.Second, func(l logLine) bool {
		return l.Attrs["plan"] == wakePlan && (l.Msg == "dispatched" || l.Msg == "refused" || strings.HasPrefix(l.Msg, "dispatch failed"))
	})
	if err != nil {
		return fmt.Errorf("dispatch: %w", err)
	}
	if l.Msg != "dispatched" {
		return fmt.Errorf("dispatch: orch serve said %s %v", l.Msg, l.Attrs)
	}
	return nil
}

// done runs orch-notify done as the worker pane would, and returns when
// it started and when it was reaped.
func (w *wakeRig) done(status string) (start, exit time.Time, err error) {
	cmd := exec.Command(w.notifyBin, "done", wakePlan, status)
	cmd.Env, cmd.Dir = w.workerEnv, w.root
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	start = time.Now()
	err = cmd.Run()
	exit = time.Now()
	if err != nil || strings.Contains(stderr.String(), "spool") {
		return start, exit, fmt.Errorf("orch-notify done: %v %s", err, strings.TrimSpace(stderr.String()))
	}
	return start, exit, nil
}

// awaitCallback returns when the callback carrying line was seen.
func (w *wakeRig) awaitCallback(ctx context.Context, line string) (time.Time, error) {
	t := time.NewTimer(15 * time.Second) // a deadline, not a poll
	defer t.Stop()
	for {
		select {
		case c := <-w.cbs:
			if c.line == line {
				return c.at, nil
			}
		case <-t.C:
			return time.Time{}, fmt.Errorf("no callback %q within 15s", line)
		case <-ctx.Done():
			return time.Time{}, ctx.Err()
		}
	}
}

type idleSample struct{ notifyExit, callback, line, exit time.Duration }

// idleRound arms the lead's Stop hook, waits until its pull request is
// at the server, runs orch-notify done and times the hook's exit.
func (w *wakeRig) idleRound(ctx context.Context, r int) (idleSample, error) {
	var s idleSample
	status := fmt.Sprintf("round %d ok", r)
	line := "WORKER-DONE " + wakePlan + ": " + status
	if err := w.dispatch(ctx, r); err != nil {
		return s, err
	}
	drainAll(w.pulls)
	h, err := w.startHook(leadagent.EventStop, w.hookInput(leadagent.EventStop))
	if err != nil {
		return s, err
	}
	defer h.kill()
	if _, err := nextTime(ctx, w.pulls, "pull request from the waiting hook"); err != nil {
		return s, err
	}
	drainAll(w.cbs)
	start, notified, err := w.done(status)
	if err != nil {
		return s, err
	}
	cbAt, err := w.awaitCallback(ctx, line)
	if err != nil {
		return s, err
	}
	if err := h.wait(ctx, 15*time.Second); err != nil {
		return s, err
	}
	if h.code != 2 {
		return s, fmt.Errorf("the Stop hook exited %d, want 2; stderr: %s", h.code, h.stderr())
	}
	lineAt, ok := h.lineAt(line)
	if !ok {
		return s, fmt.Errorf("the Stop hook exited 2 without %q on stderr: %s", line, h.stderr())
	}
	s.notifyExit, s.callback, s.line, s.exit = notified.Sub(start), cbAt.Sub(start), lineAt.Sub(start), h.exitAt.Sub(start)
	return s, nil
}

type keysSample struct{ exit, appear, read time.Duration }

// keysRound types the round's line into the cat pane with tmux send-keys
// and times, on the control-mode client, the line's echo (it appears in
// the pane) and cat's copy of it (the program in the pane read it).
func (w *wakeRig) keysRound(ctx context.Context, r int) (keysSample, error) {
	var s keysSample
	line := fmt.Sprintf("WORKER-DONE %s: round %d ok", wakePlan, r)
	w.ctl.drain()
	cmd := exec.Command("tmux", "-L", w.keys.socket, "send-keys", "-t", w.keys.pane, line, "Enter")
	cmd.Env = cleanEnv()
	start := time.Now()
	out, err := cmd.CombinedOutput()
	exit := time.Now()
	if err != nil {
		return s, fmt.Errorf("tmux send-keys: %v %s", err, out)
	}
	appear, read, err := w.ctl.await(ctx, w.keys.pane, line)
	if err != nil {
		return s, err
	}
	s.exit, s.appear, s.read = exit.Sub(start), appear.Sub(start), read.Sub(start)
	return s, nil
}

type midSample struct {
	callback, own, exit time.Duration
	empty               int
}

// midRound runs orch-notify done while no hook waits (the lead is
// mid-turn), then plays the lead's steps: a PostToolUse hook step after
// the done's exec, and every step after that, until one hands the line
// over as context.
func (w *wakeRig) midRound(ctx context.Context, r int, step time.Duration) (midSample, error) {
	var s midSample
	status := fmt.Sprintf("round %d ok", r)
	line := "WORKER-DONE " + wakePlan + ": " + status
	if err := w.dispatch(ctx, r); err != nil {
		return s, err
	}
	drainAll(w.cbs)
	start, _, err := w.done(status)
	if err != nil {
		return s, err
	}
	for k := 1; ; k++ {
		if k > 40 {
			return s, fmt.Errorf("%d steps and none carried %q", k-1, line)
		}
		// The lead's next step at a set time after the done: one timer per
		// step, as a model's turn would reach it, not a poll.
		t := time.NewTimer(time.Until(start.Add(time.Duration(k) * step)))
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return s, ctx.Err()
		}
		h, err := w.startHook(leadagent.EventPostTool, w.hookInput(leadagent.EventPostTool))
		if err != nil {
			return s, err
		}
		err = h.wait(ctx, 30*time.Second)
		h.kill()
		if err != nil {
			return s, err
		}
		if h.code != 0 {
			return s, fmt.Errorf("the PostToolUse hook exited %d; stderr: %s", h.code, h.stderr())
		}
		out := bytes.TrimSpace(h.stdout())
		if len(out) == 0 {
			s.empty++
			continue
		}
		var ans struct {
			Out struct {
				Context string `json:"additionalContext"`
			} `json:"hookSpecificOutput"`
		}
		if err := json.Unmarshal(out, &ans); err != nil || !strings.Contains(ans.Out.Context, line) {
			return s, fmt.Errorf("the PostToolUse hook printed %q, want context with %q", out, line)
		}
		s.own, s.exit = h.exitAt.Sub(h.start), h.exitAt.Sub(start)
		break
	}
	cbAt, err := w.awaitCallback(ctx, line)
	if err != nil {
		return s, err
	}
	s.callback = cbAt.Sub(start)
	return s, nil
}

// hookInput is the JSON Claude Code (2.1) writes on a hook's stdin.
func (w *wakeRig) hookInput(ev string) []byte {
	in := map[string]any{
		"session_id":      "00000000-0000-4000-8000-0000000be0c4",
		"transcript_path": filepath.Join(w.root, ".bench-transcript.jsonl"),
		"cwd":             w.root,
		"permission_mode": "default",
		"hook_event_name": ev,
	}
	switch ev {
	case leadagent.EventStop:
		in["stop_hook_active"] = false
	case leadagent.EventPostTool:
		in["tool_name"] = "Bash"
		in["tool_input"] = map[string]any{"command": "orch status", "description": "Show the fleet"}
		in["tool_response"] = map[string]any{"stdout": "w1 idle", "stderr": "", "interrupted": false, "isImage": false}
	}
	data, _ := json.Marshal(in)
	return data
}

// hookProc is one hook command running as Claude Code runs it.
type hookProc struct {
	cmd           *exec.Cmd
	start, exitAt time.Time
	code          int
	exited        chan struct{}
	readers       sync.WaitGroup

	mu        sync.Mutex
	errChunks []chunk
	out       bytes.Buffer
}

type chunk struct {
	at   time.Time
	data string
}

// startHook starts the installed hook for ev: /bin/sh -c <command> in the
// project directory with CLAUDE_PROJECT_DIR, input on stdin (then
// closed), stdout and stderr pipes that the bench reads to the end.
func (w *wakeRig) startHook(ev string, input []byte) (*hookProc, error) {
	command := w.stepCmd
	if ev == leadagent.EventStop {
		command = w.stopCmd
	}
	h := &hookProc{exited: make(chan struct{})}
	h.cmd = exec.Command("/bin/sh", "-c", command)
	h.cmd.Dir = w.root
	h.cmd.Env = append(append([]string(nil), w.env...), "CLAUDE_PROJECT_DIR="+w.root)
	h.cmd.Stdin = bytes.NewReader(input)
	er, ew, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	or, ow, err := os.Pipe()
	if err != nil {
		er.Close()
		ew.Close()
		return nil, err
	}
	h.cmd.Stderr, h.cmd.Stdout = ew, ow
	h.start = time.Now()
	err = h.cmd.Start()
	ew.Close()
	ow.Close()
	if err != nil {
		er.Close()
		or.Close()
		return nil, err
	}
	h.readers.Add(2)
	go func() {
		defer h.readers.Done()
		defer er.Close()
		buf := make([]byte, 64*1024)
		for {
			n, err := er.Read(buf)
			at := time.Now()
			if n > 0 {
				h.mu.Lock()
				h.errChunks = append(h.errChunks, chunk{at: at, data: string(buf[:n])})
				h.mu.Unlock()
			}
			if err != nil {
				return
			}
		}
	}()
	go func() {
		defer h.readers.Done()
		defer or.Close()
		b, _ := io.ReadAll(or)
		h.mu.Lock()
		h.out.Write(b)
		h.mu.Unlock()
	}()
	go func() {
		err := h.cmd.Wait()
		h.exitAt = time.Now()
		h.code = 0
		if ee := (*exec.ExitError)(nil); errors.As(err, &ee) {
			h.code = ee.ExitCode()
		} else if err != nil {
			h.code = -1
		}
		h.readers.Wait()
		close(h.exited)
	}()
	return h, nil
}

func (h *hookProc) wait(ctx context.Context, timeout time.Duration) error {
	t := time.NewTimer(timeout) // a deadline, not a poll
	defer t.Stop()
	select {
	case <-h.exited:
		return nil
	case <-t.C:
		return fmt.Errorf("the hook (%s) did not exit within %v; stderr: %s", strings.Join(h.cmd.Args, " "), timeout, h.stderr())
	case <-ctx.Done():
		return ctx.Err()
	}
}

// kill ends the hook if it still runs, and waits for it.
func (h *hookProc) kill() {
	select {
	case <-h.exited:
		return
	default:
	}
	h.cmd.Process.Signal(syscall.SIGTERM)
	<-h.exited
}

func (h *hookProc) stderr() string {
	h.mu.Lock()
	defer h.mu.Unlock()
	var b strings.Builder
	for _, c := range h.errChunks {
		b.WriteString(c.data)
	}
	return b.String()
}

func (h *hookProc) stdout() []byte {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]byte(nil), h.out.Bytes()...)
}

// lineAt is when the full line (and its newline) had been read from the
// hook's stderr.
func (h *hookProc) lineAt(line string) (time.Time, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	var b strings.Builder
	for _, c := range h.errChunks {
		b.WriteString(c.data)
		if strings.Contains(b.String(), line+"\n") {
			return c.at, true
		}
	}
	return time.Time{}, false
}

func drainAll[T any](ch chan T) {
	for {
		select {
		case <-ch:
		default:
			return
		}
	}
}

// ctlClient is a tmux control-mode client (tmux -C attach) whose %output
// notifications carry everything a pane writes, as the server reads it.
type ctlClient struct {
	cmd    *exec.Cmd
	in     io.Closer
	chunks chan paneOut
}

type paneOut struct {
	pane, data string
	at         time.Time
}

func attachControl(socket, session string) (*ctlClient, error) {
	c := &ctlClient{chunks: make(chan paneOut, 4096)}
	c.cmd = exec.Command("tmux", "-L", socket, "-C", "attach-session", "-t", session)
	c.cmd.Env = cleanEnv()
	in, err := c.cmd.StdinPipe() // open for as long as the client should stay
	if err != nil {
		return nil, err
	}
	out, err := c.cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := c.cmd.Start(); err != nil {
		return nil, err
	}
	c.in = in
	go func() {
		sc := bufio.NewScanner(out)
		sc.Buffer(make([]byte, 64*1024), 1<<20)
		for sc.Scan() {
			at := time.Now()
			rest, ok := strings.CutPrefix(sc.Text(), "%output ")
			if !ok {
				continue
			}
			pane, data, _ := strings.Cut(rest, " ")
			select {
			case c.chunks <- paneOut{pane: pane, data: unescapeControl(data), at: at}:
			default:
			}
		}
		close(c.chunks)
	}()
	return c, nil
}

func (c *ctlClient) close() {
	c.in.Close()
	c.cmd.Wait()
}

func (c *ctlClient) drain() { drainAll(c.chunks) }

// await returns when pane's output holds line (its echo: the line is in
// the pane) and then line again after the Enter's newline (cat read it).
func (c *ctlClient) await(ctx context.Context, pane, line string) (appear, read time.Time, err error) {
	t := time.NewTimer(5 * time.Second) // a deadline, not a poll
	defer t.Stop()
	var b strings.Builder
	for {
		select {
		case o, ok := <-c.chunks:
			if !ok {
				return appear, read, errors.New("tmux control client exited")
			}
			if o.pane != pane {
				continue
			}
			b.WriteString(o.data)
			s := b.String()
			if appear.IsZero() && strings.Contains(s, line) {
				appear = o.at
			}
			if strings.Contains(s, line+"\r\n"+line) {
				return appear, o.at, nil
			}
		case <-t.C:
			return appear, read, fmt.Errorf("%q not seen twice in pane %s within 5s (seen: %q)", line, pane, b.String())
		case <-ctx.Done():
			return appear, read, ctx.Err()
		}
	}
}

// unescapeControl undoes control mode's escaping of %output data: a byte
// below space, or a backslash, is written as a backslash and three octal
// digits.
func unescapeControl(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			if v, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(v))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}
