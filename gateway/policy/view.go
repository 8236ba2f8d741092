package policy

import (
	"context"
	"slices"

	"github.com/toolgate/toolgate/index/catalog"
	"github.com/toolgate/toolgate/search"
)

// Searcher is a catalog that ranks and lists tools (live.Loop, a
// search.Engine).
type Searcher interface {
	Search(ctx context.Context, q search.Query) (search.Result, error)
	Tool(id string) (catalog.Tool, bool)
	IDs() []string
}

var _ Searcher = (*View)(nil)

// View is a Searcher as one caller sees it through a Set: its searches
// filtered with the caller's filter, its lookups and listing left without
// the tools the caller may not see. The web console shows the catalog
// through the view of a caller without profile or key, so that it shows
// what search_tools would.
type View struct {
	s      Searcher
	set    *Set
	caller *Caller
}

// NewView returns s as c sees it through set (a nil c: a caller without
// profile, session or key).
func NewView(s Searcher, set *Set, c *Caller) *View { return &View{s: s, set: set, caller: c} }

// Search ranks the tools the caller may see (a filter already in q is
// replaced).
func (v *View) Search(ctx context.Context, q search.Query) (search.Result, error) {
	q.Filter = v.set.Filter(v.caller)
	return v.s.Search(ctx, q)
}

// Tool looks up a tool the caller may see.
func (v *View) Tool(id string) (catalog.Tool, bool) {
	t, ok := v.s.Tool(id)
	if !ok || !v.set.Allowed(v.caller, t) {
		return catalog.Tool{}, false
	}
	return t, true
}

// IDs lists the tools the caller may see.
func (v *View) IDs() []string {
	return slices.DeleteFunc(v.s.IDs(), func(id string) bool {
		_, ok := v.Tool(id)
		return !ok
	})
}
