package gateway

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/jsonschema-go/jsonschema"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolgate/toolgate/gateway/config"
	"github.com/toolgate/toolgate/gateway/keys"
	"github.com/toolgate/toolgate/gateway/policy"
	"github.com/toolgate/toolgate/search"
)

// listedSchemas lists the tools as a client does and resolves, with
// jsonschema-go, each tool's input schema and search_tools' output schema:
// what the client SDKs compile (the TypeScript SDK's AJV, the Python SDK's
// jsonschema) before they check a result against it.
func listedSchemas(t *testing.T, cs *mcp.ClientSession) (output *jsonschema.Resolved) {
	t.Helper()
	lt, err := cs.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	resolve := func(what string, s any) *jsonschema.Resolved {
		b, _ := json.Marshal(s)
		var js jsonschema.Schema
		if err := json.Unmarshal(b, &js); err != nil {
			t.Fatalf("%s is not a JSON Schema: %v\n%s", what, err, b)
		}
		rs, err := js.Resolve(nil)
		if err != nil {
			t.Fatalf("%s does not resolve: %v\n%s", what, err, b)
		}
		return rs
	}
	for _, tl := range lt.Tools {
		resolve(tl.Name+"'s inputSchema", tl.InputSchema)
		switch {
		case tl.Name == SearchToolName && tl.OutputSchema != nil:
			output = resolve("search_tools' outputSchema", tl.OutputSchema)
		case tl.OutputSchema != nil:
			t.Errorf("%s has an outputSchema: every answer of it must then fit one", tl.Name)
		}
	}
	if output == nil {
		t.Fatal("search_tools lists no outputSchema")
	}
	return output
}

// fitsOutputSchema checks a search_tools answer as the client SDKs do and
// more: a result that is not an error carries structuredContent (the
// TypeScript SDK throws without it), which fits the output schema, and
// whose tools, mode, noMatch and downServers the text says too.
func fitsOutputSchema(t *testing.T, output *jsonschema.Resolved, res *mcp.CallToolResult) SearchResult {
	t.Helper()
	if res.IsError {
		t.Fatalf("search_tools: isError %s", text(res))
	}
	if res.StructuredContent == nil {
		t.Fatalf("search_tools answered no structuredContent, which its outputSchema requires: %s", text(res))
	}
	if err := output.Validate(res.StructuredContent); err != nil {
		b, _ := json.Marshal(res.StructuredContent)
		t.Fatalf("structuredContent does not fit search_tools' outputSchema: %v\n%s", err, b)
	}
	// Every field sent is one the schema describes: a client that makes
	// its types from the outputSchema has them all.
	root := output.Schema()
	b, _ := json.Marshal(res.StructuredContent)
	var raw struct {
		Tools []map[string]json.RawMessage `json:"tools"`
	}
	var top map[string]json.RawMessage
	_ = json.Unmarshal(b, &top)
	_ = json.Unmarshal(b, &raw)
	for k := range top {
		if root.Properties[k] == nil {
			t.Errorf("structuredContent has %q, which search_tools' outputSchema does not describe", k)
		}
	}
	for _, tl := range raw.Tools {
		for k := range tl {
			if root.Properties["tools"].Items.Properties[k] == nil {
				t.Errorf("a tool of structuredContent has %q, which search_tools' outputSchema does not describe", k)
			}
		}
	}
	got := structured(t, res)
	txt := text(res)
	for _, ft := range got.Tools {
		if !strings.Contains(txt, ft.Name) {
			t.Errorf("the text does not name %s, which structuredContent lists:\n%s", ft.Name, txt)
		}
		if ft.Unavailable != "" && !strings.Contains(txt, ft.Unavailable) {
			t.Errorf("the text does not say why %s is unavailable (%q):\n%s", ft.Name, ft.Unavailable, txt)
		}
		// detail "full" says the part of the query that found a tool.
		if full := strings.Contains(txt, "inputSchema: "); full && ft.Clause != "" && !strings.Contains(txt, fmt.Sprintf(", for %q", ft.Clause)) {
			t.Errorf("the text does not say which part found %s (%q):\n%s", ft.Name, ft.Clause, txt)
		}
	}
	for _, d := range got.DownServers {
		if !strings.Contains(txt, "- "+d.Name+": "+d.Reason) {
			t.Errorf("the text does not say down server %s (%q):\n%s", d.Name, d.Reason, txt)
		}
	}
	if !strings.Contains(txt, "(mode "+got.Mode+")") {
		t.Errorf("the text does not say mode %s:\n%s", got.Mode, txt)
	}
	if weak := strings.HasPrefix(txt, "No tool fits") || strings.HasPrefix(txt, "No tools match") || strings.HasPrefix(txt, "No read-only tools match"); weak != (got.NoMatch || len(got.Tools) == 0) {
		t.Errorf("noMatch %v with %d tools, but the text begins:\n%s", got.NoMatch, len(got.Tools), txt)
	}
	return got
}

