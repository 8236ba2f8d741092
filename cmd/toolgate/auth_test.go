package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	neturl "net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolgate/toolgate/gateway"
	"github.com/toolgate/toolgate/gateway/backend"
	"github.com/toolgate/toolgate/gateway/backend/backendtest"
	"github.com/toolgate/toolgate/gateway/backend/oauth"
	"github.com/toolgate/toolgate/gateway/backend/oauth/oauthtest"
	"github.com/toolgate/toolgate/internal/testenv"
)

// demoOAuthServer starts the TypeScript SDK's example server
// (simpleStreamableHttp.js --oauth, from the @modelcontextprotocol/sdk
// installed with the bundled servers): a protected MCP server with its
// in-memory authorization server (registration, PKCE, an authorize
// endpoint that approves without a page) on two free loopback ports. It
// returns the MCP URL; node or the example missing skips locally and fails
// on CI.
func demoOAuthServer(t *testing.T) string {
	t.Helper()
	root := repoRoot(t)
	script := filepath.Join(root, "examples", "servers", "node_modules", "@modelcontextprotocol", "sdk", "dist", "esm", "examples", "server", "simpleStreamableHttp.js")
	node, nodeErr := exec.LookPath("node")
	if _, err := os.Stat(script); err != nil || nodeErr != nil {
		testenv.Missing(t, "the TypeScript SDK's example server needs node and scripts/install-servers.sh: %v", errors.Join(err, nodeErr))
	}
	mcpPort, authPort := freePort(t), freePort(t)
	preload, err := filepath.Abs(filepath.Join("testdata", "loopback.cjs"))
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(node, "--require", preload, script, "--oauth")
	cmd.Env = append(os.Environ(), "MCP_PORT="+mcpPort, "MCP_AUTH_PORT="+authPort)
	// Its log prints the tokens it sees (a demo): kept out of the test log
	// unless the test fails.
	out := &testenv.LogBuffer{}
	cmd.Stdout, cmd.Stderr = out, out
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		_ = cmd.Wait()
		if t.Failed() {
			t.Logf("demo server output:\n%s", out.String())
		}
	})
	// The demo names itself localhost (its metadata's resource): the
	// config's url must be the same string.
	u := "http://localhost:" + mcpPort + "/mcp"
	for _, ready := range []string{
		"http://localhost:" + mcpPort + "/.well-known/oauth-protected-resource/mcp",
		"http://localhost:" + authPort + "/.well-known/oauth-authorization-server",
	} {
		testenv.Eventually(t, "the demo server answers "+ready, func() bool {
			resp, err := http.Get(ready)
			if err != nil {
				return false
			}
			resp.Body.Close()
			return resp.StatusCode == http.StatusOK
		})
	}
	return u
}

func freePort(t *testing.T) string {
	t.Helper()
	_, port, err := net.SplitHostPort(freeAddr(t))
	if err != nil {
		t.Fatal(err)
	}
	return port
}

// remoteConfig writes a config with one http server.
func remoteConfig(t *testing.T, name, url string) string {
	t.Helper()
	b, _ := json.Marshal(map[string]any{"mcpServers": map[string]any{name: map[string]any{"type": "http", "url": url}}})
	path := filepath.Join(t.TempDir(), "toolgate.json")
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// cliLogin runs `toolgate auth login SERVER --no-browser`, follows the
// authorization URL it prints as a browser would (the servers under test
// approve at once), and returns its output once it has exited.
func cliLogin(t *testing.T, dataDir, cfgPath, server string) (stdout, stderr string) {
	t.Helper()
	cmd := toolgateCmd(t, dataDir, "auth", "login", server, "--config", cfgPath, "--no-browser", "--timeout", "1m")
	var errBuf bytes.Buffer
	cmd.Stderr = &errBuf
	pipe, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var outBuf bytes.Buffer
	sc := bufio.NewScanner(pipe)
	followed := false
	for sc.Scan() {
		line := sc.Text()
		outBuf.WriteString(line + "\n")
		if u, err := oauthtest.AuthorizationURL(line); err == nil && !followed {
			followed = true
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			if err := oauthtest.FollowAuthorization(ctx, u); err != nil {
				t.Errorf("following the printed URL: %v", err)
			}
			cancel()
		}
	}
	_, _ = io.Copy(&outBuf, pipe)
	if err := cmd.Wait(); err != nil {
		t.Fatalf("toolgate auth login %s: %v\nstdout:\n%s\nstderr:\n%s", server, err, outBuf.String(), errBuf.String())
	}
	if !followed {
		t.Fatalf("toolgate auth login printed no authorization URL:\n%s", outBuf.String())
	}
	return outBuf.String(), errBuf.String()
}

// storedCreds reads the login file of server and checks its permissions.
func storedCreds(t *testing.T, dataDir, server string) *oauth.Credentials {
	t.Helper()
	store := oauth.NewStore(dataDir)
	for path, want := range map[string]os.FileMode{store.Dir(): 0o700, store.Path(server): 0o600} {
		fi, err := os.Stat(path)
		if err != nil || fi.Mode().Perm() != want {
			t.Errorf("%s: %v, %v; want mode %o", path, fi.Mode(), err, want)
		}
	}
	c, err := store.Load(server)
	if err != nil || c == nil {
		t.Fatalf("stored login of %s: %v, %v", server, c, err)
	}
	return c
}

// noToken fails if a token of c appears in any of the texts.
func noToken(t *testing.T, c *oauth.Credentials, texts map[string]string) {
	t.Helper()
	for what, text := range texts {
		for _, tok := range []string{c.Token.AccessToken, c.Token.RefreshToken} {
			if tok != "" && strings.Contains(text, tok) {
				t.Errorf("a token appears in %s", what)
			}
		}
	}
}

func executeTool(t *testing.T, ctx context.Context, cs *mcp.ClientSession, name string, args map[string]any) *mcp.CallToolResult {
	t.Helper()
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: gateway.ExecuteToolName, Arguments: map[string]any{"name": name, "arguments": args}})
	if err != nil {
		t.Fatalf("execute_tool(%s): protocol error %v", name, err)
	}
	return res
}

