package backend

import (
	"bytes"
	"context"
	"encoding/json"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	segjson "github.com/segmentio/encoding/json"

	"github.com/toolgate/toolgate/internal/linerpc"
)

// A list stash decodes the tools of a backend's tools/list results itself,
// keeps them (in order, by the page's request cursor) for listTools, and
// hands go-sdk each result with "tools" holding only the entries go-sdk
// must see; everything else in the result (nextCursor, ttlMs, _meta...) is
// passed on, so go-sdk's pagination, caching and errors are unchanged.
//
// go-sdk decodes every tool's schemas into trees of map[string]any,
// re-encodes and decodes each input schema again to validate x-mcp-header
// annotations (through a fresh 32 KiB decoder each time), and keeps the
// decoded results in its list cache for the life of a 2026-07-28 session,
// where CallTool scans them for the called tool. The pool needs the
// schemas only as JSON (the catalog holds json.RawMessage): the stash
// decodes each tool once, with its schemas as the bytes the backend sent.
//
// Entries go-sdk still gets, whole:
//   - a tool whose schemas mention x-mcp-header: go-sdk validates the
//     annotations (and drops the tool when they are invalid), and the
//     streamable HTTP transport reads them from its cached tools;
//   - a null entry, which go-sdk drops with a log line;
//   - a tool with a schema that is not an object (go-sdk decodes it into
//     another type than a map).
//
// A page with an entry that is not a tool (not an object, a field of the
// wrong type) goes to go-sdk as sent: it fails the listing with go-sdk's
// own error, which names the entry by its index in the page.
//
// Results go through the stash only where a connection can be wrapped
// (stdio, SSE); streamable HTTP ones are decoded by go-sdk as they come.
type listStash struct {
	mu      sync.Mutex
	pending map[jsonrpc.ID]string // tools/list requests written, not answered: their cursor
	// pages holds the latest result for each request cursor: the one
	// go-sdk caches, when its cache answers a later request.
	pages map[string][]listed
	// share, if set, is given each tool the stash decoded, before anyone
	// else sees it (backend.known).
	share func(*mcp.Tool)
}

// listed is one entry of a stashed page: a tool the stash decoded, or
// (tool nil) the name of an entry handed to go-sdk.
type listed struct {
	tool *mcp.Tool
	name string
}

func newListStash(share func(*mcp.Tool)) *listStash {
	return &listStash{pending: map[jsonrpc.ID]string{}, pages: map[string][]listed{}, share: share}
}

// transport wraps t so that the tools/list results read through it are
// stashed.
func (s *listStash) transport(t mcp.Transport) mcp.Transport {
	return &wrapTransport{inner: t, wrap: func(c mcp.Connection) mcp.Connection {
		return &stashConn{Connection: c, stash: s}
	}}
}

// begin starts a listing: the requests of earlier ones not answered yet
// are forgotten (a late answer to an abandoned request goes to go-sdk as
// sent, which drops it, and does not replace a page).
func (s *listStash) begin() {
	s.mu.Lock()
	clear(s.pending)
	s.mu.Unlock()
}

// merge returns the tools of the page listed at cursor in the backend's
// order: the stashed tools, and in place of the entries handed to go-sdk
// the ones among fromSDK (what go-sdk returned for that page, after its
// validation). Without a stashed page, fromSDK is the page.
func (s *listStash) merge(cursor string, fromSDK []*mcp.Tool) []*mcp.Tool {
	s.mu.Lock()
	page, ok := s.pages[cursor]
	s.mu.Unlock()
	if !ok {
		return fromSDK
	}
	tools := make([]*mcp.Tool, 0, len(page))
	for _, e := range page {
		switch {
		case e.tool != nil:
			tools = append(tools, e.tool)
		case len(fromSDK) > 0 && fromSDK[0].Name == e.name:
			tools = append(tools, fromSDK[0])
			fromSDK = fromSDK[1:]
		} // else go-sdk dropped it
	}
	return append(tools, fromSDK...) // none, unless go-sdk made up tools
}

// sent notes a tools/list request and its cursor.
func (s *listStash) sent(msg jsonrpc.Message) {
	req, ok := msg.(*jsonrpc.Request)
	if !ok || req.Method != "tools/list" || !req.ID.IsValid() {
		return
	}
	var params struct {
		Cursor string `json:"cursor"`
	}
	if len(req.Params) > 0 {
		if _, err := segjson.Parse(req.Params, &params, linerpc.ParseFlags); err != nil {
			return // go-sdk wrote it: not expected
		}
	}
	s.mu.Lock()
	s.pending[req.ID] = params.Cursor
	s.mu.Unlock()
}

