package gateway

import (
	"slices"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolgate/toolgate/index"
)

// CatalogWithPersisted is Catalog(live) plus, for every server that has not
// listed its tools in this run and for which keep reports true (a lazy server
// that has not started yet), its tools from a persisted catalog (the previous
// index's Tools). So search_tools finds a lazy server's tools before its
// first execute_tool starts it. Sorted by ID like Catalog.
func CatalogWithPersisted(live map[string][]*mcp.Tool, persisted []index.Tool, keep func(server string) bool) []index.Tool {
	out := Catalog(live)
	added := false
	for _, t := range persisted {
		if _, listed := live[t.Server]; listed || keep == nil || !keep(t.Server) {
			continue
		}
		out = append(out, t)
		added = true
	}
	if added {
		slices.SortFunc(out, func(a, b index.Tool) int { return strings.Compare(a.ID(), b.ID()) })
	}
	return out
}
