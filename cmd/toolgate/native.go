package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/spf13/cobra"

	"github.com/toolgate/toolgate/embed"
	"github.com/toolgate/toolgate/gateway/config"
	"github.com/toolgate/toolgate/index"
	"github.com/toolgate/toolgate/models"
)

// embedSettings are the embedder flags of one command line.
type embedSettings struct {
	ortLib   string // --ort-lib / $TOOLGATE_ORT_LIB
	modelDir string // --model-dir / $TOOLGATE_MODELS_DIR: the models folder
	variant  string // --model-variant
	threads  int    // --threads
}

func (g *globals) embed() *embedSettings { return &g.embedFlags }

// addEmbedFlags adds --ort-lib, --model-dir, --model-variant and --threads
// to cmd. Environment: TOOLGATE_ORT_LIB, TOOLGATE_MODELS_DIR.
func (g *globals) addEmbedFlags(cmd *cobra.Command) {
	s := g.embed()
	f := cmd.Flags()
	f.StringVar(&s.ortLib, "ort-lib", os.Getenv("TOOLGATE_ORT_LIB"),
		"ONNX Runtime shared library (default $TOOLGATE_ORT_LIB, else the copy scripts/fetch-onnxruntime.sh caches)")
	f.StringVar(&s.modelDir, "model-dir", os.Getenv("TOOLGATE_MODELS_DIR"),
		"models folder holding "+embed.ModelName+"/ (default $TOOLGATE_MODELS_DIR or <data dir>/models)")
	f.StringVar(&s.variant, "model-variant", "", "embedding model variant: fp32 (default) or int8")
	f.IntVar(&s.threads, "threads", 0, "ONNX Runtime intra-op threads (default: number of CPUs)")
}

// applyEmbedSettings fills what neither a flag nor the environment set from
// the config file's "toolgate"."embed" section.
func (g *globals) applyEmbedSettings(c config.EmbedSettings) {
	s := g.embed()
	if s.ortLib == "" {
		s.ortLib = c.ORTLib
	}
	if s.modelDir == "" {
		s.modelDir = c.ModelDir
	}
	if s.variant == "" {
		s.variant = c.Variant
	}
	if s.threads == 0 {
		s.threads = c.Threads
	}
}

// embedOptions resolves the settings into embed.Options.
func (g *globals) embedOptions() (*embed.Options, error) {
	s := g.embed()
	v, err := embed.ParseVariant(s.variant)
	if err != nil {
		return nil, usageError{fmt.Errorf("--model-variant: %w", err)}
	}
	if s.threads < 0 {
		return nil, usageError{fmt.Errorf("--threads %d: want 0 (default) or more", s.threads)}
	}
	return &embed.Options{
		ORTLib:   s.ortLib,
		ModelDir: g.modelFolder(),
		Variant:  v,
		Threads:  s.threads,
		Logger:   g.logger,
	}, nil
}

// modelFolder is the folder holding model.onnx and tokenizer.json. A
// --model-dir naming that folder itself (rather than the models folder
// above it) is accepted too.
func (g *globals) modelFolder() string {
	s := g.embed()
	if s.modelDir == "" {
		return models.ModelDir(models.Dir(g.DataDir()))
	}
	if _, err := os.Stat(filepath.Join(s.modelDir, embed.TokenizerFile)); err == nil {
		return s.modelDir
	}
	return models.ModelDir(s.modelDir)
}

// embeddingCacheDir is <data dir>/cache/embeddings.
func (g *globals) embeddingCacheDir() string {
	return filepath.Join(g.DataDir(), "cache", "embeddings")
}

// openEmbedder returns the cached MiniLM embedder, or an error saying which
// native piece is missing and the command that installs it (callers then run
// BM25-only and say so). The closer closes the cache, then the model.
func (g *globals) openEmbedder(ctx context.Context) (index.Embedder, io.Closer, error) {
	if err := ctx.Err(); err != nil {
		return nil, nil, err
	}
	opts, err := g.embedOptions()
	if err != nil {
		return nil, nil, err
	}
	e, err := embed.New(opts)
	if err != nil {
		return nil, nil, err
	}
	log := g.logger
	c, err := embed.NewCached(e, g.embeddingCacheDir(), &embed.CacheOptions{Logger: log})
	if err != nil {
		if log != nil {
			log.Warn("embedding cache unavailable; embedding without it", "dir", g.embeddingCacheDir(), "err", err)
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
