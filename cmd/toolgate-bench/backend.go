package main

import (
	"context"
	"encoding/json"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/spf13/cobra"

	"github.com/toolgate/toolgate/index/indextest"
)

// newBackendCmd is the hidden `backend` command: a stdio MCP server with a
// no-op tool plus a shard of a synthetic catalog. The bench's gateways and
// direct calls run this binary as their backends.
func newBackendCmd() *cobra.Command {
	var n, shard, shards int
	cmd := &cobra.Command{
		Use:    "backend",
		Short:  "A stdio MCP server for toolgate-bench: a no-op tool plus a shard of a synthetic catalog",
		Hidden: true,
		Args:   cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ok := func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
				return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "ok"}}}, nil
			}
			srv := mcp.NewServer(&mcp.Implementation{Name: "toolgate-bench-backend", Version: "bench"}, nil)
			srv.AddTool(&mcp.Tool{Name: "noop", Description: "Do nothing and answer at once.", InputSchema: json.RawMessage(`{"type":"object"}`)}, ok)
			if n > 0 {
				for i, t := range indextest.Catalog(n, indextest.Seed) {
					if i%shards != shard {
						continue
					}
					// Synthetic servers become a name prefix: one backend
					// serves many of them, and tool names stay unique.
					srv.AddTool(&mcp.Tool{Name: t.Server + "_" + t.Name, Description: t.Description, InputSchema: t.InputSchema}, ok)
				}
			}
			return srv.Run(cmd.Context(), &mcp.StdioTransport{})
		},
	}
	cmd.Flags().IntVar(&n, "tools", 0, "synthetic catalog size")
	cmd.Flags().IntVar(&shard, "shard", 0, "serve tools i with i % shards == shard")
	cmd.Flags().IntVar(&shards, "shards", 1, "number of shards")
	return cmd
}
