package backend

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httputil"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolgate/toolgate/gateway/backend/backendtest"
	"github.com/toolgate/toolgate/gateway/config"
	"github.com/toolgate/toolgate/internal/testenv"
)

// A call that was sent and got no answer may have run, however the answer
// failed to come: the warning (ErrMayHaveRun), which an agent reads before
// running a write twice, ends the gateway's words, for an API key that is
// not admin too. It was said only when the connection closed before the
// answer; a stdio server's process exiting, an SSE server's connection
// lost, a restart, a reload or the gateway stopping during the call said
// nothing of it, and a key that is not admin read the process's exit all
// hidden ("hidden from this API key: an admin key sees it").
func TestMayHaveRunDuringCall(t *testing.T) {
	warn := ": " + ErrMayHaveRun.Error()
	hang := func(t *testing.T) *Pool {
		return startPool(t, []config.Server{backendtest.Command(t, "hang")}, testOptions(nil))
	}
	for _, tc := range []struct {
		name string
		// start starts the pool and returns what ends the call in flight
		// (nil: the tool "crash" ends it itself).
		start func(t *testing.T) (*Pool, func())
		admin []string // what an admin key reads: each in order, the last the text's end
		key   string   // what a key that is not admin reads, whole
	}{
		{
			name: "process exited",
			start: func(t *testing.T) (*Pool, func()) {
				return startPool(t, []config.Server{backendtest.Command(t, "crash-mid-call")}, testOptions(nil)), nil
			},
			admin: []string{"its process exited with exit status 2", "crash: exiting mid-call", " during the call" + warn},
			key:   "its process (" + HiddenFromKey + ") during the call" + warn,
		},
		{
			// The answer's event stream began and broke before the answer:
			// "connection lost during the call: …", or "it stopped during
			// the call" when the supervisor tore the run down first; both
			// end with the warning. The call is held until then.
			name: "connection lost",
			start: func(t *testing.T) (*Pool, func()) {
				held := make(chan struct{})
				srv := callsFront(t, backendtest.NewHTTPServer(t, config.TypeHTTP, "hang"), nil, func(w http.ResponseWriter, _ *http.Request) {
					w.Header().Set("Content-Type", "text/event-stream")
					w.WriteHeader(http.StatusOK)
					http.NewResponseController(w).Flush()
					<-held
					if c, _, err := http.NewResponseController(w).Hijack(); err == nil {
						c.Close()
					}
				})
				return startPool(t, []config.Server{srv}, testOptions(nil)), func() { close(held) }
			},
			admin: []string{warn},
		},
		{
			name: "restarted",
			start: func(t *testing.T) (*Pool, func()) {
				p := hang(t)
				return p, func() {
					if err := p.Restart(p.Servers()[0]); err != nil {
						t.Error(err)
					}
				}
			},
			admin: []string{"it was restarted on request during the call" + warn + "; call again: the restarted server takes it"},
			key:   "it was restarted on request during the call" + warn + "; call again: the restarted server takes it",
		},
		{
			name: "removed",
			start: func(t *testing.T) (*Pool, func()) {
				p := hang(t)
				return p, func() { p.Reconfigure(context.Background(), nil) }
			},
			admin: []string{"it was removed from the config during the call" + warn + "; search_tools finds what the gateway serves now"},
			key:   "it was removed from the config during the call" + warn + "; search_tools finds what the gateway serves now",
		},
		{
			// Disabled at run time: said so, by what, not "removed".
			name: "disabled",
			start: func(t *testing.T) (*Pool, func()) {
				p := hang(t)
				return p, func() {
					p.ReconfigureWhy(context.Background(), nil, func(string) error { return Disabled("the console") })
				}
			},
			admin: []string{"it was disabled by the console during the call" + warn + "; search_tools finds what the gateway serves now"},
			key:   "it was disabled by the console during the call" + warn + "; search_tools finds what the gateway serves now",
		},
		{
			name: "gateway stopping",
			start: func(t *testing.T) (*Pool, func()) {
				p := hang(t)
				return p, func() { go p.Close() }
			},
			admin: []string{"the gateway is stopping" + warn},
			key:   "the gateway is stopping" + warn,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, end := tc.start(t)
			name := p.Servers()[0]
			testenv.Eventually(t, "the server up", func() bool { return statusOf(t, p, name).State == StateUp })
			tool := "crash"
			if end != nil {
				tool = "hang"
			}
			errc := make(chan error, 1)
			go func() {
				_, err := p.CallTool(context.Background(), name, tool, nil)
				errc <- err
			}()
			switch {
			case end != nil && tc.name != "connection lost":
				// The backend holds it: the pool counts a call in flight
				// before its request is written, and a call the end comes
				// before did not run (go-sdk: "client is closing").
				testenv.Eventually(t, "the call held by the server", func() bool { return hangs(t, p, name) == backendtest.HangCount(1, 0) })
				end()
			case end != nil:
				// The front holds it (its event stream begun).
				testenv.Eventually(t, "the call in flight", func() bool { return inFlight(t, p, name) == 1 })
				end()
			}
			err := <-errc
			var un *UnavailableError
			if !errors.As(err, &un) || !errors.Is(err, ErrMayHaveRun) {
				t.Fatalf("error: %v, want an UnavailableError with ErrMayHaveRun", err)
			}
			text := un.Err.Error()
			t.Logf("an admin key reads: %s", text)
			rest := text
			for _, w := range tc.admin {
				i := strings.Index(rest, w)
				if i < 0 {
					t.Fatalf("an admin key reads:\n%s\nwant in it, in order: %q", text, tc.admin)
				}
				rest = rest[i+len(w):]
			}
			if rest != "" {
				t.Errorf("an admin key reads:\n%s\nwant it to end with %q", text, tc.admin[len(tc.admin)-1])
			}
			switch got := ErrForKey(un.Err); {
			case tc.key != "" && got != tc.key:
				t.Errorf("a key that is not admin reads:\n%s\nwant:\n%s", got, tc.key)
			case tc.key == "" && !strings.HasSuffix(got, warn):
				t.Errorf("a key that is not admin reads:\n%s\nwant it to end with %q", got, warn)
			}
		})
	}
}

