//go:build unix

package keys

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/toolgate/toolgate/internal/shellword"
)

// othersMayWrite says, as an error naming the fix, when a file of API keys
// at path can be written or replaced by every user of this machine: the
// file itself writable by others, or a folder above it (as named, or as
// its links lead) that others may write in without the sticky bit, so that
// they may rename it and put their own in its place. Anyone could then add
// an API key of their own (an admin one), as sshd's StrictModes reasons of
// authorized_keys. A group that may write is a choice, and passes (a
// config-management group), as tlsfiles.Exposed passes a key's readers; a
// sticky folder (/tmp) passes: others cannot rename what is not theirs.
func othersMayWrite(path string) error {
	fi, err := os.Stat(path)
	if err != nil {
		return nil // the read says it
	}
	if m := fi.Mode().Perm(); m&0o002 != 0 {
		return fmt.Errorf("%s can be written by every user of this machine (mode %04o): anyone could add an API key of their own, so none of its keys is accepted: %s",
			path, m, shellword.Join("chmod", "o-w", path))
	}
	paths := []string{path}
	if real, err := filepath.EvalSymlinks(path); err == nil && real != path {
		paths = append(paths, real) // a Kubernetes Secret's ..data/ link
	}
	for _, p := range paths {
		abs, err := filepath.Abs(p)
		if err != nil {
			continue
		}
		for dir := filepath.Dir(abs); ; dir = filepath.Dir(dir) {
			if di, err := os.Stat(dir); err == nil && di.Mode().Perm()&0o002 != 0 && di.Mode()&fs.ModeSticky == 0 {
				return fmt.Errorf("%s is in %s, a folder every user of this machine may write in (mode %04o): anyone could put a file of their own API keys in its place, so none of its keys is accepted: %s (or %s)",
					path, dir, di.Mode().Perm(), shellword.Join("chmod", "o-w", dir), shellword.Join("chmod", "+t", dir))
			}
			if next := filepath.Dir(dir); next == dir {
				break
			}
		}
	}
	return nil
}
