package gateway

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolgate/toolgate/index"
)

func TestCatalogWithPersisted(t *testing.T) {
	live := map[string][]*mcp.Tool{"eager": {{Name: "now", Description: "live"}}}
	persisted := []index.Tool{
		{Server: "eager", Name: "old", Description: "stale: eager listed in this run"},
		{Server: "lazy", Name: "b", Description: "persisted"},
		{Server: "lazy", Name: "a", Description: "persisted"},
		{Server: "gone", Name: "x", Description: "no longer configured"},
	}
	lazy := func(s string) bool { return s == "lazy" || s == "eager" }
	got := CatalogWithPersisted(live, persisted, lazy)
	var ids []string
	for _, t := range got {
		ids = append(ids, t.ID()+": "+t.Description)
	}
	want := []string{"eager__now: live", "lazy__a: persisted", "lazy__b: persisted"}
	if diff := cmp.Diff(want, ids); diff != "" {
		t.Errorf("catalog (-want +got):\n%s", diff)
	}
	if got := CatalogWithPersisted(live, persisted, nil); len(got) != 1 {
		t.Errorf("nil keep: %d tools, want only the live one", len(got))
	}
}
