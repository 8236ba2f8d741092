package index

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/blevesearch/bleve/v2"
	"github.com/toolgate/toolgate/index/catalog"
	"github.com/toolgate/toolgate/internal/storage"
	"golang.org/x/sys/unix"
)

// On-disk layout of an index folder (by convention <data-dir>/index, see Dir):
//
//	LOCK             flock'd by the process that builds (refuses a second builder)
//	manifest.json    names the current generation; replaced by rename only
//	gen-<n>/bleve/   the Bleve (scorch) index
//	gen-<n>/catalog.bin   the tools with their schemas, in row order (the warm-start snapshot; see snapshot.go)
//	gen-<n>/vectors.f32   header + rows×dim little-endian float32, row i = catalog[i]
//
// A generation is written completely and synced before the manifest names
// it, so killing the process at any moment leaves the previous or the new
// generation current, never a partial one. The manifest also names the
// generation last built for each other config (Manifest.Others, KeepOthers
// at most: gateways of other configs on the data folder start from and
// reuse them). Generations it does not name are leftovers and are removed
// by the next build.
const (
	indexSubdir   = "index"
	manifestFile  = "manifest.json"
	lockFile      = "LOCK"
	genPrefix     = "gen-"
	bleveSubdir   = "bleve"
	catalogFile   = "catalog.bin"
	vectorsFile   = "vectors.f32"
	vectorsMagic  = "TGV1"
	vectorsHeader = 16 // magic, rows uint32, dim uint32, reserved uint32

	// FormatVersion changes whenever the on-disk layout or the analyzer
	// changes in a way an older index cannot serve, or DocumentText changes
	// (vectors are reused only within one format); such an index is rebuilt.
	// 2: DocumentText without parameters.
	// 3: BM25F, with the keyword field lengths in the manifest.
	// 4: the catalog snapshot carries each tool's annotations ("TGC2").
	// 5: a tool's vector is the mean of its views' (catalog.Views).
	// 6: the lead-sentence view is written as a request (catalog.RequestView).
	// 7: the catalog snapshot carries each tool's output schema ("TGC3").
	FormatVersion = 7
)

// State names why an index on disk can or cannot be used as it is.
type State string

const (
	StateMissing        State = "missing"
	StateFormatChanged  State = "format changed"
	StateModelChanged   State = "model changed"
	StateCatalogChanged State = "catalog changed"
	StateUpToDate       State = "up to date"
)

// Manifest describes the current generation of an index on disk.
type Manifest struct {
	Format      int       `json:"format"`
	Analyzer    string    `json:"analyzer"`           // token filter chain; a change means "format changed"
	ModelID     string    `json:"model_id,omitempty"` // "" = BM25 only
	Dim         int       `json:"dim,omitempty"`
	Fingerprint string    `json:"fingerprint"` // catalog.Fingerprint(tools)
	Tools       int       `json:"tools"`
	Generation  int       `json:"generation"`
	Created     time.Time `json:"created"`
	// KeywordTerms counts the distinct terms of each keyword field's live
	// documents, kept by incremental updates (see checkCardinalities);
	// absent after a full build.
	KeywordTerms map[string]int `json:"keyword_terms,omitempty"`
	// KeywordLengths counts the tokens of each keyword field over all
	// tools: BM25F's average field lengths (see keyword.go).
	KeywordLengths map[string]int64 `json:"keyword_lengths"`
	// Config names the config it was built for (Options.Config; absent
	// for none), Servers the servers of its catalog, sorted (both absent
	// in a manifest written before 2026-12-07).
	Config  string   `json:"config,omitempty"`
	Servers []string `json:"servers,omitempty"`
	// Languages are the servers whose tools are in another language than
	// English, each with its code (Tool.Language; absent for none): the
	// catalog snapshot does not keep it, an index opened takes it from
	// here. Analyzer names those languages' filters too.
	Languages map[string]string `json:"languages,omitempty"`
	// Others are the manifests of the generations kept for other configs
	// than Config (gateways of other configs on the data folder), the last
	// of each, newest first, KeepOthers at most (those of another format
	// too: a gateway of another toolgate version, which only it reads);
	// their own Others are empty.
	Others []Manifest `json:"others,omitempty"`
}

// KeepOthers is how many generations of other configs than the current
// one's an index folder keeps (see Manifest.Others).
const KeepOthers = 3

// signatureOf is the analyzer signature this toolgate writes for an index
// of m's languages: a manifest whose Analyzer differs is another
// toolgate version's.
func signatureOf(m *Manifest) string {
	var langs []string
	for _, l := range m.Languages {
		if !slices.Contains(langs, l) {
			langs = append(langs, l)
		}
	}
	slices.Sort(langs)
	return analyzerSignature(langs...)
}

