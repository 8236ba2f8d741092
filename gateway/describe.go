package gateway

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolgate/toolgate/gateway/policy"
	"github.com/toolgate/toolgate/index/catalog"
	"github.com/toolgate/toolgate/internal/oneline"
	"github.com/toolgate/toolgate/internal/plural"
)

// Bounds of search_tools' description, which every client holds in its
// context with each request.
const (
	// MaxServerListChars caps the list of servers in the description; the
	// servers that do not fit are counted ("and 3 more").
	MaxServerListChars = 600
	// maxServerWords caps the few words said about one server.
	maxServerWords = 100
	// exampleTools is how many tool names describe a server that has no
	// description of its own.
	exampleTools = 3
)

// severalSteps is the task of several steps that search_tools' description
// gives as an example: each step is a part of the query (search.QueryParts,
// three words or more), so each is ranked on its own. "read notes.txt,
// then email it to Bob" was one part ("read notes.txt" is two words), so
// it was ranked whole.
const severalSteps = "read the file notes.txt, then email it to Bob"

// describeSearch is search_tools' description: what it does, and the
// servers behind the gateway, each with a few words (Options.Describe) or,
// failing those, a few of its tool names.
func (g *Gateway) describeSearch() string { return g.describeSearchFor(nil) }

// describeSearchFor is search_tools' description as caller c sees it: the
// servers of the tools it may run.
func (g *Gateway) describeSearchFor(c *policy.Caller) string {
	return g.describeSearchWhy(c, g.reachesNoneScoped(c))
}

// describeSearchWhy is describeSearchFor(c), given why c reaches no tool
// ("" when it reaches one: reachesNoneScoped).
func (g *Gateway) describeSearchWhy(c *policy.Caller, why string) string {
	var b strings.Builder
	b.WriteString("Find the tools that can do a task")
	if why != "" {
		b.WriteString(", but " + why + ".")
	} else if list := g.serverListFor(c); list != "" {
		b.WriteString(", across the MCP servers behind this gateway: ")
		b.WriteString(list)
		b.WriteString(".")
	} else {
		b.WriteString(", across every connected MCP server.")
	}
	b.WriteString(" Describe the task in plain words (e.g. \"list the files in a directory\");" +
		" a task of several steps can be sent whole (\"" + severalSteps + "\", each step in three words or more): each step's tools come up." +
		" Returns the best matches first, each with its name (server__tool), description and arguments;" +
		" then call execute_tool with one of those names.")
	return b.String()
}

// serverList renders the servers that have tools in the catalog, in name
// order, within MaxServerListChars.
func (g *Gateway) serverList() string { return g.serverListFor(nil) }

// serverListFor is serverList as caller c sees it (nil: a client without
// profile or key).
func (g *Gateway) serverListFor(c *policy.Caller) string {
	if g.searcher == nil {
		return ""
	}
	byServer := map[string][]string{}
	var servers []string
	// The servers the caller sees: not those disabled, nor those a reload
	// removed, nor those outside its profile or key scope.
	for _, id := range g.visibleIDs(c) {
		s, tool, err := catalog.SplitID(id)
		if err != nil {
			continue
		}
		if _, ok := byServer[s]; !ok {
			servers = append(servers, s)
		}
		byServer[s] = append(byServer[s], tool)
	}
	slices.Sort(servers)
	// Room kept for "; and N more" while more servers follow.
	const moreRoom = len("; and 9999 more")
	var b strings.Builder
	n := 0 // runes in b
	for i, s := range servers {
		sep := ""
		if i > 0 {
			sep = "; "
		}
		entry := sep + g.describeServer(s, byServer[s])
		room := MaxServerListChars
		if i < len(servers)-1 {
			room -= moreRoom
		}
		if k := utf8.RuneCountInString(entry); n+k <= room {
			b.WriteString(entry)
			n += k
			continue
		}
		fmt.Fprintf(&b, "%sand %d more", sep, len(servers)-i)
		break
	}
	return b.String()
}

// describeServer is one entry of the list: "name (N tools): a few words",
// or "name (N tools: a, b, c, …)" when nothing describes the server.
func (g *Gateway) describeServer(server string, tools []string) string {
	n := plural.Of(len(tools), "tool")
	words := ""
	if g.opts.Describe != nil {
		words = oneline.Cut(g.opts.Describe(server), maxServerWords)
	}
	if words != "" {
		return fmt.Sprintf("%s (%s): %s", server, n, words)
	}
	slices.Sort(tools)
	ex := strings.Join(tools[:min(len(tools), exampleTools)], ", ")
	if len(tools) > exampleTools {
		ex += ", …"
	}
	return fmt.Sprintf("%s (%s: %s)", server, n, ex)
}

