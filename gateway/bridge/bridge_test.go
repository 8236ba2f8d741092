package bridge_test

import (
	"bufio"
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httptrace"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolgate/toolgate/gateway"
	"github.com/toolgate/toolgate/gateway/bridge"
	"github.com/toolgate/toolgate/gateway/keys"
	"github.com/toolgate/toolgate/index"
	"github.com/toolgate/toolgate/index/catalog"
	"github.com/toolgate/toolgate/internal/linerpc"
	"github.com/toolgate/toolgate/internal/mcptext"
	"github.com/toolgate/toolgate/internal/testenv"
	"github.com/toolgate/toolgate/search"
)

// echo is a Caller whose every tool answers with its arguments' text.
type echo struct{ calls atomic.Int32 }

func (e *echo) CallTool(_ context.Context, server, tool string, args map[string]any) (*mcp.CallToolResult, error) {
	e.calls.Add(1)
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: fmt.Sprintf("%s__%s: %v", server, tool, args["text"])}}}, nil
}

// learner records the pairs the gateway learns from use.
type learner struct {
	mu    sync.Mutex
	pairs []string
}

func (l *learner) Record(query string, tool catalog.Tool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.pairs = append(l.pairs, query+" → "+tool.ID())
}

func (l *learner) got() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.pairs)
}

// newGateway is a real gateway (BM25 over three tools, an echo caller)
// that learns from use into its Learner.
func newGateway(t *testing.T) (*gateway.Gateway, *echo) {
	g, c, _ := newLearningGateway(t)
	return g, c
}

func newLearningGateway(t *testing.T) (*gateway.Gateway, *echo, *learner) {
	t.Helper()
	c, l := &echo{}, &learner{}
	return gateway.New(newEngine(t), c, &gateway.Options{Learner: l}), c, l
}

// newEngine ranks three tools with BM25.
func newEngine(t *testing.T) *search.Engine {
	t.Helper()
	tools := []catalog.Tool{
		{Server: "fs", Name: "read_file", Description: "Read the complete contents of a file."},
		{Server: "fs", Name: "list_directory", Description: "List the files in a directory."},
		{Server: "notes", Name: "add_note", Description: "Write a note down."},
	}
	ix, err := index.Build(context.Background(), tools, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	eng := search.New(ix, nil, &search.Options{Mode: search.ModeBM25})
	t.Cleanup(func() { eng.Close() })
	return eng
}

// run starts the bridge to url and connects a go-sdk client to its stdio
// (the client's session is closed when the test ends); done is closed once
// Run returned, with its error in *runErr.
func run(t *testing.T, opts bridge.Options) (cs *mcp.ClientSession, closeIn func(), done <-chan struct{}, runErr *error) {
	t.Helper()
	inR, inW := io.Pipe()   // the client writes, the bridge reads
	outR, outW := io.Pipe() // the bridge writes, the client reads
	ch := make(chan struct{})
	var err error
	go func() {
		defer close(ch)
		err = bridge.Run(context.Background(), inR, outW, opts)
		outW.Close()
	}()
	client := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "1"}, nil)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	cs, cerr := client.Connect(ctx, &mcp.IOTransport{Reader: outR, Writer: inW}, nil)
	if cerr != nil {
		t.Fatalf("connect through the bridge: %v", cerr)
	}
	t.Cleanup(func() { cs.Close(); inW.Close(); <-ch })
	return cs, func() { inW.Close() }, ch, &err
}

func callTool(t *testing.T, cs *mcp.ClientSession, name string, args map[string]any) (*mcp.CallToolResult, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	return cs.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: args})
}

// answer is what a call got: its result, or its error.
type answer struct {
	res *mcp.CallToolResult
	err error
}

// callLater calls the tool on a goroutine of its own: its answer comes on
// the channel.
func callLater(t *testing.T, cs *mcp.ClientSession, name string, args map[string]any) <-chan answer {
	got := make(chan answer, 1)
	go func() {
		res, err := callTool(t, cs, name, args)
		got <- answer{res, err}
	}()
	return got
}

func text(res *mcp.CallToolResult) string {
	if res == nil {
		return "(no result)"
	}
	return mcptext.Text(res)
}

// TestThroughTheBridge: a stdio client lists the two tools, searches and
// runs a tool of a real gateway's HTTP front through the bridge.
func TestThroughTheBridge(t *testing.T) {
	g, c, l := newLearningGateway(t)
	srv := httptest.NewServer(g.HTTPHandler(nil))
	defer srv.Close()
	cs, _, _, _ := run(t, bridge.Options{URL: srv.URL + "/mcp"})

	lr, err := cs.ListTools(context.Background(), nil)
	if err != nil || len(lr.Tools) != 2 {
		t.Fatalf("tools/list: %v, %d tools; want search_tools and execute_tool", err, len(lr.Tools))
	}
	res, err := callTool(t, cs, "search_tools", map[string]any{"query": "read a file"})
	if err != nil || res.IsError || !strings.Contains(text(res), "fs__read_file") {
		t.Fatalf("search_tools: %v %s", err, text(res))
	}
	res, err = callTool(t, cs, "execute_tool", map[string]any{"name": "notes__add_note", "arguments": map[string]any{"text": "hello"}})
	if err != nil || res.IsError || text(res) != "notes__add_note: hello" || c.calls.Load() != 1 {
		t.Errorf("execute_tool: %v %q, %d calls", err, text(res), c.calls.Load())
	}
	// The stateless front issues no session: the bridge names its client's
	// own, so a search then a call of a tool it returned is learned.
	if res, err := callTool(t, cs, "search_tools", map[string]any{"query": "write a note down"}); err != nil || res.IsError {
		t.Fatalf("search_tools: %v", err)
	}
	if res, err := callTool(t, cs, "execute_tool", map[string]any{"name": "notes__add_note", "arguments": map[string]any{"text": "x"}}); err != nil || res.IsError {
		t.Fatalf("execute_tool: %v", err)
	}
	if got, want := l.got(), []string{"write a note down → notes__add_note"}; !slices.Equal(got, want) {
		t.Errorf("learned through the bridge: %q, want %q", got, want)
	}
}

// recorder is a fake MCP endpoint that records each POST's headers and
// body and answers as answer says.
type recorder struct {
	mu      sync.Mutex
	headers []http.Header
	bodies  []string
	answer  func(w http.ResponseWriter, r *http.Request, msg map[string]any)
}

func (rc *recorder) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	b, _ := io.ReadAll(r.Body)
	var msg map[string]any
	_ = json.Unmarshal(b, &msg)
	rc.mu.Lock()
	rc.headers = append(rc.headers, r.Header.Clone())
	rc.bodies = append(rc.bodies, string(b))
	rc.mu.Unlock()
	rc.answer(w, r, msg)
}

func (rc *recorder) header(i int) http.Header {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return rc.headers[i]
}

