package live

import (
	"testing"

	"github.com/toolgate/toolgate/index/catalog"
)

// Known finds a served tool by server and name, across servers whose names
// start one another (their IDs sort by the byte after the shorter one).
func TestKnown(t *testing.T) {
	cur := []catalog.Tool{
		{Server: "db", Name: "query", Description: "db query"},
		{Server: "db", Name: "z"},
		{Server: "db2", Name: "a", Description: "db2 a"},
		{Server: "db_x", Name: "a"},
	}
	catalog.SortByID(cur)
	l := &Loop{current: cur}
	for _, tc := range []struct {
		server, name string
		ok           bool
	}{{"db", "query", true}, {"db2", "a", true}, {"db_x", "a", true}, {"db", "a", false}, {"db3", "a", false}, {"", "query", false}} {
		k, ok := l.Known(tc.server, tc.name)
		if ok != tc.ok || ok && (k.Server != tc.server || k.Name != tc.name) {
			t.Errorf("Known(%q, %q) = %s, %v; want found %v", tc.server, tc.name, k.ID(), ok, tc.ok)
		}
	}
}
