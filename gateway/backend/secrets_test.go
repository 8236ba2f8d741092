package backend

import (
	"context"
	"errors"
	"fmt"
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
	// A token given as the URL's user name alone (https://TOKEN@host/…,
	// as GitHub and Basic-auth APIs take one).
	const userToken = "usertokenvalue321"
	srv := config.Server{Name: "hosted", Type: config.TypeHTTP, URL: "http://user:" + password + "@" + addr + "/mcp/" + pathSecret + "/sse?k=" + querySecret}
	byUser := config.Server{Name: "byuser", Type: config.TypeHTTP, URL: "http://" + userToken + "@" + addr + "/mcp"}
	var logs testenv.LogBuffer
	p := startPool(t, []config.Server{srv, byUser}, testOptions(&logs))
	var st, stUser Status
	testenv.Eventually(t, "the backends down", func() bool {
		st, stUser = statusOf(t, p, "hosted"), statusOf(t, p, "byuser")
		return st.State == StateDown && st.Err != "" && stUser.State == StateDown && stUser.Err != ""
	})
	for what, text := range map[string]string{"status error": stUser.Err, "status last error": stUser.LastErr, "log": logs.String()} {
		if strings.Contains(text, userToken) {
			t.Errorf("%s holds the token of the URL's user name: %s", what, text)
		}
	}
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

// TestCommandLineSecretsMasked: a key on a stdio server's command line —
// after a flag named like one (--api-key KEY, --token=KEY), or a ${VAR}
// whose name sounds secret (GITHUB_TOKEN) expanded into args — is hidden
// where the command line shows: the error of a server that exits (which
// names the command and quotes its stderr), /status, the log, and the
// stderr lines kept for toolgate__server_status.
func TestCommandLineSecretsMasked(t *testing.T) {
	const flagSecret, eqSecret, envSecret = "flagsecretvalue123", "eqsecretvalue456", "envsecretvalue789"
	t.Setenv("TG_PROBE_GITHUB_TOKEN", envSecret)
	srv := config.Server{Name: "cli", Type: config.TypeStdio, Command: "sh",
		Args: []string{"-c", `echo "starting with $*" >&2; exit 3`, "sh", "--api-key", flagSecret, "--github-token=" + eqSecret, envSecret}}
	var logs testenv.LogBuffer
	p := startPool(t, []config.Server{srv}, testOptions(&logs))
	var st Status
	testenv.Eventually(t, "the backend down", func() bool {
		st = statusOf(t, p, "cli")
		return st.State == StateDown && st.Err != ""
	})
	if !strings.Contains(st.Err, "starting with") {
		t.Fatalf("status error %q: want the server's stderr quoted", st.Err)
	}
	_, callErr := p.CallTool(context.Background(), "cli", "any", nil)
	for what, text := range map[string]string{"status error": st.Err, "status last error": st.LastErr, "log": logs.String(),
		"stderr kept": strings.Join(p.Stderr("cli"), "\n"), "call error": fmt.Sprint(callErr)} {
		for _, secret := range []string{flagSecret, eqSecret, envSecret} {
			if strings.Contains(text, secret) {
				t.Errorf("%s holds %q of the command line: %s", what, secret, text)
			}
		}
	}
	// The flags and the rest of the command line still say what ran.
	if !strings.Contains(st.Err, "--api-key ***") {
		t.Errorf("status error %q: want the flag kept and its value masked", st.Err)
	}
}
