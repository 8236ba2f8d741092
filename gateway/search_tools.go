package gateway

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/tidwall/gjson"
	"github.com/tidwall/sjson"

	"github.com/toolgate/toolgate/gateway/backend"
	"github.com/toolgate/toolgate/gateway/live"
	"github.com/toolgate/toolgate/gateway/policy"
	"github.com/toolgate/toolgate/index/catalog"
	"github.com/toolgate/toolgate/internal/oneline"
	"github.com/toolgate/toolgate/internal/plural"
	"github.com/toolgate/toolgate/search"
)

// SearchResult is search_tools' structuredContent.
type SearchResult struct {
	Tools []FoundTool `json:"tools"`
	// Mode is the ranking that produced the list: "hybrid", "bm25", "vector"
	// or "rrf". It reads "bm25" when semantic ranking is unavailable.
	Mode string `json:"mode"`
	// NoMatch says that no tool fits the query well enough (no hit reaches
	// the configured minConfidence): Tools are then at most the few
	// closest, all weak.
	NoMatch bool `json:"noMatch,omitempty"`
	// DownServers, with NoMatch or no tools, are the servers whose tools
	// cannot be searched: they never listed them and cannot run now (a
	// command not found, a variable not set, still connecting, …), or
	// they are disabled at run time and have a tool that fits the query
	// (disabledFitting). To a caller limited by a profile or an API key's
	// scope, only the servers of its own profile or scope.
	DownServers []DownServer `json:"downServers,omitempty"`
	// statusHint is where the caller learns more of DownServers
	// (policy.StatusHint); "" = toolgate__server_status.
	statusHint string
	// disabled is how many of DownServers, the last ones, are disabled
	// servers (disabledFitting) rather than ones that never listed.
	disabled int
}

// DownServer is a server whose tools search cannot find, and why.
type DownServer struct {
	Name   string `json:"name"`
	Reason string `json:"reason"`
}

// noMatchTools is how many of the closest tools a noMatch answer lists.
const noMatchTools = 3

// FoundTool is one search_tools hit: the backend tool's whole definition
// (name, title, description, input schema, annotations) and its score.
type FoundTool struct {
	Name        string          `json:"name"` // server__tool, what execute_tool takes
	Server      string          `json:"server"`
	Title       string          `json:"title,omitempty"`
	Description string          `json:"description"`
	InputSchema json.RawMessage `json:"inputSchema"`
	// Annotations are the backend tool's annotations as it declared them
	// (readOnlyHint, destructiveHint, idempotentHint, openWorldHint,
	// title); absent when it declared none.
	Annotations json.RawMessage `json:"annotations,omitempty"`
	// OutputSchema is the backend tool's outputSchema (what its
	// structuredContent holds), in a "detail": "full" answer only and
	// when it declares one: an agent planning several steps reads what a
	// tool returns, a compact answer is sized for a model's context. The
	// quarantine scans and pins it as it does the input schema.
	OutputSchema json.RawMessage `json:"outputSchema,omitempty"`
	Score        float64         `json:"score"`
	Keyword      float64         `json:"keyword"`
	Vector       float64         `json:"vector"`
	// Confidence is an absolute estimate, 0 to 1, that the tool does what
	// the query asks (Score only ranks the tools against each other).
	Confidence float64 `json:"confidence"`
	// Clause, when set, is the part of a request of several steps that
	// found the tool (search/steps.go): Score, Keyword and Vector are then
	// that part's. Absent for tools the whole query found.
	Clause string `json:"clause,omitempty"`
	// Unavailable, when set, says why the tool cannot run right now (its
	// server is still connecting, or down); it is absent for usable tools.
	Unavailable string `json:"unavailable,omitempty"`
}

// Values of search_tools' "detail" argument.
const (
	DetailCompact = "compact" // name, marks, one line, argument signature (the default)
	DetailFull    = "full"    // compact plus each tool's title, input schema and output schema (JSON)
)

// searchArgs are search_tools' arguments once checked.
type searchArgs struct {
	Query    string
	Limit    int
	Server   string
	ReadOnly bool
	Detail   string
}

// searchArgNames are the arguments search_tools accepts, in the order its
// errors list them.
var searchArgNames = []string{"query", "limit", "server", "readOnly", "detail"}

