package policy_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/toolgate/toolgate/gateway/config"
	"github.com/toolgate/toolgate/gateway/policy"
	"github.com/toolgate/toolgate/index"
	"github.com/toolgate/toolgate/index/catalog"
	"github.com/toolgate/toolgate/search"
)

func tool(id string) catalog.Tool {
	server, name, _ := catalog.SplitID(id)
	return catalog.Tool{Server: server, Name: name, Description: "does " + name}
}

var kg = map[string]config.Profile{
	"kg":      {Servers: []string{"memory"}, Tools: config.ToolGlobs{Deny: []string{"memory__delete_*"}}},
	"readers": {Tools: config.ToolGlobs{Allow: []string{"*__read_*"}}},
}

func newSet() *policy.Set {
	return policy.NewSet(
		policy.NewConfigured([]string{"memory", "filesystem", "everything", config.BuiltinServer}),
		policy.NewDisabled(nil),
		policy.NewProfiles(kg),
	)
}

func TestDecide(t *testing.T) {
	s := newSet()
	http := func(profile string) *policy.Caller {
		return &policy.Caller{Transport: policy.TransportHTTP, Profile: profile}
	}
	for _, c := range []struct {
		caller *policy.Caller
		id     string
		rule   string // "" = allowed
		reason string
	}{
		{http(""), "filesystem__read_file", "", ""},
		{http(""), "nosuch__x", policy.RuleConfig, `there is no server named "nosuch"`},
		{http("kg"), "memory__create_entities", "", ""},
		{http("kg"), "memory__delete_entities", policy.RuleProfile, `memory__delete_entities is outside profile "kg": the profile's tools.deny glob "memory__delete_*" matches it`},
		{http("kg"), "filesystem__read_file", policy.RuleProfile, `filesystem__read_file is outside profile "kg": the profile shows only the servers memory`},
		{http("kg"), "toolgate__list_servers", policy.RuleProfile, `outside profile "kg"`},
		{http("readers"), "filesystem__read_file", "", ""},
		{http("readers"), "filesystem__write_file", policy.RuleProfile, `matches none of the profile's tools.allow globs (*__read_*)`},
		// A profile without "servers" shows every config server's tools,
		// not the management tools: only a profile that lists toolgate
		// does (the README's rule; "readers" showed toolgate__read_*).
		{http("readers"), "toolgate__read_x", policy.RuleProfile, `the management tools (server "toolgate") are shown only by a profile that lists "toolgate" in its servers`},
		{http("gone"), "memory__read_graph", policy.RuleProfile, `profile "gone" is no longer in the config`},
		{nil, "memory__delete_entities", "", ""}, // no caller: no profile
	} {
		d := s.Decide(c.caller, tool(c.id))
		if d.Allowed != (c.rule == "") || d.Rule != c.rule || !strings.Contains(d.Reason, c.reason) {
			t.Errorf("%v %s: %+v, want rule %q reason containing %q", c.caller, c.id, d, c.rule, c.reason)
		}
		// The yes or no without the words (Profiles.Allows) is Decide's.
		if got := s.Allowed(c.caller, tool(c.id)); got != d.Allowed {
			t.Errorf("%v %s: Allowed %v, Decide %+v", c.caller, c.id, got, d)
		}
	}

	// Disabling a server hides it from everyone, and says how to undo it;
	// the config's own reason comes first (rules are checked in order).
	s.Put(policy.NewDisabled([]string{"everything"}))
	if d := s.Decide(http(""), tool("everything__echo")); d.Allowed || d.Rule != policy.RuleDisabled || !strings.Contains(d.Reason, "toolgate__enable_server") {
		t.Errorf("disabled: %+v", d)
	}
	// A reload that removes a server: its tools' denial says so.
	s.Put(s.Configured().With([]string{"memory", "filesystem", config.BuiltinServer}))
	if d := s.Decide(http(""), tool("everything__echo")); d.Rule != policy.RuleConfig || !strings.Contains(d.Reason, `"everything" was removed from the config`) {
		t.Errorf("removed: %+v", d)
	}
}

// A rule from elsewhere (issue 15's key scopes) joins the set without any
// change to the others, and its scope splits the filter cache.
type keyRule struct{}

func (*keyRule) Name() string { return "key" }
func (*keyRule) Scope(c *policy.Caller) string {
	if c.Key == nil {
		return ""
	}
	return c.Key.Name
}
func (*keyRule) Check(c *policy.Caller, t catalog.Tool) string {
	if c.Key == nil || c.Key.Allow == nil || slices.ContainsFunc(c.Key.Allow, func(g string) bool { return catalog.MatchID(g, t.ID()) }) {
		return ""
	}
	return fmt.Sprintf("%s is outside the scope of API key %q", t.ID(), c.Key.Name)
}

