// Package metrics owns the gateway's Prometheus metrics: decorators that
// count and time what passes through the gateway's Searcher, its Caller and
// its HTTP front; a collector that reads the backend pool, the catalog, the
// runtime loop and the embedding cache when scraped; and the GET /metrics
// handler. Every metric name and label is declared here, once.
//
// Labels stay bounded: mode and outcome take a fixed set of values, server
// the configured servers, tool only names in the catalog (any other name
// counts as "unknown"), route the mux's patterns ("other" for the rest).
package metrics

import (
	"context"
	"net/http"
	"slices"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	dto "github.com/prometheus/client_model/go"

	"github.com/toolgate/toolgate/gateway"
	"github.com/toolgate/toolgate/gateway/audit"
	"github.com/toolgate/toolgate/gateway/backend"
	"github.com/toolgate/toolgate/gateway/live"
	"github.com/toolgate/toolgate/index/catalog"
	"github.com/toolgate/toolgate/search"
)

// Unknown is the label value of a tool (or server) name outside the
// catalog (or the config), and OtherRoute that of a request no route
// matches.
const (
	Unknown    = "unknown"
	OtherRoute = "other"
)

// Backends reports the backend pool's state. backend.Pool implements it.
type Backends interface {
	Status() []backend.Status
	Servers() []string
}

// Catalog is the tool catalog served. live.Loop implements it.
type Catalog interface {
	Tool(id string) (catalog.Tool, bool)
	IDs() []string
}

// Loop reports the runtime loop's counters. live.Loop implements it.
type Loop interface {
	Stats() live.Stats
	CatalogToolsByServer() map[string]int
}

var (
	_ Backends = (*backend.Pool)(nil)
	_ Catalog  = (*live.Loop)(nil)
	_ Loop     = (*live.Loop)(nil)
)

// CacheCounts are the embedding cache's counts (Options.EmbedCache): the
// texts whose vector came from it, those the model embedded, and the
// vectors its sweeps deleted.
type CacheCounts struct{ Hits, Misses, Dropped int64 }

// Options say where the collector reads the gateway's state when scraped.
// A nil field leaves its metrics out; nil Options mean none of them (the
// decorators and the runtime collectors still work).
type Options struct {
	Backends Backends // toolgate_backend_up, toolgate_backend_restarts_total; server labels of calls
	Catalog  Catalog  // tool labels of calls
	Loop     Loop     // toolgate_index_generation, toolgate_catalog_tools, toolgate_config_*, toolgate_index_last_error_timestamp_seconds
	// EmbedCache returns the embedding cache's counts so far
	// (toolgate_embedding_cache_{hits,misses,dropped}_total).
	EmbedCache func() CacheCounts
	// Search says how searches rank now (toolgate_search_bm25_only).
	Search func() *search.State
	// CertNotAfter is when the HTTPS front's certificate expires, nil
	// without one (toolgate_tls_cert_expiry_timestamp_seconds).
	CertNotAfter func() *time.Time
	// Audit returns the audit log's counts so far
	// (toolgate_audit_records_total, toolgate_audit_rotated_early_total).
	Audit func() audit.Stats
}

// Metrics is one gateway's registry of metrics. Its decorators and handler
// are safe for concurrent use.
type Metrics struct {
	reg  *prometheus.Registry
	opts Options

	searchDuration *prometheus.HistogramVec
	searchResults  prometheus.Histogram
	searchNoMatch  prometheus.Counter
	calls          *prometheus.CounterVec
	callDuration   *prometheus.HistogramVec
	trimmed        *prometheus.CounterVec
	trimmedBytes   *prometheus.CounterVec
	httpRequests   *prometheus.CounterVec
	outputMismatch *prometheus.CounterVec
}

