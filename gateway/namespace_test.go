package gateway

import (
	"testing"

	"github.com/toolgate/toolgate/gateway/config"
	"github.com/toolgate/toolgate/index/catalog"
)

// FuzzNamespaceRoundTrip checks the namespacing contract end to end: any
// server name the config accepts, joined with any tool name, splits back
// into the same pair — so two configured servers can never shadow each
// other's tools.
func FuzzNamespaceRoundTrip(f *testing.F) {
	for _, s := range [][2]string{
		{"memory", "create_entities"}, {"a", "b__c"}, {"s-1", "__x"}, {"x_", "y"}, {"x", "_y"}, {"srv", "名前"}, {"A9-z", "-"},
	} {
		f.Add(s[0], s[1])
	}
	f.Fuzz(func(t *testing.T, server, tool string) {
		if !config.ValidName(server) || tool == "" {
			t.Skip()
		}
		id := catalog.JoinID(server, tool)
		s, tl, err := catalog.SplitID(id)
		if err != nil || s != server || tl != tool {
			t.Fatalf("server %q, tool %q → %q → server %q, tool %q, err %v", server, tool, id, s, tl, err)
		}
	})
}