func TestComposedRuleAndFilterCache(t *testing.T) {
	s := newSet()
	kr := &keyRule{}
	s.Put(kr)
	gen := s.Generation()
	reader := &policy.Caller{Transport: policy.TransportHTTP, Key: &policy.Key{Name: "reader", Allow: []string{"*__read_*"}}}
	if d := s.Decide(reader, tool("memory__create_entities")); d.Rule != "key" || !strings.Contains(d.Reason, `API key "reader"`) {
		t.Errorf("key rule: %+v", d)
	}
	f1 := s.Filter(reader)
	if f2 := s.Filter(&policy.Caller{Transport: policy.TransportHTTP, Key: &policy.Key{Name: "reader"}}); f2 != f1 {
		t.Error("two callers with the same scopes got different filters")
	}
	if f3 := s.Filter(&policy.Caller{Transport: policy.TransportHTTP}); f3 == f1 {
		t.Error("a caller without the key shares the key's filter")
	}
	s.Put(policy.NewDisabled([]string{"memory"}))
	if s.Generation() == gen {
		t.Error("Generation did not move on Put")
	}
	if f4 := s.Filter(reader); f4 == f1 {
		t.Error("a filter survived a change of the rules")
	}
}

func TestSessionProfile(t *testing.T) {
	free := policy.NewSession("", false)
	c := &policy.Caller{Transport: policy.TransportStdio, Session: free}
	if err := free.Activate("kg"); err != nil || c.ProfileName() != "kg" {
		t.Fatalf("Activate: %v, profile %q", err, c.ProfileName())
	}
	if err := free.Activate(""); err != nil || c.ProfileName() != "" {
		t.Fatalf("Activate(\"\"): %v, profile %q", err, c.ProfileName())
	}
	fixed := policy.NewSession("kg", true)
	if err := fixed.Activate("readers"); !errors.Is(err, policy.ErrProfileFixed) || fixed.Profile() != "kg" {
		t.Fatalf("fixed session: %v, profile %q", err, fixed.Profile())
	}
	// A profile the session chose keeps the tools to switch again; one the
	// operator fixed does not.
	s := newSet()
	if err := free.Activate("kg"); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		c    *policy.Caller
		want bool
	}{{c, true}, {&policy.Caller{Transport: policy.TransportStdio, Session: fixed}, false}, {&policy.Caller{Transport: policy.TransportHTTP, Profile: "kg"}, false}} {
		if d := s.Decide(tc.c, tool("toolgate__activate_profile")); d.Allowed != tc.want {
			t.Errorf("%v: activate_profile allowed=%v, want %v (%s)", tc.c, d.Allowed, tc.want, d.Reason)
		}
		if d := s.Decide(tc.c, tool("toolgate__list_servers")); d.Allowed {
			t.Errorf("%v: list_servers allowed inside kg", tc.c)
		}
	}
	if s.Filter(c) == s.Filter(&policy.Caller{Transport: policy.TransportHTTP, Profile: "kg"}) {
		t.Error("a switchable session shares the filter of the kg route")
	}
	ctx := policy.WithCaller(context.Background(), c)
	if policy.CallerFrom(ctx) != c || policy.CallerFrom(context.Background()) != nil {
		t.Error("caller not carried by the context")
	}
	if !c.MayChangeConfig() || (&policy.Caller{Transport: policy.TransportHTTP}).MayChangeConfig() ||
		!(&policy.Caller{Transport: policy.TransportHTTP, Key: &policy.Key{Admin: true}}).MayChangeConfig() {
		t.Error("MayChangeConfig: want stdio or an admin key")
	}
}

// A caller whose profile shows 9 tools of 10,000 gets the best 5 of those
// 9 from search, not the best 5 of all with the others cut away.
func TestFilteredSearchGetsBestOfAllowed(t *testing.T) {
	var tools []catalog.Tool
	for i := range 10000 {
		server := fmt.Sprintf("s%03d", i/25)
		tools = append(tools, catalog.Tool{Server: server, Name: fmt.Sprintf("list_files_%d", i), Description: "list the files of a folder"})
	}
	profiles := map[string]config.Profile{"nine": {Servers: []string{"s007"}, Tools: config.ToolGlobs{Allow: []string{"s007__list_files_17?"}}}}
	var servers []string
	for i := range 400 {
		servers = append(servers, fmt.Sprintf("s%03d", i))
	}
	s := policy.NewSet(policy.NewConfigured(servers), policy.NewProfiles(profiles))
	ix, err := index.Build(context.Background(), tools, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	eng := search.New(ix, nil, nil)
	defer eng.Close()
	c := &policy.Caller{Transport: policy.TransportHTTP, Profile: "nine"}
	res, err := eng.Search(context.Background(), search.Query{Text: "list files", Limit: 5, Filter: s.Filter(c)})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Hits) != 5 {
		t.Fatalf("%d hits, want 5 of the 9 the profile shows", len(res.Hits))
	}
	for _, h := range res.Hits {
		if d := s.Decide(c, h.Tool); !d.Allowed {
			t.Errorf("hit %s is not allowed: %s", h.Tool.ID(), d.Reason)
		}
	}
}