// Dir is the index folder inside a data folder: what Ensure, Open and
// Inspect take.
func Dir(dataDir string) string { return filepath.Join(dataDir, indexSubdir) }

func genDir(ixDir string, gen int) string {
	return filepath.Join(ixDir, genPrefix+strconv.Itoa(gen))
}

func readManifest(ixDir string) (*Manifest, error) {
	b, err := os.ReadFile(filepath.Join(ixDir, manifestFile))
	if err != nil {
		return nil, err
	}
	var m Manifest
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, fmt.Errorf("index manifest %s: %w", filepath.Join(ixDir, manifestFile), err)
	}
	return &m, nil
}

// Inspect reports the state of the index in the index folder dir for a given
// embedder model and catalog, and the manifest when there is one. modelID ""
// accepts any model (an index with vectors still serves BM25), and nil tools
// skip the catalog comparison. A broken manifest is "format changed", not an
// error: the caller rebuilds.
func Inspect(dir string, modelID string, tools []catalog.Tool) (State, *Manifest, error) {
	fp := ""
	if tools != nil {
		fp = catalog.Fingerprint(tools)
	}
	return inspect(dir, modelID, fp)
}

// inspect is Inspect with the catalog's fingerprint ("" = any catalog).
func inspect(dir string, modelID string, fp string) (State, *Manifest, error) {
	ixDir := dir
	m, err := readManifest(ixDir)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return StateMissing, nil, nil
	case err != nil:
		// Garbled, truncated, foreign or unreadable: rebuild over it.
		return StateFormatChanged, nil, nil
	}
	if m.Format != FormatVersion || m.Analyzer != signatureOf(m) || m.Generation <= 0 {
		return StateFormatChanged, m, nil
	}
	if st, err := os.Stat(genDir(ixDir, m.Generation)); err != nil || !st.IsDir() {
		return StateFormatChanged, m, nil
	}
	if modelID != "" && modelID != m.ModelID {
		return StateModelChanged, m, nil
	}
	if fp != "" && fp != m.Fingerprint {
		return StateCatalogChanged, m, nil
	}
	return StateUpToDate, m, nil
}

// Report says what Ensure did, for `toolgate index` and logs.
type Report struct {
	Before   State     // state found on disk
	Manifest *Manifest // manifest of the generation now current
	Rebuilt  bool
	Tools    int
	Added    int // vs the previous generation's catalog (all tools when there was none)
	Changed  int
	Removed  int
	Embedded int // tools sent to the embedder (its own cache may still answer them)
	// ModelTexts is how many texts the embedder's model embedded for
	// Embedded's tools, the others answered by its cache; -1 when the
	// embedder does not say (one without a cache).
	ModelTexts int
	Reused     int // vectors copied from the previous generation (same model, same text)
	Duration   time.Duration
	Generation int

	// Reindexed is how many Bleve documents the build indexed or deleted:
	// every tool for a full build; for an incremental one the tools added,
	// those whose Bleve document changed, and those removed.
	Reindexed   int
	Incremental bool // the Bleve index was updated from the previous generation's, not rebuilt
}

// ByModel is the log attribute of ModelTexts, "by_model": the texts the
// model embedded, the rest from the embedding cache ("unknown" when the
// embedder does not say).
func (r Report) ByModel() slog.Attr {
	if r.ModelTexts < 0 {
		return slog.String("by_model", "unknown")
	}
	return slog.Int("by_model", r.ModelTexts)
}

// Ensure opens the index in the index folder dir (created if needed; by
// convention Dir(dataDir)) if it is up to date for
// tools and emb, and otherwise builds a new generation and swaps it in. With
// a nil emb the index is BM25 only (an existing index with vectors and the
// same catalog is still opened as it is). Another process building in the
// same folder makes Ensure fail with a message that says so.
func Ensure(ctx context.Context, dir string, tools []catalog.Tool, emb Embedder, opts *Options) (*Index, State, error) {
	ix, rep, err := EnsureReport(ctx, dir, tools, emb, opts)
	return ix, rep.Before, err
}

