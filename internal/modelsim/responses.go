package modelsim

import "net/http"

// serveResponses answers the OpenAI Responses API. (stub)
func (s *Server) serveResponses(w http.ResponseWriter, r *http.Request) {
	http.Error(w, "not implemented", http.StatusNotImplemented)
}
