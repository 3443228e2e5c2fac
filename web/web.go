// Package web is the board of orch serve --http: one page, over HTTP on
// loopback, showing what orch watch shows, kept live by server-sent
// events.
//
// How the pieces fit. Listen (this file) checks the address is loopback,
// makes the token and starts serving at once; Follow hands it the lead's
// board.Publisher. One goroutine, the hub (hub.go), takes each frame the
// publisher sends, builds the board.View (with the plan folders'
// definitions) and encodes it once; every page's event stream (handler.go)
// is given the newest encoding and writes it from its own request
// goroutine. The hub never waits for a browser: a client that is slow
// skips to the newest view, and the publisher, which never waits for the
// hub, keeps the lead loop free of both.
//
// Security: every request (page, assets, events, JSON) must carry the
// token that orch serve printed, compared in constant time; the Host
// header must name a loopback address (no DNS rebinding); responses are
// no-store with a strict Content-Security-Policy. The token is never
// logged.
package web

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"github.com/orch-dev/orch/internal/orchdir"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/orch-dev/orch/board"
)

// Config is what the board serves and where.
type Config struct {
	// Addr is the listen address: host:port, the host a loopback IP or
	// localhost; port 0 picks a free one.
	Addr string
	// Root is the repo root: plan definitions (dependencies) are read
	// from its plan folders for each view.
	Root string
	// Log gets the server's lines (never the token); nil discards them.
	Log *slog.Logger
	// Now is the clock for running bars; nil is time.Now.
	Now func() time.Time
	// Token is the secret every request must carry; empty makes a random
	// one (tests set their own).
	Token string
}

// Server is a running web board.
type Server struct {
	cfg   Config
	ln    net.Listener
	srv   *http.Server
	hub   *hub
	token string

	mu     sync.Mutex
	stop   func() // ends the publisher follow
	closed bool
	done   chan struct{} // closed by Close: ends every event stream
}

// TokenBytes is the token's size: 256 bits from crypto/rand.
const TokenBytes = 32

// NewToken returns a random token, URL-safe.
func NewToken() (string, error) {
	b := make([]byte, TokenBytes)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("web board token: %w", err)
	}
	return base64.RawURLEncoding.EncodeToString(b), nil
}

// CheckAddr refuses a listen address that is not loopback, with the fix.
// localhost is taken as 127.0.0.1 (what it resolves to is the hosts
// file's business, not ours).
func CheckAddr(addr string) (string, error) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return "", fmt.Errorf("web board address %q: %w (want host:port, e.g. 127.0.0.1:8080, or 127.0.0.1:0 for any free port)", addr, err)
	}
	if strings.EqualFold(host, "localhost") {
		host = "127.0.0.1"
	}
	if ip := net.ParseIP(host); ip == nil || !ip.IsLoopback() {
		return "", fmt.Errorf("web board address %q: %w: use --http 127.0.0.1:%s (or [::1]:%s), and reach it from another machine through ssh -L %s:127.0.0.1:%s",
			addr, ErrNotLoopback, port, port, port, port)
	}
	return net.JoinHostPort(host, port), nil
}

// Listen checks cfg.Addr, listens on it and serves at once (a page that
// loads before the first frame waits for it on its event stream).
func Listen(cfg Config) (*Server, error) {
	addr, err := CheckAddr(cfg.Addr)
	if err != nil {
		return nil, err
	}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Token == "" {
		if cfg.Token, err = NewToken(); err != nil {
			return nil, err
		}
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("web board: %w", err)
	}
	s := &Server{cfg: cfg, ln: ln, token: cfg.Token, hub: newHub(), done: make(chan struct{})}
	s.srv = &http.Server{
		Handler:           s.Handler(),
		ReadHeaderTimeout: 10 * time.Second,
		// A connection left idle is closed: local users could otherwise
		// hold the lead's descriptors open for ever.
		IdleTimeout: 60 * time.Second,
		// No WriteTimeout: an event stream lasts as long as the page;
		// each write has its own deadline (handler.go).
		ErrorLog: slog.NewLogLogger(cfg.Log.Handler(), slog.LevelDebug),
	}
	go func() {
		if err := s.srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			cfg.Log.Warn("web board stopped", "err", err)
		}
	}()
	cfg.Log.Info("web board listening", "addr", ln.Addr().String())
	return s, nil
}

// Addr is the address the board listens on (the port picked for :0).
func (s *Server) Addr() string { return s.ln.Addr().String() }

// URL is the page's address with its token: what orch serve prints and
// writes to .orch/board.url, and nowhere else.
func (s *Server) URL() string { return "http://" + s.Addr() + "/?token=" + s.token }

// Follow makes the board show the publisher's frames from now on, the
// latest one first. It returns at once; a second call replaces the first.
func (s *Server) Follow(p *board.Publisher) error {
	frames, stop := p.Follow()
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		stop()
		return ErrClosed
	}
	if s.stop != nil {
		s.stop()
	}
	ctx, cancel := context.WithCancel(context.Background())
	s.stop = func() { cancel(); stop() }
	s.mu.Unlock()
	go s.hub.run(ctx, frames, s.build)
	return nil
}

// build turns one frame into the view's JSON. A frame that does not parse
// (from an orch of another version) is skipped.
func (s *Server) build(frame []byte) []byte {
	f, err := board.ParseFrame(frame)
	if err != nil {
		s.cfg.Log.Warn("web board: frame skipped", "err", err)
		return nil
	}
	defs, _, err := loadDefs(s.cfg.Root)
	if err != nil {
		// The view still shows the record; only dependencies are missing.
		s.cfg.Log.Warn("web board: plan definitions", "err", err)
	}
	return encodeView(board.Build(f, defs, s.cfg.Now()))
}

// Close stops following, ends every event stream and closes the
// listener and its connections.
func (s *Server) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	if s.stop != nil {
		s.stop()
	}
	close(s.done)
	s.mu.Unlock()
	return s.srv.Close()
}

// URLFile is where in .orch/ orch serve writes the board's URL (mode
// 0600: it holds the token) while it runs.
const URLFile = orchdir.BoardURL
