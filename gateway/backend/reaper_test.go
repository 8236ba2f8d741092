//go:build linux

package backend

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
	"unsafe"

	"github.com/toolgate/toolgate/gateway/backend/backendtest"
	"github.com/toolgate/toolgate/gateway/config"
	"github.com/toolgate/toolgate/internal/testenv"
)

// envReaperGateway makes the test binary act as a gateway whose pool runs
// its backend (spawn-grandchild) under a reaper, or not ("0"). It prints
// the pid of the process it started and waits to be killed.
const envReaperGateway = "TOOLGATE_TEST_REAPER_GATEWAY"

func init() {
	mode := os.Getenv(envReaperGateway)
	if mode == "" || IsReaper() || backendtest.IsChild() {
		return
	}
	exe, _ := os.Executable()
	srv := config.Server{Name: "fake", Type: config.TypeStdio, Command: exe, Env: map[string]string{
		backendtest.EnvMode:    "spawn-grandchild",
		backendtest.EnvPIDFile: os.Getenv(backendtest.EnvPIDFile),
		"GORACE":               "atexit_sleep_ms=0",
	}}
	p := New([]config.Server{srv}, &Options{Reaper: mode == "1"})
	p.Start(context.Background())
	st := p.Status()[0]
	fmt.Printf("%d %s\n", st.PID, st.State)
	time.Sleep(time.Hour)
	os.Exit(0)
}

// startReaperGateway runs the test binary as a gateway (see init) and
// returns it, the pid of the process its pool started, and the pid of the
// backend's grandchild, which ignores stdin EOF.
func startReaperGateway(t *testing.T, reaper bool) (gw *exec.Cmd, pid, grandchild int) {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	pidFile := filepath.Join(t.TempDir(), "grandchild.pid")
	mode := "0"
	if reaper {
		mode = "1"
	}
	gw = exec.Command(exe)
	gw.Env = append(os.Environ(), envReaperGateway+"="+mode, backendtest.EnvPIDFile+"="+pidFile)
	out, err := gw.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := gw.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { gw.Process.Kill(); gw.Wait() }) //nolint:errcheck
	line, err := bufio.NewReader(out).ReadString('\n')
	var state string
	if _, err2 := fmt.Sscan(line, &pid, &state); err != nil || err2 != nil || state != "up" || pid == 0 {
		t.Fatalf("gateway child said %q (%v)", line, err)
	}
	b, err := os.ReadFile(pidFile)
	if err != nil {
		t.Fatalf("grandchild pid file: %v", err)
	}
	grandchild, err = strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		t.Fatal(err)
	}
	return gw, pid, grandchild
}

// After the gateway is SIGKILLed, no backend process survives: not the
// process it started, not the backend, not a grandchild that ignores stdin
// EOF.
func TestReaperKillsTreeWhenGatewayKilled(t *testing.T) {
	gw, pid, grandchild := startReaperGateway(t, true)
	tree := descendants(pid)
	if len(tree) < 2 {
		t.Fatalf("reaper %d has descendants %v, want the backend and its grandchild", pid, tree)
	}
	t.Logf("gateway %d → reaper %d → %v (grandchild %d)", gw.Process.Pid, pid, tree, grandchild)
	if err := gw.Process.Kill(); err != nil { // SIGKILL: no chance to clean up
		t.Fatal(err)
	}
	testenv.Eventually(t, "every backend process dies with the gateway", func() bool {
		if procAlive(pid) {
			return false
		}
		for _, p := range tree {
			if procAlive(p.pid) {
				return false
			}
		}
		return true
	})
}

// The lifeline is the reaper's alone: the backend's tree does not inherit
// its read end (it used to, as fd 3 of every backend process).
func TestLifelineNotInherited(t *testing.T) {
	_, pid, _ := startReaperGateway(t, true)
	lifeline, err := os.Readlink(fmt.Sprintf("/proc/%d/fd/3", pid))
	if err != nil || !strings.HasPrefix(lifeline, "pipe:") {
		t.Fatalf("the reaper's fd 3: %q, %v; want the lifeline pipe", lifeline, err)
	}
	tree := descendants(pid)
	if len(tree) == 0 {
		t.Fatal("the reaper has no descendants")
	}
	for _, p := range tree {
		fds, _ := os.ReadDir(fmt.Sprintf("/proc/%d/fd", p.pid))
		for _, fd := range fds {
			if l, _ := os.Readlink(fmt.Sprintf("/proc/%d/fd/%s", p.pid, fd.Name())); l == lifeline {
				t.Errorf("backend process %d holds the lifeline (%s) as fd %s", p.pid, lifeline, fd.Name())
			}
		}
	}
}

