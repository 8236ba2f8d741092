package badgerlog

import (
	"errors"
	"strings"
	"testing"
	"time"

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
