package embed

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/dgraph-io/badger/v4"
	"golang.org/x/time/rate"

	"github.com/toolgate/toolgate/internal/badgerlog"
	"github.com/toolgate/toolgate/internal/datafile"
	"github.com/toolgate/toolgate/internal/storage"
)

// Model is what the cache wraps: anything that embeds text (index.Embedder
// has the same method set; *Embedder implements it).
type Model interface {
	ModelID() string
	Dim() int
	Embed(ctx context.Context, texts []string) ([][]float32, error)
}

// Storage is the data folder's health as the cache uses it (serve passes an
// *storage.Writer; nil Options.Storage is storage.Unchecked).
type Storage = storage.Gate

// CacheOptions configure NewCached. Nil means defaults.
type CacheOptions struct {
	// Logger receives warnings (a cache set aside, an unreadable entry) and
	// Badger's own messages (warnings and errors at warn, the rest at
	// debug). Nil discards.
	Logger *slog.Logger
	// InMemory keeps the cache in memory only (dir is ignored); for tests.
	InMemory bool
	// Storage is asked before every write (nil: every write is tried).
	// While it refuses, the cache is pass-through for writes: vectors are
	// still read from the store, new ones are embedded and returned but
	// not stored. See Cached.
	Storage Storage
	// QueryTTL is how long a vector stored by EmbedQueries is kept (0:
	// DefaultQueryTTL).
	QueryTTL time.Duration
	// QueryStoresPerDay bounds the new vectors EmbedQueries stores (0:
	// DefaultQueryStoresPerDay), a tenth of them at once; the queries past
	// it are embedded and answered, not stored. EmbedKnownQueries is not
	// bounded.
	QueryStoresPerDay int
	// Busy, when set, makes a store that another process holds (another
	// gateway on the data folder: Badger lets one open it) no error: the
	// cache starts pass-through, says so with Busy(true), and tries to open
	// the store again at a write, at most every refusedRetry, so that it
	// is this process's once the other lets it go (Busy(false) then).
	// Without it NewCached returns ErrCacheBusy.
	Busy func(busy bool)
	// InMemoryIfUnavailable keeps the vectors in memory, for the life of
	// the Cached, when the store cannot be had (another process holds it,
	// the folder cannot take writes, its files are refused) instead of
	// passing through: for a run whose figures assume the vectors it
	// embedded are cached (eval's latency: a gateway on the data folder
	// made each timed search embed its query again, 25 times slower).
	// Busy is not called then.
	InMemoryIfUnavailable bool
	// Unused is how long Sweep keeps a tool text's vector that no sweep
	// found in the catalog (0: DefaultUnused).
	Unused time.Duration
	// Now is Sweep's clock (nil: time.Now); tests move it.
	Now func() time.Time
	// Lazy makes NewCached open nothing: the store is opened at the
	// first Embed or EmbedQueries, as NewCached would have opened it
	// (pass-through when it cannot be, and tried again at a write). Until
	// then Sweep and Compact leave it as it is. `toolgate serve` in bm25
	// mode sets it with embed.Options.Lazy: no search reads a vector, and
	// the store (its files, memtable and Badger's goroutines) was opened
	// at every start for nothing.
	Lazy bool
}

// DefaultQueryTTL is how long the cache keeps a search query's vector
// (EmbedQueries): a query asked again within it is not embedded again, and
// the cache holds the distinct queries of that long, not of every day the
// gateway ran. The tools' texts (Embed) do not expire: Sweep deletes
// them once they have been out of the catalog for CacheOptions.Unused.
const DefaultQueryTTL = 7 * 24 * time.Hour

// DefaultQueryStoresPerDay is how many new query vectors the cache stores
// a day: distinct queries of 200 keys' busy days, 75 MB of vectors a day
// and 525 MB for QueryTTL at most. Each was stored, so one API key within
// its rate (46 distinct queries a second) grew the cache 6.4 GB a day.
const DefaultQueryStoresPerDay = 50_000

// DefaultUnused is how long Sweep keeps the vector of a tool text that
// left the catalog (an edited description, a removed server or tool, a
// learned query an older toolgate stored as a tool text): long enough
// that a server removed by mistake, disabled in the config for a while,
// or served by another config on the same data folder finds its vectors
// again, short enough that a server which puts its version or a date in
// its descriptions does not grow the cache for good.
const DefaultUnused = 30 * 24 * time.Hour

// SweepEvery is how often Sweep stamps and deletes: a call within it of
// the last sweep only takes the stamps off texts back in the catalog.
const SweepEvery = 24 * time.Hour

// cacheFormat is bumped whenever the key or value encoding changes; a cache
// with another format is set aside and rebuilt.
const cacheFormat = "1"

