package keys

import (
	"context"
	"fmt"
	"path/filepath"
	"runtime"
	"slices"
	"testing"
	"time"

	"github.com/toolgate/toolgate/gateway/config"
	"github.com/toolgate/toolgate/gateway/policy"
	"github.com/toolgate/toolgate/index"
	"github.com/toolgate/toolgate/index/catalog"
	"github.com/toolgate/toolgate/index/indextest"
	"github.com/toolgate/toolgate/search"
)

// BenchmarkVerify is the key check of one HTTP request, with n keys in the
// data folder's file: a stat of the file (unchanged, so not read again),
// one SHA-256 and n constant-time compares.
func BenchmarkVerify(b *testing.B) {
	for _, n := range []int{1, 100} {
		b.Run(fmt.Sprintf("keys=%d", n), func(b *testing.B) {
			path := filepath.Join(b.TempDir(), "keys.jsonl")
			var last string
			for i := range n {
				secret, e, err := New(Spec{Name: fmt.Sprintf("k%d", i)}, time.Now())
				if err != nil {
					b.Fatal(err)
				}
				if err := Add(path, e); err != nil {
					b.Fatal(err)
				}
				last = secret
			}
			s := Open(path, nil)
			b.ReportAllocs()
			b.ResetTimer()
			for b.Loop() {
				if _, err := s.Verify(last); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// catalogTools is policy.Tools over a catalog, as the index serves it:
// IDs a copy of its list.
type catalogTools struct {
	byID map[string]catalog.Tool
	ids  []string
}

func (c catalogTools) Tool(id string) (catalog.Tool, bool) { t, ok := c.byID[id]; return t, ok }
func (c catalogTools) IDs() []string                       { return slices.Clone(c.ids) }

// BenchmarkScopedView is what a key that is not admin costs the gateway
// once per catalog, at 100 servers and 50,000 tools (indextest, spread
// over the servers as toolgate-bench's backends spread them), ten profiles
// of ten servers each: its search filter (Decide of every tool),
// SeenTools (GET /status, the console, toolgate__list_servers) and which
// servers it may manage, server by server (MayManage, as the reports
// asked it) or from one pass (Sight, as they ask it now). A key with one server's glob, or with a profile,
// is refused most tools; the refusals' sentences were built for each and
// thrown away (Allowed, Sees and Shows want yes or no).
func BenchmarkScopedView(b *testing.B) {
	tools, profiles := largeGateway()
	set := policy.NewSet()
	set.Put(NewScope(set.Profiles, nil))
	set.Put(policy.NewProfiles(profiles))
	for _, k := range []Entry{
		{Name: "one-server", Allow: []string{"syn005__*"}},
		{Name: "profile", Profile: "p4"},
	} {
		c := &policy.Caller{Transport: policy.TransportHTTP, Key: k.Caller()}
		b.Run("key="+k.Name+"/filter", func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				for _, t := range tools.byID {
					set.Allowed(c, t)
				}
			}
		})
		b.Run("key="+k.Name+"/seen-tools", func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				set.SeenTools(c, tools)
			}
		})
		b.Run("key="+k.Name+"/sight", func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				v := set.Sight(c, tools)
				for s := range servers {
					v.MayManage(synServer(s))
				}
			}
		})
		// As the reports ask it of a live.Loop, which numbers its
		// catalogs: kept from one report of the key to the next.
		b.Run("key="+k.Name+"/sight-kept", func(b *testing.B) {
			b.ReportAllocs()
			kept := numberedTools{tools}
			for b.Loop() {
				v := set.Sight(c, kept)
				for s := range servers {
					v.MayManage(synServer(s))
				}
			}
		})
		b.Run("key="+k.Name+"/may-manage-all", func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				for s := range servers {
					set.MayManage(c, tools, synServer(s))
				}
			}
		})
	}
}

// servers is how many servers largeGateway's catalog spreads over.
const servers = 100

// largeGateway is the catalog of README's large shared gateway: 50,000
// tools (indextest) spread over 100 servers as toolgate-bench's backends
// spread them, and ten profiles of ten servers each.
func largeGateway() (catalogTools, map[string]config.Profile) {
	tools := catalogTools{byID: map[string]catalog.Tool{}}
	for i, t := range indextest.Catalog(50_000, indextest.Seed) {
		t.Name, t.Server = t.Server+"_"+t.Name, synServer(i%servers)
		tools.byID[t.ID()] = t
		tools.ids = append(tools.ids, t.ID())
	}
	return tools, tenProfiles(synServer)
}

// synServer names largeGateway's server i.
func synServer(i int) string { return fmt.Sprintf("syn%03d", i) }

// largeGatewayIndex is largeGateway's catalog indexed (BM25 only, as
// README's measurements serve it), a set of rules as serve puts them, and
// sharedKeyCallers: 200 keys on three routes.
func largeGatewayIndex(b *testing.B) (*index.Index, *policy.Set, []*policy.Caller) {
	tools, profiles := largeGateway()
	var list []catalog.Tool
	for _, id := range tools.ids {
		list = append(list, tools.byID[id])
	}
	ix, err := index.Build(context.Background(), list, nil, nil)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = ix.Close() })
	set := policy.NewSet()
	set.Put(NewScope(set.Profiles, nil))
	set.Put(policy.NewProfiles(profiles))
	return ix, set, sharedKeyCallers(synServer)
}

