package testenv

import (
	"errors"
	"os"
	"sync"
	"syscall"
	"testing"
)

// FillDescriptors lowers the process's soft open-files limit and opens
// files until it is reached, so that the next open, pipe, socket or accept
// fails with EMFILE. The function it returns closes them and restores the
// limit; it also runs when t ends. A test that uses it must not run in
// parallel with others: the whole process is out of descriptors.
func FillDescriptors(t testing.TB) (release func()) {
	t.Helper()
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		t.Fatal(err)
	}
	fds, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	low := lim
	low.Cur = uint64(len(fds) + 64)
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &low); err != nil {
		t.Fatal(err)
	}
	var held []*os.File
	var once sync.Once
	release = func() {
		once.Do(func() {
			for _, f := range held {
				f.Close()
			}
			if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
				t.Error(err)
			}
		})
	}
	t.Cleanup(release)
	for {
		f, err := os.Open(os.DevNull)
		if err != nil {
			if !errors.Is(err, syscall.EMFILE) {
				release()
				t.Fatalf("filling the descriptor table: %v", err)
			}
			return release
		}
		held = append(held, f)
	}
}
