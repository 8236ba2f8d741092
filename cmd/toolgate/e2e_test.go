package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolgate/toolgate/gateway"
	"github.com/toolgate/toolgate/gateway/backend"
	"github.com/toolgate/toolgate/gateway/backend/backendtest"
	"github.com/toolgate/toolgate/gateway/mgmt"
	"github.com/toolgate/toolgate/internal/dirs"
	"github.com/toolgate/toolgate/internal/testenv"
)

// The test binary doubles as the toolgate binary: with TOOLGATE_E2E_MAIN set,
// or started with a toolgate verb instead of go test's -test.* flags (as a
// backend whose environment was filtered is), it runs main(), so the
// end-to-end tests drive real toolgate processes without a build step.
func TestMain(m *testing.M) {
	if backend.IsReaper() { // a backend's reaper: its environment is the backend's
		backend.ReaperMain()
	}
	if backendtest.IsChild() { // a fake backend started by a gateway under test
		backendtest.Main()
	}
	if os.Getenv(envConformanceClient) == "1" { // the conformance suite's client command
		os.Exit(conformanceClientMain(os.Args[1:]))
	}
	if os.Getenv("TOOLGATE_E2E_MAIN") == "1" || len(os.Args) > 1 && !strings.HasPrefix(os.Args[1], "-test.") {
		os.Args = append([]string{"toolgate"}, os.Args[1:]...)
		main()
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// repoRoot is the repository root (tests run in cmd/toolgate).
func repoRoot(t *testing.T) string {
	t.Helper()
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	return root
}

// bundledConfig writes a config with the bundled npm servers (as in
// examples/toolgate.json) plus extra entries, and returns its path.
func bundledConfig(t *testing.T, extra map[string]any) string {
	t.Helper()
	root := repoRoot(t)
	ex, err := os.ReadFile(filepath.Join(root, "examples", "toolgate.json"))
	if err != nil {
		t.Fatalf("read the bundled example config: %v", err)
	}
	if _, err := os.Stat(filepath.Join(root, "examples", "servers", "node_modules")); err != nil {
		testenv.Missing(t, "bundled npm servers are not installed in examples/servers/node_modules (make deps-servers)")
	}
	var cfg map[string]any
	if err := json.Unmarshal(ex, &cfg); err != nil {
		t.Fatal(err)
	}
	servers := cfg["mcpServers"].(map[string]any)
	for name, s := range servers {
		// Paths in the example are relative to its folder; the copy lives
		// elsewhere, so anchor cwd to the example's folder.
		m := s.(map[string]any)
		if cwd, ok := m["cwd"].(string); ok && !filepath.IsAbs(cwd) {
			m["cwd"] = filepath.Join(root, "examples", cwd)
		}
		servers[name] = m
	}
	for k, v := range extra {
		servers[k] = v
	}
	b, _ := json.MarshalIndent(cfg, "", "  ")
	path := filepath.Join(t.TempDir(), "toolgate.json")
	// The example keeps the memory graph in ${TOOLGATE_CONFIG_DIR}/sandbox:
	// give the copy its own, so tests never touch the user's sandbox.
	if err := os.MkdirAll(filepath.Join(filepath.Dir(path), "sandbox"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// installedModels is the user's models folder (installed by make deps),
// found as toolgate finds it without flags.
func installedModels() string { return dirs.Models("", "", dirs.Data("", "")) }

// toolgateCmd is an exec.Cmd running this test binary as toolgate.
func toolgateCmd(t *testing.T, dataDir string, args ...string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(os.Args[0], args...)
	// A fresh data folder per test, but the model files from the user's
	// models folder (installed by make deps), so ranking runs for real.
	cmd.Env = append(os.Environ(), "TOOLGATE_E2E_MAIN=1", "TOOLGATE_DATA_DIR="+dataDir, "TOOLGATE_MODELS_DIR="+installedModels())
	return cmd
}

// startLines starts cmd, its stderr going to the test log under prefix,
// and returns the lines of its stdout, the channel closed at the end of
// stdout (wait for the command once it is).
func startLines(t *testing.T, cmd *exec.Cmd, prefix string) <-chan string {
	t.Helper()
	pr, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = testLog(t, prefix)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	lines := make(chan string, 100)
	go func() {
		sc := bufio.NewScanner(pr)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
	}()
	return lines
}

// connectStdio connects a go-sdk client to cmd, a `toolgate serve` on
// stdio; the session is closed and its context cancelled when the test ends.
func connectStdio(t *testing.T, cmd *exec.Cmd, timeout time.Duration) (context.Context, *mcp.ClientSession) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	t.Cleanup(cancel)
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "e2e"}, nil).Connect(ctx, &mcp.CommandTransport{Command: cmd}, nil)
	if err != nil {
		t.Fatalf("connect to toolgate serve over stdio: %v", err)
	}
	t.Cleanup(func() { cs.Close() })
	return ctx, cs
}

// connectHTTP starts cmd, a `toolgate serve --http addr`, waits until it is
// healthy and connects a go-sdk client over streamable HTTP; the session is
// closed, its context cancelled and the gateway interrupted (and waited
// for) when the test ends.
func connectHTTP(t *testing.T, cmd *exec.Cmd, addr string, timeout time.Duration) (context.Context, *mcp.ClientSession) {
	t.Helper()
	startHTTP(t, cmd, addr, timeout)
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	t.Cleanup(cancel)
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "e2e"}, nil).Connect(ctx, &mcp.StreamableClientTransport{Endpoint: "http://" + addr + "/mcp"}, nil)
	if err != nil {
		t.Fatalf("connect to toolgate serve over HTTP: %v", err)
	}
	t.Cleanup(func() { cs.Close() })
	return ctx, cs
}