// searchTool is search_tools' definition. Its input schema keeps to the
// subset of JSON Schema every model provider takes through its framework's
// converter (TestTwoToolsFitProviderSchemas): no "additionalProperties"
// (google-genai's MCP path failed on the boolean; unknown arguments are an
// isError naming them all the same), and each optional argument has a value
// that means "left out", for a strict mode that makes every one required.
func searchTool(defLimit, maxLimit int, description string) *mcp.Tool {
	return &mcp.Tool{
		Name:        SearchToolName,
		Title:       "Search tools",
		Description: description,
		InputSchema: json.RawMessage(fmt.Sprintf(`{
  "type": "object",
  "properties": {
    "query": {"type": "string", "description": "What you want to do, in natural language."},
    "limit": {"type": "integer", "minimum": 1, "maximum": %d, "default": %d, "description": "How many tools to return."},
    "server": {"type": "string", "description": "Only return tools of this server; \"\" for all servers."},
    "readOnly": {"type": "boolean", "default": false, "description": "Only return tools that declare readOnlyHint: true (they change nothing)."},
    "detail": {"type": "string", "enum": ["compact", "full"], "default": "compact", "description": "compact: one line and the argument names per tool; full: also each tool's input and output schemas (JSON)."}
  },
  "required": ["query"]
}`, maxLimit, defLimit)),
		OutputSchema: json.RawMessage(`{
  "type": "object",
  "properties": {
    "tools": {"type": "array", "items": {"type": "object", "properties": {
      "name": {"type": "string"}, "server": {"type": "string"}, "title": {"type": "string"}, "description": {"type": "string"},
      "inputSchema": {"type": "object"},
      "annotations": {"type": "object", "description": "The tool's annotations as its server declared them (readOnlyHint, destructiveHint, idempotentHint, openWorldHint)."},
      "outputSchema": {"type": "object", "description": "With detail full, when the tool declares one: the schema of its structuredContent."},
      "score": {"type": "number"}, "keyword": {"type": "number"}, "vector": {"type": "number"},
      "confidence": {"type": "number", "description": "Absolute estimate, 0 to 1, that the tool does what the query asks."},
      "clause": {"type": "string", "description": "Present when the query asks for several things and the tool was found for one of them: that part of the query (score, keyword and vector are then that part's)."},
      "unavailable": {"type": "string", "description": "Present when the tool cannot run right now, with the reason."}},
      "required": ["name", "server", "description", "inputSchema", "score", "keyword", "vector", "confidence"]}},
    "mode": {"type": "string", "enum": ["hybrid", "bm25", "vector", "rrf"]},
    "noMatch": {"type": "boolean", "description": "True when no tool fits the query: the tools listed are only the closest, all weak."},
    "downServers": {"type": "array", "description": "With noMatch or no tools: servers whose tools cannot be searched now (they never listed them and cannot run, or are disabled and have a tool that fits), with why.",
      "items": {"type": "object", "properties": {"name": {"type": "string"}, "reason": {"type": "string"}}, "required": ["name", "reason"]}}
  },
  "required": ["tools", "mode"]
}`),
		Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true, OpenWorldHint: boolPtr(false)},
	}
}

func boolPtr(b bool) *bool { return &b }

// parseSearchArgs checks search_tools' arguments; a non-empty message is
// the isError text that says what to send instead.
func (g *Gateway) parseSearchArgs(c *policy.Caller, raw json.RawMessage) (searchArgs, string) {
	lim := g.limits.Load()
	a := searchArgs{Limit: lim.def, Detail: DetailCompact}
	var m map[string]json.RawMessage
	if err := decodeArgs(raw, &m); err != nil {
		return a, fmt.Sprintf(`search_tools: arguments must be an object like {"query": "list files in a directory", "limit": 5}: %v`, err)
	}
	var unknown []string
	for k := range m {
		if !slices.Contains(searchArgNames, k) {
			unknown = append(unknown, k)
		}
	}
	if len(unknown) > 0 {
		slices.Sort(unknown)
		return a, fmt.Sprintf(`search_tools: unknown argument %s. It accepts: "query" (string, required), "limit" (1 to %d, default %d), "server" (a server name), "readOnly" (true: only tools that change nothing), "detail" ("compact" or "full").`,
			quoted(unknown), lim.max, lim.def)
	}
	if v, ok := m["query"]; ok && json.Unmarshal(v, &a.Query) != nil {
		return a, fmt.Sprintf(`search_tools: "query" must be a string describing the task, e.g. {"query": "create a GitHub issue"}; got %s.`, oneline.Cut(string(v), 60))
	}
	if strings.TrimSpace(a.Query) == "" {
		return a, `search_tools needs a non-empty "query": describe the task in a few words, e.g. {"query": "create a GitHub issue"}.`
	}
	if v, ok := m["limit"]; ok && string(v) != "null" {
		// A number with no fraction is a whole one (JSON Schema's
		// "integer" takes 2.0 too), and so is one in a string ("3"), as
		// models send them.
		var n json.Number
		f, err := 0.0, json.Unmarshal(v, &n)
		if err == nil {
			f, err = n.Float64()
		}
		if err != nil || f < 1 || f != math.Trunc(f) {
			return a, fmt.Sprintf(`search_tools: "limit" must be a whole number from 1 to %d, got %s.`, lim.max, oneline.Cut(string(v), 30))
		}
		a.Limit = int(min(f, float64(lim.max)))
	}
	if v, ok := m["server"]; ok && string(v) != "null" && json.Unmarshal(v, &a.Server) != nil {
		return a, fmt.Sprintf(`search_tools: "server" must be a server name (a string), got %s. Servers: %s.`, oneline.Cut(string(v), 30), strings.Join(g.servers(c), ", "))
	}
	if v, ok := m["readOnly"]; ok && string(v) != "null" {
		// "true" and "false" in a string too, as "limit" takes "3".
		switch string(v) {
		case `"true"`:
			a.ReadOnly = true
		case `"false"`:
			a.ReadOnly = false
		default:
			if json.Unmarshal(v, &a.ReadOnly) != nil {
				return a, fmt.Sprintf(`search_tools: "readOnly" must be true or false, got %s.`, oneline.Cut(string(v), 30))
			}
		}
	}
	if v, ok := m["detail"]; ok && string(v) != "null" {
		// In any case and with space around it ("Full", " full "), as
		// "server" and "readOnly" are read: one more call for a word the
		// model had right.
		err := json.Unmarshal(v, &a.Detail)
		if a.Detail = strings.ToLower(strings.TrimSpace(a.Detail)); err != nil || a.Detail != DetailCompact && a.Detail != DetailFull {
			return a, fmt.Sprintf(`search_tools: "detail" must be "compact" (the default: one line and the arguments per tool) or "full" (also each tool's input and output schemas), got %s.`, oneline.Cut(string(v), 30))
		}
	}
	// A server named with space around it, with the separator after it
	// ("github__", as IDs start), or in other case ("GitHub" for github)
	// or with "_" for "-" is that server when only one is
	// (catalog.ServersMeant); several are named.
	if a.Server != "" && !g.hasServer(c, a.Server) {
		switch meant := catalog.ServersMeant(a.Server, g.servers(c)); {
		case len(meant) == 1:
			a.Server = meant[0]
		case len(meant) > 1:
			return a, fmt.Sprintf(`search_tools: "server" %s.`, catalog.AmbiguousName(a.Server, meant))
		}
	}
	// A server that is down and never listed its tools exists: the search
	// finds none of them and says why (downServers).
	if a.Server != "" && !g.hasServer(c, a.Server) && len(g.downServers(c, a.Server)) == 0 {
		if why := g.disabledServer(c, a.Server); why != "" {
			return a, fmt.Sprintf(`search_tools: %s. Servers: %s. Leave "server" out to search them all.`, why, strings.Join(g.servers(c), ", "))
		}
		return a, fmt.Sprintf(`search_tools: there is no server named %q. Servers: %s. Leave "server" out to search them all.`,
			oneline.Echo(a.Server), strings.Join(g.servers(c), ", "))
	}
	return a, ""
}