// A View is the catalog as one caller sees it.
func TestView(t *testing.T) {
	tools := []catalog.Tool{tool("memory__read_graph"), tool("memory__delete_entities"), tool("filesystem__read_file"), tool("gone__x")}
	ix, err := index.Build(context.Background(), tools, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	eng := search.New(ix, nil, nil)
	defer eng.Close()
	s := newSet()
	v := policy.NewView(eng, s, &policy.Caller{Profile: "kg"})
	if got := v.IDs(); !slices.Equal(got, []string{"memory__read_graph"}) {
		t.Errorf("IDs = %v", got)
	}
	if _, ok := v.Tool("filesystem__read_file"); ok {
		t.Error("Tool finds a tool outside kg")
	}
	res, err := v.Search(context.Background(), search.Query{Text: "read graph file delete entities", Limit: 10})
	if err != nil || len(res.Hits) != 1 || res.Hits[0].Tool.ID() != "memory__read_graph" {
		t.Errorf("Search: %v %+v", err, res.Hits)
	}
	if got := policy.NewView(eng, s, nil).IDs(); len(got) != 3 || slices.Contains(got, "gone__x") {
		t.Errorf("no profile: %v (gone is not configured)", got)
	}
}

// roTool is the tool id with annotations (none when annotations is "").
func roTool(id, annotations string) catalog.Tool {
	t := tool(id)
	if annotations != "" {
		t.Annotations = []byte(annotations)
	}
	return t
}

// A profile with readOnly shows only the tools that declare readOnlyHint:
// true, whatever their names; one that declares nothing is not read-only.
func TestReadOnlyProfile(t *testing.T) {
	s := policy.NewSet(
		policy.NewConfigured([]string{"memory", "everything", config.BuiltinServer}),
		policy.NewProfiles(map[string]config.Profile{
			"ro":   {ReadOnly: true},
			"rokg": {Servers: []string{"memory", config.BuiltinServer}, ReadOnly: true, Tools: config.ToolGlobs{Deny: []string{"memory__search_*"}}},
		}),
	)
	ro := &policy.Caller{Transport: policy.TransportHTTP, Profile: "ro"}
	rokg := &policy.Caller{Transport: policy.TransportHTTP, Profile: "rokg"}
	for _, c := range []struct {
		caller *policy.Caller
		tool   catalog.Tool
		reason string // "" = allowed
	}{
		{ro, roTool("memory__read_graph", `{"readOnlyHint": true}`), ""},
		{ro, roTool("everything__echo", `{"readOnlyHint": true, "openWorldHint": false}`), ""},
		// Named like a reader, declares nothing: not read-only.
		{ro, roTool("everything__get-env", ""), `everything__get-env is outside profile "ro": the profile shows only tools that declare readOnlyHint: true, and this one does not`},
		{ro, roTool("memory__read_graph2", `{}`), "does not"},
		{ro, roTool("memory__delete_entities", `{"readOnlyHint": false, "destructiveHint": true}`), "does not"},
		{ro, roTool("memory__odd", `"readOnly"`), "does not"},
		// The other fields still apply, and first.
		{rokg, roTool("everything__echo", `{"readOnlyHint": true}`), "the profile shows only the servers memory, toolgate"},
		{rokg, roTool("memory__search_nodes", `{"readOnlyHint": true}`), `tools.deny glob "memory__search_*"`},
		{rokg, roTool("toolgate__list_servers", `{"readOnlyHint": true}`), ""},
		{rokg, roTool("toolgate__restart_server", `{"destructiveHint": false}`), "readOnlyHint"},
		// A server with no tool catalogued ("server__*") is not covered
		// whole by a read-only profile, as by narrower globs.
		{rokg, policy.AnyTool("memory"), "readOnlyHint"},
	} {
		d := s.Decide(c.caller, c.tool)
		if got := s.Allowed(c.caller, c.tool); got != d.Allowed {
			t.Errorf("%v %s: Allowed %v, Decide %+v", c.caller, c.tool.ID(), got, d)
		}
		if d.Allowed != (c.reason == "") || !strings.Contains(d.Reason, c.reason) || !d.Allowed && d.Rule != policy.RuleProfile {
			t.Errorf("%v %s: %+v, want reason containing %q", c.caller, c.tool.ID(), d, c.reason)
		}
	}
	if !policy.MayAskStatus(s, rokg) {
		t.Error("a read-only profile that lists toolgate is not sent to toolgate__server_status, which declares readOnlyHint")
	}
}

// Search under a read-only profile gives the best of its read-only tools,
// ranked as the whole catalog ranks them, not the top of all cut down.
func TestReadOnlyProfileSearch(t *testing.T) {
	var tools []catalog.Tool
	for i := range 200 {
		tl := catalog.Tool{Server: "s", Name: fmt.Sprintf("list_files_%03d", i), Description: "list the files of a folder"}
		if i%40 == 39 { // 5 of 200, none among the best by name
			tl.Annotations = []byte(`{"readOnlyHint": true}`)
		}
		tools = append(tools, tl)
	}
	s := policy.NewSet(policy.NewConfigured([]string{"s"}), policy.NewProfiles(map[string]config.Profile{"ro": {ReadOnly: true}}))
	ix, err := index.Build(context.Background(), tools, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	eng := search.New(ix, nil, nil)
	defer eng.Close()
	res, err := policy.NewView(eng, s, &policy.Caller{Profile: "ro"}).Search(context.Background(), search.Query{Text: "list files", Limit: 10})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, h := range res.Hits {
		got = append(got, h.Tool.Name)
	}
	if want := []string{"list_files_039", "list_files_079", "list_files_119", "list_files_159", "list_files_199"}; !slices.Equal(slices.Sorted(slices.Values(got)), want) {
		t.Errorf("hits %v, want the 5 read-only tools %v", got, want)
	}
}

// A listing whose readOnlyHint went from true to false takes the tool out
// of a read-only profile at once: before the re-index brings the catalog
// the new annotations (the tool the gateway looks up still declares
// readOnlyHint: true). A reload of the profiles keeps what was listed.
func TestReadOnlyProfileFollowsListing(t *testing.T) {
	s := policy.NewSet(policy.NewConfigured([]string{"memory", "other"}))
	s.PutProfiles(map[string]config.Profile{"ro": {ReadOnly: true}})
	c := &policy.Caller{Transport: policy.TransportHTTP, Profile: "ro"}
	indexed := roTool("memory__read_graph", `{"readOnlyHint": true}`)
	if d := s.Decide(c, indexed); !d.Allowed {
		t.Fatalf("before the listing: %+v", d)
	}
	f := s.Filter(c)
	s.ToolsListed("memory", []string{"read_graph"}) // open_nodes is read-only
	if d := s.Decide(c, indexed); d.Allowed || !strings.Contains(d.Reason, "readOnlyHint") {
		t.Errorf("after a listing without readOnlyHint: %+v", d)
	}
	if s.Filter(c) == f {
		t.Error("the search filter made before the listing is still in use")
	}
	if d := s.Decide(nil, indexed); !d.Allowed {
		t.Errorf("a caller without profile: %+v", d)
	}
	// Another server's listing, or the same again, changes nothing.
	gen := s.Generation()
	s.ToolsListed("other", nil)
	s.ToolsListed("memory", []string{"read_graph"})
	if s.Generation() != gen {
		t.Error("a listing that changes no profile's view moved the rules")
	}
	s.PutProfiles(map[string]config.Profile{"ro": {ReadOnly: true}, "kg": {Servers: []string{"memory"}}})
	if d := s.Decide(c, indexed); d.Allowed {
		t.Errorf("after a reload: %+v (the listing was forgotten)", d)
	}
	// Listed read-only again (the quarantine holds such a change, or
	// approves it): the catalog's annotations decide again.
	s.ToolsListed("memory", nil)
	if d := s.Decide(c, indexed); !d.Allowed {
		t.Errorf("listed read-only again: %+v", d)
	}
}

// numbered is a catalog that numbers its versions (as live.Loop): each
// change is a new slice and a new generation, read under its lock.
type numbered struct {
	mu    sync.Mutex
	gen   uint64
	tools []catalog.Tool
}

func (n *numbered) CatalogGeneration() uint64 { n.mu.Lock(); defer n.mu.Unlock(); return n.gen }
func (n *numbered) snapshot() []catalog.Tool  { n.mu.Lock(); defer n.mu.Unlock(); return n.tools }
func (n *numbered) IDs() []string {
	var ids []string
	for _, t := range n.snapshot() {
		ids = append(ids, t.ID())
	}
	return ids
}
func (n *numbered) Tool(id string) (catalog.Tool, bool) {
	for _, t := range n.snapshot() {
		if t.ID() == id {
			return t, true
		}
	}
	return catalog.Tool{}, false
}

// A Sight kept for a catalog generation is shared by concurrent reports;
// a catalog swapped while they run (its generation counted after the
// swap, as live.Loop does) and a profile changed show in the Sights made
// after.
func TestSightKeptConcurrent(t *testing.T) {
	tools := &numbered{gen: 1, tools: []catalog.Tool{tool("memory__read_graph")}}
	set := policy.NewSet()
	set.PutProfiles(kg)
	c := &policy.Caller{Transport: policy.TransportHTTP, Profile: "kg", Key: &policy.Key{Name: "k"}}
	var wg sync.WaitGroup
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 200 {
				if n := set.Sight(c, tools).Tools("memory"); n < 1 || n > 20 {
					t.Errorf("memory: %d tools", n)
					return
				}
			}
		}()
	}
	for i := range 19 {
		tools.mu.Lock()
		tools.tools = append(slices.Clone(tools.tools), tool(fmt.Sprintf("memory__read_%d", i)))
		tools.mu.Unlock()
		tools.mu.Lock()
		tools.gen++
		tools.mu.Unlock()
		if i == 10 {
			set.PutProfiles(kg)
		}
	}
	wg.Wait()
	if n := set.Sight(c, tools).Tools("memory"); n != 20 {
		t.Errorf("after the changes the view holds %d of memory's tools, want 20", n)
	}
	set.PutProfiles(map[string]config.Profile{"kg": {Servers: []string{"other"}}})
	if n := set.Sight(c, tools).Tools("memory"); n != 0 {
		t.Errorf("after kg left memory out the view holds %d of its tools, want 0", n)
	}
}

