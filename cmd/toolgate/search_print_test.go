package main

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
)

// A tool found by one step of a request says which step, in the table and
// in --json.
func TestSearchPrintsClause(t *testing.T) {
	out := searchOutput{Query: "read notes.txt, then fetch the release page", Mode: "hybrid", Tools: []searchToolJSON{
		{Name: "fs__read_file", Description: "Read a file.", Score: 1, Confidence: 0.8},
		{Name: "web__fetch", Description: "Fetch a URL.", Score: 0.6, Confidence: 0.7, Clause: "then fetch the release page"},
	}}
	var b bytes.Buffer
	printSearch(&b, out, false)
	lines := strings.Split(b.String(), "\n")
	if len(lines) < 3 || strings.Contains(lines[1], "[for") || !strings.Contains(lines[2], `[for "then fetch the release page"] Fetch a URL.`) {
		t.Errorf("table:\n%s\nwant the clause on web__fetch's line only", b.String())
	}
	j, err := json.Marshal(out)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Count(string(j), `"clause":"then fetch the release page"`) != 1 || strings.Count(string(j), `"clause"`) != 1 {
		t.Errorf("--json %s: want the clause on web__fetch only", j)
	}
}
