package live

import (
	"encoding/json"
	"fmt"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolgate/toolgate/index/indextest"
)

// listings are n tools spread over servers as toolgate-bench's backends
// spread them, as the pool holds their listings.
func listings(n, servers int) map[string][]*mcp.Tool {
	out := map[string][]*mcp.Tool{}
	for i, t := range indextest.Catalog(n, indextest.Seed) {
		server := fmt.Sprintf("syn%03d", i%servers)
		out[server] = append(out[server], &mcp.Tool{Name: t.Server + "_" + t.Name, Description: t.Description, InputSchema: json.RawMessage(t.InputSchema)})
	}
	return out
}

// A build converts only the listings that changed since the last one:
// each converted every server's tools again (half of serve's CPU, at 100
// servers and 50,000 tools, when one server restarted). The catalog is
// Merge's all the same.
func TestCatalogOfKeepsConversions(t *testing.T) {
	l := &Loop{}
	live := listings(300, 3)
	first := l.catalogOf(live)
	if diff := cmp.Diff(Merge(nil, live, nil), mergeCatalog(nil, first, nil)); diff != "" {
		t.Fatalf("the catalog differs from Merge's (-want +got):\n%s", diff)
	}
	next := map[string][]*mcp.Tool{}
	for server, tools := range live {
		next[server] = slices.Clone(tools) // Pool.Tools hands out copies
	}
	next["syn001"] = append(slices.Clone(next["syn001"][1:]), &mcp.Tool{Name: "relisted", InputSchema: json.RawMessage(`{"type":"object"}`)})
	second := l.catalogOf(next)
	if &second["syn000"][0] != &first["syn000"][0] || &second["syn002"][0] != &first["syn002"][0] {
		t.Error("a listing that did not change was converted again")
	}
	if &second["syn001"][0] == &first["syn001"][0] {
		t.Error("the listing that changed kept its old conversion")
	}
	if diff := cmp.Diff(Merge(nil, next, nil), mergeCatalog(nil, second, nil)); diff != "" {
		t.Errorf("after one listing changed the catalog differs from Merge's (-want +got):\n%s", diff)
	}
	delete(next, "syn002")
	if third := l.catalogOf(next); len(third) != 2 || len(l.conv) != 2 {
		t.Errorf("a server gone: %d servers converted, %d kept", len(third), len(l.conv))
	}
}

// BenchmarkBuildCatalog is the catalog a build makes when one of 100
// servers (50,000 tools) listed anew: every listing converted (Merge), or
// only the new one (catalogOf).
func BenchmarkBuildCatalog(b *testing.B) {
	live := listings(50_000, 100)
	relist := func() map[string][]*mcp.Tool {
		next := map[string][]*mcp.Tool{}
		for server, tools := range live {
			next[server] = slices.Clone(tools)
		}
		next["syn007"] = slices.Clone(next["syn007"])
		next["syn007"][0] = &mcp.Tool{Name: "relisted", InputSchema: json.RawMessage(`{"type":"object"}`)}
		return next
	}
	b.Run("merge", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			Merge(nil, relist(), nil)
		}
	})
	b.Run("kept", func(b *testing.B) {
		l := &Loop{}
		l.catalogOf(live)
		b.ReportAllocs()
		for b.Loop() {
			mergeCatalog(nil, l.catalogOf(relist()), nil)
		}
	})
}
