package gateway

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolgate/toolgate/gateway/config"
	"github.com/toolgate/toolgate/gateway/keys"
	"github.com/toolgate/toolgate/gateway/policy"
	"github.com/toolgate/toolgate/index"
	"github.com/toolgate/toolgate/index/catalog"
	"github.com/toolgate/toolgate/search"
)

// policyGateway is a gateway over a real BM25 engine of testCatalog with
// profile kg = the memory server.
func policyGateway(t *testing.T, caller *fakeCaller, opts *Options) *Gateway {
	t.Helper()
	ix, err := index.Build(context.Background(), testCatalog, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	eng := search.New(ix, nil, nil)
	t.Cleanup(func() { eng.Close() })
	pol := policy.NewSet(
		policy.NewConfigured([]string{"memory", "filesystem", "everything", "weird"}),
		policy.NewProfiles(map[string]config.Profile{"kg": {Servers: []string{"memory"}}}),
	)
	o := Options{Policy: pol}
	if opts != nil {
		o = *opts
		o.Policy = pol
	}
	return New(eng, caller, &o)
}

// connectAs connects a client to g whose requests come from c.
func connectAs(t *testing.T, g *Gateway, c *policy.Caller) *mcp.ClientSession {
	t.Helper()
	ct, st := mcp.NewInMemoryTransports()
	ctx := policy.WithCaller(context.Background(), c)
	ss, err := g.Server().Connect(ctx, st, nil)
	if err != nil {
		t.Fatal(err)
	}
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "test"}, nil).Connect(context.Background(), ct, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close(); ss.Wait() })
	return cs
}

func foundNames(t *testing.T, res *mcp.CallToolResult) []string {
	t.Helper()
	if res.IsError {
		t.Fatalf("search_tools: %s", text(res))
	}
	var names []string
	for _, tl := range res.StructuredContent.(map[string]any)["tools"].([]any) {
		names = append(names, tl.(map[string]any)["name"].(string))
	}
	return names
}

// The caller's profile filters search_tools and decides execute_tool; the
// backend is never called for a tool the caller may not run, and the
// names offered for a mistyped one are the caller's own.
func TestPolicyFiltersSearchAndExecute(t *testing.T) {
	fc := &fakeCaller{call: func(server, tool string, _ map[string]any) (*mcp.CallToolResult, error) {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: server + "/" + tool}}}, nil
	}}
	var observed []Call
	g := policyGateway(t, fc, &Options{ObserveRefused: func(c Caller) Caller {
		return Observed(c, func(c Call) { observed = append(observed, c) })
	}})
	all := connectAs(t, g, &policy.Caller{Transport: policy.TransportHTTP})
	kg := connectAs(t, g, &policy.Caller{Transport: policy.TransportHTTP, Profile: "kg"})
	const q = "create entities list directory files add numbers"

	if got := foundNames(t, call(t, all, SearchToolName, map[string]any{"query": q, "limit": 10})); len(got) < 3 {
		t.Errorf("no profile: %v", got)
	}
	if got := foundNames(t, call(t, kg, SearchToolName, map[string]any{"query": q, "limit": 10})); !slices.Equal(got, []string{"memory__create_entities"}) {
		t.Errorf("profile kg: %v, want memory's tool only", got)
	}
	res := call(t, kg, ExecuteToolName, map[string]any{"name": "filesystem__list_directory", "arguments": map[string]any{"path": "/"}})
	if !res.IsError || !strings.Contains(text(res), `outside profile "kg"`) || fc.calls.Load() != 0 {
		t.Errorf("execute outside kg: isError=%v %q, backend calls %d", res.IsError, text(res), fc.calls.Load())
	}
	// The refusal passed the observers of calls, as a denied call.
	if len(observed) != 1 || observed[0].Outcome != OutcomeDenied || observed[0].Server != "filesystem" || !errors.Is(observed[0].Err, ErrDenied) {
		t.Errorf("observed refusals: %+v", observed)
	}
	res = call(t, kg, ExecuteToolName, map[string]any{"name": "memory__create_entitie"})
	if !res.IsError || !strings.Contains(text(res), "Closest names: memory__create_entities") {
		t.Errorf("typo inside kg: %s", text(res))
	}
	res = call(t, kg, ExecuteToolName, map[string]any{"name": "filesystem__list_directori"})
	if !res.IsError || strings.Contains(text(res), "filesystem__list_directory") {
		t.Errorf("a typo of a hidden tool offers it: %s", text(res))
	}
	res = call(t, all, ExecuteToolName, map[string]any{"name": "fs__list_directory", "arguments": map[string]any{"path": "/"}})
	if !res.IsError || !strings.Contains(text(res), `there is no server named "fs". Closest names: filesystem__list_directory`) {
		t.Errorf("unknown server: %s", text(res))
	}
	// The arguments of a tool the caller cannot see, written beside
	// "name", are unknown keys: its schema is not told.
	res = call(t, kg, ExecuteToolName, map[string]any{"name": "filesystem__list_directory", "path": "/"})
	if txt := text(res); !res.IsError || !strings.Contains(txt, `unknown argument "path"`) || strings.Contains(txt, "list_directory") {
		t.Errorf("a hidden tool's argument beside name: %s", txt)
	}
	if res := call(t, all, ExecuteToolName, map[string]any{"name": "memory__create_entities", "arguments": map[string]any{"entities": []any{}}}); res.IsError || fc.calls.Load() != 1 {
		t.Errorf("an allowed call: isError=%v %s", res.IsError, text(res))
	}
	// "server" naming a server the caller cannot see is an unknown server,
	// and the servers listed are the caller's.
	res = call(t, kg, SearchToolName, map[string]any{"query": q, "server": "filesystem"})
	if !res.IsError || !strings.Contains(text(res), `no server named "filesystem". Servers: memory.`) {
		t.Errorf("server outside kg: %s", text(res))
	}
	if got := foundNames(t, call(t, all, SearchToolName, map[string]any{"query": "nothing matches zzz", "server": "filesystem"})); len(got) != 0 {
		t.Errorf("a visible server without a match: %v", got)
	}
}

