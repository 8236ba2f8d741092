package main

import (
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/toolgate/toolgate/gateway/backend/backendtest"
	"github.com/toolgate/toolgate/internal/testenv"
)

// TestServeNotifiesSystemd: under a systemd unit of Type=notify
// ($NOTIFY_SOCKET), serve --http says READY=1 once it answers (a unit
// ordered after it starts then, not while the index is built) and
// STOPPING=1 when a stop begins. Without it, Type=notify timed out and
// Type=simple called the gateway started before it answered anything.
func TestServeNotifiesSystemd(t *testing.T) {
	sock := filepath.Join(shortTempDir(t), "notify")
	conn, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: sock, Net: "unixgram"})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	msgs := make(chan string, 16)
	go func() {
		buf := make([]byte, 4096)
		for {
			n, err := conn.Read(buf)
			if err != nil {
				close(msgs)
				return
			}
			msgs <- string(buf[:n])
		}
	}()
	next := func(what string) string {
		t.Helper()
		select {
		case m, ok := <-msgs:
			if !ok {
				t.Fatalf("the notify socket closed before %s", what)
			}
			return m
		case <-time.After(3 * time.Minute):
			t.Fatalf("no notification %s", what)
		}
		return ""
	}

	cfg := fakeConfig(t, map[string]string{"fake": ""}, nil)
	addr := freeAddr(t)
	cmd := toolgateCmd(t, t.TempDir(), "serve", "--config", cfg, "--http", addr, "--mode", "bm25")
	cmd.Env = append(cmd.Env, "NOTIFY_SOCKET="+sock)
	var logs testenv.LogBuffer
	cmd.Stderr = &logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	ready := next("at start")
	if !strings.Contains(ready, "READY=1") || !strings.Contains(ready, "STATUS=serving ") {
		t.Fatalf("first notification %q, want READY=1 with a STATUS", ready)
	}
	// Ready means answered: no wait for the front.
	if r := get(t, "http://"+addr+"/healthz", ""); r.StatusCode != 200 {
		t.Errorf("GET /healthz after READY=1: %s, want 200", r.Status)
	}
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if m := next("at the stop"); !strings.Contains(m, "STOPPING=1") {
		t.Errorf("notification at the stop %q, want STOPPING=1", m)
	}
	if err := cmd.Wait(); err != nil {
		t.Errorf("serve stopped with %v, want status 0\n%s", err, logs.String())
	}
}

