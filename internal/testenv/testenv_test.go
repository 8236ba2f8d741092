package testenv

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
)

// recorder is a testing.TB whose Skipf and Fatalf record the message and
// end the function under test (as runtime.Goexit would) by a panic that
// run recovers.
type recorder struct {
	testing.TB
	skipped, failed string
}

func (r *recorder) Helper() {}

func (r *recorder) Skipf(format string, args ...any) {
	r.skipped = fmt.Sprintf(format, args...)
	panic(r)
}

func (r *recorder) Fatalf(format string, args ...any) {
	r.failed = fmt.Sprintf(format, args...)
	panic(r)
}

func run(t *testing.T, f func(testing.TB)) (r *recorder) {
	r = &recorder{TB: t}
	defer func() {
		if p := recover(); p != nil && p != r {
			panic(p)
		}
	}()
	f(r)
	return r
}

func TestMissingSkipsLocallyFailsOnCI(t *testing.T) {
	for _, ci := range []string{"", "false", "true"} {
		t.Run("CI="+ci, func(t *testing.T) {
			t.Setenv("CI", ci)
			r := run(t, func(tb testing.TB) { Missing(tb, "libfoo missing (run %s)", "make deps") })
			msg := r.skipped
			if ci == "true" {
				msg = r.failed
				if r.skipped != "" {
					t.Errorf("on CI it skipped: %q", r.skipped)
				}
			} else if r.failed != "" {
				t.Errorf("locally it failed: %q", r.failed)
			}
			if !strings.Contains(msg, "libfoo missing (run make deps)") {
				t.Errorf("message %q does not carry the caller's", msg)
			}
		})
	}
}

func TestRequireNilPasses(t *testing.T) {
	t.Setenv("CI", "true")
	if r := run(t, func(tb testing.TB) { Require(tb, nil) }); r.failed != "" || r.skipped != "" {
		t.Errorf("Require(nil) ended the test: %+v", r)
	}
	if r := run(t, func(tb testing.TB) { Require(tb, fmt.Errorf("no model")) }); !strings.Contains(r.failed, "no model") {
		t.Errorf("Require(err) on CI: %+v", r)
	}
}

func TestEventuallyWaitsForState(t *testing.T) {
	var n atomic.Int32
	go func() {
		for range 5 {
			n.Add(1)
		}
	}()
	Eventually(t, "five increments", func() bool { return n.Load() == 5 })
	calls := 0
	if !Poll(Timeout, func() bool { calls++; return calls == 3 }) || calls != 3 {
		t.Errorf("Poll stopped after %d checks, want 3", calls)
	}
}

func TestLogBuffer(t *testing.T) {
	var l LogBuffer
	log := l.Logger()
	done := make(chan struct{})
	for i := range 4 {
		go func() {
			log.Debug("line", "from", i)
			done <- struct{}{}
		}()
	}
	for range 4 {
		<-done
	}
	if got := strings.Count(l.String(), "msg=line"); got != 4 {
		t.Errorf("%d records, want 4:\n%s", got, l.String())
	}
}

func TestBenchSplit(t *testing.T) {
	base := t.TempDir()
	if err := os.MkdirAll(filepath.Join(base, "demo"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(base, "demo", "tools.jsonl"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Setenv("TOOLGATE_BENCH_DIR", base)
	t.Setenv("CI", "")
	var got string
	if r := run(t, func(tb testing.TB) { got = BenchSplit(tb, "demo") }); r.skipped != "" || got != filepath.Join(base, "demo") {
		t.Errorf("BenchSplit(demo) = %q (skipped %q)", got, r.skipped)
	}
	if r := run(t, func(tb testing.TB) { BenchSplit(tb, "absent") }); !strings.Contains(r.skipped, "bench split absent is missing") {
		t.Errorf("a missing split: skipped %q", r.skipped)
	}
	// Without the variable: the shared folder beside the clone.
	t.Setenv("TOOLGATE_BENCH_DIR", "")
	r := run(t, func(tb testing.TB) { got = BenchSplit(tb, "azure-mcp") })
	want, _ := filepath.Abs(filepath.Join("..", "..", "..", "shared", "bench", "azure-mcp"))
	if r.skipped == "" && got != want {
		t.Errorf("BenchSplit(azure-mcp) = %q, want %q", got, want)
	}
}
