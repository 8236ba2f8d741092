package main

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/coreos/go-systemd/v22/daemon"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/toolgate/toolgate/embed"
	"github.com/toolgate/toolgate/gateway"
	"github.com/toolgate/toolgate/gateway/backend"
	"github.com/toolgate/toolgate/gateway/config"
	"github.com/toolgate/toolgate/gateway/console"
	"github.com/toolgate/toolgate/gateway/limit"
	"github.com/toolgate/toolgate/gateway/live"
	"github.com/toolgate/toolgate/gateway/metrics"
	"github.com/toolgate/toolgate/gateway/mgmt"
	"github.com/toolgate/toolgate/index"
	"github.com/toolgate/toolgate/internal/linerpc"
	"github.com/toolgate/toolgate/internal/storage"
	"github.com/toolgate/toolgate/internal/telemetry"
	"github.com/toolgate/toolgate/internal/tlsfiles"
	"github.com/toolgate/toolgate/search"
)

// front is what serve has opened by the time the runtime loop runs; serve
// assembles the gateway from it and serves MCP on stdio or over HTTP.
type front struct {
	cfg   *config.File
	flags serveFlags
	// serveCommand is serveFlags.serveCommand.
	serveCommand func(profile string) string
	log          *slog.Logger
	start        time.Time
	pool         *backend.Pool
	lv           *live.Loop
	emb          index.Embedder
	learner      gateway.Learner
	sec          *security
	health       *storage.Health
	tracing      *telemetry.Tracing
	ln           net.Listener         // nil: stdio
	http         *httpFront           // serving ln since it was taken
	cert         *tlsfiles.ServerCert // the front serves HTTPS with it (nil: HTTP)
	stdin        *linerpc.Watched     // stdio: stdin, watched since the start
	warm         bool                 // started from the last run's catalog
	// firstSearch is told when the first search is answered.
	firstSearch *firstSearch
	status      http.Handler           // GET /status
	statusOpts  *gateway.StatusOptions // its sources: the console's state holds the same report
	proc        *process               // told the gateway, for the stdio client's name
	ranking     func() *search.State   // how searches rank now, for /status and the console
}

