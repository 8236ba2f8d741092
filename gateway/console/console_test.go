package console

import (
	"compress/gzip"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolgate/toolgate/gateway"
	"github.com/toolgate/toolgate/gateway/audit"
	"github.com/toolgate/toolgate/gateway/audit/audittest"
	"github.com/toolgate/toolgate/gateway/backend"
	"github.com/toolgate/toolgate/gateway/config"
	"github.com/toolgate/toolgate/gateway/keys"
	"github.com/toolgate/toolgate/gateway/limit"
	"github.com/toolgate/toolgate/gateway/live"
	"github.com/toolgate/toolgate/gateway/policy"
	"github.com/toolgate/toolgate/index"
	"github.com/toolgate/toolgate/index/catalog"
	"github.com/toolgate/toolgate/internal/storage"
	"github.com/toolgate/toolgate/search"
)

var tools = []catalog.Tool{
	{Server: "filesystem", Name: "list_directory", Description: "List the files in a directory.", InputSchema: json.RawMessage(`{"type":"object"}`),
		OutputSchema: json.RawMessage(`{"type":"object","properties":{"content":{"type":"string"}}}`)},
	{Server: "filesystem", Name: "read_file", Description: "Read a file."},
	{Server: "memory", Name: "create_entities", Description: "Create entities in the <knowledge> graph."},
}

type fakeCatalog struct{}

func (fakeCatalog) Search(_ context.Context, q search.Query) (search.Result, error) {
	if strings.TrimSpace(q.Text) == "" {
		return search.Result{}, search.ErrEmptyQuery
	}
	var hits []search.Hit
	for i, t := range tools {
		if q.Server != "" && t.Server != q.Server {
			continue
		}
		if strings.Contains(strings.ToLower(t.Description), strings.Fields(strings.ToLower(q.Text))[0]) {
			hits = append(hits, search.Hit{Tool: t, Score: 1 / float64(i+1), Keyword: 0.5, Vector: 0.25, BM25: 3, Cosine: 0.7, Confidence: 0.04})
		}
	}
	if len(hits) > 0 && strings.Contains(q.Text, ", then ") {
		hits[0].Clause = q.Text[strings.Index(q.Text, ", then ")+2:]
	}
	mode := q.Mode
	if mode == "" {
		mode = search.ModeHybrid
	}
	return search.Result{Hits: hits, Mode: mode, NoMatch: len(hits) > 0}, nil
}

func (fakeCatalog) Tool(id string) (catalog.Tool, bool) {
	for _, t := range tools {
		if t.ID() == id {
			return t, true
		}
	}
	return catalog.Tool{}, false
}

func (fakeCatalog) IDs() []string {
	var ids []string
	for _, t := range tools {
		ids = append(ids, t.ID())
	}
	return ids
}

// memoryCertExpiry is when memory's client certificate expires: due for
// renewal.
var memoryCertExpiry = time.Now().Add(3*24*time.Hour + time.Hour)

type fakeBackends struct {
	mu        sync.Mutex
	pids      map[string]int
	restarted []string
	more      []string // more servers, up with no tool
	// login is, by server, the expiry of a login that cannot be
	// refreshed.
	login map[string]*backend.LoginExpiry
}

func (f *fakeBackends) Status() []backend.Status {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := []backend.Status{
		{Name: "filesystem", Transport: "stdio", State: backend.StateUp, Tools: 2, PID: f.pids["filesystem"]},
		{Name: "memory", Transport: "stdio", State: backend.StateDown, Err: "process exited", Tools: 1,
			TLSCert: "/etc/toolgate/memory.pem", TLSCertNotAfter: &memoryCertExpiry},
	}
	for _, n := range f.more {
		out = append(out, backend.Status{Name: n, Transport: "stdio", State: backend.StateUp})
	}
	for i := range out {
		out[i].LoginExpiry = f.login[out[i].Name]
	}
	return out
}

func (f *fakeBackends) Restart(server string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if _, ok := f.pids[server]; !ok {
		return &backend.UnavailableError{Server: server, Err: backend.ErrUnknownServer}
	}
	f.pids[server]++
	f.restarted = append(f.restarted, server)
	return nil
}

type fakeLoop struct{}

func (fakeLoop) Stats() live.Stats { return live.Stats{CatalogGeneration: 7, CatalogTools: 3} }

// fakeKeys knows one key without a scope, which a test can revoke, and
// the scoped keys of scopes.
type fakeKeys struct {
	mu      sync.Mutex
	key     string
	revoked bool
	scopes  map[string]*policy.Key
	// unreadable makes every key refused as the store refuses them
	// while it cannot read its files (fail closed).
	unreadable bool
}

func (k *fakeKeys) Required() bool { return true }
func (k *fakeKeys) Scope(key string) (*policy.Key, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.unreadable {
		return nil, fmt.Errorf("%w: the data folder's keys: /srv/tg/keys.jsonl:8: not a key entry", keys.ErrUnavailable)
	}
	if s, ok := k.scopes[key]; ok {
		return s, nil
	}
	switch {
	case key != k.key:
		return nil, keys.ErrUnknown
	case k.revoked:
		return &policy.Key{Name: "main"}, keys.ErrRevoked
	}
	return &policy.Key{Name: "main"}, nil
}

type env struct {
	srv      *httptest.Server
	backends *fakeBackends
	client   *http.Client // with a cookie jar, like a browser
	rec      *Recorder    // the recent calls
}

func newEnv(t *testing.T, keys Keys) *env {
	t.Helper()
	return newEnvWith(t, &Options{Catalog: fakeCatalog{}, Keys: keys})
}

// newEnvWith serves a console with o's Catalog, Keys, Policy, Audit and Rates,
// over fake backends and a recorder that saw one call of
// filesystem__read_file.
func newEnvWith(t *testing.T, o *Options) *env {
	t.Helper()
	b := &fakeBackends{pids: map[string]int{"filesystem": 100, "memory": 200}}
	rec := NewRecorder(0)
	c := New(&Options{Backends: b, Catalog: o.Catalog, Restarter: b, Switcher: o.Switcher, Loop: fakeLoop{}, Calls: rec, Activity: o.Activity, Keys: o.Keys, Policy: o.Policy, Audit: o.Audit, Rates: o.Rates, Refusals: o.Refusals, Status: o.Status, Version: "1.0.0",
		Search: func() *search.State {
			return &search.State{Mode: search.ModeBM25, Configured: search.ModeHybrid, BM25Only: true, Reason: "model file not found"}
		},
		Unavailable: func(s string, _ bool) string {
			if s == "memory" {
				return "it is down"
			}
			return ""
		}})
	_, _ = rec.Caller(callerFunc(func() (*mcp.CallToolResult, error) { return &mcp.CallToolResult{}, nil })).CallTool(context.Background(), "filesystem", "read_file", nil)
	mux := http.NewServeMux()
	mux.Handle(Path, c.Handler())
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	jar, _ := cookiejar.New(nil)
	return &env{srv: srv, backends: b, client: &http.Client{Jar: jar}, rec: rec}
}

type callerFunc func() (*mcp.CallToolResult, error)

func (f callerFunc) CallTool(context.Context, string, string, map[string]any) (*mcp.CallToolResult, error) {
	return f()
}

