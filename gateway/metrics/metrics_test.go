package metrics

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"

	"github.com/toolgate/toolgate/gateway"
	"github.com/toolgate/toolgate/gateway/audit"
	"github.com/toolgate/toolgate/gateway/backend"
	"github.com/toolgate/toolgate/gateway/backend/backendtest"
	"github.com/toolgate/toolgate/gateway/config"
	"github.com/toolgate/toolgate/gateway/live"
	"github.com/toolgate/toolgate/index/catalog"
	"github.com/toolgate/toolgate/internal/mcptext"
	"github.com/toolgate/toolgate/internal/testenv"
	"github.com/toolgate/toolgate/search"
)

// fakeCatalog is a Catalog and Searcher over fixed tools; search returns
// the first n tools, n from the query text's length modulo 3.
type fakeCatalog struct{ tools []catalog.Tool }

func (f *fakeCatalog) Tool(id string) (catalog.Tool, bool) {
	for _, t := range f.tools {
		if t.ID() == id {
			return t, true
		}
	}
	return catalog.Tool{}, false
}

func (f *fakeCatalog) IDs() []string {
	var ids []string
	for _, t := range f.tools {
		ids = append(ids, t.ID())
	}
	return ids
}

func (f *fakeCatalog) Search(_ context.Context, q search.Query) (search.Result, error) {
	if q.Text == "" {
		return search.Result{}, search.ErrEmptyQuery
	}
	var hits []search.Hit
	for _, t := range f.tools[:len(q.Text)%3] {
		hits = append(hits, search.Hit{Tool: t})
	}
	mode := search.ModeHybrid
	if q.Mode != "" {
		mode = q.Mode
	}
	// A query about a flight finds only weak matches: search_tools
	// answers noMatch, with the closest tools.
	return search.Result{Hits: hits, Mode: mode, NoMatch: strings.Contains(q.Text, "flight")}, nil
}

type fakeBackends []backend.Status

func (f fakeBackends) Status() []backend.Status { return f }
func (f fakeBackends) Servers() []string {
	var out []string
	for _, s := range f {
		out = append(out, s.Name)
	}
	return out
}

// fakeLoop is a Loop at that generation whose index holds tools, and
// whose latest re-index failed (so that every metric is gathered).
type fakeLoop uint64

func (f fakeLoop) Stats() live.Stats {
	return live.Stats{CatalogGeneration: uint64(f), LastIndexError: "disk full", LastIndexErrorAt: time.Unix(1796000000, 0)}
}
func (fakeLoop) CatalogToolsByServer() map[string]int {
	per := map[string]int{}
	for _, t := range tools {
		per[t.Server]++
	}
	return per
}

// callerFunc is a gateway.Caller.
type callerFunc func(server, tool string) (*mcp.CallToolResult, error)

func (f callerFunc) CallTool(_ context.Context, server, tool string, _ map[string]any) (*mcp.CallToolResult, error) {
	return f(server, tool)
}

var tools = []catalog.Tool{
	{Server: "memory", Name: "create_entities"},
	{Server: "memory", Name: "read_graph"},
	{Server: "filesystem", Name: "list_directory"},
}

var clientNotAfter = time.Unix(1803902401, 0)

func newTest() *Metrics {
	return New(&Options{
		Backends: fakeBackends{
			{Name: "memory", State: backend.StateUp, Restarts: 2},
			{Name: "filesystem", State: backend.StateDown},
			{Name: "lazy", State: backend.StateIdle},
			{Name: "remote", State: backend.StateUp, TLSCert: "/etc/toolgate/client.pem", TLSCertNotAfter: &clientNotAfter,
				LoginExpiry: &backend.LoginExpiry{Expires: clientNotAfter.Add(-time.Hour), Login: "toolgate auth login remote"}},
		},
		Catalog:    &fakeCatalog{tools},
		Loop:       fakeLoop(4),
		EmbedCache: func() CacheCounts { return CacheCounts{Hits: 7, Misses: 3, Dropped: 20} },
		Audit:      func() audit.Stats { return audit.Stats{Written: 120, Dropped: 2, Coalesced: 4000, RotatedEarly: 1} },
		Search: func() *search.State {
			return &search.State{Mode: search.ModeBM25, Configured: search.ModeHybrid, BM25Only: true, Reason: "no model", Running: 2, Waiting: 5, Slots: 2}
		},
		CertNotAfter: func() *time.Time {
			t := time.Date(2027, 3, 1, 12, 0, 0, 0, time.UTC)
			return &t
		},
	})
}

