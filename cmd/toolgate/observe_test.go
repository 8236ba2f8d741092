package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/toolgate/toolgate/gateway/backend/backendtest"
	"github.com/toolgate/toolgate/internal/telemetry/otlptest"
	"github.com/toolgate/toolgate/internal/testenv"
	"github.com/toolgate/toolgate/internal/tracemeta"
)

// bundledServers are the servers of examples/toolgate.json.
var bundledServers = []string{"everything", "filesystem", "memory"}

// withSettings sets keys of the toolgate section of the config at path.
func withSettings(t *testing.T, path string, settings map[string]any) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var cfg map[string]any
	if err := json.Unmarshal(b, &cfg); err != nil {
		t.Fatal(err)
	}
	tg, _ := cfg["toolgate"].(map[string]any)
	if tg == nil {
		tg = map[string]any{}
	}
	for k, v := range settings {
		tg[k] = v
	}
	cfg["toolgate"] = tg
	b, _ = json.MarshalIndent(cfg, "", "  ")
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
}

// serveHTTP starts `toolgate serve --http` on config cfgPath, connects a
// go-sdk client and waits until every backend is up.
func serveHTTP(t *testing.T, cfgPath string, env ...string) (string, context.Context, *mcp.ClientSession) {
	t.Helper()
	addr := freeAddr(t)
	cmd := toolgateCmd(t, t.TempDir(), "serve", "--config", cfgPath, "--http", addr)
	cmd.Env = append(cmd.Env, env...)
	cmd.Stderr = testLog(t, "toolgate: ")
	ctx, cs := connectHTTP(t, cmd, addr, 3*time.Minute)
	testenv.EventuallyWithin(t, 2*time.Minute, "every backend up", func() bool {
		rep := getStatus(t, addr)
		return rep.Total > 0 && rep.Up == rep.Total
	})
	indexServedHTTP(t, addr)
	return addr, ctx, cs
}

// httpGet fetches url with an optional Origin header.
func httpGet(t *testing.T, url, origin string) (int, string) {
	t.Helper()
	req, err := http.NewRequest("GET", url, nil)
	if err != nil {
		t.Fatal(err)
	}
	if origin != "" {
		req.Header.Set("Origin", origin)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func callTool(t *testing.T, ctx context.Context, cs *mcp.ClientSession, meta mcp.Meta, name string, args map[string]any) *mcp.CallToolResult {
	t.Helper()
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Meta: meta, Name: name, Arguments: args})
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	if res.IsError {
		t.Fatalf("%s: isError %s", name, resultText(res))
	}
	return res
}

// metricValue sums the samples of family name whose labels include want.
func metricValue(mfs map[string]*dto.MetricFamily, name string, want map[string]string) (float64, bool) {
	mf := mfs[name]
	if mf == nil {
		return 0, false
	}
	sum, found := 0.0, false
	for _, m := range mf.GetMetric() {
		labels := map[string]string{}
		for _, l := range m.GetLabel() {
			labels[l.GetName()] = l.GetValue()
		}
		match := true
		for k, v := range want {
			match = match && labels[k] == v
		}
		if !match {
			continue
		}
		found = true
		switch {
		case m.GetCounter() != nil:
			sum += m.GetCounter().GetValue()
		case m.GetGauge() != nil:
			sum += m.GetGauge().GetValue()
		case m.GetHistogram() != nil:
			sum += float64(m.GetHistogram().GetSampleCount())
		}
	}
	return sum, found
}