// EnsureReport is Ensure that also says what it did.
func EnsureReport(ctx context.Context, dir string, tools []catalog.Tool, emb Embedder, opts *Options) (*Index, Report, error) {
	start := time.Now()
	log := opts.logger()
	rep := Report{Tools: len(tools)}
	ixDir := dir
	if err := opts.mkdirAll(ixDir, storage.FolderMode); err != nil {
		return nil, rep, fmt.Errorf("create index folder: %w", err)
	}
	unlock, err := lockDirWait(ctx, ixDir, opts)
	if err != nil {
		return nil, rep, err
	}
	defer unlock()

	modelID := ""
	if emb != nil {
		modelID = emb.ModelID()
	}
	fp := "" // nil tools: whatever catalog is on disk (as Inspect)
	if tools != nil {
		fp = catalog.Fingerprint(tools)
	}
	state, prev, err := inspect(dir, modelID, fp)
	if err != nil {
		return nil, rep, err
	}
	rep.Before = state
	if state == StateFormatChanged {
		// An older (or newer) toolgate's index is what an upgrade finds:
		// expected, not a fault; a manifest that does not read, or a
		// generation gone, is one.
		if prev != nil && prev.Config != "" && prev.Config != opts.config() && prev.Format != FormatVersion {
			log.Info("index on disk is another toolgate version's, for another config's gateway; keeping it for that one and building this config's", "format", prev.Format, "this_version_reads", FormatVersion, "config", prev.Config, "dir", ixDir)
		} else if prev != nil && prev.Format > FormatVersion {
			log.Info("index on disk is a newer toolgate's (a rollback?); rebuilding it for this one, and the newer toolgate rebuilds its own when it runs here again", "format", prev.Format, "this_version_reads", FormatVersion, "dir", ixDir)
		} else if prev != nil && (prev.Format != FormatVersion || prev.Analyzer != signatureOf(prev)) {
			log.Info("index on disk is from another toolgate version; rebuilding it", "format", prev.Format, "this_version_reads", FormatVersion, "dir", ixDir)
		} else {
			log.Warn("index on disk is unreadable; rebuilding", "dir", ixDir)
		}
	}
	if state == StateUpToDate {
		ix, err := openGen(ixDir, prev)
		if err == nil {
			rep.Manifest, rep.Generation, rep.Duration = prev, prev.Generation, time.Since(start)
			return ix, rep, nil
		}
		log.Warn("index on disk is up to date but does not open; rebuilding", "dir", ixDir, "err", err)
		rep.Before = StateFormatChanged
	}

	sorted, _, _, err := prepareTools(tools)
	if err != nil {
		return nil, rep, err
	}
	// The previous catalog (and its vectors, when the model is the same)
	// tell what changed and which embeddings can be kept.
	var old *Index
	// Vectors are reused only from the same format: DocumentText may differ
	// between formats.
	if prev != nil && prev.Generation > 0 && prev.Format == FormatVersion {
		if o, err := openGen(ixDir, prev); err == nil {
			old = o
			defer old.Close()
		}
	}
	// The generations kept for other configs (their gateways on the data
	// folder) stay, and lend their vectors too.
	others := othersAfter(ixDir, prev, opts.config())
	more := func(servers []string) []*Index { // this config's kept one too: it is replaced once written
		if prev == nil {
			return nil
		}
		return openOthers(ixDir, prev.Others, modelID, servers)
	}
	diff := diffCatalog(old, sorted)
	rep.Added, rep.Changed, rep.Removed = diff.added, diff.changed, diff.removed

	gen := nextGeneration(ixDir, prev)
	gd := genDir(ixDir, gen)
	if err := os.RemoveAll(gd); err != nil {
		return nil, rep, fmt.Errorf("clear %s: %w", gd, err)
	}
	// The previous generation's Bleve index is updated rather than rebuilt
	// only when it was made by the same format and analyzer.
	var base updateBase
	// (A change of the catalog's languages rebuilds it: an index of
	// English tools only may come from a toolgate whose mapping had none.)
	if old != nil && (rep.Before == StateCatalogChanged || rep.Before == StateModelChanged) && prev.Analyzer == analyzerSignature(languagesOf(sorted)...) {
		base = updateBase{ix: old, dir: filepath.Join(genDir(ixDir, prev.Generation), bleveSubdir), terms: prev.KeywordTerms, lengths: prev.KeywordLengths}
	}
	if fp == "" {
		fp = catalog.Fingerprint(sorted)
	}
	man, err := writeGeneration(ctx, gd, sorted, fp, emb, old, more, base, diff, opts, &rep)
	if err != nil {
		_ = os.RemoveAll(gd)
		return nil, rep, err
	}
	man.Generation, man.Config, man.Servers, man.Others = gen, opts.config(), ServersOf(sorted), others
	if err := writeManifest(ixDir, man); err != nil {
		_ = os.RemoveAll(gd)
		return nil, rep, err
	}
	keep := []int{gen}
	for _, o := range others {
		keep = append(keep, o.Generation)
	}
	removeOtherGenerations(ixDir, keep, log)
	ix, err := openGen(ixDir, man)
	if err != nil {
		return nil, rep, fmt.Errorf("open new index generation: %w", err)
	}
	rep.Rebuilt, rep.Manifest, rep.Generation = true, man, gen
	rep.Duration = time.Since(start)
	log.Info("index built", "dir", ixDir, "state_before", string(rep.Before), "tools", len(sorted),
		"added", rep.Added, "changed", rep.Changed, "removed", rep.Removed,
		"embedded", rep.Embedded, rep.ByModel(), "reused", rep.Reused, "reindexed", rep.Reindexed, "incremental", rep.Incremental,
		"generation", gen, "duration", rep.Duration)
	return ix, rep, nil
}

