package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolgate/toolgate/gateway/backend/backendtest"
	"github.com/toolgate/toolgate/internal/dirs"
	"github.com/toolgate/toolgate/internal/testenv"
)

// The interop tests against the official Python MCP SDK (PyPI `mcp`, pinned
// in scripts/python-requirements.txt and installed by `make deps-python`):
// its servers as toolgate's backends over stdio, streamable HTTP and SSE
// (testdata/pyserver.py), and its client driving `toolgate serve` over stdio
// and streamable HTTP (testdata/pyclient.py).

// The Python SDKs the tests run, each a requirements file of scripts/.
const (
	pythonV2 = "python-requirements.txt"    // mcp 2.x: client and servers
	pythonV1 = "python-requirements-v1.txt" // mcp 1.x: FastMCP servers, the initialize handshake only
)

// pythonSDK is the python of the venv scripts/install-python.sh builds for
// the requirements file req (pythonV2, pythonV1):
// <cache>/python/<sha256 of the file>/bin/python, complete once its stamp
// is written. Missing is a skip locally and a failure on CI.
func pythonSDK(t *testing.T, req string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(repoRoot(t), "scripts", req))
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(b)
	venv := filepath.Join(dirs.Cache(), "python", hex.EncodeToString(sum[:]))
	if _, err := os.Stat(filepath.Join(venv, ".toolgate-requirements.sha256")); err != nil {
		testenv.Missing(t, "the Python MCP SDK of scripts/%s is not installed (make deps-python): %v", req, err)
	}
	return filepath.Join(venv, "bin", "python")
}

