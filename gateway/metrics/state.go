package metrics

import (
	"slices"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/toolgate/toolgate/gateway/backend"
)

// stateCollector reads the gateway's state when scraped: nothing is kept
// in step between scrapes, so the numbers are never stale.
type stateCollector struct {
	o                        Options
	up, restarts, tools, gen *prometheus.Desc
	cacheHits, cacheMisses   *prometheus.Desc
	cacheDropped             *prometheus.Desc
	bm25Only, certExpiry     *prometheus.Desc
	searchRunning            *prometheus.Desc
	searchWaiting            *prometheus.Desc
	clientCertExpiry         *prometheus.Desc
	loginExpiry              *prometheus.Desc
	reloads, reloadOK        *prometheus.Desc
	indexError               *prometheus.Desc
	auditRecords, auditEarly *prometheus.Desc
}

func newStateCollector(o Options) *stateCollector {
	return &stateCollector{
		o: o,
		up: prometheus.NewDesc("toolgate_backend_up",
			"1 when the backend is up (connected, or idle: lazy and not started yet), else 0.", []string{"server"}, nil),
		restarts: prometheus.NewDesc("toolgate_backend_restarts_total",
			"Restarts of the backend after its first connect (crashes and restarts on request), counted on across disable and enable.", []string{"server"}, nil),
		tools: prometheus.NewDesc("toolgate_catalog_tools",
			"Tools of the server in the catalog that search_tools ranks.", []string{"server"}, nil),
		gen: prometheus.NewDesc("toolgate_index_generation",
			"Indexes served since start: 1 for the first, one more for each re-index swapped in.", nil, nil),
		cacheHits: prometheus.NewDesc("toolgate_embedding_cache_hits_total",
			"Texts (tools and queries) whose embedding came from the cache.", nil, nil),
		cacheMisses: prometheus.NewDesc("toolgate_embedding_cache_misses_total",
			"Texts (tools and queries) the model had to embed.", nil, nil),
		cacheDropped: prometheus.NewDesc("toolgate_embedding_cache_dropped_total",
			"Vectors of tool texts the embedding cache's sweeps deleted: out of the catalog for longer than toolgate.embed.keepUnused.", nil, nil),
		bm25Only: prometheus.NewDesc("toolgate_search_bm25_only",
			"1 while search runs BM25 only although the configured mode needs the model (GET /status's search.reason says why), else 0.", nil, nil),
		searchRunning: prometheus.NewDesc("toolgate_search_running",
			"Searches ranking now: at most the cores (at least 2) at once (GET /status's search.running of search.slots).", nil, nil),
		searchWaiting: prometheus.NewDesc("toolgate_search_waiting",
			"Searches waiting for one of the slots that bound those ranking at once, first come first served (GET /status's search.waiting).", nil, nil),
		certExpiry: prometheus.NewDesc("toolgate_tls_cert_expiry_timestamp_seconds",
			"When the HTTPS front's certificate expires (toolgate.http.tls), as a Unix time; absent without one.", nil, nil),
		clientCertExpiry: prometheus.NewDesc("toolgate_backend_tls_cert_expiry_timestamp_seconds",
			"When the client certificate a remote server is reached with expires (its tls.cert), as a Unix time; absent without one.", []string{"server"}, nil),
		loginExpiry: prometheus.NewDesc("toolgate_backend_login_expiry_timestamp_seconds",
			"When the access token of a remote server's OAuth login expires, for a login that cannot be refreshed (the authorization server gave no refresh token: the server needs toolgate auth login again by then), as a Unix time; absent for one that can be refreshed, or none.", []string{"server"}, nil),
		reloads: prometheus.NewDesc("toolgate_config_reloads_total",
			"Config reloads since start, applied or rejected (GET /status's reloadGeneration).", nil, nil),
		reloadOK: prometheus.NewDesc("toolgate_config_last_reload_successful",
			"0 when the latest config reload was rejected (the config in effect is the one before it: GET /status's lastReload.error says why), else 1.", nil, nil),
		auditRecords: prometheus.NewDesc("toolgate_audit_records_total",
			"Audit records by what became of them: written (in the file), dropped (lost: the writer fell behind, the disk failed or is under its free-space floor), coalesced (an API key's refusals counted into a record that stands for several).", []string{"result"}, nil),
		auditEarly: prometheus.NewDesc("toolgate_audit_rotated_early_total",
			"Rotations of the audit log that removed records younger than toolgate.audit.minRetention: the log holds less time than counted on.", nil, nil),
		indexError: prometheus.NewDesc("toolgate_index_last_error_timestamp_seconds",
			"When the latest re-index failed (the index before it is still served: GET /status's lastIndexError says why), as a Unix time; absent until one fails.", nil, nil),
	}
}

