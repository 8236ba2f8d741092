package backend

import (
	"bytes"
	"context"
	"encoding/json"
	"maps"
	"slices"
	"sync"
	"sync/atomic"
	"unicode/utf8"
	"unsafe"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	segjson "github.com/segmentio/encoding/json"
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
// response to it. A structuredContent of a megabyte or more is kept so
// too (bigStructured), whatever its numbers, and a text block of that size
// is decoded once (keep; on streamable HTTP, kept.go).

// exactResult receives the structuredContent of one call's result.
type exactResult struct {
	mu  sync.Mutex
	raw json.RawMessage
	// texts are the texts of the result's big text blocks (keep), by
	// their place in its content.
	texts map[int]string
	done  atomic.Bool // the call has returned: no one waits for its result
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
// backend wrote it) from which a tools/call result is kept as it was, in
// place of go-sdk's decoding (keep: on stdio and SSE connections,
// exactConn; on streamable HTTP, keptBody and keptEvents). Decoded, 15 MB
// of rows (a log search's) became some 100 MB of maps and took the
// gateway hundreds of milliseconds, for a result execute_tool then trims
// to its maxResultBytes (100 KB by default), reading no further in the
// JSON than what it keeps. A text block of that size (a log read) is
// decoded once, by keep, where go-sdk's reading allocated eight times its
// size.
const bigStructured = 1 << 20

// keep is result, a tools/call result as the backend wrote it, as go-sdk
// is to decode it: a structuredContent of bigStructured bytes or more is
// kept (apply puts it back) and replaced by {} in what go-sdk decodes, the
// text of a text block of that size is decoded here and replaced by ""
// (apply puts it back too); any other structuredContent is taken as take
// does. result is not changed while the call runs: what is kept is part of
// it. Each is the one go-sdk reads (the last of its name: gjson's Get finds
// the first), and a structuredContent kept has its bytes that are no UTF-8
// read as go-sdk reads them (asUTF8).
func (e *exactResult) keep(result json.RawMessage) json.RawMessage {
	if len(result) < bigStructured {
		e.take(result)
		return result
	}
	// A view, not a copy: gjson's Raw of what it finds is then part of
	// result, where GetBytes copied it (megabytes).
	view := unsafe.String(unsafe.SliceData(result), len(result))
	var (
		cuts []span
		raw  json.RawMessage
	)
	sc := lastMember(view, "structuredContent")
	if at, end := sc.Index, sc.Index+len(sc.Raw); len(sc.Raw) >= bigStructured && at > 0 && end <= len(result) && view[at:end] == sc.Raw {
		cuts = append(cuts, span{at, end, "{}"})
		raw = asUTF8(result[at:end:end]) // not a copy (when UTF-8): result is not read again
	}
	texts := map[int]string{}
	if content := lastMember(view, "content"); content.IsArray() && len(content.Raw) >= bigStructured && content.Index > 0 {
		i := 0
		content.ForEach(func(_, block gjson.Result) bool {
			if at, end := block.Index, block.Index+len(block.Raw); len(block.Raw) >= bigStructured && at > 0 && end <= len(result) {
				if from, to, text, ok := bigText(result[at:end:end]); ok {
					texts[i] = text
					cuts = append(cuts, span{at + from, at + to, `""`})
				}
			}
			i++
			return true
		})
	}
	if len(cuts) == 0 {
		e.take(result)
		return result
	}
	slices.SortFunc(cuts, func(a, b span) int { return a.from - b.from })
	small := make(json.RawMessage, 0, 4<<10)
	last := 0
	for _, c := range cuts {
		small = append(append(small, result[last:c.from]...), c.with...)
		last = c.to
	}
	small = append(small, result[last:]...)
	if raw == nil {
		e.take(small) // a smaller structuredContent beside a big text
	}
	e.mu.Lock()
	e.texts = texts
	if raw != nil {
		e.raw = raw
	}
	e.mu.Unlock()
	return small
}

// span is a part of a message, from and to as offsets, to be replaced by
// with.
type span struct {
	from, to int
	with     string
}

// bigText finds the "text" of block, a content block of a result as
// written, when block is a text block ("type": "text"): its offsets in
// block and the text decoded. A text block's other members (annotations,
// _meta) are small; its text is one token, read without a copy.
func bigText(block []byte) (from, to int, text string, ok bool) {
	t := segjson.NewTokenizer(block)
	isText, found := false, false
	for key := ""; t.Next(); {
		switch {
		case t.Depth != 1:
		case t.IsKey:
			key = string(t.Value)
		case t.Delim == ':' || t.Delim == ',':
		case key == `"type"`:
			isText = string(t.Value) == `"text"`
		case key == `"text"` && t.Kind().Class() == segjson.String:
			// t.Value is part of block, not a copy (checked below).
			from = cap(block) - cap(t.Value)
			to = from + len(t.Value)
			found = from >= 0 && to <= len(block) && unsafe.SliceData(block[from:to]) == unsafe.SliceData(t.Value)
		}
	}
	if t.Err != nil || !isText || !found || to-from < bigStructured {
		return 0, 0, "", false
	}
	// go-sdk's own decoder: the same text, to the byte, as it decodes.
	if segjson.Unmarshal(block[from:to], &text) != nil {
		return 0, 0, "", false
	}
	return from, to, text, true
}

// lastMember is the value of the last member named name of the JSON
// object data, as go-sdk's decoder takes a name written twice (gjson's Get
// finds the first): the kept one was then another than go-sdk's.
func lastMember(data string, name string) gjson.Result {
	var v gjson.Result
	gjson.Parse(data).ForEach(func(k, val gjson.Result) bool {
		if k.Str == name {
			v = val
		}
		return true
	})
	return v
}

// finish marks the call returned (with a result or not).
func (e *exactResult) finish() { e.done.Store(true) }

// apply puts the structuredContent and the texts kept for the call into
// res.
func (e *exactResult) apply(res *mcp.CallToolResult) {
	e.mu.Lock()
	raw, texts := e.raw, e.texts
	e.mu.Unlock()
	if res == nil {
		return
	}
	if raw != nil && res.StructuredContent != nil {
		res.StructuredContent = raw
	}
	for i, text := range texts {
		if i < len(res.Content) {
			if tc, ok := res.Content[i].(*mcp.TextContent); ok && tc.Text == "" {
				tc.Text = text
			}
		}
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

// takeMessage gives e the result of the JSON-RPC response data holds.
func (e *exactResult) takeMessage(data []byte) {
	if !jsonnum.Long(data) {
		return
	}
	if msg, err := jsonrpc.DecodeMessage(data); err == nil {
		if resp, ok := msg.(*jsonrpc.Response); ok && resp.Error == nil {
			e.take(resp.Result)
		}
	}
}
