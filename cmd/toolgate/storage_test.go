package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolgate/toolgate/gateway"
	"github.com/toolgate/toolgate/gateway/backend/backendtest"
	"github.com/toolgate/toolgate/gateway/mgmt"
	"github.com/toolgate/toolgate/internal/shutdown"
	"github.com/toolgate/toolgate/internal/storage"
	"github.com/toolgate/toolgate/internal/testenv"
)

// The tests of this file break the data folder under a running gateway
// (real toolgate process, bundled npm servers, streamable HTTP) the ways an
// operator's machine does — removed, read-only, full — and check that
// search_tools still answers, GET /status says what is wrong, and the
// process stops within the stop budget when told to.

// gatewayProc is a `toolgate serve --http` under test whose exit the test
// owns.
type gatewayProc struct {
	cmd    *exec.Cmd
	pid    int // the gateway's pid (not the wrapper's, when there is one)
	addr   string
	logs   *testenv.LogBuffer
	exited chan struct{}
	err    error // cmd.Wait's, once exited is closed
	// status is the gateway's exit status; a wrapper (unshare) reports it
	// on its stdout, else cmd.Wait's.
	status func() int
}

// startServe starts cmd, a `serve --http addr`, whose gateway process is
// pid (0: cmd itself), and waits until it answers /healthz. The process is
// killed if the test ends while it runs.
func startServe(t *testing.T, cmd *exec.Cmd, addr string) *gatewayProc {
	t.Helper()
	g := &gatewayProc{cmd: cmd, addr: addr, logs: &testenv.LogBuffer{}, exited: make(chan struct{})}
	cmd.Stderr = io.MultiWriter(g.logs, testLog(t, "toolgate: "))
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	g.pid = cmd.Process.Pid
	g.status = func() int { return cmd.ProcessState.ExitCode() }
	go func() { g.err = cmd.Wait(); close(g.exited) }()
	t.Cleanup(func() {
		select {
		case <-g.exited:
		default:
			_ = syscall.Kill(g.pid, syscall.SIGKILL)
			_ = cmd.Process.Kill()
			<-g.exited
		}
	})
	waitHealthy(t, "http://"+addr+"/healthz", 3*time.Minute)
	return g
}

// connect opens a go-sdk client session over streamable HTTP.
func (g *gatewayProc) connect(t *testing.T) (context.Context, *mcp.ClientSession) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	t.Cleanup(cancel)
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "storage-e2e"}, nil).Connect(ctx, &mcp.StreamableClientTransport{Endpoint: "http://" + g.addr + "/mcp"}, nil)
	if err != nil {
		t.Fatalf("connect over HTTP: %v", err)
	}
	t.Cleanup(func() { cs.Close() })
	return ctx, cs
}

// signal sends sig to the gateway.
func (g *gatewayProc) signal(t *testing.T, sig syscall.Signal) {
	t.Helper()
	if err := syscall.Kill(g.pid, sig); err != nil {
		t.Fatalf("signal %v: %v", sig, err)
	}
}

// waitExit waits for the gateway to exit and returns its exit status and
// how long it took from since. The bound is generous: it catches a hang,
// it does not time the stop (the stop's budget is internal/shutdown's).
func (g *gatewayProc) waitExit(t *testing.T, since time.Time) (int, time.Duration) {
	t.Helper()
	select {
	case <-g.exited:
	case <-time.After(testenv.Timeout):
		t.Fatalf("the gateway did not exit %s after the signal (budget %s); log:\n%s", testenv.Timeout, shutdown.Budget, g.logs)
	}
	took := time.Since(since)
	t.Logf("the gateway exited %s after the signal", took.Round(time.Millisecond))
	return g.status(), took
}

// searchAnswers calls search_tools with queries never asked before (so
// each is embedded, and the cache would store it) and checks that each is
// answered with semantic ranking.
func searchAnswers(t *testing.T, ctx context.Context, cs *mcp.ClientSession, what string, n int) {
	t.Helper()
	for i := range n {
		q := fmt.Sprintf("%s: read the contents of a file, attempt %d", what, i)
		out, _ := searchTools(t, ctx, cs, q, 3)
		if out.Mode != "hybrid" || len(out.Tools) == 0 {
			t.Fatalf("search_tools(%q) = mode %q, %d tools; want a hybrid answer", q, out.Mode, len(out.Tools))
		}
	}
}

// storageReport reads the storage section of GET /status.
func storageReport(t *testing.T, addr string) storage.Report {
	t.Helper()
	rep := getStatus(t, addr)
	if rep.Storage == nil {
		t.Fatalf("GET /status has no storage section")
	}
	return *rep.Storage
}

// writer finds a writer in a storage report.
func writer(t *testing.T, r storage.Report, name string) storage.WriterReport {
	t.Helper()
	for _, w := range r.Writers {
		if w.Name == name {
			return w
		}
	}
	t.Fatalf("no writer %q in %+v", name, r)
	return storage.WriterReport{}
}

