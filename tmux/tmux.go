// Package tmux is everything in orch that talks to tmux: it starts the
// session and panes the workers live in, types dispatch lines into them,
// reads their screens and tears them down. Every call goes through
// runner.Runner, so unit tests check the exact tmux arguments with the strict
// fake and behaviour tests drive a real server on a private socket.
//
// Panes are always addressed by id ("%3"), never by index, and sessions by
// tmux's exact-match form ("=name" or "=name:"), so that a prefix of another
// session's name can never be hit by accident.
package tmux

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/orch-dev/orch/internal/runner"
)

// MaxLineBytes is the longest line SendLine will type.
const MaxLineBytes = 4096

// Client runs tmux commands against one server.
type Client struct {
	// Socket, when non-empty, selects a private server with tmux -L.
	Socket string
	// Runner runs the tmux binary; tests swap in a fake.
	Runner runner.Runner
	// OnStuck, when set, is told of every command that did not answer
	// within its time (ErrNotAnswering). It runs on the caller's goroutine
	// and must not block.
	OnStuck func(error)
	// stuck is the first command's ErrNotAnswering: from then on every
	// command fails with it at once, without running tmux, so that a
	// server that stopped answering costs its callers one bounded wait,
	// not one per command (the loop's handlers run several in a row
	// before the decision is made). A new Client (orch serve started
	// again) asks tmux again.
	stuck atomic.Pointer[error]
}

// CommandTimeout bounds every tmux command whose context allows longer: a
// server that stops answering (stopped, wedged) must not hold its caller
// forever. A tmux command that takes this long is not slow, it is stuck.
const CommandTimeout = 10 * time.Second

// New returns a Client that runs the real tmux on the given socket name
// (empty for the user's default server).
func New(socket string) *Client {
	return &Client{Socket: socket, Runner: runner.OS{}}
}

// NotAnswering is the ErrNotAnswering of the first command that got no
// answer, nil while every command has had one.
func (c *Client) NotAnswering() error {
	if err := c.stuck.Load(); err != nil {
		return *err
	}
	return nil
}

// Pane is one row of ListPanes.
type Pane struct {
	ID             string // "%3"
	Title          string
	Dead           bool // the program exited and remain-on-exit kept the pane
	PID            int
	Index          int
	CurrentCommand string
	Worker         string // the pane's @orch_worker option, set by SetPaneOption
}

// WorkerOption is the pane user option that names the worker in a pane.
// Unlike the pane title, a program in the pane cannot change it.
const WorkerOption = "@orch_worker"

var paneIDRe = regexp.MustCompile(`^%[0-9]+$`)

// ValidPaneID reports whether id is a tmux pane id such as "%3".
func ValidPaneID(id string) bool { return paneIDRe.MatchString(id) }

// SessionName is the tmux session name for the repo at repoRoot: "orch-"
// plus the base name, with anything outside [A-Za-z0-9_-] turned into '-'
// because tmux reads '.' and ':' in targets as window and pane separators.
func SessionName(repoRoot string) string {
	base := filepath.Base(filepath.Clean(repoRoot))
	var b strings.Builder
	b.WriteString("orch-")
	for _, r := range base {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '_', r == '-':
			b.WriteRune(r)
		default:
			b.WriteByte('-')
		}
	}
	return b.String()
}

// run runs tmux -u [-L socket] args. The runner forces LC_ALL=C, under
// which tmux 3.3a assumes the client cannot show UTF-8 and prints '_' for
// every tab and non-ASCII byte in format output (list-panes -F); -u says the
// client does UTF-8, so titles and separators come back intact.
func (c *Client) run(ctx context.Context, args ...string) (string, error) {
	pre := []string{"-u"}
	if c.Socket != "" {
		pre = append(pre, "-L", c.Socket)
	}
	args = append(pre, args...)
	if err := c.stuck.Load(); err != nil {
		return "", fmt.Errorf("tmux %s not run: %w", args[len(pre)], *err)
	}
	ctx, cancel := context.WithTimeout(ctx, CommandTimeout)
	defer cancel()
	// A tmux client passes its stdout and stderr to the server: a server
	// that does not answer holds them open after the client is killed, and
	// the wait for the output ends only with WaitDelay.
	out, err := c.Runner.Run(ctx, runner.Cmd{Name: "tmux", Args: args, WaitDelay: time.Second})
	if err != nil && errors.Is(ctx.Err(), context.DeadlineExceeded) {
		// Killed at its deadline: the server did not answer (a process
		// killed by its context reports "signal: killed", not the
		// deadline, so the context is asked).
		err = fmt.Errorf("%w: tmux %s got no answer in time (%v)", ErrNotAnswering, args[len(pre)], err)
		first := err
		c.stuck.CompareAndSwap(nil, &first)
		if c.OnStuck != nil {
			c.OnStuck(err)
		}
	}
	return string(out), err
}

