package main

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/rogpeppe/go-internal/testscript"

	"github.com/orch-dev/orch/broker"
	"github.com/orch-dev/orch/internal/eventually"
	"github.com/orch-dev/orch/internal/orchctl"
	"github.com/orch-dev/orch/internal/orchdir"
	"github.com/orch-dev/orch/internal/state"
	"github.com/orch-dev/orch/notify"
	"github.com/orch-dev/orch/plans"
)

// TestMain lets the test binary act as orch and orch-notify, so scripts
// (and the tmux panes they start) run the real commands as processes.
func TestMain(m *testing.M) {
	testscript.Main(m, map[string]func(){
		"orch": func() {
			os.Exit(run(os.Args[1:], streams{In: os.Stdin, Out: os.Stdout, Err: os.Stderr}))
		},
		"orch-notify": func() { os.Exit(notify.Main(os.Args[1:], os.Getenv, os.Stderr)) },
	})
}

// workerkey <wN>...: make the workers' keys in the repo's .orch/, as
// orch serve does for the workers it starts: for scripts that send as a
// worker before any orch serve ran.
func cmdWorkerKey(ts *testscript.TestScript, neg bool, args []string) {
	if len(args) == 0 {
		ts.Fatalf("usage: workerkey <wN>...")
	}
	ts.Check(broker.EnsureCreds(orchdir.Of(ts.MkAbs(".")), args...))
}

// tmuxCommand runs tmux from this process with the given TMUX_TMPDIR and
// no TMUX, as the script's processes run it.
func tmuxCommand(tmuxDir string, args ...string) *exec.Cmd {
	cmd := exec.Command("tmux", args...)
	env := []string{"TMUX_TMPDIR=" + tmuxDir}
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "TMUX_TMPDIR=") && !strings.HasPrefix(kv, "TMUX=") {
			env = append(env, kv)
		}
	}
	cmd.Env = env
	return cmd
}

// tmuxCmd is tmuxCommand for a script: its TMUX_TMPDIR, its socket.
func tmuxCmd(ts *testscript.TestScript, args ...string) *exec.Cmd {
	return tmuxCommand(ts.Getenv("TMUX_TMPDIR"), append([]string{"-L", ts.Getenv("ORCH_TMUX_SOCKET")}, args...)...)
}

// requireTmux is true in CI: a missing tmux fails the tmux scripts instead
// of skipping them.
func requireTmux() bool { return os.Getenv("ORCH_REQUIRE_TMUX") == "1" }

func TestScripts(t *testing.T) {
	if _, err := exec.LookPath("tmux"); err != nil && requireTmux() {
		t.Fatal("tmux is not installed and ORCH_REQUIRE_TMUX=1: install tmux (apt-get install -y tmux)")
	}
	testscript.Run(t, scriptParams("testdata/script"))
}

// scriptParams is the one testscript setup of every script directory: a
// private tmux server per script, git with a fixed identity and no user
// config, and the custom commands.
func scriptParams(dir string) testscript.Params {
	return testscript.Params{
		Dir: dir,
		Setup: func(env *testscript.Env) error {
			var b [6]byte
			rand.Read(b[:])
			sock := "orchts-" + hex.EncodeToString(b[:])
			env.Setenv("ORCH_TMUX_SOCKET", sock)
			// tmux finds its socket under TMUX_TMPDIR: the script's processes
			// and this process's helpers (tmuxCmd) use one directory of the
			// script's own, whatever the caller has set. Under /tmp, so the
			// socket path stays short.
			tmuxDir, err := os.MkdirTemp("/tmp", "orcht-")
			if err != nil {
				return err
			}
			env.Setenv("TMUX_TMPDIR", tmuxDir)
			env.Setenv("TMUX", "")
			env.Setenv("HOME", env.WorkDir)
			env.Setenv("GIT_CONFIG_NOSYSTEM", "1")
			env.Setenv("GIT_AUTHOR_NAME", "test")
			env.Setenv("GIT_AUTHOR_EMAIL", "test@example.com")
			env.Setenv("GIT_COMMITTER_NAME", "test")
			env.Setenv("GIT_COMMITTER_EMAIL", "test@example.com")
			env.Defer(func() {
				tmuxCommand(tmuxDir, "-L", sock, "kill-server").Run()
				os.RemoveAll(tmuxDir)
			})
			return nil
		},
		Condition: func(cond string) (bool, error) {
			if cond == "tmux" {
				_, err := exec.LookPath("tmux")
				return err == nil, nil
			}
			if cond == "runas" {
				return condRunAs()
			}
			if cond == "root" {
				// root ignores file modes: a chmod cannot make a directory unwritable.
				return os.Geteuid() == 0, nil
			}
			return false, fmt.Errorf("unknown condition %q", cond)
		},
		Cmds: map[string]func(ts *testscript.TestScript, neg bool, args []string){
			"waitserving": cmdWaitServing,
			"waitstate":   cmdWaitState,
			"jsonlen":     cmdJSONLen,
			"countlines":  cmdCountLines,
			"exitcode":    cmdExitCode,
			"waitfile":    cmdWaitFile,
			"waitgrep":    cmdWaitGrep,
			"workerkey":   cmdWorkerKey,
			"checkreport": cmdCheckReport,
			"checkdeps":   cmdCheckDeps,
			"hidetmux":    cmdHideTmux,
			"unixuser":    cmdUnixUser,
			"opendirs":    cmdOpenDirs,
			"killworker":  cmdKillWorker,
			"waitworker":  cmdWaitWorker,
			"waitstatus":  cmdWaitStatus,
			"waitarmed":   cmdWaitArmed,
			"tmuxstop":    cmdTmuxStop,
		},
	}
}