// recordingPolicy is a Policy that allows everything and records the
// callers it is asked about.
type recordingPolicy struct {
	mu      sync.Mutex
	callers []*policy.Caller
}

func (p *recordingPolicy) record(c *policy.Caller) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.callers = append(p.callers, c)
}

func (p *recordingPolicy) Filter(c *policy.Caller) *search.Filter { p.record(c); return nil }
func (p *recordingPolicy) Decide(c *policy.Caller, _ catalog.Tool) policy.Decision {
	p.record(c)
	return policy.Decision{Allowed: true}
}
func (p *recordingPolicy) Allowed(c *policy.Caller, _ catalog.Tool) bool {
	p.record(c)
	return true
}
func (p *recordingPolicy) HasProfile(name string) bool { return name == "kg" }
func (p *recordingPolicy) Reach(c *policy.Caller, _ policy.Tools) (bool, []policy.Decision, int) {
	p.record(c)
	return true, nil, 0
}
func (p *recordingPolicy) Sees(c *policy.Caller, _ catalog.Tool) bool {
	p.record(c)
	return true
}

func (p *recordingPolicy) last() *policy.Caller {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.callers[len(p.callers)-1]
}

// Each HTTP route puts its caller in the request: /mcp the gateway's
// profile, /profiles/NAME/mcp NAME's (404 for an unknown one), and a key
// an authenticating middleware in front put there is kept.
func TestHTTPCallerPerRoute(t *testing.T) {
	g, _ := newTestGateway(t, nil)
	rp := &recordingPolicy{}
	g.opts.Policy, g.opts.Profile = rp, "base"
	key := &policy.Key{Name: "ci", Admin: true}
	h := g.HTTPHandler(nil)
	withKey := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h.ServeHTTP(w, r.WithContext(policy.WithCaller(r.Context(), &policy.Caller{Key: key})))
	})
	srv := httptest.NewServer(withKey)
	defer srv.Close()
	for _, c := range []struct{ path, profile string }{{"/mcp", "base"}, {"/profiles/kg/mcp", "kg"}} {
		cs, err := mcp.NewClient(&mcp.Implementation{Name: "t"}, nil).Connect(context.Background(), &mcp.StreamableClientTransport{Endpoint: srv.URL + c.path}, nil)
		if err != nil {
			t.Fatalf("%s: %v", c.path, err)
		}
		call(t, cs, SearchToolName, map[string]any{"query": "files"})
		cs.Close()
		got := rp.last()
		if got.Transport != policy.TransportHTTP || got.Profile != c.profile || got.Key != key || got.Session != nil {
			t.Errorf("%s: caller %+v", c.path, got)
		}
	}
	resp, err := http.Post(srv.URL+"/profiles/nope/mcp", "application/json", strings.NewReader("{}"))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNotFound {
		t.Errorf("/profiles/nope/mcp: %s", resp.Status)
	}
	// Over stdio (here in memory) the caller has a session, fixed to the
	// gateway's profile.
	ct, st := mcp.NewInMemoryTransports()
	done := make(chan error, 1)
	go func() { done <- g.serve(context.Background(), st) }()
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "t"}, nil).Connect(context.Background(), ct, nil)
	if err != nil {
		t.Fatal(err)
	}
	call(t, cs, SearchToolName, map[string]any{"query": "files"})
	cs.Close()
	<-done
	if got := rp.last(); got.Transport != policy.TransportStdio || got.Session == nil || !got.Session.Fixed() || got.ProfileName() != "base" {
		t.Errorf("stdio caller %+v", got)
	}
}

