// Package learn owns what toolgate learns from use: the (query, tool) pairs
// recorded when a session runs a tool that a recent search returned. They
// live in a Badger store in the data folder (learn/), survive restarts and
// re-indexes, age (a pair's weight halves every HalfLife of the store's
// clock since it was last seen; see Store), are capped per tool, and are
// forgotten on request (Reset) or when the tool's definition changes
// materially (Sync). The ranker reads them
// through search.Usage; a Store implements it and the gateway's Learner.
//
// Only the query text, the tool's namespaced name, how often and when the
// pair was seen, and the tool's document text at the first record are
// stored. Nothing leaves the machine.
package learn

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"math"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode"

	"github.com/dgraph-io/badger/v4"

	"github.com/toolgate/toolgate/index/catalog"
	"github.com/toolgate/toolgate/internal/badgerlog"
	"github.com/toolgate/toolgate/internal/datafile"
	"github.com/toolgate/toolgate/internal/mask"
	"github.com/toolgate/toolgate/internal/storage"
	"github.com/toolgate/toolgate/search"
)

// Limits on what the store keeps.
const (
	// MaxQueriesPerTool caps the distinct queries kept per tool (the least
	// recently seen go first): one tool's learned text and centroid stay
	// bounded, whatever the traffic.
	MaxQueriesPerTool = 64
	// MaxQueryLen caps a stored query's length in bytes.
	MaxQueryLen = 500
	// DefaultHalfLife is Options.HalfLife's default.
	DefaultHalfLife = 90 * 24 * time.Hour
	// MaxClockStep is the most the store's clock moves at one record: a
	// pause in use, or the wall clock set forward, ages the pairs by at
	// most this much.
	MaxClockStep = 7 * 24 * time.Hour
	// minWeight: a pair whose weight fell below this (about five half-lives
	// unseen) is deleted.
	minWeight = 0.03
	// materialChange: a tool whose document's words overlap the recorded
	// one's by less than this (Jaccard) changed materially; its pairs go.
	materialChange = 0.6
)

// Options configure Open. Nil means defaults.
type Options struct {
	// InMemory keeps the store in memory only (dir is ignored): for eval
	// and tests.
	InMemory bool
	// HalfLife is how long a pair takes to lose half its weight since it
	// was last seen. Default DefaultHalfLife.
	HalfLife time.Duration
	// Now is the clock (nil: time.Now).
	Now func() time.Time
	// Logger receives record failures and Badger's warnings; nil discards.
	Logger *slog.Logger
	// Storage is asked before every write (nil: every write is tried).
	// While it refuses, or after a write failed for lack of storage,
	// pairs are not recorded (searches still rank with those read); it
	// reports each fault once and recovers by itself.
	Storage Storage
}

// Storage is the data folder's health as the store uses it (serve passes an
// *storage.Writer; nil Options.Storage is storage.Unchecked).
type Storage = storage.Gate

// Store holds the learned pairs. It is safe for concurrent use.
//
// Pairs age on the store's own clock, not the wall clock: the time of the
// newest record. A record moves it to the wall clock's time, by at most
// MaxClockStep, and never back. So a wall clock set forward (by any amount)
// ages the pairs by at most a week, set back it stops the aging until it
// catches up, and the weeks a gateway sits unused do not age what it
// learned; in steady use the store's clock follows the wall clock.
type Store struct {
	db       *badger.DB
	dir      string
	inMemory bool
	dirInfo  os.FileInfo // the folder as opened, to notice it replaced
	halfLife time.Duration
	now      func() time.Time
	log      *slog.Logger
	blog     *badgerlog.Logger
	st       Storage
	gc       *badgerlog.GC // nil in memory

	gen atomic.Uint64 // bumped on every change
	// broken says a write failed as Badger started its next memtable
	// (noteWriteErr): Badger is left without one, and its next read
	// panics, its next write ends the process. Not touched again.
	broken atomic.Bool

	clockMu sync.Mutex
	clock   int64 // unix seconds of the newest record (0: none yet)

	mu    sync.Mutex
	pairs []search.UsagePair // cached Pairs() of generation cacheGen
	cache uint64
}

var _ search.Usage = (*Store)(nil)

// ErrBusy is returned by Open when another process holds the store (a
// running toolgate serve).
var ErrBusy = errors.New("learned-pairs store in use by another toolgate process")

// Key layout: format marker, pairs, tool documents.
var keyFormat = []byte("f")

