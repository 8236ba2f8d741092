package backend

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/tidwall/gjson"

	"github.com/toolgate/toolgate/gateway/backend/backendtest"
	"github.com/toolgate/toolgate/gateway/config"
	"github.com/toolgate/toolgate/internal/testenv"
)

// reopenOptions restart a backend only after an hour: what comes back
// sooner came back by reopening at once.
func reopenOptions() *Options {
	o := testOptions(nil)
	o.RestartDelays = []time.Duration{time.Hour}
	o.StableAfter = time.Nanosecond // every run counts as stable
	return o
}

// TestSessionExpiredCallSentAgain: a hosted server that ends idle
// sessions (or restarts and forgets them) answers the next call on the old
// session 404. It did not run that call, so the call goes again on a new
// session, opened at once: the client got "connection lost during the
// call" (or "the server answered a POST with 404 Not Found: check the
// url's path"), and the calls after it "it is down" until the first
// restart delay had passed.
func TestSessionExpiredCallSentAgain(t *testing.T) {
	hs := backendtest.NewHTTPServer(t, config.TypeHTTP, "normal")
	p := startPool(t, []config.Server{hs.Config("hosted", nil)}, reopenOptions())
	testenv.Eventually(t, "hosted up", func() bool { return statusOf(t, p, "hosted").State == StateUp })
	hs.ExpireSessions()
	res, err := p.CallTool(context.Background(), "hosted", "echo", map[string]any{"text": "again"})
	if err != nil {
		t.Fatalf("call on an expired session: %v", err)
	}
	if got := textOf(t, res); got != "again" {
		t.Errorf("answer %q, want the echo", got)
	}
	if st := statusOf(t, p, "hosted"); st.State != StateUp || st.Restarts != 1 {
		t.Errorf("state %s after %d restarts, want up after 1 (the session opened again)", st.State, st.Restarts)
	}
}

// TestStreamDroppedReopened: an SSE server (or a proxy before it) that
// closes the stream, or restarts, is connected to again at once, not after
// the first restart delay.
func TestStreamDroppedReopened(t *testing.T) {
	hs := backendtest.NewHTTPServer(t, config.TypeSSE, "normal")
	p := startPool(t, []config.Server{hs.Config("hosted", nil)}, reopenOptions())
	testenv.Eventually(t, "hosted up", func() bool { return statusOf(t, p, "hosted").State == StateUp })
	hs.Restart()
	testenv.Eventually(t, "hosted up again on a new stream", func() bool {
		st := statusOf(t, p, "hosted")
		return st.State == StateUp && st.Restarts == 1
	})
	res, err := p.CallTool(context.Background(), "hosted", "echo", map[string]any{"text": "back"})
	if err != nil || textOf(t, res) != "back" {
		t.Fatalf("call after the stream came back: %v", err)
	}
}

// TestSessionNotFoundSaysSo: a 404 to a request on a session is the
// session's end, not a wrong path: said so where a call on it fails (the
// session opened again failing too), where it read "check the url's path".
func TestSessionNotFoundSaysSo(t *testing.T) {
	for session, want := range map[string]string{
		"":        "check the url's path",
		"abc-123": "the server no longer knows the session",
	} {
		req := httptest.NewRequest(http.MethodPost, "http://mcp.example.com/mcp", nil)
		if session != "" {
			req.Header.Set("Mcp-Session-Id", session)
		}
		resp := &http.Response{StatusCode: http.StatusNotFound, Status: "404 Not Found", Request: req,
			Header: http.Header{"Content-Type": {"text/plain"}}, Body: io.NopCloser(strings.NewReader("session not found"))}
		rf := refusalOf(resp, false, false)
		if rf == nil || !strings.Contains(rf.fix(loginCmd{full: "toolgate auth login hosted", bare: "toolgate auth login hosted"}, config.TypeHTTP).Error(), want) {
			t.Errorf("404 with session %q: %+v, want a fix that says %q", session, rf, want)
		}
	}
}