// New returns the gateway's metrics in a registry of their own, with the Go
// runtime and process collectors.
func New(opts *Options) *Metrics {
	m := &Metrics{reg: prometheus.NewRegistry()}
	if opts != nil {
		m.opts = *opts
	}
	m.searchDuration = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name: "toolgate_search_duration_seconds",
		Help: "Time to rank tools for one search_tools call, by the mode that ranked them (bm25 when semantic ranking is off).",
		// 0.5 ms … 16 s. They ended at 1 s, so a loaded gateway's
		// searches of 1.6 s and a search that waited for a cold start's
		// index read as 1 s in histogram_quantile. The buckets added keep
		// the earlier ones' bounds (the same start and factor).
		Buckets: prometheus.ExponentialBuckets(0.0005, 2, 16),
	}, []string{"mode"})
	m.searchResults = prometheus.NewHistogram(prometheus.HistogramOpts{
		Name:    "toolgate_search_results",
		Help:    "Tools returned by one search.",
		Buckets: []float64{0, 1, 2, 3, 5, 10, 20, 50, 100},
	})
	m.searchNoMatch = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "toolgate_search_nomatch_total",
		Help: "Searches answered with noMatch: no tool reaches minConfidence (the closest are listed, marked weak), or none was found.",
	})
	m.calls = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "toolgate_tool_calls_total",
		Help: "Tool calls dispatched to backends, by server, tool and outcome (ok, error, timeout, unavailable, denied).",
	}, []string{"server", "tool", "outcome"})
	m.callDuration = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "toolgate_tool_call_duration_seconds",
		Help:    "Time from dispatch to a backend's answer (or the error), by server.",
		Buckets: []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 120},
	}, []string{"server"})
	m.trimmed = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "toolgate_tool_results_trimmed_total",
		Help: "execute_tool results over maxResultBytes, trimmed before they reached the client, by server and tool.",
	}, []string{"server", "tool"})
	m.trimmedBytes = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "toolgate_tool_result_trimmed_bytes_total",
		Help: "Bytes of text left out of execute_tool results over maxResultBytes, by server.",
	}, []string{"server"})
	m.httpRequests = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "toolgate_http_requests_total",
		Help: "HTTP requests, by route and status code (refused ones included).",
	}, []string{"route", "code"})
	m.outputMismatch = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "toolgate_output_mismatches_total",
		Help: "Results execute_tool passed on whose structuredContent does not fit the output schema their tool declares (or is missing), by server and tool: each went to the client with a note. A structuredContent that maxResultBytes cut or left out is not checked, so not counted.",
	}, []string{"server", "tool"})
	m.reg.MustRegister(m.searchDuration, m.searchResults, m.searchNoMatch, m.calls, m.callDuration, m.trimmed, m.trimmedBytes, m.httpRequests, m.outputMismatch,
		newStateCollector(m.opts),
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m
}

// Registry is the registry the metrics are in (for tests and for adding
// more).
func (m *Metrics) Registry() *prometheus.Registry { return m.reg }

// Handler serves the metrics in the Prometheus text format (GET /metrics).
// Mount it beside /mcp (gateway.HTTPOptions.Extra) so that it gets the same
// checks as every route.
func (m *Metrics) Handler() http.Handler {
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{Registry: m.reg})
}

// Searcher returns s counting and timing every search of search_tools; not
// those the gateway runs for names execute_tool does not know
// (gateway.Suggestion), which no client asked for.
func (m *Metrics) Searcher(s gateway.Searcher) gateway.Searcher { return &searcher{s, m} }

// Caller returns c counting and timing every tool call.
func (m *Metrics) Caller(c gateway.Caller) gateway.Caller { return gateway.Observed(c, m.observeCall) }

// OutputMismatch counts a result that does not fit its tool's output
// schema: what gateway.Options.OutputMismatch takes.
func (m *Metrics) OutputMismatch(server, tool string) {
	m.outputMismatch.WithLabelValues(m.labels(server, tool)).Inc()
}

func (m *Metrics) observeCall(c gateway.Call) {
	sl, tl := m.labels(c.Server, c.Tool)
	m.calls.WithLabelValues(sl, tl, string(c.Outcome)).Inc()
	if c.Outcome != gateway.OutcomeDenied {
		// A refused call never reached the backend: its near-zero time
		// would pull the server's latency quantiles down.
		m.callDuration.WithLabelValues(sl).Observe(c.Duration.Seconds())
	}
}

// Trimmed counts a result execute_tool trimmed (gateway.Options.Trimmed).
func (m *Metrics) Trimmed(t gateway.Trimmed) {
	sl, tl := m.labels(t.Server, t.Tool)
	m.trimmed.WithLabelValues(sl, tl).Inc()
	m.trimmedBytes.WithLabelValues(sl).Add(float64(t.Cut))
}

