package backend

import (
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestCatalogKeepsAnnotations: Catalog carries each backend tool's
// annotations (as JSON, go-sdk's encoding of them) and title into the
// catalog; a tool without annotations has none.
func TestCatalogKeepsAnnotations(t *testing.T) {
	f := false
	got := Catalog(map[string][]*mcp.Tool{"fs": {
		{Name: "read", Title: "Read a file", Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true, OpenWorldHint: &f}},
		{Name: "plain"},
	}})
	if len(got) != 2 {
		t.Fatalf("got %d tools", len(got))
	}
	plain, read := got[0], got[1]
	if want := `{"idempotentHint":false,"openWorldHint":false,"readOnlyHint":true}`; string(read.Annotations) != want {
		t.Errorf("fs__read annotations = %s, want %s", read.Annotations, want)
	}
	if read.Title != "Read a file" {
		t.Errorf("fs__read title = %q", read.Title)
	}
	if plain.Annotations != nil {
		t.Errorf("fs__plain annotations = %s, want none", plain.Annotations)
	}
}