// TestDataFolderRemovedWhileServing is the case: with the bundled
// servers over streamable HTTP, `rm -rf` of the data folder; search_tools
// still answers, GET /status and `toolgate status` report the fault (once
// in the log, not once a second), and SIGTERM ends the process, with exit
// status 4 because the embedding cache could not be flushed.
func TestDataFolderRemovedWhileServing(t *testing.T) {
	cfg := bundledConfig(t, nil)
	data := filepath.Join(t.TempDir(), "data")
	addr := freeAddr(t)
	g := startServe(t, toolgateCmd(t, data, "serve", "--config", cfg, "--http", addr), addr)
	ctx, cs := g.connect(t)
	indexServedHTTP(t, addr) // a cold start past its wait answers "being built"
	searchAnswers(t, ctx, cs, "before", 2)
	if r := storageReport(t, addr); !r.Writable || r.Failing() || r.DataDir != data {
		t.Fatalf("storage before the fault: %+v", r)
	}

	// The gateway may be writing into the folder as it goes (a store's
	// new file, the index's background copy): like an operator, remove
	// again what appeared meanwhile ("directory not empty").
	var err error
	for range 100 {
		if err = os.RemoveAll(data); err == nil {
			break
		}
	}
	if err != nil {
		t.Fatal(err)
	}
	searchAnswers(t, ctx, cs, "after rm -rf", 5)
	r := storageReport(t, addr)
	if r.Writable || !strings.Contains(r.Error, "does not exist") || !strings.Contains(r.Fix, "mkdir -p "+data) || r.Since.IsZero() {
		t.Errorf("storage after rm -rf: %+v, want not writable, the error, the fix and since", r)
	}
	if w := writer(t, r, "embedding cache"); w.OK || w.Failures < 5 || w.Since.IsZero() {
		t.Errorf("embedding cache writer: %+v, want failing since the first search", w)
	}
	var out bytes.Buffer
	err = runStatus(context.Background(), &out, statusFlags{addr: addr})
	var ee exitError
	if !errors.As(err, &ee) || ee.code != degradedExit || !strings.Contains(out.String(), "NOT WRITABLE") || !strings.Contains(out.String(), "fix: create the folder again") {
		t.Errorf("toolgate status = %v:\n%s\nwant exit 3 and the storage fault", err, out.String())
	}
	if _, err := os.Stat(data); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the gateway created the removed data folder again (%v)", err)
	}

	start := time.Now()
	g.signal(t, syscall.SIGTERM)
	code, _ := g.waitExit(t, start)
	if code != shutdown.ExitUnclean {
		t.Errorf("exit status %d, want %d (the embedding cache could not be flushed)", code, shutdown.ExitUnclean)
	}
	log := g.logs.String()
	if n := strings.Count(log, "storage fault: embedding cache"); n != 1 {
		t.Errorf("the cache's fault was logged %d times, want once", n)
	}
	for _, bad := range []string{"error flushing memtable", "exiting now"} {
		if strings.Contains(log, bad) {
			t.Errorf("the log has %q", bad)
		}
	}
	// The learned pairs live in the same folder: they cannot be flushed
	// either.
	if !strings.Contains(log, "stop: embedding cache not stopped cleanly") || !strings.Contains(log, "stop: learned pairs not stopped cleanly") ||
		!strings.Contains(log, "stopped, not cleanly: learned pairs, embedding cache") {
		t.Errorf("the log does not say what could not be flushed:\n%s", log)
	}
}