// serve puts the metrics, the console's recorder, the management tools and
// the in-flight cap around the pool and the loop, and serves the gateway
// until ctx ends or the client goes.
func (fr *front) serve(ctx context.Context) error {
	s := fr.cfg.Toolgate.Search
	// Metrics count what passes through the gateway's searcher, caller and
	// HTTP front, and read the pool, catalog, loop and embedding cache
	// when scraped (GET /metrics, with --http).
	met := metrics.New(&metrics.Options{Backends: fr.pool, Catalog: fr.lv, Loop: fr.lv, EmbedCache: cacheStats(fr.emb), Search: fr.ranking,
		CertNotAfter: func() *time.Time { return fr.proc.report().TLSNotAfter }, Audit: fr.sec.audit.Stats})
	// The console's recent calls, kept in memory.
	recent := console.NewRecorder(0)
	// The management tools stand in front of the pool: calls of
	// toolgate__* run in the gateway, the others go on to the pool. At
	// most limits.maxInFlight calls run on a server; more wait, then are
	// refused as busy (counted by the metrics and the recorder too). A
	// restart or enable waits for its server's start on slots of that
	// server's management calls (mgmt.Gate).
	mg := mgmt.New(fr.pool, fr.lv, &mgmt.Options{Logger: fr.log, ConfigPaths: fr.flags.configs, ServeCommand: fr.serveCommand})
	lim := fr.cfg.Toolgate.Limits
	capped := limit.NewInFlight(mg, &limit.Options{MaxInFlight: lim.MaxInFlight, QueueTimeout: lim.QueueTimeout.Duration, Gate: mgmt.Gate})
	gw := gateway.New(met.Searcher(fr.firstSearch.searcher(fr.lv)), recent.Caller(met.Caller(capped)), &gateway.Options{
		Logger:         fr.log,
		Version:        version,
		DefaultLimit:   s.DefaultLimit,
		MaxLimit:       s.MaxLimit,
		Describe:       mg.Describe,
		Unavailable:    mg.Unavailable,
		AwaitTool:      awaitTool(fr.pool, fr.lv),
		Servers:        fr.pool.Servers,
		Building:       fr.lv.Building,
		TracerProvider: fr.tracing.Provider(),
		Learner:        fr.learner,
		LearnFromKeys:  fr.cfg.Toolgate.Learn.FromKeys,
		Policy:         fr.lv.Policy(),
		Catalog:        fr.lv,
		Profile:        fr.flags.profile,
		// A call the policy refuses is counted and shown as denied.
		ObserveRefused: func(c gateway.Caller) gateway.Caller { return recent.Caller(met.Caller(c)) },
		Audit:          fr.sec.audit,
		AuditArguments: fr.sec.auditArguments,
		// The config as last reloaded: a changed bound applies at the
		// next call.
		MaxResultBytes: func(server string) int { return fr.lv.Config().MaxResultBytes(server) },
		Trimmed:        met.Trimmed,
		OutputMismatch: met.OutputMismatch,
	})
	// search_tools' description names the servers behind the gateway, and
	// its limits are toolgate.search's as last reloaded. The calls of
	// tools that left the catalog, and of servers that left the config,
	// lose their series.
	fr.lv.OnChange(func() {
		s := fr.lv.Config().Toolgate.Search
		gw.SetLimits(s.DefaultLimit, s.MaxLimit)
		gw.Refresh()
		met.Forget()
		fr.sec.warnKeysWithoutProfile(fr.log)
	})
	fr.sec.warnKeysWithoutProfile(fr.log)
	fr.proc.gw.Store(gw)

	fr.log.Info("gateway ready", "servers", len(fr.cfg.Servers()), "tools", fr.lv.Stats().CatalogTools, "warm", fr.warm, "startup", time.Since(fr.start).Round(time.Millisecond))

	if fr.ln == nil {
		err := gw.ServeStdioFrom(ctx, fr.stdin)
		if errors.Is(err, syscall.EPIPE) {
			// The client closed its end of our stdout: it is gone, as when
			// it closes stdin. A stop, not a failure (said once: the watch
			// of stdout may have seen it first).
			if ctx.Err() == nil {
				fr.log.Info("the stdio client closed stdout: stopping")
			}
			return nil
		}
		return err
	}
	// One bucket per key for every route, the console's included; its
	// 429s are audited one by one up to the refusal limit, per key, then
	// summed up in a record a minute.
	overRate := limit.NewRefusals(&limit.RefusalOptions{PerMinute: lim.RefusedPerMinute, Burst: lim.RefusedBurst, Summary: gateway.RateSummary(fr.sec.audit, fr.log)})
	defer overRate.Close()
	rates := limit.NewRates(lim.RequestsPerSecond, lim.Burst).RecordOver(overRate)
	// Requests refused without a valid key, per client address: over the
	// limit, 429 and a summary record a minute instead of one each.
	refusals := limit.NewRefusals(&limit.RefusalOptions{PerMinute: lim.RefusedPerMinute, Burst: lim.RefusedBurst, Summary: gateway.RefusalSummary(fr.sec.audit, fr.log)})
	defer refusals.Close()
	var names func() []string
	if fr.cert != nil {
		names = func() []string { return certHosts(fr.cert.Leaf()) }
	}
	h := gw.HTTPHandler(&gateway.HTTPOptions{
		AllowedHosts:   fr.cfg.Toolgate.HTTP.AllowedHosts,
		CertHosts:      names,
		AllowedOrigins: fr.cfg.Toolgate.HTTP.AllowedOrigins,
		MaxBodyBytes:   fr.cfg.Toolgate.HTTP.MaxBodyBytes,
		Heartbeat:      fr.cfg.Toolgate.HTTP.Heartbeat.Duration,
		Logger:         fr.log,
		Extra: frontRoutes(fr.status, met.Handler(),
			console.New(&console.Options{
				// The catalog as the caller's key sees it (everything a
				// client without profile sees, without keys).
				Backends: fr.pool, Catalog: fr.lv, Policy: fr.lv.Policy(), Restarter: fr.pool, Switcher: fr.lv, Loop: fr.lv, Calls: recent, Search: fr.ranking,
				NoServers:        func() string { return noServersNote(fr.lv.Config(), fr.flags.lastConfig()) },
				DisabledInConfig: func() []string { return fr.lv.Config().DisabledNames() },
				Unavailable:      mg.Unavailable, Version: version, Started: fr.start, Logger: fr.log, Status: fr.statusOpts,
				Keys: fr.sec.consoleKeys(), Audit: fr.sec.audit, Activity: fr.sec.audit, Rates: rates, Refusals: refusals,
			}).Handler()),
		Wrap:       met.HTTP,
		Keys:       fr.sec.keys,
		RequireKey: fr.sec.requireKey,
		Rates:      rates,
		Streams:    limit.NewStreams(lim.MaxStreams),
		Refusals:   refusals,
		// The console asks for a key itself and keeps it in a session
		// cookie (with the same store behind it).
		OwnAuth: []string{console.Path},
		Home:    console.Path,
	})
	if idle := fr.flags.idle; idle > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithCancel(ctx)
		defer cancel()
		w := &idleWatch{last: time.Now()}
		h = w.wrap(h)
		go w.watch(ctx, idle, func() {
			fr.log.Info("no MCP request for "+idle.String()+": stopping (--exit-when-idle)", "addr", fr.ln.Addr().String())
			cancel()
		})
	}
	scheme := "http"
	if fr.cert != nil {
		scheme = "https"
	}
	// A systemd unit of Type=notify: ready once the front serves the
	// gateway (until now it answered the probes, and the other requests
	// waited in gateway.Starting), stopping when a stop begins.
	status := fmt.Sprintf("serving %d servers, %d tools at %s", len(fr.cfg.Servers()), fr.lv.Stats().CatalogTools, &url.URL{Scheme: scheme, Host: fr.ln.Addr().String(), Path: "/mcp"})
	if err := fr.lv.Building(); err != nil {
		status += "; " + err.Error()
	}
	fr.http.ready(h, gw.StopCalls)
	notifySystemd(fr.log, daemon.SdNotifyReady+"\nSTATUS="+status)
	defer context.AfterFunc(ctx, func() { notifySystemd(fr.log, daemon.SdNotifyStopping) })()
	defer context.AfterFunc(ctx, func() { fr.http.cancel() })()
	return fr.http.wait()
}