// search_tools' description names the servers a client without profile
// sees: a disabled server leaves it.
func TestDescriptionFollowsPolicy(t *testing.T) {
	g := policyGateway(t, nil, nil)
	if d := g.describeSearch(); !strings.Contains(d, "everything (") {
		t.Fatalf("description lacks everything: %s", d)
	}
	g.opts.Policy.(*policy.Set).Put(policy.NewDisabled([]string{"everything"}))
	if d := g.describeSearch(); strings.Contains(d, "everything (") || !strings.Contains(d, "memory (") {
		t.Errorf("description with everything disabled: %s", d)
	}
}

// TestSearchServerDisabled: search_tools' "server" naming a server
// disabled at run time says so and how to turn it back on, as execute_tool
// of its tools does; it said "there is no server named". A caller whose
// key or profile does not show that server learns nothing of it.
func TestSearchServerDisabled(t *testing.T) {
	g := policyGateway(t, nil, nil)
	set := g.opts.Policy.(*policy.Set)
	set.Put(keys.NewScope(set.Profiles, nil))
	set.Put(policy.NewDisabled([]string{"everything"}))
	enable := `server "everything" is disabled; toolgate__enable_server`
	for _, c := range []struct {
		name   string
		caller *policy.Caller
		told   bool
	}{
		{"stdio", &policy.Caller{Transport: policy.TransportStdio}, true},
		{"a key of everything's tools", &policy.Caller{Transport: policy.TransportHTTP, Key: &policy.Key{Name: "ev", Allow: []string{"everything__*"}}}, true},
		{"a key of memory's tools", &policy.Caller{Transport: policy.TransportHTTP, Key: &policy.Key{Name: "kg", Allow: []string{"memory__*"}}}, false},
		{"the route of profile kg", &policy.Caller{Transport: policy.TransportHTTP, Profile: "kg"}, false},
	} {
		cs := connectAs(t, g, c.caller)
		for _, server := range []string{"everything", "Everything"} {
			res := call(t, cs, SearchToolName, map[string]any{"query": "echo a message", "server": server})
			txt := text(res)
			if !res.IsError || strings.Contains(txt, enable) != c.told || c.told == strings.Contains(txt, "no server named") {
				t.Errorf("%s, server %q: isError=%v %s", c.name, server, res.IsError, txt)
			}
		}
		res := call(t, cs, ExecuteToolName, map[string]any{"name": "everything__echo", "arguments": map[string]any{"message": "hi"}})
		if c.told && !strings.Contains(text(res), enable) {
			t.Errorf("%s: execute_tool of a disabled server's tool: %s", c.name, text(res))
		}
		// A sentence that ends: it ended "… to find a tool you can run".
		if c.name != "stdio" { // a key of the one server reads that it reaches no tool
			continue
		}
		res = call(t, cs, ExecuteToolName, map[string]any{"name": "everything__add", "arguments": map[string]any{"a": 1, "b": 2}})
		if want := "execute_tool everything__add: " + enable + " (or `toolgate servers enable everything`) turns it back on. Call search_tools to find a tool you can run."; text(res) != want {
			t.Errorf("%s: execute_tool of a disabled server's listed tool: %s\nwant %s", c.name, text(res), want)
		}
	}
}

// TestDescriptionPerScope: tools/list tells a caller that a key or a
// profile limits only of the servers it may use: search_tools' description
// names the servers behind the gateway, and a key must learn nothing of
// those outside its scope. A caller without either gets the whole list.
func TestDescriptionPerScope(t *testing.T) {
	g := policyGateway(t, nil, nil)
	g.opts.Policy.(*policy.Set).Put(keys.NewScope(g.opts.Policy.(*policy.Set).Profiles, nil))
	describe := func(c *policy.Caller) string {
		t.Helper()
		return searchToolsDescription(t, connectAs(t, g, c))
	}
	for _, c := range []struct {
		name   string
		caller *policy.Caller
	}{
		{"a key of memory's tools", &policy.Caller{Transport: policy.TransportHTTP, Key: &policy.Key{Name: "kg", Allow: []string{"memory__*"}}}},
		{"a key of profile kg", &policy.Caller{Transport: policy.TransportHTTP, Key: &policy.Key{Name: "kg", Profile: "kg"}}},
		{"the route of profile kg", &policy.Caller{Transport: policy.TransportHTTP, Profile: "kg"}},
	} {
		for range 2 { // the second from the cache
			if d := describe(c.caller); !strings.Contains(d, "memory (") || strings.Contains(d, "filesystem") || strings.Contains(d, "everything") {
				t.Errorf("%s: search_tools' description %q names servers outside its scope", c.name, d)
			}
		}
	}
	if d := describe(&policy.Caller{Transport: policy.TransportHTTP}); !strings.Contains(d, "filesystem (") || !strings.Contains(d, "everything (") {
		t.Errorf("a caller without key or profile: description %q lacks servers", d)
	}
}