// TestServerGoneMidSession: a streamable HTTP server that goes away
// (stopped, nothing listens at its port any more) while its session is up
// fails a call as unreachable, with the fix, and the backend goes down
// (to be connected to again by its restart policy): the call read
// `answered with an error: … rejected by transport: Post …: connection
// refused`, as if the server had answered, and the backend stayed "up",
// every call failing the same way.
func TestServerGoneMidSession(t *testing.T) {
	hs := backendtest.NewHTTPServer(t, config.TypeHTTP, "normal")
	p := startPool(t, []config.Server{hs.Config("hosted", nil)}, reopenOptions())
	testenv.Eventually(t, "hosted up", func() bool { return statusOf(t, p, "hosted").State == StateUp })
	hs.CloseClientConnections()
	hs.Close()
	// The first call may go on a kept-alive connection the server closed
	// (closed before the server answered), the next finds nothing listening.
	for i := 0; ; i++ {
		_, err := p.CallTool(context.Background(), "hosted", "echo", map[string]any{"text": "x"})
		var un *UnavailableError
		if !errors.As(err, &un) {
			t.Fatalf("call on a server gone: %v, want it unavailable", err)
		}
		if strings.Contains(err.Error(), "nothing listens at") {
			// A key that is not admin reads the gateway's words and fix,
			// the address hidden (it read all hidden).
			want := "it cannot be reached: nothing listens at (" + HiddenFromKey + ") (connection refused): check that the server is running, and the url's host and port"
			if got := ErrForKey(un.Err); got != want {
				t.Errorf("a key that is not admin reads:\n%s\nwant:\n%s", got, want)
			}
			break
		}
		if i == 2 || !strings.Contains(err.Error(), "closed before the server answered") {
			t.Fatalf("call %d on a server gone: %v, want it unavailable: nothing listens", i, err)
		}
	}
	testenv.Eventually(t, "hosted down", func() bool {
		st := statusOf(t, p, "hosted")
		return st.State == StateDown && strings.Contains(st.Err, "nothing listens at")
	})
	// So does its status: the URL and the address hidden, and so does a
	// call now, which finds it down.
	down := `backend "hosted" at (` + HiddenFromKey + "): nothing listens at (" + HiddenFromKey + ") (connection refused): check that the server is running, and the url's host and port"
	if st := statusOf(t, p, "hosted").ForKey(); st.Err != down || st.LastErr != down {
		t.Errorf("its status, as a key that is not admin reads it:\n%s\n%s\nwant both:\n%s", st.Err, st.LastErr, down)
	}
	_, err := p.CallTool(context.Background(), "hosted", "echo", map[string]any{"text": "x"})
	var un *UnavailableError
	if !errors.As(err, &un) || ErrForKey(un.Err) != "it is down: "+down {
		t.Errorf("a call on it down: %v; a key that is not admin reads:\n%s\nwant:\n%s", err, ErrForKey(un.Err), "it is down: "+down)
	}
}

// TestClosedIdleConnectionUnavailable: a call whose request net/http put
// on a kept-alive connection that the server closed just then fails as
// unavailable, the connection closed before the server answered, as an
// EOF there does. It read as the server's own error ("rejected by
// transport: … server closed idle connection"): 2 of 200 runs of
// TestServerGoneMidSession under load, where a real close races the call.
// Here the error comes every time, from the transport under the client.
func TestClosedIdleConnectionUnavailable(t *testing.T) {
	hs := backendtest.NewHTTPServer(t, config.TypeHTTP, "normal")
	a := &closingAuth{}
	o := reopenOptions()
	o.Auth = a
	p := startPool(t, []config.Server{hs.Config("hosted", nil)}, o)
	testenv.Eventually(t, "hosted up", func() bool { return statusOf(t, p, "hosted").State == StateUp })
	a.closing.Store(true)
	_, err := p.CallTool(context.Background(), "hosted", "echo", map[string]any{"text": "x"})
	var un *UnavailableError
	if !errors.As(err, &un) || !errors.Is(err, ErrMayHaveRun) || !strings.Contains(err.Error(), "the connection closed before the server answered (http: server closed idle connection)") {
		t.Fatalf("call on a connection the server closed: %v, want it unavailable: the connection closed before the server answered", err)
	}
}