// TestAuthLoginDemoServer is the "done when" against the
// TypeScript SDK's example server in --oauth mode: the real `toolgate auth
// login demo --no-browser` exits 0 once its URL is followed, `auth status`
// shows demo logged in, a real MCP client finds demo__greet through
// search_tools and runs it through execute_tool, the token file is 0600 and
// no token is in any of toolgate's output.
func TestAuthLoginDemoServer(t *testing.T) {
	url := demoOAuthServer(t)
	cfgPath := remoteConfig(t, "demo", url)
	dataDir := t.TempDir()

	out, errOut := cliLogin(t, dataDir, cfgPath, "demo")
	if !strings.Contains(out, "Logged in to demo") {
		t.Errorf("auth login output:\n%s", out)
	}
	creds := storedCreds(t, dataDir, "demo")
	if creds.Resource != url || !creds.Client.Registered {
		t.Errorf("stored login: resource %q (want %q), registered %v", creds.Resource, url, creds.Client.Registered)
	}

	status, err := toolgateCmd(t, dataDir, "auth", "status", "--config", cfgPath).CombinedOutput()
	if err != nil || !strings.Contains(string(status), "logged in") {
		t.Errorf("auth status: %v\n%s", err, status)
	}
	statusJSON, err := toolgateCmd(t, dataDir, "auth", "status", "--config", cfgPath, "--json").Output()
	var rep struct {
		Servers []struct{ Server, Auth string } `json:"servers"`
	}
	if err != nil || json.Unmarshal(statusJSON, &rep) != nil || len(rep.Servers) != 1 || rep.Servers[0].Auth != "loggedIn" {
		t.Errorf("auth status --json: %v\n%s", err, statusJSON)
	}

	serve := toolgateCmd(t, dataDir, "serve", "--config", cfgPath)
	logs := &testenv.LogBuffer{}
	serve.Stderr = io.MultiWriter(logs, testLog(t, "toolgate: "))
	ctx, cs := connectStdio(t, serve, 2*time.Minute)
	indexServed(t, ctx, cs) // a cold start past its wait answers "being built"
	found, _ := searchTools(t, ctx, cs, "greet someone by name", 10)
	var names []string
	for _, tl := range found.Tools {
		names = append(names, tl.Name)
	}
	if !strings.Contains(strings.Join(names, " "), "demo__greet") {
		t.Fatalf("search_tools found %v, want demo__greet", names)
	}
	res := executeTool(t, ctx, cs, "demo__greet", map[string]any{"name": "toolgate"})
	if res.IsError || !strings.Contains(resultText(res), "Hello, toolgate!") {
		t.Fatalf("execute_tool(demo__greet): isError=%v %q", res.IsError, resultText(res))
	}
	cs.Close()
	_ = serve.Wait()
	noToken(t, creds, map[string]string{
		"auth login's output": out + errOut, "auth status's output": string(status) + string(statusJSON), "serve's log": logs.String(),
	})
}

// TestAuthDemoServerExpiryNotice: the TypeScript SDK's example OAuth
// server issues access tokens for an hour and no refresh token, so its
// login stops working then. GET /status (loginExpiry) and toolgate status
// say when, with the exact login to run; before, only `auth status` said
// "not refreshable", and the gateway nothing until the server's calls
// failed.
func TestAuthDemoServerExpiryNotice(t *testing.T) {
	url := demoOAuthServer(t)
	cfgPath := remoteConfig(t, "demo", url)
	dataDir := t.TempDir()
	cliLogin(t, dataDir, cfgPath, "demo")
	creds := storedCreds(t, dataDir, "demo")
	if creds.Token.RefreshToken != "" || creds.Token.Expiry.IsZero() {
		t.Fatalf("the demo server gave a refresh token or no expiry (%v): this test needs a login that cannot be refreshed", creds.Token.Expiry)
	}
	ctx, cs, addr, logs := serveLoggedHTTP(t, dataDir, cfgPath)
	if res := executeTool(t, ctx, cs, "demo__greet", map[string]any{"name": "toolgate"}); res.IsError {
		t.Fatalf("execute_tool(demo__greet): %q", resultText(res))
	}
	abs, _ := filepath.Abs(cfgPath)
	command := fmt.Sprintf("toolgate auth login demo --config %s --data-dir %s", abs, dataDir)
	rep := gatewayStatus(t, addr)
	if le := rep.Backends[0].LoginExpiry; le == nil || !le.Expires.Equal(creds.Token.Expiry) || le.Login != command {
		t.Errorf("/status loginExpiry = %+v, want %v and %q", le, creds.Token.Expiry, command)
	}
	out, err := toolgateCmd(t, dataDir, "status", "--addr", addr).Output()
	if err != nil || !strings.Contains(string(out), "demo: the access token of its OAuth login expires at ") ||
		!strings.Contains(string(out), "cannot be refreshed (the authorization server gave no refresh token): run `"+command+"` before then") {
		t.Errorf("toolgate status: %v\n%s", err, out)
	}
	noToken(t, creds, map[string]string{"serve's log": logs.String(), "toolgate status": string(out)})
}

// TestAuthNeedsLoginEndToEnd runs the real gateway against a Go
// authorization server the test controls: once the refresh token is
// revoked, the backend needs a login and /status, `toolgate status`,
// execute_tool and search_tools' unavailable reason all give the command;
// the command, run while the gateway runs, brings the backend back without
// a restart.
func TestAuthNeedsLoginEndToEnd(t *testing.T) {
	as := oauthtest.NewAuthServer(t)
	rs := oauthtest.NewResourceServer(t, as, backendtest.NewServer(backendtest.ParseModes("normal")), nil)
	cfgPath := remoteConfig(t, "remote", rs.URL)
	dataDir := t.TempDir()
	cliLogin(t, dataDir, cfgPath, "remote")
	first := storedCreds(t, dataDir, "remote")

	ctx, cs, addr, logs := serveLoggedHTTP(t, dataDir, cfgPath)
	if res := executeTool(t, ctx, cs, "remote__echo", map[string]any{"text": "hi"}); res.IsError || resultText(res) != "hi" {
		t.Fatalf("execute_tool(remote__echo): %q", resultText(res))
	}

	as.RevokeRefreshTokens()
	as.ExpireAccessTokens()
	abs, _ := filepath.Abs(cfgPath)
	command := fmt.Sprintf("toolgate auth login remote --config %s --data-dir %s", abs, dataDir)
	res := executeTool(t, ctx, cs, "remote__echo", map[string]any{"text": "hi"})
	if !res.IsError || !strings.Contains(resultText(res), "needs a login: run `"+command+"`") {
		t.Fatalf("execute_tool after the refresh token was revoked: isError=%v %q; want the login command %q", res.IsError, resultText(res), command)
	}
	// The call's refusal reaches the client before the pool's supervisor
	// has marked the backend (it does so on its own goroutine).
	var rep gateway.StatusReport
	testenv.Eventually(t, "remote needs a login in /status", func() bool {
		rep = gatewayStatus(t, addr)
		return rep.Backends[0].State == backend.StateNeedsLogin
	})
	if b := rep.Backends[0]; b.State != backend.StateNeedsLogin || !strings.Contains(b.Err, command) {
		t.Errorf("/status: state %s, error %q", b.State, b.Err)
	}
	out, err := toolgateCmd(t, dataDir, "status", "--addr", addr).Output()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != degradedExit || !strings.Contains(string(out), command) {
		t.Errorf("toolgate status: %v\n%s", err, out)
	}
	found, _ := searchTools(t, ctx, cs, "echo the given text", 5)
	var reason string
	for _, tl := range found.Tools {
		if tl.Name == "remote__echo" {
			reason = tl.Unavailable
		}
	}
	if !strings.Contains(reason, `server "remote" needs a login: run `+"`"+command+"`") {
		t.Errorf("search_tools marks remote__echo unavailable with %q", reason)
	}
	authStatus, err := toolgateCmd(t, dataDir, "auth", "status", "--config", cfgPath).Output()
	if !errors.As(err, &ee) || ee.ExitCode() != degradedExit || !strings.Contains(string(authStatus), "invalid_grant") {
		t.Errorf("auth status after the refusal: %v\n%s", err, authStatus)
	}

	// Logging in again while the gateway runs brings the backend back.
	cliLogin(t, dataDir, cfgPath, "remote")
	second := storedCreds(t, dataDir, "remote")
	testenv.Eventually(t, "remote up again", func() bool { return gatewayStatus(t, addr).Backends[0].State == backend.StateUp })
	if res := executeTool(t, ctx, cs, "remote__echo", map[string]any{"text": "back"}); res.IsError || resultText(res) != "back" {
		t.Errorf("execute_tool after the new login: %q", resultText(res))
	}
	statusJSON, _ := http.Get("http://" + addr + "/status")
	var body []byte
	if statusJSON != nil {
		body, _ = io.ReadAll(statusJSON.Body)
		statusJSON.Body.Close()
	}
	for _, c := range []*oauth.Credentials{first, second} {
		noToken(t, c, map[string]string{"serve's log": logs.String(), "/status": string(body), "toolgate status": string(out), "auth status": string(authStatus)})
	}
}

