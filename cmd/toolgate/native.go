package main

import (
	"context"
	"errors"
	"io"
	"path/filepath"

	"github.com/spf13/cobra"

	"github.com/toolgate/toolgate/embed"
	"github.com/toolgate/toolgate/gateway/backend/oauth"
	"github.com/toolgate/toolgate/gateway/config"
	"github.com/toolgate/toolgate/index"
	"github.com/toolgate/toolgate/internal/dirs"
	"github.com/toolgate/toolgate/internal/storage"
)

// addEmbedFlags adds --ort-lib, --model-dir, --model-variant and --threads
// to cmd (internal/embedflags).
func (g *globals) addEmbedFlags(cmd *cobra.Command) { g.embedFlags.Register(cmd) }

// applyConfig takes the config file's settings that place files: dataDir,
// and embed (each below its flag and environment variable).
func (g *globals) applyConfig(s config.Settings) {
	g.configDataDir = s.DataDir
	g.embedFlags.ApplyConfig(s.Embed)
}

// embedOptions resolves the settings into embed.Options.
func (g *globals) embedOptions() (*embed.Options, error) {
	o, err := g.embedFlags.Options(g.DataDir(), g.logger)
	if err != nil {
		return nil, usageError{err}
	}
	return o, nil
}

// health is the data folder's health in this process, which every store
// writing there reports to (made once the config's dataDir is known).
func (g *globals) health() *storage.Health {
	if g.dataHealth == nil || g.dataHealth.Dir() != g.DataDir() {
		g.dataHealth = storage.New(g.DataDir(), &storage.Options{Logger: g.logger, Stores: g.dataStores()})
	}
	return g.dataHealth
}

// dataStores are the stores' folders in the data folder, which toolgate
// makes owner-only: what serve warns of and doctor reports when they are
// open to every user (storage.Exposed).
func (g *globals) dataStores() []string {
	d := g.DataDir()
	return []string{index.Dir(d), filepath.Dir(g.embeddingCacheDir()), g.embeddingCacheDir(), learnDir(g),
		filepath.Dir(dirs.Audit(d)), filepath.Join(d, oauth.StoreDir), filepath.Dir(dirs.Pins(d)), dirs.Sockets(d)}
}

// embeddingCacheDir is <data dir>/cache/embeddings.
func (g *globals) embeddingCacheDir() string { return dirs.EmbeddingCache(g.DataDir()) }

// openEmbedder returns the cached MiniLM embedder, or an error saying which
// native piece is missing and the command that installs it (callers then run
// BM25-only and say so). The closer closes the cache, then the model.
// tune, if set, adjusts the options (session layout, background load) to
// what the command embeds.
func (g *globals) openEmbedder(ctx context.Context, tune func(*embed.Options)) (index.Embedder, io.Closer, error) {
	return g.openEmbedderCache(ctx, tune, nil)
}

// openEmbedderCache is openEmbedder with tuneCache applied to the
// embedding cache's options (nil: as they are).
func (g *globals) openEmbedderCache(ctx context.Context, tune func(*embed.Options), tuneCache func(*embed.CacheOptions)) (index.Embedder, io.Closer, error) {
	if err := ctx.Err(); err != nil {
		return nil, nil, err
	}
	opts, err := g.embedOptions()
	if err != nil {
		return nil, nil, err
	}
	if tune != nil {
		tune(opts)
	}
	e, err := embed.New(opts)
	if err != nil {
		return nil, nil, err
	}
	log := g.logger
	// A command's start creates the data folder (serve's did already):
	// the cache of a first `toolgate index` used to find no folder, report
	// it as removed and store nothing. One that cannot be made is the
	// cache's fault, reported by its Check.
	_ = g.health().Prepare()
	w := g.health().Writer("embedding cache", "searches embed without storing new vectors")
	dir := g.embeddingCacheDir()
	// Another toolgate on the same data folder (each stdio client starts
	// one) may hold the cache: no fault, as the index's vectors are shared
	// and this one embeds only its queries and new tools anew. GET /status
	// says so until the other lets it go and this one takes it over.
	busy := func(busy bool) {
		if !busy {
			w.Shared("")
			return
		}
		pid := ""
		if p := lockPID(dir); p != "" {
			pid = " (pid " + p + ")"
		}
		w.Shared("held by another toolgate on the data folder" + pid + ": this one embeds without the cache until that one stops")
	}
	// A model loaded at its first need (serve in bm25 mode, eval) has
	// its cache opened then too.
	copts := &embed.CacheOptions{Logger: log, Storage: w, Busy: busy, Unused: g.embedFlags.KeepUnused(), Lazy: opts.Lazy}
	if tuneCache != nil {
		tuneCache(copts)
	}
	c, err := embed.NewCached(e, dir, copts)
	if err != nil {
		if log != nil {
			log.Warn("embedding cache unavailable; embedding without it", "dir", dir, "err", err)
		}
		return e, e, nil
	}
	return c, closers{c, e}, nil
}

// closers closes each in order and joins the errors.
type closers []io.Closer

func (cs closers) Close() error {
	var errs []error
	for _, c := range cs {
		errs = append(errs, c.Close())
	}
	return errors.Join(errs...)
}
