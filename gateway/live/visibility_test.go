package live

import (
	"context"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/toolgate/toolgate/gateway/config"
	"github.com/toolgate/toolgate/index/catalog"
	"github.com/toolgate/toolgate/search"
)

// rankedSearcher ranks a fixed list of tool IDs in order, ignoring the
// query text, and records the Limit of each search.
type rankedSearcher struct {
	ids      []string
	searches []int
}

var _ searcher = (*rankedSearcher)(nil)

func (r *rankedSearcher) Search(_ context.Context, q search.Query) (search.Result, error) {
	r.searches = append(r.searches, q.Limit)
	var hits []search.Hit
	for _, id := range r.ids {
		if len(hits) == q.Limit {
			break
		}
		t, _ := r.Tool(id)
		if q.Server == "" || t.Server == q.Server {
			hits = append(hits, search.Hit{Tool: t})
		}
	}
	return search.Result{Hits: hits, Mode: search.ModeBM25}, nil
}

func (r *rankedSearcher) Tool(id string) (catalog.Tool, bool) {
	if !slices.Contains(r.ids, id) {
		return catalog.Tool{}, false
	}
	server, name, _ := catalog.SplitID(id)
	return catalog.Tool{Server: server, Name: name, Description: "tool " + id}, true
}

func (r *rankedSearcher) IDs() []string { return slices.Clone(r.ids) }

func serverList(names ...string) []config.Server {
	var out []config.Server
	for _, n := range names {
		out = append(out, config.Server{Name: n})
	}
	return out
}

func TestVisibility(t *testing.T) {
	ctx := context.Background()
	// The index still ranks gone's tools first (not re-indexed yet).
	inner := &rankedSearcher{ids: []string{"gone__a", "gone__b", "keep__a", "gone__c", "keep__b", "keep__c"}}
	vis := newVisibility(serverList("keep", "gone"))

	res, err := vis.search(ctx, inner, search.Query{Text: "x", Limit: 2})
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"gone__a", "gone__b"}, hitIDs(res)); diff != "" {
		t.Errorf("before the reload (-want +got):\n%s", diff)
	}

	vis = vis.withServers(serverList("keep", "new"))
	inner.searches = nil
	res, err = vis.search(ctx, inner, search.Query{Text: "x", Limit: 2})
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"keep__a", "keep__b"}, hitIDs(res)); diff != "" {
		t.Errorf("after removing gone: the limit is filled from deeper hits (-want +got):\n%s", diff)
	}
	// The deeper ranking passes every hidden tool: the limit plus gone's 3.
	if diff := cmp.Diff([]int{2, 2 + 3}, inner.searches); diff != "" {
		t.Errorf("searches (limits) (-want +got):\n%s", diff)
	}

	// Fewer hits than the limit: nothing more to find, no second search.
	inner.searches = nil
	res, _ = vis.search(ctx, inner, search.Query{Text: "x", Limit: 10})
	if diff := cmp.Diff([]string{"keep__a", "keep__b", "keep__c"}, hitIDs(res)); diff != "" {
		t.Errorf("limit 10 (-want +got):\n%s", diff)
	}
	if len(inner.searches) != 1 {
		t.Errorf("%d searches for a short result, want 1", len(inner.searches))
	}

	if got := vis.ids(inner); !slices.Equal(got, []string{"keep__a", "keep__b", "keep__c"}) {
		t.Errorf("ids() = %v", got)
	}
	if tl, ok := vis.tool(inner, "keep__a"); !ok || tl.Description != "tool keep__a" {
		t.Errorf("tool(keep__a) = %+v, %v", tl, ok)
	}
	// A removed server's tool is passed on bare (the pool says why it
	// cannot run), whether or not the index still holds it.
	for _, id := range []string{"gone__a", "gone__never_indexed"} {
		tl, ok := vis.tool(inner, id)
		if !ok || tl.Server != "gone" || tl.Description != "" || len(tl.InputSchema) != 0 {
			t.Errorf("tool(%s) = %+v, %v; want a bare tool of server gone", id, tl, ok)
		}
	}
	if _, ok := vis.tool(inner, "other__a"); ok {
		t.Error("tool(other__a) found: other was never configured")
	}

	// Added back: its tools are served again, and no longer "removed".
	vis = vis.withServers(serverList("keep", "gone"))
	if res, _ := vis.search(ctx, inner, search.Query{Text: "x", Limit: 1}); !slices.Equal(hitIDs(res), []string{"gone__a"}) {
		t.Errorf("after adding gone back: %v", hitIDs(res))
	}
	if _, ok := vis.tool(inner, "gone__never_indexed"); ok {
		t.Error("an unknown tool of a configured server is found")
	}
}

// The common case (nothing hidden) hands the engine's hits back as they are.
func TestVisibilityKeepsHitsWhenNothingIsHidden(t *testing.T) {
	vis := newVisibility(serverList("a"))
	hits := []search.Hit{{Tool: catalog.Tool{Server: "a", Name: "x"}}}
	kept, hidden := vis.keep(hits)
	if hidden != 0 || &kept[0] != &hits[0] {
		t.Errorf("keep copied or hid: hidden=%d", hidden)
	}
}