// do sends a request; header pairs are name, value.
func (e *env) do(t *testing.T, method, path, body string, header ...string) (*http.Response, string) {
	t.Helper()
	req, err := http.NewRequest(method, e.srv.URL+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := e.client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	return resp, string(b)
}

var (
	csrfMeta    = regexp.MustCompile(`<meta name="csrf-token" content="([^"]*)">`)
	initialJSON = regexp.MustCompile(`(?s)<script type="application/json" id="initial">(.*?)</script>`)
)

// page loads /ui/ (with query) and returns the embedded Page and CSRF token.
func (e *env) page(t *testing.T, query string) (*http.Response, Page, string) {
	t.Helper()
	resp, body := e.do(t, "GET", "/ui/"+query, "")
	// The login form comes with 401 and a Bearer challenge, like every
	// route without a key.
	login := resp.StatusCode == 401 && strings.HasPrefix(resp.Header.Get("WWW-Authenticate"), "Bearer")
	if resp.StatusCode != 200 && !login {
		t.Fatalf("GET /ui/%s: %d %s", query, resp.StatusCode, body)
	}
	m := initialJSON.FindStringSubmatch(body)
	if m == nil {
		t.Fatalf("no initial JSON in the page:\n%s", body)
	}
	var p Page
	if err := json.Unmarshal([]byte(m[1]), &p); err != nil {
		t.Fatalf("initial JSON: %v\n%s", err, m[1])
	}
	if p.LoginRequired != login {
		t.Fatalf("GET /ui/%s: status %d for a page with loginRequired %v", query, resp.StatusCode, p.LoginRequired)
	}
	return resp, p, csrfMeta.FindStringSubmatch(body)[1]
}

func TestPage(t *testing.T) {
	e := newEnv(t, nil)
	resp, p, csrf := e.page(t, "?q=files&mode=bm25&limit=3")
	if csp := resp.Header.Get("Content-Security-Policy"); !strings.Contains(csp, "script-src 'self'") || !strings.Contains(csp, "frame-ancestors 'none'") {
		t.Errorf("Content-Security-Policy %q", csp)
	}
	if csrf == "" {
		t.Error("no CSRF token in the page")
	}
	var cookie *http.Cookie
	for _, c := range resp.Cookies() {
		if c.Name == cookieName {
			cookie = c
		}
	}
	// No Path: the browser scopes it to the page's folder, /ui, or
	// /toolgate/ui behind a proxy serving the gateway under /toolgate/.
	if cookie == nil || !cookie.HttpOnly || cookie.SameSite != http.SameSiteStrictMode || cookie.Path != "" || cookie.MaxAge != 0 || !cookie.Expires.IsZero() {
		t.Errorf("session cookie %+v, want HttpOnly, SameSite=Strict, no Path, a session cookie", cookie)
	}
	if p.LoginRequired || p.State == nil || len(p.State.Backends) != 2 || p.State.Stats.CatalogGeneration != 7 || len(p.State.Calls) != 1 || !p.State.CanRestart {
		t.Errorf("page state %+v", p)
	}
	if p.Search == nil || p.Search.Mode != "bm25" || len(p.Search.Tools) != 1 || p.Search.Tools[0].Name != "filesystem__list_directory" || p.Search.Tools[0].BM25 != 3 {
		t.Errorf("deep link search %+v", p.Search)
	}
	// A link's server limits its search, and is the playground's.
	for query, want := range map[string]int{"?q=files&server=filesystem": 1, "?q=files&server=memory": 0} {
		_, p, _ := e.page(t, query)
		server := strings.TrimPrefix(query, "?q=files&server=")
		if p.Server != server || p.Search == nil || p.Search.Server != server || len(p.Search.Tools) != want {
			t.Errorf("GET /ui/%s: page server %q, search %+v; want %s and %d tools", query, p.Server, p.Search, server, want)
		}
	}
	if _, body := e.do(t, "GET", "/ui/", ""); !strings.Contains(body, `<select id="server" name="server">`) {
		t.Error("the playground has no server field")
	}
	// The results field shows the link's limit (it showed 10), else the
	// default.
	for query, want := range map[string]string{"?q=files&limit=3": "3", "?q=files": "10", "": "10", "?q=files&limit=99": "99"} {
		if _, body := e.do(t, "GET", "/ui/"+query, ""); !strings.Contains(body, `<input id="limit" name="limit" type="number" min="1" max="50" value="`+want+`">`) {
			t.Errorf("GET /ui/%s: the results field does not show %s", query, want)
		}
	}
	// The page's data cannot break out of its script element.
	_, body := e.do(t, "GET", "/ui/?q=%3C/script%3E%3Cscript%3Ealert(1)%3C/script%3E", "")
	if strings.Contains(body, "<script>alert(1)") {
		t.Error("a query reached the page unescaped")
	}
	for _, f := range []string{"/ui/app.js", "/ui/app.css"} {
		if resp, body := e.do(t, "GET", f, ""); resp.StatusCode != 200 || len(body) < 500 {
			t.Errorf("GET %s: %d, %d bytes", f, resp.StatusCode, len(body))
		}
	}
	// Nothing the page loads comes from another origin.
	for _, f := range []string{"/ui/", "/ui/app.js", "/ui/app.css"} {
		_, body := e.do(t, "GET", f, "")
		if m := regexp.MustCompile(`(?i)(src|href)\s*=\s*["']?(https?:)?//|@import|url\(\s*["']?https?:`).FindString(body); m != "" {
			t.Errorf("%s refers to another origin: %q", f, m)
		}
	}
}

func TestAPI(t *testing.T) {
	e := newEnv(t, nil)
	var cat CatalogAnswer
	get := func(path string, code int, v any) {
		t.Helper()
		resp, body := e.do(t, "GET", path, "")
		if resp.StatusCode != code {
			t.Fatalf("GET %s: %d %s, want %d", path, resp.StatusCode, body, code)
		}
		if v != nil {
			if err := json.Unmarshal([]byte(body), v); err != nil {
				t.Fatalf("GET %s: %v", path, err)
			}
		}
	}
	get("/ui/api/catalog?filter=FILE&server=filesystem", 200, &cat)
	if cat.Total != 3 || cat.Matched != 2 || len(cat.Tools) != 2 || fmt.Sprint(cat.Servers) != "[filesystem memory]" || string(cat.Tools[0].InputSchema) != `{"type":"object"}` {
		t.Errorf("catalog %+v", cat)
	}
	// The catalog shows what a tool returns, when it says (2026-12-07).
	if o := string(cat.Tools[0].OutputSchema); o != `{"type":"object","properties":{"content":{"type":"string"}}}` || cat.Tools[1].OutputSchema != nil {
		t.Errorf("catalog's output schemas %q and %q, want list_directory's and none", o, cat.Tools[1].OutputSchema)
	}
	get("/ui/api/catalog?server=memory", 200, &cat)
	if cat.Matched != 1 || cat.Tools[0].Unavailable != "it is down" {
		t.Errorf("catalog of memory %+v", cat)
	}
	var ans SearchAnswer
	get("/ui/api/search?q=create&limit=3&mode=vector", 200, &ans)
	if ans.Mode != "vector" || len(ans.Tools) != 1 || ans.Tools[0].Unavailable != "it is down" || ans.Tools[0].Confidence != 0.04 || !ans.NoMatch || ans.Tools[0].Clause != "" {
		t.Errorf("search %+v", ans)
	}
	get("/ui/api/search?q=create%20things,%20then%20list%20them", 200, &ans)
	if len(ans.Tools) != 1 || ans.Tools[0].Clause != "then list them" {
		t.Errorf("search of two steps %+v, want the clause on the hit", ans)
	}
	var st State
	get("/ui/api/state", 200, &st)
	if st.Up != 1 || st.Total != 2 || len(st.Calls) != 1 || st.Calls[0].Outcome != gateway.OutcomeOK {
		t.Errorf("state %+v", st)
	}
	if st.Search == nil || !st.Search.BM25Only || st.Search.Reason != "model file not found" {
		t.Errorf("state's search %+v, want BM25 only and why", st.Search)
	}
	if want := "memory: client certificate /etc/toolgate/memory.pem expires at "; len(st.Warnings) != 1 || !strings.HasPrefix(st.Warnings[0], want) || !strings.HasSuffix(st.Warnings[0], ", in 3 days: renew it") {
		t.Errorf("state's warnings %q, want memory's client certificate due for renewal", st.Warnings)
	}
	for _, bad := range []string{"/ui/api/search?q=", "/ui/api/search?q=x&mode=dense", "/ui/api/search?q=x&limit=99"} {
		get(bad, 400, nil)
	}
	// server as search_tools reads it; one of no tool is said so, with the
	// servers (it answered noMatch, as if no tool fitted).
	get("/ui/api/search?q=create&server=%20Memory%20", 200, &ans)
	if len(ans.Tools) != 1 {
		t.Errorf("search of server %q: %+v", " Memory ", ans)
	}
	if resp, body := e.do(t, "GET", "/ui/api/search?q=create&server=memroy", ""); resp.StatusCode != 400 ||
		!strings.Contains(body, `server \"memroy\": no tool of it is in the catalog (servers: filesystem, memory): leave server out`) {
		t.Errorf("search of an unknown server: %d %s, want 400 naming the servers", resp.StatusCode, body)
	}
	if resp, _ := e.do(t, "GET", "/ui/api/state", ""); len(resp.Cookies()) != 0 {
		t.Errorf("a JSON endpoint started a session: %v (only the page should)", resp.Cookies())
	}
}

// TestRestartNeedsOriginAndCSRF: the restart button's POST needs the
// console's own Origin and the session's CSRF token.
func TestRestartNeedsOriginAndCSRF(t *testing.T) {
	e := newEnv(t, nil)
	_, _, csrf := e.page(t, "")
	restart := func(server string, header ...string) int {
		resp, _ := e.do(t, "POST", "/ui/api/restart", `{"server": "`+server+`"}`, header...)
		return resp.StatusCode
	}
	origin := e.srv.URL
	for _, tc := range []struct {
		name   string
		header []string
		want   int
	}{
		{"no Origin", []string{csrfHeader, csrf}, 403},
		{"another origin", []string{"Origin", "http://evil.example", csrfHeader, csrf}, 403},
		{"no CSRF token", []string{"Origin", origin}, 403},
		{"wrong CSRF token", []string{"Origin", origin, csrfHeader, "x" + csrf}, 403},
		{"a bearer header, but the gateway has no keys", []string{"Origin", origin, "Authorization", "Bearer x"}, 403},
	} {
		if got := restart("filesystem", tc.header...); got != tc.want {
			t.Errorf("%s: %d, want %d", tc.name, got, tc.want)
		}
	}
	if len(e.backends.restarted) != 0 {
		t.Fatalf("restarted %v by refused requests", e.backends.restarted)
	}
	if got := restart("filesystem", "Origin", origin, csrfHeader, csrf); got != 202 {
		t.Fatalf("restart from the page: %d, want 202", got)
	}
	if got := restart("nosuch", "Origin", origin, csrfHeader, csrf); got != 404 {
		t.Errorf("restart of an unknown server: %d, want 404", got)
	}
	if resp, _ := e.do(t, "GET", "/ui/api/restart", ""); resp.StatusCode != 405 {
		t.Errorf("GET restart: %d, want 405", resp.StatusCode)
	}
	if fmt.Sprint(e.backends.restarted) != "[filesystem]" {
		t.Errorf("restarted %v, want [filesystem]", e.backends.restarted)
	}
}

// TestActionReadsServerMeant: the buttons' POST routes read the server's
// name as `toolgate servers restart` and the management tools do
// (catalog.ServerMeant): "FileSystem" or " filesystem " is filesystem; a
// name that may mean several is 400 naming them, in the words of the
// command line. They answered 404, "there is no server named
// \"FileSystem\"".
func TestActionReadsServerMeant(t *testing.T) {
	e := newEnv(t, nil)
	_, _, csrf := e.page(t, "")
	e.backends.mu.Lock()
	e.backends.more = []string{"a-b_c", "a_b-c"}
	e.backends.mu.Unlock()
	restart := func(server string) (int, string) {
		resp, body := e.do(t, "POST", "/ui/api/restart", `{"server": "`+server+`"}`, "Origin", e.srv.URL, csrfHeader, csrf)
		return resp.StatusCode, body
	}
	for _, name := range []string{"FileSystem", " filesystem ", "filesystem__"} {
		if code, body := restart(name); code != 202 || body != `{"restarting":"filesystem"}`+"\n" {
			t.Errorf("restart %q: %d %s, want 202 restarting filesystem", name, code, body)
		}
	}
	_, want := catalog.ServerMeant("a-b-c", []string{"a-b_c", "a_b-c"})
	if code, body := restart("a-b-c"); code != 400 || want == nil || !strings.Contains(body, strings.ReplaceAll(want.Error(), `"`, `\"`)) {
		t.Errorf("restart of an ambiguous name: %d %s, want 400 %v", code, body, want)
	}
	if code, _ := restart("nosuch"); code != 404 {
		t.Errorf("restart of an unknown server: %d, want 404", code)
	}
	if fmt.Sprint(e.backends.restarted) != "[filesystem filesystem filesystem]" {
		t.Errorf("restarted %v, want filesystem thrice", e.backends.restarted)
	}
}

// TestSessionCookiePath: the session cookie is scoped to the console's
// folder as the browser sees it, which the page's script says
// (Toolgate-Console-Path): behind a proxy serving the gateway under
// /toolgate/, the login's cookie was scoped to /ui/, never sent back to
// /toolgate/ui/, and the page showed the login form again. A path that
// is not the console's is not taken; a stale cookie of a session gone
// (an older gateway's, scoped to /ui/) does not hide a live one.
func TestSessionCookiePath(t *testing.T) {
	e := newEnv(t, &fakeKeys{key: "tg_secret"})
	for _, tc := range []struct{ page, want string }{
		{"/toolgate/ui/", "/toolgate/ui"},
		{"/ui/", "/ui"},
		{"", "/ui"},                // a script's login
		{"/", "/ui"},               // not the console's path
		{"/other/", "/ui"},         // nor this
		{"/a/../ui/", "/ui"},       // not clean
		{"/a;Domain=x/ui/", "/ui"}, // not a cookie's path
		{"/tool gate/ui/", "/ui"},  // a browser escapes it
		{"/tool%20gate/ui/", "/tool%20gate/ui"},
	} {
		resp, _ := e.do(t, "POST", "/ui/api/login", `{"key": "tg_secret"}`, "Origin", e.srv.URL, pageHeader, tc.page)
		var paths []string
		for _, c := range resp.Cookies() {
			if c.Name == cookieName && c.Value != "" {
				paths = append(paths, c.Path)
			}
		}
		if len(paths) != 1 || paths[0] != tc.want {
			t.Errorf("login from a page at %q: cookie paths %q, want %q", tc.page, paths, tc.want)
		}
	}
	resp, _ := e.do(t, "POST", "/ui/api/login", `{"key": "tg_secret"}`, "Origin", e.srv.URL)
	var live *http.Cookie
	for _, c := range resp.Cookies() {
		if c.Name == cookieName && c.Value != "" {
			live = c
		}
	}
	req, _ := http.NewRequest("GET", e.srv.URL+"/ui/api/state", nil)
	req.AddCookie(&http.Cookie{Name: cookieName, Value: "of-a-gateway-before"})
	req.AddCookie(live)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Errorf("a stale session cookie before the live one: %d, want 200", resp.StatusCode)
	}
}