// TestStopExitStatus: a stop of a healthy gateway is clean (exit 0); in a
// second run, two SIGINTs end it at once (exit 130) while a backend that
// ignores SIGTERM holds the first stop up.
func TestStopExitStatus(t *testing.T) {
	t.Run("clean", func(t *testing.T) {
		addr := freeAddr(t)
		g := startServe(t, toolgateCmd(t, t.TempDir(), "serve", "--config", bundledConfig(t, nil), "--http", addr), addr)
		ctx, cs := g.connect(t)
		indexServedHTTP(t, addr) // a cold start past its wait answers "being built"
		searchAnswers(t, ctx, cs, "clean stop", 2)
		start := time.Now()
		g.signal(t, syscall.SIGTERM)
		if code, _ := g.waitExit(t, start); code != 0 {
			t.Errorf("exit status %d after a clean stop, want 0", code)
		}
	})
	t.Run("stdio", func(t *testing.T) {
		// A stop is not an error: no ERROR line (the MCP SDK's Run logged
		// one for its cancelled context).
		cmd := toolgateCmd(t, t.TempDir(), "serve", "--config", bundledConfig(t, nil))
		var logs testenv.LogBuffer
		cmd.Stderr = &logs
		ctx, cs := connectStdio(t, cmd, 3*time.Minute)
		indexServed(t, ctx, cs) // a cold start past its wait answers "being built"
		searchAnswers(t, ctx, cs, "stdio stop", 1)
		if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
			t.Fatal(err)
		}
		_ = cs.Wait()
		cs.Close() // waits for the process
		if cmd.ProcessState == nil {
			t.Fatalf("the stdio gateway was not waited for:\n%s", logs.String())
		}
		if code := cmd.ProcessState.ExitCode(); code != 0 || strings.Contains(logs.String(), "level=ERROR") {
			t.Errorf("exit status %d after SIGTERM on stdio, want 0 without an ERROR line:\n%s", code, logs.String())
		}
	})
	// A call in flight when the stop comes is cancelled on its backend: the
	// stop waited for it to end by itself, the whole budget (exit status 4)
	// on stdio, where a client quits with SIGTERM. Over HTTP the caller
	// gets an answer that says why.
	t.Run("call in flight", func(t *testing.T) {
		// longCall starts the long operation once the index is served
		// (indexServed). A call that ends before its first progress fails
		// the test; the wait for that progress hung until the test
		// binary's timeout.
		longCall := func(ctx context.Context, cs *mcp.ClientSession, progressed chan struct{}) <-chan *mcp.CallToolResult {
			t.Helper()
			indexServed(t, ctx, cs)
			out := make(chan *mcp.CallToolResult, 1)
			go func() {
				res, err := cs.CallTool(ctx, &mcp.CallToolParams{Meta: mcp.Meta{"progressToken": "stop"}, Name: "execute_tool",
					Arguments: map[string]any{"name": "everything__trigger-long-running-operation", "arguments": map[string]any{"duration": 600, "steps": 600}}})
				if err != nil {
					res = &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: err.Error()}}}
				}
				out <- res
			}()
			select {
			case <-progressed: // the backend runs it
			case res := <-out:
				t.Fatalf("the long call ended before its first progress: isError=%v %q", res.IsError, resultText(res))
			}
			return out
		}
		client := func(progressed chan struct{}) *mcp.Client {
			var once sync.Once
			return mcp.NewClient(&mcp.Implementation{Name: "stop-e2e"}, &mcp.ClientOptions{
				ProgressNotificationHandler: func(context.Context, *mcp.ProgressNotificationClientRequest) { once.Do(func() { close(progressed) }) },
			})
		}

		cmd := toolgateCmd(t, t.TempDir(), "serve", "--config", bundledConfig(t, nil))
		var logs testenv.LogBuffer
		cmd.Stderr = &logs
		progressed := make(chan struct{})
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
		defer cancel()
		cs, err := client(progressed).Connect(ctx, &mcp.CommandTransport{Command: cmd}, nil)
		if err != nil {
			t.Fatal(err)
		}
		longCall(ctx, cs, progressed)
		if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
			t.Fatal(err)
		}
		_ = cs.Wait()
		cs.Close()
		if code := cmd.ProcessState.ExitCode(); code != 0 {
			t.Errorf("stdio: exit status %d after SIGTERM with a call in flight, want 0:\n%s", code, logs.String())
		}

		addr := freeAddr(t)
		g := startServe(t, toolgateCmd(t, t.TempDir(), "serve", "--config", bundledConfig(t, nil), "--http", addr), addr)
		progressed = make(chan struct{})
		hs, err := client(progressed).Connect(ctx, &mcp.StreamableClientTransport{Endpoint: "http://" + addr + "/mcp"}, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer hs.Close()
		answer := longCall(ctx, hs, progressed)
		start := time.Now()
		g.signal(t, syscall.SIGTERM)
		if res := <-answer; !res.IsError || !strings.Contains(resultText(res), "the gateway is stopping, so the call was cancelled on the server") {
			t.Errorf("HTTP: the call in flight got isError=%v %q, want that the gateway is stopping", res.IsError, resultText(res))
		}
		if code, _ := g.waitExit(t, start); code != 0 {
			t.Errorf("HTTP: exit status %d after SIGTERM with a call in flight, want 0", code)
		}
	})
	t.Run("during start", func(t *testing.T) {
		// A backend that never speaks MCP holds a cold start up (for its
		// connect timeout); SIGTERM then is a stop, not a failure.
		mute := map[string]any{"command": "sleep", "args": []string{"3600"}}
		cmd := toolgateCmd(t, t.TempDir(), "serve", "--config", bundledConfig(t, map[string]any{"mute": mute}), "--http", freeAddr(t))
		var logs testenv.LogBuffer
		cmd.Stderr = io.MultiWriter(&logs, testLog(t, "toolgate: "))
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		exited := make(chan error, 1)
		go func() { exited <- cmd.Wait() }()
		t.Cleanup(func() { _ = cmd.Process.Kill() })
		testenv.Eventually(t, "the mute backend started", func() bool {
			for _, pid := range descendants(cmd.Process.Pid) {
				if c, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid)); strings.HasPrefix(string(c), "sleep\x003600") {
					return true
				}
			}
			return false
		})
		if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
			t.Fatal(err)
		}
		select {
		case <-exited:
		case <-time.After(testenv.Timeout):
			t.Fatalf("serve did not exit after SIGTERM during its start:\n%s", logs.String())
		}
		if code := cmd.ProcessState.ExitCode(); code != 0 || strings.Contains("\n"+logs.String(), "\ntoolgate: ") {
			t.Errorf("exit status %d after SIGTERM during start, want 0 without an error:\n%s", code, logs.String())
		}
	})
	t.Run("two SIGINTs", func(t *testing.T) {
		s := backendtest.Command(t, backendtest.ModeStubborn)
		stubborn := map[string]any{"command": s.Command, "env": s.Env}
		addr := freeAddr(t)
		g := startServe(t, toolgateCmd(t, t.TempDir(), "serve", "--config", bundledConfig(t, map[string]any{"stubborn": stubborn}), "--http", addr), addr)
		testenv.Eventually(t, "every backend up", func() bool { r := getStatus(t, addr); return r.Up == r.Total && r.Total == 4 })
		start := time.Now()
		g.signal(t, syscall.SIGINT)
		// The first stop has begun once the HTTP front is closed; the
		// stubborn backend then holds it up for seconds. A second signal
		// within shutdown.DefaultEcho of the first is the same stop sent
		// twice (timeout(1)), so this one comes after it, as a person's:
		// the window counted from the front's close, which comes after the
		// gateway took the first (counted from the test's send, a loaded
		// machine's late delivery put the second inside it).
		testenv.Eventually(t, "the HTTP front closed", func() bool {
			c, err := net.Dial("tcp", addr)
			if err == nil {
				c.Close()
			}
			return err != nil
		})
		closed := time.Now()
		testenv.Eventually(t, "past the echo window", func() bool { return time.Since(closed) > shutdown.DefaultEcho })
		g.signal(t, syscall.SIGINT)
		code, _ := g.waitExit(t, start)
		if code != shutdown.ExitSignal+int(syscall.SIGINT) {
			t.Errorf("exit status %d after two SIGINTs, want %d", code, shutdown.ExitSignal+int(syscall.SIGINT))
		}
		if !strings.Contains(g.logs.String(), "second SIGINT: exiting now") {
			t.Errorf("the log does not say why it exited:\n%s", g.logs)
		}
	})
}

