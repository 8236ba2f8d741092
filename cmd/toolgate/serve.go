package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
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

	emb, embCloser, embErr := g.openEmbedder(ctx)
	if embErr != nil {
		log.Warn("semantic ranking is off: search_tools runs BM25-only and says \"mode\": \"bm25\"", "reason", embErr)
		emb, embCloser = nil, io.NopCloser(nil)
	}
	defer embCloser.Close()

	refresh := make(chan struct{}, 1)
	pool := backend.New(cfg.Servers(), &backend.Options{
		Logger:                log,
		ConnectTimeout:        cfg.Toolgate.ConnectTimeout.Duration,
		CallTimeout:           cfg.Toolgate.CallTimeout.Duration,
		MaxConcurrentConnects: cfg.Toolgate.MaxConcurrentConnects,
		OnToolsChanged: func(string, []*mcp.Tool) {
			select {
			case refresh <- struct{}{}:
			default:
			}
		},
	})
	defer pool.Close()
	pool.Start(ctx)
	for _, st := range pool.Status() {
		if st.State != "up" {
			log.Warn("backend is down; its tools are not offered", "server", st.Name, "err", st.Err)
		}
	}

	indexDir := filepath.Join(g.DataDir(), "index")
	ix, state, err := index.Ensure(ctx, indexDir, gateway.Catalog(pool.Tools()), emb, &index.Options{Logger: log})
	if err != nil {
		return fmt.Errorf("build the index in %s: %w (deleting that folder is safe)", indexDir, err)
	}
	log.Info("index ready", "tools", ix.Len(), "state", state, "dir", indexDir)

	s := cfg.Toolgate.Search
	mode := search.Mode(s.Mode)
	if f.mode != "" {
		mode = search.Mode(f.mode)
	}
	eng := search.New(ix, emb, &search.Options{Mode: mode, KeywordWeight: s.KeywordWeight, VectorWeight: s.VectorWeight, Logger: log})
	defer eng.Close()

	// Keep the index in step with the backends: a tools/list_changed or a
	// reconnect re-lists; the new index is swapped in atomically, so
	// searches never wait for it.
	var wg sync.WaitGroup
	rctx, stopRefresh := context.WithCancel(ctx)
	defer func() { stopRefresh(); wg.Wait() }()
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			select {
			case <-rctx.Done():
				return
			case <-refresh:
			}
			// Let a burst of changes settle into one rebuild.
			select {
			case <-rctx.Done():
				return
			case <-time.After(200 * time.Millisecond):
			}
			nix, st, err := index.Ensure(rctx, indexDir, gateway.Catalog(pool.Tools()), emb, &index.Options{Logger: log})
			if err != nil {
				if rctx.Err() == nil {
					log.Error("re-index after a tool list change failed; still serving the previous index", "err", err)
				}
				continue
			}
			eng.Swap(nix)
			log.Info("index updated", "tools", nix.Len(), "state", st)
		}
	}()

	gw := gateway.New(eng, pool, &gateway.Options{
		Logger:       log,
		Version:      version,
		DefaultLimit: s.DefaultLimit,
		MaxLimit:     s.MaxLimit,
	})
	if d, _ := eng.Degraded(); d {
		log.Warn("search_tools runs BM25-only (mode bm25)")
	}
	log.Info("gateway ready", "servers", len(cfg.Servers()), "tools", ix.Len(), "startup", time.Since(start).Round(time.Millisecond))

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
	})
	return gateway.ListenAndServe(ctx, f.http, h, f.allowRemote, log)
}

// version is set at build time with -ldflags "-X main.version=...".
var version = "dev"
