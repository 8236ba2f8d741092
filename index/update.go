package index

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"

	"github.com/blevesearch/bleve/v2"
	"github.com/blevesearch/bleve/v2/index/scorch"
	"github.com/blevesearch/bleve/v2/mapping"
	"github.com/toolgate/toolgate/index/catalog"
	"github.com/toolgate/toolgate/internal/storage"
)

// Incremental Bleve update.
//
// A full Bleve build analyses every tool again even when one tool changed:
// at 10,000 tools a generation with a full Bleve build takes 0.78 s, one
// updated this way 0.07 s (BenchmarkUpdate, idle machine; 1.3–4.1 s and
// 0.19–0.29 s at load 9). An update of an existing generation makes the new
// generation's Bleve folder from the previous one and applies only the
// difference as one batch:
//
//   - the zap segment files are hard-linked. Scorch (bleve v2.6.3) never
//     writes a segment file after creating it: zapx opens segments with
//     os.Open and maps them read-only (zapx/v17 segment.go); new segments and
//     merge results get a file name above every one in the folder
//     (scorch/persister.go loadFromBolt → maxSegmentIDOnDisk), so a write
//     never lands in a linked file; and it deletes obsolete segments only
//     under its own path (persister.go removeOldZapFiles, merge.go). So the
//     previous generation, and any reader that has it open, never sees a
//     change, and removing the previous generation later leaves the links.
//   - everything else (store/root.bolt, which bbolt rewrites in place, and
//     index_meta.json) is copied.
//
// None of this is a promise of Bleve's: TestBleveAssumptions
// (bleve_pin_test.go) pins each point on raw Bleve and the module versions
// it was read against, so an upgrade that breaks one fails by name.
//
// Scorch's Batch returns once the new segment is written and fsynced and
// root.bolt is committed and synced (scorch.go prepareSegment waits for the
// persister unless "unsafe_batch"), so Close leaves the whole update on disk;
// the caller then syncs the tree and swaps the manifest as for a full build.
//
// Background merging is switched off for the update (see noMerges), so what
// is on disk does not depend on when Close interrupted the merger. Segments
// and deleted documents therefore accumulate; when they pass the limits below,
// or would change a BM25 statistic against a full build's (see
// checkCardinalities), the update is a full build instead, which writes one
// compact segment. Any error on the way also ends in a full build.
var (
	// maxUpdateFraction: above this share of the catalog indexed or
	// deleted, build in full (one compact segment). Not a speed crossover:
	// at 10% of 10,000 descriptions changed the update still took a fifth
	// of a full build (BenchmarkUpdateFraction), but by 20% the new
	// segment's dictionary moved the BM25 average name length, and past
	// maxDeadFraction the deleted documents force a full build anyway.
	maxUpdateFraction = 0.25
	// maxDeadFraction bounds the documents still stored in the segments but
	// deleted, as a share of all stored. They cost disk and search time, and
	// their terms still count in Bleve's BM25 average field length (see
	// checkCardinalities).
	maxDeadFraction = 0.2
)

// maxSegments bounds the segments of a generation (each incremental update
// adds one); a search visits every segment.
const maxSegments = 8

// noMerges keeps scorch's merger from planning any merge: a segment is
// eligible for merging only below MaxSegmentSize/2 documents
// (scorch/mergeplan/merge_plan.go plan), here 0.
var noMerges = map[string]interface{}{
	"scorchMergePlanOptions": map[string]interface{}{"MaxSegmentSize": 1},
}

// updateFault, when set (by tests), is called at each stage of an
// incremental update; an error it returns fails the update there, as a
// real failure would.
var updateFault func(stage string) error

func updateStage(stage string) error {
	if updateFault != nil {
		return updateFault(stage)
	}
	return nil
}

// errFullBuild says that an incremental update does not apply (not a
// failure: the caller builds fully without a warning).
type errFullBuild struct{ reason string }

func (e errFullBuild) Error() string { return e.reason }

