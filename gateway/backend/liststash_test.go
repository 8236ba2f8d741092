package backend

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
	"unsafe"

	"github.com/google/go-cmp/cmp"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolgate/toolgate/gateway/backend/backendtest"
	"github.com/toolgate/toolgate/gateway/config"
	"github.com/toolgate/toolgate/index/catalog"
	"github.com/toolgate/toolgate/index/indextest"
)

// scriptPages is a listing over three pages, by request cursor: tools with
// schemas, x-mcp-header tools (valid, and invalid: go-sdk drops it), a null
// entry (dropped too), a schema that is not an object, and a ttlMs (go-sdk
// caches the pages).
var scriptPages = map[string]string{
	"": `{"tools":[
		{"name":"a1","description":"first","inputSchema":{"type":"object","properties":{"q":{"type":"string"}}},"outputSchema":{"type":"object","properties":{"n":{"type":"integer"}}}},
		{"name":"hv","inputSchema":{"type":"object","properties":{"r":{"type":"string","x-mcp-header":"Region"}}}},
		{"name":"a2","inputSchema":{"type":"object"},"annotations":{"readOnlyHint":true},"_meta":{"k":"v"}}
	],"nextCursor":"p2","ttlMs":600000,"_meta":{"page":1}}`,
	"p2": `{"tools":[
		{"name":"hi","inputSchema":{"type":"object","properties":{"r":{"type":"object","x-mcp-header":"Region"}}}},
		null,
		{"name":"a3","title":"Three","inputSchema":true}
	],"nextCursor":"p3","ttlMs":600000}`,
	"p3": `{"tools":[{"name":"a4","inputSchema":{"type":"object","properties":{"x":{"type":"number"}}}}],"ttlMs":600000}`,
}

// A script answers each tools/list request with the page for its cursor
// (whatever the real server behind it answered).
type script struct {
	mu       sync.Mutex
	pages    map[string]json.RawMessage
	pending  map[jsonrpc.ID]string
	requests int
}

func newScript(pages map[string]string) *script {
	sc := &script{pages: map[string]json.RawMessage{}, pending: map[jsonrpc.ID]string{}}
	for cursor, page := range pages {
		sc.set(cursor, page)
	}
	return sc
}

func (sc *script) set(cursor, page string) {
	sc.mu.Lock()
	sc.pages[cursor] = json.RawMessage(page)
	sc.mu.Unlock()
}

func (sc *script) listRequests() int {
	sc.mu.Lock()
	defer sc.mu.Unlock()
	return sc.requests
}

type scriptConn struct {
	mcp.Connection
	sc *script
}

func (c *scriptConn) Write(ctx context.Context, msg jsonrpc.Message) error {
	if req, ok := msg.(*jsonrpc.Request); ok && req.Method == "tools/list" {
		var p mcp.ListToolsParams
		if len(req.Params) > 0 {
			if err := json.Unmarshal(req.Params, &p); err != nil {
				return err
			}
		}
		c.sc.mu.Lock()
		c.sc.pending[req.ID] = p.Cursor
		c.sc.requests++
		c.sc.mu.Unlock()
	}
	return c.Connection.Write(ctx, msg)
}

func (c *scriptConn) Read(ctx context.Context) (jsonrpc.Message, error) {
	msg, err := c.Connection.Read(ctx)
	if resp, ok := msg.(*jsonrpc.Response); ok && err == nil {
		c.sc.mu.Lock()
		cursor, ok := c.sc.pending[resp.ID]
		delete(c.sc.pending, resp.ID)
		page := c.sc.pages[cursor]
		c.sc.mu.Unlock()
		if ok {
			r := *resp
			r.Error, r.Result = nil, page
			return &r, nil
		}
	}
	return msg, err
}

