package audit

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/toolgate/toolgate/internal/storage"
	"github.com/toolgate/toolgate/internal/storage/storagetest"
	"github.com/toolgate/toolgate/internal/testenv"
)

func openLog(t *testing.T, o *Options) (*Log, string, *testenv.LogBuffer) {
	t.Helper()
	var logs testenv.LogBuffer
	if o == nil {
		o = &Options{}
	}
	o.Logger = logs.Logger()
	path := filepath.Join(t.TempDir(), "audit", "audit.jsonl")
	l := Open(path, o)
	t.Cleanup(func() { l.Close() })
	return l, path, &logs
}

func readAll(t *testing.T, path string, f Filter) []Record {
	t.Helper()
	rd := NewReader(path, 0, f)
	defer rd.Close()
	recs, err := rd.Tail(0)
	if err != nil {
		t.Fatal(err)
	}
	return recs
}

// 64 sessions writing at once: every record is in the file, each a whole
// line.
func TestConcurrentWrites(t *testing.T) {
	l, path, _ := openLog(t, nil)
	const sessions, each = 64, 50
	var wg sync.WaitGroup
	for s := range sessions {
		wg.Go(func() {
			for i := range each {
				l.Write(Record{Session: fmt.Sprintf("s%02d", s), Action: "execute_tool", Tool: "memory__read_graph", Decision: Allowed, Outcome: OK, ArgumentsSHA256: HashArguments(map[string]any{"i": i})})
			}
		})
	}
	wg.Wait()
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	st := l.Stats()
	if st.Written != sessions*each || st.Dropped != 0 || st.Errors != 0 {
		t.Fatalf("stats %+v, want %d written", st, sessions*each)
	}
	recs := readAll(t, path, Filter{})
	perSession := map[string]int{}
	for _, r := range recs {
		perSession[r.Session]++
	}
	if len(recs) != sessions*each || len(perSession) != sessions {
		t.Fatalf("%d records of %d sessions in the file, want %d of %d", len(recs), len(perSession), sessions*each, sessions)
	}
	for s, n := range perSession {
		if n != each {
			t.Errorf("session %s: %d records, want %d", s, n, each)
		}
	}
	fi, err := os.Stat(path)
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("file mode %v, %v; want 0600", fi.Mode(), err)
	}
}

// The file rotates by size and keeps MaxFiles rotated files; Tail reads
// across them, newest last.
func TestRotation(t *testing.T) {
	l, path, _ := openLog(t, &Options{MaxFileBytes: 2000, MaxFiles: 2})
	for i := range 100 {
		l.Write(Record{Action: "search_tools", Decision: Allowed, Outcome: OK, ResultBytes: i})
	}
	l.Close()
	for _, p := range []string{path, Rotated(path, 1), Rotated(path, 2)} {
		fi, err := os.Stat(p)
		if err != nil {
			t.Fatalf("%s: %v", p, err)
		}
		if fi.Size() > 2000 {
			t.Errorf("%s is %d bytes, over the 2000 limit", p, fi.Size())
		}
	}
	if _, err := os.Stat(Rotated(path, 3)); !os.IsNotExist(err) {
		t.Errorf("a third rotated file is kept: %v", err)
	}
	rd := NewReader(path, 2, Filter{})
	defer rd.Close()
	recs, err := rd.Tail(5)
	if err != nil || len(recs) != 5 || recs[4].ResultBytes != 99 || recs[0].ResultBytes != 95 {
		t.Fatalf("Tail(5) = %+v, %v", recs, err)
	}
	if st := l.Stats(); st.Written != 100 || st.Errors != 0 {
		t.Errorf("stats %+v", st)
	}
}