// startHTTP starts cmd, a `toolgate serve --http addr`, and waits until it
// is healthy; the gateway is interrupted (and waited for) when the test
// ends.
func startHTTP(t *testing.T, cmd *exec.Cmd, addr string, timeout time.Duration) {
	t.Helper()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Signal(os.Interrupt); _ = cmd.Wait() })
	waitHealthy(t, "http://"+addr+"/healthz", timeout)
}

// brokenServer exits at start-up after printing to stderr.
var brokenServer = map[string]any{"command": "sh", "args": []string{"-c", "echo 'fatal: cannot start' >&2; exit 3"}}

// TestEndToEnd drives a real toolgate process, with the real npm servers
// as backends, through a go-sdk client over stdio and over streamable HTTP
// with both protocol generations.
func TestEndToEnd(t *testing.T) {
	cfgPath := bundledConfig(t, map[string]any{"broken": brokenServer})
	dataDir := t.TempDir()

	t.Run("stdio", func(t *testing.T) {
		cmd := toolgateCmd(t, dataDir, "serve", "--config", cfgPath)
		cmd.Stderr = testLog(t, "toolgate: ")
		ctx, cs := connectStdio(t, cmd, 3*time.Minute)
		indexServed(t, ctx, cs) // a cold start past its wait answers "being built"
		// First, while nothing is learned yet (the calls below teach the
		// gateway): a request of two steps brings up the second step's
		// tool too, marked with the clause that found it (search/steps.go).
		const twoSteps = "store a new entity in the knowledge graph and then list the files in a directory"
		steps, _ := searchTools(t, ctx, cs, twoSteps, 5)
		found := false
		for _, x := range steps.Tools {
			found = found || x.Name == "filesystem__list_directory" && strings.Contains(x.Clause, "list the files in a directory")
		}
		if len(steps.Tools) == 0 || steps.Tools[0].Name != "memory__create_entities" || !found {
			t.Errorf("search_tools(%q) = %+v, want memory__create_entities first and filesystem__list_directory with its clause", twoSteps, steps.Tools)
		}
		exerciseGateway(t, ctx, cs)
	})

	t.Run("http", func(t *testing.T) {
		addr := runServeHTTP(t, dataDir, cfgPath)
		eachProtocol(t, addr, time.Minute, func() *mcp.Client { return mcp.NewClient(&mcp.Implementation{Name: "e2e"}, nil) }, exerciseGateway)
	})
}

// runServeHTTP runs `toolgate serve --config cfgPath --http` on a free
// loopback address until the test ends, and returns the address once the
// gateway is healthy.
func runServeHTTP(t *testing.T, dataDir, cfgPath string) string {
	t.Helper()
	addr := freeAddr(t)
	cmd := toolgateCmd(t, dataDir, "serve", "--config", cfgPath, "--http", addr)
	cmd.Stderr = testLog(t, "toolgate: ")
	startHTTP(t, cmd, addr, 3*time.Minute)
	return addr
}

// eachProtocol runs f in a subtest per protocol version (2025-11-25,
// 2026-07-28), with a client from newClient connected over streamable HTTP
// to the gateway at addr with that version, and a context of timeout.
func eachProtocol(t *testing.T, addr string, timeout time.Duration, newClient func() *mcp.Client, f func(t *testing.T, ctx context.Context, cs *mcp.ClientSession)) {
	t.Helper()
	for _, pv := range []string{"2025-11-25", "2026-07-28"} {
		t.Run(pv, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), timeout)
			defer cancel()
			cs, err := newClient().Connect(ctx, &mcp.StreamableClientTransport{Endpoint: "http://" + addr + "/mcp"}, &mcp.ClientSessionOptions{ProtocolVersion: pv})
			if err != nil {
				t.Fatalf("connect over HTTP with %s: %v", pv, err)
			}
			defer cs.Close()
			if got := cs.InitializeResult().ProtocolVersion; got != pv {
				t.Errorf("negotiated %s, want %s", got, pv)
			}
			f(t, ctx, cs)
		})
	}
}