var (
	keyFormat   = []byte("m/format")
	keyDimPfx   = "m/dim/"
	keyVecPfx   = byte('v')
	keyQueryPfx = byte('w')
	// keyUnusedPfx + a vector key's hash: since when (Unix seconds, big
	// endian) sweeps have not found that text in the catalog. After 'w'
	// so that the stamps a sweep writes make tables that overlap none of
	// the tools' vectors (see queryKey).
	keyUnusedPfx = byte('x')
	keySwept     = []byte("m/swept") // Unix seconds of the last sweep
	errBusy      = errors.New("embedding cache is in use by another process")
	errForeign   = errors.New("not a toolgate embedding cache")
	errClosed    = errors.New("embedding cache is closed")
	// errCompacting: Compact has the store closed for a moment; what is
	// embedded meanwhile is not stored.
	errCompacting = errors.New("embedding cache is being compacted")
	normEpsilon   = 1e-3
)

// ErrCacheBusy is returned by NewCached when another process holds the
// cache directory; callers may run uncached.
var ErrCacheBusy = errBusy

// Cached decorates a Model with a Badger store of vectors keyed by
// sha256(model id + "\x00" + text). Only texts never seen by this model go
// to the model, so a restart or re-index re-embeds only new text.
//
// Storage faults never fail an Embed. Before each write the cache asks
// Storage whether the data folder can take it, and checks that its own
// folder is still the one its store was opened in; when not, it does not
// write (Badger would retry a failed flush once a second, forever, and on
// a full disk its memory-mapped files end the process with SIGBUS). When
// the folder can take writes again, writing resumes into the same store,
// or, if the folder was removed or replaced meanwhile, into a new store
// opened there; the old store is left unclosed (its memory is held until
// exit), since closing it would flush into a folder that is not its own.
type Cached struct {
	inner    Model
	dir      string
	log      *slog.Logger
	st       Storage
	dim      int
	inMemory bool
	queryTTL time.Duration
	// queryStores is the allowance of new query vectors stored
	// (CacheOptions.QueryStoresPerDay).
	queryStores *rate.Limiter
	busy        func(bool) // CacheOptions.Busy
	unused      time.Duration
	now         func() time.Time
	// dirty: vectors were written or deleted since NewCached or the last
	// Compact (there is something to compact).
	dirty atomic.Bool

	// lazy opens the store at the first lookup (CacheOptions.Lazy); nil
	// when NewCached opened it.
	lazy *sync.Once
	// inMemIfUnavailable is CacheOptions.InMemoryIfUnavailable.
	inMemIfUnavailable bool

	mu       sync.RWMutex // guards store and closed; held (read) while a store is used
	store    *store       // nil while none is open
	closed   bool
	setAside int // stores left unclosed because their folder went away
	// refusedAt and refusedErr: the latest open refused for want of
	// descriptors or memory, or because another process holds the store;
	// the next is tried refusedRetry later, not at every write (each try
	// of the first kind logs Badger's own warning).
	refusedAt  time.Time
	refusedErr error

	hits, misses, bad, skipped, sweeps, dropped atomic.Int64

	// compactMu is held by Compact, and taken by Close, which waits for
	// it; compacting is set while Compact runs: writes are not stored
	// meanwhile (see Compact).
	compactMu  sync.Mutex
	compacting atomic.Bool
	// compactHook, when set (tests), is called at each stage of Compact
	// that takes time.
	compactHook func(stage string)
}

var _ Model = (*Cached)(nil)

// store is one open Badger and what the cache knows of it.
type store struct {
	db  *badger.DB
	log *badgerlog.Logger
	// dev and ino identify the folder the store was opened in.
	dev, ino uint64
}

// CacheStats count lookups since NewCached.
type CacheStats struct {
	Hits, Misses int64
	// Bad counts entries that failed validation (wrong length, not finite,
	// not unit length) and were re-embedded.
	Bad int64
	// Skipped counts vectors embedded but not stored, because the data
	// folder could not take a write (pass-through).
	Skipped int64
	// Sweeps counts the sweeps that ran (Sweep, when due), Dropped the
	// vectors they deleted.
	Sweeps, Dropped int64
}

// NewCached opens (creating if needed) the cache at dir around inner. A
// corrupt or foreign cache — unreadable by Badger, another format version,
// another dimension for this model — is renamed to
// <dir>.corrupt-<UTC timestamp>, logged as a warning, and rebuilt empty.
// A data folder that cannot take writes (Storage refuses), or a process
// out of descriptors or memory, gives a cache that is pass-through until
// it can. A directory held by another process is an error (ErrCacheBusy)
// unless CacheOptions.Busy is set.
func NewCached(inner Model, dir string, opts *CacheOptions) (*Cached, error) {
	var o CacheOptions
	if opts != nil {
		o = *opts
	}
	log := o.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	st := o.Storage
	if st == nil {
		st = storage.Unchecked
	}
	ttl := o.QueryTTL
	if ttl <= 0 {
		ttl = DefaultQueryTTL
	}
	unused := o.Unused
	if unused <= 0 {
		unused = DefaultUnused
	}
	now := o.Now
	if now == nil {
		now = time.Now
	}
	perDay := o.QueryStoresPerDay
	if perDay <= 0 {
		perDay = DefaultQueryStoresPerDay
	}
	c := &Cached{inner: inner, dir: dir, log: log, st: st, dim: inner.Dim(), inMemory: o.InMemory, queryTTL: ttl, busy: o.Busy, unused: unused, now: now,
		queryStores: rate.NewLimiter(rate.Limit(float64(perDay)/(24*60*60)), max(perDay/10, 1))}
	if c.dim <= 0 {
		return nil, fmt.Errorf("embedding cache: model %s reports dimension %d", inner.ModelID(), c.dim)
	}
	c.inMemIfUnavailable = o.InMemoryIfUnavailable
	if o.Lazy {
		c.lazy = new(sync.Once)
		return c, nil
	}
	if err := c.start(); err != nil {
		return nil, err
	}
	return c, nil
}

