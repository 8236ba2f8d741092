package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/dgraph-io/badger/v4"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"golang.org/x/sys/unix"

	"github.com/toolgate/toolgate/gateway/audit"
	"github.com/toolgate/toolgate/gateway/backend/backendtest"
	"github.com/toolgate/toolgate/gateway/backend/oauth/oauthtest"
	"github.com/toolgate/toolgate/gateway/live"
	"github.com/toolgate/toolgate/internal/dirs"
	"github.com/toolgate/toolgate/internal/testenv"
)

// The tests of this file make the faults of the README's "Other faults"
// list that storage_test.go does not: an MCP client that closes its end of
// the gateway's stderr or stdout.

// TestClientClosesStderr: a client that stops reading the gateway's stderr
// and closes its end (some MCP clients never read it) used to kill the
// gateway with SIGPIPE at its next log line. It keeps serving: the log line
// is lost, the requests are answered, and its stop is clean.
func TestClientClosesStderr(t *testing.T) {
	addr := freeAddr(t)
	cmd := toolgateCmd(t, t.TempDir(), "serve", "--config", fakeConfig(t, map[string]string{"fake": backendtest.ModeNormal}, nil), "--http", addr)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited, hungUp := make(chan struct{}), make(chan struct{})
	go func() {
		// Read the log until the gateway serves, then hang up.
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			t.Logf("toolgate: %s", sc.Text())
			if strings.Contains(sc.Text(), "serving MCP over streamable HTTP") {
				break
			}
		}
		stderr.Close()
		close(hungUp)
		_ = cmd.Wait()
		close(exited)
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-exited
	})
	waitHealthy(t, "http://"+addr+"/healthz", 3*time.Minute)
	select {
	case <-hungUp:
	case <-time.After(testenv.Timeout):
		t.Fatal("the gateway never logged that it serves")
	}
	// Two reloads: each logs one line before it is counted, so once the
	// second is counted the first line met the closed pipe.
	for i := range 2 {
		if err := cmd.Process.Signal(syscall.SIGHUP); err != nil {
			t.Fatal(err)
		}
		waitStatus(t, addr, "the SIGHUP reload counted", func(s live.Stats) bool { return s.ReloadGeneration >= uint64(i+1) })
	}
	if rep := getStatus(t, addr); rep.Up != 1 {
		t.Errorf("after log lines to a closed stderr: %d backends up, want 1", rep.Up)
	}
	stopsClean(t, cmd, exited, "with stderr closed")
}

// stopsClean sends the gateway SIGTERM and checks that it exits with
// status 0; exited is closed once cmd.Wait has returned.
func stopsClean(t *testing.T, cmd *exec.Cmd, exited <-chan struct{}, when string) {
	t.Helper()
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case <-exited:
	case <-time.After(testenv.Timeout):
		t.Fatal("the gateway did not exit after SIGTERM")
	}
	if code := cmd.ProcessState.ExitCode(); code != 0 {
		t.Errorf("exit %v after SIGTERM %s, want status 0", cmd.ProcessState, when)
	}
}

// TestConnectClientClosesStderrAndStdout: `toolgate connect` is what a
// client starts in place of `serve`, so it meets the same clients. One that
// closed its end of connect's stderr killed it with SIGPIPE at its first
// log line, before it relayed anything; it relays (the log lines are lost).
// One that then closes its end of stdout is gone: connect stops at its next
// answer, exit 0, as serve does, not by SIGPIPE.
func TestConnectClientClosesStderrAndStdout(t *testing.T) {
	errR, errW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	errR.Close()
	defer errW.Close()
	// No gateway at the address: each call is answered -32050 at once.
	cmd := toolgateCmd(t, t.TempDir(), "connect", "--addr", freeAddr(t))
	cmd.Stderr = errW
	stdin, outR, exited, line, err := startPipedConnect(t, cmd, "quiet")
	if err != nil || !strings.Contains(line, `"id":1`) {
		<-exited
		t.Fatalf("initialize through connect with its stderr closed: %q, %v (exit %v)", line, err, cmd.ProcessState)
	}
	outR.Close()
	io.WriteString(stdin, `{"jsonrpc":"2.0","id":2,"method":"tools/list"}`+"\n")
	select {
	case <-exited:
	case <-time.After(testenv.Timeout):
		t.Fatal("connect did not stop after its client closed stdout")
	}
	if ws := cmd.ProcessState.Sys().(syscall.WaitStatus); ws.Signaled() || ws.ExitStatus() != 0 {
		t.Errorf("connect exit %v after its client closed stdout, want status 0", cmd.ProcessState)
	}
}

// startPipedConnect starts cmd, a `toolgate connect`, with its stdout on a
// pipe of the test's own (which the test may close, as a client that
// goes), and sends it an initialize as client name: its stdin, the pipe's
// read end (closed at the test's end), exited (closed once it has
// exited), and the first line it answered.
func startPipedConnect(t *testing.T, cmd *exec.Cmd, name string) (stdin io.WriteCloser, out *os.File, exited chan struct{}, line string, err error) {
	t.Helper()
	out, outW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { out.Close() })
	cmd.Stdout = outW
	if stdin, err = cmd.StdinPipe(); err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	outW.Close()
	exited = make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	t.Cleanup(func() { stdin.Close(); _ = cmd.Process.Kill(); <-exited })
	io.WriteString(stdin, `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"`+name+`","version":"1"}}}`+"\n")
	line, err = bufio.NewReader(out).ReadString('\n')
	return stdin, out, exited, line, err
}

// stdioGateway is a gateway serving a stdio client (the test) with one
// fake backend, initialized by client name: its stdin, the read end of its
// stdout (a pipe of the test's own, which may be probed), its log, and
// exited, closed once it has exited.
type stdioGateway struct {
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	stdout *os.File
	logs   *testenv.LogBuffer
	exited chan struct{}
}

func serveStdio(t *testing.T, name string) *stdioGateway {
	t.Helper()
	return serveStdioMode(t, name, backendtest.ModeNormal)
}

// serveStdioMode is serveStdio with a fake backend of the modes given.
func serveStdioMode(t *testing.T, name, modes string) *stdioGateway {
	t.Helper()
	g := &stdioGateway{logs: &testenv.LogBuffer{}, exited: make(chan struct{})}
	g.cmd = toolgateCmd(t, t.TempDir(), "serve", "--config", fakeConfig(t, map[string]string{"fake": modes}, nil))
	g.cmd.Stderr = io.MultiWriter(g.logs, testLog(t, "toolgate: "))
	var err error
	if g.stdin, err = g.cmd.StdinPipe(); err != nil {
		t.Fatal(err)
	}
	var w *os.File
	if g.stdout, w, err = os.Pipe(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { g.stdout.Close() })
	g.cmd.Stdout = w
	if err := g.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	w.Close()
	go func() { _ = g.cmd.Wait(); close(g.exited) }()
	t.Cleanup(func() {
		g.stdin.Close()
		_ = g.cmd.Process.Kill()
		<-g.exited
	})
	g.send(t, `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"`+name+`","version":"1"}}}`)
	if line, err := bufio.NewReader(g.stdout).ReadString('\n'); err != nil || !strings.Contains(line, `"id":1`) {
		t.Fatalf("initialize: %q, %v", line, err)
	}
	return g
}

func (g *stdioGateway) send(t *testing.T, msg string) {
	t.Helper()
	if _, err := io.WriteString(g.stdin, msg+"\n"); err != nil {
		t.Fatalf("write to the gateway's stdin: %v", err)
	}
}

