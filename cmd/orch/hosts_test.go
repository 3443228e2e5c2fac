package main

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/orch-dev/orch/fleet"
	"github.com/orch-dev/orch/hosts"
	"github.com/orch-dev/orch/internal/eventually"
	"github.com/orch-dev/orch/internal/netns"
	"github.com/orch-dev/orch/internal/orchctl"
	"github.com/orch-dev/orch/internal/orchdir"
	"github.com/orch-dev/orch/internal/state"
	"github.com/orch-dev/orch/ledger"
)

// syncBuf is an output buffer several goroutines may write.
type syncBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuf) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuf) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// freePort is a TCP port free on addr now.
func freePort(t *testing.T, addr string) int {
	t.Helper()
	l, err := net.Listen("tcp", net.JoinHostPort(addr, "0"))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// Two hosts, each a network namespace of this machine with its own orch
// host, clone and processes, work for one lead over their leaf links:
// alpha's workers run headless, beta's in tmux panes on beta's own tmux
// server (orch host join --tmux). Plans dispatched to workers on both are
// harvested once each, their code on the lead's plan branches; orch read
// of a beta worker shows its pane; a beta pane killed while its plan runs
// is reported dead, and the plan goes out again, harvested once. One host's link is cut while its workers
// finish and the lead is restarted meanwhile: their events wait on the
// host and come once after the link is back. A worker's key sending as
// another worker is refused on its host; a removed host is cut off.
func TestHostsAcrossNamespaces(t *testing.T) {
	netns.Require(t)
	for _, tool := range []string{"git", "tmux"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Fatalf("%s is not installed", tool)
		}
	}
	home := t.TempDir()
	env := []string{"PATH=" + os.Getenv("PATH"), "HOME=" + home, "GIT_CONFIG_NOSYSTEM=1", "LANG=C.UTF-8",
		"GIT_AUTHOR_NAME=hosts", "GIT_AUTHOR_EMAIL=hosts@example.com", "GIT_COMMITTER_NAME=hosts", "GIT_COMMITTER_EMAIL=hosts@example.com"}
	top := t.TempDir()
	root := filepath.Join(top, "lead")
	run := func(cmd *exec.Cmd) string {
		t.Helper()
		cmd.Env = env
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("%v: %v\n%s", cmd.Args, err, out)
		}
		return string(out)
	}
	sh := func(dir, name string, args ...string) string {
		t.Helper()
		cmd := exec.Command(name, args...)
		cmd.Dir = dir
		return run(cmd)
	}
	os.MkdirAll(root, 0o755)
	sh(root, "git", "init", "-q", "-b", "main")
	sh(root, "orch", "init")
	plan := func(name, body string) {
		dir := filepath.Join(root, "plans", name)
		os.MkdirAll(dir, 0o755)
		os.WriteFile(filepath.Join(dir, "PLAN.md"), []byte(body), 0o644)
	}
	var first, second []string
	for i := 1; i <= 6; i++ {
		n := fmt.Sprintf("p%d", i)
		first = append(first, n)
		plan(n, fmt.Sprintf("Plan %d.\nagent: sleep 1s\nagent: write out/%s.txt made by %s\nagent: status ok-%d\n", i, n, n, i))
	}
	// Long enough to kill its agent while it works.
	plan("r1", "Plan r1.\nagent: sleep 4s\nagent: write out/r1.txt made by r1\nagent: status ok-r1\n")
	plan("k1", "Plan k1.\nagent: sleep 4s\nagent: write out/k1.txt made by k1\nagent: status ok-k1\n")
	for i := 1; i <= 4; i++ {
		n := fmt.Sprintf("q%d", i)
		second = append(second, n)
		// Long enough for the link to be cut while they run.
		plan(n, fmt.Sprintf("Plan q%d.\nagent: sleep 3s\nagent: write out/%s.txt made by %s\nagent: status ok-q%d\n", i, n, n, i))
	}
	// A host's worktrees get the files its clone's .worktreeinclude names
	// from the clone (beta's .env), never committed.
	os.WriteFile(filepath.Join(root, ".gitignore"), []byte(".env\n"), 0o644)
	os.WriteFile(filepath.Join(root, fleet.IncludeFile), []byte(".env\n"), 0o644)
	sh(root, "git", "add", "plans", ".gitignore", fleet.IncludeFile)
	sh(root, "git", "commit", "-qm", "plans")

	lead := netns.RootAddr(t)
	alpha, beta := netns.New(t, "alpha"), netns.New(t, "beta")

	// The hosts clone the lead's repo over the network (git daemon on the
	// lead's address), as a user would with any remote.
	gitPort := freePort(t, lead)
	daemon := exec.Command("git", "daemon", "--export-all", "--reuseaddr", "--base-path="+top, "--listen="+lead, "--port="+strconv.Itoa(gitPort), top)
	daemon.Env = env
	if err := daemon.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { daemon.Process.Kill(); daemon.Wait() })
	remote := fmt.Sprintf("git://%s:%d/lead", lead, gitPort)

	tokens := map[string]string{}
	owned := map[string][]string{}
	for _, h := range []string{"alpha", "beta"} {
		out := sh(root, "orch", "hosts", "add", h, "--workers", "2")
		tok := regexp.MustCompile(`orchhost1\.[A-Za-z0-9_-]+`).FindString(out)
		if tok == "" {
			t.Fatalf("orch hosts add printed no token:\n%s", out)
		}
		parsed, err := hosts.ParseToken(tok)
		if err != nil {
			t.Fatal(err)
		}
		tokens[h], owned[h] = tok, parsed.Workers
	}

	leafPort := freePort(t, lead)
	serveLog := &syncBuf{}
	var serve *exec.Cmd
	var served chan struct{}
	startServe := func() {
		t.Helper()
		serve = exec.Command("orch", "serve", "--leaf", net.JoinHostPort(lead, strconv.Itoa(leafPort)))
		serve.Dir, serve.Env, serve.Stderr = root, env, serveLog
		if err := serve.Start(); err != nil {
			t.Fatal(err)
		}
		cmd, done := serve, make(chan struct{})
		served = done
		go func() { cmd.Wait(); close(done) }()
		t.Cleanup(func() { cmd.Process.Kill(); <-done })
		eventually.True(t, 30*time.Second, func() bool { return orchctl.ServePID(root) == cmd.Process.Pid }, "orch serve up")
	}
	startServe()
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("orch serve said:\n%s", serveLog.String())
		}
	})

	// beta's tmux server: a socket of the test's own, under a folder of
	// its own (short: a socket path has a length limit).
	tmuxDir, err := os.MkdirTemp("", "orch-hosts-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(tmuxDir) })
	tmuxEnv := append(slices.Clone(env), "TMUX_TMPDIR="+tmuxDir, "ORCH_TMUX_SOCKET=beta")
	betaTmux := func(args ...string) (string, error) {
		cmd := exec.Command("tmux", append([]string{"-L", "beta"}, args...)...)
		cmd.Env = tmuxEnv
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	t.Cleanup(func() { betaTmux("kill-server") })

	hostLogs := map[string]*syncBuf{}
	clones := map[string]string{}
	nss := map[string]*netns.Host{"alpha": alpha, "beta": beta}
	hostCmds := map[string]*exec.Cmd{}
	startHost := func(h string) {
		t.Helper()
		tf := filepath.Join(top, h+".token")
		os.WriteFile(tf, []byte(tokens[h]+"\n"), 0o600)
		args := []string{"host", "join", fmt.Sprintf("nats-leaf://%s:%d", lead, leafPort), "--token-file", tf, "--agent", "orch agent"}
		henv := env
		if h == "beta" {
			args, henv = append(args, "--tmux"), tmuxEnv
		}
		cmd := nss[h].Command(context.Background(), "orch", args...)
		cmd.Dir, cmd.Env = clones[h], henv
		cmd.Stdout, cmd.Stderr = hostLogs[h], hostLogs[h]
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		hostCmds[h] = cmd
	}
	stopHost := func(h string) {
		if cmd := hostCmds[h]; cmd != nil {
			cmd.Process.Signal(syscall.SIGTERM)
			cmd.Wait()
			hostCmds[h] = nil
		}
	}
	for _, h := range []string{"alpha", "beta"} {
		clone := filepath.Join(top, "clone-"+h)
		run(nss[h].Command(context.Background(), "git", "clone", "-q", remote, clone))
		clones[h] = clone
		if h == "beta" {
			os.WriteFile(filepath.Join(clone, ".env"), []byte("SECRET=beta\n"), 0o600)
		}
		hostLogs[h] = &syncBuf{}
		startHost(h)
		t.Cleanup(func() {
			stopHost(h)
			if t.Failed() {
				t.Logf("orch host %s said:\n%s", h, hostLogs[h].String())
			}
		})
	}
	linked := func(want ...string) func() bool {
		return func() bool {
			hs, err := orchctl.Hosts(root)
			if err != nil {
				return false
			}
			up := map[string]bool{}
			for _, h := range hs {
				up[h.Name] = h.Link != nil && h.Link.Up
			}
			for _, w := range want {
				if !up[w] {
					return false
				}
			}
			return true
		}
	}
	eventually.True(t, 30*time.Second, linked("alpha", "beta"), "both hosts linked")

	status := func() orchctl.StatusView {
		v, err := orchctl.Status(root)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	allDone := func(names []string) func() bool {
		return func() bool {
			done := map[string]bool{}
			for _, p := range status().Plans {
				done[p.Name] = p.State == state.PlanDone
			}
			for _, n := range names {
				if !done[n] {
					return false
				}
			}
			return true
		}
	}

	// 1. Plans on workers of both hosts, harvested once each.
	began := time.Now()
	sh(root, "orch", append([]string{"dispatch"}, first...)...)
	eventually.True(t, 90*time.Second, allDone(first), "the first plans done")
	t.Logf("%d plans on 2 hosts done in %v", len(first), time.Since(began).Round(time.Millisecond))
	ran := map[string]bool{}
	for _, p := range status().Plans {
		for h, ws := range owned {
			for _, w := range ws {
				if p.Worker == w {
					ran[h] = true
				}
			}
		}
	}
	if !ran["alpha"] || !ran["beta"] {
		t.Errorf("plans ran on %v, want both hosts", ran)
	}
	for _, n := range first {
		got := sh(root, "git", "show", "orch/"+n+":out/"+n+".txt")
		if !strings.Contains(got, "made by "+n) {
			t.Errorf("plan %s's branch on the lead has out/%s.txt = %q", n, n, got)
		}
	}

	// orch read of a host's worker: the output of its last run, from its
	// host.
	var alphaWorker string
	for _, p := range status().Plans {
		if slices.Contains(owned["alpha"], p.Worker) {
			alphaWorker = p.Worker
		}
	}
	if alphaWorker == "" {
		t.Fatal("no plan ran on alpha")
	}
	if out := sh(root, "orch", "read", alphaWorker); !strings.Contains(out, "on host alpha") || !strings.Contains(out, "→ plan p") {
		t.Errorf("orch read %s:\n%s", alphaWorker, out)
	}

	// orch read of a beta worker: its pane's screen, from beta, with the
	// dispatch line typed there and what the scripted agent printed.
	var betaWorker string
	for _, p := range status().Plans {
		if slices.Contains(owned["beta"], p.Worker) {
			betaWorker = p.Worker
		}
	}
	if betaWorker == "" {
		t.Fatal("no plan ran on beta")
	}
	if out := sh(root, "orch", "read", betaWorker); !regexp.MustCompile(`on host beta, pane %[0-9]+: its screen`).MatchString(out) ||
		!strings.Contains(out, "Read plans/p") || !strings.Contains(out, "scripted agent "+betaWorker+" ready") {
		t.Errorf("orch read %s:\n%s", betaWorker, out)
	}

	if got, err := os.ReadFile(filepath.Join(fleet.WorktreeDir(clones["beta"], betaWorker), ".env")); err != nil || string(got) != "SECRET=beta\n" {
		t.Errorf("beta's worktree of %s: .env %q, %v; want beta's clone's, by its %s", betaWorker, got, err, fleet.IncludeFile)
	}
	for _, n := range first {
		if files := sh(root, "git", "ls-tree", "-r", "--name-only", "orch/"+n); strings.Contains(files, ".env") {
			t.Errorf("plan %s's branch on the lead holds an included file:\n%s", n, files)
		}
	}

	// A beta pane killed while its plan runs: beta reports the death, the
	// lead marks the worker dead and sends the plan out once more.
	sh(root, "orch", "dispatch", "k1", "--to", betaWorker)
	var killed string
	eventually.True(t, 30*time.Second, func() bool {
		v := status()
		for _, p := range v.Plans {
			if p.Name == "k1" && p.State == state.PlanRunning {
				for _, w := range v.Workers {
					if w.ID == betaWorker && w.Pane != "" && !w.Headless {
						killed = w.Pane
						return true
					}
				}
			}
		}
		return false
	}, "k1 running in a beta pane")
	if out, err := betaTmux("kill-pane", "-t", killed); err != nil {
		t.Fatalf("kill beta's pane %s: %v\n%s", killed, err, out)
	}
	eventually.True(t, 20*time.Second, func() bool {
		for _, w := range status().Workers {
			if w.ID == betaWorker {
				return w.State == state.WorkerDead && strings.Contains(w.Reason, "pane "+killed+" exited") && strings.Contains(w.Reason, "on host beta")
			}
		}
		return false
	}, "beta's worker reported dead")
	eventually.True(t, 60*time.Second, allDone([]string{"k1"}), "k1 done after its pane was killed")
	for _, p := range status().Plans {
		if p.Name == "k1" && (p.Attempts != 2 || p.Worker == betaWorker) {
			t.Errorf("k1: %d attempts, last on %s; want 2, not on %s (its pane killed)", p.Attempts, p.Worker, betaWorker)
		}
	}

	// orch doctor, on the lead: each host's link and clock; on a host:
	// the git remote its plans' commits come from.
	doctor := func(cmd *exec.Cmd) string {
		cmd.Env = env
		out, _ := cmd.CombinedOutput() // other checks (agents here) may fail
		return string(out)
	}
	lc := exec.Command("orch", "doctor")
	lc.Dir = root
	if out := doctor(lc); !regexp.MustCompile(`host alpha.*link up, clock within`).MatchString(out) || !strings.Contains(out, "host beta") {
		t.Errorf("orch doctor on the lead:\n%s", out)
	}
	hc := alpha.Command(context.Background(), "orch", "doctor")
	hc.Dir = clones["alpha"]
	if out := doctor(hc); !strings.Contains(out, "origin answers") {
		t.Errorf("orch doctor on host alpha:\n%s", out)
	}

	// 2. alpha's link cut while its workers work; the lead restarted
	// meanwhile; the link back: what alpha's workers sent comes once.
	sh(root, "orch", "hosts", "remove", "beta") // alpha alone takes the next plans
	eventually.True(t, 20*time.Second, func() bool {
		for _, w := range status().Workers {
			if w.Remote == "beta" && w.State != state.WorkerDead {
				return false
			}
		}
		return true
	}, "beta's workers out of use")
	sh(root, "orch", "dispatch", second[0], second[1])
	eventually.True(t, 30*time.Second, func() bool {
		running := 0
		for _, p := range status().Plans {
			if (p.Name == second[0] || p.Name == second[1]) && p.State == state.PlanRunning {
				running++
			}
		}
		return running == 2
	}, "two plans running on alpha")
	alpha.LinkDown(t)
	cut := time.Now()
	// Both runs end on alpha (3 s of work) while its link is down.
	eventually.True(t, 30*time.Second, func() bool { return strings.Count(hostLogs["alpha"].String(), "process ended plan=q") >= 2 }, "alpha's two runs to end")
	serve.Process.Signal(syscall.SIGTERM)
	<-served
	startServe()
	if allDone(second[:2])() {
		t.Fatal("plans done while their host's link was down")
	}
	alpha.LinkUp(t)
	back := time.Now()
	eventually.True(t, 90*time.Second, allDone(second[:2]), "alpha's plans done after its link is back")
	t.Logf("link cut %v, lead restarted meanwhile; plans done %v after the link came back", back.Sub(cut).Round(time.Millisecond), time.Since(back).Round(time.Millisecond))

	// 3. Forged: alpha's first worker's key sends as its second: refused
	// by alpha's server, never reaching the lead.
	aDir := filepath.Join(clones["alpha"], orchdir.Name)
	forge := alpha.Command(context.Background(), "orch-notify", "done", second[2], "forged")
	forge.Dir = clones["alpha"]
	forge.Env = append(env, "ORCH_WORKER="+owned["alpha"][1], "ORCH_CREDS="+orchdir.WorkerKey(aDir, owned["alpha"][0]), "ORCH_NOTIFY_TIMEOUT=2s", "ORCH_SPOOL="+t.TempDir())
	out, _ := forge.CombinedOutput()
	if strings.Contains(string(out), "kept (event") {
		t.Errorf("a worker's key sent another worker's done:\n%s", out)
	}
	eventually.True(t, 10*time.Second, func() bool { return strings.Contains(hostLogs["alpha"].String(), "Publish Violation") }, "alpha's server to log the refusal")

	// 4. The removed host's key is refused: beta stays cut off.
	eventually.True(t, 10*time.Second, func() bool { return strings.Contains(hostLogs["beta"].String(), "Authorization Violation") }, "beta's refused link to be logged on beta")
	sh(root, "orch", "dispatch", second[2], second[3])
	eventually.True(t, 60*time.Second, allDone(second), "the last plans done on alpha")
	for _, p := range status().Plans {
		for _, w := range owned["beta"] {
			if p.Worker == w && (p.Name == second[2] || p.Name == second[3]) {
				t.Errorf("plan %s ran on removed host beta's worker %s", p.Name, w)
			}
		}
	}

	// 5. What a host's worker spools while its host's server is down
	// reaches the lead once the host runs again.
	stopHost("alpha")
	spooled := alpha.Command(context.Background(), "orch-notify", "started", "spooled-one")
	spooled.Dir = clones["alpha"]
	spooled.Env = append(env, "ORCH_WORKER="+owned["alpha"][0], "ORCH_NOTIFY_TIMEOUT=1s")
	if out, err := spooled.CombinedOutput(); err != nil || !strings.Contains(string(out), "spooled") {
		t.Fatalf("orch-notify with its host down: %v\n%s", err, out)
	}
	startHost("alpha")
	eventually.True(t, 30*time.Second, func() bool {
		for _, r := range status().Rejected {
			if r.Plan == "spooled-one" && r.Worker == owned["alpha"][0] {
				return true // it came, and was refused as never dispatched
			}
		}
		return false
	}, "the spooled event to reach the lead")

	// 6. A run's agent dies while its orch host is down: the restarted
	// host reports its end, and the plan goes out once more, harvested
	// once.
	sh(root, "orch", "dispatch", "r1")
	var r1pid int
	eventually.True(t, 30*time.Second, func() bool {
		v := status()
		for _, p := range v.Plans {
			if p.Name == "r1" && p.State == state.PlanRunning {
				for _, w := range v.Workers {
					if w.ID == p.Worker && w.PID > 0 {
						r1pid = w.PID
						return true
					}
				}
			}
		}
		return false
	}, "r1 running on alpha")
	stopHost("alpha")
	if err := syscall.Kill(-r1pid, syscall.SIGKILL); err != nil {
		t.Fatalf("kill r1's agent (process group %d): %v", r1pid, err)
	}
	startHost("alpha")
	eventually.True(t, 60*time.Second, allDone([]string{"r1"}), "r1 done after its first agent died")
	for _, p := range status().Plans {
		if p.Name == "r1" && p.Attempts != 2 {
			t.Errorf("r1 took %d attempts, want 2 (the first one's agent killed)", p.Attempts)
		}
	}

	// Exactly once: one harvest commit, one ledger entry per plan.
	harvests := map[string]int{}
	for _, line := range strings.Split(sh(root, "git", "log", "--format=", "--name-only"), "\n") {
		if rest, ok := strings.CutPrefix(line, "plans/"); ok && strings.HasSuffix(rest, "/RESULT.md") {
			harvests[strings.TrimSuffix(rest, "/RESULT.md")]++
		}
	}
	entries, err := ledger.Load(root)
	if err != nil {
		t.Fatal(err)
	}
	inLedger := map[string]int{}
	for _, e := range entries {
		inLedger[e.Plan]++
	}
	for _, n := range append(append(first, second...), "r1", "k1") {
		if harvests[n] != 1 || inLedger[n] != 1 {
			t.Errorf("plan %s: %d harvest commits, %d ledger entries; want 1 and 1", n, harvests[n], inLedger[n])
		}
	}
	sh(root, "orch", "down")
}
