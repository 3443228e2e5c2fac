// Command modelsim runs the scripted model server for end-to-end tests:
//
//	modelsim -addr 127.0.0.1:0 [-scenario plan=kind ...] [-log FILE] [-dump DIR]
//
// It prints the server's base URL (http://127.0.0.1:PORT) as the first
// line on stdout, writes one JSON line per request it answers (a
// modelsim.Request) to -log or stderr, and exits on SIGTERM or SIGINT.
// -dump DIR also saves every request's method, path, headers and body in
// DIR, one file a request, for finding out what an agent sends.
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/orch-dev/orch/internal/modelsim"
)

// scenarios is the -scenario flag: plan=kind, repeatable.
type scenarios map[string]modelsim.Scenario

func (s scenarios) String() string { return fmt.Sprint(map[string]modelsim.Scenario(s)) }

func (s scenarios) Set(v string) error {
	plan, kind, ok := strings.Cut(v, "=")
	if !ok || plan == "" {
		return fmt.Errorf("want plan=kind, got %q", v)
	}
	switch sc := modelsim.Scenario(kind); sc {
	case modelsim.Done, modelsim.Permission, modelsim.APIError, modelsim.NoDone:
		s[plan] = sc
		return nil
	}
	return fmt.Errorf("unknown scenario %q (want done, permission, apierror or nodone)", kind)
}

func main() {
	sc := scenarios{}
	addr := flag.String("addr", "127.0.0.1:0", "address to listen on (loopback only)")
	logPath := flag.String("log", "", "file to append the request log to (default stderr)")
	dump := flag.String("dump", "", "directory to save every raw request in")
	flag.Var(sc, "scenario", "plan=kind (done, permission, apierror, nodone); repeatable")
	flag.Parse()
	if err := run(*addr, sc, *logPath, *dump); err != nil {
		fmt.Fprintln(os.Stderr, "modelsim:", err)
		os.Exit(1)
	}
}

func run(addr string, sc scenarios, logPath, dump string) error {
	logw := io.Writer(os.Stderr)
	if logPath != "" {
		f, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
		if err != nil {
			return err
		}
		defer f.Close()
		logw = f
	}
	if dump != "" {
		if err := os.MkdirAll(dump, 0o755); err != nil {
			return err
		}
	}
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return err
	}
	if ip := net.ParseIP(host); ip == nil || !ip.IsLoopback() {
		return fmt.Errorf("listen on a loopback address only, e.g. 127.0.0.1:0")
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}

	s := modelsim.New(sc)
	l := &logger{s: s, w: logw, dump: dump}
	srv := &http.Server{Handler: l, ReadHeaderTimeout: 10 * time.Second}
	go srv.Serve(ln)
	fmt.Println("http://" + ln.Addr().String())

	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM, syscall.SIGINT)
	<-sig
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	srv.Shutdown(ctx)
	return nil
}

// logger serves with the modelsim server and, after each request, writes
// the Requests it recorded since the last time as JSON lines.
type logger struct {
	s    *modelsim.Server
	dump string

	mu     sync.Mutex
	w      io.Writer
	logged int // how many of s.Requests() are written
	dumped int // how many requests are dumped
}

func (l *logger) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if l.dump != "" {
		body, _ := io.ReadAll(r.Body)
		r.Body = io.NopCloser(bytes.NewReader(body))
		l.mu.Lock()
		l.dumped++
		n := l.dumped
		l.mu.Unlock()
		var head strings.Builder
		fmt.Fprintf(&head, "%s %s\n", r.Method, r.URL.RequestURI())
		for k, vs := range r.Header {
			if strings.EqualFold(k, "x-api-key") || strings.EqualFold(k, "authorization") {
				vs = []string{"(redacted)"}
			}
			fmt.Fprintf(&head, "%s: %s\n", k, strings.Join(vs, ", "))
		}
		name := fmt.Sprintf("%04d%s", n, strings.ReplaceAll(r.URL.Path, "/", "_"))
		os.WriteFile(filepath.Join(l.dump, name+".head"), []byte(head.String()), 0o644)
		os.WriteFile(filepath.Join(l.dump, name+".body"), body, 0o644)
	}
	l.s.ServeHTTP(w, r)

	l.mu.Lock()
	defer l.mu.Unlock()
	reqs := l.s.Requests()
	for _, rq := range reqs[l.logged:] {
		b, _ := json.Marshal(rq)
		fmt.Fprintf(l.w, "%s\n", b)
	}
	l.logged = len(reqs)
}
