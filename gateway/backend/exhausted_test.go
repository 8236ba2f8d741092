//go:build linux

package backend

import (
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/toolgate/toolgate/gateway/backend/backendtest"
	"github.com/toolgate/toolgate/gateway/config"
	"github.com/toolgate/toolgate/internal/testenv"
)

// TestOutOfFileDescriptorsRetried: a stdio server that cannot start because
// toolgate has no file descriptors left is not a config mistake: its error
// names the open-files limit, it is restarted as after a crash, and it comes
// up once descriptors are free again; a remote server's connection refused
// alike says the same. (It used to stay down at once, until
// the config changed, as a missing command does.) The test lowers its own
// process's soft limit and fills it, so it must not run in parallel.
func TestOutOfFileDescriptorsRetried(t *testing.T) {
	srv := backendtest.Command(t, "normal")
	remote := backendtest.NewHTTPServer(t, config.TypeHTTP, "normal").Config("remote", nil)
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
	release := func() {
		for _, f := range held {
			f.Close()
		}
		held = nil
		if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
			t.Error(err)
		}
	}
	t.Cleanup(release)
	for {
		f, err := os.Open(os.DevNull)
		if err != nil {
			if !strings.Contains(err.Error(), "too many open files") {
				t.Fatalf("filling the descriptor table: %v", err)
			}
			break
		}
		held = append(held, f)
	}

	o := testOptions(nil)
	o.RestartDelays = []time.Duration{50 * time.Millisecond, 50 * time.Millisecond, 50 * time.Millisecond, 50 * time.Millisecond,
		50 * time.Millisecond, 50 * time.Millisecond, 50 * time.Millisecond, 50 * time.Millisecond, 50 * time.Millisecond, 50 * time.Millisecond}
	p := startPool(t, []config.Server{srv, remote}, o)
	for _, name := range []string{srv.Name, remote.Name} {
		testenv.Eventually(t, name+": a failed start, restarted", func() bool {
			return statusOf(t, p, name).Restarts >= 1
		})
		st := statusOf(t, p, name)
		if st.State == StateUp || !strings.Contains(st.LastErr, "open-files limit") || (name == srv.Name && strings.Contains(st.LastErr, "check url")) {
			t.Errorf("%s out of descriptors: state %s, last error %q; want down, naming the open-files limit (and, for stdio, no url)", name, st.State, st.LastErr)
		}
	}
	release()
	for _, name := range []string{srv.Name, remote.Name} {
		testenv.Eventually(t, name+" up once descriptors are free", func() bool {
			return statusOf(t, p, name).State == StateUp
		})
	}
}