// NewSession starts a detached session running command in dir, with env
// added to its environment, and returns the id of its first pane.
func (c *Client) NewSession(ctx context.Context, name, dir string, env map[string]string, command string) (string, error) {
	if err := checkSession(name); err != nil {
		return "", fmt.Errorf("new session: %w", err)
	}
	envArgs, err := envFlags(env)
	if err != nil {
		return "", fmt.Errorf("new session %s: %w", name, err)
	}
	args := []string{"new-session", "-d", "-s", name, "-x", "200", "-y", "50", "-c", dir}
	args = append(args, envArgs...)
	args = append(args, "-P", "-F", "#{pane_id}")
	args = appendCommand(args, command)
	out, err := c.run(ctx, args...)
	if err != nil {
		return "", fmt.Errorf("new session %s: %w", name, err)
	}
	return paneIDFrom(out)
}

// SplitWindow adds a pane running command in dir to target (a session name
// or a pane id) and re-tiles the window so that many panes stay usable.
// It returns the new pane's id.
func (c *Client) SplitWindow(ctx context.Context, target, dir string, env map[string]string, command string) (string, error) {
	t, err := windowTarget(target)
	if err != nil {
		return "", fmt.Errorf("split window: %w", err)
	}
	envArgs, err := envFlags(env)
	if err != nil {
		return "", fmt.Errorf("split window %s: %w", target, err)
	}
	args := []string{"split-window", "-d", "-t", t, "-c", dir}
	args = append(args, envArgs...)
	args = append(args, "-P", "-F", "#{pane_id}")
	args = appendCommand(args, command)
	out, err := c.run(ctx, args...)
	if err != nil {
		return "", fmt.Errorf("split window %s: %w", target, noSession(err))
	}
	id, err := paneIDFrom(out)
	if err != nil {
		return "", fmt.Errorf("split window %s: %w", target, err)
	}
	if _, err := c.run(ctx, "select-layout", "-t", t, "tiled"); err != nil {
		return id, fmt.Errorf("split window %s: tile: %w", target, err)
	}
	return id, nil
}

// SetPaneTitle sets the pane's title, which ListPanes reports. tmux silently
// ignores titles with control characters, so they are refused here instead.
func (c *Client) SetPaneTitle(ctx context.Context, pane, title string) error {
	if !ValidPaneID(pane) {
		return fmt.Errorf("set title: %w: %q", ErrBadPane, pane)
	}
	if title != "" {
		if err := checkText(title); err != nil {
			return fmt.Errorf("set title of %s: %w", pane, err)
		}
	}
	if _, err := c.run(ctx, "select-pane", "-t", pane, "-T", title); err != nil {
		return fmt.Errorf("set title of %s: %w", pane, err)
	}
	return nil
}

// SetOption sets a tmux option on target (a session name or a pane id), for
// example remain-on-exit on.
func (c *Client) SetOption(ctx context.Context, target, option, value string) error {
	t, err := windowTarget(target)
	if err != nil {
		return fmt.Errorf("set option %s: %w", option, err)
	}
	if _, err := c.run(ctx, "set-option", "-t", t, option, value); err != nil {
		return fmt.Errorf("set option %s on %s: %w", option, target, noSession(err))
	}
	return nil
}