// TestStdioClientClosesStdout: a stdio client that closes its end of the
// gateway's stdout while stdin stays open is gone, as one that closes stdin
// is: the gateway stops cleanly (exit 0, saying why) at its next reply,
// where it used to die of SIGPIPE.
func TestStdioClientClosesStdout(t *testing.T) {
	g := serveStdio(t, "hangup")
	g.stdout.Close()
	g.send(t, `{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	g.send(t, `{"jsonrpc":"2.0","id":2,"method":"tools/list"}`)
	select {
	case <-g.exited:
	case <-time.After(testenv.Timeout):
		t.Fatalf("the gateway did not stop after its client closed stdout:\n%s", g.logs.String())
	}
	if ws := g.cmd.ProcessState.Sys().(syscall.WaitStatus); ws.Signaled() || ws.ExitStatus() != 0 {
		t.Errorf("exit %v after the client closed stdout, want status 0:\n%s", g.cmd.ProcessState, g.logs.String())
	}
	if !strings.Contains(g.logs.String(), "the stdio client closed stdout: stopping") {
		t.Errorf("the log does not say why the gateway stopped:\n%s", g.logs.String())
	}
}

// TestStdioClientClosesStdoutMidCall: a stdio client that closes its end
// of stdout while a call runs is gone at once: the gateway stops (exit 0,
// saying why) and the call is cancelled on its server. It waited for the
// call's answer to find stdout closed, for as long as the call ran (a call
// that never ends: for good).
func TestStdioClientClosesStdoutMidCall(t *testing.T) {
	g := serveStdioMode(t, "gone-mid-call", backendtest.ModeHang)
	g.send(t, `{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	g.send(t, `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"execute_tool","arguments":{"name":"fake__hang"}}}`)
	g.stdout.Close()
	select {
	case <-g.exited:
	case <-time.After(testenv.Timeout):
		t.Fatalf("the gateway did not stop after its client closed stdout mid-call:\n%s", g.logs.String())
	}
	if ws := g.cmd.ProcessState.Sys().(syscall.WaitStatus); ws.Signaled() || ws.ExitStatus() != 0 {
		t.Errorf("exit %v after the client closed stdout, want status 0:\n%s", g.cmd.ProcessState, g.logs.String())
	}
	if log := g.logs.String(); strings.Count(log, "the stdio client closed stdout: stopping") != 1 {
		t.Errorf("the log does not say once why the gateway stopped:\n%s", log)
	}
}

// TestStdioPipesGivenBackBlocking: the gateway reads and writes its stdio
// pipes non-blocking (through Go's poller), a mode that belongs to the pipe
// and so to every process holding it; it gives them back blocking when it
// exits. The shell that started it hands its pipes to the next command
// (`{ toolgate serve; cat; } < fifo`), whose read failed with EAGAIN
// ("Resource temporarily unavailable").
func TestStdioPipesGivenBackBlocking(t *testing.T) {
	inR, inW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	outR, outW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range []*os.File{inR, inW, outR, outW} {
		defer f.Close()
	}
	cmd := toolgateCmd(t, t.TempDir(), "serve", "--config", fakeConfig(t, map[string]string{"fake": backendtest.ModeNormal}, nil))
	logs := &testenv.LogBuffer{}
	cmd.Stdin, cmd.Stdout, cmd.Stderr = inR, outW, io.MultiWriter(logs, testLog(t, "toolgate: "))
	// Start puts the pipes the child gets into blocking mode (Fd), as a
	// shell's are.
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	t.Cleanup(func() { _ = cmd.Process.Kill(); <-exited })
	if _, err := io.WriteString(inW, `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"shell","version":"1"}}}`+"\n"); err != nil {
		t.Fatal(err)
	}
	if line, err := bufio.NewReader(outR).ReadString('\n'); err != nil || !strings.Contains(line, `"id":1`) {
		t.Fatalf("initialize: %q, %v", line, err)
	}
	if !testenv.Nonblocking(t, inR) {
		t.Fatal("the gateway's stdin is blocking while it serves: this test no longer tests the give-back")
	}
	inW.Close()
	select {
	case <-exited:
	case <-time.After(testenv.Timeout):
		t.Fatalf("the gateway did not stop after its client closed stdin:\n%s", logs.String())
	}
	if code := cmd.ProcessState.ExitCode(); code != 0 {
		t.Errorf("exit %v, want status 0:\n%s", cmd.ProcessState, logs.String())
	}
	if testenv.Nonblocking(t, inR) {
		t.Error("stdin's pipe is left non-blocking: the next command to read it gets EAGAIN")
	}
	if testenv.Nonblocking(t, outW) {
		t.Error("stdout's pipe is left non-blocking: the next command to write it gets EAGAIN")
	}
}

// TestStdioClientReadsNoMore: a stdio client that keeps sending calls and
// stops reading the gateway's stdout (its pipe full, every answer waiting)
// is stopped cleanly by SIGTERM: go-sdk closes the session only once every
// answer is written, so the stop used to wait out its 10 s budget and exit
// with status 4, the stores not flushed.
func TestStdioClientReadsNoMore(t *testing.T) {
	g := serveStdio(t, "stalled")
	go func() {
		// Calls until the gateway reads no more (or exits).
		io.WriteString(g.stdin, `{"jsonrpc":"2.0","method":"notifications/initialized"}`+"\n")
		for id := 2; ; id++ {
			if _, err := fmt.Fprintf(g.stdin, `{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"search_tools","arguments":{"query":"echo a message back"}}}`+"\n", id); err != nil {
				return
			}
		}
	}()
	// The gateway's stdout is unread and it reads no more of its stdin:
	// its answers wait for room (a full stdout fills in pages, each answer
	// in a page of its own when the last has too little room: its bytes
	// never say it is full), and the calls for room in stdin. The client's
	// small lines fill stdin's pages to within a line of their size.
	stdin := g.stdin.(*os.File)
	size, err := pipeSize(stdin)
	if err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, "the gateway's stdout unread and its stdin full", func() bool {
		in, err := pipeBytes(stdin)
		out, err2 := pipeBytes(g.stdout)
		return err == nil && err2 == nil && out > 0 && in > size-4096
	})
	stopsClean(t, g.cmd, g.exited, "while its stdio client read no answers")
}

// pipeSize is the capacity of the pipe f is an end of.
func pipeSize(f *os.File) (n int, err error) {
	return pipeIoctl(f, func(fd int) (int, error) { return unix.FcntlInt(uintptr(fd), unix.F_GETPIPE_SZ, 0) })
}

// pipeBytes is how many bytes the pipe f is an end of holds unread.
func pipeBytes(f *os.File) (int, error) {
	return pipeIoctl(f, func(fd int) (int, error) { return unix.IoctlGetInt(fd, unix.TIOCINQ) }) // FIONREAD
}

// pipeIoctl runs get on f's descriptor without f.Fd(), which would put a
// pipe the poller waits on into blocking mode.
func pipeIoctl(f *os.File, get func(fd int) (int, error)) (n int, err error) {
	rc, err := f.SyscallConn()
	if err != nil {
		return 0, err
	}
	if cerr := rc.Control(func(fd uintptr) { n, err = get(int(fd)) }); cerr != nil {
		return 0, cerr
	}
	return n, err
}

// TestAuditTailTornLine: `audit tail` on a log whose line was cut short
// shows the records around it and says a line was left out.
func TestAuditTailTornLine(t *testing.T) {
	data := t.TempDir()
	path := dirs.Audit(data)
	if err := audit.Append(path, audit.Record{Action: "keys create", Decision: audit.Allowed, Outcome: audit.OK}); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, b[:len(b)-20], 0o600); err != nil { // the line cut short
		t.Fatal(err)
	}
	if err := audit.Append(path, audit.Record{Action: "keys revoke", Decision: audit.Allowed, Outcome: audit.OK}); err != nil {
		t.Fatal(err)
	}
	var out, errOut bytes.Buffer
	if err := runAuditTail(context.Background(), &globals{dataDir: data}, &out, &errOut, auditTailFlags{n: 10}); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "keys revoke") || strings.Contains(out.String(), "keys create") ||
		!strings.Contains(errOut.String(), "1 line(s) of the audit log ("+path+") are not records") {
		t.Errorf("audit tail printed:\n%s\nand warned:\n%s\nwant the record after the torn line, and a warning naming the file", out.String(), errOut.String())
	}
}

