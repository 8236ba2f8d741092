package gateway

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http/httptest"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolgate/toolgate/gateway/backend"
	"github.com/toolgate/toolgate/index/catalog"
	"github.com/toolgate/toolgate/internal/oneline"
	"github.com/toolgate/toolgate/internal/testenv"
	"github.com/toolgate/toolgate/search"
)

func structured(t *testing.T, res *mcp.CallToolResult) SearchResult {
	t.Helper()
	b, _ := json.Marshal(res.StructuredContent)
	var out SearchResult
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatalf("structuredContent %s: %v", b, err)
	}
	return out
}

func TestSearchToolsAnnotationsAndFilters(t *testing.T) {
	g, fs := newTestGateway(t, nil)
	var asked search.Query
	inner := fs.search
	fs.search = func(q search.Query) (search.Result, error) { asked = q; return inner(q) }
	cs := connect(t, g)

	t.Run("annotations and title carried, text marks", func(t *testing.T) {
		res := call(t, cs, SearchToolName, map[string]any{"query": "files", "limit": 10})
		got := structured(t, res)
		byName := map[string]FoundTool{}
		for _, ft := range got.Tools {
			byName[ft.Name] = ft
		}
		ld, wf := byName["filesystem__list_directory"], byName["filesystem__write_file"]
		if !sameJSON(t, ld.Annotations, `{"readOnlyHint":true}`) {
			t.Errorf("list_directory annotations = %s", ld.Annotations)
		}
		if !sameJSON(t, wf.Annotations, `{"readOnlyHint":false,"destructiveHint":true,"idempotentHint":true}`) || wf.Title != "Write file" {
			t.Errorf("write_file annotations = %s, title %q", wf.Annotations, wf.Title)
		}
		if byName["memory__create_entities"].Annotations != nil {
			t.Errorf("a tool without annotations got %s", byName["memory__create_entities"].Annotations)
		}
		txt := text(res)
		for _, want := range []string{"filesystem__list_directory [read-only]  confidence", "filesystem__write_file [destructive]  confidence", "memory__create_entities  confidence"} {
			if !strings.Contains(txt, want) {
				t.Errorf("text lacks %q:\n%s", want, txt)
			}
		}
	})

	t.Run("readOnly keeps read-only tools, ranked deeper", func(t *testing.T) {
		res := call(t, cs, SearchToolName, map[string]any{"query": "write or delete files", "readOnly": true, "limit": 3})
		got := structured(t, res)
		if len(got.Tools) != 1 || got.Tools[0].Name != "filesystem__list_directory" {
			t.Errorf("readOnly: got %+v, want only filesystem__list_directory", got.Tools)
		}
		if asked.Limit < MaxLimit {
			t.Errorf("readOnly searched %d deep, want %d", asked.Limit, MaxLimit)
		}
		// The engine keeps the read-only tools, so that noMatch is theirs.
		byID := map[string]catalog.Tool{}
		for _, tool := range testCatalog {
			byID[tool.ID()] = tool
		}
		if asked.Keep == nil || !asked.Keep(byID["filesystem__list_directory"]) || asked.Keep(byID["filesystem__write_file"]) {
			t.Errorf("readOnly: the search's Keep does not keep the read-only tools alone")
		}
		if txt := text(res); !strings.Contains(txt, "1 read-only tool, best first") {
			t.Errorf("text: %s", txt)
		}
		res = call(t, cs, SearchToolName, map[string]any{"query": "x", "readOnly": true, "server": "memory"})
		if res.IsError || len(structured(t, res).Tools) != 0 || !strings.Contains(text(res), `No read-only tools match "x"`) || !strings.Contains(text(res), `leave out "readOnly"`) {
			t.Errorf("no read-only tool: isError=%v %s", res.IsError, text(res))
		}
		res = call(t, cs, SearchToolName, map[string]any{"query": "x", "readOnly": false, "limit": 10})
		if n := len(structured(t, res).Tools); n != len(testCatalog) {
			t.Errorf("readOnly false: %d tools, want all %d", n, len(testCatalog))
		}
	})

	t.Run("detail", func(t *testing.T) {
		compact := text(call(t, cs, SearchToolName, map[string]any{"query": "files", "limit": 10}))
		full := text(call(t, cs, SearchToolName, map[string]any{"query": "files", "limit": 10, "detail": "full"}))
		same := text(call(t, cs, SearchToolName, map[string]any{"query": "files", "limit": 10, "detail": "compact"}))
		if strings.Contains(compact, `"properties"`) || compact != same {
			t.Errorf("compact text holds schemas, or differs from the default:\n%s", compact)
		}
		// The word right, its case or space not: taken as written.
		for _, v := range []string{"Full", " FULL "} {
			if got := call(t, cs, SearchToolName, map[string]any{"query": "files", "limit": 10, "detail": v}); text(got) != full {
				t.Errorf("detail %q: isError=%v %s", v, got.IsError, text(got))
			}
		}
		for _, want := range []string{`inputSchema: {"type":"object","properties":{"path":{"type":"string"}},"required":["path"],"additionalProperties":false}`, "title: Write file", "score 0.500 (keyword 0.250, vector 0.667), confidence 0.00"} {
			if !strings.Contains(full, want) {
				t.Errorf("full text lacks %q:\n%s", want, full)
			}
		}
	})

	for _, tc := range []struct {
		name string
		args map[string]any
		want []string
	}{
		{"unknown argument", map[string]any{"query": "x", "readonly": true, "max": 3},
			[]string{`unknown argument "max", "readonly"`, `"query" (string, required)`, `"limit"`, `"server"`, `"readOnly"`, `"detail" ("compact" or "full")`}},
		{"readOnly not a boolean", map[string]any{"query": "x", "readOnly": "yes"}, []string{`"readOnly" must be true or false, got "yes"`}},
		{"detail unknown", map[string]any{"query": "x", "detail": "verbose"}, []string{`"detail" must be "compact" (the default: one line and the arguments per tool) or "full" (also each tool's input and output schemas), got "verbose".`}},
		{"query not a string", map[string]any{"query": 3}, []string{`"query" must be a string`}},
		{"server not a string", map[string]any{"query": "x", "server": 1}, []string{`"server" must be a server name`, "Servers: everything, filesystem, memory, weird"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res := call(t, cs, SearchToolName, tc.args)
			for _, w := range tc.want {
				if !res.IsError || !strings.Contains(text(res), w) {
					t.Errorf("isError=%v %q, want isError with %q", res.IsError, text(res), w)
				}
			}
		})
	}
}