// SessionOption returns a session option's value ("" when unset).
func (c *Client) SessionOption(ctx context.Context, session, option string) (string, error) {
	if err := checkSession(session); err != nil {
		return "", fmt.Errorf("session option: %w", err)
	}
	out, err := c.run(ctx, "show-options", "-q", "-v", "-t", "="+session+":", option)
	if err != nil {
		return "", fmt.Errorf("session option %s of %s: %w", option, session, noSession(err))
	}
	return strings.TrimRight(out, "\n"), nil
}

// SetPaneOption sets a pane option (set-option -p) on a pane id, for
// example WorkerOption.
func (c *Client) SetPaneOption(ctx context.Context, pane, option, value string) error {
	if !ValidPaneID(pane) {
		return fmt.Errorf("set pane option %s: %w: %q", option, ErrBadPane, pane)
	}
	if hasControl(value) {
		return fmt.Errorf("set pane option %s: %w", option, ErrUnsafeText)
	}
	if _, err := c.run(ctx, "set-option", "-p", "-t", pane, option, value); err != nil {
		return fmt.Errorf("set pane option %s on %s: %w", option, pane, noSession(err))
	}
	return nil
}

// PaneWorker returns the WorkerOption of a pane and whether its program has
// exited: what the lead loop checks before typing into it.
func (c *Client) PaneWorker(ctx context.Context, pane string) (worker string, dead bool, err error) {
	if !ValidPaneID(pane) {
		return "", false, fmt.Errorf("pane worker: %w: %q", ErrBadPane, pane)
	}
	out, err := c.run(ctx, "display-message", "-p", "-t", pane, "#{pane_id}\t#{"+WorkerOption+"}\t#{pane_dead}")
	if err != nil {
		return "", false, fmt.Errorf("pane worker %s: %w", pane, noSession(err))
	}
	// For a pane that does not exist tmux 3.3 prints empty fields and exits 0.
	f := strings.Split(strings.TrimRight(out, "\n"), "\t")
	if len(f) != 3 || f[0] != pane {
		return "", false, fmt.Errorf("pane worker %s: %w", pane, ErrNoPane)
	}
	return f[1], f[2] == "1", nil
}

// PanePID returns the pid of the process tmux started in pane.
func (c *Client) PanePID(ctx context.Context, pane string) (int, error) {
	if !ValidPaneID(pane) {
		return 0, fmt.Errorf("pane pid: %w: %q", ErrBadPane, pane)
	}
	out, err := c.run(ctx, "display-message", "-p", "-t", pane, "#{pane_id}\t#{pane_pid}")
	if err != nil {
		return 0, fmt.Errorf("pane pid %s: %w", pane, noSession(err))
	}
	id, p, _ := strings.Cut(strings.TrimRight(out, "\n"), "\t")
	pid, err := strconv.Atoi(p)
	if id != pane || err != nil {
		return 0, fmt.Errorf("pane pid %s: %w", pane, ErrNoPane)
	}
	return pid, nil
}

// ProvePane checks that pane is worker's: it exists and its WorkerOption
// names worker (pane ids are reused after a tmux restart), and, unless
// allowDead, its program still runs. Anything else is ErrNoPane.
func (c *Client) ProvePane(ctx context.Context, pane, worker string, allowDead bool) error {
	owner, dead, err := c.PaneWorker(ctx, pane)
	if err != nil {
		return err
	}
	if owner != worker || (dead && !allowDead) {
		return fmt.Errorf("%w: pane %s belongs to %q (dead: %v), not %s", ErrNoPane, pane, owner, dead, worker)
	}
	return nil
}

// KillPane removes a pane; a pane that is already gone is not an error.
func (c *Client) KillPane(ctx context.Context, pane string) error {
	if !ValidPaneID(pane) {
		return fmt.Errorf("kill pane: %w: %q", ErrBadPane, pane)
	}
	if _, err := c.run(ctx, "kill-pane", "-t", pane); err != nil {
		if errors.Is(noSession(err), ErrNoSession) || strings.Contains(err.Error(), "can't find pane") {
			return nil
		}
		return fmt.Errorf("kill pane %s: %w", pane, err)
	}
	return nil
}