// TestProfileSwitchListChanged: a stdio session that switches profile
// (toolgate__activate_profile; a tool of the fake caller stands in) is sent
// notifications/tools/list_changed, and its next tools/list shows the
// search_tools description of the new profile. Before, the client kept the
// description of every server.
func TestProfileSwitchListChanged(t *testing.T) {
	activate := callerCtx(func(ctx context.Context, _, _ string, _ map[string]any) (*mcp.CallToolResult, error) {
		if err := policy.CallerFrom(ctx).Session.Activate("kg"); err != nil {
			return nil, err
		}
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "kg"}}}, nil
	})
	g := policyGateway(t, nil, nil)
	g.caller = activate
	ct, st := mcp.NewInMemoryTransports()
	ctx := policy.WithCaller(context.Background(), g.StdioCaller())
	ss, err := g.Server().Connect(ctx, st, nil)
	if err != nil {
		t.Fatal(err)
	}
	changed := make(chan struct{}, 10)
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "test"}, &mcp.ClientOptions{
		ToolListChangedHandler: func(context.Context, *mcp.ToolListChangedRequest) { changed <- struct{}{} },
	}).Connect(context.Background(), ct, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close(); ss.Wait() })
	describe := func() string {
		t.Helper()
		return searchToolsDescription(t, cs)
	}
	if d := describe(); !strings.Contains(d, "filesystem (") {
		t.Fatalf("before the switch: %q lacks filesystem", d)
	}
	if res := call(t, cs, ExecuteToolName, map[string]any{"name": "memory__create_entities", "arguments": map[string]any{"entities": []any{}}}); res.IsError {
		t.Fatalf("the switching call: %s", text(res))
	}
	select {
	case <-changed:
	case <-time.After(30 * time.Second):
		t.Fatal("no notifications/tools/list_changed after the session's profile changed")
	}
	if d := describe(); strings.Contains(d, "filesystem") || !strings.Contains(d, "memory (") {
		t.Fatalf("after the switch to kg: %q, want memory only", d)
	}
}

// searchToolsDescription is search_tools' description in cs's tools/list.
func searchToolsDescription(t *testing.T, cs *mcp.ClientSession) string {
	t.Helper()
	res, err := cs.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, tl := range res.Tools {
		if tl.Name == SearchToolName {
			return tl.Description
		}
	}
	t.Fatal("no search_tools in tools/list")
	return ""
}

// A direct tools/call of a tool outside the caller's profile gets the
// answer of a name that is not there: it learns nothing of the tool.
func TestDirectCallOutsideTheProfile(t *testing.T) {
	g := policyGateway(t, &fakeCaller{call: func(server, tool string, _ map[string]any) (*mcp.CallToolResult, error) {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: server + "/" + tool}}}, nil
	}}, nil)
	kg := connectAs(t, g, &policy.Caller{Transport: policy.TransportHTTP, Profile: "kg"})
	_, err := kg.CallTool(context.Background(), &mcp.CallToolParams{Name: "everything__add"})
	if err == nil || strings.Contains(err.Error(), `server "everything"`) || !strings.Contains(err.Error(), `run a tool search_tools found through execute_tool`) {
		t.Errorf("outside the profile: %v", err)
	}
	_, err = kg.CallTool(context.Background(), &mcp.CallToolParams{Name: "memory__create_entities"})
	if err == nil || !strings.Contains(err.Error(), `memory__create_entities is a tool of server "memory"`) {
		t.Errorf("inside the profile: %v", err)
	}
	// A name written otherwise (case, space) is not looked up outside the
	// profile either: the answer does not name the tool's real ID.
	for _, name := range []string{"Everything__ADD", " everything__add"} {
		res, err := kg.CallTool(context.Background(), &mcp.CallToolParams{Name: ExecuteToolName, Arguments: map[string]any{"name": name}})
		if err != nil || !res.IsError || strings.Contains(text(res), "everything__add") {
			t.Errorf("execute_tool %q outside the profile: %v %s", name, err, text(res))
		}
	}
	res, err := kg.CallTool(context.Background(), &mcp.CallToolParams{Name: ExecuteToolName, Arguments: map[string]any{"name": "Memory__Create_Entities", "arguments": map[string]any{"entities": []any{}}}})
	if err != nil || res.IsError || text(res) != "memory/create_entities" {
		t.Errorf("execute_tool Memory__Create_Entities inside the profile: %v %s", err, text(res))
	}
}

