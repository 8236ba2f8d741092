package embed

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/dgraph-io/badger/v4"
)

// Model is what the cache wraps: anything that embeds text (index.Embedder
// has the same method set; *Embedder implements it).
type Model interface {
	ModelID() string
	Dim() int
	Embed(ctx context.Context, texts []string) ([][]float32, error)
}

// CacheOptions configure NewCached. Nil means defaults.
type CacheOptions struct {
	// Logger receives warnings (a cache set aside, an unreadable entry) and
	// Badger's own messages (warnings and errors at warn, the rest at
	// debug). Nil discards.
	Logger *slog.Logger
	// InMemory keeps the cache in memory only (dir is ignored); for tests.
	InMemory bool
}

// cacheFormat is bumped whenever the key or value encoding changes; a cache
// with another format is set aside and rebuilt.
const cacheFormat = "1"

var (
	keyFormat   = []byte("m/format")
	keyDimPfx   = "m/dim/"
	keyVecPfx   = byte('v')
	errBusy     = errors.New("embedding cache is in use by another process")
	errForeign  = errors.New("not a toolgate embedding cache")
	normEpsilon = 1e-3
)

// ErrCacheBusy is returned by NewCached when another process holds the
// cache directory; callers may run uncached.
var ErrCacheBusy = errBusy

// Cached decorates a Model with a Badger store of vectors keyed by
// sha256(model id + "\x00" + text). Only texts never seen by this model go
// to the model, so a restart or re-index re-embeds only new text.
type Cached struct {
	inner Model
	db    *badger.DB
	dir   string
	log   *slog.Logger
	id    string
	dim   int

	hits, misses, bad atomic.Int64
}

var _ Model = (*Cached)(nil)

// CacheStats count lookups since NewCached.
type CacheStats struct {
	Hits, Misses int64
	// Bad counts entries that failed validation (wrong length, not finite,
	// not unit length) and were re-embedded.
	Bad int64
}

// NewCached opens (creating if needed) the cache at dir around inner. A
// corrupt or foreign cache — unreadable by Badger, another format version,
// another dimension for this model — is renamed to
// <dir>.corrupt-<UTC timestamp>, logged as a warning, and rebuilt empty.
// Only a directory held by another process is an error (ErrCacheBusy).
func NewCached(inner Model, dir string, opts *CacheOptions) (*Cached, error) {
	var o CacheOptions
	if opts != nil {
		o = *opts
	}
	log := o.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	c := &Cached{inner: inner, dir: dir, log: log, id: inner.ModelID(), dim: inner.Dim()}
	if c.dim <= 0 {
		return nil, fmt.Errorf("embedding cache: model %s reports dimension %d", c.id, c.dim)
	}
	db, err := c.open(o.InMemory)
	if err == nil {
		err = c.check(db)
		if err != nil {
			db.Close()
		}
	}
	if err == nil {
		c.db = db
		return c, nil
	}
	if errors.Is(err, errBusy) || o.InMemory {
		return nil, err
	}
	aside := fmt.Sprintf("%s.corrupt-%s", strings.TrimRight(dir, string(os.PathSeparator)), time.Now().UTC().Format("20060102T150405.000Z"))
	log.Warn("embedding cache unusable; moved aside and rebuilding", "dir", dir, "moved_to", aside, "err", err)
	if rerr := os.Rename(dir, aside); rerr != nil {
		return nil, fmt.Errorf("embedding cache %s is unusable (%v) and cannot be moved aside: %w", dir, err, rerr)
	}
	if db, err = c.open(false); err != nil {
		return nil, fmt.Errorf("embedding cache: rebuild %s: %w", dir, err)
	}
	if err = c.check(db); err != nil {
		db.Close()
		return nil, fmt.Errorf("embedding cache: rebuild %s: %w", dir, err)
	}
	c.db = db
	return c, nil
}