// BenchmarkSearchKeysRoundRobin is a search_tools of a shared gateway at
// 50,000 tools: the caller's search filter (kept per scope by the policy,
// evaluated over the index when new) and a BM25 search through it, for
// one key searching again and again, and for 200 keys on three routes
// taking turns. Each of the 600 had a filter of its own and the policy
// kept 256, started over once full: every search of the round robin
// evaluated its filter over the 50,000 tools again.
func BenchmarkSearchKeysRoundRobin(b *testing.B) {
	ix, set, callers := largeGatewayIndex(b)
	eng := search.New(ix, nil, nil)
	b.Cleanup(func() { eng.Close() })
	queries := []string{"create a calendar event", "send an email", "read a file", "list pull requests"}
	for _, bc := range []struct {
		name    string
		callers []*policy.Caller
	}{{"one-key", callers[1:2]}, {"200-keys-3-routes", callers}} {
		b.Run(bc.name, func(b *testing.B) {
			for _, c := range bc.callers { // each caller's first search
				ix.In(set.Filter(c))
			}
			b.ReportAllocs()
			b.ResetTimer()
			i := 0
			for b.Loop() {
				c := bc.callers[i%len(bc.callers)]
				if _, err := eng.Search(context.Background(), search.Query{Text: queries[i%len(queries)], Limit: 5, Filter: set.Filter(c)}); err != nil {
					b.Fatal(err)
				}
				i++
			}
		})
	}
}

// BenchmarkFilterMemory is the heap a kept search filter holds once
// evaluated over an index of 50,000 tools and 100 servers (its row bitmap
// and its rows per server), by the kind of key it is for: what the
// policy's bound on kept filters (maxFilters) costs at that size. In
// hybrid mode a filter adds, on first use, the vector sums of the servers
// it keeps part of: 384 float64 (3 KiB) each, and one for all.
func BenchmarkFilterMemory(b *testing.B) {
	ix, set, _ := largeGatewayIndex(b)
	for _, kind := range []struct {
		name string
		key  func(i int) Entry
	}{
		{"allow-one-server", func(i int) Entry { return Entry{Allow: []string{synServer(i) + "__*"}} }},
		{"deny-one-server", func(i int) Entry { return Entry{Deny: []string{synServer(i) + "__*"}} }},
		{"profile", func(i int) Entry {
			return Entry{Profile: fmt.Sprintf("p%d", i%10), Deny: []string{synServer(i) + "__*"}}
		}},
	} {
		b.Run(kind.name, func(b *testing.B) {
			var before, after runtime.MemStats
			var kept []index.Subset
			for b.Loop() {
				kept = nil
				runtime.GC()
				runtime.ReadMemStats(&before)
				for i := range servers {
					c := &policy.Caller{Transport: policy.TransportHTTP, Key: kind.key(i).Caller()}
					kept = append(kept, ix.In(set.Filter(c)))
				}
				runtime.GC()
				runtime.ReadMemStats(&after)
				set.Put(NewScope(set.Profiles, nil)) // a new snapshot: no filter kept
			}
			runtime.KeepAlive(kept)
			b.ReportMetric(float64(int64(after.HeapAlloc)-int64(before.HeapAlloc))/servers, "bytes/filter")
		})
	}
}

// numberedTools is a catalog of one generation, as live.Loop serves one.
type numberedTools struct{ catalogTools }

func (numberedTools) CatalogGeneration() uint64 { return 1 }

// BenchmarkReach is why a caller reaches no tool at 100 servers and 50,000
// tools (largeGateway): a key of profile p3 on profile p1's route, which
// share none. search_tools asks it after each search that finds nothing,
// and each tools/list of a scoped caller (its description). decide-each
// is how it was looked for: Decide of every tool of the catalog, the
// words of each refusal built; look is Set.Reach without a numbered
// catalog (the rules' yes or no, the key's words once per class), kept
// with one (as serve's catalog is).
func BenchmarkReach(b *testing.B) {
	tools, profiles := largeGateway()
	set := policy.NewSet()
	set.Put(NewScope(set.Profiles, nil))
	set.Put(policy.NewProfiles(profiles))
	c := &policy.Caller{Transport: policy.TransportHTTP, Profile: "p1", Key: Entry{Name: "k3", Profile: "p3"}.Caller()}
	b.Run("decide-each", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			var seen []string
			for _, id := range tools.IDs() {
				t, _ := tools.Tool(id)
				if d := set.Decide(c, t); !d.Allowed && !slices.Contains(seen, d.Reason) {
					seen = append(seen, d.Reason)
				}
			}
		}
	})
	for _, bc := range []struct {
		name  string
		tools policy.Tools
	}{{"look", tools}, {"kept", &numbered{Tools: tools, gen: 1}}} {
		b.Run(bc.name, func(b *testing.B) {
			set.Reach(c, bc.tools) // kept: the first look is not timed
			b.ReportAllocs()
			for b.Loop() {
				if ok, _, _ := set.Reach(c, bc.tools); ok {
					b.Fatal("reaches a tool")
				}
			}
		})
	}
}
