package console

import (
	"sync"
	"time"

	"github.com/toolgate/toolgate/gateway"
)

// Call is one tool call as the console lists it.
type Call struct {
	At         time.Time       `json:"at"`
	Server     string          `json:"server"`
	Tool       string          `json:"tool"`
	Outcome    gateway.Outcome `json:"outcome"`
	DurationMS float64         `json:"durationMs"`
	// Error is why the call failed (the gateway's error, never the tool's
	// output nor its arguments).
	Error string `json:"error,omitempty"`
	// Key is the name of the API key the call was made with ("" for
	// none, stdio): who made it, for an admin reading everyone's calls;
	// a key that is not admin sees only its own calls.
	Key string `json:"key,omitempty"`
}

// DefaultRecent is how many calls a Recorder keeps by default.
const DefaultRecent = 100

// Recorder keeps the latest tool calls in memory, for the console's recent
// calls when no audit log holds them. Its Caller decorator records each.
type Recorder struct {
	mu    sync.Mutex
	ring  []Call
	next  int
	count int
}

// NewRecorder keeps the last size calls (0 = DefaultRecent).
func NewRecorder(size int) *Recorder {
	if size <= 0 {
		size = DefaultRecent
	}
	return &Recorder{ring: make([]Call, size)}
}

// Caller returns c recording every call.
func (r *Recorder) Caller(c gateway.Caller) gateway.Caller {
	return gateway.Observed(c, func(c gateway.Call) {
		call := Call{At: c.Start, Server: c.Server, Tool: c.Tool, Outcome: c.Outcome,
			DurationMS: float64(c.Duration.Microseconds()) / 1000}
		if c.Caller != nil && c.Caller.Key != nil {
			call.Key = c.Caller.Key.Name
		}
		if c.Err != nil {
			call.Error = c.Err.Error()
		}
		r.add(call)
	})
}

// Calls returns the calls kept, newest first.
func (r *Recorder) Calls() []Call {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]Call, 0, r.count)
	for i := 1; i <= r.count; i++ {
		out = append(out, r.ring[(r.next-i+len(r.ring))%len(r.ring)])
	}
	return out
}

func (r *Recorder) add(c Call) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.ring[r.next] = c
	r.next = (r.next + 1) % len(r.ring)
	r.count = min(r.count+1, len(r.ring))
}
