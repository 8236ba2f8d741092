package backend

import (
	"context"
	"errors"
	"net/http"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// A server of the older HTTP+SSE transport that refuses one call 403
// insufficient_scope (a step-up, MCP 2025-11-25) refuses the POST that
// carries it; the answers of that transport come on its event stream, and
// the POST's own answer (202) carries none. go-sdk's SSE connection fails
// the write ("failed to write: 403 Forbidden"), which ends the session: the
// backend went down after each refused call, and every other call to it
// failed until it connected again. scopeRefusals wraps such a connection
// so that the write of a call whose POST the server refused so
// (headerTransport.RoundTrip notes it in the write's context: scopeNote)
// succeeds, and the connection's next read is a JSON-RPC error to that
// call (scopeRefusalError), which go-sdk takes as the one call's failure,
// as scopeRefusalAnswer does for streamable HTTP. The server refused the
// POST: it never had the call, so the call was not run.
//
// It leans on two things go-sdk's SSE client does (TestGoSDKSSEClientAsRelied
// checks both): its Write sends the POST with the context it was given,
// and its Read, its context cancelled, returns without taking a message
// (probeConn leans on the second too).

// scopeNote is put in the context of a call's write by scopeConn; the
// RoundTrip of the POST that carries it fills it when the server answered
// 403 with a Bearer challenge that names a scope.
type scopeNote struct {
	mu     sync.Mutex
	status string // "403 Forbidden"
	scope  string // the scopes the challenge asks for
}

type scopeNoteKey struct{}

// scopeNoteFrom is the scopeNote of the write ctx belongs to, or nil.
func scopeNoteFrom(ctx context.Context) *scopeNote {
	n, _ := ctx.Value(scopeNoteKey{}).(*scopeNote)
	return n
}

// noteScopeRefusal notes resp, a 403 whose Bearer challenge asks for
// scope, answering req, the POST of a call's write (an SSE session), in
// that write's scopeNote, and reports whether it did: scopeConn then
// answers the call itself. A request written without a note (a
// notification, a response, the handshake's requests) is left alone.
func noteScopeRefusal(req *http.Request, resp *http.Response, scope string) bool {
	n := scopeNoteFrom(req.Context())
	if n == nil || req.Method != http.MethodPost || resp.StatusCode != http.StatusForbidden {
		return false
	}
	n.mu.Lock()
	n.status, n.scope = resp.Status, scope
	n.mu.Unlock()
	return true
}

// scopeRefusals wraps the SSE transport t (scopeConn).
func scopeRefusals(t mcp.Transport) mcp.Transport {
	return &wrapTransport{inner: t, wrap: func(c mcp.Connection) mcp.Connection {
		return &scopeConn{Connection: c}
	}}
}

// errAnswerQueued cancels a scopeConn's read under way: an answer of its
// own is there to be read.
var errAnswerQueued = errors.New("an answer to a refused call is queued")

// scopeConn is an SSE connection whose calls refused 403 insufficient_scope
// are answered by it (see scopeRefusals).
type scopeConn struct {
	mcp.Connection
	mu      sync.Mutex
	answers []jsonrpc.Message       // to be read before the stream's
	wake    context.CancelCauseFunc // cancels the read under way; nil for none
}

func (c *scopeConn) Write(ctx context.Context, msg jsonrpc.Message) error {
	req, ok := msg.(*jsonrpc.Request)
	if !ok || !req.IsCall() {
		return c.Connection.Write(ctx, msg)
	}
	n := &scopeNote{}
	err := c.Connection.Write(context.WithValue(ctx, scopeNoteKey{}, n), msg)
	n.mu.Lock()
	status, scope := n.status, n.scope
	n.mu.Unlock()
	if status == "" {
		return err
	}
	// Refused: whatever go-sdk made of the 403 ("failed to write", which
	// breaks the connection), the server did not take the call.
	c.mu.Lock()
	c.answers = append(c.answers, scopeRefusalError(req.ID, status, scope))
	if c.wake != nil {
		c.wake(errAnswerQueued)
	}
	c.mu.Unlock()
	return nil
}

func (c *scopeConn) Read(ctx context.Context) (jsonrpc.Message, error) {
	for {
		c.mu.Lock()
		if len(c.answers) > 0 {
			msg := c.answers[0]
			c.answers = c.answers[1:]
			c.mu.Unlock()
			return msg, nil
		}
		rctx, cancel := context.WithCancelCause(ctx)
		c.wake = cancel
		c.mu.Unlock()
		msg, err := c.Connection.Read(rctx)
		c.mu.Lock()
		c.wake = nil
		c.mu.Unlock()
		woken := errors.Is(context.Cause(rctx), errAnswerQueued)
		cancel(nil)
		if err != nil && woken && ctx.Err() == nil {
			continue // the answer queued, then the stream's
		}
		return msg, err
	}
}
