package gateway

//lint:file-ignore SA1019 MCP logging is deprecated from protocol 2026-07-28 on (SEP-2577) but is what 2025-11-25 clients and servers speak, and it stays functional in the deprecation window; execute_tool relays it (issue 13)

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolgate/toolgate/gateway/audit/audittest"
	"github.com/toolgate/toolgate/gateway/backend"
	"github.com/toolgate/toolgate/gateway/backend/backendtest"
	"github.com/toolgate/toolgate/gateway/config"
	"github.com/toolgate/toolgate/internal/linerpc"
	"github.com/toolgate/toolgate/internal/testenv"
)

// heard is what a client received besides results.
type heard struct {
	mu       sync.Mutex
	progress []*mcp.ProgressNotificationParams
	logs     []*mcp.LoggingMessageParams
}

func (h *heard) counts() (progress, logs int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.progress), len(h.logs)
}

// waitFor waits until the client has heard progress progress
// notifications and logs log messages in all. go-sdk's client handles
// notifications in order but apart from results, so a call's result may
// come back before its notifications are handled; a count reached by a
// later call's notifications also proves that an earlier call sent none.
func (h *heard) waitFor(t *testing.T, progress, logs int) {
	t.Helper()
	if !testenv.Poll(testenv.Timeout, func() bool {
		p, l := h.counts()
		return p >= progress && l >= logs
	}) {
		p, l := h.counts()
		t.Fatalf("waited for %d progress notifications and %d log messages at the client; heard %d and %d", progress, logs, p, l)
	}
	if p, l := h.counts(); p != progress || l != logs {
		t.Fatalf("the client heard %d progress notifications and %d log messages, want %d and %d", p, l, progress, logs)
	}
}

func (h *heard) clientOptions() *mcp.ClientOptions {
	return &mcp.ClientOptions{
		ProgressNotificationHandler: func(_ context.Context, r *mcp.ProgressNotificationClientRequest) {
			h.mu.Lock()
			h.progress = append(h.progress, r.Params)
			h.mu.Unlock()
		},
		LoggingMessageHandler: func(_ context.Context, r *mcp.LoggingMessageRequest) {
			h.mu.Lock()
			h.logs = append(h.logs, r.Params)
			h.mu.Unlock()
		},
	}
}

// connectHeard connects a client that records notifications to g over an
// in-memory transport (what stdio is, minus the pipe), speaking protocol pv.
func connectHeard(t *testing.T, g *Gateway, pv string) (*mcp.ClientSession, *heard) {
	t.Helper()
	h := &heard{}
	ct, st := mcp.NewInMemoryTransports()
	ctx := context.Background()
	ss, err := g.Server().Connect(ctx, st, nil)
	if err != nil {
		t.Fatal(err)
	}
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "test"}, h.clientOptions()).Connect(ctx, ct, &mcp.ClientSessionOptions{ProtocolVersion: pv})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close(); ss.Wait() })
	return cs, h
}

// executeWith calls execute_tool with params' _meta (a progress token, a
// log level).
func executeWith(ctx context.Context, t *testing.T, cs *mcp.ClientSession, name string, args map[string]any, meta mcp.Meta) *mcp.CallToolResult {
	t.Helper()
	p := &mcp.CallToolParams{Name: ExecuteToolName, Arguments: map[string]any{"name": name, "arguments": args}}
	p.Meta = meta
	res, err := cs.CallTool(ctx, p)
	if err != nil {
		t.Fatalf("execute_tool %s: protocol error %v", name, err)
	}
	return res
}

// checkProgress: the progress notifications from the from-th on carry the
// client's own token and the backend's progress, total and message of each
// of steps steps, in order.
func checkProgress(t *testing.T, h *heard, from int, token any, steps int) {
	t.Helper()
	h.mu.Lock()
	defer h.mu.Unlock()
	if len(h.progress) != from+steps {
		t.Fatalf("%d progress notifications, want %d", len(h.progress), from+steps)
	}
	for i, p := range h.progress[from:] {
		if fmt.Sprint(p.ProgressToken) != fmt.Sprint(token) || p.Progress != float64(i+1) || p.Total != float64(steps) || p.Message != backendtest.ProgressMessage(i+1) {
			t.Errorf("progress %d = %+v, want token %v, %d of %d, %q", i, p, token, i+1, steps, backendtest.ProgressMessage(i+1))
		}
	}
}

