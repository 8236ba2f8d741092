package live

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"slices"
	"syscall"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolgate/toolgate/gateway/backend"
	"github.com/toolgate/toolgate/gateway/config"
	"github.com/toolgate/toolgate/index"
	"github.com/toolgate/toolgate/index/catalog"
	"github.com/toolgate/toolgate/internal/storage"
)

// refresh asks the sync loop for a re-index. The request and
// Stats.Reindexing change together, under the lock.
func (l *Loop) refresh() {
	l.update(func(s *Stats) {
		s.Reindexing = true
		select {
		case l.kick <- struct{}{}:
		default: // one is queued already
		}
	})
}

// settled clears Stats.Reindexing after a build unless another request
// came meanwhile.
func (l *Loop) settled(s *Stats) {
	if len(l.kick) == 0 {
		s.Reindexing = false
	}
}

// syncLoop keeps the index in step with the pool: each request is let
// settle for Debounce (many backends connecting make one rebuild), then the
// merged catalog is indexed off to the side and swapped in. Tools of a
// backend that is down stay in the catalog (marked unavailable in results),
// so results are stable across restarts.
//
// While the index served is one built in memory (the data folder could
// not take it), the loop looks at the folder every StorageRetry and, once
// it can take writes, re-indexes to write the index there.
func (l *Loop) syncLoop(ctx context.Context) {
	defer l.wg.Done()
	retry := time.NewTimer(l.opts.StorageRetry)
	defer retry.Stop()
	// An embedder that installs its model late (the files fetched while
	// serving) says so: the re-index comes at once, not at the next look.
	var installed <-chan struct{}
	if in, ok := l.opts.Embedder.(interface{ Installed() <-chan struct{} }); ok {
		installed = in.Installed()
	}
	for {
		retry.Reset(l.opts.StorageRetry)
		select {
		case <-ctx.Done():
			return
		case <-l.kick:
		case <-installed:
			installed = nil // closed once
			l.reindexForModel(ctx)
			continue
		case <-retry.C:
			l.retryHeldState()
			if l.reindexForModel(ctx) {
				continue
			}
			inMemory := l.Stats().IndexInMemory
			gone := !inMemory && l.indexGone()
			if !inMemory && !gone || l.opts.Storage.Check() != nil {
				continue
			}
			if gone {
				// Removed with the data folder (rm -rf, then mkdir -p): the
				// index is served from its open files, and written again,
				// so that the next start is a warm one.
				l.log.Info("the index's folder was removed: writing the index there again", "dir", l.dir)
				l.mu.Lock()
				l.servedFP = ""
				l.mu.Unlock()
			} else {
				l.log.Info("the data folder takes writes again: writing the index there", "dir", l.dir)
			}
			l.refresh()
			continue
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(l.opts.Debounce):
		}
		ix, inMemory, err := l.build(ctx)
		if err == nil && ix == nil {
			// The catalog is the one served: nothing to swap. The servers'
			// descriptions may still have changed (a first listing says
			// what a server is).
			l.update(l.settled)
			l.changedHook()
			l.settledHook(l.Catalog())
			l.sweepCache(ctx, true)
			continue
		}
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			l.log.Error("re-index after a tool list change failed; still serving the previous index", "err", err)
			now := time.Now()
			l.update(func(s *Stats) {
				s.LastIndexError, s.LastIndexErrorAt = err.Error(), now
				l.settled(s)
			})
			continue
		}
		l.eng.Load().Swap(ix)
		l.swapped(ix, inMemory)
		l.changedHook()
		l.settledHook(ix.Tools())
		l.sweepCache(ctx, true)
	}
}

// settledHook calls Options.Settled with the catalog served.
func (l *Loop) settledHook(tools []catalog.Tool) {
	if l.opts.Settled != nil {
		l.opts.Settled(tools)
	}
}

// indexGone reports whether the index's folder is not there any more
// (removed under a running gateway).
func (l *Loop) indexGone() bool {
	_, err := os.Stat(l.dir)
	return errors.Is(err, fs.ErrNotExist)
}