// TestKeys: with keys, the console asks for one; a login keeps it in the
// session (checked on every request, so a revoked key ends it), and
// scripts may send it as a bearer key instead.
func TestKeys(t *testing.T) {
	keys := &fakeKeys{key: "tg_secret"}
	e := newEnv(t, keys)
	origin := e.srv.URL
	_, p, csrf := e.page(t, "?q=files")
	if !p.LoginRequired || p.State != nil || p.Search != nil || csrf != "" {
		t.Fatalf("page without a login shows %+v (csrf %q)", p, csrf)
	}
	resp, _ := e.do(t, "GET", "/ui/api/state", "")
	if resp.StatusCode != 401 || !strings.HasPrefix(resp.Header.Get("WWW-Authenticate"), "Bearer") {
		t.Fatalf("state without a login: %d %q", resp.StatusCode, resp.Header.Get("WWW-Authenticate"))
	}
	// A key that is not accepted is told so, not that a key is required,
	// in the same words whatever the key it is not (revoked below is
	// named to its holder).
	if resp, body := e.do(t, "POST", "/ui/api/login", `{"key": "tg_wrong"}`, "Origin", origin); resp.StatusCode != 401 || !strings.Contains(body, "the API key was not accepted: it is unknown, revoked or expired") {
		t.Errorf("login with a wrong key: %d %s", resp.StatusCode, body)
	}
	if resp, _ := e.do(t, "POST", "/ui/api/login", `{"key": "tg_secret"}`, "Origin", "http://evil.example"); resp.StatusCode != 403 {
		t.Errorf("login from another origin: %d", resp.StatusCode)
	}
	resp, _ = e.do(t, "POST", "/ui/api/login", `{"key": "tg_secret"}`, "Origin", origin)
	if resp.StatusCode != 204 {
		t.Fatalf("login: %d", resp.StatusCode)
	}
	for _, c := range resp.Cookies() {
		if c.Name == cookieName && (strings.Contains(c.Value, "tg_secret") || !c.HttpOnly || c.SameSite != http.SameSiteStrictMode) {
			t.Errorf("session cookie %+v: want an opaque id, HttpOnly, SameSite=Strict", c)
		}
	}
	_, p, csrf = e.page(t, "")
	if p.LoginRequired || p.State == nil || !p.Keys || csrf == "" {
		t.Fatalf("page after login: %+v", p)
	}
	if resp, _ := e.do(t, "POST", "/ui/api/restart", `{"server": "filesystem"}`, "Origin", origin, csrfHeader, csrf); resp.StatusCode != 202 {
		t.Errorf("restart after login: %d", resp.StatusCode)
	}

	// A script with the key: no cookie, no CSRF token needed.
	script := &http.Client{}
	req, _ := http.NewRequest("POST", e.srv.URL+"/ui/api/restart", strings.NewReader(`{"server": "filesystem"}`))
	req.Header.Set("Authorization", "Bearer tg_secret")
	if resp, err := script.Do(req); err != nil || resp.StatusCode != 202 {
		t.Errorf("restart with a bearer key: %v %v", resp, err)
	}

	keys.mu.Lock()
	keys.revoked = true
	keys.mu.Unlock()
	// Its holder is told it was revoked, and what to do, as the HTTP
	// front tells it: they said "revoked or expired", "unknown, revoked
	// or expired".
	if resp, body := e.do(t, "GET", "/ui/api/state", ""); resp.StatusCode != 401 || !strings.Contains(body, "the console session ended: the API key was revoked: ask the gateway's operator for a key in force, and log in again with it") {
		t.Errorf("state after the key was revoked: %d %s, want 401 saying the session's key was revoked", resp.StatusCode, body)
	}
	if resp, body := e.do(t, "POST", "/ui/api/login", `{"key": "tg_secret"}`, "Origin", origin); resp.StatusCode != 401 || !strings.Contains(body, "the API key was revoked: ask the gateway's operator for a key in force, and log in with it") {
		t.Errorf("login with the revoked key: %d %s, want it named revoked", resp.StatusCode, body)
	}
	if resp, _ := e.do(t, "POST", "/ui/api/restart", `{"server": "filesystem"}`, "Origin", origin, csrfHeader, csrf); resp.StatusCode != 401 {
		t.Errorf("restart after the key was revoked: %d, want 401", resp.StatusCode)
	}
}

