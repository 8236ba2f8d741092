package gateway

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/toolgate/toolgate/gateway/backend"
	"github.com/toolgate/toolgate/gateway/config"
	"github.com/toolgate/toolgate/gateway/keys"
	"github.com/toolgate/toolgate/gateway/live"
	"github.com/toolgate/toolgate/gateway/policy"
	"github.com/toolgate/toolgate/gateway/quarantine"
	"github.com/toolgate/toolgate/index/catalog"
	"github.com/toolgate/toolgate/internal/storage"
	"github.com/toolgate/toolgate/internal/testenv"
	"github.com/toolgate/toolgate/search"
)

type fakeStatus []backend.Status

func (f fakeStatus) Status() []backend.Status { return f }

func TestStatusHandler(t *testing.T) {
	t0 := time.Date(2026, 11, 30, 6, 0, 0, 0, time.UTC)
	now := t0.Add(90 * time.Minute)
	src := fakeStatus{
		{Name: "memory", Transport: "stdio", State: backend.StateUp, Tools: 9, Since: now.Add(-250 * time.Second), PID: 4242, Protocol: "2026-07-28", Restarts: 1, LastErr: "backend \"memory\": process exited with signal: killed"},
		{Name: "remote", Transport: "http", State: backend.StateDown, Tools: 3, Since: now.Add(-time.Minute), Err: "connection refused", LastErr: "connection refused", Restarts: 3},
		{Name: "lazy", Transport: "stdio", State: backend.StateIdle, Since: t0},
	}
	h := StatusHandler(src, &StatusOptions{Version: "1.2.3", Started: t0, Now: func() time.Time { return now }})
	srv := httptest.NewServer(h)
	defer srv.Close()

	t.Run("GET", func(t *testing.T) {
		resp, err := http.Get(srv.URL + "/status")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		if resp.StatusCode != 200 || !strings.HasPrefix(resp.Header.Get("Content-Type"), "application/json") {
			t.Fatalf("status %d, content type %q", resp.StatusCode, resp.Header.Get("Content-Type"))
		}
		var raw map[string]any
		var rep StatusReport
		body := new(strings.Builder)
		if _, err := io.Copy(body, resp.Body); err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal([]byte(body.String()), &raw); err != nil {
			t.Fatalf("not JSON: %v\n%s", err, body)
		}
		if err := json.Unmarshal([]byte(body.String()), &rep); err != nil {
			t.Fatal(err)
		}
		want := StatusReport{
			Version: "1.2.3", Started: t0, Uptime: "1h30m0s", UptimeSeconds: 5400, Up: 1, Total: 3,
			Backends: []BackendStatus{
				{Status: src[0], For: "4m10s", ForSeconds: 250},
				{Status: src[1], For: "1m0s", ForSeconds: 60},
				{Status: src[2], For: "1h30m0s", ForSeconds: 5400},
			},
		}
		if diff := cmp.Diff(want, rep); diff != "" {
			t.Errorf("report (-want +got):\n%s", diff)
		}
		// The JSON keys clients script against.
		b0 := raw["backends"].([]any)[0].(map[string]any)
		for _, k := range []string{"name", "transport", "state", "tools", "inFlight", "restarts", "lastError", "since", "for", "pid", "protocol"} {
			if _, ok := b0[k]; !ok {
				t.Errorf("backend JSON lacks %q: %v", k, b0)
			}
		}
		for _, k := range []string{"version", "uptime", "uptimeSeconds", "started", "up", "total"} {
			if _, ok := raw[k]; !ok {
				t.Errorf("report JSON lacks %q", k)
			}
		}
	})
	t.Run("POST is refused", func(t *testing.T) {
		resp, err := http.Post(srv.URL+"/status", "application/json", strings.NewReader("{}"))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusMethodNotAllowed {
			t.Errorf("POST /status = %d, want 405", resp.StatusCode)
		}
	})
}

type fakeStats live.Stats

func (f fakeStats) Stats() live.Stats { return live.Stats(f) }