// open opens Badger with small buffers: the cache holds 1.5 KiB vectors,
// thousands of them, not gigabytes.
func (c *Cached) open(inMemory bool) (db *badger.DB, err error) {
	bo := badger.DefaultOptions(c.dir).
		WithInMemory(inMemory).
		WithLogger(badgerLogger{c.log}).
		WithMemTableSize(8 << 20).
		WithNumMemtables(2).
		WithValueLogFileSize(32 << 20).
		WithBlockCacheSize(8 << 20).
		WithNumCompactors(2).
		WithMetricsEnabled(false)
	if inMemory {
		bo = bo.WithDir("").WithValueDir("")
	} else if err := os.MkdirAll(c.dir, 0o755); err != nil {
		return nil, fmt.Errorf("embedding cache: %w", err)
	}
	defer func() {
		// Badger panics on some kinds of garbage instead of returning an error.
		if r := recover(); r != nil {
			db, err = nil, fmt.Errorf("open badger: panic: %v", r)
		}
	}()
	db, err = badger.Open(bo)
	if err != nil {
		if strings.Contains(err.Error(), "Cannot acquire directory lock") {
			return nil, fmt.Errorf("%w: %s (another toolgate running?): %v", errBusy, c.dir, err)
		}
		return nil, fmt.Errorf("open badger: %w", err)
	}
	return db, nil
}

// check verifies the format marker and this model's dimension, writing them
// into an empty store.
func (c *Cached) check(db *badger.DB) error {
	dimKey := []byte(keyDimPfx + c.id)
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
				return fmt.Errorf("%w: format %q, want %q", errForeign, v, cacheFormat)
			}
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
			return fmt.Errorf("%w: model %s stored with dimension %q, want %d", errForeign, c.id, v, c.dim)
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

// ModelID is the wrapped model's id.
func (c *Cached) ModelID() string { return c.id }

// Dim is the wrapped model's dimension.
func (c *Cached) Dim() int { return c.dim }

// Stats reports hits and misses since NewCached.
func (c *Cached) Stats() CacheStats {
	return CacheStats{Hits: c.hits.Load(), Misses: c.misses.Load(), Bad: c.bad.Load()}
}

func (c *Cached) key(text string) []byte {
	h := sha256.New()
	h.Write([]byte(c.id))
	h.Write([]byte{0})
	h.Write([]byte(text))
	return h.Sum([]byte{keyVecPfx})
}

// Embed returns cached vectors and embeds only the texts not cached (each
// distinct text once), then stores them. A failure to store is logged, not
// returned: the vectors are still right.
func (c *Cached) Embed(ctx context.Context, texts []string) ([][]float32, error) {
	out := make([][]float32, len(texts))
	keys := make([][]byte, len(texts))
	for i, t := range texts {
		keys[i] = c.key(t)
	}
	var bad int
	err := c.db.View(func(txn *badger.Txn) error {
		for i, k := range keys {
			item, err := txn.Get(k)
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
		return out, nil
	}
	vecs, err := c.inner.Embed(ctx, miss)
	if err != nil {
		return nil, err
	}
	if len(vecs) != len(miss) {
		return nil, fmt.Errorf("embed: model returned %d vectors for %d texts", len(vecs), len(miss))
	}
	wb := c.db.NewWriteBatch()
	defer wb.Cancel()
	for j, t := range miss {
		if len(vecs[j]) != c.dim {
			return nil, fmt.Errorf("embed: model returned a %d-wide vector, want %d", len(vecs[j]), c.dim)
		}
		for _, i := range pos[t] {
			out[i] = vecs[j]
		}
		if err := wb.Set(keys[pos[t][0]], encodeVector(vecs[j])); err != nil {
			c.log.Warn("embedding cache write failed", "err", err)
			return out, nil
		}
	}
	if err := wb.Flush(); err != nil {
		c.log.Warn("embedding cache write failed", "err", err)
	}
	return out, nil
}

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
// background work.
func (c *Cached) Close() error {
	if err := c.db.Close(); err != nil {
		return fmt.Errorf("close embedding cache: %w", err)
	}
	return nil
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

// badgerLogger routes Badger's log lines to slog: errors and warnings at
// warn, the rest at debug. Never stdout.
type badgerLogger struct{ l *slog.Logger }

func (b badgerLogger) Errorf(f string, a ...any) {
	b.l.Warn("badger: " + strings.TrimSpace(fmt.Sprintf(f, a...)))
}

func (b badgerLogger) Warningf(f string, a ...any) {
	b.l.Warn("badger: " + strings.TrimSpace(fmt.Sprintf(f, a...)))
}

func (b badgerLogger) Infof(f string, a ...any) {
	b.l.Debug("badger: " + strings.TrimSpace(fmt.Sprintf(f, a...)))
}

func (b badgerLogger) Debugf(f string, a ...any) {
	b.l.Debug("badger: " + strings.TrimSpace(fmt.Sprintf(f, a...)))
}