// TestKeysUnreadable: while the gateway cannot read its API keys, the
// console answers 503 in the words of the rest of the HTTP front (which
// refuses every request so), audited as such. It answered a key in force
// 401, "the API key was not accepted: it is unknown, revoked or expired",
// at the login, as a bearer key and for a session logged in before, so
// that its holder looked for a fault in a key that had none (a probe,
// 2026-12-07).
func TestKeysUnreadable(t *testing.T) {
	fk := &fakeKeys{key: "tg_secret"}
	log := &audittest.Log{}
	e := newEnvWith(t, &Options{Catalog: fakeCatalog{}, Keys: fk, Audit: log})
	origin := e.srv.URL
	if resp, _ := e.do(t, "POST", "/ui/api/login", `{"key": "tg_secret"}`, "Origin", origin); resp.StatusCode != 204 {
		t.Fatalf("login: %d", resp.StatusCode)
	}
	_, _, csrf := e.page(t, "")
	fk.mu.Lock()
	fk.unreadable = true
	fk.mu.Unlock()
	for _, c := range []struct {
		name                string
		method, path, body  string
		header              []string
		bearer, freshClient bool
	}{
		{name: "a session's state", method: "GET", path: "/ui/api/state"},
		{name: "a session's restart", method: "POST", path: "/ui/api/restart", body: `{"server": "filesystem"}`, header: []string{"Origin", origin, csrfHeader, csrf}},
		{name: "a bearer key's state", method: "GET", path: "/ui/api/state", bearer: true, freshClient: true},
		{name: "a login", method: "POST", path: "/ui/api/login", body: `{"key": "tg_secret"}`, header: []string{"Origin", origin}, freshClient: true},
	} {
		req, _ := http.NewRequest(c.method, e.srv.URL+c.path, strings.NewReader(c.body))
		for i := 0; i+1 < len(c.header); i += 2 {
			req.Header.Set(c.header[i], c.header[i+1])
		}
		if c.bearer {
			req.Header.Set("Authorization", "Bearer tg_secret")
		}
		client := e.client
		if c.freshClient {
			client = &http.Client{}
		}
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusServiceUnavailable || !strings.Contains(string(b), keys.UnavailableWords) || strings.Contains(string(b), "/srv/tg") {
			t.Errorf("%s while the keys cannot be read: %d %s, want 503 saying %q", c.name, resp.StatusCode, b, keys.UnavailableWords)
		}
	}
	if recs := log.Records(); len(recs) == 0 || recs[len(recs)-1].Status != http.StatusServiceUnavailable || recs[len(recs)-1].Reason != "console login: "+keys.ErrUnavailable.Error() {
		t.Errorf("audit records %+v, want the login refused 503 for the store", recs)
	}
	if len(e.backends.restarted) != 0 {
		t.Errorf("restarted %v while the keys could not be read", e.backends.restarted)
	}
}

func TestRecorder(t *testing.T) {
	r := NewRecorder(3)
	c := r.Caller(callerFunc(func() (*mcp.CallToolResult, error) {
		return nil, fmt.Errorf("call: %w", backend.ErrCallTimeout)
	}))
	for i := range 5 {
		_, _ = c.CallTool(context.Background(), "s", fmt.Sprint("t", i), nil)
	}
	calls := r.Calls()
	if len(calls) != 3 || calls[0].Tool != "t4" || calls[2].Tool != "t2" || calls[0].Outcome != gateway.OutcomeTimeout || !strings.Contains(calls[0].Error, "timed out") {
		t.Errorf("calls %+v, want t4, t3, t2 timed out", calls)
	}
}

func TestSessionsBounded(t *testing.T) {
	s := newSessions()
	now := time.Now()
	s.now = func() time.Time { return now }
	for range maxSessions + 10 {
		now = now.Add(time.Second)
		s.create(httptest.NewRecorder(), httptest.NewRequest("GET", "/ui/", nil), "")
	}
	if len(s.m) != maxSessions {
		t.Errorf("%d sessions kept, want at most %d", len(s.m), maxSessions)
	}
	w := httptest.NewRecorder()
	ss := s.create(w, httptest.NewRequest("GET", "/ui/", nil), "")
	req := httptest.NewRequest("GET", "/ui/", nil)
	req.AddCookie(w.Result().Cookies()[0])
	if s.get(req) != ss {
		t.Fatal("session not found by its cookie")
	}
	now = now.Add(sessionTTL + time.Second)
	if s.get(req) != nil {
		t.Error("a session older than its TTL still answers")
	}
}

// TestSessionsPerKey: one API key's logins push out its own oldest
// sessions, not another key's: a key's 1,034 logins (20 s at its rate)
// logged the admin out of the console.
func TestSessionsPerKey(t *testing.T) {
	s := newSessions()
	now := time.Now()
	s.now = func() time.Time { return now }
	login := func(key string) *http.Request {
		w := httptest.NewRecorder()
		s.create(w, httptest.NewRequest("POST", "/ui/api/login", nil), key)
		req := httptest.NewRequest("GET", "/ui/", nil)
		req.AddCookie(w.Result().Cookies()[0])
		return req
	}
	admin := login("tg_admin")
	var other []*http.Request
	for range maxSessions + 10 {
		now = now.Add(time.Second)
		other = append(other, login("tg_other"))
	}
	if ss := s.get(admin); ss == nil || ss.key != "tg_admin" {
		t.Error("another key's logins ended the admin's session")
	}
	kept := 0
	for _, r := range other {
		if s.get(r) != nil {
			kept++
		}
	}
	if kept != maxKeySessions || s.get(other[len(other)-1]) == nil {
		t.Errorf("one key kept %d sessions (its last one: %v), want its %d latest", kept, s.get(other[len(other)-1]) != nil, maxKeySessions)
	}
}