// jsonAnswer answers a call as a JSON body; a notification with 202.
func jsonAnswer(w http.ResponseWriter, msg map[string]any, result any) {
	if msg["id"] == nil {
		w.WriteHeader(http.StatusAccepted)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(map[string]any{"jsonrpc": "2.0", "id": msg["id"], "result": result})
}

// lines runs the bridge on a scripted stdin and returns what it wrote.
func lines(t *testing.T, opts bridge.Options, in string) []map[string]any {
	t.Helper()
	var out strings.Builder
	if err := bridge.Run(context.Background(), strings.NewReader(in), &out, opts); err != nil {
		t.Fatalf("Run: %v", err)
	}
	var msgs []map[string]any
	sc := bufio.NewScanner(strings.NewReader(out.String()))
	for sc.Scan() {
		var m map[string]any
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
			t.Fatalf("the bridge wrote a line that is not JSON: %q", sc.Text())
		}
		msgs = append(msgs, m)
	}
	return msgs
}

// The protocol version agreed in initialize goes with every later request
// (MCP-Protocol-Version), and so does a session ID the gateway gives; an
// SSE answer's events reach the client in order, each on its own line; the
// key goes as a bearer token.
func TestHeadersAndEvents(t *testing.T) {
	rc := &recorder{}
	rc.answer = func(w http.ResponseWriter, r *http.Request, msg map[string]any) {
		switch msg["method"] {
		case "initialize":
			w.Header().Set("Mcp-Session-Id", "s-1")
			jsonAnswer(w, msg, map[string]any{"protocolVersion": "2025-06-18", "capabilities": map[string]any{}, "serverInfo": map[string]any{"name": "x", "version": "1"}})
		case "tools/call":
			w.Header().Set("Content-Type", "text/event-stream")
			fmt.Fprintf(w, "event: message\ndata: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/progress\",\n")
			fmt.Fprintf(w, "data: \"params\":{\"progressToken\":1,\"progress\":1}}\n\n")
			fmt.Fprintf(w, "data: {\"jsonrpc\":\"2.0\",\"id\":%v,\"result\":{\"content\":[]}}\n\n", msg["id"])
		default:
			jsonAnswer(w, msg, map[string]any{})
		}
	}
	srv := httptest.NewServer(rc)
	defer srv.Close()
	inR, inW := io.Pipe()
	var out testenv.LogBuffer
	done := make(chan error, 1)
	go func() {
		done <- bridge.Run(context.Background(), inR, &out, bridge.Options{URL: srv.URL, Key: "k-123"})
	}()
	io.WriteString(inW, `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","clientInfo":{"name":"test-client","version":"1.2"}}}`+"\n")
	testenv.Eventually(t, "the answer to initialize", func() bool { return strings.Count(out.String(), "\n") == 1 })
	io.WriteString(inW, `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"search_tools","arguments":{"query":"x"}}}`+"\n")
	testenv.Eventually(t, "the call's events", func() bool { return strings.Count(out.String(), "\n") == 3 })
	// A request of protocol 2026-07-28 names its version in _meta, and
	// its method and name go in headers too.
	io.WriteString(inW, `{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"},"name":"execute_tool"}}`+"\n")
	testenv.Eventually(t, "the 2026-07-28 call's answer", func() bool { return strings.Count(out.String(), "\n") == 5 })
	inW.Close()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	h := rc.header(1)
	if h.Get("MCP-Protocol-Version") != "2025-06-18" || h.Get("Mcp-Session-Id") != "s-1" || h.Get("Authorization") != "Bearer k-123" ||
		!strings.Contains(h.Get("Accept"), "text/event-stream") {
		t.Errorf("headers of the call after initialize: %v", h)
	}
	if ua := rc.header(1).Get("User-Agent"); ua != "test-client/1.2 (toolgate connect)" {
		t.Errorf("User-Agent after initialize %q, want the client's name and version", ua)
	}
	if h0 := rc.header(0); h0.Get("MCP-Protocol-Version") != "" || h0.Get("Authorization") != "Bearer k-123" || h0.Get("Mcp-Session-Id") != "" {
		t.Errorf("headers of initialize: %v", h0)
	}
	if h := rc.header(2); h.Get("MCP-Protocol-Version") != "2026-07-28" || h.Get("Mcp-Method") != "tools/call" || h.Get("Mcp-Name") != "execute_tool" {
		t.Errorf("headers of a 2026-07-28 call: %v", h)
	}
	if h := rc.header(1); h.Get("Mcp-Method") != "" {
		t.Errorf("a 2025-06-18 call got Mcp-Method: %v", h)
	}
	outLines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(outLines) != 5 || !strings.Contains(outLines[1], `"notifications/progress"`) || !strings.Contains(outLines[1], `"progress":1`) ||
		!strings.Contains(outLines[2], `"id":2`) {
		t.Errorf("what the client read:\n%s", out.String())
	}
}

// A gateway that is down, or that refuses the call, is a JSON-RPC error
// saying why and the fix, and the bridge goes on: the gateway's HTTP front
// keeps no session, so once it is back the same client's next call works.
func TestGatewayDownAndBack(t *testing.T) {
	g, _ := newGateway(t)
	var down atomic.Bool
	front := g.HTTPHandler(nil)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if down.Load() { // a gateway gone: the connection closes unanswered
			conn, _, err := w.(http.Hijacker).Hijack()
			if err == nil {
				conn.Close()
			}
			return
		}
		front.ServeHTTP(w, r)
	}))
	defer srv.Close()
	cs, _, _, _ := run(t, bridge.Options{URL: srv.URL + "/mcp"})
	if res, err := callTool(t, cs, "search_tools", map[string]any{"query": "read a file"}); err != nil || res.IsError {
		t.Fatalf("search_tools before: %v", err)
	}

	down.Store(true)
	_, err := callTool(t, cs, "search_tools", map[string]any{"query": "read a file"})
	if err == nil || !strings.Contains(err.Error(), "toolgate at "+srv.URL+"/mcp does not answer") || !strings.Contains(err.Error(), "toolgate serve --http") {
		t.Errorf("search_tools while the gateway is down: %v, want the bridge's error with the fix", err)
	}
	down.Store(false)
	if res, err := callTool(t, cs, "search_tools", map[string]any{"query": "read a file"}); err != nil || res.IsError || !strings.Contains(text(res), "fs__read_file") {
		t.Errorf("search_tools once the gateway is back: %v", err)
	}
}

// refusals counts the requests that found the gateway refusing connections
// (on refused), over a transport without keep-alives, so that each request
// dials anew.
type refusals struct{ refused chan struct{} }

func (r refusals) RoundTrip(req *http.Request) (*http.Response, error) {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.DisableKeepAlives = true
	resp, err := tr.RoundTrip(req)
	if errors.Is(err, syscall.ECONNREFUSED) {
		r.refused <- struct{}{}
	}
	return resp, err
}

// serveOn serves h on addr ("" for a free port) until the test ends, or
// its Close.
func serveOn(t *testing.T, addr string, h http.Handler) *httptest.Server {
	t.Helper()
	ln, err := net.Listen("tcp", cmp.Or(addr, "127.0.0.1:0"))
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewUnstartedServer(h)
	srv.Listener.Close()
	srv.Listener = ln
	srv.Start()
	t.Cleanup(srv.Close)
	return srv
}