// A log kept with more rotated files before (audit.maxFiles lowered from
// 5 to 2) keeps MaxFiles once it rotates: the files past it went on
// taking their space, beyond what audit tail reads.
func TestRotationDropsFilesPastMaxFiles(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "audit")
	path := filepath.Join(dir, "audit.jsonl")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	for i := 1; i <= 5; i++ {
		if err := os.WriteFile(Rotated(path, i), []byte("{}\n"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	l := Open(path, &Options{MaxFileBytes: 2000, MaxFiles: 2})
	for i := range 30 {
		l.Write(Record{Action: "search_tools", Decision: Allowed, Outcome: OK, ResultBytes: i})
	}
	l.Close()
	files, _ := filepath.Glob(path + "*")
	if want := []string{path, Rotated(path, 1), Rotated(path, 2)}; !slices.Equal(files, want) {
		t.Errorf("after rotating with MaxFiles 2: %v, want %v", files, want)
	}
}

// TestRotateWhileWriting: Rotate (`toolgate audit rotate`, another
// process) moves the file aside while a gateway writes it: the gateway
// opens a new file at its next record, and no record is lost or doubled
// across the rotated files. A log that is missing or empty is
// ErrNothingToRotate, and nothing is made.
func TestRotateWhileWriting(t *testing.T) {
	l, path, _ := openLog(t, &Options{MaxFiles: 50})
	if _, err := Rotate(path, 50); !errors.Is(err, ErrNothingToRotate) {
		t.Fatalf("Rotate of a log not made yet: %v, want ErrNothingToRotate", err)
	}
	const rotations = 8
	stop, done := make(chan struct{}), make(chan int)
	go func() { // a gateway writing all along, until stopped
		i := 0
		for ; ; i++ {
			select {
			case <-stop:
				done <- i
				return
			default:
			}
			l.Write(Record{Action: "execute_tool", Decision: Allowed, Outcome: OK, ResultBytes: i})
		}
	}()
	for r := range rotations {
		// Each rotation once the gateway wrote records to the new file.
		for fi, err := os.Stat(path); err != nil || fi.Size() < 4096; fi, err = os.Stat(path) {
			runtime.Gosched()
		}
		if _, err := Rotate(path, 50); err != nil {
			t.Fatalf("rotation %d: %v", r+1, err)
		}
	}
	close(stop)
	total := <-done
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	for i := 1; i <= rotations; i++ {
		if _, err := os.Stat(Rotated(path, i)); err != nil {
			t.Errorf("rotated file %d: %v", i, err)
		}
	}
	rd := NewReader(path, 50, Filter{})
	defer rd.Close()
	recs, err := rd.Tail(0)
	if err != nil {
		t.Fatal(err)
	}
	seen := make(map[int]int)
	for _, r := range recs {
		seen[r.ResultBytes]++
	}
	// A record the queue could not take within its wait is dropped and
	// counted (a flood outruns the writer under -race): that is no loss
	// of the rotation's.
	st := l.Stats()
	if want := int(st.Written); len(recs) != want || len(seen) != want || st.Errors != 0 || want+int(st.Dropped) != total {
		t.Fatalf("%d records (%d distinct) across the rotated files, want the %d written of %d (stats %+v)", len(recs), len(seen), want, total, st)
	}
	// Past maxFiles, the oldest rotated files go, as the gateway's own
	// rotation drops them.
	dropped, err := Rotate(path, 3)
	if err != nil || len(dropped) != rotations+1-3 {
		t.Errorf("Rotate keeping 3: dropped %v, %v; want the %d files past 3", dropped, err, rotations+1-3)
	}
}

// A write that fails is counted and logged with who and what; the log
// writes again once it can.
func TestWriteFailureCounted(t *testing.T) {
	l, path, logs := openLog(t, &Options{MaxFileBytes: 200, MaxFiles: 1})
	l.Write(Record{Key: "ci", Action: "execute_tool", Tool: "a__b", Decision: Allowed})
	testenv.Eventually(t, "the first record written", func() bool { return l.Stats().Written == 1 })
	// The folder becomes a file: the rotation cannot rename into it, so
	// records cannot be written.
	dir := filepath.Dir(path)
	if err := os.RemoveAll(dir); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(dir, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	for range 5 {
		l.Write(Record{Key: "ci", Action: "execute_tool", Tool: "x__lost", Decision: Allowed, Arguments: map[string]any{"v": "canary-value"}})
	}
	testenv.Eventually(t, "the failed writes counted", func() bool { return l.Stats().Dropped >= 1 && l.Stats().Errors >= 1 })
	if s := logs.String(); !strings.Contains(s, "audit record lost") || !strings.Contains(s, "x__lost") || strings.Contains(s, "canary-value") {
		t.Errorf("the loss is not logged with who and what (and never the arguments):\n%s", s)
	}
	if err := os.Remove(dir); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	before := l.Stats().Written
	l.Write(Record{Key: "ci", Action: "execute_tool", Tool: "x__back", Decision: Allowed})
	testenv.Eventually(t, "a record written after the folder is back", func() bool { return l.Stats().Written > before })
}

// A full queue: Write gives up after MaxWait, and the record is counted.
func TestFullQueueDoesNotBlock(t *testing.T) {
	l := &Log{path: "unused", opts: Options{MaxWait: time.Millisecond}, q: make(chan Record, 1), done: make(chan struct{})}
	var logs testenv.LogBuffer
	l.log = logs.Logger()
	l.Write(Record{Action: "a"}) // fills the queue; no writer runs
	l.Write(Record{Action: "b", Tool: "t__full"})
	if l.Stats().Dropped != 1 || !strings.Contains(logs.String(), "t__full") {
		t.Fatalf("stats %+v, log:\n%s", l.Stats(), logs.String())
	}
}

func TestFilterAndHash(t *testing.T) {
	// Server: a server's tools' calls and the management actions on it
	// (toolgate__disable_server's record, servers disable's), not another
	// server whose name it starts (xx__y).
	recs := []Record{{Key: "a", Tool: "x__y", Action: "execute_tool"}, {Key: "b", Action: "search_tools"},
		{Key: "c", Tool: "toolgate__disable_server", Action: "execute_tool", Server: "x"}, {Action: "servers disable", Server: "x", Transport: "cli"},
		{Key: "a", Tool: "xx__y", Action: "execute_tool"}}
	for _, tc := range []struct {
		f    Filter
		want int
	}{{Filter{}, 5}, {Filter{Key: "a"}, 2}, {Filter{Tool: "x__y"}, 1}, {Filter{Tool: "search_tools"}, 1}, {Filter{Key: "a", Tool: "search_tools"}, 0},
		{Filter{Server: "x"}, 3}, {Filter{Server: "x", Key: "c"}, 1}, {Filter{Server: "toolgate"}, 1}, {Filter{Server: "xx"}, 1}} {
		n := 0
		for _, r := range recs {
			if tc.f.Match(r) {
				n++
			}
		}
		if n != tc.want {
			t.Errorf("%+v matched %d, want %d", tc.f, n, tc.want)
		}
	}
	if HashArguments(map[string]any{"a": 1, "b": "x"}) != HashArguments(map[string]any{"b": "x", "a": 1}) {
		t.Error("the hash depends on key order")
	}
	if HashArguments(nil) != "" || len(HashArguments(map[string]any{})) != 64 {
		t.Error("HashArguments of nil / {}")
	}
}

// Follow sees records written after Tail, across rotations (several may
// come between two polls, as long as the files are still kept).
func TestFollow(t *testing.T) {
	l, path, _ := openLog(t, &Options{MaxFileBytes: 400, MaxFiles: 5})
	l.Write(Record{Action: "old", Decision: Allowed})
	testenv.Eventually(t, "the first record written", func() bool { return l.Stats().Written == 1 })
	rd := NewReader(path, 5, Filter{Key: "k"})
	if recs, err := rd.Tail(10); err != nil || len(recs) != 0 {
		t.Fatalf("Tail = %+v, %v", recs, err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	got := make(chan Record, 100)
	done := make(chan error, 1)
	go func() { done <- rd.Follow(ctx, 5*time.Millisecond, func(r Record) { got <- r }) }()
	next := 0
	for batch := range 10 {
		// Two records of each key: about two rotations, within the five
		// files kept.
		for i := range 2 {
			l.Write(Record{Key: "k", Action: "execute_tool", ResultBytes: batch*2 + i, Decision: Allowed})
			l.Write(Record{Key: "other", Action: "execute_tool", Decision: Allowed})
		}
		for next < batch*2+2 {
			select {
			case r := <-got:
				if r.ResultBytes != next || r.Key != "k" {
					t.Fatalf("record %d: %+v", next, r)
				}
				next++
			case err := <-done:
				t.Fatalf("Follow ended: %v", err)
			case <-time.After(testenv.Timeout):
				t.Fatalf("record %d never followed", next)
			}
		}
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	rd.Close()
}

// Append (a command's record) lands between the gateway's, whole.
func TestAppend(t *testing.T) {
	l, path, _ := openLog(t, nil)
	l.Write(Record{Action: "search_tools", Decision: Allowed})
	if err := Append(path, Record{Transport: "cli", Action: "tools approve", Tool: "a__b", Decision: Allowed}); err != nil {
		t.Fatal(err)
	}
	l.Write(Record{Action: "execute_tool", Decision: Allowed})
	l.Close()
	recs := readAll(t, path, Filter{})
	if len(recs) != 3 {
		t.Fatalf("%d records: %+v", len(recs), recs)
	}
	if got := readAll(t, path, Filter{Tool: "a__b"}); len(got) != 1 || got[0].Action != "tools approve" {
		t.Errorf("the command's record: %+v", got)
	}
}

// A data folder that cannot take writes at start does not stop the log:
// the failure and each lost record are counted, and it writes again once
// the folder does.
func TestOpenOnUnwritableFolder(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	if err := os.WriteFile(dir, nil, 0o600); err != nil { // a file where the folder should be
		t.Fatal(err)
	}
	var logs testenv.LogBuffer
	l := Open(filepath.Join(dir, "audit", "audit.jsonl"), &Options{Logger: logs.Logger()})
	defer l.Close()
	l.Write(Record{Action: "search_tools", Decision: Allowed})
	testenv.Eventually(t, "the record counted as lost", func() bool { return l.Stats().Dropped == 1 })
	if st := l.Stats(); st.Errors < 1 || !strings.Contains(logs.String(), "audit log open failed") {
		t.Errorf("stats %+v, log:\n%s", st, logs.String())
	}
	if err := os.Remove(dir); err != nil {
		t.Fatal(err)
	}
	l.Write(Record{Action: "search_tools", Decision: Allowed})
	testenv.Eventually(t, "a record written once the folder can be made", func() bool { return l.Stats().Written == 1 })
}

// BenchmarkWrite is what a call pays to audit itself: queueing a record
// (the writer goroutine encodes and writes it behind the caller's back).
func BenchmarkWrite(b *testing.B) {
	l := Open(filepath.Join(b.TempDir(), "audit", "audit.jsonl"), nil)
	defer l.Close()
	r := Record{Key: "ci", Transport: "http", Client: "bench", Action: "execute_tool", Tool: "memory__read_graph", Decision: Allowed, Outcome: OK, ArgumentsSHA256: HashArguments(map[string]any{"a": 1})}
	b.ReportAllocs()
	for b.Loop() {
		l.Write(r)
	}
	b.StopTimer()
	l.Close()
	if st := l.Stats(); st.Dropped != 0 {
		b.Logf("%d of %d records dropped (the writer fell behind)", st.Dropped, st.Written+st.Dropped)
	}
}

// Two gateways on one data folder append to one file: every record is
// there, every line whole.
func TestTwoWritersOneFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "audit", "audit.jsonl")
	a, b := Open(path, nil), Open(path, nil)
	var wg sync.WaitGroup
	for i, l := range []*Log{a, b} {
		for s := range 16 {
			wg.Go(func() {
				for n := range 50 {
					l.Write(Record{Session: fmt.Sprintf("g%d-s%d", i, s), Action: "execute_tool", Decision: Allowed, ResultBytes: n, Reason: strings.Repeat("x", 200)})
				}
			})
		}
	}
	wg.Wait()
	a.Close()
	b.Close()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSuffix(string(data), "\n"), "\n")
	for i, line := range lines {
		var r Record
		if err := json.Unmarshal([]byte(line), &r); err != nil {
			t.Fatalf("line %d is not a whole record: %v\n%.120s", i+1, err, line)
		}
	}
	if len(lines) != 2*16*50 {
		t.Errorf("%d records, want %d", len(lines), 2*16*50)
	}
}

// refusing is a data folder that cannot take writes.
type refusing struct {
	storage.OSMkdir
	fails atomic.Int32
}

func (r *refusing) Check() error { return errors.New("data folder removed") }
func (r *refusing) Fail(error)   { r.fails.Add(1) }
func (r *refusing) OK()          {}

// A data folder the health check refuses, or one removed just after the
// check passed (an rm -rf as the record is written), is not written to
// (nor made again): each record is counted as lost.
func TestStorageRefused(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	for name, gate := range map[string]Storage{
		"refused":                 &refusing{},
		"removed after the check": storagetest.CheckedBefore(storage.New(dir, nil).Writer("audit log", "records are counted as lost")),
	} {
		t.Run(name, func(t *testing.T) {
			l := Open(filepath.Join(dir, "audit", "audit.jsonl"), &Options{Storage: gate})
			l.Write(Record{Action: "search_tools", Decision: Allowed})
			testenv.Eventually(t, "the record counted as lost", func() bool { return l.Stats().Dropped == 1 })
			l.Close()
			if _, err := os.Stat(dir); !os.IsNotExist(err) {
				t.Errorf("the data folder was made: %v", err)
			}
		})
	}
}

// A log whose last line was cut short (a crash, or a write that ran out of
// disk) used to get the next record glued to that line, and a reader lost
// both. The gateway's writer and Append (the commands') each start on a
// line of their own; the reader leaves the torn line out and counts it.
func TestTornLastLine(t *testing.T) {
	whole, err := json.Marshal(Record{Time: time.Unix(1, 0).UTC(), Action: "keys create", Decision: Allowed, Outcome: OK})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name  string
		write func(t *testing.T, path string, r Record)
	}{
		{"gateway", func(t *testing.T, path string, r Record) {
			l := Open(path, nil)
			l.Write(r)
			if err := l.Close(); err != nil {
				t.Fatal(err)
			}
			if st := l.Stats(); st.Written != 1 || st.Errors != 0 {
				t.Fatalf("stats %+v, want 1 written", st)
			}
		}},
		{"command", func(t *testing.T, path string, r Record) {
			if err := Append(path, r); err != nil {
				t.Fatal(err)
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "audit", "audit.jsonl")
			if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
				t.Fatal(err)
			}
			torn := append(append(whole, '\n'), whole[:len(whole)/2]...)
			if err := os.WriteFile(path, torn, 0o600); err != nil {
				t.Fatal(err)
			}
			tc.write(t, path, Record{Action: "execute_tool", Tool: "memory__read_graph", Decision: Allowed, Outcome: OK})
			tc.write(t, path, Record{Action: "search_tools", Decision: Allowed, Outcome: OK})
			rd := NewReader(path, 0, Filter{})
			defer rd.Close()
			recs, err := rd.Tail(0)
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, r := range recs {
				got = append(got, r.Action)
			}
			if want := []string{"keys create", "execute_tool", "search_tools"}; !slices.Equal(got, want) || rd.Skipped() != 1 {
				b, _ := os.ReadFile(path)
				t.Errorf("records %q, %d skipped; want %q and the torn line skipped:\n%s", got, rd.Skipped(), want, b)
			}
		})
	}
}

// recordingGate is a storage gate that lets every write through and counts
// the reports.
type recordingGate struct {
	storage.OSMkdir
	mu         sync.Mutex
	fails, oks int
	refuse     atomic.Bool // Check refuses (the folder went bad)
}

func (g *recordingGate) Check() error {
	if g.refuse.Load() {
		g.Fail(nil)
		return errors.New("the folder is read-only")
	}
	return nil
}
func (g *recordingGate) Fail(error) { g.mu.Lock(); g.fails++; g.mu.Unlock() }
func (g *recordingGate) OK()        { g.mu.Lock(); g.oks++; g.mu.Unlock() }
func (g *recordingGate) counts() (fails, oks int) {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.fails, g.oks
}

// A log whose file could not be opened reports itself healthy once the
// folder can take it, without waiting for a record: an idle gateway's GET
// /status used to show the audit log failing until the next search.
func TestRecoversWithoutRecord(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	if err := os.WriteFile(dir, nil, 0o600); err != nil { // a file where the folder should be
		t.Fatal(err)
	}
	gate := &recordingGate{}
	l := Open(filepath.Join(dir, "audit", "audit.jsonl"), &Options{Storage: gate, Retry: time.Millisecond})
	defer l.Close()
	if fails, _ := gate.counts(); fails == 0 {
		t.Fatal("the failed open was not reported")
	}
	if err := os.Remove(dir); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, "the log reported healthy once the folder can be made", func() bool { _, oks := gate.counts(); return oks > 0 })
	if st := l.Stats(); st.Written != 0 || st.Dropped != 0 {
		t.Errorf("stats %+v, want nothing written or lost (no record was sent)", st)
	}

	// The folder goes bad while the file is open: a record is lost; once
	// the folder is fine again the log says so without another record.
	gate.refuse.Store(true)
	l.Write(Record{Action: "search_tools", Decision: Allowed})
	testenv.Eventually(t, "the record counted as lost", func() bool { return l.Stats().Dropped == 1 })
	_, oks := gate.counts()
	gate.refuse.Store(false)
	testenv.Eventually(t, "the log reported healthy again", func() bool { _, n := gate.counts(); return n > oks })
}