// TestAuditTailSaysWhyNothing: `audit tail` that prints no record says
// why on stderr: no log in that data folder (the wrong --data-dir, most
// often), a log with no record yet, or a filter that nothing passes.
func TestAuditTailSaysWhyNothing(t *testing.T) {
	data := t.TempDir()
	path := dirs.Audit(data)
	tail := func(f auditTailFlags) string {
		t.Helper()
		var out, errOut bytes.Buffer
		if err := runAuditTail(context.Background(), &globals{dataDir: data}, &out, &errOut, f); err != nil {
			t.Fatal(err)
		}
		if out.Len() > 0 {
			t.Fatalf("audit tail printed %q, want no record", out.String())
		}
		return errOut.String()
	}
	if got, want := tail(auditTailFlags{n: 10}), "toolgate: no audit log at "+path+": a gateway serving with this data folder writes it"; !strings.HasPrefix(got, want) {
		t.Errorf("no log: stderr %q, want %q…", got, want)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if got, want := tail(auditTailFlags{}), "toolgate: the audit log at "+path+" holds no records yet\n"; got != want {
		t.Errorf("empty log: stderr %q, want %q", got, want)
	}
	if err := audit.Append(path, audit.Record{Action: "keys create", Key: "ci", Decision: audit.Allowed, Outcome: audit.OK}); err != nil {
		t.Fatal(err)
	}
	f := auditTailFlags{n: 10}
	f.filter.Key = "no one"
	if got, want := tail(f), "toolgate: no record of the audit log at "+path+" matches --key 'no one'\n"; got != want {
		t.Errorf("filter: stderr %q, want %q", got, want)
	}
	var out, errOut bytes.Buffer
	err := runAuditTail(context.Background(), &globals{dataDir: data}, &out, &errOut, auditTailFlags{n: -1})
	if ue := (usageError{}); !errors.As(err, &ue) || !strings.Contains(err.Error(), "--lines -1: want 0 (every record) or more") {
		t.Errorf("-n -1: %v, want a usage error", err)
	}
}

// TestIndexOnFreshDataFolder: the first `toolgate index` of a data folder
// that does not exist yet stores its vectors in the embedding cache, so a
// rebuild finds them there. Its cache used to find no folder, log a storage
// fault ("removed while toolgate runs?") and store nothing.
func TestIndexOnFreshDataFolder(t *testing.T) {
	data := filepath.Join(t.TempDir(), "data")
	tools := writeToolsFile(t, t.TempDir(), 4, "")
	index := func() (indexResult, string) {
		t.Helper()
		cmd := toolgateCmd(t, data, "index", "--tools", tools, "--json")
		var out, errOut bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &errOut
		if err := cmd.Run(); err != nil {
			t.Fatalf("index: %v\n%s", err, errOut.String())
		}
		var r indexResult
		if err := json.Unmarshal(out.Bytes(), &r); err != nil {
			t.Fatalf("index --json output %q: %v", out.String(), err)
		}
		return r, errOut.String()
	}
	r, log := index()
	if strings.Contains(log, "storage fault") || r.Embedded != 5 || r.CacheMisses == nil {
		t.Fatalf("first index on a fresh data folder: %+v\n%s", r, log)
	}
	// The vectors are in one level below level 0 (embed.Cached.Compact):
	// left in level 0, the next serve's first searches compacted them.
	db, err := badger.Open(badger.DefaultOptions(dirs.EmbeddingCache(data)).WithLogger(nil))
	if err != nil {
		t.Fatal(err)
	}
	var used []int
	for _, l := range db.Levels() {
		if l.NumTables > 0 {
			used = append(used, l.Level)
		}
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	if len(used) != 1 || used[0] == 0 {
		t.Errorf("after toolgate index the embedding cache holds tables in levels %v, want one level below 0", used)
	}
	if err := os.RemoveAll(filepath.Join(data, "index")); err != nil {
		t.Fatal(err)
	}
	r, log = index()
	if r.Embedded != 5 || r.CacheHits == nil || r.CacheMisses == nil || *r.CacheHits == 0 || *r.CacheMisses != 0 {
		t.Errorf("the rebuild did not find the first run's vectors in the embedding cache: %+v\n%s", r, log)
	}
}

// TestCommandsOnFullOrReadOnlyDataFolder: `keys create`, `tools approve`,
// `index` and `servers restart` on a data folder that cannot take the write (a full tmpfs, a
// read-only mount; inside `unshare -rm`) fail with exit status 1, the
// error and a fix line, show no secret (the key is not stored), and leave
// the files as they were.
func TestCommandsOnFullOrReadOnlyDataFolder(t *testing.T) {
	requireMountNamespace(t)
	// The data folder: one key and one quarantined tool, then broken.
	script := brokenFolderScript(`cp -a "$SEED/." "$base/"`, `
before=$(cat "$base/data/keys.jsonl" "$base/data/quarantine/pins.json" | sha256sum)
"$@"; code=$?
after=$(cat "$base/data/keys.jsonl" "$base/data/quarantine/pins.json" | sha256sum)
[ "$before" = "$after" ] || echo "FILES CHANGED" >&2
exit $code`)
	seed := t.TempDir()
	seedData := filepath.Join(seed, "data")
	if out, err := toolgateCmd(t, seedData, "keys", "create", "--name", "first").CombinedOutput(); err != nil {
		t.Fatalf("keys create: %v\n%s", err, out)
	}
	pins := dirs.Pins(seedData)
	if err := os.MkdirAll(filepath.Dir(pins), 0o755); err != nil {
		t.Fatal(err)
	}
	held := `{"version":1,"tools":{"fake__echo":{"pinned":"` + strings.Repeat("a", 64) + `","firstSeen":"2026-01-01T00:00:00Z","current":"` + strings.Repeat("b", 64) + `","seen":"2026-01-02T00:00:00Z","quarantine":{"since":"2026-01-02T00:00:00Z","changed":true}}}}`
	if err := os.WriteFile(pins, []byte(held), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, how := range brokenDataFolders {
		tools := writeToolsFile(t, t.TempDir(), 200, "")
		for _, args := range [][]string{{"keys", "create", "--name", "second"}, {"tools", "approve", "fake__echo"}, {"index", "--tools", tools, "--bm25-only"}, {"servers", "restart", "memory"}} {
			t.Run(how.name+"/"+strings.Join(args[:2], " "), func(t *testing.T) {
				base := t.TempDir()
				out, errOut := runOnBrokenFolder(t, script, base, how.name, toolgateCmd(t, filepath.Join(base, "data"), args...), "SEED="+seed)
				if !strings.Contains(errOut, how.want) || strings.Contains(errOut, "FILES CHANGED") || strings.Contains(out, "tg_") {
					t.Errorf("%s on a %s data folder:\nstdout:\n%s\nstderr:\n%s\nwant %q, the files unchanged and no secret shown", strings.Join(args, " "), how.name, out, errOut, how.want)
				}
			})
		}
	}
}

// brokenDataFolders are the two ways runOnBrokenFolder breaks a data
// folder, and what the fix line a command prints then says.
var brokenDataFolders = []struct{ name, want string }{
	{"full", "toolgate: fix: free space on the file system of "},
	{"ro", " is on a read-only file system: remount it read-write"},
}

// requireMountNamespace stops a test on a machine that does not let it
// mount inside `unshare -rm` (a failure with CI=true).
func requireMountNamespace(t *testing.T) {
	t.Helper()
	if out, err := exec.Command("unshare", "-rm", "sh", "-c", `mount -t tmpfs tmpfs "$1"`, "sh", t.TempDir()).CombinedOutput(); err != nil {
		testenv.Missing(t, "this machine does not let a test mount inside `unshare -rm` (%v: %s)", err, bytes.TrimSpace(out))
	}
}

// brokenFolderScript is the shell script runOnBrokenFolder runs: a 4 MiB
// tmpfs on $base, setup, the data folder $base/data broken as $how says
// (filled, or mounted read-only), then run (which runs the command "$@").
func brokenFolderScript(setup, run string) string {
	return `
set -u
base=$1; how=$2; shift 2
mount -t tmpfs -o size=4m tmpfs "$base" || exit 90
` + setup + ` || exit 91
case "$how" in
  full) dd if=/dev/zero of="$base/filler" bs=4k 2>/dev/null; true ;;
  ro) mount --bind "$base/data" "$base/data" && mount -o remount,bind,ro "$base/data" || exit 92 ;;
esac
` + run + "\n"
}

// runOnBrokenFolder runs tg (a toolgateCmd of base/data) through script
// inside `unshare -rm`, its data folder broken as how says, with env added
// to tg's, and fails the test unless it exits with status 1. It returns
// the command's stdout and stderr.
func runOnBrokenFolder(t *testing.T, script, base, how string, tg *exec.Cmd, env ...string) (stdout, stderr string) {
	t.Helper()
	cmd := exec.Command("unshare", append([]string{"-rm", "sh", "-c", script, "sh", base, how}, tg.Args...)...)
	cmd.Env = append(tg.Env, env...)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 1 {
		t.Fatalf("%s on a %s data folder: %v, want exit status 1\nstdout:\n%s\nstderr:\n%s", strings.Join(tg.Args[1:], " "), how, err, out.String(), errOut.String())
	}
	return out.String(), errOut.String()
}

// TestServeRefusesUnreadablePins: a quarantine pins file that is there but
// cannot be parsed (cut short, edited) stops serve at start, naming the
// file and the fix, before any backend starts. The gateway used to serve
// with no pins, pinning every tool afresh: a quarantined tool was released.
func TestServeRefusesUnreadablePins(t *testing.T) {
	data := t.TempDir()
	pins := dirs.Pins(data)
	if err := os.MkdirAll(filepath.Dir(pins), 0o700); err != nil {
		t.Fatal(err)
	}
	held := `{"version":1,"tools":{"fake__echo":{"pinned":"` + strings.Repeat("a", 64) + `","firstSeen":"2026-01-01T00:00:00Z","current":"` + strings.Repeat("b", 64) + `","seen":"2026-01-02T00:00:00Z","quarantine":{"since":"2026-01-02T00:00:00Z","changed":true}}}}`
	if err := os.WriteFile(pins, []byte(held[:len(held)/2]), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{{}, {"--http", freeAddr(t)}} {
		cmd := toolgateCmd(t, data, append([]string{"serve", "--config", fakeConfig(t, map[string]string{"fake": backendtest.ModeNormal}, nil)}, args...)...)
		cmd.Stdin = strings.NewReader("") // a pipe, as a stdio client gives (/dev/null is refused without --http)
		out, err := cmd.CombinedOutput()
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.ExitCode() != 1 {
			t.Fatalf("serve %v with a torn pins file: %v, want exit status 1\n%s", args, err, out)
		}
		for _, want := range []string{"the quarantine pins file " + pins + " cannot be read", "so the gateway does not start", "mv " + pins + " " + pins + ".bad"} {
			if !strings.Contains(string(out), want) {
				t.Errorf("serve %v: output lacks %q:\n%s", args, want, out)
			}
		}
		if strings.Contains(string(out), "backend up") {
			t.Errorf("serve %v: a backend started before the pins were found unreadable:\n%s", args, out)
		}
	}
	if b, err := os.ReadFile(pins); err != nil || string(b) != held[:len(held)/2] {
		t.Errorf("the pins file was changed (%v)", err)
	}
}

// TestServeRefusesUnreadableState: a state file that does not parse (cut
// short, a hand edit's typo) stops serve at start, exit status 1, before
// any backend starts, naming the file and the fix. The gateway used to log
// "no server is disabled" and serve: every server disabled at run time
// started, its tools shown and run, and GET /status said nothing of it.
func TestServeRefusesUnreadableState(t *testing.T) {
	data := t.TempDir()
	state := live.StateFile(data)
	torn := `{"disabled": ["fa`
	if err := os.WriteFile(state, []byte(torn), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{{}, {"--http", freeAddr(t)}} {
		cmd := toolgateCmd(t, data, append([]string{"serve", "--config", fakeConfig(t, map[string]string{"fake": backendtest.ModeNormal}, nil)}, args...)...)
		cmd.Stdin = strings.NewReader("") // a pipe, as a stdio client gives
		out, err := cmd.CombinedOutput()
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.ExitCode() != 1 {
			t.Fatalf("serve %v with a torn state file: %v, want exit status 1\n%s", args, err, out)
		}
		for _, want := range []string{"the state file " + state + " cannot be read", "so the gateway does not start", "mv " + state + " " + state + ".bad"} {
			if !strings.Contains(string(out), want) {
				t.Errorf("serve %v: output lacks %q:\n%s", args, want, out)
			}
		}
		if strings.Contains(string(out), "backend up") {
			t.Errorf("serve %v: a backend started with the state file unread:\n%s", args, out)
		}
	}
	if b, err := os.ReadFile(state); err != nil || string(b) != torn {
		t.Errorf("the state file was changed (%v)", err)
	}
}

// TestDamagedLearnedPairs: a learned-pairs store that cannot be opened
// though the data folder takes writes (Badger's files cut short) used to
// turn learning off for the run with GET /status healthy. It is reported
// as the store's fault with the fix (`toolgate status` exits 3), and once
// the store is moved aside as the fix says, the gateway opens a new one
// and reports healthy again, without a restart.
func TestDamagedLearnedPairs(t *testing.T) {
	data := t.TempDir()
	store := filepath.Join(data, "learn")
	if err := os.MkdirAll(store, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(store, "KEYREGISTRY"), []byte("cut short"), 0o600); err != nil {
		t.Fatal(err)
	}
	addr := freeAddr(t)
	g := startServe(t, toolgateCmd(t, data, "serve", "--config", fakeConfig(t, map[string]string{"fake": backendtest.ModeNormal}, nil), "--http", addr), addr)
	ctx, cs := g.connect(t)
	indexServedHTTP(t, addr) // a cold start past its wait answers "being built"
	searchTools(t, ctx, cs, "echo some text back", 3)
	r := storageReport(t, addr)
	if w := writer(t, r, "learned pairs"); w.OK || !strings.Contains(w.Error, "holds learned pairs that cannot be opened") || !strings.Contains(w.Fix, "mv "+store+" "+store+".bad") {
		t.Errorf("learned pairs writer with a damaged store: %+v, want failing, with the fix", w)
	}
	var out bytes.Buffer
	err := runStatus(context.Background(), &out, statusFlags{addr: addr})
	var ee exitError
	if !errors.As(err, &ee) || ee.code != degradedExit || !strings.Contains(err.Error(), "learned pairs") {
		t.Errorf("toolgate status = %v, want exit %d naming the learned pairs:\n%s", err, degradedExit, out.String())
	}

	if err := os.Rename(store, store+".bad"); err != nil {
		t.Fatal(err)
	}
	// Searches look for the store again (at most every 10 s).
	testenv.Eventually(t, "the learned pairs open once the damaged store is moved aside", func() bool {
		searchTools(t, ctx, cs, "echo some text back", 3)
		r := storageReport(t, addr)
		return !r.Failing()
	})
	log := g.logs.String()
	if !strings.Contains(log, "learned pairs opened: learning from use is on again") {
		t.Errorf("the log does not say learning is on again:\n%s", log)
	}
	// Badger's own line about the damage comes once, not at every try.
	if n := strings.Count(log, "Cleaning up..."); n != 1 {
		t.Errorf("Badger's error was logged %d times, want once:\n%s", n, log)
	}
}

// TestAuthLoginOnFullOrReadOnlyDataFolder: `auth login` on a data folder
// that cannot take the login file (a full tmpfs, a read-only mount; inside
// `unshare -rm`) fails before it prints the authorization URL, with the
// fix. It used to send the user to the browser and lose the approval when
// the save failed (on a full disk), or fail after the URL (read-only).
func TestAuthLoginOnFullOrReadOnlyDataFolder(t *testing.T) {
	requireMountNamespace(t)
	script := brokenFolderScript(`mkdir -p "$base/data/auth"`, `exec "$@"`)
	as := oauthtest.NewAuthServer(t)
	rs := oauthtest.NewResourceServer(t, as, backendtest.NewServer(backendtest.ParseModes("normal")), nil)
	cfgPath := remoteConfig(t, "remote", rs.URL)
	for _, how := range brokenDataFolders {
		t.Run(how.name, func(t *testing.T) {
			base := t.TempDir()
			out, errOut := runOnBrokenFolder(t, script, base, how.name, toolgateCmd(t, filepath.Join(base, "data"), "auth", "login", "remote", "--config", cfgPath, "--no-browser", "--timeout", "30s"))
			if strings.Contains(out, "open this URL") || !strings.Contains(errOut, "it could not be saved, so it is not started") || !strings.Contains(errOut, how.want) {
				t.Errorf("auth login on a %s data folder:\nstdout:\n%s\nstderr:\n%s\nwant no authorization URL, the reason and %q", how.name, out, errOut, how.want)
			}
		})
	}
}

// TestStatusWhileKeysUnreadable: a gateway whose key file breaks while it
// runs refuses every request (503, fail closed); `toolgate status` says so
// with exit status 3, where it said no gateway answered (exit 1) and asked
// whether --addr names a toolgate at all.
func TestStatusWhileKeysUnreadable(t *testing.T) {
	data := t.TempDir()
	out, err := toolgateCmd(t, data, "keys", "create", "--name", "ops").Output()
	if err != nil {
		t.Fatalf("keys create: %v", err)
	}
	secret := ""
	for f := range strings.FieldsSeq(string(out)) {
		if strings.HasPrefix(f, "tg_") {
			secret = f
		}
	}
	t.Setenv("TOOLGATE_KEY", secret)
	addr := freeAddr(t)
	startServe(t, toolgateCmd(t, data, "serve", "--config", fakeConfig(t, map[string]string{"fake": backendtest.ModeNormal}, nil), "--http", addr), addr)
	var buf bytes.Buffer
	if err := runStatus(context.Background(), &buf, statusFlags{addr: addr}); err != nil {
		t.Fatalf("toolgate status before: %v\n%s", err, buf.String())
	}
	if err := os.WriteFile(dirs.Keys(data), []byte("{\"name\": \"ops\", \"sha256\": \"cut sh"), 0o600); err != nil {
		t.Fatal(err)
	}
	buf.Reset()
	err = runStatus(context.Background(), &buf, statusFlags{addr: addr})
	var ee exitError
	if !errors.As(err, &ee) || ee.code != degradedExit || !strings.Contains(err.Error(), "the gateway runs but cannot read its API keys") || strings.Contains(err.Error(), "check --addr") {
		t.Errorf("toolgate status with the keys unreadable = %v, want exit %d saying why", err, degradedExit)
	}
}

// TestStatusPinsFaultWhileServing: a quarantine pins file corrupted while
// serve runs keeps the last decisions (fail closed) but was invisible:
// GET /status and `toolgate status` said nothing. It is a degraded state
// (exit 3) naming the file, why and the fix, and clears itself once the
// file reads again.
func TestStatusPinsFaultWhileServing(t *testing.T) {
	data := t.TempDir()
	pins := dirs.Pins(data)
	addr := freeAddr(t)
	startServe(t, toolgateCmd(t, data, "serve", "--config", fakeConfig(t, map[string]string{"fake": backendtest.ModeNormal}, nil), "--http", addr), addr)
	status := func() (string, error) {
		var buf bytes.Buffer
		err := runStatus(context.Background(), &buf, statusFlags{addr: addr})
		return buf.String(), err
	}
	var good []byte
	testenv.Eventually(t, "the fake server's tools pinned", func() bool {
		good, _ = os.ReadFile(pins)
		return bytes.Contains(good, []byte("fake__echo"))
	})
	if out, err := status(); err != nil || strings.Contains(out, "quarantine pins") {
		t.Fatalf("toolgate status before: %v\n%s", err, out)
	}
	if err := os.WriteFile(pins, good[:len(good)/2], 0o600); err != nil {
		t.Fatal(err)
	}
	var out string
	var err error
	testenv.Eventually(t, "toolgate status reports the pins file", func() bool {
		out, err = status()
		return strings.Contains(out, "quarantine pins:")
	})
	var ee exitError
	if !errors.As(err, &ee) || ee.code != degradedExit || !strings.Contains(err.Error(), "the quarantine pins file cannot be read") {
		t.Errorf("toolgate status with a torn pins file = %v, want exit %d saying why", err, degradedExit)
	}
	for _, want := range []string{pins + " CANNOT BE READ since", "fix: restore " + pins + " from a backup"} {
		if !strings.Contains(out, want) {
			t.Errorf("toolgate status lacks %q:\n%s", want, out)
		}
	}
	if err := os.WriteFile(pins, good, 0o600); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, "toolgate status healthy once the pins file is mended", func() bool {
		out, err = status()
		return err == nil && !strings.Contains(out, "quarantine pins")
	})
}

// TestServeWithoutInotify: a user whose inotify instances are spent (the
// limit is 0 in a user namespace of the gateway's own) still gets a
// gateway that serves; the log names the limit to raise for each file it
// cannot follow, and SIGHUP applies a config change meanwhile.
func TestServeWithoutInotify(t *testing.T) {
	addr := freeAddr(t)
	cfg := fakeConfig(t, map[string]string{"fake": backendtest.ModeNormal}, nil)
	cmd := toolgateCmd(t, t.TempDir(), "serve", "--config", cfg, "--http", addr)
	// A shell in the namespace lowers its limit, then becomes the gateway.
	cmd.Args = append([]string{"sh", "-c", `echo 0 > /proc/sys/user/max_inotify_instances && exec "$0" "$@"`}, cmd.Args...)
	cmd.Path = "/bin/sh"
	cmd.SysProcAttr = testenv.OwnUserNamespace()
	var logs testenv.LogBuffer
	cmd.Stderr = io.MultiWriter(&logs, testLog(t, "toolgate: "))
	if err := cmd.Start(); err != nil {
		testenv.Missing(t, testenv.NoUserNamespace, err)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-exited
	})
	waitHealthy(t, "http://"+addr+"/healthz", 3*time.Minute)

	var doc map[string]map[string]any
	b, err := os.ReadFile(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &doc); err != nil {
		t.Fatal(err)
	}
	doc["mcpServers"]["fake2"] = doc["mcpServers"]["fake"]
	b, err = json.Marshal(doc)
	if err != nil {
		t.Fatal(err)
	}
	writeRaw(t, cfg, b, true)
	if err := cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	rep := waitStatus(t, addr, "the SIGHUP reload counted", func(s live.Stats) bool { return s.ReloadGeneration >= 1 })
	if r := rep.Stats.LastReload; r == nil || r.Trigger != "SIGHUP" || strings.Join(r.Added, ",") != "fake2" {
		t.Errorf("last reload %+v, want trigger SIGHUP adding fake2", r)
	}
	// A reload comes after every file is followed or said not to be (the
	// HTTP front answers before: /healthz does not wait for the index).
	log := logs.String()
	for _, meanwhile := range []string{"send SIGHUP to reload it", "`toolgate servers enable/disable` applies on the next start", "approvals (`toolgate tools approve`)"} {
		if !strings.Contains(log, "cannot watch the file for changes; trying again every 10s; meanwhile "+meanwhile) {
			t.Errorf("no warning that says %q", meanwhile)
		}
	}
	if !strings.Contains(log, "fs.inotify.max_user_instances") || !strings.Contains(log, "user.max_inotify_instances is 0") {
		t.Errorf("the warnings do not name the limit to raise:\n%s", log)
	}
	stopsClean(t, cmd, exited, "without inotify")
}

// A stdio server starts again (a restart asked for, a crash) after the
// toolgate binary that serves it was removed or replaced, as an upgrade, a
// rebuild or an uninstall does under a running gateway: each start runs
// the reaper from the running binary itself, where it ran the path, which
// then named no file ("start node: fork/exec /usr/bin/toolgate: no such
// file or directory", the server down for good).
func TestBackendStartsAfterTheBinaryIsRemoved(t *testing.T) {
	cfg := fakeConfig(t, map[string]string{"fake": backendtest.ModeNormal}, map[string]any{"learn": map[string]any{"enabled": false}})
	data := t.TempDir()
	exe := filepath.Join(t.TempDir(), "toolgate")
	b, err := os.ReadFile(os.Args[0])
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(exe, b, 0o755); err != nil {
		t.Fatal(err)
	}
	serve := toolgateCmd(t, data, "serve", "--config", cfg, "--mode", "bm25")
	serve.Path, serve.Args[0] = exe, exe
	serve.Stderr = testLog(t, "serve: ")
	ctx, cs := connectStdio(t, serve, 3*time.Minute)
	if err := os.Remove(exe); err != nil {
		t.Fatal(err)
	}
	if out, err := toolgateCmd(t, data, "servers", "restart", "fake").CombinedOutput(); err != nil {
		t.Fatalf("servers restart fake after the binary was removed: %v\n%s", err, out)
	}
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "execute_tool", Arguments: map[string]any{"name": "fake__echo", "arguments": map[string]any{"text": "hi"}}})
	if err != nil || res.IsError {
		t.Fatalf("a call after the restart: %v %+v", err, res)
	}
}

// A config with no servers yet serves the management tools, says so in
// its log, and starts a server added to the file while it runs; removing
// the last one stops it. `{"mcpServers": {}}` used to be refused ("is
// empty: add at least one server"), and `servers remove` of the last
// server wrote nothing.
func TestServeWithNoServersYet(t *testing.T) {
	cfg := filepath.Join(t.TempDir(), "servers.json")
	if err := os.WriteFile(cfg, []byte(`{"mcpServers": {}, "toolgate": {"learn": {"enabled": false}}}`), 0o644); err != nil {
		t.Fatal(err)
	}
	data := t.TempDir()
	serve := toolgateCmd(t, data, "serve", "--config", cfg, "--mode", "bm25")
	var log testenv.LogBuffer
	serve.Stderr = &log
	ctx, cs := connectStdio(t, serve, 3*time.Minute)
	testenv.Eventually(t, "the warning", func() bool { return strings.Contains(log.String(), "the config has no servers yet") })
	// The backends' names and states, and the tools the index serves.
	state := func() ([]string, int) {
		out, _, _ := runToolgate(t, data, "status", "--json")
		var names []string
		tools := -1
		for _, rep := range decodeReports(t, out) {
			for _, b := range rep.Backends {
				names = append(names, b.Name+":"+string(b.State))
			}
			if rep.Stats != nil {
				tools = rep.CatalogTools
			}
		}
		return names, tools
	}
	_, own := state() // the management tools
	if own <= 0 {
		t.Fatalf("the gateway's own tools: %d", own)
	}
	fake := backendtest.Command(t, backendtest.ModeNormal)
	args := []string{"servers", "add", "fake", "--config", cfg}
	for k, v := range fake.Env {
		args = append(args, "--env", k+"="+v)
	}
	if out, err := toolgateCmd(t, data, append(args, "--", fake.Command)...).CombinedOutput(); err != nil {
		t.Fatalf("servers add: %v\n%s", err, out)
	}
	testenv.Eventually(t, "fake up and its 3 tools indexed", func() bool {
		names, tools := state()
		return slices.Equal(names, []string{"fake:up"}) && tools == own+3
	})
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "execute_tool", Arguments: map[string]any{"name": "fake__echo", "arguments": map[string]any{"text": "hi"}}})
	if err != nil || res.IsError {
		t.Fatalf("a call to the added server: %v %v", err, res.Content[0].(*mcp.TextContent).Text)
	}
	if out, err := toolgateCmd(t, data, "servers", "remove", "fake", "--config", cfg).CombinedOutput(); err != nil {
		t.Fatalf("servers remove of the last server: %v\n%s", err, out)
	}
	testenv.Eventually(t, "no backend, and its tools gone", func() bool {
		names, tools := state()
		return len(names) == 0 && tools == own
	})
}

