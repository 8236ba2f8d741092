package storage

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"

	"github.com/toolgate/toolgate/internal/shellword"
)

// OthersMayWrite says how every user of this machine may change the file
// at path, and the command that stops it; ("", "") when none may. Either
// the file is writable by others ("can be written by every user of this
// machine (mode 0666)"), or a folder above it (as named, or as its links
// lead) lets others write in it without the sticky bit, so that they may
// rename the file and put theirs in its place ("is in /srv/tg, a folder
// every user of this machine may write in (mode 0777)"): sshd's StrictModes
// reasoning of authorized_keys. A group that may write is a choice, and
// passes (as a TLS key's readers do); so does a sticky folder (/tmp: others
// cannot rename what is not theirs), and a read-only file system (a
// Kubernetes Secret or ConfigMap volume, whose folder may be 0777). A path
// that cannot be stat'ed passes: its read says why.
func OthersMayWrite(path string) (how, fix string) {
	fi, err := os.Stat(path)
	if err != nil {
		return "", ""
	}
	if m := fi.Mode().Perm(); m&0o002 != 0 && !readOnly(path) {
		return fmt.Sprintf("can be written by every user of this machine (mode %04o)", m), shellword.Join("chmod", "o-w", path)
	}
	paths := []string{path}
	if real, err := filepath.EvalSymlinks(path); err == nil && real != path {
		paths = append(paths, real) // a Kubernetes volume's ..data/ link
	}
	for _, p := range paths {
		abs, err := filepath.Abs(p)
		if err != nil {
			continue
		}
		for dir := filepath.Dir(abs); ; dir = filepath.Dir(dir) {
			if di, err := os.Stat(dir); err == nil && di.Mode().Perm()&0o002 != 0 && di.Mode()&fs.ModeSticky == 0 && !readOnly(dir) {
				return fmt.Sprintf("is in %s, a folder every user of this machine may write in (mode %04o)", dir, di.Mode().Perm()),
					shellword.Join("chmod", "o-w", dir) + " (or " + shellword.Join("chmod", "+t", dir) + ")"
			}
			if filepath.Dir(dir) == dir {
				break
			}
		}
	}
	return "", ""
}

// readOnly reports whether path is on a file system mounted read-only,
// where no one writes whatever its mode says.
func readOnly(path string) bool {
	return errors.Is(unix.Access(path, unix.W_OK), unix.EROFS)
}