// TestCallerReachingNoTool: a caller whose key, profile and the servers'
// state leave it no tool is told so by search_tools, with execute_tool's
// reason, and its tools/list description says it too; before, it was told
// to try other words and shown "every connected MCP server".
func TestCallerReachingNoTool(t *testing.T) {
	g := policyGateway(t, nil, nil)
	set := g.opts.Policy.(*policy.Set)
	set.Put(keys.NewScope(set.Profiles, nil))
	http := policy.TransportHTTP
	for _, c := range []struct {
		name   string
		caller *policy.Caller
		run    string // a tool execute_tool refuses with the reason
		want   string
	}{
		{"a key whose profile is not in the config", &policy.Caller{Transport: http, Key: &policy.Key{Name: "bad", Profile: "nosuch"}},
			"memory__create_entities", `the API key "bad" is limited to profile "nosuch", which the config no longer has`},
		{"a key and a route's profile that share no tool", &policy.Caller{Transport: http, Profile: "kg", Key: &policy.Key{Name: "fs", Allow: []string{"filesystem__*"}}},
			"filesystem__list_directory", `outside profile "kg": the profile shows only the servers memory`},
		{"a key of one server, disabled", &policy.Caller{Transport: http, Key: &policy.Key{Name: "mem", Allow: []string{"memory__*"}}},
			"memory__create_entities", `server "memory" is disabled`},
		{"a session whose profile a reload removed", &policy.Caller{Transport: policy.TransportStdio, Session: policy.NewSession("gone", false)},
			"memory__create_entities", `profile "gone" is no longer in the config`},
	} {
		t.Run(c.name, func(t *testing.T) {
			if strings.Contains(c.want, "disabled") {
				set.Put(policy.NewDisabled([]string{"memory"}))
				defer set.Put(policy.NewDisabled(nil))
			}
			cs := connectAs(t, g, c.caller)
			if res := call(t, cs, ExecuteToolName, map[string]any{"name": c.run}); !strings.Contains(text(res), c.want) ||
				!strings.Contains(text(res), "reaches no tool") || strings.Contains(text(res), "Call search_tools") {
				t.Fatalf("execute_tool %s: %s, want the reason %q, that it reaches no tool and no \"Call search_tools\"", c.run, text(res), c.want)
			} else if n := strings.Count(text(res), c.want); n != 1 && !strings.Contains(c.want, "outside profile") { // that reason names each tool
				t.Errorf("execute_tool %s: %s: the reason %d times, want once", c.run, text(res), n)
			}
			for _, args := range []map[string]any{{"query": "create entities"}, {"query": "create entities", "server": "memory"}} {
				res := call(t, cs, SearchToolName, args)
				if txt := text(res); !res.IsError || !strings.Contains(txt, "reaches no tool") || !strings.Contains(txt, c.want) || strings.Contains(txt, "other words.") {
					t.Errorf("search_tools %v: %s, want that it reaches no tool because %s", args, txt, c.want)
				}
			}
			if d := searchToolsDescription(t, cs); !strings.Contains(d, "reaches no tool") || !strings.Contains(d, c.want) || strings.Contains(d, "every connected") {
				t.Errorf("description: %s", d)
			}
		})
	}
	// A caller that reaches tools and finds none is still told to reword.
	cs := connectAs(t, g, &policy.Caller{Transport: http, Key: &policy.Key{Name: "mem", Allow: []string{"memory__*"}}})
	if txt := text(call(t, cs, SearchToolName, map[string]any{"query": "zzzz qqqq"})); strings.Contains(txt, "reaches no tool") {
		t.Errorf("a caller with tools: %s", txt)
	}
}