// httpFront is the HTTP front, served from the moment its address is
// taken (gateway.Starting answers the probes and holds the rest) until
// the gateway hands it its handler (ready) and then until it stops.
type httpFront struct {
	starting *gateway.Starting
	cut      atomic.Pointer[func()] // Gateway.StopCalls, once serving
	cancel   context.CancelFunc     // begins its stop
	done     chan struct{}          // closed once gateway.Serve returned
	err      error                  // what it returned
}

// startFront serves ln (over TLS with cert) until ctx ends or stop: the
// probes at once, GET /readyz saying why not ready yet, and every other
// request once ready gives the gateway's handler.
func startFront(ctx context.Context, ln net.Listener, cert *tlsfiles.ServerCert, log *slog.Logger, why func() string) *httpFront {
	ctx, cancel := context.WithCancel(ctx)
	hf := &httpFront{cancel: cancel, done: make(chan struct{})}
	hf.starting = gateway.NewStarting(why, ctx.Done())
	var tc *tls.Config
	if cert != nil {
		tc = cert.Config()
	}
	go func() {
		defer close(hf.done)
		hf.err = gateway.Serve(ctx, ln, hf.starting, tc, log, func() {
			if cut := hf.cut.Load(); cut != nil {
				(*cut)()
			}
		})
	}()
	return hf
}

// ready hands the front to h, the gateway's handler; cut ends the calls
// still running when a stop's grace is over.
func (hf *httpFront) ready(h http.Handler, cut func()) {
	hf.cut.Store(&cut)
	hf.starting.Ready(h)
}