// TestSearchAnswersFitOutputSchema gives search_tools every kind of answer
// it has (hits, one and the most, detail full, readOnly, noMatch with and
// without tools, servers down, hits of a part of a request of several
// steps, tools that cannot run now, a tool without a schema, each mode, a
// caller limited by a profile or an API key) and checks each as an SDK
// client does: structuredContent fits the outputSchema advertised in
// tools/list, checked with jsonschema-go, and the text says the same.
func TestSearchAnswersFitOutputSchema(t *testing.T) {
	g, fs := newTestGateway(t, nil)
	g.opts.Servers = func() []string { return []string{"everything", "filesystem", "memory", "weird", "time"} }
	g.opts.Unavailable = func(s string, _ bool) string {
		switch s {
		case "time":
			return `server "time" is down: command "uvx" not found in PATH: check command/PATH`
		case "memory":
			return `server "memory" is still connecting`
		}
		return ""
	}
	profiles := policy.NewProfiles(map[string]config.Profile{
		"fs": {Servers: []string{"filesystem", "time"}},
		"ro": {ReadOnly: true},
	})
	g.opts.Policy = policy.NewSet(profiles, keys.NewScope(func() *policy.Profiles { return profiles }, nil))
	// The fake ranks the catalog in order; "weak" answers noMatch, "steps"
	// finds each tool for a part of the query.
	inner := fs.search
	fs.search = func(q search.Query) (search.Result, error) {
		r, err := inner(q)
		for _, mode := range []search.Mode{search.ModeBM25, search.ModeVector, search.ModeRRF} {
			if strings.Contains(q.Text, "mode "+string(mode)) {
				r.Mode = mode
			}
		}
		switch {
		case strings.Contains(q.Text, "weak"):
			r.NoMatch = true
			for i := range r.Hits {
				r.Hits[i].Confidence, r.Hits[i].Fits = 0.01, false
			}
		case strings.Contains(q.Text, "nothing"):
			r.Hits, r.NoMatch = nil, true
		case strings.Contains(q.Text, ", then "):
			for i := range r.Hits {
				r.Hits[i].Clause = fmt.Sprintf("part %d of the steps", i%2+1)
			}
		}
		return r, err
	}

	callers := []struct {
		name string
		c    *policy.Caller
	}{
		{"stdio", g.StdioCaller()},
		{"profile fs", &policy.Caller{Transport: policy.TransportHTTP, Profile: "fs"}},
		{"profile ro", &policy.Caller{Transport: policy.TransportHTTP, Profile: "ro"}},
		{"scoped key", &policy.Caller{Transport: policy.TransportHTTP, Key: &policy.Key{Name: "k", Allow: []string{"filesystem__*", "weird__*", "time__*"}}}},
		{"admin key", &policy.Caller{Transport: policy.TransportHTTP, Key: &policy.Key{Name: "root", Admin: true}}},
	}
	answers := []struct {
		name string
		args map[string]any
	}{
		{"hits", map[string]any{"query": "files"}},
		{"limit 1", map[string]any{"query": "files", "limit": 1}},
		{"limit max", map[string]any{"query": "files", "limit": MaxLimit}},
		{"limit past max", map[string]any{"query": "files", "limit": MaxLimit + 1}},
		{"detail full", map[string]any{"query": "files", "detail": "full"}},
		{"readOnly", map[string]any{"query": "files", "readOnly": true}},
		{"readOnly none", map[string]any{"query": "files", "readOnly": true, "server": "memory"}},
		{"server", map[string]any{"query": "files", "server": "filesystem"}},
		{"server down", map[string]any{"query": "what time is it", "server": "time"}},
		{"noMatch", map[string]any{"query": "a weak match"}},
		{"noMatch full", map[string]any{"query": "a weak match", "detail": "full"}},
		{"noMatch foreign ID", map[string]any{"query": "github__create_issue is weak here"}},
		{"no tools", map[string]any{"query": "nothing at all"}},
		{"steps", map[string]any{"query": "list the files, then write a file", "detail": "full"}},
		{"mode bm25", map[string]any{"query": "files mode bm25"}},
		{"mode vector", map[string]any{"query": "files mode vector"}},
		{"mode rrf", map[string]any{"query": "files mode rrf"}},
	}
	seen := map[string]bool{}
	for _, c := range callers {
		t.Run(c.name, func(t *testing.T) {
			cs := connectAs(t, g, c.c)
			output := listedSchemas(t, cs)
			for _, a := range answers {
				t.Run(a.name, func(t *testing.T) {
					res := call(t, cs, SearchToolName, a.args)
					if res.IsError { // a caller whose scope leaves the server out
						if _, ok := a.args["server"]; !ok || res.StructuredContent != nil {
							t.Fatalf("isError=%v structuredContent=%v %s", res.IsError, res.StructuredContent, text(res))
						}
						return
					}
					got := fitsOutputSchema(t, output, res)
					seen["noMatch"] = seen["noMatch"] || got.NoMatch && len(got.Tools) > 0
					seen["no tools"] = seen["no tools"] || len(got.Tools) == 0
					seen["downServers"] = seen["downServers"] || len(got.DownServers) > 0
					for _, ft := range got.Tools {
						seen["clause"] = seen["clause"] || ft.Clause != ""
						seen["unavailable"] = seen["unavailable"] || ft.Unavailable != ""
						seen["annotations"] = seen["annotations"] || ft.Annotations != nil
						seen["title"] = seen["title"] || ft.Title != ""
						seen["no schema"] = seen["no schema"] || string(ft.InputSchema) == `{"type":"object"}`
						seen["outputSchema"] = seen["outputSchema"] || ft.OutputSchema != nil
					}
				})
			}
		})
	}
	// Every kind was met, so none passed by being absent.
	for _, k := range []string{"noMatch", "no tools", "downServers", "clause", "unavailable", "annotations", "title", "no schema", "outputSchema"} {
		if !seen[k] {
			t.Errorf("no answer had %s", k)
		}
	}
}