// TestFollowersStopQuietly: `logs -f` and `audit tail -f` told to stop
// (Ctrl-C, SIGTERM) end with exit status 0 and nothing on stderr. They
// used to log the stop's "stopping: SIGTERM; a second signal exits at
// once" there, in the format of the gateway's lines they print, so it read
// as the gateway stopping.
func TestFollowersStopQuietly(t *testing.T) {
	data := t.TempDir()
	// A gateway's status socket and log, served by this test (logs -f
	// follows any gateway on the data folder) ...
	ring := logGateway(t, data, 10)
	fmt.Fprintln(ring, `level=INFO msg="gateway ready"`)
	// ... and an audit record.
	if err := audit.Append(dirs.Audit(data), audit.Record{Action: "keys create", Decision: audit.Allowed, Outcome: audit.OK}); err != nil {
		t.Fatal(err)
	}
	for _, sig := range []os.Signal{syscall.SIGTERM, os.Interrupt} {
		for _, args := range [][]string{{"logs", "-f", "-n", "1"}, {"audit", "tail", "-f", "-n", "1"}} {
			follow := toolgateCmd(t, data, args...)
			var stderr testenv.LogBuffer
			out, err := follow.StdoutPipe()
			if err != nil {
				t.Fatal(err)
			}
			follow.Stderr = &stderr
			if err := follow.Start(); err != nil {
				t.Fatal(err)
			}
			// Its first line printed: it follows, its signals caught.
			if _, err := bufio.NewReader(out).ReadString('\n'); err != nil {
				t.Fatalf("%v printed no line: %v\n%s", args, err, stderr.String())
			}
			if err := follow.Process.Signal(sig); err != nil {
				t.Fatal(err)
			}
			if err := follow.Wait(); err != nil || stderr.String() != "" {
				t.Errorf("%v after %v: %v, stderr %q; want exit status 0 and nothing on stderr", args, sig, err, stderr.String())
			}
		}
	}
}