// With the runtime loop as a source, its counters sit beside the backends,
// under the camelCase keys tests and scripts wait on.
func TestStatusWithLoopStats(t *testing.T) {
	at := time.Date(2026, 11, 30, 6, 0, 0, 0, time.UTC)
	loop := fakeStats{CatalogGeneration: 3, CatalogTools: 36, ReloadGeneration: 2,
		LastReload:      &live.Reload{At: at, Trigger: "SIGHUP", Unchanged: []string{"a"}},
		LastReloadError: "config x: invalid JSON", LastReloadErrorAt: at.Add(-time.Minute)}
	h := StatusHandler(fakeStatus{{Name: "a", State: backend.StateUp}}, &StatusOptions{Loop: loop})
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest("GET", "/status", nil))
	var raw map[string]any
	if err := json.Unmarshal(rec.Body.Bytes(), &raw); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"catalogGeneration", "catalogTools", "reloadGeneration", "lastReload", "lastReloadError", "lastReloadErrorAt", "backends"} {
		if _, ok := raw[k]; !ok {
			t.Errorf("report JSON lacks %q:\n%s", k, rec.Body)
		}
	}
	var rep StatusReport
	if err := json.Unmarshal(rec.Body.Bytes(), &rep); err != nil {
		t.Fatal(err)
	}
	if rep.Stats == nil || !cmp.Equal(live.Stats(loop), *rep.Stats) {
		t.Errorf("stats read back (-want +got):\n%s", cmp.Diff(live.Stats(loop), rep.Stats))
	}

	// Without a loop the report has no loop keys.
	rec = httptest.NewRecorder()
	StatusHandler(fakeStatus{}, nil).ServeHTTP(rec, httptest.NewRequest("GET", "/status", nil))
	if strings.Contains(rec.Body.String(), "Generation") {
		t.Errorf("loop keys without a loop:\n%s", rec.Body)
	}
}

// The "search" section says how searches rank, and "learning" what they
// learned from, under the keys scripts read.
func TestStatusSearch(t *testing.T) {
	st := &search.State{Mode: search.ModeBM25, Configured: search.ModeHybrid, BM25Only: true, Reason: "model file not found: install it with toolgate models fetch",
		Running: 2, Waiting: 3, Slots: 2}
	rec := httptest.NewRecorder()
	learning := &LearningStatus{Holder: "pid 4242 (stdio)", Pairs: 3, Tools: 2}
	StatusHandler(fakeStatus{}, &StatusOptions{Search: func() *search.State { return st }, Learning: func() *LearningStatus { return learning }}).
		ServeHTTP(rec, httptest.NewRequest("GET", "/status", nil))
	var raw struct {
		Search   map[string]any `json:"search"`
		Learning map[string]any `json:"learning"`
	}
	if err := json.Unmarshal(rec.Body.Bytes(), &raw); err != nil {
		t.Fatal(err)
	}
	want := map[string]any{"mode": "bm25", "configuredMode": "hybrid", "bm25Only": true, "reason": st.Reason,
		"running": 2.0, "waiting": 3.0, "slots": 2.0}
	if diff := cmp.Diff(want, raw.Search); diff != "" {
		t.Errorf("search section (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(map[string]any{"holder": "pid 4242 (stdio)", "pairs": 3.0, "tools": 2.0}, raw.Learning); diff != "" {
		t.Errorf("learning section (-want +got):\n%s", diff)
	}
}

// Mounted through HTTPOptions.Extra it sits beside /mcp behind the same guards.
func TestStatusMountedBesideMCP(t *testing.T) {
	g, _ := newTestGateway(t, nil)
	h := g.HTTPHandler(&HTTPOptions{Extra: map[string]http.Handler{
		"GET /status": StatusHandler(fakeStatus{{Name: "a", State: backend.StateUp}}, nil),
	}})
	for _, tt := range []struct {
		host string
		want int
	}{{"127.0.0.1:8931", 200}, {"evil.example:8931", 403}} {
		req := httptest.NewRequest("GET", "http://"+tt.host+"/status", nil)
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if rec.Code != tt.want {
			t.Errorf("GET /status with Host %s = %d, want %d", tt.host, rec.Code, tt.want)
		}
		if tt.want == 200 && !strings.Contains(rec.Body.String(), `"name": "a"`) {
			t.Errorf("body = %s", rec.Body)
		}
	}
}

// GET /status over a real pool of backend processes, one of which dies and
// stays down (no restarts configured).
func TestStatusOfRealPool(t *testing.T) {
	rg := newRealGateway(t, []config.Server{fakeServer(t, "ok", "normal"), fakeServer(t, "doomed", "crash-mid-call")},
		&backend.Options{RestartDelays: []time.Duration{}})
	cs := connect(t, rg.g)
	if res := execute(context.Background(), t, cs, "doomed__crash", nil); !res.IsError {
		t.Fatalf("crash: %q", text(res))
	}
	testenv.Eventually(t, "doomed is down", func() bool { return rg.status(t, "doomed").State == backend.StateDown })

	h := rg.g.HTTPHandler(&HTTPOptions{Extra: map[string]http.Handler{
		"GET /status": StatusHandler(rg.pool, &StatusOptions{Version: "test"}),
	}})
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest("GET", "http://127.0.0.1/status", nil))
	var rep StatusReport
	if err := json.Unmarshal(rec.Body.Bytes(), &rep); err != nil || rec.Code != 200 {
		t.Fatalf("GET /status = %d %v\n%s", rec.Code, err, rec.Body)
	}
	if rep.Total != 2 || rep.Up != 1 || rep.Version != "test" {
		t.Errorf("report = %+v", rep)
	}
	got := map[string]BackendStatus{}
	for _, b := range rep.Backends {
		got[b.Name] = b
	}
	if ok := got["ok"]; ok.State != backend.StateUp || ok.PID != rg.status(t, "ok").PID || ok.PID == 0 || ok.Tools < 3 || ok.Protocol == "" {
		t.Errorf("ok = %+v", ok)
	}
	if d := got["doomed"]; d.State != backend.StateDown || d.PID != 0 || !strings.Contains(d.Err, "exit status 2") || d.Tools == 0 {
		t.Errorf("doomed = %+v (want down with its exit status, tools kept)", d)
	}
}

