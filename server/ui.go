package server

import "net/http"

// routeUI adds the web UI's pages to mux.
func (s *Server) routeUI(mux *http.ServeMux) {
	mux.HandleFunc("GET /{$}", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "/api/runs", http.StatusFound)
	})
}
