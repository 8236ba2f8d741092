package catalog

import (
	"testing"
	"unicode/utf8"
)

// TestCutBytes: a cut keeps a character whole or leaves it out, never a
// part of it (a cut that fell just after a two-byte character left its
// first byte, not valid UTF-8), and never goes over n bytes.
func TestCutBytes(t *testing.T) {
	for _, tc := range []struct {
		s    string
		n    int
		want string
	}{
		{"abc", 5, "abc"},
		{"abc", 2, "ab"},
		{"éa", 2, "é"},
		{"aé", 2, "a"},
		{"a€b", 3, "a"},
		{"a€b", 4, "a€"},
		{"€", 0, ""},
	} {
		got := CutBytes(tc.s, tc.n)
		if got != tc.want || !utf8.ValidString(got) || len(got) > tc.n && len(tc.s) > tc.n {
			t.Errorf("CutBytes(%q, %d) = %q, want %q", tc.s, tc.n, got, tc.want)
		}
	}
}