// TestOwnServersNotUpYet: a caller limited to a profile or a key whose
// servers never listed their tools (still connecting, down) is told that
// its server is not up and to try again, by search_tools, its description
// and execute_tool; it was told "this caller reaches no tool … outside
// profile" (downServers said nothing to a limited caller). Servers outside
// its profile or scope stay unnamed.
func TestOwnServersNotUpYet(t *testing.T) {
	servers := []string{"everything", "filesystem", "gh", "memory", "slow", "weird"}
	g := policyGateway(t, nil, &Options{
		Servers: func() []string { return servers },
		Unavailable: func(s string, _ bool) string {
			switch s {
			case "slow":
				return `server "slow" is still connecting`
			case "gh":
				return `server "gh" is down: variable ${GH_TOKEN} (env.GITHUB_TOKEN) is not set`
			}
			return ""
		},
	})
	set := g.opts.Policy.(*policy.Set)
	set.Put(policy.NewConfigured(servers))
	set.Put(policy.NewProfiles(map[string]config.Profile{"kg": {Servers: []string{"memory"}}, "slowkg": {Servers: []string{"slow"}},
		"both": {Servers: []string{"memory", "slow"}}}))
	set.Put(keys.NewScope(set.Profiles, nil))
	http := policy.TransportHTTP
	const want = `this caller reaches no tool until its server "slow" is up, so no search can find one now (other words will not help): server "slow" is still connecting; try again once it is up`
	for name, c := range map[string]*policy.Caller{
		"the route's profile":   {Transport: http, Profile: "slowkg"},
		"a session's profile":   {Transport: policy.TransportStdio, Session: policy.NewSession("slowkg", true)},
		"a key's profile":       {Transport: http, Key: &policy.Key{Name: "k", Profile: "slowkg"}},
		"a key scoped to slow":  {Transport: http, Key: &policy.Key{Name: "k", Allow: []string{"slow__*"}}},
		"a key and its profile": {Transport: http, Profile: "both", Key: &policy.Key{Name: "k", Allow: []string{"slow__*"}}},
	} {
		t.Run(name, func(t *testing.T) {
			cs := connectAs(t, g, c)
			for _, args := range []map[string]any{{"query": "create entities"}, {"query": "create entities", "server": "slow"}} {
				if res := call(t, cs, SearchToolName, args); !res.IsError || text(res) != "search_tools: "+want+"." {
					t.Errorf("search_tools %v: %s\nwant search_tools: %s.", args, text(res), want)
				}
			}
			if d := searchToolsDescription(t, cs); !strings.Contains(d, want) || strings.Contains(d, "gh") {
				t.Errorf("description: %s", d)
			}
			if res := call(t, cs, ExecuteToolName, map[string]any{"name": "slow__get_it"}); !res.IsError || !strings.Contains(text(res), `"slow__get_it" cannot run: server "slow" is still connecting`) {
				t.Errorf("execute_tool slow__get_it: %s", text(res))
			}
			if res := call(t, cs, ExecuteToolName, map[string]any{"name": "filesystem__list_directory"}); !res.IsError || !strings.Contains(text(res), want) {
				t.Errorf("execute_tool filesystem__list_directory: %s", text(res))
			}
		})
	}
	// A caller with tools is told of its own server that is not up, and of
	// no other.
	cs := connectAs(t, g, &policy.Caller{Transport: http, Profile: "both"})
	res := call(t, cs, SearchToolName, map[string]any{"query": "zzzz qqqq"})
	if d := res.StructuredContent.(map[string]any)["downServers"]; res.IsError || fmt.Sprint(d) != "[map[name:slow reason:server \"slow\" is still connecting]]" || strings.Contains(text(res), "gh") {
		t.Errorf("profile both: %v %s", d, text(res))
	}
	// Servers outside the caller's profile or scope stay unnamed: a
	// narrower glob does not cover the server.
	for _, c := range []*policy.Caller{{Transport: http, Profile: "kg"}, {Transport: http, Key: &policy.Key{Name: "k", Allow: []string{"memory__*", "slow__get_*"}}}} {
		res := call(t, connectAs(t, g, c), SearchToolName, map[string]any{"query": "zzzz qqqq"})
		if txt := text(res); res.IsError || strings.Contains(txt, "slow") || strings.Contains(txt, "gh") || res.StructuredContent.(map[string]any)["downServers"] != nil {
			t.Errorf("%s: %s", c, txt)
		}
	}
}