// Refresh brings search_tools' description up to date with the servers
// behind the gateway and what is known of them. When it changed, the tool
// is registered again, and go-sdk sends notifications/tools/list_changed to
// the connected clients (the tool's name never changes). Call it whenever
// the set of servers or the catalog changes: after a config reload, after a
// re-index is swapped in. It is cheap when nothing changed.
func (g *Gateway) Refresh() {
	g.args.Clear()
	g.descMu.Lock()
	defer g.descMu.Unlock()
	d := g.describeSearch()
	if d == g.desc {
		return
	}
	g.desc = d
	g.scopedDescs.Clear()
	g.scopedCount.Store(0)
	g.addSearchTool()
	g.log.Debug("search_tools description changed; clients are told (tools/list_changed)", "chars", utf8.RuneCountInString(d))
}

// addSearchTool (re)registers search_tools with g.desc; go-sdk then sends
// notifications/tools/list_changed to the sessions connected (debounced).
// g.descMu is held.
func (g *Gateway) addSearchTool() {
	lim := g.limits.Load()
	g.server.AddTool(searchTool(lim.def, lim.max, g.desc), g.traced(SearchToolName, g.audited(SearchToolName, g.handleSearch)))
}

// seenDescription is search_tools' description as caller c sees it in
// tools/list (see scopedTools).
func (g *Gateway) seenDescription(c *policy.Caller) string {
	if g.opts.Policy == nil || c == nil || c.Key == nil && c.ProfileName() == "" {
		g.descMu.Lock()
		defer g.descMu.Unlock()
		return g.desc
	}
	return g.scopedDescription(c)
}

// profileSwitches tells a session whose profile a tools/call changed
// (toolgate__activate_profile, over stdio) that its tools changed when
// the search_tools description it sees is no longer the one it listed:
// the description names the servers of the profile, and a client keeps
// the copy of its last tools/list. go-sdk v1.8.0 has no notification to
// one session, so search_tools is registered again, which tells every
// connected session (over stdio there is one; the others list the same
// tools again).
func (g *Gateway) profileSwitches(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		c := policy.CallerFrom(ctx)
		if method != "tools/call" || c == nil || c.Session == nil {
			return next(ctx, method, req)
		}
		before := c.ProfileName()
		res, err := next(ctx, method, req)
		if now := c.ProfileName(); now != before {
			was := *c
			was.Session = policy.NewSession(before, false)
			if g.seenDescription(&was) != g.seenDescription(c) {
				g.descMu.Lock()
				g.addSearchTool()
				g.descMu.Unlock()
				g.log.Debug("the session's profile changed its search_tools description; the client is told (tools/list_changed)", "from", before, "to", now)
			}
		}
		return res, err
	}
}

// scopedTools answers tools/list with search_tools' description as the
// caller sees it when a profile or an API key limits what it sees: the
// description lists the servers behind the gateway, and a key must learn
// nothing of those outside its scope (README, Security). Such an answer
// is marked cacheScope "private" (protocol 2026-07-28): it is this
// caller's. Everyone else gets the registered description.
func (g *Gateway) scopedTools(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		res, err := next(ctx, method, req)
		if err != nil || method != "tools/list" || g.opts.Policy == nil {
			return res, err
		}
		c := policy.CallerFrom(ctx)
		lr, ok := res.(*mcp.ListToolsResult)
		if !ok || c == nil || c.Key == nil && c.ProfileName() == "" {
			return res, err
		}
		out := *lr
		out.Tools = slices.Clone(lr.Tools)
		for i, t := range out.Tools {
			if t.Name == SearchToolName {
				scoped := *t
				scoped.Description = g.scopedDescription(c)
				out.Tools[i] = &scoped
			}
		}
		out.CacheScope = "private"
		return &out, nil
	}
}

// maxScopedDescs bounds the descriptions kept for scoped callers.
const maxScopedDescs = 256

// scopedDescription is describeSearchFor(c), kept per search filter (one
// per caller scope and set of rules) until the catalog changes (Refresh).
// Why a caller reaches no tool is said anew to each: it names the
// caller's key, and keys of the same scope share a filter (a key was
// told another's name); the policy keeps what it needs per scope and
// catalog (policy.Set.Reach).
func (g *Gateway) scopedDescription(c *policy.Caller) string {
	why := g.reachesNoneScoped(c)
	if why != "" {
		return g.describeSearchWhy(c, why)
	}
	f := g.filter(c)
	if d, ok := g.scopedDescs.Load(f); ok {
		return d.(string)
	}
	d := g.describeSearchWhy(c, "")
	if g.scopedCount.Add(1) > maxScopedDescs { // rules changed many times since the last Refresh
		g.scopedDescs.Clear()
		g.scopedCount.Store(1)
	}
	g.scopedDescs.Store(f, d)
	return d
}