// gatewayStatus reads GET /status of the gateway at addr.
func gatewayStatus(t *testing.T, addr string) gateway.StatusReport {
	t.Helper()
	resp, err := http.Get("http://" + addr + "/status")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var rep gateway.StatusReport
	if err := json.NewDecoder(resp.Body).Decode(&rep); err != nil || len(rep.Backends) != 1 {
		t.Fatalf("/status: %v, %+v", err, rep)
	}
	return rep
}

// TestAuthCommandErrors: each command's bad input and failure gets a
// message that names the problem and the fix.
func TestAuthCommandErrors(t *testing.T) {
	as := oauthtest.NewAuthServer(t)
	rs := oauthtest.NewResourceServer(t, as, backendtest.NewServer(backendtest.ParseModes("normal")), nil)
	b, _ := json.Marshal(map[string]any{"mcpServers": map[string]any{
		"remote": map[string]any{"type": "http", "url": rs.URL},
		"local":  map[string]any{"command": "true"},
		"static": map[string]any{"url": rs.URL, "headers": map[string]string{"Authorization": "Bearer abcdef123"}},
	}})
	cfgPath := filepath.Join(t.TempDir(), "toolgate.json")
	if err := os.WriteFile(cfgPath, b, 0o600); err != nil {
		t.Fatal(err)
	}
	dataDir := t.TempDir()
	for _, tc := range []struct {
		name string
		args []string
		code int
		want string
	}{
		{"unknown server", []string{"auth", "login", "nope", "--config", cfgPath}, 2, `no server "nope" in ` + cfgPath + ` (its servers: local, remote, static)`},
		{"stdio server", []string{"auth", "login", "local", "--config", cfgPath}, 2, "logins are for http and sse servers"},
		{"static header", []string{"auth", "login", "static", "--config", cfgPath}, 1, `remove it from "headers" to log in with OAuth`},
		{"no config", []string{"auth", "login", "remote"}, 2, "needs --config FILE (the mcpServers JSON that names the server): no gateway serving a config file runs on the data folder " + dataDir},
		{"nobody approves", []string{"auth", "login", "remote", "--config", cfgPath, "--no-browser", "--timeout", "100ms"}, 1,
			"no redirect from the authorization server within 100ms: open the URL above in a browser and approve, then run `toolgate auth login remote --config"},
		{"logout without a login", []string{"auth", "logout", "remote", "--config", cfgPath}, 2, `no login of "remote" is stored in ` + filepath.Join(dataDir, "auth")},
		{"status: remote needs a login", []string{"auth", "status", "--config", cfgPath}, 3, "remote needs a login"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cmd := toolgateCmd(t, dataDir, tc.args...)
			cmd.Env = append(cmd.Env, "TOOLGATE_CONFIG=")
			out, err := cmd.CombinedOutput()
			var ee *exec.ExitError
			if !errors.As(err, &ee) || ee.ExitCode() != tc.code || !strings.Contains(string(out), tc.want) {
				t.Errorf("toolgate %s: %v\n%s\nwant exit status %d and %q", strings.Join(tc.args, " "), err, out, tc.code, tc.want)
			}
		})
	}

	// status: one line per http server, each in its own state.
	out, _ := toolgateCmd(t, dataDir, "auth", "status", "--config", cfgPath).Output()
	for _, want := range []string{"remote  http  needs login", "static  http  static headers"} {
		if !strings.Contains(strings.Join(strings.Fields(string(out)), "  "), strings.Join(strings.Fields(want), "  ")) {
			t.Errorf("auth status lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(string(out), "local") {
		t.Errorf("auth status lists the stdio server:\n%s", out)
	}

	// logout after a login removes the file.
	cliLogin(t, dataDir, cfgPath, "remote")
	if out, err := toolgateCmd(t, dataDir, "auth", "logout", "remote", "--config", cfgPath).CombinedOutput(); err != nil || !strings.Contains(string(out), "Logged out of remote") {
		t.Errorf("auth logout: %v\n%s", err, out)
	}
	if _, err := os.Stat(oauth.NewStore(dataDir).Path("remote")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("login file after logout: %v", err)
	}

	// Without --config, the config of the gateway running on the data
	// folder, said on stderr; it was "needs --config FILE" while the
	// gateway knew its file.
	startGateway(t, dataDir, cfgPath)
	cmd := toolgateCmd(t, dataDir, "auth", "status")
	cmd.Env = append(cmd.Env, "TOOLGATE_CONFIG=")
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	var ee *exec.ExitError
	want := "config: " + cfgPath + " (that of the gateway running on " + dataDir + "; --config FILE reads another)\n"
	if !errors.As(err, &ee) || ee.ExitCode() != 3 || !strings.Contains(strings.Join(strings.Fields(string(out)), " "), "remote http needs login") || !strings.Contains(stderr.String(), want) {
		t.Errorf("auth status without --config, a gateway running: %v\n%s%s\nwant exit status 3, remote needing a login and %q", err, out, stderr.String(), want)
	}

	// So does logout, for the server's "tls" settings.
	cliLogin(t, dataDir, cfgPath, "remote")
	cmd = toolgateCmd(t, dataDir, "auth", "logout", "remote")
	cmd.Env = append(cmd.Env, "TOOLGATE_CONFIG=")
	stderr.Reset()
	cmd.Stderr = &stderr
	if out, err := cmd.Output(); err != nil || !strings.Contains(string(out), "Logged out of remote") || !strings.Contains(stderr.String(), want) {
		t.Errorf("auth logout without --config, a gateway running: %v\n%s%s\nwant %q", err, out, stderr.String(), want)
	}
}

// A server that answers 401 with a bare Bearer challenge and publishes no
// protected-resource metadata (another toolgate with API keys: `Bearer
// realm="toolgate"`) takes a token given in its headers: `auth status`
// says so, without a login command to run. It said "run `toolgate auth
// login keyed`", which then failed with "publishes no usable
// protected-resource metadata".
func TestAuthStatusBearerWithoutMetadata(t *testing.T) {
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("WWW-Authenticate", `Bearer realm="toolgate"`)
		http.Error(w, "Unauthorized: this gateway needs an API key", http.StatusUnauthorized)
	}))
	t.Cleanup(hs.Close)
	cfgPath := remoteConfig(t, "keyed", hs.URL+"/mcp")
	cmd := toolgateCmd(t, t.TempDir(), "auth", "status", "--config", cfgPath, "--json")
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 3 || !strings.Contains(stderr.String(), `keyed needs a token in its "headers"`) {
		t.Fatalf("auth status: %v\n%s%s\nwant exit status 3 and the headers named", err, out, stderr.String())
	}
	var got struct {
		Servers []struct{ Auth, Detail, Login string }
	}
	if err := json.Unmarshal(out, &got); err != nil || len(got.Servers) != 1 {
		t.Fatalf("auth status --json: %v\n%s", err, out)
	}
	if s := got.Servers[0]; s.Auth != "needsLogin" || s.Login != "" || !strings.Contains(s.Detail, "offers no OAuth login") || !strings.Contains(s.Detail, `the entry's "headers"`) {
		t.Errorf("keyed: %+v; want needsLogin with the headers as the fix and no login command", s)
	}
}

