package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"text/tabwriter"

	"github.com/rivo/uniseg"
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

// Columns line up by how wide their text shows on a terminal: a CJK
// character takes two columns, a combining accent none. text/tabwriter
// counted runes, so the description of a tool named in Japanese began
// five columns right of the others'.
func TestSearchTableAlignsWideNames(t *testing.T) {
	out := searchOutput{Query: "天気", Mode: "hybrid", Tools: []searchToolJSON{
		{Name: "intl__天気を取得", Description: "都市の天気", Score: 1, Confidence: 0.9},
		{Name: "intl__get_weather_jp", Description: "Weather.", Score: 0.8, Confidence: 0.5},
		{Name: "intl__cafe\u0301", Description: "Un café.", Score: 0.5, Confidence: 0.2},
		{Name: "intl__rocket_🚀", Description: "Launch.", Score: 0.4, Confidence: 0.1},
	}}
	var b bytes.Buffer
	printSearch(&b, out, false)
	lines := strings.Split(b.String(), "\n")
	col := -1
	for _, l := range lines[:5] {
		i := strings.Index(l, "DESCRIPTION")
		for _, d := range []string{"都市の天気", "Weather.", "Un café.", "Launch."} {
			if j := strings.Index(l, d); j >= 0 {
				i = j
			}
		}
		w := uniseg.StringWidth(l[:i])
		if col < 0 {
			col = w
		}
		if w != col {
			t.Errorf("description at column %d, want %d:\n%s", w, col, b.String())
		}
	}
	// An ASCII table is as text/tabwriter wrote it.
	var want bytes.Buffer
	tw := tabwriter.NewWriter(&want, 0, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "#\tSCORE\tKEYWORD\tVECTOR\tCONF\tTOOL\tDESCRIPTION\n1\t1.000\t0.000\t0.000\t0.90\tfs__read_file\tRead a file.\n2\t0.600\t0.000\t0.000\t0.70\tweb__fetch\tFetch a URL.\n")
	tw.Flush()
	b.Reset()
	printSearch(&b, searchOutput{Mode: "hybrid", Tools: []searchToolJSON{
		{Name: "fs__read_file", Description: "Read a file.", Score: 1, Confidence: 0.9},
		{Name: "web__fetch", Description: "Fetch a URL.", Score: 0.6, Confidence: 0.7},
	}}, false)
	if !strings.HasPrefix(b.String(), want.String()) {
		t.Errorf("ASCII table:\n%s\nwant:\n%s", b.String(), want.String())
	}
}