// swapped tells Options.Indexed of an index that is now served, then
// counts it (so that what Indexed did is done when the count moves).
func (l *Loop) swapped(ix *index.Index, inMemory bool) {
	fp := ""
	if emb := l.opts.Embedder; !inMemory && (emb == nil || emb.ModelID() == "" || emb.ModelID() == ix.ModelID() || !l.vectorsWanted()) {
		fp = ix.Fingerprint()
	}
	l.mu.Lock()
	l.servedFP, l.servedModel = fp, ix.ModelID()
	l.mu.Unlock()
	if l.opts.Indexed != nil {
		l.opts.Indexed(ix.Tools())
	}
	per := map[string]int{}
	for _, t := range ix.Tools() {
		per[t.Server]++
	}
	l.update(func(s *Stats) {
		s.CatalogGeneration++
		l.servedTools = per // update counts s.CatalogTools from it
		s.IndexInMemory = inMemory
		l.settled(s)
	})
}

// build makes the index of the merged catalog (see Merge) in the index
// folder, or in memory (inMemory) when the data folder cannot take it. It
// returns a nil index when the merged catalog is the one served (the
// backends' first listings after a warm start, usually): opening the same
// index a second time would only cost time and memory.
func (l *Loop) build(ctx context.Context) (ix *index.Index, inMemory bool, err error) {
	l.mu.Lock()
	prev, served := l.current, l.servedFP
	l.mu.Unlock()
	live := l.pool.Tools()
	for name, tools := range l.opts.Builtin {
		live[name] = tools
	}
	cfg := l.applied.Load()
	configured := l.catalogued(cfg)
	tools := mergeCatalog(prev, l.catalogOf(live), configured)
	SetLanguages(tools, cfg)
	if served != "" && catalog.Fingerprint(tools) == served && !l.modelBack(ctx) {
		l.log.Debug("re-index skipped: the catalog is the one served", "tools", len(tools))
		l.toSweep = l.sweepable(tools, live, configured)
		return nil, false, nil
	}
	st := l.opts.Storage
	if serr := st.Check(); serr != nil { // reported by Check
		ix, err = l.buildInMemory(ctx, tools)
		return ix, err == nil, err
	}
	var lend []*index.Index
	if eng := l.eng.Load(); eng != nil {
		served, release := eng.Borrow()
		defer release()
		if served != nil {
			lend = append(lend, served)
		}
	}
	ix, rep, err := index.EnsureReport(ctx, l.dir, tools, l.embedder(ctx), &index.Options{Logger: l.log, LockWait: l.opts.LockWait, MkdirAll: l.opts.Storage.MkdirAll, Progress: l.progress, Config: l.applied.Load().Source(), Lend: lend})
	if err != nil {
		if ctx.Err() == nil && storageFault(err, st) {
			st.Fail(fmt.Errorf("write the index in %s: %w", l.dir, err))
			ix, err = l.buildInMemory(ctx, tools)
			return ix, err == nil, err
		}
		return nil, false, fmt.Errorf("build the index in %s: %w (deleting that folder is safe)", l.dir, err)
	}
	st.OK()
	l.mu.Lock()
	l.current = ix.Tools()
	l.mu.Unlock()
	l.log.Info("index ready", "tools", ix.Len(), "state", rep.Before, "added", rep.Added, "changed", rep.Changed, "removed", rep.Removed, "embedded", rep.Embedded, rep.ByModel(), "took", rep.Duration.Round(time.Millisecond))
	l.toSweep = l.sweepable(tools, live, configured)
	return ix, false, nil
}

// sweepable is tools, the catalog a build indexed (or found served), to
// sweep the embedding cache with once it is served (sweepCache); nil when
// a configured server has no tools in it (down, or not listed yet at a
// cold start), whose vectors the cache keeps for when it comes back.
func (l *Loop) sweepable(tools []catalog.Tool, live map[string][]*mcp.Tool, configured []string) []catalog.Tool {
	has := map[string]bool{}
	for _, t := range tools {
		has[t.Server] = true
	}
	for _, name := range configured {
		if _, listed := live[name]; !listed && !has[name] {
			l.log.Debug("embedding cache not swept: a configured server's tools are not known yet", "server", name)
			return nil
		}
	}
	return tools
}