// nextGeneration is one above every generation number present, so a
// leftover directory of a crashed build is never mistaken for a good one.
func nextGeneration(ixDir string, prev *Manifest) int {
	n := 0
	if prev != nil {
		n = prev.Generation
	}
	entries, _ := os.ReadDir(ixDir)
	for _, e := range entries {
		if g, ok := parseGen(e.Name()); ok && g > n {
			n = g
		}
	}
	return n + 1
}

func parseGen(name string) (int, bool) {
	s, ok := strings.CutPrefix(name, genPrefix)
	if !ok {
		return 0, false
	}
	g, err := strconv.Atoi(s)
	return g, err == nil && g > 0
}

func removeOtherGenerations(ixDir string, keep []int, log interface {
	Warn(string, ...any)
}) {
	entries, _ := os.ReadDir(ixDir)
	for _, e := range entries {
		if g, ok := parseGen(e.Name()); ok && !slices.Contains(keep, g) {
			if err := os.RemoveAll(filepath.Join(ixDir, e.Name())); err != nil {
				log.Warn("remove old index generation", "dir", e.Name(), "err", err)
			}
		}
	}
}

// writeGeneration writes catalog (with fingerprint fp), vectors and Bleve
// index into gd and syncs them. Vectors are reused from old, then from
// more's (called, with the servers of the tools old lacks vectors for,
// only when it lacks some; nil: none); the Bleve index
// is updated from base's by diff when that is worth it (see writeBleve); a
// zero base means a full build. It returns the manifest for the generation
// (Generation unset).
func writeGeneration(ctx context.Context, gd string, tools []catalog.Tool, fp string, emb Embedder, old *Index, more func(servers []string) []*Index, base updateBase, diff catalogDiff, opts *Options, rep *Report) (*Manifest, error) {
	if err := storage.MkdirBelow(filepath.Dir(gd), gd, 0o755); err != nil {
		return nil, fmt.Errorf("create index generation: %w", err)
	}
	if err := writeFileSync(filepath.Join(gd, catalogFile), encodeCatalog(tools)); err != nil {
		return nil, err
	}
	langs, err := serverLanguages(tools)
	if err != nil {
		return nil, err
	}
	man := &Manifest{
		Format:      FormatVersion,
		Analyzer:    analyzerSignature(languagesOf(tools)...),
		Languages:   langs,
		Fingerprint: fp,
		Tools:       len(tools),
		Created:     time.Now().UTC().Truncate(time.Second),
	}
	rep.ModelTexts = -1
	if emb != nil {
		use := emb
		counted := countModel(emb)
		if counted != nil {
			use = counted
		}
		vecs, embedded, reused, err := embedReusing(ctx, tools, use, old, more, opts)
		if err != nil {
			return nil, err
		}
		rep.Embedded, rep.Reused = embedded, reused
		if counted != nil {
			rep.ModelTexts = int(counted.model.Load())
		}
		if err := writeVectors(filepath.Join(gd, vectorsFile), vecs, len(tools), emb.Dim()); err != nil {
			return nil, err
		}
		man.ModelID, man.Dim = emb.ModelID(), emb.Dim()
	}
	bl, err := writeBleve(ctx, filepath.Join(gd, bleveSubdir), tools, base, diff, opts.logger())
	if err != nil {
		return nil, err
	}
	rep.Reindexed, rep.Incremental, man.KeywordTerms, man.KeywordLengths = bl.reindexed, bl.incremental, bl.terms, bl.lengths
	if err := syncTree(gd); err != nil {
		return nil, fmt.Errorf("sync index generation: %w", err)
	}
	return man, nil
}

