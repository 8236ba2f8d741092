package backend

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"maps"
	"sync"
	"sync/atomic"
	"unicode/utf8"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/tidwall/gjson"

	"github.com/toolgate/toolgate/internal/jsonnum"
)

// go-sdk decodes a tool result's structuredContent into map[string]any,
// its numbers into float64: an integer past 2^53 (a 64-bit ID, which a
// Python server returns as an int) is rounded, and the client of the
// gateway would get another number than the backend sent. The pool keeps
// the structuredContent of a tools/call result as the backend wrote it
// when it holds a number of 16 digits or more in a row, and hands that on
// instead (as a json.RawMessage, which encodes back unchanged). Each call
// carries an exactResult in its context; the connection sees the call's
// request (stdio, SSE: exactConn) or its HTTP exchange (streamable HTTP:
// headerTransport, whose requests carry the call's context) and the
// response to it. On a stdio or SSE connection, a structuredContent of a
// megabyte or more is kept so too (bigStructured), whatever its numbers.

// exactResult receives the structuredContent of one call's result.
type exactResult struct {
	mu   sync.Mutex
	raw  json.RawMessage
	done atomic.Bool // the call has returned: no one waits for its result
	// cut is how the answer to the call's POST ended before its result
	// (streamable HTTP: callBody), or nil.
	cut atomic.Pointer[cutAnswer]
	// refused is the 403 that refused this call alone (refusal.callOnly):
	// the transport's last refusal may be another call's by the time
	// this one reads it.
	refused atomic.Pointer[refusal]
}

type exactKey struct{}

// withExact returns ctx carrying a new exactResult for one call.
func withExact(ctx context.Context) (context.Context, *exactResult) {
	e := &exactResult{}
	return context.WithValue(ctx, exactKey{}, e), e
}

// exactFrom is the exactResult of the call ctx belongs to, or nil.
func exactFrom(ctx context.Context) *exactResult {
	e, _ := ctx.Value(exactKey{}).(*exactResult)
	return e
}

// take keeps the structuredContent of result (a tools/call result as the
// backend wrote it) when a float64 may not hold one of its numbers.
func (e *exactResult) take(result json.RawMessage) {
	if !jsonnum.Long(result) {
		return
	}
	var r struct {
		StructuredContent json.RawMessage `json:"structuredContent"`
	}
	if json.Unmarshal(result, &r) != nil || !jsonnum.Long(r.StructuredContent) {
		return
	}
	e.mu.Lock()
	e.raw = asUTF8(bytes.Clone(r.StructuredContent))
	e.mu.Unlock()
}

// asUTF8 is raw, JSON as a backend wrote it, with each byte that is no
// part of a UTF-8 character replaced by U+FFFD, as go-sdk's decoding reads
// it (such bytes can only be inside strings: the JSON was read already);
// raw itself when it is UTF-8 throughout. Kept as written, such bytes went
// on to the client: JSON that a strict UTF-8 reader (Python's) refuses
// whole, where the same result decoded had U+FFFD in their place.
func asUTF8(raw []byte) []byte {
	if utf8.Valid(raw) {
		return raw
	}
	out := make([]byte, 0, len(raw)+16)
	for len(raw) > 0 {
		r, n := utf8.DecodeRune(raw)
		if r == utf8.RuneError && n == 1 {
			out = utf8.AppendRune(out, utf8.RuneError)
		} else {
			out = append(out, raw[:n]...)
		}
		raw = raw[n:]
	}
	return out
}

// bigStructured is the size of structuredContent (bytes of JSON as the
// backend wrote it) from which a tools/call result read on a stdio or SSE
// connection (exactConn) keeps it as it was, in place of go-sdk's decoding.
// Decoded, 15 MB of rows (a log search's) became some 100 MB of maps and
// took the gateway hundreds of milliseconds, for a result execute_tool
// then trims to its maxResultBytes (100 KB by default), reading no further
// in the JSON than what it keeps.
const bigStructured = 1 << 20

// keep is result, a tools/call result as the backend wrote it, as go-sdk
// is to decode it: a structuredContent of bigStructured bytes or more is
// kept (apply puts it back) and replaced by {} in what go-sdk decodes; any
// other is taken as take does. It is the one go-sdk reads (the last of
// its name), its bytes that are no UTF-8 read as go-sdk reads them (asUTF8).
func (e *exactResult) keep(result json.RawMessage) json.RawMessage {
	if len(result) < bigStructured {
		e.take(result)
		return result
	}
	sc := lastMember(result, "structuredContent")
	end := sc.Index + len(sc.Raw)
	if !sc.Exists() || len(sc.Raw) < bigStructured || sc.Index <= 0 || end > len(result) || string(result[sc.Index:end]) != sc.Raw {
		e.take(result)
		return result
	}
	e.mu.Lock()
	e.raw = asUTF8(result[sc.Index:end:end]) // not a copy: result is not read again
	e.mu.Unlock()
	small := make(json.RawMessage, 0, len(result)-len(sc.Raw)+2)
	small = append(small, result[:sc.Index]...)
	small = append(small, "{}"...)
	return append(small, result[end:]...)
}