// quoted renders names as "a", "b".
//
// Names a caller chose (arguments it made up) are said back bounded: each
// cut to oneline.EchoRunes, and at most maxQuoted of them ("and 9990
// more").
func quoted(names []string) string {
	q := make([]string, 0, min(len(names), maxQuoted)+1)
	for i, n := range names {
		if i == maxQuoted {
			q = append(q, fmt.Sprintf("and %d more", len(names)-i))
			break
		}
		q = append(q, strconv.Quote(oneline.Echo(n)))
	}
	return strings.Join(q, ", ")
}

// maxQuoted is how many names quoted lists.
const maxQuoted = 10

func (g *Gateway) handleSearch(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	noteOf(ctx).raw = req.Params.Arguments
	caller := policy.CallerFrom(ctx)
	a, msg := g.parseSearchArgs(caller, req.Params.Arguments)
	if msg != "" {
		if why := g.reachesNone(caller); why != "" { // no "server" or words will do
			return g.reachNoTool(ctx, why), nil
		}
		return toolError("%s", msg), nil
	}
	out, err := g.search(ctx, a)
	if err == nil && (len(out.Tools) == 0 || out.NoMatch) {
		// Looked for only then: a search that finds a tool reaches one.
		if why := g.reachesNone(caller); why != "" {
			return g.reachNoTool(ctx, why), nil
		}
	}
	if errors.Is(err, search.ErrEmptyQuery) {
		return toolError(`search_tools needs a non-empty "query": describe the task in a few words.`), nil
	}
	if errors.Is(context.Cause(ctx), ErrStopping) {
		return toolError("search_tools: the gateway is stopping. Retry once it runs again."), nil
	}
	if be := (*live.BuildingError)(nil); errors.As(err, &be) {
		// A cold start's first index, built while the client is served.
		return toolError("search_tools: %v.", be), nil
	}
	if err != nil && ctx.Err() != nil {
		// The client cancelled the call, or went away (a stdio client
		// that left mid-answer): no fault of the search, and no one
		// reads the answer.
		g.log.Debug("search cancelled by the client", "query", a.Query, "err", err)
		return toolError("search_tools: the call was cancelled: %v.", err), nil
	}
	if err != nil {
		g.log.Error("search failed", "query", a.Query, "err", err)
		why := err.Error() // may name the index's or a model's file
		if caller.Scoped() {
			why = backend.ErrForKey(err)
		}
		return toolError("search_tools failed: %s. Try again; if it keeps failing, the gateway's log says why.", why), nil
	}
	if g.recent != nil {
		ids := make([]string, len(out.Tools))
		for i, t := range out.Tools {
			ids[i] = t.Name
		}
		g.recent.searched(sessionKey(ctx, req), a.Query, ids)
	}
	// An input schema over catalog.MaxSchemaShown goes whole only into a
	// full answer of its tool alone (wholeSchemaCall); in any other its
	// stand-in, which says how to ask for that.
	whole := a.Detail == DetailFull && len(out.Tools) == 1
	if a.Detail == DetailFull && !whole {
		// Before the text, which shows the schemas as they go.
		standIn(&out)
	}
	txt := renderSearch(a, out, g.argCounts)
	if out.NoMatch || len(out.Tools) == 0 {
		// A tool ID of a server that is not here ("github__create_issue"):
		// rewording will not find it.
		if names := g.foreignServers(caller, a.Query); len(names) > 0 {
			txt += fmt.Sprintf("\nThe query names a tool of %s, which this gateway does not have (its servers: %s): say so rather than rephrase.",
				strings.Join(names, ", "), oneline.Cut(strings.Join(g.servers(caller), ", "), 300))
		}
	}
	if a.Detail != DetailFull {
		// After the text: its argument line reads the whole schema.
		standIn(&out)
	}
	return &mcp.CallToolResult{
		Content:           []mcp.Content{&mcp.TextContent{Text: txt}},
		StructuredContent: out,
	}, nil
}

// idInText matches what reads as a tool ID in a query: server__tool.
var idInText = regexp.MustCompile(`\b([A-Za-z0-9][A-Za-z0-9-]*?)__[A-Za-z0-9]`)

// foreignServers are the servers (quoted) that tool IDs in query name and
// that the caller has none of, at most three.
func (g *Gateway) foreignServers(c *policy.Caller, query string) []string {
	var out []string
	for _, m := range idInText.FindAllStringSubmatch(query, 10) {
		if q := strconv.Quote(oneline.Echo(m[1])); !g.hasServer(c, m[1]) && g.downServers(c, m[1]) == nil && !slices.Contains(out, q) && len(out) < 3 {
			out = append(out, q)
		}
	}
	if len(out) == 1 {
		out[0] = "server " + out[0]
	} else if len(out) > 1 {
		out[0] = "servers " + out[0]
	}
	return out
}

