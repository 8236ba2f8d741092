// Package oneline puts a text on one line of bounded length: what a
// message quotes of a backend's error, a tool's description, or what a
// caller sent (a query, a tool name), which may be any size.
package oneline

import (
	"strings"
	"unicode/utf8"

	"github.com/rivo/uniseg"
)

// Cut flattens the whitespace of s (newlines, tabs, runs of spaces) to
// single spaces and cuts it to at most n runes, the last of them "…" when
// it was cut. The cut falls between two user-perceived characters
// (Unicode grapheme clusters), never inside one: a family emoji joined by
// ZWJ, a flag, a letter and its combining accent lose all their runes or
// none (cut at a rune, 👨‍👩‍👧 showed as 👨 and a ZWJ, 🇩🇪 as 🇩).
func Cut(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	keep, runes := 0, 0 // bytes and runes of the whole clusters that fit in n-1 runes
	state := -1
	for rest := s; rest != ""; {
		var cluster string
		cluster, rest, _, state = uniseg.FirstGraphemeClusterInString(rest, state)
		runes += utf8.RuneCountInString(cluster)
		if runes > n-1 {
			break
		}
		keep += len(cluster)
	}
	return s[:keep] + "…"
}

// EchoRunes bounds what a message says back of what a caller sent (a
// query, a tool or server name): the caller has it, and may have sent
// megabytes.
const EchoRunes = 120

// Echo is Cut(s, EchoRunes).
func Echo(s string) string { return Cut(s, EchoRunes) }

// Clip cuts s to at most n bytes and "…" when it is longer, at the start
// of a character: a cut at a byte count fell inside a character of text
// outside ASCII (a Japanese server's stderr) and left a broken sequence.
func Clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "…"
}