const (
	storeFormat = 1    // stored as its decimal text
	pfxPair     = "p/" // p/<tool ID>\x00<query> → value
	pfxDoc      = "d/" // d/<tool ID> → the tool's document text when first recorded
)

// value of a pair: count (uint32), first and last seen (unix seconds).
type pairValue struct {
	count       uint32
	first, last int64
}

func (v pairValue) encode() []byte {
	b := make([]byte, 20)
	binary.LittleEndian.PutUint32(b, v.count)
	binary.LittleEndian.PutUint64(b[4:], uint64(v.first))
	binary.LittleEndian.PutUint64(b[12:], uint64(v.last))
	return b
}

func decodePair(b []byte) (pairValue, error) {
	if len(b) != 20 {
		return pairValue{}, fmt.Errorf("pair value of %d bytes, want 20", len(b))
	}
	return pairValue{
		count: binary.LittleEndian.Uint32(b),
		first: int64(binary.LittleEndian.Uint64(b[4:])),
		last:  int64(binary.LittleEndian.Uint64(b[12:])),
	}, nil
}

func pairKey(tool, query string) []byte { return []byte(pfxPair + tool + "\x00" + query) }

func splitPairKey(k []byte) (tool, query string, ok bool) {
	s := strings.TrimPrefix(string(k), pfxPair)
	tool, query, ok = strings.Cut(s, "\x00")
	return tool, query, ok
}