// With the browser on another machine, its redirect to 127.0.0.1 cannot
// arrive: the address it ended at, pasted on stdin, completes the login. A
// pasted line that is not this login's redirect is said and waited past.
func TestAuthLoginPastedRedirect(t *testing.T) {
	as := oauthtest.NewAuthServer(t)
	rs := oauthtest.NewResourceServer(t, as, backendtest.NewServer(backendtest.ParseModes("normal")), nil)
	cfgPath := remoteConfig(t, "remote", rs.URL)
	dataDir := t.TempDir()
	cmd := toolgateCmd(t, dataDir, "auth", "login", "remote", "--config", cfgPath, "--no-browser", "--timeout", "1m")
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	for line := range startLines(t, cmd, "auth login: ") {
		out.WriteString(line + "\n")
		switch u, err := oauthtest.AuthorizationURL(line); {
		case err == nil:
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			redirect, err := oauthtest.RedirectOf(ctx, u)
			cancel()
			if err != nil {
				t.Fatal(err)
			}
			state := regexp.MustCompile(`state=[^&]*`)
			fmt.Fprintln(stdin, state.ReplaceAllString(redirect, "state=another-login"))
			fmt.Fprintln(stdin, "  "+redirect+"  ")
		case strings.HasPrefix(line, "Logged in to"):
			stdin.Close()
		}
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("auth login with the redirect pasted: %v\n%s", err, out.String())
	}
	for _, want := range []string{
		"paste here the address it ends at",
		"Not this login's redirect: it belongs to another login (state mismatch)",
		"Logged in to remote",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
	storedCreds(t, dataDir, "remote")
}

// TestAuthMasksURLSecrets: a hosted server that takes its key in the
// url's query (?api_key=…) does not have it printed by `auth status` or
// `auth login` when it cannot be reached: Go's HTTP error quotes the whole
// URL, which serve's errors mask and these printed as it was.
func TestAuthMasksURLSecrets(t *testing.T) {
	const secret = "querysecret4242"
	cfgPath := remoteConfig(t, "keyed", "http://"+freeAddr(t)+"/mcp?api_key="+secret) // nothing listens there
	dataDir := t.TempDir()
	for _, args := range [][]string{
		{"auth", "status", "--config", cfgPath},
		{"auth", "status", "--config", cfgPath, "--json"},
		{"auth", "login", "keyed", "--config", cfgPath, "--no-browser"},
	} {
		out, _ := toolgateCmd(t, dataDir, args...).CombinedOutput() // status: exit 0 (unknown is no login needed)
		if !strings.Contains(string(out), "connection refused") {
			t.Errorf("toolgate %s: want the connection refused said:\n%s", strings.Join(args, " "), out)
		}
		if strings.Contains(string(out), secret) {
			t.Errorf("toolgate %s prints the url's key:\n%s", strings.Join(args, " "), out)
		}
	}
}

// TestCommandsNameTheDataFolderInFull: a command toolgate prints for the
// user to run (a login's, in the needs-login error of a gateway started
// with a relative --data-dir) names the data folder in full, as it names
// the config file: it said `--data-dir d1`, another folder once run from
// elsewhere.
func TestCommandsNameTheDataFolderInFull(t *testing.T) {
	g := &globals{dataDir: filepath.Join("rel", "data")}
	abs, err := filepath.Abs(g.dataDir)
	if err != nil {
		t.Fatal(err)
	}
	cfg, _ := filepath.Abs("servers.json")
	if got, want := g.loginCommand("servers.json")("demo"), "toolgate auth login demo --config "+cfg+" --data-dir "+abs; got != want {
		t.Errorf("login command %q, want %q", got, want)
	}
	if got, want := g.command("toolgate", "keys", "create"), "toolgate keys create --data-dir "+abs; got != want {
		t.Errorf("command %q, want %q", got, want)
	}
}

// auth status asks a server with a stored login whether it takes it, as a
// gateway's next request would (refreshing a token the server refuses):
// a login the authorization server revoked read "logged in" until a
// gateway tried it.
func TestAuthStatusAsksTheServer(t *testing.T) {
	as := oauthtest.NewAuthServer(t)
	rs := oauthtest.NewResourceServer(t, as, backendtest.NewServer(backendtest.ParseModes("normal")), nil)
	cfgPath := remoteConfig(t, "remote", rs.URL)
	dataDir := t.TempDir()
	cliLogin(t, dataDir, cfgPath, "remote")
	status := func() (code int, st struct{ Auth, Detail, Login string }) {
		t.Helper()
		cmd := toolgateCmd(t, dataDir, "auth", "status", "--config", cfgPath, "--json")
		var stderr strings.Builder
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			code = ee.ExitCode()
		} else if err != nil {
			t.Fatalf("auth status: %v\n%s", err, stderr.String())
		}
		var got struct {
			Servers []struct{ Auth, Detail, Login string }
		}
		if err := json.Unmarshal(out, &got); err != nil || len(got.Servers) != 1 {
			t.Fatalf("auth status --json: %v\n%s%s", err, out, stderr.String())
		}
		return code, got.Servers[0]
	}
	if code, st := status(); code != 0 || st.Auth != "loggedIn" {
		t.Fatalf("after the login: exit %d, %+v; want 0 and loggedIn", code, st)
	}
	served := rs.Served()
	if served == 0 {
		t.Fatal("auth status asked the server nothing")
	}

	// The access token refused, the refresh token good: refreshed, as a
	// gateway would, and still logged in.
	as.ExpireAccessTokens()
	refreshes := as.Refreshes()
	if code, st := status(); code != 0 || st.Auth != "loggedIn" || as.Refreshes() != refreshes+1 {
		t.Errorf("after the access token was refused: exit %d, %+v, %d refreshes; want 0, loggedIn, one refresh", code, st, as.Refreshes()-refreshes)
	}

	// Both refused (the user revoked toolgate's access): needs a login.
	as.RevokeRefreshTokens()
	as.ExpireAccessTokens()
	abs, _ := filepath.Abs(cfgPath)
	command := fmt.Sprintf("toolgate auth login remote --config %s --data-dir %s", abs, dataDir)
	if code, st := status(); code != degradedExit || st.Auth != "needsLogin" || !strings.Contains(st.Detail, "invalid_grant") || st.Login != command {
		t.Errorf("after the access was revoked: exit %d, %+v; want %d, needsLogin with the refusal and %q", code, st, degradedExit, command)
	}
	// Said once, the refusal is kept: the server is not asked again.
	served = rs.Served() + rs.Unauthorized()
	if code, st := status(); code != degradedExit || st.Auth != "needsLogin" || rs.Served()+rs.Unauthorized() != served {
		t.Errorf("auth status again: exit %d, %+v, %d requests; want needsLogin without asking", code, st, rs.Served()+rs.Unauthorized()-served)
	}
}