// embedReusing embeds the tools whose document text has no vector in the
// previous generation of the same model, nor in more's (the generations
// kept for other server sets, opened only when old lacks some), and copies
// the others' vectors.
func embedReusing(ctx context.Context, tools []catalog.Tool, emb Embedder, old *Index, more func(servers []string) []*Index, opts *Options) (vecs []float32, embedded, reused int, err error) {
	dim := emb.Dim()
	if dim <= 0 {
		return nil, 0, 0, fmt.Errorf("embedder %s reports dimension %d", emb.ModelID(), dim)
	}
	vecs = make([]float32, len(tools)*dim)
	todo := make([]int, 0, len(tools)) // rows of tools with no vector found yet
	for i := range tools {
		todo = append(todo, i)
	}
	if todo, err = copyVectors(tools, todo, vecs, emb, old); err != nil {
		return nil, 0, 0, err
	}
	if opts != nil {
		for _, ix := range opts.Lend {
			if len(todo) > 0 {
				if todo, err = copyVectors(tools, todo, vecs, emb, ix); err != nil {
					return nil, 0, 0, err
				}
			}
		}
	}
	if len(todo) > 0 && more != nil {
		lack := make([]catalog.Tool, len(todo))
		for k, i := range todo {
			lack[k] = tools[i]
		}
		for _, o := range more(ServersOf(lack)) {
			if len(todo) > 0 {
				todo, err = copyVectors(tools, todo, vecs, emb, o)
			}
			o.Close()
			if err != nil {
				return nil, 0, 0, err
			}
		}
	}
	reused = len(tools) - len(todo)
	if len(todo) > 0 {
		batch := make([]catalog.Tool, len(todo))
		for k, i := range todo {
			batch[k] = tools[i]
		}
		part, err := embedAll(ctx, batch, emb, opts)
		if err != nil {
			return nil, 0, 0, err
		}
		for k, i := range todo {
			copy(vecs[i*dim:(i+1)*dim], part[k*dim:(k+1)*dim])
		}
	} else {
		opts.progress(0, 0)
	}
	return vecs, len(todo), reused, nil
}

// copyVectors copies into vecs the vectors that src (an index of emb's
// model, or nil) holds for the tools of rows, with the same views, and
// returns the rows it held none for.
func copyVectors(tools []catalog.Tool, rows []int, vecs []float32, emb Embedder, src *Index) ([]int, error) {
	dim := emb.Dim()
	if src == nil || !src.HasVectors() || src.ModelID() != emb.ModelID() || src.Dim() != dim {
		return rows, nil
	}
	var left []int
	var to []int // src row → the new row its vector is copied to, or -1
	for _, i := range rows {
		t := tools[i]
		if j, ok := src.byID[t.ID()]; ok && slices.Equal(catalog.Views(src.tools[j]), catalog.Views(t)) {
			if to == nil {
				to = make([]int, len(src.tools))
				for k := range to {
					to[k] = -1
				}
			}
			to[j] = i
			continue
		}
		left = append(left, i)
	}
	if to == nil {
		return rows, nil
	}
	// One pass over the source's rows, in order.
	err := src.eachRows(0, len(src.tools), func(first int, chunk []float32) {
		for r := range len(chunk) / dim {
			if i := to[first+r]; i >= 0 {
				copy(vecs[i*dim:(i+1)*dim], chunk[r*dim:(r+1)*dim])
			}
		}
	})
	if err != nil {
		return nil, fmt.Errorf("read the previous generation's vectors: %w", err)
	}
	return left, nil
}

func buildBleveOnDisk(ctx context.Context, path string, tools []catalog.Tool) error {
	if len(tools) == 0 {
		// Bleve's builder panics closing an empty build (it moves its
		// first segment into place, and there is none): an empty catalog
		// (every backend down at a cold start) gets an empty index.
		bi, err := newBleve(path, nil)
		if err != nil {
			return err
		}
		return bi.Close()
	}
	m, err := newMapping(languagesOf(tools))
	if err != nil {
		return err
	}
	// The builder writes its segments in a temporary folder and renames
	// the last into place: by default the folder is in $TMPDIR, which
	// fails (EXDEV) where that is another file system than the index
	// (a tmpfs /tmp), and a killed build would leave it behind. Next to
	// the Bleve folder, inside the generation, it is neither.
	b, err := bleve.NewBuilder(path, m, map[string]interface{}{"batchSize": 2000, "buildPathPrefix": filepath.Dir(path)})
	if err != nil {
		return fmt.Errorf("create bleve index: %w", err)
	}
	for i, t := range tools {
		if i%1000 == 0 {
			if err := ctx.Err(); err != nil {
				_ = b.Close()
				return err
			}
		}
		if err := b.Index(t.ID(), bleveDoc(t)); err != nil {
			_ = b.Close()
			return fmt.Errorf("index tool %q: %w", t.ID(), err)
		}
	}
	if err := b.Close(); err != nil {
		return fmt.Errorf("write bleve index: %w", err)
	}
	return nil
}