// Without a reaper, the grandchild outlives a SIGKILLed gateway (the
// parent-death signal reaches only the direct child): the reason reapers
// exist. The test cleans the orphan up.
func TestWithoutReaperGrandchildSurvives(t *testing.T) {
	gw, pid, grandchild := startReaperGateway(t, false)
	t.Cleanup(func() { syscall.Kill(grandchild, syscall.SIGKILL) }) //nolint:errcheck
	if err := gw.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, "the direct child dies (parent-death signal)", func() bool { return !procAlive(pid) })
	// Once the grandchild is re-parented, the backend that started it is
	// gone for good: nothing is left that could stop it.
	testenv.Eventually(t, "the grandchild re-parented", func() bool { return ppidOf(grandchild) != pid })
	if !procAlive(grandchild) {
		t.Fatalf("grandchild %d died with its gateway although no reaper ran", grandchild)
	}
}

// ppidOf is pid's parent, from /proc/<pid>/stat (0 when pid is gone).
func ppidOf(pid int) int {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	// "pid (comm) state ppid ..."; comm may contain spaces and parens.
	f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+1:]))
	if len(f) < 2 {
		return 0
	}
	ppid, _ := strconv.Atoi(f[1])
	return ppid
}

// envReaperUnsettled makes a test binary started as a reaper try to move
// its main goroutine off the main thread before ReaperMain (unsettle).
const envReaperUnsettled = "TOOLGATE_TEST_REAPER_UNSETTLED"

// unsettle tries to move the main goroutine to another thread, as a busy
// machine may: blocking system calls while every P is busy hand the P
// away, and the goroutine resumes on whichever thread takes it. It stops
// once it has moved, or after 200 tries (it cannot move while locked).
func unsettle() {
	var stop atomic.Bool // spinning goroutines keep every P busy
	defer stop.Store(true)
	for range runtime.GOMAXPROCS(0) {
		go func() {
			for !stop.Load() {
			}
		}()
	}
	ts := syscall.Timespec{Nsec: int64(2 * time.Millisecond)}
	for range 200 {
		_, _, _ = syscall.Syscall(syscall.SYS_NANOSLEEP, uintptr(unsafe.Pointer(&ts)), 0, 0)
		if syscall.Gettid() != os.Getpid() {
			return
		}
	}
}

// TestReaperServerPIDOffMainThread: the status names the server's own
// process even when the reaper's main goroutine was moved off the main
// thread before it started the backend (unsettle). It said ServerPID 0:
// the backend was forked by another thread, not listed among the main
// thread's children.
func TestReaperServerPIDOffMainThread(t *testing.T) {
	srv := named(backendtest.Command(t, "normal", envReaperUnsettled+"=1"), "plain")
	p := startPool(t, []config.Server{srv}, reaperOptions())
	st := statusOf(t, p, "plain")
	tree := descendants(st.PID)
	if len(tree) != 1 {
		t.Fatalf("reaper %d has descendants %v, want one backend", st.PID, tree)
	}
	if st.ServerPID != tree[0].pid {
		t.Errorf("ServerPID = %d, want the backend's %d (reaper %d)", st.ServerPID, tree[0].pid, st.PID)
	}
}

func reaperOptions() *Options {
	o := testOptions(nil)
	o.Reaper = true
	o.RestartDelays = []time.Duration{50 * time.Millisecond}
	return o
}