// waitserving [dir]: wait until orch serve holds the repo's lock and its
// broker is reachable.
func cmdWaitServing(ts *testscript.TestScript, neg bool, args []string) {
	root := ts.MkAbs(".")
	if len(args) > 0 {
		root = ts.MkAbs(args[0])
	}
	eventually.True(ts, 20*time.Second, func() bool {
		if !orchctl.Serving(root) {
			return false
		}
		ep, err := notify.ReadEndpoint(filepath.Join(root, orchdir.Name))
		return err == nil && ep.PID == orchctl.ServePID(root)
	}, "orch serve in %s", root)
}

// waitstate <plan> <state>: wait until orch status shows the plan in state.
func cmdWaitState(ts *testscript.TestScript, neg bool, args []string) {
	if len(args) != 2 {
		ts.Fatalf("usage: waitstate <plan> <state>")
	}
	root := ts.MkAbs(".")
	eventually.True(ts, 20*time.Second, func() bool {
		v, err := orchctl.Status(root)
		if err != nil {
			return false
		}
		for _, p := range v.Plans {
			if p.Name == args[0] {
				return string(p.State) == args[1]
			}
		}
		return false
	}, "plan %s to be %s", args[0], args[1])
}

// jsonlen <file> <n>: the JSON array in file has n elements.
func cmdJSONLen(ts *testscript.TestScript, neg bool, args []string) {
	if len(args) != 2 {
		ts.Fatalf("usage: jsonlen <file> <n>")
	}
	var list []json.RawMessage
	if err := json.Unmarshal([]byte(ts.ReadFile(args[0])), &list); err != nil {
		ts.Fatalf("%s: %v", args[0], err)
	}
	want, _ := strconv.Atoi(args[1])
	if (len(list) == want) == neg {
		ts.Fatalf("%s has %d elements, want %d", args[0], len(list), want)
	}
}

// countlines <file> <regexp-free substring> <n>: n lines of file contain the substring.
func cmdCountLines(ts *testscript.TestScript, neg bool, args []string) {
	if len(args) != 3 {
		ts.Fatalf("usage: countlines <file> <substring> <n>")
	}
	n := 0
	for _, l := range strings.Split(ts.ReadFile(args[0]), "\n") {
		if strings.Contains(l, args[1]) {
			n++
		}
	}
	want, _ := strconv.Atoi(args[2])
	if (n == want) == neg {
		ts.Fatalf("%s: %d lines contain %q, want %d", args[0], n, args[1], want)
	}
}

// exitcode <n> <command> [args...]: run command and check that it exits with
// n. Its stdout and stderr are kept for the stdout/stderr checks that follow.
func cmdExitCode(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) < 2 {
		ts.Fatalf("usage: exitcode <n> <command> [args...]")
	}
	want, err := strconv.Atoi(args[0])
	if err != nil {
		ts.Fatalf("exitcode: %q is not a number", args[0])
	}
	got := 0
	var ee *exec.ExitError
	if err := ts.Exec(args[1], args[2:]...); errors.As(err, &ee) {
		got = ee.ExitCode()
	} else if err != nil {
		ts.Fatalf("%s: %v", args[1], err)
	}
	if got != want {
		ts.Fatalf("%s exited %d, want %d", args[1], got, want)
	}
}

// waitfile <path>: wait until path exists; ! waitfile <path>: until it is gone.
func cmdWaitFile(ts *testscript.TestScript, neg bool, args []string) {
	if len(args) != 1 {
		ts.Fatalf("usage: [!] waitfile <path>")
	}
	path := ts.MkAbs(args[0])
	eventually.True(ts, 20*time.Second, func() bool {
		_, err := os.Stat(path)
		return (err == nil) != neg
	}, "%s to exist: %v", args[0], !neg)
}

