package web

import (
	"bufio"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/orch-dev/orch/board"
	"github.com/orch-dev/orch/internal/eventually"
	"github.com/orch-dev/orch/internal/state"
)

const testToken = "test-token-0123456789abcdef"

// startBoard runs a board on a free loopback port with a publisher that
// has already offered one frame (plan a done on w1), as orch serve's
// loop does before anyone connects.
func startBoard(t *testing.T) (*Server, *board.Publisher) {
	t.Helper()
	return startBoardIn(t, t.TempDir()) // no plans/: no definitions
}

func startBoardIn(t *testing.T, root string) (*Server, *board.Publisher) {
	t.Helper()
	s, err := Listen(Config{Addr: "127.0.0.1:0", Root: root, Token: testToken})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	p, err := board.NewPublisher(nil, "orch", nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	go p.Run(ctx)
	p.Offer(frame("a", state.PlanDone))
	if err := s.Follow(p); err != nil {
		t.Fatal(err)
	}
	return s, p
}

func frame(plan string, st state.PlanState) board.Frame {
	t0 := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	end := t0.Add(time.Minute)
	return board.Frame{Time: end,
		Workers: []board.WorkerFrame{{ID: "w1", State: string(state.WorkerIdle), Since: end}},
		Plans: []board.PlanFrame{{Name: plan, State: string(st), Worker: "w1", Attempt: 1,
			Spans: []board.Span{{N: 1, Worker: "w1", Start: t0, End: &end, Outcome: string(st)}}}}}
}

// client bounds every request: a route that streams where it should
// refuse fails the test instead of hanging it.
var client = &http.Client{Timeout: 5 * time.Second}

func get(t *testing.T, s *Server, path, host string) (int, string, http.Header) {
	t.Helper()
	req, err := http.NewRequest("GET", "http://"+s.Addr()+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	if host != "" {
		req.Host = host
	}
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<16))
	return resp.StatusCode, string(body), resp.Header
}

// Every route, and one that does not exist, refuses a request without
// the token or with a wrong one, and says where the URL is; with it,
// each answers.
func TestEveryRouteNeedsTheToken(t *testing.T) {
	s, _ := startBoard(t)
	routes := map[string]int{"/": 200, "/board.js": 200, "/board.css": 200, "/view.json": 200, "/nothing-here": 404}
	for route, want := range routes {
		for _, q := range []string{"", "?token=", "?token=wrong", "?token=" + testToken + "x", "?Token=" + testToken} {
			t.Run(route+q, func(t *testing.T) {
				code, body, h := get(t, s, route+q, "")
				if code != http.StatusForbidden {
					t.Fatalf("status %d, want 403; body %q", code, body)
				}
				if !strings.Contains(body, "printed") || !strings.Contains(body, ".orch/board.url") {
					t.Errorf("body %q does not say where the URL with the token is", body)
				}
				if strings.Contains(body, testToken) {
					t.Errorf("refusal shows the token: %q", body)
				}
				if h.Get("Cache-Control") != "no-store" {
					t.Errorf("Cache-Control %q", h.Get("Cache-Control"))
				}
			})
		}
		t.Run(route+"?token=right", func(t *testing.T) {
			code, body, h := get(t, s, route+"?token="+testToken, "")
			if code != want {
				t.Fatalf("status %d, want %d; body %q", code, want, body)
			}
			if !strings.Contains(h.Get("Content-Security-Policy"), "default-src 'none'") || h.Get("Cache-Control") != "no-store" {
				t.Errorf("headers %v", h)
			}
		})
	}
	// The event stream too (its success is TestStreamSendsLatestFirst).
	code, _, _ := get(t, s, "/events?token=nope", "")
	if code != http.StatusForbidden {
		t.Errorf("/events without the token: status %d, want 403", code)
	}
}

