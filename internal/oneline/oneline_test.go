package oneline

import (
	"strings"
	"testing"
)

func TestCut(t *testing.T) {
	for _, tc := range []struct {
		in   string
		n    int
		want string
	}{
		{"short", 10, "short"},
		{"  two\n lines\tand  spaces ", 100, "two lines and spaces"},
		{"exactly10!", 10, "exactly10!"},
		{"eleven runes", 11, "eleven run…"},
		{"ünïcödé text", 5, "ünïc…"},
		{strings.Repeat("x", 1<<20), 8, "xxxxxxx…"},
		{"abc", 1, "…"},
		// Never inside a user-perceived character: an emoji of several
		// (a family joined by ZWJ, a flag), a letter and its combining
		// accent (café decomposed), a Devanagari syllable.
		{"ab\U0001F468\u200D\U0001F469\u200D\U0001F467cd", 4, "ab…"},
		{"go \U0001F1E9\U0001F1EA!", 5, "go …"},
		{"cafe\u0301 noir", 5, "caf…"},
		{"\u0928\u092E\u0938\u094D\u0924\u0947 x", 4, "\u0928\u092E…"},
		{"\U0001F468\u200D\U0001F469\u200D\U0001F467", 3, "…"},
	} {
		if got := Cut(tc.in, tc.n); got != tc.want {
			t.Errorf("Cut(%.20q, %d) = %q, want %q", tc.in, tc.n, got, tc.want)
		}
	}
}