// TestProgressAndLogsRelayed: over a session (stdio), with both protocol
// versions, a call with a progress token gets the backend's progress
// notifications under the client's own token; log messages come through
// when the client set a log level (logging/setLevel, or the request's _meta
// from 2026-07-28 on), at that level and above, named after the server. A
// call without a token, or a client without a level, hears nothing.
func TestProgressAndLogsRelayed(t *testing.T) {
	rg := newRealGateway(t, []config.Server{fakeServer(t, "fake", backendtest.ModeProgress)}, nil)
	ctx := context.Background()
	for _, pv := range []string{"2025-11-25", "2026-07-28"} {
		t.Run(pv, func(t *testing.T) {
			cs, h := connectHeard(t, rg.g, pv)
			res := executeWith(ctx, t, cs, "fake__progress", map[string]any{"steps": 4}, mcp.Meta{"progressToken": "client-token-1"})
			if res.IsError || text(res) != "done 4 steps" {
				t.Fatalf("result: isError=%v %q", res.IsError, text(res))
			}
			h.waitFor(t, 4, 0)
			checkProgress(t, h, 0, "client-token-1", 4)
			executeWith(ctx, t, cs, "fake__progress", map[string]any{"steps": 3}, nil) // no token: nothing
			executeWith(ctx, t, cs, "fake__progress", map[string]any{"steps": 2}, mcp.Meta{"progressToken": 77})
			h.waitFor(t, 6, 0)
			checkProgress(t, h, 4, 77, 2)

			// Logs at "info" and above.
			var meta mcp.Meta
			if pv >= backend.StatelessProtocolVersion {
				meta = mcp.Meta{mcp.MetaKeyLogLevel: "info"}
			} else {
				if err := cs.SetLoggingLevel(ctx, &mcp.SetLoggingLevelParams{Level: "info"}); err != nil {
					t.Fatal(err)
				}
			}
			executeWith(ctx, t, cs, "fake__progress", map[string]any{"steps": 3}, meta)
			h.waitFor(t, 6, 3)
			h.mu.Lock()
			for i, l := range h.logs {
				if l.Level != "info" || l.Logger != "fake/"+backendtest.ProgressLogger || l.Data != backendtest.ProgressMessage(i+1) {
					t.Errorf("log %d = %+v, want info from fake/%s: %q", i, l, backendtest.ProgressLogger, backendtest.ProgressMessage(i+1))
				}
			}
			h.mu.Unlock()

			// At "warning", the info messages stay behind.
			if pv >= backend.StatelessProtocolVersion {
				meta = mcp.Meta{mcp.MetaKeyLogLevel: "warning", "progressToken": "t3"}
			} else {
				if err := cs.SetLoggingLevel(ctx, &mcp.SetLoggingLevelParams{Level: "warning"}); err != nil {
					t.Fatal(err)
				}
				meta = mcp.Meta{"progressToken": "t3"}
			}
			executeWith(ctx, t, cs, "fake__progress", map[string]any{"steps": 1}, meta)
			h.waitFor(t, 7, 3)
		})
	}
}

