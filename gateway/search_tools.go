package gateway

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolgate/toolgate/index/catalog"
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
}

// noMatchTools is how many of the closest tools a noMatch answer lists.
const noMatchTools = 3

// FoundTool is one search_tools hit.
type FoundTool struct {
	Name        string          `json:"name"` // server__tool, what execute_tool takes
	Server      string          `json:"server"`
	Description string          `json:"description"`
	InputSchema json.RawMessage `json:"inputSchema"`
	Score       float64         `json:"score"`
	Keyword     float64         `json:"keyword"`
	Vector      float64         `json:"vector"`
	// Confidence is an absolute estimate, 0 to 1, that the tool does what
	// the query asks (Score only ranks the tools against each other).
	Confidence float64 `json:"confidence"`
	// Unavailable, when set, says why the tool cannot run right now (its
	// server is still connecting, or down); it is absent for usable tools.
	Unavailable string `json:"unavailable,omitempty"`
}

type searchArgs struct {
	Query  string       `json:"query"`
	Limit  *json.Number `json:"limit"`
	Server string       `json:"server"`
}

func searchTool(defLimit, maxLimit int) *mcp.Tool {
	return &mcp.Tool{
		Name:  SearchToolName,
		Title: "Search tools",
		Description: "Find the tools that can do a task, across every connected MCP server. " +
			"Describe the task in plain words (e.g. \"list the files in a directory\"). " +
			"Returns the best matches, best first, each with its name (server__tool), description, inputSchema and score. " +
			"Then call execute_tool with one of those names.",
		InputSchema: json.RawMessage(fmt.Sprintf(`{
  "type": "object",
  "properties": {
    "query": {"type": "string", "description": "What you want to do, in natural language."},
    "limit": {"type": "integer", "minimum": 1, "maximum": %d, "default": %d, "description": "How many tools to return."},
    "server": {"type": "string", "description": "Only return tools of this server."}
  },
  "required": ["query"],
  "additionalProperties": false
}`, maxLimit, defLimit)),
		OutputSchema: json.RawMessage(`{
  "type": "object",
  "properties": {
    "tools": {"type": "array", "items": {"type": "object", "properties": {
      "name": {"type": "string"}, "server": {"type": "string"}, "description": {"type": "string"},
      "inputSchema": {"type": "object"}, "score": {"type": "number"}, "keyword": {"type": "number"}, "vector": {"type": "number"},
      "confidence": {"type": "number", "description": "Absolute estimate, 0 to 1, that the tool does what the query asks."},
      "unavailable": {"type": "string", "description": "Present when the tool cannot run right now, with the reason."}},
      "required": ["name", "server", "description", "inputSchema", "score", "keyword", "vector", "confidence"]}},
    "mode": {"type": "string", "enum": ["hybrid", "bm25", "vector", "rrf"]},
    "noMatch": {"type": "boolean", "description": "True when no tool fits the query: the tools listed are only the closest, all weak."}
  },
  "required": ["tools", "mode"]
}`),
		Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true, OpenWorldHint: boolPtr(false)},
	}
}

func boolPtr(b bool) *bool { return &b }

