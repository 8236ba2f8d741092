package main

import (
	"bytes"
	"errors"
	"testing"
)

func TestTerminalText(t *testing.T) {
	for _, tc := range []struct{ in, escaped, quoted, line string }{
		{"plain text, ünïcode ✓", "plain text, ünïcode ✓", "plain text, ünïcode ✓", "plain text, ünïcode ✓"},
		{"two\nlines\tand a tab", "two\nlines\tand a tab", `"two\nlines\tand a tab"`, "two lines and a tab"},
		{"\x1b[31mred\x1b[0m \x1b]0;title\a", `\x1b[31mred\x1b[0m \x1b]0;title\a`, `"\x1b[31mred\x1b[0m \x1b]0;title\a"`, `\x1b[31mred\x1b[0m \x1b]0;title\a`},
		{"abc\u202edef\u200b", `abc\u202edef\u200b`, `"abc\u202edef\u200b"`, `abc\u202edef\u200b`},
		{"bad \xff byte, C1 \u009b", `bad \xff byte, C1 \u009b`, `"bad \xff byte, C1 \u009b"`, `bad \xff byte, C1 \u009b`},
	} {
		if got := escapeUnsafe(tc.in); got != tc.escaped {
			t.Errorf("escapeUnsafe(%q) = %q, want %q", tc.in, got, tc.escaped)
		}
		if got := safeText(tc.in); got != tc.quoted {
			t.Errorf("safeText(%q) = %q, want %q", tc.in, got, tc.quoted)
		}
		if got := oneLine(tc.in, 100); got != tc.line {
			t.Errorf("oneLine(%q) = %q, want %q", tc.in, got, tc.line)
		}
	}
	if got := oneLine("\x1b[31m long", 4); got != `\x1b[3…` {
		t.Errorf("oneLine cut = %q", got)
	}
}

// The error a command ends with may quote a backend or a remote server: it
// keeps its lines, and its control characters are escaped.
func TestFailEscapes(t *testing.T) {
	var out bytes.Buffer
	g := &globals{}
	if code := g.fail(&out, errors.New("the server said: \x1b]0;pwned\a\nfix: log in again")); code != 1 {
		t.Errorf("exit %d", code)
	}
	if want := "toolgate: the server said: \\x1b]0;pwned\\a\nfix: log in again\n"; out.String() != want {
		t.Errorf("got %q, want %q", out.String(), want)
	}
}
