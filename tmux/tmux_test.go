package tmux

import (
	"context"
	"errors"
	"os"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/orch-dev/orch/internal/runner"
	"github.com/orch-dev/orch/internal/runner/fake"
)

func newFake(t *testing.T, socket string) (*Client, *fake.Runner) {
	f := fake.New(t)
	return &Client{Socket: socket, Runner: f}, f
}

func TestPackageDoc(t *testing.T) {
	n := 0
	for _, name := range []string{"tmux.go", "errors.go"} {
		b, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		n += strings.Count(string(b), "\n// Package tmux ")
		if strings.HasPrefix(string(b), "// Package tmux ") {
			n++
		}
	}
	if n != 1 {
		t.Errorf("want exactly one // Package tmux doc comment, got %d", n)
	}
}

func TestNewSessionArgs(t *testing.T) {
	c, f := newFake(t, "orchtest")
	f.Expect("tmux", []string{"-u", "-L", "orchtest", "new-session", "-d", "-s", "orch-x", "-x", "200", "-y", "50",
		"-c", "/repo", "-e", "A=1", "-e", "M=two words", "-e", "Z=$HOME",
		"-P", "-F", "#{pane_id}", "--", "agent --flag"}, "%3\n", nil)
	id, err := c.NewSession(context.Background(), "orch-x", "/repo",
		map[string]string{"Z": "$HOME", "A": "1", "M": "two words"}, "agent --flag")
	if err != nil || id != "%3" {
		t.Fatalf("NewSession = %q, %v; want %%3, nil", id, err)
	}
}

func TestNewSessionNoSocket(t *testing.T) {
	c, f := newFake(t, "")
	f.Expect("tmux", []string{"-u", "new-session", "-d", "-s", "s", "-x", "200", "-y", "50", "-c", "/d",
		"-P", "-F", "#{pane_id}", "--", "sh"}, "%0\n", nil)
	if _, err := c.NewSession(context.Background(), "s", "/d", nil, "sh"); err != nil {
		t.Fatal(err)
	}
}

func TestSplitWindowArgs(t *testing.T) {
	c, f := newFake(t, "")
	f.Expect("tmux", []string{"-u", "split-window", "-d", "-t", "=orch-x:", "-c", "/w", "-e", "K=v",
		"-P", "-F", "#{pane_id}", "--", "cat"}, "%4\n", nil)
	f.Expect("tmux", []string{"-u", "select-layout", "-t", "=orch-x:", "tiled"}, "", nil)
	id, err := c.SplitWindow(context.Background(), "orch-x", "/w", map[string]string{"K": "v"}, "cat")
	if err != nil || id != "%4" {
		t.Fatalf("SplitWindow = %q, %v", id, err)
	}
}

func TestSendLineTwoCalls(t *testing.T) {
	c, f := newFake(t, "s")
	text := `Read plans/a/PLAN.md; run "orch-notify done a" $HOME ` + "`x`"
	f.Expect("tmux", []string{"-u", "-L", "s", "send-keys", "-t", "%1", "-l", "--", text}, "", nil)
	f.Expect("tmux", []string{"-u", "-L", "s", "send-keys", "-t", "%1", "Enter"}, "", nil)
	if err := c.SendLine(context.Background(), "%1", text); err != nil {
		t.Fatal(err)
	}
}

func TestSendLineRefusesUnsafeText(t *testing.T) {
	tests := []struct{ name, text string }{
		{"newline", "a\nb"},
		{"escape", "\x1b[31m"},
		{"empty", ""},
		{"carriage return", "a\rb"},
		{"C1 byte", "\x9b"},
		{"C1 rune", "a\u009bb"},
		{"DEL", "a\x7f"},
		{"tab", "a\tb"},
		{"invalid UTF-8", "a\xff\xfeb"},
		{"too long", strings.Repeat("x", 5000)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, _ := newFake(t, "") // strict: any call fails the test
			err := c.SendLine(context.Background(), "%1", tt.text)
			if !errors.Is(err, ErrUnsafeText) {
				t.Fatalf("SendLine(%q) = %v, want ErrUnsafeText", tt.text, err)
			}
			if len(err.Error()) > 200 {
				t.Errorf("error too long (%d bytes): %.100s...", len(err.Error()), err)
			}
		})
	}
}

func TestSendLineAcceptsUnicodeAndLimit(t *testing.T) {
	for _, text := range []string{"héllo → ✓", strings.Repeat("x", MaxLineBytes)} {
		c, f := newFake(t, "")
		f.Expect("tmux", []string{"-u", "send-keys", "-t", "%2", "-l", "--", text}, "", nil)
		f.Expect("tmux", []string{"-u", "send-keys", "-t", "%2", "Enter"}, "", nil)
		if err := c.SendLine(context.Background(), "%2", text); err != nil {
			t.Errorf("SendLine(%.20q) = %v", text, err)
		}
	}
}