// TestConfigChangeOnFullOrReadOnlyConfigFolder: toolgate__add_server
// whose config file cannot be written (its folder a full tmpfs, or a
// read-only mount; inside `unshare -rm`) answers that the server is not
// added, why and the fix, as `toolgate servers add` and
// toolgate__disable_server do, and adds nothing. It passed the bare write
// error on (`add_server: write …: no space left on device`).
func TestConfigChangeOnFullOrReadOnlyConfigFolder(t *testing.T) {
	requireMountNamespace(t)
	const script = `
set -u
dir=$1; how=$2; shift 2
mount -t tmpfs -o size=1m tmpfs "$dir" || exit 90
printf '%s' "$CFG" > "$dir/toolgate.json" || exit 91
case "$how" in
  full) dd if=/dev/zero of="$dir/filler" bs=4k 2>/dev/null; true ;;
  ro) mount --bind "$dir" "$dir" && mount -o remount,bind,ro "$dir" || exit 92 ;;
esac
exec "$@"
`
	for _, how := range []struct{ name, want string }{
		{"full", "fix: free space on the file system of "},
		{"ro", " is on a read-only file system: remount it read-write"},
	} {
		t.Run(how.name, func(t *testing.T) {
			dir := t.TempDir()
			tg := toolgateCmd(t, t.TempDir(), "serve", "--config", filepath.Join(dir, "toolgate.json"), "--mode", "bm25")
			cmd := exec.Command("unshare", append([]string{"-rm", "sh", "-c", script, "sh", dir, how.name}, tg.Args...)...)
			cmd.Env = append(tg.Env, `CFG={"mcpServers": {}, "toolgate": {"learn": {"enabled": false}, "management": {"allowConfigChanges": true}}}`)
			cmd.Stderr = testLog(t, "toolgate: ")
			ctx, cs := connectStdio(t, cmd, 3*time.Minute)
			res := executeTool(t, ctx, cs, "toolgate__add_server", map[string]any{"name": "extra", "command": "sh", "args": []string{"-c", "true"}})
			text := resultText(res)
			if !res.IsError || !strings.Contains(text, `server "extra" is not added: the config file cannot be written (`) ||
				!strings.Contains(text, how.want) || !strings.Contains(text, "then call toolgate__add_server again") {
				t.Errorf("add_server on a %s config folder: isError=%v %s\nwant: not added, why, %q and to call it again", how.name, res.IsError, text, how.want)
			}
			if res := executeTool(t, ctx, cs, "toolgate__list_servers", map[string]any{}); strings.Contains(resultText(res), "extra") {
				t.Errorf("the server was added all the same: %s", resultText(res))
			}
		})
	}
}

