package keys

import (
	"fmt"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/toolgate/toolgate/gateway/config"
	"github.com/toolgate/toolgate/gateway/policy"
	"github.com/toolgate/toolgate/index/catalog"
	"github.com/toolgate/toolgate/index/indextest"
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
	const servers = 100
	tools := catalogTools{byID: map[string]catalog.Tool{}}
	for i, t := range indextest.Catalog(50_000, indextest.Seed) {
		t.Name, t.Server = t.Server+"_"+t.Name, fmt.Sprintf("syn%03d", i%servers)
		tools.byID[t.ID()] = t
		tools.ids = append(tools.ids, t.ID())
	}
	profiles := map[string]config.Profile{}
	for p := range 10 {
		var names []string
		for s := range 10 {
			names = append(names, fmt.Sprintf("syn%03d", p*10+s))
		}
		profiles[fmt.Sprintf("p%d", p)] = config.Profile{Servers: names}
	}
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
					v.MayManage(fmt.Sprintf("syn%03d", s))
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
					v.MayManage(fmt.Sprintf("syn%03d", s))
				}
			}
		})
		b.Run("key="+k.Name+"/may-manage-all", func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				for s := range servers {
					set.MayManage(c, tools, fmt.Sprintf("syn%03d", s))
				}
			}
		})
	}
}

// numberedTools is a catalog of one generation, as live.Loop serves one.
type numberedTools struct{ catalogTools }

func (numberedTools) CatalogGeneration() uint64 { return 1 }
