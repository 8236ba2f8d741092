package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"golang.org/x/sys/unix"

	"github.com/toolgate/toolgate/gateway/backend/backendtest"
	"github.com/toolgate/toolgate/internal/testenv"
)

// TestConnect: stdio clients share one gateway served over HTTP through
// `toolgate connect`, found on the data folder with no address given. A
// gateway restarted under them answers their next call (a call while it is
// down is an error that says so); one that wants an API key gets the
// client's $TOOLGATE_KEY, and a client without one is told where to put it.
func TestConnect(t *testing.T) {
	data := t.TempDir()
	cfg := fakeConfig(t, map[string]string{"fake": backendtest.ModeNormal, "ask": backendtest.ModeProgress + "," + backendtest.ModeAsk}, nil)
	addr := freeAddr(t)
	serve := func() *gatewayProc {
		return startServe(t, toolgateCmd(t, data, "serve", "--config", cfg, "--http", addr, "--mode", "bm25"), addr)
	}
	gw := serve()
	indexServedHTTP(t, addr) // a cold start past its wait answers "being built"; no probe search: the pairs learned are counted

	call := func(cs *mcp.ClientSession, name string, args map[string]any) (string, error) {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: args})
		if err != nil {
			return "", err
		}
		if res.IsError {
			return "", errors.New(resultText(res))
		}
		return resultText(res), nil
	}
	echo := func(cs *mcp.ClientSession, text string) (string, error) {
		return call(cs, "execute_tool", map[string]any{"name": "fake__echo", "arguments": map[string]any{"text": text}})
	}

	_, first := connectStdio(t, toolgateCmd(t, data, "connect"), 2*time.Minute)
	_, second := connectStdio(t, toolgateCmd(t, data, "connect"), 2*time.Minute)
	if got, err := call(first, "search_tools", map[string]any{"query": "echo the given text back"}); err != nil || !strings.Contains(got, "fake__echo") {
		t.Fatalf("search_tools through connect: %q, %v", got, err)
	}
	for i, cs := range []*mcp.ClientSession{first, second} {
		if got, err := echo(cs, fmt.Sprint("hello ", i)); err != nil || got != fmt.Sprint("hello ", i) {
			t.Errorf("client %d: execute_tool through connect = %q, %v", i, got, err)
		}
	}
	// The first client searched, then ran a tool the search returned: the
	// shared gateway learned it (the second only ran one).
	testenv.Eventually(t, "the pair learned through connect", func() bool {
		l := getStatus(t, addr).Learning
		return l != nil && l.Pairs == 1 && l.Tools == 1
	})
	if st := getStatus(t, addr); st.Up != 2 || st.Total != 2 {
		t.Errorf("the shared gateway runs %d of %d backends, want the two", st.Up, st.Total)
	}

	// What the gateway sends during a call reaches the client: progress,
	// and questions (input-required rounds of a 2026-07-28 client).
	var mu sync.Mutex
	var progress []string
	var asked []string
	asker := mcp.NewClient(&mcp.Implementation{Name: "asker", Version: "1"}, &mcp.ClientOptions{
		ProgressNotificationHandler: func(_ context.Context, req *mcp.ProgressNotificationClientRequest) {
			mu.Lock()
			progress = append(progress, req.Params.Message)
			mu.Unlock()
		},
		ElicitationHandler: func(_ context.Context, req *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
			mu.Lock()
			asked = append(asked, req.Params.Message)
			mu.Unlock()
			return &mcp.ElicitResult{Action: "accept", Content: map[string]any{"ok": true}}, nil
		},
	})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	ac, err := asker.Connect(ctx, &mcp.CommandTransport{Command: toolgateCmd(t, data, "connect")}, &mcp.ClientSessionOptions{ProtocolVersion: "2026-07-28"})
	if err != nil {
		t.Fatal(err)
	}
	defer ac.Close()
	params := &mcp.CallToolParams{Name: "execute_tool", Arguments: map[string]any{"name": "ask__progress", "arguments": map[string]any{"steps": 2}}}
	params.SetProgressToken("p-1")
	if res, err := ac.CallTool(ctx, params); err != nil || res.IsError {
		t.Errorf("ask__progress through connect: %v %s", err, resultText(res))
	}
	if got, err := call(ac, "execute_tool", map[string]any{"name": "ask__confirm", "arguments": map[string]any{"text": "delete the draft"}}); err != nil || !strings.Contains(got, `accept {"ok":true}`) {
		t.Errorf("ask__confirm through connect: %q, %v", got, err)
	}
	mu.Lock()
	if want := []string{backendtest.ProgressMessage(1), backendtest.ProgressMessage(2)}; !slices.Equal(progress, want) {
		t.Errorf("progress the client got: %q, want %q", progress, want)
	}
	if want := []string{`server "ask" asks: ` + backendtest.ConfirmMessage("delete the draft")}; !slices.Equal(asked, want) {
		t.Errorf("questions the client got: %q, want %q", asked, want)
	}
	mu.Unlock()

	start := time.Now()
	gw.signal(t, syscall.SIGTERM)
	gw.waitExit(t, start)
	if _, err := echo(first, "while down"); err == nil || !strings.Contains(err.Error(), "toolgate at http://"+addr+"/mcp does not answer") ||
		!strings.Contains(err.Error(), "toolgate serve --http") {
		t.Errorf("a call while the gateway is down: %v, want the bridge's error with the fix", err)
	}
	// The gateway comes back, now with an API key.
	key := createKey(t, data, "--name", "clients")
	gw = serve()
	if _, err := echo(first, "no key"); err == nil || !strings.Contains(err.Error(), "401") || !strings.Contains(err.Error(), "put one in $"+envKey) {
		t.Errorf("a call without the key the gateway now wants: %v", err)
	}
	withKey := toolgateCmd(t, data, "connect")
	withKey.Env = append(withKey.Env, envKey+"="+key)
	_, third := connectStdio(t, withKey, 2*time.Minute)
	if got, err := echo(third, "with the key"); err != nil || got != "with the key" {
		t.Errorf("execute_tool with the key, after the gateway restarted: %q, %v", got, err)
	}

	// A client of another config is not relayed to this config's
	// gateway (one left running for `make run`, say).
	otherCfg := fakeConfig(t, map[string]string{"fake": backendtest.ModeNormal}, nil)
	if _, stderr, err := runToolgate(t, data, "connect", "--config", otherCfg, "--addr", addr); err == nil || !strings.Contains(stderr, "serves another config ("+cfg+")") ||
		!strings.Contains(stderr, "point --addr at the gateway serving") {
		t.Errorf("connect --config of another config to this gateway: %v\n%s", err, stderr)
	}
	// Without --addr it passes this gateway over and tries the default
	// address: what it says when nothing answers there names the gateway
	// passed over and why, and the fix (it said only "start it").
	// (Not the default address itself: the developer's own gateway may
	// answer there.)
	nowhere := freeAddr(t)
	_, front, err := bridgeURL(context.Background(), &globals{dataDir: data, logger: slog.New(slog.DiscardHandler)}, connectFlags{config: otherCfg, fallback: nowhere})
	if passed := fmt.Sprintf("pid %d at %s serves %s", gw.pid, addr, cfg); err != nil || front.addr != nowhere ||
		!strings.Contains(front.down, "serves "+otherCfg+" (those there serve other configs: "+passed+")") || !strings.Contains(front.down, "pass --start") {
		t.Errorf("connect --config of another config without --addr: %q at %s, %v; want it to name %q and --start", front.down, front.addr, err, passed)
	}

	// Two gateways on HTTP: connect does not guess.
	other := freeAddr(t)
	startServe(t, toolgateCmd(t, data, "serve", "--config", cfg, "--http", other, "--mode", "bm25"), other)
	_, stderr, err := runToolgate(t, data, "connect")
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != 2 || !strings.Contains(stderr, "several gateways serve HTTP") || !strings.Contains(stderr, addr) ||
		!strings.Contains(stderr, other) || !strings.Contains(stderr, "--addr") {
		t.Errorf("connect with two HTTP gateways on the data folder: %v\n%s", err, stderr)
	}
}

