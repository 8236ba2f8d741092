package main

import (
	"encoding/json"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/toolgate/toolgate/index/catalog"
	"github.com/toolgate/toolgate/internal/oneline"
	"github.com/toolgate/toolgate/internal/termtext"
)

// Text that a backend, a remote server or a client chose (a backend's
// stderr in an error, an HTTP error body, a tool's description, a name)
// reaches the terminal of whoever runs a command. A control character in
// it can move the cursor, rewrite what was printed or set the window's
// title (ESC ]0;…), a newline can forge a line, and a format character
// (a bidi override, a zero-width space) can make it read as something
// else. These print such characters as escapes instead.

// unsafeRune reports whether r must not reach a terminal as it is.
var unsafeRune = termtext.Unsafe

// safeText is s, or s quoted with its escapes when it holds a control or
// format character or invalid UTF-8.
func safeText(s string) string {
	if !utf8.ValidString(s) || strings.ContainsFunc(s, unsafeRune) {
		return strconv.QuoteToGraphic(s)
	}
	return s
}

// nameText is a name a backend chose (a tool's ID) as a list prints it:
// as it is when it is of MCP's recommended characters alone
// (catalog.PlainName), else quoted with its escapes, so that a name with a
// space, a ", " or a ": " reads as one name, and one with a control
// character reaches no terminal as it is.
func nameText(s string) string {
	if catalog.PlainName(s) {
		return s
	}
	return strconv.QuoteToGraphic(s)
}

// escapeUnsafe is s with what must not reach a terminal escaped, its
// lines kept (termtext.Escape).
var escapeUnsafe = termtext.Escape

// escapeLine is escapeUnsafe for a line that may be JSON (a log line of
// --log-format json, an audit record as stored): such a line stays JSON
// that reads the same (termtext.EscapeJSON).
func escapeLine(s string) string {
	if strings.HasPrefix(s, "{") && json.Valid([]byte(s)) {
		return termtext.EscapeJSON(s)
	}
	return escapeUnsafe(s)
}

// oneLine is oneline.Cut(s, n), with what must not reach a terminal
// escaped (see escapeUnsafe).
func oneLine(s string, n int) string { return escapeUnsafe(oneline.Cut(s, n)) }
