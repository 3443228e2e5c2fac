package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/rogpeppe/go-internal/testscript"

	"github.com/orch-dev/orch/internal/eventually"
	"github.com/orch-dev/orch/internal/modelsim"
	"github.com/orch-dev/orch/internal/orchctl"
)

// The lead's side of the agent scripts: what the scripted model server
// saw of the lead's conversation, and the lead's inbox.

// simServers are the running modelsim servers by script ($WORK).
var simServers sync.Map

func simOf(ts *testscript.TestScript) *modelsim.Server {
	v, ok := simServers.Load(ts.Getenv("WORK"))
	if !ok {
		ts.Fatalf("no modelsim running in this script")
	}
	return v.(*modelsim.Server)
}

// leadCount is how many times the lead's requests brought line new.
func leadCount(s *modelsim.Server, line string) int {
	n := 0
	for _, r := range s.Requests() {
		for _, l := range r.Callbacks {
			if l == line {
				n++
			}
		}
	}
	return n
}

// waitlead <line> [n]: within 90s the lead's model requests have brought
// the callback line n times (default 1), and never more.
func cmdWaitLead(ts *testscript.TestScript, neg bool, args []string) {
	if len(args) < 1 || len(args) > 2 {
		ts.Fatalf("usage: waitlead <line> [n]")
	}
	want := 1
	if len(args) == 2 {
		want, _ = strconv.Atoi(args[1])
	}
	s := simOf(ts)
	eventually.True(simReporter{ts}, 90*time.Second, func() bool {
		n := leadCount(s, args[0])
		if n > want {
			ts.Fatalf("the lead was given %q %d times, want %d", args[0], n, want)
		}
		return n == want
	}, "the lead's model request carrying %q", args[0])
}

// leadtogether <line>...: one request of the lead brought all the lines.
func cmdLeadTogether(ts *testscript.TestScript, neg bool, args []string) {
	for _, r := range simOf(ts).Requests() {
		all := true
		for _, a := range args {
			found := false
			for _, l := range r.Callbacks {
				found = found || l == a
			}
			all = all && found
		}
		if all {
			return
		}
	}
	ts.Fatalf("no request of the lead brought all of %q", args)
}

// leadonce: every callback line the lead was given, it was given once.
func cmdLeadOnce(ts *testscript.TestScript, neg bool, args []string) {
	seen := map[string]int{}
	for _, r := range simOf(ts).Requests() {
		for _, l := range r.Callbacks {
			seen[l]++
		}
	}
	if len(seen) == 0 {
		ts.Fatalf("the lead was given no callback at all")
	}
	for l, n := range seen {
		if n != 1 {
			ts.Fatalf("the lead was given %q %d times", l, n)
		}
	}
}

// waitarmed [false]: within 60s a hook of the lead waits to wake it (or,
// with false, none does).
func cmdWaitArmed(ts *testscript.TestScript, neg bool, args []string) {
	want := len(args) == 0 || args[0] != "false"
	root := ts.MkAbs(".")
	eventually.True(ts, 60*time.Second, func() bool {
		v, err := orchctl.Inbox(context.Background(), root, "claude")
		return err == nil && v.Armed == want
	}, "a lead hook armed=%v", want)
}

// claudehome <dir>: write $HOME/.claude.json as a person who has used
// Claude Code has it: onboarding done, dir trusted, the API key in the
// environment approved, no update.
func cmdClaudeHome(ts *testscript.TestScript, neg bool, args []string) {
	if len(args) != 1 {
		ts.Fatalf("usage: claudehome <dir>")
	}
	key := ts.Getenv("ANTHROPIC_API_KEY")
	if len(key) < 20 {
		ts.Fatalf("claudehome: run modelsim first (it sets ANTHROPIC_API_KEY)")
	}
	state := map[string]any{
		"hasCompletedOnboarding":    true,
		"autoUpdates":               false,
		"fullscreenUpsellSeenCount": 3,
		"customApiKeyResponses":     map[string]any{"approved": []string{key[len(key)-20:]}, "rejected": []string{}},
		"projects": map[string]any{ts.MkAbs(args[0]): map[string]any{
			"hasTrustDialogAccepted": true, "hasCompletedProjectOnboarding": true}},
	}
	data, _ := json.MarshalIndent(state, "", "  ")
	ts.Check(os.WriteFile(filepath.Join(ts.Getenv("HOME"), ".claude.json"), data, 0o600))
}

// noleadhooks: within 15s no orch lead hook is left running for this
// script's repos.
func cmdNoLeadHooks(ts *testscript.TestScript, neg bool, args []string) {
	work := ts.Getenv("WORK")
	var left []string
	eventually.True(leftReporter{ts, &left}, 15*time.Second, func() bool {
		left = nil
		entries, _ := os.ReadDir("/proc")
		for _, e := range entries {
			cmd, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
			if err != nil || !strings.Contains(string(cmd), "\x00lead\x00hook\x00") {
				continue
			}
			if cwd, err := os.Readlink(filepath.Join("/proc", e.Name(), "cwd")); err == nil && strings.HasPrefix(cwd, work) {
				left = append(left, fmt.Sprintf("%s %s", e.Name(), strings.ReplaceAll(string(cmd), "\x00", " ")))
			}
		}
		return len(left) == 0
	}, "no orch lead hook left running")
}

// simlog: log what the model server was asked so far (for a failure's
// story).
func cmdSimLog(ts *testscript.TestScript, neg bool, args []string) {
	for _, r := range simOf(ts).Requests() {
		line, _ := json.Marshal(r)
		ts.Logf("%s", line)
	}
}

// simReporter adds the model server's record to a failure.
type simReporter struct{ ts *testscript.TestScript }

func (r simReporter) Fatalf(format string, args ...any) {
	cmdSimLog(r.ts, false, nil)
	r.ts.Fatalf(format, args...)
}

// waitpane <pane> <regexp> [file]: within 60s the pane's screen (wrapped
// lines joined, trailing blanks cut) matches regexp; the screen is logged
// and, with file, written there (the real screens the test saw, for its
// notes).
func cmdWaitPane(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) < 2 || len(args) > 3 {
		ts.Fatalf("usage: waitpane <pane> <regexp> [file]")
	}
	re, err := regexp.Compile("(?m)" + args[1])
	if err != nil {
		ts.Fatalf("waitpane: %v", err)
	}
	var last string
	eventually.True(ts, 60*time.Second, func() bool {
		out, err := tmuxCmd(ts, "capture-pane", "-p", "-J", "-t", args[0]).Output()
		last = string(out)
		return err == nil && re.MatchString(last)
	}, "pane %s to show %q; it shows:\n%s", args[0], args[1], &lastScreen{&last})
	ts.Logf("pane %s matched %q:\n%s", args[0], args[1], (&lastScreen{&last}).String())
	if len(args) == 3 {
		ts.Check(os.WriteFile(ts.MkAbs(args[2]), []byte(last), 0o644))
	}
}

// panedead <pane>: within 60s tmux says the pane's process has exited
// (#{pane_dead}: the pane kept by remain-on-exit).
func cmdPaneDead(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 1 {
		ts.Fatalf("usage: panedead <pane>")
	}
	var last string
	eventually.True(ts, 60*time.Second, func() bool {
		out, err := tmuxCmd(ts, "display-message", "-p", "-t", args[0], "#{pane_dead}").Output()
		last = strings.TrimSpace(string(out))
		return err == nil && last == "1"
	}, "pane %s to be dead (pane_dead=%q)", args[0], &last)
}
