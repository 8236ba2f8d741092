// Package badgerlog routes Badger's log lines to log/slog for the Badger
// stores in the data folder (embed's embedding cache, learn's learned
// pairs): errors and warnings at warn, the rest at debug, never stdout. It
// also notices the one error a store must act on: Badger failing to flush
// a memtable (its folder gone, full or read-only), which it retries once a
// second forever. Options are those stores' shared Badger settings.
package badgerlog

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/dgraph-io/badger/v4"
	"github.com/dgraph-io/badger/v4/options"

	"github.com/toolgate/toolgate/internal/datafile"
)

// Logger is a badger.Logger writing to L, each line prefixed with Prefix
// and ": ". Use it by pointer.
type Logger struct {
	L      *slog.Logger
	Prefix string
	// FlushFailed, if set, is told of every failed memtable flush (unless
	// muted), instead of the log.
	FlushFailed func(error)

	muted atomic.Bool
	// lastFlushFail is when a flush last failed, as monotonic time since
	// clockBase (0: never).
	lastFlushFail atomic.Int64
}

var _ badger.Logger = (*Logger)(nil)

// clockBase anchors monotonic timestamps kept as integers.
var clockBase = time.Now()

// Mute drops every later line: for a store left unclosed, whose Badger
// keeps retrying in the background.
func (b *Logger) Mute() { b.muted.Store(true) }

// FlushFailedEver reports whether a flush ever failed.
func (b *Logger) FlushFailedEver() bool { return b.lastFlushFail.Load() != 0 }

// FlushFailedWithin reports whether a flush failed in the last d.
func (b *Logger) FlushFailedWithin(d time.Duration) bool {
	last := b.lastFlushFail.Load()
	return last != 0 && time.Since(clockBase)-time.Duration(last) < d
}

// Errorf logs at warn, except a failed flush (see FlushFailed).
func (b *Logger) Errorf(f string, a ...any) {
	msg := strings.TrimSpace(fmt.Sprintf(f, a...))
	if strings.Contains(msg, "error flushing memtable") {
		b.lastFlushFail.Store(int64(max(time.Since(clockBase), 1)))
		if !b.muted.Load() && b.FlushFailed != nil {
			b.FlushFailed(errors.New(b.Prefix + ": " + msg))
		}
		return
	}
	b.log(slog.LevelWarn, msg)
}

// Warningf logs at warn.
func (b *Logger) Warningf(f string, a ...any) {
	b.log(slog.LevelWarn, strings.TrimSpace(fmt.Sprintf(f, a...)))
}

// Infof logs at debug: Badger's info lines are its housekeeping.
func (b *Logger) Infof(f string, a ...any) {
	b.log(slog.LevelDebug, strings.TrimSpace(fmt.Sprintf(f, a...)))
}

// Debugf logs at debug.
func (b *Logger) Debugf(f string, a ...any) {
	b.log(slog.LevelDebug, strings.TrimSpace(fmt.Sprintf(f, a...)))
}

func (b *Logger) log(level slog.Level, msg string) {
	if b.muted.Load() {
		return
	}
	b.L.Log(context.Background(), level, b.Prefix+": "+msg)
}

// Options are the Badger options of a small store in the data folder (the
// embedding cache, the learned pairs: megabytes, not gigabytes), logging to
// l: memtables of memTable bytes (two of them), value log files four times
// as large, two compactors, no metrics, and tables stored uncompressed with
// no block cache (reads go to the mapped tables). The values are dense
// float32 vectors, which compress poorly, and short texts; a compaction's
// compression buffers were 24 MB of serve's Go heap at 10,000 tools (the
// embedding cache compacts as searches add query vectors): the client
// bench's run that compacts peaked at 364–393 MiB with them, 330–348 without.
// In memory, the store has no folder.
func Options(dir string, inMemory bool, l *Logger, memTable int64) badger.Options {
	bo := badger.DefaultOptions(dir).
		WithInMemory(inMemory).
		WithLogger(l).
		WithMemTableSize(memTable).
		WithNumMemtables(2).
		WithValueLogFileSize(4 * memTable).
		WithCompression(options.None).
		WithBlockCacheSize(0).
		WithNumCompactors(2).
		WithMetricsEnabled(false)
	if inMemory {
		bo = bo.WithDir("").WithValueDir("")
	}
	return bo
}

// Open opens the store of bo, first removing the memtable files (*.mem)
// it holds that are empty: Badger makes a memtable's file and then sizes
// it, and one it could not size (a file-size limit, ulimit -f or
// LimitFSIZE=: EFBIG) stays behind empty. It holds nothing, but Badger
// cannot open a store with it, and the store was taken for damaged (the
// embedding cache moved aside, its vectors lost; the learned pairs' fix
// said to move them aside) once the limit was raised. They are removed
// only while no process holds the store (the folder's flock, which Badger
// takes): a holder makes such a file, for a moment, as it makes each
// memtable. TestCacheOverFileSizeLimit fails if Badger's files change.
func Open(bo badger.Options) (*badger.DB, error) {
	if !bo.InMemory {
		dropEmptyMemtables(bo.Dir)
	}
	return badger.Open(bo)
}

// memtableSuffix ends the name of a memtable's file (Badger's memFileExt).
const memtableSuffix = ".mem"

func dropEmptyMemtables(dir string) {
	mems, _ := filepath.Glob(filepath.Join(dir, "*"+memtableSuffix))
	var empty []string
	for _, m := range mems {
		if fi, err := os.Lstat(m); err == nil && fi.Mode().IsRegular() && fi.Size() == 0 {
			empty = append(empty, m)
		}
	}
	if len(empty) == 0 {
		return
	}
	unlock, ok, err := datafile.TryLockDir(dir)
	if err != nil || !ok {
		return // held: the holder's own
	}
	defer unlock()
	for _, m := range empty {
		if fi, err := os.Lstat(m); err == nil && fi.Size() == 0 {
			_ = os.Remove(m)
		}
	}
}

// gcDiscardRatio is the share of a value log file that must be dead
// (deleted or overwritten values, as Badger's compactions count them)
// before CollectGarbage rewrites it.
const gcDiscardRatio = 0.5

// CollectGarbage rewrites db's value log files of which at least half is
// dead, one after the other until Badger finds none, and returns how many
// it rewrote. Badger never does it by itself: a store whose values above
// its value threshold are deleted or rewritten keeps their bytes on disk
// for good without it. A collection already under way (ErrRejected) is no
// error. Badger never rewrites the value log it is writing, nor one whose
// dead values no compaction has counted yet.
func CollectGarbage(db *badger.DB) (int, error) {
	n := 0
	for {
		err := db.RunValueLogGC(gcDiscardRatio)
		switch {
		case err == nil:
			n++
		case errors.Is(err, badger.ErrNoRewrite), errors.Is(err, badger.ErrRejected):
			return n, nil
		default:
			return n, err
		}
	}
}

// GC runs a store's garbage collection in the background (StartGC).
type GC struct {
	stop chan struct{}
	done chan struct{}
	once sync.Once
}

// StartGC calls run (a store's CollectGarbage, when it may write) at once,
// since Badger starts a new value log at each open and the previous ones
// may be rewritten, and then every every, until Stop.
func StartGC(every time.Duration, run func()) *GC {
	g := &GC{stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(g.done)
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			run()
			select {
			case <-g.stop:
				return
			case <-t.C:
			}
		}
	}()
	return g
}

// Stop stops the runs and waits for one under way: call it before closing
// the store. Nil-safe and idempotent.
func (g *GC) Stop() {
	if g == nil {
		return
	}
	g.once.Do(func() { close(g.stop) })
	<-g.done
}