// TestStdinClosedDuringColdStart: a stdio client that hangs up while a cold
// start waits for a backend (one that reads its stdin and never answers, as
// `python3` with no script does, with a 10 minute connect timeout) stops
// the gateway at once, as a signal during the start does: exit status 0,
// and the backend cancelled quietly (no "backend down … check command", no
// "restarting backend").
func TestStdinClosedDuringColdStart(t *testing.T) {
	for _, tc := range []struct{ name, input string }{
		{"nothing sent", ""},
		{"after initialize", `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"hangup","version":"1"}}}` + "\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := writeConfig(t, `{"mcpServers": {"silent": {"command": "sh", "args": ["-c", "cat >/dev/null"], "connectTimeout": "10m"}}}`)
			cmd := toolgateCmd(t, t.TempDir(), "serve", "--config", cfg)
			var logs testenv.LogBuffer
			cmd.Stderr = io.MultiWriter(&logs, testLog(t, "toolgate: "))
			stdin, err := cmd.StdinPipe()
			if err != nil {
				t.Fatal(err)
			}
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			exited := make(chan error, 1)
			go func() { exited <- cmd.Wait() }()
			t.Cleanup(func() { _ = cmd.Process.Kill() })
			if _, err := io.WriteString(stdin, tc.input); err != nil {
				t.Fatal(err)
			}
			testenv.Eventually(t, "the silent backend started", func() bool {
				for _, pid := range descendants(cmd.Process.Pid) {
					if c, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid)); string(c) == "sh\x00-c\x00cat >/dev/null\x00" {
						return true
					}
				}
				return false
			})
			stdin.Close()
			select {
			case <-exited:
			case <-time.After(testenv.Timeout):
				t.Fatalf("serve did not exit after its stdio client closed stdin during a cold start:\n%s", logs.String())
			}
			log := logs.String()
			if code := cmd.ProcessState.ExitCode(); code != 0 || strings.Contains("\n"+log, "\ntoolgate: ") {
				t.Errorf("exit status %d after stdin closed during start, want 0 without an error:\n%s", code, log)
			}
			// Nor told as a failure: no restart, no "did not exit after stdin was closed" for a process given no time.
			for _, bad := range []string{"backend down", "check command", "level=ERROR", "restarting backend", "did not exit after stdin"} {
				if strings.Contains(log, bad) {
					t.Errorf("the log has %q after a stop during start:\n%s", bad, log)
				}
			}
		})
	}
}