// TestSearchToolsDescription: the description names each server with its
// tool count and a few words (Options.Describe) or tool names, within
// MaxServerListChars, and counts the servers that do not fit.
func TestSearchToolsDescription(t *testing.T) {
	fs := &fakeSearcher{tools: testCatalog}
	g := New(fs, &fakeCaller{}, &Options{Describe: func(s string) string {
		if s == "memory" {
			return "  a knowledge graph of\n entities  "
		}
		return ""
	}})
	d := g.describeSearch()
	for _, want := range []string{
		"across the MCP servers behind this gateway: everything (1 tool: add); filesystem (2 tools: list_directory, write_file); memory (1 tool): a knowledge graph of entities; weird (1 tool: do__it).",
		"execute_tool",
	} {
		if !strings.Contains(d, want) {
			t.Errorf("description lacks %q:\n%s", want, d)
		}
	}

	// Without a searcher (tools/list only): no servers to name.
	if d := New(nil, nil, nil).describeSearch(); !strings.HasPrefix(d, "Find the tools that can do a task, across every connected MCP server.") {
		t.Errorf("description without a searcher: %s", d)
	}

	var many []catalog.Tool
	for i := range 60 {
		for j := range 4 {
			many = append(many, catalog.Tool{Server: fmt.Sprintf("server%02d", i), Name: fmt.Sprintf("tool_number_%d", j)})
		}
	}
	g = New(&fakeSearcher{tools: many}, &fakeCaller{}, &Options{Describe: func(string) string { return strings.Repeat("word ", 40) }})
	list := g.serverList()
	if n := utf8.RuneCountInString(list); n > MaxServerListChars {
		t.Errorf("server list is %d characters, cap %d:\n%s", n, MaxServerListChars, list)
	}
	if !strings.HasPrefix(list, "server00 (4 tools): word word") || !strings.Contains(list, "more") {
		t.Errorf("server list:\n%s", list)
	}
	var shown int
	fmt.Sscanf(list[strings.LastIndex(list, "; and ")+len("; and "):], "%d", &shown)
	if listed := strings.Count(list, "(4 tools)"); listed+shown != 60 {
		t.Errorf("%d servers listed + %d counted as more, want 60:\n%s", listed, shown, list)
	}
}

