//go:build linux

package backend

import (
	"strings"
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
	// Held, not just filled: one descriptor freed by anything else (a
	// finalizer, an earlier test's connection) lets the remote's dial
	// through to its in-process server, which cannot accept it; the dial
	// waits for the connect timeout, frees the descriptor and takes it
	// again at its next attempt, so the remote never saw EMFILE again (seen
	// under CI's load: 60 s of timeouts).
	release := testenv.HoldDescriptors(t)

	o := testOptions(nil)
	o.RestartDelays = []time.Duration{50 * time.Millisecond, 50 * time.Millisecond, 50 * time.Millisecond, 50 * time.Millisecond,
		50 * time.Millisecond, 50 * time.Millisecond, 50 * time.Millisecond, 50 * time.Millisecond, 50 * time.Millisecond, 50 * time.Millisecond}
	// A dial that gets through all the same waits for the connect
	// timeout, so keep it short.
	o.ConnectTimeout = 2 * time.Second
	p := startPool(t, []config.Server{srv, remote}, o)
	for _, name := range []string{srv.Name, remote.Name} {
		var st Status
		if !testenv.Poll(testenv.Timeout, func() bool {
			st = statusOf(t, p, name)
			return st.Restarts >= 1 && st.State != StateUp && strings.Contains(st.LastErr, "open-files limit")
		}) {
			t.Fatalf("%s: no failed start naming the open-files limit within %s; last: state %s, %d restarts, error %q", name, testenv.Timeout, st.State, st.Restarts, st.LastErr)
		}
		if st := statusOf(t, p, name); name == srv.Name && strings.Contains(st.LastErr, "check url") {
			t.Errorf("%s out of descriptors: last error %q; want no url for a stdio server", name, st.LastErr)
		}
	}
	release()
	for _, name := range []string{srv.Name, remote.Name} {
		testenv.Eventually(t, name+" up once descriptors are free", func() bool {
			return statusOf(t, p, name).State == StateUp
		})
	}
}

// TestServerOutOfResourcesAtStart: a server that starts, then dies during
// start-up because it ran out of file descriptors or threads (it inherits
// toolgate's limits; Node's module loader needs more than 128 descriptors)
// is not told to check its command, args and env: its error names the
// limit to raise and the line that said so, even when a crash dump pushed
// that line out of the last stderr lines. (It is restarted after
// restart.delays, as any crash at start is.) A crash that names no resource
// keeps the old hint, and its stderr lines end the message.
func TestServerOutOfResourcesAtStart(t *testing.T) {
	dump := `i=0; while [ $i -lt 40 ]; do echo "r$i    0x6645" >&2; i=$((i+1)); done`
	cases := []struct {
		name, script, want string
		limit              bool // names a limit, not the config
	}{
		// Real EMFILEs: the shell's own limit leaves it no descriptor, or
		// the dynamic loader none for cat's libc.
		{"files", `ulimit -n 3; exec 3</dev/null`, "open-files limit", true},
		{"loader", `ulimit -n 3; cat /dev/null`, "open-files limit", true},
		{"threads", `echo "runtime/cgo: pthread_create failed: Resource temporarily unavailable" >&2; echo "SIGABRT: abort" >&2; ` + dump + `; exit 2`, "ulimit -u", true},
		{"config", `echo "Error: Cannot find module '/srv/index.js'" >&2; exit 1`, "check command, args and env", false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			o := testOptions(nil)
			o.RestartDelays = []time.Duration{time.Hour}
			srv := config.Server{Name: tc.name, Type: config.TypeStdio, Command: "sh", Args: []string{"-c", tc.script}}
			p := startPool(t, []config.Server{srv}, o)
			testenv.Eventually(t, "the start failed", func() bool {
				return statusOf(t, p, tc.name).LastErr != ""
			})
			st := statusOf(t, p, tc.name)
			if !strings.Contains(st.LastErr, tc.want) || strings.Contains(st.LastErr, "check command") == tc.limit {
				t.Errorf("last error %q; want it to name %q", st.LastErr, tc.want)
			}
			// What go-sdk says of the closed pipe is not said: the exit and
			// the stderr say it all, and the stderr comes last.
			if strings.Contains(st.LastErr, "client is closing") {
				t.Errorf("last error %q says go-sdk's words for the closed pipe", st.LastErr)
			}
			if want := "backend \"config\": sh exited with exit status 1 during start-up: check command, args and env; last stderr lines:\n  Error: Cannot find module '/srv/index.js'"; tc.name == "config" && st.LastErr != want {
				t.Errorf("last error:\n%s\nwant:\n%s", st.LastErr, want)
			}
		})
	}
}

// TestShortageOutlastsRestartDelays: a server that cannot start for want
// of descriptors for longer than restart.delays allow is tried again at the
// last delay, and comes up once descriptors are free; past the delays it
// is said once, and each failure is logged at debug level. It used to stay
// down once the delays were spent, until the config changed (seen under a
// pids limit raised after 25 s: every server stayed down).
func TestShortageOutlastsRestartDelays(t *testing.T) {
	srv := backendtest.Command(t, "normal")
	release := testenv.FillDescriptors(t)
	var logs testenv.LogBuffer
	o := testOptions(&logs)
	o.RestartDelays = []time.Duration{10 * time.Millisecond, 10 * time.Millisecond}
	p := startPool(t, []config.Server{srv}, o)
	testenv.Eventually(t, "more starts than restart.delays", func() bool {
		return statusOf(t, p, srv.Name).Restarts > len(o.RestartDelays)+3
	})
	release()
	testenv.Eventually(t, "up once descriptors are free", func() bool {
		return statusOf(t, p, srv.Name).State == StateUp
	})
	// The first failures are warnings; those past the delays are not.
	got := logs.String()
	if n := strings.Count(got, `level=WARN msg="backend down"`); n > len(o.RestartDelays)+1 || strings.Count(got, "still cannot start for want of a resource") != 1 {
		t.Errorf("%d warnings of the server down, want at most %d, then one saying it is tried again:\n%s", n, len(o.RestartDelays)+1, got)
	}
}