// TestCancelReachesBackend: a client's cancelled execute_tool is cancelled
// at the backend (not left to run to its deadline): over a session by
// notifications/cancelled, over streamable HTTP by the closed request
// (go-sdk's 2025-11-25 client closes the call's POST too; its
// notifications/cancelled, a POST of its own, cannot reach a stateless
// server's call). The gateway hands the cancel on to a backend of each
// transport: a stdio process and an SSE server read notifications/cancelled,
// a streamable HTTP server with a session too, and a stateless one
// (2026-07-28) sees the call's POST close (when it asks for that: go-sdk's
// PropagateRequestCancellation; a server that does not runs the call on).
func TestCancelReachesBackend(t *testing.T) {
	for _, bk := range []struct {
		name string
		srv  func(t *testing.T) config.Server
		// notified: the backend reads notifications/cancelled (not a
		// stateless one, which sees the POST close).
		notified bool
	}{
		{"stdio", func(t *testing.T) config.Server { return fakeServer(t, "fake", "hang") }, true},
		{"http", func(t *testing.T) config.Server {
			return backendtest.NewHTTPServer(t, config.TypeHTTP, backendtest.ModeHang).Config("fake", nil)
		}, true},
		{"http stateless", func(t *testing.T) config.Server {
			return backendtest.NewHTTPServer(t, config.TypeHTTP, "hang,stateless,propagate-cancel").Config("fake", nil)
		}, false},
		{"sse", func(t *testing.T) config.Server {
			return backendtest.NewHTTPServer(t, config.TypeSSE, backendtest.ModeHang).Config("fake", nil)
		}, true},
	} {
		t.Run(bk.name, func(t *testing.T) {
			// A deadline far beyond the wait: only the cancellation can end the call.
			rg := newRealGateway(t, []config.Server{bk.srv(t)}, &backend.Options{CallTimeout: time.Hour})
			srv := httptest.NewServer(rg.g.HTTPHandler(nil))
			defer srv.Close()
			cancelled := 0
			cancelOne := func(t *testing.T, cs *mcp.ClientSession) {
				t.Helper()
				cancelHang(t, rg, cs, cancelled)
				cancelled++
				testenv.Eventually(t, "the backend's call cancelled", func() bool {
					res, err := rg.pool.CallTool(context.Background(), "fake", "hangs", nil)
					return err == nil && text(res) == backendtest.HangCount(0, cancelled)
				})
				if bk.notified {
					// Who cancelled it, where go-sdk says "context canceled".
					waitCancelReasons(t, rg, "fake", strings.Repeat(backend.CancelReasonPrefix+ErrClientCancelled.Error()+"\n", cancelled))
				}
			}
			t.Run("session", func(t *testing.T) {
				cancelOne(t, connect(t, rg.g))
			})
			for _, pv := range []string{"2025-11-25", "2026-07-28"} {
				t.Run("http "+pv, func(t *testing.T) {
					cs, err := mcp.NewClient(&mcp.Implementation{Name: "test"}, nil).Connect(context.Background(),
						&mcp.StreamableClientTransport{Endpoint: srv.URL + "/mcp"}, &mcp.ClientSessionOptions{ProtocolVersion: pv})
					if err != nil {
						t.Fatal(err)
					}
					defer cs.Close()
					cancelOne(t, cs)
				})
			}
		})
	}
}

// waitCancelReasons waits until the hang server named server has read
// notifications/cancelled with these reasons first (each followed by a
// newline; a poll that timed out under load adds one of its own).
func waitCancelReasons(t *testing.T, rg *realGateway, server, want string) {
	t.Helper()
	var got string
	if !testenv.Poll(testenv.Timeout, func() bool {
		res, err := rg.pool.CallTool(context.Background(), server, "hang-reasons", nil)
		if err == nil {
			got = text(res) + "\n"
		}
		return strings.HasPrefix(got, want)
	}) {
		t.Fatalf("the backend read notifications/cancelled with reasons %q, want %q", got, want)
	}
}

// cancelHang runs execute_tool fake__hang on cs and cancels it once the
// fake server (mode hang, cancelled calls of hang so far) has it.
func cancelHang(t *testing.T, rg *realGateway, cs *mcp.ClientSession, cancelled int) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		_, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: ExecuteToolName, Arguments: map[string]any{"name": "fake__hang"}})
		done <- err
	}()
	testenv.Eventually(t, "the hang call waiting at the backend", func() bool {
		res, err := rg.pool.CallTool(context.Background(), "fake", "hangs", nil)
		return err == nil && text(res) == backendtest.HangCount(1, cancelled)
	})
	cancel()
	<-done
}