func TestSearcherCounts(t *testing.T) {
	m := newTest()
	s := m.Searcher(&fakeCatalog{tools})
	ctx := context.Background()
	// "a flight": two hits, all weak (noMatch); "abc": no hit at all.
	for _, q := range []search.Query{{Text: "ab"}, {Text: "a"}, {Text: "abc", Mode: search.ModeBM25}, {Text: ""}, {Text: "a flight"}} {
		if _, err := s.Search(ctx, q); err != nil && q.Text != "" {
			t.Fatal(err)
		}
	}
	if n := testutil.CollectAndCount(m.searchDuration); n != 2 {
		t.Errorf("%d mode series, want 2 (hybrid, bm25)", n)
	}
	want := `
# HELP toolgate_search_nomatch_total Searches answered with noMatch: no tool reaches minConfidence (the closest are listed, marked weak), or none was found.
# TYPE toolgate_search_nomatch_total counter
toolgate_search_nomatch_total 2
`
	if err := testutil.CollectAndCompare(m.searchNoMatch, strings.NewReader(want)); err != nil {
		t.Error(err)
	}
	if got := histCount(t, m, "toolgate_search_duration_seconds", "hybrid"); got != 3 {
		t.Errorf("hybrid searches timed: %d, want 3 (the failed one is not a search)", got)
	}
	if got := histCount(t, m, "toolgate_search_results", ""); got != 4 {
		t.Errorf("result counts observed: %d, want 4", got)
	}
	// The decorator passes the rest of the Searcher through.
	if _, ok := s.Tool("memory__read_graph"); !ok || len(s.IDs()) != 3 {
		t.Error("Tool/IDs not passed through")
	}
}

// histCount is the sample count of the histogram name (with mode label
// value mode, or none when "").
func histCount(t *testing.T, m *Metrics, name, mode string) uint64 {
	t.Helper()
	mfs, err := m.reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, mt := range mf.GetMetric() {
			if mode == "" || slices.ContainsFunc(mt.GetLabel(), func(l *dto.LabelPair) bool {
				return l.GetName() == "mode" && l.GetValue() == mode
			}) {
				return mt.GetHistogram().GetSampleCount()
			}
		}
	}
	return 0
}

func TestCallerOutcomesAndLabels(t *testing.T) {
	m := newTest()
	c := m.Caller(callerFunc(func(server, tool string) (*mcp.CallToolResult, error) {
		switch tool {
		case "create_entities":
			return &mcp.CallToolResult{}, nil
		case "read_graph":
			return &mcp.CallToolResult{IsError: true}, nil
		case "list_directory":
			return nil, fmt.Errorf("call: %w", backend.ErrCallTimeout)
		case "down":
			return nil, &backend.UnavailableError{Server: server, Err: errors.New("it is down")}
		case "secret":
			return nil, fmt.Errorf("key k may not run it: %w", gateway.ErrDenied)
		}
		return nil, errors.New("protocol error")
	}))
	ctx := context.Background()
	for _, call := range [][2]string{
		{"memory", "create_entities"}, {"memory", "create_entities"}, {"memory", "read_graph"},
		{"filesystem", "list_directory"}, {"memory", "down"}, {"memory", "secret"},
		{"memory", "made_up_1"}, {"memory", "made_up_2"}, {"nosuch", "x"},
	} {
		_, _ = c.CallTool(ctx, call[0], call[1], nil)
	}
	want := `
# HELP toolgate_tool_calls_total Tool calls dispatched to backends, by server, tool and outcome (ok, error, timeout, unavailable, denied).
# TYPE toolgate_tool_calls_total counter
toolgate_tool_calls_total{outcome="denied",server="memory",tool="unknown"} 1
toolgate_tool_calls_total{outcome="error",server="memory",tool="read_graph"} 1
toolgate_tool_calls_total{outcome="error",server="memory",tool="unknown"} 2
toolgate_tool_calls_total{outcome="error",server="unknown",tool="unknown"} 1
toolgate_tool_calls_total{outcome="ok",server="memory",tool="create_entities"} 2
toolgate_tool_calls_total{outcome="timeout",server="filesystem",tool="list_directory"} 1
toolgate_tool_calls_total{outcome="unavailable",server="memory",tool="unknown"} 1
`
	if err := testutil.CollectAndCompare(m.calls, strings.NewReader(want)); err != nil {
		t.Error(err)
	}
	if n := testutil.CollectAndCount(m.callDuration); n != 3 {
		t.Errorf("%d server series of call durations, want 3 (memory, filesystem, unknown)", n)
	}
	// The denied call never reached memory: it is counted, not timed.
	var d dto.Metric
	if err := m.callDuration.WithLabelValues("memory").(prometheus.Histogram).Write(&d); err != nil || d.GetHistogram().GetSampleCount() != 6 {
		t.Errorf("memory's call durations: %d samples (%v), want the 6 calls that were not denied", d.GetHistogram().GetSampleCount(), err)
	}
}