// evaluations lets every tool through and counts how often a search
// filter asks it (once per tool of the index each time a filter is
// evaluated): put first in a set, calls / tools is the filters built.
type evaluations struct{ calls atomic.Int64 }

func (*evaluations) Name() string                               { return "count" }
func (*evaluations) Scope(*policy.Caller) string                { return "" }
func (*evaluations) Check(*policy.Caller, catalog.Tool) string  { return "" }
func (e *evaluations) Allows(*policy.Caller, catalog.Tool) bool { e.calls.Add(1); return true }

// Callers of 300 scopes searching round robin keep their filters and
// Sights (a second round builds none); past the bound of a snapshot's
// cache, a round builds again only some of them. A cache of 256 that
// started over once full built every filter at every search: 300 keys
// round robin never found theirs.
func TestFiltersKeptPastScopes(t *testing.T) {
	var tools []catalog.Tool
	for i := range 20 {
		tools = append(tools, tool(fmt.Sprintf("memory__read_%d", i)))
	}
	ix, err := index.Build(context.Background(), tools, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer ix.Close()
	callers := func(n int) []*policy.Caller {
		var out []*policy.Caller
		for i := range n {
			out = append(out, &policy.Caller{Transport: policy.TransportHTTP, Key: &policy.Key{Name: fmt.Sprintf("k%d", i)}})
		}
		return out
	}
	count := &evaluations{}
	set := policy.NewSet(count, &keyRule{})
	round := func(cs []*policy.Caller) int64 {
		before := count.calls.Load()
		for _, c := range cs {
			ix.In(set.Filter(c))
		}
		return (count.calls.Load() - before) / int64(len(tools))
	}
	three := callers(300)
	if n := round(three); n != 300 {
		t.Errorf("first round: %d filters built, want 300", n)
	}
	if n := round(three); n != 0 {
		t.Errorf("second round of 300 scopes: %d filters built again, want 0", n)
	}
	cat := &numbered{gen: 1, tools: tools}
	sights := map[*policy.Caller]*policy.Sight{}
	for _, c := range three {
		sights[c] = set.Sight(c, cat)
	}
	for _, c := range three {
		if set.Sight(c, cat) != sights[c] {
			t.Fatalf("key %s: its Sight was made again in the second round", c.Key.Name)
		}
	}
	set.Put(&keyRule{}) // a new snapshot, its caches empty
	many := callers(1100)
	round(many)
	if n := round(many); n >= 1100/2 {
		t.Errorf("second round of 1100 scopes: %d filters built again, want fewer than half", n)
	}
}