// TestFieldsClipped: what a client chooses is cut to a cap in the record,
// so one refused request cannot put 64 KiB of headers in the log (and
// rotate the log's earlier records away the faster).
func TestFieldsClipped(t *testing.T) {
	l, path, _ := openLog(t, nil)
	huge := strings.Repeat("é", 32<<10) // 64 KiB, 2-byte runes: a cut must not split one
	l.Write(Record{Action: "http", Decision: Denied, Client: huge, Session: huge, Route: "GET /" + huge, Reason: huge})
	var recs []Record
	testenv.Eventually(t, "the record", func() bool { recs = readAll(t, path, Filter{}); return len(recs) == 1 })
	r := recs[0]
	for name, v := range map[string]string{"client": r.Client, "session": r.Session, "route": r.Route} {
		if len(v) > MaxFieldBytes+len("…") || !strings.HasSuffix(v, "é…") {
			t.Errorf("%s: %d bytes (%q…), want at most %d and a mark", name, len(v), v[:min(len(v), 10)], MaxFieldBytes)
		}
	}
	if len(r.Reason) > MaxReasonBytes+len("…") {
		t.Errorf("reason: %d bytes", len(r.Reason))
	}
	if b, _ := os.ReadFile(path); len(b) > 4096 {
		t.Errorf("the record takes %d bytes", len(b))
	}
}