// wait returns once the front has stopped, with gateway.Serve's error.
func (hf *httpFront) wait() error {
	<-hf.done
	return hf.err
}

// stop stops the front and waits for it; nil (stdio) does nothing.
func (hf *httpFront) stop() {
	if hf != nil {
		hf.cancel()
		<-hf.done
	}
}

// startStage is what serve's start does now, for GET /readyz before the
// gateway serves: the step, then how far a cold start's first index is.
type startStage struct {
	what atomic.Pointer[string]
	lv   atomic.Pointer[live.Loop]
}

func (s *startStage) set(what string) { s.what.Store(&what) }

func (s *startStage) why() string {
	if lv := s.lv.Load(); lv != nil {
		var b *live.BuildingError
		if errors.As(lv.Building(), &b) {
			if b.Total == 0 {
				return "starting its servers to build the first tool index"
			}
			return fmt.Sprintf("building the first tool index (%d of %d tools embedded)", b.Tools, b.Total)
		}
	}
	return *s.what.Load()
}

// notifySystemd tells systemd (a unit of Type=notify, which sets
// $NOTIFY_SOCKET) the state; nothing without $NOTIFY_SOCKET. A failed
// send is logged: the unit's start then times out, and this says why.
func notifySystemd(log *slog.Logger, state string) {
	if _, err := daemon.SdNotify(false, state); err != nil {
		log.Warn("cannot notify systemd (Type=notify)", "state", state, "err", err)
	}
}

// idleWatch stops an HTTP gateway no client has used for a while (serve
// --exit-when-idle, which toolgate connect --start passes to the gateway it
// starts): it counts the MCP requests (POSTs) running and notes when the
// last one ended. GETs (health checks, /status, /metrics scrapes) are not
// use: a monitored gateway still stops.
type idleWatch struct {
	mu      sync.Mutex
	running int
	last    time.Time // when the last request ended, or the watch began
}

func (w *idleWatch) wrap(h http.Handler) http.Handler {
	return http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost {
			h.ServeHTTP(rw, r)
			return
		}
		w.mu.Lock()
		w.running++
		w.mu.Unlock()
		defer func() {
			w.mu.Lock()
			w.running--
			w.last = time.Now()
			w.mu.Unlock()
		}()
		h.ServeHTTP(rw, r)
	})
}

// idleFor is how long no request has run at now (0 while one runs).
func (w *idleWatch) idleFor(now time.Time) time.Duration {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.running > 0 {
		return 0
	}
	return now.Sub(w.last)
}

// watch calls stop once the gateway has been idle for idle, looking a
// tenth of idle apart (at most every 5 s), until ctx ends.
func (w *idleWatch) watch(ctx context.Context, idle time.Duration, stop func()) {
	t := time.NewTicker(min(max(idle/10, 10*time.Millisecond), 5*time.Second))
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-t.C:
			if w.idleFor(now) >= idle {
				stop()
				return
			}
		}
	}
}

// cacheStats reads the embedding cache's counts for the metrics, or is
// nil when emb has no cache.
func cacheStats(emb index.Embedder) func() metrics.CacheCounts {
	c, ok := emb.(interface{ Stats() embed.CacheStats })
	if !ok {
		return nil
	}
	return func() metrics.CacheCounts {
		st := c.Stats()
		return metrics.CacheCounts{Hits: st.Hits, Misses: st.Misses, Dropped: st.Dropped}
	}
}

// The loop is the gateway's Searcher.
var _ gateway.Searcher = (*live.Loop)(nil)

// backendOptions maps the config's gateway settings onto the backend pool.
// Unset settings stay zero: the pool applies its defaults. The connect and
// call timeouts reach the pool through each server entry
// (config.File.Servers), so that a reload that changes them applies.
func (g *globals) backendOptions(cfg *config.File) *backend.Options {
	return &backend.Options{
		Logger:                g.logger,
		MaxConcurrentConnects: cfg.Toolgate.MaxConcurrentConnects,
		ClientInfo:            &mcp.Implementation{Name: "toolgate", Version: version},
		// [] = never restart; a server's own "restart" and "idleTimeout"
		// are read by the pool.
		RestartDelays: cfg.Toolgate.Restart.DelayDurations(),
		StableAfter:   cfg.Toolgate.Restart.StableAfter.Duration,
		// Each stdio backend runs under this binary re-executed as its
		// reaper (see main), so no process of its tree outlives a
		// SIGKILLed gateway.
		Reaper: true,
	}
}

