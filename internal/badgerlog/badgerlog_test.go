package badgerlog

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/dgraph-io/badger/v4"
	"github.com/dgraph-io/badger/v4/options"

	"github.com/toolgate/toolgate/internal/testenv"
)

// Badger's retrying flush error is reported to FlushFailed (whose owner
// logs a fault once), never logged line by line, and remembered; other
// lines are logged with the prefix; a muted logger says nothing.
func TestFlushFailureReported(t *testing.T) {
	var logs testenv.LogBuffer
	var reported []error
	b := &Logger{L: logs.Logger(), Prefix: "badger", FlushFailed: func(err error) { reported = append(reported, err) }}
	if b.FlushFailedEver() || b.FlushFailedWithin(time.Hour) {
		t.Fatal("a new logger reports a failed flush")
	}
	for range 3 {
		b.Errorf("error flushing memtable to disk: %v, retrying", errors.New("open 000001.sst: no such file or directory"))
	}
	if len(reported) != 3 || logs.String() != "" {
		t.Fatalf("reported %d, logged %q; want 3 reports and no log lines", len(reported), logs.String())
	}
	if !b.FlushFailedWithin(time.Minute) || !b.FlushFailedEver() {
		t.Error("the failed flush is not remembered")
	}
	b.Warningf("something else")
	if !strings.Contains(logs.String(), "badger: something else") {
		t.Errorf("other warnings are not logged: %q", logs.String())
	}
	b.Mute()
	b.Warningf("after mute")
	b.Errorf("error flushing memtable to disk: x, retrying")
	if strings.Contains(logs.String(), "after mute") || len(reported) != 3 {
		t.Error("a muted logger still speaks")
	}
}

// The stores run uncompressed and without a block cache (vectors do not
// compress, and Badger's compression buffers were 24 MB of a compaction's
// Go heap in serve); Badger refuses a zero block cache with compression, so
// a store must still open, flush to a table, reopen and read back.
func TestOptionsUncompressed(t *testing.T) {
	var logs testenv.LogBuffer
	dir := t.TempDir()
	bo := Options(dir, false, &Logger{L: logs.Logger(), Prefix: "badger"}, 1<<20).WithValueThreshold(64 << 10) // as the embedding cache
	if bo.Compression != options.None || bo.BlockCacheSize != 0 {
		t.Fatalf("compression %v, block cache %d; want none and 0", bo.Compression, bo.BlockCacheSize)
	}
	value := bytes.Repeat([]byte{0x3f, 0x80, 0x01, 0x02}, 384) // a 1.5 KiB vector
	for round := range 2 {
		db, err := badger.Open(bo)
		if err != nil {
			t.Fatal(err)
		}
		if round == 0 {
			wb := db.NewWriteBatch()
			for i := range 2000 { // 3 MB: more than a memtable
				if err := wb.Set([]byte(fmt.Sprintf("k%05d", i)), value); err != nil {
					t.Fatal(err)
				}
			}
			if err := wb.Flush(); err != nil {
				t.Fatal(err)
			}
		}
		err = db.View(func(txn *badger.Txn) error {
			for _, i := range []int{0, 999, 1999} {
				item, err := txn.Get([]byte(fmt.Sprintf("k%05d", i)))
				if err != nil {
					return err
				}
				v, err := item.ValueCopy(nil)
				if err != nil {
					return err
				}
				if !bytes.Equal(v, value) {
					return fmt.Errorf("k%05d: %d bytes, not the value written", i, len(v))
				}
			}
			return nil
		})
		if cerr := db.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			t.Fatalf("round %d: %v", round, err)
		}
	}
}
