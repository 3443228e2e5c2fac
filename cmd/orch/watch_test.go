package main

import (
	"crypto/rand"
	"encoding/hex"
	"os/exec"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/rogpeppe/go-internal/testscript"

	"github.com/orch-dev/orch/internal/eventually"
)

// TestWatch runs orch watch end to end: the real command in a real tmux
// pane of 80×24 on a tmux server of its own, against a real orch serve,
// driven with send-keys and read with capture-pane (testdata/watch).
func TestWatch(t *testing.T) {
	if _, err := exec.LookPath("tmux"); err != nil && requireTmux() {
		t.Fatal("tmux is not installed and ORCH_REQUIRE_TMUX=1: install tmux (apt-get install -y tmux)")
	}
	p := scriptParams("testdata/watch")
	p.Cmds["watchpane"] = cmdWatchPane
	p.Cmds["screen"] = cmdScreen
	p.Cmds["keys"] = cmdKeys
	testscript.Run(t, p)
}

// watchSocket is the tmux server of the script's board (tmux -L).
func watchSocket(ts *testscript.TestScript) string { return ts.Getenv("WATCH_TMUX_SOCKET") }

// watchTmux runs tmux on the board's server, in the script's TMUX_TMPDIR,
// with no configuration of the user's.
func watchTmux(ts *testscript.TestScript, args ...string) *exec.Cmd {
	return tmuxCommand(ts.Getenv("TMUX_TMPDIR"), append([]string{"-L", watchSocket(ts), "-f", "/dev/null"}, args...)...)
}

// watchpane: start orch watch in the current directory, in an 80×24 pane
// of a tmux server of its own (killed when the script ends). The pane's
// environment is the script's (PATH with orch, HOME, TMUX_TMPDIR, the
// fleet's ORCH_TMUX_SOCKET, git's identity); when orch watch exits the
// pane says how.
func cmdWatchPane(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 0 {
		ts.Fatalf("usage: watchpane")
	}
	var b [6]byte
	rand.Read(b[:])
	ts.Setenv("WATCH_TMUX_SOCKET", "orchwatch-"+hex.EncodeToString(b[:]))
	ts.Defer(func() { watchTmux(ts, "kill-server").Run() })
	cmd := watchTmux(ts, "new-session", "-d", "-x", "80", "-y", "24", "-s", "board", "-c", ts.MkAbs("."),
		`orch watch; echo "orch watch exited $?"; exec sleep 600`)
	// The server started here takes the client's environment as its
	// global one, and the pane gets it: the script's, not the test's.
	env := []string{"TERM=xterm-256color"}
	for _, k := range []string{"PATH", "HOME", "TMUX_TMPDIR", "ORCH_TMUX_SOCKET", "GIT_CONFIG_NOSYSTEM",
		"GIT_AUTHOR_NAME", "GIT_AUTHOR_EMAIL", "GIT_COMMITTER_NAME", "GIT_COMMITTER_EMAIL"} {
		env = append(env, k+"="+ts.Getenv(k))
	}
	cmd.Env = env
	if out, err := cmd.CombinedOutput(); err != nil {
		ts.Fatalf("tmux new-session: %v: %s", err, out)
	}
	// No status line: the pane is the whole 80×24 window.
	if out, err := watchTmux(ts, "set-option", "-t", "board", "status", "off").CombinedOutput(); err != nil {
		ts.Fatalf("tmux set-option: %v: %s", err, out)
	}
}

// screen <regexp>: wait until the board's pane shows text matching the
// regexp (multi-line: ^ and $ match at each line). The wait is the test's:
// capture-pane is retried until it matches, at most 20 s.
func cmdScreen(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 1 {
		ts.Fatalf("usage: screen <regexp>")
	}
	re, err := regexp.Compile("(?m)" + args[0])
	if err != nil {
		ts.Fatalf("screen: %v", err)
	}
	var last string
	eventually.True(ts, 20*time.Second, func() bool {
		out, err := watchTmux(ts, "capture-pane", "-p", "-t", "board").Output()
		last = string(out)
		return err == nil && re.MatchString(last)
	}, "the board to show %q; it shows:\n%s", args[0], &lastScreen{&last})
	ts.Logf("screen matched %q", args[0])
}

// lastScreen prints the latest capture when the wait fails.
type lastScreen struct{ s *string }

func (l *lastScreen) String() string {
	var b strings.Builder
	for _, line := range strings.Split(*l.s, "\n") {
		b.WriteString("| " + line + "\n")
	}
	return b.String()
}

// keys <key>...: type keys into the board's pane (tmux key names: Down,
// Enter, Escape, or text, sent literally with -l first).
func cmdKeys(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) == 0 {
		ts.Fatalf("usage: keys [-l text] <key>...")
	}
	targs := []string{"send-keys", "-t", "board"}
	if args[0] == "-l" {
		targs = append(targs, "-l")
		args = args[1:]
	}
	if out, err := watchTmux(ts, append(targs, args...)...).CombinedOutput(); err != nil {
		ts.Fatalf("tmux send-keys: %v: %s", err, out)
	}
}
