//go:build linux

package embed

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/toolgate/toolgate/internal/storage"
	"github.com/toolgate/toolgate/internal/testenv"
)

// A cache whose files this user may not open (the data folder copied or a
// command run by root, the gateway running as its own user) is not
// damaged: it is pass-through, reported with the fix that gives the files
// back, and opened at a write once they are. It used to be moved aside as
// corrupt (its vectors lost), which failed on files this user could not
// move.
func TestCacheFilesOfAnotherUser(t *testing.T) {
	checkRefusedOpen(t, "the files are this user's", func(dir string, open func()) {
		// Another user's folder: this user may not make Badger's LOCK
		// file in it. Root may make anything, unless its file-system uid
		// is another user's (this thread's only, for the open).
		if err := os.Chmod(dir, 0o555); err != nil {
			t.Fatal(err)
		}
		testenv.AsAnotherUser(open)
		if err := os.Chmod(dir, 0o755); err != nil { // given back
			t.Fatal(err)
		}
	}, func(dir string, fail error) bool {
		var de *storage.DeniedError
		return errors.As(fail, &de) && strings.Contains(storage.Fix(filepath.Dir(dir), fail), "chown -R")
	})
}