// start opens the store as NewCached does (c.mu held, or c not shared
// yet): a folder that cannot take writes, a process out of descriptors or
// memory, or a store another process holds (with Busy) leave the cache
// pass-through, opened at a write once it can be (or, with
// InMemoryIfUnavailable, in memory); any other failure is returned.
func (c *Cached) start() error {
	if !c.inMemory && c.st.Check() != nil {
		if c.inMemIfUnavailable {
			return c.inMemoryInstead(c.st.Check())
		}
		return nil // pass-through until the folder can take writes
	}
	err := c.openStore()
	switch {
	case err == nil:
	case c.inMemIfUnavailable && !c.inMemory && (errors.Is(err, errBusy) || refused(err) || c.st.Check() != nil):
		return c.inMemoryInstead(err)
	case !errors.Is(err, errBusy) && !c.inMemory && c.st.Check() != nil:
		// the folder went bad meanwhile
	case !c.inMemory && refused(err):
		// Out of descriptors or memory, or files this user may not open:
		// pass-through, reported with its fix.
		c.st.Fail(storage.StoreDenied(c.dir, err))
		c.refusedAt, c.refusedErr = time.Now(), err
	case errors.Is(err, errBusy) && c.busy != nil:
		// Held by another process: pass-through until that one lets it go.
		c.refusedAt, c.refusedErr = time.Now(), err
		c.busy(true)
	default:
		return err
	}
	return nil
}

// openLazy opens a Lazy cache's store, once, at its first lookup. A store that
// cannot be opened leaves it pass-through, as a write finds it (tried
// again there every refusedRetry).
func (c *Cached) openLazy() {
	if c.lazy == nil {
		return
	}
	c.lazy.Do(func() {
		c.mu.Lock()
		defer c.mu.Unlock()
		if c.closed {
			return
		}
		if err := c.start(); err != nil {
			c.log.Warn("embedding cache unavailable; embedding without it", "dir", c.dir, "err", err)
			c.refusedAt, c.refusedErr = time.Now(), err
		}
	})
}

// inMemoryInstead makes c keep its vectors in memory, the store being
// unavailable for why (CacheOptions.InMemoryIfUnavailable).
func (c *Cached) inMemoryInstead(why error) error {
	c.inMemory, c.st, c.busy = true, storage.Unchecked, nil
	if err := c.openStore(); err != nil {
		return err
	}
	c.log.Info("embedding cache unavailable: this run keeps its vectors in memory", "dir", c.dir, "why", why)
	return nil
}

// shortage reports whether err says the process was refused descriptors or
// memory (Badger keeps only the message): not a store that is unusable.
func shortage(err error) bool { return limitFix(err, "") != "" }

// refused reports whether err says the store could not be opened for want
// of descriptors or memory, or because its files are another user's
// (storage.Denied: a data folder copied by root): not a store that is
// unusable, and opened once it can be. Moving it aside lost its vectors,
// and failed anyway on files this user could not move.
func refused(err error) bool { return shortage(err) || storage.Denied(err) }

// openStore opens the store in c.dir as c.store (c.mu held or not yet
// shared).
func (c *Cached) openStore() error {
	s, err := c.newStore()
	if err == nil {
		c.store = s
	}
	return err
}

// newStore opens the store in c.dir. An unusable store is moved aside and
// rebuilt empty.
func (c *Cached) newStore() (*store, error) {
	if err := c.mkdir(); err != nil {
		return nil, err // the folder cannot be made: nothing to move aside
	}
	s, err := c.open()
	if err == nil {
		err = c.check(s.db)
		if err != nil {
			s.db.Close()
		}
	}
	if err == nil {
		return s, nil
	}
	if errors.Is(err, errBusy) || c.inMemory || refused(err) || c.st.Check() != nil {
		// A store that cannot be opened for want of descriptors or memory
		// is not unusable: it used to be moved aside as corrupt (under
		// ulimit -n 16), its vectors lost. Nor is one whose folder went
		// bad as it opened (an rm -rf under way).
		return nil, err
	}
	why, msg := "corrupt", "embedding cache unusable; moved aside and rebuilding"
	if _, ok := datafile.AsNewer(err); ok {
		// A rollback: its vectors are kept there for the newer toolgate.
		why, msg = "newer", "embedding cache of a newer toolgate; moved aside (kept for it) and rebuilding for this one"
	}
	aside := fmt.Sprintf("%s.%s-%s", strings.TrimRight(c.dir, string(os.PathSeparator)), why, time.Now().UTC().Format("20060102T150405.000Z"))
	c.log.Warn(msg, "dir", c.dir, "moved_to", aside, "err", err)
	if rerr := os.Rename(c.dir, aside); rerr != nil {
		return nil, fmt.Errorf("embedding cache %s is unusable (%v) and cannot be moved aside: %w", c.dir, err, rerr)
	}
	if err = c.mkdir(); err == nil {
		s, err = c.open()
	}
	if err != nil {
		return nil, fmt.Errorf("embedding cache: rebuild %s: %w", c.dir, err)
	}
	if err = c.check(s.db); err != nil {
		s.db.Close()
		return nil, fmt.Errorf("embedding cache: rebuild %s: %w", c.dir, err)
	}
	return s, nil
}