// A Host that is not loopback is refused even with the token: a page
// whose name was made to resolve to 127.0.0.1 sends its own name.
func TestHostMustBeLoopback(t *testing.T) {
	s, _ := startBoard(t)
	for host, want := range map[string]int{
		"evil.example":      403,
		"evil.example:8080": 403,
		"127.0.0.1.nip.io":  403,
		"10.0.0.1:80":       403,
		"localhost:1":       200,
		"127.0.0.1:1":       200,
		"[::1]:1":           200,
		"127.0.0.2":         200,
	} {
		t.Run(host, func(t *testing.T) {
			code, body, _ := get(t, s, "/?token="+testToken, host)
			if code != want {
				t.Fatalf("Host %q: status %d, want %d (%q)", host, code, want, body)
			}
		})
	}
}

// A new page gets the newest view at once, as the first data: message,
// and then each newer one, live. The frames come on a channel of the
// test's (the publisher may send a frame twice; here each comes once).
func TestStreamSendsLatestFirst(t *testing.T) {
	s, err := Listen(Config{Addr: "127.0.0.1:0", Root: t.TempDir(), Token: testToken})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	frames := make(chan []byte)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	go s.hub.run(ctx, frames, s.build)
	frames <- frame("a", state.PlanDone).Marshal()
	frames <- frame("b", state.PlanRunning).Marshal() // the newest when the page connects
	waitView(t, s, "b")
	resp, err := http.Get("http://" + s.Addr() + "/events?token=" + testToken) // a stream: bounded by nextView
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "text/event-stream" {
		t.Fatalf("status %d, type %q", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	r := bufio.NewReader(resp.Body)
	v := nextView(t, r)
	if len(v.Plans) != 1 || v.Plans[0].Name != "b" || v.Plans[0].State != "running" {
		t.Fatalf("first view has plans %+v, want b running", v.Plans)
	}
	if len(v.Timeline.Rows) != 1 || len(v.Timeline.Rows[0].Bars) != 1 || v.Timeline.Rows[0].Bars[0].Plan != "b" {
		t.Fatalf("first view's timeline %+v", v.Timeline)
	}
	frames <- frame("c", state.PlanDone).Marshal()
	v = nextView(t, r)
	if len(v.Plans) != 1 || v.Plans[0].Name != "c" || v.Timeline.Rows[0].Bars[0].Outcome != "done" {
		t.Fatalf("next view has plans %+v, want c done", v.Plans)
	}
}

// nextView reads the stream up to its next data: message, with a bound.
func nextView(t *testing.T, r *bufio.Reader) board.View {
	t.Helper()
	type line struct {
		s   string
		err error
	}
	got := make(chan line, 1)
	go func() {
		for {
			s, err := r.ReadString('\n')
			if err != nil || strings.HasPrefix(s, "data: ") {
				got <- line{s, err}
				return
			}
		}
	}()
	select {
	case l := <-got:
		if l.err != nil {
			t.Fatalf("stream: %v", l.err)
		}
		var v board.View
		if err := json.Unmarshal([]byte(strings.TrimPrefix(l.s, "data: ")), &v); err != nil {
			t.Fatalf("data line %q: %v", l.s, err)
		}
		return v
	case <-time.After(5 * time.Second):
		t.Fatal("no data: message within 5s")
	}
	return board.View{}
}

func waitView(t *testing.T, s *Server, plan string) {
	t.Helper()
	eventually.True(t, 5*time.Second, func() bool {
		var v board.View
		b := s.hub.view()
		return b != nil && json.Unmarshal(b, &v) == nil && len(v.Plans) == 1 && v.Plans[0].Name == plan
	}, "the hub to build the view of %s", plan)
}

// A client that takes nothing holds one view, the newest, and never
// holds up the hub or another client.
func TestSlowClientDropsViews(t *testing.T) {
	h := newHub()
	slow, leaveSlow := h.join()
	defer leaveSlow()
	for i := 0; i < 100; i++ {
		h.publish([]byte{byte(i)}) // would block on the 2nd if a client held it up
	}
	fast, leaveFast := h.join()
	defer leaveFast()
	if b := recv(t, slow); b[0] != 99 {
		t.Fatalf("slow client got view %d, want the newest, 99", b[0])
	}
	select {
	case b := <-slow:
		t.Fatalf("slow client had a backlog: %v", b)
	default:
	}
	if b := recv(t, fast); b[0] != 99 {
		t.Fatalf("a new client got view %d first, want the newest, 99", b[0])
	}
}

func recv(t *testing.T, ch <-chan []byte) []byte {
	t.Helper()
	select {
	case b := <-ch:
		return b
	case <-time.After(5 * time.Second):
		t.Fatal("no view within 5s")
	}
	return nil
}

// The board listens on loopback only; anything else is refused before a
// socket is opened, with the fix named.
func TestListenRefusesNonLoopback(t *testing.T) {
	for _, addr := range []string{":0", "0.0.0.0:0", "[::]:0", "192.168.1.10:8080", "example.com:80", "127.0.0.1"} {
		t.Run(addr, func(t *testing.T) {
			s, err := Listen(Config{Addr: addr, Root: t.TempDir()})
			if err == nil {
				s.Close()
				t.Fatalf("listening on %q was allowed", addr)
			}
			if addr != "127.0.0.1" && (!errors.Is(err, ErrNotLoopback) || !strings.Contains(err.Error(), "--http 127.0.0.1:")) {
				t.Fatalf("error %q does not name the fix", err)
			}
		})
	}
	for _, addr := range []string{"127.0.0.1:0", "localhost:0"} {
		s, err := Listen(Config{Addr: addr, Root: t.TempDir()})
		if err != nil {
			t.Fatalf("%s: %v", addr, err)
		}
		if !strings.HasPrefix(s.Addr(), "127.0.0.1:") || !strings.Contains(s.URL(), "/?token=") {
			t.Errorf("%s: listening on %s, URL %s", addr, s.Addr(), "(token elided)")
		}
		s.Close()
	}
}

// A random token carries at least 128 bits, and two differ.
func TestNewToken(t *testing.T) {
	a, err := NewToken()
	if err != nil {
		t.Fatal(err)
	}
	b, _ := NewToken()
	raw, err := base64.RawURLEncoding.DecodeString(a)
	if err != nil || len(raw) != TokenBytes || TokenBytes*8 < 256 || a == b {
		t.Fatalf("token %q: %d bytes (%v), equal %v; want 256 random bits, URL-safe", a, len(raw), err, a == b)
	}
}

// The page refers to its assets with the token, and loads nothing from
// elsewhere.
func TestPageIsSelfContained(t *testing.T) {
	s, _ := startBoard(t)
	_, body, _ := get(t, s, "/?token="+testToken, "")
	for _, want := range []string{`board.js?token=` + testToken, `board.css?token=` + testToken} {
		if !strings.Contains(body, want) {
			t.Errorf("page lacks %q", want)
		}
	}
	for _, name := range []string{"page/index.html", "page/board.js", "page/board.css"} {
		data, err := page.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(string(data), "http://") || strings.Contains(string(data), "https://") || strings.Contains(string(data), "//cdn") {
			t.Errorf("%s refers to another site", name)
		}
	}
}

// The plan folders' dependencies reach the view.
func TestViewHasDependencies(t *testing.T) {
	root := t.TempDir()
	dir := filepath.Join(root, "plans", "d")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "PLAN.md"), []byte("---\ndepends_on: [a]\n---\nDo d.\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	s, p := startBoardIn(t, root)
	p.Offer(frame("d", state.PlanDone))
	waitView(t, s, "d")
	var v board.View
	json.Unmarshal(s.hub.view(), &v)
	if len(v.Plans) != 1 || strings.Join(v.Plans[0].DependsOn, ",") != "a" {
		t.Fatalf("plans %+v: d's dependency on a is missing", v.Plans)
	}
}