// sweepCache sweeps the embedding cache (embed.Cached.Sweep, which does
// its work at most daily) with the catalog of the last build (sweepable),
// after the index is served. With compact, a sweep that dropped vectors
// is followed by the cache's compaction (Cached.Compact), so that their
// disk space comes back; searches do not wait for it (about half a second
// at 10,000 tools, at most once a day). Only the goroutine that builds
// calls it.
func (l *Loop) sweepCache(ctx context.Context, compact bool) {
	tools := l.toSweep
	l.toSweep = nil
	c, ok := l.opts.Embedder.(interface {
		Sweep(context.Context, []string) (dropped int, err error)
	})
	if tools == nil || !ok || l.opts.Embedder.ModelID() == "" {
		return
	}
	dropped, err := c.Sweep(ctx, index.DocumentTexts(l.opts.Embedder, tools))
	if err != nil {
		if ctx.Err() == nil {
			l.log.Warn("embedding cache not swept", "err", err)
		}
		return
	}
	if dropped == 0 || !compact {
		return
	}
	if c, ok := l.opts.Embedder.(interface{ Compact() error }); ok {
		if err := c.Compact(); err != nil {
			l.log.Warn("embedding cache not compacted after its sweep", "err", err)
		}
	}
}

// embedder is the embedder an index is built with: Options.Embedder, or
// nil (an index for BM25 only) when it loads in the background and its
// load failed (out of memory or descriptors: ulimit -v, MemoryMax=, ulimit
// -n) or its files are not installed yet. Searches run BM25-only then, as
// the embedder's log line says; a build that asked it for vectors used to
// fail with its load error, and with it the start (exit status 1) or
// every re-index.
//
// In bm25 mode (toolgate.search.mode, serve --mode) no search reads the
// vectors, so the index is built without them (vectorsWanted): a cold
// start of 50,000 tools embedded them all, some 20 minutes on two loaded
// cores, and its searches said "the tool index is being built" until
// then. A reload to a mode that reads them builds them in the background
// (modelBack) while the BM25 index answers.
func (l *Loop) embedder(ctx context.Context) index.Embedder {
	emb := l.opts.Embedder
	if !l.vectorsWanted() {
		return nil
	}
	if r, ok := emb.(interface{ Ready(context.Context) error }); ok {
		if err := r.Ready(ctx); err != nil && ctx.Err() == nil {
			return nil
		}
	}
	return emb
}

// vectorsWanted reports whether the ranking in effect reads the index's
// vectors: its default mode is not bm25 (search.Mode.NeedsVectors). The
// engine's options once it serves; before that (a cold start's first
// index) the options it will start with (serve).
func (l *Loop) vectorsWanted() bool {
	if eng := l.eng.Load(); eng != nil {
		return eng.Options().Mode.NeedsVectors()
	}
	o := l.opts.Search
	if cur := l.applied.Load().Toolgate.Search; l.opts.SearchFrom != nil && !same(l.started.Search, cur) {
		o = l.opts.SearchFrom(cur)
	}
	return o == nil || o.Mode.NeedsVectors()
}

// vectorsNeeded asks for a re-index when the mode now reads vectors that
// the served index lacks (it was built in bm25 mode): they are built in
// the background, and the index without them answers meanwhile (BM25
// only, as GET /status says). The build waits for the model's load, not
// the reload. A model whose load waits for a first need (serve in bm25
// mode: embed.Options.Lazy) starts loading now, in the background, so
// that the mode's first search waits for it no longer than a hybrid
// start's does.
func (l *Loop) vectorsNeeded() {
	emb := l.opts.Embedder
	if emb == nil || !l.vectorsWanted() {
		return
	}
	if s, ok := emb.(interface{ Start() }); ok {
		s.Start()
	}
	l.mu.Lock()
	served := l.servedModel
	l.mu.Unlock()
	if m := emb.ModelID(); m != "" && m != served {
		l.log.Info("the search mode reads vectors the index lacks: building them in the background; searches run BM25-only until then", "model", m)
		l.refresh()
	}
}

// reindexForModel asks for a re-index when the model is back (modelBack),
// and says whether it did.
func (l *Loop) reindexForModel(ctx context.Context) bool {
	if !l.modelBack(ctx) {
		return false
	}
	l.log.Info("the embedding model loaded: re-indexing with its vectors", "model", l.opts.Embedder.ModelID())
	l.refresh()
	return true
}

