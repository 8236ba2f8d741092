package testenv

import (
	"syscall"
	"testing"
)

// WithFileSizeLimit runs f with the process's soft file-size limit
// (RLIMIT_FSIZE, what ulimit -f and LimitFSIZE= set) at limit bytes, then
// restores it: a write or truncate past the limit fails with EFBIG (Go
// ignores the SIGXFSZ that would end a C program). A test that uses it
// must not run in parallel with others: the whole process is limited.
func WithFileSizeLimit(t testing.TB, limit uint64, f func()) {
	t.Helper()
	var old syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_FSIZE, &old); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Setrlimit(syscall.RLIMIT_FSIZE, &syscall.Rlimit{Cur: limit, Max: old.Max}); err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := syscall.Setrlimit(syscall.RLIMIT_FSIZE, &old); err != nil {
			t.Fatal(err)
		}
	}()
	f()
}