// TestEveryFieldClipped: every text field of a record is cut to its cap,
// whoever fills it. The server a management call or a console button names
// is the caller's choice too: a key allowed no server wrote 4 MB of it per
// POST /ui/api/restart into the record, and 16 such requests in 1.9 s
// rotated every earlier record (the key's own refusals, the admin's calls,
// the keys created) out of the log's six files (2026-12-07).
func TestEveryFieldClipped(t *testing.T) {
	l, path, _ := openLog(t, nil)
	huge := strings.Repeat("x", 1<<20)
	var in Record
	v := reflect.ValueOf(&in).Elem()
	for i := range v.NumField() {
		if f := v.Field(i); f.Kind() == reflect.String {
			f.SetString(huge)
		}
	}
	l.Write(in)
	var recs []Record
	testenv.Eventually(t, "the record", func() bool { recs = readAll(t, path, Filter{}); return len(recs) == 1 })
	out := reflect.ValueOf(recs[0])
	for i := range out.NumField() {
		f, name := out.Field(i), out.Type().Field(i).Name
		if f.Kind() != reflect.String {
			continue
		}
		limit := MaxFieldBytes
		switch name {
		case "Reason", "OutputMismatch":
			limit = MaxReasonBytes
		case "Config":
			limit = MaxConfigBytes
		}
		if n := len(f.String()); n > limit+len("…") {
			t.Errorf("%s: %d bytes in the record, want at most %d", name, n, limit)
		}
	}
	if b, _ := os.ReadFile(path); len(b) > 8192+MaxConfigBytes {
		t.Errorf("the record takes %d bytes", len(b))
	}
}

