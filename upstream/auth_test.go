package upstream

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// TestUnauthorizedSaysWhatToDo: a 401 or 403 from an HTTP server whose
// entry has no oauth: says how to configure it, or pass a token instead.
func TestUnauthorizedSaysWhatToDo(t *testing.T) {
	for _, status := range []int{http.StatusUnauthorized, http.StatusForbidden} {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { http.Error(w, "no", status) }))
		_, err := Connect(t.Context(), &Server{Name: "remote", URL: srv.URL}, nil)
		srv.Close()
		if err == nil || !strings.Contains(err.Error(), "add oauth: to server \"remote\" and log in with mcpflow servers login remote") || !strings.Contains(err.Error(), `Authorization: "Bearer ${TOKEN}"`) {
			t.Errorf("%d: %v", status, err)
		}
	}
}