// SetHook sets hook (for example pane-died) on target (a session name or a
// pane id) to run the tmux command string command.
func (c *Client) SetHook(ctx context.Context, target, hook, command string) error {
	t, err := windowTarget(target)
	if err != nil {
		return fmt.Errorf("set hook %s: %w", hook, err)
	}
	if _, err := c.run(ctx, "set-hook", "-t", t, hook, command); err != nil {
		return fmt.Errorf("set hook %s on %s: %w", hook, target, noSession(err))
	}
	return nil
}

// SendLine types text into pane literally and then presses Enter, as two
// separate tmux calls so that nothing in text is read as a key name. Text
// that could do more than type one line is refused with ErrUnsafeText
// before tmux runs.
func (c *Client) SendLine(ctx context.Context, pane, text string) error {
	if !ValidPaneID(pane) {
		return fmt.Errorf("send line: %w: %q", ErrBadPane, pane)
	}
	if err := checkText(text); err != nil {
		return fmt.Errorf("send line to %s: %w", pane, err)
	}
	if _, err := c.run(ctx, "send-keys", "-t", pane, "-l", "--", text); err != nil {
		return fmt.Errorf("send line to %s: %w", pane, err)
	}
	if _, err := c.run(ctx, "send-keys", "-t", pane, "Enter"); err != nil {
		return fmt.Errorf("send line to %s: enter: %w", pane, err)
	}
	return nil
}

// SendText types text into pane literally, without pressing Enter.
func (c *Client) SendText(ctx context.Context, pane, text string) error {
	if !ValidPaneID(pane) {
		return fmt.Errorf("send text: %w: %q", ErrBadPane, pane)
	}
	if err := checkText(text); err != nil {
		return fmt.Errorf("send text to %s: %w", pane, err)
	}
	if _, err := c.run(ctx, "send-keys", "-t", pane, "-l", "--", text); err != nil {
		return fmt.Errorf("send text to %s: %w", pane, err)
	}
	return nil
}

// SendInterrupt presses Escape, then Ctrl-C, in pane: what stops an
// agent's turn (Escape for Claude Code, Codex and Gemini CLI; Ctrl-C for a
// plain program, whose terminal also drops the line it was reading). One
// Ctrl-C at an agent's empty prompt only offers to quit.
func (c *Client) SendInterrupt(ctx context.Context, pane string) error {
	if !ValidPaneID(pane) {
		return fmt.Errorf("send interrupt: %w: %q", ErrBadPane, pane)
	}
	for _, key := range []string{"Escape", "C-c"} {
		if _, err := c.run(ctx, "send-keys", "-t", pane, key); err != nil {
			return fmt.Errorf("send interrupt to %s: %s: %w", pane, key, err)
		}
	}
	return nil
}

// SendEnter presses Enter in pane.
func (c *Client) SendEnter(ctx context.Context, pane string) error {
	if !ValidPaneID(pane) {
		return fmt.Errorf("send enter: %w: %q", ErrBadPane, pane)
	}
	if _, err := c.run(ctx, "send-keys", "-t", pane, "Enter"); err != nil {
		return fmt.Errorf("send enter to %s: %w", pane, err)
	}
	return nil
}

// Capture returns the pane's screen with wrapped lines joined; lines > 0 also
// includes that many lines of history. Trailing blank lines are dropped.
func (c *Client) Capture(ctx context.Context, pane string, lines int) (string, error) {
	if !ValidPaneID(pane) {
		return "", fmt.Errorf("capture: %w: %q", ErrBadPane, pane)
	}
	args := []string{"capture-pane", "-p", "-J", "-t", pane}
	if lines > 0 {
		args = append(args, "-S", "-"+strconv.Itoa(lines))
	}
	out, err := c.run(ctx, args...)
	if err != nil {
		return "", fmt.Errorf("capture %s: %w", pane, err)
	}
	out = strings.TrimRight(out, "\n")
	if out != "" {
		out += "\n"
	}
	return out, nil
}

// paneFormat lists the fields ListPanes parses, tab-separated; tmux refuses
// control characters in titles, so a tab cannot shift the columns.
const paneFormat = "#{pane_id}\t#{pane_title}\t#{pane_dead}\t#{pane_pid}\t#{pane_index}\t#{" + WorkerOption + "}\t#{pane_current_command}"