// TestArgumentsClipped: the arguments a record keeps (audit.arguments
// "masked") are bounded like its other fields: past MaxArgumentsBytes of
// JSON they are replaced by a note of their size (argumentsSha256 still
// identifies them). A key's call of a tool it may run with 4 MB of
// arguments wrote 4 MB into the record: 13 such calls would rotate the
// whole log away at the defaults.
func TestArgumentsClipped(t *testing.T) {
	l, path, _ := openLog(t, nil)
	small := map[string]any{"path": "/tmp/x"}
	l.Write(Record{Action: "execute_tool", Decision: Allowed, Arguments: small})
	l.Write(Record{Action: "execute_tool", Decision: Allowed, Arguments: map[string]any{"content": strings.Repeat("x", 1<<20)}})
	var recs []Record
	testenv.Eventually(t, "the records", func() bool { recs = readAll(t, path, Filter{}); return len(recs) == 2 })
	if !reflect.DeepEqual(any(small), recs[0].Arguments) {
		t.Errorf("small arguments kept as %v, want %v", recs[0].Arguments, small)
	}
	if s, ok := recs[1].Arguments.(string); !ok || !strings.Contains(s, "1048590 bytes of arguments") {
		t.Errorf("1 MB of arguments kept as %.200v", recs[1].Arguments)
	}
	if b, _ := os.ReadFile(path); len(b) > 4096 {
		t.Errorf("the records take %d bytes", len(b))
	}
}

