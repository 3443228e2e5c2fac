package web

import (
	"crypto/sha256"
	"crypto/subtle"
	"embed"
	"fmt"
	"html/template"
	"io"
	"net"
	"net/http"
	"strings"
	"time"
)

//go:embed page
var page embed.FS

// index is the page, with the token in its asset URLs (every request
// carries it, the page's own assets too).
var index = template.Must(template.ParseFS(page, "page/index.html"))

// streamWriteTimeout bounds one write to a page's event stream: a browser
// that takes no data for this long is dropped (its page says it is
// disconnected; a reload gets the newest view).
const streamWriteTimeout = 10 * time.Second

// csp lets the page load its own script, style and event stream, and
// nothing else: no inline code, no frames, no forms, nothing fetched from
// anywhere but the board.
const csp = "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; img-src 'self'; " +
	"base-uri 'none'; form-action 'none'; frame-ancestors 'none'"

// Handler is the board's routes behind its checks: Host, then token.
//
//	/           the page
//	/board.js   its script, /board.css its style
//	/events     server-sent events: one data: message per view, the newest first
//	/view.json  the newest view
func (s *Server) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /{$}", s.page)
	mux.HandleFunc("GET /board.js", asset("page/board.js", "text/javascript; charset=utf-8"))
	mux.HandleFunc("GET /board.css", asset("page/board.css", "text/css; charset=utf-8"))
	mux.HandleFunc("GET /events", s.events)
	mux.HandleFunc("GET /view.json", s.viewJSON)
	want := sha256.Sum256([]byte(s.token))
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("Cache-Control", "no-store")
		h.Set("Content-Security-Policy", csp)
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("Referrer-Policy", "no-referrer") // the token is in the URL
		h.Set("X-Frame-Options", "DENY")
		h.Set("Cross-Origin-Opener-Policy", "same-origin")
		h.Set("Cross-Origin-Resource-Policy", "same-origin")
		if !loopbackHost(r.Host) {
			h.Set("Connection", "close") // a refused client keeps no connection
			http.Error(w, "forbidden: the orch board answers only to a loopback Host (127.0.0.1, [::1], localhost), not "+
				fmt.Sprintf("%q", r.Host)+"; open the URL orch serve printed", http.StatusForbidden)
			return
		}
		// Hashing first makes the comparison constant-time whatever the
		// length of what was sent.
		got := sha256.Sum256([]byte(r.URL.Query().Get("token")))
		if subtle.ConstantTimeCompare(got[:], want[:]) != 1 {
			h.Set("Connection", "close")
			http.Error(w, "forbidden: the orch board needs its token; open the URL orch serve printed "+
				"(board: http://ADDR/?token=...), also in .orch/board.url", http.StatusForbidden)
			return
		}
		mux.ServeHTTP(w, r)
	})
}

// loopbackHost is whether a request's Host names this machine: a
// loopback IP or localhost, with any port. A page of another site that
// made its name resolve to 127.0.0.1 (DNS rebinding) sends its own name.
func loopbackHost(host string) bool {
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	host = strings.TrimSuffix(strings.TrimPrefix(host, "["), "]")
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

func (s *Server) page(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	index.Execute(w, struct{ Token string }{s.token}) // an error is the client gone
}

func asset(name, ctype string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		data, err := page.ReadFile(name)
		if err != nil { // embedded at build time: only a build mistake
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		w.Header().Set("Content-Type", ctype)
		w.Write(data)
	}
}

func (s *Server) viewJSON(w http.ResponseWriter, r *http.Request) {
	v := s.hub.view()
	if v == nil {
		http.Error(w, "no view yet: the lead loop has not sent its first frame", http.StatusServiceUnavailable)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Write(v)
}

// events streams views to one page, from this request's goroutine: the
// newest at once, then each newer one. A write that does not go through
// in streamWriteTimeout ends the stream.
func (s *Server) events(w http.ResponseWriter, r *http.Request) {
	rc := http.NewResponseController(w)
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	views, leave := s.hub.join()
	defer leave()
	send := func(msg ...string) bool {
		rc.SetWriteDeadline(time.Now().Add(streamWriteTimeout))
		for _, m := range msg {
			if _, err := io.WriteString(w, m); err != nil {
				return false
			}
		}
		return rc.Flush() == nil
	}
	// A comment line opens the stream before the first view is there.
	if !send(": orch board\n\n") {
		return
	}
	for {
		select {
		case <-r.Context().Done():
			return
		case <-s.done:
			return
		case v := <-views:
			// A view is one line of JSON: one data: line is the message.
			if !send("data: ", string(v), "\n\n") {
				return
			}
		}
	}
}