// catalogDiff is what changed from the previous generation's catalog to the
// new one: counts for the Report, and what Bleve has to index or delete.
type catalogDiff struct {
	added, changed, removed int // tools; changed = any field differs (the language too)

	deletes []string       // IDs removed
	upserts []catalog.Tool // tools added, or whose Bleve document changed
	redone  int            // of upserts, those that replace a document
	gone    []catalog.Tool // the documents deleted or replaced, as they were
}

// reindex is the number of Bleve documents an update indexes or deletes.
func (d catalogDiff) reindex() int { return len(d.deletes) + len(d.upserts) }

// diffCatalog compares the new catalog (sorted by ID) with old's; a nil old
// means everything is added.
func diffCatalog(old *Index, tools []catalog.Tool) catalogDiff {
	var d catalogDiff
	if old == nil {
		d.added = len(tools)
		return d
	}
	matched := make([]bool, len(old.tools))
	for _, t := range tools {
		j, ok := old.byID[t.ID()]
		if !ok {
			d.added++
			d.upserts = append(d.upserts, t)
			continue
		}
		matched[j] = true
		o := old.tools[j]
		if o.Title == t.Title && o.Description == t.Description && o.Language == t.Language && catalog.SameSchema(o.InputSchema, t.InputSchema) && catalog.SameSchema(o.Annotations, t.Annotations) && catalog.SameSchema(o.OutputSchema, t.OutputSchema) {
			continue
		}
		d.changed++
		if !sameBleveDoc(o, t) {
			d.upserts = append(d.upserts, t)
			d.redone++
			d.gone = append(d.gone, o)
		}
	}
	for j, ok := range matched {
		if !ok {
			d.removed++
			d.deletes = append(d.deletes, old.tools[j].ID())
			d.gone = append(d.gone, old.tools[j])
		}
	}
	return d
}

// sameBleveDoc reports whether two tools with the same ID make the same
// Bleve document (bleveDoc). Schemas are parsed only when their bytes differ.
func sameBleveDoc(a, b catalog.Tool) bool {
	if a.Title != b.Title || a.Description != b.Description || a.Language != b.Language {
		return false
	}
	if catalog.SameSchema(a.InputSchema, b.InputSchema) {
		return true
	}
	return catalog.ParamsText(a) == catalog.ParamsText(b)
}

// segmentStats counts the segments of an open Bleve index, the documents
// they store (deleted ones included) and the live ones.
func segmentStats(bi bleve.Index) (segments int, stored, live uint64, err error) {
	snap, done, err := snapshot(bi)
	if err != nil {
		return 0, 0, 0, err
	}
	defer done()
	for _, s := range snap.Segments() {
		segments++
		stored += uint64(s.FullSize()) // the segment's documents; Count leaves out the deleted
		live += s.Count()
	}
	return segments, stored, live, nil
}