// TestAuthStepUpEndToEnd: a logged-in server that answers a call 403
// insufficient_scope (a step-up, MCP 2025-11-25) fails that call with the
// scopes and the login to run, in full, and no config edit (it said to
// list them in the entry's "oauth" first); `auth status` says a step-up is
// pending and which scopes; `auth login`, with the config as it was, says
// which scopes are new and asks for the union (the authorization
// request's scope), and the call then passes on the running gateway.
func TestAuthStepUpEndToEnd(t *testing.T) {
	as := oauthtest.NewAuthServer(t)
	as.EnforceRegisteredScopes() // the first login's client may not ask for write
	as.ManageClients()           // RFC 7592: the step-up login deletes the first login's client
	rs := oauthtest.NewResourceServer(t, as, backendtest.NewServer(backendtest.ParseModes("normal")),
		&oauthtest.ResourceOptions{Scopes: []string{oauthtest.Scope}, CallScopes: []string{"write"}})
	cfgPath := remoteConfig(t, "remote", rs.URL)
	cfgBefore, _ := os.ReadFile(cfgPath)
	dataDir := t.TempDir()
	cliLogin(t, dataDir, cfgPath, "remote")
	first := storedCreds(t, dataDir, "remote")

	ctx, cs, addr, logs := serveLoggedHTTP(t, dataDir, cfgPath)
	abs, _ := filepath.Abs(cfgPath)
	command := fmt.Sprintf("toolgate auth login remote --config %s --data-dir %s", abs, dataDir)
	res := executeTool(t, ctx, cs, "remote__echo", map[string]any{"text": "hi"})
	want := `the server wants the scopes "tools write", which the login was not given: run ` + "`" + command + "`, which asks for them"
	// Refused, not unavailable: the server stays up (it read "is
	// unavailable: … retry later").
	if !res.IsError || !strings.Contains(resultText(res), want) || !strings.Contains(resultText(res), `"oauth": {"scopes": [...]} still pins`) ||
		!strings.HasPrefix(resultText(res), `execute_tool remote__echo: server "remote" refused this call: `) || !strings.Contains(resultText(res), "The server and its other tools keep working") ||
		strings.Contains(resultText(res), "unavailable") || strings.Contains(resultText(res), "retry later") {
		t.Fatalf("execute_tool(remote__echo) with the login lacking a scope: isError=%v %q; want %q, refused", res.IsError, resultText(res), want)
	}
	if c := storedCreds(t, dataDir, "remote"); !slices.Equal(c.PendingScopes(), []string{"write"}) {
		t.Fatalf("the login file records the step-up %v, want [write]", c.PendingScopes())
	}

	// toolgate status and GET /status show it too: the server is up, and
	// its calls fail 403 until the login. They showed it up, and nothing else.
	// Up on its first session: the refused call ended it (go-sdk), and the
	// server was down until it connected again.
	if b := backendOf(t, getStatus(t, addr), "remote"); b.StepUp == nil || !slices.Equal(b.StepUp.Scopes, []string{"write"}) || b.StepUp.Login != command {
		t.Errorf("GET /status's remote with a step-up pending: stepUp %+v, want scopes [write] and login %q", b.StepUp, command)
	} else if b.State != "up" || b.Restarts != 0 {
		t.Errorf("GET /status's remote after a call refused 403 insufficient_scope: %s, %d restarts (%s); want up on its first session", b.State, b.Restarts, b.Err)
	}
	stOut, stErrOut, err := runToolgate(t, dataDir, "status")
	if ee := (*exec.ExitError)(nil); !errors.As(err, &ee) || ee.ExitCode() != degradedExit || !strings.Contains(stErrOut, "remote asks for more scopes") ||
		!strings.Contains(stOut, "remote asks for more scopes (write): run `"+command+"`") {
		t.Errorf("toolgate status with a step-up pending: %v\n%s%s", err, stOut, stErrOut)
	}

	out, err := toolgateCmd(t, dataDir, "auth", "status", "--config", cfgPath).Output()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != degradedExit || !strings.Contains(string(out), "step-up pending: the server asked for write") ||
		!strings.Contains(string(out), "remote asks for more scopes (write): run `"+command+"`") {
		t.Errorf("auth status with a step-up pending: %v\n%s", err, out)
	}
	js, _ := toolgateCmd(t, dataDir, "auth", "status", "--config", cfgPath, "--json").Output()
	var st struct {
		Servers []struct {
			Auth, Login string
			StepUp      []string
		}
	}
	if err := json.Unmarshal(js, &st); err != nil || len(st.Servers) != 1 || st.Servers[0].Auth != "loggedIn" ||
		!slices.Equal(st.Servers[0].StepUp, []string{"write"}) || st.Servers[0].Login != command {
		t.Errorf("auth status --json with a step-up pending: %v\n%s", err, js)
	}

	// The operator runs what the error says, the config as it was.
	loginOut, loginLog := cliLogin(t, dataDir, cfgPath, "remote")
	if cfgAfter, _ := os.ReadFile(cfgPath); !bytes.Equal(cfgBefore, cfgAfter) {
		t.Errorf("the config changed:\n%s", cfgAfter)
	}
	if !strings.Contains(loginOut, "this login asks for the scopes tools write (new: write)") ||
		!strings.Contains(loginOut, "does not list write in its scopes_supported") {
		t.Errorf("auth login does not say which scopes it asks for and which are new:\n%s", loginOut)
	}
	// The second login's requests (its check that the authorization
	// server still knows the client, then the browser's) ask for both.
	asked := as.AuthorizedScopes()
	if len(asked) < 2 || asked[0] != oauthtest.Scope || slices.ContainsFunc(asked[1:], func(s string) bool { return s != "tools write" }) {
		t.Errorf("the authorization requests asked for scopes %q, want %q, then %q", asked, oauthtest.Scope, "tools write")
	}
	second := storedCreds(t, dataDir, "remote")
	if as.Registrations() != 2 || second.Client.ID == first.Client.ID {
		t.Errorf("the step-up login: %d registrations, client %q (first %q); want a client registered for write", as.Registrations(), second.Client.ID, first.Client.ID)
	}
	// The first login's client, which nothing uses now, is deleted (it
	// was left at the authorization server).
	if got := as.DeletedClients(); !slices.Equal(got, []string{first.Client.ID}) {
		t.Errorf("the step-up login deleted the clients %v, want the first login's %q", got, first.Client.ID)
	} else if !strings.Contains(loginLog, "deleted the client registered by the previous login") || strings.Contains(loginLog, first.Client.RegistrationToken) {
		t.Errorf("auth login's log of the deletion (no registration token in it):\n%s", loginLog)
	}
	if second.StepUp != nil {
		t.Errorf("the login granted write keeps the step-up %+v", second.StepUp)
	}
	testenv.Eventually(t, "remote__echo passes with the new login", func() bool {
		res = executeTool(t, ctx, cs, "remote__echo", map[string]any{"text": "stepped up"})
		return !res.IsError && resultText(res) == "stepped up"
	})
	if out, err := toolgateCmd(t, dataDir, "auth", "status", "--config", cfgPath).Output(); err != nil || strings.Contains(string(out), "step-up") {
		t.Errorf("auth status after the step-up login: %v\n%s", err, out)
	}
	if b := backendOf(t, getStatus(t, addr), "remote"); b.StepUp != nil {
		t.Errorf("GET /status's remote after the step-up login: stepUp %+v", b.StepUp)
	}
	for _, c := range []*oauth.Credentials{first, second} {
		noToken(t, c, map[string]string{"serve's log": logs.String(), "auth status": string(out), "auth login": loginOut})
	}
}