// TestStdinClosedAtStart: a stdio client that hangs up at once (its
// stdin empty) stops the gateway, exit status 0, and the stop is not told
// as failures: the model load it cancels is no "semantic ranking is off",
// the connects it aborts no "restarting backend". Both were logged.
func TestStdinClosedAtStart(t *testing.T) {
	cfg := fakeConfig(t, map[string]string{"a": "", "b": ""}, nil)
	cmd := toolgateCmd(t, t.TempDir(), "serve", "--config", cfg)
	cmd.Stdin = strings.NewReader("")
	var logs testenv.LogBuffer
	cmd.Stderr = io.MultiWriter(&logs, testLog(t, "toolgate: "))
	if err := cmd.Run(); err != nil {
		t.Fatalf("serve with its stdin closed: %v\n%s", err, logs.String())
	}
	for _, bad := range []string{"semantic ranking is off", "restarting backend", "did not exit after stdin", "backend down", "level=ERROR", "level=WARN"} {
		if strings.Contains(logs.String(), bad) {
			t.Errorf("the log has %q after a stop at start:\n%s", bad, logs.String())
		}
	}
}

// TestServePortTaken: a taken --http address is an error at once, naming
// the address and the fix, before any backend starts.
func TestServePortTaken(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	addr := ln.Addr().String()
	out, err := toolgateCmd(t, t.TempDir(), "serve", "--config", bundledConfig(t, nil), "--http", addr).CombinedOutput()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 1 {
		t.Fatalf("serve on a taken port: %v, want exit status 1\n%s", err, out)
	}
	for _, want := range []string{"listen on " + addr + ": the address is already in use", "toolgate status --addr " + addr, "pass another --http address"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(string(out), "backend up") {
		t.Errorf("backends started before the port was found taken:\n%s", out)
	}
}

// mountNS runs toolgate inside its own mount namespace (unshare -rm) under
// a shell that changes the data folder's mounts on the test's command, so
// that faults only root can make (a read-only mount, a full file system)
// stay inside the test and vanish with it. The shell reads one command a
// line from stdin and answers "ok CMD" on stdout:
//
//	ro    bind-mount the folder onto itself, read-only (files open for
//	      writing stay writable, as when a volume is remounted read-only
//	      under a running program; new files and access checks see it)
//	rw    remove that read-only mount
//	fill  fill the file system under the folder (a 96 MiB tmpfs)
//	free  remove the filler
//
// and says "pid N" when the gateway starts, "exit N" when it ends.
type mountNS struct {
	in   io.WriteCloser
	oks  chan string
	base string
}

const nsScript = `
set -u
base=$1; tmpfs=$2; shift 2
if [ "$tmpfs" = yes ]; then mount -t tmpfs -o size=96m tmpfs "$base"; fi
mkdir -p "$base/data"
( "$@" </dev/null & echo "pid $!"; wait $!; echo "exit $?" ) &
while read -r cmd; do
  case "$cmd" in
    ro) mount --bind "$base/data" "$base/data" && mount -o remount,bind,ro "$base/data" ;;
    rw) umount "$base/data" ;;
    fill) dd if=/dev/zero of="$base/filler" bs=1M 2>/dev/null; true ;;
    free) rm -f "$base/filler" ;;
  esac
  echo "ok $cmd"
done
wait
`

// startInMountNS starts `toolgate serve --http` inside a new mount
// namespace with its data folder at base/data (base a 96 MiB tmpfs when
// tmpfs is set).
func startInMountNS(t *testing.T, tmpfs bool, cfg string) (*gatewayProc, *mountNS) {
	t.Helper()
	if out, err := exec.Command("unshare", "-rm", "sh", "-c", `mount -t tmpfs tmpfs "$1" && mount --bind "$1" "$1" && mount -o remount,bind,ro "$1"`, "sh", t.TempDir()).CombinedOutput(); err != nil {
		testenv.Missing(t, "this machine does not let a test mount inside `unshare -rm` (%v: %s); the read-only and full-disk tests need it", err, bytes.TrimSpace(out))
	}
	base := t.TempDir()
	addr := freeAddr(t)
	tg := toolgateCmd(t, filepath.Join(base, "data"), "serve", "--config", cfg, "--http", addr)
	yes := "no"
	if tmpfs {
		yes = "yes"
	}
	cmd := exec.Command("unshare", append([]string{"-rm", "sh", "-c", nsScript, "sh", base, yes}, tg.Args...)...)
	cmd.Env = tg.Env
	in, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	ns := &mountNS{in: in, oks: make(chan string, 4), base: base}
	g := &gatewayProc{cmd: cmd, addr: addr, logs: &testenv.LogBuffer{}, exited: make(chan struct{})}
	cmd.Stderr = io.MultiWriter(g.logs, testLog(t, "toolgate: "))
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	pid := make(chan int, 1)
	code := -1
	shellDone := make(chan struct{})
	go func() {
		defer close(shellDone)
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			word, arg, _ := strings.Cut(sc.Text(), " ")
			switch word {
			case "ok":
				ns.oks <- arg
			case "pid":
				n, _ := strconv.Atoi(arg)
				pid <- n
			case "exit":
				code, _ = strconv.Atoi(arg)
				close(g.exited)
			}
		}
	}()
	go func() {
		<-shellDone
		_ = cmd.Wait()
		select {
		case <-g.exited:
		default:
			close(g.exited) // the shell ended without reporting (code stays -1)
		}
	}()
	g.status = func() int { return code }
	t.Cleanup(func() {
		select {
		case <-g.exited:
		default:
			_ = syscall.Kill(g.pid, syscall.SIGKILL)
		}
		in.Close()
		select {
		case <-shellDone:
		case <-time.After(testenv.Timeout):
			cmd.Process.Kill()
		}
	})
	select {
	case g.pid = <-pid:
	case <-time.After(testenv.Timeout):
		t.Fatalf("the namespace shell never started the gateway: %s", g.logs)
	}
	waitHealthy(t, "http://"+addr+"/healthz", 3*time.Minute)
	return g, ns
}