// TestForgetToolsThatLeftTheCatalog: once a re-index drops a tool (its
// server renamed it), its call series go from the registry, every
// outcome; those of tools still in the catalog and of names outside it
// (unknown) stay.
func TestForgetToolsThatLeftTheCatalog(t *testing.T) {
	cat := &fakeCatalog{slices.Clone(tools)}
	m := New(&Options{Catalog: cat, Backends: fakeBackends{{Name: "memory"}, {Name: "filesystem"}}})
	c := m.Caller(callerFunc(func(_, tool string) (*mcp.CallToolResult, error) {
		return &mcp.CallToolResult{IsError: tool == "read_graph"}, nil
	}))
	ctx := context.Background()
	for _, call := range [][2]string{{"memory", "create_entities"}, {"memory", "read_graph"}, {"memory", "read_graph"},
		{"filesystem", "list_directory"}, {"memory", "made_up"}} {
		_, _ = c.CallTool(ctx, call[0], call[1], nil)
	}
	m.Forget() // the catalog is the same: nothing goes
	if n := testutil.CollectAndCount(m.calls); n != 4 {
		t.Fatalf("%d call series before the rename, want 4", n)
	}
	// memory renames read_graph to read_graph_v2 and drops create_entities.
	cat.tools = []catalog.Tool{{Server: "memory", Name: "read_graph_v2"}, {Server: "filesystem", Name: "list_directory"}}
	m.Forget()
	want := `
# HELP toolgate_tool_calls_total Tool calls dispatched to backends, by server, tool and outcome (ok, error, timeout, unavailable, denied).
# TYPE toolgate_tool_calls_total counter
toolgate_tool_calls_total{outcome="ok",server="filesystem",tool="list_directory"} 1
toolgate_tool_calls_total{outcome="ok",server="memory",tool="unknown"} 1
`
	if err := testutil.GatherAndCompare(m.reg, strings.NewReader(want), "toolgate_tool_calls_total"); err != nil {
		t.Error(err)
	}
}

