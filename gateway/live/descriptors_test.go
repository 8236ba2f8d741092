//go:build linux

package live

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/toolgate/toolgate/index"
	"github.com/toolgate/toolgate/internal/storage"
	"github.com/toolgate/toolgate/internal/testenv"
)

// TestOutOfDescriptorsIndexesInMemory: a gateway out of file descriptors
// (a low open-files limit, many clients) cannot open the index's files. At
// start it used to stop (exit status 1, "build the index …: too many open
// files (deleting that folder is safe)"); while serving, a re-index after
// a tool list change failed and stayed undone until the next change. Now
// the index is built in memory and served, the fault is reported with the
// open-files limit as its fix, and the loop writes the index to the folder
// once descriptors are free. The test fills its own process's descriptor
// table, so it must not run in parallel.
func TestOutOfDescriptorsIndexesInMemory(t *testing.T) {
	for _, when := range []string{"at start", "while serving"} {
		t.Run(when, func(t *testing.T) {
			data := filepath.Join(t.TempDir(), "data")
			h := storage.New(data, nil)
			if err := h.Prepare(); err != nil {
				t.Fatal(err)
			}
			w := h.Writer("index", "the index is built in memory")
			pool := newFakePool("a")
			pool.list("a", "apple")
			f := newFixture(t, index.Dir(data), pool, &Options{Embedder: &fakeEmbedder{model: "m1"}, Debounce: time.Millisecond, Storage: w, StorageRetry: 10 * time.Millisecond}, "a")
			var release func()
			if when == "at start" {
				release = testenv.FillDescriptors(t)
			}
			f.run(t)
			if when == "while serving" {
				if st := f.loop.Stats(); st.IndexInMemory {
					t.Fatalf("in memory before the fault: %+v", st)
				}
				release = testenv.FillDescriptors(t)
				pool.list("a", "apple", "avocado")
				f.loop.ToolsChanged("a", nil)
				f.wait(t, "the re-index in memory", func(s Stats) bool { return s.CatalogTools == 2 && s.IndexInMemory })
			}
			if !f.loop.Stats().IndexInMemory || !w.Failing() {
				t.Fatalf("out of descriptors: %+v, writer failing %v; want the index in memory and the fault reported", f.loop.Stats(), w.Failing())
			}
			if r := h.Report(); !strings.Contains(r.Fix, "open-files limit") {
				t.Errorf("the fault's fix %q does not name the open-files limit", r.Fix)
			}
			if got := f.find(t, "apple", 1); !slices.Equal(got, []string{"a__apple"}) {
				t.Errorf("search apple out of descriptors = %v", got)
			}
			release()
			st := f.wait(t, "the index written to the folder", func(s Stats) bool { return !s.IndexInMemory && !s.Reindexing })
			if _, err := os.Stat(filepath.Join(index.Dir(data), "manifest.json")); err != nil || w.Failing() {
				t.Errorf("once descriptors are free: %+v, manifest: %v, writer failing: %v", st, err, w.Failing())
			}
		})
	}
}

// TestStorageFaultWithoutErrno: a failed index write whose error lost its
// errno (Bleve's "error parsing mapping JSON" for a mapping it could not
// open, seen under ulimit -n 32) counts as the shortage's while the process
// is out of descriptors, and as the catalog's otherwise.
func TestStorageFaultWithoutErrno(t *testing.T) {
	data := t.TempDir()
	st := storage.New(data, nil).Writer("index", "the index is built in memory")
	err := errors.New("open bleve index: error parsing mapping JSON: unexpected end of JSON input")
	if storageFault(err, st) {
		t.Fatal("a storage fault with descriptors to spare")
	}
	release := testenv.FillDescriptors(t)
	short := storageFault(err, st)
	release()
	if !short {
		t.Error("not a storage fault out of descriptors: the start stops (exit status 1)")
	}
}

// TestReloadRetriedOutOfDescriptors: a config change seen while the
// gateway is out of file descriptors cannot be read. The reload is
// rejected with the open-files limit as its fix, and the file is read
// again until it can be: the change applies once descriptors are free,
// without another save or a SIGHUP (it used to wait for one).
func TestReloadRetriedOutOfDescriptors(t *testing.T) {
	f, pool := runApple(t, t.TempDir(), &Options{Debounce: time.Millisecond, StorageRetry: 10 * time.Millisecond})

	// Written before the fill, put in place after it: the rename needs no
	// descriptor, the read that the change triggers does.
	tmp := filepath.Join(filepath.Dir(f.path), ".next")
	if err := os.WriteFile(tmp, configBytes(t, nil, "a", "b"), 0o600); err != nil {
		t.Fatal(err)
	}
	release := testenv.FillDescriptors(t)
	if err := os.Rename(tmp, f.path); err != nil {
		release()
		t.Fatal(err)
	}
	st, err := f.loop.Wait(t.Context(), func(s Stats) bool { return s.LastReloadError != "" })
	// Counted while the descriptors are still taken: once they are free
	// the 10 ms retry applies the change, and a count after release raced
	// it (seen once under load).
	reconfigured := len(pool.reconfigures())
	release()
	if err != nil || !strings.Contains(st.LastReloadError, "open-files limit") || reconfigured != 0 {
		t.Fatalf("out of descriptors: %+v (%v); want a rejected reload naming the open-files limit, and no change", st, err)
	}
	st = f.wait(t, "the change applied once descriptors are free", func(s Stats) bool {
		return s.LastReload != nil && s.LastReload.Error == "" && slices.Equal(s.LastReload.Added, []string{"b"})
	})
	if st.LastReload.Trigger != "retry" {
		t.Errorf("applied by %q, want the retry", st.LastReload.Trigger)
	}
}

// The index's folder removed under a running gateway (rm -rf of the data
// folder, then mkdir -p): the index is served from its open files and
// written again, so that the next start is a warm one (it was written only
// at the next re-index).
func TestIndexWrittenAgainAfterItsFolderWasRemoved(t *testing.T) {
	data := t.TempDir()
	dir := index.Dir(data)
	f, _ := runApple(t, dir, &Options{Debounce: time.Millisecond, StorageRetry: 10 * time.Millisecond})
	gen := f.loop.Stats().CatalogGeneration
	if err := os.RemoveAll(dir); err != nil {
		t.Fatal(err)
	}
	f.wait(t, "the index written again", func(s Stats) bool { return s.CatalogGeneration > gen && !s.Reindexing })
	if _, err := os.Stat(dir); err != nil {
		t.Errorf("the index's folder: %v", err)
	}
	if got := f.find(t, "apple", 5); !slices.Equal(got, []string{"a__apple"}) {
		t.Errorf("search after: %v", got)
	}
}