// modelBack reports whether the embedder is ready with a model whose
// vectors the served index does not hold: it was built without vectors
// because the model had failed to load (the embedder tries again when the
// failure was for want of memory or descriptors) or was not installed yet
// (the embedder loads its files when they come), or its vectors are
// another model's. Then a re-index gives searches the model's vectors.
func (l *Loop) modelBack(ctx context.Context) bool {
	emb := l.opts.Embedder
	if emb == nil || !l.vectorsWanted() {
		return false
	}
	l.mu.Lock()
	served := l.servedModel
	l.mu.Unlock()
	if emb.ModelID() == served {
		return false
	}
	r, ok := emb.(interface{ Ready(context.Context) error })
	return !ok || r.Ready(ctx) == nil // loaded in the background, or at once
}

// buildInMemory indexes tools in memory: the same ranking, nothing
// written.
func (l *Loop) buildInMemory(ctx context.Context, tools []catalog.Tool) (*index.Index, error) {
	start := time.Now()
	ix, err := index.Build(ctx, tools, l.embedder(ctx), &index.Options{Logger: l.log, Progress: l.progress})
	if err != nil {
		return nil, fmt.Errorf("build the index in memory: %w", err)
	}
	l.mu.Lock()
	l.current = ix.Tools()
	l.mu.Unlock()
	l.log.Info("index ready, in memory: the data folder cannot take it (see GET /status, storage)", "tools", ix.Len(), "took", time.Since(start).Round(time.Millisecond))
	return ix, nil
}

// storageFault reports whether err, a failed index write, is the data
// folder's fault (it cannot take writes now, or err says it is full,
// read-only, gone or denied) rather than the catalog's or the embedder's.
// A process out of file descriptors (EMFILE, ENFILE: many clients, a low
// open-files limit) is served the same way: the index in memory needs no
// descriptor, and the loop writes it to the folder once it can (it used
// to stop a start with exit status 1, and leave a re-index undone). So is
// a file-size limit (EFBIG: ulimit -f, LimitFSIZE=) that a segment outgrew.
func storageFault(err error, st Storage) bool {
	if storage.WriteFault(err) {
		return true
	}
	// Bleve loses the errno of a file it could not open.
	return descriptorsShort() || st.Check() != nil
}

// descriptorsMargin is how close to its open-files limit the process counts
// as out of descriptors (descriptorsShort): other goroutines take and give
// back descriptors all the time.
const descriptorsMargin = 8

// descriptorsShort reports whether the process is out of file descriptors
// now, or within a few of its soft limit. It is asked after a failure whose
// error may have lost the errno (Bleve reads a segment or its mapping that
// it could not open as empty, and says the mapping does not parse), seen
// under ulimit -n 32: the failure was then most likely the shortage's.
func descriptorsShort() bool {
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		return false
	}
	fds, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		return errors.Is(err, syscall.EMFILE) || errors.Is(err, syscall.ENFILE)
	}
	return uint64(len(fds))+descriptorsMargin >= lim.Cur
}

// openWarm opens the index of the last run when it can answer for this
// config right away: it exists, was built with the same model, and holds
// no server that is no longer configured (servers names those that are).
// It returns the index and its tools, or nil and why not (coldWhy's
// words, which a search during the cold start gives).
func (l *Loop) openWarm(servers []string, config string) (*index.Index, []catalog.Tool, string) {
	// The data folder's index, or the one kept for this config when the
	// gateway of another config wrote the index since (index.OpenFor).
	ix, err := index.OpenFor(l.dir, servers, &index.Options{Logger: l.log, Config: config, AnyFormat: true})
	if errors.Is(err, index.ErrSnapshotFormat) {
		// An upgrade (or a rollback) across a change of the catalog
		// snapshot: expected, and said as such, not as a fault.
		why := "the index in the data folder is another toolgate version's: this one builds its own once, from the servers' listings (vectors from the embedding cache)"
		l.log.Info("not starting warm: "+why, "dir", l.dir, "err", err)
		return nil, nil, why
	}
	if err != nil {
		l.log.Debug("no warm index", "dir", l.dir, "err", err)
		if st, _, _ := index.Inspect(l.dir, "", nil); st == index.StateMissing {
			return nil, nil, ""
		}
		return nil, nil, "the index in the data folder could not be read"
	}
	configured := map[string]bool{}
	for _, s := range servers {
		configured[s] = true
	}
	reason := ""
	// An embedder whose model is not installed yet (ModelID "") takes
	// the index as it is: searches run BM25-only until the model comes,
	// and its vectors are the model's when they are the same files.
	// In bm25 mode the index's vectors, or their absence, do not matter.
	// An index without vectors (built in bm25 mode) answers BM25-only
	// while the loop builds them (vectorsNeeded): it used to be a cold
	// start that embedded every tool before its searches answered.
	if emb := l.opts.Embedder; emb != nil && emb.ModelID() != "" && ix.ModelID() != "" && ix.ModelID() != emb.ModelID() && l.vectorsWanted() {
		reason = "it was built with another model"
	}
	tools := ix.Tools()
	for _, t := range tools {
		if !configured[t.Server] {
			reason = fmt.Sprintf("it holds server %q, which this config does not list", t.Server)
			break
		}
	}
	if reason != "" {
		l.log.Info("not starting warm: the index in the data folder does not fit this config; rebuilding once backends connect", "why", reason)
		ix.Close()
		return nil, nil, "the index in the data folder does not fit this config: " + reason
	}
	return ix, tools, ""
}