// scriptedSession connects a go-sdk client to a go-sdk server in memory,
// with sc answering tools/list, through stash when not nil. changed gets a
// value on each tools/list_changed notification.
func scriptedSession(t testing.TB, sc *script, stash *listStash) (sess *mcp.ClientSession, srv *mcp.Server, changed chan struct{}) {
	t.Helper()
	ctx := context.Background()
	srv = mcp.NewServer(&mcp.Implementation{Name: "scripted", Version: "1"}, nil)
	noop := func(context.Context, *mcp.CallToolRequest, struct{}) (*mcp.CallToolResult, any, error) {
		return nil, nil, nil
	}
	mcp.AddTool(srv, &mcp.Tool{Name: "real"}, noop)
	ct, st := mcp.NewInMemoryTransports()
	ss, err := srv.Connect(ctx, st, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ss.Close() })
	changed = make(chan struct{}, 1)
	client := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "1"}, &mcp.ClientOptions{
		ToolListChangedHandler: func(context.Context, *mcp.ToolListChangedRequest) {
			select {
			case changed <- struct{}{}:
			default:
			}
		},
	})
	var tr mcp.Transport = &wrapTransport{inner: ct, wrap: func(c mcp.Connection) mcp.Connection { return &scriptConn{Connection: c, sc: sc} }}
	if stash != nil {
		tr = stash.transport(tr)
	}
	sess, err = client.Connect(ctx, tr, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sess.Close() })
	return sess, srv, changed
}

// listBackend is a backend for calling listTools on a session directly.
func listBackend(maxTools int) *backend {
	return &backend{p: &Pool{opts: Options{MaxTools: maxTools}}, log: slog.New(slog.DiscardHandler)}
}

// sdkListing is what go-sdk makes of sc's listing on its own: each tool as
// JSON, in order.
func sdkListing(t testing.TB, sc *script) ([]any, error) {
	t.Helper()
	sess, _, _ := scriptedSession(t, sc, nil)
	var tools []any
	for tool, err := range sess.Tools(context.Background(), nil) {
		if err != nil {
			return nil, err
		}
		tools = append(tools, decode(t, mustJSON(t, tool)))
	}
	return tools, nil
}

func names(tools []*mcp.Tool) []string {
	var s []string
	for _, tool := range tools {
		s = append(s, tool.Name)
	}
	return s
}