// ListPanes lists every pane of every window in session.
func (c *Client) ListPanes(ctx context.Context, session string) ([]Pane, error) {
	if err := checkSession(session); err != nil {
		return nil, fmt.Errorf("list panes: %w", err)
	}
	out, err := c.run(ctx, "list-panes", "-s", "-t", "="+session+":", "-F", paneFormat)
	if err != nil {
		return nil, fmt.Errorf("list panes of %s: %w", session, noSession(err))
	}
	var panes []Pane
	for _, line := range strings.Split(strings.TrimRight(out, "\n"), "\n") {
		if line == "" {
			continue
		}
		p, err := parsePane(line)
		if err != nil {
			return nil, fmt.Errorf("list panes of %s: %w", session, err)
		}
		panes = append(panes, p)
	}
	return panes, nil
}

func parsePane(line string) (Pane, error) {
	f := strings.SplitN(line, "\t", 7)
	if len(f) != 7 || !ValidPaneID(f[0]) {
		return Pane{}, fmt.Errorf("unexpected list-panes line %q", line)
	}
	pid, err := strconv.Atoi(f[3])
	if err != nil {
		return Pane{}, fmt.Errorf("unexpected pane pid in %q", line)
	}
	idx, err := strconv.Atoi(f[4])
	if err != nil {
		return Pane{}, fmt.Errorf("unexpected pane index in %q", line)
	}
	return Pane{ID: f[0], Title: f[1], Dead: f[2] == "1", PID: pid, Index: idx, Worker: f[5], CurrentCommand: f[6]}, nil
}

// HasSession reports whether session exists. tmux exits 1 both for a missing
// session and for a missing server; both mean false.
func (c *Client) HasSession(ctx context.Context, name string) (bool, error) {
	if err := checkSession(name); err != nil {
		return false, fmt.Errorf("has session: %w", err)
	}
	_, err := c.run(ctx, "has-session", "-t", "="+name)
	if err == nil {
		return true, nil
	}
	var re *runner.Error
	if errors.As(err, &re) && re.ExitCode == 1 {
		return false, nil
	}
	return false, fmt.Errorf("has session %s: %w", name, err)
}

// KillSession kills session. A session or server that is already gone is
// success: the caller wanted it gone.
func (c *Client) KillSession(ctx context.Context, name string) error {
	if err := checkSession(name); err != nil {
		return fmt.Errorf("kill session: %w", err)
	}
	if _, err := c.run(ctx, "kill-session", "-t", "="+name); err != nil && !errors.Is(noSession(err), ErrNoSession) {
		return fmt.Errorf("kill session %s: %w", name, err)
	}
	return nil
}

// KillServer kills the whole tmux server of c.Socket. No server running is
// success.
func (c *Client) KillServer(ctx context.Context) error {
	if _, err := c.run(ctx, "kill-server"); err != nil && !errors.Is(noSession(err), ErrNoSession) {
		return fmt.Errorf("kill server: %w", err)
	}
	return nil
}

// noSession marks tmux's "it is not there" failures with ErrNoSession,
// keeping the original error (arguments, exit code, stderr) in the chain.
func noSession(err error) error {
	var re *runner.Error
	if !errors.As(err, &re) || re.ExitCode != 1 {
		return err
	}
	for _, s := range []string{"can't find session", "no such session", "no server running", "error connecting to", "server exited unexpectedly"} {
		if strings.Contains(re.Stderr, s) {
			return fmt.Errorf("%w: %w", ErrNoSession, err)
		}
	}
	return err
}

// windowTarget turns a pane id into itself and a session name into the
// exact-match target "=name:" (its current window), which tmux 3.3a accepts
// for split-window, select-layout, set-option and set-hook where a bare
// "=name" is not always read as a session.
func windowTarget(target string) (string, error) {
	if ValidPaneID(target) {
		return target, nil
	}
	if strings.HasPrefix(target, "%") {
		return "", fmt.Errorf("%w: %q", ErrBadPane, target)
	}
	if err := checkSession(target); err != nil {
		return "", err
	}
	return "=" + target + ":", nil
}

