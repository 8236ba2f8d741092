package gateway

import (
	"fmt"
	"slices"
	"strings"

	"github.com/toolgate/toolgate/gateway/keys"
	"github.com/toolgate/toolgate/gateway/policy"
	"github.com/toolgate/toolgate/internal/oneline"
	"github.com/toolgate/toolgate/internal/plural"
)

// maxReachReasons is how many of the rules' reasons reachesNone names.
const maxReachReasons = 1

// reachesNone says why caller c reaches no tool of the catalog, so that no
// search of its can find one (a key whose profile the config lost, a key
// and a route's profile that share no tool, the one server of a key's
// scope disabled, a session's profile a reload removed); "" when it
// reaches one, or the catalog is empty. The reasons are execute_tool's
// (the policy's): those of the key's scope say the same whatever the
// tool, so they name nothing outside it. A session that activated its
// profile itself keeps the tools that switch profiles (policy.ProfileTools);
// they do not count as reaching a tool here. What the caller's scope
// reaches is kept per catalog (policy.Set.Reach): a key and a route that
// share no tool paid 67–90 ms at each search of 50,000 tools, each tool's
// refusal put in words.
func (g *Gateway) reachesNone(c *policy.Caller) string {
	if g.opts.Policy == nil || g.searcher == nil {
		return ""
	}
	ok, refused, more := g.opts.Policy.Reach(c, g.catalog())
	if ok || len(refused) == 0 {
		return ""
	}
	var fromKey, others []string // distinct reasons, of the key's scope and of the other rules
	for _, d := range refused {
		if d.Rule == keys.RuleName {
			fromKey = append(fromKey, d.Reason)
		} else {
			others = append(others, d.Reason)
		}
	}
	// Servers of its own that never listed their tools (still connecting,
	// down): they are why, not its profile or scope, and a search once
	// one is up finds its tools. Those outside its rules stay unnamed
	// (downServers).
	if down := g.downServers(c, ""); len(down) > 0 {
		return notUpYet(down)
	}
	var why []string
	switch {
	case len(others) > 0:
		why = others[:min(len(others), maxReachReasons)]
		if n := len(others) + more - len(why); n > 0 {
			why = append(why, plural.Of(n, "more tool")+" likewise")
		}
		if len(fromKey) > 0 {
			why = append(why, fmt.Sprintf("the API key %q lacks access to the other tools", c.Key.Name))
		}
	case !slices.ContainsFunc(fromKey, func(r string) bool { return !keys.IsLacksAccess(r, c.Key.Name) }): // outside its profile or globs
		why = []string{fmt.Sprintf("the API key %q lacks access to every tool of the servers connected now", c.Key.Name)}
	default: // what the key says of itself (its profile is gone), not "lacks access to this tool"
		why = slices.DeleteFunc(fromKey, func(r string) bool { return keys.IsLacksAccess(r, c.Key.Name) })
	}
	return "this caller reaches no tool, so no search can find one (other words will not help): " + strings.Join(why, "; ")
}

// notUpYet is reachesNone's reason when the caller's own servers down
// (downServers) never listed their tools: each one's state, and to try
// again.
func notUpYet(down []DownServer) string {
	names := make([]string, len(down))
	var why []string
	for i, d := range down {
		names[i] = d.Name
		if i < maxDownNamed {
			why = append(why, oneline.Cut(d.Reason, downReasonChars))
		}
	}
	if n := len(down) - len(why); n > 0 {
		why = append(why, plural.Of(n, "more server")+" likewise")
	}
	whose := "its server " + quoted(names) + " is"
	if len(down) > 1 {
		whose = "one of its servers (" + quoted(names) + ") is"
	}
	return fmt.Sprintf("this caller reaches no tool until %s up, so no search can find one now (other words will not help): %s; try again once it is up",
		whose, strings.Join(why, "; "))
}

// catalog is the searcher's tools, numbered by Options.Catalog when set,
// for what the policy keeps per catalog (policy.Set.Reach).
func (g *Gateway) catalog() policy.Tools {
	if g.opts.Catalog == nil {
		return g.searcher
	}
	return numberedTools{g.searcher, g.opts.Catalog}
}

// numberedTools is a catalog and its number.
type numberedTools struct {
	policy.Tools
	policy.CatalogNumberer
}

// maxDownNamed is how many down servers' reasons notUpYet says.
const maxDownNamed = 3

// reachesNoneScoped is reachesNone for a caller limited by a key or a
// profile, "" for one without (nil: the description every other client
// sees, which names the servers).
func (g *Gateway) reachesNoneScoped(c *policy.Caller) string {
	if c == nil || c.Key == nil && c.ProfileName() == "" {
		return ""
	}
	return g.reachesNone(c)
}
