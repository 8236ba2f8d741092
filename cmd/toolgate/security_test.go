package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolgate/toolgate/gateway"
	"github.com/toolgate/toolgate/gateway/audit"
	"github.com/toolgate/toolgate/gateway/backend/backendtest"
	"github.com/toolgate/toolgate/gateway/config"
	"github.com/toolgate/toolgate/gateway/keys"
	"github.com/toolgate/toolgate/internal/dirs"
	"github.com/toolgate/toolgate/internal/testenv"
)

// fakeConfig writes a config of backendtest servers (name → modes) plus a
// toolgate section, and returns its path.
func fakeConfig(t *testing.T, servers map[string]string, settings map[string]any) string {
	t.Helper()
	m := map[string]any{}
	for name, modes := range servers {
		s := backendtest.Command(t, modes)
		m[name] = map[string]any{"command": s.Command, "env": s.Env}
	}
	doc := map[string]any{"mcpServers": m}
	if settings != nil {
		doc["toolgate"] = settings
	}
	b, err := json.MarshalIndent(doc, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "toolgate.json")
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// runToolgate runs a toolgate command to its end and returns its stdout,
// stderr and error.
func runToolgate(t *testing.T, dataDir string, args ...string) (string, string, error) {
	t.Helper()
	cmd := toolgateCmd(t, dataDir, args...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	return stdout.String(), stderr.String(), err
}

// createKey runs `toolgate keys create` and returns the secret: the last
// line, alone.
func createKey(t *testing.T, dataDir string, args ...string) string {
	t.Helper()
	out, stderr, err := runToolgate(t, dataDir, append([]string{"keys", "create"}, args...)...)
	if err != nil {
		t.Fatalf("keys create %v: %v\n%s", args, err, stderr)
	}
	lines := strings.Split(strings.TrimRight(out, "\n"), "\n")
	secret := lines[len(lines)-1]
	if !strings.HasPrefix(secret, keys.Prefix) || strings.Contains(secret, " ") {
		t.Fatalf("keys create: the last line %q is not the secret alone:\n%s", secret, out)
	}
	return secret
}

// startGateway starts `toolgate serve --http` on a free loopback address
// (bm25: no model needed) and returns the address and the gateway's
// stderr; the gateway stops when the test ends.
func startGateway(t *testing.T, dataDir, cfgPath string, extra ...string) (string, *testenv.LogBuffer) {
	t.Helper()
	addr, logs, _ := startGatewayStop(t, dataDir, cfgPath, extra...)
	return addr, logs
}

// startGatewayStop is startGateway that also returns stop, which interrupts
// the gateway and waits for it to exit (status 0), so a test can look at
// the data folder once nothing writes to it any more.
func startGatewayStop(t *testing.T, dataDir, cfgPath string, extra ...string) (addr string, logs *testenv.LogBuffer, stop func()) {
	t.Helper()
	addr = freeAddr(t)
	cmd := toolgateCmd(t, dataDir, append([]string{"serve", "--config", cfgPath, "--http", addr, "--mode", "bm25"}, extra...)...)
	logs = new(testenv.LogBuffer)
	cmd.Stderr = io.MultiWriter(logs, testLog(t, "toolgate: "))
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var once sync.Once
	var waitErr error
	wait := func() {
		once.Do(func() { _ = cmd.Process.Signal(os.Interrupt); waitErr = cmd.Wait() })
	}
	t.Cleanup(wait)
	waitHealthy(t, "http://"+addr+"/healthz", 2*time.Minute)
	return addr, logs, func() {
		t.Helper()
		wait()
		if waitErr != nil {
			t.Errorf("the gateway stopped with %v after an interrupt, want status 0", waitErr)
		}
	}
}

// bearerTransport adds an API key to every request.
type bearerTransport struct{ key string }

func (b bearerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.key)
	return http.DefaultTransport.RoundTrip(r)
}

// connectKey connects a go-sdk client over streamable HTTP with an API key
// ("" = none); the error is the connection's.
func connectKey(ctx context.Context, t *testing.T, addr, path, key, client string) (*mcp.ClientSession, error) {
	t.Helper()
	tr := &mcp.StreamableClientTransport{Endpoint: "http://" + addr + path}
	if key != "" {
		tr.HTTPClient = &http.Client{Transport: bearerTransport{key}}
	}
	cs, err := mcp.NewClient(&mcp.Implementation{Name: client}, nil).Connect(ctx, tr, nil)
	if err == nil {
		t.Cleanup(func() { cs.Close() })
	}
	return cs, err
}

// get sends GET url with an API key ("" = none).
func get(t *testing.T, url, key string) *http.Response {
	t.Helper()
	resp, _ := getBody(t, url, key)
	return resp
}

// getBody is get with the answer's body.
func getBody(t *testing.T, url, key string) (*http.Response, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	return doBody(t, req)
}

// doBody sends req and returns the answer with its body, read and closed.
func doBody(t *testing.T, req *http.Request) (*http.Response, string) {
	t.Helper()
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", req.Method, req.URL, err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	return resp, string(body)
}

// TestServeRefusesRemoteWithoutKeys: a non-loopback address without API
// keys exits non-zero with a message, before any backend starts, with or
// without --allow-remote; so does a loopback one whose key store cannot be
// read (fail closed).
func TestServeRefusesRemoteWithoutKeys(t *testing.T) {
	cfg := fakeConfig(t, map[string]string{"fake": ""}, nil)
	data := filepath.Join(t.TempDir(), "data folder")
	port := freePort(t)
	var create string
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--http", "0.0.0.0:" + port, "--allow-remote"}, "without API keys"},
		{[]string{"--http", "0.0.0.0:" + port}, "non-loopback"},
	} {
		_, stderr, err := runToolgate(t, data, append([]string{"serve", "--config", cfg}, tc.args...)...)
		if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() == 0 {
			t.Fatalf("serve %v: %v, want a non-zero exit\n%s", tc.args, err, stderr)
		}
		if !strings.Contains(stderr, tc.want) || strings.Contains(stderr, "gateway ready") {
			t.Errorf("serve %v said:\n%s\nwant %q, before starting", tc.args, stderr, tc.want)
		}
		if _, rest, ok := strings.Cut(stderr, "Create one with `"); ok && create == "" {
			create, _, _ = strings.Cut(rest, "`")
		}
	}
	// The command the refusal quotes creates the key where this gateway
	// looks, run as printed from a shell that does not name the folder.
	if want := "toolgate keys create --name NAME --data-dir '" + data + "'"; create != want {
		t.Fatalf("the refusal quotes %q, want %q", create, want)
	}
	sh := exec.Command("sh", "-c", `toolgate() { "$TG_BIN" "$@"; }; `+strings.Replace(create, "NAME", "first", 1))
	sh.Env = append(os.Environ(), "TG_BIN="+os.Args[0], "TOOLGATE_E2E_MAIN=1", "HOME="+t.TempDir(), "TOOLGATE_DATA_DIR=", "XDG_DATA_HOME=")
	if out, err := sh.CombinedOutput(); err != nil {
		t.Fatalf("%s: %v\n%s", create, err, out)
	}
	if out, _, err := runToolgate(t, data, "keys", "list"); err != nil || !strings.Contains(out, "first") {
		t.Errorf("keys list after the quoted command: %v\n%s", err, out)
	}
	// A damaged key file: no start, on loopback too.
	if err := os.WriteFile(dirs.Keys(data), []byte("not json\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	_, stderr, err := runToolgate(t, data, "serve", "--config", cfg, "--http", "127.0.0.1:"+port)
	if err == nil || !strings.Contains(stderr, "API key store cannot be read") {
		t.Errorf("serve with a damaged key file: %v\n%s", err, stderr)
	}
}

// TestServeRefusesConfigAddrRemote: the config's non-loopback
// toolgate.http.addr (README, HTTPS: "0.0.0.0:8931") without
// --allow-remote is refused first, naming the setting: it was refused for
// the API keys first, and once a key was made for --allow-remote, each
// refusal naming a --http flag never given.
func TestServeRefusesConfigAddrRemote(t *testing.T) {
	cfg := fakeConfig(t, map[string]string{"fake": ""}, nil)
	addr := "0.0.0.0:" + freePort(t)
	withSettings(t, cfg, map[string]any{"http": map[string]any{"addr": addr}})
	data := t.TempDir()
	for _, tc := range []struct {
		args []string
		want string
	}{
		{nil, "toolgate.http.addr \"" + addr + "\": refusing to listen on a non-loopback address; use 127.0.0.1:PORT, or pass --allow-remote"},
		{[]string{"--allow-remote"}, "toolgate.http.addr \"" + addr + "\": refusing to listen on a non-loopback address without API keys"},
	} {
		_, stderr, err := runToolgate(t, data, append([]string{"serve", "--config", cfg}, tc.args...)...)
		if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 1 || !strings.Contains(stderr, tc.want) || strings.Contains(stderr, "--http") {
			t.Errorf("serve %v: %v\n%s\nwant exit status 1 and %q", tc.args, err, stderr, tc.want)
		}
	}
}

// TestServeRemoteRefusalFitsConfig: the refusal of a non-loopback --http
// without --allow-remote names only what the gateway lacks: it advised to
// create API keys and to set toolgate.http.tls to a gateway with both.
func TestServeRemoteRefusalFitsConfig(t *testing.T) {
	addr := "0.0.0.0:" + freePort(t)
	plain := fakeConfig(t, map[string]string{"fake": ""}, nil)
	https, _, _ := httpsConfig(t, "")
	const keysMissing, tlsMissing = "it also needs API keys, toolgate keys create", "put TLS in front, or set toolgate.http.tls"
	noKeys, withKey := t.TempDir(), t.TempDir()
	createKey(t, withKey, "--name", "ops")
	for _, tc := range []struct {
		what, cfg, data string
		want            string
		not             []string
	}{
		{"neither", plain, noKeys, "(" + keysMissing + "; " + tlsMissing + ")", nil},
		{"keys", plain, withKey, "(" + tlsMissing + ")", []string{keysMissing}},
		{"TLS", https, noKeys, "(" + keysMissing + ")", []string{tlsMissing}},
		{"both", https, withKey, "(API keys and toolgate.http.tls are set: --allow-remote is all that is missing)", []string{keysMissing, tlsMissing}},
	} {
		_, stderr, err := runToolgate(t, tc.data, "serve", "--config", tc.cfg, "--http", addr)
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.ExitCode() != 2 || !strings.Contains(stderr, "pass --allow-remote if you really mean it "+tc.want) {
			t.Errorf("with %s: serve --http %s: %v\n%s\nwant exit status 2 and %q", tc.what, addr, err, stderr, tc.want)
		}
		for _, n := range tc.not {
			if strings.Contains(stderr, n) {
				t.Errorf("with %s: the refusal says %q, which the gateway has done", tc.what, n)
			}
		}
	}
}

// TestAPIKeysOverHTTP: once a key exists every route needs one (the
// probes /healthz and /readyz excepted; the console checks it itself: its login page comes
// with the 401) and answers 401 with a Bearer challenge without it or
// with a wrong, expired or revoked one; a key from toolgate.keysFile works
// too; a revoked key is refused at the next request; an unreadable
// keysFile shuts everyone out (503); refused requests are audited.
func TestAPIKeysOverHTTP(t *testing.T) {
	data := t.TempDir()
	shared := filepath.Join(t.TempDir(), "shared-keys.jsonl")
	cfg := fakeConfig(t, map[string]string{"fake": ""}, map[string]any{"keysFile": shared})
	// The shared file: a line printed by --print-hash (nothing stored in
	// the data folder), and an entry that expired.
	out, _, err := runToolgate(t, data, "keys", "create", "--name", "replica", "--print-hash")
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	replica := lines[len(lines)-1]
	expiredSecret, expired, err := keys.New(keys.Spec{Name: "old"}, time.Now().Add(-48*time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	expired.Expires = time.Now().Add(-time.Hour)
	if err := os.WriteFile(shared, append([]byte(lines[1]+"\n"), expired.Line()...), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(dirs.Keys(data)); !os.IsNotExist(err) {
		t.Fatalf("--print-hash stored a key in the data folder: %v", err)
	}
	admin := createKey(t, data, "--name", "admin", "--admin")
	ci := createKey(t, data, "--name", "ci", "--config", cfg)
	addr, logs := startGateway(t, data, cfg)
	base := "http://" + addr

	if r := get(t, base+"/healthz", ""); r.StatusCode != 200 {
		t.Errorf("loopback /healthz without a key: %s", r.Status)
	}
	for _, route := range []string{"/status", "/mcp", "/metrics", "/ui/", "/ui/api/state", "/nonexistent"} {
		for _, key := range []string{"", "tg_wrong", expiredSecret} {
			r := get(t, base+route, key)
			ch := r.Header.Get("WWW-Authenticate")
			if r.StatusCode != http.StatusUnauthorized || !strings.HasPrefix(ch, "Bearer ") {
				t.Errorf("GET %s with key %.6q: %s, WWW-Authenticate %q; want 401 with a Bearer challenge", route, key, r.Status, ch)
			}
			if key != "" && !strings.HasPrefix(route, "/ui/") && !strings.Contains(ch, `error="invalid_token"`) {
				t.Errorf("GET %s with a bad key: challenge %q lacks invalid_token", route, ch)
			}
		}
	}
	// The expired key's holder hears that it expired, on the front and
	// the console, and `toolgate status` says it of $TOOLGATE_KEY: all
	// three said "unknown, revoked or expired" (or "is not one of the
	// gateway's").
	for _, route := range []string{"/status", "/ui/api/state"} {
		resp, body := getBody(t, base+route, expiredSecret)
		if !strings.Contains(body, "the API key has expired: ask the gateway's operator for a key in force") {
			t.Errorf("GET %s with the expired key: %s %s", route, resp.Status, body)
		}
	}
	st := toolgateCmd(t, data, "status", "--addr", addr)
	st.Env = append(st.Env, "TOOLGATE_KEY="+expiredSecret)
	if out, err := st.CombinedOutput(); err == nil || !strings.Contains(string(out), "answered 401 Unauthorized: the key in $TOOLGATE_KEY has expired: ask the gateway's operator for a key in force, and put it in $TOOLGATE_KEY\n") {
		t.Errorf("status with the expired key: %v\n%s", err, out)
	}
	for _, key := range []string{admin, ci, replica} {
		for _, route := range []string{"/status", "/metrics", "/ui/"} {
			if r := get(t, base+route, key); r.StatusCode != 200 {
				t.Errorf("GET %s with a good key: %s", route, r.Status)
			}
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if _, err := connectKey(ctx, t, addr, "/mcp", "", "anon"); err == nil {
		t.Error("an MCP client without a key connected")
	}
	cs, err := connectKey(ctx, t, addr, "/mcp", ci, "keyed")
	if err != nil {
		t.Fatalf("connect with a key: %v", err)
	}
	if res := executeTool(t, ctx, cs, "fake__echo", map[string]any{"text": "hi"}); res.IsError || resultText(res) != "hi" {
		t.Fatalf("execute_tool with a key: %s", resultText(res))
	}

	// `toolgate status` takes the key from $TOOLGATE_KEY.
	if _, stderr, err := runToolgate(t, data, "status", "--addr", addr); err == nil || !strings.Contains(stderr, "TOOLGATE_KEY") {
		t.Errorf("status without a key: %v\n%s", err, stderr)
	}
	st = toolgateCmd(t, data, "status", "--addr", addr)
	st.Env = append(st.Env, "TOOLGATE_KEY="+admin)
	if out, err := st.CombinedOutput(); err != nil {
		t.Errorf("status with a key: %v\n%s", err, out)
	}
	// A key the gateway refuses is not a missing one: it said to put one
	// in $TOOLGATE_KEY, where the refused one was.
	st = toolgateCmd(t, data, "status", "--addr", addr)
	st.Env = append(st.Env, "TOOLGATE_KEY=tg_notakey")
	if out, err := st.CombinedOutput(); err == nil || !strings.Contains(string(out), "answered 401 Unauthorized: the key in $TOOLGATE_KEY is not one of the gateway's, or was revoked or has expired") {
		t.Errorf("status with a key the gateway refuses: %v\n%s", err, out)
	}

	// Revoked while running: refused from the next request on.
	if _, stderr, err := runToolgate(t, data, "keys", "revoke", "ci"); err != nil {
		t.Fatalf("keys revoke: %v\n%s", err, stderr)
	}
	if r := get(t, base+"/status", ci); r.StatusCode != http.StatusUnauthorized {
		t.Errorf("GET /status with the revoked key: %s", r.Status)
	}
	if res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: gateway.ExecuteToolName, Arguments: map[string]any{"name": "fake__echo", "arguments": map[string]any{"text": "again"}}}); err == nil && !res.IsError {
		t.Error("the session of a revoked key still runs tools")
	}
	// Created while running: good from the next request on.
	late := createKey(t, data, "--name", "late")
	if r := get(t, base+"/status", late); r.StatusCode != 200 {
		t.Errorf("GET /status with a key created while running: %s", r.Status)
	}
	if _, stderr, err := runToolgate(t, data, "keys", "revoke", "replica", "--config", cfg); err == nil || !strings.Contains(stderr, "keysFile") {
		t.Errorf("revoking a keysFile key: %v\n%s", err, stderr)
	}

	// The shared file disappears (a Secret unmounted): no one gets in.
	if err := os.Rename(shared, shared+".gone"); err != nil {
		t.Fatal(err)
	}
	if r := get(t, base+"/status", admin); r.StatusCode != http.StatusServiceUnavailable {
		t.Errorf("GET /status with keys that cannot be read: %s, want 503", r.Status)
	}
	// The line is what is tested here (it reaches the pipe after the
	// answer, hence the wait).
	if !testenv.Poll(testenv.Timeout, func() bool { return strings.Contains(logs.String(), "API key store cannot be read") }) {
		t.Errorf("no log line says why everyone is refused:\n%s", logs.String())
	}
	// `toolgate status` on the gateway's machine (its status socket, no
	// key) says so and exits 3: it said the gateway healthy, exit 0, while
	// the front refused every client.
	if out, stderr, err := runToolgate(t, data, "status"); exitCode(err) != degradedExit ||
		!strings.Contains(out, "API keys: CANNOT BE READ, so the HTTP front refuses every request (503): the API key store cannot be read: toolgate.keysFile: "+shared+" does not exist") ||
		!strings.Contains(stderr, "the API keys cannot be read (the HTTP front refuses every request)") {
		t.Errorf("status while the keys cannot be read: %v\n%s%s", err, out, stderr)
	}
	// A keysFile every user may write lets no one in either (anyone could
	// have added a key of their own), from the next request on.
	if err := os.Rename(shared+".gone", shared); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(shared, 0o666); err != nil {
		t.Fatal(err)
	}
	if resp, body := getBody(t, base+"/status", admin); resp.StatusCode != http.StatusServiceUnavailable {
		t.Errorf("GET /status with a keysFile every user may write: %s %s, want 503", resp.Status, body)
	}
	if out, _, err := runToolgate(t, data, "status", "--json"); exitCode(err) != degradedExit || !strings.Contains(out, "can be written by every user of this machine (mode 0666)") {
		t.Errorf("status --json with a keysFile every user may write: %v\n%s", err, out)
	}
	if err := os.Chmod(shared, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(shared, shared+".gone"); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(shared+".gone", shared); err != nil {
		t.Fatal(err)
	}
	if r := get(t, base+"/status", admin); r.StatusCode != 200 {
		t.Errorf("GET /status once the keys are back: %s", r.Status)
	}

	// Every refusal is in the audit log, no secret in any log.
	// The writer gathers records for a few milliseconds before it writes,
	// so wait for the ones looked for, not for a count.
	var sawExpired, sawUnavailable bool
	var recs []audit.Record
	if !testenv.Poll(testenv.Timeout, func() bool {
		recs = readAudit(t, data, audit.Filter{Tool: "http"})
		sawExpired = slices.ContainsFunc(recs, func(r audit.Record) bool { return r.Key == "old" && r.Status == 401 })
		sawUnavailable = slices.ContainsFunc(recs, func(r audit.Record) bool { return r.Status == 503 })
		return sawExpired && sawUnavailable
	}) {
		t.Errorf("audit lacks the expired key's 401 (%v) or the 503 (%v): %+v", sawExpired, sawUnavailable, recs)
	}
	for _, secret := range []string{admin, ci, replica, expiredSecret} {
		if strings.Contains(logs.String(), secret) {
			t.Error("a key's secret is in the gateway's log")
		}
	}
}

// auditRecords reads the data folder's audit log until ok holds for the
// records that pass f, and returns them.
func auditRecords(t *testing.T, dataDir string, f audit.Filter, ok func([]audit.Record) bool) []audit.Record {
	t.Helper()
	var recs []audit.Record
	testenv.Eventually(t, "the audit records", func() bool {
		recs = readAudit(t, dataDir, f)
		return ok(recs)
	})
	return recs
}

// readAudit reads the audit log's records that f lets through.
func readAudit(t *testing.T, dataDir string, f audit.Filter) []audit.Record {
	t.Helper()
	rd := audit.NewReader(dirs.Audit(dataDir), 0, f)
	defer rd.Close()
	recs, err := rd.Tail(0)
	if err != nil {
		t.Fatal(err)
	}
	return recs
}

// TestRevokedKeyNamed: a revoked key still sent is named in its audit
// record and its 401 says it was revoked, where both said "unknown API
// key" (key=-); `keys list` counts the revoked keys, --revoked lists them,
// and --json leaves them out unless asked.
func TestRevokedKeyNamed(t *testing.T) {
	data := t.TempDir()
	bob := createKey(t, data, "--name", "bob")
	createKey(t, data, "--name", "alice")
	addr, _ := startGateway(t, data, fakeConfig(t, map[string]string{"fake": ""}, nil))
	url := "http://" + addr + "/status"
	if r := get(t, url, bob); r.StatusCode != 200 {
		t.Fatalf("GET /status with bob's key: %s", r.Status)
	}
	if _, stderr, err := runToolgate(t, data, "keys", "revoke", "bob"); err != nil {
		t.Fatalf("keys revoke: %v\n%s", err, stderr)
	}
	if resp, body := getBody(t, url, bob); resp.StatusCode != 401 || !strings.HasPrefix(body, "Unauthorized: the API key was revoked at ") {
		t.Errorf("GET /status with bob's revoked key: %s %s, want 401 saying it was revoked", resp.Status, body)
	}
	// The console checks keys itself: a bearer, a login. Both say it was
	// revoked, as the front does, where they said "unknown, revoked or
	// expired".
	state, _ := http.NewRequest(http.MethodGet, "http://"+addr+"/ui/api/state", nil)
	state.Header.Set("Authorization", "Bearer "+bob)
	login, _ := http.NewRequest(http.MethodPost, "http://"+addr+"/ui/api/login", strings.NewReader(`{"key": "`+bob+`"}`))
	login.Header.Set("Origin", "http://"+addr)
	for _, req := range []*http.Request{state, login} { // in the audit records' order, below
		what := req.Method + " " + req.URL.Path
		resp, body := doBody(t, req)
		if resp.StatusCode != 401 || !regexp.MustCompile(`the API key was revoked at 20[-0-9T:]+Z: ask the gateway's operator for a key in force, and log in with it`).MatchString(body) {
			t.Errorf("%s with bob's revoked key: %s %s, want 401 saying it was revoked", what, resp.Status, body)
		}
	}
	// `toolgate status` with it says which key was refused, and why.
	st := toolgateCmd(t, data, "status", "--addr", addr)
	st.Env = append(st.Env, "TOOLGATE_KEY="+bob)
	if out, err := st.CombinedOutput(); err == nil || !regexp.MustCompile("answered 401 Unauthorized: the key in \\$TOOLGATE_KEY was revoked at 20[-0-9T:]+Z: ask the gateway's operator for a key in force, and put it in \\$TOOLGATE_KEY\n").Match(out) {
		t.Errorf("status with bob's revoked key: %v\n%s", err, out)
	}
	recs := auditRecords(t, data, audit.Filter{Tool: "http"}, func(rs []audit.Record) bool { return len(rs) >= 3 })
	for i, prefix := range []string{"the API key was revoked at ", "console: the API key was revoked at ", "console login: the API key was revoked at "} {
		if r := recs[i]; r.Key != "bob" || !strings.HasPrefix(r.Reason, prefix) || r.Status != 401 {
			t.Errorf("audit record %d of bob's revoked key: %+v, want key bob and %q…", i, r, prefix)
		}
	}
	out, _, err := runToolgate(t, data, "keys", "list")
	if err != nil || strings.Contains(out, "bob") || !strings.Contains(out, "1 revoked key, refused and kept only to name a client still sending one in the audit log: `toolgate keys list --revoked` lists them.") {
		t.Errorf("keys list: %v\n%s\nwant alice, and the count of revoked keys", err, out)
	}
	out, _, err = runToolgate(t, data, "keys", "list", "--revoked")
	if err != nil || !strings.Contains(out, "\nRevoked (refused; kept only to name a client still sending one in the audit log):\nNAME  REVOKED ") || !strings.Contains(out, "\nbob   20") {
		t.Errorf("keys list --revoked: %v\n%s\nwant bob among the revoked", err, out)
	}
	for _, tc := range []struct {
		args []string
		want string
	}{{nil, "alice"}, {[]string{"--revoked"}, "alice bob(revoked)"}} {
		out, _, err := runToolgate(t, data, append([]string{"keys", "list", "--json"}, tc.args...)...)
		var l []struct {
			Name    string
			Revoked time.Time
		}
		if err == nil {
			err = json.Unmarshal([]byte(out), &l)
		}
		var got []string
		for _, k := range l {
			if !k.Revoked.IsZero() {
				k.Name += "(revoked)"
			}
			got = append(got, k.Name)
		}
		if err != nil || strings.Join(got, " ") != tc.want {
			t.Errorf("keys list --json %v: %v, %v; want %s", tc.args, got, err, tc.want)
		}
	}
}

// TestAuditProfileAndRoute: an audit record says which route and profile
// a call came through — /mcp or /profiles/NAME/mcp (route, profile), the
// API key's profile (keyProfile), a stdio session's profile — and `audit
// tail` shows them and filters by profile (--profile). Nothing said it:
// the calls of /mcp and of a profile's route read alike.
func TestAuditProfileAndRoute(t *testing.T) {
	data := t.TempDir()
	cfg := fakeConfig(t, map[string]string{"fake": "", "other": ""}, map[string]any{"learn": map[string]any{"enabled": false},
		"profiles": map[string]any{"kg": map[string]any{"servers": []string{"fake"}}, "ops": map[string]any{"servers": []string{"other"}}}})
	wide := createKey(t, data, "--name", "wide")
	narrow := createKey(t, data, "--name", "narrow", "--profile", "ops", "--config", cfg)
	addr, _ := startGateway(t, data, cfg)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	for _, c := range []struct{ path, key, client string }{{"/mcp", wide, "plain"}, {"/profiles/kg/mcp", wide, "routed"}, {"/mcp", narrow, "keyed"}} {
		cs, err := connectKey(ctx, t, addr, c.path, c.key, c.client)
		if err != nil {
			t.Fatalf("connect to %s: %v", c.path, err)
		}
		if _, err := callSearch(ctx, cs, "echo", 1); err != nil {
			t.Fatalf("search_tools on %s: %v", c.path, err)
		}
	}
	stdio := toolgateCmd(t, data, "serve", "--config", cfg, "--mode", "bm25", "--profile", "ops")
	stdio.Stderr = testLog(t, "stdio: ")
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "local"}, nil).Connect(ctx, &mcp.CommandTransport{Command: stdio}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	if _, err := callSearch(ctx, cs, "echo", 1); err != nil {
		t.Fatalf("search_tools over stdio: %v", err)
	}
	recs := auditRecords(t, data, audit.Filter{Tool: "search_tools"}, func(rs []audit.Record) bool { return len(rs) == 4 })
	got := map[string]string{}
	for _, r := range recs {
		got[r.Client] = fmt.Sprintf("route=%q profile=%q keyProfile=%q", r.Route, r.Profile, r.KeyProfile)
	}
	// An HTTP client's record names its clientInfo and its User-Agent.
	want := map[string]string{
		"plain (Go-http-client/1.1)":  `route="POST /mcp" profile="" keyProfile=""`,
		"routed (Go-http-client/1.1)": `route="POST /profiles/kg/mcp" profile="kg" keyProfile=""`,
		"keyed (Go-http-client/1.1)":  `route="POST /mcp" profile="" keyProfile="ops"`,
		"local":                       `route="" profile="ops" keyProfile=""`,
	}
	if !maps.Equal(got, want) {
		t.Errorf("the records' routes and profiles by client:\n%v\nwant\n%v", got, want)
	}
	// audit tail shows them, and --profile keeps the calls limited to
	// one: by its route, its session or its key.
	out, _, err := runToolgate(t, data, "audit", "tail", "--tool", "search_tools", "--profile", "ops")
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if err != nil || len(lines) != 2 || !strings.Contains(lines[0], "key=narrow  search_tools  allowed  ok") ||
		!strings.Contains(out, "keyProfile=ops  client=keyed") || !strings.Contains(out, "profile=ops  client=local") {
		t.Errorf("audit tail --profile ops: %v\n%s\nwant the calls of the key limited to ops and of the stdio session in it", err, out)
	}
	out, _, err = runToolgate(t, data, "audit", "tail", "--tool", "search_tools", "--profile", "kg")
	if err != nil || strings.Count(out, "\n") != 1 || !strings.Contains(out, "key=wide  search_tools  POST /profiles/kg/mcp  allowed  ok") || !strings.Contains(out, "profile=kg  client=routed") {
		t.Errorf("audit tail --profile kg: %v\n%s\nwant the call through /profiles/kg/mcp", err, out)
	}
}

// TestRevokingLastKeyLocks: revoking the last key of a gateway on a
// loopback address leaves it needing a key (no one gets in, audited with
// why), where it used to serve everyone as if keys had never existed; a
// key created again lets its holder in, and `keys revoke` says what the
// last revocation does.
func TestRevokingLastKeyLocks(t *testing.T) {
	data := t.TempDir()
	cfg := fakeConfig(t, map[string]string{"fake": ""}, nil)
	key := createKey(t, data, "--name", "only")
	addr, _ := startGateway(t, data, cfg)
	base := "http://" + addr
	if r := get(t, base+"/status", key); r.StatusCode != 200 {
		t.Fatalf("GET /status with the key: %s", r.Status)
	}
	out, stderr, err := runToolgate(t, data, "keys", "revoke", "only")
	if err != nil || !strings.Contains(out, "That was the last API key") {
		t.Fatalf("keys revoke of the last key: %v\n%s%s", err, out, stderr)
	}
	for _, route := range []string{"/status", "/mcp", "/ui/api/state"} {
		for _, k := range []string{"", key} {
			if r := get(t, base+route, k); r.StatusCode != http.StatusUnauthorized {
				t.Errorf("GET %s with key %.6q after the last key was revoked: %s, want 401", route, k, r.Status)
			}
		}
	}
	auditRecords(t, data, audit.Filter{}, func(rs []audit.Record) bool {
		return slices.ContainsFunc(rs, func(r audit.Record) bool { return strings.HasPrefix(r.Reason, keys.ErrAllRevoked.Error()) })
	})
	again := createKey(t, data, "--name", "again")
	if r := get(t, base+"/status", again); r.StatusCode != 200 {
		t.Errorf("GET /status with a key created again: %s", r.Status)
	}
}

// TestRateLimitPerKey: a key over its burst gets 429 with Retry-After;
// another key is not affected.
func TestRateLimitPerKey(t *testing.T) {
	data := t.TempDir()
	cfg := fakeConfig(t, map[string]string{"fake": ""}, map[string]any{"limits": map[string]any{"requestsPerSecond": 0.01, "burst": 3}})
	a := createKey(t, data, "--name", "a")
	b := createKey(t, data, "--name", "b")
	addr, _ := startGateway(t, data, cfg)
	for i := range 3 {
		if r := get(t, "http://"+addr+"/status", a); r.StatusCode != 200 {
			t.Fatalf("request %d of the burst: %s", i+1, r.Status)
		}
	}
	r := get(t, "http://"+addr+"/status", a)
	if r.StatusCode != http.StatusTooManyRequests || r.Header.Get("Retry-After") == "" {
		t.Fatalf("over the burst: %s, Retry-After %q; want 429 with Retry-After", r.Status, r.Header.Get("Retry-After"))
	}
	if r := get(t, "http://"+addr+"/status", b); r.StatusCode != 200 {
		t.Errorf("another key: %s", r.Status)
	}
	// The request's record; keys create's of a names it too (managedKey).
	recs := auditRecords(t, data, audit.Filter{Key: "a", Decisions: []string{audit.RateLimited}}, func(rs []audit.Record) bool { return len(rs) >= 1 })
	if recs[0].Decision != audit.RateLimited || recs[0].Status != 429 {
		t.Errorf("audit of the refused request: %+v", recs[0])
	}
}

// TestInFlightCapEndToEnd: with two calls running on a backend (its cap),
// a third waits for the queue timeout and is refused as busy; another
// backend's calls are not held up.
func TestInFlightCapEndToEnd(t *testing.T) {
	data := t.TempDir()
	cfg := fakeConfig(t, map[string]string{"slow": backendtest.ModeHang, "other": ""},
		map[string]any{"limits": map[string]any{"maxInFlight": 2, "queueTimeout": "300ms"}})
	addr, _ := startGateway(t, data, cfg)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	hangCtx, stopHang := context.WithCancel(ctx)
	var wg sync.WaitGroup
	defer wg.Wait()
	defer stopHang()
	for range 2 {
		cs, err := connectKey(ctx, t, addr, "/mcp", "", "hang")
		if err != nil {
			t.Fatal(err)
		}
		wg.Go(func() {
			_, _ = cs.CallTool(hangCtx, &mcp.CallToolParams{Name: gateway.ExecuteToolName, Arguments: map[string]any{"name": "slow__hang"}})
		})
	}
	testenv.Eventually(t, "two calls in flight on slow", func() bool {
		for _, b := range getStatus(t, addr).Backends {
			if b.Name == "slow" {
				return b.InFlight == 2
			}
		}
		return false
	})
	cs, err := connectKey(ctx, t, addr, "/mcp", "", "third")
	if err != nil {
		t.Fatal(err)
	}
	if res := executeTool(t, ctx, cs, "other__echo", map[string]any{"text": "free"}); res.IsError || resultText(res) != "free" {
		t.Errorf("another backend while slow is full: %s", resultText(res))
	}
	res := executeTool(t, ctx, cs, "slow__echo", map[string]any{"text": "x"})
	if !res.IsError || !strings.Contains(resultText(res), "busy") {
		t.Errorf("a third call on slow: %s, want an isError saying the backend is busy", resultText(res))
	}
	recs := auditRecords(t, data, audit.Filter{Tool: "slow__echo"}, func(rs []audit.Record) bool { return len(rs) == 1 })
	if recs[0].Outcome != audit.Down || !strings.Contains(recs[0].Reason, "busy") {
		t.Errorf("audit of the busy call: %+v", recs[0])
	}
}

// TestAuditConcurrentSessions: 64 sessions calling at once each leave their
// record, with the SHA-256 of their arguments and never their values.
func TestAuditConcurrentSessions(t *testing.T) {
	data := t.TempDir()
	// 64 sessions at once are some 200 requests: more than a key's
	// default burst.
	cfg := fakeConfig(t, map[string]string{"fake": ""}, map[string]any{"limits": map[string]any{"requestsPerSecond": 1000, "burst": 1000}})
	key := createKey(t, data, "--name", "load")
	addr, _ := startGateway(t, data, cfg)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	const sessions = 64
	var wg sync.WaitGroup
	errs := make(chan error, sessions)
	for i := range sessions {
		wg.Go(func() {
			cs, err := connectKey(ctx, t, addr, "/mcp", key, fmt.Sprintf("client-%02d", i))
			if err != nil {
				errs <- err
				return
			}
			text := fmt.Sprintf("session-%02d-value", i)
			res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: gateway.ExecuteToolName, Arguments: map[string]any{"name": "fake__echo", "arguments": map[string]any{"text": text}}})
			if err == nil && (res.IsError || resultText(res) != text) {
				err = fmt.Errorf("session %d: %s", i, resultText(res))
			}
			if err != nil {
				errs <- err
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	recs := auditRecords(t, data, audit.Filter{Tool: "fake__echo"}, func(rs []audit.Record) bool { return len(rs) >= sessions })
	want := map[string]bool{}
	for i := range sessions {
		want[audit.HashArguments(map[string]any{"text": fmt.Sprintf("session-%02d-value", i)})] = true
	}
	for _, r := range recs {
		if r.Key != "load" || r.Decision != audit.Allowed || r.Outcome != audit.OK || r.Transport != "http" || !strings.HasPrefix(r.Client, "client-") || r.Arguments != nil {
			t.Errorf("record %+v", r)
		}
		if !want[r.ArgumentsSHA256] {
			t.Errorf("unexpected or repeated arguments hash %s", r.ArgumentsSHA256)
		}
		delete(want, r.ArgumentsSHA256)
	}
	if len(recs) != sessions || len(want) != 0 {
		t.Errorf("%d records, %d sessions missing", len(recs), len(want))
	}
	// GET /status counts them.
	req, _ := http.NewRequest(http.MethodGet, "http://"+addr+"/status", nil)
	req.Header.Set("Authorization", "Bearer "+key)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	var rep gateway.StatusReport
	err = json.NewDecoder(resp.Body).Decode(&rep)
	resp.Body.Close()
	if err != nil || rep.Security == nil || rep.Security.Audit.Written < sessions || rep.Security.Audit.Dropped != 0 || len(rep.Security.Quarantined) != 0 {
		t.Errorf("GET /status security: %+v, %v", rep.Security, err)
	}
	b, err := os.ReadFile(dirs.Audit(data))
	if err != nil || bytes.Contains(b, []byte("session-00-value")) {
		t.Errorf("the audit file holds an argument's value (%v)", err)
	}

	// audit tail: filters, -n, --json, and -f following new records.
	out, stderr, err := runToolgate(t, data, "audit", "tail", "--key", "load", "--tool", "fake__echo", "-n", "0", "--json")
	if err != nil || strings.Count(out, "\n") != sessions {
		t.Errorf("audit tail --json: %v, %d lines\n%s", err, strings.Count(out, "\n"), stderr)
	}
	out, _, err = runToolgate(t, data, "audit", "tail", "--tool", "fake__echo", "-n", "2")
	if err != nil || strings.Count(out, "\n") != 2 || !strings.Contains(out, "key=load  execute_tool  fake__echo  allowed  ok") {
		t.Errorf("audit tail -n 2: %v\n%s", err, out)
	}
	follow := toolgateCmd(t, data, "audit", "tail", "-f", "-n", "0", "--tool", "fake__add")
	var followed, followErr testenv.LogBuffer
	follow.Stdout, follow.Stderr = &followed, &followErr
	defer func() {
		if t.Failed() {
			t.Logf("audit tail -f stderr: %s", followErr.String())
		}
	}()
	if err := follow.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = follow.Process.Kill(); _ = follow.Wait() }()
	cs, err := connectKey(ctx, t, addr, "/mcp", key, "follower")
	if err != nil {
		t.Fatal(err)
	}
	// Calls until one is followed: tail -f starts at the end of the log as
	// it finds it, which may be after the first call.
	testenv.Eventually(t, "audit tail -f printing a new call", func() bool {
		executeTool(t, ctx, cs, "fake__add", map[string]any{"a": 1, "b": 2})
		return strings.Contains(followed.String(), "execute_tool  fake__add")
	})
}

// TestAuditMaskedArguments: with audit.arguments "masked" the record keeps
// the arguments with secrets masked.
func TestAuditMaskedArguments(t *testing.T) {
	data := t.TempDir()
	fake := backendtest.Command(t, "")
	cfgPath := filepath.Join(t.TempDir(), "toolgate.json")
	doc := map[string]any{
		"mcpServers": map[string]any{"fake": map[string]any{"command": fake.Command, "env": mergeEnv(fake.Env, map[string]string{"FAKE_TOKEN": "configured-secret-123"})}},
		"toolgate":   map[string]any{"audit": map[string]any{"arguments": "masked"}},
	}
	b, _ := json.Marshal(doc)
	if err := os.WriteFile(cfgPath, b, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := config.Load(cfgPath); err != nil {
		t.Fatal(err)
	}
	cmd := toolgateCmd(t, data, "serve", "--config", cfgPath, "--mode", "bm25")
	cmd.Stderr = testLog(t, "toolgate: ")
	ctx, cs := connectStdio(t, cmd, 2*time.Minute)
	text := "use configured-secret-123 with token=abcdefgh please"
	if res := executeTool(t, ctx, cs, "fake__echo", map[string]any{"text": text}); res.IsError {
		t.Fatal(resultText(res))
	}
	cs.Close()
	recs := auditRecords(t, data, audit.Filter{Tool: "fake__echo"}, func(rs []audit.Record) bool { return len(rs) == 1 })
	args, _ := json.Marshal(recs[0].Arguments)
	if want := `{"text":"use *** with token=*** please"}`; string(args) != want {
		t.Errorf("masked arguments %s, want %s", args, want)
	}
	if recs[0].Transport != "stdio" || recs[0].Client != "e2e" || !strings.HasPrefix(recs[0].Session, "stdio-") || recs[0].ArgumentsSHA256 != audit.HashArguments(map[string]any{"text": text}) {
		t.Errorf("record %+v", recs[0])
	}
}

func mergeEnv(a, b map[string]string) map[string]string {
	out := map[string]string{}
	for k, v := range a {
		out[k] = v
	}
	for k, v := range b {
		out[k] = v
	}
	return out
}

// TestKeysCreateProfileNotChecked: keys create --profile without a config
// to check it against says so on stderr (a misspelt profile makes a key that
// reaches no tool, found out only at its first request); the key is created
// all the same (exit 0). With --config, a profile there passes without it.
func TestKeysCreateProfileNotChecked(t *testing.T) {
	t.Setenv("TOOLGATE_CONFIG", "")
	data := t.TempDir()
	out, stderr, err := runToolgate(t, data, "keys", "create", "--name", "k", "--profile", "kgg")
	want := `note: --profile "kgg" was not checked: no config was given (--config FILE, or $TOOLGATE_CONFIG); a key whose profile the gateway's config lacks reaches no tool` + "\n"
	if err != nil || !strings.Contains(out, `Created API key "k"`) || !strings.Contains(stderr, want) {
		t.Errorf("keys create --profile without a config: %v\n%s%s\nwant on stderr %q", err, out, stderr, want)
	}
	cfg := filepath.Join(t.TempDir(), "toolgate.json")
	if err := os.WriteFile(cfg, []byte(`{"mcpServers": {}, "toolgate": {"profiles": {"kg": {}}}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	_, stderr, err = runToolgate(t, data, "keys", "create", "--name", "k2", "--profile", "kg", "--config", cfg)
	if err != nil || strings.Contains(stderr, "not checked") {
		t.Errorf("keys create --profile --config: %v\n%s", err, stderr)
	}
	// Without --config, against the config of the gateway running on the
	// data folder, as the auth commands read it.
	startGateway(t, data, cfg)
	_, stderr, err = runToolgate(t, data, "keys", "create", "--name", "k3", "--profile", "kgg")
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 2 || !strings.Contains(stderr, `--profile "kgg": `+cfg+` has no such profile in toolgate.profiles (profiles: kg)`) {
		t.Errorf("keys create --profile kgg, a gateway running: %v\n%s", err, stderr)
	}
	if _, stderr, err = runToolgate(t, data, "keys", "create", "--name", "k3", "--profile", "kg"); err != nil || strings.Contains(stderr, "not checked") {
		t.Errorf("keys create --profile kg, a gateway running: %v\n%s", err, stderr)
	}
}

// TestKeysWithoutProfile: an edit that removes (or renames) a profile API
// keys are limited to leaves them reaching no tool; their callers were told
// (search_tools), the operator was not. GET /status lists them to an admin
// (security.keysWithoutProfile), toolgate status prints them with the fix,
// and a key that is not admin sees none of it (other keys' names).
func TestKeysWithoutProfile(t *testing.T) {
	data := t.TempDir()
	cfg := writeConfig(t, `{"mcpServers": {}, "toolgate": {"profiles": {"kg": {}}}}`)
	admin := createKey(t, data, "--name", "admin", "--admin")
	createKey(t, data, "--name", "alice", "--profile", "kg", "--config", cfg)
	createKey(t, data, "--name", "carol", "--profile", "kg", "--config", cfg, "--expires", "2099-01-01")
	scoped := createKey(t, data, "--name", "bob", "--allow", "x__*")
	addr, _ := startGateway(t, data, cfg)
	statusAs := func(key string) gateway.StatusReport {
		t.Helper()
		req, _ := http.NewRequest(http.MethodGet, "http://"+addr+"/status", nil)
		req.Header.Set("Authorization", "Bearer "+key)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var rep gateway.StatusReport
		if err := json.NewDecoder(resp.Body).Decode(&rep); err != nil {
			t.Fatal(err)
		}
		return rep
	}
	if rep := statusAs(admin); rep.Security == nil || len(rep.Security.KeysWithoutProfile) != 0 {
		t.Fatalf("security before the edit: %+v", rep.Security)
	}
	if err := os.WriteFile(cfg, []byte(`{"mcpServers": {}, "toolgate": {"profiles": {"readers": {}}}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	var rep gateway.StatusReport
	testenv.Eventually(t, "the reload applied", func() bool {
		rep = statusAs(admin)
		return rep.Stats != nil && rep.ReloadGeneration >= 1
	})
	want := []gateway.KeyProfile{{Key: "alice", Profile: "kg"}, {Key: "carol", Profile: "kg"}}
	if !reflect.DeepEqual(rep.Security.KeysWithoutProfile, want) {
		t.Errorf("keysWithoutProfile = %+v, want %+v", rep.Security.KeysWithoutProfile, want)
	}
	if rep := statusAs(scoped); rep.Security == nil || rep.Security.KeysWithoutProfile != nil {
		t.Errorf("a key that is not admin sees %+v", rep.Security)
	}
	cmd := toolgateCmd(t, data, "status", "--addr", addr)
	cmd.Env = append(cmd.Env, "TOOLGATE_KEY="+admin)
	out, _ := cmd.Output()
	if want := `API keys that reach no tool, their profile not in the config: alice (profile "kg"), carol (profile "kg")` + "\n  fix: put the profile back in toolgate.profiles"; !strings.Contains(string(out), want) {
		t.Errorf("toolgate status:\n%s\nwant %q", out, want)
	}
}

// TestKeysCreateWarnsOfUnmatchedGlobs: a --deny or --allow glob that
// matches no tool of the data folder's index (a typo, the wrong case) is
// named on stderr with the tools and servers it could have meant; the key
// is created all the same (exit 0). Without an index, keys create says the
// globs were not checked. (A misspelt --deny left every tool allowed
// without a word.)
func TestKeysCreateWarnsOfUnmatchedGlobs(t *testing.T) {
	data := t.TempDir()
	out, stderr, err := runToolgate(t, data, "keys", "create", "--name", "early", "--deny", "Srv1__*")
	if err != nil || !strings.Contains(stderr, "note: the --allow and --deny globs were not checked: the data folder "+data+" has no index yet") {
		t.Errorf("keys create without an index: %v\n%s%s", err, out, stderr)
	}
	if out, err := toolgateCmd(t, data, "index", "--tools", writeToolsFile(t, t.TempDir(), 3, ""), "--bm25-only").CombinedOutput(); err != nil {
		t.Fatalf("index: %v\n%s", err, out)
	}
	out, stderr, err = runToolgate(t, data, "keys", "create", "--name", "ops", "--deny", "Srv1__*", "--deny", "srv0__list_file_0", "--deny", "srv2__*", "--allow", "srv*__*")
	if err != nil || !strings.Contains(out, `Created API key "ops"`) {
		t.Fatalf("keys create: %v\n%s%s", err, out, stderr)
	}
	for _, want := range []string{
		`warning: --deny "Srv1__*" matches no tool of the index (4 tools): it denies none of the index's tools (did you mean srv1__*? globs are case-sensitive); the key is created all the same` + "\n",
		`warning: --deny "srv0__list_file_0" matches no tool of the index (4 tools): it denies none of the index's tools (did you mean srv0__list_files_0`,
	} {
		if !strings.Contains(stderr, want) {
			t.Errorf("keys create: stderr lacks %q:\n%s", want, stderr)
		}
	}
	if strings.Contains(stderr, `"srv2__*"`) || strings.Contains(stderr, `"srv*__*"`) || strings.Count(stderr, "warning:") != 2 {
		t.Errorf("keys create warns of globs that match:\n%s", stderr)
	}
	_, stderr, err = runToolgate(t, data, "keys", "create", "--name", "narrow", "--allow", "srv3__*")
	if err != nil || !strings.Contains(stderr, `warning: --allow "srv3__*" matches no tool of the index (4 tools): it lets none of the index's tools through`) {
		t.Errorf("keys create --allow of no tool: %v\n%s", err, stderr)
	}
	// Several globs in one value, comma-separated (as --decision takes
	// several): each a glob of its own. It was one glob, "srv0__*,srv1__*",
	// which matched no tool, and keys list showed it as the two.
	_, stderr, err = runToolgate(t, data, "keys", "create", "--name", "two", "--allow", "srv0__*, srv1__*", "--deny", "srv1__[l,x]*,")
	if err != nil || strings.Contains(stderr, "warning:") {
		t.Errorf("keys create --allow 'srv0__*, srv1__*': %v\n%s", err, stderr)
	}
	out, stderr, err = runToolgate(t, data, "keys", "list", "--json")
	if err != nil {
		t.Fatalf("keys list --json: %v\n%s", err, stderr)
	}
	var listed []struct {
		Name        string
		Allow, Deny []string
	}
	if err := json.Unmarshal([]byte(out), &listed); err != nil {
		t.Fatalf("keys list --json: %v\n%s", err, out)
	}
	if !slices.ContainsFunc(listed, func(k struct {
		Name        string
		Allow, Deny []string
	}) bool {
		return k.Name == "two"
	}) {
		t.Errorf("keys list --json lacks key two:\n%s", out)
	}
	for _, k := range listed {
		if k.Name == "two" && (!slices.Equal(k.Allow, []string{"srv0__*", "srv1__*"}) || !slices.Equal(k.Deny, []string{"srv1__[l,x]*"})) {
			t.Errorf("key two: allow %q deny %q, want [srv0__* srv1__*] and [srv1__[l,x]*]", k.Allow, k.Deny)
		}
	}
}

// TestKeysExpiringSaid: the API keys in force that expire within 14 days
// (as a certificate due for renewal) and those that expired and were
// never revoked are said to an admin — GET /status's
// security.keysExpiring, toolgate status with the rotation to do, the
// console's warnings — and to no other key. A key's expiry cut its clients
// off unannounced: only `keys list` showed the date.
func TestKeysExpiringSaid(t *testing.T) {
	data := t.TempDir()
	shared := filepath.Join(t.TempDir(), "shared-keys.jsonl")
	_, expired, err := keys.New(keys.Spec{Name: "old"}, time.Now().Add(-48*time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	expired.Expires = time.Now().Add(-time.Hour)
	if err := os.WriteFile(shared, expired.Line(), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg := fakeConfig(t, map[string]string{"fake": ""}, map[string]any{"keysFile": shared})
	admin := createKey(t, data, "--name", "admin", "--admin")
	erin := createKey(t, data, "--name", "erin", "--expires", "3d")
	createKey(t, data, "--name", "far", "--expires", "90d")
	addr, _ := startGateway(t, data, cfg)
	stateAs := func(path, key string, v any) {
		t.Helper()
		req, _ := http.NewRequest(http.MethodGet, "http://"+addr+path, nil)
		req.Header.Set("Authorization", "Bearer "+key)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		if err := json.NewDecoder(resp.Body).Decode(v); err != nil {
			t.Fatalf("GET %s: %s: %v", path, resp.Status, err)
		}
	}
	var rep gateway.StatusReport
	stateAs("/status", admin, &rep)
	if rep.Security == nil || len(rep.Security.KeysExpiring) != 2 || rep.Security.KeysExpiring[0].Key != "erin" || rep.Security.KeysExpiring[1].Key != "old" {
		t.Fatalf("security.keysExpiring to an admin: %+v, want erin (in 3 days), then old (expired)", rep.Security)
	}
	var other gateway.StatusReport
	stateAs("/status", erin, &other)
	if other.Security == nil || other.Security.KeysExpiring != nil {
		t.Errorf("a key that is not admin sees keysExpiring %+v", other.Security)
	}
	var st struct{ Warnings []string }
	stateAs("/ui/api/state", admin, &st)
	if !slices.ContainsFunc(st.Warnings, func(w string) bool { return strings.HasPrefix(w, "API key erin expires at ") }) ||
		!slices.ContainsFunc(st.Warnings, func(w string) bool { return strings.HasPrefix(w, "API key old EXPIRED at ") }) {
		t.Errorf("the console's warnings: %q, want erin's and old's", st.Warnings)
	}
	cmd := toolgateCmd(t, data, "status", "--addr", addr)
	cmd.Env = append(cmd.Env, "TOOLGATE_KEY="+admin)
	out, _ := cmd.Output()
	for _, want := range []string{"API key erin expires at ", ", in 3 days: rotate it", "API key old EXPIRED at ", "  fix: rotate a key: toolgate keys create --name NEW", "; or extend it, its secret kept: toolgate keys update NAME --expires 90d"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("toolgate status lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(string(out), "API key far") || strings.Contains(string(out), "API key admin") {
		t.Errorf("toolgate status names a key far from its expiry:\n%s", out)
	}
}

// TestServeWarnsOfConfigOthersMayWrite: serve warns of a config file that
// every user of the machine may change (it runs the commands its servers
// name, and reads it again when it changes), with the chmod that closes
// it; it said nothing. A config of the owner's alone gets no warning.
func TestServeWarnsOfConfigOthersMayWrite(t *testing.T) {
	open := fakeConfig(t, map[string]string{"fake": ""}, nil)
	if err := os.Chmod(open, 0o666); err != nil {
		t.Fatal(err)
	}
	owned := fakeConfig(t, map[string]string{"other": ""}, nil)
	_, logs, stop := startGatewayStop(t, t.TempDir(), open, "--config", owned)
	stop() // its log is whole once it has exited
	want := "the config file can be written by every user of this machine (mode 0666): anyone could add a server, whose command the gateway runs as this user"
	if !strings.Contains(logs.String(), want) || !strings.Contains(logs.String(), "fix=\"chmod o-w "+open+"\"") {
		t.Errorf("no warning of the config every user may write (%s):\n%s", want, logs.String())
	}
	if strings.Contains(logs.String(), "config="+owned) {
		t.Errorf("a warning of the config of the owner's alone:\n%s", logs.String())
	}
}

// TestKeysUpdateKeepsSecret: a person who changes team gets the new
// team's profile with `toolgate keys update NAME --profile P`, the secret
// unchanged: a running gateway applies the new scope from the next
// request of the same client, the change is audited with the scope before
// and after, and a profile the config lacks, no change given or a name
// that is no key is a usage error that says what to do. There was no way
// but a new key, whose secret had to reach the person again.
func TestKeysUpdateKeepsSecret(t *testing.T) {
	data := t.TempDir()
	cfg := fakeConfig(t, map[string]string{"a": backendtest.ModeNormal, "b": backendtest.ModeNormal},
		map[string]any{"profiles": map[string]any{"team-a": map[string]any{"servers": []string{"a"}}, "team-b": map[string]any{"servers": []string{"b"}}}})
	key := createKey(t, data, "--name", "carol", "--profile", "team-a", "--config", cfg)
	addr, _ := startGateway(t, data, cfg)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cs, err := connectKey(ctx, t, addr, "/mcp", key, "carol")
	if err != nil {
		t.Fatal(err)
	}
	runs := func(tool string) bool {
		t.Helper()
		return !executeTool(t, ctx, cs, tool, map[string]any{"text": "hi"}).IsError
	}
	if !runs("a__echo") || runs("b__echo") {
		t.Fatalf("before the update the key of profile team-a ran a__echo %v and b__echo %v, want only a's", runs("a__echo"), runs("b__echo"))
	}
	for _, bad := range []struct {
		args []string
		want string
	}{
		{[]string{"carol"}, "keys update carol: give what to change: --profile, --allow, --deny, --expires or --admin"},
		{[]string{"carol", "--profile", "team-c"}, `--profile "team-c": ` + cfg + " has no such profile in toolgate.profiles (profiles: team-a, team-b)"},
		{[]string{"dave", "--profile", "team-b"}, `no such key named "dave" in ` + dirs.Keys(data)},
	} {
		out, stderr, err := runToolgate(t, data, append(append([]string{"keys", "update"}, bad.args...), "--config", cfg)...)
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.ExitCode() != 2 || !strings.Contains(stderr, bad.want) {
			t.Errorf("keys update %v: %v\n%s%s\nwant exit status 2 saying %q", bad.args, err, out, stderr, bad.want)
		}
	}
	out, stderr, err := runToolgate(t, data, "keys", "update", "carol", "--profile", "team-b", "--config", cfg)
	if err != nil || !strings.Contains(out, `Updated API key "carol": profile team-b; never expires (was: profile team-a; never expires).`) {
		t.Fatalf("keys update: %v\n%s%s", err, out, stderr)
	}
	if runs("a__echo") || !runs("b__echo") {
		t.Errorf("after the update the same secret ran a__echo %v and b__echo %v, want only b's", runs("a__echo"), runs("b__echo"))
	}
	out, _, err = runToolgate(t, data, "audit", "tail", "--tool", "keys update", "--json")
	var r audit.Record
	if err != nil || json.Unmarshal([]byte(out), &r) != nil || r.Reason != `key "carol": profile team-a; never expires → profile team-b; never expires` {
		t.Errorf("the update's audit record: %v %s", err, out)
	}
	// A glob that matches no tool is warned of, in an update's words.
	out, stderr, err = runToolgate(t, data, "keys", "update", "carol", "--deny", "B__*", "--config", cfg)
	if err != nil || !strings.Contains(stderr, `warning: --deny "B__*" matches no tool of the index`) || !strings.Contains(stderr, "the key is updated all the same") {
		t.Errorf("keys update with a glob that matches nothing: %v\n%s%s", err, out, stderr)
	}
}

// TestKeysUpdateLastAdminNoted: taking the admin right from the last
// admin key says what no key may then do over HTTP, and how to give it
// back; taking it from one of two says nothing of it. It went without a
// word.
func TestKeysUpdateLastAdminNoted(t *testing.T) {
	data := t.TempDir()
	createKey(t, data, "--name", "ops", "--admin")
	createKey(t, data, "--name", "ops2", "--admin")
	const note = "That was the last admin key: over HTTP no key may now add or remove servers"
	out, stderr, err := runToolgate(t, data, "keys", "update", "ops2", "--admin=false")
	if err != nil || strings.Contains(out, note) {
		t.Errorf("keys update ops2 --admin=false beside another admin key: %v\n%s%s", err, out, stderr)
	}
	out, stderr, err = runToolgate(t, data, "keys", "update", "ops", "--admin=false")
	if err != nil || !strings.Contains(out, note) || !strings.Contains(out, "`toolgate keys update NAME --admin=true` gives a key the right again") {
		t.Errorf("keys update of the last admin key --admin=false: %v\n%s%s\nwant the note %q", err, out, stderr, note)
	}
}

// TestKeysCreateRevokedNameNoted: a key created under the name of a
// revoked one (a leaked key replaced under the same name) is created, with
// a note that the audit log names both alike and how to keep them apart:
// `audit tail --key bob` mixed the leaked key's refusals with the new
// key's calls without a word.
func TestKeysCreateRevokedNameNoted(t *testing.T) {
	data := t.TempDir()
	createKey(t, data, "--name", "bob")
	if _, stderr, err := runToolgate(t, data, "keys", "revoke", "bob"); err != nil {
		t.Fatalf("keys revoke: %v\n%s", err, stderr)
	}
	out, stderr, err := runToolgate(t, data, "keys", "create", "--name", "bob")
	if err != nil || !strings.HasPrefix(lastLine(out), keys.Prefix) ||
		!strings.Contains(stderr, `note: a key named "bob" was revoked at `) || !strings.Contains(stderr, "a name of its own (e.g. bob-2) keeps them apart") {
		t.Errorf("keys create of a revoked key's name: %v\n%s%s", err, out, stderr)
	}
	if _, stderr, err := runToolgate(t, data, "keys", "create", "--name", "carol"); err != nil || strings.Contains(stderr, "was revoked") {
		t.Errorf("keys create of a new name: %v\n%s", err, stderr)
	}
}

func lastLine(s string) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	return lines[len(lines)-1]
}