func writeVectors(path string, vecs []float32, rows, dim int) error {
	buf := make([]byte, vectorsHeader+4*len(vecs))
	copy(buf, vectorsMagic)
	binary.LittleEndian.PutUint32(buf[4:], uint32(rows))
	binary.LittleEndian.PutUint32(buf[8:], uint32(dim))
	for i, v := range vecs {
		binary.LittleEndian.PutUint32(buf[vectorsHeader+4*i:], math.Float32bits(v))
	}
	return writeFileSync(path, buf)
}

func littleEndian() bool {
	x := uint16(1)
	return *(*byte)(unsafe.Pointer(&x)) == 1
}

// ErrNoIndex is Open's error for an index folder with no index in it (no
// manifest): nothing was built there yet.
var ErrNoIndex = errors.New("no index")

// RebuildFix is how an index that does not open is made again: by a
// command that runs as written (`toolgate index` alone asks for --config or
// --tools), or by the gateway's next start, which rebuilds it.
const RebuildFix = "rebuild it with `toolgate index --config FILE` or `toolgate index --tools FILE.jsonl`, or start the gateway, which rebuilds it"

// Open opens the current generation of the index in the index folder dir as
// it is, without comparing it to any catalog or model: `toolgate search` and
// a warm-starting gateway use it before any backend is connected.
func Open(dir string, opts *Options) (*Index, error) {
	ixDir := dir
	// A builder may swap generations between reading the manifest and opening
	// the generation it names; reading the manifest again settles it.
	var lastErr error
	for attempt := 0; attempt < 5; attempt++ {
		m, err := readManifest(ixDir)
		if errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("%w in %s: build one with `toolgate index --tools FILE.jsonl` or `toolgate index --config FILE`", ErrNoIndex, dir)
		}
		if err != nil {
			return nil, fmt.Errorf("%w: %s", err, RebuildFix)
		}
		other := m.Format != FormatVersion || m.Analyzer != signatureOf(m)
		if other && (opts == nil || !opts.AnyFormat) {
			return nil, fmt.Errorf("index in %s has format %d (analyzer %q), this toolgate reads format %d: %s", dir, m.Format, m.Analyzer, FormatVersion, RebuildFix)
		}
		ix, err := openGen(ixDir, m)
		if err == nil {
			if other {
				ix.fp, ix.otherFormat = "", m.Format
			}
			return ix, nil
		}
		lastErr = err
		// A builder that swapped in a newer generation deletes the old one,
		// possibly while we were opening it: then the manifest has moved on.
		if now, merr := readManifest(ixDir); merr == nil && now.Generation != m.Generation {
			continue
		}
		if _, serr := os.Stat(genDir(ixDir, m.Generation)); serr == nil {
			break // the generation is still current but damaged: retrying will not help
		}
	}
	return nil, fmt.Errorf("open index in %s: %w (%s)", dir, lastErr, RebuildFix)
}

// OpenFor is Open for the gateway of a config (Options.Config) that
// catalogues servers: when the current generation was built for another
// config (its gateway on the data folder wrote it last), the generation
// kept for this one (Manifest.Others) is opened instead if it holds no
// server but servers; without one, the current generation, which the
// caller may find does not fit.
func OpenFor(dir string, servers []string, opts *Options) (*Index, error) {
	ix, _, err := openFor(dir, servers, opts)
	return ix, err
}

// StartingPoint is the manifest of the generation OpenFor opens for the
// gateway of opts.Config with servers (what `toolgate doctor --config`
// names), or the error it fails with.
func StartingPoint(dir string, servers []string, opts *Options) (*Manifest, error) {
	ix, m, err := openFor(dir, servers, opts)
	if err != nil {
		return nil, err
	}
	ix.Close()
	return m, nil
}