// A gateway that answered before and then refuses connections is
// restarting (an upgrade, systemd's restart): a call waits for it and goes
// once it takes connections again, answered as if nothing happened; the
// client got "does not answer" for each call in the gap. Past RestartWait
// the call is answered that it does not answer, and how long it waited.
func TestGatewayRestartWaitedFor(t *testing.T) {
	g, _ := newGateway(t)
	first := serveOn(t, "", g.HTTPHandler(nil))
	addr := first.Listener.Addr().String()
	r := refusals{make(chan struct{}, 100)}
	cs, _, _, _ := run(t, bridge.Options{URL: "http://" + addr + "/mcp", Client: &http.Client{Transport: r}, RestartWait: time.Hour})
	if res, err := callTool(t, cs, "search_tools", map[string]any{"query": "read a file"}); err != nil || res.IsError {
		t.Fatalf("search_tools before the restart: %v", err)
	}
	first.Close()
	got := callLater(t, cs, "execute_tool", map[string]any{"name": "fs__read_file", "arguments": map[string]any{"text": "after"}})
	for range 2 { // sent, refused; sent again, refused: the call waits
		select {
		case <-r.refused:
		case a := <-got:
			t.Fatalf("a call while the gateway restarts was answered without waiting for it: %v %q", a.err, text(a.res))
		}
	}
	again, _ := newGateway(t)
	second := serveOn(t, addr, again.HTTPHandler(nil))
	if a := <-got; a.err != nil || a.res.IsError || text(a.res) != "fs__read_file: after" {
		t.Errorf("a call during the restart: %v %q, want it run by the restarted gateway", a.err, text(a.res))
	}

	// Past the wait.
	cs, _, _, _ = run(t, bridge.Options{URL: "http://" + addr + "/mcp", RestartWait: time.Millisecond})
	if res, err := callTool(t, cs, "search_tools", map[string]any{"query": "read a file"}); err != nil || res.IsError {
		t.Fatalf("search_tools of a second client: %v", err)
	}
	second.Close()
	_, err := callTool(t, cs, "search_tools", map[string]any{"query": "read a file"})
	if err == nil || !strings.Contains(err.Error(), "does not answer") || !strings.Contains(err.Error(), "it answered before and has refused connections for") {
		t.Errorf("a call past the restart wait: %v, want the bridge's error saying it waited", err)
	}
	// Said in the gateway's words (proxyenv.Refused), not Go's.
	if want := "does not answer: nothing listens at " + addr + " (connection refused); it answered before"; err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("a call past the restart wait: %v, want %q", err, want)
	}
}

// TestRestartDropsNoCall: a gateway that stops (a restart: systemd's, an
// upgrade) while a call's request is on its way drops the request without
// running it: net/http closes a connection whose request it reads while
// shutting down, as it closes the idle ones the bridge may be sending on.
// The call is sent again and run by the restarted gateway, once. It was
// answered "it closed the connection after the request without an answer
// (EOF): it stopped or crashed during the call, which may have run" (with
// the real gateway and toolgate connect, 4 of 20 restarts with a call made
// as the gateway was told to stop).
func TestRestartDropsNoCall(t *testing.T) {
	first, firstCalls := newGateway(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	wl := &watchedListener{Listener: ln, accepted: make(chan struct{}, 100), closed: make(chan struct{})}
	stop, cancel := context.WithCancel(context.Background())
	defer cancel()
	served := make(chan error, 1)
	go func() { served <- gateway.Serve(stop, wl, first.HTTPHandler(nil), nil, nil, nil) }()

	// The connection of the call below is held once dialled, until the
	// gateway has begun to stop.
	tr := http.DefaultTransport.(*http.Transport).Clone()
	var hold atomic.Pointer[chan struct{}]
	dialled := make(chan struct{}, 1)
	tr.DialContext = func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := (&net.Dialer{}).DialContext(ctx, network, addr)
		if h := hold.Swap(nil); h != nil && err == nil {
			dialled <- struct{}{}
			<-*h
		}
		return c, err
	}
	cs, _, _, _ := run(t, bridge.Options{URL: "http://" + addr + "/mcp", Client: &http.Client{Transport: tr}, RestartWait: time.Hour})
	if res, err := callTool(t, cs, "search_tools", map[string]any{"query": "write a note"}); err != nil || res.IsError {
		t.Fatalf("search_tools before the restart: %v", err)
	}
	tr.CloseIdleConnections() // the call dials anew
	for len(wl.accepted) > 0 {
		<-wl.accepted
	}
	release := make(chan struct{})
	hold.Store(&release)
	got := callLater(t, cs, "execute_tool", map[string]any{"name": "notes__add_note", "arguments": map[string]any{"text": "once"}})
	<-dialled
	<-wl.accepted // the gateway has the connection and waits for its request
	cancel()      // the restart's SIGTERM
	<-wl.closed   // the gateway is stopping: it takes no request now
	close(release)
	if err := <-served; err != nil {
		t.Fatalf("the first gateway's stop: %v", err)
	}
	again, againCalls := newGateway(t)
	serveOn(t, addr, again.HTTPHandler(nil))
	a := <-got
	if a.err != nil || a.res.IsError || text(a.res) != "notes__add_note: once" {
		t.Errorf("a call sent as the gateway stopped: %v %q, want it run by the restarted gateway", a.err, text(a.res))
	}
	if n, m := firstCalls.calls.Load(), againCalls.calls.Load(); n != 0 || m != 1 {
		t.Errorf("the call ran %d times on the gateway that stopped and %d times on the restarted one, want 0 and 1", n, m)
	}
}

// TestExpectationRefused: a proxy that refuses "Expect: 100-continue"
// (417) gets each message again without it, and every message after.
func TestExpectationRefused(t *testing.T) {
	g, _ := newGateway(t)
	front := g.HTTPHandler(nil)
	var refused atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Expect") != "" {
			refused.Add(1)
			http.Error(w, "Expectation Failed", http.StatusExpectationFailed)
			return
		}
		front.ServeHTTP(w, r)
	}))
	defer srv.Close()
	cs, _, _, _ := run(t, bridge.Options{URL: srv.URL + "/mcp"})
	if res, err := callTool(t, cs, "execute_tool", map[string]any{"name": "notes__add_note", "arguments": map[string]any{"text": "hi"}}); err != nil || res.IsError || text(res) != "notes__add_note: hi" {
		t.Errorf("a call through a proxy that refuses the expectation: %v %q", err, text(res))
	}
	if n := refused.Load(); n != 1 {
		t.Errorf("the proxy refused the expectation %d times, want once (the first message)", n)
	}
}