// counting is a Gate that lets every write through and counts the checks
// (one before each write of a batch, and one at Open).
type counting struct {
	storage.OSMkdir
	checks atomic.Int32
}

func (c *counting) Check() error { c.checks.Add(1); return nil }
func (c *counting) Fail(error)   {}
func (c *counting) OK()          {}

// TestGathered: the records queued while the writer gathers go into the
// file with the one that woke it, in one write (one check of the folder),
// in order; Close ends the gathering at once and writes them. Each record
// used to wake the writer and cost a write and its checks (six system
// calls) of its own.
func TestGathered(t *testing.T) {
	gate := &counting{}
	l, path, _ := openLog(t, &Options{Gather: time.Hour, Retry: time.Hour, Storage: gate})
	l.Write(Record{Action: "execute_tool", Tool: "a__one", Decision: Allowed})
	testenv.Eventually(t, "the writer woken by the first record", func() bool { return len(l.q) == 0 })
	l.Write(Record{Action: "execute_tool", Tool: "a__two", Decision: Allowed})
	l.Write(Record{Action: "execute_tool", Tool: "a__three", Decision: Allowed})
	if len(l.q) != 2 || l.Stats().Written != 0 {
		t.Errorf("while the writer gathers: %d records queued, %d written; want 2 and 0", len(l.q), l.Stats().Written)
	}
	l.Close() // within the hour
	var tools []string
	for _, r := range readAll(t, path, Filter{}) {
		tools = append(tools, r.Tool)
	}
	if want := []string{"a__one", "a__two", "a__three"}; !slices.Equal(tools, want) || l.Stats().Written != 3 {
		t.Errorf("the file holds %v (%d written), want %v", tools, l.Stats().Written, want)
	}
	if n := gate.checks.Load(); n != 2 {
		t.Errorf("%d checks of the folder, want 2: one at Open and one for the three records' write", n)
	}
}

// writeLog writes records (one JSON line each) into the files of a log at
// path: files[0] the oldest rotated file, the last one the log itself.
func writeLog(tb testing.TB, path string, files ...[]string) {
	tb.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		tb.Fatal(err)
	}
	for i, lines := range files {
		p := path
		if k := len(files) - 1 - i; k > 0 {
			p = Rotated(path, k)
		}
		if err := os.WriteFile(p, []byte(strings.Join(lines, "\n")+"\n"), 0o600); err != nil {
			tb.Fatal(err)
		}
	}
}

// auditLine is the record of a call as the log holds it.
func auditLine(tb testing.TB, key string, n int) string {
	tb.Helper()
	b, err := json.Marshal(Record{Time: time.Date(2026, 12, 6, 0, 0, 0, 0, time.UTC).Add(time.Duration(n) * time.Second), Key: key, Action: "execute_tool", Tool: "syn042__noop", Decision: Allowed, Outcome: OK, ResultBytes: n})
	if err != nil {
		tb.Fatal(err)
	}
	return string(b)
}

// The last records the newest file holds are the tail: `audit tail` does
// not read the rotated files (at the defaults, 50 MiB more and 150,000
// records decoded to print 20), whose lines would be counted as skipped;
// fewer there, and it reads them all as before, in order; -f then follows
// from the end.
func TestTailReadsOnlyWhatItNeeds(t *testing.T) {
	path := filepath.Join(t.TempDir(), "audit", "audit.jsonl")
	writeLog(t, path,
		[]string{"not a record", auditLine(t, "a", 1), auditLine(t, "b", 2)},
		[]string{auditLine(t, "a", 3), auditLine(t, "b", 4), auditLine(t, "a", 5)})
	rd := NewReader(path, 0, Filter{})
	recs, err := rd.Tail(2)
	if err != nil || len(recs) != 2 || recs[0].ResultBytes != 4 || recs[1].ResultBytes != 5 {
		t.Fatalf("Tail(2) = %+v, %v", recs, err)
	}
	if rd.Skipped() != 0 {
		t.Errorf("Tail(2) read the rotated file: %d lines skipped", rd.Skipped())
	}
	if !rd.Found() {
		t.Error("Found() = false")
	}
	rd.Close()

	rd = NewReader(path, 0, Filter{Key: "b"})
	defer rd.Close()
	recs, err = rd.Tail(2)
	if err != nil || len(recs) != 2 || recs[0].ResultBytes != 2 || recs[1].ResultBytes != 4 {
		t.Fatalf("Tail(2) of key b = %+v, %v", recs, err)
	}
	if rd.Skipped() != 1 {
		t.Errorf("Tail(2) of key b: %d lines skipped, want the rotated file's 1", rd.Skipped())
	}
	f, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	fmt.Fprintln(f, auditLine(t, "b", 6))
	f.Close()
	got := make(chan Record, 4)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() { _ = rd.Follow(ctx, time.Millisecond, func(r Record) { got <- r }) }()
	if r := <-got; r.ResultBytes != 6 {
		t.Errorf("followed %+v, want the record written after the tail", r)
	}
}