// mkdir makes the store's folder, never the data folder (Storage.MkdirAll).
func (c *Cached) mkdir() error {
	if c.inMemory {
		return nil
	}
	if err := c.st.MkdirAll(c.dir, storage.FolderMode); err != nil {
		return fmt.Errorf("embedding cache: %w", err)
	}
	return nil
}

// open opens Badger with small buffers: the cache holds 1.5 KiB vectors,
// thousands of them, not gigabytes. Memtables are 2 MiB: Badger allocates
// a memtable's whole arena when it opens the store (10.4 MB at 8 MiB) and
// a gateway holds it for its life, mostly without writing; vectors are
// written in WriteBatches, which split at the smaller batch size. Values
// (1.5 KiB) stay in the tree below a 64 KiB threshold, which must be under
// the batch size (15 % of a memtable).
func (c *Cached) open() (s *store, err error) {
	bl := c.badgerLog()
	bo := c.badgerOptions(bl)
	defer func() {
		// Badger panics on some kinds of garbage instead of returning an error.
		if r := recover(); r != nil {
			s, err = nil, fmt.Errorf("open badger: panic: %v", r)
		}
	}()
	db, err := badgerlog.Open(bo)
	if err != nil {
		if strings.Contains(err.Error(), "Cannot acquire directory lock") {
			return nil, fmt.Errorf("%w: %s (another toolgate running?): %v", errBusy, c.dir, err)
		}
		return nil, fmt.Errorf("open badger: %w", err)
	}
	s = &store{db: db, log: bl}
	if !c.inMemory {
		s.dev, s.ino, _ = folderID(c.dir)
	}
	return s, nil
}

// badgerLog is a store's logger: Badger's lines into the cache's log, a
// failed flush reported to Storage.
func (c *Cached) badgerLog() *badgerlog.Logger {
	return &badgerlog.Logger{L: c.log, Prefix: "badger", FlushFailed: func(err error) { c.st.Fail(err) }}
}

// badgerOptions are the store's options (see open).
func (c *Cached) badgerOptions(bl *badgerlog.Logger) badger.Options {
	return badgerlog.Options(c.dir, c.inMemory, bl, 2<<20).WithValueThreshold(64 << 10)
}

// folderID identifies the folder at path (device and inode).
func folderID(path string) (dev, ino uint64, ok bool) {
	var st syscall.Stat_t
	if err := syscall.Stat(path, &st); err != nil {
		return 0, 0, false
	}
	return uint64(st.Dev), uint64(st.Ino), true
}

// moved reports whether the cache's folder is gone or another folder now
// stands at its path.
func (c *Cached) moved(s *store) bool {
	if c.inMemory {
		return false
	}
	dev, ino, ok := folderID(c.dir)
	return !ok || dev != s.dev || ino != s.ino
}

// flushRetry is how long after Badger last reported a failed memtable
// flush a store counts as still failing (Badger retries once a second).
const flushRetry = 3 * time.Second

// usable says why s must not take writes now: its folder moved, or Badger
// is retrying a failed flush; nil when it may.
func (c *Cached) usable(s *store) error {
	if c.moved(s) {
		return fmt.Errorf("embedding cache folder %s was removed or replaced while the cache was open", c.dir)
	}
	if s.log.FlushFailedWithin(flushRetry) {
		return fmt.Errorf("embedding cache in %s cannot flush to disk (Badger is retrying)", c.dir)
	}
	return nil
}

// check verifies the format marker and this model's dimension, writing them
// into an empty store.
func (c *Cached) check(db *badger.DB) error {
	id := c.ModelID()
	dimKey := []byte(keyDimPfx + id)
	return db.Update(func(txn *badger.Txn) error {
		item, err := txn.Get(keyFormat)
		switch {
		case errors.Is(err, badger.ErrKeyNotFound):
			if !empty(txn) {
				return fmt.Errorf("%w: entries without a format marker", errForeign)
			}
			if err := txn.Set(keyFormat, []byte(cacheFormat)); err != nil {
				return err
			}
		case err != nil:
			return err
		default:
			v, err := item.ValueCopy(nil)
			if err != nil {
				return err
			}
			if string(v) != cacheFormat {
				reads, _ := strconv.Atoi(cacheFormat)
				if err := datafile.Newer("embedding cache", c.dir, string(v), reads, ""); err != nil {
					return err
				}
				return fmt.Errorf("%w: format %q, want %q", errForeign, v, cacheFormat)
			}
		}
		if id == "" {
			return nil // a model not installed yet stores nothing
		}
		item, err = txn.Get(dimKey)
		if errors.Is(err, badger.ErrKeyNotFound) {
			return txn.Set(dimKey, []byte(strconv.Itoa(c.dim)))
		}
		if err != nil {
			return err
		}
		v, err := item.ValueCopy(nil)
		if err != nil {
			return err
		}
		if string(v) != strconv.Itoa(c.dim) {
			return fmt.Errorf("%w: model %s stored with dimension %q, want %d", errForeign, id, v, c.dim)
		}
		return nil
	})
}