// pyTestdata is the absolute path of a file in testdata.
func pyTestdata(t *testing.T, name string) string {
	t.Helper()
	p, err := filepath.Abs(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// startPyServer runs testdata/pyserver.py over transport ("streamable-http",
// "stateless-http" or "sse") on a free loopback port until the test ends, and returns its
// address once it accepts connections.
func startPyServer(t *testing.T, py, transport string) string {
	t.Helper()
	port := freePort(t)
	cmd := exec.Command(py, pyTestdata(t, "pyserver.py"), transport, port)
	logs := &testenv.LogBuffer{}
	cmd.Stdout, cmd.Stderr = logs, logs
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	t.Cleanup(func() {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		<-exited
		if t.Failed() {
			t.Logf("pyserver %s output:\n%s", transport, logs.String())
		}
	})
	addr := "127.0.0.1:" + port
	testenv.Eventually(t, "pyserver "+transport+" listening on "+addr, func() bool {
		select {
		case <-exited:
			t.Fatalf("pyserver %s exited:\n%s", transport, logs.String())
		default:
		}
		c, err := net.Dial("tcp", addr)
		if err != nil {
			return false
		}
		c.Close()
		return true
	})
	return addr
}

// foundTool reports whether search_tools' answer holds the tool name, and
// why it is unavailable ("" when it is not).
func foundTool(ans searchAnswer, name string) (unavailable string, ok bool) {
	for _, x := range ans.Tools {
		if x.Name == name {
			return x.Unavailable, true
		}
	}
	return "", false
}

// answerHas reports whether search_tools' answer holds the tool name.
func answerHas(ans searchAnswer, name string) bool {
	_, ok := foundTool(ans, name)
	return ok
}

// TestPythonBackends puts Python SDK servers behind toolgate, mcp 2.x's
// MCPServer (server/discover, protocol 2026-07-28) and mcp 1.x's FastMCP
// (the initialize handshake, 2025-11-25), each over stdio, streamable HTTP
// (with sessions, and stateless with JSON responses) and SSE: each server's
// tools are indexed and found by search_tools, and execute_tool runs a
// plain tool, a tool with an output schema (structuredContent passed
// through), a tool that raises (isError with its message), one that
// crashes, one that asks the user (isError: this client declares no
// elicitation), and one whose input schema has an enum and nested models
// ($defs/$ref), checked by toolgate before the call, with a 64-bit integer
// argument. A tool the server adds at run time (tools/list_changed) is
// re-indexed and runs.
func TestPythonBackends(t *testing.T) {
	servers := map[string]any{}
	var names []string
	for _, sdk := range []struct{ prefix, req string }{{"py", pythonV2}, {"v1", pythonV1}} {
		py := pythonSDK(t, sdk.req)
		servers[sdk.prefix+"stdio"] = map[string]any{"command": py, "args": []string{pyTestdata(t, "pyserver.py"), "stdio"}}
		servers[sdk.prefix+"http"] = map[string]any{"type": "http", "url": "http://" + startPyServer(t, py, "streamable-http") + "/mcp"}
		servers[sdk.prefix+"stateless"] = map[string]any{"type": "http", "url": "http://" + startPyServer(t, py, "stateless-http") + "/mcp"}
		servers[sdk.prefix+"sse"] = map[string]any{"type": "sse", "url": "http://" + startPyServer(t, py, "sse") + "/sse"}
		names = append(names, sdk.prefix+"stdio", sdk.prefix+"http", sdk.prefix+"stateless", sdk.prefix+"sse")
	}
	// mcp 1.x's stateless server sends its elicitation request on a stream
	// that does not exist and waits for ever: the call's deadline ends it.
	servers["v1stateless"].(map[string]any)["callTimeout"] = "3s"
	b, _ := json.Marshal(map[string]any{"mcpServers": servers})
	cfg := writeConfig(t, string(b))
	cmd := toolgateCmd(t, t.TempDir(), "serve", "--config", cfg, "--mode", "bm25")
	cmd.Stderr = testLog(t, "toolgate: ")
	ctx, cs := connectStdio(t, cmd, 3*time.Minute)
	indexServed(t, ctx, cs) // the searches below fail t while the index is being built

	for _, srv := range names {
		t.Run(srv, func(t *testing.T) {
			id := func(tool string) string { return srv + "__" + tool }
			// The gateway may answer before every backend is up.
			testenv.EventuallyWithin(t, 2*time.Minute, srv+"'s tools searchable", func() bool {
				ans, _ := searchTools(t, ctx, cs, "order library books for a reader by post", 20)
				unavailable, ok := foundTool(ans, id("order_books"))
				return ok && unavailable == ""
			})
			// Eight servers have the same tools: a limit that holds them all.
			if ans, _ := searchTools(t, ctx, cs, "count the books on a library shelf", 20); !answerHas(ans, id("shelf_report")) {
				t.Errorf("search_tools did not find %s: %+v", id("shelf_report"), ans.Tools)
			}
			// The arguments line reads the pydantic model's type through its $ref.
			if _, res := searchTools(t, ctx, cs, "order library books for a reader by post", 20); !strings.Contains(resultText(res), `args: delivery*: "pickup"|"post"|"locker", request*: {reader*, titles*, note}`) {
				t.Errorf("search_tools text for order_books:\n%s", resultText(res))
			}

			res := executeTool(t, ctx, cs, id("find_books"), map[string]any{"author": "Le Guin"})
			if res.IsError || !strings.Contains(resultText(res), "books by Le Guin") {
				t.Errorf("find_books: isError=%v %q", res.IsError, resultText(res))
			}

			res = executeTool(t, ctx, cs, id("shelf_report"), map[string]any{"shelf": "B2"})
			var report struct {
				Shelf    string
				Books    int
				Fullness float64
			}
			b, _ := json.Marshal(res.StructuredContent)
			if err := json.Unmarshal(b, &report); res.IsError || err != nil || report.Shelf != "B2" || report.Books != 42 || report.Fullness != 0.75 {
				t.Errorf("shelf_report: isError=%v structuredContent=%s (%v) %q", res.IsError, b, err, resultText(res))
			}

			res = executeTool(t, ctx, cs, id("renew_loan"), map[string]any{"loan_id": "L-7"})
			if !res.IsError || !strings.Contains(resultText(res), "loan L-7 is overdue and cannot be renewed") {
				t.Errorf("renew_loan (raises ToolError): isError=%v %q, want isError with its message", res.IsError, resultText(res))
			}
			res = executeTool(t, ctx, cs, id("reshelve_crash"), map[string]any{"shelf": "B2"})
			if !res.IsError || !strings.Contains(resultText(res), "reshelve_crash") {
				t.Errorf("reshelve_crash (raises RuntimeError): isError=%v %q", res.IsError, resultText(res))
			}

			// This client declares no elicitation, and toolgate declares
			// none to 2025-11-25 backends (README): a tool that asks the
			// user (ctx.elicit, an Elicit resolver) is an isError that says
			// so, not a hang. TestPythonBackendsAsk has a client that answers.
			res = executeTool(t, ctx, cs, id("withdraw_book"), map[string]any{"title": "Dune"})
			want := "elicitation"
			if srv == "v1stateless" {
				want = "the call timed out"
			}
			if !res.IsError || !strings.Contains(resultText(res), want) {
				t.Errorf("withdraw_book (asks the user): isError=%v %q, want isError with %q", res.IsError, resultText(res), want)
			}

			order := func(delivery string, reader map[string]any) *mcp.CallToolResult {
				return executeTool(t, ctx, cs, id("order_books"), map[string]any{
					"delivery": delivery,
					"request":  map[string]any{"reader": reader, "titles": []string{"Dune", "Emma"}},
				})
			}
			res = order("locker", map[string]any{"name": "Ada", "card": 7})
			if res.IsError || resultText(res) != "2 book(s) for Ada (card 7) by locker" {
				t.Errorf("order_books: isError=%v %q", res.IsError, resultText(res))
			}
			// Python's int has no bound: a card number past 2^53 arrives
			// with every digit (a float64 on the way would round it).
			res = order("post", map[string]any{"name": "Ada", "card": json.Number("12345678901234567891")})
			if res.IsError || resultText(res) != "2 book(s) for Ada (card 12345678901234567891) by post" {
				t.Errorf("order_books with a 64-bit card number: isError=%v %q", res.IsError, resultText(res))
			}
			// toolgate checks the arguments against the schema, $refs
			// resolved, before the backend sees them, and names the nested
			// argument at fault; its example call has the models' shape.
			// The example keeps what was sent and right.
			placeholders := `"request":{"reader":{"card":1,"name":"<name>"},"titles":["<title>"]}`
			for _, bad := range []struct {
				delivery string
				reader   map[string]any
				want     string
				example  string
			}{
				{"drone", map[string]any{"name": "Ada", "card": 7}, `"delivery" must be one of "pickup", "post", "locker", not "drone"`,
					`{"delivery":"pickup","request":{"reader":{"card":7,"name":"Ada"},"titles":["Dune","Emma"]}}`},
				{"post", map[string]any{"name": "Ada"}, `"request.reader" is missing the required field "card"`, `{"delivery":"post",` + placeholders},
				{"post", map[string]any{"name": "Ada", "card": 0}, `"request.reader.card" must be at least 1, not 0`, `{"delivery":"post",` + placeholders},
			} {
				res = order(bad.delivery, bad.reader)
				txt := resultText(res)
				if !res.IsError || !strings.Contains(txt, "do not match the tool's inputSchema: "+bad.want+".") {
					t.Errorf("order_books(%s, %v): isError=%v %q, want the schema's refusal: %s", bad.delivery, bad.reader, res.IsError, txt, bad.want)
				}
				if example := bad.example; !strings.Contains(txt, example) {
					t.Errorf("order_books(%s, %v): the example call lacks %s:\n%s", bad.delivery, bad.reader, example, txt)
				}
			}

			// tools/list_changed: the tool open_archive adds is indexed and runs.
			res = executeTool(t, ctx, cs, id("open_archive"), nil)
			if res.IsError {
				t.Fatalf("open_archive: %q", resultText(res))
			}
			if srv == "v1stateless" {
				// A stateless server of the 2025-11-25 protocol has no stream
				// to send notifications/tools/list_changed on (mcp 1.x drops
				// it): nothing tells the gateway (README, Use it from an MCP
				// client). At 2026-07-28, subscriptions/listen carries it.
				return
			}
			testenv.Eventually(t, srv+"'s added tool searchable (re-index after tools/list_changed)", func() bool {
				ans, _ := searchTools(t, ctx, cs, "rare illuminated manuscripts of a century", 20)
				return answerHas(ans, id("rare_manuscripts"))
			})
			res = executeTool(t, ctx, cs, id("rare_manuscripts"), map[string]any{"century": 15})
			if res.IsError || !strings.Contains(resultText(res), "century 15") {
				t.Errorf("rare_manuscripts: isError=%v %q", res.IsError, resultText(res))
			}
		})
	}
}

// pyClientAnswer is what testdata/pyclient.py prints.
type pyClientAnswer struct {
	Protocol string
	Tools    map[string]json.RawMessage
	Steps    []struct {
		IsError           bool
		Text              string
		StructuredContent json.RawMessage
		Exception         string
		TimedOut          bool
		Progress          []struct {
			Progress, Total float64
			Message         string
		}
	}
	Logs []struct{ Level, Logger, Data string }
}

// runPyClient runs testdata/pyclient.py with the steps (tool, arguments)
// against the server that args name, once search_tools finds each tool of
// ready runnable, and decodes its answer.
func runPyClient(t *testing.T, py, mode string, ready []string, steps []map[string]any, env []string, args ...string) pyClientAnswer {
	t.Helper()
	script, _ := json.Marshal(map[string]any{"mode": mode, "ready": ready, "steps": steps})
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute) // a hang guard: ready waits up to 2 minutes
	defer cancel()
	cmd := exec.CommandContext(ctx, py, append([]string{pyTestdata(t, "pyclient.py"), string(script)}, args...)...)
	cmd.Env = env
	cmd.Stderr = testLog(t, "pyclient: ")
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("pyclient %s %v: %v\n%s", mode, args, err, out)
	}
	var ans pyClientAnswer
	if err := json.Unmarshal(out, &ans); err != nil {
		t.Fatalf("pyclient answer: %v\n%s", err, out)
	}
	if len(ans.Steps) != len(steps) {
		t.Fatalf("pyclient ran %d steps, want %d:\n%s", len(ans.Steps), len(steps), out)
	}
	return ans
}