// TestConnectCallsOverRestarts: a call made as the gateway restarts under
// `toolgate connect` (systemd's restart: SIGTERM; or Restart=on-failure
// after a crash: SIGKILL), sent once the gateway was told to stop, is run
// by the restarted gateway. It was answered "it closed the connection
// after the request without an answer (EOF) … which may have run" in about
// 1 restart of 5 after a SIGTERM and nearly every one after a SIGKILL
// (the gateway closes or resets the connection the request came on, and
// drops a request it reads while stopping, without running it).
func TestConnectCallsOverRestarts(t *testing.T) {
	data := t.TempDir()
	cfg := fakeConfig(t, map[string]string{"fake": backendtest.ModeNormal}, nil)
	addr := freeAddr(t)
	serve := func() *gatewayProc {
		return startServe(t, toolgateCmd(t, data, "serve", "--config", cfg, "--http", addr, "--mode", "bm25"), addr)
	}
	gw := serve()
	indexServedHTTP(t, addr)
	_, cs := connectStdio(t, toolgateCmd(t, data, "connect"), 2*time.Minute)
	echo := func(text string) error {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "execute_tool", Arguments: map[string]any{"name": "fake__echo", "arguments": map[string]any{"text": text}}})
		switch {
		case err != nil:
			return err
		case res.IsError || resultText(res) != text:
			return fmt.Errorf("answered %q (isError %v)", resultText(res), res.IsError)
		}
		return nil
	}
	if err := echo("before"); err != nil {
		t.Fatalf("a call before the restarts: %v", err)
	}
	const restarts = 10
	var failed []string
	for i := range restarts {
		// The stop finds the backend up, as a restart a few times a day
		// does (one stopped while it connects answers a call waiting for
		// it that it is unavailable).
		testenv.Eventually(t, "the backend up", func() bool { return getStatus(t, addr).Up == 1 })
		sig := syscall.SIGTERM
		if i%2 == 1 {
			sig = syscall.SIGKILL
		}
		start := time.Now()
		gw.signal(t, sig)
		answered := make(chan error, 1)
		go func() { answered <- echo(fmt.Sprint("restart ", i)) }()
		gw.waitExit(t, start)
		gw = serve()
		if err := <-answered; err != nil {
			failed = append(failed, fmt.Sprintf("restart %d (%v): %v", i+1, sig, err))
		}
	}
	if len(failed) > 0 {
		t.Errorf("%d of %d calls made as the gateway restarted failed:\n%s", len(failed), restarts, strings.Join(failed, "\n"))
	}
}