// Under a reaper a backend behaves as before: calls, exit statuses in
// errors, restart after SIGKILL of the backend itself, and Close leaves no
// process behind.
func TestReaperTransparent(t *testing.T) {
	waitExits(t) // the exit statuses said come after the reaper's look for leftovers
	pidFile := filepath.Join(t.TempDir(), "grandchild.pid")
	p := startPool(t, []config.Server{
		named(backendtest.Command(t, "spawn-grandchild,crash-mid-call", backendtest.EnvPIDFile+"="+pidFile), "tree"),
		named(backendtest.Command(t, "normal"), "plain"),
	}, reaperOptions())
	if res, err := p.CallTool(context.Background(), "plain", "echo", map[string]any{"text": "hi"}); err != nil || textOf(t, res) != "hi" {
		t.Fatalf("echo = %v, %v", res, err)
	}

	// Killing the backend (the reaper's child) mid-call: the error says so,
	// and it comes back.
	reaperPID := statusOf(t, p, "plain").PID
	tree := descendants(reaperPID)
	if len(tree) != 1 {
		t.Fatalf("reaper %d has descendants %v, want one backend", reaperPID, tree)
	}
	// The status names the server's own process beside the reaper's: an
	// operator who stopped the PID shown stopped the reaper.
	if got := statusOf(t, p, "plain").ServerPID; got != tree[0].pid {
		t.Errorf("ServerPID = %d, want the backend's %d (reaper %d)", got, tree[0].pid, reaperPID)
	}
	killMidCall(t, p, "plain", tree[0].pid)
	testenv.Eventually(t, "plain restarted", func() bool {
		st := statusOf(t, p, "plain")
		return st.State == StateUp && st.PID != reaperPID
	})

	// A crash reports the backend's own exit status.
	_, err := p.CallTool(context.Background(), "tree", "crash", nil)
	if err == nil || !strings.Contains(err.Error(), "exit status 2") {
		t.Fatalf("crash err = %v, want the backend's exit status 2", err)
	}
	b, err := os.ReadFile(pidFile)
	if err != nil {
		t.Fatal(err)
	}
	grandchild, _ := strconv.Atoi(strings.TrimSpace(string(b)))
	testenv.Eventually(t, "the crashed backend's grandchild is stopped by its reaper", func() bool { return !procAlive(grandchild) })

	var all []int
	for _, st := range p.Status() {
		if st.PID != 0 {
			all = append(all, st.PID)
			for _, d := range descendants(st.PID) {
				all = append(all, d.pid)
			}
		}
	}
	p.Close()
	for _, pid := range all {
		if procAlive(pid) {
			t.Errorf("process %d alive after Close", pid)
		}
	}
	if kids := childrenOf(os.Getpid()); len(kids) > 0 {
		t.Errorf("children left after Close: %v", kids)
	}
}

// 100 start/stop cycles of a backend with a grandchild under a reaper leave
// no process and no zombie behind: the pool reaps the reaper, the reaper
// reaps the backend and whatever it left.
func TestReaperNoZombiesAfterCycles(t *testing.T) {
	cycles := 100
	if testing.Short() {
		cycles = 10
	}
	o := reaperOptions()
	var grandchildren []int
	for i := range cycles {
		pidFile := filepath.Join(t.TempDir(), "grandchild.pid")
		p := New([]config.Server{backendtest.Command(t, "spawn-grandchild", backendtest.EnvPIDFile+"="+pidFile)}, o)
		p.Start(context.Background())
		if st := statusOf(t, p, "fake"); st.State != StateUp {
			p.Close()
			t.Fatalf("cycle %d: state %s: %s", i, st.State, st.Err)
		}
		p.Close()
		if b, err := os.ReadFile(pidFile); err == nil {
			if pid, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil {
				grandchildren = append(grandchildren, pid)
			}
		}
	}
	if z := childrenOf(os.Getpid()); len(z) > 0 {
		t.Errorf("children left after %d start/stop cycles: %v", cycles, z)
	}
	for _, pid := range grandchildren {
		if procAlive(pid) {
			t.Errorf("grandchild %d alive after its pool closed", pid)
		}
	}
	if len(grandchildren) != cycles {
		t.Errorf("%d grandchild pids recorded, want %d", len(grandchildren), cycles)
	}
}

// A SIGTERM, SIGINT or SIGHUP sent to the reaper alone (the PID a status
// shows) reaches the server and what it started, and the reaper exits once
// they are gone, as when its gateway goes away. It forwarded only to
// processes outside its own process group, which the server is in: reaper
// and server both ran on.
func TestReaperForwardsSignalToServer(t *testing.T) {
	for _, sig := range []syscall.Signal{syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP} {
		t.Run(sig.String(), func(t *testing.T) {
			pidFile := filepath.Join(t.TempDir(), "grandchild.pid")
			p := startPool(t, []config.Server{named(backendtest.Command(t, "spawn-grandchild", backendtest.EnvPIDFile+"="+pidFile), "tree")}, reaperOptions())
			st := statusOf(t, p, "tree")
			tree := descendants(st.PID)
			if len(tree) < 2 || st.ServerPID == 0 {
				t.Fatalf("reaper %d has descendants %v (server %d), want the server and its grandchild", st.PID, tree, st.ServerPID)
			}
			if err := syscall.Kill(st.PID, sig); err != nil {
				t.Fatal(err)
			}
			testenv.Eventually(t, "the reaper, its server and the grandchild exit", func() bool {
				if procAlive(st.PID) {
					return false
				}
				for _, d := range tree {
					if procAlive(d.pid) {
						return false
					}
				}
				return true
			})
		})
	}
}
