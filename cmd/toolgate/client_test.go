package main

import (
	"context"
	"fmt"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolgate/toolgate/gateway"
	"github.com/toolgate/toolgate/internal/mcptext"
)

// callSearch calls search_tools with query q and, if limit > 0, that limit;
// an error result is an error.
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
	return res, nil
}

// resultText is the text content of a tool result ("" for none, or nil).
func resultText(r *mcp.CallToolResult) string { return mcptext.Text(r) }