// afterShell runs cmd from a shell that runs setup first (`umask 000`,
// `trap "" HUP` as nohup does), then execs it.
func afterShell(cmd *exec.Cmd, setup string) *exec.Cmd {
	cmd.Args = append([]string{"sh", "-c", setup + `; exec "$0" "$@"`}, cmd.Args...)
	cmd.Path = "/bin/sh"
	return cmd
}

// TestServeWarnsOfOpenStores: a data folder an earlier toolgate made, its
// stores' folders 0755, stays so (MkdirOwnerOnly keeps a folder that is
// there): serve says so once at start with the chmod, and changes no mode.
func TestServeWarnsOfOpenStores(t *testing.T) {
	data := filepath.Join(t.TempDir(), "data")
	for _, p := range []string{data, filepath.Join(data, "index"), filepath.Join(data, "learn")} {
		if err := os.MkdirAll(p, 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(p, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	cfg := filepath.Join(t.TempDir(), "servers.json")
	if err := os.WriteFile(cfg, []byte(`{"mcpServers": {}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	addr := freeAddr(t)
	g := startServe(t, toolgateCmd(t, data, "serve", "--config", cfg, "--http", addr), addr)
	logs := g.logs.String()
	want := fmt.Sprintf(`fix="chmod -R go= %s %s"`, filepath.Join(data, "index"), filepath.Join(data, "learn"))
	if n := strings.Count(logs, "folders of the data folder are open to every user of this machine"); n != 1 || !strings.Contains(logs, want) {
		t.Errorf("warned %d times, want once with %s:\n%s", n, want, logs)
	}
	if fi, err := os.Stat(filepath.Join(data, "learn")); err != nil || fi.Mode().Perm() != 0o755 {
		t.Errorf("learn/ is %v (%v), want left 0755 for the operator", fi.Mode(), err)
	}
}

// TestUmaskZeroOwnerOnly: under umask 000 (a container's, a service
// manager's) the data folder and every folder of it that serve or index
// makes are owner-only. The data folder was made 0755 and the stores'
// folders too, in which Badger made the learned pairs' and the cache's
// files 0666: any local user's to write (and under umask 022 to read: the
// queries searched).
func TestUmaskZeroOwnerOnly(t *testing.T) {
	ownerOnly := func(t *testing.T, data string) {
		t.Helper()
		entries, err := os.ReadDir(data)
		if err != nil {
			t.Fatal(err)
		}
		paths := []string{data}
		for _, e := range entries {
			if e.IsDir() {
				paths = append(paths, filepath.Join(data, e.Name()))
			}
		}
		for _, p := range paths {
			if fi, err := os.Stat(p); err != nil || fi.Mode().Perm()&0o077 != 0 {
				t.Errorf("%s: %v %v, want owner-only (0700)", p, fi.Mode(), err)
			}
		}
		if len(paths) < 2 {
			t.Errorf("the data folder holds no folder: %v", entries)
		}
	}
	t.Run("serve", func(t *testing.T) {
		data := filepath.Join(t.TempDir(), "data")
		addr := freeAddr(t)
		cfg := filepath.Join(t.TempDir(), "servers.json")
		if err := os.WriteFile(cfg, []byte(`{"mcpServers": {}}`), 0o600); err != nil {
			t.Fatal(err)
		}
		g := startServe(t, afterShell(toolgateCmd(t, data, "serve", "--config", cfg, "--http", addr), "umask 000"), addr)
		ctx, cs := g.connect(t)
		searchTools(t, ctx, cs, "list the servers", 3)
		for _, store := range []string{"learn", "cache/embeddings", "index", "audit"} {
			if _, err := os.Stat(filepath.Join(data, store)); err != nil {
				t.Errorf("serve made no %s: %v", store, err)
			}
		}
		ownerOnly(t, data)
	})
	t.Run("index", func(t *testing.T) {
		data := filepath.Join(t.TempDir(), "data")
		out, err := afterShell(toolgateCmd(t, data, "index", "--bm25-only", "--tools", writeToolsFile(t, t.TempDir(), 5, "")), "umask 000").CombinedOutput()
		if err != nil {
			t.Fatalf("index: %v\n%s", err, out)
		}
		ownerOnly(t, data)
	})
}

// TestStopUnderTimeout: `timeout` told to stop (its own SIGTERM, or its
// time up) sends the signal to the gateway and then to its process group,
// the gateway again, microseconds apart. The gateway took the second for an
// impatient one and exited at once (exit status 143, `second SIGTERM:
// exiting now, without finishing the stop`), its stores unclosed; it is now
// the same stop, which ends cleanly (exit status 0, passed on by timeout).
func TestStopUnderTimeout(t *testing.T) {
	timeout, err := exec.LookPath("timeout")
	if err != nil {
		t.Fatalf("coreutils' timeout is needed: %v", err)
	}
	cfg := filepath.Join(t.TempDir(), "servers.json")
	if err := os.WriteFile(cfg, []byte(`{"mcpServers": {}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	addr := freeAddr(t)
	serve := toolgateCmd(t, t.TempDir(), "serve", "--config", cfg, "--http", addr, "--mode", "bm25")
	serve.Args = append([]string{timeout, "1h"}, serve.Args...)
	serve.Path = timeout
	g := startServe(t, serve, addr)
	since := time.Now()
	g.signal(t, syscall.SIGTERM) // to timeout, which passes it on twice
	if code, _ := g.waitExit(t, since); code != 0 {
		t.Errorf("exit status %d under timeout, want 0 (a clean stop); log:\n%s", code, g.logs)
	}
	// The kernel merges the two when the first is still pending as the
	// second comes, so "taken as the same stop" is not always logged.
	if log := g.logs.String(); strings.Contains(log, "exiting now") {
		t.Errorf("log:\n%s", log)
	}
}

// TestServeWarnsOfTakenTwin: serve on 127.0.0.1:PORT while another program
// listens on [::1]:PORT warns that a client given localhost:PORT may reach
// that program, with the URL to give instead. It said nothing: a client
// that tries ::1 first got the other program's answers, and the gateway's
// log had no word of it.
func TestServeWarnsOfTakenTwin(t *testing.T) {
	other, err := net.Listen("tcp6", "[::1]:0")
	if err != nil {
		t.Fatalf("IPv6 loopback: %v", err)
	}
	defer other.Close()
	_, port, _ := net.SplitHostPort(other.Addr().String())
	cfg := filepath.Join(t.TempDir(), "servers.json")
	if err := os.WriteFile(cfg, []byte(`{"mcpServers": {}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	addr := "127.0.0.1:" + port
	g := startServe(t, toolgateCmd(t, t.TempDir(), "serve", "--config", cfg, "--http", addr, "--mode", "bm25"), addr)
	want := "another program listens on [::1]:" + port + ", the other loopback address of this port: a client given localhost:" + port
	if log := g.logs.String(); !strings.Contains(log, want) || !strings.Contains(log, "give clients http://"+addr+"/mcp rather than localhost") {
		t.Errorf("log lacks the warning %q:\n%s", want, log)
	}
}

// TestServerStartsAfterWorkingDirRemoved: toolgate's working directory
// (the folder its MCP client started it in: a project folder, a git
// worktree) removed while it runs left every stdio server without a cwd
// unable to start again: npx, uvx and Python ask for their folder at start
// and fail (`Error: ENOENT: no such file or directory, uv_cwd`), and the
// server stayed down with the fix `check command, args and env`. Such a
// server now starts in the folder made again at that path, else in /.
func TestServerStartsAfterWorkingDirRemoved(t *testing.T) {
	fake := backendtest.Command(t, backendtest.ModeNormal)
	// A server that needs its folder, as npm's does: it exits when it
	// cannot learn it.
	needsCwd := map[string]any{"command": "sh", "args": []string{"-c", `test -d "$(pwd -P)" || exit 1; exec "$0"`, fake.Command}, "env": fake.Env}
	doc, err := json.Marshal(map[string]any{"mcpServers": map[string]any{"fake": needsCwd}, "toolgate": map[string]any{"learn": map[string]any{"enabled": false}}})
	if err != nil {
		t.Fatal(err)
	}
	cfg := filepath.Join(t.TempDir(), "toolgate.json")
	if err := os.WriteFile(cfg, doc, 0o600); err != nil {
		t.Fatal(err)
	}
	data := t.TempDir()
	wd := filepath.Join(t.TempDir(), "project")
	if err := os.Mkdir(wd, 0o700); err != nil {
		t.Fatal(err)
	}
	serve := toolgateCmd(t, data, "serve", "--config", cfg, "--mode", "bm25")
	serve.Dir = wd
	var log testenv.LogBuffer
	serve.Stderr = io.MultiWriter(&log, testLog(t, "serve: "))
	ctx, cs := connectStdio(t, serve, 3*time.Minute)
	if err := os.Remove(wd); err != nil {
		t.Fatal(err)
	}
	if out, err := toolgateCmd(t, data, "servers", "restart", "fake").CombinedOutput(); err != nil {
		t.Fatalf("servers restart fake after toolgate's working directory was removed: %v\n%s", err, out)
	}
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "execute_tool", Arguments: map[string]any{"name": "fake__echo", "arguments": map[string]any{"text": "hi"}}})
	if err != nil || res.IsError {
		t.Fatalf("a call after the restart: %v %+v", err, res)
	}
	if !strings.Contains(log.String(), "toolgate's working directory "+wd+" was removed") {
		t.Errorf("the log does not say why the server starts elsewhere:\n%s", log.String())
	}
}

// TestConnectClientClosesStdoutMidCall: `toolgate connect` whose client
// closes its end of stdout while a call runs is gone at once, as serve
// is: exit 0, the call's request to the gateway ended. It waited for the
// call's answer to find stdout closed (with a callTimeout of 10 minutes:
// 10 minutes).
func TestConnectClientClosesStdoutMidCall(t *testing.T) {
	addr := freeAddr(t)
	cfg := fakeConfig(t, map[string]string{"fake": backendtest.ModeHang}, map[string]any{"callTimeout": "10m", "learn": map[string]any{"enabled": false}})
	data := t.TempDir()
	startServe(t, toolgateCmd(t, data, "serve", "--config", cfg, "--http", addr, "--mode", "bm25"), addr)
	var logs testenv.LogBuffer
	cmd := toolgateCmd(t, data, "connect", "--addr", addr)
	cmd.Stderr = io.MultiWriter(&logs, testLog(t, "connect: "))
	stdin, outR, exited, line, err := startPipedConnect(t, cmd, "gone")
	if err != nil || !strings.Contains(line, `"id":1`) {
		t.Fatalf("initialize through connect: %q, %v", line, err)
	}
	io.WriteString(stdin, `{"jsonrpc":"2.0","method":"notifications/initialized"}`+"\n")
	io.WriteString(stdin, `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"execute_tool","arguments":{"name":"fake__hang"}}}`+"\n")
	outR.Close()
	select {
	case <-exited:
	case <-time.After(testenv.Timeout):
		t.Fatalf("connect did not stop after its client closed stdout mid-call:\n%s", logs.String())
	}
	if ws := cmd.ProcessState.Sys().(syscall.WaitStatus); ws.Signaled() || ws.ExitStatus() != 0 {
		t.Errorf("connect exit %v after its client closed stdout, want status 0:\n%s", cmd.ProcessState, logs.String())
	}
	if !strings.Contains(logs.String(), "the stdio client closed stdout: stopping") {
		t.Errorf("the log does not say why connect stopped:\n%s", logs.String())
	}
}
