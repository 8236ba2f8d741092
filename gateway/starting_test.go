package gateway

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// TestStartingFront: from the moment the address is taken, the probes
// answer (healthz ok, readyz 503 with the start's step) from any address
// and Host, and so do the other routes but MCP's (503, Retry-After); an
// MCP request waits for the gateway's handler and is served by it, checks
// included, once Ready gives it; a stop before that answers the waiting
// ones 503 with Retry-After. The front used to answer nothing
// until the gateway was ready (up to 10 s into a cold start), so a liveness
// probe with a short timeout killed a pod that was only starting.
func TestStartingFront(t *testing.T) {
	step := "opening the tool index of the last run"
	stop := make(chan struct{})
	s := NewStarting(func() string { return step }, stop)
	request := func(method, path string) *http.Request {
		r := httptest.NewRequest(method, "http://10.0.0.7:8931"+path, strings.NewReader(`{}`))
		r.RemoteAddr, r.Host = "10.0.0.1:53122", "10.0.0.7:8931" // a kubelet's
		return r
	}
	serve := func(r *http.Request) *httptest.ResponseRecorder {
		rec := httptest.NewRecorder()
		s.ServeHTTP(rec, r)
		return rec
	}
	if rec := serve(request("GET", "/healthz")); rec.Code != 200 || rec.Body.String() != "ok\n" {
		t.Errorf("GET /healthz while starting: %d %q, want 200 ok", rec.Code, rec.Body)
	}
	if rec := serve(request("HEAD", "/healthz")); rec.Code != 200 {
		t.Errorf("HEAD /healthz while starting: %d, want 200", rec.Code)
	}
	if rec := serve(request("GET", "/readyz")); rec.Code != http.StatusServiceUnavailable || rec.Body.String() != "not ready: starting: opening the tool index of the last run\n" {
		t.Errorf("GET /readyz while starting: %d %q, want 503 naming the step", rec.Code, rec.Body)
	}

	// Another route answers at once, saying so.
	for _, path := range []string{"/status", "/metrics", "/ui/", "/profiles/a/b/mcp"} {
		rec := serve(request("GET", path))
		if rec.Code != http.StatusServiceUnavailable || rec.Header().Get("Retry-After") != "5" || rec.Body.String() != "not ready: starting: opening the tool index of the last run\n" {
			t.Errorf("GET %s while starting: %d %v %q, want 503 with Retry-After naming the step", path, rec.Code, rec.Header(), rec.Body)
		}
	}

	// An MCP request waits, and is served by the gateway's handler.
	answered := make(chan *httptest.ResponseRecorder)
	go func() { answered <- serve(request("POST", "/mcp")) }()
	profiled := make(chan *httptest.ResponseRecorder)
	go func() { profiled <- serve(request("POST", "/profiles/ops/mcp")) }()
	gw := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "gateway: "+r.Method+" "+r.URL.Path, http.StatusTeapot)
	})
	s.Ready(gw)
	if rec := <-answered; rec.Code != http.StatusTeapot || !strings.Contains(rec.Body.String(), "gateway: POST /mcp") {
		t.Errorf("POST /mcp sent while starting: %d %q, want the gateway's answer once ready", rec.Code, rec.Body)
	}
	if rec := <-profiled; rec.Code != http.StatusTeapot || !strings.Contains(rec.Body.String(), "gateway: POST /profiles/ops/mcp") {
		t.Errorf("POST /profiles/ops/mcp sent while starting: %d %q, want the gateway's answer once ready", rec.Code, rec.Body)
	}
	// Once ready, everything is the gateway's, the probes included.
	if rec := serve(request("GET", "/readyz")); rec.Code != http.StatusTeapot {
		t.Errorf("GET /readyz once ready: %d %q, want the gateway's answer", rec.Code, rec.Body)
	}

	// A stop before the gateway serves answers the waiting requests.
	s = NewStarting(nil, stop)
	if rec := serve(request("GET", "/readyz")); rec.Code != http.StatusServiceUnavailable || rec.Body.String() != "not ready: starting\n" {
		t.Errorf("GET /readyz while starting, no step said: %d %q", rec.Code, rec.Body)
	}
	go func() { answered <- serve(request("POST", "/mcp")) }()
	close(stop)
	rec := <-answered
	if rec.Code != http.StatusServiceUnavailable || rec.Header().Get("Retry-After") != "5" || !strings.Contains(rec.Body.String(), "the gateway is stopping before it served this request: retry once it runs again") {
		t.Errorf("POST /mcp waiting when the gateway stops: %d %v %q, want 503 with Retry-After 5 saying it stops", rec.Code, rec.Header(), rec.Body)
	}
}
