package live

import (
	"context"
	"maps"

	"github.com/toolgate/toolgate/gateway/config"
	"github.com/toolgate/toolgate/index/catalog"
	"github.com/toolgate/toolgate/search"
)

// searcher is what the visibility filter ranks with and looks tools up in:
// the search engine (the gateway's Searcher, one level down).
type searcher interface {
	Search(ctx context.Context, q search.Query) (search.Result, error)
	Tool(id string) (catalog.Tool, bool)
	IDs() []string
}

var _ searcher = (*search.Engine)(nil)

// visibility says whose tools search_tools shows and execute_tool runs. It
// is immutable: a change stores a new one, so a search sees one consistent
// set. The index may still hold tools of servers that are not shown (a
// reload removed them; the re-index that drops them takes a second or so):
// the set is switched before the pool stops such a server, so no search
// after the reload returns its tools, whatever the order in which the
// re-index and the searches run.
//
// Today a server is shown when the config in effect lists it. Other reasons
// to hide a server's tools (disabled at run time, outside a caller's
// profile) join as further sets consulted by shows and explained.
type visibility struct {
	configured map[string]bool // servers of the config in effect
	// removed are servers a reload removed and did not add back:
	// execute_tool on their tools goes on to the pool, which says the server
	// was removed from the config, rather than an "unknown tool" that does
	// not say why.
	removed map[string]bool
}

func newVisibility(servers []config.Server) *visibility {
	return &visibility{configured: serverNames(servers), removed: map[string]bool{}}
}

func serverNames(servers []config.Server) map[string]bool {
	m := map[string]bool{}
	for _, s := range servers {
		m[s.Name] = true
	}
	return m
}

// withServers is v after a reload to servers: the ones that leave the
// config are remembered as removed, the ones added (back) are shown.
func (v *visibility) withServers(servers []config.Server) *visibility {
	next := &visibility{configured: serverNames(servers), removed: maps.Clone(v.removed)}
	for name := range v.configured {
		if !next.configured[name] {
			next.removed[name] = true
		}
	}
	for name := range next.configured {
		delete(next.removed, name)
	}
	return next
}

// shows reports whether server's tools are served.
func (v *visibility) shows(server string) bool { return v.configured[server] }

// explained reports whether the pool can say why server's tools do not run.
func (v *visibility) explained(server string) bool { return v.removed[server] }

// keep returns the hits of servers shown (hits itself when that is all of
// them: the common case costs no allocation) and how many it left out.
func (v *visibility) keep(hits []search.Hit) (kept []search.Hit, hidden int) {
	for _, h := range hits {
		if !v.shows(h.Tool.Server) {
			hidden++
		}
	}
	if hidden == 0 {
		return hits, 0
	}
	kept = make([]search.Hit, 0, len(hits)-hidden)
	for _, h := range hits {
		if v.shows(h.Tool.Server) {
			kept = append(kept, h)
		}
	}
	return kept, hidden
}

// search ranks with s and leaves out the tools of servers not shown. The
// cost is one map lookup per hit, and a second, deeper ranking only while
// hidden tools are in the index and rank among the first.
func (v *visibility) search(ctx context.Context, s searcher, q search.Query) (search.Result, error) {
	res, err := s.Search(ctx, q)
	if err != nil {
		return res, err
	}
	hits, hidden := v.keep(res.Hits)
	if hidden == 0 {
		return res, nil
	}
	want := q.Limit
	if want <= 0 {
		want = search.DefaultLimit
	}
	if len(res.Hits) >= want {
		// More tools may rank behind the hidden ones: rank deep enough to
		// pass every hidden tool of the index.
		deeper := q
		deeper.Limit = want + v.hiddenIn(s.IDs())
		if r2, err := s.Search(ctx, deeper); err == nil {
			res = r2
			hits, _ = v.keep(r2.Hits)
		}
	}
	res.Hits = hits[:min(len(hits), want)]
	return res, nil
}

// hiddenIn counts the ids of servers not shown.
func (v *visibility) hiddenIn(ids []string) int {
	n := 0
	for _, id := range ids {
		if server, _, err := catalog.SplitID(id); err != nil || !v.shows(server) {
			n++
		}
	}
	return n
}

// tool looks id up in s when its server is shown; a tool of a server whose
// hiding the pool explains comes back bare (name only), indexed or not.
func (v *visibility) tool(s searcher, id string) (catalog.Tool, bool) {
	t, ok := s.Tool(id)
	if ok && v.shows(t.Server) {
		return t, true
	}
	if server, name, err := catalog.SplitID(id); err == nil && v.explained(server) {
		return catalog.Tool{Server: server, Name: name}, true
	}
	return catalog.Tool{}, false
}

// ids lists the ids of s whose servers are shown.
func (v *visibility) ids(s searcher) []string {
	all := s.IDs()
	out := all[:0:0]
	for _, id := range all {
		if server, _, err := catalog.SplitID(id); err == nil && v.shows(server) {
			out = append(out, id)
		}
	}
	return out
}