func exerciseGateway(t *testing.T, ctx context.Context, cs *mcp.ClientSession) {
	t.Helper()
	lt, err := cs.ListTools(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tl := range lt.Tools {
		names = append(names, tl.Name)
	}
	slices.Sort(names)
	if !slices.Equal(names, []string{"execute_tool", "search_tools"}) {
		t.Fatalf("tools/list = %v, want exactly execute_tool and search_tools", names)
	}

	search := func(q string) []string {
		t.Helper()
		out, _ := searchTools(t, ctx, cs, q, 3)
		var ids []string
		for _, x := range out.Tools {
			ids = append(ids, x.Name)
		}
		t.Logf("search_tools(%q) [%s] → %v", q, out.Mode, ids)
		if out.Mode != "hybrid" {
			testenv.Missing(t, "search_tools ran in mode %q, not hybrid: a native piece is missing (see the gateway's log above)", out.Mode)
		}
		return ids
	}
	for q, want := range map[string]string{
		"store a new entity in the knowledge graph": "memory__create_entities",
		"list the files in a directory":             "filesystem__list_directory",
	} {
		if got := search(q); !slices.Contains(got, want) {
			t.Errorf("search_tools(%q) top 3 = %v, want %s among them", q, got, want)
		}
	}

	exec := func(name string, args map[string]any) *mcp.CallToolResult {
		t.Helper()
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "execute_tool", Arguments: map[string]any{"name": name, "arguments": args}})
		if err != nil {
			t.Fatalf("execute_tool(%s): protocol error %v", name, err)
		}
		return res
	}
	entity := fmt.Sprintf("Alice-%d", time.Now().UnixNano())
	res := exec("memory__create_entities", map[string]any{"entities": []any{map[string]any{"name": entity, "entityType": "person", "observations": []string{"works at Acme"}}}})
	if res.IsError || !strings.Contains(resultText(res), entity) {
		t.Errorf("memory__create_entities: isError=%v %s", res.IsError, resultText(res))
	}
	res = exec("filesystem__list_directory", map[string]any{"path": filepath.Join(repoRoot(t), "examples", "sandbox")})
	if res.IsError || !strings.Contains(resultText(res), "notes") {
		t.Errorf("filesystem__list_directory: isError=%v %s", res.IsError, resultText(res))
	}

	for _, tc := range []struct {
		name string
		args map[string]any
		want string
	}{
		{"memory__create_entitys", map[string]any{}, "Closest names: memory__create_entities"},
		{"filesystem__list_directory", map[string]any{"path": 42}, "do not match the tool's inputSchema"},
		// A server that never listed its tools: why it cannot run (down,
		// or still connecting at a warm start), not "unknown tool".
		{"broken__anything", map[string]any{}, `"broken__anything" cannot run: server "broken" is `},
	} {
		res := exec(tc.name, tc.args)
		if !res.IsError || !strings.Contains(resultText(res), tc.want) {
			t.Errorf("execute_tool(%s): isError=%v %q, want isError with %q", tc.name, res.IsError, resultText(res), tc.want)
		}
	}
	res, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: "search_tools", Arguments: map[string]any{"query": "  "}})
	if err != nil || !res.IsError || !strings.Contains(resultText(res), "query") {
		t.Errorf("empty query: err=%v isError=%v %s", err, res.IsError, resultText(res))
	}
	// The other backends keep serving after all those errors.
	res = exec("everything__echo", map[string]any{"message": "still here"})
	if res.IsError || !strings.Contains(resultText(res), "still here") {
		t.Errorf("everything__echo after errors: isError=%v %s", res.IsError, resultText(res))
	}
}

func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// waitHealthy waits until the gateway whose /healthz is url answers it,
// then until the gateway serves: /healthz answers from the moment the
// address is taken, and GET / (no key asked) answers "not ready:
// starting" until the gateway does (gateway.Starting), so a test's next
// request meets a gateway that serves, its status socket made.
func waitHealthy(t *testing.T, url string, within time.Duration) {
	t.Helper()
	waitAlive(t, url, within)
	root := strings.TrimSuffix(url, "/healthz") + "/"
	testenv.EventuallyWithin(t, within, "GET "+root+" answered by the gateway, not its start", func() bool {
		return serving(http.DefaultClient, root)
	})
}