func TestStateCollector(t *testing.T) {
	m := newTest()
	want := `
# HELP toolgate_backend_up 1 when the backend is up (connected, or idle: lazy and not started yet), else 0.
# TYPE toolgate_backend_up gauge
toolgate_backend_up{server="filesystem"} 0
toolgate_backend_up{server="lazy"} 1
toolgate_backend_up{server="memory"} 1
toolgate_backend_up{server="remote"} 1
# HELP toolgate_backend_restarts_total Restarts of the backend after its first connect (crashes and restarts on request), counted on across disable and enable.
# TYPE toolgate_backend_restarts_total counter
toolgate_backend_restarts_total{server="filesystem"} 0
toolgate_backend_restarts_total{server="lazy"} 0
toolgate_backend_restarts_total{server="memory"} 2
toolgate_backend_restarts_total{server="remote"} 0
# HELP toolgate_catalog_tools Tools of the server in the catalog that search_tools ranks.
# TYPE toolgate_catalog_tools gauge
toolgate_catalog_tools{server="filesystem"} 1
toolgate_catalog_tools{server="lazy"} 0
toolgate_catalog_tools{server="memory"} 2
toolgate_catalog_tools{server="remote"} 0
# HELP toolgate_index_generation Indexes served since start: 1 for the first, one more for each re-index swapped in.
# TYPE toolgate_index_generation gauge
toolgate_index_generation 4
# HELP toolgate_embedding_cache_hits_total Texts (tools and queries) whose embedding came from the cache.
# TYPE toolgate_embedding_cache_hits_total counter
toolgate_embedding_cache_hits_total 7
# HELP toolgate_embedding_cache_misses_total Texts (tools and queries) the model had to embed.
# TYPE toolgate_embedding_cache_misses_total counter
toolgate_embedding_cache_misses_total 3
# HELP toolgate_embedding_cache_dropped_total Vectors of tool texts the embedding cache's sweeps deleted: out of the catalog for longer than toolgate.embed.keepUnused.
# TYPE toolgate_embedding_cache_dropped_total counter
toolgate_embedding_cache_dropped_total 20
# HELP toolgate_search_bm25_only 1 while search runs BM25 only although the configured mode needs the model (GET /status's search.reason says why), else 0.
# TYPE toolgate_search_bm25_only gauge
toolgate_search_bm25_only 1
# HELP toolgate_search_running Searches ranking now: at most the cores (at least 2) at once (GET /status's search.running of search.slots).
# TYPE toolgate_search_running gauge
toolgate_search_running 2
# HELP toolgate_search_waiting Searches waiting for one of the slots that bound those ranking at once, first come first served (GET /status's search.waiting).
# TYPE toolgate_search_waiting gauge
toolgate_search_waiting 5
# HELP toolgate_tls_cert_expiry_timestamp_seconds When the HTTPS front's certificate expires (toolgate.http.tls), as a Unix time; absent without one.
# TYPE toolgate_tls_cert_expiry_timestamp_seconds gauge
toolgate_tls_cert_expiry_timestamp_seconds 1.8039024e+09
# HELP toolgate_backend_tls_cert_expiry_timestamp_seconds When the client certificate a remote server is reached with expires (its tls.cert), as a Unix time; absent without one.
# TYPE toolgate_backend_tls_cert_expiry_timestamp_seconds gauge
toolgate_backend_tls_cert_expiry_timestamp_seconds{server="remote"} 1.803902401e+09
# HELP toolgate_backend_login_expiry_timestamp_seconds When the access token of a remote server's OAuth login expires, for a login that cannot be refreshed (the authorization server gave no refresh token: the server needs toolgate auth login again by then), as a Unix time; absent for one that can be refreshed, or none.
# TYPE toolgate_backend_login_expiry_timestamp_seconds gauge
toolgate_backend_login_expiry_timestamp_seconds{server="remote"} 1.803898801e+09
# HELP toolgate_audit_records_total Audit records by what became of them: written (in the file), dropped (lost: the writer fell behind, the disk failed or is under its free-space floor), coalesced (an API key's refusals counted into a record that stands for several).
# TYPE toolgate_audit_records_total counter
toolgate_audit_records_total{result="coalesced"} 4000
toolgate_audit_records_total{result="dropped"} 2
toolgate_audit_records_total{result="written"} 120
# HELP toolgate_audit_rotated_early_total Rotations of the audit log that removed records younger than toolgate.audit.minRetention: the log holds less time than counted on.
# TYPE toolgate_audit_rotated_early_total counter
toolgate_audit_rotated_early_total 1
`
	if err := testutil.GatherAndCompare(m.reg, strings.NewReader(want),
		"toolgate_backend_up", "toolgate_backend_restarts_total", "toolgate_catalog_tools", "toolgate_index_generation",
		"toolgate_embedding_cache_hits_total", "toolgate_embedding_cache_misses_total", "toolgate_embedding_cache_dropped_total", "toolgate_search_bm25_only",
		"toolgate_search_running", "toolgate_search_waiting", "toolgate_tls_cert_expiry_timestamp_seconds", "toolgate_backend_tls_cert_expiry_timestamp_seconds",
		"toolgate_backend_login_expiry_timestamp_seconds", "toolgate_audit_records_total", "toolgate_audit_rotated_early_total"); err != nil {
		t.Error(err)
	}
	// Without sources, those metrics are left out; the rest still works.
	bare := New(nil)
	if n, err := testutil.GatherAndCount(bare.reg, "toolgate_backend_up", "toolgate_index_generation"); err != nil || n != 0 {
		t.Errorf("New(nil): %d state series, err %v; want none", n, err)
	}
	if n, err := testutil.GatherAndCount(bare.reg, "go_goroutines", "process_start_time_seconds"); err != nil || n != 2 {
		t.Errorf("Go runtime and process collectors: %d series, err %v; want both", n, err)
	}
}