// do runs one of mountNS's commands.
func (ns *mountNS) do(t *testing.T, cmd string) {
	t.Helper()
	if _, err := fmt.Fprintln(ns.in, cmd); err != nil {
		t.Fatalf("%s: %v", cmd, err)
	}
	select {
	case got := <-ns.oks:
		if got != cmd {
			t.Fatalf("%s: the namespace shell answered %q", cmd, got)
		}
	case <-time.After(testenv.Timeout):
		t.Fatalf("%s: the namespace shell did not answer", cmd)
	}
}

// TestDataFolderReadOnlyOrFull makes the data folder of a running gateway
// read-only (a read-only bind mount over it), or fills its file system (a
// small tmpfs): search_tools still answers with semantic ranking (the
// embedding cache is pass-through; on a full tmpfs a write through
// Badger's memory map would end the process with SIGBUS), GET /status
// reports it with the fix; once the folder is writable again the cache
// writes again without a restart; broken again, SIGTERM still ends the
// process (exit 4: the cache could not be flushed).
func TestDataFolderReadOnlyOrFull(t *testing.T) {
	for _, tc := range []struct {
		name, breakIt, mendIt, problem, fix string
		tmpfs                               bool
	}{
		{name: "read-only", breakIt: "ro", mendIt: "rw", problem: "read-only file system", fix: "remount"},
		{name: "full", breakIt: "fill", mendIt: "free", problem: "full file system", fix: "free space", tmpfs: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g, ns := startInMountNS(t, tc.tmpfs, bundledConfig(t, nil))
			ctx, cs := g.connect(t)
			indexServedHTTP(t, g.addr) // a cold start past its wait answers "being built"
			searchAnswers(t, ctx, cs, "before", 2)

			ns.do(t, tc.breakIt)
			searchAnswers(t, ctx, cs, tc.name, 5)
			r := storageReport(t, g.addr)
			if r.Writable || !strings.Contains(r.Error, tc.problem) || !strings.Contains(r.Fix, tc.fix) || r.Since.IsZero() {
				t.Errorf("storage while %s: %+v", tc.name, r)
			}
			if w := writer(t, r, "embedding cache"); w.OK || w.Failures < 5 {
				t.Errorf("embedding cache writer while %s: %+v", tc.name, w)
			}

			ns.do(t, tc.mendIt)
			searchAnswers(t, ctx, cs, "mended", 1) // the cache writes again at once
			if w := writer(t, storageReport(t, g.addr), "embedding cache"); !w.OK {
				t.Errorf("embedding cache writer after the folder is writable again: %+v", w)
			}
			// An index built in memory meanwhile (a backend's list change)
			// is written to disk by the loop's next look at the folder.
			testenv.Eventually(t, "every writer ok", func() bool { r = storageReport(t, g.addr); return !r.Failing() })
			if !r.Writable || !strings.Contains(r.LastError, tc.problem) || getStatus(t, g.addr).IndexInMemory {
				t.Errorf("storage after the folder is writable again: %+v, want writable, the last error kept, the index on disk", r)
			}

			ns.do(t, tc.breakIt)
			searchAnswers(t, ctx, cs, tc.name+" again", 1)
			start := time.Now()
			g.signal(t, syscall.SIGTERM)
			if code, _ := g.waitExit(t, start); code != shutdown.ExitUnclean {
				t.Errorf("exit status %d, want %d (the cache could not be flushed)", code, shutdown.ExitUnclean)
			}
			log := g.logs.String()
			if n := strings.Count(log, "storage fault: embedding cache"); n != 2 {
				t.Errorf("the cache's fault was logged %d times for two faults, want 2", n)
			}
			if n := strings.Count(log, "storage recovered: embedding cache"); n != 1 {
				t.Errorf("the cache's recovery was logged %d times, want 1", n)
			}
			if strings.Contains(log, "SIGBUS") || strings.Contains(log, "error flushing memtable") {
				t.Errorf("the log shows a crash or Badger stuck:\n%s", log)
			}
		})
	}
}