// TestTimedOutOrCancelledMayHaveRun: a call that timed out, and one its
// client cancelled once the backend had it, may have run: execute_tool's
// answer and the audit record say so (backend.ErrMayHaveRun's warning),
// where they said only that the call timed out, or was cancelled by the
// client.
func TestTimedOutOrCancelledMayHaveRun(t *testing.T) {
	warn := ": " + backend.ErrMayHaveRun.Error()
	log := &audittest.Log{}
	late := fakeServer(t, "late", backendtest.ModeHang)
	late.CallTimeout = config.Duration{Duration: 300 * time.Millisecond}
	rg := newRealGatewayWith(t, []config.Server{fakeServer(t, "fake", backendtest.ModeHang), late}, &backend.Options{CallTimeout: time.Hour}, &Options{Audit: log})
	cs := connect(t, rg.g)
	reason := func(tool string) string {
		t.Helper()
		var r string
		testenv.Eventually(t, "the call's audit record", func() bool {
			for _, rec := range log.Records() {
				if rec.Action == ExecuteToolName && rec.Tool == tool {
					r = rec.Reason
					return true
				}
			}
			return false
		})
		return r
	}

	res := executeWith(context.Background(), t, cs, "late__hang", nil, nil)
	timedOut := `call "hang" on "late": no answer within 300ms: ` + backend.ErrCallTimeout.Error() + warn
	if want := "execute_tool late__hang: the call timed out and was cancelled on the server: " + timedOut + ". Retry with a smaller request, or later."; !res.IsError || text(res) != want {
		t.Errorf("the answer to a call that timed out:\n%s\nwant:\n%s", text(res), want)
	}
	if got := reason("late__hang"); got != timedOut {
		t.Errorf("the audit record of a call that timed out says %q, want %q", got, timedOut)
	}

	waitCancelReasons(t, rg, "late", backend.CancelReasonPrefix+"no answer within 300ms (callTimeout)\n")

	cancelHang(t, rg, cs, 0)
	if got, want := reason("fake__hang"), "cancelled by the client"+warn; got != want {
		t.Errorf("the audit record of a call its client cancelled says %q, want %q", got, want)
	}
}

