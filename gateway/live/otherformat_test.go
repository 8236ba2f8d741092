package live

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/toolgate/toolgate/index"
	"github.com/toolgate/toolgate/index/indextest"
)

func indexFormat(t *testing.T, dir string) int {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(dir, "manifest.json"))
	if err != nil {
		t.Fatal(err)
	}
	var m struct{ Format int }
	if err := json.Unmarshal(data, &m); err != nil {
		t.Fatal(err)
	}
	return m.Format
}

// An upgrade that changes the index format (or a rollback over one) starts
// warm from the index of the other format while it builds its own from the
// last catalog, before any backend lists. It was a cold start:
// every search waited for (or was told to come back after) every tool
// embedded again, 75 s to 4 min at 10,000 tools.
func TestWarmStartFromAnotherFormat(t *testing.T) {
	for _, format := range []int{index.FormatVersion - 1, index.FormatVersion + 1} {
		t.Run(map[bool]string{true: "older", false: "newer"}[format < index.FormatVersion], func(t *testing.T) {
			dir := t.TempDir()
			emb := &fakeEmbedder{model: "m1"}
			lastRun(t, dir, emb)
			if err := indextest.SetFormat(dir, format); err != nil { // as the toolgate of that format wrote it
				t.Fatal(err)
			}

			pool := newFakePool("a", "b") // nothing listed yet
			f := newFixture(t, dir, pool, &Options{Embedder: emb, Debounce: time.Millisecond}, "a", "b")
			if !f.loop.Warm() {
				t.Fatalf("Warm() = false with an index of format %d whose files this toolgate reads; log:\n%s", format, f.logs)
			}
			f.run(t)
			if got := f.find(t, "banana", 1); !slices.Equal(got, []string{"b__banana"}) {
				t.Errorf("warm search banana = %v", got)
			}
			// No backend lists (lazy servers, or not yet): the index of
			// this format is built from the last catalog all the same.
			f.wait(t, "the index of this format", func(s Stats) bool { return s.CatalogGeneration == 2 && !s.Reindexing })
			if got := indexFormat(t, dir); got != index.FormatVersion {
				t.Errorf("manifest format after the rebuild = %d, want %d", got, index.FormatVersion)
			}
			if !strings.Contains(f.logs.String(), "warm start from an index of another format") {
				t.Errorf("the log does not say the warm index is of another format:\n%s", f.logs)
			}
			if got := f.find(t, "apple", 1); !slices.Equal(got, []string{"a__apple"}) {
				t.Errorf("search apple after the rebuild = %v", got)
			}
		})
	}
}