// The address connect relays to: a host:port or URL, a config's
// toolgate.http.addr, a profile's endpoint.
func TestBridgeURL(t *testing.T) {
	g := &globals{dataDir: t.TempDir()}
	cfg := filepath.Join(t.TempDir(), "toolgate.json")
	writeRaw(t, cfg, []byte(`{"mcpServers": {"a": {"command": "a"}}, "toolgate": {"http": {"addr": "0.0.0.0:9100"}}}`), false)
	for _, tc := range []struct {
		f    connectFlags
		want string
		err  string
	}{
		{f: connectFlags{addr: "127.0.0.1:9000"}, want: "http://127.0.0.1:9000/mcp"},
		{f: connectFlags{addr: ":9000"}, want: "http://127.0.0.1:9000/mcp"},
		{f: connectFlags{addr: "http://gw.internal:9000/mcp"}, want: "http://gw.internal:9000/mcp"},
		{f: connectFlags{addr: "http://gw.internal:9000/"}, want: "http://gw.internal:9000/mcp"},
		{f: connectFlags{addr: "127.0.0.1:9000", profile: "ops"}, want: "http://127.0.0.1:9000/profiles/ops/mcp"},
		{f: connectFlags{config: cfg}, want: "http://127.0.0.1:9100/mcp"},
		{f: connectFlags{}, want: "http://" + defaultStatusAddr + "/mcp"}, // none runs on the data folder
		// Behind a reverse proxy serving the gateway under a path: /mcp
		// and a profile's are under it (it posted to the path itself).
		{f: connectFlags{addr: "https://gw.corp.example/toolgate"}, want: "https://gw.corp.example/toolgate/mcp"},
		{f: connectFlags{addr: "https://gw.corp.example/toolgate/"}, want: "https://gw.corp.example/toolgate/mcp"},
		{f: connectFlags{addr: "https://gw.corp.example/toolgate/mcp"}, want: "https://gw.corp.example/toolgate/mcp"},
		{f: connectFlags{addr: "https://gw.corp.example/toolgate", profile: "kg"}, want: "https://gw.corp.example/toolgate/profiles/kg/mcp"},
		{f: connectFlags{addr: "https://gw.corp.example/toolgate/mcp", profile: "kg"}, want: "https://gw.corp.example/toolgate/profiles/kg/mcp"},
		{f: connectFlags{addr: "https://gw.corp.example/toolgate/profiles/kg/mcp"}, want: "https://gw.corp.example/toolgate/profiles/kg/mcp"},
		{f: connectFlags{addr: "http://gw:9000/profiles/a/mcp", profile: "a"}, want: "http://gw:9000/profiles/a/mcp"},
		{f: connectFlags{addr: "http://gw:9000/profiles/a/mcp", profile: "b"}, err: "without the path of profile a"},
		{f: connectFlags{addr: "nope"}, err: "want host:port"},
	} {
		got, _, err := bridgeURL(context.Background(), g, tc.f)
		var ue usageError
		switch {
		case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err) || !errors.As(err, &ue)):
			t.Errorf("%+v: %q, %v; want a usage error saying %q", tc.f, got, err, tc.err)
		case tc.err == "" && (err != nil || got != tc.want):
			t.Errorf("%+v: %q, %v; want %q", tc.f, got, err, tc.want)
		}
	}
}

