package search_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/toolgate/toolgate/index/catalog"
	"github.com/toolgate/toolgate/search"
)

var words = []string{"read", "write", "file", "list", "directory", "create", "delete", "update", "user", "issue",
	"repository", "commit", "branch", "query", "database", "table", "record", "message", "channel", "send",
	"search", "web", "page", "fetch", "image", "video", "calendar", "event", "email", "contact"}

// scaleCatalog is n tools whose descriptions mix the words above.
func scaleCatalog(n int) []catalog.Tool {
	tools := make([]catalog.Tool, n)
	for i := range tools {
		desc := ""
		for j := range 12 {
			desc += words[(i*7+j*j*13+i/len(words))%len(words)] + " "
		}
		tools[i] = catalog.Tool{Server: fmt.Sprintf("s%d", i%20), Name: fmt.Sprintf("tool_%d_%s", i, words[i%len(words)]), Description: desc}
	}
	return tools
}

// BenchmarkSearchScale: one query on a 10k-tool catalog, per mode (the
// query embedding is the hash stand-in, so this is the ranker's own cost).
func BenchmarkSearchScale(b *testing.B) {
	emb := &hashEmbedder{}
	tools := scaleCatalog(10000)
	ix := build(b, tools, emb)
	e := search.New(ix, emb, nil)
	defer e.Close()
	b.Run("keyword-all", func(b *testing.B) {
		for b.Loop() {
			ix.Keyword("create a calendar event and send an email", ix.Len(), "")
		}
	})
	b.Run("keyword-100", func(b *testing.B) {
		for b.Loop() {
			ix.Keyword("create a calendar event and send an email", 100, "")
		}
	})
	// A caller's scope (gateway/policy): a third of the servers, those
	// servers cut tool by tool, and 9 tools.
	thirdServers := map[string]bool{}
	for i := 0; i < 20; i += 3 {
		thirdServers[fmt.Sprintf("s%d", i)] = true // 7 of the 20
	}
	third := func(t catalog.Tool) bool { return thirdServers[t.Server] }
	nine := map[string]bool{}
	for i := 0; i < 9; i++ {
		nine[tools[i*1111].ID()] = true
	}
	for name, f := range map[string]*search.Filter{
		"third":       search.NewFilter(third),
		"third-cut":   search.NewFilter(func(t catalog.Tool) bool { return third(t) && len(t.Name)%4 != 0 }),
		"nine":        search.NewFilter(func(t catalog.Tool) bool { return nine[t.ID()] }),
		"all-allowed": search.NewFilter(func(catalog.Tool) bool { return true }),
	} {
		b.Run("hybrid-filter-"+name, func(b *testing.B) {
			for b.Loop() {
				if _, err := e.Search(context.Background(), search.Query{Text: "create a calendar event and send an email", Filter: f}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
	for _, mode := range search.Modes {
		b.Run(string(mode), func(b *testing.B) {
			for b.Loop() {
				if _, err := e.Search(context.Background(), search.Query{Text: "create a calendar event and send an email", Mode: mode}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