// planUpdate decides whether base, the previous generation, can have its
// Bleve index updated by d into the new catalog's, and returns the term
// counts of the new catalog (see termCounts). baseTerms are base's, from
// its manifest (nil when it was a full build). An errFullBuild says why not;
// another error is a fault worth a warning.
func planUpdate(base *Index, baseTerms map[string]int, tools []catalog.Tool, d catalogDiff) (map[string]int, error) {
	if base == nil || base.bi == nil {
		return nil, errFullBuild{"no previous generation of this format"}
	}
	if len(base.tools) == 0 || len(tools) == 0 {
		return nil, errFullBuild{"empty catalog"}
	}
	if f := float64(d.reindex()) / float64(len(tools)); f > maxUpdateFraction {
		return nil, errFullBuild{fmt.Sprintf("%d of %d documents to index or delete (over %.0f%%)", d.reindex(), len(tools), 100*maxUpdateFraction)}
	}
	want, err := newMapping(languagesOf(tools))
	if err != nil {
		return nil, err
	}
	wantJSON, err := json.Marshal(want)
	if err != nil {
		return nil, err
	}
	haveJSON, err := json.Marshal(base.bi.Mapping())
	if err != nil {
		return nil, err
	}
	if !bytes.Equal(wantJSON, haveJSON) {
		return nil, errFullBuild{"the index mapping changed"}
	}
	segs, stored, live, err := segmentStats(base.bi)
	if err != nil {
		return nil, err
	}
	if live != uint64(len(base.tools)) {
		return nil, fmt.Errorf("previous bleve index holds %d documents, its catalog %d tools", live, len(base.tools))
	}
	if len(d.upserts) > 0 {
		segs++
	}
	if segs > maxSegments {
		return nil, errFullBuild{fmt.Sprintf("would make %d segments (over %d)", segs, maxSegments)}
	}
	dead := stored - live + uint64(d.redone+len(d.deletes))
	if float64(dead) > maxDeadFraction*float64(stored+uint64(len(d.upserts))) {
		return nil, errFullBuild{fmt.Sprintf("would keep %d deleted documents of %d (over %.0f%%)", dead, stored+uint64(len(d.upserts)), 100*maxDeadFraction)}
	}
	if baseTerms == nil {
		if segs > 1+min(len(d.upserts), 1) || stored != live {
			return nil, errFullBuild{"no term counts for the previous generation"}
		}
		// A full build's single segment: its dictionaries hold exactly
		// the terms of its documents.
		if baseTerms, err = fieldCardinalities(base.bi); err != nil {
			return nil, err
		}
	}
	return termCounts(base, baseTerms, d)
}

// Bleve's BM25 divides each field's length by the "average field length"
// ceil(terms in the field's dictionaries / documents) (bleve
// search/searcher/search_term.go bm25ScoreMetrics, scorch
// IndexSnapshot.FieldCardinality: the sum of the segments' dictionary
// sizes). A full build's one segment counts each distinct term of the live
// documents once; segments added by updates count their terms again, and
// terms of deleted documents stay. When the ceiling moves, every score of
// the field moves with it, so an update checks that it does not: it keeps
// the distinct live terms per field — what a full build would count — in
// the manifest (Manifest.KeywordTerms), and builds in full when the
// ceilings differ (checkCardinalities).

// fieldCardinalities is what Bleve's BM25 counts as the terms of each
// keyword field of an open index.
func fieldCardinalities(bi bleve.Index) (map[string]int, error) {
	snap, done, err := snapshot(bi)
	if err != nil {
		return nil, err
	}
	defer done()
	out := make(map[string]int, len(keywordFields))
	for _, f := range keywordFields {
		n, err := snap.FieldCardinality(f)
		if err != nil {
			return nil, err
		}
		out[f] = n
	}
	return out, nil
}

func snapshot(bi bleve.Index) (*scorch.IndexSnapshot, func(), error) {
	ai, err := bi.Advanced()
	if err != nil {
		return nil, nil, err
	}
	r, err := ai.Reader()
	if err != nil {
		return nil, nil, err
	}
	snap, ok := r.(*scorch.IndexSnapshot)
	if !ok {
		r.Close()
		return nil, nil, fmt.Errorf("bleve index is %T, not scorch", r)
	}
	return snap, func() { r.Close() }, nil
}