// TestNoExpectOverHTTPS: to an https:// gateway (most often a remote one,
// where waiting for 100 Continue costs a network round trip a message)
// messages go without "Expect: 100-continue"; over HTTP/2 a stopping
// gateway's GOAWAY says which requests it never began, and Go's client
// sends those again by itself.
func TestNoExpectOverHTTPS(t *testing.T) {
	g, _ := newGateway(t)
	front := g.HTTPHandler(nil)
	var expects, posts, h2 atomic.Int32
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.ProtoMajor == 2 {
			h2.Add(1)
		}
		front.ServeHTTP(w, r)
	}))
	srv.EnableHTTP2 = true
	srv.StartTLS()
	defer srv.Close()
	// What the bridge asks of the client (the server side does not show
	// the expectation: net/http handles it).
	c := srv.Client()
	base := c.Transport
	c.Transport = roundTripper(func(r *http.Request) (*http.Response, error) {
		if r.Method == http.MethodPost {
			posts.Add(1)
		}
		if r.Header.Get("Expect") != "" {
			expects.Add(1)
		}
		return base.RoundTrip(r)
	})
	cs, _, _, _ := run(t, bridge.Options{URL: srv.URL + "/mcp", Client: c})
	if res, err := callTool(t, cs, "execute_tool", map[string]any{"name": "notes__add_note", "arguments": map[string]any{"text": "hi"}}); err != nil || res.IsError || text(res) != "notes__add_note: hi" {
		t.Errorf("a call over https: %v %q", err, text(res))
	}
	if n, p := expects.Load(), posts.Load(); n != 0 || p == 0 {
		t.Errorf("%d of %d messages over https waited for 100 Continue, want none", n, p)
	}
	if h2.Load() == 0 {
		t.Error("no request came over HTTP/2")
	}
}

// roundTripper is a function as an http.RoundTripper.
type roundTripper func(*http.Request) (*http.Response, error)

func (f roundTripper) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// watchedListener says when its gateway accepted a connection, and when
// its stop closed it.
type watchedListener struct {
	net.Listener
	accepted chan struct{}
	closed   chan struct{}
	once     sync.Once
}

func (l *watchedListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err == nil {
		l.accepted <- struct{}{}
	}
	return c, err
}

func (l *watchedListener) Close() error {
	l.once.Do(func() { close(l.closed) })
	return l.Listener.Close()
}

// Options.Down replaces the generic fix of a gateway that does not answer:
// toolgate connect says there how it came to the address.
func TestGatewayDownSaysDown(t *testing.T) {
	g, _ := newGateway(t)
	var down atomic.Bool
	front := g.HTTPHandler(nil)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if down.Load() {
			if conn, _, err := w.(http.Hijacker).Hijack(); err == nil {
				conn.Close()
			}
			return
		}
		front.ServeHTTP(w, r)
	}))
	defer srv.Close()
	const why = "no gateway on the data folder serves c.json: pass --start"
	// No wait for a restart: each connection is closed before the call
	// is taken, which the bridge would wait 5 s to see end.
	cs, _, _, _ := run(t, bridge.Options{URL: srv.URL + "/mcp", Down: why, RestartWait: -1})
	down.Store(true)
	_, err := callTool(t, cs, "search_tools", map[string]any{"query": "read a file"})
	if err == nil || !strings.Contains(err.Error(), "does not answer") || !strings.Contains(err.Error(), why) || strings.Contains(err.Error(), "toolgate serve --http ADDR") {
		t.Errorf("a call while the gateway is down: %v, want Options.Down's words in place of the generic fix", err)
	}
}

// A stream that ends before the call's answer (the gateway stopped
// mid-call) answers the call with an error: the client would wait forever.
func TestStreamEndsBeforeTheAnswer(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		io.WriteString(w, "data: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/progress\",\"params\":{\"progressToken\":1,\"progress\":1}}\n\n")
	}))
	defer srv.Close()
	got := lines(t, bridge.Options{URL: srv.URL}, `{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"execute_tool"}}`+"\n")
	if len(got) != 2 || got[0]["method"] != "notifications/progress" || got[1]["id"] != 5.0 {
		t.Fatalf("the client read %v; want the progress, then an error for the call", got)
	}
	e, _ := got[1]["error"].(map[string]any)
	if msg, _ := e["message"].(string); e["code"] != float64(bridge.CodeUnreachable) || !strings.Contains(msg, "stopped answering during the call") {
		t.Errorf("error %v", e)
	}
}

// An HTTP refusal (a key the gateway wants, a profile it lacks) is the
// call's error, naming the fix.
func TestRefusals(t *testing.T) {
	rc := &recorder{answer: func(w http.ResponseWriter, r *http.Request, msg map[string]any) {
		if strings.HasSuffix(r.URL.Path, "/slow") { // nginx's answer past its proxy_read_timeout
			w.Header().Set("Content-Type", "text/html")
			w.WriteHeader(http.StatusGatewayTimeout)
			fmt.Fprint(w, "<html>\r\n<head><title>504 Gateway Time-out</title></head>\r\n<body>\r\n<center><h1>504 Gateway Time-out</h1></center>\r\n<hr><center>nginx/1.22.1</center>\r\n</body>\r\n</html>\r\n")
			return
		}
		if r.Header.Get("Authorization") != "Bearer good" {
			if !strings.Contains(r.URL.Path, "proxy") {
				w.Header().Set("WWW-Authenticate", `Bearer realm="toolgate"`) // the gateway's own refusal
			}
			said := "Unauthorized: this gateway needs an API key"
			if r.Header.Get("Authorization") == "Bearer revoked" {
				said = "Unauthorized: the API key was revoked at 2026-12-06T09:37:15Z: ask the gateway's operator for a key in force"
			}
			http.Error(w, said, http.StatusUnauthorized)
			return
		}
		http.NotFound(w, r)
	}}
	srv := httptest.NewServer(rc)
	defer srv.Close()
	call := `{"jsonrpc":"2.0","id":7,"method":"tools/list"}` + "\n"
	for _, tc := range []struct {
		name string
		opts bridge.Options
		want []string
	}{
		// The gateway's own refusal is said once, in the client's terms:
		// its body, which says the same, was printed before the fix.
		{"no key", bridge.Options{URL: srv.URL, KeyEnv: "$TOOLGATE_KEY"}, []string{"toolgate at " + srv.URL + " answered 401 Unauthorized: the gateway needs an API key: put one in $TOOLGATE_KEY (`toolgate keys create` makes one)"}},
		{"wrong key", bridge.Options{URL: srv.URL, Key: "bad", KeyEnv: "$TOOLGATE_KEY"}, []string{"toolgate at " + srv.URL + " answered 401 Unauthorized: the key in $TOOLGATE_KEY is not one of the gateway's"}},
		// A key the gateway named revoked: said of the key in
		// $TOOLGATE_KEY, where it read "is not one of the gateway's, or was
		// revoked or has expired".
		{"revoked key", bridge.Options{URL: srv.URL, Key: "revoked", KeyEnv: "$TOOLGATE_KEY"}, []string{"toolgate at " + srv.URL + " answered 401 Unauthorized: the key in $TOOLGATE_KEY was revoked at 2026-12-06T09:37:15Z: ask the gateway's operator for a key in force, and put it in $TOOLGATE_KEY"}},
		// Another's 401 (a proxy in front): its words, then the fix.
		{"proxy", bridge.Options{URL: srv.URL + "/proxy", KeyEnv: "$TOOLGATE_KEY"}, []string{"answered 401 Unauthorized: Unauthorized: this gateway needs an API key (the gateway needs an API key: put one in $TOOLGATE_KEY"}},
		{"no such route", bridge.Options{URL: srv.URL + "/profiles/nope/mcp", Key: "good"}, []string{"404 Not Found", "/profiles/NAME/mcp"}},
		// A proxy that gave up waiting: the call may still run; its page
		// of HTML was the whole message.
		{"proxy timeout", bridge.Options{URL: srv.URL + "/slow"}, []string{"answered 504 Gateway Timeout (nginx/1.22.1): a proxy in front of the gateway gave up waiting for the answer; the call may have run",
			"proxy_read_timeout", "toolgate.http.heartbeat"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := lines(t, tc.opts, call)
			if len(got) != 1 || got[0]["id"] != 7.0 || got[0]["error"] == nil {
				t.Fatalf("answer: %v, want an error for id 7", got)
			}
			e := got[0]["error"].(map[string]any)
			msg, _ := e["message"].(string)
			if e["code"] != float64(bridge.CodeRefused) {
				t.Errorf("code %v, want %d", e["code"], bridge.CodeRefused)
			}
			for _, w := range tc.want {
				if !strings.Contains(msg, w) {
					t.Errorf("message %q lacks %q", msg, w)
				}
			}
			if strings.Contains(msg, "<html>") {
				t.Errorf("message %q holds the proxy's HTML", msg)
			}
			if strings.Count(strings.ToLower(msg), "needs an api key") > map[bool]int{true: 2, false: 1}[tc.name == "proxy"] {
				t.Errorf("message %q says it needs a key more than once", msg)
			}
		})
	}
}

