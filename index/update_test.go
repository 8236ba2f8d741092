package index_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/toolgate/toolgate/index"
	"github.com/toolgate/toolgate/index/catalog"
	"github.com/toolgate/toolgate/index/indextest"
)

// The tests of incremental updates use indextest's catalogs, so they live in
// package index_test; update_export_test.go gives them the hooks.

const updateTools = 1000

func ensure(t testing.TB, dir string, tools []catalog.Tool) (*index.Index, index.Report) {
	t.Helper()
	ix, rep, err := index.EnsureReport(context.Background(), dir, tools, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ix.Close() })
	return ix, rep
}

// answers runs every query for all hits, for the top 10, and for all hits
// of one server, and returns the hits in canonical order (see canon).
func answers(t testing.TB, ix *index.Index, qs []string) map[string][]index.Scored {
	t.Helper()
	out := map[string][]index.Scored{}
	for _, q := range qs {
		for _, c := range []struct {
			name   string
			k      int
			server string
		}{{"all", ix.Len() + 1, ""}, {"top10", 10, ""}, {"github", ix.Len() + 1, "github"}} {
			hits, err := ix.Keyword(q, c.k, c.server)
			if err != nil {
				t.Fatal(err)
			}
			out[q+" "+c.name] = canon(hits, c.k)
		}
	}
	return out
}

// canon orders hits whose scores are within 1e-9 of each other by ID, and
// for a top-k answer that filled k, drops the run of such ties at the cut
// (keeping the k-th score). Bleve sums a query's clause scores in no fixed
// order, so two builds of one catalog — even two full builds — give equal
// scores that differ in the last bits, and Keyword's tie order (exact
// equality) and which tie makes the cut follow that noise.
func canon(hits []index.Scored, k int) []index.Scored {
	out := slices.Clone(hits)
	slices.SortStableFunc(out, func(a, b index.Scored) int {
		switch {
		case a.Score > b.Score+1e-9:
			return -1
		case b.Score > a.Score+1e-9:
			return 1
		}
		return 0
	})
	for start := 0; start < len(out); {
		end := start + 1
		for end < len(out) && out[end-1].Score-out[end].Score <= 1e-9 {
			end++
		}
		slices.SortFunc(out[start:end], func(a, b index.Scored) int { return strings.Compare(a.ID, b.ID) })
		if end == len(out) && len(out) == k && start > 0 {
			return append(out[:start], index.Scored{ID: "(ties at the cut)", Score: out[start].Score})
		}
		start = end
	}
	return out
}

func queries(tools []catalog.Tool) []string {
	var qs []string
	for _, q := range indextest.Queries(tools, 25, indextest.Seed) {
		qs = append(qs, q.Text)
	}
	return append(qs, "create a new issue in the repository", "send a slack message", "zzzunknownword")
}

var scoresEqual = cmpopts.EquateApprox(0, 1e-9)

// fullBuild indexes tools in a fresh folder with a full Bleve build.
func fullBuild(t testing.TB, tools []catalog.Tool) *index.Index {
	t.Helper()
	ix, rep := ensure(t, t.TempDir(), tools)
	if rep.Incremental || rep.Reindexed != len(tools) {
		t.Fatalf("fresh build: %+v", rep)
	}
	return ix
}

// mutate returns a copy of tools with tool c's description changed, tool r
// removed and one tool added.
func mutate(tools []catalog.Tool, c, r int, tag string) []catalog.Tool {
	out := slices.Clone(tools)
	out[c].Description += " Now also " + tag + " archived entries."
	out = slices.Delete(out, r, r+1)
	return append(out, catalog.Tool{Server: "added", Name: "tool_" + tag,
		Description: "Export " + tag + " reports as CSV from the analytics workspace."})
}

func TestUpdateMatchesFullBuild(t *testing.T) {
	dir := t.TempDir()
	base := indextest.Catalog(updateTools, indextest.Seed)
	qs := queries(base)
	ensure(t, dir, base)

	// A reader of the first generation, kept open across the update and
	// searched while it runs.
	old, err := index.Open(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer old.Close()
	before := answers(t, old, qs)

	next := mutate(base, 10, 20, "quarterly")
	var wg sync.WaitGroup
	stop := make(chan struct{})
	for g := 0; g < 2; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				for _, q := range qs[:5] {
					if _, err := old.Keyword(q, 10, ""); err != nil {
						t.Error(err)
						return
					}
				}
			}
		}()
	}
	ix, rep := ensure(t, dir, next)
	close(stop)
	wg.Wait()

	if !rep.Incremental || rep.Reindexed != 3 || rep.Added != 1 || rep.Changed != 1 || rep.Removed != 1 || rep.Generation != 2 {
		t.Errorf("update report: %+v", rep)
	}
	want := answers(t, fullBuild(t, next), qs)
	if diff := cmp.Diff(want, answers(t, ix, qs), scoresEqual); diff != "" {
		t.Errorf("incremental update answers differently from a full build (-full +incremental):\n%s", diff)
	}
	// The generation the reader opened is gone from the folder by now, and
	// still answers exactly as before.
	if diff := cmp.Diff(before, answers(t, old, qs)); diff != "" {
		t.Errorf("the previous generation changed under its reader (-before +after):\n%s", diff)
	}
	if _, err := os.Stat(filepath.Join(dir, "gen-1")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("gen-1 still on disk: %v", err)
	}
	// And reopened from disk, the new generation answers the same.
	re, err := index.Open(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer re.Close()
	if diff := cmp.Diff(want, answers(t, re, qs), scoresEqual); diff != "" {
		t.Errorf("reopened update answers differently from a full build:\n%s", diff)
	}
}