// reachNoTool is search_tools' answer to a caller that reaches no tool
// (reachesNone says why): the reason, not "try other words".
func (g *Gateway) reachNoTool(ctx context.Context, why string) *mcp.CallToolResult {
	noteOf(ctx).reason = why
	return toolError("search_tools: %s.", why)
}

// search ranks the tools for a. With readOnly it ranks deeper (up to
// MaxLimit) and keeps the read-only tools: the filter is applied to
// the ranking, not to the whole catalog, and noMatch says whether a
// read-only tool fits (search.Query.Keep).
func (g *Gateway) search(ctx context.Context, a searchArgs) (SearchResult, error) {
	caller := policy.CallerFrom(ctx)
	q := search.Query{Text: a.Query, Limit: a.Limit, Server: a.Server, Filter: g.filter(caller)}
	if a.ReadOnly {
		q.Limit = max(a.Limit, MaxLimit)
		q.Keep = catalog.Tool.ReadOnly
	}
	res, err := g.searcher.Search(ctx, q)
	if err != nil {
		return SearchResult{}, err
	}
	out := SearchResult{Tools: make([]FoundTool, 0, min(len(res.Hits), a.Limit)), Mode: string(res.Mode), NoMatch: res.NoMatch}
	limit := a.Limit
	if res.NoMatch {
		limit = min(limit, noMatchTools)
	}
	for _, h := range res.Hits {
		if len(out.Tools) == limit {
			break
		}
		if a.ReadOnly && !h.Tool.ReadOnly() {
			continue
		}
		out.Tools = append(out.Tools, FoundTool{
			Name:        h.Tool.ID(),
			Server:      h.Tool.Server,
			Title:       h.Tool.Title,
			Description: h.Tool.Description,
			InputSchema: schemaOrEmpty(h.Tool.InputSchema),
			Annotations: h.Tool.Annotations,
			Score:       round4(h.Score),
			Keyword:     round4(h.Keyword),
			Vector:      round4(h.Vector),
			Confidence:  round4(h.Confidence),
			Clause:      h.Clause,
			Unavailable: g.unavailable(caller, h.Tool.Server),
		})
		if a.Detail == DetailFull {
			out.Tools[len(out.Tools)-1].OutputSchema = h.Tool.OutputSchema
		}
	}
	if out.NoMatch || len(out.Tools) == 0 {
		disabled := g.disabledFitting(ctx, caller, a)
		out.DownServers, out.disabled = append(g.downServers(caller, a.Server), disabled...), len(disabled)
		out.statusHint = policy.StatusHint(g.opts.Policy, caller, "")
	}
	return out, nil
}

// disabledFitting are the servers disabled at run time, of those the
// caller's own rules show (as disabledServer reads them), that have a tool
// fitting a's query, with the disabled rule's words (how to enable them),
// as execute_tool of their tools says. A search for what only a disabled
// server does said that no tool fits and to rephrase: the model reworded
// a query for tools that were hidden, not missing. A disabled server
// whose tools do not fit is not named: it would invite enabling it for
// nothing.
func (g *Gateway) disabledFitting(ctx context.Context, c *policy.Caller, a searchArgs) []DownServer {
	if g.opts.Policy == nil || a.Server != "" {
		return nil
	}
	why := map[string]string{}
	for s := range g.listedServers() {
		if !g.opts.Policy.Sees(c, policy.AnyTool(s)) {
			continue
		}
		if d := g.opts.Policy.Decide(c, policy.AnyTool(s)); !d.Allowed && d.Rule == policy.RuleDisabled {
			why[s] = d.Reason
		}
	}
	if len(why) == 0 {
		return nil
	}
	q := search.Query{Text: a.Query, Limit: noMatchTools, Filter: search.NewFilter(func(t catalog.Tool) bool {
		_, disabled := why[t.Server]
		return disabled && g.opts.Policy.Sees(c, t)
	})}
	if a.ReadOnly {
		q.Limit, q.Keep = MaxLimit, catalog.Tool.ReadOnly
	}
	res, err := g.searcher.Search(context.WithValue(ctx, suggestionKey{}, true), q)
	if err != nil {
		return nil
	}
	var out []DownServer
	for _, h := range res.Hits {
		s := h.Tool.Server
		if !h.Fits || a.ReadOnly && !h.Tool.ReadOnly() || slices.ContainsFunc(out, func(d DownServer) bool { return d.Name == s }) {
			continue
		}
		out = append(out, DownServer{Name: s, Reason: why[s]})
	}
	return out
}

// downServers are the servers (only server, when set) whose tools are not
// in the catalog and that cannot run now. A caller limited by a key's
// scope or a profile is told of those its own rules let it see (a profile
// that lists the server, a key scoped to "server__*": policy.AnyTool),
// whose state is its to know, and of no server outside them.
func (g *Gateway) downServers(c *policy.Caller, server string) []DownServer {
	if g.opts.Servers == nil {
		return nil
	}
	limited := c != nil && (c.Key != nil && !c.ManagesAll() || c.ProfileName() != "")
	listed := g.listedServers()
	var out []DownServer
	for _, s := range g.opts.Servers() {
		if listed[s] || server != "" && s != server || limited && (g.opts.Policy == nil || !g.opts.Policy.Sees(c, policy.AnyTool(s))) {
			continue
		}
		if why := g.unavailable(c, s); why != "" {
			out = append(out, DownServer{Name: s, Reason: why})
		}
	}
	return out
}

// listedServers is a catalog's servers with a tool in it.
type listedServers struct {
	gen     uint64
	servers map[string]bool
}