// TestScopeReport: for an API key that is not admin, the report keeps the
// servers the key may manage and their counts, the runtime lists and the
// quarantined tools of those servers, counts only the tools its scope
// lets it see in each server's tools and in catalogTools, and hides the reload and index errors (they
// may name any server) and the backends' errors (they may hold paths on
// the gateway's machine: a command line, stderr lines). Stdio, an admin key and the HTTP
// front without keys see it whole.
func TestScopeReport(t *testing.T) {
	tools := &fakeSearcher{tools: []catalog.Tool{{Server: "mem", Name: "read"}, {Server: "mem", Name: "write"}, {Server: "mem2", Name: "read"}, {Server: "secret", Name: "leak"}}}
	notAfter := time.Date(2027, 1, 1, 0, 0, 0, 0, time.UTC)
	pol := policy.NewSet(keys.NewScope(func() *policy.Profiles { return policy.NewProfiles(nil) }, nil))
	full := func() StatusReport {
		return StatusReport{
			Backends: []BackendStatus{
				{Status: backend.Status{Name: "mem", State: backend.StateUp, Tools: 2, TLSCert: "/etc/secret/mem.pem", TLSCertNotAfter: &notAfter, LastErr: `backend "mem": command "/opt/secret/mem-bin" exited`}},
				{Status: backend.Status{Name: "secret", State: backend.StateUp, Tools: 1, Err: `backend "secret": token rejected`}},
				{Status: backend.Status{Name: "mem2", State: backend.StateUp, Tools: 1, TLSCert: "/etc/secret/mem2.pem", TLSCertError: "cannot read /etc/secret/mem2.pem"}},
			},
			Up: 3, Total: 3,
			Stats: &live.Stats{
				CatalogTools: 4,
				Disabled:     []string{"mem", "secret"},
				LastReload: &live.Reload{Trigger: "SIGHUP", Error: `server "secret": bad url`, Changed: []string{"mem", "secret"}, Removed: []string{"gone"},
					Fields: map[string][]string{"mem": {"args"}, "secret": {"url"}}},
				LastReloadError: `server "secret": bad url`,
				LastIndexError:  "embedding secret__leak: out of memory",
			},
			Security: &SecurityStatus{Quarantined: []string{"mem__write", "secret__leak"},
				PinsFault: &quarantine.Fault{File: "/etc/secret/data/pins.json", Error: "/etc/secret/data/pins.json:3: invalid JSON", Since: notAfter, Fix: "mend or remove /etc/secret/data/pins.json"}},
			SchemaFlaws: &SchemaFlaws{Count: 3, Tools: []catalog.ToolFlaw{
				{Tool: "mem2__read", Flaw: `"type" is "objetc"`}, {Tool: "mem__write", Flaw: `"type" is "objetc"`}, {Tool: "secret__leak", Flaw: `"type" is "objetc"`}},
				HugeSchemas: &FlawList{Count: 2, Tools: []catalog.ToolFlaw{{Tool: "mem2__read", Flaw: "40 KB"}, {Tool: "secret__leak", Flaw: "40 KB"}}},
				Names:       &FlawList{Count: 1, Tools: []catalog.ToolFlaw{{Tool: "mem__write", Flaw: "' ' is not among"}}}},
			Process: &ProcessInfo{PID: 7, Transport: "http", Addr: "127.0.0.1:8931", Config: []string{"/etc/secret/toolgate.json"},
				TLS: true, TLSCert: "/etc/secret/gw.pem", TLSNotAfter: &notAfter, TLSError: "cannot read /etc/secret/gw.pem"},
			// The data folder, the model's folder and the learned pairs'
			// store name paths on the gateway's machine: a key that was not
			// admin read them all (a probe, 2026-12-07).
			Storage: &storage.Report{DataDir: "/etc/secret/data", Writable: false, FreeBytes: 10,
				Error: "open /etc/secret/data/audit/audit.jsonl: read-only file system", Fix: "remount /etc/secret/data read-write",
				Since: notAfter, LastError: "audit log: open /etc/secret/data/audit/audit.jsonl: read-only file system", LastErrorAt: notAfter,
				Writers: []storage.WriterReport{{Name: "audit log", Error: "open /etc/secret/data/audit/audit.jsonl: read-only file system",
					Fix: "chmod u+w /etc/secret/data/audit", Since: notAfter, Failures: 2, Degraded: "records are counted as lost"}},
				Open: "/etc/secret/data (mode 0777)", OpenFix: "chmod 700 /etc/secret/data"},
			Search: &search.State{Mode: search.ModeBM25, Configured: search.ModeHybrid, BM25Only: true, Slots: 2,
				Reason: "model file not found at /etc/secret/models/all-MiniLM-L6-v2/model.onnx: install it with toolgate models fetch --dir /etc/secret/models"},
			Learning: &LearningStatus{Holder: "pid 42 (stdio)", Pairs: 3, Tools: 2, Error: "open /etc/secret/data/learn: permission denied"},
		}
	}
	key := &policy.Caller{Transport: policy.TransportHTTP, Key: &policy.Key{Name: "mem-ops", Allow: []string{"mem__read", "mem2__*"}}}
	rep := full()
	// The lists come from the runtime loop and the quarantine: narrowed
	// in copies, never where they came from.
	stats, sec, proc, flaws, stor, srch, learn := *rep.Stats, *rep.Security, rep.Process, *rep.SchemaFlaws, rep.Storage, rep.Search, rep.Learning
	ScopeReport(&rep, key, pol, tools)
	if orig := full(); !cmp.Equal(*orig.Stats, stats) || !cmp.Equal(*orig.Security, sec) || !cmp.Equal(*orig.Process, *proc) || !cmp.Equal(*orig.SchemaFlaws, flaws) ||
		!cmp.Equal(*orig.Storage, *stor) || !cmp.Equal(*orig.Search, *srch) || !cmp.Equal(*orig.Learning, *learn) {
		t.Errorf("ScopeReport changed the lists it was given: %+v %+v %+v %+v %+v %+v %+v", stats, sec, proc, flaws, *stor, *srch, *learn)
	}
	want := StatusReport{
		Backends: []BackendStatus{
			// mem's tools: the one the key sees of the 2 (the console's
			// backends table showed 2).
			{Status: backend.Status{Name: "mem", State: backend.StateUp, Tools: 1, TLSCertNotAfter: &notAfter, LastErr: HiddenFromKey}},
			{Status: backend.Status{Name: "mem2", State: backend.StateUp, Tools: 1, TLSCertError: HiddenFromKey}},
		},
		Up: 2, Total: 2,
		Stats: &live.Stats{
			// mem is disabled: its tool the key sees is held back, not ranked.
			CatalogTools:    1,
			DisabledTools:   1,
			Disabled:        []string{"mem"},
			LastReload:      &live.Reload{Trigger: "SIGHUP", Error: HiddenFromKey, Changed: []string{"mem"}, Removed: []string{}, Fields: map[string][]string{"mem": {"args"}}},
			LastReloadError: HiddenFromKey,
			LastIndexError:  HiddenFromKey,
		},
		Security: &SecurityStatus{Quarantined: []string{"mem__write"},
			PinsFault: &quarantine.Fault{Error: HiddenFromKey, Since: notAfter, Fix: HiddenFromKey}},
		// mem__write is a tool the key does not see (its server it may).
		SchemaFlaws: &SchemaFlaws{Count: 1, Tools: []catalog.ToolFlaw{{Tool: "mem2__read", Flaw: `"type" is "objetc"`}},
			HugeSchemas: &FlawList{Count: 1, Tools: []catalog.ToolFlaw{{Tool: "mem2__read", Flaw: "40 KB"}}}},
		Process: &ProcessInfo{PID: 7, Transport: "http", Addr: "127.0.0.1:8931", TLS: true, TLSNotAfter: &notAfter, TLSError: HiddenFromKey},
		// The state and the counts kept, the paths and what was said
		// with them hidden.
		Storage: &storage.Report{Writable: false, FreeBytes: 10, Error: HiddenFromKey, Fix: HiddenFromKey, Since: notAfter,
			LastError: HiddenFromKey, LastErrorAt: notAfter,
			Writers: []storage.WriterReport{{Name: "audit log", Error: HiddenFromKey, Fix: HiddenFromKey, Since: notAfter, Failures: 2, Degraded: "records are counted as lost"}},
			Open:    HiddenFromKey, OpenFix: HiddenFromKey},
		Search:   &search.State{Mode: search.ModeBM25, Configured: search.ModeHybrid, BM25Only: true, Slots: 2, Reason: HiddenFromKey},
		Learning: &LearningStatus{Holder: "pid 42 (stdio)", Pairs: 3, Tools: 2, Error: HiddenFromKey},
	}
	if diff := cmp.Diff(want, rep); diff != "" {
		t.Errorf("as the mem-ops key (-want +got):\n%s", diff)
	}
	if b, _ := json.Marshal(rep); strings.Contains(string(b), "secret") || strings.Contains(string(b), "gone") {
		t.Errorf("the scoped report names a server outside the key's scope: %s", b)
	}
	for name, c := range map[string]*policy.Caller{
		"stdio":     {Transport: policy.TransportStdio},
		"admin key": {Transport: policy.TransportHTTP, Key: &policy.Key{Name: "ops", Admin: true}},
		"no keys":   {Transport: policy.TransportHTTP},
		"none":      nil,
	} {
		rep := full()
		ScopeReport(&rep, c, pol, tools)
		if diff := cmp.Diff(full(), rep); diff != "" {
			t.Errorf("%s sees a narrowed report (-want +got):\n%s", name, diff)
		}
	}
}