// TestHealthCommand: `toolgate health` is a container's health check
// without curl (HEALTHCHECK CMD ["toolgate","health","--ready"]): exit 0
// and the probe's answer when the gateway is alive (--ready: ready), 1
// with the answer or the failure in one line otherwise, 2 for a bad flag.
// No key is needed although the gateway has keys; --config gives the
// address (toolgate.http.addr). There was no such command: `status`
// needs a key at an address and exits 3 for a server down, which is no
// reason to restart a container.
func TestHealthCommand(t *testing.T) {
	data := t.TempDir()
	nobody := freeAddr(t)
	_, stderr, err := runToolgate(t, data, "health", "--addr", nobody)
	if code := exitCode(err); code != 1 || !strings.Contains(stderr, "no gateway answered at http://"+nobody+"/healthz: nothing listens at "+nobody+" (connection refused)") ||
		!strings.Contains(stderr, "toolgate serve --config FILE --http "+nobody) || strings.Contains(stderr, "dial tcp") {
		t.Errorf("health with nothing listening: exit %d, %q; want 1 saying nothing listens there and how to start a gateway", code, stderr)
	}
	// status says it in the same words.
	_, stderr, err = runToolgate(t, data, "status", "--addr", nobody)
	if code := exitCode(err); code != 1 || !strings.Contains(stderr, "no gateway answered at http://"+nobody+"/status: nothing listens at "+nobody+" (connection refused)") ||
		!strings.Contains(stderr, "toolgate serve --config FILE --http "+nobody) || strings.Contains(stderr, "dial tcp") {
		t.Errorf("status with nothing listening: exit %d, %q; want 1 saying nothing listens there and how to start a gateway", code, stderr)
	}
	if _, stderr, err := runToolgate(t, data, "health", "--addr", "nonsense"); exitCode(err) != 2 || !strings.Contains(stderr, `--addr "nonsense": want host:port`) {
		t.Errorf("health --addr nonsense: exit %d, %q; want 2", exitCode(err), stderr)
	}

	fake := backendtest.Command(t, backendtest.ModeNormal)
	gate := filepath.Join(t.TempDir(), "go")
	addr := freeAddr(t)
	b, err := json.Marshal(map[string]any{"mcpServers": map[string]any{"held": heldServer(fake, gate)}, "toolgate": map[string]any{"http": map[string]any{"addr": addr}}})
	if err != nil {
		t.Fatal(err)
	}
	cfg := writeConfig(t, string(b))
	createKey(t, data, "--name", "ci", "--config", cfg)
	serve := toolgateCmd(t, data, "serve", "--config", cfg, "--mode", "bm25") // at its toolgate.http.addr
	serve.Stderr = testLog(t, "toolgate: ")
	if err := serve.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = serve.Process.Signal(os.Interrupt); _ = serve.Wait() })
	waitHealthy(t, "http://"+addr+"/healthz", 2*time.Minute) // serving; the first index waits for the gate
	out, stderr, err := runToolgate(t, data, "health", "--addr", addr)
	if err != nil || out != "ok (http://"+addr+"/healthz)\n" {
		t.Errorf("health of a live gateway: %v, %q %q; want exit 0 and ok", err, out, stderr)
	}
	_, port, _ := net.SplitHostPort(addr)
	_, stderr, err = runToolgate(t, data, "health", "--addr", "0.0.0.0:"+port, "--ready")
	if code := exitCode(err); code != 1 || !strings.Contains(stderr, "not ready: the gateway is starting its servers to build the tool index") || !strings.Contains(stderr, "503 Service Unavailable from http://127.0.0.1:"+port+"/readyz") {
		t.Errorf("health --ready while the first index waits: exit %d, %q; want 1 with the reason", code, stderr)
	}
	if err := os.WriteFile(gate, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, "health --config --ready exits 0 once the index is built", func() bool {
		out, _, err := runToolgate(t, data, "health", "--config", cfg, "--ready")
		return err == nil && out == "ready (http://"+addr+"/readyz)\n"
	})
}

// TestHealthAnotherProgram: `toolgate health` at an address where another
// program answers (a port some other server took, a proxy's error page)
// says that the answer is no gateway's probe, with what its body says, and
// exits 1. It printed "toolgate: (401 Unauthorized from …/readyz)", an
// empty body taken for the gateway's words, or a 404 page's whole HTML;
// and `toolgate status` took such a 401 for the gateway asking for a key.
func TestHealthAnotherProgram(t *testing.T) {
	for _, tc := range []struct {
		name, contentType, body string
		status                  int
		want                    string
	}{
		{"401 with no body", "", "", http.StatusUnauthorized, "answered 401 Unauthorized with no text, which is not a toolgate gateway's probe"},
		{"404 page", "text/html", "<!DOCTYPE HTML>\n<html><head><title>Error response</title></head><body><h1>Error response</h1><p>Error code: 404</p></body></html>", http.StatusNotFound,
			`answered 404 Not Found ("Error response"), which is not a toolgate gateway's probe`},
		{"503 of a proxy", "text/plain", "no healthy upstream", http.StatusServiceUnavailable, `answered 503 Service Unavailable ("no healthy upstream"), which is not`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
				if tc.contentType != "" {
					w.Header().Set("Content-Type", tc.contentType)
				}
				w.WriteHeader(tc.status)
				_, _ = w.Write([]byte(tc.body))
			}))
			defer srv.Close()
			addr := strings.TrimPrefix(srv.URL, "http://")
			for _, args := range [][]string{{"health", "--addr", addr}, {"health", "--addr", addr, "--ready"}} {
				_, stderr, err := runToolgate(t, t.TempDir(), args...)
				if code := exitCode(err); code != 1 || !strings.Contains(stderr, tc.want) || !strings.Contains(stderr, "another program listens at "+addr) ||
					!strings.Contains(stderr, "toolgate status --addr "+addr) || strings.Contains(stderr, "<html") {
					t.Errorf("toolgate %s: exit %d, %q; want 1 saying %q and that another program answers", strings.Join(args, " "), code, stderr, tc.want)
				}
			}
			// status, which that message sends one to, says the same: a
			// 401 without the gateway's challenge is not the gateway
			// asking for a key (it said "put one in $TOOLGATE_KEY").
			_, stderr, err := runToolgate(t, t.TempDir(), "status", "--addr", addr)
			if code := exitCode(err); code != 1 || !strings.Contains(stderr, "is it a toolgate gateway serving /status? another program may listen at "+addr) ||
				strings.Contains(stderr, "TOOLGATE_KEY") || strings.Contains(stderr, "<html") {
				t.Errorf("toolgate status --addr %s: exit %d, %q; want 1 saying that another program may answer there", addr, code, stderr)
			}
		})
	}
}

