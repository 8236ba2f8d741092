package main

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
// query text, and counts searches.
type rankedSearcher struct {
	ids      []string
	searches []int // the Limit of each Search
}

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

func hitIDs(res search.Result) []string {
	var ids []string
	for _, h := range res.Hits {
		ids = append(ids, h.Tool.ID())
	}
	return ids
}

func TestLiveServers(t *testing.T) {
	// The index still ranks gone's tools first (not re-indexed yet).
	inner := &rankedSearcher{ids: []string{"gone__a", "gone__b", "keep__a", "gone__c", "keep__b", "keep__c"}}
	live := newLiveServers(inner, serverList("keep", "gone"))

	res, err := live.Search(context.Background(), search.Query{Text: "x", Limit: 2})
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"gone__a", "gone__b"}, hitIDs(res)); diff != "" {
		t.Errorf("before the reload (-want +got):\n%s", diff)
	}

	live.setServers(serverList("keep", "new"))
	inner.searches = nil
	res, err = live.Search(context.Background(), search.Query{Text: "x", Limit: 2})
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"keep__a", "keep__b"}, hitIDs(res)); diff != "" {
		t.Errorf("after removing gone: the limit is filled from deeper hits (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]int{2, search.MaxLimit}, inner.searches); diff != "" {
		t.Errorf("searches (limits) (-want +got):\n%s", diff)
	}

	// Fewer hits than the limit: nothing more to find, no second search.
	inner.searches = nil
	res, _ = live.Search(context.Background(), search.Query{Text: "x", Limit: 10})
	if diff := cmp.Diff([]string{"keep__a", "keep__b", "keep__c"}, hitIDs(res)); diff != "" {
		t.Errorf("limit 10 (-want +got):\n%s", diff)
	}
	if len(inner.searches) != 1 {
		t.Errorf("%d searches for a short result, want 1", len(inner.searches))
	}

	if got := live.IDs(); !slices.Equal(got, []string{"keep__a", "keep__b", "keep__c"}) {
		t.Errorf("IDs() = %v", got)
	}
	if tl, ok := live.Tool("keep__a"); !ok || tl.Description != "tool keep__a" {
		t.Errorf("Tool(keep__a) = %+v, %v", tl, ok)
	}
	// A removed server's tool is passed on bare (the pool says why it
	// cannot run), whether or not the index still holds it.
	for _, id := range []string{"gone__a", "gone__never_indexed"} {
		tl, ok := live.Tool(id)
		if !ok || tl.Server != "gone" || tl.Description != "" || len(tl.InputSchema) != 0 {
			t.Errorf("Tool(%s) = %+v, %v; want a bare tool of server gone", id, tl, ok)
		}
	}
	if _, ok := live.Tool("other__a"); ok {
		t.Error("Tool(other__a) found: other was never configured")
	}

	// Added back: its tools are served again, and no longer "removed".
	live.setServers(serverList("keep", "gone"))
	if res, _ := live.Search(context.Background(), search.Query{Text: "x", Limit: 1}); !slices.Equal(hitIDs(res), []string{"gone__a"}) {
		t.Errorf("after adding gone back: %v", hitIDs(res))
	}
	if _, ok := live.Tool("gone__never_indexed"); ok {
		t.Error("an unknown tool of a configured server is found")
	}
}

func TestRestartOnly(t *testing.T) {
	base := config.Settings{}
	base.SetDefaults()
	tests := []struct {
		name   string
		change func(*config.Settings)
		want   []string
	}{
		{"nothing", func(*config.Settings) {}, nil},
		{"timeouts apply at run time", func(s *config.Settings) {
			s.CallTimeout.Duration, s.ConnectTimeout.Duration = 1, 2
		}, nil},
		{"http addr", func(s *config.Settings) { s.HTTP.Addr = "127.0.0.1:1" }, []string{"toolgate.http"}},
		{"search and embed", func(s *config.Settings) {
			s.Search.DefaultLimit, s.Embed.Variant = 7, "int8"
		}, []string{"toolgate.embed", "toolgate.search"}},
		{"data dir, restart, connects", func(s *config.Settings) {
			s.DataDir, s.Restart.Delays, s.MaxConcurrentConnects = "/x", nil, 1
		}, []string{"toolgate.dataDir", "toolgate.restart", "toolgate.maxConcurrentConnects"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cur := base
			cur.Restart.Delays = slices.Clone(base.Restart.Delays)
			tc.change(&cur)
			if diff := cmp.Diff(tc.want, restartOnly(base, cur)); diff != "" {
				t.Errorf("restartOnly (-want +got):\n%s", diff)
			}
		})
	}
}