func TestBadPaneRefused(t *testing.T) {
	ctx := context.Background()
	for _, pane := range []string{"", "1", "%", "%a", "orch-x:0.1", "%1 ", "=s:%1", "%-1"} {
		t.Run(pane, func(t *testing.T) {
			c, _ := newFake(t, "")
			_, capErr := c.Capture(ctx, pane, 0)
			errs := map[string]error{
				"SendLine":     c.SendLine(ctx, pane, "hi"),
				"SetPaneTitle": c.SetPaneTitle(ctx, pane, "w1"),
				"Capture":      capErr,
			}
			for name, err := range errs {
				if !errors.Is(err, ErrBadPane) {
					t.Errorf("%s(%q) = %v, want ErrBadPane", name, pane, err)
				}
			}
		})
	}
}

func TestBadSessionAndEnvRefused(t *testing.T) {
	ctx := context.Background()
	c, _ := newFake(t, "")
	for _, name := range []string{"", "a.b", "a:b", "a\nb"} {
		if _, err := c.NewSession(ctx, name, "/", nil, "sh"); !errors.Is(err, ErrBadSession) {
			t.Errorf("NewSession(%q) = %v, want ErrBadSession", name, err)
		}
		if _, err := c.HasSession(ctx, name); !errors.Is(err, ErrBadSession) {
			t.Errorf("HasSession(%q) = %v, want ErrBadSession", name, err)
		}
	}
	for _, k := range []string{"", "A=B", "A\nB"} {
		if _, err := c.NewSession(ctx, "s", "/", map[string]string{k: "v"}, "sh"); !errors.Is(err, ErrBadEnv) {
			t.Errorf("NewSession env %q = %v, want ErrBadEnv", k, err)
		}
	}
	if _, err := c.SplitWindow(ctx, "%x", "/", nil, "sh"); !errors.Is(err, ErrBadPane) {
		t.Errorf("SplitWindow(%%x) = %v, want ErrBadPane", err)
	}
}

func TestCaptureArgs(t *testing.T) {
	c, f := newFake(t, "")
	f.Expect("tmux", []string{"-u", "capture-pane", "-p", "-J", "-t", "%1"}, "a\nb\n\n\n", nil)
	f.Expect("tmux", []string{"-u", "capture-pane", "-p", "-J", "-t", "%1", "-S", "-100"}, "", nil)
	got, err := c.Capture(context.Background(), "%1", 0)
	if err != nil || got != "a\nb\n" {
		t.Errorf("Capture = %q, %v; want %q", got, err, "a\nb\n")
	}
	if got, err := c.Capture(context.Background(), "%1", 100); err != nil || got != "" {
		t.Errorf("Capture(100) = %q, %v", got, err)
	}
}

func TestListPanesParses(t *testing.T) {
	c, f := newFake(t, "")
	f.Expect("tmux", []string{"-u", "list-panes", "-s", "-t", "=orch-x:", "-F", paneFormat},
		"%0\tw1\t0\t123\t0\tw1\tclaude\n%5\tw 2\t1\t456\t1\t\tbash\n", nil)
	got, err := c.ListPanes(context.Background(), "orch-x")
	if err != nil {
		t.Fatal(err)
	}
	want := []Pane{
		{ID: "%0", Title: "w1", PID: 123, Index: 0, Worker: "w1", CurrentCommand: "claude"},
		{ID: "%5", Title: "w 2", Dead: true, PID: 456, Index: 1, CurrentCommand: "bash"},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("ListPanes = %+v\nwant %+v", got, want)
	}
}

func missing(stderr string) error {
	return &runner.Error{Cmd: runner.Cmd{Name: "tmux"}, ExitCode: 1, Stderr: stderr}
}

func TestMissingSessionHandling(t *testing.T) {
	ctx := context.Background()
	c, f := newFake(t, "")
	f.Expect("tmux", []string{"-u", "has-session", "-t", "=gone"}, "", missing("can't find session: gone\n"))
	f.Expect("tmux", []string{"-u", "kill-session", "-t", "=gone"}, "", missing("can't find session: gone\n"))
	f.Expect("tmux", []string{"-u", "kill-server"}, "", missing("no server running on /tmp/tmux-0/default\n"))
	f.Expect("tmux", []string{"-u", "list-panes", "-s", "-t", "=gone:", "-F", paneFormat}, "", missing("can't find session: gone\n"))
	f.Expect("tmux", []string{"-u", "kill-session", "-t", "=x"}, "", &runner.Error{ExitCode: -1, Stderr: "", Err: errors.New("exec: tmux not found")})

	if ok, err := c.HasSession(ctx, "gone"); ok || err != nil {
		t.Errorf("HasSession = %v, %v; want false, nil", ok, err)
	}
	if err := c.KillSession(ctx, "gone"); err != nil {
		t.Errorf("KillSession(missing) = %v, want nil", err)
	}
	if err := c.KillServer(ctx); err != nil {
		t.Errorf("KillServer(no server) = %v, want nil", err)
	}
	if _, err := c.ListPanes(ctx, "gone"); !errors.Is(err, ErrNoSession) {
		t.Errorf("ListPanes(missing) = %v, want ErrNoSession", err)
	}
	if err := c.KillSession(ctx, "x"); err == nil {
		t.Error("KillSession with tmux missing = nil, want error")
	}
}

