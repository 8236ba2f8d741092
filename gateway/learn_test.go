package gateway

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/google/go-cmp/cmp"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolgate/toolgate/gateway/policy"
	"github.com/toolgate/toolgate/index/catalog"
	"github.com/toolgate/toolgate/search"
)

type fakeLearner struct {
	mu    sync.Mutex
	pairs []string
}

func (f *fakeLearner) Record(query string, tool catalog.Tool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.pairs = append(f.pairs, query+" → "+tool.ID())
}

func (f *fakeLearner) got() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.pairs...)
}

// A call is recorded with the query of the session's recent search that
// returned the tool; a tool no search returned, a second call after the
// same search and a call from another session are not.
func TestLearnerRecordsSearchThenCall(t *testing.T) {
	g, fs := newTestGateway(t, nil)
	l := &fakeLearner{}
	g = New(fs, g.caller, &Options{Learner: l})
	a, b := connect(t, g), connect(t, g)

	if res := call(t, a, SearchToolName, map[string]any{"query": "make a note", "limit": 2}); res.IsError {
		t.Fatal(text(res))
	}
	// The fake searcher returns memory__create_entities and filesystem__list_directory.
	run := func(name string, args map[string]any) {
		t.Helper()
		res := call(t, a, ExecuteToolName, map[string]any{"name": name, "arguments": args})
		if res.IsError {
			t.Fatalf("%s: %s", name, text(res))
		}
	}
	run("memory__create_entities", map[string]any{"entities": []any{}})
	run("memory__create_entities", map[string]any{"entities": []any{}}) // again: no second pair
	run("everything__add", map[string]any{"a": 1, "b": 2})              // not returned by the search
	if res := call(t, b, ExecuteToolName, map[string]any{"name": "filesystem__list_directory", "arguments": map[string]any{"path": "/"}}); res.IsError {
		t.Fatal(text(res)) // session b never searched
	}
	if d := cmp.Diff([]string{"make a note → memory__create_entities"}, l.got()); d != "" {
		t.Errorf("recorded pairs (-want +got):\n%s", d)
	}
}

// Which callers teach search (toolgate.learn.fromKeys): one without a key
// always; one with a key as the setting says ("all", the default, "admin"
// or "none"). One key's search and call put a tool first in every other
// key's answer to those words.
func TestLearnFromKeys(t *testing.T) {
	callers := map[string]*policy.Caller{
		"stdio": {Transport: policy.TransportStdio},
		"user":  {Transport: policy.TransportHTTP, Key: &policy.Key{Name: "user"}},
		"admin": {Transport: policy.TransportHTTP, Key: &policy.Key{Name: "admin", Admin: true}},
	}
	for _, tc := range []struct {
		fromKeys string
		teach    []string
	}{
		{"", []string{"admin", "stdio", "user"}},
		{"all", []string{"admin", "stdio", "user"}},
		{"admin", []string{"admin", "stdio"}},
		{"none", []string{"stdio"}},
	} {
		t.Run(tc.fromKeys, func(t *testing.T) {
			g, fs := newTestGateway(t, nil)
			var taught []string
			for _, who := range []string{"admin", "stdio", "user"} {
				l := &fakeLearner{}
				g := New(fs, g.caller, &Options{Learner: l, LearnFromKeys: tc.fromKeys})
				cs := connectAs(t, g, callers[who])
				if res := call(t, cs, SearchToolName, map[string]any{"query": "make a note", "limit": 2}); res.IsError {
					t.Fatal(text(res))
				}
				if res := call(t, cs, ExecuteToolName, map[string]any{"name": "memory__create_entities", "arguments": map[string]any{"entities": []any{}}}); res.IsError {
					t.Fatal(text(res))
				}
				if len(l.got()) > 0 {
					taught = append(taught, who)
				}
			}
			if d := cmp.Diff(tc.teach, taught); d != "" {
				t.Errorf("callers that taught (-want +got):\n%s", d)
			}
		})
	}
}