// listedServers is the servers with a tool in the catalog, kept until it
// changes (Options.Catalog): downServers asks it at each search that
// finds nothing and each description of a caller that reaches no tool,
// and it read the 50,000 IDs of a large catalog each time (2–3 ms).
func (g *Gateway) listedServers() map[string]bool {
	var gen uint64
	if g.opts.Catalog != nil {
		gen = g.opts.Catalog.CatalogGeneration() // before the look: a catalog swapped meanwhile is newer
	}
	if k := g.listed.Load(); k != nil && gen != 0 && k.gen == gen {
		return k.servers
	}
	listed := map[string]bool{}
	for _, id := range g.searcher.IDs() {
		if s, _, err := catalog.SplitID(id); err == nil {
			listed[s] = true
		}
	}
	if gen != 0 {
		g.listed.Store(&listedServers{gen, listed})
	}
	return listed
}

// hints are the annotation fields search_tools reads.
type hints struct {
	ReadOnly    *bool `json:"readOnlyHint"`
	Destructive *bool `json:"destructiveHint"`
}

func parseHints(annotations json.RawMessage) hints {
	var h hints
	if len(annotations) > 0 {
		_ = json.Unmarshal(annotations, &h) // not an object: no hints
	}
	return h
}

// mark is the text mark of a tool: "read-only" when it declares
// readOnlyHint: true, "destructive" when it declares destructiveHint: true
// (and is not read-only), else "". Only what the tool declares is marked:
// the spec's default for a tool that says nothing is "may destroy", which
// would mark most tools.
func mark(annotations json.RawMessage) string {
	h := parseHints(annotations)
	switch {
	case h.ReadOnly != nil && *h.ReadOnly:
		return "read-only"
	case h.Destructive != nil && *h.Destructive:
		return "destructive"
	}
	return ""
}

func schemaOrEmpty(s json.RawMessage) json.RawMessage {
	if len(s) == 0 {
		return json.RawMessage(`{"type":"object"}`)
	}
	return s
}

func round4(f float64) float64 {
	return float64(int64(f*10000+0.5*sign(f))) / 10000
}

func sign(f float64) float64 {
	if f < 0 {
		return -1
	}
	return 1
}

// renderSearch is the text form of a search result. Compact: per tool a
// line with its name, marks and score, its description on one line (cut at
// compactDescChars), and its parameters (required ones marked *, optional
// ones while they fit), so a model can often call execute_tool without
// reading the schema. Full: per tool its name, marks and score breakdown,
// title, description (up to fullDescChars), input schema and output schema
// (when the tool declares one) as compact JSON.
// args says, per server, how many of its tools take each argument (see
// argCounts; nil: arguments in name order).
func renderSearch(a searchArgs, r SearchResult, args func(server string) map[string]int) string {
	var b strings.Builder
	only := ""
	if a.ReadOnly {
		only = "read-only "
	}
	if len(r.Tools) == 0 {
		fmt.Fprintf(&b, "No %stools match %q (mode %s). Try other words", only, oneline.Echo(a.Query), r.Mode)
		if a.Server != "" {
			b.WriteString(`, or leave out "server"`)
		}
		if a.ReadOnly {
			b.WriteString(`, or leave out "readOnly"`)
		}
		b.WriteString(".")
		writeDown(&b, r.DownServers, r.disabled, r.statusHint)
		return b.String()
	}
	if r.NoMatch {
		// The language of the descriptions below, which the agent reads:
		// "in English" was not so of a catalog in Japanese or German.
		fmt.Fprintf(&b, "No %stool fits %q well (mode %s). Rephrase the task in other words, in the language of the tools' descriptions below", only, oneline.Echo(a.Query), r.Mode)
		if a.Server != "" {
			b.WriteString(`, or leave out "server"`)
		}
		b.WriteString(". The closest tools, all weak matches:\n")
	} else {
		fmt.Fprintf(&b, "%d %s, best first (mode %s):\n", len(r.Tools), plural.Noun(len(r.Tools), only+"tool"), r.Mode)
	}
	said := map[string]int{} // unavailable reasons said, by the hit that said them
	for i, t := range r.Tools {
		weak := ""
		if r.NoMatch {
			weak = "WEAK "
		}
		fmt.Fprintf(&b, "%d. %s%s", i+1, weak, t.Name)
		if m := mark(t.Annotations); m != "" {
			fmt.Fprintf(&b, " [%s]", m)
		}
		if a.Detail == DetailFull {
			fmt.Fprintf(&b, "  score %.3f (keyword %.3f, vector %.3f), confidence %.2f", t.Score, t.Keyword, t.Vector, t.Confidence)
			if t.Clause != "" {
				fmt.Fprintf(&b, ", for %q", oneline.Cut(t.Clause, clauseChars))
			}
			b.WriteString("\n")
		} else {
			fmt.Fprintf(&b, "  confidence %.2f\n", t.Confidence)
		}
		if t.Unavailable != "" {
			// A server still connecting: its tools run, the call waits
			// for it. "UNAVAILABLE" over that reason put a model off the
			// tools of every server that had not connected yet, as they
			// are at a stdio client's first search.
			tag := "UNAVAILABLE"
			if strings.Contains(t.Unavailable, backend.CallWaits) {
				tag = "NOTE"
			}
			// Said once, on one line: a down server's reason may hold
			// the last lines of its stderr, under each of its tools.
			if first, ok := said[t.Unavailable]; ok {
				fmt.Fprintf(&b, "   %s: as %d.\n", tag, first)
			} else {
				said[t.Unavailable] = i + 1
				fmt.Fprintf(&b, "   %s: %s\n", tag, oneline.Cut(t.Unavailable, downReasonChars))
			}
		}
		if a.Detail == DetailFull {
			if t.Title != "" {
				fmt.Fprintf(&b, "   title: %s\n", oneline.Cut(t.Title, 120))
			}
			if d := oneline.Cut(t.Description, fullDescChars); d != "" {
				fmt.Fprintf(&b, "   %s\n", d)
			}
			fmt.Fprintf(&b, "   inputSchema: %s\n", shownSchema(t.InputSchema))
			if len(t.OutputSchema) > 0 {
				fmt.Fprintf(&b, "   outputSchema: %s\n", shownSchema(t.OutputSchema))
			}
			continue
		}
		if d := oneline.Cut(t.Description, compactDescChars); d != "" {
			fmt.Fprintf(&b, "   %s\n", d)
		}
		var shared map[string]int
		if args != nil {
			shared = args(t.Server)
		}
		if p := paramSummary(t.InputSchema, compactArgsChars, shared); p != "" {
			fmt.Fprintf(&b, "   args: %s\n", p)
		} else if takesNoArgs(t.InputSchema) {
			b.WriteString("   args: none\n")
		}
	}
	if r.NoMatch {
		b.WriteString("If one of them does fit after all, call ")
	} else {
		b.WriteString("Call ")
	}
	b.WriteString(`execute_tool with {"name": "<name above>", "arguments": {...}}.`)
	writeDown(&b, r.DownServers, r.disabled, r.statusHint)
	return b.String()
}