// TestStartOnUnwritableDataFolder: a gateway started on a data folder that
// cannot take writes (here a file stands in its place) says so once, naming
// the folder and the fix, and serves in the degraded mode the README
// documents: the index built in memory, hybrid ranking, the embedding cache
// pass-through; once a folder is there every store writes again and GET
// /status is healthy (the learned pairs used to stay off for the run, and
// the quarantine pins failing until a backend listed its tools again); its
// stop is clean.
func TestStartOnUnwritableDataFolder(t *testing.T) {
	data := filepath.Join(t.TempDir(), "data")
	if err := os.WriteFile(data, []byte("a file where the data folder should be"), 0o644); err != nil {
		t.Fatal(err)
	}
	addr := freeAddr(t)
	g := startServe(t, toolgateCmd(t, data, "serve", "--config", bundledConfig(t, nil), "--http", addr), addr)
	ctx, cs := g.connect(t)
	indexServedHTTP(t, addr) // a cold start past its wait answers "being built"
	searchAnswers(t, ctx, cs, "degraded start", 3)
	rep := getStatus(t, addr)
	if want := 36 + len(mgmt.Tools()); !rep.IndexInMemory || rep.CatalogTools != want {
		t.Errorf("index: inMemory=%v with %d tools, want the %d tools (bundled and management) in memory", rep.IndexInMemory, rep.CatalogTools, want)
	}
	if r := rep.Storage; r == nil || r.Writable || !strings.Contains(r.Error, "is not a folder") || !strings.Contains(r.Fix, "move the file") {
		t.Errorf("storage: %+v", r)
	}
	log := g.logs.String()
	if n := strings.Count(log, "the data folder cannot take writes: serving with the index in memory"); n != 1 || !strings.Contains(log, "dir="+data) {
		t.Errorf("the start's error line appears %d times (want once, naming %s):\n%s", n, data, log)
	}

	// The file moved aside, as the fix says (no mkdir: the start would
	// have made the folder, so the gateway makes it): every store writes
	// again without a restart, the learned pairs (not opened at start) and
	// the quarantine pins (decided at start, with no listing since)
	// included, so GET /status is healthy again.
	if err := os.Remove(data); err != nil {
		t.Fatal(err)
	}
	// The index's store recovers as the index is written, a moment before
	// the index written is served (IndexInMemory false): both are waited
	// for.
	testenv.Eventually(t, "every store writes again, and the index served is the one on disk", func() bool {
		searchAnswers(t, ctx, cs, "mended", 1)
		r := storageReport(t, addr)
		return !r.Failing() && !getStatus(t, addr).IndexInMemory
	})
	for _, sub := range []string{"learn", "quarantine/pins.json", "index"} {
		if _, err := os.Stat(filepath.Join(data, sub)); err != nil {
			t.Errorf("%s not written once the folder came back: %v", sub, err)
		}
	}
	start := time.Now()
	g.signal(t, syscall.SIGTERM)
	if code, _ := g.waitExit(t, start); code != 0 {
		t.Errorf("exit status %d, want 0: nothing was left unflushed", code)
	}
}

