package backend

import (
	"bytes"
	"encoding/json"
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

// A schema kept as sent becomes what json.Marshal makes of it, and is
// shared rather than copied when it already is that.
func TestCatalogRawSchemas(t *testing.T) {
	for _, tc := range []struct {
		name, raw string
		shared    bool
	}{
		{"compact", `{"type":"object","properties":{"q":{"type":"string","description":"a b"}}}`, true},
		{"spaced", "{ \"type\" : \"object\",\n \"properties\": {} }", false},
		{"html", `{"type":"object","description":"a <b> & c"}`, false},
		{"line separator", "{\"type\":\"object\",\"description\":\"a\u2028b\"}", false},
		{"null", `null`, false},
		{"invalid", `{"type":`, false},
		// Not a JSON object (a server's bug: MCP wants an object schema
		// of type "object"): left out, so the tool reads as one without
		// a schema, {"type":"object"}, and a search_tools answer that
		// lists it stays valid against the output schema that says
		// "inputSchema" is an object (the TypeScript and Python SDKs
		// refused the whole answer).
		{"boolean", `true`, false},
		{"array", `[{"type":"object"}]`, false},
		{"string", `"object"`, false},
		{"number", `5`, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			raw := json.RawMessage(tc.raw)
			got := Catalog(map[string][]*mcp.Tool{"s": {{Name: "t", InputSchema: raw}}})[0].InputSchema
			want, err := json.Marshal(raw)
			if err != nil || want[0] != '{' {
				want = nil
			}
			if !bytes.Equal(got, want) {
				t.Fatalf("schema %q, want json.Marshal's %q", got, want)
			}
			if shared := len(got) > 0 && &got[0] == &raw[0]; shared != tc.shared {
				t.Fatalf("shared with the listing: %v, want %v", shared, tc.shared)
			}
		})
	}
}
