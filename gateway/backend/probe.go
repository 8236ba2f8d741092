package backend

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
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
// until its context ends. If no answer to server/discover arrives within
// timeout, the connection delivers a synthetic "method not found" error for
// it, so go-sdk falls back to initialize on the same connection: no second
// process start, no second connect budget. A late real answer is dropped by
// go-sdk as a response to an unknown id.
//
// Only transports whose connection go-sdk does not type-assert may be
// wrapped: stdio (IOTransport) and SSE. The streamable HTTP connection has a
// private sessionUpdated hook a wrapper would hide, so HTTP uses a second
// Connect with the legacy protocol instead (see connectRemote).
type probeTransport struct {
	inner   mcp.Transport
	timeout time.Duration
	log     *slog.Logger
}

func (t *probeTransport) Connect(ctx context.Context) (mcp.Connection, error) {
	c, err := t.inner.Connect(ctx)
	if err != nil {
		return nil, err
	}
	return &probeConn{Connection: c, timeout: t.timeout, log: t.log, wake: make(chan struct{})}, nil
}

type probeConn struct {
	mcp.Connection
	timeout time.Duration
	log     *slog.Logger

	mu      sync.Mutex
	over    bool          // no probe can come any more (answered, timed out, or another request went first)
	pending bool          // a discover call is awaiting its answer
	id      jsonrpc.ID    // its id
	fire    chan struct{} // closed when timeout has passed
	wake    chan struct{} // closed when a probe is armed (a Read may already be waiting)
	timer   *time.Timer
}

func (c *probeConn) Write(ctx context.Context, msg jsonrpc.Message) error {
	if req, ok := msg.(*jsonrpc.Request); ok && req.IsCall() {
		c.mu.Lock()
		switch {
		case c.over:
		case req.Method == methodDiscover:
			if c.timer != nil {
				c.timer.Stop()
			}
			fire := make(chan struct{})
			c.pending, c.id, c.fire = true, req.ID, fire
			c.timer = time.AfterFunc(c.timeout, func() { close(fire) })
			close(c.wake)
			c.wake = make(chan struct{})
		case !c.pending:
			c.over = true // e.g. initialize first: no probe in this session
		}
		c.mu.Unlock()
	}
	return c.Connection.Write(ctx, msg)
}

func (c *probeConn) Read(ctx context.Context) (jsonrpc.Message, error) {
	for {
		c.mu.Lock()
		over, pending, id, fire, wake := c.over, c.pending, c.id, c.fire, c.wake
		c.mu.Unlock()
		if over {
			return c.Connection.Read(ctx)
		}
		// Read, but stop when the probe times out or a probe gets armed.
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
			if resp, ok := msg.(*jsonrpc.Response); ok && pending && resp.ID == id {
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
			return nil, err
		}
		if !pending {
			continue // a probe was armed while we waited: wait again, with its timer
		}
		c.settle()
		c.log.Info("backend did not answer server/discover; falling back to the legacy initialize handshake", keyTimeout, c.timeout)
		return &jsonrpc.Response{ID: id, Error: &jsonrpc.Error{
			Code:    jsonrpc.CodeMethodNotFound,
			Message: fmt.Sprintf("%s not answered within %s (toolgate probe)", methodDiscover, c.timeout),
		}}, nil
	}
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