// Over the stateless HTTP front, the Mcp-Session-Id a client sends of
// itself (`toolgate connect` does) ties its search to its call; another
// session's call, or one without the header (even after a search without
// it), is not matched.
func TestLearnerOverHTTPBySessionHeader(t *testing.T) {
	g, fs := newTestGateway(t, nil)
	l := &fakeLearner{}
	g = New(fs, g.caller, &Options{Learner: l})
	srv := httptest.NewServer(g.HTTPHandler(nil))
	defer srv.Close()
	post := func(session, body string) {
		t.Helper()
		h := http.Header{}
		if session != "" {
			h.Set("Mcp-Session-Id", session)
		}
		resp, b := postMCP(t, srv.URL+"/mcp", "2025-11-25", body, h)
		if resp.StatusCode != http.StatusOK || strings.Contains(b, `"isError":true`) {
			t.Fatalf("POST %s: %s %s", body, resp.Status, b)
		}
	}
	search := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"search_tools","arguments":{"query":"make a note","limit":2}}}`
	run := func(tool, args string) string {
		return `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"execute_tool","arguments":{"name":"` + tool + `","arguments":` + args + `}}}`
	}
	post("connect-a", search)
	post("connect-b", run("memory__create_entities", `{"entities":[]}`)) // another session
	post("", run("memory__create_entities", `{"entities":[]}`))          // no session
	// Clients that send none are no one session: one's search and
	// another's call are no pair.
	post("", search)
	post("", run("memory__create_entities", `{"entities":[]}`))
	post("connect-a", run("filesystem__list_directory", `{"path":"/"}`))
	if d := cmp.Diff([]string{"make a note → filesystem__list_directory"}, l.got()); d != "" {
		t.Errorf("recorded pairs (-want +got):\n%s", d)
	}
}

// Over HTTP, a request without an Mcp-Session-Id is a session of its own:
// it keys nothing, so no later request, whose session may sit where a
// collected one sat, is matched to it. Over stdio (no HTTP header) the one
// session is the key.
func TestSessionKeyOverHTTPWithoutHeader(t *testing.T) {
	ss := &mcp.ServerSession{}
	over := func(h http.Header) mcp.Request {
		return &mcp.CallToolRequest{Session: ss, Params: &mcp.CallToolParamsRaw{}, Extra: &mcp.RequestExtra{Header: h}}
	}
	if k := sessionKey(context.Background(), over(http.Header{})); k != "" {
		t.Errorf("HTTP without a session header: key %q, want none", k)
	}
	if k := sessionKey(context.Background(), over(nil)); !strings.HasPrefix(k, "ptr:") {
		t.Errorf("stdio: key %q, want the session's", k)
	}
}

// Searches older than recentFor, or beyond the last recentSearches, do not
// count; sessions beyond maxSessions forget the least recently active.
func TestRecentSearches(t *testing.T) {
	now := time.Unix(1_700_000_000, 0)
	r := newRecent(func() time.Time { return now })
	r.searched("s", "old query", []string{"a__x"})
	now = now.Add(recentFor + time.Second)
	if q := r.ran("s", "a__x"); q != "" {
		t.Errorf("a search older than %s matched: %q", recentFor, q)
	}
	for i := range recentSearches + 1 {
		tool := "a__x"
		if i > 0 {
			tool = "a__y"
		}
		r.searched("s", "query", []string{tool})
	}
	if q := r.ran("s", "a__x"); q != "" {
		t.Errorf("a search beyond the last %d matched", recentSearches)
	}
	if q := r.ran("s", "a__y"); q != "query" {
		t.Errorf("ran = %q, want the latest search's query", q)
	}
	for i := range maxSessions + 1 {
		now = now.Add(time.Millisecond)
		r.searched(string(rune('A'+i%26))+string(rune(i)), "q", []string{"a__z"})
	}
	if len(r.sessions) > maxSessions {
		t.Errorf("%d sessions remembered, want at most %d", len(r.sessions), maxSessions)
	}
}

// TestRecentSearchesBounded: a session's remembered search keeps what the
// ranker reads of its query (search.MaxQueryBytes, whitespace collapsed),
// not the query as sent: an API key sending 3.5 MB queries under new
// Mcp-Session-Ids grew the gateway's heap by 3.5 MB a request (611 MB after
// 120), up to 1,024 sessions × 8 searches of 4 MiB.
func TestRecentSearchesBounded(t *testing.T) {
	r := newRecent(nil)
	huge := "read   the\tgraph " + strings.Repeat("é", 2<<20)
	r.searched("k", huge, []string{"memory__read_graph"})
	kept := r.sessions["k"].searches[0].query
	if len(kept) > search.MaxQueryBytes || !strings.HasPrefix(kept, "read the graph é") {
		t.Fatalf("kept %d bytes (%.20q), want at most %d, whitespace collapsed", len(kept), kept, search.MaxQueryBytes)
	}
	if !utf8.ValidString(kept) {
		t.Errorf("cut inside a rune: %q", kept[len(kept)-4:])
	}
	if q := r.ran("k", "memory__read_graph"); q != kept {
		t.Errorf("ran: %.30q", q)
	}
	// Kept as a string of its own: a cut of the query shares its memory.
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	for i := range 16 {
		r.searched(fmt.Sprint("s", i), strings.Repeat("word ", 400_000), []string{"memory__read_graph"}) // 2 MB each
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	runtime.KeepAlive(r)
	if grew := int64(after.HeapAlloc) - int64(before.HeapAlloc); grew > 8<<20 {
		t.Errorf("16 remembered searches of 2 MB queries hold %d MB", grew>>20)
	}
}
