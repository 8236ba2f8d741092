package mgmt

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolgate/toolgate/gateway/audit"
	"github.com/toolgate/toolgate/gateway/backend"
	"github.com/toolgate/toolgate/gateway/config"
	"github.com/toolgate/toolgate/gateway/keys"
	"github.com/toolgate/toolgate/gateway/live"
	"github.com/toolgate/toolgate/gateway/policy"
	"github.com/toolgate/toolgate/index/catalog"
	"github.com/toolgate/toolgate/internal/tlsfiles/tlstest"
)

// fakePool records what reaches it.
type fakePool struct {
	calls, restarts []string
	tools           map[string]int     // a's count of tools, when not 3
	onRestart       func(string) error // runs first in Restart; its error is Restart's
}

func (p *fakePool) CallTool(_ context.Context, server, tool string, _ map[string]any) (*mcp.CallToolResult, error) {
	p.calls = append(p.calls, server+"__"+tool)
	return &mcp.CallToolResult{}, nil
}
func (p *fakePool) Status() []backend.Status {
	return []backend.Status{
		{Name: "a", Transport: "stdio", State: backend.StateUp, Tools: cmp.Or(p.tools["a"], 3), PID: 42, Since: time.Unix(0, 0), Restarts: p.count("a")},
		{Name: "b", Transport: "http", State: backend.StateDown, Err: "connection refused", LastErr: "connection refused", Restarts: 3 + p.count("b")},
	}
}

// count is how many times server was restarted.
func (p *fakePool) count(server string) int {
	n := 0
	for _, r := range p.restarts {
		if r == server {
			n++
		}
	}
	return n
}

// PastRestarts: b was restarted 3 times before it was disabled.
func (p *fakePool) PastRestarts(server string) int {
	if server == "b" {
		return 3
	}
	return 0
}
func (p *fakePool) Stderr(server string) []string { return []string{server + " says ***"} }
func (p *fakePool) Restart(server string) error {
	if p.onRestart != nil {
		if err := p.onRestart(server); err != nil {
			return err
		}
	}
	p.restarts = append(p.restarts, server)
	return nil
}
func (p *fakePool) Unavailable(server string, _ bool) string { return "pool:" + server }
func (p *fakePool) Describe(server string) string            { return "pool describes " + server }
func (p *fakePool) CheckCommand(string) error                { return nil }

// fakeRuntime is the loop: a config, a policy, disabling in memory.
type fakeRuntime struct {
	cfg     *config.File
	pol     *policy.Set
	reloads []string
	tools   []catalog.Tool // the catalog
	gen     uint64         // its generation (0: not numbered, as during a cold start)
	looks   int            // the calls of IDs
}

func (r *fakeRuntime) CatalogGeneration() uint64 { return r.gen }

func (r *fakeRuntime) Tool(id string) (catalog.Tool, bool) {
	for _, t := range r.tools {
		if t.ID() == id {
			return t, true
		}
	}
	return catalog.Tool{}, false
}
func (r *fakeRuntime) IDs() []string {
	r.looks++
	var out []string
	for _, t := range r.tools {
		out = append(out, t.ID())
	}
	return out
}

func (r *fakeRuntime) Config() *config.File { return r.cfg }
func (r *fakeRuntime) Policy() *policy.Set  { return r.pol }
func (r *fakeRuntime) SetDisabled(_ context.Context, server string, disabled bool) (bool, error) {
	if err := live.CheckDisable(r.cfg, server); err != nil {
		return false, err
	}
	next, changed := live.State{Disabled: r.pol.Disabled().Servers()}.With(server, disabled)
	r.pol.Put(policy.NewDisabled(next.Disabled))
	return changed, nil
}
func (r *fakeRuntime) Reload(_ context.Context, trigger string) *live.Reload {
	r.reloads = append(r.reloads, trigger)
	return &live.Reload{Trigger: trigger}
}

const testConfig = `{"mcpServers": {"a": {"command": "x"}, "b": {"url": "https://b.example/mcp"}, "c": {"command": "y", "disabled": true}},
  "toolgate": {"callTimeout": "1m", "profiles": {"kg": {"servers": ["a"]}, "ops": {"servers": ["c"]}}, "management": {"allowConfigChanges": %s}}}`