// TestHTTPRoutes counts requests by route and code through the gateway's
// HTTP front, refused ones (a foreign Origin) included, and serves
// /metrics behind the same checks.
func TestHTTPRoutes(t *testing.T) {
	m := newTest()
	gw := gateway.New(&fakeCatalog{tools}, nil, nil)
	h := gw.HTTPHandler(&gateway.HTTPOptions{
		Extra: map[string]http.Handler{"GET /metrics": m.Handler()},
		Wrap:  m.HTTP,
	})
	srv := httptest.NewServer(h)
	defer srv.Close()
	get := func(path, origin string) int {
		req, _ := http.NewRequest("GET", srv.URL+path, nil)
		if origin != "" {
			req.Header.Set("Origin", origin)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	for _, c := range []struct {
		path, origin string
		code         int
	}{
		{"/healthz", "", 200}, {"/healthz", "", 200}, {"/metrics", "", 200},
		{"/metrics", "https://evil.example", 403}, {"/nope/1", "", 404}, {"/nope/2", "", 404},
	} {
		if got := get(c.path, c.origin); got != c.code {
			t.Fatalf("GET %s (Origin %q) = %d, want %d", c.path, c.origin, got, c.code)
		}
	}
	want := `
# HELP toolgate_http_requests_total HTTP requests, by route and status code (refused ones included).
# TYPE toolgate_http_requests_total counter
toolgate_http_requests_total{code="200",route="/healthz"} 2
toolgate_http_requests_total{code="200",route="/metrics"} 1
toolgate_http_requests_total{code="403",route="/metrics"} 1
toolgate_http_requests_total{code="404",route="other"} 2
`
	if err := testutil.CollectAndCompare(m.httpRequests, strings.NewReader(want)); err != nil {
		t.Error(err)
	}
}

// BenchmarkSearcherOverhead is what the decorator adds to one search.
func BenchmarkSearcherOverhead(b *testing.B) {
	m := newTest()
	res := search.Result{Hits: make([]search.Hit, 5), Mode: search.ModeHybrid}
	s := m.Searcher(searchFunc(func() search.Result { return res }))
	ctx := context.Background()
	q := search.Query{Text: "x"}
	b.ReportAllocs()
	for b.Loop() {
		_, _ = s.Search(ctx, q)
	}
}

type searchFunc func() search.Result

func (f searchFunc) Search(context.Context, search.Query) (search.Result, error) { return f(), nil }
func (searchFunc) Tool(string) (catalog.Tool, bool)                              { return catalog.Tool{}, false }
func (searchFunc) IDs() []string                                                 { return nil }

// disabledLoop is a Loop with servers disabled at run time, and the
// counts by server it gives for them.
type disabledLoop struct {
	disabled []string
	per      map[string]int
}

func (d *disabledLoop) Stats() live.Stats {
	return live.Stats{CatalogGeneration: 1, Disabled: d.disabled}
}
func (d *disabledLoop) CatalogToolsByServer() map[string]int { return maps.Clone(d.per) }

// TestCatalogToolsOfDisabledServer: toolgate_catalog_tools says what the
// loop counts (GET /status's catalogTools is their sum): 0 for a server
// disabled at run time whose tools the index holds back (memory), and 0
// for one disabled whose tools the index does not hold (gone).
func TestCatalogToolsOfDisabledServer(t *testing.T) {
	m := New(&Options{Loop: &disabledLoop{disabled: []string{"gone", "memory"}, per: map[string]int{"filesystem": 1, "memory": 0}}})
	want := `
# HELP toolgate_catalog_tools Tools of the server in the catalog that search_tools ranks.
# TYPE toolgate_catalog_tools gauge
toolgate_catalog_tools{server="filesystem"} 1
toolgate_catalog_tools{server="gone"} 0
toolgate_catalog_tools{server="memory"} 0
`
	if err := testutil.GatherAndCompare(m.reg, strings.NewReader(want), "toolgate_catalog_tools"); err != nil {
		t.Error(err)
	}
}

// restartsOf is toolgate_backend_restarts_total of server as the registry
// has it now, and whether it has the series.
func restartsOf(t *testing.T, m *Metrics, server string) (float64, bool) {
	t.Helper()
	mfs, err := m.reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != "toolgate_backend_restarts_total" {
			continue
		}
		for _, s := range mf.GetMetric() {
			for _, l := range s.GetLabel() {
				if l.GetName() == "server" && l.GetValue() == server {
					return s.GetCounter().GetValue(), true
				}
			}
		}
	}
	return 0, false
}

// TestBackendRestartsNeverGoBack: a server's restarts counter (a real
// pool's) keeps its count when the server is disabled and enabled again
// (removed from the pool and added back) and when a config reload restarts
// it with a changed entry: a Prometheus counter must not go back while the
// process lives.
func TestBackendRestartsNeverGoBack(t *testing.T) {
	srv := backendtest.NewHTTPServer(t, config.TypeHTTP, "")
	entry := config.Server{Name: "remote", Type: config.TypeHTTP, URL: srv.Endpoint}
	p := backend.New([]config.Server{entry}, &backend.Options{ConnectTimeout: 30 * time.Second, CallTimeout: 30 * time.Second, RestartDelays: []time.Duration{}})
	t.Cleanup(func() { p.Close() })
	p.Start(context.Background())
	m := New(&Options{Backends: p})
	want := func(what string, n float64) {
		t.Helper()
		testenv.Eventually(t, what, func() bool { v, ok := restartsOf(t, m, "remote"); return ok && v == n })
	}
	for range 2 {
		if err := p.Restart("remote"); err != nil {
			t.Fatal(err)
		}
	}
	want("2 restarts on request", 2)

	// Disabled at run time: the pool runs it no more, and the series goes.
	p.Reconfigure(context.Background(), nil)
	if v, ok := restartsOf(t, m, "remote"); ok {
		t.Errorf("a removed server still has toolgate_backend_restarts_total %v", v)
	}
	if n := p.PastRestarts("remote"); n != 2 { // what list_servers shows of it
		t.Errorf("PastRestarts of the disabled server = %d, want 2", n)
	}
	// Enabled again: it counts on from 2, not from 0.
	if d := p.Reconfigure(context.Background(), []config.Server{entry}); !slices.Equal(d.Added, []string{"remote"}) {
		t.Fatalf("Diff %+v, want remote added", d)
	}
	if v, _ := restartsOf(t, m, "remote"); v != 2 || p.PastRestarts("remote") != 0 {
		t.Errorf("enabled again: %v restarts (past %d), want the 2 it had (past 0)", v, p.PastRestarts("remote"))
	}
	// A reload that changes the entry replaces the backend: same count.
	changed := entry
	changed.Headers = map[string]string{"X-Reloaded": "1"}
	if d := p.Reconfigure(context.Background(), []config.Server{changed}); !slices.Equal(d.Changed, []string{"remote"}) {
		t.Fatalf("Diff %+v, want remote changed", d)
	}
	if v, _ := restartsOf(t, m, "remote"); v != 2 {
		t.Errorf("after a reload that changed its entry: %v restarts, want the 2 it had", v)
	}
	if err := p.Restart("remote"); err != nil {
		t.Fatal(err)
	}
	want("one more restart", 3)
}

// connect serves a gateway over m's searcher and caller to an in-memory
// client.
func connect(t *testing.T, m *Metrics, cat *fakeCatalog, c gateway.Caller) *mcp.ClientSession {
	t.Helper()
	gw := gateway.New(m.Searcher(cat), m.Caller(c), nil)
	ct, st := mcp.NewInMemoryTransports()
	ctx := context.Background()
	ss, err := gw.Server().Connect(ctx, st, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ss.Close() })
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "t"}, nil).Connect(ctx, ct, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs
}