// Servers my-fs and my_fs side by side (the config takes them; their IDs
// differ): a name written in another case or with the other separator may
// mean either, and execute_tool and search_tools' "server" name both;
// they answered that there was no such tool or server. The exact names
// run, and a name that only one is in another case still finds it.
func TestAmbiguousForgivingNames(t *testing.T) {
	tools := []catalog.Tool{
		{Server: "my-fs", Name: "read_file", Description: "Read a file of the first folder"},
		{Server: "my_fs", Name: "read_file", Description: "Read a file of the second folder"},
		{Server: "a-b_c", Name: "x", Description: "Read a file of the third folder"},
		{Server: "a_b-c", Name: "x", Description: "Read a file of the fourth folder"},
	}
	ix, err := index.Build(context.Background(), tools, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	eng := search.New(ix, nil, nil)
	t.Cleanup(func() { eng.Close() })
	caller := &fakeCaller{call: func(server, tool string, _ map[string]any) (*mcp.CallToolResult, error) {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: server + "/" + tool}}}, nil
	}}
	g := New(eng, caller, &Options{Policy: policy.NewSet(policy.NewConfigured([]string{"my-fs", "my_fs", "a-b_c", "a_b-c"}))})
	cs := connect(t, g)
	const both = `may be any of "my-fs__read_file", "my_fs__read_file", which differ only in case or in "-" and "_": give one of them exactly as written.`
	for name, want := range map[string]string{
		"my-fs__read_file": "my-fs/read_file",
		"my_fs__read_file": "my_fs/read_file",
		"MY_FS__read_file": "my_fs/read_file", // in another case, only one is
		"My-Fs__read-file": `execute_tool: "My-Fs__read-file" ` + both,
		"my-fs.read_file":  "my-fs/read_file", // another separator, in case as one is
		"My-Fs.read-file":  `execute_tool: "My-Fs.read-file" ` + both,
	} {
		res := call(t, cs, ExecuteToolName, map[string]any{"name": name, "arguments": map[string]any{}})
		if got := text(res); res.IsError != strings.HasPrefix(want, "execute_tool") || !strings.HasPrefix(got, want) {
			t.Errorf("execute_tool %s: isError=%v %q, want %q", name, res.IsError, got, want)
		}
	}
	for server, want := range map[string]string{
		"my_fs": "",
		"MY-FS": "", // in another case, only one is
		"A-B_C": "",
		"a-b-c": `search_tools: "server" "a-b-c" may be any of "a-b_c", "a_b-c", which differ only in case or in "-" and "_": give one of them exactly as written.`,
	} {
		res := call(t, cs, SearchToolName, map[string]any{"query": "read a file", "server": server})
		if got := text(res); res.IsError != (want != "") || want != "" && got != want {
			t.Errorf("search_tools server %q: isError=%v %q, want %q", server, res.IsError, got, want)
		}
	}
}

// A readOnly profile, chosen by the route or by an API key's --profile,
// shows search_tools only the tools that declare readOnlyHint: true, and
// execute_tool refuses the others, naming the profile and the hint; the
// backend is never called for them.
func TestReadOnlyProfileSearchAndExecute(t *testing.T) {
	fc := &fakeCaller{call: func(server, tool string, _ map[string]any) (*mcp.CallToolResult, error) {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: server + "/" + tool}}}, nil
	}}
	ix, err := index.Build(context.Background(), testCatalog, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	eng := search.New(ix, nil, nil)
	t.Cleanup(func() { eng.Close() })
	pol := policy.NewSet(policy.NewConfigured([]string{"memory", "filesystem", "everything", "weird"}))
	pol.Put(keys.NewScope(pol.Profiles, nil))
	pol.PutProfiles(map[string]config.Profile{"ro": {ReadOnly: true}})
	g := New(eng, fc, &Options{Policy: pol})
	const q = "create entities list directory files add numbers write file"
	for _, c := range []struct {
		name, refusal string
		caller        *policy.Caller
	}{
		{"route", `everything__add is outside profile "ro": the profile shows only tools that declare readOnlyHint: true, and this one does not`,
			&policy.Caller{Transport: policy.TransportHTTP, Profile: "ro"}},
		{"key", `the API key "rev" lacks access to this tool: the key is limited to profile "ro", which does not show it`,
			&policy.Caller{Transport: policy.TransportHTTP, Key: &policy.Key{Name: "rev", Profile: "ro"}}},
	} {
		cs := connectAs(t, g, c.caller)
		for _, args := range []map[string]any{{"query": q, "limit": 10}, {"query": q, "limit": 10, "readOnly": true}} {
			if got := foundNames(t, call(t, cs, SearchToolName, args)); !slices.Equal(got, []string{"filesystem__list_directory"}) {
				t.Errorf("%s: search %v: %v, want the one tool that declares readOnlyHint: true", c.name, args, got)
			}
		}
		for _, name := range []string{"everything__add", "filesystem__write_file"} {
			res := call(t, cs, ExecuteToolName, map[string]any{"name": name, "arguments": map[string]any{"a": 1, "b": 2}})
			if want := strings.ReplaceAll(c.refusal, "everything__add", name); !res.IsError || !strings.Contains(text(res), want) {
				t.Errorf("%s: execute %s: isError=%v %q, want %q", c.name, name, res.IsError, text(res), want)
			}
		}
		if res := call(t, cs, ExecuteToolName, map[string]any{"name": "filesystem__list_directory", "arguments": map[string]any{"path": "/"}}); res.IsError {
			t.Errorf("%s: execute filesystem__list_directory: %s", c.name, text(res))
		}
	}
	if n := fc.calls.Load(); n != 2 {
		t.Errorf("backend calls %d, want the 2 of the read-only tool", n)
	}
}

