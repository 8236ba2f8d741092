//go:build !unix

package datafile

import "sync"

// processLock serializes updates within the process where flock is
// missing (not across processes).
var processLock sync.Mutex

func lock(string) (func(), error) {
	processLock.Lock()
	return processLock.Unlock, nil
}