// scopedCatalog is a BM25 engine over the test's tools and more, and a
// policy set with the API keys' scope rule.
func scopedCatalog(t *testing.T, more ...catalog.Tool) (*search.Engine, *policy.Set) {
	t.Helper()
	ix, err := index.Build(context.Background(), append(slices.Clone(tools), more...), nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	eng := search.New(ix, nil, nil)
	t.Cleanup(func() { eng.Close() })
	return eng, policy.NewSet(keys.NewScope(func() *policy.Profiles { return policy.NewProfiles(nil) }, nil))
}

// TestKeyScope: a key sees the console through its scope, as it sees tools
// over MCP: the catalog, the playground and the recent calls hold only the
// tools it may run, and the restart button needs toolgate__restart_server
// in its scope. A key denied toolgate__* (the README's advice against
// run-time management) could restart every backend from the console, and
// a key of one server read every server's tools there.
func TestKeyScope(t *testing.T) {
	eng, set := scopedCatalog(t, catalog.Tool{Server: "toolgate", Name: "restart_server", Description: "Restart a server: stop it and start it again."})
	fk := &fakeKeys{key: "tg_secret", scopes: map[string]*policy.Key{
		"tg_low": {Name: "low", Deny: []string{"toolgate__*", "filesystem__*"}},
	}}
	log := &audittest.Log{}
	e := newEnvWith(t, &Options{Catalog: eng, Keys: fk, Policy: set, Audit: log})
	get := func(key, path string, v any) {
		t.Helper()
		resp, body := e.do(t, "GET", path, "", "Authorization", "Bearer "+key)
		if resp.StatusCode != 200 {
			t.Fatalf("GET %s: %d %s", path, resp.StatusCode, body)
		}
		if err := json.Unmarshal([]byte(body), v); err != nil {
			t.Fatal(err)
		}
	}
	restart := func(key string) int {
		resp, _ := e.do(t, "POST", "/ui/api/restart", `{"server": "filesystem"}`, "Authorization", "Bearer "+key)
		return resp.StatusCode
	}

	var cat CatalogAnswer
	get("tg_low", "/ui/api/catalog", &cat)
	if cat.Total != 1 || fmt.Sprint(cat.Servers) != "[memory]" || len(cat.Tools) != 1 || cat.Tools[0].Name != "memory__create_entities" {
		t.Errorf("catalog as the scoped key sees it: %+v, want memory__create_entities only", cat)
	}
	var ans SearchAnswer
	get("tg_low", "/ui/api/search?q=file", &ans)
	if resp, body := e.do(t, "GET", "/ui/api/search?q=file&server=filesystem", "", "Authorization", "Bearer tg_low"); resp.StatusCode != 400 || !strings.Contains(body, "(servers: memory)") {
		t.Errorf("the scoped key's search of a server outside its scope: %d %s, want 400 naming only its servers", resp.StatusCode, body)
	}
	for _, h := range ans.Tools {
		if h.Server != "memory" {
			t.Errorf("the scoped key's search found %s, outside its scope", h.Name)
		}
	}
	var st State
	get("tg_low", "/ui/api/state", &st)
	if st.CanRestart || len(st.Calls) != 0 {
		t.Errorf("state as the scoped key sees it: canRestart %v, calls %+v; want no restart button and no call of filesystem__read_file", st.CanRestart, st.Calls)
	}
	// memory's client certificate is due, but its path is the gateway
	// machine's: not shown to a key that is not admin.
	if len(st.Warnings) != 1 || !strings.HasPrefix(st.Warnings[0], "memory: client certificate expires at ") {
		t.Errorf("state's warnings as the scoped key sees them: %q, want memory's without its path", st.Warnings)
	}
	if got := restart("tg_low"); got != 403 {
		t.Errorf("restart with a key denied toolgate__*: %d, want 403", got)
	}
	if len(e.backends.restarted) != 0 {
		t.Fatalf("restarted %v with a key denied toolgate__*", e.backends.restarted)
	}

	get("tg_secret", "/ui/api/catalog", &cat)
	get("tg_secret", "/ui/api/state", &st)
	// Its recent calls are its own: the one call was not made with it
	// (TestRecentCallsOwnKey).
	if cat.Total != 4 || !st.CanRestart || len(st.Calls) != 0 {
		t.Errorf("the key without scope: catalog of %d tools, canRestart %v, %d calls; want 4, true, 0", cat.Total, st.CanRestart, len(st.Calls))
	}
	if got := restart("tg_secret"); got != 202 {
		t.Errorf("restart with the key without scope: %d, want 202", got)
	}
	if got := restart("tg_wrong"); got != 401 {
		t.Errorf("restart with an unknown key: %d, want 401", got)
	}

	// Each restart and each refusal is in the audit log, with who asked.
	var got []string
	for _, r := range log.Records() {
		if r.Remote == "" || r.Transport != "http" {
			t.Errorf("audit record without the client's address: %+v", r)
		}
		got = append(got, r.Key+" "+r.Action+" "+r.Decision)
	}
	want := []string{"low toolgate__restart_server denied", "main toolgate__restart_server allowed", " http denied"}
	if !slices.Equal(got, want) {
		t.Errorf("audit records %q, want %q", got, want)
	}
}

// fakeSwitcher disables servers as live.Loop does: in the policy set
// (their tools hidden), refusing the built-in server and names it lacks.
type fakeSwitcher struct {
	mu       sync.Mutex
	set      *policy.Set
	known    []string
	disabled []string
}

func (f *fakeSwitcher) SetDisabled(_ context.Context, server string, disabled bool) (bool, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	switch {
	case server == "toolgate":
		return false, errors.New(`server "toolgate" is built into the gateway and cannot be disabled`)
	case !slices.Contains(f.known, server):
		return false, fmt.Errorf("there is no server named %q in the config: %w", server, config.ErrNoServer)
	}
	was := slices.Contains(f.disabled, server)
	if was == disabled {
		return false, nil
	}
	if disabled {
		f.disabled = append(f.disabled, server)
	} else {
		f.disabled = slices.DeleteFunc(f.disabled, func(s string) bool { return s == server })
	}
	f.set.Put(policy.NewDisabled(f.disabled))
	return true, nil
}

// TestDisableEnable: the Disable and Enable buttons are
// toolgate__disable_server and toolgate__enable_server: a key needs them
// in its scope and acts only on the servers it may manage, a server
// disabled at run time (out of the pool) among them; each press and
// refusal is audited; a server the config lacks is 404, one that cannot
// be switched 409.
func TestDisableEnable(t *testing.T) {
	eng, set := scopedCatalog(t, catalog.Tool{Server: "kg", Name: "query", Description: "Query the graph."},
		catalog.Tool{Server: "toolgate", Name: "disable_server"}, catalog.Tool{Server: "toolgate", Name: "enable_server"})
	sw := &fakeSwitcher{set: set, known: []string{"filesystem", "memory", "kg"}}
	fk := &fakeKeys{key: "tg_secret", scopes: map[string]*policy.Key{
		"tg_low":   {Name: "low", Deny: []string{"toolgate__*"}},
		"tg_kg":    {Name: "kg", Allow: []string{"kg__*", "toolgate__*"}},
		"tg_admin": {Name: "admin", Admin: true},
	}}
	log := &audittest.Log{}
	e := newEnvWith(t, &Options{Catalog: eng, Keys: fk, Policy: set, Audit: log, Switcher: sw})
	post := func(key, verb, server string) (int, string) {
		t.Helper()
		resp, body := e.do(t, "POST", "/ui/api/"+verb, `{"server": "`+server+`"}`, "Authorization", "Bearer "+key)
		return resp.StatusCode, body
	}
	state := func(key string) State {
		t.Helper()
		resp, body := e.do(t, "GET", "/ui/api/state", "", "Authorization", "Bearer "+key)
		var st State
		if resp.StatusCode != 200 || json.Unmarshal([]byte(body), &st) != nil {
			t.Fatalf("GET /ui/api/state: %d %s", resp.StatusCode, body)
		}
		return st
	}

	if st := state("tg_low"); st.CanDisable || st.CanEnable {
		t.Errorf("a key denied toolgate__*: canDisable %v, canEnable %v; want no buttons", st.CanDisable, st.CanEnable)
	}
	if st := state("tg_secret"); !st.CanDisable || !st.CanEnable {
		t.Errorf("the key without scope: canDisable %v, canEnable %v; want both buttons", st.CanDisable, st.CanEnable)
	}
	if code, body := post("tg_low", "disable", "memory"); code != 403 || !strings.Contains(body, "disabling backends is outside what this API key may do") {
		t.Errorf("disable with a key denied toolgate__*: %d %s, want 403", code, body)
	}
	// kg is in no pool: known to the console only once it is disabled.
	if code, _ := post("tg_kg", "enable", "kg"); code != 404 {
		t.Errorf("enable kg, neither running nor disabled, with a key of kg: %d, want 404", code)
	}
	if code, body := post("tg_kg", "disable", "memory"); code != 403 || !strings.Contains(body, `is outside what this API key may do: the API key \"kg\" lacks access`) {
		t.Errorf("disable memory with a key of kg only: %d %s, want 403 in the words of the key's scope", code, body)
	}
	if len(sw.disabled) != 0 {
		t.Fatalf("disabled %v by refused presses", sw.disabled)
	}
	if code, body := post("tg_admin", "disable", "kg"); code != 200 || !strings.Contains(body, `"changed":true`) || !slices.Equal(sw.disabled, []string{"kg"}) {
		t.Fatalf("disable kg: %d %s, disabled %v", code, body, sw.disabled)
	}
	if code, body := post("tg_kg", "enable", "kg"); code != 200 || len(sw.disabled) != 0 {
		t.Errorf("enable kg, disabled, with a key of kg: %d %s, disabled %v; want 200 and none", code, body, sw.disabled)
	}
	if code, _ := post("tg_admin", "disable", "nosuch"); code != 404 {
		t.Errorf("disable a server the config lacks: %d, want 404", code)
	}
	if code, body := post("tg_admin", "disable", "toolgate"); code != 409 || !strings.Contains(body, "built into the gateway") {
		t.Errorf("disable the built-in server: %d %s, want 409", code, body)
	}
	// A caller that does not manage all (the front without keys, a key
	// that sees the built-in server's tools) got 404 "there is no server
	// named \"toolgate\"".
	if code, body := post("tg_kg", "disable", "toolgate"); code != 409 || !strings.Contains(body, "built into the gateway") {
		t.Errorf("disable the built-in server with a key of kg and toolgate: %d %s, want 409", code, body)
	}

	var got []string
	for _, r := range log.Records() {
		got = append(got, fmt.Sprintf("%s %s %s %s %d", r.Key, r.Action, r.Decision, r.Outcome, r.Status))
	}
	// Each with the status it was answered (the presses acted on had 0).
	want := []string{
		"low toolgate__disable_server denied  403", "kg toolgate__enable_server denied  404", "kg toolgate__disable_server denied  403",
		"admin toolgate__disable_server allowed ok 200", "kg toolgate__enable_server allowed ok 200",
		"admin toolgate__disable_server allowed isError 404", "admin toolgate__disable_server allowed isError 409",
		"kg toolgate__disable_server allowed isError 409",
	}
	if !slices.Equal(got, want) {
		t.Errorf("audit records\n%q\nwant\n%q", got, want)
	}
}

// TestKeyRate: the console counts a key's requests in the key's bucket,
// as the HTTP front counts its other requests: the console's API (a search
// per request) was a way around toolgate.limits. A login with the key
// takes a token too (it was free: a key over its rate logged in, and a
// loop of logins made sessions unlimited), and a session's requests take
// from the same bucket.
func TestKeyRate(t *testing.T) {
	log := &audittest.Log{}
	e := newEnvWith(t, &Options{Catalog: fakeCatalog{}, Keys: &fakeKeys{key: "tg_secret"}, Audit: log, Rates: limit.NewRates(0.001, 2)})
	if resp, _ := e.do(t, "POST", "/ui/api/login", `{"key": "tg_secret"}`, "Origin", e.srv.URL); resp.StatusCode != 204 {
		t.Fatalf("login: %d", resp.StatusCode)
	}
	codes := []int{}
	retryAfter := ""
	for range 2 {
		resp, _ := e.do(t, "GET", "/ui/api/search?q=files", "", "Authorization", "Bearer tg_secret")
		codes = append(codes, resp.StatusCode)
		if resp.StatusCode == 429 && resp.Header.Get("Retry-After") == "" {
			t.Error("429 without Retry-After")
		}
		if resp.StatusCode == 429 {
			retryAfter = resp.Header.Get("Retry-After")
		}
	}
	if fmt.Sprint(codes) != "[200 429]" {
		t.Errorf("a login and two searches with a burst of 2: %v, want [200 429]", codes)
	}
	resp, body := e.do(t, "POST", "/ui/api/login", `{"key": "tg_secret"}`, "Origin", e.srv.URL)
	if resp.StatusCode != 429 || resp.Header.Get("Retry-After") == "" || !strings.Contains(body, "over its rate") {
		t.Errorf("a login with a key over its rate: %d, Retry-After %q, %s; want 429 saying so", resp.StatusCode, resp.Header.Get("Retry-After"), body)
	}
	if resp, _ := e.do(t, "GET", "/ui/api/state", ""); resp.StatusCode != 429 {
		t.Errorf("state in a session of a key over its rate: %d, want 429", resp.StatusCode)
	}
	if recs := log.Records(); len(recs) != 3 || recs[0].Decision != audit.RateLimited || recs[0].Key != "main" ||
		recs[1].Decision != audit.RateLimited || recs[1].Route != "POST /ui/api/login" {
		t.Errorf("audit records %+v, want the three refusals as rate-limited, the login's among them", recs)
	} else if want := "over the key's rate (retry after " + retryAfter + "s, as Retry-After says)"; recs[0].Reason != want {
		// It said the wait to the millisecond, beside the header's seconds.
		t.Errorf("the 429's record says %q, want %q (its Retry-After)", recs[0].Reason, want)
	}
}

// TestRefusedLogins: failed logins and refused bearer keys count against
// the client address's limit of refused requests (the HTTP front's): past
// it both get 429 with Retry-After, and neither is audited one by one; a
// good key still logs in.
func TestRefusedLogins(t *testing.T) {
	log := &audittest.Log{}
	e := newEnvWith(t, &Options{Catalog: fakeCatalog{}, Keys: &fakeKeys{key: "tg_secret"}, Audit: log,
		Refusals: limit.NewRefusals(&limit.RefusalOptions{PerMinute: 1, Burst: 2})})
	var codes []int
	for range 4 {
		resp, _ := e.do(t, "POST", "/ui/api/login", `{"key": "tg_wrong"}`, "Origin", e.srv.URL)
		codes = append(codes, resp.StatusCode)
		if resp.StatusCode == 429 && resp.Header.Get("Retry-After") == "" {
			t.Error("429 without Retry-After")
		}
	}
	if fmt.Sprint(codes) != "[401 401 429 429]" {
		t.Errorf("four failed logins with a burst of 2: %v, want [401 401 429 429]", codes)
	}
	// A refused bearer key over the limit: 429, as the HTTP front answers
	// it on every other route (it was 401 here).
	for _, route := range []string{"/ui/api/search?q=files", "/ui/api/state", "/ui/"} {
		resp, body := e.do(t, "GET", route, "", "Authorization", "Bearer tg_wrong")
		if resp.StatusCode != 429 || resp.Header.Get("Retry-After") == "" || !strings.Contains(body, "refusedPerMinute") {
			t.Errorf("GET %s with a refused bearer key over the limit: %d, Retry-After %q, %s; want 429 naming the limit", route, resp.StatusCode, resp.Header.Get("Retry-After"), body)
		}
	}
	if resp, _ := e.do(t, "POST", "/ui/api/restart", `{"server": "a"}`, "Authorization", "Bearer tg_wrong"); resp.StatusCode != 429 {
		t.Errorf("POST /ui/api/restart with a refused bearer key over the limit: %d, want 429", resp.StatusCode)
	}
	if n := len(log.Records()); n != 2 {
		t.Errorf("%d audit records, want the 2 refusals under the limit: %+v", n, log.Records())
	}
	if resp, _ := e.do(t, "POST", "/ui/api/login", `{"key": "tg_secret"}`, "Origin", e.srv.URL); resp.StatusCode != 204 {
		t.Errorf("a good key from the limited address: %d, want 204", resp.StatusCode)
	}
}

// An endpoint asked without a key or a session is refused as the HTTP
// front refuses a request without a key: 401 and an audit record each, up
// to the address's refusal limit, then 429. The page without one is the
// login form: answered 401, but not a refusal to record.
func TestNoKeyRefused(t *testing.T) {
	log := &audittest.Log{}
	e := newEnvWith(t, &Options{Catalog: fakeCatalog{}, Keys: &fakeKeys{key: "tg_secret"}, Audit: log,
		Refusals: limit.NewRefusals(&limit.RefusalOptions{PerMinute: 1, Burst: 2})})
	if resp, body := e.do(t, "GET", "/ui/", ""); resp.StatusCode != 401 || !strings.Contains(body, "login") {
		t.Errorf("the page without a key: %d, want 401 with the login form", resp.StatusCode)
	}
	if n := len(log.Records()); n != 0 {
		t.Errorf("the login form was audited: %+v", log.Records())
	}
	var codes []int
	for _, route := range []string{"/ui/api/state", "/ui/api/search?q=files", "/ui/api/state"} {
		resp, _ := e.do(t, "GET", route, "")
		codes = append(codes, resp.StatusCode)
	}
	if fmt.Sprint(codes) != "[401 401 429]" {
		t.Errorf("three requests without a key, burst 2: %v, want [401 401 429]", codes)
	}
	recs := log.Records()
	if len(recs) != 2 {
		t.Fatalf("%d audit records, want the 2 refusals under the limit: %+v", len(recs), recs)
	}
	for _, r := range recs {
		if r.Decision != audit.Denied || r.Status != 401 || r.Reason != "console: no API key or console session" || r.Transport != "http" {
			t.Errorf("audit record %+v", r)
		}
	}
}

// TestRecentCallsOwnKey: a key that is not admin sees only the recent
// calls made with it; an admin key sees every call. Before, any key saw
// the others' calls, whose errors name their keys, scopes and refusals.
func TestRecentCallsOwnKey(t *testing.T) {
	fk := &fakeKeys{key: "tg_secret", scopes: map[string]*policy.Key{
		"tg_a": {Name: "a"}, "tg_b": {Name: "b"}, "tg_root": {Name: "root", Admin: true},
	}}
	e := newEnvWith(t, &Options{Catalog: fakeCatalog{}, Keys: fk})
	for _, k := range []string{"a", "b"} {
		ctx := policy.WithCaller(context.Background(), &policy.Caller{Transport: policy.TransportHTTP, Key: fk.scopes["tg_"+k]})
		refuse := callerFunc(func() (*mcp.CallToolResult, error) {
			return nil, fmt.Errorf("the API key %q lacks access to this tool", k)
		})
		_, _ = e.rec.Caller(refuse).CallTool(ctx, "memory", "create_entities", nil)
	}
	for key, want := range map[string]int{"tg_a": 1, "tg_b": 1, "tg_root": 3} {
		resp, body := e.do(t, "GET", "/ui/api/state", "", "Authorization", "Bearer "+key)
		var st State
		if resp.StatusCode != 200 || json.Unmarshal([]byte(body), &st) != nil {
			t.Fatalf("state as %s: %d %s", key, resp.StatusCode, body)
		}
		if len(st.Calls) != want {
			t.Errorf("state as %s: %d calls %+v, want %d", key, len(st.Calls), st.Calls, want)
		}
		for _, c := range st.Calls {
			if name := strings.TrimPrefix(key, "tg_"); key != "tg_root" && !strings.Contains(c.Error, `"`+name+`"`) {
				t.Errorf("key %s sees another's call: %+v", name, c)
			}
		}
	}
}

// TestRecentCallsSayWho: an admin reading the whole team's recent calls
// reads who made each (the call's API key, "key" in the state); a key
// that is not admin reads its own name on its own calls. Before, the
// admin's table had no key: a call that went through named no one.
func TestRecentCallsSayWho(t *testing.T) {
	fk := &fakeKeys{key: "tg_secret", scopes: map[string]*policy.Key{
		"tg_a": {Name: "a"}, "tg_b": {Name: "b"}, "tg_root": {Name: "root", Admin: true},
	}}
	e := newEnvWith(t, &Options{Catalog: fakeCatalog{}, Keys: fk})
	ok := callerFunc(func() (*mcp.CallToolResult, error) { return &mcp.CallToolResult{}, nil })
	for _, k := range []string{"a", "b"} {
		ctx := policy.WithCaller(context.Background(), &policy.Caller{Transport: policy.TransportHTTP, Key: fk.scopes["tg_"+k]})
		_, _ = e.rec.Caller(ok).CallTool(ctx, "memory", "read_graph", nil)
	}
	stdio := policy.WithCaller(context.Background(), &policy.Caller{Transport: policy.TransportStdio})
	_, _ = e.rec.Caller(ok).CallTool(stdio, "memory", "read_graph", nil)
	for key, want := range map[string]string{"tg_root": "[ b a ]", "tg_a": "[a]", "tg_b": "[b]"} {
		resp, body := e.do(t, "GET", "/ui/api/state", "", "Authorization", "Bearer "+key)
		var st struct {
			Calls []map[string]any `json:"calls"`
		}
		if resp.StatusCode != 200 || json.Unmarshal([]byte(body), &st) != nil {
			t.Fatalf("state as %s: %d %s", key, resp.StatusCode, body)
		}
		var who []string
		for _, c := range st.Calls {
			k, _ := c["key"].(string)
			who = append(who, k)
		}
		if fmt.Sprint(who) != want {
			t.Errorf("state as %s: the recent calls' keys are %q, want %s (newest first)", key, who, want)
		}
	}
}

// TestSessionGone: a session cookie the gateway does not know (the page
// was opened before the gateway restarted: sessions live in memory) is
// told that the session ended and to log in again, not that a key is
// required as if none had ever been given; a request without a cookie
// still reads that a key is required.
func TestSessionGone(t *testing.T) {
	log := &audittest.Log{}
	e := newEnvWith(t, &Options{Catalog: fakeCatalog{}, Keys: &fakeKeys{key: "tg_secret"}, Audit: log})
	if resp, body := e.do(t, "GET", "/ui/api/state", ""); resp.StatusCode != 401 || !strings.Contains(body, "an API key is required") {
		t.Errorf("state without a cookie: %d %s, want 401 saying a key is required", resp.StatusCode, body)
	}
	u, _ := url.Parse(e.srv.URL + Path)
	e.client.Jar.SetCookies(u, []*http.Cookie{{Name: cookieName, Value: "from-before-the-restart", Path: "/ui"}})
	resp, body := e.do(t, "GET", "/ui/api/state", "")
	if resp.StatusCode != 401 || !strings.Contains(body, "the console session has ended (the gateway restarted, or the session is over 12 hours old): log in again") {
		t.Errorf("state with a session cookie the gateway does not know: %d %s, want 401 saying the session ended", resp.StatusCode, body)
	}
	recs := log.Records()
	if len(recs) != 2 || recs[1].Reason != "console: a console session this gateway does not know (it restarted, or the session ended)" || recs[1].Status != 401 {
		t.Errorf("audit records %+v, want the second refusal to say the session is unknown", recs)
	}
}

type storageReport storage.Report

func (s storageReport) Report() storage.Report { return storage.Report(s) }

// TestStateHasStatusSections: the console's state is the GET /status
// report (README: "the /status report plus the recent calls"), its
// storage and security sections included, so that the page can say the
// data folder cannot take writes or which tools are quarantined; it held
// only the backends, the loop's counters and the ranking.
func TestStateHasStatusSections(t *testing.T) {
	since := time.Date(2026, 12, 5, 11, 44, 21, 0, time.UTC)
	e := newEnvWith(t, &Options{Catalog: fakeCatalog{}, Status: &gateway.StatusOptions{
		Storage: storageReport{DataDir: "/srv/toolgate", Writable: false, Error: "data folder /srv/toolgate does not exist", Fix: "mkdir -p /srv/toolgate", Since: since,
			Writers: []storage.WriterReport{{Name: "audit log", OK: false, Since: since, Failures: 2, Degraded: "records are counted as lost"}}},
		Security: func() *gateway.SecurityStatus {
			return &gateway.SecurityStatus{Quarantined: []string{"memory__notes"}}
		},
	}})
	resp, body := e.do(t, "GET", "/ui/api/state", "")
	var st State
	if err := json.Unmarshal([]byte(body), &st); err != nil || resp.StatusCode != 200 {
		t.Fatalf("GET /ui/api/state: %d %v\n%s", resp.StatusCode, err, body)
	}
	if st.Storage == nil || st.Storage.Writable || st.Storage.Fix != "mkdir -p /srv/toolgate" || len(st.Storage.Writers) != 1 {
		t.Errorf("state's storage %+v, want the data folder not writable, with its fix and the failing writer", st.Storage)
	}
	if st.Security == nil || fmt.Sprint(st.Security.Quarantined) != "[memory__notes]" {
		t.Errorf("state's security %+v, want memory__notes quarantined", st.Security)
	}
	// The console's own sources still fill what Status lacks.
	if st.Search == nil || !st.Search.BM25Only || st.Stats == nil || st.CatalogGeneration != 7 || st.Version != "1.0.0" {
		t.Errorf("state's search %+v, stats %+v, version %q: want the console's", st.Search, st.Stats, st.Version)
	}
}

// TestStateFrontCertificate: the console says, under the backends, that
// the HTTPS front's own certificate is due for renewal, or that its
// changed files cannot be read, as toolgate status does; it said only
// the backends' client certificates, so a gateway whose certificate
// expired in days showed nothing to do. A certificate far from expiry is
// not said.
func TestStateFrontCertificate(t *testing.T) {
	since := time.Date(2026, 12, 5, 11, 44, 21, 0, time.UTC)
	for _, tc := range []struct {
		left time.Duration
		err  string
		want []string
	}{
		{90 * 24 * time.Hour, "", nil},
		{3*24*time.Hour + time.Hour, "", []string{"https: certificate /etc/toolgate/gw.pem expires at "}},
		{90 * 24 * time.Hour, "tls: failed to find any PEM data", []string{"https: the certificate's files changed since 2026-12-05 11:44 UTC but CANNOT BE READ: tls: failed to find any PEM data: the certificate read before is served"}},
	} {
		notAfter := time.Now().Add(tc.left)
		p := &gateway.ProcessInfo{Transport: "http", TLS: true, TLSCert: "/etc/toolgate/gw.pem", TLSNotAfter: &notAfter, TLSError: tc.err}
		if tc.err != "" {
			p.TLSErrorSince = &since
		}
		e := newEnvWith(t, &Options{Catalog: fakeCatalog{}, Status: &gateway.StatusOptions{Process: func() *gateway.ProcessInfo { return p }}})
		_, body := e.do(t, "GET", "/ui/api/state", "")
		var st State
		if err := json.Unmarshal([]byte(body), &st); err != nil {
			t.Fatal(err)
		}
		var front []string
		for _, w := range st.Warnings {
			if strings.HasPrefix(w, "https: ") {
				front = append(front, w)
			}
		}
		ok := len(front) == len(tc.want)
		for i := 0; ok && i < len(front); i++ {
			ok = strings.HasPrefix(front[i], tc.want[i])
		}
		if !ok {
			t.Errorf("certificate due in %s, files error %q: the front's warnings %q, want %q", tc.left, tc.err, front, tc.want)
		}
	}
}

// TestStateLoginExpiry: the console's warnings say of an OAuth login
// whose access token cannot be refreshed when the token expires, or that
// it has, with the login to run, as toolgate status does
// (BackendStatus.LoginNotice).
func TestStateLoginExpiry(t *testing.T) {
	e := newEnvWith(t, &Options{Catalog: fakeCatalog{}})
	const login = "toolgate auth login filesystem --config /etc/toolgate.json"
	for _, tc := range []struct {
		in   time.Duration
		want string
	}{
		{time.Hour, "filesystem: the access token of its OAuth login expires at "},
		{-time.Minute, "filesystem: the access token of its OAuth login expired at "},
	} {
		e.backends.mu.Lock()
		e.backends.login = map[string]*backend.LoginExpiry{"filesystem": {Expires: time.Now().Add(tc.in), Login: login}}
		e.backends.mu.Unlock()
		_, body := e.do(t, "GET", "/ui/api/state", "")
		var st State
		if err := json.Unmarshal([]byte(body), &st); err != nil {
			t.Fatal(err)
		}
		if !slices.ContainsFunc(st.Warnings, func(w string) bool {
			return strings.HasPrefix(w, tc.want) && strings.Contains(w, "run `"+login+"`")
		}) {
			t.Errorf("a login that cannot be refreshed, expiring in %s: warnings %q, want one starting %q with the login", tc.in, st.Warnings, tc.want)
		}
	}
}

// TestCSRFTokenAfterRestart: a page opened before a gateway without keys
// restarted keeps a session cookie the new process does not know; its
// next state poll hands over a new session and CSRF token (X-CSRF-Token),
// with which its buttons work again without a reload (they answered
// "missing or wrong CSRF token"). A poll without a cookie (a script) makes
// no session.
func TestCSRFTokenAfterRestart(t *testing.T) {
	e := newEnv(t, nil)
	if resp, _ := e.do(t, "GET", "/ui/api/state", ""); resp.Header.Get(csrfHeader) != "" {
		t.Errorf("a state poll without a session cookie got a CSRF token")
	}
	u, _ := url.Parse(e.srv.URL + Path)
	e.client.Jar.SetCookies(u, []*http.Cookie{{Name: cookieName, Value: "from-before-the-restart", Path: "/ui"}})
	origin := e.srv.URL
	if resp, _ := e.do(t, "POST", "/ui/api/restart", `{"server": "filesystem"}`, "Origin", origin, csrfHeader, "old-token"); resp.StatusCode != 403 {
		t.Fatalf("restart with the old page's token: %d, want 403", resp.StatusCode)
	}
	resp, _ := e.do(t, "GET", "/ui/api/state", "")
	token := resp.Header.Get(csrfHeader)
	if resp.StatusCode != 200 || token == "" {
		t.Fatalf("state poll with an unknown session: %d, token %q: want 200 with a new token", resp.StatusCode, token)
	}
	if resp, _ := e.do(t, "POST", "/ui/api/restart", `{"server": "filesystem"}`, "Origin", origin, csrfHeader, token); resp.StatusCode != 202 {
		t.Errorf("restart with the token handed over: %d, want 202", resp.StatusCode)
	}
	if resp, _ := e.do(t, "GET", "/ui/api/state", ""); resp.Header.Get(csrfHeader) != "" {
		t.Errorf("a state poll of a live session got another token")
	}
}

// noBackends is a pool without servers.
type noBackends struct{}

func (noBackends) Status() []backend.Status { return nil }

// disabledLoop is the loop of a gateway whose one server was disabled at
// run time.
type disabledLoop struct{}

func (disabledLoop) Stats() live.Stats { return live.Stats{Disabled: []string{"memory"}} }

// TestNoServers: a backends table without rows says why, in the gateway's
// words (Options.NoServers: the config has none, and how to add one); to
// a key whose scope holds no server, only that (it learns nothing of the
// config); a table with rows, or with a server disabled at run time (its
// row has the Enable button), says nothing of it. The table was empty.
func TestNoServers(t *testing.T) {
	const note = `No servers are configured: add one to "mcpServers".`
	noServers := func() string { return note }
	anyone := &policy.Caller{Transport: policy.TransportHTTP}
	scoped := &policy.Caller{Transport: policy.TransportHTTP, Key: &policy.Key{Name: "ops", Allow: []string{"filesystem__*"}}}
	for _, c := range []struct {
		name   string
		o      *Options
		caller *policy.Caller
		want   string
	}{
		{"no servers", &Options{Backends: noBackends{}, NoServers: noServers}, anyone, note},
		{"no servers, scoped key", &Options{Backends: noBackends{}, NoServers: noServers}, scoped, "No server is in this API key's scope: an admin key sees every server."},
		{"servers", &Options{Backends: &fakeBackends{}, NoServers: noServers}, anyone, ""},
		{"one disabled at run time", &Options{Backends: noBackends{}, Loop: disabledLoop{}, NoServers: noServers}, anyone, ""},
		{"nothing to say", &Options{Backends: noBackends{}}, anyone, ""},
	} {
		c.o.Catalog = fakeCatalog{}
		if got := New(c.o).state(c.caller).NoServers; got != c.want {
			t.Errorf("%s: the state's noServers %q, want %q", c.name, got, c.want)
		}
	}
}

// TestStateDisabledInConfig: the servers the config file disables are in
// the state (disabledInConfig) for a caller that sees every server, so the
// backends table lists them; a scoped key learns nothing of the config.
func TestStateDisabledInConfig(t *testing.T) {
	o := &Options{Backends: &fakeBackends{}, Catalog: fakeCatalog{}, DisabledInConfig: func() []string { return []string{"off"} }}
	anyone := &policy.Caller{Transport: policy.TransportHTTP}
	scoped := &policy.Caller{Transport: policy.TransportHTTP, Key: &policy.Key{Name: "ops", Allow: []string{"filesystem__*"}}}
	if got := New(o).state(anyone).DisabledInConfig; !slices.Equal(got, []string{"off"}) {
		t.Errorf("the state's disabledInConfig %q, want [off]", got)
	}
	if got := New(o).state(scoped).DisabledInConfig; got != nil {
		t.Errorf("a scoped key's state has disabledInConfig %q, want none", got)
	}
}

// The playground's server is read as search_tools reads it: one that two
// servers' names may be (they differ in "-" and "_") is 400 naming both,
// not "no tool of it is in the catalog".
func TestSearchServerAmbiguous(t *testing.T) {
	eng, set := scopedCatalog(t, catalog.Tool{Server: "a-b_c", Name: "x", Description: "Read a file."}, catalog.Tool{Server: "a_b-c", Name: "x", Description: "Read a file."})
	fk := &fakeKeys{key: "tg_secret", scopes: map[string]*policy.Key{}}
	e := newEnvWith(t, &Options{Catalog: eng, Keys: fk, Policy: set})
	resp, body := e.do(t, "GET", "/ui/api/search?q=read&server=a-b-c", "", "Authorization", "Bearer tg_secret")
	if want := `server \"a-b-c\" may be any of \"a-b_c\", \"a_b-c\", which differ only in case or in \"-\" and \"_\": give one of them exactly as written`; resp.StatusCode != 400 || !strings.Contains(body, want) {
		t.Errorf("search of server a-b-c: %d %s, want 400 %s", resp.StatusCode, body, want)
	}
	if resp, body := e.do(t, "GET", "/ui/api/search?q=read&server=A-B_C", "", "Authorization", "Bearer tg_secret"); resp.StatusCode != 200 {
		t.Errorf("search of server A-B_C: %d %s", resp.StatusCode, body)
	}
}

// TestSessionCookieSecureBehindProxy: the session cookie is Secure when the
// page came over HTTPS, the gateway's own TLS or a reverse proxy's that
// says so (X-Forwarded-Proto: https, Forwarded: proto=https): behind a
// proxy ending TLS the gateway serves plain HTTP, and the cookie went out
// without Secure, for the browser to send in clear to any http:// page of
// that host. A client that claims https over plain HTTP only loses its own
// session.
func TestSessionCookieSecureBehindProxy(t *testing.T) {
	s := newSessions()
	for _, tc := range []struct {
		name, header, value string
		want                bool
	}{
		{"plain", "", "", false},
		{"X-Forwarded-Proto", "X-Forwarded-Proto", "https", true},
		{"X-Forwarded-Proto http", "X-Forwarded-Proto", "http", false},
		{"Forwarded", "Forwarded", `for=192.0.2.60;proto=https;by=203.0.113.43`, true},
		{"Forwarded http", "Forwarded", `for=192.0.2.60;proto=http`, false},
	} {
		r := httptest.NewRequest("GET", "/ui/", nil)
		if tc.header != "" {
			r.Header.Set(tc.header, tc.value)
		}
		for what, set := range map[string]func(w http.ResponseWriter){
			"login":  func(w http.ResponseWriter) { s.create(w, r, "") },
			"logout": func(w http.ResponseWriter) { s.end(w, r) },
		} {
			w := httptest.NewRecorder()
			set(w)
			if c := w.Result().Cookies(); len(c) != 1 || c[0].Secure != tc.want {
				t.Errorf("%s, %s: cookies %+v, want one with Secure %v", tc.name, what, c, tc.want)
			}
		}
	}
}

// TestAnswersCompressed: the console's JSON and its script and style come
// gzipped to a browser that takes gzip (a page of a large catalog polled
// 16 KB of state every 3 s uncompressed); the page itself does not, as it
// holds the CSRF token beside a deep link's query (BREACH), and a client
// that does not take gzip gets every answer as it was.
func TestAnswersCompressed(t *testing.T) {
	// 30 tools more, so that the catalog's and a search's answers are
	// more than a few hundred bytes (smaller ones are sent as they are).
	var more []catalog.Tool
	for i := range 30 {
		more = append(more, catalog.Tool{Server: "files", Name: fmt.Sprintf("tool_%d", i), Description: "Move the files of a folder to another folder."})
	}
	eng, _ := scopedCatalog(t, more...)
	e := newEnvWith(t, &Options{Catalog: eng})
	e.page(t, "") // the session
	// The body as sent: the client asks for gzip only when told to.
	e.client.Transport = &http.Transport{DisableCompression: true}
	for _, tc := range []struct {
		path string
		gzip bool
	}{
		{"/ui/api/state", true},
		{"/ui/api/catalog", true},
		{"/ui/api/search?q=move%20the%20files&limit=50", true},
		{"/ui/app.js", true},
		{"/ui/app.css", true},
		{"/ui/?q=files", false},
	} {
		resp, raw := e.do(t, "GET", tc.path, "", "Accept-Encoding", "gzip")
		plainResp, plain := e.do(t, "GET", tc.path, "")
		if resp.StatusCode != 200 || plainResp.StatusCode != 200 {
			t.Fatalf("GET %s: %d, %d without gzip", tc.path, resp.StatusCode, plainResp.StatusCode)
		}
		if enc := plainResp.Header.Get("Content-Encoding"); enc != "" {
			t.Errorf("GET %s without Accept-Encoding: Content-Encoding %q", tc.path, enc)
		}
		if enc := resp.Header.Get("Content-Encoding"); (enc == "gzip") != tc.gzip {
			t.Errorf("GET %s with Accept-Encoding gzip: Content-Encoding %q, want gzip %v", tc.path, enc, tc.gzip)
			continue
		}
		if !tc.gzip {
			continue
		}
		zr, err := gzip.NewReader(strings.NewReader(raw))
		if err != nil {
			t.Fatalf("GET %s: %v", tc.path, err)
		}
		body, err := io.ReadAll(zr)
		if err != nil {
			t.Fatalf("GET %s: %v", tc.path, err)
		}
		if strings.HasPrefix(tc.path, "/ui/api/") && !json.Valid(body) {
			t.Errorf("GET %s: the gzipped answer is not JSON:\n%s", tc.path, body)
		}
		// The state's uptime and a search's time move between the two.
		if vary := tc.path == "/ui/api/state" || strings.HasPrefix(tc.path, "/ui/api/search"); !vary && string(body) != plain {
			t.Errorf("GET %s: the gzipped answer is not the plain one:\n%s\n%s", tc.path, body, plain)
		}
		t.Logf("GET %s: %d bytes, %d gzipped", tc.path, len(plain), len(raw))
	}
}

// TestRestartDisabledServer: the restart button of a server disabled at
// run time (pressed in a console that showed it running, or while its cold
// start went on) says it is disabled and how to enable it: the pool, which
// holds no disabled server, answered 404 "no such server (configured:
// [filesystem memory])".
func TestRestartDisabledServer(t *testing.T) {
	eng, set := scopedCatalog(t, catalog.Tool{Server: "toolgate", Name: "restart_server"})
	sw := &fakeSwitcher{set: set, known: []string{"filesystem", "memory", "kg"}}
	e := newEnvWith(t, &Options{Catalog: eng, Keys: &fakeKeys{key: "tg_secret", scopes: map[string]*policy.Key{"tg_admin": {Name: "admin", Admin: true}}}, Policy: set, Switcher: sw})
	post := func(verb, server string) (int, string) {
		t.Helper()
		resp, body := e.do(t, "POST", "/ui/api/"+verb, `{"server": "`+server+`"}`, "Authorization", "Bearer tg_admin")
		return resp.StatusCode, body
	}
	if code, body := post("disable", "kg"); code != 200 {
		t.Fatalf("disable kg: %d %s", code, body)
	}
	if code, body := post("restart", "kg"); code != 409 || !strings.Contains(body, `server \"kg\" is disabled`) || !strings.Contains(body, "Enable") || strings.Contains(body, "no such server") {
		t.Errorf("restart of kg, disabled: %d %s, want 409 saying it is disabled and how to enable it", code, body)
	}
	if code, _ := post("restart", "nosuch"); code != 404 {
		t.Errorf("restart of a server the config lacks: %d, want 404", code)
	}
}