// With fewer in the newest file than asked (just after a rotation), Tail
// reads the rotated files newest first and stops at the one that gives it
// enough: the older ones are not read (their lines would be counted as
// skipped), the records come oldest first across the files, and -f
// follows from the end. It read every rotated file before (0.9 s on the
// defaults' 60 MiB: BenchmarkTailJustRotated).
func TestTailNewestFirstAcrossRotations(t *testing.T) {
	path := filepath.Join(t.TempDir(), "audit", "audit.jsonl")
	writeLog(t, path,
		[]string{"not a record", auditLine(t, "a", 1)}, // .3
		[]string{"not a record", auditLine(t, "b", 2)}, // .2
		[]string{auditLine(t, "a", 3), auditLine(t, "b", 4)},
		[]string{auditLine(t, "a", 5)})
	for _, tc := range []struct {
		n       int
		key     string
		want    string
		skipped int
	}{
		{3, "", "[3 4 5]", 0},
		{4, "", "[2 3 4 5]", 1},
		{2, "b", "[2 4]", 1},
		{9, "", "[1 2 3 4 5]", 2},
	} {
		rd := NewReader(path, 0, Filter{Key: tc.key})
		recs, err := rd.Tail(tc.n)
		var got []int
		for _, r := range recs {
			got = append(got, r.ResultBytes)
		}
		if err != nil || fmt.Sprint(got) != tc.want || rd.Skipped() != tc.skipped {
			t.Errorf("Tail(%d) of key %q = %v, %v, %d lines skipped; want %s, %d skipped (the rotated files read as far back as needed)",
				tc.n, tc.key, got, err, rd.Skipped(), tc.want, tc.skipped)
		}
		rd.Close()
	}
	rd := NewReader(path, 0, Filter{})
	defer rd.Close()
	if _, err := rd.Tail(2); err != nil {
		t.Fatal(err)
	}
	f, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	fmt.Fprintln(f, auditLine(t, "b", 6))
	f.Close()
	got := make(chan Record, 8)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() { _ = rd.Follow(ctx, time.Millisecond, func(r Record) { got <- r }) }()
	if r := <-got; r.ResultBytes != 6 {
		t.Errorf("followed %+v, want the record written after the tail (none of the rotated files again)", r)
	}
	// A rotation after: the followed file moves to .1, read to its end,
	// and the new one is followed; no file read before comes again.
	if _, err := Rotate(path, 0); err != nil {
		t.Fatal(err)
	}
	if err := Append(path, Record{Action: "execute_tool", Decision: Allowed, ResultBytes: 7}); err != nil {
		t.Fatal(err)
	}
	if r := <-got; r.ResultBytes != 7 {
		t.Errorf("followed %+v after a rotation, want the record written to the new file", r)
	}
}

// BenchmarkTail is `audit tail` (its last 20 records, and those of one
// key) on a full log at the defaults: five rotated files and the log,
// 10 MiB each, about 180,000 records of 600 bytes.
func BenchmarkTail(b *testing.B) { benchTail(b, 10<<20) }

// BenchmarkTailJustRotated is BenchmarkTail just after a rotation: the
// file holds 5 records, fewer than the 20 asked, and the five rotated
// files are full. Tail read every rotated file then (some 150,000 records
// to print 20); it reads them newest first, as far back as it must.
func BenchmarkTailJustRotated(b *testing.B) { benchTail(b, 5) }

// benchTail benchmarks Tail(20) on a log of five full rotated files and a
// file of newest bytes (or as many records, when under 1 KiB).
func benchTail(b *testing.B, newest int) {
	path := filepath.Join(b.TempDir(), "audit", "audit.jsonl")
	files := make([][]string, DefaultMaxFiles+1)
	pad := strings.Repeat("x", 420)
	n := 0
	for i := range files {
		bound, count := 10<<20, false
		if i == len(files)-1 && newest < 1<<10 {
			bound, count = newest, true
		}
		for size := 0; size < bound; n++ {
			line := strings.Replace(auditLine(b, fmt.Sprintf("k%d", n%200), n), `"execute_tool"`, `"execute_tool","reason":"`+pad+`"`, 1)
			files[i] = append(files[i], line)
			if count {
				size++
			} else {
				size += len(line) + 1
			}
		}
	}
	writeLog(b, path, files...)
	b.Logf("%d records", n)
	for _, f := range []Filter{{}, {Key: "k7"}} {
		b.Run("key="+f.Key, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				rd := NewReader(path, 0, f)
				if recs, err := rd.Tail(20); err != nil || len(recs) != 20 {
					b.Fatal(len(recs), err)
				}
				rd.Close()
			}
		})
	}
}

