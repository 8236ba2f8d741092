package testenv

import (
	"errors"
	"os"
	"sync"
	"syscall"
	"testing"
	"time"
)

// FillDescriptors lowers the process's soft open-files limit and opens
// files until it is reached, so that the next open, pipe, socket or accept
// fails with EMFILE. The function it returns closes them and restores the
// limit; it also runs when t ends. A test that uses it must not run in
// parallel with others: the whole process is out of descriptors.
//
// A descriptor that something else closes meanwhile (a finalizer, an
// earlier test's connection) is free for the next open; HoldDescriptors
// takes such descriptors back.
func FillDescriptors(t testing.TB) (release func()) {
	t.Helper()
	return fillDescriptors(t, false)
}

// HoldDescriptors is FillDescriptors that also keeps the table full until
// release: a descriptor freed meanwhile is taken back within a fraction of
// a millisecond. Use it where a single free descriptor lets the code under
// test through and keeps it there: a dial needs one, and a dial that gets
// one to an in-process server that cannot accept holds it for the connect
// timeout and frees it just before its own next attempt.
func HoldDescriptors(t testing.TB) (release func()) {
	t.Helper()
	return fillDescriptors(t, true)
}

func fillDescriptors(t testing.TB, hold bool) (release func()) {
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
	var (
		mu     sync.Mutex
		held   []*os.File
		once   sync.Once
		stop   = make(chan struct{})
		keeper sync.WaitGroup
	)
	release = func() {
		once.Do(func() {
			close(stop)
			keeper.Wait()
			mu.Lock()
			for _, f := range held {
				f.Close()
			}
			held = nil
			mu.Unlock()
			if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
				t.Error(err)
			}
		})
	}
	t.Cleanup(release)
	// take opens descriptors until the table is full; it fails on an
	// error other than EMFILE.
	take := func() error {
		for {
			f, err := os.Open(os.DevNull)
			if err != nil {
				if errors.Is(err, syscall.EMFILE) {
					return nil
				}
				return err
			}
			mu.Lock()
			held = append(held, f)
			mu.Unlock()
		}
	}
	if err := take(); err != nil {
		release()
		t.Fatalf("filling the descriptor table: %v", err)
	}
	if hold {
		keeper.Add(1)
		go func() {
			defer keeper.Done()
			tick := time.NewTicker(100 * time.Microsecond)
			defer tick.Stop()
			for {
				select {
				case <-stop:
					return
				case <-tick.C:
					if err := take(); err != nil {
						t.Errorf("keeping the descriptor table full: %v", err)
						return
					}
				}
			}
		}()
	}
	return release
}