// TestUpdateChain applies many small updates in a row: segments accumulate
// until a full build compacts them, and every generation answers as a full
// build of its catalog does.
func TestUpdateChain(t *testing.T) {
	dir := t.TempDir()
	tools := indextest.Catalog(updateTools, indextest.Seed)
	qs := queries(tools)[:8]
	ensure(t, dir, tools)
	var kinds []bool
	for i := 0; i < index.MaxSegments+2; i++ {
		tools = mutate(tools, 7*i+3, 11*i+5, fmt.Sprintf("step%d", i))
		ix, rep := ensure(t, dir, tools)
		kinds = append(kinds, rep.Incremental)
		segs, stored, live, err := index.BleveSegments(ix)
		if err != nil {
			t.Fatal(err)
		}
		if live != uint64(len(tools)) || segs > index.MaxSegments {
			t.Errorf("step %d: %d segments, %d stored, %d live, want %d live", i, segs, stored, live, len(tools))
		}
		full := fullBuild(t, tools)
		if diff := cmp.Diff(answers(t, full, qs), answers(t, ix, qs), scoresEqual); diff != "" {
			t.Errorf("step %d (incremental %v, %d segments): answers differ from a full build:\n%s", i, rep.Incremental, segs, diff)
		}
		// The term counts an update keeps are a full build's.
		if rep.Incremental {
			want, err := index.KeywordTerms(full)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(want, rep.Manifest.KeywordTerms); diff != "" {
				t.Errorf("step %d: keyword terms (-full build +kept by the update):\n%s", i, diff)
			}
		}
	}
	// One segment per update on top of the first build's, then a full build.
	want := make([]bool, len(kinds))
	for i := range want {
		want[i] = i != index.MaxSegments-1
	}
	if diff := cmp.Diff(want, kinds); diff != "" {
		t.Errorf("incremental per step (-want +got):\n%s", diff)
	}
}

