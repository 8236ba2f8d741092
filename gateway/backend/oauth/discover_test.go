package oauth

import "testing"

// TestCovers: the resources a server's metadata may name for it (its URL,
// or a folder above it on its origin) and those that are another's.
func TestCovers(t *testing.T) {
	const srv = "https://mcp.example.com/v1/mcp"
	for resource, want := range map[string]bool{
		"https://mcp.example.com/v1/mcp":      true,
		"https://mcp.example.com/v1/mcp/":     true,
		"https://mcp.example.com/v1":          true,
		"https://mcp.example.com":             true,
		"https://mcp.example.com/":            true,
		"https://MCP.example.com":             true,
		"https://mcp.example.com/v1/mcp2":     false,
		"https://mcp.example.com/v1/m":        false,
		"https://mcp.example.com/other":       false,
		"https://mcp.example.com/v1/mcp/more": false,
		"http://mcp.example.com":              false,
		"https://mcp.example.com:8443":        false,
		"https://evil.example.com":            false,
		"https://mcp.example.com/?x=1":        false,
		"mcp.example.com":                     false,
	} {
		if got := covers(resource, srv); got != want {
			t.Errorf("covers(%q, %q) = %v, want %v", resource, srv, got, want)
		}
	}
}