// TestSecondGatewayOnSameDataFolder: a second gateway on a data folder that
// a first one serves from runs (MCP clients each start their own toolgate)
// without the Badger stores the first holds, and says so: GET /status and
// `toolgate status` name the stores and the other process with the fix,
// where they used to report a healthy folder. The first is unaffected. Once
// the first stops, the second opens the learned pairs and records to them.
func TestSecondGatewayOnSameDataFolder(t *testing.T) {
	cfg := bundledConfig(t, nil)
	data := filepath.Join(t.TempDir(), "data")
	addrA := freeAddr(t)
	a := startServe(t, toolgateCmd(t, data, "serve", "--config", cfg, "--http", addrA), addrA)
	ctxA, csA := a.connect(t)
	indexServedHTTP(t, addrA) // a cold start past its wait answers "being built"; the next two start warm from this index
	searchAnswers(t, ctxA, csA, "first", 1)

	addrB := freeAddr(t)
	b := startServe(t, toolgateCmd(t, data, "serve", "--config", cfg, "--http", addrB), addrB)
	ctxB, csB := b.connect(t)
	searchAnswers(t, ctxB, csB, "second", 2)
	// The second runs without the embedding cache, which the first holds
	// (said, no fault), and learns through the first (its status socket).
	r := storageReport(t, addrB)
	shared := fmt.Sprintf("held by another toolgate on the data folder (pid %d): this one embeds without the cache", a.pid)
	if w := writer(t, r, "embedding cache"); !w.OK || !strings.Contains(w.Shared, shared) {
		t.Errorf("second gateway's embedding cache: %+v, want fine and shared: %q", w, shared)
	}
	if w := writer(t, r, "learned pairs"); !w.OK {
		t.Errorf("second gateway's learned pairs: %+v, want fine (it learns through the first)", w)
	}
	testenv.Eventually(t, "the second's backends up", func() bool { rep := getStatus(t, addrB); return rep.Up == rep.Total })
	var out bytes.Buffer
	err := runStatus(context.Background(), &out, statusFlags{addr: addrB})
	if err != nil || !strings.Contains(out.String(), "writable\n  embedding cache: "+shared) {
		t.Errorf("toolgate status of the second = %v, want healthy with the cache's note:\n%s", err, out.String())
	}
	if r := storageReport(t, addrA); r.Failing() {
		t.Errorf("the first gateway's storage: %+v, want healthy", r)
	}
	searchAnswers(t, ctxA, csA, "first, beside the second", 1)

	// A stdio client's gateway on the same folder records through the
	// first while it holds the pairs, and in the store once it stopped.
	ctxC, csC := connectStdio(t, toolgateCmd(t, data, "serve", "--config", cfg), 3*time.Minute)
	record := func(query, tool string) {
		searchFinds(t, ctxC, csC, query, tool)
		if res := executeTool(t, ctxC, csC, tool, map[string]any{}); res.IsError {
			t.Fatalf("execute_tool %s: %s", tool, resultText(res))
		}
	}
	record("list the folders this server may access", "filesystem__list_allowed_directories")
	learnOut := func() string {
		out, stderr, _ := runToolgate(t, data, "learn")
		return out + stderr
	}
	testenv.Eventually(t, "the stdio gateway's pair recorded through the first", func() bool {
		return strings.Contains(learnOut(), "1 learned pair for 1 tool")
	})
	// What the first learns (here seeded through it) the second ranks
	// with, within moments.
	const other = "show me what is stored"
	_, second, seed := seedSecond(t, ctxB, csB, other)
	if out, stderr, err := runToolgate(t, data, "learn", "--queries", seed); err != nil || !strings.Contains(out, fmt.Sprintf("(through pid %d", a.pid)) {
		t.Fatalf("toolgate learn --queries: %v\n%s%s", err, out, stderr)
	}
	testenv.Eventually(t, "the second ranking with the pairs the first holds", func() bool {
		ans, _ := searchTools(t, ctxB, csB, other, 5)
		return len(ans.Tools) > 0 && ans.Tools[0].Name == second
	})
	if l := getStatus(t, addrA).Learning; l == nil || *l != (gateway.LearningStatus{Holder: gateway.ThisGateway, Pairs: 2, Tools: 2}) {
		t.Errorf("the first's learning status: %+v, want 2 pairs for 2 tools held there", l)
	}
	if l := getStatus(t, addrB).Learning; l == nil || l.Holder != fmt.Sprintf("pid %d (http %s)", a.pid, addrA) || l.Pairs != 2 || l.Tools != 2 {
		t.Errorf("the second's learning status: %+v, want 2 pairs for 2 tools through pid %d", l, a.pid)
	}
	out.Reset()
	if err := runStatus(context.Background(), &out, statusFlags{addr: addrB}); err != nil ||
		!strings.Contains(out.String(), fmt.Sprintf("learning: 2 pairs for 2 tools, through pid %d (http %s), which holds them\n", a.pid, addrA)) {
		t.Errorf("toolgate status of the second = %v:\n%s", err, out.String())
	}

	start := time.Now()
	a.signal(t, syscall.SIGTERM)
	if code, _ := a.waitExit(t, start); code != 0 {
		t.Errorf("the first gateway's exit status %d, want 0", code)
	}
	record("what does this knowledge graph hold", "memory__read_graph")
	csC.Close() // the stdio gateway exits with its client, and sends what it recorded first
	if got := learnOut(); !strings.Contains(got, "3 learned pairs for 3 tools") {
		t.Errorf("toolgate learn after the first stopped: %s, want the stdio gateway's two pairs and the seeded one", got)
	}
	// The second takes the embedding cache over at a search that embeds
	// (it tries at most every 10 s); it used to run without it until it
	// restarted, its note naming a gateway long gone.
	n := 0
	testenv.EventuallyWithin(t, time.Minute, "the second taking the embedding cache over", func() bool {
		n++
		searchAnswers(t, ctxB, csB, fmt.Sprintf("a query never asked before, number %d", n), 1)
		return writer(t, storageReport(t, addrB), "embedding cache").Shared == ""
	})
	if w := writer(t, storageReport(t, addrB), "embedding cache"); !w.OK {
		t.Errorf("the second's embedding cache once taken over: %+v, want fine", w)
	}

	start = time.Now()
	b.signal(t, syscall.SIGTERM)
	if code, _ := b.waitExit(t, start); code != 0 {
		t.Errorf("the second gateway's exit status %d, want 0", code)
	}
}
