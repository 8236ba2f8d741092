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
	} {
		if got := Cut(tc.in, tc.n); got != tc.want {
			t.Errorf("Cut(%.20q, %d) = %q, want %q", tc.in, tc.n, got, tc.want)
		}
	}
}
