//go:build !unix

package datafile

import "sync"

// locks serialize the holders of each lock path within the process where
// flock is missing (not across processes).
var (
	locksMu sync.Mutex
	locks   = map[string]*sync.Mutex{}
)

// lockOf is the in-process lock of path, made on first use.
func lockOf(path string) *sync.Mutex {
	locksMu.Lock()
	defer locksMu.Unlock()
	m := locks[path]
	if m == nil {
		m = &sync.Mutex{}
		locks[path] = m
	}
	return m
}

// LockDir takes the lock of the folder dir within this process.
func LockDir(dir string) (func(), error) { return Lock(dir) }

// TryLockDir is LockDir without the wait: ok is false while another
// holder in this process has the folder.
func TryLockDir(dir string) (unlock func(), ok bool, err error) {
	m := lockOf(dir)
	if !m.TryLock() {
		return nil, false, nil
	}
	return m.Unlock, true, nil
}

// Lock takes the lock of path within this process and returns its release.
func Lock(path string) (func(), error) {
	m := lockOf(path)
	m.Lock()
	return m.Unlock, nil
}
