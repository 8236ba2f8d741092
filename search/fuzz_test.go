package search_test

import (
	"context"
	"errors"
	"math"
	"testing"

	"github.com/toolgate/toolgate/index"
	"github.com/toolgate/toolgate/index/catalog"
	"github.com/toolgate/toolgate/search"
)

// FuzzSearch asks arbitrary text of a small catalog whose names exercise
// the exact-name matcher (snake, kebab, camel, dots, non-ASCII, a name on
// two servers) in every mode: no panic, no error but the empty query's,
// at most the limit of hits, each tool once, exact hits first, and every
// figure a number in its range.
func FuzzSearch(f *testing.F) {
	for _, s := range []string{
		"list files in a directory", "read_file", "fs__read_file", "ReadFile", "read-file",
		"get.weather.forecast", "send an email, then read file and so on", "ünïcödé_tool",
		"a b c d e f g h i j k l m n o p", "  ", "\x00\xff", "__", "fs__", "read_file read_file",
		"Can you help me find a tool, which lists files, and that reads them? Or not.",
	} {
		f.Add(s, uint8(0), uint8(5))
	}
	tools := []catalog.Tool{
		{Server: "fs", Name: "read_file", Description: "Read a file from disk."},
		{Server: "fs", Name: "list-directory", Description: "List the entries of a directory. Returns names."},
		{Server: "web", Name: "getWeatherForecast", Description: "Get the weather forecast for a city."},
		{Server: "web", Name: "read_file", Description: "Read a file over HTTP."},
		{Server: "mail", Name: "send.email", Title: "Send email", Description: "Send an email to a recipient."},
		{Server: "misc", Name: "ünïcödé_tool", Description: "Does ünïcödé things."},
		{Server: "misc", Name: "x", Description: ""},
	}
	emb := &hashEmbedder{}
	ix, err := index.Build(context.Background(), tools, emb, nil)
	if err != nil {
		f.Fatal(err)
	}
	eng := search.New(ix, emb, nil)
	f.Cleanup(func() { eng.Close() })
	f.Fuzz(func(t *testing.T, text string, mode, limit uint8) {
		m := search.Modes[int(mode)%len(search.Modes)]
		lim := int(limit%12) + 1
		res, err := eng.Search(context.Background(), search.Query{Text: text, Mode: m, Limit: lim})
		if errors.Is(err, search.ErrEmptyQuery) {
			return
		}
		if err != nil {
			t.Fatalf("Search(%q, %s): %v", text, m, err)
		}
		if len(res.Hits) > lim {
			t.Fatalf("Search(%q, %s, limit %d): %d hits", text, m, lim, len(res.Hits))
		}
		if bad(res.Known, 0, 1) {
			t.Fatalf("Search(%q, %s): Known %v", text, m, res.Known)
		}
		seen := map[string]bool{}
		pastExact := false
		for i, h := range res.Hits {
			id := h.Tool.ID()
			if seen[id] {
				t.Fatalf("Search(%q, %s): %s twice", text, m, id)
			}
			seen[id] = true
			if h.Exact && pastExact {
				t.Fatalf("Search(%q, %s): exact hit %s at %d after an inexact one", text, m, id, i)
			}
			pastExact = pastExact || !h.Exact
			for name, v := range map[string]struct {
				x, lo, hi float64
			}{
				"Confidence": {h.Confidence, 0, 1}, "Coverage": {h.Coverage, 0, 1},
				"Keyword": {h.Keyword, 0, 1}, "Vector": {h.Vector, 0, 1},
				"Cosine": {h.Cosine, -1.0001, 1.0001}, "BM25": {h.BM25, 0, math.Inf(1)},
				"Score": {h.Score, math.Inf(-1), math.Inf(1)},
			} {
				if bad(v.x, v.lo, v.hi) {
					t.Fatalf("Search(%q, %s): hit %s %s = %v", text, m, id, name, v.x)
				}
			}
		}
	})
}

// bad says x is NaN or outside [lo, hi].
func bad(x, lo, hi float64) bool { return math.IsNaN(x) || x < lo || x > hi }