func checkSession(name string) error {
	if name == "" || strings.ContainsAny(name, ".:") || hasControl(name) || !utf8.ValidString(name) {
		return fmt.Errorf("%w: %q", ErrBadSession, name)
	}
	return nil
}

func envFlags(env map[string]string) ([]string, error) {
	keys := make([]string, 0, len(env))
	for k := range env {
		if k == "" || strings.Contains(k, "=") || hasControl(k) {
			return nil, fmt.Errorf("%w: %q", ErrBadEnv, k)
		}
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var args []string
	for _, k := range keys {
		args = append(args, "-e", k+"="+env[k])
	}
	return args, nil
}

func appendCommand(args []string, command string) []string {
	if command == "" {
		return args
	}
	return append(args, "--", command)
}

func paneIDFrom(out string) (string, error) {
	id := strings.TrimSpace(out)
	if !ValidPaneID(id) {
		return "", fmt.Errorf("tmux printed %q, want a pane id", out)
	}
	return id, nil
}

// checkText accepts only what types as one ordinary line.
func checkText(text string) error {
	switch {
	case text == "":
		return fmt.Errorf("%w: empty", ErrUnsafeText)
	case len(text) > MaxLineBytes:
		return fmt.Errorf("%w: %d bytes, limit %d: %s", ErrUnsafeText, len(text), MaxLineBytes, quote(text))
	case !utf8.ValidString(text):
		return fmt.Errorf("%w: not valid UTF-8: %s", ErrUnsafeText, quote(text))
	case hasControl(text):
		return fmt.Errorf("%w: control character: %s", ErrUnsafeText, quote(text))
	}
	return nil
}

// hasControl reports C0 controls, DEL and C1 controls (U+0080..U+009F, which
// some terminals read as the start of an escape sequence).
func hasControl(s string) bool {
	for _, r := range s {
		if r < 0x20 || r == 0x7f || (r >= 0x80 && r <= 0x9f) {
			return true
		}
	}
	return false
}

// quote escapes text for an error message, cut to about 80 characters.
func quote(text string) string {
	const limit = 80
	if len(text) <= limit {
		return fmt.Sprintf("%q", text)
	}
	cut := limit
	for cut > 0 && !utf8.RuneStart(text[cut]) {
		cut--
	}
	return fmt.Sprintf("%q...", text[:cut])
}

// WatchOutput attaches a control-mode client to session (tmux -C, with
// ignore-size so it never changes the panes' size, and read-only) and calls
// fn with the pane id of every %output notification: the moment a pane's
// program writes to its terminal. It does not read the output itself (the
// screen is read with Capture); it only says which pane changed. It
// returns when the session ends, the server goes away or ctx is done.
func (c *Client) WatchOutput(ctx context.Context, session string, fn func(pane string)) error {
	if err := checkSession(session); err != nil {
		return fmt.Errorf("watch output: %w", err)
	}
	s, ok := c.Runner.(runner.Streamer)
	if !ok {
		return fmt.Errorf("watch output of %s: %w", session, ErrNoStream)
	}
	args := []string{"-u"}
	if c.Socket != "" {
		args = append(args, "-L", c.Socket)
	}
	args = append(args, "-C", "attach-session", "-f", "ignore-size,read-only", "-t", "="+session)
	err := s.Stream(ctx, runner.Cmd{Name: "tmux", Args: args}, func(line []byte) {
		if pane, ok := outputPane(line); ok {
			fn(pane)
		}
	})
	if err != nil {
		return fmt.Errorf("watch output of %s: %w", session, err)
	}
	return nil
}

// outputPane returns the pane of a control-mode %output (or
// %extended-output) line.
func outputPane(line []byte) (string, bool) {
	s := string(line)
	var rest string
	switch {
	case strings.HasPrefix(s, "%output "):
		rest = s[len("%output "):]
	case strings.HasPrefix(s, "%extended-output "):
		rest = s[len("%extended-output "):]
	default:
		return "", false
	}
	pane, _, _ := strings.Cut(rest, " ")
	if !ValidPaneID(pane) {
		return "", false
	}
	return pane, true
}
