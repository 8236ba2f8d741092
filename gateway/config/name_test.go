package config

import (
	"strings"
	"testing"
)

// A server name outside ASCII is refused saying which characters are not
// ASCII, with a name that is, and where words of any language go. It
// read "use letters, digits", and é and 天 are letters.
func TestNameProblemBeyondASCII(t *testing.T) {
	for name, want := range map[string][]string{
		"café":      {`invalid server name "café": "é" is not ASCII`, `use ASCII letters (A-Z, a-z), digits, "_" and "-"`, `e.g. "cafe"`, `"description"`},
		"天気":        {`"天", "気" are not ASCII`, `"description"`},
		"straße-de": {`e.g. "strasse-de"`},
		"a b":       {`invalid server name "a b": use letters, digits, "_" and "-"`},
	} {
		got := NameProblem(name)
		for _, w := range want {
			if !strings.Contains(got, w) {
				t.Errorf("NameProblem(%q) = %s\nwant it to hold %s", name, got, w)
			}
		}
		if name == "天気" && strings.Contains(got, "e.g.") {
			t.Errorf("NameProblem(%q) = %s: no ASCII name to suggest", name, got)
		}
	}
}
