package backend

import (
	"encoding/json"
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

// TestCatalogKeepsOutputSchema: Catalog carries an output schema that is a
// JSON object, as listed (the list stash's raw JSON) or as go-sdk decoded
// it; one that is not an object is left out, as none.
func TestCatalogKeepsOutputSchema(t *testing.T) {
	got := Catalog(map[string][]*mcp.Tool{"w": {
		{Name: "a", OutputSchema: json.RawMessage(`{"type":"object","properties":{"n":{"type":"integer"}}}`)},
		{Name: "b", OutputSchema: map[string]any{"type": "object"}},
		{Name: "c", OutputSchema: json.RawMessage(`true`)},
		{Name: "d"},
	}})
	want := []string{`{"type":"object","properties":{"n":{"type":"integer"}}}`, `{"type":"object"}`, ``, ``}
	for i, tl := range got {
		if string(tl.OutputSchema) != want[i] {
			t.Errorf("%s: output schema %s, want %q", tl.ID(), tl.OutputSchema, want[i])
		}
	}
}