// Gateways of two configs on one data folder share its audit log: each
// record says which config's gateway wrote it (Options.Config), and
// Filter.Config selects one's. The records of a call to a server both
// configs run could not be told apart.
func TestConfigOfEachRecord(t *testing.T) {
	path := filepath.Join(t.TempDir(), "audit", "audit.jsonl")
	a, b := Open(path, &Options{Config: "/etc/a.json"}), Open(path, &Options{Config: "/etc/b.json"})
	a.Write(Record{Action: "execute_tool", Tool: "memory__read_graph", Decision: Allowed, Outcome: OK})
	b.Write(Record{Action: "execute_tool", Tool: "memory__read_graph", Decision: Allowed, Outcome: OK})
	a.Close()
	b.Close()
	if err := Append(path, Record{Action: "servers disable", Server: "memory", Transport: "cli", Decision: Allowed}); err != nil {
		t.Fatal(err)
	}
	byConfig := map[string]int{}
	for _, r := range readAll(t, path, Filter{}) {
		byConfig[r.Config]++
	}
	if byConfig["/etc/a.json"] != 1 || byConfig["/etc/b.json"] != 1 || byConfig[""] != 1 {
		t.Errorf("records by config: %v", byConfig)
	}
	if recs := readAll(t, path, Filter{Config: "/etc/b.json"}); len(recs) != 1 || recs[0].Config != "/etc/b.json" {
		t.Errorf("Filter{Config: b}: %+v", recs)
	}
}

// A client may paste an API key into whatever it chooses (a session id, a
// User-Agent, a tool name, a server a management call names, a path): no
// field of a record keeps it, whether the gateway (Write) or a command
// (Append) writes it (but Config, the gateway's file, which no client
// chooses), and the arguments' SHA-256 is kept as given (it is
// the hash of the real arguments). Every field was written as given.
func TestKeysMaskedInEveryField(t *testing.T) {
	const secret = "h_cD03fp0_GMGEnIvWFyRfyAZyhfCC4hUpXh8McrBkM"
	sum := HashArguments(map[string]any{"query": "tg_" + secret})
	var in Record
	v := reflect.ValueOf(&in).Elem()
	for i := range v.NumField() {
		if f := v.Field(i); f.Kind() == reflect.String {
			f.SetString("x__tg_" + secret)
		}
	}
	in.ArgumentsSHA256 = sum
	in.Config = "/etc/toolgate.json" // the gateway's own, as it names it
	l, path, _ := openLog(t, nil)
	l.Write(in)
	testenv.Eventually(t, "the record", func() bool { return len(readAll(t, path, Filter{})) == 1 })
	l.Close()
	if err := Append(path, in); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(b), secret) {
		t.Errorf("the log holds the key:\n%s", b)
	}
	recs := readAll(t, path, Filter{})
	if len(recs) != 2 {
		t.Fatalf("%d records, want 2", len(recs))
	}
	for _, r := range recs {
		if r.ArgumentsSHA256 != sum {
			t.Errorf("argumentsSha256 %q, want %q", r.ArgumentsSHA256, sum)
		}
		if r.Session != "x__tg_***" || r.Tool != "x__tg_***" {
			t.Errorf("session %q, tool %q: want x__tg_***", r.Session, r.Tool)
		}
	}
}

// TestLogTailMasksArguments: Log.Tail (the console's recent activity, to
// an admin key over HTTP, who may have no shell on the machine) masks a
// record's arguments again as the gateway masks them before Write (a
// field named like a secret hidden whole, a credential's shape in any
// string), as it masks the text fields: a line of a toolgate that masked
// less, or one edited by hand, handed its arguments on as stored.
func TestLogTailMasksArguments(t *testing.T) {
	path := filepath.Join(t.TempDir(), "audit.jsonl")
	line := `{"time":"2026-12-08T02:00:00Z","key":"k","action":"execute_tool","tool":"x__y","decision":"allowed","outcome":"ok",` +
		`"arguments":{"password":"hunter2hunter2","note":"use tg_HiENJkK5nfyUtf_oRm4lJwIVIxN3CLH7utgW8gKQcBs","n":3},"durationMs":0,"resultBytes":0}` + "\n"
	if err := os.WriteFile(path, []byte(line), 0o600); err != nil {
		t.Fatal(err)
	}
	l := Open(path, nil)
	defer l.Close()
	recs, err := l.Tail(1)
	if err != nil || len(recs) != 1 {
		t.Fatalf("Tail(1) = %+v, %v", recs, err)
	}
	b, _ := json.Marshal(recs[0].Arguments)
	if got := string(b); strings.Contains(got, "hunter2") || strings.Contains(got, "HiENJkK5") || !strings.Contains(got, `"n":3`) {
		t.Errorf("a record's arguments through Tail: %s, want the password and the key's secret masked, the rest kept", got)
	}
}
