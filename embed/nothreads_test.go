package embed

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/toolgate/toolgate/internal/cgroupmem"
	"github.com/toolgate/toolgate/internal/storage"
	"github.com/toolgate/toolgate/internal/testenv"
)

// threadsChild is set in the environment of the process
// TestTokenizerWithoutThreads starts: TestMain then encodes texts with the
// tokenizer file it names, in a process that may not create a thread.
const threadsChild = "TOOLGATE_TEST_NO_THREADS_CHILD"

// runThreadsChild makes sure the Go runtime has spare threads, forbids new
// ones (RLIMIT_NPROC, which a process run as root ignores: the parent runs
// this one as nobody), checks that a fork is refused, then loads the
// tokenizer and encodes, as the gateway's first search does.
func runThreadsChild() int {
	// Threads the runtime keeps and reuses: each goroutine holds its own
	// thread while it sleeps in a system call.
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			runtime.LockOSThread()
			defer runtime.UnlockOSThread()
			ts := unix.NsecToTimespec(20e6)
			_ = unix.Nanosleep(&ts, nil)
		})
	}
	wg.Wait()
	if err := unix.Setrlimit(unix.RLIMIT_NPROC, &unix.Rlimit{Cur: 1, Max: 1}); err != nil {
		fmt.Fprintln(os.Stderr, "setrlimit:", err)
		return 1
	}
	if err := exec.Command("/bin/true").Run(); err == nil {
		fmt.Fprintln(os.Stderr, "a new process could still start: the limit does not hold, the test proves nothing")
		return 3
	}
	tk, err := newTokenizer(os.Getenv(threadsChild), 256, "toolgate models fetch")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer tk.close()
	for _, text := range []string{"list the files in a directory", "send a message to a channel", ""} {
		if len(tk.encode(text)) < 2 {
			fmt.Fprintf(os.Stderr, "encode %q: no ids\n", text)
			return 1
		}
	}
	return 0
}

