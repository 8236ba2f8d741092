package search

import (
	"regexp"
	"strings"
)

// Query parts. A long query says several things ("Can you help me find a
// good pair of running shoes, designed for long-distance running, with
// good arch support?"), and its one vector is the average of all of them:
// its best cosine with the tool that fits is often no higher than a
// foreign query's with the nearest wrong tool. The confidence (see
// confidence.go) therefore reads the best cosine of the query or of any of
// its parts: the clauses between sentence punctuation, commas and a few
// conjunctions, each of at least partMinWords words, each embedded with the
// query prefix as a query of its own. The ranking reads the whole query,
// and the parts only as steps (steps.go: the best of the whole query's
// score and 0.7 times a part's; ranking by the best part alone lost 5.5
// points of vector Hit@1 on metatool).
var partSplit = regexp.MustCompile(`[.?!;,]\s+|\s+(?:and|but|so|or|which|that|because)\s+`)

const (
	// partMinWords: shorter fragments ("for example") say nothing a tool
	// could match on their own.
	partMinWords = 3
	// maxParts bounds the extra embedding of a pasted paragraph.
	maxParts = 8
)

// numbersJoined finds two numbers that "and" or "or" join ("add 2 and 3",
// "between 5 or 6"): one operand list, not two clauses ("then add 2" and
// "3" found the tool that adds observations).
var numbersJoined = regexp.MustCompile(`(\d)\s+(and|or)\s+([-+]?\d)`)

// markerComma is the comma after a step's marker ("After that, ").
var markerComma = regexp.MustCompile(`(?i)\b(then|after\s+that|afterwards|finally|lastly|also),\s+`)

// QueryParts returns the parts of a query that the confidence reads
// besides the whole query: none for a query of one clause.
func QueryParts(text string) []string {
	text = strings.TrimSpace(text)
	// The joined numbers' spaces become no-break ones, which partSplit's
	// \s does not match, and spaces again in the part.
	joined := numbersJoined.ReplaceAllString(text, "$1\u00a0$2\u00a0$3")
	// A step's marker stays with its step: "After that, send it" is one
	// part, "After that send it", not a fragment and "send it".
	joined = markerComma.ReplaceAllString(joined, "$1 ")
	var parts []string
	for _, p := range partSplit.Split(joined, -1) {
		p = strings.TrimSpace(strings.ReplaceAll(p, "\u00a0", " "))
		if p == text || len(strings.Fields(p)) < partMinWords {
			continue
		}
		dup := false
		for _, q := range parts {
			dup = dup || q == p
		}
		if !dup {
			parts = append(parts, p)
		}
		if len(parts) == maxParts {
			break
		}
	}
	return parts
}
