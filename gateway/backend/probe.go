package backend

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"math"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// methodDiscover is the SEP-2575 probe go-sdk v1.8.0 sends first.
const methodDiscover = "server/discover"

// probeTransport bounds go-sdk's server/discover probe. go-sdk v1.8.0's
// Client.Connect (default protocol) sends server/discover and falls back to
// the legacy initialize handshake when the server answers with an error; a
// legacy server that silently ignores the unknown method would hang Connect
// until its context ends.
//
// Right after server/discover the connection sends a ping of its own (pings
// are allowed before initialization). A server that answers the ping (result
// or error) but not server/discover within timeout ignores the probe: the
// connection then delivers a synthetic "method not found" answer to
// server/discover, so go-sdk falls back to initialize on the same
// connection (no second process start). Waiting for the ping first keeps a
// slow-starting modern server (npx cold start) from being mistaken for a
// legacy one: the timer starts only once the server is reading. If nothing
// at all is answered within ceiling, the fallback happens anyway, but not
// while the server has not read the probe yet (unread, over stdio: a
// Python server importing for 20 s on a loaded machine was taken for a
// legacy one, answered the discover it then read, and refused the
// initialize that followed, at every restart). The ping's answer is
// swallowed, and so is a late real discover answer, which sets late: the
// next start of the server waits for its answer (a server that reads its
// stdin before it can answer, like `docker run -i`), the ping's answer
// starting no short wait (patient).
//
// A modern server that answers the ping at once but server/discover only
// after timeout (it lists its tools for it) refuses the initialize the
// fallback sends (go-sdk's server: "duplicate initialize"): fellBack tells
// the caller, which starts it once more, patient (connectProbed).
//
// Only transports whose connection go-sdk does not type-assert may be
// wrapped: stdio (linerpc.Transport) and SSE. The streamable HTTP connection has a
// private sessionUpdated hook a wrapper would hide, so HTTP uses a second
// Connect with the legacy protocol instead (see connectRemote).
type probeTransport struct {
	inner   mcp.Transport
	timeout time.Duration // wait for discover once the server answered the ping
	ceiling time.Duration // wait for discover when the server answers nothing
	log     *slog.Logger
	// unread is how many bytes written to the server it has not read yet
	// (ok false when that cannot be known); nil for none.
	unread func() (n int, ok bool)
	// late is set when the server answered server/discover after the
	// probe gave up on it; while set, the probe waits for the discover
	// answer until the connect timeout ends it. Nil for none.
	late *atomic.Bool
	// patient: the ping's answer starts no short wait; the discover answer
	// is waited for up to the ceiling (a start after one whose fallback
	// was refused: the server was slow, not legacy).
	patient bool
	// fellBack is set when the probe gave up on the discover answer and
	// made go-sdk fall back to the legacy initialize.
	fellBack atomic.Bool
	// endedOnProbe is set when the server closed its side while the
	// discover was unanswered, having read it (unread tells).
	endedOnProbe atomic.Bool
}

// unreadPoll is how often the probe looks whether a server that has not
// read the probe yet has started reading.
const unreadPoll = 100 * time.Millisecond

// probePingID is the id of the liveness ping; go-sdk's own ids are numbers.
var probePingID, _ = jsonrpc.MakeID("toolgate-discover-probe-ping")

func (t *probeTransport) Connect(ctx context.Context) (mcp.Connection, error) {
	c, err := t.inner.Connect(ctx)
	if err != nil {
		return nil, err
	}
	ceiling, patient := max(t.ceiling, t.timeout), t.patient
	if t.late != nil && t.late.Load() {
		ceiling, patient = math.MaxInt64, true // the connect timeout ends the wait
	}
	return &probeConn{Connection: c, timeout: t.timeout, ceiling: ceiling, patient: patient, log: t.log, unread: t.unread, late: t.late,
		fellBack: &t.fellBack, endedOnProbe: &t.endedOnProbe, wake: make(chan struct{})}, nil
}

type probeConn struct {
	mcp.Connection
	timeout, ceiling time.Duration
	patient          bool // the ping's answer starts no short wait (probeTransport.patient)
	log              *slog.Logger
	unread           func() (int, bool)
	late             *atomic.Bool
	fellBack         *atomic.Bool
	endedOnProbe     *atomic.Bool

	mu      sync.Mutex
	over    bool          // no probe can come any more (answered, timed out, or another request went first)
	pending bool          // a discover call is awaiting its answer
	id      jsonrpc.ID    // its id
	wait    probeWait     // what the current wait is for
	armedAt time.Time     // when the probe was sent
	size    int           // the bytes of the discover request (0: unknown)
	gaveUp  bool          // the probe ended in the fallback: a discover answer with id is late
	fire    chan struct{} // closed when the current wait has passed
	wake    chan struct{} // closed when a probe is armed (a Read may already be waiting)
	timer   *time.Timer
}

// probeWait is what the probe waits for.
type probeWait int

const (
	waitCeiling  probeWait = iota // any answer, up to the ceiling
	waitStarting                  // the server to read the probe (it has not yet)
	waitAnswer                    // the discover answer, the server reading
)

// arm (re)starts the wait for the discover answer; c.mu must be held.
func (c *probeConn) arm(d time.Duration) {
	if c.timer != nil {
		c.timer.Stop()
	}
	fire := make(chan struct{})
	c.fire = fire
	c.timer = time.AfterFunc(d, func() { close(fire) })
}

