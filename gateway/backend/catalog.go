package backend

import (
	"encoding/json"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolgate/toolgate/index/catalog"
)

// Catalog turns the backends' tool lists (Pool.Tools) into catalog tools,
// sorted by ID: the one place an MCP tool becomes a catalog.Tool. A tool
// whose input schema cannot be encoded keeps an empty schema (the backend
// still validates its arguments). Annotations are kept as go-sdk decoded
// them: the spec's five fields (readOnlyHint and idempotentHint always
// present, false when the backend left them out, which is their default),
// in the SDK's field order.
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
			var annotations json.RawMessage
			if t.Annotations != nil {
				if b, err := json.Marshal(t.Annotations); err == nil {
					annotations = b
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
				Annotations: annotations,
			})
		}
	}
	catalog.SortByID(out)
	return out
}
