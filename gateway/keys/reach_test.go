package keys

import (
	"fmt"
	"strings"
	"testing"

	"github.com/toolgate/toolgate/gateway/policy"
)

// numbered is a catalog numbered as live.Loop numbers its catalogs.
type numbered struct {
	policy.Tools
	gen uint64
}

func (n *numbered) CatalogGeneration() uint64 { return n.gen }

// TestReachKeptPerScope: why a key that shares no tool with its route's
// profile reaches none (search_tools after a search that found nothing,
// and its description at each tools/list) is looked for once per scope
// and catalog: the next key of the same scope asks no rule again, and is
// named in the words itself. The key scope's refusal is said once, not
// once per tool, and the profile's per-tool refusals are counted past the
// first few.
func TestReachKeptPerScope(t *testing.T) {
	set, count, ix, _ := sharedGateway(t)
	tools := &numbered{Tools: ix, gen: 1}
	caller := func(name string) *policy.Caller {
		return &policy.Caller{Transport: policy.TransportHTTP, Profile: "p1", Key: Entry{Name: name, Profile: "p3"}.Caller()}
	}
	look := func(name string) (asked int64, refused []policy.Decision, more int) {
		t.Helper()
		before := count.calls.Load()
		ok, refused, more := set.Reach(caller(name), tools)
		if ok {
			t.Fatalf("key %s of p3 on p1's route reaches a tool", name)
		}
		return count.calls.Load() - before, refused, more
	}
	asked, refused, more := look("k3")
	if asked != int64(ix.Len()) {
		t.Errorf("first look asked %d tools, want the catalog's %d", asked, ix.Len())
	}
	fromKey := 0
	for _, d := range refused {
		if d.Rule == RuleName {
			fromKey++
			if d.Reason != OutsideProfile("k3", "p3") {
				t.Errorf("the key's refusal: %q", d.Reason)
			}
		}
	}
	// p3's 30 tools are refused by p1's profile, each in words of its own.
	if fromKey != 1 || len(refused) != 1+4 || more != 30-4 {
		t.Errorf("refusals %d (%d of the key's), %d more; want the key's once, 4 of the profile's and 26 more:\n%+v", len(refused), fromKey, more, refused)
	}
	for _, name := range []string{"k3", "k7"} {
		asked, refused, _ := look(name)
		if asked != 0 {
			t.Errorf("key %s of the same scope: %d tools asked again", name, asked)
		}
		if !strings.Contains(fmt.Sprint(refused), fmt.Sprintf("%q", name)) || name != "k3" && strings.Contains(fmt.Sprint(refused), `"k3"`) {
			t.Errorf("key %s is told: %+v", name, refused)
		}
	}
	tools.gen = 2 // a new catalog
	if asked, _, _ := look("k7"); asked != int64(ix.Len()) {
		t.Errorf("a new catalog: %d tools asked, want %d", asked, ix.Len())
	}
}