// writeDown adds to a search's text the servers whose tools it could not
// search, one line each, and where to learn more (hint, "" for
// toolgate__server_status).
func writeDown(b *strings.Builder, down []DownServer, disabled int, hint string) {
	down, off := down[:len(down)-disabled], down[len(down)-disabled:]
	for _, d := range off {
		fmt.Fprintf(b, "\nNot searched: %s; it has tools that fit this query.", oneline.Cut(d.Reason, downReasonChars))
	}
	// A server still connecting will list its tools: "cannot run now"
	// and "once one runs" told a model to give up on what a search a few
	// seconds later finds (a server that npx or uvx fetches first takes
	// that long at a cold start).
	var starting []DownServer
	down = slices.DeleteFunc(slices.Clone(down), func(d DownServer) bool {
		if strings.Contains(d.Reason, backend.CallWaits) {
			starting = append(starting, d)
			return true
		}
		return false
	})
	for _, d := range starting {
		why := strings.Replace(d.Reason, " ("+backend.CallWaits+")", "", 1)
		fmt.Fprintf(b, "\nNot searched yet: %s, and has not listed its tools: search again in a few seconds.", oneline.Cut(why, downReasonChars))
	}
	if len(down) == 0 {
		return
	}
	if len(down) == 1 {
		b.WriteString("\nNot searched: 1 server never listed its tools and cannot run now, so a tool of its cannot be found:\n")
	} else {
		fmt.Fprintf(b, "\nNot searched: %d servers never listed their tools and cannot run now, so a tool of theirs cannot be found:\n", len(down))
	}
	for _, d := range down {
		fmt.Fprintf(b, "- %s: %s\n", d.Name, oneline.Cut(d.Reason, downReasonChars))
	}
	fmt.Fprintf(b, "%s; once one runs, its tools are found.", cmp.Or(hint, policy.StatusHint(nil, nil, "")))
}

// downReasonChars bounds a down server's reason in search_tools' text.
const downReasonChars = 200

// Bounds of one tool's entry in the text, so that 10 results stay within
// about 1,000 tokens on catalogs with long descriptions and dozens of
// optional parameters (TestCompactTextTokenBudget). Full text has every
// parameter in its schema; structuredContent has everything.
const (
	compactDescChars = 130
	compactArgsChars = 90
	clauseChars      = 60 // full text: the step a tool was found for
	fullDescChars    = 1000
)

// compactJSON is raw without insignificant space (raw itself if it does not
// parse).
func compactJSON(raw json.RawMessage) string {
	var b bytes.Buffer
	if json.Compact(&b, raw) != nil {
		return string(raw)
	}
	return b.String()
}

// shownSchema is an input schema as a text a model reads shows it:
// compact, without its top-level "$schema" (the draft's URL, 50 bytes that
// tell a model nothing; structuredContent keeps the schema whole).
func shownSchema(raw json.RawMessage) string {
	c := compactJSON(raw)
	if gjson.Get(c, `\$schema`).Exists() {
		if out, err := sjson.Delete(c, `\$schema`); err == nil {
			return out
		}
	}
	return c
}

// paramSummary renders "path*: string, depth: integer" from an input
// schema: required parameters first (marked *), each while the line stays
// within requiredLines·max characters, then the optional ones while it
// stays within max, then "+N more" for those left out ("+N more, K
// required" when required ones are among them; max <= 0: no bound). Within
// each group the parameters that fewer of the server's tools take come
// first (shared: how many take each; nil: none counted), then by name: a
// tool's own arguments before those every tool of its server takes
// (azure-mcp's tenant, auth-method and five retry-* ones, which the name
// order listed first). A parameter's type is read through a local $ref
// and anyOf/oneOf (pydantic's nested models and optional fields: "request:
// object", "note: string|null").
func paramSummary(schema json.RawMessage, max int, shared map[string]int) string {
	var s struct {
		Properties  map[string]schemaType `json:"properties"`
		Required    []string              `json:"required"`
		Defs        map[string]schemaType `json:"$defs"`
		Definitions map[string]schemaType `json:"definitions"`
	}
	if json.Unmarshal(schema, &s) != nil || len(s.Properties) == 0 {
		return ""
	}
	defs := func(ref string) (schemaType, bool) {
		if name, ok := strings.CutPrefix(ref, "#/$defs/"); ok {
			d, ok := s.Defs[name]
			return d, ok
		}
		if name, ok := strings.CutPrefix(ref, "#/definitions/"); ok {
			d, ok := s.Definitions[name]
			return d, ok
		}
		return schemaType{}, false
	}
	required := make(map[string]bool, len(s.Required))
	for _, n := range s.Required {
		if _, ok := s.Properties[n]; ok {
			required[n] = true
		}
	}
	names := make([]string, 0, len(s.Properties))
	for n := range s.Properties {
		names = append(names, n)
	}
	// Required first, then the tool's own: the order a caller needs them.
	slices.SortFunc(names, func(a, b string) int {
		if ra, rb := required[a], required[b]; ra != rb {
			if ra {
				return -1
			}
			return 1
		}
		return cmp.Or(cmp.Compare(shared[a], shared[b]), strings.Compare(a, b))
	})
	var b strings.Builder
	listed := 0 // required ones listed
	for i, n := range names {
		typ := s.Properties[n].shape(defs)
		part := n + ": " + typ
		bound := max
		if required[n] {
			part, bound = n+"*: "+typ, requiredLines*max
		}
		if i > 0 {
			part = ", " + part
		}
		if max > 0 && b.Len()+len(part) > bound {
			fmt.Fprintf(&b, ", +%d more", len(names)-i)
			if k := len(required) - listed; k > 0 {
				fmt.Fprintf(&b, ", %d required", k)
			}
			break
		}
		if required[n] {
			listed++
		}
		b.WriteString(part)
	}
	return b.String()
}