// serving reports whether GET root, a gateway's front, is answered by the
// gateway rather than by its start (gateway.Starting: "not ready:
// starting").
func serving(c *http.Client, root string) bool {
	resp, err := c.Get(root)
	if err != nil {
		return false
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return !strings.HasPrefix(string(b), gateway.StartingPrefix)
}

// waitAlive waits until url, a gateway's /healthz, answers 200: the
// process has taken its address, and may still be starting.
func waitAlive(t *testing.T, url string, within time.Duration) {
	t.Helper()
	testenv.EventuallyWithin(t, within, url+" answering 200", func() bool {
		resp, err := http.Get(url)
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == 200
	})
}

// testLog keeps a child's stderr and writes it to the test log when the
// test ends, after the test's own messages: always with -v, else when the
// test failed. Forwarded line by line as it came, a chatty child's log (a
// backend's stderr) stood before the failure and hid it from CI's excerpt.
func testLog(t *testing.T, prefix string) io.Writer {
	w := &testenv.LogBuffer{}
	t.Cleanup(func() {
		if log := w.String(); log != "" && (t.Failed() || testing.Verbose()) {
			t.Logf("%slog:\n%s%s", prefix, prefix, strings.ReplaceAll(strings.TrimRight(log, "\n"), "\n", "\n"+prefix))
		}
	})
	return w
}

// TestWarmStartKeepsToolsOfDownBackend builds the index with every bundled
// server up, then serves a config in which the memory server cannot start:
// the gateway answers from the last catalog, memory's tools stay findable
// but are marked unavailable, execute_tool says why, and the other servers
// keep serving.
// TestWarmStartToolAddedSince: after a warm start, a tool its server has
// added since the index was built runs through execute_tool at once: the
// call waits for the server's connection and the re-index its listing
// asks for, as a call of a tool the index holds waits for the connection.
// It answered "unknown tool" until both were done.
func TestWarmStartToolAddedSince(t *testing.T) {
	dataDir := t.TempDir()
	cfg := filepath.Join(t.TempDir(), "toolgate.json")
	write := func(modes string, env ...string) {
		s := backendtest.Command(t, modes, env...)
		b, err := json.Marshal(map[string]any{"mcpServers": map[string]any{"fake": map[string]any{"command": s.Command, "env": s.Env}}})
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(cfg, b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write(backendtest.ModeNormal)
	if out, err := toolgateCmd(t, dataDir, "index", "--config", cfg).CombinedOutput(); err != nil {
		t.Fatalf("toolgate index --config: %v\n%s", err, out)
	}
	// The server now lists "shelves" too, and is slow to start: the call
	// comes before it has connected.
	write(backendtest.ModeNormal+","+backendtest.ModeListOutput, backendtest.EnvStartDelay+"=1s")
	cmd := toolgateCmd(t, dataDir, "serve", "--config", cfg)
	cmd.Stderr = testLog(t, "toolgate: ")
	ctx, cs := connectStdio(t, cmd, 2*time.Minute)
	res := executeTool(t, ctx, cs, "fake__shelves", nil)
	if res.IsError {
		t.Fatalf("execute_tool fake__shelves, a tool added since the index: %s", resultText(res))
	}
	if res := executeTool(t, ctx, cs, "fake__no_such", nil); !res.IsError || !strings.Contains(resultText(res), `unknown tool "fake__no_such"`) {
		t.Errorf("execute_tool fake__no_such: isError=%v %s", res.IsError, resultText(res))
	}
}

// TestWarmStartCallOfChangedTool: a call that comes before its server has
// connected (a warm start) waits for the connection, and is refused as
// quarantined when that connection lists the tool with another
// definition than the one pinned. It was decided before the wait, on the
// definition of the last run, and ran the changed tool, though the log
// said at the same moment that it was quarantined.
func TestWarmStartCallOfChangedTool(t *testing.T) {
	dataDir := t.TempDir()
	cfg := filepath.Join(t.TempDir(), "toolgate.json")
	write := func(env ...string) {
		s := backendtest.Command(t, backendtest.ModeNormal, env...)
		b, err := json.Marshal(map[string]any{"mcpServers": map[string]any{"fake": map[string]any{"command": s.Command, "env": s.Env}}})
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(cfg, b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	// A first run pins echo's definition, and leaves the catalog a warm
	// start serves.
	write()
	cmd := toolgateCmd(t, dataDir, "serve", "--config", cfg)
	cmd.Stderr = testLog(t, "toolgate (first run): ")
	ctx, cs := connectStdio(t, cmd, 2*time.Minute)
	if res := executeTool(t, ctx, cs, "fake__echo", map[string]any{"text": "hi"}); res.IsError {
		t.Fatalf("execute_tool fake__echo: %s", resultText(res))
	}
	cs.Close()
	// The server now describes echo otherwise, and is slow to start: the
	// call comes before it has connected.
	write(backendtest.EnvEchoDescription+"=Echo the given text back. Changed since it was pinned.", backendtest.EnvStartDelay+"=1s")
	cmd = toolgateCmd(t, dataDir, "serve", "--config", cfg)
	cmd.Stderr = testLog(t, "toolgate: ")
	ctx, cs = connectStdio(t, cmd, 2*time.Minute)
	res := executeTool(t, ctx, cs, "fake__echo", map[string]any{"text": "hi"})
	if !res.IsError || !strings.Contains(resultText(res), "fake__echo is quarantined: its definition changed since it was first seen or approved") {
		t.Errorf("execute_tool fake__echo, changed at the connection the call waited for: isError=%v %s", res.IsError, resultText(res))
	}
}

func TestWarmStartKeepsToolsOfDownBackend(t *testing.T) {
	dataDir := t.TempDir()
	good := bundledConfig(t, nil)
	out, err := toolgateCmd(t, dataDir, "index", "--config", good).CombinedOutput()
	if err != nil {
		t.Fatalf("toolgate index --config: %v\n%s", err, out)
	}
	if !strings.Contains(string(out), fmt.Sprintf("tools:        %d", 36+len(mgmt.Tools()))) {
		t.Logf("index output:\n%s", out)
	}

	broken := bundledConfig(t, map[string]any{"memory": brokenServer})
	cmd := toolgateCmd(t, dataDir, "serve", "--config", broken)
	logs := testLog(t, "toolgate: ")
	cmd.Stderr = logs
	ctx, cs := connectStdio(t, cmd, 2*time.Minute)

	found, _ := searchTools(t, ctx, cs, "store a new entity in the knowledge graph", 3)
	var hit bool
	for _, tl := range found.Tools {
		if tl.Name == "memory__create_entities" {
			hit = true
			// Right after start the memory server is connecting or
			// already down; either way the tool is marked.
			if tl.Unavailable == "" {
				t.Errorf("memory__create_entities not marked unavailable while its server cannot start: %+v", tl)
			}
		}
	}
	if !hit {
		t.Errorf("memory__create_entities missing from the warm catalog: %+v", found.Tools)
	}

	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "execute_tool", Arguments: map[string]any{"name": "memory__read_graph"}})
	if err != nil || !res.IsError || !strings.Contains(resultText(res), `server "memory"`) {
		t.Errorf("execute_tool on the down server: err=%v isError=%v %q", err, res.IsError, resultText(res))
	}
	// Wait until the other backends are up, then use one.
	testenv.Eventually(t, "everything__echo answering", func() bool {
		res, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: "execute_tool", Arguments: map[string]any{"name": "everything__echo", "arguments": map[string]any{"message": "warm"}}})
		return err == nil && !res.IsError
	})
	if err != nil || res.IsError || !strings.Contains(resultText(res), "warm") {
		t.Errorf("everything__echo: err=%v %s", err, resultText(res))
	}
}

// TestDegradedModeServesBM25 starts the gateway with a missing ONNX Runtime
// library: it keeps serving, search_tools says "mode": "bm25", and the log
// says so once. Once the library is installed where it looks (what
// scripts/fetch-onnxruntime.sh does last), it loads it and ranks hybrid,
// without a restart (it used to stay BM25-only until the client spawned it
// again).
func TestDegradedModeServesBM25(t *testing.T) {
	cfg, data := bundledConfig(t, nil), t.TempDir()
	lib := filepath.Join(t.TempDir(), "libonnxruntime.so.1")
	cmd := toolgateCmd(t, data, "serve", "--config", cfg, "--ort-lib", lib)
	var stderr testenv.LogBuffer
	cmd.Stderr = &stderr
	ctx, cs := connectStdio(t, cmd, 2*time.Minute)
	indexServed(t, ctx, cs) // a cold start past its wait answers "being built"
	for range 2 {
		out, res := searchTools(t, ctx, cs, "list the files in a directory", 3)
		if out.Mode != "bm25" || len(out.Tools) == 0 || out.Tools[0].Name != "filesystem__list_directory" {
			t.Errorf("degraded search: mode %q, tools %v; want bm25 with filesystem__list_directory first", out.Mode, out.Tools)
		}
		if !strings.Contains(resultText(res), "mode bm25") {
			t.Errorf("text rendering does not say the mode: %s", resultText(res))
		}
	}
	// `toolgate status` names the missing piece, not the index it left
	// without vectors.
	st, _, _ := runToolgate(t, data, "status", "--json")
	var rep gateway.StatusReport
	if err := json.Unmarshal([]byte(st), &rep); err != nil || rep.Search == nil || !rep.Search.BM25Only || !strings.Contains(rep.Search.Reason, "libonnxruntime.so.1") {
		t.Errorf("status of the degraded gateway: %v\n%s", err, st)
	}
	log := stderr.String()
	if n := strings.Count(log, "semantic ranking is off"); n != 1 {
		t.Errorf("the log says semantic ranking is off %d times, want once:\n%s", n, log)
	}
	if !strings.Contains(log, "until the ONNX Runtime library is installed") || !strings.Contains(log, lib) {
		t.Errorf("the log does not name the missing piece:\n%s", log)
	}

	hybridOnceInstalled(t, ctx, cs, "the runtime", dirs.ORTLib("", ""), lib)
	st, _, _ = runToolgate(t, data, "status", "--json")
	rep = gateway.StatusReport{}
	if err := json.Unmarshal([]byte(st), &rep); err != nil || rep.Search == nil || rep.Search.BM25Only || rep.Search.Mode != "hybrid" {
		t.Errorf("status once the runtime came: %v\n%s", err, st)
	}
}

// TestDuplicateToolNames: a backend that lists a tool name twice is served
// with the first of the two, beside the other servers, and the log says so
// once. The index refuses a catalog with an ID twice, so that listing used
// to stop a cold start ("tool "dup__echo" listed twice"), the whole gateway
// with it.
func TestDuplicateToolNames(t *testing.T) {
	data := t.TempDir()
	cfg := fakeConfig(t, map[string]string{"dup": backendtest.ModeDuplicateNames, "fine": backendtest.ModeNormal}, nil)
	cmd := toolgateCmd(t, data, "serve", "--config", cfg)
	var stderr testenv.LogBuffer
	cmd.Stderr = &stderr
	ctx, cs := connectStdio(t, cmd, 2*time.Minute)
	indexServed(t, ctx, cs) // a cold start past its wait answers "being built"
	ans, _ := searchTools(t, ctx, cs, "echo a message back", 10)
	var echoes []string
	for _, x := range ans.Tools {
		if strings.HasSuffix(x.Name, "__echo") {
			echoes = append(echoes, x.Name)
		}
	}
	if slices.Sort(echoes); !slices.Equal(echoes, []string{"dup__echo", "fine__echo"}) {
		t.Errorf("search_tools found the echo tools %v, want dup__echo and fine__echo once each:\n%s", echoes, stderr.String())
	}
	res := executeTool(t, ctx, cs, "dup__echo", map[string]any{"text": "hi"})
	if res.IsError || !strings.Contains(resultText(res), "hi") {
		t.Errorf("dup__echo: %s", resultText(res))
	}
	if log := stderr.String(); strings.Count(log, "lists a tool name more than once") != 1 || !strings.Contains(log, "tools=echo") {
		t.Errorf("the log does not say once that dup lists echo twice:\n%s", log)
	}
}

// TestModelFetchedWhileServing starts the gateway before the model is
// installed (a first run before `toolgate models fetch`): it serves BM25,
// and once the model's files are in its models folder it loads them and
// re-indexes with their vectors, without a restart. It used to stay
// BM25-only until the client spawned it again.
func TestModelFetchedWhileServing(t *testing.T) {
	models, data := t.TempDir(), t.TempDir()
	cmd := toolgateCmd(t, data, "serve", "--config", bundledConfig(t, nil))
	cmd.Env = append(cmd.Env, "TOOLGATE_MODELS_DIR="+models)
	var stderr testenv.LogBuffer
	cmd.Stderr = &stderr
	ctx, cs := connectStdio(t, cmd, 3*time.Minute)
	indexServed(t, ctx, cs) // a cold start past its wait answers "being built"
	if out, _ := searchTools(t, ctx, cs, "list the files in a directory", 3); out.Mode != "bm25" {
		t.Fatalf("search before the model is installed: mode %q, want bm25", out.Mode)
	}
	if !strings.Contains(stderr.String(), "semantic ranking is off until the embedding model is installed") {
		t.Errorf("the log does not say why ranking is BM25-only:\n%s", stderr.String())
	}
	// `toolgate status` says so too, with the fix, and calls it degraded.
	st, errOut, err := runToolgate(t, data, "status")
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != degradedExit || !strings.Contains(errOut, "search runs BM25 only") ||
		!strings.Contains(st, "search: BM25 ONLY (configured hybrid): model file not found at "+filepath.Join(models, "all-MiniLM-L6-v2")) ||
		!strings.Contains(st, "toolgate models fetch") {
		t.Errorf("status before the model is installed: %v\n%s%s", err, st, errOut)
	}
	hybridOnceInstalled(t, ctx, cs, "the model", filepath.Join(installedModels(), "all-MiniLM-L6-v2"), filepath.Join(models, "all-MiniLM-L6-v2"))
	if !strings.Contains(stderr.String(), "re-indexing with its vectors") {
		t.Errorf("the log does not say the model came:\n%s", stderr.String())
	}
	st, errOut, err = runToolgate(t, data, "status", "--json")
	var rep gateway.StatusReport
	if jerr := json.Unmarshal([]byte(st), &rep); err != nil || jerr != nil || rep.Search == nil ||
		rep.Search.Mode != "hybrid" || rep.Search.BM25Only || !strings.HasPrefix(rep.Search.Model, "all-MiniLM-L6-v2/") {
		t.Errorf("status once the model came: %v %v\n%s%s", err, jerr, st, errOut)
	}
}

// hybridOnceInstalled puts what (the installed copy at from) at path, as an
// install does last (the files appear whole), and waits for the gateway
// on cs to rank hybrid, with the right tool first.
func hybridOnceInstalled(t *testing.T, ctx context.Context, cs *mcp.ClientSession, what, from, path string) {
	t.Helper()
	if err := os.Symlink(from, path); err != nil {
		t.Fatal(err)
	}
	var out searchAnswer
	testenv.EventuallyWithin(t, 2*time.Minute, "search_tools ranking with "+what, func() bool {
		out, _ = searchTools(t, ctx, cs, "list the files in a directory", 3)
		return out.Mode == "hybrid"
	})
	if len(out.Tools) == 0 || out.Tools[0].Name != "filesystem__list_directory" {
		t.Errorf("hybrid search once %s came: %+v", what, out.Tools)
	}
}

// TestSIGKILLLeavesNoBackendProcess SIGKILLs a real gateway whose backend
// started a grandchild that ignores stdin EOF and left the process group's
// reach: every process of every backend's tree must go with the gateway.
func TestSIGKILLLeavesNoBackendProcess(t *testing.T) {
	root := repoRoot(t)
	everything := filepath.Join(root, "examples", "servers", "node_modules", "@modelcontextprotocol", "server-everything", "dist", "index.js")
	if _, err := os.Stat(everything); err != nil {
		testenv.Missing(t, "bundled npm servers are not installed (make deps-servers)")
	}
	cfg := map[string]any{"mcpServers": map[string]any{
		"everything": map[string]any{"command": "sh", "args": []string{"-c", "setsid sleep 3600 </dev/null >/dev/null 2>&1 & exec node " + everything + " stdio"}},
		"memory":     map[string]any{"command": "node", "args": []string{filepath.Join(root, "examples", "servers", "node_modules", "@modelcontextprotocol", "server-memory", "dist", "index.js")}, "env": map[string]string{"MEMORY_FILE_PATH": filepath.Join(t.TempDir(), "memory.jsonl")}},
	}}
	b, _ := json.Marshal(cfg)
	path := filepath.Join(t.TempDir(), "toolgate.json")
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
	addr := freeAddr(t)
	cmd := toolgateCmd(t, t.TempDir(), "serve", "--config", path, "--http", addr, "--ort-lib", "/nonexistent")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	waitHealthy(t, "http://"+addr+"/healthz", 2*time.Minute)
	// Wait for both backends to be up (and so for the grandchild to exist).
	testenv.Eventually(t, "both backends up in /status", func() bool {
		resp, err := http.Get("http://" + addr + "/status")
		if err != nil {
			return false
		}
		defer resp.Body.Close()
		var st struct{ Up, Total int }
		_ = json.NewDecoder(resp.Body).Decode(&st)
		return st.Total == 2 && st.Up == 2
	})
	tree := descendants(cmd.Process.Pid)
	var sleeper bool
	for _, pid := range tree {
		if c, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid)); strings.HasPrefix(string(c), "sleep\x003600") {
			sleeper = true
		}
	}
	if !sleeper || len(tree) < 3 {
		t.Fatalf("want the gateway's tree to hold both backends and the sleeping grandchild, got pids %v", tree)
	}
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()
	var alive []string
	if !testenv.Poll(testenv.Timeout, func() bool {
		alive = nil
		for _, pid := range tree {
			if st, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid)); err == nil && !strings.Contains(string(st), ") Z ") {
				c, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
				alive = append(alive, fmt.Sprintf("%d %q", pid, strings.ReplaceAll(string(c), "\x00", " ")))
			}
		}
		return len(alive) == 0
	}) {
		for _, pid := range tree {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
		t.Fatalf("processes outlived the SIGKILLed gateway: %v", alive)
	}
}