// TestClosedIdleTextIsNetHTTPs: closedIdle knows net/http's unexported
// errServerClosedIdle by its words; this fails the day net/http words it
// otherwise, rather than such calls reading again as the server's error.
func TestClosedIdleTextIsNetHTTPs(t *testing.T) {
	root, err := exec.Command("go", "env", "GOROOT").Output()
	if err != nil {
		t.Fatalf("go env GOROOT, to read net/http's source: %v", err)
	}
	src, err := os.ReadFile(filepath.Join(strings.TrimSpace(string(root)), "src", "net", "http", "transport.go"))
	if err != nil {
		t.Fatalf("read net/http's source to check closedIdle's words: %v", err)
	}
	if !strings.Contains(string(src), `errServerClosedIdle = errors.New("http: server closed idle connection")`) {
		t.Fatal(`net/http no longer says "http: server closed idle connection" for a request on a connection the server closed: update closedIdle`)
	}
}

// closingAuth is an Authorizer that adds no token; once closing is set,
// each POST fails as net/http fails one put on a kept-alive connection
// that the server closed meanwhile.
type closingAuth struct{ closing atomic.Bool }

func (a *closingAuth) Transport(_, _ string, base http.RoundTripper, _ func(error)) http.RoundTripper {
	return roundTrip(func(req *http.Request) (*http.Response, error) {
		if a.closing.Load() && req.Method == http.MethodPost {
			return nil, errors.New("http: server closed idle connection")
		}
		return base.RoundTrip(req)
	})
}

func (a *closingAuth) Changed(string) <-chan struct{} { return nil }

type roundTrip func(*http.Request) (*http.Response, error)

func (f roundTrip) RoundTrip(req *http.Request) (*http.Response, error) { return f(req) }

// TestInsufficientScopeSaysWhich: a 403 whose Bearer challenge says
// insufficient_scope (the TypeScript SDK's requireBearerAuth with
// requiredScopes answers this one) names the scopes the server wants and
// how to get them, for the token the request carried: a stored login's
// (`auth login`, which asks for them: a step-up), the entry's "headers"', or
// none (a server keyed by another header, or by nothing). The last read
// "which the login was not given" (an Authorizer stands by for every
// server without an "Authorization" header) or that the headers' token
// lacked them. A 403 without scopes names the login, when it was one.
func TestInsufficientScopeSaysWhich(t *testing.T) {
	const challenge = `Bearer error="insufficient_scope", error_description="Insufficient scope", scope="mcp:write", resource_metadata="http://localhost:19143/.well-known/oauth-protected-resource/mcp"`
	for _, tc := range []struct {
		name         string
		authorizer   bool   // an Authorizer stood by (no "Authorization" in the headers)
		token        string // the request's Authorization header
		challenge    string
		want, wantNo string
	}{
		{"login", true, "Bearer from-login", challenge,
			"the server wants the scopes \"mcp:write\", which the login was not given: run `toolgate auth login hosted`, which asks for them with those the login has, for you to approve (the entry's \"oauth\": {\"scopes\": [...]} still pins the scopes every login asks for)", "headers"},
		{"headers", false, "Bearer static", challenge,
			"the server wants the scopes \"mcp:write\", which the token in the entry's \"headers\" lacks", "login"},
		{"no login stored", true, "", challenge,
			"the server wants the scopes \"mcp:write\", and the requests carry no token: set one with them in the entry's \"headers\" (\"Authorization\": \"Bearer ${TOKEN}\"), or, where the server offers OAuth, list them in the entry's \"oauth\": {\"scopes\": [...]} and run `toolgate auth login hosted`", "not given"},
		{"other header", false, "", challenge, "and the requests carry no token", "lacks"},
		{"login, no scopes", true, "Bearer from-login", "",
			"the server refused the stored login's token or this client: the login may lack a scope the server wants (list it in the entry's \"oauth\": {\"scopes\": [...]} and run `toolgate auth login hosted`), or the server does not let this address in", "headers"},
		{"headers, no scopes", false, "Bearer static", "", "check the entry's \"headers\" (the token and its scopes)", "login"},
	} {
		req := httptest.NewRequest(http.MethodPost, "http://localhost:19143/mcp", nil)
		if tc.token != "" {
			req.Header.Set("Authorization", tc.token)
		}
		h := http.Header{"Content-Type": {"application/json"}}
		if tc.challenge != "" {
			h.Set("Www-Authenticate", tc.challenge)
		}
		resp := &http.Response{StatusCode: http.StatusForbidden, Status: "403 Forbidden", Request: req, Header: h,
			Body: io.NopCloser(strings.NewReader(`{"error":"insufficient_scope","error_description":"Insufficient scope"}`))}
		rf := refusalOf(resp, false, tc.authorizer)
		if rf == nil {
			t.Fatalf("%s: no refusal", tc.name)
		}
		if fix := rf.fix(loginCmd{full: "toolgate auth login hosted", bare: "toolgate auth login hosted"}, config.TypeHTTP).Error(); !strings.Contains(fix, tc.want) || strings.Contains(fix, tc.wantNo) {
			t.Errorf("%s: fix\n%s\nwant\n%s\nand not %q", tc.name, fix, tc.want, tc.wantNo)
		}
	}
}