// waitgrep <path> <regexp>: wait until the file's content matches.
func cmdWaitGrep(ts *testscript.TestScript, neg bool, args []string) {
	if len(args) != 2 || neg {
		ts.Fatalf("usage: waitgrep <path> <regexp>")
	}
	re, err := regexp.Compile(args[1])
	if err != nil {
		ts.Fatalf("waitgrep: %v", err)
	}
	path := ts.MkAbs(args[0])
	eventually.True(ts, 20*time.Second, func() bool {
		data, err := os.ReadFile(path)
		return err == nil && re.Match(data)
	}, "%s to match %q", args[0], args[1])
}

// checkreport <file> <workers>: in the orch report --json document in file,
// no verifier is ever the author, and a 3-round verification used
// min(3, workers-1) distinct verifiers.
func cmdCheckReport(ts *testscript.TestScript, neg bool, args []string) {
	if len(args) != 2 {
		ts.Fatalf("usage: checkreport <file> <workers>")
	}
	workers, _ := strconv.Atoi(args[1])
	var reps []struct {
		Plan   string `json:"plan"`
		Author string `json:"author"`
		Rounds int    `json:"rounds"`
		Matrix []struct {
			Round    int    `json:"round"`
			Verifier string `json:"verifier"`
		} `json:"matrix"`
	}
	if err := json.Unmarshal([]byte(ts.ReadFile(args[0])), &reps); err != nil {
		ts.Fatalf("%s: %v", args[0], err)
	}
	if len(reps) == 0 {
		ts.Fatalf("no reports in %s", args[0])
	}
	for _, r := range reps {
		byRound := map[int]string{}
		for _, m := range r.Matrix {
			if m.Verifier == "" || m.Verifier == r.Author {
				ts.Fatalf("plan %s: round %d verified by %q, its author is %s", r.Plan, m.Round, m.Verifier, r.Author)
			}
			byRound[m.Round] = m.Verifier
		}
		if r.Rounds == 3 && len(byRound) == 3 {
			distinct := map[string]bool{}
			for _, v := range byRound {
				distinct[v] = true
			}
			if want := min(3, workers-1); len(distinct) != want {
				ts.Fatalf("plan %s: 3 rounds by %v, want %d distinct verifiers", r.Plan, byRound, want)
			}
		}
	}
}

// checkdeps: every dispatched plan's branch was made from a commit that
// already held the work of each plan it depends on (its branch's head,
// stacked, or its harvest on the base branch once integrated), i.e. no
// plan went out before its dependencies were done, nor without their code.
func cmdCheckDeps(ts *testscript.TestScript, neg bool, args []string) {
	root := ts.MkAbs(".")
	st, err := state.Load(orchdir.Of(root))
	if err != nil {
		ts.Fatalf("%v", err)
	}
	checked := 0
	for name, p := range st.Plans {
		def, err := plans.Load(root, name)
		if err != nil {
			ts.Fatalf("%v", err)
		}
		for _, dep := range def.DependsOn {
			d := st.Plans[dep]
			if d == nil || d.Result == "" || p.Base == "" {
				ts.Fatalf("plan %s or its dependency %s has no record (base %q)", name, dep, p.Base)
			}
			if err := exec.Command("git", "-C", root, "merge-base", "--is-ancestor", "refs/heads/orch/"+dep, p.Base).Run(); err != nil {
				if err := exec.Command("git", "-C", root, "merge-base", "--is-ancestor", d.Result, p.Base).Run(); err != nil {
					ts.Fatalf("plan %s (base %s) went out without %s's work (branch orch/%s, harvest %s)", name, p.Base, dep, dep, d.Result)
				}
			}
			checked++
		}
	}
	if checked == 0 {
		ts.Fatalf("no dependency to check")
	}
	ts.Logf("checkdeps: %d dependencies held", checked)
}

// hidetmux: from here on the script's PATH has every program it had
// except tmux (a folder of links), so nothing run can reach tmux.
func cmdHideTmux(ts *testscript.TestScript, neg bool, args []string) {
	dir := filepath.Join(ts.Getenv("WORK"), ".notmux-bin")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		ts.Fatalf("%v", err)
	}
	for _, d := range filepath.SplitList(ts.Getenv("PATH")) {
		entries, err := os.ReadDir(d)
		if err != nil {
			continue
		}
		for _, e := range entries {
			if e.Name() == "tmux" || e.IsDir() {
				continue
			}
			// The first folder on PATH wins, as in a lookup.
			os.Symlink(filepath.Join(d, e.Name()), filepath.Join(dir, e.Name()))
		}
	}
	ts.Setenv("PATH", dir)
	if _, err := exec.LookPath(filepath.Join(dir, "tmux")); err == nil {
		ts.Fatalf("tmux still reachable")
	}
}