// TestPythonClient drives `toolgate serve` with the Python SDK's client over
// stdio and over streamable HTTP with an API key, with the initialize
// handshake (2025-11-25) and with server/discover (2026-07-28): it lists
// exactly search_tools and execute_tool, search_tools' structuredContent
// passes the SDK's check against the output schema, and execute_tool runs a
// bundled backend's tool, says isError for an unknown one, and relays the
// progress and log messages (ctx.report_progress, ctx.info) of Python
// backends of both SDK majors where the front can (README: progress
// everywhere, log messages but over HTTP at 2025-11-25), and the questions a
// Python 2.x backend asks (elicitation, sampling) to the client, which
// answers them but over HTTP at 2025-11-25 (README).
func TestPythonClient(t *testing.T) {
	py := pythonSDK(t, pythonV2)
	cfg := bundledConfig(t, map[string]any{
		"pylib": map[string]any{"command": py, "args": []string{pyTestdata(t, "pyserver.py"), "stdio"}},
		"v1lib": map[string]any{"command": pythonSDK(t, pythonV1), "args": []string{pyTestdata(t, "pyserver.py"), "stdio"}},
	})
	baseSteps := []map[string]any{
		{"tool": "search_tools", "arguments": map[string]any{"query": "echo a message back", "limit": 3}},
		{"tool": "execute_tool", "arguments": map[string]any{"name": "everything__echo", "arguments": map[string]any{"message": "hello from python"}}},
		{"tool": "execute_tool", "arguments": map[string]any{"name": "everything__no_such_tool"}},
		{"tool": "execute_tool", "arguments": map[string]any{"name": "pylib__scan_catalogue", "arguments": map[string]any{"pages": 3}}},
		{"tool": "execute_tool", "arguments": map[string]any{"name": "v1lib__scan_catalogue", "arguments": map[string]any{"pages": 3}}},
		{"tool": "execute_tool", "arguments": map[string]any{"name": "pylib__shelf_report", "arguments": map[string]any{"shelf": "B2"}}},
		{"tool": "execute_tool", "arguments": map[string]any{"name": "v1lib__shelf_report", "arguments": map[string]any{"shelf": "B2"}}},
		// The client gives up on a slow call (then the cancelled naps are
		// counted, waiting for cancelled when given).
		{"tool": "execute_tool", "arguments": map[string]any{"name": "pylib__nap", "arguments": map[string]any{"seconds": 60}}, "timeout": 1},
		// Tools that ask the client (an Elicit and a Sample resolver).
		{"tool": "execute_tool", "arguments": map[string]any{"name": "pylib__withdraw_book", "arguments": map[string]any{"title": "Dune"}}},
		{"tool": "execute_tool", "arguments": map[string]any{"name": "pylib__summarise_topic", "arguments": map[string]any{"topic": "sea charts"}}},
	}
	// The steps start once the backends' tools they run are served: the
	// gateway answers before every backend is up, and on a loaded machine
	// a Python server's start outlasted the connect timeout (30 s; it came
	// up at the restart after), so execute_tool said "unknown tool".
	ready := []string{"everything__echo", "pylib__scan_catalogue", "v1lib__scan_catalogue"}
	steps := func(cancelled string) []map[string]any {
		count := map[string]any{"tool": "execute_tool", "arguments": map[string]any{"name": "pylib__cancelled_naps"}}
		if cancelled != "" {
			count["until"] = cancelled
		}
		return append(slices.Clone(baseSteps), count)
	}
	// A mode of the client, and what it gets: log messages, and the
	// backend's count of cancelled naps after it gave up on one.
	type mode struct {
		name, protocol string
		logs           bool
		cancelled      string
		asked          bool // the client can be asked questions through the gateway
	}
	check := func(t *testing.T, ans pyClientAnswer, m mode) {
		t.Helper()
		protocol, logs := m.protocol, m.logs
		if ans.Protocol != protocol {
			t.Errorf("negotiated %q, want %q", ans.Protocol, protocol)
		}
		var names []string
		for n := range ans.Tools {
			names = append(names, n)
		}
		slices.Sort(names)
		if !slices.Equal(names, []string{"execute_tool", "search_tools"}) {
			t.Errorf("list_tools = %v, want exactly execute_tool and search_tools", names)
		}
		for i, s := range ans.Steps {
			if s.Exception != "" {
				t.Errorf("step %d (%v): the SDK raised %s", i, baseSteps[min(i, len(baseSteps)-1)], s.Exception)
			}
		}
		var echo searchAnswer
		if s := ans.Steps[0]; s.IsError || json.Unmarshal(s.StructuredContent, &echo) != nil || !answerHas(echo, "everything__echo") {
			t.Errorf("search_tools: isError=%v structuredContent=%s", s.IsError, s.StructuredContent)
		}
		if s := ans.Steps[1]; s.IsError || !strings.Contains(s.Text, "hello from python") {
			t.Errorf("execute_tool everything__echo: isError=%v %q", s.IsError, s.Text)
		}
		if s := ans.Steps[2]; !s.IsError || !strings.Contains(s.Text, "everything__no_such_tool") {
			t.Errorf("execute_tool of an unknown tool: isError=%v %q, want isError naming it", s.IsError, s.Text)
		}
		var want []string
		for i, srv := range []string{"pylib", "v1lib"} {
			s := ans.Steps[3+i]
			if s.IsError || s.Text != "scanned 3 pages" || len(s.Progress) != 3 {
				t.Errorf("execute_tool %s__scan_catalogue: isError=%v %q, progress %+v", srv, s.IsError, s.Text, s.Progress)
			}
			for i, p := range s.Progress {
				if p.Progress != float64(i+1) || p.Total != 3 || p.Message != fmt.Sprintf("page %d of 3", i+1) {
					t.Errorf("%s progress %d: %+v", srv, i, p)
				}
			}
			for page := 1; page <= 3 && logs; page++ {
				want = append(want, fmt.Sprintf("info %s: scanned page %d", srv, page))
			}
		}
		// A 64-bit int of a structured result keeps every digit on the
		// way through (go-sdk alone decodes it into a float64).
		for _, s := range ans.Steps[5:7] {
			if s.IsError || !strings.Contains(string(s.StructuredContent), `"rfid": 12345678901234567891`) {
				t.Errorf("shelf_report's structuredContent: isError=%v %s", s.IsError, s.StructuredContent)
			}
		}
		if s := ans.Steps[7]; !s.TimedOut {
			t.Errorf("pylib__nap did not time out at the client: %+v", s)
		}
		for i, want := range []string{"withdrawn: True", `summary: py summary of server "pylib" asks: Summarise sea charts in one line.`} {
			s := ans.Steps[8+i]
			switch {
			case m.asked && (s.IsError || s.Text != want):
				t.Errorf("%v: isError=%v %q, want %q (the client answered its question)", baseSteps[8+i]["arguments"], s.IsError, s.Text, want)
			case !m.asked && (!s.IsError || !strings.Contains(s.Text, "Client did not declare the")):
				t.Errorf("%v: isError=%v %q, want the backend's refusal: this client cannot be asked through the gateway", baseSteps[8+i]["arguments"], s.IsError, s.Text)
			}
		}
		if got := ans.Steps[len(ans.Steps)-1].Text; got != m.cancelled {
			t.Errorf("after the client gave up on a nap: %q, want %q", got, m.cancelled)
		}
		var got []string
		for _, l := range ans.Logs {
			got = append(got, l.Level+" "+l.Logger+": "+l.Data)
		}
		if !slices.Equal(got, want) {
			t.Errorf("log messages %q, want %q", got, want)
		}
	}

	t.Run("stdio", func(t *testing.T) {
		data := t.TempDir()
		// pyclient starts toolgate (this test binary) with its own
		// environment: toolgateCmd's.
		gw := toolgateCmd(t, data, "serve", "--config", cfg, "--mode", "bm25")
		// Each client starts its own gateway, and so its own backend.
		for _, m := range []mode{{"legacy", "2025-11-25", true, "1 cancelled", true}, {"auto", "2026-07-28", true, "1 cancelled", true}} {
			t.Run(m.name, func(t *testing.T) {
				check(t, runPyClient(t, py, m.name, ready, steps(m.cancelled), gw.Env, append([]string{"stdio"}, gw.Args...)...), m)
			})
		}
	})

	t.Run("connect", func(t *testing.T) {
		// Over stdio to `toolgate connect`, which relays to one gateway
		// on HTTP with an API key: what each protocol gets there.
		data := t.TempDir()
		key := createKey(t, data, "--name", "python")
		startGateway(t, data, cfg)
		bridge := toolgateCmd(t, data, "connect")
		env := append(bridge.Env, envKey+"="+key)
		for _, m := range []mode{{"legacy", "2025-11-25", false, "1 cancelled", false}, {"auto", "2026-07-28", true, "2 cancelled", true}} {
			t.Run(m.name, func(t *testing.T) {
				check(t, runPyClient(t, py, m.name, ready, steps(m.cancelled), env, append([]string{"stdio"}, bridge.Args...)...), m)
			})
		}
	})

	t.Run("http", func(t *testing.T) {
		data := t.TempDir()
		key := createKey(t, data, "--name", "python")
		addr, _ := startGateway(t, data, cfg)
		// One gateway and backend for both clients, in this order. Over
		// HTTP at 2025-11-25 the client's notifications/cancelled comes in
		// a POST of its own and is not matched to the call (README): the
		// nap runs on until the client leaves and closes the call's
		// connection, so the 2026-07-28 client finds it cancelled too.
		for _, m := range []mode{{"legacy", "2025-11-25", false, "0 cancelled", false}, {"auto", "2026-07-28", true, "2 cancelled", true}} {
			t.Run(m.name, func(t *testing.T) {
				until := m.cancelled
				if m.name == "legacy" {
					until = "" // the count at once: nothing to wait for
				}
				check(t, runPyClient(t, py, m.name, ready, steps(until), os.Environ(), "http", "http://"+addr+"/mcp", key), m)
			})
		}
	})
}