// The gateway's own JSON-RPC error, sent with an HTTP error status, reaches
// the client as it is: its code (an unsupported protocol version, with the
// versions supported) is what the client acts on.
func TestGatewayErrorPassesThrough(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusBadRequest)
		io.WriteString(w, `{"jsonrpc":"2.0","id":"d-1","error":{"code":-32020,"message":"unsupported protocol version","data":{"supported":["2026-07-28"]}}}`)
	}))
	defer srv.Close()
	got := lines(t, bridge.Options{URL: srv.URL}, `{"jsonrpc":"2.0","id":"d-1","method":"server/discover","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2099-01-01"}}}`+"\n")
	if len(got) != 1 || got[0]["id"] != "d-1" {
		t.Fatalf("answer: %v", got)
	}
	e, _ := got[0]["error"].(map[string]any)
	if e["code"] != -32020.0 || e["data"] == nil {
		t.Errorf("error %v, want the gateway's -32020 with its data", e)
	}
}

// A JSON-RPC batch is not relayed, and the answer says so (it was "parse
// error: json: cannot unmarshal array …", for valid JSON); a line that is
// not JSON is a parse error. The relay goes on after either.
func TestBatchAndParseError(t *testing.T) {
	rc := &recorder{answer: func(w http.ResponseWriter, r *http.Request, msg map[string]any) { jsonAnswer(w, msg, map[string]any{}) }}
	srv := httptest.NewServer(rc)
	defer srv.Close()
	got := lines(t, bridge.Options{URL: srv.URL}, `[{"jsonrpc":"2.0","id":1,"method":"ping"}]`+"\n"+`{"jsonrpc":"2.0","id":2,"method":`+"\n"+`{"jsonrpc":"2.0","id":3,"method":"ping"}`+"\n")
	if len(got) != 3 {
		t.Fatalf("answers: %v, want 3", got)
	}
	var batch, parse map[string]any
	for _, a := range got {
		switch e, _ := a["error"].(map[string]any); {
		case e == nil && a["id"] != 3.0:
			t.Errorf("answer %v", a)
		case e != nil && e["code"] == -32600.0:
			batch = e
		case e != nil && e["code"] == -32700.0:
			parse = e
		}
	}
	if batch == nil || !strings.Contains(batch["message"].(string), "does not relay JSON-RPC batches: send each message on a line of its own") {
		t.Errorf("batch answered %v", got)
	}
	if parse == nil {
		t.Errorf("a line that is not JSON answered %v, want -32700", got)
	}
}

// TestCallWithoutID: a call sent with a null id or none is answered at
// once, -32600 with a null id, as toolgate's own stdio does, and not
// relayed; a notification is relayed. It was relayed as a notification:
// the gateway's 400 reached only the log, and the client waited for good.
func TestCallWithoutID(t *testing.T) {
	rc := &recorder{answer: func(w http.ResponseWriter, r *http.Request, msg map[string]any) { jsonAnswer(w, msg, map[string]any{}) }}
	srv := httptest.NewServer(rc)
	defer srv.Close()
	got := lines(t, bridge.Options{URL: srv.URL}, `{"jsonrpc":"2.0","id":null,"method":"tools/call","params":{}}`+"\n"+
		`{"jsonrpc":"2.0","method":"ping"}`+"\n"+`{"jsonrpc":"2.0","method":"notifications/initialized"}`+"\n"+`{"jsonrpc":"2.0","id":3,"method":"ping"}`+"\n")
	var missing []string
	answered := false
	for _, a := range got {
		e, _ := a["error"].(map[string]any)
		switch {
		case a["id"] == 3.0 && e == nil:
			answered = true
		case a["id"] == nil && e != nil && e["code"] == -32600.0:
			missing = append(missing, e["message"].(string))
		default:
			t.Errorf("answer %v", a)
		}
	}
	slices.Sort(missing)
	if want := []string{linerpc.MissingID("ping"), linerpc.MissingID("tools/call")}; !answered || !slices.Equal(missing, want) {
		t.Errorf("answers %v, want %q and the call with an id answered", got, want)
	}
	rc.mu.Lock()
	defer rc.mu.Unlock()
	if len(rc.bodies) != 2 || !strings.Contains(strings.Join(rc.bodies, "\n"), "notifications/initialized") {
		t.Errorf("relayed %q, want the notification and the call with an id", rc.bodies)
	}
}

// A message over the size limit is skipped and answered -32600 with its
// id, as toolgate's own stdio transport does; the relay goes on (it ended
// with linerpc.ErrLineTooLong).
func TestLineTooLong(t *testing.T) {
	line := `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`
	var out bytes.Buffer
	err := bridge.Run(context.Background(), strings.NewReader(line+"\n"+line+"\n"), &out, bridge.Options{URL: "http://127.0.0.1:1", MaxLineBytes: 20})
	if err != nil {
		t.Errorf("Run with lines over MaxLineBytes: %v, want nil at the end of stdin", err)
	}
	one := `{"jsonrpc":"2.0","id":1,"error":{"code":-32600,"message":"` + linerpc.TooLongMessage(len(line), 20) + `"}}` + "\n"
	if got := out.String(); got != one+one {
		t.Errorf("answered:\n%s\nwant each line answered:\n%s", got, one+one)
	}
}