// listTools through the stash gives the tools go-sdk gives for the same
// pages, in the backend's order, with the schemas as sent; go-sdk's cache
// keeps no ordinary tool; a re-list after list_changed takes the
// new pages.
func TestListStashListing(t *testing.T) {
	ctx := context.Background()
	sc := newScript(scriptPages)
	want, err := sdkListing(t, sc)
	if err != nil {
		t.Fatal(err)
	}

	stash := newListStash(nil)
	sess, srv, changed := scriptedSession(t, sc, stash)
	if v := sess.InitializeResult().ProtocolVersion; v != StatelessProtocolVersion {
		t.Fatalf("protocol %s, want %s (the one with list caching)", v, StatelessProtocolVersion)
	}
	b := listBackend(100)
	tools, err := b.listTools(ctx, sess, stash)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"a1", "hv", "a2", "a3", "a4"}, names(tools)); diff != "" {
		t.Fatalf("listed (-want +got):\n%s", diff)
	}
	var got []any
	for _, tool := range tools {
		got = append(got, decode(t, mustJSON(t, tool)))
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("listing differs from go-sdk's own (-go-sdk +stash):\n%s", diff)
	}
	if in, ok := tools[0].InputSchema.(json.RawMessage); !ok || string(in) != `{"type":"object","properties":{"q":{"type":"string"}}}` {
		t.Errorf("a1's inputSchema is %T %s, want the bytes sent", tools[0].InputSchema, tools[0].InputSchema)
	}
	if _, ok := tools[1].InputSchema.(map[string]any); !ok {
		t.Errorf("hv's inputSchema is %T, want go-sdk's decoding", tools[1].InputSchema)
	}

	// go-sdk's cache answers the same listing with no request, and holds
	// only the tools the stash hands it: x-mcp-header ones and a3 (its
	// schema is not an object).
	requests := sc.listRequests()
	var cached []string
	for tool, err := range sess.Tools(ctx, nil) {
		if err != nil {
			t.Fatal(err)
		}
		cached = append(cached, tool.Name)
	}
	if n := sc.listRequests(); n != requests {
		t.Fatalf("the second listing made %d requests, want none (cached)", n-requests)
	}
	if diff := cmp.Diff([]string{"hv", "a3"}, cached); diff != "" {
		t.Errorf("go-sdk's cached tools (-want +got):\n%s", diff)
	}
	// A listing answered from go-sdk's cache is complete.
	again, err := b.listTools(ctx, sess, stash)
	if err != nil {
		t.Fatal(err)
	}
	if n := sc.listRequests(); n != requests {
		t.Fatalf("listTools made %d requests, want none (cached)", n-requests)
	}
	if diff := cmp.Diff(names(tools), names(again)); diff != "" {
		t.Errorf("listTools from go-sdk's cache (-first +again):\n%s", diff)
	}

	// list_changed: go-sdk drops its cache, listTools takes the new pages.
	sc.set("", `{"tools":[{"name":"a5","inputSchema":{"type":"object","properties":{"z":{"type":"string"}}}},
		{"name":"hv","inputSchema":{"type":"object","properties":{"r":{"type":"string","x-mcp-header":"Region"}}}},
		{"name":"a1"}],"nextCursor":"p3"}`)
	mcp.AddTool(srv, &mcp.Tool{Name: "later"}, func(context.Context, *mcp.CallToolRequest, struct{}) (*mcp.CallToolResult, any, error) {
		return nil, nil, nil
	})
	select {
	case <-changed:
	case <-time.After(10 * time.Second):
		t.Fatal("no tools/list_changed notification")
	}
	tools, err = b.listTools(ctx, sess, stash)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"a5", "hv", "a1", "a4"}, names(tools)); diff != "" {
		t.Errorf("re-listed (-want +got):\n%s", diff)
	}
	if tools[2].InputSchema != nil {
		t.Errorf("a1 re-listed without a schema has %v", tools[2].InputSchema)
	}

	// MaxTools bounds the listing.
	_, err = listBackend(3).listTools(ctx, sess, stash)
	if err == nil || !strings.HasPrefix(err.Error(), "list tools: more than 3 tools, the most toolgate takes from one server: have the server list fewer") {
		t.Errorf("listing 4 tools with MaxTools 3: %v", err)
	}
}

// A malformed tool entry fails the listing with go-sdk's own error (which
// names the entry by its index in the page), as without the stash.
func TestListStashMalformed(t *testing.T) {
	for _, entry := range []string{`{"name":5}`, `"tool"`, `{"name":"x","inputSchema":{"type":"object"},"annotations":[]}`} {
		t.Run(entry, func(t *testing.T) {
			sc := newScript(map[string]string{"": `{"tools":[{"name":"ok","inputSchema":{"type":"object"}},` + entry + `]}`})
			_, sdkErr := sdkListing(t, sc)
			if sdkErr == nil {
				t.Fatal("go-sdk lists it")
			}
			stash := newListStash(nil)
			sess, _, _ := scriptedSession(t, sc, stash)
			_, err := listBackend(100).listTools(context.Background(), sess, stash)
			if err == nil || err.Error() != "list tools: "+sdkErr.Error() {
				t.Errorf("listTools: %v\ngo-sdk: %v", err, sdkErr)
			}
		})
	}
}

// The result go-sdk gets holds only the x-mcp-header tools (and entries it
// must judge), and everything else as sent.
func TestListStashSplit(t *testing.T) {
	result, page, ok := splitTools(json.RawMessage(scriptPages[""]))
	if !ok {
		t.Fatal("not split")
	}
	var sent, handed map[string]any
	if err := json.Unmarshal([]byte(scriptPages[""]), &sent); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(result, &handed); err != nil {
		t.Fatal(err)
	}
	sentTools := sent["tools"].([]any)
	if diff := cmp.Diff([]any{sentTools[1]}, handed["tools"]); diff != "" {
		t.Errorf("tools go-sdk gets (-want +got):\n%s", diff)
	}
	delete(sent, "tools")
	delete(handed, "tools")
	if diff := cmp.Diff(sent, handed); diff != "" {
		t.Errorf("rest of the result (-sent +handed):\n%s", diff)
	}
	want := []listed{{tool: &mcp.Tool{}}, {name: "hv"}, {tool: &mcp.Tool{}}}
	if len(page) != len(want) || page[0].tool == nil || page[0].tool.Name != "a1" || page[1] != want[1] || page[2].tool.Name != "a2" {
		t.Errorf("page: %+v", page)
	}

	// Not a tools/list result: go-sdk decodes it as sent.
	for _, r := range []string{`[]`, `{"tools":null}`, `{"tools":{}}`, `{"nextCursor":"x"}`, `{"tools":[{"name":"a"},{"name":5}]}`} {
		if _, _, ok := splitTools(json.RawMessage(r)); ok {
			t.Errorf("%s was split", r)
		}
	}
}

