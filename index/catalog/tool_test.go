package catalog

import "testing"

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