// A call's request answered with a 500, 502 or 504 (a proxy's HTML page,
// the server's own failure) may have run: the server, or the proxy's
// upstream, had the request when it failed. It read "the server, or a
// proxy before it, failed" with no warning. A 503 (maintenance, overload)
// or a 4xx (a rate, the credentials) says the server did not run it: no
// warning. Over streamable HTTP and SSE alike, naming the status and what
// the page says, and sent once (no retry).
func TestMayHaveRunErrorStatus(t *testing.T) {
	warn := ": " + ErrMayHaveRun.Error()
	for _, transport := range []string{config.TypeHTTP, config.TypeSSE} {
		for _, tc := range []struct {
			code        int
			contentType string
			body        string
			says        string // in the words, after the status
			mayHaveRun  bool
		}{
			{http.StatusBadGateway, "text/html", "<html>\r\n<head><title>502 Bad Gateway</title></head>\r\n<body><center><h1>502 Bad Gateway</h1></center><hr><center>nginx</center></body></html>", "the server, or a proxy before it, failed", true},
			{http.StatusGatewayTimeout, "text/html", "<html><head><title>504 Gateway Time-out</title></head><body>upstream timed out</body></html>", `("504 Gateway Time-out"): the server, or a proxy before it, failed`, true},
			{http.StatusServiceUnavailable, "application/json", `{"message":"down for maintenance"}`, `("down for maintenance"): the server, or a proxy before it, failed`, false},
			{http.StatusInternalServerError, "text/plain", "internal error", `("internal error")`, true},
			{http.StatusTooManyRequests, "text/plain", "slow down", "the server limits how often it is called", false},
			{http.StatusForbidden, "text/plain", "forbidden by policy", "the server refused these credentials", false},
		} {
			t.Run(fmt.Sprintf("%s/%d", transport, tc.code), func(t *testing.T) {
				var calls atomic.Int32
				srv := callsFront(t, backendtest.NewHTTPServer(t, transport, backendtest.ModeNormal), &calls, func(w http.ResponseWriter, _ *http.Request) {
					w.Header().Set("Content-Type", tc.contentType)
					w.WriteHeader(tc.code)
					io.WriteString(w, tc.body)
				})
				p := startPool(t, []config.Server{srv}, testOptions(nil))
				_, err := p.CallTool(context.Background(), "remote", "echo", map[string]any{"text": "once"})
				var un *UnavailableError
				if !errors.As(err, &un) {
					t.Fatalf("error: %v, want an UnavailableError", err)
				}
				text := un.Err.Error()
				status := fmt.Sprintf("%d %s", tc.code, http.StatusText(tc.code))
				if i := strings.Index(text, status); i < 0 || !strings.Contains(text[i:], tc.says) {
					t.Errorf("reads:\n%s\nwant %q, then %q", text, status, tc.says)
				}
				if got := errors.Is(err, ErrMayHaveRun); got != tc.mayHaveRun || got != strings.HasSuffix(text, warn) {
					t.Errorf("reads:\n%s\nErrMayHaveRun %v, want %v, with the warning at the end", text, got, tc.mayHaveRun)
				}
				if tc.mayHaveRun && !strings.HasSuffix(ErrForKey(un.Err), warn) {
					t.Errorf("a key that is not admin reads:\n%s\nwant it to end with %q", ErrForKey(un.Err), warn)
				}
				if n := calls.Load(); n != 1 {
					t.Errorf("the call was sent %d times, want once", n)
				}
			})
		}
	}
}