// TestAuthLoginRedirectURI: an entry's "oauth": {"redirectUri"} is the
// redirect URI of the login, for an authorization server whose client
// allows http://localhost:PORT/PATH only: against the TypeScript SDK's
// example server, the client registered with it and the redirect the
// browser follows is http://localhost:PORT/oauth/callback (it was always
// http://127.0.0.1:<a free port>/callback), and the login completes.
func TestAuthLoginRedirectURI(t *testing.T) {
	url := demoOAuthServer(t)
	redirect := "http://localhost:" + freePort(t) + "/oauth/callback"
	b, _ := json.Marshal(map[string]any{"mcpServers": map[string]any{"demo": map[string]any{"type": "http", "url": url,
		"oauth": map[string]any{"redirectUri": redirect}}}})
	cfgPath := filepath.Join(t.TempDir(), "toolgate.json")
	if err := os.WriteFile(cfgPath, b, 0o600); err != nil {
		t.Fatal(err)
	}
	dataDir := t.TempDir()
	out, _ := cliLogin(t, dataDir, cfgPath, "demo")
	if !strings.Contains(out, "Logged in to demo") {
		t.Errorf("auth login output:\n%s", out)
	}
	u, err := oauthtest.AuthorizationURL(out)
	if err != nil || !strings.Contains(u, "redirect_uri="+neturl.QueryEscape(redirect)) {
		t.Errorf("the authorization URL %q does not ask for redirect_uri %s", u, redirect)
	}
	if creds := storedCreds(t, dataDir, "demo"); creds.Client.RedirectURI != redirect || !creds.Client.Registered {
		t.Errorf("stored login: client redirect URI %q (registered %v), want %q", creds.Client.RedirectURI, creds.Client.Registered, redirect)
	}

	// A redirectUri that is not this machine's loopback is refused, with the fix.
	b, _ = json.Marshal(map[string]any{"mcpServers": map[string]any{"demo": map[string]any{"type": "http", "url": url,
		"oauth": map[string]any{"redirectUri": "https://example.com/callback"}}}})
	if err := os.WriteFile(cfgPath, b, 0o600); err != nil {
		t.Fatal(err)
	}
	bad, err := toolgateCmd(t, dataDir, "auth", "login", "demo", "--config", cfgPath, "--no-browser", "--timeout", "5s").CombinedOutput()
	if want := `redirectUri: "https://example.com/callback" is not a loopback redirect URI: give http://localhost:PORT/PATH`; err == nil || !strings.Contains(string(bad), want) {
		t.Errorf("auth login with a redirectUri off the machine: %v\n%s\nwant it refused with %q", err, bad, want)
	}
}

