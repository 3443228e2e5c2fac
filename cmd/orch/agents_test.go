package main

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/rogpeppe/go-internal/testscript"

	"github.com/orch-dev/orch/internal/eventually"
	"github.com/orch-dev/orch/internal/modelsim"
)

// The real agent CLIs, end to end: Claude Code and Codex run in tmux panes
// and headless against modelsim, the scripted model server on 127.0.0.1
// (never a real API, never a real key), with a fresh HOME each script.
//
// requireAgents is true in CI (.ci/run installs the pinned CLIs): a missing
// agent fails its scripts instead of skipping them.
func requireAgents() bool { return os.Getenv("ORCH_REQUIRE_AGENTS") == "1" }

// agentNames are the agent CLIs the scripts can need, by their condition.
var agentNames = []string{"claude", "codex", "gemini"}

func TestAgents(t *testing.T) {
	if _, err := exec.LookPath("tmux"); err != nil && (requireTmux() || requireAgents()) {
		t.Fatal("tmux is not installed: install tmux (apt-get install -y tmux)")
	}
	for _, a := range agentNames {
		if _, err := exec.LookPath(a); err != nil && requireAgents() {
			t.Fatalf("%s is not on PATH and ORCH_REQUIRE_AGENTS=1: run .ci/install-agents (see README)", a)
		}
	}
	p := scriptParams("testdata/agents")
	cond := p.Condition
	p.Condition = func(c string) (bool, error) {
		for _, a := range agentNames {
			if c == a {
				_, err := exec.LookPath(a)
				return err == nil, nil
			}
		}
		if c == "claude-for-all" {
			return claudeForAll()
		}
		return cond(c)
	}
	setup := p.Setup
	p.Setup = func(env *testscript.Env) error {
		if err := setup(env); err != nil {
			return err
		}
		// A fresh HOME with nothing of the caller's: no agent config, no
		// XDG folders, no proxy that would take loopback traffic.
		for _, k := range []string{"XDG_CONFIG_HOME", "XDG_DATA_HOME", "XDG_STATE_HOME", "XDG_CACHE_HOME",
			"CLAUDE_CONFIG_DIR", "CODEX_HOME", "ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN", "ANTHROPIC_BASE_URL",
			"OPENAI_API_KEY", "OPENAI_BASE_URL", "GEMINI_API_KEY", "GOOGLE_API_KEY", "GOOGLE_GEMINI_BASE_URL", "GEMINI_CLI_HOME", "GOOGLE_CLOUD_PROJECT", "HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy", "ALL_PROXY", "TMUX"} {
			env.Setenv(k, "")
		}
		// TMUX_TMPDIR stays the script's own (scriptParams): its cleanup
		// kills the tmux server there.
		env.Setenv("NO_PROXY", "127.0.0.1,localhost")
		// Leave nothing running: every process whose environment names
		// this script's .orch is killed when the script ends (and the
		// script's noprocs checks, before that, that orch down did it).
		work := env.WorkDir
		env.Defer(func() { killTagged(work) })
		// Something an agent runs (seen once in a while, not pinned down:
		// a sandbox making its mount points) can leave an empty .git in
		// the temporary folder ($WORK is below it), which would make every later
		// script's temporary folder look like a git repository. Remove it
		// if this script left it.
		stray := filepath.Join(os.TempDir(), ".git")
		if _, err := os.Lstat(stray); os.IsNotExist(err) {
			env.Defer(func() {
				if fi, err := os.Lstat(stray); err == nil && fi.IsDir() {
					if os.Remove(stray) == nil { // only if empty
						env.T().Log("removed an empty " + stray + " an agent left")
					}
				}
			})
		}
		return nil
	}
	p.Cmds["modelsim"] = cmdModelsim
	p.Cmds["noprocs"] = cmdNoProcs
	p.Cmds["waitlead"] = cmdWaitLead
	p.Cmds["leadtogether"] = cmdLeadTogether
	p.Cmds["leadonce"] = cmdLeadOnce
	p.Cmds["waitarmed"] = cmdWaitArmed
	p.Cmds["claudehome"] = cmdClaudeHome
	p.Cmds["noleadhooks"] = cmdNoLeadHooks
	p.Cmds["simlog"] = cmdSimLog
	p.Cmds["waitpane"] = cmdWaitPane
	p.Cmds["panedead"] = cmdPaneDead
	testscript.Run(t, p)
}