// The answer to a call's POST that begins (200 OK) and ends before the
// call's result — an event stream broken off mid-event or ended without
// it, a JSON body cut short: the server crashed, a proxy's read timeout —
// is said so, with the status and the bytes read, and may have run (the
// server had the call); it read go-sdk's "connection lost during the
// call: calling "tools/call": request terminated without response". Sent
// once, over a session (2025-11-25) and stateless (2026-07-28).
func TestCallAnswerCutShort(t *testing.T) {
	warn := ": " + ErrMayHaveRun.Error()
	const part = "event: message\ndata: {\"jsonrpc\":\"2.0\",\"id\":"
	for _, modes := range []string{backendtest.ModeNormal, backendtest.ModeStateless} {
		for _, tc := range []struct {
			name, contentType, body string
			abort                   bool
			want                    string
		}{
			{"broken off", "text/event-stream", part, true, fmt.Sprintf("and an event stream that ended before the call's result (broken off after %d bytes: unexpected EOF)", len(part))},
			{"ended", "text/event-stream", part, false, fmt.Sprintf("and an event stream that ended before the call's result (after %d bytes)", len(part))},
			{"empty", "text/event-stream", "", false, "and an event stream that ended before the call's result (after 0 bytes)"},
			{"json", "application/json", `{"jsonrpc":"2.0","id":`, true, "and a JSON body that ended before the call's result (broken off after 22 bytes: unexpected EOF)"},
		} {
			t.Run(modes+"/"+tc.name, func(t *testing.T) {
				var calls atomic.Int32
				srv := callsFront(t, backendtest.NewHTTPServer(t, config.TypeHTTP, modes), &calls, func(w http.ResponseWriter, _ *http.Request) {
					w.Header().Set("Content-Type", tc.contentType)
					if tc.contentType == "application/json" {
						w.Header().Set("Content-Length", "100")
					}
					w.WriteHeader(http.StatusOK)
					io.WriteString(w, tc.body)
					http.NewResponseController(w).Flush()
					if tc.abort {
						panic(http.ErrAbortHandler)
					}
				})
				p := startPool(t, []config.Server{srv}, testOptions(nil))
				_, err := p.CallTool(context.Background(), "remote", "echo", map[string]any{"text": "once"})
				var un *UnavailableError
				if !errors.As(err, &un) || !errors.Is(err, ErrMayHaveRun) {
					t.Fatalf("error: %v, want an UnavailableError with ErrMayHaveRun", err)
				}
				want := "the server answered a POST with 200 OK " + tc.want +
					": the server, or a proxy before it, cut the answer short (a crash, a proxy's read timeout): its own log says why" + warn
				if text := un.Err.Error(); text != want {
					t.Errorf("reads:\n%s\nwant:\n%s", text, want)
				}
				if got := ErrForKey(un.Err); !strings.HasSuffix(got, warn) || !strings.HasPrefix(got, "the server answered a POST with 200 OK and ") {
					t.Errorf("a key that is not admin reads:\n%s", got)
				}
				if n := calls.Load(); n != 1 {
					t.Errorf("the call was sent %d times, want once", n)
				}
			})
		}
	}
}

// callsFront serves real behind a front (behindFront) that answers each
// tools/call with answer, counting them in calls (when not nil), and
// hands the other requests on.
func callsFront(t *testing.T, real *backendtest.HTTPServer, calls *atomic.Int32, answer http.HandlerFunc) config.Server {
	t.Helper()
	return behindFront(t, real, func(proxy *httputil.ReverseProxy) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			body, _ := io.ReadAll(r.Body)
			r.Body = io.NopCloser(bytes.NewReader(body))
			if r.Method != http.MethodPost || !bytes.Contains(body, []byte(`"tools/call"`)) {
				proxy.ServeHTTP(w, r)
				return
			}
			if calls != nil {
				calls.Add(1)
			}
			answer(w, r)
		})
	})
}

