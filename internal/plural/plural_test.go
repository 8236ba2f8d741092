package plural

import "testing"

func TestOf(t *testing.T) {
	for _, tc := range []struct {
		n    int
		noun string
		want string
	}{
		{1, "tool", "1 tool"},
		{0, "tool", "0 tools"},
		{2, "tool", "2 tools"},
		{1, "query", "1 query"},
		{3, "query", "3 queries"},
		{2, "key", "2 keys"},
		{2, "pass", "2 passes"},
		{1, "MCP server", "1 MCP server"},
		{5, "failed write", "5 failed writes"},
	} {
		if got := Of(tc.n, tc.noun); got != tc.want {
			t.Errorf("Of(%d, %q) = %q, want %q", tc.n, tc.noun, got, tc.want)
		}
	}
}