// TestStructuredContentPerProtocol: a structuredContent that is not a JSON
// object (an array, a string, a number: SEP-2106 allows them from protocol
// 2026-07-28 on, and go-sdk's servers send a []T output so) reaches a client
// of 2026-07-28 unchanged; a client of 2025-11-25, whose protocol wants an
// object there (the TypeScript SDK's callTool threw a ZodError, the Python
// SDK's a ValidationError, and the result was lost), gets the result
// without it, its JSON in a text content unless one already holds it (as
// go-sdk's server writes for such clients). An object is unchanged for both.
func TestStructuredContentPerProtocol(t *testing.T) {
	results := map[string]*mcp.CallToolResult{
		"add": {Content: []mcp.Content{&mcp.TextContent{Text: "5"}}, StructuredContent: map[string]any{"sum": 5.0}},
		// go-sdk's server: a []T output, its JSON in the text too.
		"list_directory": {Content: []mcp.Content{&mcp.TextContent{Text: `["a.txt","b.txt"]`}}, StructuredContent: []any{"a.txt", "b.txt"}},
		// No content at all; an integer past 2^53 kept as sent (backend.exact).
		"write_file": {StructuredContent: json.RawMessage(` [12345678901234567891]`)},
		// Text that says something else: the JSON is added.
		"create_entities": {Content: []mcp.Content{&mcp.TextContent{Text: "sunny"}}, StructuredContent: "sunny and warm"},
		"do__it":          {Content: []mcp.Content{&mcp.TextContent{Text: "n"}}, StructuredContent: 42.5},
	}
	caller := &fakeCaller{call: func(_, tool string, _ map[string]any) (*mcp.CallToolResult, error) {
		r := *results[tool]
		return &r, nil
	}}
	g, _ := newTestGateway(t, caller)
	for _, tc := range []struct {
		id         string
		args       map[string]any
		legacyText string // its text content, the blocks joined
		legacy     any    // structuredContent a 2025-11-25 client gets
		note       string // added after the content: the result does not fit the tool's output schema
	}{
		{"everything__add", map[string]any{"a": 2, "b": 3}, "5", map[string]any{"sum": 5.0}, ""},
		// Its output schema wants an object: the result goes on, with a
		// note, to either client (checked before it is fitted to one).
		{"filesystem__list_directory", map[string]any{"path": "."}, `["a.txt","b.txt"]`, nil,
			`toolgate: this result's structuredContent does not fit the outputSchema filesystem__list_directory declares: structuredContent must be an object, not an array (["a.txt","b.txt"]). It is passed on as the server sent it: do not count on the shape search_tools showed.`},
		{"filesystem__write_file", map[string]any{"path": "a", "content": "b"}, "[12345678901234567891]", nil, ""},
		{"memory__create_entities", map[string]any{"entities": []any{}}, "sunny\"sunny and warm\"", nil, ""},
		{"weird__do__it", nil, "n42.5", nil, ""},
	} {
		sent := results[strings.SplitN(tc.id, "__", 2)[1]]
		for _, pv := range []string{"2025-11-25", "2026-07-28"} {
			t.Run(tc.id+" "+pv, func(t *testing.T) {
				cs := connectClient(t, g, mcp.NewClient(&mcp.Implementation{Name: "test"}, nil), pv)
				res := call(t, cs, ExecuteToolName, map[string]any{"name": tc.id, "arguments": tc.args})
				if res.IsError {
					t.Fatalf("isError: %s", text(res))
				}
				wantSC, wantText := tc.legacy, tc.legacyText
				if pv == "2026-07-28" {
					b, _ := json.Marshal(sent.StructuredContent)
					_ = json.Unmarshal(b, &wantSC)
					wantText = text(sent)
				}
				wantText += tc.note
				if diff := cmp.Diff(wantSC, res.StructuredContent); diff != "" {
					t.Errorf("structuredContent (-want +got):\n%s", diff)
				}
				if got := text(res); got != wantText {
					t.Errorf("text %q, want %q", got, wantText)
				}
			})
		}
	}
}
