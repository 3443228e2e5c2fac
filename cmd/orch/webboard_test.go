package main

import (
	"bufio"
	"context"
	"encoding/base64"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/orch-dev/orch/internal/orchdir"
	"github.com/orch-dev/orch/web"
)

// chromiumPath is the browser the web board test drives: Debian's
// chromium, else one on PATH.
func chromiumPath() string {
	if _, err := os.Stat("/usr/bin/chromium"); err == nil {
		return "/usr/bin/chromium"
	}
	for _, name := range []string{"chromium", "chromium-browser"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	return ""
}

// TestWebBoardInBrowser runs a real orch serve --http 127.0.0.1:0 with a
// headless fleet of the scripted agent, and a real headless chromium on
// its page: refused without the token (from Go and in the browser), the
// page with it, and, after orch dispatch, the plans' bars turning running
// then done on the page that loaded before the dispatch, with no reload;
// the dependent pair is marked as the critical path. A screenshot is
// written and must not be a blank page's. Without chromium it skips,
// unless ORCH_REQUIRE_BROWSER=1 (CI), where it fails.
func TestWebBoardInBrowser(t *testing.T) {
	t.Setenv("CHROMEDP_VISIBLEWINDOW", "") // chromedp reads it: never a window here
	chromium := chromiumPath()
	if chromium == "" {
		if os.Getenv("ORCH_REQUIRE_BROWSER") == "1" {
			t.Fatal("chromium is not installed and ORCH_REQUIRE_BROWSER=1: install it (apt-get install -y chromium)")
		}
		t.Skip("chromium not installed (apt-get install -y chromium); ORCH_REQUIRE_BROWSER=1 makes this a failure")
	}
	start := time.Now()
	root := filepath.Join(t.TempDir(), "repo")
	home := t.TempDir()
	env := []string{"HOME=" + home, "GIT_CONFIG_NOSYSTEM=1",
		"GIT_AUTHOR_NAME=board", "GIT_AUTHOR_EMAIL=board@example.com", "GIT_COMMITTER_NAME=board", "GIT_COMMITTER_EMAIL=board@example.com"}
	for _, kv := range os.Environ() {
		// Nothing of a caller's orch or tmux may reach this fleet.
		if !strings.HasPrefix(kv, "ORCH_") && !strings.HasPrefix(kv, "TMUX") && !strings.HasPrefix(kv, "HOME=") && !strings.HasPrefix(kv, "GIT_") {
			env = append(env, kv)
		}
	}
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
	if err := os.MkdirAll(root, 0o755); err != nil {
		t.Fatal(err)
	}
	sh("git", "init", "-q", "-b", "main")
	sh("orch", "init")
	sh("orch", "plan", "new", "first", "--body", "agent: sleep 2s\nagent: status first ok")
	sh("orch", "plan", "new", "second", "--depends-on", "first", "--body", "agent: sleep 1s\nagent: status second ok")

	// orch serve --http 127.0.0.1:0: the board's URL is the line on its stdout.
	logPath := filepath.Join(t.TempDir(), "serve.log")
	logf, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	defer logf.Close()
	t.Cleanup(func() {
		if t.Failed() {
			data, _ := os.ReadFile(logPath)
			t.Logf("serve log tail:\n%s", tail(string(data), 60))
		}
	})
	serve := exec.Command("orch", "serve", "--headless", "--workers", "2", "--agent", "orch agent", "--http", "127.0.0.1:0")
	serve.Dir, serve.Env, serve.Stderr = root, env, logf
	stdout, err := serve.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := serve.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- serve.Wait() }()
	stopped := false
	t.Cleanup(func() {
		if !stopped {
			serve.Process.Kill()
			<-exited
		}
	})
	lines := make(chan string, 16)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
	}()
	var boardURL string
	select {
	case l := <-lines:
		var ok bool
		if boardURL, ok = strings.CutPrefix(l, "board: "); !ok {
			t.Fatalf("orch serve printed %q, want board: <url>", l)
		}
	case err := <-exited:
		t.Fatalf("orch serve exited before printing the board's URL: %v", err)
	case <-time.After(30 * time.Second):
		t.Fatal("orch serve printed no board URL within 30s")
	}
	if !strings.HasPrefix(boardURL, "http://127.0.0.1:") || !strings.Contains(boardURL, "/?token=") {
		t.Fatalf("board URL %q is not a loopback URL with a token", boardURL)
	}
	base, token, _ := strings.Cut(boardURL, "/?token=")
	if raw, err := base64.RawURLEncoding.DecodeString(token); err != nil || len(raw) != 32 {
		t.Fatalf("token %q is not 256 bits in URL-safe base64 (%d bytes, %v)", token, len(raw), err)
	}
	urlFile := filepath.Join(orchdir.Of(root), web.URLFile)
	fi, err := os.Stat(urlFile)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o600 {
		t.Errorf("%s has mode %v, want 0600", web.URLFile, fi.Mode().Perm())
	}
	if data, _ := os.ReadFile(urlFile); strings.TrimSpace(string(data)) != boardURL {
		t.Errorf("%s holds %q, want the printed URL", web.URLFile, data)
	}
	if log, _ := os.ReadFile(logPath); strings.Contains(string(log), token) {
		t.Errorf("orch serve logged the token")
	}

	// From Go: refused without the token, served with it.
	httpc := &http.Client{Timeout: 10 * time.Second}
	for _, u := range []string{base + "/", base + "/?token=wrong", base + "/view.json", base + "/events"} {
		resp, err := httpc.Get(u)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusForbidden || !strings.Contains(string(body), "orch serve printed") {
			t.Fatalf("GET %s: status %d, body %q; want 403 saying where the URL is", u, resp.StatusCode, body)
		}
	}
	resp, err := httpc.Get(boardURL)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET the board's URL: status %d", resp.StatusCode)
	}

	// The browser: a fresh profile, no network of its own.
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(),
		chromedp.ExecPath(chromium),
		chromedp.Flag("headless", true),
		chromedp.NoSandbox, // root in a container has no user namespace for the sandbox
		chromedp.DisableGPU,
		chromedp.Flag("disable-quic", true),
		chromedp.NoFirstRun,
		chromedp.NoDefaultBrowserCheck,
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("disable-dev-shm-usage", true),
		chromedp.UserDataDir(t.TempDir()),
		chromedp.WindowSize(1280, 1000),
		chromedp.Env("HOME="+home),
	)
	ctx, cancelBrowser := chromedp.NewContext(actx)
	// Registered after the TempDirs: the browser is gone before they are removed.
	t.Cleanup(func() { cancelBrowser(); cancelAlloc() })
	step := func(what string, d time.Duration, steps ...chromedp.Action[chromedp.Void]) {
		t.Helper()
		sctx, cancel := context.WithTimeout(ctx, d)
		defer cancel()
		if err := chromedp.Do(sctx, steps...); err != nil {
			t.Fatalf("browser: %s: %v", what, err)
		}
	}
	shot := func(name string) int {
		t.Helper()
		sctx, cancel := context.WithTimeout(ctx, 20*time.Second)
		defer cancel()
		png, err := chromedp.Run(sctx, chromedp.FullScreenshot(100))
		if err != nil {
			t.Fatalf("screenshot: %v", err)
		}
		path := filepath.Join(t.TempDir(), name)
		if err := os.WriteFile(path, png, 0o644); err != nil {
			t.Fatal(err)
		}
		t.Logf("screenshot %s: %d bytes", path, len(png))
		return len(png)
	}
	nav := func(u string) int64 {
		t.Helper()
		sctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		r, err := chromedp.Run(sctx, chromedp.NavigateResponse(u))
		if err != nil {
			t.Fatalf("browser: open %s: %v", u, err)
		}
		return r.Status
	}
	// The first run starts the browser, on ctx itself: a timeout child
	// would take the browser with it when it ends.
	if err := chromedp.Do(ctx); err != nil {
		t.Fatalf("browser: start %s: %v", chromium, err)
	}
	step("blank page", 30*time.Second, chromedp.Navigate("about:blank"))
	blank := shot("blank.png")

	// In the browser: refused without the token.
	if st := nav(base + "/"); st != http.StatusForbidden {
		t.Fatalf("browser without the token: status %d, want 403", st)
	}
	said, err := chromedp.Run(ctx, chromedp.Evaluate[string](`document.body.innerText`))
	if err != nil || !strings.Contains(said, "orch serve printed") {
		t.Fatalf("browser without the token shows %q (%v)", said, err)
	}

	// With it: the page, live, both plans still drafts.
	if st := nav(boardURL); st != http.StatusOK {
		t.Fatalf("browser with the token: status %d, want 200", st)
	}
	step("the page goes live with the plans as drafts", 20*time.Second,
		chromedp.WaitVisible(chromedp.CSS(`#conn.on`)),
		chromedp.WaitVisible(chromedp.CSS(`#plans tr[data-plan="first"][data-state="draft"]`)),
		chromedp.WaitVisible(chromedp.CSS(`#plans tr[data-plan="second"][data-state="draft"]`)),
		chromedp.WaitVisible(chromedp.CSS(`#timeline p.quiet`)),
		// A mark a reload would wipe out.
		chromedp.Evaluate[chromedp.Void](`window.orchTestMark = 'loaded once'`))

	sh("orch", "dispatch", "first", "second")
	step("first's bar runs, live", 20*time.Second,
		chromedp.WaitVisible(chromedp.CSS(`#timeline .bar.o-running[data-plan="first"]`)))
	step("first's bar turns done, then second's, live", 60*time.Second,
		chromedp.WaitVisible(chromedp.CSS(`#timeline .bar.o-done[data-plan="first"][data-outcome="done"]`)),
		chromedp.WaitVisible(chromedp.CSS(`#timeline .bar.o-done[data-plan="second"][data-outcome="done"]`)),
		chromedp.WaitVisible(chromedp.CSS(`#plans tr[data-plan="second"][data-state="done"]`)),
		chromedp.WaitVisible(chromedp.CSS(`#callbacks li[data-kind="done"]`)))
	mark, err := chromedp.Run(ctx, chromedp.Evaluate[string](`window.orchTestMark || 'reloaded'`))
	if err != nil || mark != "loaded once" {
		t.Fatalf("the page was reloaded (mark %q, %v): the bars must turn done live", mark, err)
	}
	// first then second, one after the other: the critical path, both marked.
	step("the critical path is marked", 10*time.Second,
		chromedp.WaitVisible(chromedp.CSS(`#timeline .bar.crit[data-plan="first"]`)),
		chromedp.WaitVisible(chromedp.CSS(`#timeline .bar.crit[data-plan="second"]`)))
	crit, err := chromedp.Run(ctx, chromedp.Evaluate[string](`document.getElementById('critical').textContent`))
	if err != nil || crit != "critical path: first → second" {
		t.Errorf("critical path line %q (%v)", crit, err)
	}
	board := shot("board.png")
	if board < 2*blank || board < 20_000 {
		t.Errorf("board screenshot is %d bytes, a blank page's %d: the page looks empty", board, blank)
	}

	// orch down stops serve, and with it the board and its URL file.
	sh("orch", "down")
	select {
	case err := <-exited:
		stopped = true
		if err != nil {
			t.Fatalf("orch serve: %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("orch serve still running 30s after orch down")
	}
	if _, err := os.Stat(urlFile); !os.IsNotExist(err) {
		t.Errorf("%s is still there after orch serve stopped (%v)", web.URLFile, err)
	}
	if _, err := httpc.Get(boardURL); err == nil {
		t.Errorf("the board still answers after orch serve stopped")
	}
	t.Logf("web board in a browser: %s", time.Since(start).Round(100*time.Millisecond))
}

// orch serve --http refuses an address other than loopback before it
// starts anything, naming the fix.
func TestServeHTTPLoopbackOnly(t *testing.T) {
	for _, addr := range []string{"0.0.0.0:8080", ":8080", "192.168.1.2:8080", "example.com:8080"} {
		t.Run(addr, func(t *testing.T) {
			var out, errb strings.Builder
			code := run([]string{"serve", "--http", addr}, streams{In: strings.NewReader(""), Out: &out, Err: &errb})
			if code != exitUsage {
				t.Fatalf("exit %d, want %d; stderr %q", code, exitUsage, errb.String())
			}
			if !strings.Contains(errb.String(), "loopback only") || !strings.Contains(errb.String(), "--http 127.0.0.1:8080") {
				t.Errorf("stderr %q does not name the fix", errb.String())
			}
			if out.Len() != 0 {
				t.Errorf("stdout %q, want nothing", out.String())
			}
		})
	}
}