// takesNoArgs says whether an input schema declares no argument at all (an
// object schema without properties, and without a way to take others), so
// the args line can say "none" rather than leave a model guessing.
func takesNoArgs(schema json.RawMessage) bool {
	var s struct {
		Type       any             `json:"type"`
		Properties map[string]any  `json:"properties"`
		Additional json.RawMessage `json:"additionalProperties"`
		Ref        string          `json:"$ref"`
		AnyOf      []any           `json:"anyOf"`
		OneOf      []any           `json:"oneOf"`
		AllOf      []any           `json:"allOf"`
	}
	if json.Unmarshal(schema, &s) != nil || s.Type != "object" || len(s.Properties) > 0 || s.Ref != "" ||
		len(s.AnyOf)+len(s.OneOf)+len(s.AllOf) > 0 {
		return false
	}
	return len(s.Additional) == 0 || string(s.Additional) == "false"
}

// requiredLines is how many times a compact argument line's bound the
// required parameters may fill: all of them in every schema of the dev
// catalogs, and not a thousand of them.
const requiredLines = 4

// schemaType is the part of a JSON schema that tells its type.
type schemaType struct {
	Type       any                 `json:"type"`
	Ref        string              `json:"$ref"`
	AnyOf      []schemaType        `json:"anyOf"`
	OneOf      []schemaType        `json:"oneOf"`
	AllOf      []schemaType        `json:"allOf"`
	Enum       []any               `json:"enum"`
	Properties map[string]struct{} `json:"properties"`
	Required   []string            `json:"required"`
	Items      json.RawMessage     `json:"items"`
}

// Bounds of what shape spells out: an enum's values, and the fields of an
// object (or of an array's items) one level down.
const (
	shapeEnumValues = 8
	shapeEnumChars  = 60
	shapeFieldChars = 50
)

// shape is the type of a parameter as paramSummary shows it: name's, but
// with what a first call most often gets wrong spelled out — the values of
// a short enum ("error"|"success"|"debug", not string), the fields of an
// object ({oldText*, newText*}, required ones marked) and the items of an
// array ([{oldText*, newText*}], [string]).
func (s schemaType) shape(defs func(ref string) (schemaType, bool)) string {
	s = s.resolved(defs)
	if vals := s.enumValues(); vals != "" {
		return vals
	}
	switch s.name(defs, 0) {
	case "object":
		if f := s.fields(); f != "" {
			return f
		}
	case "array":
		var item schemaType
		if len(s.Items) > 0 && json.Unmarshal(s.Items, &item) == nil {
			item = item.resolved(defs)
			if f := item.fields(); f != "" {
				return "[" + f + "]"
			}
			if vals := item.enumValues(); vals != "" {
				return "[" + vals + "]"
			}
			if n := item.name(defs, 0); n != "any" {
				return "[" + n + "]"
			}
		}
	}
	return s.name(defs, 0)
}

// resolved is s, or what its local $ref points to (followed up to
// maxRefDepth times).
func (s schemaType) resolved(defs func(ref string) (schemaType, bool)) schemaType {
	for depth := 0; s.Ref != "" && depth < maxRefDepth; depth++ {
		d, ok := defs(s.Ref)
		if !ok {
			break
		}
		s = d
	}
	return s
}

// enumValues is a short enum's values as JSON, "|" between them ("" for
// no enum, or one too long to spell out).
func (s schemaType) enumValues() string {
	if len(s.Enum) == 0 || len(s.Enum) > shapeEnumValues {
		return ""
	}
	if out := jsonValues(s.Enum, "|"); len(out) <= shapeEnumChars {
		return out
	}
	return ""
}

// jsonValues writes values as JSON, sep between them.
func jsonValues(values []any, sep string) string {
	parts := make([]string, len(values))
	for i, v := range values {
		b, _ := json.Marshal(v) // decoded from JSON: marshals
		parts[i] = string(b)
	}
	return strings.Join(parts, sep)
}

// fields is an object schema's fields, "{a*, b}" (required first, marked),
// within shapeFieldChars ("{a*, b, +3}" past it); "" without properties.
func (s schemaType) fields() string {
	if len(s.Properties) == 0 {
		return ""
	}
	names := slices.Sorted(maps.Keys(s.Properties))
	slices.SortStableFunc(names, func(a, b string) int {
		ra, rb := slices.Contains(s.Required, a), slices.Contains(s.Required, b)
		switch {
		case ra == rb:
			return 0
		case ra:
			return -1
		}
		return 1
	})
	var b strings.Builder
	b.WriteByte('{')
	for i, n := range names {
		part := n
		if slices.Contains(s.Required, n) {
			part += "*"
		}
		if i > 0 {
			part = ", " + part
		}
		if i > 0 && b.Len()+len(part) > shapeFieldChars {
			fmt.Fprintf(&b, ", +%d", len(names)-i)
			break
		}
		b.WriteString(part)
	}
	b.WriteByte('}')
	return b.String()
}