// openFor is OpenFor that also returns the manifest of the generation
// opened (nil when it cannot tell: the manifest swapped meanwhile).
func openFor(dir string, servers []string, opts *Options) (*Index, *Manifest, error) {
	ix, err := Open(dir, opts)
	if err != nil {
		return nil, nil, err
	}
	m, err := readManifest(dir)
	if err != nil || ix.otherFormat == 0 && ix.Fingerprint() != m.Fingerprint {
		return ix, nil, nil // a manifest swapped meanwhile
	}
	cfg := opts.config()
	if cfg == "" || m.Config == cfg {
		return ix, m, nil
	}
	best := keptFor(m, cfg, servers)
	if best == nil {
		return ix, m, nil
	}
	other, err := openGen(dir, best)
	if err != nil { // removed by a builder meanwhile
		opts.logger().Debug("the index kept for this config's servers does not open", "generation", best.Generation, "err", err)
		return ix, m, nil
	}
	ix.Close()
	return other, best, nil
}

// keptFor is the generation m keeps for config (Manifest.Others) that a
// gateway of it cataloguing servers can start from, or nil.
func keptFor(m *Manifest, config string, servers []string) *Manifest {
	for i := range m.Others {
		o := &m.Others[i]
		if o.Config == config && o.Format == FormatVersion && o.Analyzer == signatureOf(o) && within(o.Servers, servers) {
			return o
		}
	}
	return nil
}

// Kept is one index an index folder keeps: the current generation or one
// kept for another config (Manifest.Others).
type Kept struct {
	Manifest
	Current bool
	// Err says why the generation does not open (nil: it opens).
	Err error
}

// Indexes lists the indexes the index folder dir keeps, the current one
// first, then those kept for other configs, newest first, each opened
// (and closed) to tell whether it opens. No manifest is none, not an
// error.
func Indexes(dir string) ([]Kept, error) {
	m, err := readManifest(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	head := *m
	head.Others = nil
	out := []Kept{{Manifest: head, Current: true}}
	for _, o := range m.Others {
		out = append(out, Kept{Manifest: o})
	}
	for i := range out {
		ix, err := openGen(dir, &out[i].Manifest)
		if err != nil {
			out[i].Err = err
			continue
		}
		ix.Close()
	}
	return out, nil
}

// ServersOf names the servers of tools, sorted.
func ServersOf(tools []catalog.Tool) []string {
	var out []string
	for _, t := range tools {
		out = append(out, t.Server)
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// within reports whether every name of a is in b.
func within(a, b []string) bool {
	for _, s := range a {
		if !slices.Contains(b, s) {
			return false
		}
	}
	return true
}

// othersAfter is the Others of the manifest written after prev for
// config: prev and its own Others, newest first, but those of config
// (replaced), of no config, and those whose generation is gone, the last
// of each config, KeepOthers at most. Those of another format (a gateway
// of an older or newer toolgate on the data folder) are kept too, for
// that gateway: neither toolgate reads the other's (openOthers, keptFor),
// but each used to throw the other's away, so each start after the
// other's build was a cold one.
func othersAfter(ixDir string, prev *Manifest, config string) []Manifest {
	if prev == nil {
		return nil
	}
	head := *prev
	head.Others = nil
	var out []Manifest
	for _, o := range append([]Manifest{head}, prev.Others...) {
		if len(out) == KeepOthers {
			break
		}
		if o.Config == "" || o.Config == config || o.Generation <= 0 ||
			slices.ContainsFunc(out, func(k Manifest) bool { return k.Config == o.Config }) {
			continue
		}
		if st, err := os.Stat(genDir(ixDir, o.Generation)); err != nil || !st.IsDir() {
			continue
		}
		out = append(out, o)
	}
	return out
}

// openOthers opens the generations of ms with vectors of modelID and a
// server of servers for their vectors (catalog and vectors only, without
// the keyword index); those that do not open are left out. The caller
// closes them.
func openOthers(ixDir string, ms []Manifest, modelID string, servers []string) []*Index {
	var out []*Index
	for i := range ms {
		if ms[i].ModelID == "" || ms[i].ModelID != modelID || ms[i].Format != FormatVersion ||
			!slices.ContainsFunc(ms[i].Servers, func(s string) bool { return slices.Contains(servers, s) }) {
			continue
		}
		if ix, err := openRows(ixDir, &ms[i]); err == nil {
			out = append(out, ix)
		}
	}
	return out
}

// openGen opens the generation a manifest names.
func openGen(ixDir string, m *Manifest) (*Index, error) {
	ix, err := openRows(ixDir, m)
	if err != nil {
		return nil, err
	}
	// Read-only: no background merger, and bbolt takes a shared lock, so any
	// number of readers can open one generation at once.
	bi, err := bleve.OpenUsing(filepath.Join(genDir(ixDir, m.Generation), bleveSubdir), map[string]interface{}{"read_only": true})
	if err != nil {
		_ = ix.Close()
		return nil, fmt.Errorf("open bleve index: %w", err)
	}
	ix.bi = bi
	if len(m.KeywordLengths) == 0 && len(ix.tools) > 0 {
		_ = ix.Close()
		return nil, errors.New("manifest has no keyword field lengths")
	}
	ix.kwLen = m.KeywordLengths
	return ix, nil
}

// openRows opens the catalog and the vectors of the generation a manifest
// names, without its keyword index: what a build reuses vectors from.
func openRows(ixDir string, m *Manifest) (*Index, error) {
	gd := genDir(ixDir, m.Generation)
	cat, err := os.ReadFile(filepath.Join(gd, catalogFile))
	if err != nil {
		return nil, err
	}
	tools, err := decodeCatalog(cat)
	if err != nil {
		return nil, err
	}
	if len(tools) != m.Tools {
		return nil, fmt.Errorf("catalog snapshot holds %d tools, manifest says %d", len(tools), m.Tools)
	}
	ids, byID, dup := idTable(tools)
	if dup != "" || !sort.SliceIsSorted(tools, func(i, j int) bool { return catalog.CompareID(&tools[i], &tools[j]) < 0 }) {
		return nil, errors.New("catalog snapshot is not sorted by unique ID")
	}
	if len(m.Languages) > 0 {
		// The snapshot shares its bytes: the tools are written here only.
		for i := range tools {
			tools[i].Language = m.Languages[tools[i].Server]
		}
	}
	ix := &Index{tools: tools, ids: ids, byID: byID, fp: m.Fingerprint, langs: languagesOf(tools)}
	if m.ModelID != "" {
		vf, err := openVectors(filepath.Join(gd, vectorsFile), len(tools), m.Dim)
		if err != nil {
			return nil, err
		}
		ix.vf, ix.dim, ix.modelID = vf, m.Dim, m.ModelID
	}
	return ix, nil
}

func writeManifest(ixDir string, m *Manifest) error {
	b, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return err
	}
	tmp := filepath.Join(ixDir, manifestFile+".tmp")
	if err := writeFileSync(tmp, append(b, '\n')); err != nil {
		return err
	}
	if err := os.Rename(tmp, filepath.Join(ixDir, manifestFile)); err != nil {
		return fmt.Errorf("swap index manifest: %w", err)
	}
	return syncDir(ixDir)
}

func writeFileSync(path string, data []byte) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return err
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return fmt.Errorf("sync %s: %w", path, err)
	}
	return f.Close()
}

