package keys

import (
	"strings"
	"testing"

	"github.com/toolgate/toolgate/gateway/config"
	"github.com/toolgate/toolgate/gateway/policy"
	"github.com/toolgate/toolgate/index/catalog"
)

func tool(id string) catalog.Tool {
	s, n, _ := catalog.SplitID(id)
	return catalog.Tool{Server: s, Name: n}
}

// A key's profile and globs decide what it sees and runs, through the same
// Decide and search filter as every rule; a denial says only that the key
// lacks access, whatever the tool.
func TestScope(t *testing.T) {
	set := policy.NewSet()
	set.Put(NewScope(set.Profiles, func(t catalog.Tool) bool { return t.ID() == "toolgate__add_server" }))
	set.Put(policy.NewProfiles(map[string]config.Profile{"kg": {Servers: []string{"memory"}, Tools: config.ToolGlobs{Deny: []string{"memory__delete_*"}}}}))
	entry := func(profile string, allow, deny []string) *policy.Caller {
		return &policy.Caller{Transport: policy.TransportHTTP, Key: Entry{Name: "k", Profile: profile, Allow: allow, Deny: deny}.Caller()}
	}
	admin := &policy.Caller{Transport: policy.TransportHTTP, Key: Entry{Name: "k", Admin: true}.Caller()}
	tests := []struct {
		caller *policy.Caller
		id     string
		want   bool
	}{
		{nil, "filesystem__read_file", true},
		{entry("", nil, nil), "filesystem__read_file", true},
		{entry("kg", nil, nil), "memory__read_graph", true},
		{entry("kg", nil, nil), "memory__delete_entities", false},
		{entry("kg", nil, nil), "filesystem__read_file", false},
		{entry("kg", nil, nil), "nosuch__tool", false},
		{entry("", []string{"memory__*"}, nil), "memory__read_graph", true},
		{entry("", []string{"memory__*"}, nil), "filesystem__read_file", false},
		{entry("", nil, []string{"filesystem__write_*"}), "filesystem__write_file", false},
		{entry("", nil, []string{"filesystem__write_*"}), "filesystem__read_file", true},
		{entry("gone", nil, nil), "memory__read_graph", false},
		// Only an admin key sees and runs the tools that change the config.
		{nil, "toolgate__add_server", true},
		{entry("", nil, nil), "toolgate__add_server", false},
		{entry("", nil, nil), "toolgate__list_servers", true},
		{admin, "toolgate__add_server", true},
	}
	for _, tc := range tests {
		d := set.Decide(tc.caller, tool(tc.id))
		if d.Allowed != tc.want {
			t.Errorf("%v on %s: %+v, want allowed=%v", tc.caller, tc.id, d, tc.want)
		}
		// The yes or no the filter and the lists ask (Allows, no words)
		// is Decide's, rule by rule.
		if got := set.Allowed(tc.caller, tool(tc.id)); got != d.Allowed {
			t.Errorf("%v on %s: Allowed %v, Decide %+v", tc.caller, tc.id, got, d)
		}
		if !d.Allowed && (d.Rule != RuleName || !strings.Contains(d.Reason, `API key "k"`)) {
			t.Errorf("%s: denial %+v", tc.id, d)
		}
		if !d.Allowed && tc.caller.Key.Profile != "gone" && strings.Contains(d.Reason, tc.id) {
			t.Errorf("%s: the denial names the tool: %q", tc.id, d.Reason)
		}
	}
	// Search filters are cached per scope: an admin key's is not the one of
	// a key of the same name that is not.
	if set.Filter(admin) == set.Filter(entry("", nil, nil)) {
		t.Error("an admin key shares the search filter of a key that is not admin")
	}
}

