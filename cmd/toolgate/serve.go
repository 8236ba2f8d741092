package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net"
	"net/http"
	"os"
	"os/signal"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/spf13/cobra"

	"github.com/toolgate/toolgate/embed"
	"github.com/toolgate/toolgate/gateway"
	"github.com/toolgate/toolgate/gateway/audit"
	"github.com/toolgate/toolgate/gateway/backend"
	"github.com/toolgate/toolgate/gateway/backend/oauth"
	"github.com/toolgate/toolgate/gateway/config"
	"github.com/toolgate/toolgate/gateway/console"
	"github.com/toolgate/toolgate/gateway/keys"
	"github.com/toolgate/toolgate/gateway/limit"
	"github.com/toolgate/toolgate/gateway/live"
	"github.com/toolgate/toolgate/gateway/metrics"
	"github.com/toolgate/toolgate/gateway/mgmt"
	"github.com/toolgate/toolgate/gateway/policy"
	"github.com/toolgate/toolgate/gateway/quarantine"
	"github.com/toolgate/toolgate/index"
	"github.com/toolgate/toolgate/index/catalog"
	"github.com/toolgate/toolgate/internal/dirs"
	"github.com/toolgate/toolgate/internal/mask"
	"github.com/toolgate/toolgate/internal/storage"
	"github.com/toolgate/toolgate/internal/telemetry"
	"github.com/toolgate/toolgate/search"
	"github.com/toolgate/toolgate/search/learn"
)

func init() { register(newServeCmd) }

type serveFlags struct {
	configs     []string
	http        string
	allowRemote bool
	mode        string
	profile     string
}

