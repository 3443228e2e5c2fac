package notify

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nkeys"

	"github.com/orch-dev/orch/event"
	"github.com/orch-dev/orch/internal/orchdir"
)

func gitRun(t *testing.T, dir string, args ...string) {
	t.Helper()
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@x", "GIT_COMMITTER_NAME=t", "GIT_COMMITTER_EMAIL=t@x", "GIT_CONFIG_NOSYSTEM=1", "HOME="+dir)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("git %v: %v\n%s", args, err, out)
	}
}

// repoWithOrch makes a git repo with one commit and an .orch/ holding a
// worker seed; it returns the repo root.
func repoWithOrch(t *testing.T) string {
	t.Helper()
	root := filepath.Join(t.TempDir(), "repo")
	os.MkdirAll(root, 0o755)
	gitRun(t, root, "init", "-q", "-b", "main")
	os.WriteFile(filepath.Join(root, "f"), []byte("x"), 0o644)
	gitRun(t, root, "add", "f")
	gitRun(t, root, "commit", "-qm", "c")
	kp, _ := nkeys.CreateUser()
	seed, _ := kp.Seed()
	os.MkdirAll(filepath.Join(root, orchdir.Name, orchdir.Creds, orchdir.WorkerKeys), 0o700)
	os.WriteFile(orchdir.WorkerKey(filepath.Join(root, orchdir.Name), "w1"), seed, 0o600)
	return root
}

func TestFindDirFromSubdirAndWorktree(t *testing.T) {
	root := repoWithOrch(t)
	want := filepath.Join(root, orchdir.Name)
	sub := filepath.Join(root, "a", "b")
	os.MkdirAll(sub, 0o755)
	wt := filepath.Join(filepath.Dir(root), "wt")
	gitRun(t, root, "worktree", "add", "-q", wt)
	wtSub := filepath.Join(wt, "deep")
	os.MkdirAll(wtSub, 0o755)
	for _, dir := range []string{root, sub, wt, wtSub} {
		got, err := FindDir(dir)
		if err != nil || got != want {
			t.Errorf("FindDir(%s) = %q, %v; want %q", dir, got, err, want)
		}
	}
	if _, err := FindDir(t.TempDir()); !errors.Is(err, ErrNoRepo) {
		t.Errorf("FindDir(outside) = %v, want ErrNoRepo", err)
	}
}

func envOf(m map[string]string) Env { return func(k string) string { return m[k] } }

func TestWorkerConfigPrecedence(t *testing.T) {
	root := repoWithOrch(t)
	od := filepath.Join(root, orchdir.Name)
	os.WriteFile(filepath.Join(od, orchdir.Broker), []byte(`{"url":"nats://127.0.0.1:4999","prefix":"orch"}`), 0o600)

	cfg, err := WorkerConfig(envOf(map[string]string{"ORCH_WORKER": "w1"}), root)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.URL != "nats://127.0.0.1:4999" || cfg.SpoolDir != filepath.Join(od, orchdir.Spool) || len(cfg.Seed) == 0 || cfg.Inbox != "_W.w1" {
		t.Errorf("from .orch: %+v", cfg)
	}
	kp, _ := nkeys.CreateUser()
	seed, _ := kp.Seed()
	cfg, err = WorkerConfig(envOf(map[string]string{"ORCH_URL": "nats://10.0.0.1:4222", "ORCH_TOKEN": string(seed), "ORCH_SPOOL": "/tmp/sp"}), root)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.URL != "nats://10.0.0.1:4222" || string(cfg.Seed) != string(seed) || cfg.SpoolDir != "/tmp/sp" {
		t.Errorf("env must win: %+v", cfg)
	}
	if _, err := WorkerConfig(envOf(map[string]string{"ORCH_WORKER": "w1"}), t.TempDir()); err == nil {
		t.Error("outside a repo with no ORCH_URL: want an error")
	}
	// Without a worker id there is no key to send with.
	if _, err := WorkerConfig(envOf(nil), root); !errors.Is(err, ErrNoCreds) || !strings.Contains(err.Error(), "ORCH_WORKER is not set") {
		t.Errorf("no ORCH_WORKER: %v, want ErrNoCreds naming ORCH_WORKER", err)
	}
	// A pane of an orch from before per-worker keys names the old shared
	// seed: it is given its own key.
	cfg, err = WorkerConfig(envOf(map[string]string{"ORCH_WORKER": "w1", "ORCH_CREDS": filepath.Join(od, orchdir.Creds, orchdir.WorkerCreds)}), root)
	if err != nil || len(cfg.Seed) == 0 {
		t.Errorf("legacy ORCH_CREDS: %+v, %v; want w1's own key", cfg, err)
	}
}

