package gateway

import (
	"context"
	"net/http"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// DefaultHeartbeat is HTTPOptions.Heartbeat's default: well inside the
// idle limits of the proxies a team gateway sits behind (nginx's
// proxy_read_timeout and most load balancers' idle timeout are 60 s,
// HAProxy configs often say 30 s).
const DefaultHeartbeat = 15 * time.Second

// HeartbeatHeader is the response header in which the HTTP front says how
// often it sends a byte while it answers (a Go duration, "15s"): a client
// that reads it (toolgate connect) takes a request that gets nothing for a
// few of those as one whose connection died.
const HeartbeatHeader = "Toolgate-Heartbeat"

// beatWriter sends a byte of nothing every interval while a request's
// method runs (a tool call of minutes sent no byte until its answer: a
// reverse proxy or load balancer with a 60 s idle limit cut it with a 504,
// and a client could not tell a slow call from a dead connection). Into an
// event stream it writes an SSE comment (":", which every SSE reader
// skips), into a JSON answer not yet begun a newline (whitespace before a
// JSON value is JSON). Its writes and go-sdk's are serialized.
type beatWriter struct {
	http.ResponseWriter
	every time.Duration

	mu      sync.Mutex
	started bool // a status went out
	body    bool // go-sdk began the answer's own bytes
	sse     bool // the answer is an event stream
}

func (w *beatWriter) WriteHeader(code int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.started {
		return // a beat sent 200 already (only a 200 answer is beaten)
	}
	w.begin()
	w.ResponseWriter.WriteHeader(code)
}

// begin notes that the answer's status goes out now, and whether it is an
// event stream (the Content-Type go-sdk set before it wrote, or before
// the method whose beat this is ran). w.mu is held.
func (w *beatWriter) begin() {
	w.started = true
	w.sse = w.ResponseWriter.Header().Get("Content-Type") == "text/event-stream"
}

func (w *beatWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.started {
		w.begin()
	}
	w.body = true
	return w.ResponseWriter.Write(p)
}

func (w *beatWriter) Flush() {
	w.mu.Lock()
	defer w.mu.Unlock()
	_ = http.NewResponseController(w.ResponseWriter).Flush()
}

// Unwrap lets http.ResponseController reach the connection.
func (w *beatWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// beat writes one byte of nothing, when the answer can take one: an event
// stream between two events, a JSON answer before its body.
func (w *beatWriter) beat() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.body && !w.sse {
		return
	}
	if !w.started {
		w.begin()
		w.ResponseWriter.WriteHeader(http.StatusOK)
	}
	b := "\n"
	if w.sse {
		b = ":\n\n"
	}
	if _, err := w.ResponseWriter.Write([]byte(b)); err == nil {
		_ = http.NewResponseController(w.ResponseWriter).Flush()
	}
}

// run beats every interval until stop is closed.
func (w *beatWriter) run(stop <-chan struct{}) {
	t := time.NewTicker(w.every)
	defer t.Stop()
	for {
		select {
		case <-stop:
			return
		case <-t.C:
			w.beat()
		}
	}
}

// beatKey holds a request's beatWriter in its context.
type beatKey struct{}

// heartbeats beats the HTTP answer of each method while it runs (a
// receiving middleware: the method runs after go-sdk set the answer's
// headers); the beats stop before the method's result is written.
func heartbeats(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		w, ok := ctx.Value(beatKey{}).(*beatWriter)
		if !ok {
			return next(ctx, method, req)
		}
		stop, done := make(chan struct{}), make(chan struct{})
		go func() { defer close(done); w.run(stop) }()
		defer func() { close(stop); <-done }()
		return next(ctx, method, req)
	}
}