func syncDir(path string) error {
	d, err := os.Open(path)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

// syncTree fsyncs every file and directory under root (Bleve's builder does
// not sync what it writes).
func syncTree(root string) error {
	return filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			return syncDir(p)
		}
		f, err := os.Open(p)
		if err != nil {
			return err
		}
		defer f.Close()
		return f.Sync()
	})
}

// ErrLocked is returned when another process holds the index lock.
var ErrLocked = errors.New("index is locked by another process")

// lockWaits counts the times lockDirWait found the lock taken and waited
// (tests wait on it).
var lockWaits atomic.Int64

// lockDirWait retries lockDir until opts.LockWait has passed.
func lockDirWait(ctx context.Context, ixDir string, opts *Options) (func(), error) {
	var wait time.Duration
	if opts != nil {
		wait = opts.LockWait
	}
	deadline := time.Now().Add(wait)
	for {
		unlock, err := lockDir(ixDir)
		if err == nil || !errors.Is(err, ErrLocked) || time.Now().After(deadline) {
			return unlock, err
		}
		lockWaits.Add(1)
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// lockDir takes the exclusive, non-blocking flock on <ixDir>/LOCK. The lock
// goes away with the process, so a killed build never leaves it stuck.
func lockDir(ixDir string) (unlock func(), err error) {
	path := filepath.Join(ixDir, lockFile)
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fmt.Errorf("open index lock: %w", err)
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		holder, _ := os.ReadFile(path)
		f.Close()
		if errors.Is(err, unix.EWOULDBLOCK) {
			who := strings.TrimSpace(string(holder))
			if who != "" {
				who = " (pid " + who + ")"
			}
			return nil, fmt.Errorf("%w%s: another `toolgate index` or gateway is updating %s; wait for it to finish or use another --data-dir", ErrLocked, who, ixDir)
		}
		return nil, fmt.Errorf("lock %s: %w", path, err)
	}
	_ = f.Truncate(0)
	_, _ = f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
	return func() {
		_ = unix.Flock(int(f.Fd()), unix.LOCK_UN)
		f.Close()
	}, nil
}
