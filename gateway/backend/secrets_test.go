package backend

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/toolgate/toolgate/gateway/backend/backendtest"
	"github.com/toolgate/toolgate/gateway/config"
	"github.com/toolgate/toolgate/internal/testenv"
)

// TestURLSecretsMasked: a hosted server that takes its key in the URL
// (?k=…, a user:password@) does not leak it through its errors, which Go's
// HTTP client writes with the whole URL: not in /status (Status), not in
// a call's error (the client's execute_tool answer), not in the log.
func TestURLSecretsMasked(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close() // nothing answers there: the connect fails with the URL in its error
	const querySecret, password, pathSecret = "querysecretvalue987", "passwordvalue654", "sk-ak-7f3a9c2e1b4d8f6a0c5e"
	srv := config.Server{Name: "hosted", Type: config.TypeHTTP, URL: "http://user:" + password + "@" + addr + "/mcp/" + pathSecret + "/sse?k=" + querySecret}
	var logs testenv.LogBuffer
	p := startPool(t, []config.Server{srv}, testOptions(&logs))
	var st Status
	testenv.Eventually(t, "the backend down", func() bool {
		st = statusOf(t, p, "hosted")
		return st.State == StateDown && st.Err != ""
	})
	_, callErr := p.CallTool(context.Background(), "hosted", "any", nil)
	var un *UnavailableError
	if !errors.As(callErr, &un) {
		t.Fatalf("call on a down backend: %v, want an UnavailableError", callErr)
	}
	for what, text := range map[string]string{"status error": st.Err, "status last error": st.LastErr,
		"call error": callErr.Error(), "call error's cause": un.Err.Error(), "log": logs.String()} {
		if strings.Contains(text, querySecret) || strings.Contains(text, password) || strings.Contains(text, pathSecret) {
			t.Errorf("%s holds a secret of the URL: %s", what, text)
		}
	}
	// A key that is not admin reads the gateway's words and fix, the URL
	// and the address hidden.
	if got, want := ErrForKey(un.Err), `it is down: backend "hosted" at (`+HiddenFromKey+"): nothing listens at ("+HiddenFromKey+") (connection refused): check that the server is running, and the url's host and port"; got != want {
		t.Errorf("what a key that is not admin reads of the call's error: %q, want %q", got, want)
	}
	if !strings.Contains(st.Err, "k=***") {
		t.Errorf("status error %q: want the URL with its query value masked (k=***), so that it still says where", st.Err)
	}
}

// TestHeadersStayWithTheServer: a server that redirects (307) to another
// host does not get the entry's headers sent there: Go's client drops its
// own Authorization on such a redirect, but a header the transport adds
// went to every request, and so to whoever the redirect named.
func TestHeadersStayWithTheServer(t *testing.T) {
	target := backendtest.NewHTTPServer(t, config.TypeHTTP, "normal")
	redirector := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, target.Endpoint, http.StatusTemporaryRedirect)
	}))
	t.Cleanup(redirector.Close)
	_, port, _ := net.SplitHostPort(redirector.Listener.Addr().String())
	const secret = "headersecretvalue321"
	// localhost, not 127.0.0.1: another host name than the target's.
	srv := config.Server{Name: "moved", Type: config.TypeHTTP, URL: "http://localhost:" + port + "/mcp",
		Headers: map[string]string{"Authorization": "Bearer " + secret, "X-Api-Key": secret}}
	p := startPool(t, []config.Server{srv}, testOptions(nil))
	testenv.Eventually(t, "the backend up through the redirect", func() bool {
		return statusOf(t, p, "moved").State == StateUp
	})
	if len(target.Headers()) == 0 {
		t.Fatal("the redirect's target got no request")
	}
	for _, h := range target.Headers() {
		if h.Get("Authorization") != "" || h.Get("X-Api-Key") != "" {
			t.Fatalf("the host a redirect named got the entry's headers: %v", h)
		}
	}
}