// descendants lists every process below pid, through /proc.
func descendants(pid int) []int {
	children := map[int][]int{}
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		p, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		st, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		// Fields after the command (which may hold spaces) start after ')'.
		fields := strings.Fields(string(st[strings.LastIndexByte(string(st), ')')+1:]))
		if len(fields) > 1 {
			if ppid, err := strconv.Atoi(fields[1]); err == nil {
				children[ppid] = append(children[ppid], p)
			}
		}
	}
	var out []int
	var walk func(int)
	walk = func(p int) {
		for _, c := range children[p] {
			out = append(out, c)
			walk(c)
		}
	}
	walk(pid)
	return out
}

// TestToolListChangeReachesSearch drives a backend that adds a tool at run
// time (notifications/tools/list_changed): the gateway re-indexes in the
// background and search_tools finds the new tool, while the two tools the
// client sees never change.
func TestToolListChangeReachesSearch(t *testing.T) {
	fake := backendtest.Command(t, backendtest.ModeToolsChange)
	cfg, _ := json.Marshal(map[string]any{"mcpServers": map[string]any{
		"fake": map[string]any{"command": fake.Command, "env": fake.Env},
	}})
	path := filepath.Join(t.TempDir(), "toolgate.json")
	if err := os.WriteFile(path, cfg, 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := toolgateCmd(t, t.TempDir(), "serve", "--config", path, "--mode", "bm25")
	cmd.Stderr = testLog(t, "toolgate: ")
	ctx, cs := connectStdio(t, cmd, 2*time.Minute)
	indexServed(t, ctx, cs) // found fails t while the index is being built

	found := func() bool {
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "search_tools", Arguments: map[string]any{"query": "zebra launcher", "limit": 3}})
		if err != nil || res.IsError {
			t.Fatalf("search_tools: %v %s", err, resultText(res))
		}
		return strings.Contains(resultText(res), "fake__zebra_launcher")
	}
	if found() {
		t.Fatal("fake__zebra_launcher found before the backend added it")
	}
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "execute_tool", Arguments: map[string]any{"name": "fake__add_tool", "arguments": map[string]any{"name": "zebra_launcher"}}})
	if err != nil || res.IsError {
		t.Fatalf("fake__add_tool: %v %s", err, resultText(res))
	}
	testenv.Eventually(t, "search_tools finding the tool the backend added (a re-index after tools/list_changed)", found)
	res, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: "execute_tool", Arguments: map[string]any{"name": "fake__zebra_launcher"}})
	if err != nil || res.IsError || resultText(res) != "zebra_launcher" {
		t.Errorf("the new tool: err=%v %q", err, resultText(res))
	}
	lt, err := cs.ListTools(ctx, nil)
	if err != nil || len(lt.Tools) != 2 {
		t.Errorf("tools/list changed: %v, %d tools", err, len(lt.Tools))
	}
}