// maxRefDepth bounds the $refs schemaType.name follows (a definition may
// refer to itself).
const maxRefDepth = 4

// name is the type of s as paramSummary shows it: "string", "string|null",
// "object" for a $ref to a model, "any" when the schema does not say.
func (s schemaType) name(defs func(ref string) (schemaType, bool), depth int) string {
	switch t := s.Type.(type) {
	case string:
		return t
	case []any:
		ts := make([]string, 0, len(t))
		for _, x := range t {
			ts = append(ts, fmt.Sprint(x))
		}
		return strings.Join(ts, "|")
	}
	if s.Ref != "" {
		if d, ok := defs(s.Ref); ok && depth < maxRefDepth {
			return d.name(defs, depth+1)
		}
		return "any"
	}
	alts := s.AnyOf
	if len(alts) == 0 {
		alts = s.OneOf
	}
	if len(alts) == 0 && len(s.AllOf) == 1 {
		alts = s.AllOf
	}
	if len(alts) > 0 {
		var ts []string
		for _, a := range alts {
			n := a.name(defs, depth)
			if n == "any" {
				return "any"
			}
			for _, x := range strings.Split(n, "|") {
				if !slices.Contains(ts, x) {
					ts = append(ts, x)
				}
			}
		}
		return strings.Join(ts, "|")
	}
	switch {
	case s.Properties != nil:
		return "object"
	case s.Items != nil:
		return "array"
	case len(s.Enum) > 0:
		var ts []string
		for _, v := range s.Enum {
			x := "any"
			switch v.(type) {
			case string:
				x = "string"
			case float64:
				x = "number"
			case bool:
				x = "boolean"
			case nil:
				x = "null"
			}
			if x == "any" {
				return "any"
			}
			if !slices.Contains(ts, x) {
				ts = append(ts, x)
			}
		}
		return strings.Join(ts, "|")
	}
	return "any"
}

// unavailable says why server's tools cannot run now, or "", as c's model
// reads it (backend.ForModel; for an API key that is not admin,
// backend.ForKey of the server's error, as GET /status shows it).
func (g *Gateway) unavailable(c *policy.Caller, server string) string {
	if g.opts.Unavailable == nil {
		return ""
	}
	return backend.ForModel(g.opts.Unavailable(server, c.Scoped()))
}

// filter is the search filter of the caller (nil without a Policy).
func (g *Gateway) filter(c *policy.Caller) *search.Filter {
	if g.opts.Policy == nil {
		return nil
	}
	return g.opts.Policy.Filter(c)
}

// servers lists the names of the servers with a tool in the catalog that
// the caller may see.
func (g *Gateway) servers(c *policy.Caller) []string {
	seen := map[string]bool{}
	var out []string
	for _, id := range g.visibleIDs(c) {
		s, _, err := catalog.SplitID(id)
		if err == nil && !seen[s] {
			seen[s] = true
			out = append(out, s)
		}
	}
	slices.Sort(out)
	return out
}

// hasServer reports whether the caller may see a tool of server name.
func (g *Gateway) hasServer(c *policy.Caller, name string) bool {
	for _, id := range g.searcher.IDs() {
		if s, _, err := catalog.SplitID(id); err != nil || s != name {
			continue
		}
		if g.visible(c, id) {
			return true
		}
	}
	return false
}

// disabledServer is why "server" names no server the caller sees when it
// names one disabled at run time that the caller's own rules (its key, its
// profile) show, read as execute_tool reads a tool's ID: the disabled
// rule's words, as execute_tool of its tools says them. "" otherwise, and
// for a server outside the caller's scope, of which it learns nothing.
func (g *Gateway) disabledServer(c *policy.Caller, name string) string {
	if g.opts.Policy == nil {
		return ""
	}
	seen := map[string]bool{}
	var servers []string
	for _, id := range g.searcher.IDs() {
		s, _, err := catalog.SplitID(id)
		if err != nil || seen[s] {
			continue
		}
		if seen[s] = true; g.opts.Policy.Sees(c, policy.AnyTool(s)) {
			servers = append(servers, s)
		}
	}
	meant := catalog.ServersMeant(name, servers)
	if len(meant) != 1 {
		return ""
	}
	if d := g.opts.Policy.Decide(c, policy.AnyTool(meant[0])); !d.Allowed && d.Rule == policy.RuleDisabled {
		return d.Reason
	}
	return ""
}

// visible reports whether the caller may see the catalog's tool id.
func (g *Gateway) visible(c *policy.Caller, id string) bool {
	if g.opts.Policy == nil {
		return true
	}
	t, ok := g.searcher.Tool(id)
	return ok && g.opts.Policy.Allowed(c, t)
}

// visibleIDs lists the catalog's tools the caller may see.
func (g *Gateway) visibleIDs(c *policy.Caller) []string {
	ids := g.searcher.IDs()
	if g.opts.Policy == nil {
		return ids
	}
	return slices.DeleteFunc(ids, func(id string) bool { return !g.visible(c, id) })
}

// standIn puts each input or output schema of out over
// catalog.MaxSchemaShown's stand-in (standInSchema, standInOutput) in its
// place.
func standIn(out *SearchResult) {
	for i, t := range out.Tools {
		out.Tools[i].InputSchema = standInSchema(t.Name, t.InputSchema)
		if len(t.OutputSchema) > 0 {
			out.Tools[i].OutputSchema = standInOutput(t.Name, t.OutputSchema)
		}
	}
}