// Forget deletes the series of calls the gateway no longer serves: those
// of toolgate_tool_calls_total whose tool the catalog (Options.Catalog) no
// longer holds (removed or renamed by its server), and every call series
// (toolgate_tool_calls_total, names outside the catalog included, and
// toolgate_tool_call_duration_seconds) of a server that left the config:
// in neither the pool (Options.Backends) nor the catalog, and not disabled
// at run time (Options.Loop; its tools stay in the catalog, and so do
// their series). A backend that renames its tools at each listing, or
// servers that come and go, would otherwise pile up series until the
// process ends; a series that goes with its object is Prometheus practice.
// The state read when scraped (toolgate_backend_up,
// toolgate_backend_restarts_total …) has only the pool's servers anyway,
// and the pool keeps a removed server's restarts for when it comes back.
// Call it once a new catalog is served (live.Loop.OnChange).
func (m *Metrics) Forget() {
	if m.opts.Catalog == nil {
		return
	}
	kept := map[string]bool{Unknown: true}
	for _, id := range m.opts.Catalog.IDs() {
		if server, _, err := catalog.SplitID(id); err == nil {
			kept[server] = true
		}
	}
	if m.opts.Backends != nil {
		for _, s := range m.opts.Backends.Servers() {
			kept[s] = true
		}
	}
	if m.opts.Loop != nil {
		for _, s := range m.opts.Loop.Stats().Disabled {
			kept[s] = true // out of the pool, in the config
		}
	}
	var gone []prometheus.Labels
	for _, l := range labelsOf(m.calls, m.callDuration, m.trimmed, m.trimmedBytes, m.outputMismatch) {
		switch {
		case !kept[l["server"]]:
			gone = append(gone, prometheus.Labels{"server": l["server"]})
		case l["tool"] == "" || l["tool"] == Unknown:
			// a duration series, or the names outside the catalog
		default:
			if _, ok := m.opts.Catalog.Tool(catalog.JoinID(l["server"], l["tool"])); !ok {
				gone = append(gone, prometheus.Labels{"server": l["server"], "tool": l["tool"]})
			}
		}
	}
	for _, l := range gone {
		m.calls.DeletePartialMatch(l) // every outcome
		m.trimmed.DeletePartialMatch(l)
		m.outputMismatch.DeletePartialMatch(l)
		if _, byTool := l["tool"]; !byTool {
			m.callDuration.DeletePartialMatch(l)
			m.trimmedBytes.DeletePartialMatch(l)
		}
	}
}

// labelsOf returns the labels of every series the collectors hold now.
func labelsOf(cs ...prometheus.Collector) []map[string]string {
	ch := make(chan prometheus.Metric)
	go func() {
		for _, c := range cs {
			c.Collect(ch)
		}
		close(ch)
	}()
	var out []map[string]string
	for c := range ch {
		var d dto.Metric
		if c.Write(&d) != nil {
			continue
		}
		l := map[string]string{}
		for _, p := range d.GetLabel() {
			l[p.GetName()] = p.GetValue()
		}
		out = append(out, l)
	}
	return out
}

// HTTP decorates the HTTP front, counting requests by route and code: it is
// what gateway.HTTPOptions.Wrap takes. Each route gets promhttp's counting
// handler (routes are the mux's patterns, a bounded set).
func (m *Metrics) HTTP(h http.Handler, route func(*http.Request) string) http.Handler {
	var byRoute sync.Map // route → h counted under it
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rt := route(r)
		if rt == "" {
			rt = OtherRoute
		}
		ch, ok := byRoute.Load(rt)
		if !ok {
			ch, _ = byRoute.LoadOrStore(rt, promhttp.InstrumentHandlerCounter(m.httpRequests.MustCurryWith(prometheus.Labels{"route": rt}), h))
		}
		ch.(http.Handler).ServeHTTP(w, r)
	})
}

type searcher struct {
	gateway.Searcher
	m *Metrics
}

var _ gateway.Searcher = (*searcher)(nil)

func (s *searcher) Search(ctx context.Context, q search.Query) (search.Result, error) {
	start := time.Now()
	res, err := s.Searcher.Search(ctx, q)
	if err != nil || gateway.Suggestion(ctx) {
		return res, err
	}
	s.m.searchDuration.WithLabelValues(string(res.Mode)).Observe(time.Since(start).Seconds())
	s.m.searchResults.Observe(float64(len(res.Hits)))
	if noMatch(res) {
		s.m.searchNoMatch.Inc()
	}
	return res, nil
}

// noMatch says whether a search found nothing that fits: search_tools
// answers noMatch (its hits are only the closest tools), or no tool at
// all. Counting only the latter counted almost nothing: a noMatch answer
// still lists the closest tools.
func noMatch(res search.Result) bool { return res.NoMatch || len(res.Hits) == 0 }

// labels bounds a call's server and tool labels: the tool's name when the
// catalog holds server__tool, else Unknown; the server's when it is in the
// catalog or the config, else Unknown.
func (m *Metrics) labels(server, tool string) (string, string) {
	if m.opts.Catalog != nil {
		if _, ok := m.opts.Catalog.Tool(catalog.JoinID(server, tool)); ok {
			return server, tool
		}
	}
	if m.opts.Backends != nil && slices.Contains(m.opts.Backends.Servers(), server) {
		return server, Unknown
	}
	return Unknown, Unknown
}
