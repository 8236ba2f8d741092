package gateway

import (
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestBoundCountsHTMLAsWritten: a structuredContent holding markup (a web
// page's HTML, a template) counts its <, > and & as the one byte each
// they are, as its text does. Counted as Go's HTML-safe JSON writes them,
// \u003c, six bytes each, a 60 KB page came trimmed under the default
// bound of 100,000 with a note that hundreds of KB were left out, and a
// bound of 16777216 trimmed a result well within the 16 MiB message it
// came in.
func TestBoundCountsHTMLAsWritten(t *testing.T) {
	page := strings.Repeat("<p>a &amp; b</p>\n", 3_500) // 59,500 bytes, 17,500 of them <, > or &
	res := &mcp.CallToolResult{StructuredContent: map[string]any{"html": page}}
	if _, tr, ok := trimResult(res, DefaultMaxResultBytes, "web__fetch", nil); ok {
		t.Errorf("a %d-byte page in structuredContent was trimmed under a bound of %d: %+v", len(page), DefaultMaxResultBytes, tr)
	}
	// Over the bound, the note counts it as written too.
	_, tr, ok := trimResult(res, 50_000, "web__fetch", nil)
	if want := len(`{"html":""}`) + len(page) + 3_500; !ok || tr.Bytes != want { // + its "\n" written \n
		t.Errorf("trimmed %v, counted %d bytes, want %d", ok, tr.Bytes, want)
	}
	// The JSON an older client gets as text reads as the page does.
	if raw := string(structuredJSON(res.StructuredContent)); !strings.HasPrefix(raw, `{"html":"<p>a &amp; b</p>\n`) {
		t.Errorf("structuredContent's JSON text starts %q", raw[:40])
	}
}