// call calls the gateway's tool name with args and returns its text.
func call(t *testing.T, cs *mcp.ClientSession, name string, args map[string]any) string {
	t.Helper()
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		t.Fatalf("%s %v: %v", name, args, err)
	}
	return mcptext.Text(res)
}

// TestExecuteUnknownToolIsNoSearch: the search execute_tool runs for the
// names an unknown one may have meant is not a search of the metrics; a
// search_tools call is.
func TestExecuteUnknownToolIsNoSearch(t *testing.T) {
	m := newTest()
	cs := connect(t, m, &fakeCatalog{tools}, callerFunc(func(string, string) (*mcp.CallToolResult, error) { return &mcp.CallToolResult{}, nil }))
	if txt := call(t, cs, gateway.ExecuteToolName, map[string]any{"name": "memory__read_grap"}); !strings.Contains(txt, "unknown tool") {
		t.Fatalf("execute_tool of an unknown name answered %q", txt)
	}
	for _, name := range []string{"toolgate_search_duration_seconds", "toolgate_search_results"} {
		if got := histCount(t, m, name, ""); got != 0 {
			t.Errorf("%s: %d after execute_tool of an unknown name, want 0", name, got)
		}
	}
	if v := testutil.ToFloat64(m.searchNoMatch); v != 0 {
		t.Errorf("toolgate_search_nomatch_total %v after execute_tool of an unknown name, want 0", v)
	}
	call(t, cs, gateway.SearchToolName, map[string]any{"query": "read the graph"})
	for _, name := range []string{"toolgate_search_duration_seconds", "toolgate_search_results"} {
		if got := histCount(t, m, name, ""); got != 1 {
			t.Errorf("%s: %d after one search_tools, want 1", name, got)
		}
	}
}

// TestMadeUpToolNamesMakeNoSeries: a client calling execute_tool with
// thousands of names the catalog lacks adds no series of tool calls; a
// call of a catalogued tool adds its own.
func TestMadeUpToolNamesMakeNoSeries(t *testing.T) {
	m := newTest()
	cs := connect(t, m, &fakeCatalog{tools}, callerFunc(func(string, string) (*mcp.CallToolResult, error) { return &mcp.CallToolResult{}, nil }))
	for i := range 2000 {
		name := []string{"memory__made_up_%d", "nosuch%d__x", "made-up-%d"}[i%3]
		call(t, cs, gateway.ExecuteToolName, map[string]any{"name": fmt.Sprintf(name, i)})
	}
	if n := testutil.CollectAndCount(m.calls); n != 0 {
		t.Errorf("%d series of tool calls after 2000 made-up names, want none", n)
	}
	call(t, cs, gateway.ExecuteToolName, map[string]any{"name": "memory__read_graph"})
	want := `
# HELP toolgate_tool_calls_total Tool calls dispatched to backends, by server, tool and outcome (ok, error, timeout, unavailable, denied).
# TYPE toolgate_tool_calls_total counter
toolgate_tool_calls_total{outcome="ok",server="memory",tool="read_graph"} 1
`
	if err := testutil.CollectAndCompare(m.calls, strings.NewReader(want)); err != nil {
		t.Error(err)
	}
}