// TestFrontPathURLs: status and health ask the routes of a gateway served
// under a reverse proxy's path, given as the path, its /mcp, or a
// profile's endpoint (which asked /profiles/kg/status).
func TestFrontPathURLs(t *testing.T) {
	for addr, want := range map[string]string{
		"127.0.0.1:8931":                            "http://127.0.0.1:8931",
		"[fe80::1%eth0]:8931":                       "http://[fe80::1%25eth0]:8931", // a zone: %25 in a URL
		"[::]:8931":                                 "http://127.0.0.1:8931",
		"http://gw/mcp":                             "http://gw",
		"https://gw/toolgate":                       "https://gw/toolgate",
		"https://gw/toolgate/":                      "https://gw/toolgate",
		"https://gw/toolgate/mcp/":                  "https://gw/toolgate",
		"https://gw/toolgate/profiles/kg/mcp":       "https://gw/toolgate",
		"https://gw/profiles/kg/mcp":                "https://gw",
		"https://gw/toolgate/profiles/kg/mcp/extra": "https://gw/toolgate/profiles/kg/mcp/extra",
	} {
		got, err := statusURL(addr)
		if err != nil || got != want+"/status" {
			t.Errorf("statusURL(%q) = %q, %v; want %s/status", addr, got, err, want)
		}
	}
}

// TestBridgeURLAnotherConfig: with --config, a gateway of another config is
// refused, and the fix fits how it was found: at the config's own address,
// give the config a port or pass --addr; at an --addr given, point --addr
// elsewhere or leave --config out (it said "or pass --addr" there too).
func TestBridgeURLAnotherConfig(t *testing.T) {
	other := "/elsewhere/toolgate.json"
	gw := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/status" {
			http.NotFound(w, r)
			return
		}
		fmt.Fprintf(w, `{"process": {"pid": 4242, "transport": "http", "config": [%q]}}`, other)
	}))
	defer gw.Close()
	addr := strings.TrimPrefix(gw.URL, "http://")
	g := &globals{dataDir: t.TempDir()}
	cfg := filepath.Join(t.TempDir(), "toolgate.json")
	writeRaw(t, cfg, []byte(`{"mcpServers": {"a": {"command": "a"}}, "toolgate": {"http": {"addr": "`+addr+`"}}}`), false)
	for _, tc := range []struct {
		f            connectFlags
		want, unwant string
	}{
		{connectFlags{config: cfg}, "give " + cfg + " a port of its own (toolgate.http.addr), or pass --addr", ""},
		{connectFlags{config: cfg, addr: addr}, "(--addr) serves another config (" + other + "), not " + cfg + ": point --addr at the gateway serving " + cfg + ", or leave --config out", "pass --addr"},
	} {
		_, _, err := bridgeURL(context.Background(), g, tc.f)
		var ue usageError
		if err == nil || !errors.As(err, &ue) || !strings.Contains(err.Error(), tc.want) || (tc.unwant != "" && strings.Contains(err.Error(), tc.unwant)) {
			t.Errorf("%+v: %v; want a usage error saying %q", tc.f, err, tc.want)
		}
	}
}

