package modelsim

import "net/http"

// serveAnthropic answers the Anthropic Messages API. (stub)
func (s *Server) serveAnthropic(w http.ResponseWriter, r *http.Request) {
	http.Error(w, "not implemented", http.StatusNotImplemented)
}

// serveOther answers any other path. (stub)
func (s *Server) serveOther(w http.ResponseWriter, r *http.Request) {
	http.NotFound(w, r)
}