func TestSendSpoolsWhenBrokerUnreachable(t *testing.T) {
	root := repoWithOrch(t)
	cfg, err := WorkerConfig(envOf(map[string]string{"ORCH_URL": "nats://127.0.0.1:1", "ORCH_WORKER": "w1"}), root)
	if err != nil {
		t.Fatal(err)
	}
	cfg.Timeout = time.Second
	e := event.New(event.Done, "p", "ok", "w1", "h")
	res, err := Send(cfg, e)
	if err != nil {
		t.Fatal(err)
	}
	if res.Acked || res.Spooled == "" || res.PubErr == nil {
		t.Fatalf("result %+v, want spooled with the publish error", res)
	}
	got, err := event.ReadSpoolFile(res.Spooled)
	if err != nil || got.Event.ID != e.ID || got.By != "w1" {
		t.Fatalf("spool file holds %+v, %v", got, err)
	}
	kp, err := nkeys.FromSeed(cfg.Seed)
	if err != nil {
		t.Fatal(err)
	}
	pub, _ := kp.PublicKey()
	if err := got.Verify(pub); err != nil {
		t.Errorf("the spool file is not signed with w1's key: %v", err)
	}
}

func TestSendNotKept(t *testing.T) {
	kp, _ := nkeys.CreateUser()
	seed, _ := kp.Seed()
	cfg := Config{URL: "nats://127.0.0.1:1", Timeout: time.Second, Seed: seed, Signer: "w1", SpoolDir: filepath.Join(t.TempDir(), "file")}
	os.WriteFile(cfg.SpoolDir, nil, 0o600) // a file where the spool directory should be
	_, err := Send(cfg, event.New(event.Done, "p", "ok", "w1", "h"))
	if !errors.Is(err, event.ErrNotKept) || !strings.Contains(err.Error(), "not a directory") {
		t.Errorf("Send = %v, want ErrNotKept for the spool", err)
	}
	// An invalid seed is not spooled either, with a broker or without.
	for _, url := range []string{"nats://127.0.0.1:1", ""} {
		cfg := Config{URL: url, Timeout: time.Second, Seed: []byte("SUAGARBAGE"), Signer: "w1", SpoolDir: t.TempDir()}
		_, err := Send(cfg, event.New(event.Done, "p", "ok", "w1", "h"))
		if !errors.Is(err, event.ErrNotKept) || !errors.Is(err, ErrNoCreds) {
			t.Errorf("invalid seed, URL %q: Send = %v, want ErrNotKept and ErrNoCreds", url, err)
		}
		if ents, _ := os.ReadDir(cfg.SpoolDir); len(ents) != 0 {
			t.Errorf("invalid seed, URL %q: spooled %d files", url, len(ents))
		}
	}
}

func TestMainExitCodes(t *testing.T) {
	root := repoWithOrch(t)
	t.Chdir(root)
	env := envOf(map[string]string{"ORCH_URL": "nats://127.0.0.1:1", "ORCH_WORKER": "w1", "ORCH_NOTIFY_TIMEOUT": "1s"})
	tests := []struct {
		name string
		args []string
		env  Env
		code int
		msg  string
	}{
		{"no arguments", nil, env, 2, "usage:"},
		{"unknown kind", []string{"finished", "p"}, env, 2, `unknown kind "finished"`},
		{"bad plan name", []string{"done", "../x", "ok"}, env, 2, "invalid"},
		{"done without status", []string{"done", "p"}, env, 2, "needs a one-line status"},
		{"blocked without reason", []string{"blocked", "p", " "}, env, 2, "needs a one-line reason"},
		{"started with extra words", []string{"started", "p", "x"}, env, 2, "only the plan name"},
		{"bad worker id", []string{"started", "p"}, envOf(map[string]string{"ORCH_WORKER": "w1;x"}), 2, "not a worker id"},
		{"spooled is kept", []string{"done", "p", "all", "good"}, env, 0, "spooled to"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var stderr bytes.Buffer
			if code := Main(tc.args, tc.env, &stderr); code != tc.code {
				t.Errorf("exit %d, want %d; stderr: %s", code, tc.code, stderr.String())
			}
			if !strings.Contains(stderr.String(), tc.msg) {
				t.Errorf("stderr %q does not contain %q", stderr.String(), tc.msg)
			}
		})
	}
	t.Run("nothing kept", func(t *testing.T) {
		t.Chdir(t.TempDir())
		var stderr bytes.Buffer
		if code := Main([]string{"done", "p", "ok"}, envOf(nil), &stderr); code != 1 {
			t.Errorf("exit %d, want 1; stderr: %s", code, stderr.String())
		}
	})
}