func newServeCmd(g *globals) *cobra.Command {
	var f serveFlags
	cmd := &cobra.Command{
		Use:   "serve --config FILE [--config FILE...] [--http 127.0.0.1:PORT] [--profile NAME]",
		Short: "Run the gateway: MCP on stdio (default) or streamable HTTP at /mcp",
		Long: `Run the gateway. It connects to every server in the config file (the
Claude-compatible "mcpServers" format), indexes their tools, and serves MCP with
two tools: search_tools and execute_tool.

Without --http it speaks MCP on stdin/stdout (what an MCP client launches);
logs always go to stderr. With --http it serves streamable HTTP at /mcp,
GET /healthz, GET /status, Prometheus metrics at GET /metrics and the web
console at /ui/ on a loopback address. Traces are exported over OTLP/HTTP when
toolgate.telemetry.otlpEndpoint or OTEL_EXPORTER_OTLP_ENDPOINT is set.

--config may be given several times (a user's file, then a project's): the
files are read as one, later over earlier (servers and profiles replaced
whole by name, settings key by key).

--profile NAME limits the stdio client (and /mcp) to a profile of
toolgate.profiles; over HTTP, /profiles/NAME/mcp serves each profile.

It watches the config files and applies a change while it runs (SIGHUP
reloads too): removed servers stop and their tools leave search at once,
added ones start, changed ones restart, the others keep running. A config
that does not parse is logged and changes nothing. Settings outside
"mcpServers" (http, telemetry, dataDir, embed, search, restart,
maxConcurrentConnects) take effect on the next start; timeouts, profiles and
management apply at once.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runServe(cmd.Context(), g, f)
		},
	}
	configsFlag(cmd, &f.configs)
	cmd.Flags().StringVar(&f.profile, "profile", "", "limit the stdio client and /mcp to this profile of toolgate.profiles")
	cmd.Flags().StringVar(&f.http, "http", "", "serve streamable HTTP on this address (e.g. 127.0.0.1:8931) instead of stdio")
	cmd.Flags().BoolVar(&f.allowRemote, "allow-remote", false, "allow --http on a non-loopback address")
	cmd.Flags().StringVar(&f.mode, "mode", "", "ranking mode: hybrid, bm25, vector or rrf (default: config, else hybrid)")
	g.addEmbedFlags(cmd)
	return cmd
}

func runServe(ctx context.Context, g *globals, f serveFlags) error {
	if len(f.configs) == 0 {
		return usageError{errors.New("serve needs --config FILE (an mcpServers JSON file, e.g. examples/toolgate.json)")}
	}
	// Registered first: a SIGHUP during start-up must not kill the gateway
	// (the default action); the loop reads it once it runs.
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)
	docs, err := config.ReadDocs(f.configs)
	if err != nil {
		return err
	}
	cfg, _, conflicts, err := config.ParseDocs(docs, nil)
	if err != nil {
		return err
	}
	g.applyConfig(cfg.Toolgate)
	log := g.logger
	for _, c := range conflicts {
		log.Info("config files overlap", "conflict", c.String())
	}
	if f.profile != "" {
		if _, ok := cfg.Toolgate.Profiles[f.profile]; !ok {
			return usageError{fmt.Errorf("--profile %q: there is no such profile in toolgate.profiles (profiles: %s)", f.profile, strings.Join(slices.Sorted(maps.Keys(cfg.Toolgate.Profiles)), ", "))}
		}
	}
	start := time.Now()
	// Traces: off unless an OTLP endpoint is configured; spans still
	// queued at exit are sent first (bounded).
	tracing, err := telemetry.Start(ctx, &telemetry.Options{
		Endpoint: cfg.Toolgate.Telemetry.OTLPEndpoint, Getenv: os.Getenv, Version: version, Logger: log})
	if err != nil {
		return err
	}
	if tracing != nil {
		log.Info("exporting traces over OTLP/HTTP", "endpoint", tracing.Endpoint)
	}
	defer func() {
		cctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := tracing.Close(cctx); err != nil {
			log.Warn("traces not all sent at exit", "err", err)
		}
	}()
	s := cfg.Toolgate.Search
	mode := search.Mode(s.Mode)
	if f.mode != "" {
		if mode, err = search.ParseMode(f.mode); err != nil {
			return usageError{fmt.Errorf("--mode: %w", err)}
		}
	}
	// The HTTP address is taken before anything starts, so that a taken
	// port is an error at once rather than after the backends are up.
	if f.http == "" && cfg.Toolgate.HTTP.Addr != "" {
		f.http = cfg.Toolgate.HTTP.Addr
	}
	// Keys before the address: a non-loopback address without keys is
	// refused before it is bound.
	sec, err := g.checkKeys(cfg, f, log)
	if err != nil {
		return err
	}
	defer sec.Close() // last: the gateway has stopped writing to the audit log
	var ln net.Listener
	if f.http != "" {
		if ln, err = gateway.Listen(f.http, f.allowRemote); err != nil {
			return err
		}
		defer ln.Close()
	}

	// The data folder: a start creates it; one that cannot take writes is
	// served from memory (see README, Reliability) until it can.
	health := g.health()
	err = health.Prepare()
	if err == nil {
		err = health.Check()
	}
	if err != nil {
		log.Error("the data folder cannot take writes: serving with the index in memory and without storing embeddings or refreshed logins until it can (GET /status, storage)",
			"dir", health.Dir(), "err", err, "fix", storage.Fix(health.Dir(), err))
	}
	// The audit log and the quarantine's pins, in the data folder.
	sec.open(cfg, log, health)

	// Stopping, in this order and within the stop's budget (defers run
	// last first): the HTTP front or stdio (Serve returns), the runtime
	// loop, the backends, the logins, the embedding cache.
	emb, embCloser, embErr := g.openEmbedder(ctx)
	if embErr != nil {
		log.Warn("semantic ranking is off: search_tools runs BM25-only and says \"mode\": \"bm25\" (run `toolgate doctor`)", "reason", embErr)
		emb, embCloser = nil, io.NopCloser(nil)
	}
	defer g.stop.Close("embedding cache", embCloser.Close)

	// Learning from use: the learned pairs the ranking reads and the
	// gateway records; closed after the runtime loop (its engine's
	// rebuilds read them).
	var usage search.Usage
	var learner gateway.Learner
	var indexed func([]catalog.Tool)
	if cfg.Toolgate.Learn.LearnEnabled() {
		store, err := learn.Open(learnDir(g), &learn.Options{Logger: log, Storage: health.Writer("learned pairs", "pairs are not recorded")})
		if err != nil {
			log.Warn("learning from use is off for this run", "err", err)
		} else {
			defer g.stop.Close("learned pairs", store.Close)
			usage, learner = store, store
			indexed = func(tools []catalog.Tool) {
				if _, err := store.Sync(tools); err != nil {
					log.Warn("learned pairs not checked against the catalog", "err", err)
				}
			}
		}
	}

	// The runtime loop: warm start (it opens the last run's index now),
	// catalog sync with the pool and the built-in management server, the
	// policy's rules, config reloads (file watch and SIGHUP), the servers
	// disabled at run time (the state file).
	lv := live.New(index.Dir(g.DataDir()), cfg, &live.Options{
		Logger:      log,
		Embedder:    emb,
		Search:      &search.Options{Mode: mode, KeywordWeight: s.KeywordWeight, VectorWeight: s.VectorWeight, MinConfidence: minConfidence(s.MinConfidence), Usage: usage},
		Indexed:     indexed,
		ConfigPaths: f.configs,
		ConfigDocs:  docs,
		Reload:      hup,
		Storage:     health.Writer("index", "the index is built in memory"),
		Builtin:     map[string][]*mcp.Tool{mgmt.Name: mgmt.Tools()},
		StatePath:   live.StateFile(g.DataDir()),
		Policy:      sec.policy, // key scopes and quarantine first; the loop adds its rules
	})
	// A lazy server starts on its first execute_tool, so search needs its
	// tools from the catalog; one the catalog lacks starts now, once.
	// Remote servers that need a login get their tokens from the data
	// folder; closed after the pool.
	tokens := g.authTokens(f.configs[len(f.configs)-1])
	defer g.stop.Close("logins", tokens.Close)
	opts := g.backendOptions(cfg)
	opts.Auth = tokens
	// Quarantine decides on each listing before the re-index it asks for;
	// the tools of the warm catalog count as listed.
	sec.guard.Observe(lv.Catalog())
	opts.OnToolsChanged = func(server string, tools []*mcp.Tool) {
		sec.guard.Observe(backend.Catalog(map[string][]*mcp.Tool{server: tools}))
		lv.ToolsChanged(server, tools)
	}
	opts.Lazy = func(s config.Server) bool { return s.Lazy && lv.Cataloged(s.Name) }
	pool := backend.New(lv.Servers(), opts) // the config's, but those disabled at run time
	defer g.stop.Close("backends", pool.Close)
	warm := lv.Warm()
	err = lv.Run(ctx, pool)
	defer g.stop.Close("runtime loop", lv.Close) // before the pool: the loop stops using it first
	defer g.stop.Begin()                         // whatever ended serving, the stop is bounded
	if err != nil {
		if ctx.Err() != nil {
			return nil // stopped while starting: a stop, not a failure
		}
		return err
	}

	// Metrics count what passes through the gateway's searcher, caller and
	// HTTP front, and read the pool, catalog, loop and embedding cache
	// when scraped (GET /metrics, with --http).
	met := metrics.New(&metrics.Options{Backends: pool, Catalog: lv, Loop: lv, EmbedCache: cacheStats(emb)})
	// The console's recent calls, kept in memory.
	recent := console.NewRecorder(0)
	// The management tools stand in front of the pool: calls of
	// toolgate__* run in the gateway, the others go on to the pool. At
	// most limits.maxInFlight calls run on a server; more wait, then are
	// refused as busy (counted by the metrics and the recorder too).
	mg := mgmt.New(pool, lv, &mgmt.Options{Logger: log, ConfigPaths: f.configs})
	lim := cfg.Toolgate.Limits
	capped := limit.NewInFlight(mg, &limit.Options{MaxInFlight: lim.MaxInFlight, QueueTimeout: lim.QueueTimeout.Duration})
	gw := gateway.New(met.Searcher(lv), recent.Caller(met.Caller(capped)), &gateway.Options{
		Logger:         log,
		Version:        version,
		DefaultLimit:   s.DefaultLimit,
		MaxLimit:       s.MaxLimit,
		Describe:       mg.Describe,
		Unavailable:    mg.Unavailable,
		TracerProvider: tracing.Provider(),
		Learner:        learner,
		Policy:         lv.Policy(),
		Profile:        f.profile,
		// A call the policy refuses is counted and shown as denied.
		ObserveRefused: func(c gateway.Caller) gateway.Caller { return recent.Caller(met.Caller(c)) },
		Audit:          sec.audit,
		AuditArguments: sec.auditArguments,
	})
	// search_tools' description names the servers behind the gateway.
	lv.OnChange(gw.Refresh)

	log.Info("gateway ready", "servers", len(cfg.Servers()), "tools", lv.Stats().CatalogTools, "warm", warm, "startup", time.Since(start).Round(time.Millisecond))

	if ln == nil {
		return gw.ServeStdio(ctx)
	}
	h := gw.HTTPHandler(&gateway.HTTPOptions{
		AllowedHosts:   cfg.Toolgate.HTTP.AllowedHosts,
		AllowedOrigins: cfg.Toolgate.HTTP.AllowedOrigins,
		MaxBodyBytes:   cfg.Toolgate.HTTP.MaxBodyBytes,
		Logger:         log,
		Extra: map[string]http.Handler{
			"GET /status":  gateway.StatusHandler(pool, &gateway.StatusOptions{Version: version, Started: start, Loop: lv, Storage: health, Security: sec.status}),
			"GET /metrics": met.Handler(),
			console.Path: console.New(&console.Options{
				// The catalog as a client without profile sees it.
				Backends: pool, Catalog: policy.NewView(lv, lv.Policy(), nil), Restarter: pool, Loop: lv, Calls: recent,
				Unavailable: mg.Unavailable, Version: version, Started: start, Logger: log,
				Keys: sec.consoleKeys(),
			}).Handler(),
		},
		Wrap:       met.HTTP,
		Keys:       sec.keys,
		RequireKey: sec.requireKey,
		Rates:      limit.NewRates(lim.RequestsPerSecond, lim.Burst),
		// The console asks for a key itself and keeps it in a session
		// cookie (with the same store behind it).
		OwnAuth: []string{console.Path},
	})
	return gateway.Serve(ctx, ln, h, log)
}

// security is what serve opens for keys, the audit log and quarantine.
type security struct {
	keys       *keys.Store
	requireKey bool // a non-loopback address: every request needs a key
	audit      *audit.Log
	// auditArguments masks the arguments an audit record keeps
	// (audit.arguments "masked"; nil: only their SHA-256).
	auditArguments func(any) any
	guard          *quarantine.Guard
	// policy holds the key scope and quarantine rules, checked before
	// the rules the runtime loop keeps (config, disabled, profiles), so a
	// key's denial never names a server outside its scope.
	policy *policy.Set
}

// checkKeys checks the HTTP address against the keys (a non-loopback
// address needs some: refused before anything starts) and fails closed on
// keys that cannot be read.
func (g *globals) checkKeys(cfg *config.File, f serveFlags, log *slog.Logger) (*security, error) {
	sec := &security{keys: keys.Open(dirs.Keys(g.DataDir()), &keys.Options{File: cfg.Toolgate.KeysFile, Logger: log})}
	if f.http != "" {
		var err error
		if sec.requireKey, err = gateway.KeysNeeded(f.http, sec.keys.Any); err != nil {
			return nil, err
		}
		// Fail closed at start too: keys that cannot be read stop the
		// gateway here rather than refuse every request later.
		if _, err := sec.keys.List(); err != nil {
			return nil, err
		}
	}
	return sec, nil
}

// open opens the audit log and the quarantine's pins in the data folder,
// and the policy rules of key scopes and quarantine. A data folder that
// cannot take writes does not stop the gateway (it is never made again
// behind the user's back): the audit log counts and logs each record it
// cannot write, and the quarantine keeps its decisions in memory.
func (sec *security) open(cfg *config.File, log *slog.Logger, health *storage.Health) {
	t := cfg.Toolgate
	data := health.Dir()
	sec.audit = audit.Open(dirs.Audit(data), &audit.Options{Logger: log, MaxFileBytes: t.Audit.MaxFileBytes, MaxFiles: t.Audit.MaxFiles,
		Storage: health.Writer("audit log", "records are counted as lost")})
	if t.Audit.Arguments == "masked" {
		// The stderr masking rules, with every configured secret.
		sec.auditArguments = mask.New(backend.Secrets(cfg.All()...)).Value
	}
	sec.policy = policy.NewSet()
	sec.policy.Put(keys.NewScope(sec.policy.Profiles, mgmt.ChangesConfig))
	sec.guard = quarantine.New(dirs.Pins(data), &quarantine.Options{
		OnChange: t.Security.OnDefinitionChange,
		Approved: t.Security.ApprovedTools,
		Scanner:  quarantine.Scanner{MaxTextLength: t.Security.MaxTextLength},
		Storage:  health.Writer("quarantine pins", "decisions are kept in memory"),
		Logger:   log,
		// Each new set of decisions (a listing, an approval) replaces the
		// rule, so search filters are made again.
		Changed: func(s *quarantine.Snapshot) { sec.policy.Put(s.Rule()) },
	})
	sec.policy.Put(sec.guard.Snapshot().Rule())
	if err := sec.guard.Watch(); err != nil {
		log.Warn("approvals (`toolgate tools approve`) take effect at the next tool listing only", "err", err)
	}
}

// status is the security part of GET /status.
func (s *security) status() *gateway.SecurityStatus {
	return &gateway.SecurityStatus{Audit: s.audit.Stats(), Quarantined: s.guard.Snapshot().HeldIDs()}
}

// Close stops following approvals and closes the audit log (after the
// gateway stopped writing to it).
func (s *security) Close() error {
	var err error
	if s.guard != nil {
		err = s.guard.Close()
	}
	if s.audit != nil {
		err = errors.Join(err, s.audit.Close())
	}
	return err
}

// consoleKeys lets the console check keys against the same store.
func (s *security) consoleKeys() console.Keys { return consoleKeys{s} }

type consoleKeys struct{ s *security }

// Required: some key exists, or the address needs keys; keys that cannot
// be read count as required (no one gets in).
func (k consoleKeys) Required() bool {
	any, err := k.s.keys.Any()
	return any || err != nil || k.s.requireKey
}

func (k consoleKeys) Valid(secret string) bool {
	_, err := k.s.keys.Verify(secret)
	return err == nil
}

// cacheStats reads the embedding cache's hits and misses, or is nil when
// emb has no cache.
func cacheStats(emb index.Embedder) func() (int64, int64) {
	c, ok := emb.(interface{ Stats() embed.CacheStats })
	if !ok {
		return nil
	}
	return func() (int64, int64) {
		st := c.Stats()
		return st.Hits, st.Misses
	}
}

// minConfidence maps toolgate.search.minConfidence onto search.Options:
// unset is search's default, 0 never answers noMatch.
func minConfidence(c *float64) float64 {
	switch {
	case c == nil:
		return 0
	case *c == 0:
		return -1
	}
	return *c
}

// The loop is the gateway's Searcher.
var _ gateway.Searcher = (*live.Loop)(nil)

// Each store that writes in the data folder reports to a storage.Writer.
var (
	_ live.Storage  = (*storage.Writer)(nil)
	_ embed.Storage = (*storage.Writer)(nil)
	_ oauth.Storage = (*storage.Writer)(nil)
	_ learn.Storage = (*storage.Writer)(nil)
)

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

// version is set at build time with -ldflags "-X main.version=...".
var version = "dev"