func TestOptionHookTitleArgs(t *testing.T) {
	ctx := context.Background()
	c, f := newFake(t, "")
	f.Expect("tmux", []string{"-u", "set-option", "-t", "=s:", "remain-on-exit", "on"}, "", nil)
	f.Expect("tmux", []string{"-u", "set-option", "-t", "%2", "remain-on-exit", "on"}, "", nil)
	f.Expect("tmux", []string{"-u", "set-hook", "-t", "=s:", "pane-died", "run-shell 'orch-notify died'"}, "", nil)
	f.Expect("tmux", []string{"-u", "select-pane", "-t", "%2", "-T", "w1"}, "", nil)
	if err := c.SetOption(ctx, "s", "remain-on-exit", "on"); err != nil {
		t.Error(err)
	}
	if err := c.SetOption(ctx, "%2", "remain-on-exit", "on"); err != nil {
		t.Error(err)
	}
	if err := c.SetHook(ctx, "s", "pane-died", "run-shell 'orch-notify died'"); err != nil {
		t.Error(err)
	}
	if err := c.SetPaneTitle(ctx, "%2", "w1"); err != nil {
		t.Error(err)
	}
	if err := c.SetPaneTitle(ctx, "%2", "a\tb"); !errors.Is(err, ErrUnsafeText) {
		t.Errorf("SetPaneTitle(tab) = %v, want ErrUnsafeText", err)
	}
}

func TestSessionName(t *testing.T) {
	tests := map[string]string{
		"/home/u/orch":     "orch-orch",
		"/home/u/my.repo/": "orch-my-repo",
		"/x/a:b c":         "orch-a-b-c",
		"/x/Under_score-1": "orch-Under_score-1",
		"/x/héllo":         "orch-h-llo",
	}
	for in, want := range tests {
		if got := SessionName(in); got != want {
			t.Errorf("SessionName(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestValidPaneID(t *testing.T) {
	for id, want := range map[string]bool{"%0": true, "%123": true, "": false, "%": false, "0": false, "%1a": false, " %1": false} {
		if got := ValidPaneID(id); got != want {
			t.Errorf("ValidPaneID(%q) = %v, want %v", id, got, want)
		}
	}
}

// stuckRunner is a tmux that never answers: it returns only when its
// context is done, as a killed client does. It counts its runs.
type stuckRunner struct{ runs *int }

func (s stuckRunner) Run(ctx context.Context, c runner.Cmd) ([]byte, error) {
	*s.runs++
	<-ctx.Done()
	return nil, &runner.Error{Cmd: c, ExitCode: -1, Err: errors.New("signal: killed")}
}

// A command killed at its deadline is ErrNotAnswering, reported to
// OnStuck once; every later command fails with it at once, tmux not run
// again; a tmux that answers with an error is not.
func TestNotAnswering(t *testing.T) {
	var told []error
	runs := 0
	c := &Client{Socket: "s", Runner: stuckRunner{&runs}, OnStuck: func(err error) { told = append(told, err) }}
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	_, err := c.PanePID(ctx, "%1")
	if !errors.Is(err, ErrNotAnswering) || len(told) != 1 || !errors.Is(told[0], ErrNotAnswering) {
		t.Fatalf("err = %v, told %v", err, told)
	}
	if !strings.Contains(err.Error(), "tmux display-message got no answer in time") {
		t.Errorf("err = %v: want the command named", err)
	}
	start := time.Now()
	err = c.SendEnter(context.Background(), "%1")
	if !errors.Is(err, ErrNotAnswering) || runs != 1 || len(told) != 1 || time.Since(start) > time.Second {
		t.Fatalf("after no answer: err = %v, tmux run %d times, told %d, took %s; want ErrNotAnswering at once, tmux run once, told once", err, runs, len(told), time.Since(start))
	}
	if !strings.Contains(err.Error(), "tmux send-keys not run: ") {
		t.Errorf("err = %v: want the command not run named", err)
	}
	told = nil
	f := fake.New(t)
	f.Expect("tmux", []string{"-u", "-L", "s", "display-message", "-p", "-t", "%1", "#{pane_id}\t#{pane_pid}"}, "", &runner.Error{ExitCode: 1, Stderr: "can't find pane: %1"})
	c = &Client{Socket: "s", Runner: f, OnStuck: func(err error) { told = append(told, err) }}
	if _, err := c.PanePID(context.Background(), "%1"); err == nil || errors.Is(err, ErrNotAnswering) || len(told) != 0 {
		t.Fatalf("an answer taken as no answer: %v, told %v", err, told)
	}
}
