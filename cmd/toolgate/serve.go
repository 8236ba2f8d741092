package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/spf13/cobra"

	"github.com/toolgate/toolgate/gateway"
	"github.com/toolgate/toolgate/gateway/backend"
	"github.com/toolgate/toolgate/gateway/config"
	"github.com/toolgate/toolgate/index"
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
GET /healthz on a loopback address.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runServe(cmd.Context(), g, f)
		},
	}
	cmd.Flags().StringVarP(&f.config, "config", "c", os.Getenv("TOOLGATE_CONFIG"), "config file (mcpServers JSON; $TOOLGATE_CONFIG)")
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
	cfg, err := config.Load(f.config)
	if err != nil {
		return err
	}
	if g.dataDir == "" && cfg.Toolgate.DataDir != "" {
		g.dataDir = cfg.Toolgate.DataDir
	}
	g.applyEmbedSettings(cfg.Toolgate.Embed)
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
	// tools from the snapshot; one the snapshot lacks starts now, once.
	known := map[string]bool{}
	for _, t := range cs.current {
		known[t.Server] = true
	}
	opts := g.backendOptions(cfg)
	opts.OnToolsChanged = cs.changed
	opts.Lazy = func(s config.Server) bool { return s.Lazy && known[s.Name] }
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

	gw := gateway.New(eng, pool, &gateway.Options{
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
	current []index.Tool // the catalog the engine serves

	wg     sync.WaitGroup
	cancel context.CancelFunc
}

// lockWait bounds how long serve waits for another toolgate (a second
// client's gateway, or `toolgate index`) building in the same data folder.
const lockWait = 2 * time.Minute

func (c *catalogSync) changed(string, []*mcp.Tool) {
	select {
	case c.kick <- struct{}{}:
	default:
	}
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

// version is set at build time with -ldflags "-X main.version=...".
var version = "dev"