// firstSearchWait is how long after the model loaded a warm start's
// backends wait for the client's first search before they connect anyway.
const firstSearchWait = time.Second

// firstSearch is closed once a search has been answered.
type firstSearch struct {
	once sync.Once
	done chan struct{}
}

func newFirstSearch() *firstSearch { return &firstSearch{done: make(chan struct{})} }

// searcher returns s telling f when its first search returns.
func (f *firstSearch) searcher(s gateway.Searcher) gateway.Searcher { return firstSearcher{s, f} }

// wait returns once the first search was answered, after most, or when
// ctx ends.
func (f *firstSearch) wait(ctx context.Context, most time.Duration) {
	t := time.NewTimer(most)
	defer t.Stop()
	select {
	case <-f.done:
	case <-t.C:
	case <-ctx.Done():
	}
}

type firstSearcher struct {
	gateway.Searcher
	f *firstSearch
}

func (s firstSearcher) Search(ctx context.Context, q search.Query) (search.Result, error) {
	r, err := s.Searcher.Search(ctx, q)
	s.f.once.Do(func() { close(s.f.done) })
	return r, err
}

// canListen says whether the next start could listen on addr, a config's
// new toolgate.http.addr, by listening on it a moment. An address on the
// port this gateway holds (localhost:8931 for 127.0.0.1:8931) is not
// tried: it is taken by this gateway alone, which a restart frees. have
// is what the gateway has for a non-loopback address.
func canListen(addr string, held net.Listener, allowRemote bool, have gateway.RemoteReady) error {
	if err := gateway.CheckListenSetting("toolgate.http.addr", addr, allowRemote, have); err != nil {
		return err // in the words of the setting, not of a --http flag
	}
	if _, port, err := net.SplitHostPort(addr); err == nil && held != nil {
		if a, ok := held.Addr().(*net.TCPAddr); ok && port == strconv.Itoa(a.Port) {
			return nil
		}
	}
	ln, err := gateway.Listen(addr, allowRemote)
	if err != nil {
		return err
	}
	return ln.Close()
}

// frontRoutes are the routes serve adds to the gateway's own on the HTTP
// front (gateway.HTTPOptions.Extra): the status report, the metrics and
// the console, mounted at console.Path.
func frontRoutes(status, metrics, ui http.Handler) map[string]http.Handler {
	return map[string]http.Handler{"GET /status": status, "GET /metrics": metrics, console.Path: ui}
}

// awaitTool is gateway.Options.AwaitTool: the server's connection waited
// for (backend.Pool.Lists) and, when it lists the tool, the re-index that
// its listing asks for (live.Loop.ToolsChanged), until the catalog served
// holds the tool or a re-index has ended without it (a failed one, or one
// whose catalog leaves it out). Nothing is waited for while the server is
// up and no re-index is pending: the catalog is what it lists.
func awaitTool(pool *backend.Pool, lv *live.Loop) func(ctx context.Context, server, tool string) bool {
	return func(ctx context.Context, server, tool string) bool {
		start := lv.Stats()
		if !start.Reindexing && pool.Unavailable(server, false) == "" {
			return false // up, and the catalog in step with what it lists
		}
		if !pool.Lists(ctx, server, tool) {
			return false
		}
		_, err := lv.Wait(ctx, func(st live.Stats) bool {
			if _, ok := lv.Known(server, tool); ok {
				return true
			}
			return !st.Reindexing && (st.CatalogGeneration > start.CatalogGeneration || st.LastIndexErrorAt.After(start.LastIndexErrorAt))
		})
		return err == nil
	}
}