// TestPythonClientOddBackend drives `toolgate serve` with the Python SDK's
// client, which checks search_tools' structuredContent against its output
// schema and each result against its protocol's types, in front of a
// backend that lists tools whose inputSchema is not an object (true, [],
// "object") and has a tool with a []string output (an array
// structuredContent, SEP-2106). With the initialize handshake (2025-11-25:
// structuredContent must be an object) and with server/discover
// (2026-07-28: any JSON value), over stdio and over HTTP: the SDK raises
// on no answer; search_tools lists the odd tools with {"type":"object"};
// the array reaches a 2026-07-28 client as sent and a 2025-11-25 one as
// the text its backend wrote (the SDK raised a ValidationError on it and
// the TypeScript SDK a ZodError, and the result was lost).
func TestPythonClientOddBackend(t *testing.T) {
	py := pythonSDK(t, pythonV2)
	cfg := fakeConfig(t, map[string]string{"odd": backendtest.ModeOddSchemas + "," + backendtest.ModeListOutput}, nil)
	steps := []map[string]any{
		{"tool": "search_tools", "arguments": map[string]any{"query": "weather forecast for a city, days ahead", "server": "odd", "limit": 10}},
		{"tool": "execute_tool", "arguments": map[string]any{"name": "odd__shelves"}},
	}
	shelves, _ := json.Marshal(backendtest.Shelves)
	check := func(t *testing.T, ans pyClientAnswer, protocol string) {
		t.Helper()
		if ans.Protocol != protocol {
			t.Errorf("negotiated %q, want %q", ans.Protocol, protocol)
		}
		for i, s := range ans.Steps {
			if s.Exception != "" {
				t.Errorf("step %d (%v): the SDK raised %s", i, steps[i], s.Exception)
			}
		}
		var found struct {
			Tools []struct {
				Name        string
				InputSchema json.RawMessage
			}
		}
		odd := map[string]string{}
		if err := json.Unmarshal(ans.Steps[0].StructuredContent, &found); err != nil {
			t.Errorf("search_tools: %v %s", err, ans.Steps[0].StructuredContent)
		}
		for _, tl := range found.Tools {
			odd[tl.Name] = compactJSON(tl.InputSchema)
		}
		for name := range backendtest.OddSchemaTools {
			if got := odd["odd__"+name]; got != `{"type":"object"}` {
				t.Errorf("search_tools lists odd__%s with inputSchema %s, want {\"type\":\"object\"}", name, got)
			}
		}
		s := ans.Steps[1]
		wantSC := string(shelves)
		if protocol < "2026-07-28" {
			wantSC = "null"
		}
		if sc := compactJSON(s.StructuredContent); s.IsError || s.Text != string(shelves) || sc != wantSC {
			t.Errorf("odd__shelves: isError=%v text %q structuredContent %s, want the text %s and structuredContent %s", s.IsError, s.Text, sc, shelves, wantSC)
		}
	}
	ready := []string{"odd__shelves"}
	t.Run("stdio", func(t *testing.T) {
		gw := toolgateCmd(t, t.TempDir(), "serve", "--config", cfg, "--mode", "bm25")
		for _, m := range []struct{ name, protocol string }{{"legacy", "2025-11-25"}, {"auto", "2026-07-28"}} {
			t.Run(m.name, func(t *testing.T) {
				check(t, runPyClient(t, py, m.name, ready, steps, gw.Env, append([]string{"stdio"}, gw.Args...)...), m.protocol)
			})
		}
	})
	t.Run("http", func(t *testing.T) {
		addr, _ := startGateway(t, t.TempDir(), cfg)
		for _, m := range []struct{ name, protocol string }{{"legacy", "2025-11-25"}, {"auto", "2026-07-28"}} {
			t.Run(m.name, func(t *testing.T) {
				check(t, runPyClient(t, py, m.name, ready, steps, os.Environ(), "http", "http://"+addr+"/mcp"), m.protocol)
			})
		}
	})
}

