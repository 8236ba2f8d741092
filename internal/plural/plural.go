// Package plural writes counts of things: "1 tool", "2 tools". The
// gateway's answers, the command line and the status said "1 tools" and
// "1 restarts" wherever a count was written with "%d tools".
package plural

import (
	"strconv"
	"strings"
)

// Of is n and noun, the noun plural unless n is 1: "1 tool", "0 tools",
// "3 queries", "1 MCP server".
func Of(n int, noun string) string { return strconv.Itoa(n) + " " + Noun(n, noun) }

// Noun is noun for n things: as given for one, else its plural ("tool"
// → "tools", "query" → "queries", "pass" → "passes"). Only the last word
// changes ("failed write" → "failed writes").
func Noun(n int, noun string) string {
	if n == 1 || noun == "" {
		return noun
	}
	switch {
	case strings.HasSuffix(noun, "y") && len(noun) > 1 && !strings.ContainsRune("aeiou", rune(noun[len(noun)-2])):
		return noun[:len(noun)-1] + "ies"
	case strings.HasSuffix(noun, "s"), strings.HasSuffix(noun, "x"), strings.HasSuffix(noun, "ch"), strings.HasSuffix(noun, "sh"):
		return noun + "es"
	}
	return noun + "s"
}

// Pick is one for a single thing, many for n of them: the words that are
// no noun's plural ("it"/"them", "lists"/"list").
func Pick(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}