// TestConnectStart: `toolgate connect --start` starts the shared gateway
// when none runs, one for two clients started together; it stops once no request came
// for --idle, and a client that calls after that starts it again (the call
// is answered).
func TestConnectStart(t *testing.T) {
	data := t.TempDir()
	cfg := fakeConfig(t, map[string]string{"fake": backendtest.ModeNormal}, nil)
	addr := freeAddr(t)
	httpGateways := func() []int {
		var pids []int
		for _, gw := range localGateways(context.Background(), data, 5*time.Second) {
			if p := gw.rep.Process; gw.err == nil && p != nil && p.Transport == "http" {
				pids = append(pids, p.PID)
			}
		}
		return pids
	}
	// The gateways it starts run in sessions of their own: end them with
	// the test.
	t.Cleanup(func() {
		for _, pid := range httpGateways() {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	})
	// Idle after 6 s: at 2 s, under load, the first client's gateway could
	// idle out before the second client looked for one, and the second
	// then started its own, no race lost (2 started, 0 lost).
	args := []string{"connect", "--start", "--config", cfg, "--addr", addr, "--idle", "6s"}
	echo := func(cs *mcp.ClientSession, text string) {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "execute_tool", Arguments: map[string]any{"name": "fake__echo", "arguments": map[string]any{"text": text}}})
		if err != nil || res.IsError || resultText(res) != text {
			t.Fatalf("execute_tool through connect --start: %v %s", err, resultText(res))
		}
	}

	// Two clients started together: both find no gateway, both start
	// one, and the one that finds the address taken uses the other's.
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	var sessions [2]*mcp.ClientSession
	var errs [2]error
	var wg sync.WaitGroup
	var logs [2]testenv.LogBuffer
	for i := range sessions {
		cmd := toolgateCmd(t, data, args...)
		cmd.Stderr = &logs[i]
		wg.Go(func() {
			sessions[i], errs[i] = mcp.NewClient(&mcp.Implementation{Name: "e2e"}, nil).Connect(ctx, &mcp.CommandTransport{Command: cmd}, nil)
		})
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("client %d through connect --start: %v", i, err)
		}
		t.Cleanup(func() { sessions[i].Close() })
	}
	first, second := sessions[0], sessions[1]
	echo(first, "started")
	echo(second, "found")
	pids := httpGateways()
	if len(pids) != 1 {
		t.Fatalf("gateways serving HTTP on the data folder: %v, want the one the first client started", pids)
	}
	// A client whose gateway lost the race for the address says it uses
	// the other's (it said only that it started one, whose pid was gone):
	// of two clients that each started one, exactly one says so. Read from
	// their logs, not from the pid serving now: under load the winner can
	// idle out (--idle) before the calls above, and a call start another
	// (CI saw the serving pid be neither client's first).
	started, lost := 0, 0
	for i := range logs {
		l := logs[i].String()
		if strings.Contains(l, "started a gateway") {
			started++
		}
		if strings.Contains(l, "another client's gateway took the address first, and this client uses it") {
			lost++
		}
	}
	if want := max(started-1, 0); lost != want {
		t.Errorf("%d clients started a gateway and %d said another's took the address first, want %d:\nclient 0:\n%s\nclient 1:\n%s", started, lost, want, &logs[0], &logs[1])
	}
	testenv.EventuallyWithin(t, time.Minute, "the gateway stopping once idle", func() bool { return syscall.Kill(pids[0], 0) != nil })

	echo(first, "started again")
	again := httpGateways()
	if len(again) != 1 || again[0] == pids[0] {
		t.Errorf("gateways after the call: %v, want a new one (the first, pid %d, stopped)", again, pids[0])
	}
}

