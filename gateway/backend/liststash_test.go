package backend

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolgate/toolgate/gateway/backend/backendtest"
	"github.com/toolgate/toolgate/gateway/config"
)

// A tools/list result passes through the stash with its schemas replaced
// by an empty object schema (what go-sdk then decodes), except a tool whose
// schemas carry x-mcp-header annotations; take gives back the schemas as
// sent, in a copy of the tool.
func TestSchemaStash(t *testing.T) {
	const result = `{"tools":[
		{"name":"a","inputSchema":{"type":"object","properties":{"q":{"type":"string"}}},"outputSchema":{"type":"object","properties":{"n":{"type":"integer"}}}},
		{"name":"b","inputSchema":{"type":"object","properties":{"r":{"type":"string","x-mcp-header":"Region"}}}},
		{"name":"c","description":"no schema"}
	],"nextCursor":"page2"}`
	s := newSchemaStash()
	req := &jsonrpc.Request{ID: mustID(t, 7), Method: "tools/list"}
	s.sent(req)
	other := &jsonrpc.Response{ID: mustID(t, 8), Result: json.RawMessage(result)}
	if got := s.received(other); got != other {
		t.Error("a response to another request was changed")
	}
	got := s.received(&jsonrpc.Response{ID: mustID(t, 7), Result: json.RawMessage(result)}).(*jsonrpc.Response)
	var res mcp.ListToolsResult
	if err := json.Unmarshal(got.Result, &res); err != nil {
		t.Fatal(err)
	}
	if res.NextCursor != "page2" || len(res.Tools) != 3 {
		t.Fatalf("stripped result: %s", got.Result)
	}
	empty := map[string]any{"type": "object"}
	if diff := cmp.Diff(empty, res.Tools[0].InputSchema); diff != "" {
		t.Errorf("a's inputSchema as go-sdk sees it (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(empty, res.Tools[0].OutputSchema); diff != "" {
		t.Errorf("a's outputSchema as go-sdk sees it (-want +got):\n%s", diff)
	}
	if props := res.Tools[1].InputSchema.(map[string]any)["properties"]; props == nil {
		t.Errorf("b (x-mcp-header) was stripped: %s", got.Result)
	}

	// What go-sdk makes of the result as sent is what take gives back.
	var plain mcp.ListToolsResult
	if err := json.Unmarshal([]byte(result), &plain); err != nil {
		t.Fatal(err)
	}
	for i, tool := range res.Tools {
		back := s.take(tool)
		if diff := cmp.Diff(decode(t, mustJSON(t, plain.Tools[i])), decode(t, mustJSON(t, back))); diff != "" {
			t.Errorf("tool %s after take differs from the result as sent (-sent +got):\n%s", tool.Name, diff)
		}
	}
	if diff := cmp.Diff(empty, res.Tools[0].InputSchema); diff != "" {
		t.Errorf("take changed go-sdk's tool: %s", diff)
	}
	if s.take(res.Tools[0]) != res.Tools[0] {
		t.Error("a second take found the schemas again")
	}
}

// The pool's tools carry the schemas their server sent whether they came
// through the stash (stdio, SSE) or go-sdk's own decoding (streamable HTTP).
func TestSchemasThroughEveryTransport(t *testing.T) {
	servers := []config.Server{named(backendtest.Command(t, "normal"), "stdio")}
	for _, tr := range []string{config.TypeHTTP, config.TypeSSE} {
		servers = append(servers, backendtest.NewHTTPServer(t, tr, "normal").Config(tr, nil))
	}
	p := startPool(t, servers, testOptions(nil))
	all := p.Tools()
	want := map[string]any{}
	for _, tool := range all[config.TypeHTTP] { // decoded by go-sdk
		want[tool.Name] = decode(t, mustJSON(t, tool))
	}
	if _, ok := want["add"]; !ok || len(want) < 3 {
		t.Fatalf("streamable HTTP backend listed %v", want)
	}
	for _, name := range []string{"stdio", config.TypeSSE} {
		if len(all[name]) != len(want) {
			t.Fatalf("%s lists %d tools, streamable HTTP %d", name, len(all[name]), len(want))
		}
		for _, tool := range all[name] {
			if _, ok := tool.InputSchema.(json.RawMessage); !ok {
				t.Errorf("%s %s: InputSchema is %T, want the stashed json.RawMessage", name, tool.Name, tool.InputSchema)
			}
			if diff := cmp.Diff(want[tool.Name], decode(t, mustJSON(t, tool))); diff != "" {
				t.Errorf("%s %s differs from the streamable HTTP listing (-http +%s):\n%s", name, tool.Name, name, diff)
			}
		}
	}
	res, err := p.CallTool(context.Background(), "stdio", "add", map[string]any{"a": 2, "b": 3})
	if err != nil || res.IsError {
		t.Fatalf("add through stdio: %v %+v", err, res)
	}
}

func mustID(t *testing.T, n int64) jsonrpc.ID {
	t.Helper()
	id, err := jsonrpc.MakeID(float64(n))
	if err != nil {
		t.Fatal(err)
	}
	return id
}

func mustJSON(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func decode(t *testing.T, b []byte) any {
	t.Helper()
	var v any
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatal(err)
	}
	return v
}