// TestAuthStepUpSSEEndToEnd: a logged-in server of the older SSE
// transport that answers one tool's call 403 insufficient_scope (its
// POST; its answers come on its event stream) fails that call alone, on
// the real gateway: refused, with the login to run; the server stays up
// on its first session (GET /status), the step-up pending, and its other
// tool answers right after. It went down at each refused call ("connection
// lost: failed to write: 403 Forbidden") until its restart delay passed,
// every call to it failing "it is down" meanwhile.
func TestAuthStepUpSSEEndToEnd(t *testing.T) {
	as := oauthtest.NewAuthServer(t)
	rs := oauthtest.NewResourceServer(t, as, backendtest.NewServer(backendtest.ParseModes("normal")),
		&oauthtest.ResourceOptions{Transport: "sse", CallScopes: []string{"write"}, CallScopesTools: []string{"add"}})
	b, _ := json.Marshal(map[string]any{"mcpServers": map[string]any{"remote": map[string]any{"type": "sse", "url": rs.URL}}})
	cfgPath := filepath.Join(t.TempDir(), "toolgate.json")
	if err := os.WriteFile(cfgPath, b, 0o600); err != nil {
		t.Fatal(err)
	}
	dataDir := t.TempDir()
	cliLogin(t, dataDir, cfgPath, "remote")
	ctx, cs, addr, _ := serveLoggedHTTP(t, dataDir, cfgPath)
	up := backendOf(t, getStatus(t, addr), "remote")
	for i := range 2 {
		res := executeTool(t, ctx, cs, "remote__add", map[string]any{"a": 1, "b": 2})
		if txt := resultText(res); !res.IsError || !strings.HasPrefix(txt, `execute_tool remote__add: server "remote" refused this call: `) ||
			!strings.Contains(txt, `the server wants the scopes "write", which the login was not given: run `+"`toolgate auth login remote") ||
			!strings.Contains(txt, "The server and its other tools keep working") {
			t.Fatalf("refused call %d of remote__add: isError=%v %q; want refused, with the login to run", i+1, res.IsError, txt)
		}
		if b := backendOf(t, getStatus(t, addr), "remote"); b.State != "up" || b.Restarts != 0 || !b.Since.Equal(up.Since) || b.StepUp == nil || !slices.Equal(b.StepUp.Scopes, []string{"write"}) {
			t.Fatalf("GET /status's remote after refused call %d: %s, %d restarts, since %v (was %v), stepUp %+v (%s); want up on its first session, write pending",
				i+1, b.State, b.Restarts, b.Since, up.Since, b.StepUp, b.Err)
		}
		if res := executeTool(t, ctx, cs, "remote__echo", map[string]any{"text": "still here"}); res.IsError || resultText(res) != "still here" {
			t.Fatalf("remote__echo after refused call %d: %q", i+1, resultText(res))
		}
	}
}

// backendOf is the backend named name in rep.
func backendOf(t *testing.T, rep gateway.StatusReport, name string) gateway.BackendStatus {
	t.Helper()
	for _, b := range rep.Backends {
		if b.Name == name {
			return b
		}
	}
	t.Fatalf("no backend %q in the status report", name)
	return gateway.BackendStatus{}
}

// TestAuthStepUpNotRecorded: a step-up the login folder would not take
// (made immutable, so that root is refused too) is not recorded, and the
// next login would ask for the old scopes: the call's error and GET
// /status say so, with what to do instead (make the folder writable and
// call again, or list the scopes in the entry's oauth.scopes). They said
// to run the login. Once the folder takes writes, the next call records
// it and the error names the login again.
func TestAuthStepUpNotRecorded(t *testing.T) {
	as := oauthtest.NewAuthServer(t)
	rs := oauthtest.NewResourceServer(t, as, backendtest.NewServer(backendtest.ParseModes("normal")),
		&oauthtest.ResourceOptions{Scopes: []string{oauthtest.Scope}, CallScopes: []string{"write"}})
	cfgPath := remoteConfig(t, "remote", rs.URL)
	dataDir := t.TempDir()
	cliLogin(t, dataDir, cfgPath, "remote")
	writable := readOnlyDir(t, filepath.Join(dataDir, oauth.StoreDir))

	addr := freeAddr(t)
	serve := toolgateCmd(t, dataDir, "serve", "--config", cfgPath, "--http", addr)
	serve.Stderr = testLog(t, "toolgate: ")
	ctx, cs := connectHTTP(t, serve, addr, 2*time.Minute)
	res := executeTool(t, ctx, cs, "remote__echo", map[string]any{"text": "hi"})
	want := `the server wants the scopes "tools write", which the login was not given, and the gateway could not record them for the next login (`
	if text := resultText(res); !res.IsError || !strings.Contains(text, want) || !strings.Contains(text, "make the login folder writable") ||
		!strings.Contains(text, `"oauth": {"scopes": [...]}, with those the login has, asks for them`) {
		t.Fatalf("execute_tool(remote__echo) with the step-up not recorded: isError=%v %q; want %q and what to do", res.IsError, text, want)
	}
	if c := storedCreds(t, dataDir, "remote"); c.StepUp != nil {
		t.Fatalf("the immutable login folder took the step-up %+v", c.StepUp)
	}
	b := backendOf(t, getStatus(t, addr), "remote")
	if su := b.StepUp; su == nil || !slices.Equal(su.Scopes, []string{"write"}) || !strings.Contains(su.NotRecorded, "could not record write for the next login") {
		t.Errorf("GET /status's remote with the step-up not recorded: stepUp %+v", su)
	}

	writable()
	// A 403 ends the backend's session (go-sdk: "connection lost"), which
	// connects again: the call is tried until it reaches the server.
	var text string
	testenv.Eventually(t, "remote__echo answered by the server again", func() bool {
		text = resultText(executeTool(t, ctx, cs, "remote__echo", map[string]any{"text": "hi"}))
		return strings.Contains(text, "the server wants the scopes")
	})
	if !strings.Contains(text, "which the login was not given: run `") || strings.Contains(text, "could not record") {
		t.Errorf("execute_tool(remote__echo) once the folder takes writes: %q", text)
	}
	if c := storedCreds(t, dataDir, "remote"); !slices.Equal(c.PendingScopes(), []string{"write"}) {
		t.Errorf("the login file records the step-up %v once the folder takes writes, want [write]", c.PendingScopes())
	}
	if su := backendOf(t, getStatus(t, addr), "remote").StepUp; su == nil || su.NotRecorded != "" {
		t.Errorf("GET /status's remote once recorded: stepUp %+v", su)
	}
}

// readOnlyDir makes dir refuse new files to this process, root too (the
// immutable attribute: toolgate makes its login folder 0700 again, as its
// owner may), and returns what undoes it (also run at the test's end).
func readOnlyDir(t *testing.T, dir string) (undo func()) {
	t.Helper()
	if out, err := exec.Command("chattr", "+i", dir).CombinedOutput(); err != nil {
		testenv.Missing(t, "chattr +i %s (needs CAP_LINUX_IMMUTABLE and a file system that has it): %v: %s", dir, err, out)
	}
	var once sync.Once
	undo = func() { once.Do(func() { exec.Command("chattr", "-i", dir).Run() }) }
	t.Cleanup(undo)
	return undo
}