// indexServed waits until the gateway serves its tool index, for a test
// on a new data folder that searches without retrying: a cold start
// slower than coldStartWait (a loaded machine) answers the handshake
// first, and search_tools waits for the index (coldStartWait at most,
// then it says how far the build is). execute_tool runs the listed tools
// meanwhile; it said there was no tool index yet.
func indexServed(t *testing.T, ctx context.Context, cs *mcp.ClientSession) {
	t.Helper()
	var err error
	if !testenv.Poll(testenv.Timeout, func() bool { _, err = callSearch(ctx, cs, "the tool index served", 1); return err == nil }) {
		t.Fatalf("the tool index not served within %s: %v", testenv.Timeout, err)
	}
}

// searchAnswer is the part of search_tools' structured answer the tests read.
type searchAnswer struct {
	Mode  string
	Tools []struct{ Name, Unavailable, Clause string }
}

// searchTools calls search_tools (callSearch) and decodes its structured
// answer; a failed call or an answer that does not decode fails t.
func searchTools(t *testing.T, ctx context.Context, cs *mcp.ClientSession, q string, limit int) (searchAnswer, *mcp.CallToolResult) {
	t.Helper()
	res, err := callSearch(ctx, cs, q, limit)
	if err != nil {
		t.Fatalf("search_tools(%q): %v", q, err)
	}
	var out searchAnswer
	b, _ := json.Marshal(res.StructuredContent)
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatalf("search_tools(%q): structured answer: %v", q, err)
	}
	return out, res
}

// searchFinds asks search_tools for q (top 5) and fails the test at once
// unless tool is among the answers.
func searchFinds(t *testing.T, ctx context.Context, cs *mcp.ClientSession, q, tool string) {
	t.Helper()
	ans, _ := searchTools(t, ctx, cs, q, 5)
	for _, x := range ans.Tools {
		if x.Name == tool {
			return
		}
	}
	t.Fatalf("search_tools(%q) did not return %s: %+v", q, tool, ans.Tools)
}
