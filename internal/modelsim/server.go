package modelsim

import (
	"context"
	"errors"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"
)

// Request is what the server recorded of one request, for tests to check.
type Request struct {
	Time    time.Time
	API     string // "anthropic" or "responses"
	Path    string
	Plan    string // the plan the conversation's dispatch line names; "" for a side request
	Results int    // tool results seen in the conversation
	Side    bool   // not a plan's conversation (title, summary, a person's prompt)
	Action  string // what was answered, in words
	// Callbacks are orch's callback lines the request brought new (a
	// lead's conversation; see lead.go).
	Callbacks []string `json:",omitempty"`
}

// Server is a scripted model server on 127.0.0.1.
type Server struct {
	mu        sync.Mutex
	scenarios map[string]Scenario
	requests  []Request
	hold      string // the FIFO a LeadHold command reads
	ln        net.Listener
	srv       *http.Server
}

// New returns a server whose plans follow scenarios (plan name → scenario);
// a plan not named does Done.
func New(scenarios map[string]Scenario) *Server {
	s := &Server{scenarios: map[string]Scenario{}}
	for k, v := range scenarios {
		s.scenarios[k] = v
	}
	return s
}

// SetScenario sets what the model does with plan from now on.
func (s *Server) SetScenario(plan string, sc Scenario) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.scenarios[plan] = sc
}

func (s *Server) scenario(plan string) Scenario {
	s.mu.Lock()
	defer s.mu.Unlock()
	if sc, ok := s.scenarios[plan]; ok {
		return sc
	}
	return Done
}

func (s *Server) record(r Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	r.Time = time.Now()
	s.requests = append(s.requests, r)
}

// Requests returns a copy of what was recorded so far.
func (s *Server) Requests() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Request(nil), s.requests...)
}

// Start listens on addr (a 127.0.0.1 address; "" picks a free port) and
// serves in the background. It returns the base URL, e.g.
// http://127.0.0.1:40123.
func (s *Server) Start(addr string) (string, error) {
	if addr == "" {
		addr = "127.0.0.1:0"
	}
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return "", err
	}
	if ip := net.ParseIP(host); ip == nil || !ip.IsLoopback() {
		return "", errors.New("modelsim: listen on a loopback address only, e.g. 127.0.0.1:0")
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return "", err
	}
	s.ln = ln
	s.srv = &http.Server{Handler: s, ReadHeaderTimeout: 10 * time.Second}
	go s.srv.Serve(ln)
	return "http://" + ln.Addr().String(), nil
}

// Close stops the server.
func (s *Server) Close() error {
	if s.srv == nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	return s.srv.Shutdown(ctx)
}

// ServeHTTP routes the Anthropic Messages API, the OpenAI Responses API and
// the Gemini API.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	p := r.URL.Path
	switch {
	case strings.HasPrefix(p, "/v1/messages"):
		s.serveAnthropic(w, r)
	case strings.HasSuffix(p, "/responses"):
		s.serveResponses(w, r)
	case strings.Contains(p, "/models/") && strings.Contains(p, ":"):
		s.serveGemini(w, r) // /v1beta/models/<model>:streamGenerateContent and friends
	default:
		s.serveOther(w, r)
	}
}