// serveLoggedHTTP runs `toolgate serve --config cfgPath --http` on a free
// address of the data folder dataDir and connects a client to it: the
// session, the address and the gateway's log.
func serveLoggedHTTP(t *testing.T, dataDir, cfgPath string) (context.Context, *mcp.ClientSession, string, *testenv.LogBuffer) {
	t.Helper()
	addr := freeAddr(t)
	serve := toolgateCmd(t, dataDir, "serve", "--config", cfgPath, "--http", addr)
	logs := &testenv.LogBuffer{}
	serve.Stderr = io.MultiWriter(logs, testLog(t, "toolgate: "))
	ctx, cs := connectHTTP(t, serve, addr, 2*time.Minute)
	return ctx, cs, addr, logs
}

// TestAuthLogoutRevokes: `auth logout` ends the login at the
// authorization server: it revokes the refresh and the access token (RFC
// 7009; the server refuses the access token at once) and deletes the
// client toolgate registered (RFC 7592), and says so. It removed the file
// only and said "the authorization server may honour its tokens until
// they expire", while the server went on taking them. An authorization
// server that refuses or does not answer leaves the login removed (exit
// status 0), and the output says plainly what was NOT revoked, why, and
// what to do; no token is in any of it.
func TestAuthLogoutRevokes(t *testing.T) {
	as := oauthtest.NewAuthServer(t)
	as.OfferRevocation()
	as.ManageClients()
	rs := oauthtest.NewResourceServer(t, as, backendtest.NewServer(backendtest.ParseModes("normal")), nil)
	cfgPath := remoteConfig(t, "remote", rs.URL)
	dataDir := t.TempDir()
	logout := func(t *testing.T, c *oauth.Credentials) string {
		t.Helper()
		out, err := toolgateCmd(t, dataDir, "auth", "logout", "remote", "--config", cfgPath).CombinedOutput()
		if err != nil {
			t.Errorf("auth logout: %v\n%s", err, out)
		}
		if _, err := os.Stat(oauth.NewStore(dataDir).Path("remote")); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("login file after logout: %v", err)
		}
		noToken(t, c, map[string]string{"auth logout's output": string(out)})
		if strings.Contains(string(out), c.Client.RegistrationToken) {
			t.Errorf("the registration access token is in the output:\n%s", out)
		}
		return strings.Join(strings.Fields(string(out)), " ")
	}

	t.Run("revoked", func(t *testing.T) {
		cliLogin(t, dataDir, cfgPath, "remote")
		c := storedCreds(t, dataDir, "remote")
		if !rs.TakesToken(t, c.Token.AccessToken) {
			t.Fatal("the server refuses the login's access token before the logout")
		}
		out := logout(t, c)
		for _, want := range []string{
			"Logged out of remote: removed " + oauth.NewStore(dataDir).Path("remote"),
			"Revoked at the authorization server " + as.URL + ": the refresh token and the access token (RFC 7009).",
			"Deleted there the client " + c.Client.ID + " toolgate registered (RFC 7592).",
		} {
			if !strings.Contains(out, want) {
				t.Errorf("auth logout says:\n%s\nwant %q", out, want)
			}
		}
		if strings.Contains(out, "NOT") || strings.Contains(out, "may honour") {
			t.Errorf("auth logout says something was not ended:\n%s", out)
		}
		if rs.TakesToken(t, c.Token.AccessToken) {
			t.Error("the server still takes the access token after the logout")
		}
		if got := as.DeletedClients(); !slices.Contains(got, c.Client.ID) {
			t.Errorf("deleted clients %v, want %q", got, c.Client.ID)
		}
	})

	t.Run("refused", func(t *testing.T) {
		cliLogin(t, dataDir, cfgPath, "remote")
		c := storedCreds(t, dataDir, "remote")
		c.Client.ID = "client-unknown"
		if err := oauth.NewStore(dataDir).Save(c); err != nil {
			t.Fatal(err)
		}
		out := logout(t, c)
		want := "NOT revoked at " + as.URL + ": the refresh token and the access token (it expires in "
		if !strings.Contains(out, want) || !strings.Contains(out, "the authorization server refused it: invalid_client") ||
			!strings.Contains(out, "Those tokens stay valid until they expire: to end them now, revoke toolgate's access at the authorization server") {
			t.Errorf("auth logout says:\n%s\nwant %q, invalid_client and what to do", out, want)
		}
	})

	t.Run("down", func(t *testing.T) {
		cliLogin(t, dataDir, cfgPath, "remote")
		c := storedCreds(t, dataDir, "remote")
		as.Stop()
		defer as.Start()
		out := logout(t, c)
		for _, want := range []string{
			"NOT revoked at " + as.URL + ": the refresh token and the access token (it expires in ",
			"its metadata could not be read: ",
			"NOT deleted at " + as.URL + ": the client " + c.Client.ID + " toolgate registered: no answer from " + as.URL + "/register/" + c.Client.ID + ": ",
			"Those tokens stay valid until they expire",
		} {
			if !strings.Contains(out, want) {
				t.Errorf("auth logout says:\n%s\nwant %q", out, want)
			}
		}
	})
}

// TestAuthLogoutDemoServer: the TypeScript SDK's example authorization
// server offers no revocation and no client management: `auth logout`
// removes the login and says that the access token was NOT revoked, nor
// the client deleted, and why, with exit status 0.
func TestAuthLogoutDemoServer(t *testing.T) {
	url := demoOAuthServer(t)
	cfgPath := remoteConfig(t, "demo", url)
	dataDir := t.TempDir()
	cliLogin(t, dataDir, cfgPath, "demo")
	c := storedCreds(t, dataDir, "demo")
	out, err := toolgateCmd(t, dataDir, "auth", "logout", "demo", "--config", cfgPath).CombinedOutput()
	if err != nil {
		t.Errorf("auth logout: %v\n%s", err, out)
	}
	said := strings.Join(strings.Fields(string(out)), " ")
	for _, want := range []string{
		"NOT revoked at " + c.Issuer + ": the access token (it expires in ",
		"it offers no token revocation (no revocation_endpoint in its metadata, RFC 7009).",
		"NOT deleted at " + c.Issuer + ": the client " + c.Client.ID + " toolgate registered: the authorization server gave no means to delete it",
		"That token stays valid until it expires: to end it now, revoke toolgate's access at the authorization server",
	} {
		if !strings.Contains(said, want) {
			t.Errorf("auth logout says:\n%s\nwant %q", out, want)
		}
	}
	noToken(t, c, map[string]string{"auth logout's output": string(out)})
}
