package backend

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolgate/toolgate/gateway/backend/backendtest"
	"github.com/toolgate/toolgate/gateway/config"
)

// TestGoSDKSSEClientAsRelied: what scopeConn (sserefusal.go) leans on in
// go-sdk's SSE client, checked on its own against go-sdk's SSE server, so
// that the day go-sdk changes it this test names the cause, where
// TestScopeRefusalOverSSE and TestOAuthStepUpKeepsSession/sse only see an
// SSE backend go down again on a 403 insufficient_scope:
//   - Write sends its POST with the context it was given (its values reach
//     the HTTP client's RoundTrip): noteScopeRefusal finds the write's
//     scopeNote there;
//   - Read, its context cancelled, returns without taking a message that
//     is there to read: scopeConn cancels the read under way to hand over
//     its own answer, and the stream's message is read after it.
func TestGoSDKSSEClientAsRelied(t *testing.T) {
	srv := backendtest.NewHTTPServer(t, config.TypeSSE, backendtest.ModeNormal)
	type mark struct{}
	var mu sync.Mutex
	marks := map[string]any{} // the mark each POST's context carried, by request body
	hc := &http.Client{Transport: roundTrip(func(r *http.Request) (*http.Response, error) {
		if r.Method == http.MethodPost && r.GetBody != nil {
			b, _ := r.GetBody()
			var m struct{ Method string }
			_ = json.NewDecoder(b).Decode(&m)
			mu.Lock()
			marks[m.Method] = r.Context().Value(mark{})
			mu.Unlock()
		}
		return http.DefaultTransport.RoundTrip(r)
	})}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second) // bounds a failure only
	defer cancel()
	conn, err := (&mcp.SSEClientTransport{Endpoint: srv.Endpoint, HTTPClient: hc}).Connect(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	call := func(id int64, method string, params any) {
		t.Helper()
		p, _ := json.Marshal(params)
		jid, _ := jsonrpc.MakeID(float64(id))
		if err := conn.Write(context.WithValue(ctx, mark{}, method), &jsonrpc.Request{ID: jid, Method: method, Params: p}); err != nil {
			t.Fatalf("write %s: %v", method, err)
		}
	}
	call(1, "initialize", map[string]any{"protocolVersion": LegacyProtocolVersion, "capabilities": map[string]any{},
		"clientInfo": map[string]any{"name": "t", "version": "1"}})
	if msg, err := conn.Read(ctx); err != nil {
		t.Fatalf("the initialize answer: %v", err)
	} else if r, ok := msg.(*jsonrpc.Response); !ok || r.Error != nil {
		t.Fatalf("the initialize answer: %+v", msg)
	}
	mu.Lock()
	got := marks["initialize"]
	mu.Unlock()
	if got != "initialize" {
		t.Errorf("go-sdk's SSE client sent its POST without the write's context (a value of it read %v): "+
			"noteScopeRefusal no longer finds the scopeNote, and an SSE server's 403 insufficient_scope ends the session again", got)
	}
	if err := conn.Write(ctx, &jsonrpc.Request{Method: "notifications/initialized", Params: json.RawMessage(`{}`)}); err != nil {
		t.Fatal(err)
	}

	// Many answers in a row, read as scopeConn reads them when it hands
	// over answers of its own: a read cancelled, then one that waits. A
	// cancelled read that took an answer and dropped it leaves one of
	// the waiting reads with none.
	const pings = 40
	for i := range pings {
		call(int64(10+i), "ping", map[string]any{})
	}
	done, stop := context.WithCancel(ctx)
	stop()
	seen := map[jsonrpc.ID]bool{}
	for len(seen) < pings {
		msg, err := conn.Read(done)
		if err == nil {
			seen[msg.(*jsonrpc.Response).ID] = true
			continue
		} else if !errors.Is(err, context.Canceled) {
			t.Fatalf("a read with its context cancelled: %v, want context.Canceled", err)
		}
		msg, err = conn.Read(ctx)
		if err != nil {
			t.Fatalf("go-sdk's SSE client lost an answer to a read whose context was cancelled: %d of %d ping answers read, then %v; "+
				"scopeConn cancels such reads to hand over its own answers", len(seen), pings, err)
		}
		seen[msg.(*jsonrpc.Response).ID] = true
	}
	if len(seen) != pings {
		t.Errorf("%d answers read, want %d", len(seen), pings)
	}
}