// TestReportQuarantinedOfConfig: the report lists the held tools of the
// servers in the gateway's config only. The pins file is the data
// folder's (every gateway on it shares it) and keeps a tool held after its
// server left the config: a poisoned server removed rather than approved
// read "quarantined: calc__add" in `toolgate status` and the console for
// as long as the gateway ran.
func TestReportQuarantinedOfConfig(t *testing.T) {
	held := []string{"calc__add", "mem__write"}
	o := &StatusOptions{
		Security: func() *SecurityStatus { return &SecurityStatus{Quarantined: held} },
		Policy:   policy.NewSet(policy.NewConfigured([]string{"mem", config.BuiltinServer})),
	}
	rep := o.Report(fakeStatus{{Name: "mem", State: backend.StateUp}}, nil)
	if rep.Security == nil || !slices.Equal(rep.Security.Quarantined, []string{"mem__write"}) {
		t.Errorf("quarantined = %+v, want [mem__write] (calc is not in the config)", rep.Security)
	}
	if !slices.Equal(held, []string{"calc__add", "mem__write"}) {
		t.Errorf("the report changed the list it was given: %v", held)
	}
}

// TestReportSchemaFlaws: the report lists the tools whose input schema
// the gateway cannot read, which it runs unchecked (only its log and
// toolgate index said so): the first MaxSchemaFlawsShown by ID, with the
// count of all; none of a server disabled at run time (not served); and
// no section before the catalog is checked (a warm start before its
// servers list), where an empty one would say "none".
func TestReportSchemaFlaws(t *testing.T) {
	var all []catalog.ToolFlaw
	for i := range MaxSchemaFlawsShown + 5 {
		all = append(all, catalog.ToolFlaw{Tool: fmt.Sprintf("acme__t%02d", i), Flaw: `"type" is "objetc"`})
	}
	all = append(all, catalog.ToolFlaw{Tool: "off__t", Flaw: `"properties" must be an object`})
	checked := true
	// Schemas over 32 KB and names MCP does not recommend: the same kind
	// of list, absent when there is none.
	huge := []catalog.ToolFlaw{{Tool: "acme__big", Flaw: "40 KB of compact JSON"}, {Tool: "off__big", Flaw: "40 KB of compact JSON"}}
	names := []catalog.ToolFlaw{{Tool: "off__a b", Flaw: "' ' is not among"}}
	o := &StatusOptions{
		Loop:        fakeStats{Disabled: []string{"off"}},
		SchemaFlaws: func() ([]catalog.ToolFlaw, bool) { return all, checked },
		ShownFlaws:  func() ([]catalog.ToolFlaw, []catalog.ToolFlaw) { return huge, names },
	}
	rep := o.Report(fakeStatus{{Name: "acme", State: backend.StateUp}}, nil)
	if f := rep.SchemaFlaws; f == nil || f.Count != MaxSchemaFlawsShown+5 || !slices.Equal(f.Tools, all[:MaxSchemaFlawsShown]) {
		t.Errorf("schemaFlaws = %+v, want the first %d of the %d acme tools", f, MaxSchemaFlawsShown, MaxSchemaFlawsShown+5)
	}
	if f := rep.SchemaFlaws; f == nil || f.HugeSchemas == nil || f.HugeSchemas.Count != 1 || !slices.Equal(f.HugeSchemas.Tools, huge[:1]) || f.Names != nil {
		t.Errorf("schemaFlaws = %+v, want acme__big's schema over 32 KB and no name (off is disabled)", f)
	}
	if len(all) != MaxSchemaFlawsShown+6 || all[len(all)-1].Tool != "off__t" {
		t.Errorf("the report changed the list it was given: %v", all)
	}
	b, _ := json.Marshal(o.Report(fakeStatus{}, nil))
	if !strings.Contains(string(b), `"schemaFlaws":{"count":25,"tools":[{"tool":"acme__t00","flaw":"\"type\" is \"objetc\""}`) ||
		!strings.Contains(string(b), `"hugeSchemas":{"count":1,"tools":[{"tool":"acme__big","flaw":"40 KB of compact JSON"}]}}`) || strings.Contains(string(b), `"names"`) {
		t.Errorf("JSON: %s", b)
	}
	all = all[len(all)-1:] // the disabled server's alone
	if f := o.Report(fakeStatus{}, nil).SchemaFlaws; f == nil || f.Count != 0 || f.Tools == nil {
		t.Errorf("none served: schemaFlaws = %+v, want count 0 and an empty list", f)
	}
	checked = false
	if f := o.Report(fakeStatus{}, nil).SchemaFlaws; f != nil {
		t.Errorf("not checked yet: schemaFlaws = %+v, want none", f)
	}
}

