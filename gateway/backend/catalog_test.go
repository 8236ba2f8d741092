package backend

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolgate/toolgate/index/catalog"
)

func TestCatalog(t *testing.T) {
	got := Catalog(map[string][]*mcp.Tool{
		"b": {{Name: "z", Description: "last", InputSchema: map[string]any{"type": "object"}}},
		"a": {
			{Name: "y", Annotations: &mcp.ToolAnnotations{Title: "From annotations"}},
			{Name: "x", Title: "Own title", Annotations: &mcp.ToolAnnotations{Title: "ignored"}},
			nil,
			{Name: ""}, // nameless: skipped
		},
	})
	want := []catalog.Tool{
		{Server: "a", Name: "x", Title: "Own title", Annotations: []byte(`{"idempotentHint":false,"readOnlyHint":false,"title":"ignored"}`)},
		{Server: "a", Name: "y", Title: "From annotations", Annotations: []byte(`{"idempotentHint":false,"readOnlyHint":false,"title":"From annotations"}`)},
		{Server: "b", Name: "z", Description: "last", InputSchema: []byte(`{"type":"object"}`)},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Catalog (-want +got):\n%s", diff)
	}
}