// A client that closes its end of the bridge's stdout is gone: Run returns
// (nil) although stdin is still open.
func TestClientClosesItsEnd(t *testing.T) {
	rc := &recorder{answer: func(w http.ResponseWriter, r *http.Request, msg map[string]any) { jsonAnswer(w, msg, map[string]any{}) }}
	srv := httptest.NewServer(rc)
	defer srv.Close()
	inR, inW := io.Pipe()
	defer inW.Close()
	outR, outW := io.Pipe()
	outR.Close()
	done := make(chan error, 1)
	go func() { done <- bridge.Run(context.Background(), inR, outW, bridge.Options{URL: srv.URL}) }()
	io.WriteString(inW, `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`+"\n")
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("Run once the client closed its end: %v, want nil", err)
		}
	case <-time.After(time.Minute):
		t.Fatal("Run still runs a minute after the client closed its end")
	}
}

// A call the client cancels ends its request to the gateway (which ends
// the backend call with it); one running when the client closes stdin may
// finish within the grace and its answer is written.
func TestCancelAndGrace(t *testing.T) {
	var ended atomic.Int32
	release := make(chan struct{})
	rc := &recorder{answer: func(w http.ResponseWriter, r *http.Request, msg map[string]any) {
		switch msg["method"] {
		case "tools/call":
			if msg["id"] == 1.0 { // waits for its cancellation
				<-r.Context().Done()
				ended.Add(1)
				return
			}
			<-release
			jsonAnswer(w, msg, map[string]any{"content": []any{}})
		default:
			jsonAnswer(w, msg, map[string]any{})
		}
	}}
	srv := httptest.NewServer(rc)
	defer srv.Close()
	defer close(release)

	inR, inW := io.Pipe()
	var out testenv.LogBuffer
	done := make(chan error, 1)
	go func() {
		done <- bridge.Run(context.Background(), inR, &out, bridge.Options{URL: srv.URL, Grace: time.Minute})
	}()
	io.WriteString(inW, `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"x"}}`+"\n")
	testenv.Eventually(t, "the call at the gateway", func() bool { rc.mu.Lock(); defer rc.mu.Unlock(); return len(rc.bodies) == 1 })
	io.WriteString(inW, `{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":1}}`+"\n")
	testenv.Eventually(t, "the cancelled call's request ended", func() bool { return ended.Load() == 1 })

	io.WriteString(inW, `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"y"}}`+"\n")
	testenv.Eventually(t, "the second call at the gateway", func() bool { rc.mu.Lock(); defer rc.mu.Unlock(); return len(rc.bodies) == 3 })
	inW.Close()
	select {
	case err := <-done:
		t.Fatalf("Run returned (%v) before the call running at stdin's end finished", err)
	default:
	}
	release <- struct{}{}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if got := out.String(); strings.Count(got, "\n") != 1 || !strings.Contains(got, `"id":2`) {
		t.Errorf("the client read %q; want only the second call's answer (the cancelled one has none)", got)
	}
}

// TestClientReadsNoMore: the bridge relays at most MaxPending of its
// client's messages at once, and answers a call over that busy at once
// (it relayed every one, holding each answer: 200,000 searches of a client
// that read no answers took it past 1.4 GB in a minute); and a stop while
// the client reads nothing gives up the answers that wait for it, where it
// waited for them for good.
func TestClientReadsNoMore(t *testing.T) {
	release := make(chan struct{})
	var answered atomic.Int32
	rc := &recorder{answer: func(w http.ResponseWriter, r *http.Request, msg map[string]any) {
		if msg["method"] == "tools/call" {
			<-release
		}
		jsonAnswer(w, msg, map[string]any{"content": []any{}})
		w.(http.Flusher).Flush()
		answered.Add(1)
	}}
	srv := httptest.NewServer(rc)
	defer srv.Close()
	answer := sync.OnceFunc(func() { close(release) })
	defer answer()
	inR, inW := io.Pipe()
	defer inW.Close()
	outR, outW := io.Pipe()
	defer outR.Close()
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	done := make(chan error, 1)
	go func() { done <- bridge.Run(ctx, inR, outW, bridge.Options{URL: srv.URL, MaxPending: 2}) }()
	call := func(id int) {
		t.Helper()
		if _, err := fmt.Fprintf(inW, `{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"x"}}`+"\n", id); err != nil {
			t.Fatal(err)
		}
	}
	call(1)
	call(2)
	testenv.Eventually(t, "two calls at the gateway", func() bool { rc.mu.Lock(); defer rc.mu.Unlock(); return len(rc.bodies) == 2 })
	call(3)
	lines := make(chan string, 1)
	go func() {
		line, _ := bufio.NewReader(outR).ReadString('\n')
		lines <- line
	}()
	want := `{"jsonrpc":"2.0","id":3,"error":{"code":-32052,"message":"` + linerpc.BusyMessage(1, 2) + `"}}` + "\n"
	select {
	case line := <-lines:
		if line != want {
			t.Errorf("the call over the limit was answered %q, want %q", line, want)
		}
	case <-time.After(testenv.Timeout):
		t.Fatal("the call over the limit got no answer")
	}
	// The two calls are answered; the client reads no more, and stops.
	answer()
	testenv.Eventually(t, "the two calls answered", func() bool { return answered.Load() == 2 })
	stop()
	select {
	case <-done:
	case <-time.After(testenv.Timeout):
		t.Fatal("Run still waits for a client that reads nothing a minute after its stop")
	}
}

// holder is a Caller whose calls wait until the test lets them go (hold
// set), each saying it started.
type holder struct {
	hold    atomic.Bool
	started chan struct{}
	release chan struct{}
}

func (h *holder) CallTool(ctx context.Context, server, tool string, _ map[string]any) (*mcp.CallToolResult, error) {
	if h.hold.Load() {
		h.started <- struct{}{}
		select {
		case <-h.release:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: server + "__" + tool + " ran"}}}, nil
}

// TestDeadConnectionFailsTheCall: a gateway on another machine whose
// network drops silently mid-call (a blackhole: no RST, no FIN) is seen
// as gone once it sent none of its beats for Silence: the call is
// answered that it may have run, and the next call connects anew and
// runs. A call that runs long while the beats come is left to finish. The
// call waited for the client's own timeout (here 30 s).
func TestDeadConnectionFailsTheCall(t *testing.T) {
	const beat, silence = 20 * time.Millisecond, time.Second
	h := &holder{started: make(chan struct{}, 1), release: make(chan struct{})}
	g := gateway.New(newEngine(t), h, nil)
	srv := httptest.NewServer(g.HTTPHandler(&gateway.HTTPOptions{Heartbeat: beat}))
	defer srv.Close()
	defer close(h.release) // before srv.Close, which waits for the calls
	relay := testenv.NewDropRelay(t, srv.Listener.Addr().String())
	cs, _, _, _ := run(t, bridge.Options{URL: "http://" + relay.Addr() + "/mcp", Silence: silence})
	args := map[string]any{"name": "notes__add_note", "arguments": map[string]any{}}

	// A call longer than Silence, with the beats coming: it finishes.
	h.hold.Store(true)
	done := make(chan answer, 1)
	go func() { res, err := callTool(t, cs, "execute_tool", args); done <- answer{res, err} }()
	<-h.started
	before := relay.Down.Load()
	poll := time.NewTicker(time.Millisecond)
	defer poll.Stop()
	for relay.Down.Load()-before < 2*int64(silence/beat) { // each read a beat at least a beat after the last
		select {
		case a := <-done:
			t.Fatalf("a long call with the beats coming ended before its answer: %v %s", a.err, text(a.res))
		case <-poll.C:
		}
	}
	h.release <- struct{}{}
	if a := <-done; a.err != nil || text(a.res) != "notes__add_note ran" {
		t.Fatalf("long call: %v %s", a.err, text(a.res))
	}

	// The network drops mid-call.
	dropMidCall(t, cs, h, relay, "sent nothing for 1s", nil)
}