// TestConnectStartAnyPort: connect --start with a config whose
// toolgate.http.addr has port 0 starts the gateway on a free port and
// relays to the port it bound (its status socket says which), where it
// started one at the default address, 127.0.0.1:8931; two clients started
// together use one gateway; the gateway started again once the first idled
// out binds the same port.
func TestConnectStartAnyPort(t *testing.T) {
	data := t.TempDir()
	cfg := fakeConfig(t, map[string]string{"fake": backendtest.ModeNormal}, map[string]any{"http": map[string]any{"addr": "127.0.0.1:0"}})
	served := func() map[int]string {
		out := map[int]string{}
		for _, gw := range localGateways(context.Background(), data, 5*time.Second) {
			if p := gw.rep.Process; gw.err == nil && p != nil && p.Transport == "http" {
				out[p.PID] = p.Addr
			}
		}
		return out
	}
	t.Cleanup(func() {
		for pid := range served() {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	})
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	var sessions [2]*mcp.ClientSession
	var errs [2]error
	var wg sync.WaitGroup
	for i := range sessions {
		cmd := toolgateCmd(t, data, "connect", "--start", "--config", cfg, "--idle", "6s")
		wg.Go(func() {
			sessions[i], errs[i] = mcp.NewClient(&mcp.Implementation{Name: "e2e"}, nil).Connect(ctx, &mcp.CommandTransport{Command: cmd}, nil)
		})
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("client %d through connect --start (port 0): %v", i, err)
		}
		t.Cleanup(func() { sessions[i].Close() })
	}
	echo := func(cs *mcp.ClientSession, text string) {
		t.Helper()
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "execute_tool", Arguments: map[string]any{"name": "fake__echo", "arguments": map[string]any{"text": text}}})
		if err != nil || res.IsError || resultText(res) != text {
			t.Fatalf("execute_tool through connect --start (port 0): %v %s", err, resultText(res))
		}
	}
	echo(sessions[0], "first")
	echo(sessions[1], "second")
	gws := served()
	if len(gws) != 1 {
		t.Fatalf("gateways serving HTTP on the data folder: %v, want the one a client started", gws)
	}
	var pid int
	var addr string
	for pid, addr = range gws {
	}
	if u, err := gatewayURL(addr); err != nil || anyPort(u.Host) || u.Host == defaultStatusAddr {
		t.Fatalf("the gateway started serves %s, want a free port of 127.0.0.1", addr)
	}
	testenv.EventuallyWithin(t, time.Minute, "the gateway stopping once idle", func() bool { return syscall.Kill(pid, 0) != nil })
	echo(sessions[0], "started again")
	again := served()
	if len(again) != 1 || again[pid] != "" || !slices.Contains(slices.Collect(maps.Values(again)), addr) {
		t.Errorf("gateways after the call: %v, want a new one at %s (the first, pid %d, stopped)", again, addr, pid)
	}
}

// An MCP request running keeps a gateway from idling, whatever its length;
// GETs (health checks, scrapes) are not use.
func TestIdleWatch(t *testing.T) {
	start := time.Now()
	w := &idleWatch{last: start}
	release := make(chan struct{})
	h := w.wrap(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { <-release }))
	done := make(chan struct{})
	go func() {
		h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest(http.MethodPost, "/mcp", nil))
		close(done)
	}()
	testenv.Eventually(t, "the request running", func() bool { return w.idleFor(start.Add(time.Hour)) == 0 })
	close(release)
	<-done
	ended := time.Now()
	if d := w.idleFor(ended.Add(time.Minute)); d < time.Minute {
		t.Errorf("idle %s a minute after the request ended", d)
	}
	h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest(http.MethodGet, "/healthz", nil)) // after ended
	if d := w.idleFor(ended.Add(time.Minute)); d < time.Minute {
		t.Errorf("a GET counted as use: idle %s a minute after the last POST", d)
	}
}

