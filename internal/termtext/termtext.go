// Package termtext escapes, in text that a backend, a remote server or a
// client chose, what must not reach a terminal as it is: control
// characters (a terminal escape can move the cursor, rewrite what was
// printed or set the window's title; a newline can forge a line), format
// characters (a bidi override, a zero-width space) and bytes that are not
// UTF-8.
package termtext

import (
	"fmt"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf16"
	"unicode/utf8"
)

// Unsafe reports whether r must not reach a terminal as it is.
func Unsafe(r rune) bool {
	return r == utf8.RuneError || unicode.IsControl(r) || unicode.Is(unicode.Cf, r)
}

// Escape is s with each control or format character but newline and tab,
// and each byte that is not UTF-8, written as its Go escape (\x1b,
// \u202e), unquoted: a message keeps its lines.
func Escape(s string) string {
	return escape(s, func(b *strings.Builder, r rune) {
		q := strconv.QuoteRuneToASCII(r)
		b.WriteString(q[1 : len(q)-1])
	}, func(b *strings.Builder, c byte) {
		b.WriteString(`\x` + strconv.FormatUint(uint64(c)|0x100, 16)[1:])
	})
}

// EscapeJSON is Escape for a line of JSON (a record printed as stored):
// each such character written as JSON's escape (\u007f, a character past
// U+FFFF as its UTF-16 pair), each byte that is not UTF-8 as \ufffd, so
// the line stays JSON that decodes to the same text. Escape's \x7f and
// \U000e0001 are not JSON: a jq reading `audit tail --json` stopped at
// them.
func EscapeJSON(s string) string {
	return escape(s, func(b *strings.Builder, r rune) {
		if r1, r2 := utf16.EncodeRune(r); r1 != utf8.RuneError {
			fmt.Fprintf(b, `\u%04x\u%04x`, r1, r2)
			return
		}
		fmt.Fprintf(b, `\u%04x`, r)
	}, func(b *strings.Builder, _ byte) { b.WriteString(`\ufffd`) })
}

// escape writes s with each unsafe rune but newline and tab through char,
// each byte that is not UTF-8 through stray.
func escape(s string, char func(*strings.Builder, rune), stray func(*strings.Builder, byte)) string {
	unsafe := func(r rune) bool { return r != '\n' && r != '\t' && Unsafe(r) }
	if utf8.ValidString(s) && !strings.ContainsFunc(s, unsafe) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && n <= 1:
			stray(&b, s[i])
		case unsafe(r):
			char(&b, r)
		default:
			b.WriteString(s[i : i+n])
		}
		i += n
	}
	return b.String()
}

// Value returns a copy of a decoded JSON value (maps, slices, strings,
// numbers …) with each string in it, an object's keys among them, as
// Escape writes it: a backend's log message holds its words in such a
// value, which a client may print. Its shape and other values are kept.
func Value(v any) any {
	switch x := v.(type) {
	case string:
		return Escape(x)
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, val := range x {
			out[Escape(k)] = Value(val)
		}
		return out
	case []any:
		out := make([]any, len(x))
		for i, val := range x {
			out[i] = Value(val)
		}
		return out
	default:
		return v
	}
}
