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