// --exit-when-idle is for a gateway on HTTP, and a duration of 0 or more.
func TestExitWhenIdleUsage(t *testing.T) {
	cfg := fakeConfig(t, map[string]string{"fake": backendtest.ModeNormal}, nil)
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"serve", "--config", cfg, "--exit-when-idle", "1m"}, "--exit-when-idle needs --http"},
		{[]string{"serve", "--config", cfg, "--http", "127.0.0.1:0", "--exit-when-idle", "-1s"}, "want a duration of 0 (never) or more"},
		{[]string{"connect", "--start", "--addr", "127.0.0.1:1"}, "--start needs --config"},
	} {
		_, stderr, err := runToolgate(t, t.TempDir(), tc.args...)
		var exit *exec.ExitError
		if !errors.As(err, &exit) || exit.ExitCode() != 2 || !strings.Contains(stderr, tc.want) {
			t.Errorf("%v: %v\n%s; want exit status 2 saying %q", tc.args, err, stderr, tc.want)
		}
	}
}

// serve without an HTTP address on a stdin that is /dev/null (a systemd
// unit, `docker run` without -i) has no client to serve: a usage error
// that says how to serve HTTP. It used to take the end of /dev/null for its
// client leaving and exit 0 at once, so the unit stopped "successfully" and
// Restart=on-failure did not restart it.
func TestServeOnNullStdinWithoutAddress(t *testing.T) {
	cfg := fakeConfig(t, map[string]string{"fake": backendtest.ModeNormal}, nil)
	_, stderr, err := runToolgate(t, t.TempDir(), "serve", "--config", cfg) // exec gives stdin /dev/null
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != 2 {
		t.Fatalf("serve on /dev/null without --http: %v, want exit status 2\n%s", err, stderr)
	}
	for _, want := range []string{"stdin is /dev/null", "pass --http 127.0.0.1:8931 (or set toolgate.http.addr in the config)"} {
		if !strings.Contains(stderr, want) {
			t.Errorf("stderr lacks %q:\n%s", want, stderr)
		}
	}
	if strings.Contains(stderr, "backend up") || strings.Contains(stderr, "closed stdin") {
		t.Errorf("it started before refusing:\n%s", stderr)
	}
}

// A gateway with --exit-when-idle says so in its status: a gateway that
// connect --start started is seen to stop by itself.
func TestExitWhenIdleInStatus(t *testing.T) {
	data := t.TempDir()
	cfg := fakeConfig(t, map[string]string{"fake": backendtest.ModeNormal}, nil)
	addr := freeAddr(t)
	startServe(t, toolgateCmd(t, data, "serve", "--config", cfg, "--http", addr, "--mode", "bm25", "--exit-when-idle", "1h"), addr)
	if p := getStatus(t, addr).Process; p == nil || p.ExitWhenIdle != "1h0m0s" {
		t.Errorf("status process: %+v, want exitWhenIdle 1h0m0s", p)
	}
	out, _, _ := runToolgate(t, data, "status")
	if !strings.Contains(out, "(http "+addr+", stops after 1h0m0s without a request)") {
		t.Errorf("toolgate status does not say the gateway stops when idle:\n%s", out)
	}
}

// TestServeConfigAddr: without --http, a config's toolgate.http.addr (the
// address toolgate connect and status take from the file) is served when
// no MCP client started the gateway (stdin /dev/null, as a service's), but
// a client that starts `serve --config` with that file on stdio is
// answered on stdio: it waited for an answer that never came, and the
// gateway, serving HTTP, outlived it.
func TestServeConfigAddr(t *testing.T) {
	addr := freeAddr(t)
	cfg := fakeConfig(t, map[string]string{"fake": backendtest.ModeNormal}, map[string]any{"http": map[string]any{"addr": addr}})
	t.Run("stdio client", func(t *testing.T) {
		serve := toolgateCmd(t, t.TempDir(), "serve", "--config", cfg, "--mode", "bm25")
		serve.Stderr = testLog(t, "serve: ")
		ctx, cs := connectStdio(t, serve, testenv.Timeout)
		res, err := cs.ListTools(ctx, nil)
		if err != nil || len(res.Tools) != 2 {
			t.Fatalf("tools/list over stdio: %v, %+v; want the two tools", err, res)
		}
	})
	t.Run("service", func(t *testing.T) {
		startServe(t, toolgateCmd(t, t.TempDir(), "serve", "--config", cfg, "--mode", "bm25"), addr) // stdin: /dev/null
	})
}