// TestScopeDenialSaysWhy: a tool outside a key's profile is refused with
// why and the fix, naming the key's own profile only, in the same words
// for a tool that exists and one that does not; one its globs leave out
// says so, and so does one only an admin key may run. They read "lacks
// access to this tool" alone, no fix.
func TestScopeDenialSaysWhy(t *testing.T) {
	set := policy.NewSet()
	set.Put(NewScope(set.Profiles, nil))
	set.Put(policy.NewProfiles(map[string]config.Profile{"kg": {Servers: []string{"memory"}}, "files": {Servers: []string{"filesystem"}}}))
	kg := &policy.Caller{Transport: policy.TransportHTTP, Key: Entry{Name: "k", Profile: "kg"}.Caller()}
	want := `the API key "k" lacks access to this tool: the key is limited to profile "kg", which does not show it; ` +
		`an admin can add it to that profile (toolgate.profiles.kg in the config) or give the key another profile, its secret kept (toolgate keys update k --profile PROFILE)`
	for _, id := range []string{"filesystem__read_file", "nosuch__tool"} {
		if d := set.Decide(kg, tool(id)); d.Allowed || d.Reason != want {
			t.Errorf("kg key on %s: %q, want %q", id, d.Reason, want)
		}
	}
	globs := &policy.Caller{Transport: policy.TransportHTTP, Key: Entry{Name: "g", Allow: []string{"memory__*"}}.Caller()}
	if d := set.Decide(globs, tool("filesystem__read_file")); d.Allowed || !strings.HasPrefix(d.Reason, LacksAccess("g")+": the key's --allow or --deny globs leave it out") ||
		strings.Contains(d.Reason, "filesystem") || !IsLacksAccess(d.Reason, "g") {
		t.Errorf("globs key on filesystem__read_file: %q", d.Reason)
	}
	// A management tool to a key whose profile does not list their server
	// (one without servers, one listing others): the fix names it, in the
	// same words for any of them. It read "add it to that profile", and a
	// profile without servers shows every server but that one.
	set.Put(policy.NewProfiles(map[string]config.Profile{"kg": {Servers: []string{"memory"}}, "ro": {ReadOnly: true}, "ops": {Servers: []string{"memory", "toolgate"}, Tools: config.ToolGlobs{Deny: []string{"toolgate__restart_*"}}}}))
	for _, profile := range []string{"kg", "ro"} {
		c := &policy.Caller{Transport: policy.TransportHTTP, Key: Entry{Name: "k", Profile: profile}.Caller()}
		want := `the API key "k" lacks access to this tool: the key is limited to profile "` + profile + `", which does not show the management tools (toolgate__…): ` +
			`they are shown only by a profile that lists "toolgate" in its servers; an admin can add "toolgate" to toolgate.profiles.` + profile + `.servers in the config ` +
			`(a profile without servers must then list the other servers it shows too) or give the key another profile, its secret kept (toolgate keys update k --profile PROFILE)`
		for _, id := range []string{"toolgate__list_servers", "toolgate__nosuch"} {
			if d := set.Decide(c, tool(id)); d.Allowed || d.Reason != want || !IsLacksAccess(d.Reason, "k") {
				t.Errorf("%s key on %s: %q, want %q", profile, id, d.Reason, want)
			}
		}
	}
	// A profile that lists it and leaves the tool out otherwise: the
	// words of any tool outside the profile.
	ops := &policy.Caller{Transport: policy.TransportHTTP, Key: Entry{Name: "k", Profile: "ops"}.Caller()}
	if d := set.Decide(ops, tool("toolgate__restart_server")); d.Allowed || d.Reason != OutsideProfile("k", "ops") {
		t.Errorf("ops key on toolgate__restart_server: %q", d.Reason)
	}
	// A tool only an admin key may run: said so, with the fix. It read
	// "lacks access to this tool" alone.
	set.Put(NewScope(set.Profiles, func(t catalog.Tool) bool { return t.ID() == "toolgate__add_server" }))
	plain := &policy.Caller{Transport: policy.TransportHTTP, Key: Entry{Name: "p"}.Caller()}
	want = `the API key "p" lacks access to this tool: it changes the gateway's config, which only an admin API key may do; ` +
		`an admin can create one (toolgate keys create --name NAME --admin; toolgate keys list shows which keys are admin)`
	if d := set.Decide(plain, tool("toolgate__add_server")); d.Allowed || d.Reason != want || !IsLacksAccess(d.Reason, "p") {
		t.Errorf("a key that is not admin on toolgate__add_server: %q, want %q", d.Reason, want)
	}
}

// Sight (one pass over the catalog, for the reports that list every
// server) says of each server what MayManage says, and counts the tools
// SeenTools counts: a key with a server's globs, with a profile, with a
// glob narrower than a server, and a server with no tool catalogued.
func TestSightIsMayManage(t *testing.T) {
	tools := catalogTools{byID: map[string]catalog.Tool{}}
	for _, id := range []string{"memory__read_graph", "memory__delete_entities", "filesystem__read_file", "filesystem__write_file", "git__status"} {
		tools.byID[id] = tool(id)
		tools.ids = append(tools.ids, id)
	}
	set := policy.NewSet()
	set.Put(NewScope(set.Profiles, nil))
	set.Put(policy.NewProfiles(map[string]config.Profile{"kg": {Servers: []string{"memory", "fetch"}}}))
	for _, k := range []Entry{
		{Name: "mem", Allow: []string{"memory__*"}},
		{Name: "kg", Profile: "kg"},
		{Name: "narrow", Allow: []string{"filesystem__read_*", "fetch__get"}},
		{Name: "nogit", Deny: []string{"git__*"}},
		{Name: "admin", Admin: true},
	} {
		c := &policy.Caller{Transport: policy.TransportHTTP, Key: k.Caller()}
		sight := set.Sight(c, tools)
		for _, server := range []string{"memory", "filesystem", "git", "fetch", "nosuch"} {
			want, _ := set.MayManage(c, tools, server)
			if got := sight.MayManage(server); got != want {
				t.Errorf("key %s, server %s: Sight.MayManage %v, MayManage %v", k.Name, server, got, want)
			}
			n := 0
			for _, id := range tools.ids {
				if tt, _ := tools.Tool(id); tt.Server == server && set.Sees(c, tt) {
					n++
				}
			}
			if got := sight.Tools(server); got != n {
				t.Errorf("key %s, server %s: Sight.Tools %d, want %d", k.Name, server, got, n)
			}
		}
	}
}
