// Package servemux is an http.ServeMux that keeps the patterns it was
// given, so that what a server serves is listed from where it is
// registered: the README's test of the routes reads them from here, and no
// second list can drift from the first.
package servemux

import (
	"net/http"
	"slices"
)

// Mux is an http.ServeMux that remembers its patterns.
type Mux struct {
	*http.ServeMux
	patterns []string
}

// New returns an empty Mux.
func New() *Mux { return &Mux{ServeMux: http.NewServeMux()} }

// Handle registers h for pattern, as http.ServeMux.Handle does.
func (m *Mux) Handle(pattern string, h http.Handler) {
	m.ServeMux.Handle(pattern, h)
	m.patterns = append(m.patterns, pattern)
}

// HandleFunc registers h for pattern, as http.ServeMux.HandleFunc does.
func (m *Mux) HandleFunc(pattern string, h func(http.ResponseWriter, *http.Request)) {
	m.Handle(pattern, http.HandlerFunc(h))
}

// Patterns are the patterns registered, sorted ("GET /status", "/mcp").
func (m *Mux) Patterns() []string { return slices.Sorted(slices.Values(m.patterns)) }