func TestUpdateFallsBack(t *testing.T) {
	base := indextest.Catalog(updateTools, indextest.Seed)
	qs := queries(base)[:10]
	t.Run("big change", func(t *testing.T) {
		dir := t.TempDir()
		ensure(t, dir, base)
		next := slices.Clone(base)
		for i := 0; i < len(next); i += 3 {
			next[i].Description += " Changed."
		}
		ix, rep := ensure(t, dir, next)
		if rep.Incremental || rep.Reindexed != len(next) || rep.Changed != (len(next)+2)/3 {
			t.Errorf("report: %+v", rep)
		}
		if segs, _, _, _ := index.BleveSegments(ix); segs != 1 {
			t.Errorf("full build left %d segments", segs)
		}
		if diff := cmp.Diff(answers(t, fullBuild(t, next), qs), answers(t, ix, qs), scoresEqual); diff != "" {
			t.Errorf("answers differ from a full build:\n%s", diff)
		}
	})
	t.Run("deleted documents pile up", func(t *testing.T) {
		// Each removal is small, but the deleted documents the segments
		// still store add up: 150 of 1000, then 250 of 1000, over the
		// 20% bound.
		dir := t.TempDir()
		ensure(t, dir, base)
		step1 := slices.Clone(base[150:])
		ix, rep := ensure(t, dir, step1)
		if !rep.Incremental {
			t.Fatalf("150 of 1000 removed: %+v", rep)
		}
		if _, stored, live, err := index.BleveSegments(ix); err != nil || stored != 1000 || live != 850 {
			t.Errorf("after removing 150: %d stored, %d live (%v); want 1000, 850", stored, live, err)
		}
		step2 := slices.Clone(step1[100:])
		ix, rep = ensure(t, dir, step2)
		if rep.Incremental || rep.Reindexed != len(step2) {
			t.Errorf("250 of 1000 deleted: %+v, want a full build", rep)
		}
		if segs, stored, live, err := index.BleveSegments(ix); err != nil || segs != 1 || stored != live {
			t.Errorf("full build: %d segments, %d stored, %d live (%v)", segs, stored, live, err)
		}
		if diff := cmp.Diff(answers(t, fullBuild(t, step2), qs), answers(t, ix, qs), scoresEqual); diff != "" {
			t.Errorf("answers differ from a full build:\n%s", diff)
		}
	})
	t.Run("average field length would move", func(t *testing.T) {
		// A tool with many words of its own: when its description
		// shrinks, a full build forgets the words, while the updated
		// index's dictionaries keep them next to the new segment's, and
		// the BM25 average description length of the two would differ.
		small := slices.Clone(base[:200])
		var words []string
		for i := 0; i < 400; i++ {
			words = append(words, fmt.Sprintf("w%dq", i))
		}
		small[50].Description = strings.Join(words, " ")
		dir := t.TempDir()
		ensure(t, dir, small)
		next := slices.Clone(small)
		next[50].Description = "Short again."
		ix, rep := ensure(t, dir, next)
		if rep.Incremental || rep.Reindexed != len(next) || rep.Manifest.KeywordTerms != nil {
			t.Errorf("report: %+v", rep)
		}
		if diff := cmp.Diff(answers(t, fullBuild(t, next), qs), answers(t, ix, qs), scoresEqual); diff != "" {
			t.Errorf("answers differ from a full build:\n%s", diff)
		}
	})
	t.Run("schema change without new parameter text", func(t *testing.T) {
		dir := t.TempDir()
		ensure(t, dir, base)
		next := slices.Clone(base)
		next[5].InputSchema = append([]byte(`{"additionalProperties":false,`), next[5].InputSchema[1:]...)
		next[6].InputSchema = []byte(`{"type":"object","properties":{"when":{"type":"string","description":"A date"}}}`)
		_, rep := ensure(t, dir, next)
		if !rep.Incremental || rep.Changed != 2 || rep.Reindexed != 1 {
			t.Errorf("report: %+v (want 2 changed, 1 reindexed)", rep)
		}
	})
	for _, stage := range []string{"clone", "open", "batch", "close"} {
		t.Run("failure at "+stage, func(t *testing.T) {
			dir := t.TempDir()
			ensure(t, dir, base)
			var seen []string
			defer index.SetUpdateFault(func(s string) error {
				seen = append(seen, s)
				if s == stage {
					return errors.New("injected")
				}
				return nil
			})()
			next := mutate(base, 1, 2, "failing")
			ix, rep := ensure(t, dir, next)
			if seen[len(seen)-1] != stage {
				t.Errorf("stages run: %v", seen)
			}
			if rep.Incremental || rep.Reindexed != len(next) || rep.Generation != 2 {
				t.Errorf("report: %+v", rep)
			}
			if diff := cmp.Diff(answers(t, fullBuild(t, next), qs), answers(t, ix, qs), scoresEqual); diff != "" {
				t.Errorf("answers differ from a full build:\n%s", diff)
			}
			entries, _ := os.ReadDir(dir)
			var names []string
			for _, e := range entries {
				names = append(names, e.Name())
			}
			if diff := cmp.Diff([]string{"LOCK", "gen-2", "manifest.json"}, names); diff != "" {
				t.Errorf("index folder (-want +got):\n%s", diff)
			}
		})
	}
}

// The first generation's answers stay those of its own catalog after an
// update: a quick check that the hard-linked segment files were not
// written through.
func TestUpdateLeavesPreviousFilesAlone(t *testing.T) {
	dir := t.TempDir()
	base := indextest.Catalog(500, indextest.Seed)
	ensure(t, dir, base)
	sums := func(root string) map[string]string {
		out := map[string]string{}
		filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
			if err == nil && !d.IsDir() {
				b, _ := os.ReadFile(p)
				rel, _ := filepath.Rel(root, p)
				out[rel] = fmt.Sprintf("%d:%x", len(b), crc(b))
			}
			return nil
		})
		return out
	}
	// Keep gen-1's files reachable after the update removes the folder.
	keep := t.TempDir()
	g1 := filepath.Join(dir, "gen-1")
	filepath.WalkDir(g1, func(p string, d os.DirEntry, err error) error {
		rel, _ := filepath.Rel(g1, p)
		if d.IsDir() {
			return os.MkdirAll(filepath.Join(keep, rel), 0o755)
		}
		return os.Link(p, filepath.Join(keep, rel))
	})
	before := sums(keep)
	_, rep := ensure(t, dir, mutate(base, 3, 4, "x"))
	if !rep.Incremental {
		t.Fatalf("not incremental: %+v", rep)
	}
	if diff := cmp.Diff(before, sums(keep)); diff != "" {
		t.Errorf("files of the previous generation changed:\n%s", diff)
	}
}

func crc(b []byte) uint64 {
	var h uint64 = 14695981039346656037
	for _, c := range b {
		h = (h ^ uint64(c)) * 1099511628211
	}
	return h
}
