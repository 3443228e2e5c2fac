package main

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	mrand "math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/orch-dev/orch/internal/eventually"
	"github.com/orch-dev/orch/internal/orchctl"
	"github.com/orch-dev/orch/internal/orchdir"
	"github.com/orch-dev/orch/internal/state"
	"github.com/orch-dev/orch/ledger"
	"github.com/orch-dev/orch/notify"
)

// TestSoak: a fleet of 20 scripted workers in tmux finishes 250 plans (500
// worker events, plus 250 dispatch commands) while the lead loop is killed
// with SIGKILL 10 times at random moments and started again. At the end
// every plan has exactly one harvest commit, one ledger entry and one
// callback. Bounded: it fails rather than hangs. ORCH_SOAK_PLANS,
// ORCH_SOAK_WORKERS and ORCH_SOAK_KILLS change its size.
func TestSoak(t *testing.T) {
	if testing.Short() {
		t.Skip("soak test: skipped with -short")
	}
	if _, err := exec.LookPath("tmux"); err != nil {
		if requireTmux() {
			t.Fatal("tmux is not installed and ORCH_REQUIRE_TMUX=1")
		}
		t.Skip("tmux not installed")
	}
	nPlans, nWorkers, nKills := envInt("ORCH_SOAK_PLANS", 250), envInt("ORCH_SOAK_WORKERS", 20), envInt("ORCH_SOAK_KILLS", 10)
	start := time.Now()
	root := filepath.Join(t.TempDir(), "repo")
	var b [6]byte
	rand.Read(b[:])
	socket := "orchsoak-" + hex.EncodeToString(b[:])
	tmuxDir, err := os.MkdirTemp("/tmp", "orcht-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		tmuxCommand(tmuxDir, "-L", socket, "kill-server").Run()
		os.RemoveAll(tmuxDir)
	})
	env := append(tmuxCommand(tmuxDir).Env, "ORCH_TMUX_SOCKET="+socket, "GIT_CONFIG_NOSYSTEM=1", "HOME="+t.TempDir(),
		"GIT_AUTHOR_NAME=soak", "GIT_AUTHOR_EMAIL=soak@example.com", "GIT_COMMITTER_NAME=soak", "GIT_COMMITTER_EMAIL=soak@example.com")
	sh := func(name string, args ...string) string {
		t.Helper()
		cmd := exec.Command(name, args...)
		cmd.Dir, cmd.Env = root, env
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("%s %v: %v\n%s", name, args, err, out)
		}
		return string(out)
	}
	os.MkdirAll(root, 0o755)
	sh("git", "init", "-q", "-b", "main")
	sh("orch", "init")
	names := make([]string, nPlans)
	for i := range names {
		names[i] = fmt.Sprintf("s%03d", i)
		dir := filepath.Join(root, "plans", names[i])
		os.MkdirAll(dir, 0o755)
		os.WriteFile(filepath.Join(dir, "PLAN.md"), []byte(fmt.Sprintf("Soak plan %d.\nagent: status ok-%d\n", i, i)), 0o644)
	}
	sh("git", "add", "plans")
	sh("git", "commit", "-qm", "soak plans")

	logPath := filepath.Join(t.TempDir(), "serve.log")
	logf, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	defer logf.Close()
	// However the test ends, a failure shows what the lead loop said.
	t.Cleanup(func() {
		if t.Failed() {
			data, _ := os.ReadFile(logPath)
			t.Logf("serve log tail:\n%s", tail(string(data), 80))
		}
	})
	var serve *exec.Cmd
	var exited chan struct{} // closed when the current orch serve has exited
	var exitErr error
	startServe := func() {
		t.Helper()
		serve = exec.Command("orch", "serve", "--workers", strconv.Itoa(nWorkers), "--agent", "orch agent", "--ack-timeout", "15s")
		serve.Dir, serve.Env, serve.Stderr = root, env, logf
		if err := serve.Start(); err != nil {
			t.Fatal(err)
		}
		cmd, done := serve, make(chan struct{})
		exited = done
		go func() { exitErr = cmd.Wait(); close(done) }()
		t.Cleanup(func() { cmd.Process.Kill(); <-done })
		pid := serve.Process.Pid
		eventually.True(t, 30*time.Second, func() bool {
			select {
			case <-done:
				t.Fatalf("orch serve (pid %d) exited while starting: %v", pid, exitErr)
			default:
			}
			ep, err := notify.ReadEndpoint(filepath.Join(root, orchdir.Name))
			return err == nil && ep.PID == pid && orchctl.ServePID(root) == pid
		}, "orch serve (pid %d) to be up", pid)
	}
	startServe()
	sh("orch", append([]string{"dispatch"}, names...)...)

	// Kill the lead loop at random moments while the fleet works.
	for k := 0; k < nKills; k++ {
		pause := time.Duration(200+mrand.IntN(1200)) * time.Millisecond
		from := time.Now()
		eventually.True(t, pause+5*time.Second, func() bool { return time.Since(from) >= pause }, "a pause before kill %d", k+1)
		serve.Process.Signal(syscall.SIGKILL)
		<-exited
		fmt.Fprintf(logf, "=== soak: SIGKILL %d\n", k+1)
		startServe()
	}

	eventually.True(t, 5*time.Minute, func() bool {
		v, err := orchctl.Status(root)
		if err != nil {
			return false
		}
		done := 0
		for _, p := range v.Plans {
			if p.State == state.PlanDone {
				done++
			}
		}
		return done == nPlans
	}, "all %d plans done", nPlans)
	elapsed := time.Since(start)

	// Exactly one commit of each plan's RESULT.md (harvests may be batched:
	// one commit can carry several).
	harvests := map[string]int{}
	for _, line := range strings.Split(sh("git", "log", "--format=", "--name-only"), "\n") {
		if rest, ok := strings.CutPrefix(line, "plans/"); ok && strings.HasSuffix(rest, "/RESULT.md") {
			harvests[strings.TrimSuffix(rest, "/RESULT.md")]++
		}
	}
	// Exactly one ledger entry per plan, each from its own event.
	entries, err := ledger.Load(root)
	if err != nil {
		t.Fatal(err)
	}
	ledgerPlans, ledgerEvents := map[string]int{}, map[string]int{}
	for _, e := range entries {
		ledgerPlans[e.Plan]++
		ledgerEvents[e.Event]++
	}
	// Exactly one WORKER-DONE per plan. Other callbacks are counted, not
	// failed: on a loaded machine a scripted agent may miss the dispatch
	// acknowledgement deadline (WORKER-FAILED) and then start late, which
	// takes the plan back; what the soak proves is one effect per plan.
	callbacks := map[string]int{}
	others := 0
	for {
		// Until every plan's callback came, a slow orch wait on a loaded
		// machine must not pass for a lost callback: each gets 15 s. After
		// that, 2 s finds a double.
		timeout := "15s"
		if len(callbacks) >= nPlans {
			timeout = "2s"
		}
		cmd := exec.Command("orch", "wait", "--timeout", timeout)
		cmd.Dir, cmd.Env = root, env
		out, err := cmd.Output()
		if err != nil {
			break
		}
		line := strings.TrimSpace(string(out))
		if rest, ok := strings.CutPrefix(line, "WORKER-DONE "); ok {
			plan, _, _ := strings.Cut(rest, ":")
			callbacks[plan]++
		} else {
			others++
			t.Logf("other callback: %q", line)
		}
	}
	lost, doubled := 0, 0
	for _, n := range names {
		for what, m := range map[string]map[string]int{"harvest commit": harvests, "ledger entry": ledgerPlans, "callback": callbacks} {
			switch c := m[n]; {
			case c == 0:
				lost++
				t.Errorf("plan %s: no %s", n, what)
			case c > 1:
				doubled++
				t.Errorf("plan %s: %d %ss", n, c, what)
			}
		}
	}
	if len(entries) != nPlans || len(ledgerEvents) != nPlans {
		t.Errorf("ledger: %d entries from %d events, want %d and %d", len(entries), len(ledgerEvents), nPlans, nPlans)
	}
	sh("orch", "down")
	logData, _ := os.ReadFile(logPath)
	log := string(logData)
	t.Logf("soak: %d plans, %d worker events, %d workers, %d SIGKILLs of the lead loop: all done in %s; lost %d, doubled %d; "+
		"duplicate deliveries absorbed %d, catch-ups after restart %d, events delivered from the spool %d, harvest retries %d, dispatch re-sends %d, batched harvests %d, other callbacks %d",
		nPlans, 2*nPlans, nWorkers, nKills, elapsed.Round(100*time.Millisecond), lost, doubled,
		strings.Count(log, "duplicate event, no effect"), strings.Count(log, "catching up"), strings.Count(log, "spool: delivered"),
		strings.Count(log, "event not handled yet"), strings.Count(log, "re-sending the dispatch line"), strings.Count(log, "harvested together"), others)
}

func envInt(name string, def int) int {
	if n, err := strconv.Atoi(os.Getenv(name)); err == nil && n > 0 {
		return n
	}
	return def
}

func tail(s string, n int) string {
	lines := strings.Split(s, "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
