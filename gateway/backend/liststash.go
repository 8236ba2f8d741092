package backend

import (
	"bytes"
	"context"
	"encoding/json"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// A schema stash keeps the tool schemas of a backend's tools/list results
// as the JSON bytes the backend sent, and lets go-sdk decode each result
// with those schemas replaced by an empty object schema.
//
// go-sdk decodes every schema into a tree of map[string]any (a few KiB per
// tool), remarshals it to validate x-mcp-header annotations, and keeps the
// decoded results in its list cache for the life of a 2026-07-28 session:
// at 50,000 tools that was about 100 MiB held, and twice that decoded and
// thrown away at each start. The pool needs the schemas only as JSON (the
// catalog holds json.RawMessage), so listTools puts the stashed bytes back
// into its own copy of each tool.
//
// A tool whose schemas mention x-mcp-header is passed through whole: the
// annotations go-sdk validates and the streamable HTTP transport reads
// from its cached tools stay where it looks for them. Without them, go-sdk
// finds no annotation in either schema, so it decides the same. Results go
// through the stash only where a connection can be wrapped (stdio, SSE);
// streamable HTTP ones are decoded by go-sdk as they come.
type schemaStash struct {
	mu      sync.Mutex
	pending map[jsonrpc.ID]bool    // tools/list requests written, not answered
	schemas map[string]toolSchemas // by tool name, until listTools takes them
}

// toolSchemas are one tool's schemas as the backend sent them (nil when
// absent).
type toolSchemas struct{ in, out json.RawMessage }

// emptySchema replaces a stashed schema in what go-sdk decodes.
var emptySchema = json.RawMessage(`{"type":"object"}`)

func newSchemaStash() *schemaStash {
	return &schemaStash{pending: map[jsonrpc.ID]bool{}, schemas: map[string]toolSchemas{}}
}

// transport wraps t so that the tools/list results read through it are
// stashed.
func (s *schemaStash) transport(t mcp.Transport) mcp.Transport {
	return &wrapTransport{inner: t, wrap: func(c mcp.Connection) mcp.Connection {
		return &stashConn{Connection: c, stash: s}
	}}
}

// take returns tool with the schemas the backend sent for its name, in a
// copy (go-sdk's cached tool is not touched), or tool itself when none is
// stashed.
func (s *schemaStash) take(tool *mcp.Tool) *mcp.Tool {
	s.mu.Lock()
	sc, ok := s.schemas[tool.Name]
	delete(s.schemas, tool.Name)
	s.mu.Unlock()
	if !ok {
		return tool
	}
	c := *tool
	if sc.in != nil {
		c.InputSchema = sc.in
	}
	if sc.out != nil {
		c.OutputSchema = sc.out
	}
	return &c
}

// sent notes a tools/list request.
func (s *schemaStash) sent(msg jsonrpc.Message) {
	if req, ok := msg.(*jsonrpc.Request); ok && req.Method == "tools/list" && req.ID.IsValid() {
		s.mu.Lock()
		s.pending[req.ID] = true
		s.mu.Unlock()
	}
}

// received stashes the schemas of a tools/list result and returns the
// message go-sdk gets.
func (s *schemaStash) received(msg jsonrpc.Message) jsonrpc.Message {
	resp, ok := msg.(*jsonrpc.Response)
	if !ok || !resp.ID.IsValid() {
		return msg
	}
	s.mu.Lock()
	pending := s.pending[resp.ID]
	delete(s.pending, resp.ID)
	s.mu.Unlock()
	if !pending || resp.Error != nil || len(resp.Result) == 0 {
		return msg
	}
	stripped, schemas, ok := stripSchemas(resp.Result)
	if !ok {
		return msg // not the shape expected: go-sdk decodes it as sent
	}
	s.mu.Lock()
	for name, sc := range schemas {
		s.schemas[name] = sc
	}
	s.mu.Unlock()
	c := *resp
	c.Result = stripped
	return &c
}

// stripSchemas returns result with each tool's inputSchema and
// outputSchema replaced by emptySchema, and the schemas replaced, by tool
// name. ok is false when result is not an object with a "tools" array of
// named objects.
func stripSchemas(result json.RawMessage) (json.RawMessage, map[string]toolSchemas, bool) {
	var top map[string]json.RawMessage
	if json.Unmarshal(result, &top) != nil {
		return nil, nil, false
	}
	var tools []map[string]json.RawMessage
	if json.Unmarshal(top["tools"], &tools) != nil {
		return nil, nil, false
	}
	schemas := make(map[string]toolSchemas, len(tools))
	for _, t := range tools {
		var name string
		if t == nil || json.Unmarshal(t["name"], &name) != nil {
			return nil, nil, false
		}
		in, out := t["inputSchema"], t["outputSchema"]
		if bytes.Contains(in, []byte("x-mcp-header")) || bytes.Contains(out, []byte("x-mcp-header")) {
			continue
		}
		var sc toolSchemas
		if isObject(in) {
			sc.in = bytes.Clone(in)
			t["inputSchema"] = emptySchema
		}
		if isObject(out) {
			sc.out = bytes.Clone(out)
			t["outputSchema"] = emptySchema
		}
		if sc.in != nil || sc.out != nil {
			schemas[name] = sc
		}
	}
	b, err := json.Marshal(tools)
	if err != nil {
		return nil, nil, false
	}
	top["tools"] = b
	if b, err = json.Marshal(top); err != nil {
		return nil, nil, false
	}
	return b, schemas, true
}

// isObject reports whether raw is a JSON object (after leading space).
func isObject(raw json.RawMessage) bool {
	raw = bytes.TrimLeft(raw, " \t\r\n")
	return len(raw) > 0 && raw[0] == '{'
}

type stashConn struct {
	mcp.Connection
	stash *schemaStash
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
