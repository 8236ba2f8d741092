package main

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolgate/toolgate/gateway/audit"
	"github.com/toolgate/toolgate/gateway/backend/backendtest"
	"github.com/toolgate/toolgate/gateway/config"
	"github.com/toolgate/toolgate/index/catalog"
	"github.com/toolgate/toolgate/internal/testenv"
	"github.com/toolgate/toolgate/search"
)

type stubSearcher struct{ entered, release chan struct{} }

func (s stubSearcher) Search(context.Context, search.Query) (search.Result, error) {
	select {
	case s.entered <- struct{}{}:
	default:
	}
	<-s.release
	return search.Result{}, nil
}
func (stubSearcher) Tool(string) (catalog.Tool, bool) { return catalog.Tool{}, false }
func (stubSearcher) IDs() []string                    { return nil }

// A warm start's backends wait for the first search's answer (not its
// arrival), for at most the wait given, or until a call needs one.
func TestFirstSearchReleasesBackends(t *testing.T) {
	f := newFirstSearch()
	stub := stubSearcher{entered: make(chan struct{}), release: make(chan struct{})}
	s := f.searcher(stub)
	waited := make(chan struct{})
	go func() {
		f.wait(context.Background(), time.Hour)
		close(waited)
	}()
	answered := make(chan struct{})
	go func() {
		_, _ = s.Search(context.Background(), search.Query{Text: "q"})
		close(answered)
	}()
	<-stub.entered
	select {
	case <-f.done:
		t.Fatal("the backends were released while the first search was still running")
	default:
	}
	close(stub.release)
	<-answered
	<-waited // released by the answer; the hour never passes
	// Later searches and waits do not block on it again.
	_, _ = s.Search(context.Background(), search.Query{Text: "again"})
	f.wait(context.Background(), time.Hour)

	// No search: released after the wait given.
	newFirstSearch().wait(context.Background(), time.Millisecond)
	// A call that needs a backend ends the wait (StartAfter's context).
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	newFirstSearch().wait(ctx, time.Hour)
}

// heldServer is the config entry of fake's server, started only once the
// file gate exists (however long the test's steps take until then).
func heldServer(fake config.Server, gate string) map[string]any {
	return map[string]any{
		"command":        "sh",
		"args":           append([]string{"-c", `while [ ! -e "$0" ]; do sleep 0.05; done; exec "$@"`, gate, fake.Command}, fake.Args...),
		"env":            fake.Env,
		"connectTimeout": "10m",
	}
}

// TestColdStartAnswersWhileBuilding: a cold start whose first index takes
// long (here a backend that does not start until the test says so) answers
// the client's handshake anyway, after coldStartWait, and search_tools
// says the index is being built and to try again; once the backend is up
// and the index built, search_tools finds its tools. A client used to get
// no answer to initialize until the index was built (85 s at 10,000
// tools), and may give up after 60 s.
//
// Meanwhile execute_tool runs the tools the other servers listed and the
// management tools, with the checks of any call (the input schema, the
// quarantine, the audit log); it refused every tool, saying there was no
// tool index yet. An unknown name says the index is being built, with
// the closest names listed so far.
func TestColdStartAnswersWhileBuilding(t *testing.T) {
	fake := backendtest.Command(t, backendtest.ModeNormal)
	poison := backendtest.Command(t, backendtest.ModePoisoned)
	gate := filepath.Join(t.TempDir(), "go")
	// Held until the test says so, however long its steps take: the
	// default connect timeout (30 s) raced them (about 20 s: the
	// handshake's and the first search's waits of 10 s each), and once
	// past it the index was built without held, which the search while
	// held then found.
	held := heldServer(fake, gate)
	b, err := json.Marshal(map[string]any{"mcpServers": map[string]any{
		"held":   held,
		"fake":   map[string]any{"command": fake.Command, "args": fake.Args, "env": fake.Env},
		"poison": map[string]any{"command": poison.Command, "args": poison.Args, "env": poison.Env},
	}})
	if err != nil {
		t.Fatal(err)
	}
	data := t.TempDir()
	cmd := toolgateCmd(t, data, "serve", "--config", writeConfig(t, string(b)))
	var logs testenv.LogBuffer
	cmd.Stderr = io.MultiWriter(&logs, testLog(t, "toolgate: "))
	ctx, cs := connectStdio(t, cmd, 3*time.Minute) // answered while the backend is held
	execute := func(name string, args map[string]any) (bool, string) {
		t.Helper()
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "execute_tool", Arguments: map[string]any{"name": name, "arguments": args}})
		if err != nil {
			t.Fatal(err)
		}
		return res.IsError, resultText(res)
	}
	// The management tools run at once; fake and poison list within the
	// handshake's wait, unless the machine is slow to start them.
	testenv.Eventually(t, "fake and poison up", func() bool {
		_, txt := execute("toolgate__list_servers", nil)
		return strings.Contains(txt, "- fake: up") && strings.Contains(txt, "- poison: up")
	})
	for _, c := range []struct {
		name    string
		args    map[string]any
		isError bool
		want    string
	}{
		{"fake__echo", map[string]any{"text": "while building"}, false, "while building"},
		{"fake__echo", map[string]any{"text": 5}, true, "do not match the tool's inputSchema"},                 // the input schema's check
		{"poison__notes", map[string]any{"text": "x"}, true, "poison__notes is quarantined"},                   // flagged at its first listing
		{"poison__weather", map[string]any{"text": "Oslo"}, false, "weather: Oslo"},                            // clean
		{"toolgate__list_servers", map[string]any{}, false, "3 MCP servers behind this gateway"},               // management
		{"fake__ecko", map[string]any{}, true, "search_tools cannot look for it yet: the gateway is starting"}, // unknown
	} {
		isError, txt := execute(c.name, c.args)
		if isError != c.isError || !strings.Contains(txt, c.want) {
			t.Errorf("execute_tool %s %v while building: isError=%v %q, want isError=%v and %q", c.name, c.args, isError, txt, c.isError, c.want)
		}
	}
	if _, txt := execute("fake__ecko", nil); !strings.Contains(txt, "Closest names: fake__echo") {
		t.Errorf("an unknown name while building: %q, want the closest name listed so far", txt)
	}
	auditRecords(t, data, audit.Filter{}, func(rs []audit.Record) bool {
		return slices.ContainsFunc(rs, func(r audit.Record) bool { return r.Tool == "fake__echo" && r.Outcome == audit.OK }) &&
			slices.ContainsFunc(rs, func(r audit.Record) bool { return r.Tool == "poison__notes" && r.Decision == audit.Quarantined })
	})
	search := func() string {
		t.Helper()
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "search_tools", Arguments: map[string]any{"query": "echo the given text"}})
		if err != nil {
			t.Fatal(err)
		}
		if res.IsError {
			return "error: " + resultText(res)
		}
		return resultText(res)
	}
	if got := search(); !strings.Contains(got, "error: search_tools: the gateway is starting its servers to build the tool index (first start on this data folder); try again in a few seconds.") {
		t.Errorf("search_tools while the backend is held: %q, want that the index is being built", got)
	}
	if err := os.WriteFile(gate, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	var last string
	testenv.Eventually(t, "search_tools finds the backend's tool once the index is built", func() bool {
		last = search()
		return strings.Contains(last, "fake__echo")
	})
	if !strings.Contains(logs.String(), "cold start: answering the client while the index is built") {
		t.Errorf("the log does not say the index is built while the client is answered:\n%s", logs.String())
	}
}