// modelsim [-hold fifo] [plan=scenario...]: start the scripted model server for this
// script and point the agents at it: ANTHROPIC_BASE_URL and a made-up
// ANTHROPIC_API_KEY for Claude Code, MODELSIM_URL and MODELSIM_API_KEY
// for the Codex provider the scripts' ~/.codex/config.toml defines,
// GOOGLE_GEMINI_BASE_URL and a made-up GEMINI_API_KEY for Gemini CLI. Its request log
// is written to $WORK/modelsim.log when the script ends.
func cmdModelsim(ts *testscript.TestScript, neg bool, args []string) {
	sc := map[string]modelsim.Scenario{}
	hold := ""
	if len(args) >= 2 && args[0] == "-hold" {
		hold, args = args[1], args[2:]
	}
	for _, a := range args {
		plan, kind, ok := strings.Cut(a, "=")
		if !ok {
			ts.Fatalf("usage: modelsim [plan=scenario...]")
		}
		sc[plan] = modelsim.Scenario(kind)
	}
	s := modelsim.New(sc)
	if hold != "" {
		s.SetHold(hold)
	}
	url, err := s.Start("127.0.0.1:0")
	if err != nil {
		ts.Fatalf("modelsim: %v", err)
	}
	simServers.Store(ts.Getenv("WORK"), s)
	logPath := filepath.Join(ts.Getenv("WORK"), "modelsim.log")
	ts.Defer(func() {
		simServers.Delete(ts.Getenv("WORK"))
		s.Close()
		var b strings.Builder
		for _, r := range s.Requests() {
			line, _ := json.Marshal(r)
			b.Write(line)
			b.WriteByte('\n')
		}
		os.WriteFile(logPath, []byte(b.String()), 0o644)
	})
	ts.Setenv("ANTHROPIC_BASE_URL", url)
	ts.Setenv("ANTHROPIC_API_KEY", "sk-ant-modelsim-0123456789abcdefghijklmnop")
	ts.Setenv("MODELSIM_URL", url+"/v1")
	ts.Setenv("MODELSIM_API_KEY", "sk-modelsim-0123456789abcdefghijklmnop")
	ts.Setenv("GOOGLE_GEMINI_BASE_URL", url)
	ts.Setenv("GEMINI_API_KEY", "modelsim-gemini-0123456789abcdef")
	ts.Logf("modelsim at %s", url)
}

// taggedProcs lists the processes whose environment holds ORCH_DIR under
// work: the workers' agents and everything they started.
func taggedProcs(work string) []string {
	entries, _ := os.ReadDir("/proc")
	var out []string
	self := fmt.Sprint(os.Getpid())
	for _, e := range entries {
		pid := e.Name()
		if pid == self || pid[0] < '0' || pid[0] > '9' {
			continue
		}
		env, err := os.ReadFile(filepath.Join("/proc", pid, "environ"))
		if err != nil {
			continue
		}
		for _, kv := range strings.Split(string(env), "\x00") {
			if v, ok := strings.CutPrefix(kv, "ORCH_DIR="); ok && strings.HasPrefix(v, work+string(filepath.Separator)) {
				cmd, _ := os.ReadFile(filepath.Join("/proc", pid, "cmdline"))
				out = append(out, pid+" "+strings.ReplaceAll(strings.TrimRight(string(cmd), "\x00"), "\x00", " "))
				break
			}
		}
	}
	return out
}

func killTagged(work string) {
	for _, p := range taggedProcs(work) {
		var pid int
		fmt.Sscan(p, &pid)
		if pid > 0 {
			syscall.Kill(pid, syscall.SIGKILL)
		}
	}
}

// noprocs: within 15s, no process is left whose environment names this
// script's .orch (orch down stopped every process the agents started).
func cmdNoProcs(ts *testscript.TestScript, neg bool, args []string) {
	work := ts.Getenv("WORK")
	var left []string
	eventually.True(leftReporter{ts, &left}, 15*time.Second, func() bool {
		left = taggedProcs(work)
		return len(left) == 0
	}, "no process left running")
}

// leftReporter adds the processes still running to a failure.
type leftReporter struct {
	ts   *testscript.TestScript
	left *[]string
}

func (r leftReporter) Fatalf(format string, args ...any) {
	r.ts.Fatalf(format+":\n%s", append(args, strings.Join(*r.left, "\n"))...)
}

// claudeForAll is the claude-for-all condition: the claude on PATH can be
// run by other users (every folder above it searchable by all), as a
// run_as worker needs. .ci/install-agents installs there when root; where
// ORCH_REQUIRE_RUNAS=1, one closed to others is an error, never a skip.
func claudeForAll() (bool, error) {
	p, err := exec.LookPath("claude")
	if err != nil {
		return false, nil
	}
	if real, err := filepath.EvalSymlinks(p); err == nil {
		p = real
	}
	for d := filepath.Dir(p); ; d = filepath.Dir(d) {
		fi, err := os.Stat(d)
		if err != nil || fi.Mode().Perm()&0o001 == 0 {
			if requireRunAs() {
				return false, fmt.Errorf("claude (%s) is in a folder other users cannot search (%s), and ORCH_REQUIRE_RUNAS=1: install the agents with .ci/install-agents as root (it uses /opt/orch-agents)", p, d)
			}
			return false, nil
		}
		if d == "/" {
			return true, nil
		}
	}
}