// dropMidCall drops the network (relay) under a call the gateway holds
// (h), then calls then (if set): the call is answered with an error that
// says want and that it may have run; the next call, the network back,
// connects anew and runs.
func dropMidCall(t *testing.T, cs *mcp.ClientSession, h *holder, relay *testenv.DropRelay, want string, then func()) {
	t.Helper()
	args := map[string]any{"name": "notes__add_note", "arguments": map[string]any{}}
	h.hold.Store(true)
	done := make(chan error, 1)
	go func() { _, err := callTool(t, cs, "execute_tool", args); done <- err }()
	<-h.started
	relay.Blackhole.Store(true)
	if then != nil {
		then()
	}
	if err := <-done; err == nil || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), "it may have run") {
		t.Fatalf("call over a dead connection: %v; want an error that says %q and that the call may have run", err, want)
	}
	h.hold.Store(false)
	relay.Blackhole.Store(false)
	if res, err := callTool(t, cs, "execute_tool", args); err != nil || text(res) != "notes__add_note ran" {
		t.Fatalf("the next call, the network back: %v %s", err, text(res))
	}
}

// TestWakeFailsADeadCallSoon: after a sleep of the machine (the laptop's
// lid closed mid-call), a call whose connection died in it gets its answer
// within two of the gateway's beats, not after the rest of its Silence
// (whose timer stood still in the sleep), and the next call connects anew.
// A gateway that says no beat is pinged at once, and the call ends when
// the ping gets no answer.
func TestWakeFailsADeadCallSoon(t *testing.T) {
	for _, tc := range []struct {
		name string
		beat time.Duration
		want string
	}{
		{"beats", 20 * time.Millisecond, "sent nothing for 40ms after this machine woke from a sleep"},
		{"no beat", -1, "this machine woke from a sleep, and the gateway did not answer a ping within 100ms"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			wakes := make(chan func(time.Duration), 1)
			bridge.WakeWith(t.Cleanup, wakes)
			h := &holder{started: make(chan struct{}, 1), release: make(chan struct{})}
			g := gateway.New(newEngine(t), h, nil)
			srv := httptest.NewServer(g.HTTPHandler(&gateway.HTTPOptions{Heartbeat: tc.beat}))
			defer srv.Close()
			defer close(h.release)
			relay := testenv.NewDropRelay(t, srv.Listener.Addr().String())
			// A Silence past the client's own timeout: only the wake can end the call in time.
			cs, _, _, _ := run(t, bridge.Options{URL: "http://" + relay.Addr() + "/mcp", Silence: time.Hour, PingWait: 100 * time.Millisecond})
			woke := <-wakes
			dropMidCall(t, cs, h, relay, tc.want, func() { woke(time.Hour) })
		})
	}
}

// keyring is a gateway.KeyChecker of one key, "tg_a", revoked once
// revoked is set.
type keyring struct{ revoked atomic.Bool }

func (k *keyring) Verify(secret string) (keys.Entry, error) {
	switch {
	case secret != "tg_a":
		return keys.Entry{}, keys.ErrUnknown
	case k.revoked.Load():
		return keys.Entry{Name: "alice"}, fmt.Errorf("%w at 2026-12-06T18:00:00Z", keys.ErrRevoked)
	}
	return keys.Entry{Name: "alice"}, nil
}

// TestKeyRevokedMidCall: a key revoked while a call of its runs ends the
// call at the gateway; the client is told that, in the words of the
// gateway's refusal, not that the gateway stopped answering.
func TestKeyRevokedMidCall(t *testing.T) {
	h := &holder{started: make(chan struct{}, 1), release: make(chan struct{})}
	h.hold.Store(true)
	g := gateway.New(newEngine(t), h, nil)
	kr := &keyring{}
	srv := httptest.NewServer(g.HTTPHandler(&gateway.HTTPOptions{Keys: kr, KeyRecheck: 5 * time.Millisecond}))
	defer srv.Close()
	defer close(h.release)
	cs, _, _, _ := run(t, bridge.Options{URL: srv.URL + "/mcp", Key: "tg_a", KeyEnv: "$TOOLGATE_KEY"})
	done := make(chan answer, 1)
	go func() {
		res, err := callTool(t, cs, "execute_tool", map[string]any{"name": "notes__add_note", "arguments": map[string]any{}})
		done <- answer{res, err}
	}()
	<-h.started
	kr.revoked.Store(true)
	a := <-done
	if a.err == nil && a.res.IsError && strings.Contains(text(a.res), "revoked") {
		return // the gateway's own answer made it out before the request ended
	}
	if err := a.err; err == nil || !strings.Contains(err.Error(), "the key in $TOOLGATE_KEY was revoked at 2026-12-06T18:00:00Z") || !strings.Contains(err.Error(), "it ended the call, which may have run") {
		t.Fatalf("call whose key was revoked while it ran: %v; want the gateway's words for the revoked key (result %s)", err, text(a.res))
	}
}

// pings counts the MCP pings a handler takes.
type pings struct {
	http.Handler
	n atomic.Int64
}

func (p *pings) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	if strings.Contains(string(body), `"method":"ping"`) {
		p.n.Add(1)
	}
	r.Body = io.NopCloser(strings.NewReader(string(body)))
	p.Handler.ServeHTTP(w, r)
}