// TestTokenizerWithoutThreads: encoding works in a process that may create
// no more threads (ulimit -u, TasksMax=, a container's pids limit reached).
// The tokenizers library used to pad each encoding on Rayon's thread pool,
// started at the first encoding; when it could not start a thread it
// aborted the process ("The global thread pool has not been initialized"),
// so a gateway under a process limit died at its first search
// (tokenizersParallelism, set before main).
func TestTokenizerWithoutThreads(t *testing.T) {
	src := filepath.Join(installed(Options{}).ModelDir, TokenizerFile)
	if _, err := os.Stat(src); err != nil {
		testenv.Missing(t, "tokenizer file %s: %v (install it with make deps)", src, err)
	}
	// A folder the child can read as nobody: the test binary and the
	// tokenizer file (the model folder may be in root's home).
	dir, err := os.MkdirTemp("", "toolgate-nothreads-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, "embed.test")
	tok := filepath.Join(dir, TokenizerFile)
	testenv.CopyFile(t, os.Args[0], bin, 0o755)
	testenv.CopyFile(t, src, tok, 0o644)

	cmd := exec.Command(bin, "-test.run=^$")
	cmd.Dir = dir
	cmd.Env = []string{threadsChild + "=" + tok, "PATH=/usr/bin:/bin"}
	if os.Geteuid() == 0 {
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
	}
	out, err := cmd.CombinedOutput()
	if err != nil {
		if ee, ok := err.(*exec.ExitError); ok && ee.ExitCode() == 3 {
			t.Skipf("the process limit does not hold here: %s", out)
		}
		t.Fatalf("a process that may not create threads could not encode: %v\n%s", err, head(string(out), 1500))
	}
}

func head(s string, n int) string {
	if len(s) > n {
		return s[:n] + "…"
	}
	return s
}

// TestLoadOutOfLimitsNamesTheLimit: a model or tokenizer that cannot be
// loaded because the process was refused descriptors or memory says which
// limit to raise, not to re-fetch the files (which are fine). The tokenizer
// is read with no descriptor left; ONNX Runtime's and the loader's
// messages for memory are as seen under ulimit -v.
func TestLoadOutOfLimitsNamesTheLimit(t *testing.T) {
	src := filepath.Join(installed(Options{}).ModelDir, TokenizerFile)
	if _, err := os.Stat(src); err != nil {
		testenv.Missing(t, "tokenizer file %s: %v (install it with make deps)", src, err)
	}
	release := testenv.FillDescriptors(t)
	tk, err := newTokenizer(src, 256, "toolgate models fetch")
	release()
	if err == nil {
		tk.close()
		t.Fatal("the tokenizer loaded with no descriptor left")
	}
	if !strings.Contains(err.Error(), "open-files limit") || strings.Contains(err.Error(), "re-fetch") {
		t.Errorf("tokenizer out of descriptors: %v; want the open-files limit, not a re-fetch", err)
	}
	for _, msg := range []string{
		"Error creating C session from file: Exception during initialization: std::bad_alloc",
		`Error loading ONNX shared library "libonnxruntime.so.1": libonnxruntime.so.1: failed to map segment from shared object`,
	} {
		if got := limitFix(errors.New(msg), "re-fetch"); !strings.Contains(got, "ulimit -v") {
			t.Errorf("limitFix(%q) = %q, want the memory limit", msg, got)
		}
	}
	if got := limitFix(errors.New("protobuf parsing failed"), "re-fetch"); got != "re-fetch" {
		t.Errorf("a damaged model: %q, want the re-fetch", got)
	}
}

// TestBackgroundLoadRetriedAfterShortage: a model that fails to load in
// the background because the process had no descriptor left says so, and
// loads by itself once descriptors are free (the gateway then re-indexes
// with its vectors); it used to stay unloaded, BM25-only, until a restart.
func TestBackgroundLoadRetriedAfterShortage(t *testing.T) {
	o := installed(Options{Sessions: 1, Background: true})
	if _, err := Locate(o); err != nil {
		testenv.Require(t, err)
	}
	defer func(d time.Duration) { loadRetry, loadHook = d, nil }(loadRetry)
	loadRetry = 20 * time.Millisecond
	first, filled := make(chan struct{}), make(chan struct{})
	var calls atomic.Int32
	loadHook = func() {
		if calls.Add(1) == 1 {
			first <- struct{}{}
			<-filled
		}
	}
	e, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	<-first
	release := testenv.FillDescriptors(t)
	filled <- struct{}{}
	err = e.Ready(context.Background())
	release()
	if err == nil || !strings.Contains(err.Error(), "open-files limit") {
		t.Fatalf("the load with no descriptor left: %v, want it to name the open-files limit", err)
	}
	testenv.Eventually(t, "the model loaded by a retry", func() bool { return e.Ready(context.Background()) == nil })
	if v, err := e.Embed(context.Background(), []string{"list the files in a directory"}); err != nil || len(v) != 1 {
		t.Fatalf("Embed after the retry: %v, %v", len(v), err)
	}
}

// TestLoadRefusedUnderMemoryLimit: a memory cgroup's limit (MemoryMax=, a
// container's) that leaves less than the model takes refuses the load
// before ONNX Runtime allocates (past the limit the kernel kills the
// process rather than refuse it: a gateway limited to 180 MiB was killed
// at every start, exit status 137): the error names the limit, the group
// and the fix, counts as a shortage of memory (searches BM25-only, the
// load tried again), and the model loads once the limit is raised.
func TestLoadRefusedUnderMemoryLimit(t *testing.T) {
	o := installed(Options{Sessions: 1, Background: true})
	if _, err := Locate(o); err != nil {
		testenv.Require(t, err)
	}
	defer func(d time.Duration, f func() (cgroupmem.Room, bool)) { loadRetry, memRoom = d, f }(loadRetry, memRoom)
	loadRetry = 20 * time.Millisecond
	var limit atomic.Uint64
	limit.Store(150 << 20)
	memRoom = func() (cgroupmem.Room, bool) {
		return cgroupmem.Room{Group: "/sys/fs/cgroup/system.slice/toolgate.service", Limit: limit.Load(), Used: 40 << 20}, true
	}
	e, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	err = e.Ready(context.Background())
	if err == nil {
		t.Fatal("the model loaded under a limit that leaves 110 MiB")
	}
	for _, want := range []string{"memory limit", "leaves 110.0 MiB", "/sys/fs/cgroup/system.slice/toolgate.service", "MemoryMax="} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("the refusal %q does not say %q", err, want)
		}
	}
	if storage.Shortage(err) != syscall.ENOMEM {
		t.Errorf("the refusal %q is not a shortage of memory (no retry)", err)
	}
	limit.Store(1 << 30)
	testenv.Eventually(t, "the model loaded once the limit was raised", func() bool { return e.Ready(context.Background()) == nil })
}

// TestFilesComeUnderMemoryLimit: model files fetched while the gateway
// runs (it started before `toolgate models fetch`) under a memory limit
// that cannot take the model are tried again every loadRetry, as a load
// at start refused memory is, not only once the files change: the model
// loads once the limit is raised.
func TestFilesComeUnderMemoryLimit(t *testing.T) {
	real := installed(Options{Sessions: 1})
	if _, err := Locate(real); err != nil {
		testenv.Require(t, err)
	}
	defer func(r, p time.Duration, f func() (cgroupmem.Room, bool)) { loadRetry, filesPoll, memRoom = r, p, f }(loadRetry, filesPoll, memRoom)
	loadRetry, filesPoll = 20*time.Millisecond, 20*time.Millisecond
	var limit atomic.Uint64
	limit.Store(100 << 20)
	memRoom = func() (cgroupmem.Room, bool) {
		return cgroupmem.Room{Group: "/sys/fs/cgroup/toolgate", Limit: limit.Load(), Used: 40 << 20}, true
	}
	dir := t.TempDir()
	e, err := New(&Options{ORTLib: real.ORTLib, ModelDir: dir, Sessions: 1, Background: true})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	for _, f := range []string{FP32.ModelFile(), TokenizerFile} {
		if err := os.Symlink(filepath.Join(real.ModelDir, f), filepath.Join(dir, f)); err != nil {
			t.Fatal(err)
		}
	}
	testenv.Eventually(t, "the load of the files that came refused for the memory limit", func() bool {
		err := e.LoadError()
		return err != nil && strings.Contains(err.Error(), "memory limit")
	})
	limit.Store(1 << 30)
	testenv.Eventually(t, "the model loaded once the limit was raised", func() bool { return e.Ready(context.Background()) == nil })
	if e.ModelID() == "" {
		t.Error("the model loaded without its ID")
	}
}
