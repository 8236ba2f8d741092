package gateway

import (
	"encoding/json"
	"slices"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/toolgate/toolgate/index/catalog"
)

// Catalog turns the backends' tool lists into catalog tools, sorted by ID.
// A tool whose input schema cannot be encoded keeps an empty schema (the
// backend still validates its arguments).
func Catalog(byServer map[string][]*mcp.Tool) []catalog.Tool {
	var out []catalog.Tool
	for server, tools := range byServer {
		for _, t := range tools {
			if t == nil || t.Name == "" {
				continue
			}
			var schema json.RawMessage
			if t.InputSchema != nil {
				if b, err := json.Marshal(t.InputSchema); err == nil && string(b) != "null" {
					schema = b
				}
			}
			title := t.Title
			if title == "" && t.Annotations != nil {
				title = t.Annotations.Title
			}
			out = append(out, catalog.Tool{
				Server:      server,
				Name:        t.Name,
				Title:       title,
				Description: t.Description,
				InputSchema: schema,
			})
		}
	}
	slices.SortFunc(out, func(a, b catalog.Tool) int { return strings.Compare(a.ID(), b.ID()) })
	return out
}

// Merge is the catalog to index when some backends' live lists are not
// known yet (warm start, a backend down or still connecting): servers in
// live take their live tools; configured servers missing from live keep
// their tools from prev, so results stay stable across restarts; servers
// that are no longer configured are dropped.
func Merge(prev []catalog.Tool, live map[string][]*mcp.Tool, configured []string) []catalog.Tool {
	out := Catalog(live)
	for _, t := range prev {
		if _, ok := live[t.Server]; !ok && slices.Contains(configured, t.Server) {
			out = append(out, t)
		}
	}
	slices.SortFunc(out, func(a, b catalog.Tool) int { return strings.Compare(a.ID(), b.ID()) })
	return out
}