// serve without an HTTP address on a terminal (someone typed `toolgate
// serve` to start a gateway) says that it speaks MCP on stdio and listens
// on no network, with the flag that serves HTTP: it said "gateway ready"
// and nothing else, a curl found nothing listening, and a line typed got
// a JSON-RPC parse error.
func TestServeOnTerminalSaysStdio(t *testing.T) {
	master, err := os.OpenFile("/dev/ptmx", os.O_RDWR|unix.O_NOCTTY, 0)
	if err != nil {
		testenv.Missing(t, "no pseudo-terminal: %v", err)
	}
	defer master.Close()
	if err := unix.IoctlSetPointerInt(int(master.Fd()), unix.TIOCSPTLCK, 0); err != nil {
		t.Fatal(err)
	}
	n, err := unix.IoctlGetInt(int(master.Fd()), unix.TIOCGPTN)
	if err != nil {
		t.Fatal(err)
	}
	tty, err := os.OpenFile(fmt.Sprintf("/dev/pts/%d", n), os.O_RDWR|unix.O_NOCTTY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer tty.Close()

	cfg := fakeConfig(t, map[string]string{"fake": backendtest.ModeNormal}, nil)
	cmd := toolgateCmd(t, t.TempDir(), "serve", "--config", cfg, "--mode", "bm25")
	cmd.Stdin, cmd.Stdout = tty, tty
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Signal(os.Interrupt); _ = cmd.Wait() })
	var said []string
	sc := bufio.NewScanner(stderr)
	for sc.Scan() && !strings.Contains(sc.Text(), `msg="gateway ready"`) {
		said = append(said, sc.Text())
	}
	log := strings.Join(said, "\n")
	for _, want := range []string{"stdin is a terminal: this gateway speaks MCP", "nothing listens on the network", "pass --http 127.0.0.1:8931"} {
		if !strings.Contains(log, want) {
			t.Errorf("serve on a terminal, before gateway ready: the log lacks %q:\n%s", want, log)
		}
	}
}

// connect --silence: how long a call may hear nothing from the gateway
// before its connection is looked at, 0 to never look; left out, the
// bridge's default (three of the gateway's beats). A negative one is a
// usage error that says what to give.
func TestConnectSilence(t *testing.T) {
	for _, tc := range []struct {
		arg  string
		want time.Duration
	}{{"", 0}, {"0", -1}, {"2m", 2 * time.Minute}, {"500ms", 500 * time.Millisecond}} {
		f := connectFlags{silence: -1}
		if tc.arg != "" {
			d, err := time.ParseDuration(tc.arg)
			if err != nil {
				t.Fatal(err)
			}
			f.silence = d
		}
		got, err := f.silenceOption(tc.arg != "")
		if err != nil || got != tc.want {
			t.Errorf("--silence %q: %v, %v; want Options.Silence %v", tc.arg, got, err, tc.want)
		}
	}
	for _, tc := range []struct{ arg, want string }{
		{"-1s", "--silence -1s: want a duration above 0 (how long a call may hear nothing from the gateway), or 0 to never check"},
		{"5", `invalid argument "5" for "--silence" flag`},
	} {
		_, stderr, err := runToolgate(t, t.TempDir(), "connect", "--addr", "127.0.0.1:1", "--silence", tc.arg)
		var exit *exec.ExitError
		if !errors.As(err, &exit) || exit.ExitCode() != 2 || !strings.Contains(stderr, tc.want) {
			t.Errorf("--silence %s: %v\n%s; want exit status 2 saying %q", tc.arg, err, stderr, tc.want)
		}
	}
}
