package config

import (
	"strings"
	"testing"
)

// TestServerDescription: "description" is read as written (no ${VAR}
// expansion), and one that is not a string, too long or holds control
// characters is an error naming the server and the field.
func TestServerDescription(t *testing.T) {
	f, err := Parse([]byte(`{"mcpServers": {"gh": {"command": "x", "description": "issues and PRs of ${ORG}\n on GitHub"}}}`), "", func(string) (string, bool) { return "acme", true })
	if err != nil {
		t.Fatal(err)
	}
	if got := f.MCPServers["gh"].Description; got != "issues and PRs of ${ORG}\n on GitHub" {
		t.Errorf("description = %q", got)
	}
	for _, tc := range []struct{ in, want string }{
		{`{"mcpServers": {"a": {"command": "x", "description": 3}}}`, `mcpServers["a"].description: got a number, want a string`},
		{`{"mcpServers": {"a": {"command": "x", "description": "` + strings.Repeat("é", MaxDescription+1) + `"}}}`, `mcpServers["a"].description: is 201 characters long: say in a few words (at most 200 characters)`},
		{`{"mcpServers": {"a": {"command": "x", "description": "bell\u0007"}}}`, `mcpServers["a"].description: contains a control character`},
		{`{"mcpServers": {"a": {"command": "x", "descripton": "typo"}}}`, `mcpServers["a"].descripton: unknown key: did you mean "description"?`},
	} {
		_, err := Parse([]byte(tc.in), "", nil)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v, want %q", tc.in, err, tc.want)
		}
	}
	if got := (Server{Description: "a"}).Changes(Server{Description: "b"}); len(got) != 1 || got[0] != "description" {
		t.Errorf("Changes = %v, want [description]", got)
	}
}
