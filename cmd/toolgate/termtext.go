package main

import (
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/toolgate/toolgate/internal/oneline"
)

// Text that a backend, a remote server or a client chose (a backend's
// stderr in an error, an HTTP error body, a tool's description, a name)
// reaches the terminal of whoever runs a command. A control character in
// it can move the cursor, rewrite what was printed or set the window's
// title (ESC ]0;…), a newline can forge a line, and a format character
// (a bidi override, a zero-width space) can make it read as something
// else. These print such characters as escapes instead.

// unsafeRune reports whether r must not reach a terminal as it is.
func unsafeRune(r rune) bool {
	return r == utf8.RuneError || unicode.IsControl(r) || unicode.Is(unicode.Cf, r)
}

// safeText is s, or s quoted with its escapes when it holds a control or
// format character or invalid UTF-8.
func safeText(s string) string {
	if !utf8.ValidString(s) || strings.ContainsFunc(s, unsafeRune) {
		return strconv.QuoteToGraphic(s)
	}
	return s
}

// escapeUnsafe is s with each control or format character but newline
// and tab, and each byte that is not UTF-8, written as its Go escape
// (\x1b, \u202e), unquoted: a message keeps its lines.
func escapeUnsafe(s string) string {
	unsafe := func(r rune) bool { return r != '\n' && r != '\t' && unsafeRune(r) }
	if utf8.ValidString(s) && !strings.ContainsFunc(s, unsafe) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && n <= 1:
			b.WriteString(`\x` + strconv.FormatUint(uint64(s[i])|0x100, 16)[1:])
		case unsafe(r):
			q := strconv.QuoteRuneToASCII(r)
			b.WriteString(q[1 : len(q)-1])
		default:
			b.WriteString(s[i : i+n])
		}
		i += n
	}
	return b.String()
}

// oneLine is oneline.Cut(s, n), with what must not reach a terminal
// escaped (see escapeUnsafe).
func oneLine(s string, n int) string { return escapeUnsafe(oneline.Cut(s, n)) }
