package learn

import (
	"bytes"
	"errors"
	"fmt"
	"maps"
	"math"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/dgraph-io/badger/v4"

	"github.com/toolgate/toolgate/index/catalog"
	"github.com/toolgate/toolgate/internal/datafile"
	"github.com/toolgate/toolgate/internal/storage"
	"github.com/toolgate/toolgate/internal/testenv"
)

type clock struct{ t time.Time }

func (c *clock) now() time.Time { return c.t }

func open(t *testing.T, dir string, c *clock) *Store {
	t.Helper()
	s, err := Open(dir, &Options{InMemory: dir == "", Now: c.now, HalfLife: 24 * time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

var (
	readFile = catalog.Tool{Server: "fs", Name: "read_file", Description: "Read the complete contents of a file from the file system."}
	issue    = catalog.Tool{Server: "github", Name: "create_issue", Description: "Open a new issue in a GitHub repository."}
)

func pairsOf(s *Store) map[string]float64 {
	out := map[string]float64{}
	for _, p := range s.Pairs() {
		out[p.Tool+" | "+p.Query] = p.Weight
	}
	return out
}

func TestRecordPairsAndDecay(t *testing.T) {
	c := &clock{time.Unix(1_700_000_000, 0)}
	s := open(t, "", c)
	defer s.Close()
	g0 := s.Generation()
	s.Record("  read   my notes file ", readFile)
	s.Record("read my notes file", readFile) // the same query again: not a second pair
	s.Record("file a bug", issue)
	if s.Generation() == g0 {
		t.Error("generation unchanged after Record")
	}
	got := pairsOf(s)
	if len(got) != 2 || got["fs__read_file | read my notes file"] != 1 || got["github__create_issue | file a bug"] != 1 {
		t.Fatalf("pairs %v", got)
	}
	c.t = c.t.Add(24 * time.Hour)
	s.Record("file a bug", issue) // seen again: weight back to 1
	got = pairsOf(s)
	if w := got["fs__read_file | read my notes file"]; math.Abs(w-0.5) > 1e-9 {
		t.Errorf("a pair unseen for one half-life weighs %v, want 0.5", w)
	}
	if w := got["github__create_issue | file a bug"]; w != 1 {
		t.Errorf("a pair seen again weighs %v, want 1", w)
	}
	// Time passes on the store's clock, which records move: six days
	// without one age nothing.
	c.t = c.t.Add(6 * 24 * time.Hour)
	if _, err := s.Sync(nil); err != nil {
		t.Fatal(err)
	}
	if got := pairsOf(s); len(got) != 2 {
		t.Errorf("pairs aged with no record since: %v", got)
	}
	// A record six days on leaves both pairs six half-lives or more
	// unseen: they are deleted at the next Sync.
	s.Record("open a ticket", issue)
	if _, err := s.Sync(nil); err != nil {
		t.Fatal(err)
	}
	if got := pairsOf(s); len(got) != 1 || got["github__create_issue | open a ticket"] != 1 {
		t.Errorf("after six half-lives: %v, want only the new pair", got)
	}
}

// The wall clock set forward by any amount ages the pairs by at most
// MaxClockStep, set back it ages nothing; the store's clock survives a
// restart (issue: a clock set 15 months forward deleted every pair at the
// next catalog sync).
func TestClockJumps(t *testing.T) {
	dir := t.TempDir()
	t0 := time.Unix(1_700_000_000, 0)
	c := &clock{t0}
	openDefault := func() *Store {
		s, err := Open(dir, &Options{Now: c.now})
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	s := openDefault()
	s.Record("read my notes file", readFile)

	c.t = t0.Add(450 * 24 * time.Hour) // five half-lives forward
	if _, err := s.Sync([]catalog.Tool{readFile, issue}); err != nil {
		t.Fatal(err)
	}
	if w := pairsOf(s)["fs__read_file | read my notes file"]; w != 1 {
		t.Fatalf("after the clock jumped forward, with no record since: weight %v, want 1", w)
	}
	s.Record("file a bug", issue) // recorded while the clock is wrong
	if _, err := s.Sync([]catalog.Tool{readFile, issue}); err != nil {
		t.Fatal(err)
	}
	want := math.Exp2(-float64(MaxClockStep) / float64(DefaultHalfLife))
	if w := pairsOf(s)["fs__read_file | read my notes file"]; math.Abs(w-want) > 1e-9 {
		t.Fatalf("a record after the jump: the older pair weighs %v, want %v (aged by MaxClockStep only)", w, want)
	}

	c.t = t0.Add(time.Hour) // the clock set right again
	s.Record("open a ticket", issue)
	got := pairsOf(s)
	if len(got) != 3 || got["github__create_issue | open a ticket"] != 1 || got["github__create_issue | file a bug"] != 1 {
		t.Fatalf("after the clock was set back: %v; want three pairs, the two newest at weight 1", got)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = openDefault()
	defer s.Close()
	if again := pairsOf(s); fmt.Sprint(again) != fmt.Sprint(got) {
		t.Errorf("reopened: %v, want %v", again, got)
	}
}

// One tool keeps at most MaxQueriesPerTool queries, the most recent.
func TestCapPerTool(t *testing.T) {
	c := &clock{time.Unix(1_700_000_000, 0)}
	s := open(t, "", c)
	defer s.Close()
	for i := range MaxQueriesPerTool + 6 {
		c.t = c.t.Add(time.Minute)
		if err := s.Add([]Pair{{Query: fmt.Sprintf("query number %d", i), Tool: readFile.ID()}}, nil); err != nil {
			t.Fatal(err)
		}
	}
	got := pairsOf(s)
	if len(got) != MaxQueriesPerTool {
		t.Fatalf("%d pairs kept, want %d", len(got), MaxQueriesPerTool)
	}
	for i := range 6 {
		if _, ok := got[fmt.Sprintf("fs__read_file | query number %d", i)]; ok {
			t.Errorf("oldest query %d kept", i)
		}
	}
	if err := s.Add([]Pair{{Query: "x", Tool: "not-namespaced"}}, nil); err == nil {
		t.Error("a tool name without server__ accepted")
	}
}

// A log that gives one tool many queries at once (toolgate learn --queries
// of 20,000 for one tool) is capped as one record is: the cap deleted what
// it dropped in one transaction, and Badger refused it whole ("Txn is too
// big to fit into one request"), so nothing of the log was kept in bounds
// and the command failed.
func TestCapPerToolOfABigLog(t *testing.T) {
	s := open(t, "", &clock{time.Unix(1_700_000_000, 0)})
	defer s.Close()
	pairs := make([]Pair, 20_000)
	for i := range pairs {
		pairs[i] = Pair{Query: fmt.Sprintf("read the notes of meeting number %d of the quarterly planning", i), Tool: readFile.ID()}
	}
	if err := s.Add(pairs, nil); err != nil {
		t.Fatal(err)
	}
	if got := pairsOf(s); len(got) != MaxQueriesPerTool {
		t.Fatalf("%d pairs kept, want %d", len(got), MaxQueriesPerTool)
	}
}

// A write that fails as Badger starts its next memtable (a file-size limit
// under the memtable's 4 MiB here; a folder gone read-only or full between
// the data folder's check and the write) leaves Badger without one: its
// next read panicked (the cap's look at the tool's pairs, then the
// ranker's Pairs) and its next write ends the process. The store reads
// and writes it no more: the ranking goes on without the pairs, a record
// is refused with why, and Close leaves it unclosed (what it held is in
// its write-ahead log).
func TestFailedMemtableLeavesStoreAlone(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "learn")
	s := open(t, dir, &clock{time.Unix(1_700_000_000, 0)})
	pairs := make([]Pair, 50_000)
	for i := range pairs {
		pairs[i] = Pair{Query: fmt.Sprintf("read the notes of meeting number %d of the quarterly planning", i), Tool: readFile.ID()}
	}
	var err error
	testenv.WithFileSizeLimit(t, 1<<20, func() { err = s.Add(pairs, nil) })
	if err == nil {
		t.Fatal("Add under a 1 MiB file-size limit succeeded: the test no longer makes Badger fail a memtable")
	}
	if p := s.Pairs(); len(p) != 0 {
		t.Errorf("pairs read from a store whose memtable failed: %d", len(p))
	}
	if err := s.Add([]Pair{{Query: "one more", Tool: readFile.ID()}}, nil); err == nil || !strings.Contains(err.Error(), "memtable") {
		t.Errorf("a record after the failed memtable: %v, want it refused saying why", err)
	}
	if err := s.Close(); err == nil || !strings.Contains(err.Error(), "left unclosed") {
		t.Errorf("Close: %v, want the store left unclosed", err)
	}
}

func TestResetAndServerReset(t *testing.T) {
	s := open(t, "", &clock{time.Unix(1_700_000_000, 0)})
	defer s.Close()
	s.Record("read my notes", readFile)
	s.Record("file a bug", issue)
	n, err := s.Reset("github")
	if err != nil || n != 1 {
		t.Fatalf("Reset(github) = %d, %v; want 1", n, err)
	}
	if got := pairsOf(s); len(got) != 1 || got["fs__read_file | read my notes"] == 0 {
		t.Errorf("after Reset(github): %v", got)
	}
	if n, err := s.Reset(""); err != nil || n != 1 {
		t.Fatalf("Reset() = %d, %v; want 1", n, err)
	}
	if got := pairsOf(s); len(got) != 0 {
		t.Errorf("after Reset: %v", got)
	}
}

// A tool whose description is rewritten loses its pairs; a small edit and
// a tool missing from the catalog keep theirs.
func TestSyncMaterialChange(t *testing.T) {
	s := open(t, "", &clock{time.Unix(1_700_000_000, 0)})
	defer s.Close()
	s.Record("read my notes", readFile)
	s.Record("file a bug", issue)
	edited := readFile
	edited.Description = "Read the complete contents of a file from the file system, as text."
	dropped, err := s.Sync([]catalog.Tool{edited})
	if err != nil || len(dropped) != 0 {
		t.Fatalf("Sync after a small edit dropped %v (%v)", dropped, err)
	}
	rewritten := readFile
	rewritten.Description = "Delete a branch and every commit only it holds."
	g := s.Generation()
	dropped, err = s.Sync([]catalog.Tool{rewritten})
	if err != nil || len(dropped) != 1 || dropped[0] != "fs__read_file" {
		t.Fatalf("Sync after a rewrite dropped %v (%v), want fs__read_file", dropped, err)
	}
	if s.Generation() == g {
		t.Error("generation unchanged after dropping pairs")
	}
	if got := pairsOf(s); len(got) != 1 || got["github__create_issue | file a bug"] == 0 {
		t.Errorf("after Sync: %v (the absent tool keeps its pair)", got)
	}
	// The rewritten tool starts over: its new definition is recorded.
	s.Record("delete the old branch", rewritten)
	if dropped, _ := s.Sync([]catalog.Tool{rewritten}); len(dropped) != 0 {
		t.Errorf("new definition dropped again: %v", dropped)
	}
}

// Pairs survive closing and reopening; a second process is refused.
func TestPersistsAndBusy(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "learn")
	c := &clock{time.Unix(1_700_000_000, 0)}
	s := open(t, dir, c)
	s.Record("read my notes", readFile)
	if _, err := Open(dir, nil); !errors.Is(err, ErrBusy) {
		t.Errorf("second Open: %v, want ErrBusy", err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = open(t, dir, c)
	defer s.Close()
	if got := pairsOf(s); got["fs__read_file | read my notes"] != 1 {
		t.Errorf("after reopening: %v", got)
	}
}

func TestOverlap(t *testing.T) {
	for _, tt := range []struct {
		a, b string
		want float64
	}{
		{"read a file", "Read a FILE.", 1},
		{"read a file", "write a file", 0.5},
		{"", "", 1},
	} {
		if got := overlap(tt.a, tt.b); got != tt.want {
			t.Errorf("overlap(%q, %q) = %v, want %v", tt.a, tt.b, got, tt.want)
		}
	}
}

// fakeStorage counts what the store reports.
type fakeStorage struct {
	storage.OSMkdir
	refuse error
	fails  []error
	oks    int
}

func (f *fakeStorage) Check() error   { return f.refuse }
func (f *fakeStorage) Fail(err error) { f.fails = append(f.fails, err) }
func (f *fakeStorage) OK()            { f.oks++ }

// refusingAfter is a Storage that takes the next ok writes, then refuses.
type refusingAfter struct {
	fakeStorage
	ok atomic.Int64
}

func (f *refusingAfter) Check() error {
	if f.ok.Add(-1) >= 0 {
		return nil
	}
	return errors.New("data folder is on a full file system")
}

// A reset of many pairs deletes them in batches, and asks the data folder
// before each: one that fills or turns read-only during a long reset
// stops it at the next batch, as a record does, rather than Badger
// writing on into its memory maps (SIGBUS on a full disk).
func TestResetChecksEachBatch(t *testing.T) {
	st := &refusingAfter{}
	st.ok.Store(1 << 30)
	s, err := Open(filepath.Join(t.TempDir(), "learn"), &Options{Storage: st, Now: (&clock{time.Unix(1_700_000_000, 0)}).now})
	if err != nil {
		t.Fatal(err)
	}
	s.gc.Stop() // its run at open asks too
	var pairs []Pair
	for tool := range 100 {
		for q := range 30 {
			pairs = append(pairs, Pair{Query: fmt.Sprintf("query %d", q), Tool: fmt.Sprintf("s__t%d", tool)})
		}
	}
	if err := s.Add(pairs, nil); err != nil {
		t.Fatal(err)
	}
	if n := len(s.Pairs()); n != len(pairs) {
		t.Fatalf("%d pairs recorded, want %d", n, len(pairs))
	}
	st.ok.Store(1) // the reset's first batch
	if _, err := s.Reset(""); err == nil || !strings.Contains(err.Error(), "full file system") {
		t.Errorf("a reset while the folder fills: %v, want the refusal", err)
	}
	if n := len(s.Pairs()); n == 0 || n == len(pairs) {
		t.Errorf("%d of %d pairs left after a reset stopped after its first batch", n, len(pairs))
	}
	s.Close()
}

// The store's folder removed under it: recording goes on without writing
// (a failure reported, searches keep the pairs read), and Close returns at
// once, leaving the store unclosed, instead of waiting for a flush Badger
// would retry forever. A data folder that refuses writes at the start is
// an error naming the folder.
func TestStorageFaults(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "learn")
	st := &fakeStorage{}
	c := &clock{time.Unix(1_700_000_000, 0)}
	s, err := Open(dir, &Options{Storage: st, Now: c.now})
	if err != nil {
		t.Fatal(err)
	}
	s.Record("read my notes", readFile)
	if st.oks == 0 || len(st.fails) != 0 {
		t.Fatalf("a good write: %d OK, failures %v", st.oks, st.fails)
	}
	if err := os.RemoveAll(dir); err != nil {
		t.Fatal(err)
	}
	s.Record("file a bug", issue)
	if len(st.fails) == 0 || !strings.Contains(st.fails[0].Error(), "removed or replaced") {
		t.Errorf("failures %v, want the folder's removal reported", st.fails)
	}
	if got := pairsOf(s); got["fs__read_file | read my notes"] != 1 || len(got) != 1 {
		t.Errorf("pairs after the fault: %v, want the one read before", got)
	}
	done := make(chan error, 1)
	go func() { done <- s.Close() }()
	select {
	case err := <-done:
		if err == nil || !strings.Contains(err.Error(), "left unclosed") {
			t.Errorf("Close = %v, want left unclosed with the reason", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Close did not return")
	}

	refusing := &fakeStorage{refuse: errors.New("data folder is read-only")}
	if _, err := Open(filepath.Join(t.TempDir(), "learn"), &Options{Storage: refusing}); err == nil || !strings.Contains(err.Error(), "read-only") {
		t.Errorf("Open on a refusing folder = %v, want the refusal", err)
	}
}

// A log larger than one Badger transaction holds is added whole (eval
// --learn-from with all of metatool's queries failed: "Txn is too big").
func TestAddLargeLog(t *testing.T) {
	s := open(t, "", &clock{time.Unix(1_700_000_000, 0)})
	defer s.Close()
	var pairs []Pair
	for i := range 50 * addBatch / 10 {
		pairs = append(pairs, Pair{Query: fmt.Sprintf("a query of a log, number %d, long enough to weigh something", i), Tool: fmt.Sprintf("srv__tool_%d", i%100)})
	}
	if err := s.Add(pairs, nil); err != nil {
		t.Fatal(err)
	}
	if n, tools := s.Stats(); n != len(pairs) || tools != 100 {
		t.Errorf("stored %d pairs for %d tools, want %d for 100", n, tools, len(pairs))
	}
}

// The data folder removed while the store is open, then made again: the
// store says its folder was replaced, Reopen fails while the data folder
// is missing and, once it is back, moves every pair to a new store there,
// which records and keeps them across a restart.
func TestReopenAfterFolderRemoved(t *testing.T) {
	data := filepath.Join(t.TempDir(), "data")
	h := storage.New(data, nil)
	if err := h.Prepare(); err != nil {
		t.Fatal(err)
	}
	w := h.Writer("learned pairs", "pairs are not recorded")
	dir := filepath.Join(data, "learn")
	opts := &Options{Storage: w}
	s, err := Open(dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	s.Record("read my notes file", readFile)
	if s.Replaced() {
		t.Fatal("Replaced before the folder was removed")
	}
	if err := os.RemoveAll(data); err != nil {
		t.Fatal(err)
	}
	if !s.Replaced() {
		t.Fatal("Replaced is false once the folder was removed")
	}
	if _, err := s.Reopen(opts); err == nil {
		t.Fatal("Reopen with no data folder: no error")
	}
	if _, err := os.Stat(data); err == nil {
		t.Fatal("Reopen made the data folder again")
	}
	if err := os.Mkdir(data, 0o755); err != nil {
		t.Fatal(err)
	}
	n, err := s.Reopen(opts)
	if err != nil {
		t.Fatal(err)
	}
	if n.Generation() == s.Generation() {
		t.Error("the generation did not change with the store")
	}
	n.Record("file a bug", issue)
	if w.Failing() {
		t.Error("the new store's writes are reported failing")
	}
	if err := n.Close(); err != nil {
		t.Fatal(err)
	}
	r, err := Open(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if got := pairsOf(r); len(got) != 2 || got["fs__read_file | read my notes file"] == 0 || got["github__create_issue | file a bug"] == 0 {
		t.Errorf("pairs after the restart: %v, want the one from before the removal and the one after", got)
	}
}

// Reopen once another process opened a new store in the folder made again,
// recorded there and released it (two gateways on the data folder, the one
// that did not hold the store stopped first): the new store keeps its own
// pairs beside the removed one's, and a pair both hold counts the
// sightings of both. The copy used to overwrite the new store's record of
// a pair both held.
func TestReopenMergesIntoAStoreMadeMeanwhile(t *testing.T) {
	data := filepath.Join(t.TempDir(), "data")
	if err := os.Mkdir(data, 0o755); err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(data, "learn")
	s, err := Open(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	s.Record("read my notes file", readFile)
	s.Record("read my notes file", readFile)
	if err := os.RemoveAll(data); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(data, 0o755); err != nil {
		t.Fatal(err)
	}
	other, err := Open(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	other.Record("read my notes file", readFile)
	other.Record("file a bug", issue)
	if err := other.Close(); err != nil {
		t.Fatal(err)
	}
	n, err := s.Reopen(nil)
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	h, err := n.Export()
	if err != nil {
		t.Fatal(err)
	}
	counts := map[string]uint32{}
	for _, p := range h.Pairs {
		counts[p.Tool+" | "+p.Query] = p.Count
	}
	if len(counts) != 2 || counts["fs__read_file | read my notes file"] != 3 || counts["github__create_issue | file a bug"] != 1 {
		t.Errorf("pairs after the reopen: %v, want both stores' (the shared one seen 3 times)", counts)
	}
	if len(h.Docs) != 2 {
		t.Errorf("definitions after the reopen: %v, want both tools'", h.Docs)
	}
}

// TestOverFileSizeLimit: learned pairs that cannot be opened under a
// file-size limit (ulimit -f, LimitFSIZE=) say it is the limit, not
// damage, and open with every pair once it is raised: the memtable file
// the limit left empty kept them from opening, and they read as damaged.
func TestOverFileSizeLimit(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "learn")
	c := &clock{time.Unix(1_700_000_000, 0)}
	s := open(t, dir, c)
	s.Record("read my notes", readFile)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	var err error
	testenv.WithFileSizeLimit(t, 64<<10, func() { s, err = Open(dir, nil) })
	if err == nil {
		s.Close()
		t.Fatal("opened under a file-size limit below a memtable")
	}
	if storage.Shortage(err) != syscall.EFBIG {
		t.Errorf("Open under the limit: %v, want EFBIG (the limit)", err)
	}
	s = open(t, dir, c)
	defer s.Close()
	if got := pairsOf(s); got["fs__read_file | read my notes"] != 1 {
		t.Errorf("after the limit was raised: %v, want the pair learned before", got)
	}
}

// docCount counts the tool definitions the store keeps (d/ keys).
func docCount(t *testing.T, s *Store) int {
	t.Helper()
	n := 0
	if err := s.db.View(func(txn *badger.Txn) error {
		it := txn.NewIterator(badger.IteratorOptions{Prefix: []byte(pfxDoc)})
		defer it.Close()
		for it.Rewind(); it.Valid(); it.Next() {
			n++
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return n
}

// A tool whose pairs all decayed away loses its recorded definition with
// them: the definitions stay one per tool with pairs, not one per tool ever
// run (a gateway whose servers come and go for months), and a tool learned
// again after its definition changed is compared with the definition it
// was learned under, not the one of its long-gone pairs (which dropped the
// new pairs at the next Sync).
func TestDecayedToolForgetsItsDefinition(t *testing.T) {
	c := &clock{time.Unix(1_700_000_000, 0)}
	s := open(t, "", c)
	defer s.Close()
	for i := range 50 {
		s.Record("read my notes", catalog.Tool{Server: "gone", Name: fmt.Sprintf("tool_%d", i), Description: "A tool of a server that went away."})
	}
	s.Record("read my notes", readFile)
	if n := docCount(t, s); n != 51 {
		t.Fatalf("%d definitions kept, want 51", n)
	}
	c.t = c.t.Add(6 * 24 * time.Hour) // six half-lives
	s.Record("file a bug", issue)
	if _, err := s.Sync([]catalog.Tool{readFile, issue}); err != nil {
		t.Fatal(err)
	}
	if got := pairsOf(s); len(got) != 1 {
		t.Fatalf("after six half-lives: %v, want only the new pair", got)
	}
	if n := docCount(t, s); n != 1 {
		t.Errorf("%d definitions kept for 1 tool with pairs, want 1", n)
	}

	rewritten := readFile
	rewritten.Description = "Delete a branch and every commit only it holds."
	s.Record("delete the old branch", rewritten)
	if dropped, err := s.Sync([]catalog.Tool{rewritten, issue}); err != nil || len(dropped) != 0 {
		t.Errorf("Sync dropped %v (%v): the pair learned under the new definition was compared with the decayed one's", dropped, err)
	}
}

// vlogBytes is what the value log files in dir take on disk (as du counts:
// the one Badger writes is a sparse file of twice its size limit).
func vlogBytes(t *testing.T, dir string) int64 {
	t.Helper()
	logs, err := filepath.Glob(filepath.Join(dir, "*.vlog"))
	if err != nil {
		t.Fatal(err)
	}
	var n int64
	for _, l := range logs {
		var st syscall.Stat_t
		if err := syscall.Stat(l, &st); err != nil {
			t.Fatal(err)
		}
		n += st.Blocks * 512
	}
	return n
}

// Definitions above Badger's value threshold live in its value log; once
// deleted they used to stay there for good (nothing rewrote the files):
// 3,000 records and resets of 20 tools with 6.5 KiB descriptions left 373
// MiB of value logs holding nothing live.
func TestValueLogGarbageCollected(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "learn")
	c := &clock{t: time.Unix(1_700_000_000, 0)}
	s := open(t, dir, c)
	desc := strings.Repeat("lorem ipsum dolor sit amet ", 240)
	for round := range 150 { // about 20 MiB of definitions: two value log files
		var pairs []Pair
		defs := map[string]catalog.Tool{}
		for i := range 20 {
			tool := catalog.Tool{Server: "s", Name: fmt.Sprintf("t%d", i), Description: fmt.Sprintf("%d %s", round, desc)}
			pairs = append(pairs, Pair{Query: "find the thing", Tool: tool.ID()})
			defs[tool.ID()] = tool
		}
		if err := s.Add(pairs, defs); err != nil {
			t.Fatal(err)
		}
		if _, err := s.Reset(""); err != nil {
			t.Fatal(err)
		}
	}
	// Kept: a definition recorded after the resets.
	big := catalog.Tool{Server: "s", Name: "kept", Description: desc}
	if err := s.Add([]Pair{{Query: "keep me", Tool: big.ID()}}, map[string]catalog.Tool{big.ID(): big}); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	before := vlogBytes(t, dir)
	if before < 16<<20 {
		t.Fatalf("value logs of %d bytes before: the test wrote too little", before)
	}
	s = open(t, dir, c)
	defer s.Close()
	s.gc.Stop() // the run at open, done: the one below is the test's own
	s.collectGarbage()
	after := vlogBytes(t, dir)
	if after > before/10 {
		t.Fatalf("value logs of %d bytes before, %d after the garbage collection: the deleted definitions stayed", before, after)
	}
	if p := pairsOf(s); len(p) != 1 {
		t.Fatalf("pairs after the collection: %v", p)
	}
	var doc string
	if err := s.db.View(func(txn *badger.Txn) error {
		item, err := txn.Get([]byte(pfxDoc + big.ID()))
		if err != nil {
			return err
		}
		v, err := item.ValueCopy(nil)
		doc = string(v)
		return err
	}); err != nil || doc != catalog.DocumentText(big) {
		t.Fatalf("kept definition after the collection: %d bytes, %v", len(doc), err)
	}
}

// A store a newer toolgate wrote (a later format) is what a rollback finds:
// Open says so, with a datafile.NewerError, never the advice to delete it,
// and leaves its pairs as they are for that toolgate to read again.
func TestOpenNewerFormatKeepsPairs(t *testing.T) {
	dir := t.TempDir()
	c := &clock{t: time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)}
	s := open(t, dir, c)
	s.Record("read a file", readFile)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	setFormat(t, dir, "2")

	_, err := Open(dir, &Options{Now: c.now})
	ne, ok := datafile.AsNewer(err)
	if !ok {
		t.Fatalf("Open of a format-2 store: %v, want a datafile.NewerError", err)
	}
	if ne.Found != 2 || ne.Reads != 1 || ne.Path != dir {
		t.Errorf("NewerError = %+v", ne)
	}
	if strings.Contains(err.Error(), "delete") {
		t.Errorf("error %q advises deleting a newer toolgate's pairs", err)
	}
	// The pairs are all there for the newer toolgate.
	setFormat(t, dir, "1")
	s = open(t, dir, c)
	defer s.Close()
	if n, _ := s.Stats(); n != 1 {
		t.Errorf("after the refused open the store holds %d pairs, want 1", n)
	}
}

// setFormat stamps the store in dir with format f, as another toolgate would.
func setFormat(t *testing.T, dir, f string) {
	t.Helper()
	db, err := badger.Open(badger.DefaultOptions(dir).WithLogger(nil))
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Update(func(txn *badger.Txn) error { return txn.Set(keyFormat, []byte(f)) }); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
}

// Backup writes every pair (with its counts and times) and definition as a
// stream that Restore loads into a new store: the copy a store held open
// by a running gateway can give, where a copy of its files may not open.
func TestBackupRestore(t *testing.T) {
	c := &clock{t: time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)}
	s := open(t, t.TempDir(), c)
	defer s.Close()
	s.Record("read a file", readFile)
	s.Record("read a file", readFile)
	c.t = c.t.Add(time.Hour)
	s.Record("file an issue", issue)
	var b bytes.Buffer
	if err := s.Backup(&b); err != nil {
		t.Fatal(err)
	}
	copyDir := t.TempDir()
	r, err := Restore(copyDir, &b, &Options{Now: c.now, HalfLife: 24 * time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := pairsOf(r), pairsOf(s); !maps.Equal(got, want) {
		t.Errorf("restored pairs %v, want %v", got, want)
	}
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	// Into a store that holds pairs already: refused, nothing changed.
	s.Backup(&b)
	if _, err := Restore(copyDir, &b, nil); err == nil {
		t.Error("Restore into a store with pairs: no error")
	}
}

// A query a client pasted an API key into (by mistake or to plant it) is
// learned with the key masked, however the pair comes: a gateway's record
// of a search and run (Record), `learn --queries` (Add), another gateway's
// store handed over (Merge). The rest of the query is the client's intent
// and still teaches; no file of the store holds the key. It was stored as
// given, and shown by GET /learn?pairs=1.
func TestLearnedQueryKeysMasked(t *testing.T) {
	const secret = "h_cD03fp0_GMGEnIvWFyRfyAZyhfCC4hUpXh8McrBkM"
	dir := t.TempDir()
	s := open(t, dir, &clock{time.Unix(1_700_000_000, 0)})
	s.Record("read my notes tg_"+secret, readFile)
	if err := s.Add([]Pair{{Query: "file a bug with tg_" + secret, Tool: issue.ID()}}, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Merge(Held{Pairs: []HeldPair{{Tool: issue.ID(), Query: "open a ticket tg_" + secret, Count: 1, First: 1_700_000_000, Last: 1_700_000_000}}}); err != nil {
		t.Fatal(err)
	}
	want := map[string]float64{"fs__read_file | read my notes tg_***": 1, "github__create_issue | file a bug with tg_***": 1, "github__create_issue | open a ticket tg_***": 1}
	if got := pairsOf(s); !maps.Equal(got, want) {
		t.Errorf("pairs %v, want %v", got, want)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	err := filepath.WalkDir(dir, func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(path)
		if err == nil && bytes.Contains(b, []byte(secret)) {
			t.Errorf("%s holds the key", path)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
}
