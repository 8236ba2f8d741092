package gateway

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolgate/toolgate/gateway/backend/backendtest"
	"github.com/toolgate/toolgate/gateway/config"
)

// TestResultMetaRelayed: an execute_tool result keeps the backend's own
// _meta keys (part of the tool's result, passed on unscanned like its
// content) and goes without those under MCP's reserved prefixes, which
// describe the backend's session: its serverInfo (a 2026-07-28 client took
// the backend for the server it is connected to) and its related-task (an
// id the gateway's session does not have). A client of 2026-07-28 sees the
// gateway's own serverInfo.
func TestResultMetaRelayed(t *testing.T) {
	rg := newRealGateway(t, []config.Server{fakeServer(t, "fake", backendtest.ModeMeta)}, nil)
	ctx := context.Background()
	for _, pv := range []string{"2025-11-25", "2026-07-28"} {
		t.Run(pv, func(t *testing.T) {
			cs := connectClient(t, rg.g, mcp.NewClient(&mcp.Implementation{Name: "c"}, nil), pv)
			res := executeWith(ctx, t, cs, "fake__meta", nil, nil)
			if res.IsError {
				t.Fatalf("fake__meta: %s", text(res))
			}
			meta, _ := json.Marshal(res.Meta)
			var got map[string]json.RawMessage
			if err := json.Unmarshal(meta, &got); err != nil {
				t.Fatal(err)
			}
			if w := string(got["example.com/widget"]); w != `{"id":"w1"}` {
				t.Errorf("the backend's own _meta key: %s, want it kept: %s", w, meta)
			}
			if _, ok := got["io.modelcontextprotocol/related-task"]; ok {
				t.Errorf("the backend's related-task went on to the client: %s", meta)
			}
			var info mcp.Implementation
			if si, ok := got[mcp.MetaKeyServerInfo]; ok {
				if err := json.Unmarshal(si, &info); err != nil {
					t.Fatal(err)
				}
			}
			want := ""
			if pv >= "2026-07-28" {
				want = rg.g.opts.Name
			}
			if info.Name != want {
				t.Errorf("serverInfo in the result's _meta names %q, want %q: %s", info.Name, want, meta)
			}
		})
	}
}

// TestOwnMetaAllocs: dropping the reserved keys of a backend's _meta
// copies only the keys kept. A _meta go-sdk decoded is a map made for 64
// keys, and cloning it (then deleting) made about 5 KB of garbage a call
// for the serverInfo every go-sdk backend sends. Counted, not timed: the
// result's copy is the one allocation when no key is kept, and the kept
// keys' map (its header and table) adds two when some are.
func TestOwnMetaAllocs(t *testing.T) {
	decoded := func(keys ...string) mcp.Meta {
		m := make(mcp.Meta, 64) // as segmentio/encoding's decoder makes it
		for _, k := range keys {
			m[k] = map[string]any{"name": "backend"}
		}
		return m
	}
	for _, tc := range []struct {
		meta mcp.Meta
		kept []string
		max  float64
	}{
		{decoded(mcp.MetaKeyServerInfo), nil, 1},
		{decoded(mcp.MetaKeyServerInfo, "example.com/widget"), []string{"example.com/widget"}, 3},
	} {
		res := &mcp.CallToolResult{Meta: tc.meta}
		var out *mcp.CallToolResult
		if n := testing.AllocsPerRun(100, func() { out = ownMeta(res) }); n > tc.max {
			t.Errorf("ownMeta of a _meta with %d keys: %.0f allocations, want at most %.0f", len(tc.meta), n, tc.max)
		}
		if len(out.Meta) != len(tc.kept) {
			t.Errorf("ownMeta kept %v, want %v", out.Meta, tc.kept)
		}
		for _, k := range tc.kept {
			if _, ok := out.Meta[k]; !ok {
				t.Errorf("ownMeta dropped %q: %v", k, out.Meta)
			}
		}
		if _, ok := res.Meta[mcp.MetaKeyServerInfo]; !ok {
			t.Errorf("ownMeta changed the backend's result: %v", res.Meta)
		}
	}
}

// TestReservedMetaKey: a _meta key is MCP's when the second label of its
// prefix is "modelcontextprotocol" or "mcp".
func TestReservedMetaKey(t *testing.T) {
	for k, want := range map[string]bool{
		mcp.MetaKeyServerInfo:                  true,
		"io.modelcontextprotocol/related-task": true,
		"dev.mcp/x":                            true,
		"a.mcp.b/x":                            true,
		".mcp/x":                               true,
		"mcp/x":                                false,
		"a..mcp/x":                             false,
		"a.mcpx/x":                             false,
		"example.com/widget":                   false,
		"io.modelcontextprotocol":              false,
		"progressToken":                        false,
		"":                                     false,
	} {
		if got := reservedMetaKey(k); got != want {
			t.Errorf("reservedMetaKey(%q) = %v, want %v", k, got, want)
		}
	}
}
