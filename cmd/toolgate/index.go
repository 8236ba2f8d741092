package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/spf13/cobra"
	"golang.org/x/term"

	"github.com/toolgate/toolgate/embed"
	"github.com/toolgate/toolgate/gateway/config"
	"github.com/toolgate/toolgate/gateway/live"
	"github.com/toolgate/toolgate/gateway/mgmt"
	"github.com/toolgate/toolgate/index"
	"github.com/toolgate/toolgate/index/catalog"
	"github.com/toolgate/toolgate/internal/plural"
	"github.com/toolgate/toolgate/internal/shutdown"
)

func init() {
	register(newIndexCmd)
	registerDoctorCheck(doctorIndex)
}

type indexFlags struct {
	tools     string
	configs   []string
	json      bool
	noVectors bool
}

func newIndexCmd(g *globals) *cobra.Command {
	f := &indexFlags{}
	cmd := &cobra.Command{
		Use:   "index (--tools FILE.jsonl | --config FILE [--config FILE...])",
		Short: "Build or refresh the search index in the data folder, without serving",
		Long: `index builds the search index ahead of time, so that serve starts warm and
search works without any backend. --tools reads tools in the bench format, one
{"server","name","description","input_schema"} object per line; --config
connects to the configured backends and lists their tools. --config may be
given several times: the files are read as one, as serve reads them. A
server that cannot be listed keeps the tools the index had for it, with a
warning; the index is built, and the exit status is 3.

The index is rebuilt only when it is missing, from another format, made with
another model, or the catalog changed; otherwise it is left as it is. Tools
whose text did not change keep their vectors, and the embedding cache answers
texts embedded before, so re-indexing after a small change is cheap. A
build that is killed leaves the previous index in place. Two index runs on
one data folder are refused.

Without the embedding model (see toolgate doctor) the index is built for
BM25 only, with a warning.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if f.tools != "" && !cmd.Flags().Changed("config") {
				f.configs = nil // --tools wins over $TOOLGATE_CONFIG
			}
			return readerMayLeave(g, "index", func() error { return runIndex(cmd.Context(), g, f, cmd.OutOrStdout(), cmd.ErrOrStderr()) })
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&f.tools, "tools", "", "tools file (bench JSONL: server, name, description, input_schema)")
	configsFlag(cmd, &f.configs)
	fl.BoolVar(&f.json, "json", false, "print the result as one JSON object")
	fl.BoolVar(&f.noVectors, "bm25-only", false, "do not load the embedding model; build a keyword-only index")
	g.addEmbedFlags(cmd)
	return cmd
}

// indexResult is what `toolgate index` prints (also as --json).
type indexResult struct {
	Dir         string  `json:"dir"`
	StateBefore string  `json:"stateBefore"`
	Rebuilt     bool    `json:"rebuilt"`
	Tools       int     `json:"tools"`
	Added       int     `json:"added"`
	Changed     int     `json:"changed"`
	Removed     int     `json:"removed"`
	Embedded    int     `json:"embedded"`              // texts sent to the embedder
	CacheHits   *int64  `json:"cacheHits,omitempty"`   // of those, answered by the embedding cache
	CacheMisses *int64  `json:"cacheMisses,omitempty"` // of those, computed by the model
	Reused      int     `json:"reused"`                // vectors kept from the previous index
	Reindexed   int     `json:"reindexed"`             // keyword documents written to Bleve
	Incremental bool    `json:"incremental,omitempty"` // Bleve updated from the previous generation
	Model       string  `json:"model,omitempty"`       // "" = BM25 only
	Generation  int     `json:"generation"`
	Seconds     float64 `json:"seconds"`
	Warning     string  `json:"warning,omitempty"`
	// Unlisted are the servers of --config that could not be listed (exit
	// status 3).
	Unlisted []unlisted `json:"unlisted,omitempty"`
}

func runIndex(ctx context.Context, g *globals, f *indexFlags, stdout, stderr io.Writer) error {
	if (f.tools == "") == (len(f.configs) == 0) {
		return usageError{errors.New("index needs exactly one of --tools FILE.jsonl or --config FILE")}
	}
	start := time.Now()
	// The verdicts of the tools' input schemas saved by the last build or
	// serve: only the schemas they lack are resolved, and all are saved
	// again for serve's next start (catalog.FlawLog).
	var flaws catalog.FlawLog
	saved := index.ReadChecks(index.Dir(g.DataDir()))
	flaws.Seed(saved)
	var tools []catalog.Tool
	var down []unlisted
	var source string // the config's (config.File.Source): "" for a tools file
	var err error
	if f.tools != "" {
		// A file that is not a tools file is the flag's wrong value
		// (exit status 2), as eval says of it.
		if tools, err = catalog.ReadFile(f.tools); err != nil {
			return wrongBenchFile("--tools", f.tools, "tools", "a queries file is for eval --queries (with its tools file as --tools) or learn --queries", err)
		}
		flaws.Review(stderr, f.tools, tools)
	} else {
		tools, down, source, err = g.listBackendTools(ctx, f.configs, &flaws, stderr)
	}
	if err != nil {
		return err
	}
	// A catalog other than a running gateway's (a tools file's, another
	// config's) no longer replaces the index that gateway starts from: the
	// index folder keeps the last generation of each config
	// (index.Manifest.Others), which its next start opens.

	// The data folder made here, owner-only (serve's start would): the
	// index's own mkdir made it 0755 on the way to index/ (--bm25-only).
	_ = g.health().Prepare()
	res := indexResult{Dir: index.Dir(g.DataDir()), Unlisted: down}
	var emb index.Embedder
	if !f.noVectors {
		e, closer, err := g.openEmbedder(ctx, nil)
		if err != nil {
			var ue usageError
			if errors.As(err, &ue) {
				return err
			}
			res.Warning = "semantic ranking off, building a BM25-only index: " + err.Error()
			fmt.Fprintf(stderr, "toolgate: warning: %s\n", res.Warning)
		} else {
			emb = e
			defer closer.Close()
		}
	}

	prog := newIndexProgress(stderr, "embedding", "tools", f.json)
	ix, rep, err := index.EnsureReport(ctx, res.Dir, tools, emb, &index.Options{Logger: g.logger, Progress: prog.update, Config: source})
	prog.finish()
	if err != nil {
		if ctx.Err() != nil {
			return shutdown.Stopped(ctx, err, "the index was built", fmt.Sprintf("the index in %s is as it was (run the command again to build it)", res.Dir))
		}
		return fmt.Errorf("index %s: %w", res.Dir, err)
	}
	defer ix.Close()
	// Not saved, serve's next start checks the schemas itself.
	if _, err := index.SaveChecks(res.Dir, flaws.Checks(ix.Tools()), saved); err != nil {
		g.logger.Debug("the verdicts of the tools' input schemas are not saved: the next serve checks them again", "err", err)
	}

	res.StateBefore = string(rep.Before)
	res.Rebuilt = rep.Rebuilt
	res.Tools = ix.Len()
	res.Added, res.Changed, res.Removed = rep.Added, rep.Changed, rep.Removed
	res.Embedded, res.Reused = rep.Embedded, rep.Reused
	res.Reindexed, res.Incremental = rep.Reindexed, rep.Incremental
	res.Model = ix.ModelID()
	res.Generation = rep.Generation
	if s, ok := emb.(interface{ Stats() embed.CacheStats }); ok && rep.Embedded > 0 {
		st := s.Stats()
		res.CacheHits, res.CacheMisses = &st.Hits, &st.Misses
	}
	// The vectors just stored, put into one level of the cache: otherwise
	// the first serve sessions after this compact them (embed.Cached.Compact).
	// Before, the vectors of texts out of the catalog for long are swept
	// away (when due), unless a server could not be listed: its vectors
	// are kept for when it is back (as serve does).
	if c, ok := emb.(*embed.Cached); ok {
		if f.tools == "" && len(down) == 0 {
			if _, err := c.Sweep(ctx, index.DocumentTexts(emb, ix.Tools())); err != nil {
				g.logger.Warn("embedding cache not swept", "err", err)
			}
		}
		t := time.Now()
		if err := c.Compact(); err != nil {
			g.logger.Warn("embedding cache not compacted; the first searches of the next serve will", "err", err)
		} else {
			g.logger.Debug("embedding cache compacted", "took", time.Since(t).Round(time.Millisecond))
		}
	}
	res.Seconds = time.Since(start).Seconds()

	if f.json {
		if err := json.NewEncoder(stdout).Encode(res); err != nil {
			return err
		}
	} else {
		printIndexResult(stdout, res)
	}
	return unlistedError(down)
}

// unlistedError is index --config's exit when servers could not be listed:
// the index is built, with the others' tools (and theirs from before), but
// a script that bakes an index wants to know it lacks some (exit status 3,
// as a degraded `toolgate status`).
func unlistedError(down []unlisted) error {
	if len(down) == 0 {
		return nil
	}
	names := make([]string, len(down))
	for i, u := range down {
		names[i] = fmt.Sprintf("%s (%s)", u.Server, u.State)
	}
	return exitError{fmt.Errorf("the index is built, but not every server could be listed: %s; the warnings above say why: mend them and run toolgate index --config again", strings.Join(names, ", ")), degradedExit}
}

func printIndexResult(w io.Writer, r indexResult) {
	fmt.Fprintf(w, "index:        %s\n", r.Dir)
	fmt.Fprintf(w, "state before: %s\n", r.StateBefore)
	if !r.Rebuilt {
		fmt.Fprintf(w, "tools:        %d (unchanged, nothing rebuilt)\n", r.Tools)
	} else {
		fmt.Fprintf(w, "tools:        %d (added %d, changed %d, removed %d)\n", r.Tools, r.Added, r.Changed, r.Removed)
		if r.Incremental {
			fmt.Fprintf(w, "keyword:      %d documents re-indexed (incremental update)\n", r.Reindexed)
		} else {
			fmt.Fprintf(w, "keyword:      %d documents indexed (full build)\n", r.Reindexed)
		}
		switch {
		case r.Model == "":
			fmt.Fprintf(w, "vectors:      none (BM25 only)\n")
		case r.CacheHits != nil:
			fmt.Fprintf(w, "vectors:      %d kept from the previous index, %d embedded (%d from the embedding cache, %d by the model)\n",
				r.Reused, r.Embedded, *r.CacheHits, *r.CacheMisses)
		default:
			fmt.Fprintf(w, "vectors:      %d kept from the previous index, %d embedded\n", r.Reused, r.Embedded)
		}
	}
	if r.Model != "" {
		fmt.Fprintf(w, "model:        %s\n", r.Model)
	}
	fmt.Fprintf(w, "generation:   %d\n", r.Generation)
	fmt.Fprintf(w, "time:         %.2fs\n", r.Seconds)
}

// indexProgress shows embedding progress on stderr: a redrawn bar on a
// terminal, a plain line every tenth otherwise, nothing when quiet (index
// --json). verb is what is done ("embedding", eval's "searching hybrid"),
// noun what is counted ("tools", "queries").
type indexProgress struct {
	mu       sync.Mutex
	w        io.Writer
	verb     string
	noun     string
	tty      bool
	quiet    bool
	lastStep int
	drawn    bool
	start    time.Time
}

func newIndexProgress(w io.Writer, verb, noun string, quiet bool) *indexProgress {
	tty := false
	if f, ok := w.(*os.File); ok {
		tty = term.IsTerminal(int(f.Fd()))
	}
	return &indexProgress{w: w, verb: verb, noun: noun, tty: tty, quiet: quiet, lastStep: -1, start: time.Now()}
}

func (p *indexProgress) update(done, total int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.quiet || total == 0 {
		return
	}
	if p.tty {
		const width = 30
		n := width * done / total
		fmt.Fprintf(p.w, "\r%s [%s%s] %d/%d %s", p.verb, strings.Repeat("=", n), strings.Repeat(" ", width-n), done, total, p.noun)
		p.drawn = true
		return
	}
	if step := 10 * done / total; step != p.lastStep {
		p.lastStep = step
		fmt.Fprintf(p.w, "%s: %d/%d %s (%.0fs)\n", p.verb, done, total, p.noun, time.Since(p.start).Seconds())
	}
}

func (p *indexProgress) finish() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.drawn {
		fmt.Fprintln(p.w)
		p.drawn = false
	}
}

// doctorIndex adds the index state to `toolgate doctor`. It does not compare
// the catalog (doctor connects to no backend) nor the model.
func doctorIndex(_ context.Context, g *globals, cfg *config.File) doctorCheck {
	dir := index.Dir(g.DataDir())
	c := doctorCheck{Name: "index", Path: dir}
	st, m, err := index.Inspect(dir, "", nil)
	c.Indexes = doctorIndexes(dir, cfg)
	var start *doctorIndexEntry // a kept index --config's gateway starts warm from
	for i, d := range c.Indexes {
		if d.StartsFrom && !d.Current && d.Opens && d.NotFit == "" && d.Format == index.FormatVersion {
			start = &c.Indexes[i]
		}
	}
	switch {
	case err != nil:
		c.Status, c.Detail = statusBad, err.Error()
	case st == index.StateMissing:
		c.Status, c.Detail = statusOptional, "no index yet: serve builds it on start"
		c.Fix = "toolgate index --config FILE (or --tools FILE.jsonl) builds it ahead of time"
	case st != index.StateUpToDate && start != nil:
		// The current index is another config's, and the one this
		// config starts from is kept: the state of the current one is
		// its config's concern.
		of := "no config"
		if m != nil && m.Config != "" {
			of = m.Config
		}
		c.Status = statusOK
		c.Detail = fmt.Sprintf("%s, kept for --config; the current index, of %s, is %s: rebuilt on its config's next serve or index run",
			indexSummary(start.Tools, start.Model, start.Generation, start.Created), of, st)
	case st != index.StateUpToDate:
		c.Status, c.Detail = statusOptional, string(st)+": rebuilt on the next serve or index run"
		c.Fix = "toolgate index --config FILE"
	default:
		c.Status = statusOK
		c.Detail = indexSummary(m.Tools, m.ModelID, m.Generation, m.Created)
	}
	return c
}

// indexSummary is an index in doctor's index line: "12 tools,
// all-MiniLM-L6-v2, generation 3, built 2026-12-07T07:00:00Z".
func indexSummary(tools int, model string, generation int, created time.Time) string {
	if model == "" {
		model = "BM25 only"
	}
	return fmt.Sprintf("%s, %s, generation %d, built %s", plural.Of(tools, "tool"), model, generation, created.Format(time.RFC3339))
}

// doctorIndexEntry is one index the data folder keeps, as `toolgate doctor`
// lists it (the index check's "indexes").
type doctorIndexEntry struct {
	// Config is the config it was built for ("" = none: a tools file, or
	// a toolgate from before 2026-12-07), Servers its catalog's servers.
	Config     string    `json:"config,omitempty"`
	Servers    []string  `json:"servers,omitempty"`
	Tools      int       `json:"tools"`
	Generation int       `json:"generation"`
	Created    time.Time `json:"created"`
	Format     int       `json:"format"`
	Model      string    `json:"model,omitempty"` // "" = BM25 only
	// Current is the index built last, the one a gateway without a
	// config (and `toolgate search` without one) reads; the others are
	// kept for their configs' gateways.
	Current bool `json:"current"`
	// Opens says whether its files open; Error why not.
	Opens bool   `json:"opens"`
	Error string `json:"error,omitempty"`
	// StartsFrom marks the index the gateway of the --config given
	// starts warm from (index.OpenFor), and NotFit why it would not
	// (a server of it the config does not list: a cold start).
	StartsFrom bool   `json:"startsFrom,omitempty"`
	NotFit     string `json:"notFit,omitempty"`
}

func (d doctorIndexEntry) String() string {
	kind, cfg := "kept", d.Config
	if d.Current {
		kind = "current"
	}
	if cfg == "" {
		cfg = "no config (a tools file, or an older toolgate)"
	}
	s := fmt.Sprintf("%s: %s, %s", kind, cfg, plural.Of(d.Tools, "tool"))
	if len(d.Servers) > 0 {
		s += " (" + strings.Join(d.Servers, ", ") + ")"
	}
	if ago := time.Since(d.Created).Round(time.Second); ago >= 0 {
		s += fmt.Sprintf(", generation %d, built %s ago", d.Generation, ago)
	} else {
		// A wall time from the data folder: the clock set back since (or
		// the folder copied from a machine whose clock ran ahead) made it
		// "built -1h0m0s ago".
		s += fmt.Sprintf(", generation %d, built at %s, ahead of this machine's clock (set back since?)", d.Generation, d.Created.UTC().Format(time.RFC3339))
	}
	if d.Format != index.FormatVersion {
		s += fmt.Sprintf(", format %d (this toolgate reads %d)", d.Format, index.FormatVersion)
	}
	if d.Opens {
		s += ", opens"
	} else {
		s += ", does not open: " + d.Error
	}
	if d.StartsFrom {
		s += "; --config starts from it"
		if d.NotFit != "" {
			s += ", but " + d.NotFit + ": its gateway starts cold"
		}
	}
	return s
}

// doctorIndexes lists the indexes the index folder dir keeps, and with a
// config, which one its gateway starts from.
func doctorIndexes(dir string, cfg *config.File) []doctorIndexEntry {
	kept, err := index.Indexes(dir)
	if err != nil || len(kept) == 0 {
		return nil // the index line says it
	}
	var start *index.Manifest
	var servers []string
	if cfg != nil {
		servers = live.Catalogued(cfg, mgmt.Name)
		start, _ = index.StartingPoint(dir, servers, &index.Options{Config: cfg.Source(), AnyFormat: true})
	}
	out := make([]doctorIndexEntry, 0, len(kept))
	for _, k := range kept {
		d := doctorIndexEntry{Config: k.Config, Servers: k.Servers, Tools: k.Tools, Generation: k.Generation, Created: k.Created,
			Format: k.Format, Model: k.ModelID, Current: k.Current, Opens: k.Err == nil}
		if k.Err != nil {
			d.Error = k.Err.Error()
		}
		if start != nil && start.Generation == k.Generation {
			d.StartsFrom = true
			for _, s := range k.Servers {
				if !slices.Contains(servers, s) {
					d.NotFit = fmt.Sprintf("it holds server %q, which the config does not list", s)
					break
				}
			}
		}
		out = append(out, d)
	}
	return out
}