// serversOf lists the server label values of every series the registry
// has now, sorted, by metric.
func serversOf(t *testing.T, m *Metrics) map[string][]string {
	t.Helper()
	mfs, err := m.reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string][]string{}
	for _, mf := range mfs {
		for _, s := range mf.GetMetric() {
			for _, l := range s.GetLabel() {
				if l.GetName() == "server" && !slices.Contains(out[mf.GetName()], l.GetValue()) {
					out[mf.GetName()] = append(out[mf.GetName()], l.GetValue())
				}
			}
		}
		slices.Sort(out[mf.GetName()])
	}
	return out
}

// TestForgetRemovedServers: a config reload that removes a server (a real
// pool's Reconfigure) takes every series of it from /metrics at the
// re-index (Forget): call counts, names outside the catalog included, and
// call durations; a server disabled at run time keeps its series, and one
// removed and added again counts its restarts on from where they were.
func TestForgetRemovedServers(t *testing.T) {
	var entries []config.Server
	for _, name := range []string{"alpha", "beta", "gamma"} {
		srv := backendtest.NewHTTPServer(t, config.TypeHTTP, "")
		entries = append(entries, config.Server{Name: name, Type: config.TypeHTTP, URL: srv.Endpoint})
	}
	p := backend.New(entries, &backend.Options{ConnectTimeout: 30 * time.Second, CallTimeout: 30 * time.Second, RestartDelays: []time.Duration{}})
	t.Cleanup(func() { p.Close() })
	p.Start(context.Background())
	cat := &fakeCatalog{[]catalog.Tool{{Server: "alpha", Name: "echo"}, {Server: "beta", Name: "echo"}}} // gamma's tools not indexed
	loop := &disabledLoop{per: map[string]int{}}
	m := New(&Options{Catalog: cat, Backends: p, Loop: loop})
	c := m.Caller(p)
	for _, call := range [][2]string{{"alpha", "echo"}, {"beta", "echo"}, {"beta", "made_up"}, {"gamma", "made_up"}} {
		_, _ = c.CallTool(context.Background(), call[0], call[1], map[string]any{"text": "x"})
	}
	if err := p.Restart("beta"); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, "beta's restart counted", func() bool { v, _ := restartsOf(t, m, "beta"); return v == 1 })
	all := []string{"alpha", "beta", "gamma"}
	for _, name := range []string{"toolgate_tool_calls_total", "toolgate_tool_call_duration_seconds"} {
		if got := serversOf(t, m)[name]; !slices.Equal(got, all) {
			t.Fatalf("%s before the reload: servers %v, want %v", name, got, all)
		}
	}

	// The reload removes beta and gamma is disabled at run time: the pool
	// runs alpha alone, the catalog holds alpha's tools, and the re-index
	// calls Forget.
	p.Reconfigure(context.Background(), entries[:1])
	cat.tools = cat.tools[:1]
	loop.disabled = []string{"gamma"}
	m.Forget()
	for name, servers := range serversOf(t, m) {
		if slices.Contains(servers, "beta") {
			t.Errorf("%s keeps the removed server's series: servers %v", name, servers)
		}
	}
	for _, name := range []string{"toolgate_tool_calls_total", "toolgate_tool_call_duration_seconds"} {
		if got := serversOf(t, m)[name]; !slices.Equal(got, []string{"alpha", "gamma"}) {
			t.Errorf("%s after the reload: servers %v, want alpha and the disabled gamma", name, got)
		}
	}

	// beta comes back: its restarts count on, its calls from none.
	p.Reconfigure(context.Background(), entries[:2])
	if v, ok := restartsOf(t, m, "beta"); !ok || v != 1 {
		t.Errorf("beta added again: toolgate_backend_restarts_total %v (series: %v), want the 1 it had", v, ok)
	}
	if got := serversOf(t, m)["toolgate_tool_calls_total"]; slices.Contains(got, "beta") {
		t.Errorf("beta added again has call series before any call: %v", got)
	}
}

// statsLoop is a Loop whose counters are these Stats.
type statsLoop live.Stats

func (f *statsLoop) Stats() live.Stats                  { return live.Stats(*f) }
func (*statsLoop) CatalogToolsByServer() map[string]int { return map[string]int{} }