// TestHealthAnotherProgramOK: another program that answers 200 at the
// address (a web server's welcome page, a proxy's catch-all, another
// service's "OK") is no gateway either: `toolgate health` printed the
// page's HTML as the gateway's word and exited 0, so a container's health
// check passed with no gateway behind the port; and `toolgate status` said
// "invalid character '<' looking for beginning of value".
func TestHealthAnotherProgramOK(t *testing.T) {
	for _, tc := range []struct{ name, contentType, body, want string }{
		{"a web server's page", "text/html", "<!DOCTYPE html>\n<html><head><title>Welcome to nginx!</title></head><body><h1>Welcome to nginx!</h1></body></html>",
			`answered 200 OK ("Welcome to nginx!"), which is not a toolgate gateway's probe`},
		{"another service's OK", "text/plain", "OK\n", `answered 200 OK ("OK"), which is not a toolgate gateway's probe`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
				w.Header().Set("Content-Type", tc.contentType)
				_, _ = w.Write([]byte(tc.body))
			}))
			defer srv.Close()
			addr := strings.TrimPrefix(srv.URL, "http://")
			for _, args := range [][]string{{"health", "--addr", addr}, {"health", "--addr", addr, "--ready"}} {
				stdout, stderr, err := runToolgate(t, t.TempDir(), args...)
				if code := exitCode(err); code != 1 || !strings.Contains(stderr, tc.want) || !strings.Contains(stderr, "another program listens at "+addr) ||
					strings.Contains(stderr+stdout, "<html") {
					t.Errorf("toolgate %s: exit %d, stdout %q, stderr %q; want 1 saying %q and that another program answers", strings.Join(args, " "), code, stdout, stderr, tc.want)
				}
			}
			_, stderr, err := runToolgate(t, t.TempDir(), "status", "--addr", addr)
			if code := exitCode(err); code != 1 || !strings.Contains(stderr, "is it a toolgate gateway serving /status? another program may listen at "+addr) ||
				strings.Contains(stderr, "invalid character") {
				t.Errorf("toolgate status --addr %s: exit %d, %q; want 1 saying that another program may answer there", addr, code, stderr)
			}
		})
	}
}

// exitCode is a command's exit status from its error (0 for nil, -1 when
// it did not run to an exit).
func exitCode(err error) int {
	if err == nil {
		return 0
	}
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return ee.ExitCode()
	}
	return -1
}