// termCounts returns the distinct terms per keyword field of the live
// documents after d, from base's (baseTerms): only the terms of the
// documents d removes or adds can appear or vanish, and base's live
// document frequency of each tells which do.
func termCounts(base *Index, baseTerms map[string]int, d catalogDiff) (map[string]int, error) {
	count := func(tools []catalog.Tool) (map[string]map[string]int, error) {
		out := make(map[string]map[string]int, len(keywordFields))
		for _, f := range keywordFields {
			out[f] = map[string]int{}
		}
		for _, t := range tools {
			a, err := toolAnalyzer(base.bi.Mapping(), t)
			if err != nil {
				return nil, err
			}
			doc := bleveDoc(t)
			for _, f := range keywordFields {
				seen := map[string]bool{}
				for _, tok := range a.Analyze([]byte(doc[f].(string))) {
					if term := string(tok.Term); !seen[term] {
						seen[term] = true
						out[f][term]++
					}
				}
			}
		}
		return out, nil
	}
	removed, err := count(d.gone)
	if err != nil {
		return nil, err
	}
	added, err := count(d.upserts)
	if err != nil {
		return nil, err
	}
	snap, done, err := snapshot(base.bi)
	if err != nil {
		return nil, err
	}
	defer done()
	ctx := context.Background()
	out := make(map[string]int, len(keywordFields))
	for _, f := range keywordFields {
		n, ok := baseTerms[f]
		if !ok {
			return nil, errFullBuild{"no term count for field " + f}
		}
		terms := map[string]bool{}
		for term := range removed[f] {
			terms[term] = true
		}
		for term := range added[f] {
			terms[term] = true
		}
		for term := range terms {
			r, err := snap.TermFieldReader(ctx, []byte(term), f, false, false, false)
			if err != nil {
				return nil, err
			}
			was := int(r.Count())
			_ = r.Close()
			now := was - removed[f][term] + added[f][term]
			switch {
			case now < 0:
				return nil, fmt.Errorf("term %q of field %s: %d documents before, %d removed", term, f, was, removed[f][term])
			case was == 0 && now > 0:
				n++
			case was > 0 && now == 0:
				n--
			}
		}
		out[f] = n
	}
	return out, nil
}

// checkCardinalities compares, field by field, the average field length
// Bleve's BM25 will use on the updated index bi with the one a full build
// of the same documents would use (want, distinct terms per field).
func checkCardinalities(bi bleve.Index, docs int, want map[string]int) error {
	have, err := fieldCardinalities(bi)
	if err != nil {
		return err
	}
	for _, f := range keywordFields {
		h := (have[f] + docs - 1) / docs
		w := (want[f] + docs - 1) / docs
		if h != w {
			return errFullBuild{fmt.Sprintf("BM25 average length of field %s would be %d, a full build's %d (%d terms counted, %d distinct, %d documents)", f, h, w, have[f], want[f], docs)}
		}
	}
	return nil
}

// updateBleveOnDisk makes the Bleve index at dst from the one at src (the
// previous generation's) and applies d, which leaves docs documents whose
// keyword fields have terms distinct terms (see checkCardinalities). On
// error dst is removed.
func updateBleveOnDisk(ctx context.Context, src, dst string, d catalogDiff, docs int, terms map[string]int) (err error) {
	defer func() {
		if err != nil {
			_ = os.RemoveAll(dst)
		}
	}()
	if err := updateStage("clone"); err != nil {
		return err
	}
	if err := cloneBleve(src, dst); err != nil {
		return fmt.Errorf("clone previous bleve index: %w", err)
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := updateStage("open"); err != nil {
		return err
	}
	bi, err := bleve.OpenUsing(dst, noMerges)
	if err != nil {
		return fmt.Errorf("open cloned bleve index: %w", err)
	}
	defer func() {
		if cerr := bi.Close(); cerr != nil && err == nil {
			err = fmt.Errorf("close updated bleve index: %w", cerr)
		}
	}()
	b := bi.NewBatch()
	for _, id := range d.deletes {
		b.Delete(id)
	}
	for _, t := range d.upserts {
		if err := b.Index(t.ID(), bleveDoc(t)); err != nil {
			return fmt.Errorf("index tool %q: %w", t.ID(), err)
		}
	}
	if err := updateStage("batch"); err != nil {
		return err
	}
	if err := bi.Batch(b); err != nil {
		return fmt.Errorf("apply bleve batch: %w", err)
	}
	if n, err := bi.DocCount(); err != nil || n != uint64(docs) {
		return fmt.Errorf("updated bleve index holds %d documents, want %d (%v)", n, docs, err)
	}
	if err := checkCardinalities(bi, docs, terms); err != nil {
		return err
	}
	return updateStage("close")
}

// cloneBleve copies a closed Bleve folder: zap segments as hard links,
// everything else as copies. Anything but regular files and folders (and
// hard links across file systems) makes it fail.
func cloneBleve(src, dst string) error {
	return filepath.WalkDir(src, func(p string, e os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(src, p)
		if err != nil {
			return err
		}
		to := filepath.Join(dst, rel)
		switch {
		case e.IsDir():
			return storage.MkdirBelow(filepath.Dir(dst), to, 0o755)
		case !e.Type().IsRegular():
			return fmt.Errorf("%s: not a regular file", p)
		case strings.HasSuffix(e.Name(), ".zap"):
			return os.Link(p, to)
		default:
			return copyFile(p, to)
		}
	})
}

func copyFile(src, dst string) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	st, err := in.Stat()
	if err != nil {
		return err
	}
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, st.Mode().Perm())
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}