// TestCancelSaysWho: a call whose client went away (its connection ended)
// is cancelled on its backend with a reason that says so, and its audit
// record too, where the backend read "context canceled" and the record
// "cancelled by the client". (A cancel, a timeout: TestCancelReachesBackend,
// TestTimedOutOrCancelledMayHaveRun.)
func TestCancelSaysWho(t *testing.T) {
	log := &audittest.Log{}
	rg := newRealGatewayWith(t, []config.Server{fakeServer(t, "fake", backendtest.ModeHang)}, &backend.Options{CallTimeout: time.Hour}, &Options{Audit: log})
	// The gateway's stdio transport, and a client that writes its lines
	// and then closes its end (stdin closed: gone without a cancel).
	ctx := context.Background()
	in, client := io.Pipe()
	out, gw := io.Pipe()
	go io.Copy(io.Discard, out) //nolint:errcheck // the answers are not read
	ss, err := rg.g.Server().Connect(ctx, &linerpc.Transport{Reader: in, Writer: gw, Server: true}, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range []string{
		`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"test","version":"1"}}}`,
		`{"jsonrpc":"2.0","method":"notifications/initialized"}`,
		`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"execute_tool","arguments":{"name":"fake__hang"}}}`,
	} {
		if _, err := io.WriteString(client, line+"\n"); err != nil {
			t.Fatal(err)
		}
	}
	testenv.Eventually(t, "the hang call waiting at the backend", func() bool {
		res, err := rg.pool.CallTool(ctx, "fake", "hangs", nil)
		return err == nil && text(res) == backendtest.HangCount(1, 0)
	})
	client.Close()
	ss.Wait()
	waitCancelReasons(t, rg, "fake", backend.CancelReasonPrefix+ErrClientGone.Error()+"\n")
	want := ErrClientGone.Error() + ": the call was cancelled: " + backend.ErrMayHaveRun.Error()
	testenv.Eventually(t, "the call's audit record", func() bool {
		for _, rec := range log.Records() {
			if rec.Action == ExecuteToolName && rec.Tool == "fake__hang" {
				if rec.Reason != want {
					t.Fatalf("the audit record of a call whose client went away says %q, want %q", rec.Reason, want)
				}
				return true
			}
		}
		return false
	})
}

// TestHTTPStreamsWhenAsked: over streamable HTTP an execute_tool with a
// progress token (both protocol versions) or a log level in its _meta
// (2026-07-28) is answered as an SSE stream that carries the notifications
// before the result; other requests keep their single JSON body.
func TestHTTPStreamsWhenAsked(t *testing.T) {
	rg := newRealGateway(t, []config.Server{fakeServer(t, "fake", backendtest.ModeProgress)}, nil)
	types := &contentTypes{}
	srv := httptest.NewServer(types.record(rg.g.HTTPHandler(nil)))
	defer srv.Close()
	ctx := context.Background()
	for _, pv := range []string{"2025-11-25", "2026-07-28"} {
		t.Run(pv, func(t *testing.T) {
			h := &heard{}
			cs, err := mcp.NewClient(&mcp.Implementation{Name: "test"}, h.clientOptions()).Connect(ctx,
				&mcp.StreamableClientTransport{Endpoint: srv.URL + "/mcp"}, &mcp.ClientSessionOptions{ProtocolVersion: pv})
			if err != nil {
				t.Fatal(err)
			}
			defer cs.Close()
			types.reset()
			res := executeWith(ctx, t, cs, "fake__progress", map[string]any{"steps": 4}, mcp.Meta{"progressToken": "tok"})
			if res.IsError || text(res) != "done 4 steps" {
				t.Fatalf("result: isError=%v %q", res.IsError, text(res))
			}
			h.waitFor(t, 4, 0)
			checkProgress(t, h, 0, "tok", 4)
			if got := types.last(); got != "text/event-stream" {
				t.Errorf("a call with a progress token was answered as %q, want text/event-stream", got)
			}
			executeWith(ctx, t, cs, "fake__echo", map[string]any{"text": "x"}, nil)
			if got := types.last(); got != "application/json" {
				t.Errorf("a plain call was answered as %q, want application/json", got)
			}
			if pv < backend.StatelessProtocolVersion {
				return // a log level is a session's, and stateless HTTP has none (see the README)
			}
			executeWith(ctx, t, cs, "fake__progress", map[string]any{"steps": 2}, mcp.Meta{mcp.MetaKeyLogLevel: "debug"})
			if got := types.last(); got != "text/event-stream" {
				t.Errorf("a call with a log level was answered as %q, want text/event-stream", got)
			}
			h.waitFor(t, 4, 2)
			h.mu.Lock()
			logs := h.logs
			h.mu.Unlock()
			if logs[0].Logger != "fake/"+backendtest.ProgressLogger || logs[1].Data != backendtest.ProgressMessage(2) {
				t.Errorf("log messages over HTTP: %+v, want the 2 steps'", logs)
			}
		})
	}
}

// contentTypes records the Content-Type of the answers to POSTs, as they
// are sent (the client may have the answer before the handler returns).
type contentTypes struct {
	mu    sync.Mutex
	types []string
}

func (c *contentTypes) record(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost {
			h.ServeHTTP(w, r)
			return
		}
		h.ServeHTTP(&typeWriter{ResponseWriter: w, c: c}, r)
	})
}

type typeWriter struct {
	http.ResponseWriter
	c     *contentTypes
	wrote bool
}

func (w *typeWriter) WriteHeader(code int) {
	if !w.wrote {
		w.wrote = true
		if ct := w.Header().Get("Content-Type"); ct != "" {
			w.c.mu.Lock()
			w.c.types = append(w.c.types, strings.TrimSpace(strings.Split(ct, ";")[0]))
			w.c.mu.Unlock()
		}
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *typeWriter) Write(b []byte) (int, error) {
	if !w.wrote {
		w.WriteHeader(http.StatusOK)
	}
	return w.ResponseWriter.Write(b)
}

func (w *typeWriter) Flush() { http.NewResponseController(w.ResponseWriter).Flush() }

func (w *typeWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

func (c *contentTypes) reset() {
	c.mu.Lock()
	c.types = nil
	c.mu.Unlock()
}

func (c *contentTypes) last() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.types) == 0 {
		return ""
	}
	return c.types[len(c.types)-1]
}