// What go-sdk refuses to send, on a connection that is closing already,
// the server never saw: no warning that it may have run (notSent knows it
// by go-sdk's words, and fails here the day they change).
func TestNotSentWords(t *testing.T) {
	ct, st := mcp.NewInMemoryTransports()
	ss, err := mcp.NewServer(&mcp.Implementation{Name: "s"}, nil).Connect(context.Background(), st, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer ss.Close()
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "c"}, nil).Connect(context.Background(), ct, nil)
	if err != nil {
		t.Fatal(err)
	}
	cs.Close()
	_, err = cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "echo"})
	if !notSent(err) {
		t.Errorf("a call on a closed session: %v; notSent says it was sent", err)
	}
	if w := noAnswer(false, "connection lost during the call: ", err, ""); errors.Is(w, ErrMayHaveRun) || strings.Contains(w.Error(), ErrMayHaveRun.Error()) {
		t.Errorf("a call not sent reads %q, with the warning that it may have run", w)
	}
	if notSent(errors.New("connection closed: EOF")) || notSent(mcp.ErrConnectionClosed) {
		t.Error("notSent of a connection closed under a call")
	}
}

// A call that timed out, and one whose caller cancelled it once it was
// sent, may have run too: the server was sent notifications/cancelled and
// may have done the work, or part of it, before it read that. Each ends
// with the warning (ErrMayHaveRun) and still wraps what ended it
// (ErrCallTimeout, context.Canceled); neither said it, so an agent read
// "the call timed out" and ran a write again. Over stdio and streamable
// HTTP alike (there a tool that sleeps 1.5 s: go-sdk's in-process server
// does not end a handler whose call the client gave up, and its Close
// would wait for it).
func TestMayHaveRunTimedOutOrCancelled(t *testing.T) {
	warn := ": " + ErrMayHaveRun.Error()
	for _, transport := range []string{config.TypeStdio, config.TypeHTTP} {
		server := func(t *testing.T) (config.Server, string, map[string]any) {
			if transport == config.TypeStdio {
				return backendtest.Command(t, backendtest.ModeHang), "hang", nil
			}
			return backendtest.NewHTTPServer(t, transport, backendtest.ModeNormal).Config("fake", nil), "sleep", map[string]any{"ms": 1500}
		}
		t.Run(transport+"/timeout", func(t *testing.T) {
			srv, tool, args := server(t)
			srv.CallTimeout = config.Duration{Duration: 300 * time.Millisecond}
			p := startPool(t, []config.Server{srv}, testOptions(nil))
			_, err := p.CallTool(context.Background(), "fake", tool, args)
			want := fmt.Sprintf("call %q on \"fake\": no answer within 300ms: %v%s", tool, ErrCallTimeout, warn)
			if !errors.Is(err, ErrCallTimeout) || !errors.Is(err, ErrMayHaveRun) || err.Error() != want {
				t.Fatalf("error:\n%v\nwant:\n%s\n(ErrCallTimeout and ErrMayHaveRun)", err, want)
			}
			// A key that is not admin reads it whole: all the gateway's words.
			if got := ErrForKey(err); got != want {
				t.Errorf("a key that is not admin reads:\n%s\nwant:\n%s", got, want)
			}
			if st := statusOf(t, p, "fake").ForKey(); st.LastErr != want {
				t.Errorf("its last error, as a key that is not admin reads it: %q, want %q", st.LastErr, want)
			}
		})
		t.Run(transport+"/cancelled", func(t *testing.T) {
			srv, tool, args := server(t)
			p := startPool(t, []config.Server{srv}, testOptions(nil))
			ctx, cancel := context.WithCancel(context.Background())
			errc := make(chan error, 1)
			go func() {
				_, err := p.CallTool(ctx, "fake", tool, args)
				errc <- err
			}()
			if tool == "hang" {
				testenv.Eventually(t, "the hang call at the server", func() bool { return hangs(t, p, "fake") == backendtest.HangCount(1, 0) })
			} else {
				testenv.Eventually(t, "the call in flight", func() bool { return inFlight(t, p, "fake") == 1 })
			}
			cancel()
			err := <-errc
			if want := fmt.Sprintf("call %q on \"fake\": context canceled%s", tool, warn); !errors.Is(err, context.Canceled) || !errors.Is(err, ErrMayHaveRun) || err.Error() != want {
				t.Fatalf("error:\n%v\nwant:\n%s\n(context.Canceled and ErrMayHaveRun)", err, want)
			}
		})
	}
}
