package gateway

import (
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
)

// Starting is the HTTP front's handler from the moment its address is
// taken until the gateway serves (Ready). The probes are answered at once:
// GET /healthz "ok" (the process is alive and serving its address), GET
// /readyz 503 "not ready: starting: WHY", WHY from its function (the
// start's step, or how far the first index is). They used
// to get no answer at all until the gateway was ready, up to 10 s into a
// cold start (coldStartWait), so a liveness probe with a shorter timeout
// killed a pod that was only starting.
//
// An MCP request (/mcp, /profiles/NAME/mcp) waits for the gateway's
// handler and is then served by it, with all its checks (Host, Origin,
// keys, limits): a client's initialize is answered late rather than
// refused, which every client SDK takes (none of them retries a POST
// answered 503, and each waits longer than a start takes). A stop before
// Ready answers those waiting 503 with Retry-After (StartingRetryAfter)
// and says so. Any other route (/status, /metrics, the console) answers
// 503 at once, with Retry-After and the /readyz text (StartingPrefix…):
// `toolgate status --addr` said the gateway took the connection but sent
// no answer, as if it were stuck or out of file descriptors.
type Starting struct {
	why   func() string
	stop  <-chan struct{}
	h     atomic.Pointer[http.Handler]
	ready chan struct{}
	once  sync.Once
}

// NotReadyPrefix begins every answer of the probes other than 200 ("not
// ready: starting: …", "not ready: the tool index is being built …"):
// `toolgate health` tells a gateway's probe from another program's by it.
const NotReadyPrefix = "not ready:"

// ProbeAlive and ProbeReady are what GET /healthz and GET /readyz answer
// (200) when the gateway is alive, ready: `toolgate health` tells them
// from another program's 200 (a web server's page) by them.
const (
	ProbeAlive = "ok"
	ProbeReady = "ready"
)

// StartingPrefix begins the answer of every route but the MCP ones while
// the gateway starts, /readyz's included ("not ready: starting: …").
const StartingPrefix = NotReadyPrefix + " starting"

// StartingRetryAfter is the Retry-After, in seconds, of the 503 that a
// request waiting for a start gets when the gateway stops instead: about
// what a supervisor takes to start it again.
const StartingRetryAfter = 5

// NewStarting returns the front's handler before the gateway serves: why
// says what the start does, for /readyz (nil: nothing said), and a request
// still waiting when stop is closed is answered 503.
func NewStarting(why func() string, stop <-chan struct{}) *Starting {
	if why == nil {
		why = func() string { return "" }
	}
	return &Starting{why: why, stop: stop, ready: make(chan struct{})}
}

// Ready hands the front over to h, the gateway's handler: the requests
// waiting go to it, and every request after them. Only the first call
// counts.
func (s *Starting) Ready(h http.Handler) {
	s.once.Do(func() {
		s.h.Store(&h)
		close(s.ready)
	})
}

func (s *Starting) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if h := s.h.Load(); h != nil {
		(*h).ServeHTTP(w, r)
		return
	}
	if probe(r) && r.URL.Path == "/healthz" {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		fmt.Fprintln(w, ProbeAlive)
		return
	}
	if !mcpRoute(r.URL.Path) {
		msg := StartingPrefix
		if why := s.why(); why != "" {
			msg += ": " + why
		}
		if !probe(r) {
			w.Header().Set("Retry-After", strconv.Itoa(StartingRetryAfter))
		}
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.WriteHeader(http.StatusServiceUnavailable)
		fmt.Fprintln(w, msg)
		return
	}
	select {
	case <-s.ready:
		(*s.h.Load()).ServeHTTP(w, r)
	case <-s.stop:
		w.Header().Set("Retry-After", strconv.Itoa(StartingRetryAfter))
		http.Error(w, "Service Unavailable: the gateway is stopping before it served this request: retry once it runs again", http.StatusServiceUnavailable)
	case <-r.Context().Done(): // the client gave up
	}
}

// mcpRoute reports whether path is one that serves MCP: /mcp, or a
// profile's /profiles/NAME/mcp.
func mcpRoute(path string) bool {
	name, ok := strings.CutPrefix(path, "/profiles/")
	if ok {
		name, ok = strings.CutSuffix(name, "/mcp")
		return ok && name != "" && !strings.Contains(name, "/")
	}
	return path == "/mcp"
}