func (g *Gateway) handleSearch(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	var a searchArgs
	if err := decodeArgs(req.Params.Arguments, &a); err != nil {
		return toolError(`search_tools: arguments must be an object like {"query": "list files in a directory", "limit": 5}: %v`, err), nil
	}
	if strings.TrimSpace(a.Query) == "" {
		return toolError(`search_tools needs a non-empty "query": describe the task in a few words, e.g. {"query": "create a GitHub issue"}.`), nil
	}
	limit := g.opts.DefaultLimit
	if a.Limit != nil {
		n, err := a.Limit.Int64()
		if err != nil || n < 1 {
			return toolError(`search_tools: "limit" must be a whole number from 1 to %d, got %s.`, g.opts.MaxLimit, a.Limit.String()), nil
		}
		limit = int(min(n, int64(g.opts.MaxLimit)))
	}
	if a.Server != "" && !g.hasServer(a.Server) {
		return toolError(`search_tools: there is no server named %q. Servers: %s. Leave "server" out to search them all.`,
			a.Server, strings.Join(g.servers(), ", ")), nil
	}
	res, err := g.searcher.Search(ctx, search.Query{Text: a.Query, Limit: limit, Server: a.Server})
	if errors.Is(err, search.ErrEmptyQuery) {
		return toolError(`search_tools needs a non-empty "query": describe the task in a few words.`), nil
	}
	if err != nil {
		g.log.Error("search failed", "query", a.Query, "err", err)
		return toolError("search_tools failed: %v. Try again; if it keeps failing, the gateway's log says why.", err), nil
	}
	out := SearchResult{Tools: make([]FoundTool, 0, len(res.Hits)), Mode: string(res.Mode), NoMatch: res.NoMatch}
	hits := res.Hits
	if res.NoMatch {
		hits = hits[:min(len(hits), noMatchTools)]
	}
	for _, h := range hits {
		out.Tools = append(out.Tools, FoundTool{
			Name:        h.Tool.ID(),
			Server:      h.Tool.Server,
			Description: h.Tool.Description,
			InputSchema: schemaOrEmpty(h.Tool.InputSchema),
			Score:       round4(h.Score),
			Keyword:     round4(h.Keyword),
			Vector:      round4(h.Vector),
			Confidence:  round4(h.Confidence),
			Unavailable: g.unavailable(h.Tool.Server),
		})
	}
	if g.recent != nil {
		ids := make([]string, len(out.Tools))
		for i, t := range out.Tools {
			ids[i] = t.Name
		}
		g.recent.searched(sessionKey(req.Session), a.Query, ids)
	}
	return &mcp.CallToolResult{
		Content:           []mcp.Content{&mcp.TextContent{Text: renderSearch(a.Query, out)}},
		StructuredContent: out,
	}, nil
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

// renderSearch is the compact text form of a search result: one line per
// tool with its score breakdown, then its parameters (required ones marked *),
// so a model can often call execute_tool without reading the full schema.
func renderSearch(query string, r SearchResult) string {
	var b strings.Builder
	if len(r.Tools) == 0 {
		fmt.Fprintf(&b, "No tools match %q (mode %s). Try other words, or leave out \"server\".", query, r.Mode)
		return b.String()
	}
	if r.NoMatch {
		fmt.Fprintf(&b, "No tool fits %q well (mode %s). Rephrase the task in other words, or leave out \"server\". The closest tools, all weak matches:\n", query, r.Mode)
	} else {
		fmt.Fprintf(&b, "%d tools for %q (mode %s; score = keyword + vector blend):\n", len(r.Tools), query, r.Mode)
	}
	for i, t := range r.Tools {
		weak := ""
		if r.NoMatch {
			weak = "WEAK "
		}
		fmt.Fprintf(&b, "%d. %s%s  score %.3f (keyword %.3f, vector %.3f), confidence %.2f\n", i+1, weak, t.Name, t.Score, t.Keyword, t.Vector, t.Confidence)
		if t.Unavailable != "" {
			fmt.Fprintf(&b, "   UNAVAILABLE: %s\n", t.Unavailable)
		}
		if d := oneLine(t.Description, 240); d != "" {
			fmt.Fprintf(&b, "   %s\n", d)
		}
		if p := paramSummary(t.InputSchema); p != "" {
			fmt.Fprintf(&b, "   args: %s\n", p)
		}
	}
	b.WriteString(`Call execute_tool with {"name": "<name above>", "arguments": {...}}.`)
	return b.String()
}

func oneLine(s string, max int) string {
	s = strings.Join(strings.Fields(s), " ")
	if r := []rune(s); len(r) > max {
		return string(r[:max-1]) + "…"
	}
	return s
}

// paramSummary renders "path*: string, depth: integer" from an input schema.
func paramSummary(schema json.RawMessage) string {
	var s struct {
		Properties map[string]struct {
			Type any `json:"type"`
		} `json:"properties"`
		Required []string `json:"required"`
	}
	if json.Unmarshal(schema, &s) != nil || len(s.Properties) == 0 {
		return ""
	}
	names := make([]string, 0, len(s.Properties))
	for n := range s.Properties {
		names = append(names, n)
	}
	// Required first, then alphabetical: the order a caller needs them.
	slices.SortFunc(names, func(a, b string) int {
		ra, rb := slices.Contains(s.Required, a), slices.Contains(s.Required, b)
		if ra != rb {
			if ra {
				return -1
			}
			return 1
		}
		return strings.Compare(a, b)
	})
	parts := make([]string, 0, len(names))
	for _, n := range names {
		typ := "any"
		switch t := s.Properties[n].Type.(type) {
		case string:
			typ = t
		case []any:
			ts := make([]string, 0, len(t))
			for _, x := range t {
				ts = append(ts, fmt.Sprint(x))
			}
			typ = strings.Join(ts, "|")
		}
		mark := ""
		if slices.Contains(s.Required, n) {
			mark = "*"
		}
		parts = append(parts, n+mark+": "+typ)
	}
	return strings.Join(parts, ", ")
}

// unavailable says why server's tools cannot run now, or "".
func (g *Gateway) unavailable(server string) string {
	if g.opts.Unavailable == nil {
		return ""
	}
	return g.opts.Unavailable(server)
}

// servers lists the server names that have tools in the catalog.
func (g *Gateway) servers() []string {
	seen := map[string]bool{}
	var out []string
	for _, id := range g.searcher.IDs() {
		s, _, err := catalog.SplitID(id)
		if err == nil && !seen[s] {
			seen[s] = true
			out = append(out, s)
		}
	}
	slices.Sort(out)
	return out
}

func (g *Gateway) hasServer(name string) bool {
	return slices.Contains(g.servers(), name)
}