// TestObservability drives a real toolgate over streamable HTTP with the
// bundled servers and a fake backend that echoes its _meta, traces going to
// an OTLP/HTTP collector in this process, and checks what the issue's "done
// when" asks: the metrics after 3 searches and 2 calls on memory, the
// traces (continued from the client's traceparent, passed on to the
// backend), the console's DOM in a real headless Chromium, and 403 for a
// foreign Origin on /ui/ and /metrics.
func TestObservability(t *testing.T) {
	rcv := otlptest.New(t)
	fake := backendtest.Command(t, backendtest.ModeMeta)
	cfgPath := bundledConfig(t, map[string]any{"traced": map[string]any{"command": fake.Command, "env": fake.Env}})
	withSettings(t, cfgPath, map[string]any{"telemetry": map[string]any{"otlpEndpoint": rcv.URL}})
	// Spans are batched: send them every 50 ms rather than 5 s.
	addr, ctx, cs := serveHTTP(t, cfgPath, "OTEL_BSP_SCHEDULE_DELAY=50")
	base := "http://" + addr

	const traceID = "5bf92f3577b34da6a3ce929d0e0e4736"
	client := func(span string) mcp.Meta {
		return mcp.Meta{tracemeta.TraceParent: "00-" + traceID + "-" + span + "-01"}
	}
	searches := []string{"list the files in a directory", "store a new entity in the knowledge graph", "echo a message back"}
	for i, q := range searches {
		var meta mcp.Meta
		if i == 0 {
			meta = client("1000000000000001")
		}
		callTool(t, ctx, cs, meta, "search_tools", map[string]any{"query": q})
	}
	entity := fmt.Sprintf("Obs-%d", time.Now().UnixNano())
	callTool(t, ctx, cs, nil, "execute_tool", map[string]any{"name": "memory__create_entities",
		"arguments": map[string]any{"entities": []any{map[string]any{"name": entity, "entityType": "test", "observations": []string{"x"}}}}})
	callTool(t, ctx, cs, nil, "execute_tool", map[string]any{"name": "memory__read_graph", "arguments": map[string]any{}})
	echoed := resultText(callTool(t, ctx, cs, client("2000000000000002"), "execute_tool", map[string]any{"name": "traced__meta"}))

	t.Run("metrics", func(t *testing.T) {
		code, body := httpGet(t, base+"/metrics", "")
		if code != 200 {
			t.Fatalf("GET /metrics: %d", code)
		}
		parser := expfmt.NewTextParser(model.UTF8Validation)
		mfs, err := parser.TextToMetricFamilies(strings.NewReader(body))
		if err != nil {
			t.Fatalf("/metrics is not the Prometheus text format: %v", err)
		}
		if n, _ := metricValue(mfs, "toolgate_search_duration_seconds", map[string]string{"mode": "hybrid"}); n < 3 {
			t.Errorf("toolgate_search_duration_seconds_count{mode=hybrid} = %v, want ≥ 3", n)
		}
		if n, _ := metricValue(mfs, "toolgate_search_results", nil); n < 3 {
			t.Errorf("toolgate_search_results_count = %v, want ≥ 3", n)
		}
		if n, _ := metricValue(mfs, "toolgate_tool_calls_total", map[string]string{"server": "memory", "outcome": "ok"}); n < 2 {
			t.Errorf("toolgate_tool_calls_total{server=memory,outcome=ok} = %v, want ≥ 2", n)
		}
		if n, _ := metricValue(mfs, "toolgate_tool_calls_total", map[string]string{"server": "memory", "tool": "create_entities"}); n != 1 {
			t.Errorf("toolgate_tool_calls_total{server=memory,tool=create_entities} = %v, want 1", n)
		}
		if n, _ := metricValue(mfs, "toolgate_tool_call_duration_seconds", map[string]string{"server": "memory"}); n < 2 {
			t.Errorf("toolgate_tool_call_duration_seconds_count{server=memory} = %v, want ≥ 2", n)
		}
		for _, s := range bundledServers {
			if !strings.Contains(body, fmt.Sprintf("toolgate_backend_up{server=%q} 1\n", s)) {
				t.Errorf("no toolgate_backend_up{server=%q} 1", s)
			}
			if n, ok := metricValue(mfs, "toolgate_catalog_tools", map[string]string{"server": s}); !ok || n == 0 {
				t.Errorf("toolgate_catalog_tools{server=%q} = %v", s, n)
			}
		}
		if n, _ := metricValue(mfs, "toolgate_index_generation", nil); n < 1 {
			t.Errorf("toolgate_index_generation = %v", n)
		}
		if n, ok := metricValue(mfs, "toolgate_search_bm25_only", nil); !ok || n != 0 {
			t.Errorf("toolgate_search_bm25_only = %v (present %v), want 0: the model ranks", n, ok)
		}
		for _, name := range []string{"toolgate_embedding_cache_hits_total", "toolgate_embedding_cache_misses_total",
			"toolgate_backend_restarts_total", "toolgate_search_nomatch_total", "go_goroutines", "process_resident_memory_bytes"} {
			if _, ok := mfs[name]; !ok {
				t.Errorf("no %s", name)
			}
		}
		if n, _ := metricValue(mfs, "toolgate_http_requests_total", map[string]string{"route": "/mcp", "code": "200"}); n < 6 {
			t.Errorf("toolgate_http_requests_total{route=/mcp,code=200} = %v, want ≥ 6", n)
		}
	})

	t.Run("foreign Origin", func(t *testing.T) {
		for _, path := range []string{"/ui/", "/ui/?q=files", "/ui/api/state", "/metrics"} {
			if code, _ := httpGet(t, base+path, "https://evil.example"); code != 403 {
				t.Errorf("GET %s with a foreign Origin: %d, want 403", path, code)
			}
		}
		if code, _ := httpGet(t, base+"/ui/", base); code != 200 {
			t.Errorf("GET /ui/ with its own Origin: %d, want 200", code)
		}
	})

	t.Run("traces", func(t *testing.T) {
		var search, exec, call otlptest.Span
		testenv.Eventually(t, "the spans of the traced search and call at the collector", func() bool {
			for _, s := range rcv.Spans() {
				switch {
				case s.TraceID != traceID:
				case s.Name == "search_tools":
					search = s
				case s.Name == "execute_tool":
					exec = s
				case s.Name == "backend_call":
					call = s
				}
			}
			return search.SpanID != "" && exec.SpanID != "" && call.SpanID != "" && len(rcv.Named("fuse")) > 0
		})
		if search.ParentSpanID != "1000000000000001" || exec.ParentSpanID != "2000000000000002" {
			t.Errorf("search_tools parent %s, execute_tool parent %s: want the client's spans", search.ParentSpanID, exec.ParentSpanID)
		}
		if r := search.Resource; r["service.name"] != "toolgate" {
			t.Errorf("resource %v", r)
		}
		var stages []string
		for _, s := range rcv.Spans() {
			if s.ParentSpanID == search.SpanID {
				stages = append(stages, s.Name)
			}
		}
		slices.Sort(stages)
		if want := []string{"embed", "fuse", "keyword", "vector"}; !slices.Equal(stages, want) {
			t.Errorf("search_tools children %v, want %v", stages, want)
		}
		if call.ParentSpanID != exec.SpanID || call.Attributes["toolgate.server"] != "traced" || call.Attributes["toolgate.outcome"] != "ok" {
			t.Errorf("backend_call %+v, want a child of execute_tool on traced, ok", call)
		}
		// The backend got the trace, with the backend_call span as parent.
		want := fmt.Sprintf(`"traceparent":"00-%s-%s-01"`, traceID, call.SpanID)
		if !strings.Contains(echoed, want) {
			t.Errorf("the backend saw _meta %s, want %s", echoed, want)
		}
	})

	t.Run("console DOM in Chromium", func(t *testing.T) {
		chromium := findChromium(t)
		dom := func(url string) string {
			t.Helper()
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			args := append(chromiumFlags(t), "--headless", "--dump-dom", url)
			cmd := exec.CommandContext(ctx, chromium, args...)
			cmd.Env = append(os.Environ(), chromiumTmp(t))
			out, err := cmd.Output()
			if err != nil {
				t.Fatalf("chromium --dump-dom %s: %v", url, err)
			}
			return string(out)
		}
		page := dom(base + "/ui/")
		for _, s := range bundledServers {
			// Rows the page's script drew (the embedded JSON alone has no
			// such attributes).
			if !strings.Contains(page, fmt.Sprintf(`data-server="%s" data-state="up"`, s)) {
				t.Errorf("/ui/ in Chromium: no row for %s up\n%s", s, page)
			}
		}
		page = dom(base + "/ui/?q=list%20the%20files%20in%20a%20directory")
		if !strings.Contains(page, `<tr data-tool="filesystem__list_directory">`) {
			t.Errorf("/ui/?q=list the files in a directory in Chromium: no filesystem__list_directory row\n%s", page)
		}
	})
}

