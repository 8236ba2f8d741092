// Package oneline puts a text on one line of bounded length: what a
// message quotes of a backend's error, a tool's description, or what a
// caller sent (a query, a tool name), which may be any size.
package oneline

import "strings"

// Cut flattens the whitespace of s (newlines, tabs, runs of spaces) to
// single spaces and cuts it to at most n runes, the last of them "…" when
// it was cut.
func Cut(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	if r := []rune(s); len(r) > n {
		return string(r[:max(n-1, 0)]) + "…"
	}
	return s
}

// EchoRunes bounds what a message says back of what a caller sent (a
// query, a tool or server name): the caller has it, and may have sent
// megabytes.
const EchoRunes = 120

// Echo is Cut(s, EchoRunes).
func Echo(s string) string { return Cut(s, EchoRunes) }
