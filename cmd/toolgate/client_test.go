package main

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolgate/toolgate/gateway"
	"github.com/toolgate/toolgate/internal/mcptext"
)

// callSearch calls search_tools with query q and, if limit > 0, that limit;
// an error result is an error, and so is an answer that does not fit the
// outputSchema tools/list advertises for search_tools (checkedAnswer).
func callSearch(ctx context.Context, cs *mcp.ClientSession, q string, limit int) (*mcp.CallToolResult, error) {
	args := map[string]any{"query": q}
	if limit > 0 {
		args["limit"] = limit
	}
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: gateway.SearchToolName, Arguments: args})
	if err != nil {
		return nil, err
	}
	if res.IsError {
		return nil, fmt.Errorf("search_tools %q: %s", q, resultText(res))
	}
	if err := checkedAnswer(ctx, cs, res); err != nil {
		return nil, fmt.Errorf("search_tools %q: %w", q, err)
	}
	return res, nil
}

// outputSchemas are search_tools' output schemas as each session's
// tools/list advertised them, resolved: *mcp.ClientSession →
// *jsonschema.Resolved.
var outputSchemas sync.Map

// checkedAnswer checks res, an answer of search_tools that is not an
// error, as the TypeScript and Python SDKs' clients do: it carries
// structuredContent, which fits the outputSchema of search_tools in the
// session's tools/list (listed once per session), checked with
// jsonschema-go. So every search of the end-to-end tests, on the real
// ranking and servers, is an answer those SDKs take.
func checkedAnswer(ctx context.Context, cs *mcp.ClientSession, res *mcp.CallToolResult) error {
	rs, ok := outputSchemas.Load(cs)
	if !ok {
		lt, err := cs.ListTools(ctx, nil)
		if err != nil {
			return fmt.Errorf("tools/list: %w", err)
		}
		for _, tl := range lt.Tools {
			if tl.Name != gateway.SearchToolName {
				continue
			}
			b, _ := json.Marshal(tl.OutputSchema)
			var s jsonschema.Schema
			if err := json.Unmarshal(b, &s); err != nil {
				return fmt.Errorf("its outputSchema is not a JSON Schema: %w", err)
			}
			r, err := s.Resolve(nil)
			if err != nil {
				return fmt.Errorf("its outputSchema does not resolve: %w", err)
			}
			rs, _ = outputSchemas.LoadOrStore(cs, r)
		}
		if rs == nil {
			return fmt.Errorf("tools/list lists no search_tools with an outputSchema")
		}
	}
	if res.StructuredContent == nil {
		return fmt.Errorf("no structuredContent, which its outputSchema requires: %s", resultText(res))
	}
	if err := rs.(*jsonschema.Resolved).Validate(res.StructuredContent); err != nil {
		b, _ := json.Marshal(res.StructuredContent)
		return fmt.Errorf("structuredContent does not fit the advertised outputSchema: %w\n%s", err, b)
	}
	return nil
}

// resultText is the text content of a tool result ("" for none, or nil).
func resultText(r *mcp.CallToolResult) string { return mcptext.Text(r) }