func (c *stateCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.up, c.restarts, c.tools, c.gen, c.cacheHits, c.cacheMisses, c.cacheDropped, c.bm25Only, c.searchRunning, c.searchWaiting, c.certExpiry, c.clientCertExpiry, c.loginExpiry, c.reloads, c.reloadOK, c.indexError, c.auditRecords, c.auditEarly} {
		ch <- d
	}
}

func (c *stateCollector) Collect(ch chan<- prometheus.Metric) {
	var servers []string
	if b := c.o.Backends; b != nil {
		for _, st := range b.Status() {
			up := 0.0
			if st.State == backend.StateUp || st.State == backend.StateIdle {
				up = 1
			}
			ch <- prometheus.MustNewConstMetric(c.up, prometheus.GaugeValue, up, st.Name)
			ch <- prometheus.MustNewConstMetric(c.restarts, prometheus.CounterValue, float64(st.Restarts), st.Name)
			if t := st.TLSCertNotAfter; t != nil {
				ch <- prometheus.MustNewConstMetric(c.clientCertExpiry, prometheus.GaugeValue, float64(t.Unix()), st.Name)
			}
			if le := st.LoginExpiry; le != nil {
				ch <- prometheus.MustNewConstMetric(c.loginExpiry, prometheus.GaugeValue, float64(le.Expires.Unix()), st.Name)
			}
			servers = append(servers, st.Name)
		}
	}
	if l := c.o.Loop; l != nil {
		st := l.Stats()
		ch <- prometheus.MustNewConstMetric(c.gen, prometheus.GaugeValue, float64(st.CatalogGeneration))
		// A rejected reload or a failed re-index leaves the gateway
		// serving what it served before: only GET /status and the log said
		// so, and an alert on the metrics saw nothing.
		ch <- prometheus.MustNewConstMetric(c.reloads, prometheus.CounterValue, float64(st.ReloadGeneration))
		ok := 1.0
		if st.LastReload != nil && st.LastReload.Error != "" {
			ok = 0
		}
		ch <- prometheus.MustNewConstMetric(c.reloadOK, prometheus.GaugeValue, ok)
		if !st.LastIndexErrorAt.IsZero() {
			ch <- prometheus.MustNewConstMetric(c.indexError, prometheus.GaugeValue, float64(st.LastIndexErrorAt.Unix()))
		}
		// Configured servers without tools show 0, and so do those
		// disabled at run time: search_tools ranks none of their tools,
		// though the index holds them until they are enabled again. The
		// loop counts them, for GET /status's catalogTools too.
		per := l.CatalogToolsByServer()
		for _, s := range slices.Concat(servers, st.Disabled) {
			if _, ok := per[s]; !ok {
				per[s] = 0
			}
		}
		for s, n := range per {
			ch <- prometheus.MustNewConstMetric(c.tools, prometheus.GaugeValue, float64(n), s)
		}
	}
	if f := c.o.Audit; f != nil {
		s := f()
		for _, v := range []struct {
			result string
			n      uint64
		}{{"written", s.Written}, {"dropped", s.Dropped}, {"coalesced", s.Coalesced}} {
			ch <- prometheus.MustNewConstMetric(c.auditRecords, prometheus.CounterValue, float64(v.n), v.result)
		}
		ch <- prometheus.MustNewConstMetric(c.auditEarly, prometheus.CounterValue, float64(s.RotatedEarly))
	}
	if f := c.o.EmbedCache; f != nil {
		n := f()
		ch <- prometheus.MustNewConstMetric(c.cacheHits, prometheus.CounterValue, float64(n.Hits))
		ch <- prometheus.MustNewConstMetric(c.cacheMisses, prometheus.CounterValue, float64(n.Misses))
		ch <- prometheus.MustNewConstMetric(c.cacheDropped, prometheus.CounterValue, float64(n.Dropped))
	}
	if f := c.o.Search; f != nil {
		if st := f(); st != nil {
			v := 0.0
			if st.BM25Only {
				v = 1
			}
			ch <- prometheus.MustNewConstMetric(c.bm25Only, prometheus.GaugeValue, v)
			ch <- prometheus.MustNewConstMetric(c.searchRunning, prometheus.GaugeValue, float64(st.Running))
			ch <- prometheus.MustNewConstMetric(c.searchWaiting, prometheus.GaugeValue, float64(st.Waiting))
		}
	}
	if f := c.o.CertNotAfter; f != nil {
		if t := f(); t != nil {
			ch <- prometheus.MustNewConstMetric(c.certExpiry, prometheus.GaugeValue, float64(t.Unix()))
		}
	}
}