// Merge is the catalog to index when some backends' live lists are not
// known yet (warm start, a backend down, still connecting or disabled):
// servers in live (Pool.Tools) take their live tools; configured servers
// missing from live keep their tools from prev, so results stay stable
// across restarts; servers that are no longer configured are dropped.
// `toolgate index` merges with it too.
func Merge(prev []catalog.Tool, live map[string][]*mcp.Tool, configured []string) []catalog.Tool {
	conv := make(map[string][]catalog.Tool, len(live))
	for server, tools := range live {
		conv[server] = backend.Catalog(map[string][]*mcp.Tool{server: tools})
	}
	return mergeCatalog(prev, conv, configured)
}

// mergeCatalog is Merge of the live tools as the catalog has them, by server.
func mergeCatalog(prev []catalog.Tool, live map[string][]catalog.Tool, configured []string) []catalog.Tool {
	n := 0
	for _, tools := range live {
		n += len(tools)
	}
	out := make([]catalog.Tool, 0, n)
	for _, tools := range live {
		out = append(out, tools...)
	}
	for _, t := range prev {
		if _, ok := live[t.Server]; !ok && slices.Contains(configured, t.Server) {
			out = append(out, t)
		}
	}
	catalog.SortByID(out)
	return out
}

// SetLanguages gives each tool its server's language as cfg says it
// (config.Server.Language; English, "", for the built-in servers and a
// server cfg does not have): what the index reads its texts in. Merge's
// tools are its own copies, for this. serve and `toolgate index
// --config` both call it.
func SetLanguages(tools []catalog.Tool, cfg *config.File) {
	langs := map[string]string{}
	for _, s := range cfg.Servers() {
		if l, err := catalog.CanonicalLanguage(s.Language); err == nil && l != "" {
			langs[s.Name] = l
		}
	}
	for i := range tools {
		tools[i].Language = langs[tools[i].Server]
	}
}

// converted is one server's listing as the catalog has it
// (backend.Catalog), and the listing it was made of.
type converted struct {
	from  []*mcp.Tool
	tools []catalog.Tool
}

// catalogOf is live (Pool.Tools) as the catalog has it, by server. A
// server whose listing is the one converted at the last build (the same
// tool definitions: a listing replaces them) keeps that conversion: each
// build converted every server's tools again, encoding each input schema,
// and at 100 servers and 50,000 tools that was half of serve's CPU when
// one server restarted or said its list changed.
func (l *Loop) catalogOf(live map[string][]*mcp.Tool) map[string][]catalog.Tool {
	l.convMu.Lock()
	defer l.convMu.Unlock()
	next := make(map[string]converted, len(live))
	out := make(map[string][]catalog.Tool, len(live))
	for server, tools := range live {
		c, ok := l.conv[server]
		if !ok || !slices.Equal(c.from, tools) {
			c = converted{from: tools, tools: backend.Catalog(map[string][]*mcp.Tool{server: tools})}
		}
		next[server], out[server] = c, c.tools
	}
	l.conv = next
	return out
}
