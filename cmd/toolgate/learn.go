package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"

	"github.com/spf13/cobra"

	"github.com/toolgate/toolgate/gateway/config"
	"github.com/toolgate/toolgate/index"
	"github.com/toolgate/toolgate/index/catalog"
	"github.com/toolgate/toolgate/internal/storage"
	"github.com/toolgate/toolgate/search"
	"github.com/toolgate/toolgate/search/learn"
)

func init() { register(newLearnCmd) }

type learnFlags struct {
	queries string
	reset   bool
	server  string
}

func newLearnCmd(g *globals) *cobra.Command {
	f := &learnFlags{}
	cmd := &cobra.Command{
		Use:   "learn [--queries FILE.jsonl | --reset [--server S]]",
		Short: "Seed, show or forget what search learned from use",
		Long: `toolgate serve records a (query, tool) pair whenever a session runs a tool
that one of its recent search_tools answers returned, and ranks with these
pairs (toolgate.learn.enabled, default true). They live in the data folder
(learn/). See the README section "What toolgate learns from use".

Without flags, learn prints how many pairs and tools it holds.
--queries FILE.jsonl records every (query, relevant tool) of a file in the
eval format (../shared/bench), as if each query had led to its tools.
--reset forgets every pair, or with --server S only those of S's tools:
the ranking is then exactly the zero-shot one.

The store is locked while toolgate serve runs: stop it first.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runLearn(cmd.Context(), g, f, cmd.OutOrStdout())
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&f.queries, "queries", "", "record the (query, relevant tool) pairs of this file (eval format)")
	fl.BoolVar(&f.reset, "reset", false, "forget the learned pairs (all, or --server's)")
	fl.StringVar(&f.server, "server", "", "with --reset: forget only this server's tools' pairs")
	return cmd
}

// learnDir is where the learned pairs live in the data folder.
func learnDir(g *globals) string { return filepath.Join(g.DataDir(), "learn") }

// openLearning opens the learned pairs serve ranks with and records to, or
// returns nil when toolgate.learn turns learning off or the store cannot be
// opened (logged: serving goes on without it).
func (g *globals) openLearning(cfg *config.File, health *storage.Health) *learn.Store {
	if !cfg.Toolgate.Learn.LearnEnabled() {
		return nil
	}
	store, err := learn.Open(learnDir(g), &learn.Options{Logger: g.logger, Storage: health.Writer("learned pairs", "pairs are not recorded")})
	if err != nil {
		g.logger.Warn("learning from use is off for this run", "err", err)
		return nil
	}
	return store
}

// syncLearned checks the learned pairs against each new catalog
// (learn.Store.Sync: a tool whose text changed materially loses its pairs).
func syncLearned(store *learn.Store, log *slog.Logger) func([]catalog.Tool) {
	return func(tools []catalog.Tool) {
		if _, err := store.Sync(tools); err != nil {
			log.Warn("learned pairs not checked against the catalog", "err", err)
		}
	}
}

func openLearnStore(g *globals, log *slog.Logger) (*learn.Store, error) {
	return learn.Open(learnDir(g), &learn.Options{Logger: log})
}

func runLearn(_ context.Context, g *globals, f *learnFlags, out io.Writer) error {
	switch {
	case f.reset && f.queries != "":
		return usageError{errors.New("learn: give either --queries or --reset, not both")}
	case f.server != "" && !f.reset:
		return usageError{errors.New("learn: --server goes with --reset (forget one server's pairs)")}
	}
	log := g.logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	store, err := openLearnStore(g, log)
	if err != nil {
		return err
	}
	defer store.Close()
	switch {
	case f.reset:
		n, err := store.Reset(f.server)
		if err != nil {
			return err
		}
		what := "every tool"
		if f.server != "" {
			what = fmt.Sprintf("server %s's tools", f.server)
		}
		fmt.Fprintf(out, "forgot %d learned pairs of %s\n", n, what)
		return nil
	case f.queries != "":
		qs, err := search.LoadQueries(f.queries)
		if err != nil {
			return err
		}
		// The index of the data folder, when there is one, gives each
		// tool's definition to keep beside its pairs.
		defs := map[string]catalog.Tool{}
		if ix, err := index.Open(index.Dir(g.DataDir()), &index.Options{Logger: log}); err == nil {
			for _, t := range ix.Tools() {
				defs[t.ID()] = t
			}
			ix.Close()
		}
		var pairs []learn.Pair
		for _, q := range qs {
			for _, id := range q.Relevant {
				pairs = append(pairs, learn.Pair{Query: q.Query, Tool: id})
			}
		}
		for start := 0; start < len(pairs); start += 1000 {
			if err := store.Add(pairs[start:min(start+1000, len(pairs))], defs); err != nil {
				return err
			}
		}
		n, tools := store.Stats()
		fmt.Fprintf(out, "recorded %d pairs from %s; the store holds %d pairs for %d tools\n", len(pairs), f.queries, n, tools)
		return nil
	}
	n, tools := store.Stats()
	fmt.Fprintf(out, "%d learned pairs for %d tools in %s\n", n, tools, learnDir(g))
	return nil
}