func empty(txn *badger.Txn) bool {
	it := txn.NewIterator(badger.IteratorOptions{PrefetchValues: false})
	defer it.Close()
	it.Rewind()
	return !it.Valid()
}

// QueryPrefix and DocumentPrefix are the wrapped model's (see
// Embedder.QueryPrefix), or "" when it has none.
func (c *Cached) QueryPrefix() string {
	if p, ok := c.inner.(interface{ QueryPrefix() string }); ok {
		return p.QueryPrefix()
	}
	return ""
}

// DocumentPrefix: see QueryPrefix.
func (c *Cached) DocumentPrefix() string {
	if p, ok := c.inner.(interface{ DocumentPrefix() string }); ok {
		return p.DocumentPrefix()
	}
	return ""
}

// ModelID is the wrapped model's id, read at each call: it is "" until
// the files of a model that was not installed arrive (see
// embed.Options.Background).
func (c *Cached) ModelID() string { return c.inner.ModelID() }

// Dim is the wrapped model's dimension.
func (c *Cached) Dim() int { return c.dim }

// Stats reports hits and misses since NewCached.
func (c *Cached) Stats() CacheStats {
	return CacheStats{Hits: c.hits.Load(), Misses: c.misses.Load(), Bad: c.bad.Load(), Skipped: c.skipped.Load(), Sweeps: c.sweeps.Load(), Dropped: c.dropped.Load()}
}

// key is text's key under the model's current ID.
func (c *Cached) key(text string) []byte { return textKey(c.ModelID(), text) }

// textKey is text's key under model id.
func textKey(id, text string) []byte {
	h := sha256.New()
	h.Write([]byte(id))
	h.Write([]byte{0})
	h.Write([]byte(text))
	return h.Sum([]byte{keyVecPfx})
}

// queryKey is where a vector that expires (a query's, EmbedQueries) is
// stored: key's hash under keyQueryPfx, a key range of its own that sorts
// after the tools' vectors and the m/ keys, so that its tables overlap none
// of theirs. The keys are hashes, so with one prefix every table of new
// query vectors would overlap the whole range of the tools' vectors, and
// each compaction of them would rewrite the tools' tables too: at 10,000
// tools (45 MB of vectors) serve's Go heap went from 40 MB to 148 MB while
// one ran. Lookups try key, then this one: the cache is still one set of
// texts.
func queryKey(key []byte) []byte {
	q := bytes.Clone(key)
	q[0] = keyQueryPfx
	return q
}

// Embed returns cached vectors and embeds only the texts not cached (each
// distinct text once), then stores them. A failure to read or store is
// reported (Storage) or logged, not returned: the vectors are still right.
func (c *Cached) Embed(ctx context.Context, texts []string) ([][]float32, error) {
	out, _, err := c.embed(ctx, texts, 0, false)
	return out, err
}

// EmbedCounted is Embed that also says how many distinct texts the model
// embedded, the others answered by the cache: what an index build logs
// (index.Report.ModelTexts). Its "embedded" counts the tools it sent here,
// which read as embedded again at an upgrade that took every vector from
// the cache.
func (c *Cached) EmbedCounted(ctx context.Context, texts []string) ([][]float32, int, error) {
	return c.embed(ctx, texts, 0, false)
}

// EmbedQueries is Embed for search queries: the vectors it stores expire
// after CacheOptions.QueryTTL (Badger drops them at its next compaction),
// so the cache does not grow with every distinct query ever asked. A query
// that is also a tool's text finds that text's vector and stores nothing.
func (c *Cached) EmbedQueries(ctx context.Context, texts []string) ([][]float32, error) {
	out, _, err := c.embed(ctx, texts, c.queryTTL, true)
	return out, err
}

// EmbedKnownQueries is EmbedQueries for queries that are not a client's
// new words: the learned pairs' (a bounded store: learn.MaxQueriesPerTool)
// and eval's files. Their vectors expire as a search's do, but storing
// them does not spend CacheOptions.QueryStoresPerDay: 10,000 queries that
// `toolgate learn --queries` seeded were embedded again at each rebuild,
// past the day's first 5,000, and a second eval over 8,904 queries
// embedded 3,904 of them again.
func (c *Cached) EmbedKnownQueries(ctx context.Context, texts []string) ([][]float32, error) {
	out, _, err := c.embed(ctx, texts, c.queryTTL, false)
	return out, err
}

