package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net/http"
	"os"
	"os/signal"
	"reflect"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/spf13/cobra"

	"github.com/toolgate/toolgate/gateway"
	"github.com/toolgate/toolgate/gateway/backend"
	"github.com/toolgate/toolgate/gateway/config"
	"github.com/toolgate/toolgate/index"
	"github.com/toolgate/toolgate/index/catalog"
	"github.com/toolgate/toolgate/search"
)

func init() { register(newServeCmd) }

type serveFlags struct {
	config      string
	http        string
	allowRemote bool
	mode        string
}

func newServeCmd(g *globals) *cobra.Command {
	var f serveFlags
	cmd := &cobra.Command{
		Use:   "serve --config FILE [--http 127.0.0.1:PORT]",
		Short: "Run the gateway: MCP on stdio (default) or streamable HTTP at /mcp",
		Long: `Run the gateway. It connects to every server in the config file (the
Claude-compatible "mcpServers" format), indexes their tools, and serves MCP with
two tools: search_tools and execute_tool.

Without --http it speaks MCP on stdin/stdout (what an MCP client launches);
logs always go to stderr. With --http it serves streamable HTTP at /mcp and
GET /healthz on a loopback address.

It watches the config file and applies a change while it runs (SIGHUP
reloads too): removed servers stop and their tools leave search at once,
added ones start, changed ones restart, the others keep running. A config
that does not parse is logged and changes nothing. Settings outside
"mcpServers" (http, dataDir, embed, search, restart, maxConcurrentConnects)
take effect on the next start; timeouts apply at once.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runServe(cmd.Context(), g, f)
		},
	}
	configFlag(cmd, &f.config)
	cmd.Flags().StringVar(&f.http, "http", "", "serve streamable HTTP on this address (e.g. 127.0.0.1:8931) instead of stdio")
	cmd.Flags().BoolVar(&f.allowRemote, "allow-remote", false, "allow --http on a non-loopback address")
	cmd.Flags().StringVar(&f.mode, "mode", "", "ranking mode: hybrid, bm25, vector or rrf (default: config, else hybrid)")
	g.addEmbedFlags(cmd)
	return cmd
}

func runServe(ctx context.Context, g *globals, f serveFlags) error {
	if f.config == "" {
		return usageError{errors.New("serve needs --config FILE (an mcpServers JSON file, e.g. examples/toolgate.json)")}
	}
	// Registered first: a SIGHUP during start-up must not kill the gateway
	// (the default action); it is handled once the reloader runs.
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)
	data, err := os.ReadFile(f.config)
	if err != nil {
		return fmt.Errorf("read config: %w", err)
	}
	cfg, err := config.Parse(data, f.config, nil)
	if err != nil {
		return err
	}
	g.applyConfig(cfg.Toolgate)
	log := g.logger
	start := time.Now()
	s := cfg.Toolgate.Search
	mode := search.Mode(s.Mode)
	if f.mode != "" {
		if mode, err = search.ParseMode(f.mode); err != nil {
			return usageError{fmt.Errorf("--mode: %w", err)}
		}
	}

	emb, embCloser, embErr := g.openEmbedder(ctx)
	if embErr != nil {
		log.Warn("semantic ranking is off: search_tools runs BM25-only and says \"mode\": \"bm25\" (run `toolgate doctor`)", "reason", embErr)
		emb, embCloser = nil, io.NopCloser(nil)
	}
	defer embCloser.Close()

	// Warm start: answer from the catalog snapshot of the last run while the
	// backends connect; tools of backends not connected yet are marked
	// unavailable. Without a usable snapshot, wait for the backends first.
	cs := &catalogSync{emb: emb, dir: index.Dir(g.DataDir()), log: log, kick: make(chan struct{}, 1)}
	ix, warm := cs.openWarm(cfg.Servers())

	// A lazy server starts on its first execute_tool, so search needs its
	// tools from the catalog; one the catalog lacks starts now, once.
	// Remote servers that need a login get their tokens from the data
	// folder; closed after the pool.
	tokens := g.authTokens(f.config)
	defer tokens.Close()
	opts := g.backendOptions(cfg)
	opts.Auth = tokens
	opts.OnToolsChanged = cs.changed
	opts.Lazy = func(s config.Server) bool { return s.Lazy && cs.has(s.Name) }
	pool := backend.New(cfg.Servers(), opts)
	defer pool.Close()
	cs.pool = pool
	if warm {
		log.Info("warm start: answering from the last catalog while backends connect", "tools", ix.Len(), "dir", cs.dir)
		pool.StartAsync(ctx) // each backend's first listing triggers a re-index
	} else {
		pool.Start(ctx)
		if ix, err = cs.build(ctx); err != nil {
			return err
		}
	}
	eng := search.New(ix, emb, &search.Options{Mode: mode, KeywordWeight: s.KeywordWeight, VectorWeight: s.VectorWeight, Logger: log})
	defer eng.Close()
	cs.eng = eng
	cs.goRun(ctx)
	defer cs.Close()

	live := newLiveServers(eng, cfg.Servers())
	rl := &reloader{path: f.config, log: log, pool: pool, cs: cs, live: live, applied: cfg, hash: sha256.Sum256(data)}
	rl.goRun(ctx, hup)
	defer rl.Close()

	gw := gateway.New(live, pool, &gateway.Options{
		Logger:       log,
		Version:      version,
		DefaultLimit: s.DefaultLimit,
		MaxLimit:     s.MaxLimit,
		Unavailable:  pool.Unavailable,
	})

	log.Info("gateway ready", "servers", len(cfg.Servers()), "tools", ix.Len(), "warm", warm, "startup", time.Since(start).Round(time.Millisecond))

	if f.http == "" && cfg.Toolgate.HTTP.Addr != "" {
		f.http = cfg.Toolgate.HTTP.Addr
	}
	if f.http == "" {
		return gw.ServeStdio(ctx)
	}
	h := gw.HTTPHandler(&gateway.HTTPOptions{
		AllowedHosts:   cfg.Toolgate.HTTP.AllowedHosts,
		AllowedOrigins: cfg.Toolgate.HTTP.AllowedOrigins,
		MaxBodyBytes:   cfg.Toolgate.HTTP.MaxBodyBytes,
		Logger:         log,
		Extra: map[string]http.Handler{
			"GET /status": gateway.StatusHandler(pool, &gateway.StatusOptions{Version: version, Started: start}),
		},
	})
	return gateway.ListenAndServe(ctx, f.http, h, f.allowRemote, log)
}

// backendOptions maps the config's gateway settings onto the backend pool.
func (g *globals) backendOptions(cfg *config.File) *backend.Options {
	return &backend.Options{
		Logger:                g.logger,
		ConnectTimeout:        cfg.Toolgate.ConnectTimeout.Duration,
		CallTimeout:           cfg.Toolgate.CallTimeout.Duration,
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

// catalogSync keeps the search index in step with the backends: each
// tools/list_changed, (re)connect or restart re-lists, and the new index is
// built off to the side and swapped in atomically, so searches never wait.
// Tools of a backend that is down stay in the catalog (marked unavailable
// in results) so search results are stable across restarts.
type catalogSync struct {
	pool *backend.Pool
	eng  *search.Engine
	emb  index.Embedder
	dir  string
	log  *slog.Logger
	kick chan struct{}

	mu      sync.Mutex
	current []catalog.Tool // the catalog the engine serves

	wg     sync.WaitGroup
	cancel context.CancelFunc
}

// lockWait bounds how long serve waits for another toolgate (a second
// client's gateway, or `toolgate index`) building in the same data folder.
const lockWait = 2 * time.Minute

func (c *catalogSync) changed(string, []*mcp.Tool) { c.refresh() }

// refresh asks the loop for a re-index.
func (c *catalogSync) refresh() {
	select {
	case c.kick <- struct{}{}:
	default:
	}
}

// has reports whether the catalog served holds tools of server.
func (c *catalogSync) has(server string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, t := range c.current {
		if t.Server == server {
			return true
		}
	}
	return false
}

// openWarm opens the index of the last run when it can answer for this
// config right away: it exists, was built with the same model, and holds
// no server that is no longer configured.
func (c *catalogSync) openWarm(servers []config.Server) (*index.Index, bool) {
	ix, err := index.Open(c.dir, &index.Options{Logger: c.log})
	if err != nil {
		c.log.Debug("no warm index", "dir", c.dir, "err", err)
		return nil, false
	}
	configured := map[string]bool{}
	for _, s := range servers {
		configured[s.Name] = true
	}
	reason := ""
	if c.emb != nil && ix.ModelID() != c.emb.ModelID() {
		reason = "it was built with another model"
	}
	for _, t := range ix.Tools() {
		if !configured[t.Server] {
			reason = fmt.Sprintf("it holds server %q, which this config does not list", t.Server)
			break
		}
	}
	if reason != "" {
		c.log.Info("not starting warm: the index in the data folder does not fit this config; rebuilding once backends connect", "why", reason)
		ix.Close()
		return nil, false
	}
	c.current = ix.Tools()
	return ix, true
}

// build makes the index for the merged catalog (live tools, plus the last
// known tools of configured servers that are not listed yet).
func (c *catalogSync) build(ctx context.Context) (*index.Index, error) {
	c.mu.Lock()
	prev := c.current
	c.mu.Unlock()
	tools := gateway.Merge(prev, c.pool.Tools(), c.pool.Servers())
	ix, rep, err := index.EnsureReport(ctx, c.dir, tools, c.emb, &index.Options{Logger: c.log, LockWait: lockWait})
	if err != nil {
		return nil, fmt.Errorf("build the index in %s: %w (deleting that folder is safe)", c.dir, err)
	}
	c.mu.Lock()
	c.current = ix.Tools()
	c.mu.Unlock()
	c.log.Info("index ready", "tools", ix.Len(), "state", rep.Before, "added", rep.Added, "changed", rep.Changed, "removed", rep.Removed, "embedded", rep.Embedded, "took", rep.Duration.Round(time.Millisecond))
	return ix, nil
}

// goRun starts the refresh loop; Close stops it and waits.
func (c *catalogSync) goRun(ctx context.Context) {
	ctx, c.cancel = context.WithCancel(ctx)
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		for {
			select {
			case <-ctx.Done():
				return
			case <-c.kick:
			}
			// Let a burst of changes (many backends connecting) settle
			// into one rebuild.
			select {
			case <-ctx.Done():
				return
			case <-time.After(250 * time.Millisecond):
			}
			ix, err := c.build(ctx)
			if err != nil {
				if ctx.Err() == nil {
					c.log.Error("re-index after a tool list change failed; still serving the previous index", "err", err)
				}
				continue
			}
			c.eng.Swap(ix)
		}
	}()
}

func (c *catalogSync) Close() {
	if c.cancel != nil {
		c.cancel()
	}
	c.wg.Wait()
}

// liveServers is the Searcher the gateway sees: the engine, with the tools
// of servers that are no longer configured taken out. After a reload the
// index still holds a removed server's tools until the re-index that drops
// them is swapped in (a second or so); the server set is switched before the
// pool stops the server, so no search after the reload returns its tools,
// whatever the order in which the re-index and the searches run. The cost is
// one map lookup per hit, and a second, deeper ranking only while hidden
// tools are in the index.
//
// execute_tool on a removed server's tool is passed on to the pool (Tool
// answers with a bare tool), which says that the server was removed from the
// config, rather than an "unknown tool" that does not say why.
type liveServers struct {
	gateway.Searcher
	set atomic.Pointer[serverSet]
}

type serverSet struct {
	configured map[string]bool
	removed    map[string]bool // removed by a reload and not added back
}

var _ gateway.Searcher = (*liveServers)(nil)

func newLiveServers(s gateway.Searcher, servers []config.Server) *liveServers {
	l := &liveServers{Searcher: s}
	l.set.Store(&serverSet{configured: serverNames(servers), removed: map[string]bool{}})
	return l
}

func serverNames(servers []config.Server) map[string]bool {
	m := map[string]bool{}
	for _, s := range servers {
		m[s.Name] = true
	}
	return m
}

// setServers makes servers the configured set; the ones that leave it are
// remembered as removed.
func (l *liveServers) setServers(servers []config.Server) {
	old := l.set.Load()
	next := &serverSet{configured: serverNames(servers), removed: maps.Clone(old.removed)}
	for name := range old.configured {
		if !next.configured[name] {
			next.removed[name] = true
		}
	}
	for name := range next.configured {
		delete(next.removed, name)
	}
	l.set.Store(next)
}

// keep returns the hits of configured servers (hits itself when that is all
// of them: the common case costs no allocation) and how many it left out.
func (s *serverSet) keep(hits []search.Hit) (kept []search.Hit, hidden int) {
	for _, h := range hits {
		if !s.configured[h.Tool.Server] {
			hidden++
		}
	}
	if hidden == 0 {
		return hits, 0
	}
	kept = make([]search.Hit, 0, len(hits)-hidden)
	for _, h := range hits {
		if s.configured[h.Tool.Server] {
			kept = append(kept, h)
		}
	}
	return kept, hidden
}

func (l *liveServers) Search(ctx context.Context, q search.Query) (search.Result, error) {
	res, err := l.Searcher.Search(ctx, q)
	if err != nil {
		return res, err
	}
	set := l.set.Load()
	hits, hidden := set.keep(res.Hits)
	if hidden == 0 {
		return res, nil
	}
	want := q.Limit
	if want <= 0 {
		want = search.DefaultLimit
	}
	if len(res.Hits) >= want && want < search.MaxLimit {
		// More tools may rank behind the hidden ones: rank deeper.
		deeper := q
		deeper.Limit = search.MaxLimit
		if r2, err := l.Searcher.Search(ctx, deeper); err == nil {
			res = r2
			hits, _ = set.keep(r2.Hits)
		}
	}
	res.Hits = hits[:min(len(hits), want)]
	return res, nil
}

func (l *liveServers) Tool(id string) (catalog.Tool, bool) {
	set := l.set.Load()
	t, ok := l.Searcher.Tool(id)
	if ok && set.configured[t.Server] {
		return t, true
	}
	if server, name, err := catalog.SplitID(id); err == nil && set.removed[server] {
		return catalog.Tool{Server: server, Name: name}, true
	}
	return catalog.Tool{}, false
}

func (l *liveServers) IDs() []string {
	set := l.set.Load()
	ids := l.Searcher.IDs()
	out := ids[:0:0]
	for _, id := range ids {
		if server, _, err := catalog.SplitID(id); err == nil && set.configured[server] {
			out = append(out, id)
		}
	}
	return out
}

// reloader applies changes of the config file while serving: on a change
// the file's watcher reports (debounced) and on SIGHUP. A file whose content
// did not change (same sha256) is left alone unless SIGHUP asked; one that
// does not parse or validate — or is half-written by an editor mid-save — is
// logged and changes nothing: the next write tries again.
type reloader struct {
	path string
	log  *slog.Logger
	pool *backend.Pool
	cs   *catalogSync
	live *liveServers

	mu      sync.Mutex   // serializes reloads
	applied *config.File // the config in effect
	hash    [sha256.Size]byte

	w      *config.Watcher
	wg     sync.WaitGroup
	cancel context.CancelFunc
}

// goRun starts watching; Close stops and waits.
func (r *reloader) goRun(ctx context.Context, hup <-chan os.Signal) {
	ctx, r.cancel = context.WithCancel(ctx)
	var changed <-chan struct{}
	w, err := config.Watch(r.path, &config.WatchOptions{Logger: r.log})
	if err != nil {
		r.log.Warn("not watching the config file for changes; send SIGHUP to reload it", "file", r.path, "err", err)
	} else {
		r.w, changed = w, w.C
	}
	r.wg.Add(1)
	go func() {
		defer r.wg.Done()
		// A change between the first read and the watch start.
		r.reload(ctx, "start", false)
		for {
			select {
			case <-ctx.Done():
				return
			case <-changed:
				r.reload(ctx, "file changed", false)
			case <-hup:
				r.reload(ctx, "SIGHUP", true)
			}
		}
	}()
}

func (r *reloader) Close() {
	if r.cancel != nil {
		r.cancel()
	}
	r.wg.Wait()
	if r.w != nil {
		r.w.Close()
	}
}

// reload reads the config file and applies what changed. force applies it
// even when the content is the same (SIGHUP).
func (r *reloader) reload(ctx context.Context, trigger string, force bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	start := time.Now()
	data, err := os.ReadFile(r.path)
	if err != nil {
		r.log.Error("config reload failed: cannot read the file; the previous config stays in effect", "file", r.path, "trigger", trigger, "err", err)
		return
	}
	h := sha256.Sum256(data)
	if h == r.hash && !force {
		r.log.Debug("config file content unchanged", "file", r.path, "trigger", trigger)
		return
	}
	r.hash = h // a bad file is reported once, not at every touch
	if len(bytes.TrimSpace(data)) == 0 {
		// Truncated by an editor that has not written yet, most likely.
		r.log.Warn("config reload skipped: the file is empty (being saved?); the previous config stays in effect", "file", r.path, "trigger", trigger)
		return
	}
	cfg, err := config.Parse(data, r.path, nil)
	if err != nil {
		r.log.Error("config reload failed: the new config is invalid; the previous config stays in effect (fix the file and save it again)",
			"file", r.path, "trigger", trigger, "err", err)
		return
	}
	servers := cfg.Servers()
	// Hide the removed servers' tools before the pool stops them, so there
	// is no moment at which search returns a tool that cannot run any more.
	r.live.setServers(servers)
	d := r.pool.Reconfigure(ctx, servers)
	if len(d.Added)+len(d.Removed)+len(d.Changed) > 0 {
		r.cs.refresh() // drop removed servers' tools from the index now; added ones follow as they list
	}
	if later := restartOnly(r.applied.Toolgate, cfg.Toolgate); len(later) > 0 {
		r.log.Warn("config settings changed; they take effect on restart", "file", r.path, "settings", later)
	}
	r.applied = cfg
	r.log.Info("config reloaded", "file", r.path, "trigger", trigger,
		"added", d.Added, "removed", d.Removed, "changed", d.Changed, "updated", d.Updated, "unchanged", d.Unchanged,
		"took", time.Since(start).Round(time.Microsecond))
}

// restartOnly names the settings of the toolgate section that differ and
// cannot change while serving. (connectTimeout and callTimeout are applied:
// Servers copies them into every server entry, and the pool takes them in
// place.)
func restartOnly(old, cur config.Settings) []string {
	var out []string
	for _, c := range []struct {
		name string
		a, b any
	}{
		{"toolgate.http", old.HTTP, cur.HTTP},
		{"toolgate.dataDir", old.DataDir, cur.DataDir},
		{"toolgate.embed", old.Embed, cur.Embed},
		{"toolgate.search", old.Search, cur.Search},
		{"toolgate.restart", old.Restart, cur.Restart},
		{"toolgate.maxConcurrentConnects", old.MaxConcurrentConnects, cur.MaxConcurrentConnects},
	} {
		if !reflect.DeepEqual(c.a, c.b) {
			out = append(out, c.name)
		}
	}
	return out
}

// version is set at build time with -ldflags "-X main.version=...".
var version = "dev"
