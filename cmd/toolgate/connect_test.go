package main

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolgate/toolgate/gateway/backend/backendtest"
	"github.com/toolgate/toolgate/gateway/config"
	"github.com/toolgate/toolgate/internal/testenv"
)

// TestConnect: stdio clients share one gateway served over HTTP through
// `toolgate connect`, found on the data folder with no address given. A
// gateway restarted under them answers their next call (a call while it is
// down is an error that says so); one that wants an API key gets the
// client's $TOOLGATE_KEY, and a client without one is told where to put it.
func TestConnect(t *testing.T) {
	data := t.TempDir()
	cfg := filepath.Join(t.TempDir(), "toolgate.json")
	writeServers(t, cfg, map[string]config.Server{
		"fake": backendtest.Command(t, backendtest.ModeNormal),
		"ask":  backendtest.Command(t, backendtest.ModeProgress+","+backendtest.ModeAsk),
	}, false)
	addr := freeAddr(t)
	serve := func() *gatewayProc {
		return startServe(t, toolgateCmd(t, data, "serve", "--config", cfg, "--http", addr, "--mode", "bm25"), addr)
	}
	gw := serve()

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
	if want := []string{backendtest.ConfirmMessage("delete the draft")}; !slices.Equal(asked, want) {
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
	serve()
	if _, err := echo(first, "no key"); err == nil || !strings.Contains(err.Error(), "401") || !strings.Contains(err.Error(), "put one in $"+envKey) {
		t.Errorf("a call without the key the gateway now wants: %v", err)
	}
	withKey := toolgateCmd(t, data, "connect")
	withKey.Env = append(withKey.Env, envKey+"="+key)
	_, third := connectStdio(t, withKey, 2*time.Minute)
	if got, err := echo(third, "with the key"); err != nil || got != "with the key" {
		t.Errorf("execute_tool with the key, after the gateway restarted: %q, %v", got, err)
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
		{f: connectFlags{addr: "http://gw:9000/profiles/a/mcp", profile: "b"}, err: "without a path"},
		{f: connectFlags{addr: "nope"}, err: "want host:port"},
	} {
		got, err := bridgeURL(context.Background(), g, tc.f)
		var ue usageError
		switch {
		case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err) || !errors.As(err, &ue)):
			t.Errorf("%+v: %q, %v; want a usage error saying %q", tc.f, got, err, tc.err)
		case tc.err == "" && (err != nil || got != tc.want):
			t.Errorf("%+v: %q, %v; want %q", tc.f, got, err, tc.want)
		}
	}
}