// The stash handles only answers to tools/list requests it saw written.
func TestListStashOnlyToolsList(t *testing.T) {
	s := newListStash(nil)
	s.sent(&jsonrpc.Request{ID: mustID(t, 7), Method: "tools/list", Params: json.RawMessage(`{"cursor":"p2"}`)})
	other := &jsonrpc.Response{ID: mustID(t, 8), Result: json.RawMessage(scriptPages[""])}
	if got := s.received(other); got != other {
		t.Error("a response to another request was changed")
	}
	failed := &jsonrpc.Response{ID: mustID(t, 7), Error: errors.New("boom")}
	if got := s.received(failed); got != failed {
		t.Error("an error response was changed")
	}
	s.sent(&jsonrpc.Request{ID: mustID(t, 9), Method: "tools/list", Params: json.RawMessage(`{"cursor":"p2"}`)})
	s.begin() // a new listing: the request is abandoned
	late := &jsonrpc.Response{ID: mustID(t, 9), Result: json.RawMessage(scriptPages["p2"])}
	if got := s.received(late); got != late {
		t.Error("the answer to an abandoned request was changed")
	}
	if _, ok := s.pages["p2"]; ok {
		t.Error("the answer to an abandoned request was stashed")
	}
}

// The pool's tools carry the schemas their server sent whether they came
// through the stash (stdio, SSE) or go-sdk's own decoding (streamable HTTP).
func TestSchemasThroughEveryTransport(t *testing.T) {
	servers := []config.Server{named(backendtest.Command(t, "normal"), "stdio")}
	for _, tr := range []string{config.TypeHTTP, config.TypeSSE} {
		servers = append(servers, backendtest.NewHTTPServer(t, tr, "normal").Config(tr, nil))
	}
	p := startPool(t, servers, testOptions(nil))
	all := p.Tools()
	want := map[string]any{}
	for _, tool := range all[config.TypeHTTP] { // decoded by go-sdk
		want[tool.Name] = decode(t, mustJSON(t, tool))
	}
	if _, ok := want["add"]; !ok || len(want) < 3 {
		t.Fatalf("streamable HTTP backend listed %v", want)
	}
	for _, name := range []string{"stdio", config.TypeSSE} {
		if len(all[name]) != len(want) {
			t.Fatalf("%s lists %d tools, streamable HTTP %d", name, len(all[name]), len(want))
		}
		for _, tool := range all[name] {
			if _, ok := tool.InputSchema.(json.RawMessage); !ok {
				t.Errorf("%s %s: InputSchema is %T, want the stashed json.RawMessage", name, tool.Name, tool.InputSchema)
			}
			if diff := cmp.Diff(want[tool.Name], decode(t, mustJSON(t, tool))); diff != "" {
				t.Errorf("%s %s differs from the streamable HTTP listing (-http +%s):\n%s", name, tool.Name, name, diff)
			}
		}
	}
	res, err := p.CallTool(context.Background(), "stdio", "add", map[string]any{"a": 2, "b": 3})
	if err != nil || res.IsError {
		t.Fatalf("add through stdio: %v %+v", err, res)
	}
}

func mustID(t *testing.T, n int64) jsonrpc.ID {
	t.Helper()
	id, err := jsonrpc.MakeID(float64(n))
	if err != nil {
		t.Fatal(err)
	}
	return id
}

func mustJSON(t testing.TB, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func decode(t testing.TB, b []byte) any {
	t.Helper()
	var v any
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatal(err)
	}
	return v
}

