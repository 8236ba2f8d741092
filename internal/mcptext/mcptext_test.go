package mcptext

import (
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

func TestText(t *testing.T) {
	r := &mcp.CallToolResult{Content: []mcp.Content{
		&mcp.TextContent{Text: "a"}, &mcp.ImageContent{MIMEType: "image/png"}, &mcp.TextContent{Text: "b"},
	}}
	if got := Text(r); got != "ab" {
		t.Errorf("Text = %q, want the text blocks joined", got)
	}
	if got := Text(nil); got != "" {
		t.Errorf("Text(nil) = %q", got)
	}
}