// TestReadyzDuringColdStart: an orchestrator's probes (GET /healthz and
// /readyz, no key though the gateway has keys) answer from the moment the
// address is taken: /healthz 200 throughout (the process is alive), /readyz
// 503 with why, first the start's step ("not ready: starting: …", before
// the gateway serves), then, once it serves, that the first index of the
// cold start is being built (here a backend held until the test says so),
// and 200 once it is served. An MCP client that connects meanwhile is
// answered once the gateway serves, not refused; /status answers 503
// "not ready: starting: …" until then, which `toolgate status` says. The probes used to get no
// answer until the gateway served, up to 10 s into a cold start
// (coldStartWait): a liveness probe with a shorter timeout killed the pod.
func TestReadyzDuringColdStart(t *testing.T) {
	fake := backendtest.Command(t, backendtest.ModeNormal)
	gate := filepath.Join(t.TempDir(), "go")
	b, err := json.Marshal(map[string]any{"mcpServers": map[string]any{"held": heldServer(fake, gate)}})
	if err != nil {
		t.Fatal(err)
	}
	cfg := writeConfig(t, string(b))
	data := t.TempDir()
	key := createKey(t, data, "--name", "ci", "--config", cfg)
	addr := freeAddr(t)
	serve := toolgateCmd(t, data, "serve", "--config", cfg, "--http", addr, "--mode", "bm25")
	serve.Stderr = testLog(t, "toolgate: ")
	if err := serve.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = serve.Process.Signal(os.Interrupt); _ = serve.Wait() })
	waitAlive(t, "http://"+addr+"/healthz", 2*time.Minute)
	probe := func(path string) (int, string) {
		t.Helper()
		resp, body := getBody(t, "http://"+addr+path, "")
		return resp.StatusCode, body
	}
	// Within the start (coldStartWait, 10 s, with the backend held).
	if code, body := probe("/readyz"); code != http.StatusServiceUnavailable || !strings.HasPrefix(body, "not ready: starting: ") {
		t.Errorf("GET /readyz as soon as /healthz answers: %d %q, want 503 not ready: starting: …", code, body)
	}
	if code, body := probe("/healthz"); code != 200 || body != "ok\n" {
		t.Errorf("GET /healthz while starting: %d %q, want 200 ok", code, body)
	}
	// The other routes say so at once: `toolgate status --addr` said the
	// gateway took the connection and sent no answer, as if stuck.
	_, stderr, err := runToolgate(t, data, "status", "--addr", addr)
	if code := exitCode(err); code != degradedExit || !strings.Contains(stderr, "answered 503 Service Unavailable: the gateway is starting (not ready: starting: ") {
		t.Errorf("toolgate status --addr while the gateway starts: exit %d, %q; want %d saying it starts", code, stderr, degradedExit)
	}
	// The client's initialize waits for the gateway; answered, it serves.
	ctx, cancel := context.WithTimeout(context.Background(), testenv.Timeout)
	defer cancel()
	if _, err := connectKey(ctx, t, addr, "/mcp", key, "k8s-test"); err != nil {
		t.Fatalf("an MCP client connecting while the gateway starts: %v, want it answered once it serves", err)
	}
	if code, body := probe("/readyz"); code != http.StatusServiceUnavailable || !strings.Contains(body, "not ready: the gateway is starting its servers to build the tool index") {
		t.Errorf("GET /readyz while the backend is held: %d %q, want 503 saying the index is being built", code, body)
	}
	if code, _ := probe("/healthz"); code != 200 {
		t.Errorf("GET /healthz while the index is built: %d, want 200", code)
	}
	if err := os.WriteFile(gate, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, "GET /readyz 200 ready once the index is built", func() bool {
		code, body := probe("/readyz")
		return code == 200 && body == "ready\n"
	})
}