// BenchmarkListTools lists one bench backend's share of 50,000 synthetic
// tools (2,500, one page) through the stash (stdio, SSE) and through go-sdk
// alone (streamable HTTP). Run: go test ./gateway/backend -run '^$'
// -bench ListTools -benchmem.
func BenchmarkListTools(b *testing.B) {
	type wire struct {
		Name        string          `json:"name"`
		Description string          `json:"description"`
		InputSchema json.RawMessage `json:"inputSchema"`
	}
	var page struct {
		Tools []wire `json:"tools"`
	}
	for _, tl := range indextest.Catalog(2500, indextest.Seed) {
		page.Tools = append(page.Tools, wire{tl.Server + "_" + tl.Name, tl.Description, tl.InputSchema})
	}
	sc := newScript(map[string]string{"": string(mustJSON(b, page))})
	ctx := context.Background()
	bk := listBackend(100000)
	for _, via := range []string{"stash", "go-sdk"} {
		b.Run(via, func(b *testing.B) {
			stash := newListStash(nil) // fed only when it wraps the transport
			wrap := stash
			if via == "go-sdk" {
				wrap = nil
			}
			sess, _, _ := scriptedSession(b, sc, wrap)
			b.ReportAllocs()
			for b.Loop() {
				tools, err := bk.listTools(ctx, sess, stash)
				if err != nil || len(tools) != 2500 {
					b.Fatalf("%d tools, %v", len(tools), err)
				}
			}
		})
	}
}

// With Options.Known, a listed tool holds the served catalog's strings and
// schema where they are equal to what was listed, and its own where not.
func TestListStashSharesKnown(t *testing.T) {
	served := map[string]catalog.Tool{
		"a1": {Server: "srv", Name: "a1", Description: "first", InputSchema: json.RawMessage(`{"type":"object","properties":{"q":{"type":"string"}}}`)},
		"a4": {Server: "srv", Name: "a4", Description: "was different", InputSchema: json.RawMessage(`{"type":"object"}`)},
	}
	var asked []string
	b := listBackend(100)
	b.cfg.Name = "srv"
	b.p.opts.Known = func(server, name string) (catalog.Tool, bool) {
		if server != "srv" {
			t.Errorf("Known asked for server %q", server)
		}
		asked = append(asked, name)
		k, ok := served[name]
		return k, ok
	}
	stash := newListStash(b.known)
	sess, _, _ := scriptedSession(t, newScript(scriptPages), stash)
	tools, err := b.listTools(context.Background(), sess, stash)
	if err != nil {
		t.Fatal(err)
	}
	// Only the tools the stash decoded are shared (not hv and a3, which
	// go-sdk got).
	if diff := cmp.Diff([]string{"a1", "a2", "a4"}, asked); diff != "" {
		t.Fatalf("Known asked for (-want +got):\n%s", diff)
	}
	same := func(a, b string) bool { return len(a) > 0 && unsafe.StringData(a) == unsafe.StringData(b) }
	byName := map[string]*mcp.Tool{}
	for _, tl := range tools {
		byName[tl.Name] = tl
	}
	a1, a4 := byName["a1"], byName["a4"]
	if !same(a1.Name, served["a1"].Name) || !same(a1.Description, served["a1"].Description) {
		t.Errorf("a1's name and description are not the served ones")
	}
	if raw := a1.InputSchema.(json.RawMessage); &raw[0] != &served["a1"].InputSchema[0] {
		t.Errorf("a1's schema is its own copy")
	}
	if same(a4.Description, served["a4"].Description) || a4.Description != "" {
		t.Errorf("a4's description %q: want its own (none)", a4.Description)
	}
	if raw := a4.InputSchema.(json.RawMessage); string(raw) != `{"type":"object","properties":{"x":{"type":"number"}}}` {
		t.Errorf("a4's schema %s: want the one listed", raw)
	}
}

