package gateway

import (
	"context"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolgate/toolgate/internal/testenv"
)

// heartbeatEvery is the beat of the tests: short, and under load a beat
// only comes later.
const heartbeatEvery = 20 * time.Millisecond

// TestHeartbeatKeepsAProxyFromCutting: a call that runs longer than a
// proxy's idle limit (nginx's proxy_read_timeout, a load balancer's idle
// timeout, here an in-test relay's IdleCut) is not cut: the front sends a
// byte of nothing every Heartbeat while it runs, as whitespace before a
// JSON answer and as an SSE comment in an event stream (a call with a
// progress token). It sent nothing until the answer, and the proxy cut it.
func TestHeartbeatKeepsAProxyFromCutting(t *testing.T) {
	for _, tc := range []struct {
		name string
		meta mcp.Meta
	}{
		{"json", nil},
		{"event stream", mcp.Meta{"progressToken": "tok"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			release := make(chan struct{})
			g, _ := newTestGateway(t, &fakeCaller{call: func(server, tool string, _ map[string]any) (*mcp.CallToolResult, error) {
				<-release
				return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "finally"}}}, nil
			}})
			// The cut is 50 beats: a gap of 10 (200 ms) without a byte
			// happened once on a loaded machine (the beats' goroutine not
			// run in time), which no proxy's idle limit is near.
			const every, cut = heartbeatEvery, 50 * heartbeatEvery
			srv := httptest.NewServer(g.HTTPHandler(&HTTPOptions{Heartbeat: every}))
			defer srv.Close()
			var once sync.Once
			free := func() { once.Do(func() { close(release) }) }
			defer free() // before srv.Close, which waits for the call
			relay := testenv.NewIdleCutRelay(t, srv.Listener.Addr().String(), cut)
			cs, err := mcp.NewClient(&mcp.Implementation{Name: "test"}, nil).Connect(context.Background(),
				&mcp.StreamableClientTransport{Endpoint: "http://" + relay.Addr() + "/mcp"}, nil)
			if err != nil {
				t.Fatal(err)
			}
			defer cs.Close()

			before := relay.Down.Load()
			type answer struct {
				res *mcp.CallToolResult
				err error
			}
			done := make(chan answer, 1)
			go func() {
				res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: ExecuteToolName, Meta: tc.meta,
					Arguments: map[string]any{"name": "everything__add", "arguments": map[string]any{"a": 1, "b": 2}}})
				done <- answer{res, err}
			}()
			// Each beat is a tick of Heartbeat at least after the one
			// before: 2*cut/every reads carried down means the call has
			// run well past the proxy's idle limit.
			poll := time.NewTicker(time.Millisecond)
			defer poll.Stop()
			for relay.Down.Load()-before < 2*int64(cut/every) {
				select {
				case a := <-done:
					t.Fatalf("the call ended while it ran (the proxy cut it %d times): %v %q", relay.Cut.Load(), a.err, text(a.res))
				case <-poll.C:
				}
				if n := relay.Cut.Load(); n > 0 {
					// go-sdk's client waits on for an answer that cannot come.
					t.Fatalf("the proxy cut the call's connection after %s without a byte (%d reads carried before)", cut, relay.Down.Load()-before)
				}
			}
			free()
			a := <-done
			if a.err != nil || a.res.IsError || text(a.res) != "finally" {
				t.Fatalf("answer after the beats: %v %q", a.err, text(a.res))
			}
		})
	}
}

// TestHeartbeatHeader: every MCP answer says how often the front beats.
func TestHeartbeatHeader(t *testing.T) {
	g, _ := newTestGateway(t, nil)
	srv := httptest.NewServer(g.HTTPHandler(nil))
	defer srv.Close()
	resp, err := srv.Client().Post(srv.URL+"/mcp", "application/json", strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"ping"}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if got := resp.Header.Get(HeartbeatHeader); got != DefaultHeartbeat.String() {
		t.Errorf("%s: %q, want %q", HeartbeatHeader, got, DefaultHeartbeat)
	}
	if got := resp.Header.Get("X-Accel-Buffering"); got != "no" {
		t.Errorf("X-Accel-Buffering: %q, want no", got)
	}
}