// embed is Embed, storing new vectors for ttl (0: for good), and how
// many distinct texts the model embedded.
func (c *Cached) embed(ctx context.Context, texts []string, ttl time.Duration, bounded bool) ([][]float32, int, error) {
	c.openLazy()
	out := make([][]float32, len(texts))
	keys := make([][]byte, len(texts))
	id := c.ModelID()
	for i, t := range texts {
		keys[i] = textKey(id, t)
	}
	bad, err := c.lookup(keys, out)
	if err != nil {
		// An unreadable store is never worth failing a search for.
		c.log.Warn("embedding cache read failed; embedding without it", "err", err)
		clear(out)
	}
	if bad > 0 {
		c.bad.Add(int64(bad))
		c.log.Warn("embedding cache: invalid entries re-embedded", "count", bad, "dir", c.dir)
	}

	pos := map[string][]int{} // distinct missing text → positions
	var miss []string
	for i, t := range texts {
		if out[i] != nil {
			continue
		}
		if _, ok := pos[t]; !ok {
			miss = append(miss, t)
		}
		pos[t] = append(pos[t], i)
	}
	c.hits.Add(int64(len(texts) - countMissing(out)))
	c.misses.Add(int64(len(miss)))
	if len(miss) == 0 {
		return out, 0, nil
	}
	vecs, err := c.inner.Embed(ctx, miss)
	if err != nil {
		return nil, 0, err
	}
	if len(vecs) != len(miss) {
		return nil, 0, fmt.Errorf("embed: model returned %d vectors for %d texts", len(vecs), len(miss))
	}
	newKeys := make([][]byte, len(miss))
	for j, t := range miss {
		if len(vecs[j]) != c.dim {
			return nil, 0, fmt.Errorf("embed: model returned a %d-wide vector, want %d", len(vecs[j]), c.dim)
		}
		for _, i := range pos[t] {
			out[i] = vecs[j]
		}
		newKeys[j] = keys[pos[t][0]]
	}
	if c.ModelID() != id {
		// The model's files arrived during the call: the keys are not
		// those of the model that made the vectors.
		return out, len(miss), nil
	}
	if bounded {
		newKeys, vecs = c.allowedQueries(newKeys, vecs)
	}
	c.put(newKeys, vecs, ttl)
	return out, len(miss), nil
}

// allowedQueries keeps the new query vectors the day's allowance lets the
// cache store (CacheOptions.QueryStoresPerDay).
func (c *Cached) allowedQueries(keys [][]byte, vecs [][]float32) ([][]byte, [][]float32) {
	now := c.now()
	n := 0
	for n < len(keys) && c.queryStores.AllowN(now, 1) {
		n++
	}
	return keys[:n], vecs[:n]
}

// Ready waits until the model it wraps is loaded (see Options.Background)
// and says why it could not be; at once for a model without a load of its
// own.
func (c *Cached) Ready(ctx context.Context) error {
	if r, ok := c.inner.(interface{ Ready(context.Context) error }); ok {
		return r.Ready(ctx)
	}
	return nil
}

// Start is the inner embedder's (nothing for one without a load of its
// own): it starts a load that Options.Lazy deferred.
func (c *Cached) Start() {
	if s, ok := c.inner.(interface{ Start() }); ok {
		s.Start()
	}
}

// LoadError is the inner embedder's (nil for one without a load of its
// own).
func (c *Cached) LoadError() error {
	if r, ok := c.inner.(interface{ LoadError() error }); ok {
		return r.LoadError()
	}
	return nil
}

// ModelSHA256 is the inner embedder's model file's sha256 ("" for one
// that names none).
func (c *Cached) ModelSHA256() string {
	if r, ok := c.inner.(interface{ ModelSHA256() string }); ok {
		return r.ModelSHA256()
	}
	return ""
}

// Installed is the inner embedder's (a channel never closed when it has
// none).
func (c *Cached) Installed() <-chan struct{} {
	if r, ok := c.inner.(interface{ Installed() <-chan struct{} }); ok {
		return r.Installed()
	}
	return nil
}

// lookup fills out with the cached vectors of keys (each under the key,
// else under its queryKey) and counts the invalid entries. Without a store
// it finds nothing.
func (c *Cached) lookup(keys [][]byte, out [][]float32) (bad int, err error) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	if c.store == nil {
		return 0, nil
	}
	err = c.store.db.View(func(txn *badger.Txn) error {
		for i, k := range keys {
			item, err := txn.Get(k)
			if errors.Is(err, badger.ErrKeyNotFound) {
				item, err = txn.Get(queryKey(k))
			}
			if errors.Is(err, badger.ErrKeyNotFound) {
				continue
			}
			if err != nil {
				return err
			}
			if err := item.Value(func(v []byte) error {
				out[i] = decodeVector(v, c.dim)
				return nil
			}); err != nil {
				return err
			}
			if out[i] == nil {
				bad++
			}
		}
		return nil
	})
	return bad, err
}

