package gateway

import (
	"encoding/json"

	"github.com/toolgate/toolgate/index/catalog"
)

// argCounts says how many of server's tools take each argument (a property
// of their input schema), for the order of search_tools' compact argument
// line (paramSummary). It is counted on first use after each Refresh, over
// the catalog then searched, and kept until the next: a few milliseconds
// for a thousand tools, once.
func (g *Gateway) argCounts(server string) map[string]int {
	if v, ok := g.args.Load(server); ok {
		return v.(map[string]int)
	}
	counts := map[string]int{}
	if g.searcher != nil {
		for _, id := range g.searcher.IDs() {
			if s, _, err := catalog.SplitID(id); err != nil || s != server {
				continue
			}
			t, ok := g.searcher.Tool(id)
			if !ok {
				continue
			}
			var schema struct {
				Properties map[string]json.RawMessage `json:"properties"`
			}
			if json.Unmarshal(t.InputSchema, &schema) != nil {
				continue
			}
			for name := range schema.Properties {
				counts[name]++
			}
		}
	}
	v, _ := g.args.LoadOrStore(server, counts)
	return v.(map[string]int)
}
