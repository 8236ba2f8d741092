// Package termtext escapes, in text that a backend, a remote server or a
// client chose, what must not reach a terminal as it is: control
// characters (a terminal escape can move the cursor, rewrite what was
// printed or set the window's title; a newline can forge a line), format
// characters (a bidi override, a zero-width space) and bytes that are not
// UTF-8.
package termtext

import (
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Unsafe reports whether r must not reach a terminal as it is.
func Unsafe(r rune) bool {
	return r == utf8.RuneError || unicode.IsControl(r) || unicode.Is(unicode.Cf, r)
}

// Escape is s with each control or format character but newline and tab,
// and each byte that is not UTF-8, written as its Go escape (\x1b,
// \u202e), unquoted: a message keeps its lines. Inside a JSON string the
// escapes of characters (not of stray bytes, \xff) are JSON's too.
func Escape(s string) string {
	unsafe := func(r rune) bool { return r != '\n' && r != '\t' && Unsafe(r) }
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
