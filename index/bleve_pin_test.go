package index

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/blevesearch/bleve/v2"

	"github.com/toolgate/toolgate/index/catalog"
)

// The incremental keyword update (update.go) leans on how scorch lays out
// and writes its files, which Bleve does not promise. This test pins each
// assumption on raw Bleve, so that an upgrade that breaks one fails here,
// loudly and by name, instead of as a wrong BM25 score or a previous
// generation written through a hard link. An upgrade that passes still
// needs a read of the new scorch (persister.go, merge.go, zapx segment.go)
// for what a test cannot show: see the comment at the top of update.go.

// bleveVerified are the module versions update.go's assumptions were read
// and tested against. Change them only after re-reading.
var bleveVerified = map[string]string{
	"github.com/blevesearch/bleve/v2":              "v2.6.3",
	"github.com/blevesearch/zapx/v17":              "v17.2.5", // scorch's default segment format
	"github.com/blevesearch/scorch_segment_api/v2": "v2.4.11",
	"go.etcd.io/bbolt":                             "v1.4.0", // store/root.bolt, rewritten in place
}

func TestBleveAssumptions(t *testing.T) {
	t.Run("versions verified", func(t *testing.T) {
		args := []string{"list", "-m", "-f", "{{.Path}} {{.Version}}"}
		for mod := range bleveVerified {
			args = append(args, mod)
		}
		cmd := exec.Command("go", args...)
		cmd.Dir = ".."
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("go list -m: %v", err)
		}
		have := map[string]string{}
		for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
			if mod, v, ok := strings.Cut(line, " "); ok {
				have[mod] = v
			}
		}
		for mod, v := range bleveVerified {
			if have[mod] != v {
				t.Errorf("%s is %q; the incremental update (index/update.go) was verified against %s: re-check its assumptions in the new version's scorch source (see update.go), then update bleveVerified", mod, have[mod], v)
			}
		}
	})

	base := []catalog.Tool{
		{Server: "s", Name: "one", Description: "zork blip"},
		{Server: "s", Name: "two", Description: "frob quux"},
		{Server: "s", Name: "three", Description: "zork wibble"},
	}
	src := filepath.Join(t.TempDir(), "bleve")
	if err := buildBleveOnDisk(context.Background(), src, base); err != nil {
		t.Fatal(err)
	}
	srcFiles := bleveFiles(t, src)

	t.Run("layout: index_meta.json, store/root.bolt, store/<hex id>.zap", func(t *testing.T) {
		zap := regexp.MustCompile(`^store/[0-9a-f]{12}\.zap$`)
		var zaps int
		for _, f := range srcFiles {
			switch {
			case f == "index_meta.json", f == "store/root.bolt":
			case zap.MatchString(f):
				zaps++
			default:
				t.Errorf("unexpected file %s in a built index (cloneBleve copies it; is it written in place or per segment?)", f)
			}
		}
		if zaps != 1 || !slices.Contains(srcFiles, "store/root.bolt") || !slices.Contains(srcFiles, "index_meta.json") {
			t.Errorf("built index holds %v, want index_meta.json, store/root.bolt and one segment", srcFiles)
		}
	})

	// An update as update.go makes it: clone, open without merges, one
	// batch that deletes one document and adds one.
	dst := filepath.Join(t.TempDir(), "bleve")
	if err := cloneBleve(src, dst); err != nil {
		t.Fatal(err)
	}
	before := map[string][]byte{}
	for _, f := range srcFiles {
		b, err := os.ReadFile(filepath.Join(src, f))
		if err != nil {
			t.Fatal(err)
		}
		before[f] = b
	}
	bi, err := bleve.OpenUsing(dst, noMerges)
	if err != nil {
		t.Fatal(err)
	}
	b := bi.NewBatch()
	b.Delete(base[1].ID())
	added := catalog.Tool{Server: "s", Name: "four", Description: "zork snark"}
	if err := b.Index(added.ID(), bleveDoc(added)); err != nil {
		t.Fatal(err)
	}
	if err := bi.Batch(b); err != nil {
		t.Fatal(err)
	}

	t.Run("the reader is a scorch snapshot whose field cardinality sums the segments' dictionaries", func(t *testing.T) {
		segs, stored, live, err := segmentStats(bi)
		if err != nil {
			t.Fatal(err)
		}
		if segs != 2 || stored != 4 || live != 3 {
			t.Errorf("after one batch without merges: %d segments, %d documents stored, %d live; want 2, 4, 3", segs, stored, live)
		}
		card, err := fieldCardinalities(bi)
		if err != nil {
			t.Fatal(err)
		}
		// The first segment's dictionary keeps the deleted document's
		// terms (zork blip frob quux wibble), the second has its own
		// (zork snark): zork counts twice, frob and quux still count.
		if card[fieldDesc] != 7 {
			t.Errorf("FieldCardinality(description) = %d, want 5 + 2 = 7 (checkCardinalities relies on this sum)", card[fieldDesc])
		}
	})
	if err := bi.Close(); err != nil {
		t.Fatal(err)
	}

	t.Run("a batch writes a new segment above every id and leaves the linked ones alone", func(t *testing.T) {
		dstFiles := bleveFiles(t, dst)
		var newZaps []string
		for _, f := range dstFiles {
			if strings.HasSuffix(f, ".zap") && !slices.Contains(srcFiles, f) {
				newZaps = append(newZaps, f)
			}
		}
		if len(newZaps) != 1 {
			t.Fatalf("segments after the batch: %v (before: %v), want exactly one new one (merges off)", dstFiles, srcFiles)
		}
		for _, f := range srcFiles {
			if !strings.HasSuffix(f, ".zap") {
				continue
			}
			if zapID(t, newZaps[0]) <= zapID(t, f) {
				t.Errorf("new segment %s is not numbered above the linked %s", newZaps[0], f)
			}
			si, err1 := os.Stat(filepath.Join(src, f))
			di, err2 := os.Stat(filepath.Join(dst, f))
			if err1 != nil || err2 != nil || !os.SameFile(si, di) {
				t.Errorf("segment %s of the clone is no longer the linked file (%v, %v)", f, err1, err2)
			}
		}
		for f, b := range before {
			now, err := os.ReadFile(filepath.Join(src, f))
			if err != nil || !bytes.Equal(now, b) {
				t.Errorf("%s of the source index changed under the update (%v)", f, err)
			}
		}
		if b, _ := os.ReadFile(filepath.Join(dst, "store", "root.bolt")); bytes.Equal(b, before["store/root.bolt"]) {
			t.Error("the clone's root.bolt did not change: the batch's segment is not recorded there")
		}
	})

	t.Run("reopened, the update holds its documents", func(t *testing.T) {
		bi, err := bleve.OpenUsing(dst, noMerges)
		if err != nil {
			t.Fatal(err)
		}
		defer bi.Close()
		if n, err := bi.DocCount(); err != nil || n != 3 {
			t.Errorf("DocCount = %d, %v; want 3", n, err)
		}
		if segs, _, _, err := segmentStats(bi); err != nil || segs != 2 {
			t.Errorf("%d segments after reopening (%v), want 2: merges ran", segs, err)
		}
	})
}

// bleveFiles lists the regular files of a Bleve folder, relative, with /.
func bleveFiles(t *testing.T, dir string) []string {
	t.Helper()
	var out []string
	err := filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, err := filepath.Rel(dir, p)
		out = append(out, filepath.ToSlash(rel))
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(out)
	return out
}

func zapID(t *testing.T, f string) uint64 {
	t.Helper()
	id, err := strconv.ParseUint(strings.TrimSuffix(filepath.Base(f), ".zap"), 16, 64)
	if err != nil {
		t.Fatalf("segment file %s: %v", f, err)
	}
	return id
}