// TestReloadAndIndexFailures: a rejected config reload and a failed
// re-index leave the gateway serving what it served before, which only
// GET /status and the log said; an alert on /metrics now sees both.
func TestReloadAndIndexFailures(t *testing.T) {
	st := &statsLoop{CatalogGeneration: 1}
	m := New(&Options{Loop: st})
	names := []string{"toolgate_config_reloads_total", "toolgate_config_last_reload_successful", "toolgate_index_last_error_timestamp_seconds"}
	check := func(when, want string) {
		t.Helper()
		if err := testutil.GatherAndCompare(m.reg, strings.NewReader(want), names...); err != nil {
			t.Errorf("%s: %v", when, err)
		}
	}
	const head = `
# HELP toolgate_config_last_reload_successful 0 when the latest config reload was rejected (the config in effect is the one before it: GET /status's lastReload.error says why), else 1.
# TYPE toolgate_config_last_reload_successful gauge
toolgate_config_last_reload_successful %d
# HELP toolgate_config_reloads_total Config reloads since start, applied or rejected (GET /status's reloadGeneration).
# TYPE toolgate_config_reloads_total counter
toolgate_config_reloads_total %d
`
	check("no reload yet", fmt.Sprintf(head, 1, 0))

	at := time.Unix(1796000000, 0)
	st.ReloadGeneration, st.LastReload = 1, &live.Reload{At: at, Trigger: "file changed", Error: "config.json:2:1: invalid JSON"}
	st.LastReloadError, st.LastReloadErrorAt = st.LastReload.Error, at
	st.LastIndexError, st.LastIndexErrorAt = "no space left on device", at.Add(time.Minute)
	check("a reload rejected, a re-index failed", fmt.Sprintf(head, 0, 1)+`
# HELP toolgate_index_last_error_timestamp_seconds When the latest re-index failed (the index before it is still served: GET /status's lastIndexError says why), as a Unix time; absent until one fails.
# TYPE toolgate_index_last_error_timestamp_seconds gauge
toolgate_index_last_error_timestamp_seconds 1.79600006e+09
`)
	// The file fixed: the next reload applies. The rejection is still in
	// lastReloadError, but the config in effect is the file's again.
	st.ReloadGeneration, st.LastReload = 2, &live.Reload{At: at.Add(2 * time.Minute), Trigger: "file changed"}
	st.LastIndexError, st.LastIndexErrorAt = "", time.Time{}
	check("the file fixed", fmt.Sprintf(head, 1, 2))
}

// TestSearchDurationBuckets: a search slower than a second (a loaded
// gateway of 50,000 tools had a p99 of 1.6 s, a search that waits for a
// cold start's index up to 10 s) lands in a bucket of its own, so that
// histogram_quantile tells it; the buckets stopped at 1 s, and such a p99
// read as 1 s. Every earlier bound is kept: dashboards and recording rules
// that name one (le="0.064") go on.
func TestSearchDurationBuckets(t *testing.T) {
	m := New(nil)
	m.searchDuration.WithLabelValues("hybrid").Observe(0)
	mfs, err := m.reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var bounds []float64
	for _, mf := range mfs {
		if mf.GetName() == "toolgate_search_duration_seconds" {
			for _, b := range mf.GetMetric()[0].GetHistogram().GetBucket() {
				bounds = append(bounds, b.GetUpperBound())
			}
		}
	}
	for _, was := range prometheus.ExponentialBuckets(0.0005, 2, 12) {
		if !slices.Contains(bounds, was) {
			t.Errorf("the bucket le=%g is gone: %v", was, bounds)
		}
	}
	for _, took := range []float64{1.6, 9.5} {
		// The bucket that holds it is at most twice as wide as it.
		i := slices.IndexFunc(bounds, func(b float64) bool { return b >= took })
		if i < 0 || bounds[i] > 2*took {
			t.Errorf("a search of %gs lands in no bucket of its own (buckets %v)", took, bounds)
		}
	}
}

// TestTrimmedResultsCounted: each result execute_tool trims
// (gateway.Options.Trimmed) counts, by server and tool, with the bytes
// left out by server; a tool outside the catalog counts as unknown.
func TestTrimmedResultsCounted(t *testing.T) {
	m := newTest()
	m.Trimmed(gateway.Trimmed{Server: "memory", Tool: "read_graph", Limit: 100_000, Bytes: 5_000_000, Cut: 4_900_000})
	m.Trimmed(gateway.Trimmed{Server: "memory", Tool: "read_graph", Limit: 100_000, Bytes: 200_000, Cut: 100_000})
	m.Trimmed(gateway.Trimmed{Server: "memory", Tool: "made_up", Limit: 100_000, Bytes: 100_001, Cut: 1})
	want := `
# HELP toolgate_tool_result_trimmed_bytes_total Bytes of text left out of execute_tool results over maxResultBytes, by server.
# TYPE toolgate_tool_result_trimmed_bytes_total counter
toolgate_tool_result_trimmed_bytes_total{server="memory"} 5.000001e+06
# HELP toolgate_tool_results_trimmed_total execute_tool results over maxResultBytes, trimmed before they reached the client, by server and tool.
# TYPE toolgate_tool_results_trimmed_total counter
toolgate_tool_results_trimmed_total{server="memory",tool="read_graph"} 2
toolgate_tool_results_trimmed_total{server="memory",tool="unknown"} 1
`
	if err := testutil.GatherAndCompare(m.reg, strings.NewReader(want), "toolgate_tool_results_trimmed_total", "toolgate_tool_result_trimmed_bytes_total"); err != nil {
		t.Error(err)
	}
}
