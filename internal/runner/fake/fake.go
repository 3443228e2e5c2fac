// Package fake is a strict stand-in for runner.Runner in unit tests: every
// call must have been expected, in order, with its program, arguments,
// working directory and standard input, and every expectation must be used.
package fake

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/orch-dev/orch/internal/runner"
)

type call struct {
	name  string
	args  []string
	dir   string
	stdin string
	out   string
	err   error
}

// Runner records expectations and fails the test on any deviation.
type Runner struct {
	t     testing.TB
	mu    sync.Mutex
	calls []call
	next  int
	dir   string // the directory expected of the calls added next
}

// New returns a fake that checks, when the test ends, that every expected
// call happened.
func New(t testing.TB) *Runner {
	f := &Runner{t: t}
	t.Cleanup(f.CheckForMissingCalls)
	return f
}

// In sets the working directory the calls expected from now on must run
// in ("" at first: the caller's own).
func (f *Runner) In(dir string) *Runner {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.dir = dir
	return f
}

// Expect adds one expected invocation of name with exactly args, in the
// directory set by In and with no standard input, answering with out and
// err.
func (f *Runner) Expect(name string, args []string, out string, err error) *Runner {
	return f.ExpectStdin(name, args, "", out, err)
}

// ExpectStdin is Expect for a call that must be given stdin as its
// standard input.
func (f *Runner) ExpectStdin(name string, args []string, stdin, out string, err error) *Runner {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, call{name: name, args: args, dir: f.dir, stdin: stdin, out: out, err: err})
	return f
}

// Run implements runner.Runner.
func (f *Runner) Run(_ context.Context, c runner.Cmd) ([]byte, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	got := c.String()
	if f.next >= len(f.calls) {
		f.t.Errorf("unexpected call: %s", got)
		return nil, fmt.Errorf("fake: unexpected call %s", got)
	}
	want := f.calls[f.next]
	f.next++
	wantS := strings.TrimSpace(want.name + " " + strings.Join(want.args, " "))
	if c.Name != want.name || strings.Join(c.Args, "\x00") != strings.Join(want.args, "\x00") {
		f.t.Errorf("call %d:\n got  %s\n want %s", f.next, got, wantS)
		return nil, fmt.Errorf("fake: wrong call %s", got)
	}
	if c.Dir != want.dir {
		f.t.Errorf("call %d (%s): run in %q, want %q", f.next, got, c.Dir, want.dir)
		return nil, fmt.Errorf("fake: %s in the wrong directory %q", got, c.Dir)
	}
	if string(c.Stdin) != want.stdin {
		f.t.Errorf("call %d (%s): stdin %q, want %q", f.next, got, c.Stdin, want.stdin)
		return nil, fmt.Errorf("fake: %s with the wrong stdin", got)
	}
	return []byte(want.out), want.err
}

// CheckForMissingCalls fails the test if an expected call never happened.
func (f *Runner) CheckForMissingCalls() {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, c := range f.calls[f.next:] {
		f.t.Errorf("expected call never made: %s %s", c.name, strings.Join(c.args, " "))
	}
}

// Stream implements runner.Streamer: the expected call's out is handed to
// fn line by line, then err is returned.
func (f *Runner) Stream(ctx context.Context, c runner.Cmd, fn func(line []byte)) error {
	out, err := f.Run(ctx, c)
	if len(out) == 0 {
		return err
	}
	for _, l := range strings.Split(strings.TrimSuffix(string(out), "\n"), "\n") {
		fn([]byte(l))
	}
	return err
}