// findChromium is Debian's chromium (apt-get install chromium), or the
// test ends as a missing dependency.
func findChromium(t *testing.T) string {
	t.Helper()
	p, err := exec.LookPath("chromium")
	if err != nil {
		testenv.Missing(t, "chromium is not installed (apt-get install chromium, or make deps)")
	}
	return p
}

// chromiumTmp is the TMPDIR setting that keeps the folder Chromium makes
// in the temp folder for its singleton lock (org.chromium.Chromium.*,
// left behind when the browser is killed) inside one of the test's own.
// A short one: the lock is a Unix socket, whose path has room for 107
// bytes, and in a t.TempDir() (named after the test) under /tmp the
// socket of TestObservability's subtest had 3 to spare: with a TMPDIR 6
// bytes longer Chromium aborted ("signal: aborted") at every run.
func chromiumTmp(t *testing.T) string {
	return "TMPDIR=" + shortTempDir(t)
}

// shortTempDir is a new folder directly in the temp folder, removed at the
// test's end, for Unix sockets: a socket's path has room for 107 bytes,
// and a t.TempDir() is named after the test (a long TMPDIR left a
// subtest's too few).
func shortTempDir(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "tg")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := os.RemoveAll(dir); err != nil {
			t.Error(err)
		}
	})
	return dir
}

// chromiumFlags keep a test's browser to itself and off the network: its
// own profile, no background requests (updates, sync, metrics), and no
// sandbox when running as root (Chromium refuses to start otherwise).
func chromiumFlags(t *testing.T) []string {
	flags := []string{
		"--user-data-dir=" + t.TempDir(),
		"--no-first-run", "--no-default-browser-check", "--disable-background-networking",
		"--disable-component-update", "--disable-sync", "--disable-default-apps", "--disable-extensions",
		"--disable-domain-reliability", "--disable-client-side-phishing-detection", "--no-pings",
		"--metrics-recording-only", "--disable-gpu", "--hide-scrollbars", "--mute-audio",
	}
	if os.Geteuid() == 0 {
		flags = append(flags, "--no-sandbox")
	}
	return flags
}
