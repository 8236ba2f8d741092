//go:build linux

package live

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/toolgate/toolgate/gateway/config"
	"github.com/toolgate/toolgate/internal/testenv"
)

// unblockFIFO lets a read that opened the FIFO at path go on (before the
// fix, the loop's goroutine blocked there) when the test ends.
func unblockFIFO(t *testing.T, path string) {
	t.Cleanup(func() {
		if w, err := os.OpenFile(path, os.O_RDWR, 0); err == nil {
			w.Close()
		}
	})
}

// TestConfigReadOnce: a config given as a FIFO (`serve --config FIFO`, or
// a process substitution `--config <(sops -d …)`, a pipe) is read once,
// by the caller. Run used to read it again for a change made meanwhile: on
// a FIFO the open blocked for want of a writer, so the gateway never
// served (and a stop waited its whole budget); on a process substitution
// it read nothing and recorded a rejected reload at every start. Now it is
// neither watched nor read again: a SIGHUP is rejected with why, and a
// config change through the management tools is refused, at once.
func TestConfigReadOnce(t *testing.T) {
	pool := newFakePool("a")
	pool.list("a", "apple")
	reload := make(chan os.Signal, 1)
	f := newFixture(t, t.TempDir(), pool, &Options{Debounce: time.Millisecond, Reload: reload}, "a")
	if err := os.Remove(f.path); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(f.path, 0o600); err != nil {
		t.Fatal(err)
	}
	unblockFIFO(t, f.path)
	ran := make(chan error, 1)
	go func() { ran <- f.loop.Run(context.Background(), f.pool) }()
	select {
	case err := <-ran:
		if err != nil {
			t.Fatalf("Run: %v", err)
		}
	case <-time.After(testenv.Timeout):
		t.Fatalf("Run did not return: it reads the FIFO again, which no one writes")
	}
	if st := f.loop.Stats(); st.ReloadGeneration != 0 || st.LastReload != nil {
		t.Errorf("after the start: %d reloads, last %+v; want none", st.ReloadGeneration, st.LastReload)
	}
	if !strings.Contains(f.logs.String(), "the config is read once") {
		t.Errorf("the log does not say the config is read once:\n%s", f.logs)
	}
	reload <- syscall.SIGHUP
	st := f.wait(t, "the SIGHUP's reload", func(s Stats) bool { return s.ReloadGeneration == 1 })
	if r := st.LastReload; r == nil || !strings.Contains(r.Error, "is a pipe, not a file") || !strings.Contains(r.Error, "give it a file") {
		t.Errorf("the SIGHUP's reload: %+v; want it rejected, saying the config is a pipe and to give a file", r)
	}
	edited := make(chan error, 1)
	go func() {
		_, _, err := config.Edit([]string{f.path}, func(docs []config.Doc) ([]config.Doc, []int, error) { return docs, nil, nil })
		edited <- err
	}()
	select {
	case err := <-edited:
		var once *config.ReadOnceError
		if !errors.As(err, &once) {
			t.Errorf("config.Edit of the FIFO: %v; want a *ReadOnceError", err)
		}
	case <-time.After(testenv.Timeout):
		t.Fatalf("config.Edit of the FIFO did not return")
	}
}

// TestConfigReplacedByFIFO: a watched config file replaced by a FIFO while
// serving is a rejected reload that says why; the reload used to block on
// the FIFO's open, holding the reload lock (the management tools that
// reload and a stop waited on it). A file put back is applied.
func TestConfigReplacedByFIFO(t *testing.T) {
	pool := newFakePool("a")
	pool.list("a", "apple")
	f := newFixture(t, t.TempDir(), pool, &Options{Debounce: time.Millisecond}, "a")
	f.run(t)
	fifo := filepath.Join(filepath.Dir(f.path), "fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(fifo, f.path); err != nil {
		t.Fatal(err)
	}
	unblockFIFO(t, f.path)
	st := f.wait(t, "the reload of the FIFO", func(s Stats) bool { return s.ReloadGeneration == 1 })
	if r := st.LastReload; r == nil || !strings.Contains(r.Error, "is a pipe, not a file") {
		t.Errorf("the reload of the FIFO: %+v; want it rejected, saying the config is a pipe", r)
	}
	writeFile(t, f.path, configBytes(t, nil, "a"))
	st = f.wait(t, "the reload of the file put back", func(s Stats) bool { return s.ReloadGeneration == 2 })
	if r := st.LastReload; r == nil || r.Error != "" {
		t.Errorf("the reload of the file put back: %+v; want it applied", r)
	}
}