// TestSlowListingNotBlamedOnDiscover: a server of the 2025 protocol that
// refuses server/discover 400 (the TypeScript SDK's: "Server not
// initialized"), then takes longer than the connect timeout to list its
// tools, is down for the timeout: its error was that 400, answered and
// got past long before ("check url, type (http) and headers").
func TestSlowListingNotBlamedOnDiscover(t *testing.T) {
	srv := backendtest.NewServer(backendtest.ParseModes("normal"))
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil)
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost {
			body, _ := io.ReadAll(r.Body)
			r.Body = io.NopCloser(bytes.NewReader(body))
			switch method := gjson.GetBytes(body, "method").Str; method {
			case "server/discover":
				http.Error(w, `{"jsonrpc":"2.0","error":{"code":-32000,"message":"Bad Request: Server not initialized"},"id":null}`, http.StatusBadRequest)
				return
			case "tools/list":
				<-r.Context().Done() // slower than the connect timeout
				return
			}
		}
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(hs.Close)
	o := testOptions(nil)
	o.ConnectTimeout = 500 * time.Millisecond
	p := startPool(t, []config.Server{{Name: "slow", Type: config.TypeHTTP, URL: hs.URL + "/mcp"}}, o)
	var st Status
	testenv.Eventually(t, "slow down", func() bool {
		st = statusOf(t, p, "slow")
		return st.State == StateDown
	})
	if !strings.Contains(st.Err, "within the connect timeout (500ms)") || !strings.Contains(st.Err, `raise the entry's "connectTimeout"`) || strings.Contains(st.Err, "Bad Request") || strings.Contains(st.Err, "not initialized") {
		t.Errorf("status error %q, want the connect timeout, not the 400 to server/discover", st.Err)
	}
}

// TestInsufficientScopeBounded: a server whose 403 asks for megabytes of
// scopes gets a fix of bounded length: the scopes went into the error (a
// model reads it in execute_tool's result, /status shows it) whole.
func TestInsufficientScopeBounded(t *testing.T) {
	scope := strings.Repeat("scope:x ", 1<<17) // 1 MiB
	req := httptest.NewRequest(http.MethodPost, "http://localhost:19143/mcp", nil)
	req.Header.Set("Authorization", "Bearer from-login")
	h := http.Header{"Www-Authenticate": {`Bearer error="insufficient_scope", scope="` + strings.TrimSpace(scope) + `"`}}
	resp := &http.Response{StatusCode: http.StatusForbidden, Status: "403 Forbidden", Request: req, Header: h, Body: io.NopCloser(strings.NewReader(""))}
	rf := refusalOf(resp, false, true)
	if rf == nil {
		t.Fatal("no refusal")
	}
	fix := rf.fix(loginCmd{full: "toolgate auth login hosted", bare: "toolgate auth login hosted"}, config.TypeHTTP).Error()
	if len(fix) > 8<<10 || !strings.Contains(fix, `the server wants the scopes "scope:x scope:x`) || !strings.Contains(fix, "toolgate auth login hosted") {
		t.Errorf("fix of %d bytes, want at most 8 KiB naming the first scopes and the login: %.300s…", len(fix), fix)
	}
}