// writeConfig writes data to path and returns the config it parses to.
func writeConfig(t *testing.T, path, data string) *config.File {
	t.Helper()
	if err := os.WriteFile(path, []byte(data), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Parse([]byte(data), path, nil)
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

func newTestServer(t *testing.T, allow bool) (*Server, *fakePool, *fakeRuntime, string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "toolgate.json")
	data := strings.Replace(testConfig, "%s", map[bool]string{true: "true", false: "false"}[allow], 1)
	cfg := writeConfig(t, path, data)
	rt := &fakeRuntime{cfg: cfg, pol: policy.NewSet(policy.NewConfigured([]string{"a", "b", Name}), policy.NewDisabled(nil), policy.NewProfiles(cfg.Toolgate.Profiles))}
	p := &fakePool{}
	return New(p, rt, &Options{ConfigPaths: []string{path}}), p, rt, path
}

func run(t *testing.T, s *Server, c *policy.Caller, tool string, args map[string]any) *mcp.CallToolResult {
	t.Helper()
	ctx := policy.WithCaller(context.Background(), c)
	res, err := s.CallTool(ctx, Name, tool, args)
	if err != nil {
		t.Fatalf("%s: error %v (management failures are results)", tool, err)
	}
	return res
}

func resText(r *mcp.CallToolResult) string { return r.Content[0].(*mcp.TextContent).Text }

var (
	stdio = &policy.Caller{Transport: policy.TransportStdio, Session: policy.NewSession("", false)}
	http  = &policy.Caller{Transport: policy.TransportHTTP}
	admin = &policy.Caller{Transport: policy.TransportHTTP, Key: &policy.Key{Name: "ops", Admin: true}}
)

// Every tool has a description and an input schema that search and
// execute_tool's validation can use; other servers' calls go to the pool.
func TestToolsAndRouting(t *testing.T) {
	s, p, _, _ := newTestServer(t, false)
	tools := Tools()
	if len(tools) != 9 {
		t.Errorf("%d tools", len(tools))
	}
	for _, tl := range tools {
		b, _ := json.Marshal(tl.InputSchema)
		if len(tl.Description) < 60 || !strings.Contains(string(b), `"type":"object"`) {
			t.Errorf("%s: description %q, schema %s", tl.Name, tl.Description, b)
		}
	}
	if _, err := s.CallTool(context.Background(), "a", "x", nil); err != nil || !slices.Equal(p.calls, []string{"a__x"}) {
		t.Errorf("a call of another server: %v %v", err, p.calls)
	}
	if s.Unavailable(Name, false) != "" || s.Unavailable("a", false) != "pool:a" {
		t.Error("Unavailable")
	}
	if !strings.Contains(s.Describe(Name), "servers") || s.Describe("a") != "pool describes a" {
		t.Error("Describe")
	}
	if res := run(t, s, stdio, "nope", nil); !res.IsError {
		t.Error("an unknown management tool")
	}
}

func TestListAndStatus(t *testing.T) {
	s, p, rt, _ := newTestServer(t, false)
	rt.pol.Put(policy.NewDisabled([]string{"b"}))
	res := run(t, s, http, "list_servers", nil)
	txt := resText(res)
	for _, w := range []string{"3 MCP servers", "- a: up (stdio, 3 tools, 0 restarts); profiles: kg", "- b: disabled (http, 0 tools, 3 restarts)", "- c: disabled in config"} {
		if !strings.Contains(txt, w) {
			t.Errorf("list_servers lacks %q:\n%s", w, txt)
		}
	}
	list := res.StructuredContent.(ServerList)
	if len(list.Servers) != 3 || list.Servers[0].PID != 0 {
		t.Errorf("structured list: %+v (details belong to server_status)", list)
	}
	res = run(t, s, http, "server_status", map[string]any{"name": "a"})
	if txt := resText(res); !strings.Contains(txt, "pid 42") || !strings.Contains(txt, "a says ***") {
		t.Errorf("server_status: %s", txt)
	}
	// b is down (disabled at run time here, so enabled for this): its
	// latest failure is why, said once, in error.
	rt.pol.Put(policy.NewDisabled(nil))
	res = run(t, s, http, "server_status", map[string]any{"name": "b"})
	if in := res.StructuredContent.(ServerInfo); in.Error != "connection refused" || in.LastError != "" {
		t.Errorf("server_status b: error %q, lastError %q; want the failure once, in error", in.Error, in.LastError)
	}
	if txt := resText(res); strings.Count(txt, "connection refused") != 1 {
		t.Errorf("server_status b says its error %d times:\n%s", strings.Count(txt, "connection refused"), txt)
	}
	rt.pol.Put(policy.NewDisabled([]string{"b"}))
	if res := run(t, s, http, "server_status", map[string]any{"name": "zz"}); !res.IsError || !strings.Contains(resText(res), "servers: a, b, c") {
		t.Errorf("server_status zz: %s", resText(res))
	}
	if res := run(t, s, http, "restart_server", map[string]any{"name": "b"}); !res.IsError || !strings.Contains(resText(res), "enable it instead") {
		t.Errorf("restart of a disabled server: %s", resText(res))
	}
	// The answer waits for the new start to end and says how it went.
	if res := run(t, s, http, "restart_server", map[string]any{"name": "a"}); res.IsError || !slices.Equal(p.restarts, []string{"a"}) ||
		resText(res) != `Server "a" is restarted and up, with 3 tools.` {
		t.Errorf("restart: %s %v", resText(res), p.restarts)
	}
	// Counts of one in the singular: it said "1 restarts", "1 tools".
	p.tools = map[string]int{"a": 1}
	if txt := resText(run(t, s, http, "list_servers", nil)); !strings.Contains(txt, "- a: up (stdio, 1 tool, 1 restart)") {
		t.Errorf("list_servers with a's one tool and one restart:\n%s", txt)
	}
	if res := run(t, s, http, "restart_server", map[string]any{"name": "a"}); resText(res) != `Server "a" is restarted and up, with 1 tool.` {
		t.Errorf("restart of a with one tool: %s", resText(res))
	}
	if res := run(t, s, http, "disable_server", map[string]any{"name": "c"}); !res.IsError || !strings.Contains(resText(res), "disabled in the config file") {
		t.Errorf("disable a config-disabled server: %s", resText(res))
	}
	// Enabled, and the answer says how its start went: the fake's b is
	// down.
	if res := run(t, s, http, "enable_server", map[string]any{"name": "b"}); !res.IsError || rt.pol.Disabled().Has("b") ||
		!strings.HasPrefix(resText(res), `Server "b" was enabled but is DOWN: connection refused`) {
		t.Errorf("enable b: %s", resText(res))
	}
	res = run(t, s, http, "restart_server", map[string]any{"name": "b"})
	if sc, _ := res.StructuredContent.(map[string]any); !res.IsError || !strings.HasPrefix(resText(res), `Server "b" was restarted but is DOWN: connection refused`) || sc["state"] != "down" {
		t.Errorf("restart of a server that comes back down: isError=%v %s %v", res.IsError, resText(res), res.StructuredContent)
	}
}

func TestProfiles(t *testing.T) {
	s, _, _, _ := newTestServer(t, false)
	sess := &policy.Caller{Transport: policy.TransportStdio, Session: policy.NewSession("", false)}
	if res := run(t, s, sess, "activate_profile", map[string]any{"name": "nope"}); !res.IsError || !strings.Contains(resText(res), "profiles: kg") {
		t.Errorf("unknown profile: %s", resText(res))
	}
	if res := run(t, s, sess, "activate_profile", map[string]any{"name": "kg"}); res.IsError || sess.ProfileName() != "kg" {
		t.Errorf("activate kg: %s", resText(res))
	}
	if res := run(t, s, sess, "list_profiles", nil); !strings.Contains(resText(res), "- kg: servers: a (active)") {
		t.Errorf("list_profiles: %s", resText(res))
	}
	fixed := &policy.Caller{Transport: policy.TransportStdio, Session: policy.NewSession("kg", true)}
	if res := run(t, s, fixed, "activate_profile", map[string]any{"name": ""}); !res.IsError || !strings.Contains(resText(res), "serve --profile") {
		t.Errorf("fixed profile: %s", resText(res))
	}
	if res := run(t, s, http, "activate_profile", map[string]any{"name": "kg"}); !res.IsError || !strings.Contains(resText(res), " http://HOST:PORT/profiles/kg/mcp,") ||
		!strings.Contains(resText(res), "`toolgate serve --config FILE --profile kg`") {
		t.Errorf("http: %s", resText(res))
	}
	// The command quoted is the one that serves this gateway's config
	// with the profile (Options.ServeCommand): it read `toolgate serve
	// --profile NAME`, which serve refuses without --config. A key that
	// is not admin reads no path of the gateway's machine.
	s.opts.ServeCommand = func(p string) string {
		return "toolgate serve --config /etc/tg.json --http 127.0.0.1:8931 --profile " + p
	}
	if res := run(t, s, http, "activate_profile", map[string]any{"name": "kg"}); !strings.HasSuffix(resText(res), "or restart the gateway with /mcp limited to the profile: `toolgate serve --config /etc/tg.json --http 127.0.0.1:8931 --profile kg`.") {
		t.Errorf("http, with the serve command: %s", resText(res))
	}
	if res := run(t, s, http, "activate_profile", map[string]any{"name": ""}); !strings.Contains(resText(res), "--profile NAME`") {
		t.Errorf("http, no profile named: %s", resText(res))
	}
	keyed := &policy.Caller{Transport: policy.TransportHTTP, Key: &policy.Key{Name: "low", Profile: "kg"}}
	if res := run(t, s, keyed, "activate_profile", map[string]any{"name": "kg"}); strings.Contains(resText(res), "/etc/tg.json") || !strings.Contains(resText(res), "`toolgate serve --config FILE --profile kg`") {
		t.Errorf("http, a key that is not admin: %s", resText(res))
	}
	// The address the client used, when its request said it.
	reached := &policy.Caller{Transport: policy.TransportHTTP, Origin: "https://gw.example:8931"}
	if res := run(t, s, reached, "activate_profile", map[string]any{"name": "kg"}); !res.IsError || !strings.Contains(resText(res), " https://gw.example:8931/profiles/kg/mcp,") {
		t.Errorf("http with its origin: %s", resText(res))
	}
}

// TestListProfilesOfAKey: a key limited to a profile sees that profile
// active in toolgate__list_profiles, on /mcp too; before, it was told no
// profile was active and every server's tools were shown.
func TestListProfilesOfAKey(t *testing.T) {
	s, _, _, _ := newTestServer(t, false)
	for _, c := range []struct {
		name, profile, want string
	}{
		{"a key of profile kg", "kg", `- kg: servers: a (active: the API key "k" is limited to it)`},
		{"a key of a profile the config lacks", "gone", `No tool is shown: the API key "k" is limited to profile "gone", which the config no longer has`},
	} {
		caller := &policy.Caller{Transport: policy.TransportHTTP, Key: &policy.Key{Name: "k", Profile: c.profile}}
		res := run(t, s, caller, "list_profiles", nil)
		sc, _ := res.StructuredContent.(ProfileList)
		if txt := resText(res); !strings.Contains(txt, c.want) || strings.Contains(txt, "No profile is active") || sc.Active != c.profile {
			t.Errorf("%s: %s, active %q; want %q and active %q", c.name, txt, sc.Active, c.want, c.profile)
		}
		// Nothing of the profiles outside its scope: their servers are
		// other servers.
		if txt := resText(res); strings.Contains(txt, "ops") || len(sc.Profiles) > 1 || !strings.Contains(txt, "The other profiles are not shown") {
			t.Errorf("%s: other profiles shown: %s %+v", c.name, txt, sc.Profiles)
		}
	}
}

// A key that is not admin learns of the profiles only its own and the one
// in effect, in list_servers and server_status as in list_profiles: server
// a is in profile kg, which a key limited otherwise is not told of.
func TestListServersProfilesOfAKey(t *testing.T) {
	s, _, rt, _ := newTestServer(t, false)
	rt.tools = []catalog.Tool{{Server: "a", Name: "x"}, {Server: Name, Name: "list_servers"}}
	rt.pol = policy.NewSet(keys.NewScope(rt.pol.Profiles, ChangesConfig), policy.NewConfigured([]string{"a", "b", Name}), policy.NewDisabled(nil), rt.pol.Profiles())
	for _, c := range []struct {
		caller *policy.Caller
		want   []string
	}{
		{&policy.Caller{Transport: policy.TransportHTTP, Key: &policy.Key{Name: "low", Allow: []string{"a__*", "toolgate__*"}}}, []string{}},
		{&policy.Caller{Transport: policy.TransportHTTP, Key: &policy.Key{Name: "kgkey", Profile: "kg"}}, []string{"kg"}},
		{&policy.Caller{Transport: policy.TransportHTTP, Profile: "kg", Key: &policy.Key{Name: "low", Allow: []string{"a__*", "toolgate__*"}}}, []string{"kg"}},
		{admin, []string{"kg"}},
		{stdio, []string{"kg"}},
	} {
		res := run(t, s, c.caller, "list_servers", nil)
		list, _ := res.StructuredContent.(ServerList)
		var got []string
		for _, in := range list.Servers {
			if in.Name == "a" {
				got = in.Profiles
			}
		}
		if !slices.Equal(got, c.want) || (len(c.want) == 0) == strings.Contains(resText(res), "kg") {
			t.Errorf("%v: list_servers names the profiles %q of a, want %q: %s", c.caller, got, c.want, resText(res))
		}
		st := run(t, s, c.caller, "server_status", map[string]any{"name": "a"})
		if info, _ := st.StructuredContent.(ServerInfo); !slices.Equal(info.Profiles, c.want) {
			t.Errorf("%v: server_status a names the profiles %q, want %q", c.caller, info.Profiles, c.want)
		}
	}
}

// list_servers names the profiles that show one of a server's tools, by
// all of a profile's rules (servers, tools.allow, tools.deny, readOnly),
// not by its servers alone: a profile of every server that allows only
// a's tools was said to show b too. A server with no tool catalogued is
// judged by a tool of any name (policy.AnyTool), as MayManage judges it.
func TestListServersProfilesByTools(t *testing.T) {
	path := filepath.Join(t.TempDir(), "toolgate.json")
	cfg := writeConfig(t, path, `{"mcpServers": {"a": {"command": "x"}, "b": {"command": "y"}, "c": {"command": "z"}},
  "toolgate": {"profiles": {
    "everything": {},
    "a-only": {"tools": {"allow": ["a__*"]}},
    "no-b": {"tools": {"deny": ["b__*"]}},
    "reader": {"readOnly": true},
    "named-b": {"servers": ["b"], "tools": {"allow": ["b__write"]}}}}}`)
	rt := &fakeRuntime{cfg: cfg, pol: policy.NewSet(policy.NewConfigured([]string{"a", "b", "c", Name}), policy.NewDisabled(nil), policy.NewProfiles(cfg.Toolgate.Profiles))}
	rt.tools = []catalog.Tool{
		{Server: "a", Name: "read", Annotations: json.RawMessage(`{"readOnlyHint":true}`)},
		{Server: "b", Name: "write"},
		{Server: "b", Name: "delete"},
	} // c has listed no tools
	s := New(&fakePool{}, rt, &Options{ConfigPaths: []string{path}})
	want := map[string][]string{
		"a": {"a-only", "everything", "no-b", "reader"},
		"b": {"everything", "named-b"},
		"c": {"everything", "no-b"},
	}
	list, _ := run(t, s, admin, "list_servers", nil).StructuredContent.(ServerList)
	for _, in := range list.Servers {
		if !slices.Equal(in.Profiles, want[in.Name]) {
			t.Errorf("list_servers: %s is in the profiles %q, want %q", in.Name, in.Profiles, want[in.Name])
		}
	}
	if len(list.Servers) != 3 {
		t.Errorf("list_servers: %d servers, want 3", len(list.Servers))
	}
}

// add_server and remove_server: refused unless the config allows it and
// the caller is on stdio or an admin; then the file is written, keeping
// its other keys, and reloaded.
func TestConfigChanges(t *testing.T) {
	entry := map[string]any{"name": "n", "command": "sh", "args": []string{"-c", "true"}}
	for _, c := range []struct {
		allow  bool
		caller *policy.Caller
		want   string // "" = allowed
	}{
		{false, stdio, "allowConfigChanges"},
		{false, admin, "allowConfigChanges"},
		{true, http, "only for a client on stdio or one with an admin API key"},
		{true, nil, "only for a client on stdio"},
		{true, stdio, ""},
		{true, admin, ""},
	} {
		s, _, rt, path := newTestServer(t, c.allow)
		before, _ := os.ReadFile(path)
		if c.want != "" {
			// A refusal by policy: an error wrapping policy.ErrDenied,
			// which the gateway counts and audits as denied.
			for _, tool := range []string{"add_server", "remove_server"} {
				res, err := s.CallTool(policy.WithCaller(context.Background(), c.caller), Name, tool, entry)
				after, _ := os.ReadFile(path)
				if res != nil || !errors.Is(err, policy.ErrDenied) || !strings.Contains(fmt.Sprint(err), c.want) || string(after) != string(before) || len(rt.reloads) != 0 {
					t.Errorf("allow=%v %v %s: %v %v, want refused as denied (file changed %v, reloads %v)", c.allow, c.caller, tool, res, err, string(after) != string(before), rt.reloads)
				}
			}
			continue
		}
		res := run(t, s, c.caller, "add_server", entry)
		after, _ := os.ReadFile(path)
		if res.IsError || !config.HasServer(after, "n") || !strings.Contains(string(after), `"callTimeout": "1m"`) || !slices.Equal(rt.reloads, []string{"toolgate__add_server"}) {
			t.Errorf("allow=%v %v: %s\n%s", c.allow, c.caller, resText(res), after)
		}
		res = run(t, s, c.caller, "remove_server", map[string]any{"name": "b"})
		after, _ = os.ReadFile(path)
		if res.IsError || config.HasServer(after, "b") || len(rt.reloads) != 2 {
			t.Errorf("remove b: %s\n%s", resText(res), after)
		}
		// Profile kg shows a: the config would not load without it.
		if res := run(t, s, c.caller, "remove_server", map[string]any{"name": "a"}); !res.IsError || !strings.Contains(resText(res), "toolgate.profiles.kg.servers[0]") {
			t.Errorf("remove a: %s", resText(res))
		}
		for _, bad := range []map[string]any{
			{"name": "a", "command": "x"},                     // taken
			{"name": "toolgate", "command": "x"},              // reserved
			{"name": "w", "command": "x", "url": "http://h/"}, // invalid entry
		} {
			if res := run(t, s, c.caller, "add_server", bad); !res.IsError {
				t.Errorf("add_server %v: not refused", bad)
			}
		}
		// "A" beside "a": tool IDs would be confused (a__x, A__x).
		if res := run(t, s, c.caller, "add_server", map[string]any{"name": "A", "command": "x"}); !res.IsError || !strings.Contains(resText(res), `"A" differs from it only in case`) {
			t.Errorf("add_server A: %s", resText(res))
		}
		if res := run(t, s, c.caller, "remove_server", map[string]any{"name": "zz"}); !res.IsError || !strings.Contains(resText(res), `no server named "zz"`) {
			t.Errorf("remove zz: %s", resText(res))
		}
	}
}

// TestServerStatusMasksTarget: server_status shows a remote server's URL,
// which may carry its key (?k=…, user:password@), to any caller whose
// scope includes toolgate__server_status: the secrets are masked, as in the
// logs.
func TestServerStatusMasksTarget(t *testing.T) {
	const data = `{"mcpServers": {"a": {"command": "x"}, "b": {"url": "https://user:pwsecret4321@b.example/mcp?k=urlsecret12345&v=2"}}}`
	path := filepath.Join(t.TempDir(), "toolgate.json")
	cfg := writeConfig(t, path, data)
	rt := &fakeRuntime{cfg: cfg, pol: policy.NewSet(policy.NewConfigured([]string{"a", "b", Name}), policy.NewDisabled(nil), policy.NewProfiles(nil))}
	s := New(&fakePool{}, rt, &Options{ConfigPaths: []string{path}})
	res := run(t, s, http, "server_status", map[string]any{"name": "b"})
	b, _ := json.Marshal(res)
	if strings.Contains(string(b), "urlsecret12345") || strings.Contains(string(b), "pwsecret4321") {
		t.Errorf("server_status shows the URL's secrets: %s", b)
	}
	if !strings.Contains(resText(res), "b.example/mcp?k=***") {
		t.Errorf("server_status no longer says where the server is: %s", resText(res))
	}
}

// TestScopedManagement: a caller neither on stdio nor admin manages only
// the servers whose tools it may see. A key scoped to profile kg (server a)
// restarted, disabled and inspected b; now b reads as refused by the key,
// as a server that does not exist does, and nothing reaches the pool or
// the disabled servers. A route's profile refuses b in its words; a key
// whose globs leave none of b's tools reads b as unknown. Admin and stdio
// manage all.
func TestScopedManagement(t *testing.T) {
	s, p, rt, _ := newTestServer(t, false)
	rt.tools = []catalog.Tool{{Server: "a", Name: "x"}, {Server: "b", Name: "y"}, {Server: Name, Name: "restart_server"}}
	rt.pol = policy.NewSet(keys.NewScope(rt.pol.Profiles, ChangesConfig), policy.NewConfigured([]string{"a", "b", Name}), policy.NewDisabled(nil), rt.pol.Profiles())
	scoped := &policy.Caller{Transport: policy.TransportHTTP, Key: &policy.Key{Name: "low", Allow: []string{"a__*", "toolgate__*"}}}
	route := &policy.Caller{Transport: policy.TransportHTTP, Profile: "kg"}
	globs := &policy.Caller{Transport: policy.TransportHTTP, Key: &policy.Key{Name: "g", Deny: []string{"b__y"}}}
	call := func(c *policy.Caller, tool, server string) (*mcp.CallToolResult, error) {
		return s.CallTool(policy.WithCaller(context.Background(), c), Name, tool, map[string]any{"name": server})
	}
	for _, c := range []*policy.Caller{scoped, route, globs} {
		// c, disabled in config, has no tool catalogued: its name decides.
		visible := map[*policy.Caller]string{globs: "a, c"}[c]
		if visible == "" {
			visible = "a"
		}
		if txt := resText(run(t, s, c, "list_servers", nil)); !strings.Contains(txt, "- a: ") || strings.Contains(txt, "- b") || strings.Contains(txt, "- c") != (c == globs) {
			t.Errorf("%v: list_servers: %s", c, txt)
		}
		if txt := resText(run(t, s, c, "server_status", map[string]any{"name": ""})); !strings.HasSuffix(txt, "(servers: "+visible+")") {
			t.Errorf("%v: server_status without a name: %s", c, txt)
		}
		for _, tool := range []string{"server_status", "restart_server", "disable_server", "enable_server"} {
			res, err := call(c, tool, "b")
			none, noneErr := call(c, tool, "zz")
			got, want := fmt.Sprint(res, err), strings.ReplaceAll(fmt.Sprint(none, noneErr), "zz", "b")
			if res != nil && none != nil {
				got, want = resText(res), strings.ReplaceAll(resText(none), "zz", "b")
			}
			switch {
			case got != want:
				t.Errorf("%v: %s b reads %q, a server that does not exist %q", c, tool, got, want)
			case c == globs && (err != nil || !res.IsError || !strings.Contains(resText(res), `no server named "b" (servers: a, c)`)):
				t.Errorf("%v: %s b: %v %v, want the answer for an unknown server", c, tool, res, err)
			case c != globs && !errors.Is(err, policy.ErrDenied):
				t.Errorf("%v: %s b: %v %v, want denied", c, tool, res, err)
			}
		}
		if len(p.restarts) != 0 || len(rt.pol.Disabled().Servers()) != 0 {
			t.Fatalf("%v: restarts %v, disabled %v", c, p.restarts, rt.pol.Disabled().Servers())
		}
		if res := run(t, s, c, "restart_server", map[string]any{"name": "a"}); res.IsError || !slices.Equal(p.restarts, []string{"a"}) {
			t.Errorf("%v: restart a: %s %v", c, resText(res), p.restarts)
		}
		p.restarts = nil
	}
	// A disabled server stays the scoped key's to enable; b stays out.
	run(t, s, admin, "disable_server", map[string]any{"name": "b"})
	run(t, s, admin, "disable_server", map[string]any{"name": "a"})
	if _, err := call(scoped, "enable_server", "b"); !errors.Is(err, policy.ErrDenied) || !rt.pol.Disabled().Has("b") {
		t.Errorf("enable b with the scoped key: %v, disabled %v", err, rt.pol.Disabled().Servers())
	}
	if res := run(t, s, scoped, "enable_server", map[string]any{"name": "a"}); res.IsError || rt.pol.Disabled().Has("a") {
		t.Errorf("enable a with the scoped key: %s", resText(res))
	}
	for _, c := range []*policy.Caller{admin, stdio} {
		if res := run(t, s, c, "restart_server", map[string]any{"name": "a"}); res.IsError {
			t.Errorf("%v: restart a: %s", c, resText(res))
		}
		if res := run(t, s, c, "server_status", map[string]any{"name": "b"}); res.IsError {
			t.Errorf("%v: server_status b: %s", c, resText(res))
		}
	}
}

// TestAddServerTLS: add_server takes a remote server's tls files, as
// servers add does; a relative path is the config folder's, and a file the
// config could not read changes nothing, naming the field.
func TestAddServerTLS(t *testing.T) {
	s, _, _, path := newTestServer(t, true)
	ca := tlstest.NewCA(t, "private CA")
	tlstest.Write(t, filepath.Dir(path), "corp-ca.pem", ca.PEM)
	res := run(t, s, stdio, "add_server", map[string]any{"name": "corp", "url": "https://mcp.corp.example/mcp", "tls": map[string]any{"ca": "corp-ca.pem"}})
	after, _ := os.ReadFile(path)
	cfg, err := config.Parse(after, path, nil)
	if res.IsError || err != nil || cfg.MCPServers["corp"].TLS == nil || cfg.MCPServers["corp"].TLS.CA != filepath.Join(filepath.Dir(path), "corp-ca.pem") {
		t.Fatalf("add_server with tls: %s, %v\n%s", resText(res), err, after)
	}
	res = run(t, s, stdio, "add_server", map[string]any{"name": "other", "url": "https://other.example/mcp", "tls": map[string]any{"ca": "missing.pem"}})
	if again, _ := os.ReadFile(path); !res.IsError || !strings.Contains(resText(res), `mcpServers["other"].tls.ca: cannot read`) || string(again) != string(after) {
		t.Errorf("add_server with a missing CA file: %s, want refused naming tls.ca, the file unchanged", resText(res))
	}
}

// TestAddServerSettings: add_server takes the keys every server entry may
// have (description, language, maxResultBytes, the timeouts, lazy), writes
// them as given, and a value the config refuses is refused in the config's
// own words, as the same entry written in the file is, with nothing
// written; the tool took none of them ("not arguments of this tool").
func TestAddServerSettings(t *testing.T) {
	s, _, _, path := newTestServer(t, true)
	res := run(t, s, stdio, "add_server", map[string]any{
		"name": "buchhaltung", "command": "node", "args": []any{"buchhaltung.js"},
		"description": "Rechnungen, Kunden und Buchungen", "language": "de", "maxResultBytes": 2000,
		"connectTimeout": "2m", "callTimeout": 90, "lazy": true, "idleTimeout": "10m",
	})
	after, _ := os.ReadFile(path)
	cfg, err := config.Parse(after, path, nil)
	if res.IsError || err != nil {
		t.Fatalf("add_server with settings: %s, %v\n%s", resText(res), err, after)
	}
	got := cfg.MCPServers["buchhaltung"]
	if got.Description != "Rechnungen, Kunden und Buchungen" || got.Language != "de" || got.MaxResultBytes != 2000 ||
		got.ConnectTimeout.Duration != 2*time.Minute || got.CallTimeout.Duration != 90*time.Second || !got.Lazy || got.IdleTimeout.Duration != 10*time.Minute {
		t.Errorf("entry added: %+v\n%s", got, after)
	}
	res = run(t, s, stdio, "add_server", map[string]any{"name": "remote", "url": "https://r.example/mcp", "keepAlive": "15s"})
	if after, _ = os.ReadFile(path); res.IsError || !strings.Contains(string(after), `"keepAlive": "15s"`) {
		t.Errorf("add_server with keepAlive: %s\n%s", resText(res), after)
	}
	for _, bad := range []map[string]any{
		{"command": "node", "maxResultBytes": 0},
		{"command": "node", "maxResultBytes": -5},
		{"command": "node", "language": "German"},
		{"command": "node", "language": "de-AT"},
		{"command": "node", "callTimeout": "soon"},
		{"command": "node", "connectTimeout": -3},
		{"command": "node", "idleTimeout": "10m"},
		{"command": "node", "keepAlive": "5s"},
		{"command": "node", "description": strings.Repeat("x", config.MaxDescription+1)},
	} {
		entry, _ := json.Marshal(bad)
		_, want := config.Parse([]byte(`{"mcpServers": {"x": `+string(entry)+`}}`), path, nil)
		if want == nil {
			t.Fatalf("the config takes %s", entry)
		}
		loader := strings.TrimPrefix(want.Error(), "config "+path+": ")
		args := map[string]any{"name": "bad"}
		for k, v := range bad {
			args[k] = v
		}
		res := run(t, s, stdio, "add_server", args)
		if again, _ := os.ReadFile(path); !res.IsError || !strings.Contains(resText(res), strings.ReplaceAll(loader, `["x"]`, `["bad"]`)) || string(again) != string(after) {
			t.Errorf("add_server %s: %s\nwant the config's words, %s, and the file unchanged", entry, resText(res), loader)
		}
	}
}

// add_server's schema gives each new argument its type and a description a
// model can act on: the durations a string or a number, and the language
// codes the config takes, from the one list the config checks.
func TestAddServerSchema(t *testing.T) {
	var schema struct {
		Properties map[string]struct {
			Type        any    `json:"type"`
			Description string `json:"description"`
		} `json:"properties"`
	}
	for _, tl := range Tools() {
		if tl.Name == "add_server" {
			b, _ := json.Marshal(tl.InputSchema)
			if err := json.Unmarshal(b, &schema); err != nil {
				t.Fatal(err)
			}
		}
	}
	for _, key := range []string{"connectTimeout", "callTimeout", "keepAlive", "idleTimeout"} {
		if p := schema.Properties[key]; fmt.Sprint(p.Type) != "[string number]" || !strings.Contains(p.Description, "number of seconds") {
			t.Errorf("%s: %+v, want a string or a number, described", key, p)
		}
	}
	lang := schema.Properties["language"].Description
	for _, code := range catalog.LanguageCodes() {
		if !strings.Contains(lang, fmt.Sprintf("%q", code)) {
			t.Errorf("language's description does not name %q: %s", code, lang)
		}
	}
	if d := schema.Properties["description"].Description; !strings.Contains(d, fmt.Sprint(config.MaxDescription)) {
		t.Errorf("description's description: %s", d)
	}
	if p := schema.Properties["maxResultBytes"]; !strings.Contains(fmt.Sprint(p.Type), "integer") {
		t.Errorf("maxResultBytes: %+v", p)
	}
}

// add_server of the built-in server's name says it is reserved and names
// another, as servers add and the config's load do; it read as a rule of
// characters. The file is left as it was.
func TestAddServerReservedName(t *testing.T) {
	s, _, _, path := newTestServer(t, true)
	before, _ := os.ReadFile(path)
	for _, name := range []string{"toolgate", "Toolgate"} {
		res := run(t, s, stdio, "add_server", map[string]any{"name": name, "command": "echo"})
		if after, _ := os.ReadFile(path); !res.IsError || resText(res) != "add_server: "+config.NameProblem(name) || !strings.Contains(resText(res), "reserved for the gateway's own management tools") || string(after) != string(before) {
			t.Errorf("add_server %s: %s\n%s", name, resText(res), after)
		}
	}
}

// pathsPool is a pool whose server a failed on its command, a path on the
// gateway's machine, as its errors and stderr lines say.
type pathsPool struct{ fakePool }

func (p *pathsPool) Status() []backend.Status {
	const err = `backend "a": command "/nonexistent/secretpath-bin" not found: check command`
	return []backend.Status{{Name: "a", Transport: "stdio", State: backend.StateDown, Err: err, LastErr: err, TLSCertError: "cannot read /etc/secretpath.pem"}}
}
func (p *pathsPool) Stderr(string) []string { return []string{"reading /home/op/secretpath.json"} }

// TestScopedKeySeesNoPaths: an API key that is not admin sees, through
// list_servers and server_status, no paths on the gateway's machine, as in
// GET /status: no command line, and the errors and stderr lines read
// hidden (backend.Status.ForKey). Stdio and an admin key see them.
func TestScopedKeySeesNoPaths(t *testing.T) {
	const data = `{"mcpServers": {"a": {"command": "/nonexistent/secretpath-bin", "args": ["--dir", "/srv/secretpath"]}}}`
	path := filepath.Join(t.TempDir(), "toolgate.json")
	cfg := writeConfig(t, path, data)
	profiles := policy.NewProfiles(nil)
	rt := &fakeRuntime{cfg: cfg, tools: []catalog.Tool{{Server: "a", Name: "x"}}}
	rt.pol = policy.NewSet(keys.NewScope(func() *policy.Profiles { return profiles }, ChangesConfig), policy.NewConfigured([]string{"a", Name}), policy.NewDisabled(nil), profiles)
	s := New(&pathsPool{}, rt, &Options{ConfigPaths: []string{path}})
	scoped := &policy.Caller{Transport: policy.TransportHTTP, Key: &policy.Key{Name: "low", Allow: []string{"a__*", "toolgate__*"}}}
	for _, c := range []*policy.Caller{scoped, admin, stdio} {
		for _, tool := range []string{"list_servers", "server_status"} {
			res := run(t, s, c, tool, map[string]any{"name": "a"})
			b, _ := json.Marshal(res)
			if res.IsError || !strings.Contains(string(b), `a: down`) {
				t.Errorf("%v: %s: %s", c, tool, b)
			}
			if got := strings.Contains(string(b), "secretpath"); got != (c != scoped) {
				t.Errorf("%v: %s shows paths on the gateway's machine: %v: %s", c, tool, got, b)
			}
			if got := strings.Contains(resText(res), backend.HiddenFromKey); got != (c == scoped) {
				t.Errorf("%v: %s says the error is hidden: %v: %s", c, tool, got, resText(res))
			}
		}
	}
}

// TestScopedKeyToolCounts: an API key that is not admin is told the tools
// of a server it sees, as GET /status and search tell it (2 of a's 3):
// list_servers and server_status gave the server's full count.
func TestScopedKeyToolCounts(t *testing.T) {
	s, _, rt, _ := newTestServer(t, true)
	profiles := policy.NewProfiles(nil)
	rt.pol = policy.NewSet(keys.NewScope(func() *policy.Profiles { return profiles }, ChangesConfig), policy.NewConfigured([]string{"a", "b", Name}), policy.NewDisabled(nil), profiles)
	rt.tools = []catalog.Tool{{Server: "a", Name: "x"}, {Server: "a", Name: "y"}, {Server: "a", Name: "z"}}
	scoped := &policy.Caller{Transport: policy.TransportHTTP, Key: &policy.Key{Name: "low", Allow: []string{"a__x", "a__y", "toolgate__*"}}}
	for c, want := range map[*policy.Caller]int{scoped: 2, admin: 3, stdio: 3} {
		if txt := resText(run(t, s, c, "list_servers", nil)); !strings.Contains(txt, fmt.Sprintf("- a: up (stdio, %d tools,", want)) {
			t.Errorf("%v: list_servers, want %d tools of a: %s", c, want, txt)
		}
		if txt := resText(run(t, s, c, "server_status", map[string]any{"name": "a"})); !strings.Contains(txt, fmt.Sprintf("tools %d,", want)) {
			t.Errorf("%v: server_status, want %d tools: %s", c, want, txt)
		}
	}
}

// TestServerNameMeant: the tools that name a server read its name as
// execute_tool and search_tools do (catalog.ServersMeant): in another case
// or with "_" for "-" it is the one server so named, among those the
// caller may manage; a name that may be several is answered with them.
func TestServerNameMeant(t *testing.T) {
	s, p, rt, path := newTestServer(t, true)
	args := map[string]any{"name": "A"}
	if res := run(t, s, stdio, "server_status", args); res.IsError || !strings.HasPrefix(resText(res), "a: up") || args["name"] != "A" {
		t.Errorf(`server_status "A": %s (args now %v: the caller's stay as written)`, resText(res), args)
	}
	if res := run(t, s, admin, "restart_server", map[string]any{"name": " A__"}); res.IsError || !slices.Equal(p.restarts, []string{"a"}) {
		t.Errorf(`restart_server " A__": %s %v`, resText(res), p.restarts)
	}
	if res := run(t, s, admin, "disable_server", map[string]any{"name": "B"}); res.IsError || !rt.pol.Disabled().Has("b") {
		t.Errorf(`disable_server "B": %s`, resText(res))
	}
	if res := run(t, s, admin, "enable_server", map[string]any{"name": "B"}); rt.pol.Disabled().Has("b") {
		t.Errorf(`enable_server "B": %s`, resText(res))
	}
	// A key that may manage a only: "B" is not b to it (nor named).
	scoped := &policy.Caller{Transport: policy.TransportHTTP, Key: &policy.Key{Name: "low", Allow: []string{"a__*", "toolgate__*"}}}
	rt.tools = []catalog.Tool{{Server: "a", Name: "x"}, {Server: "b", Name: "y"}}
	rt.pol = policy.NewSet(keys.NewScope(rt.pol.Profiles, ChangesConfig), policy.NewConfigured([]string{"a", "b", Name}), policy.NewDisabled(nil), rt.pol.Profiles())
	if res := run(t, s, scoped, "server_status", map[string]any{"name": "A"}); res.IsError {
		t.Errorf(`scoped server_status "A": %s`, resText(res))
	}
	if res, err := s.CallTool(policy.WithCaller(context.Background(), scoped), Name, "server_status", map[string]any{"name": "B"}); err == nil && !res.IsError {
		t.Errorf(`scoped server_status "B": %s, want b out of its reach`, resText(res))
	}
	if res := run(t, s, admin, "remove_server", map[string]any{"name": "B"}); res.IsError {
		t.Errorf(`remove_server "B": %s`, resText(res))
	}
	if after, _ := os.ReadFile(path); config.HasServer(after, "b") {
		t.Errorf("b is still in the config:\n%s", after)
	}

	// x-y_z and x_y-z may stand side by side: x-y-z may be either.
	rt.cfg = writeConfig(t, path, `{"mcpServers": {"x-y_z": {"command": "x"}, "x_y-z": {"command": "y"}}}`)
	rt.pol = policy.NewSet(policy.NewConfigured([]string{"x-y_z", "x_y-z", Name}), policy.NewDisabled(nil))
	res := run(t, s, stdio, "server_status", map[string]any{"name": "x-y-z"})
	if txt := resText(res); !res.IsError || !strings.Contains(txt, `"x-y-z" may be any of "x-y_z", "x_y-z"`) {
		t.Errorf(`server_status "x-y-z": %s`, txt)
	}
	if res := run(t, s, stdio, "server_status", map[string]any{"name": "X_Y-Z"}); res.IsError || !strings.HasPrefix(resText(res), "x_y-z: ") {
		t.Errorf(`server_status "X_Y-Z": %s`, resText(res))
	}
}

// A refusal for a server outside the key's scope points to list_servers
// only for a key that may run it; a key allowed restart_server alone gets
// the names of the servers it may manage: it was pointed to list_servers,
// which its globs refuse.
func TestScopedRefusalNamesWhatItMayManage(t *testing.T) {
	s, _, rt, _ := newTestServer(t, false)
	rt.tools = []catalog.Tool{{Server: "a", Name: "x"}, {Server: "b", Name: "y"}, {Server: Name, Name: "restart_server"}, {Server: Name, Name: "list_servers"}}
	rt.pol = policy.NewSet(keys.NewScope(rt.pol.Profiles, ChangesConfig), policy.NewConfigured([]string{"a", "b", Name}), policy.NewDisabled(nil), rt.pol.Profiles())
	for _, tc := range []struct {
		allow     []string
		want, not string
	}{
		{[]string{"a__*", "toolgate__restart_server"}, "The servers this client may manage: a.", "list_servers"},
		{[]string{"a__*", "toolgate__*"}, "toolgate__list_servers lists the servers this client may manage.", "The servers"},
	} {
		c := &policy.Caller{Transport: policy.TransportHTTP, Key: &policy.Key{Name: "low", Allow: tc.allow}}
		_, err := s.CallTool(policy.WithCaller(context.Background(), c), Name, "restart_server", map[string]any{"name": "b"})
		if !errors.Is(err, policy.ErrDenied) || !strings.Contains(err.Error(), tc.want) || strings.Contains(err.Error(), tc.not) {
			t.Errorf("allow %v: restart b: %v; want denied, saying %q", tc.allow, err, tc.want)
		}
	}
}

// TestDownAnswerHintPerKey: restart_server's answer for a server that comes
// back down, and list_servers', point to toolgate__server_status only when
// the key may run it (policy.StatusHint); a key allowed restart_server
// alone is sent to the gateway's operator. It was told that
// server_status "shows its recent stderr lines", which no key that is
// not admin reads either.
func TestDownAnswerHintPerKey(t *testing.T) {
	s, _, rt, _ := newTestServer(t, false)
	rt.tools = []catalog.Tool{{Server: "b", Name: "y"}, {Server: Name, Name: "restart_server"}, {Server: Name, Name: "server_status"}, {Server: Name, Name: "list_servers"}}
	rt.pol = policy.NewSet(keys.NewScope(rt.pol.Profiles, ChangesConfig), policy.NewConfigured([]string{"a", "b", Name}), policy.NewDisabled(nil), rt.pol.Profiles())
	for _, tc := range []struct {
		allow      []string
		down, list string // the end of restart b's answer; list_servers' last sentence, "" for none
	}{
		{[]string{"b__*", "toolgate__*"}, "\ntoolgate__server_status b says more.", "toolgate__server_status shows one server's details and recent log lines."},
		{[]string{"b__*", "toolgate__restart_server", "toolgate__list_servers"}, "\nAsk the gateway's operator: `toolgate status` shows why.", ""},
	} {
		c := &policy.Caller{Transport: policy.TransportHTTP, Key: &policy.Key{Name: "low", Allow: tc.allow}}
		if res := run(t, s, c, "restart_server", map[string]any{"name": "b"}); !res.IsError || !strings.HasPrefix(resText(res), `Server "b" was restarted but is DOWN: `) || !strings.HasSuffix(resText(res), tc.down) {
			t.Errorf("allow %v: restart b: %s\nwant it to end with %q", tc.allow, resText(res), tc.down)
		}
		txt := resText(run(t, s, c, "list_servers", nil))
		if tc.list != "" && !strings.HasSuffix(txt, tc.list) || tc.list == "" && strings.Contains(txt, "server_status") {
			t.Errorf("allow %v: list_servers: %s\nwant its last sentence %q", tc.allow, txt, tc.list)
		}
	}
}

// A readOnly profile says so in toolgate__list_profiles and in the answer
// that activates it; policy.StatusTool declares the hint
// toolgate__server_status declares (a readOnly profile is sent there).
func TestReadOnlyProfileListed(t *testing.T) {
	path := filepath.Join(t.TempDir(), "toolgate.json")
	cfg := writeConfig(t, path, `{"mcpServers": {"a": {"command": "x"}}, "toolgate": {"profiles": {"reviewer": {"readOnly": true}, "kg": {"servers": ["a"]}}}}`)
	rt := &fakeRuntime{cfg: cfg, pol: policy.NewSet(policy.NewConfigured([]string{"a", Name}), policy.NewProfiles(cfg.Toolgate.Profiles))}
	s := New(&fakePool{}, rt, &Options{ConfigPaths: []string{path}})
	sess := &policy.Caller{Transport: policy.TransportStdio, Session: policy.NewSession("", false)}
	res := run(t, s, sess, "list_profiles", nil)
	sc, _ := res.StructuredContent.(ProfileList)
	if txt := resText(res); !strings.Contains(txt, "- reviewer: servers: all; read-only tools only (readOnlyHint: true)\n") || strings.Contains(txt, "- kg: servers: a;") {
		t.Errorf("list_profiles: %s", txt)
	}
	if len(sc.Profiles) != 2 || sc.Profiles[0].ReadOnly || !sc.Profiles[1].ReadOnly {
		t.Errorf("structured: %+v", sc.Profiles)
	}
	if res := run(t, s, sess, "activate_profile", map[string]any{"name": "reviewer"}); !strings.Contains(resText(res), "(servers: all; read-only tools only (readOnlyHint: true))") {
		t.Errorf("activate_profile: %s", resText(res))
	}
	for _, tl := range Tools() {
		if tl.Name == policy.StatusTool.Name {
			if got := tl.Annotations != nil && tl.Annotations.ReadOnlyHint; got != policy.StatusTool.ReadOnly() {
				t.Errorf("%s declares readOnlyHint %v, policy.StatusTool %v", tl.Name, got, policy.StatusTool.ReadOnly())
			}
		}
	}
}

// Which profiles show each server is kept from one list_servers to the
// next while the catalog and the profiles are the same: each grouped the
// whole catalog by server and asked every profile of its tools (0.15–0.2
// s at 100 servers and 50,000 tools). A new tool, or a profile changed,
// shows in the next list; a key's list, which leaves out the profiles it
// may not see, changes nothing kept.
func TestListServersProfilesKept(t *testing.T) {
	s, _, rt, _ := newTestServer(t, false)
	rt.tools, rt.gen = []catalog.Tool{{Server: "a", Name: "x"}}, 1
	rt.pol = policy.NewSet(keys.NewScope(rt.pol.Profiles, ChangesConfig), policy.NewConfigured([]string{"a", "b", Name}), policy.NewDisabled(nil), rt.pol.Profiles())
	rt.pol.PutProfiles(map[string]config.Profile{"kg": {Servers: []string{"a"}}, "y": {Tools: config.ToolGlobs{Allow: []string{"a__y"}}}})
	profilesOfA := func(c *policy.Caller) []string {
		t.Helper()
		list, _ := run(t, s, c, "list_servers", nil).StructuredContent.(ServerList)
		for _, in := range list.Servers {
			if in.Name == "a" {
				return in.Profiles
			}
		}
		t.Fatalf("%v: no server a in list_servers", c)
		return nil
	}
	low := &policy.Caller{Transport: policy.TransportHTTP, Key: &policy.Key{Name: "low", Allow: []string{"a__*"}}}
	if got := profilesOfA(low); len(got) != 0 {
		t.Errorf("low is told of a's profiles %q", got)
	}
	if got := profilesOfA(admin); !slices.Equal(got, []string{"kg"}) {
		t.Errorf("a's profiles: %q, want kg", got)
	}
	looks := rt.looks
	profilesOfA(admin)
	if rt.looks != looks {
		t.Errorf("a second list_servers of the same catalog looked over it %d more times, want none", rt.looks-looks)
	}

	rt.tools = append(rt.tools, catalog.Tool{Server: "a", Name: "y"})
	rt.gen++
	if got := profilesOfA(admin); !slices.Equal(got, []string{"kg", "y"}) {
		t.Errorf("after a__y was catalogued a's profiles: %q, want kg and y", got)
	}
	rt.pol.PutProfiles(map[string]config.Profile{"kg": {Servers: []string{"b"}}, "y": {Tools: config.ToolGlobs{Allow: []string{"a__y"}}}})
	if got := profilesOfA(admin); !slices.Equal(got, []string{"y"}) {
		t.Errorf("after kg left a out a's profiles: %q, want y", got)
	}
}

// noted is an audit.Noter that keeps what a call said it acts on last,
// as the gateway's record does.
type noted struct{ server, what string }

func (n *noted) Note(server, what string) { n.server, n.what = server, what }

// TestAuditNotesTheServer: a management call that acts on a server tells
// its audit record which one (audit.Note), as the gateway resolved its
// name ("B" is b), and add_server and remove_server the file they wrote;
// a refused one the server it was refused on (its reason is the
// refusal's). The record kept the arguments only as a hash, so the log of
// an API key's toolgate__disable_server did not say which server it
// disabled.
func TestAuditNotesTheServer(t *testing.T) {
	s, _, _, path := newTestServer(t, true)
	for _, c := range []struct {
		caller       *policy.Caller
		tool         string
		args         map[string]any
		server, what string
	}{
		{admin, "disable_server", map[string]any{"name": "B"}, "b", `server "b"`},
		{admin, "enable_server", map[string]any{"name": "b"}, "b", `server "b"`},
		{admin, "restart_server", map[string]any{"name": "a"}, "a", `server "a"`},
		{admin, "server_status", map[string]any{"name": "a"}, "a", `server "a"`},
		{admin, "add_server", map[string]any{"name": "n", "command": "sh"}, "n", fmt.Sprintf("server %q in %s", "n", path)},
		{admin, "remove_server", map[string]any{"name": "n"}, "n", fmt.Sprintf("server %q in %s", "n", path)},
		{stdio, "activate_profile", map[string]any{"name": "kg"}, "", `profile "kg"`},
		{admin, "list_servers", nil, "", ""},
		// Refused: the record's reason is the refusal, its server the one
		// asked for.
		{http, "add_server", map[string]any{"name": "m", "command": "sh"}, "m", `server "m"`},
		{&policy.Caller{Transport: policy.TransportHTTP, Profile: "kg"}, "disable_server", map[string]any{"name": "b"}, "b", `server "b"`},
	} {
		n := &noted{}
		ctx := audit.WithNoter(policy.WithCaller(context.Background(), c.caller), n)
		if _, err := s.CallTool(ctx, Name, c.tool, c.args); err != nil && !errors.Is(err, policy.ErrDenied) {
			t.Fatalf("%s %v: %v", c.tool, c.args, err)
		}
		if n.server != c.server || n.what != c.what {
			t.Errorf("%v %s %v: noted server %q, %q; want %q, %q", c.caller, c.tool, c.args, n.server, n.what, c.server, c.what)
		}
	}
}

// TestRestartDisabledMeanwhile: a restart_server call whose server is
// disabled while it waits (for its slot behind another restart's cold
// start, or for its own new start) says the server was disabled and how to
// enable it. It answered `restart "a": backend "a" is unavailable: no such
// server (configured: [b])` when the pool had let the server go before the
// call reached it, and `Server "a" is restarted: disabled.` (no error)
// when it was disabled during the start.
func TestRestartDisabledMeanwhile(t *testing.T) {
	http := &policy.Caller{Transport: policy.TransportHTTP}
	for _, c := range []struct {
		name  string
		after bool // disabled once the pool restarted it, else before
	}{{"before the pool restarts it", false}, {"during its new start", true}} {
		t.Run(c.name, func(t *testing.T) {
			s, p, rt, _ := newTestServer(t, false)
			p.onRestart = func(server string) error {
				if _, err := rt.SetDisabled(context.Background(), server, true); err != nil {
					t.Fatal(err)
				}
				if c.after {
					return nil
				}
				return &backend.UnavailableError{Server: server, Err: backend.ErrUnknownServer}
			}
			res := run(t, s, http, "restart_server", map[string]any{"name": "a"})
			txt := resText(res)
			if !res.IsError || !strings.Contains(txt, `it was disabled while this call waited: server "a" is disabled`) || !strings.Contains(txt, "toolgate__enable_server") || strings.Contains(txt, "no such server") {
				t.Errorf("restart of a, disabled meanwhile: isError=%v %s; want an error saying it was disabled and how to enable it", res.IsError, txt)
			}
		})
	}
}

// TestScopedRefusalEchoBounded: the server name a refused call gives is the
// caller's text and is echoed cut: a key of the ro profile wrote 300 KB of
// it into server_status' answer and the gateway's log line per request.
func TestScopedRefusalEchoBounded(t *testing.T) {
	s, _, rt, _ := newTestServer(t, false)
	rt.tools = []catalog.Tool{{Server: "a", Name: "x"}, {Server: Name, Name: "server_status"}}
	rt.pol = policy.NewSet(keys.NewScope(rt.pol.Profiles, ChangesConfig), policy.NewConfigured([]string{"a", Name}), policy.NewDisabled(nil), rt.pol.Profiles())
	c := &policy.Caller{Transport: policy.TransportHTTP, Key: &policy.Key{Name: "low", Allow: []string{"a__*", "toolgate__*"}, Deny: []string{"b*"}}}
	_, err := s.CallTool(policy.WithCaller(context.Background(), c), Name, "server_status", map[string]any{"name": "b" + strings.Repeat("M", 300_000)})
	if !errors.Is(err, policy.ErrDenied) || len(err.Error()) > 2048 {
		t.Errorf("server_status of a 300 KB name: %d bytes: %.300v", len(fmt.Sprint(err)), err)
	}
}