// TestServeWritesOnlyItsDataFolder: a container with a read-only root
// file system (Kubernetes readOnlyRootFilesystem) gives the gateway its
// data folder alone to write: HOME, the temp folder and the XDG folders
// are not writable, or not there. So serve --http, through a hybrid
// search (ONNX Runtime and the tokenizer run), a call and its stop,
// writes nothing in any of them: each is an empty folder of its own here,
// and stays empty.
func TestServeWritesOnlyItsDataFolder(t *testing.T) {
	elsewhere := t.TempDir()
	var env []string
	for _, v := range []string{"HOME", "TMPDIR", "XDG_CACHE_HOME", "XDG_CONFIG_HOME", "XDG_STATE_HOME", "XDG_DATA_HOME", "XDG_RUNTIME_DIR"} {
		dir := filepath.Join(elsewhere, v)
		if err := os.Mkdir(dir, 0o700); err != nil {
			t.Fatal(err)
		}
		env = append(env, v+"="+dir)
	}
	cfg := fakeConfig(t, map[string]string{"fake": backendtest.ModeNormal}, nil)
	addr := freeAddr(t)
	serve := toolgateCmd(t, t.TempDir(), "serve", "--config", cfg, "--http", addr)
	serve.Env = append(serve.Env, env...)
	g := startServe(t, serve, addr)
	ctx, cs := g.connect(t)
	indexServed(t, ctx, cs)
	if out, _ := searchTools(t, ctx, cs, "echo the given text back", 3); out.Mode != "hybrid" {
		testenv.Missing(t, "search_tools ran in mode %q, not hybrid: a native piece is missing", out.Mode)
	}
	if res := callTool(t, ctx, cs, nil, "execute_tool", map[string]any{"name": "fake__echo", "arguments": map[string]any{"text": "hi"}}); res.IsError {
		t.Fatalf("execute_tool fake__echo: %+v", res.Content)
	}
	cs.Close()
	g.signal(t, syscall.SIGTERM)
	if code, _ := g.waitExit(t, time.Now()); code != 0 {
		t.Errorf("serve exited %d after SIGTERM, want 0", code)
	}
	var written []string
	err := filepath.WalkDir(elsewhere, func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if rel, _ := filepath.Rel(elsewhere, path); strings.Contains(rel, string(filepath.Separator)) {
			written = append(written, rel)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(written) > 0 {
		t.Errorf("serve wrote outside its data folder: %s", strings.Join(written, ", "))
	}
}

// TestStatusPathNotStripped: a reverse proxy that keeps its path
// (`proxy_pass http://127.0.0.1:8931;`, no slash) passes /keep/status to
// the gateway, which answers 404 with the fix (have the proxy strip the
// prefix). `toolgate status --addr URL/keep` cut that answer at 120
// characters, before the fix, and added that another program may listen
// there, though the gateway itself had answered.
func TestStatusPathNotStripped(t *testing.T) {
	data := t.TempDir()
	addr, _ := startGateway(t, data, fakeConfig(t, map[string]string{"fake": backendtest.ModeNormal}, nil), noModelFlags(t)...)
	_, stderr, err := runToolgate(t, t.TempDir(), "status", "--addr", "http://"+addr+"/keep")
	want := "have it strip the prefix (nginx: `location /keep/ { proxy_pass http://HOST:PORT/; }`, the slash after the port strips it)"
	if code := exitCode(err); code != 1 || !strings.Contains(stderr, want) || strings.Contains(stderr, "another program may listen") {
		t.Errorf("toolgate status --addr http://%s/keep: exit %d, %q; want 1 with the gateway's fix %q, and not that another program may answer", addr, code, stderr, want)
	}
}

// TestHealthPathNotStripped: behind a proxy that keeps its path, a gateway
// with API keys (as the README asks behind a proxy) answered
// /keep/healthz 401 for want of a key, and `toolgate health --addr
// URL/keep` said another program listened there. The probes' paths under
// a prefix are as open as the probes, so the gateway's 404 with the fix
// (strip the prefix) reaches the probe, and health prints it.
func TestHealthPathNotStripped(t *testing.T) {
	data := t.TempDir()
	createKey(t, data, "--name", "ops", "--admin")
	addr, _ := startGateway(t, data, fakeConfig(t, map[string]string{"fake": backendtest.ModeNormal}, nil), noModelFlags(t)...)
	want := "have it strip the prefix (nginx: `location /keep/ { proxy_pass http://HOST:PORT/; }`, the slash after the port strips it)"
	for _, args := range [][]string{{"health", "--addr", "http://" + addr + "/keep"}, {"health", "--ready", "--addr", "http://" + addr + "/keep"}} {
		_, stderr, err := runToolgate(t, t.TempDir(), args...)
		if code := exitCode(err); code != 1 || !strings.Contains(stderr, want) || strings.Contains(stderr, "another program") {
			t.Errorf("toolgate %s: exit %d, %q; want 1 with the gateway's fix %q, and not that another program answers", strings.Join(args, " "), code, stderr, want)
		}
	}
	// A path under a prefix that is no probe's still needs the key.
	resp, err := http.Get("http://" + addr + "/keep/status")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("GET /keep/status without a key: %s, want 401", resp.Status)
	}
}
