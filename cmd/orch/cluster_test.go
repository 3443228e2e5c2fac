package main

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nkeys"

	"github.com/orch-dev/orch/broker"
	"github.com/orch-dev/orch/internal/eventually"
	"github.com/orch-dev/orch/internal/orchctl"
	"github.com/orch-dev/orch/internal/orchdir"
	"github.com/orch-dev/orch/internal/state"
	"github.com/orch-dev/orch/ledger"
	"github.com/orch-dev/orch/notify"
)

// hubDomain is the JetStream domain of the test cluster.
const hubDomain = "hub"

// natsNode is one nats-server process of the test cluster.
type natsNode struct {
	name   string
	client int // client port
	leaf   int // leaf node port
	cmd    *exec.Cmd
	done   chan struct{}
}

// TestExternalClusterFailover: orch serve --nats keeps the stream on a
// real three-node nats-server cluster (processes on loopback ports, built
// from the module's nats-server). While a headless fleet works through a
// batch of plans, the server leading the stream is killed with SIGKILL.
// Every plan still ends with exactly one harvest commit, one ledger entry
// and one callback.
func TestExternalClusterFailover(t *testing.T) {
	if testing.Short() {
		t.Skip("cluster test: skipped with -short")
	}
	const nPlans, nWorkers = 30, 4
	start := time.Now()
	bin := t.TempDir()
	build := exec.Command("go", "build", "-o", filepath.Join(bin, "nats-server"), "github.com/nats-io/nats-server/v2")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build nats-server: %v\n%s", err, out)
	}
	built := time.Since(start)

	kp, err := nkeys.CreateUser()
	if err != nil {
		t.Fatal(err)
	}
	pub, _ := kp.PublicKey()
	seed, _ := kp.Seed()
	nodes := startCluster(t, bin, pub)
	credsFile := filepath.Join(t.TempDir(), "orch.nk")
	if err := os.WriteFile(credsFile, append(seed, '\n'), 0o600); err != nil {
		t.Fatal(err)
	}
	// The test's own view of the cluster: any node but a dead one.
	var clientURLs, leafURLs []string
	for _, n := range nodes {
		clientURLs = append(clientURLs, fmt.Sprintf("nats://127.0.0.1:%d", n.client))
		leafURLs = append(leafURLs, fmt.Sprintf("nats://127.0.0.1:%d", n.leaf))
	}
	nc, err := nats.Connect(strings.Join(clientURLs, ","), nats.Nkey(pub, kp.Sign), nats.RetryOnFailedConnect(true), nats.MaxReconnects(-1), nats.ReconnectWait(100*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	eventually.True(t, 30*time.Second, func() bool {
		_, err := nc.Request("$JS.API.INFO", nil, time.Second)
		return err == nil
	}, "the cluster's JetStream to answer")

	root := filepath.Join(t.TempDir(), "repo")
	// The caller's orch, tmux and git settings stay out; PATH (orch and
	// orch-notify first) stays in.
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "ORCH_") && !strings.HasPrefix(kv, "TMUX") && !strings.HasPrefix(kv, "GIT_") && !strings.HasPrefix(kv, "HOME=") {
			env = append(env, kv)
		}
	}
	env = append(env, "HOME="+t.TempDir(), "GIT_CONFIG_NOSYSTEM=1",
		"GIT_AUTHOR_NAME=cluster", "GIT_AUTHOR_EMAIL=cluster@example.com", "GIT_COMMITTER_NAME=cluster", "GIT_COMMITTER_EMAIL=cluster@example.com")
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
		names[i] = fmt.Sprintf("c%02d", i)
		dir := filepath.Join(root, "plans", names[i])
		os.MkdirAll(dir, 0o755)
		os.WriteFile(filepath.Join(dir, "PLAN.md"), []byte(fmt.Sprintf("Cluster plan %d.\nagent: sleep 700ms\nagent: status ok-%d\n", i, i)), 0o644)
	}
	sh("git", "add", "plans")
	sh("git", "commit", "-qm", "cluster plans")

	logPath := filepath.Join(t.TempDir(), "serve.log")
	logf, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	defer logf.Close()
	t.Cleanup(func() {
		if t.Failed() {
			data, _ := os.ReadFile(logPath)
			t.Logf("serve log tail:\n%s", tail(string(data), 150))
			st := exec.Command("orch", "status")
			st.Dir, st.Env = root, env
			out, _ := st.CombinedOutput()
			t.Logf("orch status:\n%s", out)
		}
	})
	serve := exec.Command("orch", "serve", "--headless", "--workers", fmt.Sprint(nWorkers), "--agent", "orch agent",
		"--nats", strings.Join(leafURLs, ","), "--nats-domain", hubDomain, "--creds", credsFile)
	serve.Dir, serve.Env, serve.Stderr = root, env, logf
	if err := serve.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	var exitErr error
	go func() { exitErr = serve.Wait(); close(exited) }()
	t.Cleanup(func() { serve.Process.Kill(); <-exited })
	eventually.True(t, 40*time.Second, func() bool {
		select {
		case <-exited:
			t.Fatalf("orch serve exited while starting: %v", exitErr)
		default:
		}
		ep, err := notify.ReadEndpoint(filepath.Join(root, orchdir.Name))
		return err == nil && ep.PID == serve.Process.Pid && orchctl.ServePID(root) == serve.Process.Pid
	}, "orch serve to be up")
	ep, _ := notify.ReadEndpoint(filepath.Join(root, orchdir.Name))
	if !strings.HasPrefix(ep.URL, "nats://127.0.0.1:") || len(ep.Upstream) != 3 {
		t.Fatalf("broker.json: url %q upstream %v: want the loopback broker, linked to 3 URLs", ep.URL, ep.Upstream)
	}
	leader, replicas := streamLeader(t, nc)
	if replicas != broker.UpstreamReplicas {
		t.Fatalf("stream %s has %d replicas, want %d", broker.StreamName, replicas, broker.UpstreamReplicas)
	}
	if out := sh("orch", "status"); !strings.Contains(out, "external cluster") || !strings.Contains(out, "link up") {
		t.Errorf("orch status does not say the broker is external and linked:\n%s", out)
	}

	dispatched := time.Now()
	sh("orch", append([]string{"dispatch"}, names...)...)
	doneCount := func() int {
		v, err := orchctl.Status(root)
		if err != nil {
			return -1
		}
		n := 0
		for _, p := range v.Plans {
			if p.State == state.PlanDone {
				n++
			}
		}
		return n
	}
	// Mid-run: a few plans done, most still to come.
	eventually.True(t, 60*time.Second, func() bool { return doneCount() >= 6 }, "6 plans done before the kill")
	doneAtKill := doneCount()
	killedAt := time.Since(dispatched)
	leader, _ = streamLeader(t, nc) // now, not as it was at the start
	var victim *natsNode
	for _, n := range nodes {
		if n.name == leader {
			victim = n
		}
	}
	if victim == nil {
		t.Fatalf("stream leader %q is not a node of the cluster", leader)
	}
	victim.cmd.Process.Kill()
	<-victim.done
	fmt.Fprintf(logf, "=== cluster test: SIGKILL %s (stream leader), %d plans done\n", victim.name, doneAtKill)

	eventually.True(t, 90*time.Second, func() bool { return doneCount() == nPlans }, "all %d plans done", nPlans)
	allDone := time.Since(dispatched)
	newLeader, _ := streamLeader(t, nc)
	if newLeader == leader {
		t.Errorf("the stream is led by %s, the node killed", leader)
	}

	harvests := map[string]int{}
	for _, line := range strings.Split(sh("git", "log", "--format=", "--name-only"), "\n") {
		if rest, ok := strings.CutPrefix(line, "plans/"); ok && strings.HasSuffix(rest, "/RESULT.md") {
			harvests[strings.TrimSuffix(rest, "/RESULT.md")]++
		}
	}
	entries, err := ledger.Load(root)
	if err != nil {
		t.Fatal(err)
	}
	ledgerPlans := map[string]int{}
	for _, e := range entries {
		ledgerPlans[e.Plan]++
	}
	callbacks := map[string]int{}
	waitErrors := 0
	for {
		// Until every callback came, 10 s each; after that 2 s finds a double.
		timeout := "10s"
		if len(callbacks) >= nPlans {
			timeout = "2s"
		}
		cmd := exec.Command("orch", "wait", "--timeout", timeout)
		cmd.Dir, cmd.Env = root, env
		var stderr strings.Builder
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil && !strings.Contains(stderr.String(), "no callback after") && waitErrors < 10 {
			// The cluster may still be electing the wait consumer's
			// leader: another orch wait, not the end of the callbacks.
			waitErrors++
			t.Logf("orch wait: %v: %s", err, strings.TrimSpace(stderr.String()))
			time.Sleep(500 * time.Millisecond) // a pause before the next orch wait, not a poll of state
			continue
		}
		if err != nil {
			break
		}
		line := strings.TrimSpace(string(out))
		if rest, ok := strings.CutPrefix(line, "WORKER-DONE "); ok {
			plan, _, _ := strings.Cut(rest, ":")
			callbacks[plan]++
		} else {
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
	if len(entries) != nPlans {
		t.Errorf("ledger: %d entries, want %d", len(entries), nPlans)
	}
	sh("orch", "down")
	logData, _ := os.ReadFile(logPath)
	log := string(logData)
	t.Logf("cluster: %d plans, %d headless workers, 3 nats-server nodes (built in %s); stream leader %s killed %s after dispatch with %d plans done; "+
		"new leader %s; all done %s after dispatch (test %s); lost %d, doubled %d; store retries %d, spooled events delivered %d, duplicates absorbed %d",
		nPlans, nWorkers, built.Round(100*time.Millisecond), leader, killedAt.Round(100*time.Millisecond), doneAtKill,
		newLeader, allDone.Round(100*time.Millisecond), time.Since(start).Round(100*time.Millisecond), lost, doubled,
		strings.Count(log, "trying again under the same id"), strings.Count(log, "spool: delivered"), strings.Count(log, "duplicate event, no effect"))
}

// startCluster starts three nats-server processes clustered on loopback,
// JetStream in domain hubDomain, one account with JetStream for the NKey
// user pub. Each is killed when the test ends.
func startCluster(t *testing.T, bin, pub string) []*natsNode {
	t.Helper()
	dir := t.TempDir()
	var routes []string
	nodes := make([]*natsNode, 3)
	cluster := make([]int, 3)
	for i := range nodes {
		nodes[i] = &natsNode{name: fmt.Sprintf("n%d", i+1), client: freePort(t, "127.0.0.1"), leaf: freePort(t, "127.0.0.1"), done: make(chan struct{})}
		cluster[i] = freePort(t, "127.0.0.1")
		routes = append(routes, fmt.Sprintf("nats://127.0.0.1:%d", cluster[i]))
	}
	for i, n := range nodes {
		conf := fmt.Sprintf(`server_name: %s
listen: 127.0.0.1:%d
jetstream { store_dir: %q, domain: %s }
cluster { name: hub, listen: 127.0.0.1:%d, routes: [%s] }
leafnodes { listen: 127.0.0.1:%d }
accounts {
  ORCH: { jetstream: enabled, users: [ { nkey: %s } ] }
  SYS: { users: [ { user: sys, password: %q } ] }
}
system_account: SYS
`, n.name, n.client, filepath.Join(dir, n.name), hubDomain, cluster[i], strings.Join(routes, ", "), n.leaf, pub, fmt.Sprint(time.Now().UnixNano()))
		path := filepath.Join(dir, n.name+".conf")
		if err := os.WriteFile(path, []byte(conf), 0o600); err != nil {
			t.Fatal(err)
		}
		logf, err := os.Create(filepath.Join(dir, n.name+".log"))
		if err != nil {
			t.Fatal(err)
		}
		n.cmd = exec.Command(filepath.Join(bin, "nats-server"), "-c", path)
		n.cmd.Stdout, n.cmd.Stderr = logf, logf
		if err := n.cmd.Start(); err != nil {
			t.Fatal(err)
		}
		go func() { n.cmd.Wait(); logf.Close(); close(n.done) }()
		t.Cleanup(func() { n.cmd.Process.Kill(); <-n.done })
	}
	return nodes
}

// streamLeader asks the cluster which server leads the stream, and how
// many copies it keeps. Right after a kill there may be no leader yet.
func streamLeader(t *testing.T, nc *nats.Conn) (string, int) {
	t.Helper()
	var info struct {
		Cluster struct {
			Leader   string            `json:"leader"`
			Replicas []json.RawMessage `json:"replicas"`
		} `json:"cluster"`
	}
	eventually.True(t, 30*time.Second, func() bool {
		m, err := nc.Request("$JS.API.STREAM.INFO."+broker.StreamName, nil, time.Second)
		return err == nil && json.Unmarshal(m.Data, &info) == nil && info.Cluster.Leader != ""
	}, "the stream %s to have a leader", broker.StreamName)
	return info.Cluster.Leader, 1 + len(info.Cluster.Replicas)
}