// TestSetLevelRefusesUnknownLevel: logging/setLevel with a level the
// protocol does not have ("warn", as Python and many loggers write it) is
// invalid params naming the levels; go-sdk took it, the backends refused it
// in turn, and the client heard no log messages and was not told why. The
// protocol's levels are taken.
func TestSetLevelRefusesUnknownLevel(t *testing.T) {
	g, _ := newTestGateway(t, nil)
	cs := connect(t, g)
	ctx := context.Background()
	err := cs.SetLoggingLevel(ctx, &mcp.SetLoggingLevelParams{Level: "warn"})
	var werr *jsonrpc.Error
	if !errors.As(err, &werr) || werr.Code != jsonrpc.CodeInvalidParams || !strings.Contains(werr.Message, `"warn" is not one of the protocol's: debug, info, notice, warning,`) {
		t.Fatalf("setLevel warn: %v, want invalid params naming the levels", err)
	}
	for _, l := range backend.Levels() {
		if err := cs.SetLoggingLevel(ctx, &mcp.SetLoggingLevelParams{Level: l}); err != nil {
			t.Errorf("setLevel %s: %v", l, err)
		}
	}
}

// TestStalledClientHoldsNoOtherCalls: a client that stops reading in the
// middle of a call's progress notifications (an HTTP client that leaves its
// event stream unread, a stdio client whose pipe is full) holds up no other
// client's calls to the same backend: its notifications wait in a queue of
// relayQueue, the rest dropped, where their write held the loop that reads
// every answer of that backend. Once it reads again it gets what was
// queued, then its result.
func TestStalledClientHoldsNoOtherCalls(t *testing.T) {
	rg := newRealGateway(t, []config.Server{fakeServer(t, "fake", backendtest.ModeProgress)}, nil)
	ctx := context.Background()
	stalled, ss := connectRaw(t, rg.g) // a synchronous pipe: a write waits for its reader
	t.Cleanup(func() { stalled.Close(); ss.Close() })
	send := func(id any, method, params string) {
		t.Helper()
		msg := &jsonrpc.Request{Method: method, Params: json.RawMessage(params)}
		if id != nil {
			msg.ID, _ = jsonrpc.MakeID(id)
		}
		if err := stalled.Write(ctx, msg); err != nil {
			t.Fatal(err)
		}
	}
	read := func() jsonrpc.Message {
		t.Helper()
		msg, err := stalled.Read(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return msg
	}
	send(float64(1), "initialize", `{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"stalled","version":"1"}}`)
	read()
	send(nil, "notifications/initialized", `{}`)
	steps := 2 * relayQueue
	send(float64(2), "tools/call", fmt.Sprintf(`{"name":"execute_tool","arguments":{"name":"fake__progress","arguments":{"steps":%d}},"_meta":{"progressToken":"stalled"}}`, steps))
	if n, ok := read().(*jsonrpc.Request); !ok || n.Method != "notifications/progress" {
		t.Fatalf("read %v, want the call's first progress notification", n)
	}
	// The client reads no more: the backend's next notification waits.
	other := connect(t, rg.g)
	cctx, cancel := context.WithTimeout(ctx, testenv.Timeout)
	defer cancel()
	res, err := other.CallTool(cctx, &mcp.CallToolParams{Name: ExecuteToolName, Arguments: map[string]any{"name": "fake__echo", "arguments": map[string]any{"text": "x"}}})
	if err != nil || res.IsError {
		t.Fatalf("another client's call to the backend, while a client reads nothing: %v %v", err, res)
	}
	// The queue full, before it reads again (the other call can be
	// answered before the backend sent more than the queue holds: CI read
	// all 512 once).
	testenv.Eventually(t, "a notification dropped", func() bool { return rg.g.relayDropped.Load() > 0 })
	progress := 1
	for {
		msg := read()
		if r, ok := msg.(*jsonrpc.Response); ok {
			if r.ID.Raw() != int64(2) || r.Error != nil || !strings.Contains(string(r.Result), fmt.Sprintf("done %d steps", steps)) {
				t.Fatalf("the stalled call's answer: %+v %s", r, r.Result)
			}
			break
		}
		progress++
	}
	if progress < 2 || progress >= steps {
		t.Errorf("the stalled client got %d of %d progress notifications before its result, want the first, those queued (up to %d), and the rest dropped", progress, steps, relayQueue)
	}
}

// TestCallEventsUnasked: a call whose client asked for neither progress
// nor log messages gets no relay, and making none allocates nothing (the
// relay's queue of relayQueue writes was made for every call, about 2.4 KB
// of garbage a call); a progress token still gets one.
func TestCallEventsUnasked(t *testing.T) {
	g, _ := newTestGateway(t, &fakeCaller{})
	ct, st := mcp.NewInMemoryTransports()
	ctx := context.Background()
	ss, err := g.Server().Connect(ctx, st, nil)
	if err != nil {
		t.Fatal(err)
	}
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "c"}, nil).Connect(ctx, ct, &mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close(); ss.Wait() })

	req := &mcp.CallToolRequest{Session: ss, Params: &mcp.CallToolParamsRaw{Name: ExecuteToolName}}
	var ev *backend.CallEvents
	if n := testing.AllocsPerRun(100, func() { ev, _ = g.callEvents(ctx, req, "fake", "echo") }); n != 0 || ev != nil {
		t.Errorf("callEvents of a call that asked for nothing: events %v, %.0f allocations; want none", ev, n)
	}
	req.Params.Meta = mcp.Meta{"progressToken": "p1"}
	ev, relayed := g.callEvents(ctx, req, "fake", "echo")
	if ev == nil || ev.Progress == nil || relayed == nil {
		t.Fatalf("callEvents of a call with a progress token: events %v, want its progress relayed", ev)
	}
	relayed(ctx)
}