// put stores vecs under keys (for ttl; 0: for good) when the data folder
// can take them, and reports how it went; otherwise it counts them as
// skipped.
func (c *Cached) put(keys [][]byte, vecs [][]float32, ttl time.Duration) {
	if c.compacting.Load() {
		return // see Compact; not the data folder's fault: not skipped
	}
	if !c.inMemory {
		if err := c.st.Check(); err != nil { // reported by Check
			c.skipped.Add(int64(len(vecs)))
			return
		}
	}
	s, err := c.writable()
	if err != nil {
		if errors.Is(err, errCompacting) {
			return // not the data folder's fault: not skipped
		}
		c.skipped.Add(int64(len(vecs)))
		if !errors.Is(err, errClosed) && !errors.Is(err, errBusy) { // busy: said by Busy
			c.st.Fail(err)
		}
		return
	}
	defer c.mu.RUnlock()
	wb := s.db.NewWriteBatch()
	defer wb.Cancel()
	for j, k := range keys {
		if ttl > 0 {
			k = queryKey(k)
		}
		e := badger.NewEntry(k, encodeVector(vecs[j]))
		if ttl > 0 {
			e = e.WithTTL(ttl)
		}
		if err = wb.SetEntry(e); err != nil {
			break
		}
	}
	if err == nil {
		err = wb.Flush()
	}
	if err != nil {
		c.skipped.Add(int64(len(vecs)))
		c.st.Fail(fmt.Errorf("embedding cache write in %s: %w", c.dir, err))
		return
	}
	c.dirty.Store(true)
	c.st.OK()
}

// writable returns the store to write into with c.mu read-locked (the
// caller unlocks), opening a new one when there is none, or when its
// folder was removed or replaced.
func (c *Cached) writable() (*store, error) {
	c.mu.RLock()
	if s := c.store; s != nil && !c.closed && c.usable(s) == nil {
		return s, nil
	}
	c.mu.RUnlock()
	c.mu.Lock()
	err := c.reopen()
	c.mu.Unlock()
	if err != nil {
		return nil, err
	}
	c.mu.RLock()
	if c.store == nil || c.closed {
		c.mu.RUnlock()
		return nil, errClosed
	}
	return c.store, nil
}

// reopen (c.mu held) makes c.store usable for writes, or says why it
// cannot be.
func (c *Cached) reopen() error {
	if c.closed {
		return errClosed
	}
	if c.compacting.Load() {
		return errCompacting
	}
	if s := c.store; s != nil {
		err := c.usable(s)
		if err == nil {
			return nil // another writer reopened it
		}
		if !c.moved(s) {
			return err // Badger's own retry will flush once it can
		}
		if s.log.FlushFailedEver() {
			// Its pending flush would land in the new folder at that path.
			return fmt.Errorf("%w; it held data it could not flush, so it stays off until toolgate restarts", err)
		}
	}
	if c.refusedErr != nil && time.Since(c.refusedAt) < refusedRetry {
		return c.refusedErr
	}
	old, wasBusy := c.store, errors.Is(c.refusedErr, errBusy)
	err := c.openStore()
	c.refusedErr = nil
	if err != nil && (refused(err) || errors.Is(err, errBusy)) {
		err = storage.StoreDenied(c.dir, err)
		c.refusedAt, c.refusedErr = time.Now(), err
	}
	if wasBusy && err == nil {
		c.log.Info("embedding cache: the other toolgate let the store go; this one now caches in it", "dir", c.dir)
		c.busy(false)
	}
	if err != nil {
		// A store whose folder moved stays c.store, refused by usable:
		// Close reports what it could not flush.
		return err
	}
	if old != nil {
		// Closing it would flush into a folder that is not its own: it is
		// left open, unused, until the process exits.
		old.log.Mute()
		c.setAside++
		c.log.Info("embedding cache folder was removed or replaced; started a new cache there", "dir", c.dir)
	}
	return nil
}

// refusedRetry is how often a cache that could not be opened for want of
// descriptors or memory, or because another process held it, is tried
// again (at a write).
var refusedRetry = 10 * time.Second

func countMissing(out [][]float32) int {
	n := 0
	for _, v := range out {
		if v == nil {
			n++
		}
	}
	return n
}

// Close closes the store (not the wrapped model), waiting for Badger's
// background work. A store whose folder cannot take its flush (Storage
// refuses, its folder moved, a flush is failing) is not closed, since
// Badger would retry the flush forever: Close returns an error that says
// so, and what the store held since its last flush may be lost.
func (c *Cached) Close() error {
	c.compactMu.Lock()
	defer c.compactMu.Unlock()
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return nil
	}
	c.closed = true
	s := c.store
	c.store = nil
	if s == nil {
		return nil
	}
	why := c.usable(s)
	if why == nil && !c.inMemory {
		why = c.st.Check()
	}
	if why != nil {
		s.log.Mute()
		return fmt.Errorf("embedding cache in %s left unclosed: %w; vectors cached since its last flush may be lost (the cache refills as it embeds)", c.dir, why)
	}
	if err := s.db.Close(); err != nil {
		return fmt.Errorf("close embedding cache: %w", err)
	}
	return nil
}