// TestReachNoneNamesEachKey: two keys of the same scope (their globs, on
// the same profile's route) that reach no tool are each told so in
// search_tools' description and answers under their own name. Keys of
// one scope share a search filter, and the description kept per filter
// told the second key the first one's name.
func TestReachNoneNamesEachKey(t *testing.T) {
	g := policyGateway(t, nil, nil)
	set := g.opts.Policy.(*policy.Set)
	set.Put(keys.NewScope(set.Profiles, nil))
	for _, name := range []string{"fs1", "fs2"} {
		cs := connectAs(t, g, &policy.Caller{Transport: policy.TransportHTTP, Profile: "kg", Key: &policy.Key{Name: name, Allow: []string{"filesystem__*"}}})
		own, other := strconv.Quote(name), `"fs1"`
		if name == "fs1" {
			other = `"fs2"`
		}
		d := searchToolsDescription(t, cs)
		res := call(t, cs, SearchToolName, map[string]any{"query": "create entities"})
		for what, txt := range map[string]string{"description": d, "search_tools": text(res)} {
			if !strings.Contains(txt, "reaches no tool") || !strings.Contains(txt, "API key "+own) || strings.Contains(txt, other) {
				t.Errorf("key %s, %s: %s", name, what, txt)
			}
		}
	}
}

// TestDeniedNameEchoBounded: a refused call's name — any text the caller
// sends, megabytes of it — is echoed cut, in the answer and in the log
// line of the refusal. The log held it whole: each request of a key
// allowed one server wrote its 4 MiB body into the gateway's log
// (2026-12-07, 200 KB a line from curl).
func TestDeniedNameEchoBounded(t *testing.T) {
	var logs bytes.Buffer
	g := policyGateway(t, &fakeCaller{}, &Options{Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	set := g.opts.Policy.(*policy.Set)
	set.Put(keys.NewScope(set.Profiles, nil))
	low := connectAs(t, g, &policy.Caller{Transport: policy.TransportHTTP, Key: &policy.Key{Name: "low", Allow: []string{"memory__*"}}})
	name := "filesystem__" + strings.Repeat("A", 1<<20)
	res := call(t, low, ExecuteToolName, map[string]any{"name": name})
	if txt := text(res); !res.IsError || !strings.Contains(txt, `the API key "low" lacks access to this tool`) || len(txt) > 4096 {
		t.Errorf("%.20s…: isError=%v, %d bytes: %.300s", name, res.IsError, len(txt), txt)
	}
	if n := logs.Len(); n == 0 || n > 4096 {
		t.Errorf("the log took %d bytes for the refusal: %.300s", n, logs.String())
	}
}

// TestSearchNamesDisabledFitting: a search that finds nothing fitting,
// while a server disabled at run time has a tool that fits, names that
// server and how to enable it, in the text and in downServers; it said
// only that no tool fits, and the model reworded its query for a tool
// that was hidden, not missing. A disabled server whose tools do not fit,
// or that the caller's own rules do not show, is not named.
func TestSearchNamesDisabledFitting(t *testing.T) {
	g := policyGateway(t, nil, nil)
	set := g.opts.Policy.(*policy.Set)
	set.Put(policy.NewDisabled([]string{"memory", "everything"}))
	enable := `server "memory" is disabled; toolgate__enable_server (or ` + "`toolgate servers enable memory`" + `) turns it back on`
	cs := connectAs(t, g, &policy.Caller{Transport: policy.TransportStdio})
	res := call(t, cs, SearchToolName, map[string]any{"query": "knowledge graph entities"})
	txt := text(res)
	if res.IsError || !strings.Contains(txt, "\nNot searched: "+enable+"; it has tools that fit this query.") || strings.Contains(txt, `"everything"`) {
		t.Errorf("a query only a disabled server's tool fits: isError=%v %s", res.IsError, txt)
	}
	var out SearchResult
	b, _ := json.Marshal(res.StructuredContent)
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatal(err)
	}
	if want := []DownServer{{Name: "memory", Reason: enable}}; !slices.Equal(out.DownServers, want) {
		t.Errorf("downServers = %+v, want %+v", out.DownServers, want)
	}
	// Outside the caller's profile: nothing of it.
	cs = connectAs(t, g, &policy.Caller{Transport: policy.TransportHTTP, Profile: "kg"})
	if res := call(t, cs, SearchToolName, map[string]any{"query": "list a directory"}); strings.Contains(text(res), "disabled") {
		t.Errorf("a profile of memory alone, disabled: %s", text(res))
	}
	cs = connectAs(t, g, &policy.Caller{Transport: policy.TransportStdio})
	if res := call(t, cs, SearchToolName, map[string]any{"query": "paint the fence blue"}); strings.Contains(text(res), "disabled") {
		t.Errorf("a query no disabled server's tool fits names one: %s", text(res))
	}
}
