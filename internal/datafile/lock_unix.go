//go:build unix

package datafile

import (
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"
)

// Lock takes an exclusive flock on the file at path (created 0600) and
// returns its release. It blocks while another process holds it, so
// holders keep it short (one read-modify-write, one token request).
func Lock(path string) (func(), error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, err
	}
	giveFolderToOwner(filepath.Dir(path))
	GiveToOwner(f, path)
	return flock(f)
}

// LockDir takes an exclusive flock on the folder dir itself, for files
// replaced by rename (a lock on the file would be on the inode it
// replaces) in a folder where a lock file beside them would be litter (a
// user's config folder). Separate opens exclude each other, in one
// process too.
func LockDir(dir string) (func(), error) {
	f, err := os.Open(dir)
	if err != nil {
		return nil, err
	}
	return flock(f)
}

// TryLockDir is LockDir without the wait: ok is false, and nothing is
// held, while another holder has the folder.
func TryLockDir(dir string) (unlock func(), ok bool, err error) {
	f, err := os.Open(dir)
	if err != nil {
		return nil, false, err
	}
	for {
		err = unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB)
		if err != unix.EINTR {
			break
		}
	}
	if err != nil {
		f.Close()
		if err == unix.EWOULDBLOCK {
			return nil, false, nil
		}
		return nil, false, err
	}
	return func() {
		_ = unix.Flock(int(f.Fd()), unix.LOCK_UN)
		f.Close()
	}, true, nil
}

// flock locks f, closing it when that fails; the release unlocks and
// closes it.
func flock(f *os.File) (func(), error) {
	var err error
	for {
		err = unix.Flock(int(f.Fd()), unix.LOCK_EX)
		if err != unix.EINTR {
			break
		}
	}
	if err != nil {
		f.Close()
		return nil, err
	}
	return func() {
		_ = unix.Flock(int(f.Fd()), unix.LOCK_UN)
		f.Close()
	}, nil
}
