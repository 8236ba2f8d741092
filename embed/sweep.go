package embed

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"time"

	"github.com/dgraph-io/badger/v4"
)

// Sweep deletes the vectors of tool texts that no sweep has found in the
// catalog for CacheOptions.Unused (DefaultUnused), so that descriptions
// which change (a version or a date in them), servers removed and learned
// queries an older toolgate stored as tool texts do not grow the cache for
// good. live is every text the catalog's tools are embedded as (index.
// DocumentTexts), of every server configured: a caller that lacks some
// configured server's tools (down at a cold start, never listed) must not
// sweep, or that server's vectors would start to age.
//
// A text out of the catalog is stamped with the time of the first sweep
// that found it so (its wait starts then: a store an older toolgate filled
// loses nothing before Unused has passed); a text back in the catalog
// loses its stamp. Nothing is written for a text that stays in the
// catalog, and query vectors (EmbedQueries) keep their own expiry. The
// stamping and dropping run at most every SweepEvery (the last one's time
// is in the store, so restarts do not run them again); a call meanwhile
// only takes the stamps off the texts back in its catalog, reading the
// stamps alone (they are few). The disk space of what it deleted comes
// back at the next Compact.
//
// It reads the store's keys (not their vectors) while lookups and writes
// go on. A store that cannot take writes is left as it is.
func (c *Cached) Sweep(ctx context.Context, live []string) (dropped int, err error) {
	var rep struct{ vectors, live, unused, dropped int }
	start := time.Now()
	now := c.now()
	id := c.ModelID()
	c.mu.RLock()
	defer c.mu.RUnlock()
	s := c.store
	if s == nil || c.closed || id == "" || c.usable(s) != nil || !c.inMemory && c.st.Check() != nil {
		return 0, nil
	}
	db := s.db
	in := make(map[[sha256Size]byte]bool, len(live))
	for _, t := range live {
		in[[sha256Size]byte(textKey(id, t)[1:])] = true
	}
	last, swept := readStamp(db, keySwept)
	due := !swept || now.Before(last) || now.Sub(last) >= SweepEvery
	// One snapshot of the stamps and the vectors' keys. The stamps are read
	// at every call, so that a text any caller finds in its catalog
	// (another config on the data folder, another model variant) loses
	// its stamp even when the sweep is not due.
	stamps := map[[sha256Size]byte]int64{} // -1: a stamp that does not read
	vecs := map[[sha256Size]byte]bool{}
	err = db.View(func(txn *badger.Txn) error {
		if err := eachKey(txn, keyUnusedPfx, true, func(h [sha256Size]byte, v []byte) {
			stamps[h] = decodeStamp(v)
		}); err != nil || !due {
			return err
		}
		return eachKey(txn, keyVecPfx, false, func(h [sha256Size]byte, _ []byte) { vecs[h] = true })
	})
	if err != nil {
		return 0, fmt.Errorf("embedding cache sweep: read: %w", err)
	}
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	wb := db.NewWriteBatch()
	defer wb.Cancel()
	writes := 0
	for h := range stamps {
		if in[h] {
			if err := wb.Delete(prefixed(keyUnusedPfx, h)); err != nil {
				return 0, fmt.Errorf("embedding cache sweep: %w", err)
			}
			delete(stamps, h)
			writes++
		}
	}
	if !due {
		if writes > 0 {
			if err := wb.Flush(); err != nil {
				c.st.Fail(fmt.Errorf("embedding cache sweep in %s: %w", c.dir, err))
				return 0, fmt.Errorf("embedding cache sweep: %w", err)
			}
		}
		return 0, nil
	}
	stampNow := encodeStamp(now)
	for h := range vecs {
		rep.vectors++
		since, stamped := stamps[h]
		delete(stamps, h)
		switch {
		case in[h]:
			rep.live++
		case !stamped || since < 0:
			rep.unused++
			err = wb.Set(prefixed(keyUnusedPfx, h), stampNow)
		case now.Sub(time.Unix(since, 0)) > c.unused:
			rep.dropped++
			if err = wb.Delete(prefixed(keyVecPfx, h)); err == nil {
				err = wb.Delete(prefixed(keyUnusedPfx, h))
			}
		}
		if err != nil {
			return 0, fmt.Errorf("embedding cache sweep: %w", err)
		}
	}
	for h := range stamps { // a stamp whose vector is gone
		if err := wb.Delete(prefixed(keyUnusedPfx, h)); err != nil {
			return 0, fmt.Errorf("embedding cache sweep: %w", err)
		}
	}
	if err := wb.Set(keySwept, stampNow); err != nil {
		return 0, fmt.Errorf("embedding cache sweep: %w", err)
	}
	if err := wb.Flush(); err != nil {
		c.st.Fail(fmt.Errorf("embedding cache sweep in %s: %w", c.dir, err))
		return 0, fmt.Errorf("embedding cache sweep: %w", err)
	}
	if rep.dropped > 0 {
		c.dirty.Store(true)
	}
	c.sweeps.Add(1)
	c.dropped.Add(int64(rep.dropped))
	c.log.Info("embedding cache swept", "vectors", rep.vectors, "in_catalog", rep.live, "newly_unused", rep.unused, "dropped", rep.dropped, "unused_after", c.unused, "took", time.Since(start).Round(time.Millisecond))
	return rep.dropped, nil
}

const sha256Size = 32

// eachKey calls fn with the hash of every key under pfx (and its value
// when values is set).
func eachKey(txn *badger.Txn, pfx byte, values bool, fn func(h [sha256Size]byte, v []byte)) error {
	it := txn.NewIterator(badger.IteratorOptions{Prefix: []byte{pfx}, PrefetchValues: values, PrefetchSize: 100})
	defer it.Close()
	for it.Rewind(); it.Valid(); it.Next() {
		k := it.Item().Key()
		if len(k) != 1+sha256Size {
			continue
		}
		var v []byte
		if values {
			var err error
			if v, err = it.Item().ValueCopy(nil); err != nil {
				return err
			}
		}
		fn([sha256Size]byte(k[1:]), v)
	}
	return nil
}

func prefixed(pfx byte, h [sha256Size]byte) []byte { return append([]byte{pfx}, h[:]...) }

func encodeStamp(t time.Time) []byte { return binary.BigEndian.AppendUint64(nil, uint64(t.Unix())) }

// decodeStamp reads a stamp as Unix seconds; one that does not read is -1
// (stamped again, as if it had none).
func decodeStamp(v []byte) int64 {
	if len(v) != 8 {
		return -1
	}
	return int64(binary.BigEndian.Uint64(v))
}

// readStamp reads the time stored at key.
func readStamp(db *badger.DB, key []byte) (t time.Time, ok bool) {
	err := db.View(func(txn *badger.Txn) error {
		item, err := txn.Get(key)
		if err != nil {
			return err
		}
		return item.Value(func(v []byte) error {
			if sec := decodeStamp(v); sec >= 0 {
				t, ok = time.Unix(sec, 0), true
			}
			return nil
		})
	})
	if err != nil && !errors.Is(err, badger.ErrKeyNotFound) {
		return time.Time{}, false
	}
	return t, ok
}
