package catalog

import (
	"encoding/json"
	"testing"
)

func TestSplitID(t *testing.T) {
	for _, tc := range []struct {
		id, server, tool string
		ok               bool
	}{
		{"memory__create_entities", "memory", "create_entities", true},
		{"weird__do__it", "weird", "do__it", true},
		{"a__b", "a", "b", true},
		{"my-server__tool_x", "my-server", "tool_x", true},
		{"nosep", "", "", false},
		{"__tool", "", "", false},
		{"server__", "", "", false},
		{"", "", "", false},
	} {
		s, tl, err := SplitID(tc.id)
		if (err == nil) != tc.ok || s != tc.server || tl != tc.tool {
			t.Errorf("SplitID(%q) = %q, %q, %v; want %q, %q, ok=%v", tc.id, s, tl, err, tc.server, tc.tool, tc.ok)
		}
	}
}

// A tool is read-only only when it declares readOnlyHint: true: one
// without annotations, or without the hint, is not (MCP's default).
func TestToolReadOnly(t *testing.T) {
	for _, tt := range []struct {
		annotations string
		want        bool
	}{
		{"", false},
		{`null`, false},
		{`{}`, false},
		{`{"title": "x"}`, false},
		{`{"readOnlyHint": false}`, false},
		{`{"readOnlyHint": "true"}`, false},
		{`[true]`, false},
		{`{"readOnlyHint": true}`, true},
		{`{"readOnlyHint": true, "destructiveHint": true}`, true},
	} {
		tool := Tool{Server: "s", Name: "t", Annotations: json.RawMessage(tt.annotations)}
		if got := tool.ReadOnly(); got != tt.want {
			t.Errorf("ReadOnly with annotations %q = %v, want %v", tt.annotations, got, tt.want)
		}
	}
}