// TestRefreshNotifiesListChanged: when the servers behind the gateway
// change, Refresh registers search_tools again with the new description and
// a connected client gets notifications/tools/list_changed (a session of
// either protocol; over streamable HTTP a 2026-07-28 client, on its
// subscriptions/listen stream); the two names stay.
func TestRefreshNotifiesListChanged(t *testing.T) {
	fs := &fakeSearcher{tools: testCatalog[:1]}
	g := New(fs, &fakeCaller{}, nil)
	srv := httptest.NewServer(g.HTTPHandler(nil))
	defer srv.Close()
	ctx := context.Background()
	type client struct {
		name    string
		cs      *mcp.ClientSession
		changed chan struct{}
	}
	var clients []*client
	for _, c := range []struct {
		name, pv string
		http     bool
	}{{"session 2025-11-25", "2025-11-25", false}, {"session 2026-07-28", "2026-07-28", false}, {"http 2026-07-28", "2026-07-28", true}} {
		cl := &client{name: c.name, changed: make(chan struct{}, 10)}
		var ct mcp.Transport = &mcp.StreamableClientTransport{Endpoint: srv.URL + "/mcp"}
		if !c.http {
			var st *mcp.InMemoryTransport
			ct, st = mcp.NewInMemoryTransports()
			ss, err := g.Server().Connect(ctx, st, nil)
			if err != nil {
				t.Fatal(err)
			}
			defer ss.Wait()
		}
		cs, err := mcp.NewClient(&mcp.Implementation{Name: "test"}, &mcp.ClientOptions{
			ToolListChangedHandler: func(context.Context, *mcp.ToolListChangedRequest) { cl.changed <- struct{}{} },
		}).Connect(ctx, ct, &mcp.ClientSessionOptions{ProtocolVersion: c.pv})
		if err != nil {
			t.Fatal(err)
		}
		defer cs.Close()
		cl.cs = cs
		clients = append(clients, cl)
	}
	description := func(cs *mcp.ClientSession) (string, []string) {
		lt, err := cs.ListTools(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		d := ""
		for _, tl := range lt.Tools {
			names = append(names, tl.Name)
			if tl.Name == SearchToolName {
				d = tl.Description
			}
		}
		return d, names
	}
	for _, c := range clients {
		if before, _ := description(c.cs); !strings.Contains(before, "memory (1 tool: create_entities)") || strings.Contains(before, "filesystem") {
			t.Fatalf("%s: description before: %s", c.name, before)
		}
	}
	fs.tools = testCatalog
	g.Refresh()
	for _, c := range clients {
		testenv.Eventually(t, c.name+": notifications/tools/list_changed", func() bool { return len(c.changed) > 0 })
		after, names := description(c.cs)
		if !strings.Contains(after, "filesystem (2 tools") || len(names) != 2 || names[0] != ExecuteToolName || names[1] != SearchToolName {
			t.Errorf("%s: after the change: %v %s", c.name, names, after)
		}
	}
}

func TestParamSummary(t *testing.T) {
	schema := json.RawMessage(`{"type":"object","required":["b","a"],"properties":{
		"a":{"type":"string"},"b":{"type":["string","null"]},"c":{"type":"integer"},"d":{},"e":{"type":"boolean"},"f":{"type":"number"}}}`)
	for _, tc := range []struct {
		max  int
		want string
	}{
		{0, "a*: string, b*: string|null, c: integer, d: any, e: boolean, f: number"},
		{40, "a*: string, b*: string|null, c: integer, +3 more"},
		{10, "a*: string, b*: string|null, +4 more"}, // required: up to 4·10 characters
		{5, "a*: string, +5 more, 1 required"},
	} {
		if got := paramSummary(schema, tc.max, nil); got != tc.want {
			t.Errorf("paramSummary(max %d) = %q, want %q", tc.max, got, tc.want)
		}
	}
	// A thousand required parameters: four lines' worth, then a count (the
	// line listed all of them, 16 KB for one hit).
	var props, req []string
	for i := range 1000 {
		props = append(props, fmt.Sprintf(`"p%03d":{"type":"string"}`, i))
		req = append(req, fmt.Sprintf(`"p%03d"`, i))
	}
	props = append(props, `"opt":{"type":"string"}`)
	many := json.RawMessage(`{"type":"object","properties":{` + strings.Join(props, ",") + `},"required":[` + strings.Join(req, ",") + `,"gone"]}`)
	got := paramSummary(many, compactArgsChars, nil)
	if want := ", +977 more, 976 required"; !strings.HasPrefix(got, "p000*: string, p001*: string") || !strings.HasSuffix(got, want) || len(got) > requiredLines*compactArgsChars+len(want) {
		t.Errorf("1,000 required: %q (%d bytes), want at most %d of them and %q", got, len(got), requiredLines*compactArgsChars, want)
	}
	if got := paramSummary(json.RawMessage(`{"type":"object"}`), 0, nil); got != "" {
		t.Errorf("no properties: %q", got)
	}
	// The Python SDK's schemas (pydantic): nested models through $ref, an
	// optional field as anyOf with null, a Literal as an enum.
	if got, want := paramSummary(json.RawMessage(pydanticSchema), 0, nil), `delivery*: "pickup"|"post"|"locker", request*: {reader*, titles*, note}`; got != want {
		t.Errorf("pydantic schema: %q, want %q", got, want)
	}
	schema = json.RawMessage(`{"type":"object","properties":{
		"note":{"anyOf":[{"type":"string"},{"type":"null"}],"default":null},
		"reader":{"anyOf":[{"$ref":"#/$defs/Reader"},{"type":"null"}]},
		"kind":{"enum":["a","b"]},
		"tree":{"$ref":"#/$defs/Tree"},
		"old":{"allOf":[{"$ref":"#/definitions/Old"}]},
		"far":{"$ref":"other.json#/x"},
		"mixed":{"oneOf":[{"type":"integer"},{}]},
		"list":{"items":{"type":"string"}}},
		"$defs":{"Reader":{"type":"object","properties":{"card":{"type":"integer"}}},"Tree":{"$ref":"#/$defs/Tree"}},
		"definitions":{"Old":{"properties":{"x":{}}}}}`)
	if got, want := paramSummary(schema, 0, nil), `far: any, kind: "a"|"b", list: [string], mixed: any, note: string|null, old: object, reader: object|null, tree: any`; got != want {
		t.Errorf("refs and combinators: %q, want %q", got, want)
	}
	// What a first call most often gets wrong is spelled out: a short
	// enum's values, the fields of an array's items and of an object; a
	// long enum, and many fields, are not.
	schema = json.RawMessage(`{"type":"object","required":["edits","messageType"],"properties":{
		"edits":{"type":"array","items":{"type":"object","required":["oldText","newText"],"properties":{"oldText":{"type":"string"},"newText":{"type":"string"},"dryRun":{"type":"boolean"}}}},
		"messageType":{"type":"string","enum":["error","success","debug"]},
		"level":{"type":"integer","enum":[1,2,3]},
		"tags":{"type":"array","items":{"enum":["a","b"]}},
		"zone":{"type":"string","enum":["africa-johannesburg","america-los-angeles","asia-tokyo","europe-amsterdam"]},
		"wide":{"type":"object","properties":{"alpha":{},"bravo":{},"charlie":{},"delta":{},"echo":{},"foxtrot":{},"golf":{},"hotel":{}}}}}`)
	if got, want := paramSummary(schema, 0, nil), `edits*: [{newText*, oldText*, dryRun}], messageType*: "error"|"success"|"debug", level: 1|2|3, tags: ["a"|"b"], wide: {alpha, bravo, charlie, delta, echo, foxtrot, golf, +1}, zone: string`; got != want {
		t.Errorf("shapes: %q, want %q", got, want)
	}
}

// The compact argument line lists a tool's own arguments before those the
// other tools of its server take too (azure-mcp's tenant, auth-method and
// retry-*, which name order listed first), counted again after Refresh.
func TestArgLineOwnArgumentsFirst(t *testing.T) {
	tool := func(name string, props ...string) catalog.Tool {
		var p []string
		for _, n := range props {
			p = append(p, fmt.Sprintf("%q:{\"type\":\"string\"}", n))
		}
		return catalog.Tool{Server: "az", Name: name, Description: name,
			InputSchema: json.RawMessage(`{"type":"object","properties":{` + strings.Join(p, ",") + `},"required":["key"]}`)}
	}
	fs := &fakeSearcher{tools: []catalog.Tool{
		tool("kv_delete", "key", "zone", "auth", "tenant"),
		tool("kv_list", "auth", "tenant"),
		tool("kv_show", "key", "auth", "tenant"),
	}}
	fs.search = func(search.Query) (search.Result, error) {
		return search.Result{Hits: []search.Hit{{Tool: fs.tools[0], Score: 1}}, Mode: search.ModeHybrid}, nil
	}
	g := New(fs, &fakeCaller{}, nil)
	cs := connect(t, g)
	args := func() string {
		txt := text(call(t, cs, SearchToolName, map[string]any{"query": "delete a key"}))
		_, line, _ := strings.Cut(txt, "args: ")
		line, _, _ = strings.Cut(line, "\n")
		return line
	}
	if got, want := args(), "key*: string, zone: string, auth: string, tenant: string"; got != want {
		t.Errorf("args: %s, want %s", got, want)
	}
	// The catalog changes: now every tool takes zone, and only kv_delete auth.
	fs.tools = []catalog.Tool{
		tool("kv_delete", "key", "zone", "auth", "tenant"),
		tool("kv_list", "zone", "tenant"),
		tool("kv_show", "key", "zone", "tenant"),
	}
	g.Refresh()
	if got, want := args(), "key*: string, auth: string, tenant: string, zone: string"; got != want {
		t.Errorf("args after the catalog changed: %s, want %s", got, want)
	}
}

// A tool that takes no argument says so ("args: none"); a schema that may
// take some it does not name says nothing.
func TestArgLineNone(t *testing.T) {
	for schema, want := range map[string]bool{
		`{"type":"object"}`:                              true,
		`{"type":"object","properties":{}}`:              true,
		`{"type":"object","additionalProperties":false}`: true,
		`{"type":"object","additionalProperties":true}`:  false,
		`{}`:                                   false,
		`{"type":"object","$ref":"#/$defs/A"}`: false,
		`{"type":"object","properties":{"a":{}}}`:        false,
		`{"type":"object","anyOf":[{"required":["a"]}]}`: false,
	} {
		txt := renderSearch(searchArgs{Query: "q"}, SearchResult{Mode: "hybrid", Tools: []FoundTool{{Name: "s__t", Server: "s", InputSchema: json.RawMessage(schema)}}}, nil)
		if got := strings.Contains(txt, "\n   args: none\n"); got != want {
			t.Errorf("%s: args: none %v, want %v:\n%s", schema, got, want, txt)
		}
	}
}

// A down server's reason is said once in the text, on one line of at most
// downReasonChars: its error with the last stderr lines of its process (a
// node stack trace: 600 bytes over 13 lines) stood in full under each of
// its tools, 4.5 KB of text for 5 of them, and its lines broke the list's
// layout. Later tools of the same reason refer to the first;
// structuredContent keeps the whole reason on each.
func TestSearchToolsUnavailableOnce(t *testing.T) {
	why := `server "filesystem" is down: backend "filesystem": node exited with exit status 1 during start-up: check command, args and env; last stderr lines:` +
		"\n  node:internal/modules/cjs/loader:1210\n    throw err;\n    ^\n  Error: Cannot find module '/srv/x/index.js'" + strings.Repeat("\n      at Module._load (node:internal/modules/cjs/loader:1038:27)", 5)
	fs := &fakeSearcher{tools: testCatalog, search: func(q search.Query) (search.Result, error) {
		var hits []search.Hit
		for _, tl := range testCatalog {
			hits = append(hits, search.Hit{Tool: tl, Score: 0.5, Keyword: 0.25, Vector: 0.6667, Fits: true})
		}
		return search.Result{Hits: hits, Mode: search.ModeHybrid}, nil
	}}
	g := New(fs, &fakeCaller{}, &Options{Unavailable: func(s string, _ bool) string {
		switch s {
		case "filesystem":
			return why
		case "memory":
			return `server "memory" is still connecting`
		case "everything":
			return `server "everything" is still connecting (` + backend.CallWaits + `)`
		}
		return ""
	}})
	cs := connect(t, g)
	res := call(t, cs, SearchToolName, map[string]any{"query": "files", "limit": 10})
	txt := text(res)
	if n := strings.Count(txt, "node:internal"); n != 1 {
		t.Errorf("the reason is said %d times, want once:\n%s", n, txt)
	}
	for _, want := range []string{
		"1. memory__create_entities  confidence 0.00\n   UNAVAILABLE: server \"memory\" is still connecting\n",
		"2. filesystem__list_directory [read-only]  confidence 0.00\n   UNAVAILABLE: " + oneline.Cut(why, downReasonChars) + "\n",
		"5. filesystem__write_file [destructive]  confidence 0.00\n   UNAVAILABLE: as 2.\n",
		// Its tools run: the call waits for the connection.
		"3. everything__add  confidence 0.00\n   NOTE: server \"everything\" is still connecting (a call of its tools waits for it)\n",
	} {
		if !strings.Contains(txt, want) {
			t.Errorf("text lacks %q:\n%s", want, txt)
		}
	}
	for _, ft := range structured(t, res).Tools {
		if ft.Server == "filesystem" && ft.Unavailable != why {
			t.Errorf("structuredContent: %s unavailable %q, want the whole reason", ft.Name, ft.Unavailable)
		}
	}
}

// TestSearchCancelledByClientIsNoError: a search its client cancelled (a
// stdio client that left mid-answer, an HTTP request given up) is not
// logged as a failed search at ERROR level: the operator read `search
// failed … err="context canceled"` for every client that went away
// mid-search. It is said at debug level.
func TestSearchCancelledByClientIsNoError(t *testing.T) {
	var logs testenv.LogBuffer
	started := make(chan struct{})
	fs := &fakeSearcher{tools: testCatalog}
	fs.searchCtx = func(ctx context.Context, q search.Query) (search.Result, error) {
		close(started)
		<-ctx.Done()
		return search.Result{}, ctx.Err()
	}
	g := New(fs, &fakeCaller{}, &Options{Logger: logs.Logger()})
	cs := connect(t, g)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		_, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "search_tools", Arguments: map[string]any{"query": "list files"}})
		done <- err
	}()
	<-started
	cancel()
	<-done
	testenv.Eventually(t, "the cancelled search said", func() bool { return strings.Contains(logs.String(), "search cancelled by the client") })
	if strings.Contains(logs.String(), "level=ERROR") {
		t.Errorf("a search the client cancelled is logged as an error:\n%s", logs.String())
	}
}
