package config

import (
	"strings"
	"testing"
)

// TestServerLanguage: "language" takes a code of the languages the
// keyword index stems (en as English); another value is an error naming
// the server, the field and the codes. It was an unknown key.
func TestServerLanguage(t *testing.T) {
	f, err := Parse([]byte(`{"mcpServers": {"de": {"command": "x", "language": "de"}, "en": {"command": "x", "language": "en"}}}`), "", nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := f.MCPServers["de"].Language; got != "de" {
		t.Errorf("language = %q", got)
	}
	for _, tc := range []struct{ in, want string }{
		{`{"mcpServers": {"a": {"command": "x", "language": "german"}}}`, `mcpServers["a"].language: unknown language "german": write "de" (German), one of the codes da (Danish), de (German), en (English), es (Spanish), fi (Finnish), fr (French)`},
		{`{"mcpServers": {"a": {"command": "x", "language": "DE"}}}`, `unknown language "DE": write "de" (German), one of the codes`},
		{`{"mcpServers": {"a": {"command": "x", "language": "fr-CA"}}}`, `unknown language "fr-CA": write "fr" (French: one stemmer for every region), one of the codes`},
		{`{"mcpServers": {"a": {"command": "x", "language": "ja"}}}`, `need no "language": leave it out`},
		{`{"mcpServers": {"a": {"command": "x", "language": "klingon"}}}`, `leave it out for English`},
		{`{"mcpServers": {"a": {"command": "x", "language": 7}}}`, `mcpServers["a"].language: got a number, want a string`},
	} {
		_, err := Parse([]byte(tc.in), "", nil)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v, want %q", tc.in, err, tc.want)
		}
	}
	if got := (Server{Language: "de"}).Changes(Server{Language: "fr"}); len(got) != 1 || got[0] != "language" {
		t.Errorf("Changes = %v, want [language]", got)
	}
}