// lastMember is the value of the last member named name of the JSON
// object data, as go-sdk's decoder takes a name written twice (gjson's Get
// finds the first): the kept one was then another than go-sdk's.
func lastMember(data []byte, name string) gjson.Result {
	var v gjson.Result
	gjson.ParseBytes(data).ForEach(func(k, val gjson.Result) bool {
		if k.Str == name {
			v = val
		}
		return true
	})
	return v
}

// finish marks the call returned (with a result or not).
func (e *exactResult) finish() { e.done.Store(true) }

// apply puts the structuredContent kept for the call into res.
func (e *exactResult) apply(res *mcp.CallToolResult) {
	e.mu.Lock()
	raw := e.raw
	e.mu.Unlock()
	if raw != nil && res != nil && res.StructuredContent != nil {
		res.StructuredContent = raw
	}
}

// exacting wraps t (stdio, SSE: a connection go-sdk does not type-assert)
// so that the result of each tools/call written with an exactResult in its
// context is given to it, and the notifications/cancelled of a call says
// why it was cancelled (withCancelReason).
func exacting(t mcp.Transport) mcp.Transport {
	return &wrapTransport{inner: t, wrap: func(c mcp.Connection) mcp.Connection {
		return &exactConn{Connection: c, pending: map[jsonrpc.ID]*exactResult{}}
	}}
}

// maxExactPending is how many unanswered calls an exactConn holds before it
// drops those that have returned.
const maxExactPending = 64

type exactConn struct {
	mcp.Connection
	mu      sync.Mutex
	pending map[jsonrpc.ID]*exactResult // tools/call requests written, not answered
}

func (c *exactConn) Write(ctx context.Context, msg jsonrpc.Message) error {
	if req, ok := msg.(*jsonrpc.Request); ok && req.IsCall() && req.Method == "tools/call" {
		if e := exactFrom(ctx); e != nil {
			c.mu.Lock()
			if len(c.pending) >= maxExactPending {
				// Calls that ended unanswered (cancelled, timed out).
				maps.DeleteFunc(c.pending, func(_ jsonrpc.ID, e *exactResult) bool { return e.done.Load() })
			}
			c.pending[req.ID] = e
			c.mu.Unlock()
		}
	}
	return c.Connection.Write(ctx, withCancelReason(ctx, msg))
}

func (c *exactConn) Read(ctx context.Context) (jsonrpc.Message, error) {
	msg, err := c.Connection.Read(ctx)
	if resp, ok := msg.(*jsonrpc.Response); ok && err == nil {
		c.mu.Lock()
		e := c.pending[resp.ID]
		delete(c.pending, resp.ID)
		c.mu.Unlock()
		if e != nil && resp.Error == nil {
			resp.Result = e.keep(resp.Result)
		}
	}
	return msg, err
}

// exactBody reads a plain JSON response body (streamable HTTP) for go-sdk
// and, at its end, gives the result it holds to e. The body is the answer
// to one POST, the call's.
type exactBody struct {
	rc  io.ReadCloser
	e   *exactResult
	buf []byte
	max int
}

func (b *exactBody) Read(p []byte) (int, error) {
	n, err := b.rc.Read(p)
	if len(b.buf)+n <= b.max {
		b.buf = append(b.buf, p[:n]...)
	} else {
		b.max = -1 // too long to keep: not looked at
	}
	if errors.Is(err, io.EOF) && b.max >= 0 {
		b.e.takeMessage(b.buf)
		b.buf = nil
	}
	return n, err
}

func (b *exactBody) Close() error { return b.rc.Close() }

// takeMessage gives e the result of the JSON-RPC response data holds.
func (e *exactResult) takeMessage(data []byte) {
	if !jsonnum.Long(data) {
		return
	}
	if msg, err := jsonrpc.DecodeMessage(data); err == nil {
		e.observe(msg)
	}
}

// observe gives e the result of msg if it is a response (an event of the
// call's POST answered as an event stream).
func (e *exactResult) observe(msg jsonrpc.Message) {
	if resp, ok := msg.(*jsonrpc.Response); ok && resp.Error == nil {
		e.take(resp.Result)
	}
}