// Compact puts the store's tables into one level below level 0, once a
// bulk of vectors was written (an index build) or a sweep deleted some
// (their disk space comes back only once their deletions and the tables
// that hold them are compacted together: the vectors are under Badger's
// value threshold, in its LSM tables). It closes the store, which writes
// its memtable out (Badger has no other way to), opens it again and
// flattens it (DB.Flatten). A store whose tables are all in level 0 (a
// first build) is opened once more with Badger's CompactL0OnClose and
// closed first, since Flatten leaves such a store as it is. Left as a
// build leaves it (level-0 tables, a level over its target), the store
// was compacted by the next session's first writes of query vectors,
// which rewrote the catalog's own tables: at 10,000 tools the first
// `toolgate serve` after `toolgate index` peaked at 378-385 MiB over 5,000
// searches (see README, Performance).
//
// Searches do not wait for it. While it runs, what the model embeds is
// not stored: Flatten loops until no level-0 table is left, and under a
// steady stream of new queries (written out as level-0 tables) it had not
// finished after a minute. While the store is closed (the writing out
// and opening, and the level-0 pass of a first build) lookups find
// nothing, so the model embeds them. Flatten, which rewrites the tables
// (about 0.3 s at 10,000 tools), runs on the open store while lookups go
// on. All of it used to run with the cache held exclusively, and every
// search of a gateway that compacted after its daily sweep waited for it
// (up to 0.36 s). Close waits for a compaction under way.
//
// A cache that stored or deleted nothing since NewCached or its last
// Compact (its store is as it was then), a store that cannot take writes
// (Check refuses, its folder moved, a flush failing) and an in-memory one
// are left as they are; a store that cannot be opened again leaves the
// cache pass-through, as at a start (a later write tries again).
func (c *Cached) Compact() error {
	c.compactMu.Lock()
	defer c.compactMu.Unlock()
	c.mu.Lock()
	s := c.store
	if c.closed || s == nil || c.inMemory || !c.dirty.Load() || c.usable(s) != nil || c.st.Check() != nil {
		c.mu.Unlock()
		return nil
	}
	c.dirty.Store(false)
	c.compacting.Store(true)
	defer c.compacting.Store(false)
	c.store = nil
	c.mu.Unlock()

	s, err := c.reopenFlushed(s)

	c.mu.Lock()
	if err != nil {
		// As at a start (NewCached): tried again at a write.
		busy := errors.Is(err, errBusy) && c.busy != nil
		if refused(err) || busy {
			c.refusedAt, c.refusedErr = time.Now(), err
		}
		if busy {
			c.busy(true)
		}
		c.mu.Unlock()
		return err
	}
	c.store = s
	c.mu.Unlock()

	c.mu.RLock()
	defer c.mu.RUnlock()
	if c.store != s || c.usable(s) != nil {
		return nil // its folder went away meanwhile
	}
	c.stage("flatten")
	if err := s.db.Flatten(1); err != nil {
		return fmt.Errorf("embedding cache: compact: %w", err)
	}
	return nil
}

// reopenFlushed closes s, which writes its memtable out, and opens the
// store again, its level 0 moved down first when nothing is below it
// (see Compact). Only Compact calls it, with s taken out of the cache.
func (c *Cached) reopenFlushed(s *store) (*store, error) {
	if err := s.db.Close(); err != nil {
		return nil, fmt.Errorf("embedding cache: close before compacting: %w", err)
	}
	c.stage("closed")
	s, err := c.newStore()
	if err != nil {
		return nil, fmt.Errorf("embedding cache: open again after closing to compact: %w", err)
	}
	levels := s.db.Levels()
	if len(levels) == 0 || levels[0].NumTables == 0 || slices.ContainsFunc(levels[1:], func(l badger.LevelInfo) bool { return l.NumTables > 0 }) {
		return s, nil
	}
	// DB.Flatten leaves a store whose tables are all in level 0 as it
	// is: opened once with CompactL0OnClose, its Close moves them down.
	if err := s.db.Close(); err != nil {
		return nil, fmt.Errorf("embedding cache: close before compacting: %w", err)
	}
	db, err := badger.Open(c.badgerOptions(c.badgerLog()).WithCompactL0OnClose(true))
	if err == nil {
		err = db.Close()
	}
	if err != nil {
		c.log.Warn("embedding cache: level 0 not compacted", "dir", c.dir, "err", err)
	}
	if s, err = c.newStore(); err != nil {
		return nil, fmt.Errorf("embedding cache: open again after closing to compact: %w", err)
	}
	return s, nil
}

// stage calls compactHook (tests).
func (c *Cached) stage(name string) {
	if c.compactHook != nil {
		c.compactHook(name)
	}
}

// encodeVector stores float32s little-endian.
func encodeVector(v []float32) []byte {
	b := make([]byte, 4*len(v))
	for i, f := range v {
		binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(f))
	}
	return b
}

// decodeVector returns nil unless b is dim finite float32s of unit length:
// garbage is re-embedded, never handed to the index.
func decodeVector(b []byte, dim int) []float32 {
	if len(b) != 4*dim {
		return nil
	}
	v := make([]float32, dim)
	var norm float64
	for i := range v {
		f := math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:]))
		if math.IsNaN(float64(f)) || math.IsInf(float64(f), 0) {
			return nil
		}
		v[i] = f
		norm += float64(f) * float64(f)
	}
	if math.Abs(math.Sqrt(norm)-1) > normEpsilon {
		return nil
	}
	return v
}