// Open opens (or creates) the store in dir.
func Open(dir string, opts *Options) (*Store, error) {
	var o Options
	if opts != nil {
		o = *opts
	}
	if o.HalfLife <= 0 {
		o.HalfLife = DefaultHalfLife
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Storage == nil {
		o.Storage = storage.Unchecked
	}
	if !o.InMemory {
		if err := o.Storage.Check(); err != nil {
			return nil, fmt.Errorf("learned pairs %s: %w", dir, err)
		}
	}
	blog := &badgerlog.Logger{L: o.Logger, Prefix: "learned pairs", FlushFailed: o.Storage.Fail}
	// A tool's recorded definition above 4 KiB goes to the value log, and
	// stays there once deleted (Reset, a material change, the last pair
	// decayed) until the value log file is rewritten (collectGarbage). Badger
	// counts a file's dead values as it compacts; compacting level 0 at
	// each close counts those deleted since the store was opened, so a
	// restart or a `learn --reset` lets the next open reclaim them.
	bo := badgerlog.Options(dir, o.InMemory, blog, 4<<20).WithValueThreshold(4 << 10).WithCompactL0OnClose(true)
	if !o.InMemory {
		if err := o.Storage.MkdirAll(dir, storage.FolderMode); err != nil {
			return nil, fmt.Errorf("learned pairs: %w", err)
		}
	}
	db, err := badgerlog.Open(bo)
	if err != nil {
		if strings.Contains(err.Error(), "Cannot acquire directory lock") {
			return nil, fmt.Errorf("%w: %s", ErrBusy, dir)
		}
		return nil, fmt.Errorf("open learned pairs %s: %w", dir, err)
	}
	s := &Store{db: db, dir: dir, inMemory: o.InMemory, halfLife: o.HalfLife, now: o.Now, log: o.Logger, blog: blog, st: o.Storage}
	if !o.InMemory {
		s.dirInfo, _ = os.Stat(dir)
	}
	if err := s.checkFormat(); err != nil {
		db.Close()
		if _, newer := datafile.AsNewer(err); newer {
			return nil, err // a newer toolgate's pairs: kept for it
		}
		return nil, fmt.Errorf("learned pairs %s: %w (delete the folder to start over)", dir, err)
	}
	err = s.eachPair(pfxPair, func(_ []byte, _, _ string, v pairValue) { s.clock = max(s.clock, v.last) })
	if err != nil {
		db.Close()
		return nil, fmt.Errorf("learned pairs %s: %w (delete the folder to start over)", dir, err)
	}
	if _, err := s.prune(); err != nil {
		db.Close()
		return nil, err
	}
	s.gen.Store(1)
	if !o.InMemory {
		s.gc = badgerlog.StartGC(gcEvery, func() { s.collectGarbage() })
	}
	return s, nil
}

// Backup writes every key of the store (the pairs with their counts and
// times, the definitions, the format) to w as Badger's backup stream: a
// consistent copy of a store this process holds open, where a copy of its
// files taken meanwhile may not open (a compaction deletes a table file
// the copied MANIFEST still names). Restore loads it.
func (s *Store) Backup(w io.Writer) error {
	if s.broken.Load() {
		return s.brokenErr()
	}
	_, err := s.db.Backup(w, 0)
	return err
}

// Restore makes the store in dir, which must hold no pairs (a new folder),
// from a Backup stream, and returns it open.
func Restore(dir string, r io.Reader, opts *Options) (*Store, error) {
	s, err := Open(dir, opts)
	if err != nil {
		return nil, err
	}
	if n, _ := s.Stats(); n > 0 {
		s.Close()
		return nil, fmt.Errorf("learned pairs %s hold %d pairs already: restore into a new folder", dir, n)
	}
	if err := s.db.Load(r, 256); err != nil {
		s.Close()
		return nil, fmt.Errorf("restore learned pairs into %s: %w", dir, err)
	}
	// Opened again, it reads the pairs loaded as any open does (its clock,
	// the pruning, the format they carry).
	if err := s.Close(); err != nil {
		return nil, err
	}
	return Open(dir, opts)
}

// gcEvery is how often a store in a folder rewrites its value log files
// that are at least half dead (values of deleted definitions), besides at
// open.
const gcEvery = 10 * time.Minute

// collectGarbage rewrites the value log files that are at least half dead
// (badgerlog.CollectGarbage), what the store does at open and every
// gcEvery, and returns how many it rewrote. A rewrite writes the live
// values again: not while the store must not write.
func (s *Store) collectGarbage() int {
	if s.usable() != nil {
		return 0 // reported by Storage at the next write
	}
	n, err := badgerlog.CollectGarbage(s.db)
	s.noteWriteErr(err)
	if err != nil {
		s.log.Warn("learned pairs: value log garbage collection failed", "dir", s.dir, "err", err)
	}
	return n
}

// view is s.db.View, refused once Badger is broken (a read would panic).
func (s *Store) view(fn func(txn *badger.Txn) error) error {
	if s.broken.Load() {
		return s.brokenErr()
	}
	return s.db.View(fn)
}

// noteWriteErr marks the store broken when err is Badger's failure to
// start a new memtable (it has no typed error for it; the words are its
// ensureRoomForWrite's): it set its memtable to nil on the way.
func (s *Store) noteWriteErr(err error) {
	if err != nil && strings.Contains(err.Error(), "cannot create new mem table") && !s.broken.Swap(true) {
		s.log.Warn("learned pairs: Badger could not start a new memtable; the store is read and written no more until the next start (searches rank without the pairs)", "dir", s.dir, "err", err)
	}
}

func (s *Store) brokenErr() error {
	return fmt.Errorf("learned pairs in %s are read and written no more until the next start: Badger could not start a new memtable after a failed write", s.dir)
}

func (s *Store) checkFormat() error {
	return s.db.Update(func(txn *badger.Txn) error {
		item, err := txn.Get(keyFormat)
		if errors.Is(err, badger.ErrKeyNotFound) {
			return txn.Set(keyFormat, []byte(strconv.Itoa(storeFormat)))
		}
		if err != nil {
			return err
		}
		v, err := item.ValueCopy(nil)
		if err != nil {
			return err
		}
		if string(v) != strconv.Itoa(storeFormat) {
			if err := datafile.Newer("learned pairs", s.dir, string(v), storeFormat, "learning starts afresh, a running gateway's within seconds"); err != nil {
				return err
			}
			return fmt.Errorf("format %q, this toolgate reads %q", v, strconv.Itoa(storeFormat))
		}
		return nil
	})
}

// Close closes the store, waiting for Badger's background work. A store
// whose folder cannot take its flush (Storage refuses, its folder was
// replaced, a flush is failing) is not closed, since Badger would retry the
// flush forever: Close returns an error that says so, and the pairs
// recorded since its last flush may be lost.
func (s *Store) Close() error {
	s.gc.Stop()
	if why := s.usable(); why != nil {
		s.blog.Mute()
		return fmt.Errorf("learned pairs in %s left unclosed: %w; pairs recorded since its last flush may be lost", s.dir, why)
	}
	if err := s.db.Close(); err != nil {
		return fmt.Errorf("close learned pairs: %w", err)
	}
	return nil
}

// usable says why the store must not write now: the data folder refuses
// writes, the store's folder was removed or replaced, or Badger is
// retrying a failed flush; nil when it may.
func (s *Store) usable() error {
	if s.broken.Load() {
		return s.brokenErr()
	}
	if s.inMemory {
		return nil
	}
	if err := s.st.Check(); err != nil {
		return err
	}
	if now, err := os.Stat(s.dir); err != nil || s.dirInfo == nil || !os.SameFile(now, s.dirInfo) {
		return fmt.Errorf("learned-pairs folder %s was removed or replaced while the store was open", s.dir)
	}
	if s.blog.FlushFailedWithin(3 * time.Second) {
		return fmt.Errorf("learned pairs in %s cannot flush to disk (Badger is retrying)", s.dir)
	}
	return nil
}

// Replaced reports whether the store's folder was removed or replaced
// since it was opened (the data folder removed while serving, and maybe
// made again): what the store holds is then only in its open files and
// memory, and it writes nothing more (Reopen moves it to a new store).
// An in-memory store never is.
func (s *Store) Replaced() bool {
	if s.inMemory {
		return false
	}
	now, err := os.Stat(s.dir)
	return err != nil || s.dirInfo == nil || !os.SameFile(now, s.dirInfo)
}

// Reopen opens a new store in s's folder, made again (with opts, as Open
// does: a data folder that cannot take writes is Open's error), and merges
// into it everything s holds (Export), read from s's open files though its
// folder is gone: what was learned outlives the folder's removal. A store
// another process opened there meanwhile and released keeps its own pairs
// beside them (Merge). s is then abandoned (Abandon).
func (s *Store) Reopen(opts *Options) (*Store, error) {
	n, err := Open(s.dir, opts)
	if err != nil {
		return nil, err
	}
	h, err := s.Export()
	if err == nil {
		_, err = n.Merge(h)
	}
	if err != nil {
		_ = n.Close()
		return nil, fmt.Errorf("learned pairs: copy what the removed store held into %s: %w", s.dir, err)
	}
	n.gen.Store(max(n.gen.Load(), s.gen.Load()) + 1)
	s.Abandon()
	return n, nil
}

// Abandon stops s's background work and mutes it, leaving it unclosed: a
// store whose folder was removed, once what it held went elsewhere (Reopen,
// or Merge in another process's store). Badger would retry its flush into
// the removed folder forever, and Close would wait for it. s must not be
// used again.
func (s *Store) Abandon() {
	s.gc.Stop()
	s.blog.Mute()
}

// Held is everything a store holds, as Export reads it and Merge takes it:
// the pairs with their counts and times, the tools' recorded definitions
// and the store's clock. A gateway whose store's folder was removed hands
// it to the gateway that opened the new store there (JSON on the status
// socket).
type Held struct {
	Pairs []HeldPair        `json:"pairs"`
	Docs  map[string]string `json:"docs,omitempty"` // tool ID → its document text when first recorded
	Clock int64             `json:"clock"`          // unix seconds of the newest record
}

// HeldPair is one stored pair in Held.
type HeldPair struct {
	Tool  string `json:"tool"` // server__tool
	Query string `json:"query"`
	Count uint32 `json:"count"`
	First int64  `json:"first"` // unix seconds
	Last  int64  `json:"last"`
}

// Export reads everything s holds; it works on a store whose folder was
// removed (from its open files).
func (s *Store) Export() (Held, error) {
	h := Held{Docs: map[string]string{}}
	err := s.eachPair(pfxPair, func(_ []byte, tool, q string, v pairValue) {
		h.Pairs = append(h.Pairs, HeldPair{Tool: tool, Query: q, Count: v.count, First: v.first, Last: v.last})
	})
	if err == nil {
		err = s.view(func(txn *badger.Txn) error {
			it := txn.NewIterator(badger.IteratorOptions{PrefetchValues: true, Prefix: []byte(pfxDoc)})
			defer it.Close()
			for it.Rewind(); it.Valid(); it.Next() {
				v, err := it.Item().ValueCopy(nil)
				if err != nil {
					return err
				}
				h.Docs[string(it.Item().Key()[len(pfxDoc):])] = string(v)
			}
			return nil
		})
	}
	if err != nil {
		return Held{}, fmt.Errorf("read learned pairs in %s: %w", s.dir, err)
	}
	s.clockMu.Lock()
	h.Clock = s.clock
	s.clockMu.Unlock()
	return h, nil
}

// Merge adds what another store held (Export) to s: a pair s holds too
// counts both stores' sightings, from the first to the last; a tool's
// definition s recorded already is kept; s's clock moves to the newer of
// the two. It returns how many pairs it took. Pairs are written addBatch at
// a time: on an error, the batches before it are kept.
func (s *Store) Merge(h Held) (int, error) {
	for _, p := range h.Pairs {
		if _, _, err := catalog.SplitID(p.Tool); err != nil {
			return 0, fmt.Errorf("merge learned pairs: %w", err)
		}
	}
	s.clockMu.Lock()
	defer s.clockMu.Unlock()
	touched := map[string]bool{}
	var err error
	for start := 0; start < len(h.Pairs) && err == nil; start += addBatch {
		batch := h.Pairs[start:min(start+addBatch, len(h.Pairs))]
		err = s.update(func(txn *badger.Txn) error {
			for _, p := range batch {
				q := normQuery(p.Query)
				if q == "" {
					continue
				}
				k := pairKey(p.Tool, q)
				v := pairValue{count: max(p.Count, 1), first: p.First, last: p.Last}
				old, found, err := storedPair(txn, k)
				if err != nil {
					return err
				}
				if found {
					v = pairValue{count: old.count + min(v.count, math.MaxUint32-old.count), first: min(old.first, v.first), last: max(old.last, v.last)}
				}
				if err := txn.Set(k, v.encode()); err != nil {
					return err
				}
				if d, ok := h.Docs[p.Tool]; ok && !touched[p.Tool] {
					if err := setDocOnce(txn, p.Tool, d); err != nil {
						return err
					}
				}
				touched[p.Tool] = true
			}
			return nil
		})
	}
	if err == nil {
		err = s.capTools(touched)
	}
	s.clock = max(s.clock, h.Clock)
	s.gen.Add(1)
	if err != nil {
		return 0, fmt.Errorf("merge learned pairs: %w", err)
	}
	return len(h.Pairs), nil
}

// refused reports a write the store did not try: Storage already knows of
// a refusal of its own (Check); the store's folder gone or a failing flush
// are reported as failures (Storage logs each fault once).
func (s *Store) refused(err error) {
	if !s.inMemory && s.st.Check() == nil {
		s.st.Fail(err)
	}
}

// update runs a write transaction when the store may write, and reports
// its outcome to Storage.
func (s *Store) update(fn func(txn *badger.Txn) error) error {
	if err := s.usable(); err != nil {
		s.refused(err)
		return fmt.Errorf("learned pairs not written: %w", err)
	}
	if err := s.db.Update(fn); err != nil {
		s.noteWriteErr(err)
		if !s.inMemory {
			s.st.Fail(fmt.Errorf("learned pairs write in %s: %w", s.dir, err))
		}
		return err
	}
	if !s.inMemory {
		s.st.OK()
	}
	return nil
}

// Generation changes whenever the pairs do (search.Usage).
func (s *Store) Generation() uint64 { return s.gen.Load() }

// normQuery is how a query is stored: trimmed, inner space collapsed, at
// most MaxQueryLen bytes (cut at a rune boundary), with the credentials'
// shapes masked (mask.Tokens): an API key a client pasted into a query is
// not kept, while the query's other words, what the client wanted, still
// teach (refusing the pair would lose them for nothing).
func normQuery(q string) string {
	q = mask.Tokens(strings.Join(strings.Fields(q), " "))
	if len(q) > MaxQueryLen {
		q = strings.ToValidUTF8(q[:MaxQueryLen], "")
	}
	return q
}

// Record notes that query led to tool being run; tool is its definition
// now (its document text is kept to notice a later material change). It is
// the gateway's Learner: failures are logged, never returned to a caller.
func (s *Store) Record(query string, tool catalog.Tool) {
	if err := s.Add([]Pair{{Query: query, Tool: tool.ID()}}, map[string]catalog.Tool{tool.ID(): tool}); err != nil {
		// A storage fault is reported once by Storage; others are logged.
		if s.usable() == nil {
			s.log.Warn("learned pair not recorded", "tool", tool.ID(), "err", err)
		}
	}
}

// Pair is one (query, tool) pair to add.
type Pair struct {
	Query string
	Tool  string // server__tool
}

// addBatch is how many pairs Add writes in one transaction (Badger's
// transactions hold only so many writes; a whole log fails as one).
const addBatch = 1000

// Add records pairs, seen now (a pair already stored counts once more).
// defs, when it holds a pair's tool, gives the definition to keep for it.
// Pairs are written addBatch at a time: on an error, the batches before it
// are kept.
func (s *Store) Add(pairs []Pair, defs map[string]catalog.Tool) error {
	s.clockMu.Lock()
	defer s.clockMu.Unlock()
	now := s.stamp()
	touched := map[string]bool{}
	var err error
	for start := 0; start < len(pairs) && err == nil; start += addBatch {
		err = s.addBatch(pairs[start:min(start+addBatch, len(pairs))], defs, now, touched)
	}
	if err != nil {
		// Not capped now: after a failed write Badger may have no
		// memtable, and a read then panics (the cap's look at the
		// tool's pairs did). The next Add caps the tools it touches.
		err = fmt.Errorf("record learned pairs: %w", err)
	} else {
		err = s.capTools(touched)
	}
	if len(touched) > 0 {
		s.clock = max(s.clock, now)
		s.gen.Add(1)
	}
	return err
}

// addBatch writes pairs seen at now in one transaction and adds their
// tools to touched once it is committed.
func (s *Store) addBatch(pairs []Pair, defs map[string]catalog.Tool, now int64, touched map[string]bool) error {
	done := map[string]bool{}
	err := s.update(func(txn *badger.Txn) error {
		for _, p := range pairs {
			q := normQuery(p.Query)
			if q == "" {
				continue
			}
			if _, _, err := catalog.SplitID(p.Tool); err != nil {
				return err
			}
			k := pairKey(p.Tool, q)
			v := pairValue{count: 1, first: now, last: now}
			old, found, err := storedPair(txn, k)
			if err != nil {
				return err
			}
			if found {
				v.count, v.first = old.count+1, old.first
			}
			if err := txn.Set(k, v.encode()); err != nil {
				return err
			}
			if t, ok := defs[p.Tool]; ok {
				if err := setDocOnce(txn, p.Tool, catalog.DocumentText(t)); err != nil {
					return err
				}
			}
			done[p.Tool] = true
		}
		return nil
	})
	if err == nil {
		maps.Copy(touched, done)
	}
	return err
}

// storedPair reads the pair stored at key k; found is false when there is
// none.
func storedPair(txn *badger.Txn, k []byte) (v pairValue, found bool, err error) {
	item, err := txn.Get(k)
	if errors.Is(err, badger.ErrKeyNotFound) {
		return pairValue{}, false, nil
	}
	if err != nil {
		return pairValue{}, false, err
	}
	b, err := item.ValueCopy(nil)
	if err != nil {
		return pairValue{}, false, err
	}
	v, err = decodePair(b)
	return v, err == nil, err
}

// setDocOnce records tool's document text, unless one is recorded: the
// text its first pair was learned under.
func setDocOnce(txn *badger.Txn, tool, text string) error {
	dk := []byte(pfxDoc + tool)
	if _, err := txn.Get(dk); !errors.Is(err, badger.ErrKeyNotFound) {
		return err
	}
	return txn.Set(dk, []byte(text))
}

// capTools caps each of tools (capTool), and returns the first error.
func (s *Store) capTools(tools map[string]bool) error {
	var err error
	for tool := range tools {
		if cerr := s.capTool(tool); cerr != nil && err == nil {
			err = cerr
		}
	}
	return err
}

// capTool deletes tool's least recently seen queries beyond
// MaxQueriesPerTool.
func (s *Store) capTool(tool string) error {
	type kv struct {
		key  []byte
		last int64
	}
	var all []kv
	err := s.eachPair(pfxPair+tool+"\x00", func(key []byte, _, _ string, v pairValue) {
		all = append(all, kv{key, v.last})
	})
	if err != nil || len(all) <= MaxQueriesPerTool {
		return err
	}
	slices.SortStableFunc(all, func(a, b kv) int { return int(b.last - a.last) })
	// In batches (deleteKeys): a log that gave the tool thousands of
	// queries at once was more deletes than one transaction holds.
	drop := make([][]byte, 0, len(all)-MaxQueriesPerTool)
	for _, e := range all[MaxQueriesPerTool:] {
		drop = append(drop, e.key)
	}
	return s.deleteKeys(drop)
}

// eachPair calls fn with every pair stored under prefix (a key prefix of
// pairs: all of them, or one tool's), in key order.
func (s *Store) eachPair(prefix string, fn func(key []byte, tool, query string, v pairValue)) error {
	return s.view(func(txn *badger.Txn) error {
		it := txn.NewIterator(badger.IteratorOptions{PrefetchValues: true, Prefix: []byte(prefix)})
		defer it.Close()
		for it.Rewind(); it.Valid(); it.Next() {
			tool, q, ok := splitPairKey(it.Item().Key())
			if !ok {
				continue
			}
			b, err := it.Item().ValueCopy(nil)
			if err != nil {
				return err
			}
			v, err := decodePair(b)
			if err != nil {
				return err
			}
			fn(it.Item().KeyCopy(nil), tool, q, v)
		}
		return nil
	})
}

// stamp returns the store's time for a record now: the wall clock's, at
// most MaxClockStep past the newest record and never before it. The caller
// holds clockMu.
func (s *Store) stamp() int64 {
	now := s.now().Unix()
	if s.clock != 0 {
		now = min(max(now, s.clock), s.clock+int64(MaxClockStep/time.Second))
	}
	return now
}

// weigher returns the weight of a pair seen last at unix time last, on the
// store's clock as it is now.
func (s *Store) weigher() func(last int64) float64 {
	s.clockMu.Lock()
	clock := s.clock
	s.clockMu.Unlock()
	return func(last int64) float64 {
		age := time.Duration(max(clock-last, 0)) * time.Second
		return math.Exp2(-float64(age) / float64(s.halfLife))
	}
}

// Pairs returns every stored pair with its decayed weight, in key order
// (search.Usage). Repeats of a pair make it more recent, not heavier: the
// ranking counts distinct queries.
func (s *Store) Pairs() []search.UsagePair {
	s.mu.Lock()
	defer s.mu.Unlock()
	gen := s.gen.Load()
	if s.pairs != nil && s.cache == gen {
		return s.pairs
	}
	out := []search.UsagePair{}
	weight := s.weigher()
	err := s.eachPair(pfxPair, func(_ []byte, tool, q string, v pairValue) {
		out = append(out, search.UsagePair{Query: q, Tool: tool, Weight: weight(v.last)})
	})
	if err != nil {
		s.log.Warn("learned pairs unreadable; ranking without them", "err", err)
		return nil
	}
	s.pairs, s.cache = out, gen
	return out
}

// Stats counts the stored pairs and the tools they name.
func (s *Store) Stats() (pairs, tools int) {
	seen := map[string]bool{}
	for _, p := range s.Pairs() {
		seen[p.Tool] = true
	}
	return len(s.Pairs()), len(seen)
}

// Reset forgets every pair, or only those of server's tools when server is
// set, and returns how many it deleted.
func (s *Store) Reset(server string) (int, error) {
	prefixes := [][]byte{[]byte(pfxPair), []byte(pfxDoc)}
	if server != "" {
		prefixes = [][]byte{[]byte(pfxPair + server + catalog.Sep), []byte(pfxDoc + server + catalog.Sep)}
	}
	n, err := s.deletePrefixes(prefixes, true)
	s.gen.Add(1) // a batch before a failed one is gone too
	if err != nil {
		return 0, fmt.Errorf("forget learned pairs: %w", err)
	}
	return n, nil
}

// deletePrefixes deletes every key under the prefixes and returns how many
// pair keys went.
func (s *Store) deletePrefixes(prefixes [][]byte, countPairs bool) (int, error) {
	var keys [][]byte
	n := 0
	err := s.view(func(txn *badger.Txn) error {
		for _, p := range prefixes {
			it := txn.NewIterator(badger.IteratorOptions{PrefetchValues: false, Prefix: p})
			for it.Rewind(); it.Valid(); it.Next() {
				k := it.Item().KeyCopy(nil)
				keys = append(keys, k)
				if countPairs && strings.HasPrefix(string(k), pfxPair) {
					n++
				}
			}
			it.Close()
		}
		return nil
	})
	if err != nil {
		return 0, err
	}
	return n, s.deleteKeys(keys)
}

func (s *Store) deleteKeys(keys [][]byte) error {
	for len(keys) > 0 {
		// Each batch asks first: a long reset on a folder that fills
		// stops at the next batch, as a record does.
		if err := s.usable(); err != nil {
			s.refused(err)
			return fmt.Errorf("learned pairs not deleted: %w", err)
		}
		wb := s.db.NewWriteBatch()
		for _, k := range keys[:min(len(keys), 1000)] {
			if err := wb.Delete(k); err != nil {
				wb.Cancel()
				return err
			}
		}
		if err := wb.Flush(); err != nil {
			s.noteWriteErr(err)
			if !s.inMemory {
				s.st.Fail(fmt.Errorf("learned pairs write in %s: %w", s.dir, err))
			}
			return err
		}
		keys = keys[min(len(keys), 1000):]
	}
	return nil
}

// prune deletes pairs whose weight decayed below minWeight, and the
// recorded definitions of tools left with no pair: they are kept to notice
// a change of the definition the pairs were learned under, so without
// pairs they only grew with every tool ever run, and a tool learned again
// after it changed was compared with the old definition (its new pairs
// dropped at the next Sync).
func (s *Store) prune() (int, error) {
	var keys [][]byte
	weight := s.weigher()
	// Add holds clockMu while it writes a pair and its definition: none
	// comes between the scan of the pairs and that of the definitions.
	s.clockMu.Lock()
	defer s.clockMu.Unlock()
	kept := map[string]bool{}
	err := s.eachPair(pfxPair, func(key []byte, tool, _ string, v pairValue) {
		if weight(v.last) < minWeight {
			keys = append(keys, key)
		} else {
			kept[tool] = true
		}
	})
	pairs := len(keys)
	if err == nil {
		err = s.view(func(txn *badger.Txn) error {
			it := txn.NewIterator(badger.IteratorOptions{PrefetchValues: false, Prefix: []byte(pfxDoc)})
			defer it.Close()
			for it.Rewind(); it.Valid(); it.Next() {
				if k := it.Item().Key(); !kept[string(k[len(pfxDoc):])] {
					keys = append(keys, it.Item().KeyCopy(nil))
				}
			}
			return nil
		})
	}
	if err == nil {
		err = s.deleteKeys(keys)
	}
	if err != nil {
		return 0, fmt.Errorf("prune learned pairs: %w", err)
	}
	if pairs > 0 {
		s.gen.Add(1)
	}
	return pairs, nil
}

// Sync compares the catalog's tools with the definitions recorded with
// their pairs, forgets the pairs of every tool whose document text changed
// materially (word overlap below 60 %), records the definition of tools
// that have pairs but none yet, and deletes pairs that decayed away. Tools
// absent from the catalog keep their pairs: a server that is down or
// removed for a while comes back with what was learned. It returns the
// tools whose pairs were dropped.
func (s *Store) Sync(tools []catalog.Tool) ([]string, error) {
	if _, err := s.prune(); err != nil {
		return nil, err
	}
	byID := make(map[string]catalog.Tool, len(tools))
	for _, t := range tools {
		byID[t.ID()] = t
	}
	withPairs := map[string]bool{}
	for _, p := range s.Pairs() {
		withPairs[p.Tool] = true
	}
	var dropped []string
	missing := map[string]string{}
	err := s.view(func(txn *badger.Txn) error {
		for id := range withPairs {
			t, ok := byID[id]
			if !ok {
				continue
			}
			item, err := txn.Get([]byte(pfxDoc + id))
			if errors.Is(err, badger.ErrKeyNotFound) {
				missing[id] = catalog.DocumentText(t)
				continue
			}
			if err != nil {
				return err
			}
			was, err := item.ValueCopy(nil)
			if err != nil {
				return err
			}
			if overlap(string(was), catalog.DocumentText(t)) < materialChange {
				dropped = append(dropped, id)
			}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("sync learned pairs: %w", err)
	}
	slices.Sort(dropped)
	for _, id := range dropped {
		if _, err := s.deletePrefixes([][]byte{[]byte(pfxPair + id + "\x00"), []byte(pfxDoc + id)}, false); err != nil {
			return nil, fmt.Errorf("forget pairs of %s: %w", id, err)
		}
		s.log.Info("tool definition changed; its learned queries are forgotten", "tool", id)
	}
	if len(missing) > 0 {
		err := s.update(func(txn *badger.Txn) error {
			for id, text := range missing {
				if err := txn.Set([]byte(pfxDoc+id), []byte(text)); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			return nil, fmt.Errorf("sync learned pairs: %w", err)
		}
	}
	if len(dropped) > 0 {
		s.gen.Add(1)
	}
	return dropped, nil
}

// overlap is the Jaccard overlap of two texts' lower-case word sets.
func overlap(a, b string) float64 {
	words := func(s string) map[string]bool {
		m := map[string]bool{}
		for _, w := range strings.FieldsFunc(strings.ToLower(s), func(r rune) bool { return !unicode.IsLetter(r) && !unicode.IsDigit(r) }) {
			m[w] = true
		}
		return m
	}
	wa, wb := words(a), words(b)
	if len(wa) == 0 && len(wb) == 0 {
		return 1
	}
	inter := 0
	for w := range wa {
		if wb[w] {
			inter++
		}
	}
	return float64(inter) / float64(len(wa)+len(wb)-inter)
}
