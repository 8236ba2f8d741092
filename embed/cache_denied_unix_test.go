//go:build linux

package embed

import (
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/toolgate/toolgate/internal/storage"
)

// A cache whose files this user may not open (the data folder copied or a
// command run by root, the gateway running as its own user) is not
// damaged: it is pass-through, reported with the fix that gives the files
// back, and opened at a write once they are. It used to be moved aside as
// corrupt (its vectors lost), which failed on files this user could not
// move.
func TestCacheFilesOfAnotherUser(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "embeddings")
	c, err := NewCached(&fakeModel{id: "f", dim: 4}, dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	mustEmbed(t, c, "alpha")
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}

	defer func(d time.Duration) { refusedRetry = d }(refusedRetry)
	refusedRetry = 0
	st := &switchStorage{}
	inner := &fakeModel{id: "f", dim: 4}
	// Another user's folder: this user may not make Badger's LOCK file in
	// it. Root may make anything, unless its file-system uid is another
	// user's (this thread's only, for the open).
	if err := os.Chmod(dir, 0o555); err != nil {
		t.Fatal(err)
	}
	runtime.LockOSThread()
	if os.Geteuid() == 0 {
		syscall.Syscall(syscall.SYS_SETFSUID, 65534, 0, 0)
	}
	c, err = NewCached(inner, dir, &CacheOptions{Storage: st})
	if os.Geteuid() == 0 {
		syscall.Syscall(syscall.SYS_SETFSUID, 0, 0, 0)
	}
	runtime.UnlockOSThread()
	if err := os.Chmod(dir, 0o755); err != nil { // given back
		t.Fatal(err)
	}
	if err != nil {
		t.Fatalf("NewCached on another user's files: %v, want a pass-through cache", err)
	}
	defer c.Close()
	if aside, _ := filepath.Glob(dir + ".corrupt-*"); len(aside) > 0 {
		t.Fatalf("the cache was moved aside as corrupt: %v", aside)
	}
	var de *storage.DeniedError
	if st.fails == 0 || !errors.As(st.lastFail, &de) || !strings.Contains(storage.Fix(filepath.Dir(dir), st.lastFail), "chown -R") {
		t.Fatalf("the fault is not reported as another user's files: %d failures, last %v", st.fails, st.lastFail)
	}
	mustEmbed(t, c, "beta") // stores, opening the cache
	mustEmbed(t, c, "alpha", "beta")
	if diff := cmp.Diff([]string{"beta"}, inner.texts()); diff != "" {
		t.Errorf("embedded once the files are this user's (-want +got): %s; alpha was in the cache", diff)
	}
}