// numberedCatalog is a catalog that numbers its versions, as live.Loop
// does, and counts the looks over it.
type numberedCatalog struct {
	fakeSearcher
	gen   uint64
	looks int
}

func (n *numberedCatalog) CatalogGeneration() uint64 { return n.gen }
func (n *numberedCatalog) IDs() []string             { n.looks++; return n.fakeSearcher.IDs() }

type backendList []backend.Status

func (b backendList) Status() []backend.Status { return b }

// A key's view of the catalog is kept between two GET /status (the
// console polls it): it looked over every tool for each (some 35 ms of CPU
// at 50,000 tools). A change of the catalog, of the key's scope or of the
// rules shows in the next report.
func TestScopedStatusKept(t *testing.T) {
	tools := &numberedCatalog{gen: 1, fakeSearcher: fakeSearcher{tools: []catalog.Tool{{Server: "mem", Name: "read"}, {Server: "mem2", Name: "read"}, {Server: "secret", Name: "leak"}}}}
	pol := policy.NewSet()
	pol.Put(keys.NewScope(pol.Profiles, nil))
	pol.PutProfiles(map[string]config.Profile{"p": {Servers: []string{"mem"}}})
	src := backendList{{Name: "mem", State: backend.StateUp}, {Name: "mem2", State: backend.StateUp}, {Name: "secret", State: backend.StateUp}}
	o := &StatusOptions{Policy: pol, Catalog: tools}
	seen := func(c *policy.Caller) map[string]int {
		t.Helper()
		out := map[string]int{}
		for _, b := range o.Report(src, c).Backends {
			out[b.Name] = b.Tools
		}
		return out
	}
	ops := &policy.Caller{Transport: policy.TransportHTTP, Key: &policy.Key{Name: "ops", Allow: []string{"mem*"}}}
	if got := seen(ops); !cmp.Equal(got, map[string]int{"mem": 1, "mem2": 1}) {
		t.Fatalf("ops sees %v", got)
	}
	// The same key again, in a request of its own.
	again := &policy.Caller{Transport: policy.TransportHTTP, Key: &policy.Key{Name: "ops", Allow: []string{"mem*"}}}
	seen(again)
	if tools.looks != 1 {
		t.Errorf("two reports of the same key looked over the catalog %d times, want once", tools.looks)
	}

	tools.tools = append(tools.tools, catalog.Tool{Server: "mem", Name: "write"})
	tools.gen++
	if got := seen(ops); !cmp.Equal(got, map[string]int{"mem": 2, "mem2": 1}) {
		t.Errorf("after a tool was added, ops sees %v", got)
	}
	wider := &policy.Caller{Transport: policy.TransportHTTP, Key: &policy.Key{Name: "ops", Allow: []string{"mem*", "secret__*"}}}
	if got := seen(wider); !cmp.Equal(got, map[string]int{"mem": 2, "mem2": 1, "secret": 1}) {
		t.Errorf("after its scope was widened, ops sees %v", got)
	}
	prof := &policy.Caller{Transport: policy.TransportHTTP, Key: &policy.Key{Name: "kg", Profile: "p"}}
	if got := seen(prof); !cmp.Equal(got, map[string]int{"mem": 2}) {
		t.Errorf("kg (profile p) sees %v", got)
	}
	pol.PutProfiles(map[string]config.Profile{"p": {Servers: []string{"mem", "mem2"}}})
	if got := seen(prof); !cmp.Equal(got, map[string]int{"mem": 2, "mem2": 1}) {
		t.Errorf("after profile p gained mem2, kg sees %v", got)
	}
	admin := &policy.Caller{Transport: policy.TransportHTTP, Key: &policy.Key{Name: "kg", Profile: "p", Admin: true}}
	if got := o.Report(src, admin); len(got.Backends) != 3 {
		t.Errorf("the key made admin sees %d servers, want 3", len(got.Backends))
	}
}