// updateBase is the previous generation a Bleve index can be updated from.
type updateBase struct {
	ix      *Index
	dir     string           // its Bleve folder
	terms   map[string]int   // its manifest's KeywordTerms
	lengths map[string]int64 // its manifest's KeywordLengths
}

// bleveResult says how writeBleve wrote a Bleve index.
type bleveResult struct {
	reindexed   int              // documents indexed or deleted
	incremental bool             // updated from the base, not built in full
	terms       map[string]int   // Manifest.KeywordTerms; nil after a full build
	lengths     map[string]int64 // Manifest.KeywordLengths
}

// writeBleve writes the Bleve index of a new generation at path:
// incrementally from base's by d when planUpdate allows it, otherwise, or
// when the incremental path fails, by a full build.
func writeBleve(ctx context.Context, path string, tools []catalog.Tool, base updateBase, d catalogDiff, log *slog.Logger) (bleveResult, error) {
	m, err := newMapping(languagesOf(tools))
	if err != nil {
		return bleveResult{}, err
	}
	terms, err := planUpdate(base.ix, base.terms, tools, d)
	var lengths map[string]int64
	if err == nil {
		lengths, err = updatedLengths(m, base.lengths, d)
	}
	if err == nil {
		err = updateBleveOnDisk(ctx, base.dir, path, d, len(tools), terms)
		if err == nil {
			return bleveResult{reindexed: d.reindex(), incremental: true, terms: terms, lengths: lengths}, nil
		}
		if ctx.Err() != nil {
			return bleveResult{}, ctx.Err()
		}
	}
	if fb := (errFullBuild{}); errors.As(err, &fb) {
		if base.ix != nil {
			log.Info("keyword index built in full", "reason", fb.reason)
		}
	} else {
		log.Warn("incremental index update failed; building the keyword index in full", "err", err)
	}
	if err := buildBleveOnDisk(ctx, path, tools); err != nil {
		return bleveResult{}, err
	}
	if lengths, err = fieldLengths(m, tools); err != nil {
		return bleveResult{}, err
	}
	return bleveResult{reindexed: len(tools), lengths: lengths}, nil
}

// updatedLengths returns the keyword field lengths after d from base's:
// only the documents d removes or adds change them.
func updatedLengths(m mapping.IndexMapping, base map[string]int64, d catalogDiff) (map[string]int64, error) {
	if len(base) == 0 {
		return nil, errFullBuild{"no keyword field lengths for the previous generation"}
	}
	gone, err := fieldLengths(m, d.gone)
	if err != nil {
		return nil, err
	}
	added, err := fieldLengths(m, d.upserts)
	if err != nil {
		return nil, err
	}
	out := make(map[string]int64, len(keywordFields))
	for _, f := range keywordFields {
		n, ok := base[f]
		if !ok {
			return nil, errFullBuild{"no keyword field length for field " + f}
		}
		out[f] = n - gone[f] + added[f]
		if out[f] < 0 {
			return nil, fmt.Errorf("keyword field %s: %d tokens before, %d removed", f, n, gone[f])
		}
	}
	return out, nil
}
