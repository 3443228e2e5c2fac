package tmux

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/orch-dev/orch/internal/eventually"
)

// realClient returns a Client on a private tmux server that is killed when
// the test ends. Without tmux on PATH the test is skipped, unless
// ORCH_REQUIRE_TMUX=1 (set in CI), where a missing tmux is a failure.
func realClient(t *testing.T) *Client {
	t.Helper()
	if _, err := exec.LookPath("tmux"); err != nil {
		if os.Getenv("ORCH_REQUIRE_TMUX") == "1" {
			t.Fatalf("ORCH_REQUIRE_TMUX=1 but tmux is not on PATH: %v", err)
		}
		t.Skip("tmux not on PATH")
	}
	b := make([]byte, 6)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	c := New("orchtest-" + hex.EncodeToString(b))
	t.Cleanup(func() {
		if err := c.KillServer(context.Background()); err != nil {
			t.Errorf("cleanup: %v", err)
		}
	})
	return c
}

// waitScreen waits until the pane's screen contains want and returns it.
func waitScreen(t *testing.T, c *Client, pane, want string) string {
	t.Helper()
	var screen string
	eventually.True(t, 10*time.Second, func() bool {
		s, err := c.Capture(context.Background(), pane, 0)
		screen = s
		return err == nil && strings.Contains(s, want)
	}, "pane %s never showed %q; screen:\n%s", pane, want, lazy(func() string { return screen }))
	return screen
}

// lazy renders its value when the failure message is formatted, not when
// the argument list is built.
type lazy func() string

func (l lazy) String() string { return l() }

func TestRealSessionLifecycle(t *testing.T) {
	c := realClient(t)
	ctx := context.Background()
	dir := t.TempDir()
	const name = "orch-real"

	if ok, err := c.HasSession(ctx, name); ok || err != nil {
		t.Fatalf("HasSession before start (no server) = %v, %v; want false, nil", ok, err)
	}

	echo := `printf 'env:%s:%s\n' "$ORCH_A" "$(pwd)"; read -r l; printf 'got:%s\n' "$l"; sleep 30`
	p1, err := c.NewSession(ctx, name, dir, map[string]string{"ORCH_A": "a b", "ORCH_B": "2"}, echo)
	if err != nil {
		t.Fatal(err)
	}
	if !ValidPaneID(p1) {
		t.Fatalf("NewSession returned %q, want a pane id", p1)
	}
	if err := c.SetOption(ctx, name, "remain-on-exit", "on"); err != nil {
		t.Fatal(err)
	}
	if err := c.SetHook(ctx, name, "pane-died", "run-shell true"); err != nil {
		t.Fatal(err)
	}
	waitScreen(t, c, p1, "env:a b:")

	text := `say "hi" 'there'; echo $HOME ` + "`whoami`" + ` & | > \n done`
	if err := c.SendLine(ctx, p1, text); err != nil {
		t.Fatal(err)
	}
	waitScreen(t, c, p1, "got:"+text)

	p2, err := c.SplitWindow(ctx, name, dir, nil, "cat")
	if err != nil {
		t.Fatal(err)
	}
	if p2 == p1 || !ValidPaneID(p2) {
		t.Fatalf("SplitWindow returned %q (first pane %q), want a new pane id", p2, p1)
	}
	if err := c.SetPaneTitle(ctx, p1, "w1"); err != nil {
		t.Fatal(err)
	}
	if err := c.SetPaneTitle(ctx, p2, "w2 verifier"); err != nil {
		t.Fatal(err)
	}
	if err := c.SendLine(ctx, p2, "héllo ✓"); err != nil {
		t.Fatal(err)
	}
	waitScreen(t, c, p2, "héllo ✓\nhéllo ✓")

	panes, err := c.ListPanes(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	titles := map[string]string{}
	for _, p := range panes {
		titles[p.ID] = p.Title
		if p.PID <= 0 || p.Dead {
			t.Errorf("pane %+v: want a live pane with a pid", p)
		}
	}
	if len(panes) != 2 || titles[p1] != "w1" || titles[p2] != "w2 verifier" {
		t.Errorf("ListPanes = %+v, want %s=w1 and %s=w2 verifier", panes, p1, p2)
	}

	// Exact-match targets: a session whose name extends ours is not ours.
	if _, err := c.NewSession(ctx, name+"-other", dir, nil, "sleep 30"); err != nil {
		t.Fatal(err)
	}
	if ok, err := c.HasSession(ctx, "orch-re"); ok || err != nil {
		t.Errorf("HasSession(prefix) = %v, %v; want false, nil", ok, err)
	}
	if _, err := c.ListPanes(ctx, "orch-re"); err == nil {
		t.Error("ListPanes(prefix) succeeded, want ErrNoSession")
	}
	if ok, err := c.HasSession(ctx, name); !ok || err != nil {
		t.Fatalf("HasSession = %v, %v; want true, nil", ok, err)
	}

	if err := c.KillSession(ctx, name); err != nil {
		t.Fatal(err)
	}
	if ok, err := c.HasSession(ctx, name); ok || err != nil {
		t.Errorf("HasSession after kill = %v, %v; want false, nil", ok, err)
	}
	if ok, err := c.HasSession(ctx, name+"-other"); !ok || err != nil {
		t.Errorf("other session after kill = %v, %v; want true, nil", ok, err)
	}
	if err := c.KillSession(ctx, name); err != nil {
		t.Errorf("KillSession twice = %v, want nil", err)
	}
}

func TestRealDeadPane(t *testing.T) {
	c := realClient(t)
	ctx := context.Background()
	p, err := c.NewSession(ctx, "orch-dead", t.TempDir(), nil, "read -r l; exit 3")
	if err != nil {
		t.Fatal(err)
	}
	if err := c.SetOption(ctx, p, "remain-on-exit", "on"); err != nil {
		t.Fatal(err)
	}
	if err := c.SendLine(ctx, p, "bye"); err != nil {
		t.Fatal(err)
	}
	eventually.True(t, 10*time.Second, func() bool {
		panes, err := c.ListPanes(ctx, "orch-dead")
		return err == nil && len(panes) == 1 && panes[0].Dead
	}, "pane %s never reported dead", p)
	if err := c.KillServer(ctx); err != nil {
		t.Fatal(err)
	}
	if err := c.KillServer(ctx); err != nil {
		t.Errorf("KillServer twice = %v, want nil", err)
	}
}