// Pages that do not end (a cursor given again, or a cursor past the end
// that grows forever) end the listing with the tools listed so far and a
// warning. Such a server was asked until the connect timeout, then
// reported as not speaking MCP (or, when its pages repeated their tools,
// as listing more than MaxTools).
func TestListToolsPagesThatDoNotEnd(t *testing.T) {
	past := map[string]string{"": `{"tools":[{"name":"a1","inputSchema":{"type":"object"}}],"nextCursor":"1"}`}
	for i := 1; i <= 3*maxEmptyPages; i++ {
		past[fmt.Sprint(i)] = fmt.Sprintf(`{"tools":[],"nextCursor":"%d"}`, i+1)
	}
	past["2"] = `{"tools":[{"name":"a2","inputSchema":{"type":"object"}}],"nextCursor":"3"}`
	for _, tc := range []struct {
		name  string
		pages map[string]string
		want  []string
		asked int
		why   string
	}{
		{"cursor again", map[string]string{
			"":   `{"tools":[{"name":"a1","inputSchema":{"type":"object"}}],"nextCursor":"p2"}`,
			"p2": `{"tools":[{"name":"a2","inputSchema":{"type":"object"}},{"name":"a1","inputSchema":{"type":"object"}}],"nextCursor":"p2"}`,
		}, []string{"a1", "a2"}, 2, "its next cursor is one toolgate asked for before"},
		{"cycle", map[string]string{
			"":  `{"tools":[{"name":"a1","inputSchema":{"type":"object"}}],"nextCursor":"x"}`,
			"x": `{"tools":[{"name":"a2","inputSchema":{"type":"object"}}],"nextCursor":"y"}`,
			"y": `{"tools":[],"nextCursor":"x"}`,
		}, []string{"a1", "a2"}, 3, "its next cursor is one toolgate asked for before"},
		{"empty pages past the end", past, []string{"a1", "a2"}, 3 + maxEmptyPages, fmt.Sprintf("%d pages in a row listed no tool", maxEmptyPages)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sc := newScript(tc.pages)
			stash := newListStash(nil)
			sess, _, _ := scriptedSession(t, sc, stash)
			var log strings.Builder
			b := listBackend(100)
			b.log = slog.New(slog.NewTextHandler(&log, nil))
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute) // the old code asked until the timeout
			defer cancel()
			tools, err := b.listTools(ctx, sess, stash)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, names(tools)); diff != "" {
				t.Errorf("listed (-want +got):\n%s", diff)
			}
			if n := sc.listRequests(); n != tc.asked {
				t.Errorf("%d tools/list requests, want %d", n, tc.asked)
			}
			if l := log.String(); strings.Count(l, "pages do not end") != 1 || !strings.Contains(l, fmt.Sprintf("why=%q", tc.why)) {
				t.Errorf("the log does not say once why the pages do not end (%s):\n%s", tc.why, l)
			}
		})
	}
}

// sameTools tells a listing after list_changed that changed nothing from
// one that did: only a change is logged and handed on (a server that sent
// list_changed a millisecond was listed 9,700 times in 10 s, each logged).
func TestSameTools(t *testing.T) {
	tool := func(name, desc, schema string) *mcp.Tool {
		return &mcp.Tool{Name: name, Description: desc, InputSchema: json.RawMessage(schema)}
	}
	a := []*mcp.Tool{tool("a", "one", `{"type":"object"}`), tool("b", "two", `{"type":"object"}`)}
	for _, tc := range []struct {
		name string
		b    []*mcp.Tool
		same bool
	}{
		{"the same, listed again", []*mcp.Tool{tool("a", "one", `{"type":"object"}`), tool("b", "two", `{"type":"object"}`)}, true},
		{"one more", append(slices.Clone(a), tool("c", "", `{}`)), false},
		{"in another order", []*mcp.Tool{a[1], a[0]}, false},
		{"a description changed", []*mcp.Tool{a[0], tool("b", "TWO", `{"type":"object"}`)}, false},
		{"a schema changed", []*mcp.Tool{a[0], tool("b", "two", `{"type":"object","required":["x"]}`)}, false},
	} {
		if got := sameTools(a, tc.b); got != tc.same {
			t.Errorf("%s: sameTools = %v", tc.name, got)
		}
	}
}
