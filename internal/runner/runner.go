// Package runner is the one seam through which orch starts external programs
// (git, tmux): a tiny interface that the OS implementation satisfies and that
// unit tests replace with the strict fake in runner/fake.
package runner

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"time"
)

// Runner runs one external program to completion and returns its stdout.
// A non-zero exit is returned as an *Error carrying the arguments, the exit
// code and stderr.
type Runner interface {
	Run(ctx context.Context, cmd Cmd) ([]byte, error)
}

// Cmd describes one invocation.
type Cmd struct {
	Name  string   // program, looked up on PATH
	Args  []string // arguments, without the program name
	Dir   string   // working directory; empty means the current one
	Env   []string // extra KEY=VALUE pairs appended to the process environment
	Stdin []byte   // optional standard input
	// WaitDelay, when set, bounds the wait for the program's output once
	// ctx is done or the program has exited (exec.Cmd.WaitDelay): a
	// program that handed its stdout to another process (a tmux client
	// passes its descriptors to the server) cannot hold its caller past
	// its deadline that way.
	WaitDelay time.Duration
}

// String renders the command the way a user would type it, for errors.
func (c Cmd) String() string {
	return strings.TrimSpace(c.Name + " " + strings.Join(c.Args, " "))
}

// Error is a failed invocation: what ran, how it exited and what it said.
type Error struct {
	Cmd      Cmd
	ExitCode int // -1 when the program could not be started or was killed
	Stderr   string
	Err      error
}

func (e *Error) Error() string {
	msg := strings.TrimSpace(e.Stderr)
	if msg == "" && e.Err != nil {
		msg = e.Err.Error()
	}
	return fmt.Sprintf("%s: exit %d: %s", e.Cmd, e.ExitCode, msg)
}

func (e *Error) Unwrap() error { return e.Err }

// OS runs programs for real with exec.CommandContext, in the C locale so
// that messages the callers match on do not depend on the user's language.
type OS struct{}

// Run implements Runner.
func (OS) Run(ctx context.Context, c Cmd) ([]byte, error) {
	cmd := exec.CommandContext(ctx, c.Name, c.Args...)
	cmd.Dir = c.Dir
	cmd.Env = append(append(os.Environ(), "LC_ALL=C"), c.Env...)
	cmd.WaitDelay = c.WaitDelay
	if c.Stdin != nil {
		cmd.Stdin = bytes.NewReader(c.Stdin)
	}
	var stdout, stderr bytes.Buffer
	cmd.Stdout = &stdout
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		code := -1
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			code = ee.ExitCode()
		}
		return stdout.Bytes(), &Error{Cmd: c, ExitCode: code, Stderr: stderr.String(), Err: err}
	}
	return stdout.Bytes(), nil
}

// Streamer runs one long-lived program and hands each line of its stdout
// to fn as it arrives, until the program ends or ctx is done. Its stdin is
// an open pipe that is never written (some programs, such as a tmux
// control-mode client, end when their input closes). Runners that can
// stream implement it beside Runner.
type Streamer interface {
	Stream(ctx context.Context, cmd Cmd, fn func(line []byte)) error
}

// MaxStreamLine bounds one line handed to a Stream callback; the rest of a
// longer line is dropped (the callback sees its first MaxStreamLine bytes).
const MaxStreamLine = 1 << 20

// Stream implements Streamer.
func (OS) Stream(ctx context.Context, c Cmd, fn func(line []byte)) error {
	cmd := exec.CommandContext(ctx, c.Name, c.Args...)
	cmd.Dir = c.Dir
	cmd.Env = append(append(os.Environ(), "LC_ALL=C"), c.Env...)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return &Error{Cmd: c, ExitCode: -1, Err: err}
	}
	defer stdin.Close()
	out, err := cmd.StdoutPipe()
	if err != nil {
		return &Error{Cmd: c, ExitCode: -1, Err: err}
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		return &Error{Cmd: c, ExitCode: -1, Err: err}
	}
	r := bufio.NewReaderSize(out, 64<<10)
	var line []byte
	for {
		chunk, isPrefix, err := r.ReadLine()
		if len(line) < MaxStreamLine {
			line = append(line, chunk[:min(len(chunk), MaxStreamLine-len(line))]...)
		}
		if err != nil {
			break
		}
		if !isPrefix {
			fn(line)
			line = line[:0]
		}
	}
	if err := cmd.Wait(); err != nil {
		code := -1
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			code = ee.ExitCode()
		}
		return &Error{Cmd: c, ExitCode: code, Stderr: stderr.String(), Err: err}
	}
	return nil
}