// compactJSON is raw without insignificant space (Python's json.dump
// writes ", " and ": "), or raw itself when it is not JSON.
func compactJSON(raw json.RawMessage) string {
	var b bytes.Buffer
	if json.Compact(&b, raw) != nil {
		return string(raw)
	}
	return b.String()
}

// TestPythonClientREADMERecipe runs the README's recipe for the Python SDK
// 2.x's client with an API key (Use it from an MCP client), as written,
// against `toolgate serve --http` with a key: a call that answers after
// httpx2's default timeout (5 s for every wait) completes, at both
// protocols. The recipe was an httpx2.AsyncClient with the header alone,
// which keeps that default: every execute_tool longer than 5 s raised
// httpx2.ReadTimeout and ended the client's connection ("Connection
// closed" for each call after), while the gateway cancelled the call.
func TestPythonClientREADMERecipe(t *testing.T) {
	py := pythonSDK(t, pythonV2)
	recipe := readmeSpan(t, "streamable_http_client(url,")
	cfg := bundledConfig(t, map[string]any{
		"pylib": map[string]any{"command": py, "args": []string{pyTestdata(t, "pyserver.py"), "stdio"}},
	})
	data := t.TempDir()
	key := createKey(t, data, "--name", "recipe")
	addr, _ := startGateway(t, data, cfg)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute) // a hang guard
	defer cancel()
	cmd := exec.CommandContext(ctx, py, pyTestdata(t, "pyrecipe.py"), "http://"+addr+"/mcp", key, recipe)
	cmd.Stderr = testLog(t, "pyrecipe: ")
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("pyrecipe: %v\n%s", err, out)
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	want := []string{"2025-11-25 rested", "2026-07-28 rested"}
	if !slices.Equal(lines, want) {
		t.Errorf("the README's recipe %s:\n%s\nwant each protocol's call answered %q", recipe, out, "rested")
	}
}

// readmeSpan is the code span of README.md that begins with prefix, its
// line breaks read as spaces.
func readmeSpan(t *testing.T, prefix string) string {
	t.Helper()
	text := strings.Join(readmeLines(t), " ")
	i := strings.Index(text, "`"+prefix)
	if i < 0 {
		t.Fatalf("README.md has no code span that begins with %q", prefix)
	}
	span, _, ok := strings.Cut(text[i+1:], "`")
	if !ok {
		t.Fatalf("README.md's code span %q is not closed", prefix)
	}
	return span
}
