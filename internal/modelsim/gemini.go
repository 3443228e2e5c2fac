package modelsim

import "net/http"

// serveGemini answers the Gemini API. (stub)
func (s *Server) serveGemini(w http.ResponseWriter, r *http.Request) {
	http.Error(w, "not implemented", http.StatusNotImplemented)
}
