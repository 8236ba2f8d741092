// Package testenv owns what the tests of every package share: the rule for
// a dependency that is not installed (skip locally, fail on CI), waiting on
// state instead of sleeping (Eventually), and a goroutine-safe log sink
// (LogBuffer).
//
// Only tests and test helper packages import it; bin/toolgate never links
// it (cmd/toolgate's TestShippedBinaryLinksNoTestCode checks).
package testenv

import (
	"bytes"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"
)

// OnCI reports whether the tests run on CI (CI=true, as .ci/run sets),
// where every dependency must be installed.
func OnCI() bool { return os.Getenv("CI") == "true" }

// Missing ends t because something it needs is not installed (a native
// library, the model, the bundled npm servers, a data set): a skip locally,
// a failure on CI, so that a green CI means the real thing ran. The message
// names what is missing and how to install it.
func Missing(t testing.TB, format string, args ...any) {
	t.Helper()
	msg := fmt.Sprintf(format, args...)
	if OnCI() {
		t.Fatalf("%s (CI=true: a missing dependency is a failure)", msg)
	}
	t.Skipf("skipped: %s (with CI=true this fails)", msg)
}

// Require is Missing(t, err) when err is not nil: err says what is missing
// and how to install it.
func Require(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		Missing(t, "%v", err)
	}
}

// Timeout bounds the wait of Eventually: a bound for a hung test, not a
// speed assertion.
const Timeout = time.Minute

// pollEvery is how often Poll checks its condition.
const pollEvery = 10 * time.Millisecond

// Poll checks cond until it holds or within has passed, and reports whether
// it held. Use Eventually unless the failure needs more than a message.
func Poll(within time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			return cond()
		}
		time.Sleep(pollEvery)
	}
	return true
}

// Eventually waits until cond holds (a counter, a status field, a process
// gone), failing t with what after Timeout.
func Eventually(t testing.TB, what string, cond func() bool) {
	t.Helper()
	EventuallyWithin(t, Timeout, what, cond)
}

// EventuallyWithin is Eventually with another bound, for waits that
// include slow work (a model load, npm servers starting on a loaded
// machine).
func EventuallyWithin(t testing.TB, within time.Duration, what string, cond func() bool) {
	t.Helper()
	if !Poll(within, cond) {
		t.Fatalf("timed out after %s waiting for: %s", within, what)
	}
}

// LogBuffer is a goroutine-safe sink for a test's logs (a pool logs from
// many goroutines), read back with String.
type LogBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (l *LogBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(p)
}

func (l *LogBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.String()
}

// Logger is a debug-level text logger writing into l.
func (l *LogBuffer) Logger() *slog.Logger {
	return slog.New(slog.NewTextHandler(l, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

// BenchSplit is the folder of a split of the relevance benchmark data
// (../shared/bench/README.md): $TOOLGATE_BENCH_DIR/split, else the shared
// folder beside the clone (found from the module root, so any package's
// tests can use it). A missing split is Missing.
func BenchSplit(t testing.TB, split string) string {
	t.Helper()
	base := os.Getenv("TOOLGATE_BENCH_DIR")
	if base == "" {
		dir, err := os.Getwd()
		for err == nil {
			if _, serr := os.Stat(filepath.Join(dir, "go.mod")); serr == nil {
				break
			}
			parent := filepath.Dir(dir)
			if parent == dir {
				err = os.ErrNotExist
			}
			dir = parent
		}
		base = filepath.Join(filepath.Dir(dir), "shared", "bench")
	}
	dir := filepath.Join(base, split)
	if _, err := os.Stat(filepath.Join(dir, "tools.jsonl")); err != nil {
		Missing(t, "bench split %s is missing (set TOOLGATE_BENCH_DIR to the folder of ../shared/bench): %v", split, err)
	}
	return dir
}