// TestDeadConnectionNoHeartbeat: a gateway that says no beat (one older
// than the heartbeat, or a proxy that drops the header) is pinged once a
// call got nothing from it for Silence: a gateway that answers the ping
// runs a long call to its end, and one that does not (the network
// dropped) fails the call, said so; the next call connects anew. A call
// to such a gateway was waited for as long as it took.
func TestDeadConnectionNoHeartbeat(t *testing.T) {
	// The ping's wait is Silence at most (Options.PingWait): 1 s, not a
	// time the ping's round trip may take under load. With 100 ms, a
	// gateway that answered its pings was taken for dead in 4 runs of 20
	// of the race build at load 14.
	const silence = time.Second
	h := &holder{started: make(chan struct{}, 1), release: make(chan struct{})}
	g := gateway.New(newEngine(t), h, nil)
	p := &pings{Handler: g.HTTPHandler(&gateway.HTTPOptions{Heartbeat: -1})}
	srv := httptest.NewServer(p)
	defer srv.Close()
	defer close(h.release)
	relay := testenv.NewDropRelay(t, srv.Listener.Addr().String())
	cs, _, _, _ := run(t, bridge.Options{URL: "http://" + relay.Addr() + "/mcp", Silence: silence})
	args := map[string]any{"name": "notes__add_note", "arguments": map[string]any{}}
	done := make(chan answer, 1)

	// A long call, the gateway answering the pings: it finishes.
	h.hold.Store(true)
	go func() { res, err := callTool(t, cs, "execute_tool", args); done <- answer{res, err} }()
	<-h.started
	testenv.Eventually(t, "three pings during the call", func() bool {
		select {
		case a := <-done:
			t.Fatalf("a long call of a gateway that answers its pings ended before its answer: %v %s", a.err, text(a.res))
		default:
		}
		return p.n.Load() >= 3
	})
	h.release <- struct{}{}
	if a := <-done; a.err != nil || text(a.res) != "notes__add_note ran" {
		t.Fatalf("long call: %v %s", a.err, text(a.res))
	}

	// The network drops mid-call: the ping gets no answer either.
	dropMidCall(t, cs, h, relay, "sent nothing for 1s and did not answer a ping within 1s", nil)
}

// swap is a handler that can be replaced while it serves (a gateway
// restarted as another version at the same address).
type swap struct{ h atomic.Pointer[http.Handler] }

func (s *swap) ServeHTTP(w http.ResponseWriter, r *http.Request) { (*s.h.Load()).ServeHTTP(w, r) }

// TestGatewayRolledBackToNoBeat: a gateway that beat, restarted as one
// that says no beat (rolled back to a version older than the heartbeat),
// is not held to the beat it said before once it has answered: a call
// longer than Silence runs to its end while the gateway answers the
// pings. Its old beat was kept for good, and every call longer than
// Silence was answered that the connection was dead.
func TestGatewayRolledBackToNoBeat(t *testing.T) {
	// Not a time its beats or the pings' round trips may take under load:
	// with 100 ms, a gateway that beat every 20 ms, or answered its pings,
	// was taken for dead in 7 runs of 20 of the race build at load 14.
	const silence = time.Second
	h := &holder{started: make(chan struct{}, 1), release: make(chan struct{})}
	g := gateway.New(newEngine(t), h, nil)
	beating := g.HTTPHandler(&gateway.HTTPOptions{Heartbeat: 20 * time.Millisecond})
	p := &pings{Handler: g.HTTPHandler(&gateway.HTTPOptions{Heartbeat: -1})}
	var old http.Handler = p
	sw := &swap{}
	sw.h.Store(&beating)
	srv := httptest.NewServer(sw)
	defer srv.Close()
	defer close(h.release)
	cs, _, _, _ := run(t, bridge.Options{URL: srv.URL + "/mcp", Silence: silence})
	args := map[string]any{"name": "notes__add_note", "arguments": map[string]any{}}
	if res, err := callTool(t, cs, "execute_tool", args); err != nil || text(res) != "notes__add_note ran" {
		t.Fatalf("a call of the gateway that beats: %v %s", err, text(res))
	}
	sw.h.Store(&old)
	if res, err := callTool(t, cs, "execute_tool", args); err != nil || text(res) != "notes__add_note ran" {
		t.Fatalf("the first call of the rolled-back gateway: %v %s", err, text(res))
	}
	h.hold.Store(true)
	done := make(chan error, 1)
	go func() { _, err := callTool(t, cs, "execute_tool", args); done <- err }()
	<-h.started
	testenv.Eventually(t, "three pings during the call", func() bool {
		select {
		case err := <-done:
			t.Fatalf("a long call of the rolled-back gateway ended before its answer: %v", err)
		default:
		}
		return p.n.Load() >= 3
	})
	h.release <- struct{}{}
	if err := <-done; err != nil {
		t.Fatalf("long call: %v", err)
	}
}

// TestGatewayCrashMidCall: a gateway that closes the connection of a call
// it has read without answering (it crashed: killed, out of memory; or it
// stopped) is said so, with the warning that the call may have run. It
// read "does not answer: …: EOF; start it", as for a gateway that was
// never reached.
func TestGatewayCrashMidCall(t *testing.T) {
	g, _ := newGateway(t)
	front := g.HTTPHandler(nil)
	var crash atomic.Bool
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if crash.Load() {
			io.ReadAll(r.Body) // the call is read, and runs
			if conn, _, err := w.(http.Hijacker).Hijack(); err == nil {
				conn.Close()
			}
			return
		}
		front.ServeHTTP(w, r)
	}))
	defer srv.Close()
	cs, _, _, _ := run(t, bridge.Options{URL: srv.URL + "/mcp"})
	crash.Store(true)
	_, err := callTool(t, cs, "execute_tool", map[string]any{"name": "notes__add_note", "arguments": map[string]any{}})
	const want = "it closed the connection after the request without an answer (EOF): it stopped or crashed during the call, which may have run: check before calling again"
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("a call the gateway read and then closed the connection of: %v\nwant it to say %q", err, want)
	}
}

// deadConn is a transport whose requests, once dead is set, are written
// and then fail as a connection TCP keepalive found dead does (the network
// dropped under a call: a NAT that forgot it, an address that changed).
type deadConn struct{ dead atomic.Bool }

func (d *deadConn) RoundTrip(req *http.Request) (*http.Response, error) {
	if !d.dead.Load() {
		return http.DefaultTransport.RoundTrip(req)
	}
	io.ReadAll(req.Body)
	if tr := httptrace.ContextClientTrace(req.Context()); tr != nil && tr.WroteRequest != nil {
		tr.WroteRequest(httptrace.WroteRequestInfo{})
	}
	return nil, &net.OpError{Op: "read", Net: "tcp", Err: os.NewSyscallError("read", syscall.ETIMEDOUT)}
}

// TestKeepaliveEndsACall: a call whose connection TCP keepalive found
// dead is said to have lost its connection, and that it may have run. It
// read "does not answer: read: connection timed out; start it", as for a
// gateway never reached: measured with an older gateway, whose call
// nothing else watches, 167 s after the network dropped.
func TestKeepaliveEndsACall(t *testing.T) {
	g, _ := newGateway(t)
	srv := httptest.NewServer(g.HTTPHandler(nil))
	defer srv.Close()
	d := &deadConn{}
	cs, _, _, _ := run(t, bridge.Options{URL: srv.URL + "/mcp", Client: &http.Client{Transport: d}})
	d.dead.Store(true)
	_, err := callTool(t, cs, "execute_tool", map[string]any{"name": "notes__add_note", "arguments": map[string]any{}})
	const want = "does not answer: the connection to it died during the call (read: connection timed out: the network dropped), which may have run: check before calling again"
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("a call whose connection keepalive found dead: %v\nwant it to say %q", err, want)
	}
}
