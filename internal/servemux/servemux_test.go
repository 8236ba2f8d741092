package servemux

import (
	"net/http"
	"net/http/httptest"
	"slices"
	"testing"
)

func TestPatterns(t *testing.T) {
	m := New()
	m.HandleFunc("GET /status", func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusTeapot) })
	m.Handle("/mcp", http.NotFoundHandler())
	if got, want := m.Patterns(), []string{"/mcp", "GET /status"}; !slices.Equal(got, want) {
		t.Errorf("Patterns() = %q, want %q", got, want)
	}
	rec := httptest.NewRecorder()
	m.ServeHTTP(rec, httptest.NewRequest("GET", "/status", nil))
	if rec.Code != http.StatusTeapot {
		t.Errorf("GET /status: %d, want the handler's %d", rec.Code, http.StatusTeapot)
	}
}