func (c *probeConn) Write(ctx context.Context, msg jsonrpc.Message) error {
	req, ok := msg.(*jsonrpc.Request)
	if !ok || !req.IsCall() {
		return c.Connection.Write(ctx, msg)
	}
	c.mu.Lock()
	probe := false
	switch {
	case c.over:
	case req.Method == methodDiscover:
		probe = true
		c.pending, c.id, c.wait, c.armedAt = true, req.ID, waitCeiling, time.Now()
		if data, err := jsonrpc.EncodeMessage(msg); err == nil {
			c.size = len(data)
		}
		c.arm(c.ceiling)
		close(c.wake)
		c.wake = make(chan struct{})
	case !c.pending:
		c.over = true // e.g. initialize first: no probe in this session
	}
	c.mu.Unlock()
	if err := c.Connection.Write(ctx, msg); err != nil || !probe {
		return err
	}
	ping := &jsonrpc.Request{ID: probePingID, Method: "ping", Params: json.RawMessage(`{}`)}
	if err := c.Connection.Write(ctx, ping); err != nil {
		c.log.Debug("liveness ping after server/discover not sent", keyErr, err)
	}
	return nil
}

func (c *probeConn) Read(ctx context.Context) (jsonrpc.Message, error) {
	for {
		c.mu.Lock()
		over, pending, id, fire, wake, gaveUp := c.over, c.pending, c.id, c.fire, c.wake, c.gaveUp
		c.mu.Unlock()
		if over {
			msg, err := c.Connection.Read(ctx)
			if resp, ok := msg.(*jsonrpc.Response); ok && gaveUp && resp.ID == id {
				c.lateAnswer(resp)
				continue // go-sdk no longer waits for it
			}
			return msg, err
		}
		// Read, but stop when the wait for discover ends or a probe gets armed.
		trigger := wake
		if pending {
			trigger = fire
		}
		rctx, cancel := context.WithCancel(ctx)
		stop := make(chan struct{})
		go func() {
			select {
			case <-trigger:
				cancel()
			case <-stop:
			}
		}()
		msg, err := c.Connection.Read(rctx)
		close(stop)
		cancel()
		if err == nil {
			resp, ok := msg.(*jsonrpc.Response)
			switch {
			case ok && resp.ID == probePingID:
				c.mu.Lock()
				if c.pending && !c.patient {
					c.wait = waitAnswer
					c.arm(c.timeout) // the server is reading: now the short wait
				}
				c.mu.Unlock()
				continue // ours, not go-sdk's
			case ok && pending && resp.ID == id:
				c.settle()
			}
			return msg, nil
		}
		if ctx.Err() != nil {
			return nil, err
		}
		select {
		case <-trigger:
		default:
			if pending {
				c.ended()
			}
			return nil, err
		}
		if !pending {
			continue // a probe was armed while we waited: wait again, with its timer
		}
		c.mu.Lock()
		current := c.fire == fire
		if current && c.wait != waitAnswer {
			// No answer at all yet: a server that has not read the probe
			// is starting, not ignoring it; once it reads, the short wait.
			if n, ok := c.unreadBytes(); ok && n > 0 {
				c.wait = waitStarting
				c.arm(unreadPoll)
				current = false
			} else if c.wait == waitStarting {
				c.wait = waitAnswer
				c.arm(c.timeout)
				current = false
			}
		}
		if current {
			c.gaveUp = true
			c.fellBack.Store(true)
		}
		c.mu.Unlock()
		if !current {
			continue // re-armed meanwhile (the ping's answer) or above
		}
		c.settle()
		c.log.Info("backend did not answer server/discover; falling back to the legacy initialize handshake", keyTimeout, c.timeout)
		return &jsonrpc.Response{ID: id, Error: &jsonrpc.Error{
			Code:    jsonrpc.CodeMethodNotFound,
			Message: fmt.Sprintf("%s not answered (toolgate probe)", methodDiscover),
		}}, nil
	}
}

// ended notes a connection that closed while server/discover was
// unanswered: when fewer bytes than the discover request are left unread
// in the server's stdin, the server read it and then ended (a legacy
// server that stops at a method it does not know), rather than failing
// before it read anything (a crash at start, which initialize would not
// mend).
func (c *probeConn) ended() {
	c.mu.Lock()
	size := c.size
	c.mu.Unlock()
	if n, ok := c.unreadBytes(); ok && size > 0 && n < size && c.endedOnProbe != nil {
		c.endedOnProbe.Store(true)
	}
}

// unreadBytes is c.unread, if any.
func (c *probeConn) unreadBytes() (int, bool) {
	if c.unread == nil {
		return 0, false
	}
	return c.unread()
}

// lateAnswer takes the answer to a discover the probe gave up on: a result
// that offers protocol 2026-07-28 says the server speaks it, so its next
// start waits for it (this connection is in the legacy handshake already).
// One that offers only older versions (go-sdk's SSE server) would end on
// the legacy protocol anyway: waiting for it would only slow each start.
func (c *probeConn) lateAnswer(resp *jsonrpc.Response) {
	if resp.Error != nil || c.late == nil {
		return
	}
	var res struct {
		SupportedVersions []string `json:"supportedVersions"`
	}
	if err := json.Unmarshal(resp.Result, &res); err != nil || !slices.Contains(res.SupportedVersions, StatelessProtocolVersion) {
		c.log.Debug("late server/discover answer offers no protocol "+StatelessProtocolVersion+": the next start does not wait for it", "versions", res.SupportedVersions)
		return
	}
	c.late.Store(true)
	c.log.Warn("backend answered server/discover after the fallback to the legacy handshake; its next start waits for that answer", keyAfter, time.Since(c.armedAt).Round(time.Millisecond))
}

func (c *probeConn) settle() {
	c.mu.Lock()
	c.pending, c.over = false, true
	if c.timer != nil {
		c.timer.Stop()
	}
	c.mu.Unlock()
}

func (c *probeConn) Close() error {
	c.settle()
	return c.Connection.Close()
}
