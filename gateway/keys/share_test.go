package keys

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"

	"github.com/toolgate/toolgate/gateway/config"
	"github.com/toolgate/toolgate/gateway/policy"
	"github.com/toolgate/toolgate/index"
	"github.com/toolgate/toolgate/index/catalog"
)

// evaluations is a rule that lets every tool through and counts how often
// a search filter asks it (once per tool of the index each time a filter
// is evaluated): put first in a set, calls / tools is the filters built.
type evaluations struct{ calls atomic.Int64 }

func (*evaluations) Name() string                               { return "count" }
func (*evaluations) Scope(*policy.Caller) string                { return "" }
func (*evaluations) Check(*policy.Caller, catalog.Tool) string  { return "" }
func (e *evaluations) Allows(*policy.Caller, catalog.Tool) bool { e.calls.Add(1); return true }

// sharedGateway is a set of rules as serve puts them (the key scope rule,
// tenProfiles) behind an evaluation counter, an index of three tools on
// each of 100 servers, and sharedKeyCallers.
func sharedGateway(t testing.TB) (*policy.Set, *evaluations, *index.Index, []*policy.Caller) {
	t.Helper()
	name := func(s int) string { return fmt.Sprintf("s%02d", s) }
	var tools []catalog.Tool
	for s := range 100 {
		for i := range 3 {
			tools = append(tools, catalog.Tool{Server: name(s), Name: fmt.Sprintf("t%d", i), Description: "does t"})
		}
	}
	ix, err := index.Build(context.Background(), tools, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ix.Close() })
	count := &evaluations{}
	set := policy.NewSet(count)
	set.Put(NewScope(set.Profiles, nil))
	set.PutProfiles(tenProfiles(name))
	return set, count, ix, sharedKeyCallers(name)
}

// tenProfiles are profiles p0 … p9 of ten of 100 servers each (server(i)
// names server i), as README's large shared gateway has them.
func tenProfiles(server func(int) string) map[string]config.Profile {
	profiles := map[string]config.Profile{}
	for p := range 10 {
		var names []string
		for s := range 10 {
			names = append(names, server(p*10+s))
		}
		profiles[fmt.Sprintf("p%d", p)] = config.Profile{Servers: names}
	}
	return profiles
}

// sharedKeyCallers are the callers of README's large shared gateway's 200
// keys (one admin; the others a profile of tenProfiles, one server's
// --allow, one server's --deny, or nothing), each on /mcp and on the
// routes of profiles p0 and p1: 600 callers.
func sharedKeyCallers(server func(int) string) []*policy.Caller {
	var callers []*policy.Caller
	for _, route := range []string{"", "p0", "p1"} {
		for i := range 200 {
			e := Entry{Name: fmt.Sprintf("k%d", i)}
			switch {
			case i == 0:
				e.Admin = true
			case i%4 == 0:
				e.Profile = fmt.Sprintf("p%d", i%10)
			case i%4 == 1:
				e.Allow = []string{server(i%100) + "__*"}
			case i%4 == 2:
				e.Deny = []string{server(i%100) + "__*"}
			}
			callers = append(callers, &policy.Caller{Transport: policy.TransportHTTP, Profile: route, Key: e.Caller()})
		}
	}
	return callers
}

// Keys of the same profile and globs share one search filter whatever
// their names, and 200 keys searching round robin on three routes keep
// theirs: a second round builds none. Each key had a filter of its own,
// 600 of them against a cache of 256 that started over once full, so
// every search of every key evaluated its filter over the whole catalog
// again. A change of the rules (a server disabled) still builds them anew.
func TestFiltersKeptRoundRobin(t *testing.T) {
	set, count, ix, callers := sharedGateway(t)
	built := func() int64 {
		before := count.calls.Load()
		for _, c := range callers {
			ix.In(set.Filter(c))
		}
		return (count.calls.Load() - before) / int64(ix.Len())
	}
	scopes := map[string]bool{}
	for _, c := range callers {
		k := *c.Key
		k.Name = ""
		scopes[fmt.Sprintf("%s %v", c.Profile, k)] = true
	}
	if n := built(); n != int64(len(scopes)) {
		t.Errorf("first round: %d filters built for %d callers of %d distinct scopes", n, len(callers), len(scopes))
	}
	if n := built(); n != 0 {
		t.Errorf("second round: %d filters built again, want 0", n)
	}
	sameScope := &policy.Caller{Transport: policy.TransportHTTP, Key: Entry{Name: "another", Allow: []string{"s01__*"}}.Caller()}
	if set.Filter(sameScope) != set.Filter(callers[1]) {
		t.Error("keys k1 and another, both --allow 's01__*', got different filters")
	}
	set.Put(policy.NewDisabled([]string{"s42"}))
	if n := built(); n != int64(len(scopes)) {
		t.Errorf("after a server was disabled: %d filters built, want %d (one per scope)", n, len(scopes))
	}
}