// received stashes the tools of a tools/list result and returns the
// message go-sdk gets.
func (s *listStash) received(msg jsonrpc.Message) jsonrpc.Message {
	resp, ok := msg.(*jsonrpc.Response)
	if !ok || !resp.ID.IsValid() {
		return msg
	}
	s.mu.Lock()
	cursor, pending := s.pending[resp.ID]
	if pending {
		delete(s.pending, resp.ID)
		delete(s.pages, cursor) // replaced below, or go-sdk's result is the page
	}
	s.mu.Unlock()
	if !pending || resp.Error != nil || len(resp.Result) == 0 {
		return msg
	}
	result, page, ok := splitTools(resp.Result)
	if !ok {
		return msg // not the shape expected: go-sdk decodes it as sent
	}
	if s.share != nil {
		for _, e := range page {
			if e.tool != nil {
				s.share(e.tool)
			}
		}
	}
	s.mu.Lock()
	s.pages[cursor] = page
	s.mu.Unlock()
	c := *resp
	c.Result = result
	return &c
}

// wireTool is a tool as listed, with its schemas kept as sent.
type wireTool struct {
	mcp.Tool
	InputSchema  json.RawMessage `json:"inputSchema"`
	OutputSchema json.RawMessage `json:"outputSchema,omitempty"`
}

// splitTools decodes the tools of a tools/list result. It returns the
// result for go-sdk, holding only the tool entries go-sdk must see (see
// listStash), and the page. ok is false when result is not an object with
// a "tools" array of tools.
func splitTools(result json.RawMessage) (json.RawMessage, []listed, bool) {
	var top map[string]json.RawMessage
	if _, err := segjson.Parse(result, &top, linerpc.ParseFlags|segjson.DontCopyRawMessage); err != nil {
		return nil, nil, false
	}
	var entries []json.RawMessage
	if _, err := segjson.Parse(top["tools"], &entries, linerpc.ParseFlags|segjson.DontCopyRawMessage); err != nil || entries == nil {
		return nil, nil, false
	}
	page := make([]listed, 0, len(entries))
	var kept bytes.Buffer
	kept.WriteByte('[')
	keep := func(entry json.RawMessage) {
		if kept.Len() > 1 {
			kept.WriteByte(',')
		}
		kept.Write(entry)
	}
	for _, entry := range entries {
		if bytes.Equal(entry, []byte("null")) {
			keep(entry)
			continue
		}
		var w wireTool
		if _, err := segjson.Parse(entry, &w, linerpc.ParseFlags); err != nil {
			return nil, nil, false // go-sdk fails the page, with its own error
		}
		if !schemaField(w.InputSchema) || !schemaField(w.OutputSchema) ||
			bytes.Contains(w.InputSchema, []byte("x-mcp-header")) || bytes.Contains(w.OutputSchema, []byte("x-mcp-header")) {
			keep(entry)
			page = append(page, listed{name: w.Name})
			continue
		}
		t := new(mcp.Tool) // not &w.Tool: that would keep w's raw schemas too
		*t = w.Tool
		if w.InputSchema != nil {
			t.InputSchema = w.InputSchema
		}
		if w.OutputSchema != nil {
			t.OutputSchema = w.OutputSchema
		}
		page = append(page, listed{tool: t})
	}
	kept.WriteByte(']')
	top["tools"] = kept.Bytes()
	b, err := json.Marshal(top)
	if err != nil {
		return nil, nil, false
	}
	return b, page, true
}

// schemaField reports whether raw is absent or a JSON object: what the
// stash keeps as sent (go-sdk decodes anything else, into other types).
func schemaField(raw json.RawMessage) bool {
	return raw == nil || raw[0] == '{'
}

type stashConn struct {
	mcp.Connection
	stash *listStash
}

func (c *stashConn) Write(ctx context.Context, msg jsonrpc.Message) error {
	c.stash.sent(msg)
	return c.Connection.Write(ctx, msg)
}

func (c *stashConn) Read(ctx context.Context) (jsonrpc.Message, error) {
	msg, err := c.Connection.Read(ctx)
	if err != nil {
		return msg, err
	}
	return c.stash.received(msg), nil
}