// TestHTTPCancelApartLogged: a client of protocol 2025-11-25 over the
// stateless HTTP front (the TypeScript and Python SDKs) cancels a call with
// notifications/cancelled in a POST of its own, which nothing ties to the
// call: the call runs on (README, The two tools). The POST is answered 202
// as before, and the log now says so, with the request id, the client's
// words, its key and client: it said nothing, and an operator whose user
// pressed Esc on a call that then ran to its end had no trace of it.
func TestHTTPCancelApartLogged(t *testing.T) {
	var logs testenv.LogBuffer
	g := New(&fakeSearcher{tools: testCatalog}, &fakeCaller{}, &Options{Logger: logs.Logger()})
	srv := httptest.NewServer(g.HTTPHandler(nil))
	defer srv.Close()
	post := func(body string) int {
		t.Helper()
		req, err := http.NewRequest(http.MethodPost, srv.URL+"/mcp", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set("MCP-Protocol-Version", "2025-11-25")
		req.Header.Set("User-Agent", "node")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	if code := post(`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":7,"reason":"user pressed Esc\u001b[2K"}}`); code != http.StatusAccepted {
		t.Errorf("notifications/cancelled answered %d, want 202", code)
	}
	got := logs.String()
	for _, want := range []string{
		`level=INFO msg="a client cancelled a request in a POST of its own, which the stateless HTTP front cannot tie to a call: the call runs on to its end or its callTimeout`,
		`request=7 reason="user pressed Esc\x1b[2K" client=node`,
	} {
		if !strings.Contains(got, want) {
			t.Errorf("the log after a notifications/cancelled POST:\n%s\nwant it to hold %s", got, want)
		}
	}
	// Other notifications say nothing.
	before := logs.String()
	post(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	if after := strings.TrimPrefix(logs.String(), before); strings.Contains(after, "cancelled") {
		t.Errorf("notifications/initialized logged a cancel:\n%s", after)
	}
}
