package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/toolgate/toolgate/gateway/backend/backendtest"
	"github.com/toolgate/toolgate/gateway/config"
	"github.com/toolgate/toolgate/internal/testenv"
	"github.com/toolgate/toolgate/internal/tlsfiles/tlstest"
)

// TestRemoteServerWithPrivateCA: a config whose remote server has a
// certificate from a private CA and asks for a client certificate, with
// its "tls" files next to the config: the gateway calls its tools,
// `auth status` reaches it, and the same server without "tls" is down
// with the fix in `toolgate status` and `auth status`.
func TestRemoteServerWithPrivateCA(t *testing.T) {
	dir := t.TempDir()
	certs := filepath.Join(dir, "certs")
	if err := os.Mkdir(certs, 0o700); err != nil {
		t.Fatal(err)
	}
	ca := tlstest.NewCA(t, "private CA")
	clients := tlstest.NewCA(t, "clients CA")
	client := clients.Issue(t, tlstest.Options{Client: true})
	tlstest.Write(t, certs, "ca.pem", ca.PEM)
	tlstest.Write(t, certs, "client.pem", client.CertPEM)
	tlstest.Write(t, certs, "client-key.pem", client.KeyPEM)
	srv := backendtest.NewHTTPSServer(t, config.TypeHTTP, backendtest.ModeNormal,
		tlstest.ServerConfig(ca.Issue(t, tlstest.Options{Names: []string{"127.0.0.1"}}), clients))
	cfg := filepath.Join(dir, "toolgate.json")
	doc := `{"mcpServers": {"untrusted": {"url": "` + srv.Endpoint + `"}},
		"toolgate": {"learn": {"enabled": false}, "restart": {"delays": []}}}`
	if err := os.WriteFile(cfg, []byte(doc), 0o600); err != nil {
		t.Fatal(err)
	}
	data := t.TempDir()
	// servers add takes the files as the shell names them (here relative
	// to the config's folder, the command's working directory).
	add := toolgateCmd(t, data, "servers", "add", "internal", "--config", cfg, "--url", srv.Endpoint,
		"--tls-ca", "certs/ca.pem", "--tls-cert", "certs/client.pem", "--tls-key", "certs/client-key.pem")
	add.Dir = dir
	if out, err := add.CombinedOutput(); err != nil {
		t.Fatalf("servers add --tls-…: %v\n%s", err, out)
	}
	out, stderr, err := runToolgate(t, data, "servers", "--config", cfg, "--json")
	if err != nil || !strings.Contains(out, `"tls": {`) || !strings.Contains(out, `"ca": "`+filepath.Join(certs, "ca.pem")+`"`) || !strings.Contains(out, `"key": "`+filepath.Join(certs, "client-key.pem")+`"`) {
		t.Errorf("servers --json: %v, want internal's tls files\n%s%s", err, out, stderr)
	}
	const fix = `give that CA's certificate, a PEM file, in the server's "tls": {"ca": "…"}`

	out, stderr, err = runToolgate(t, data, "auth", "status", "--config", cfg, "--json")
	var rep struct {
		Servers []struct{ Server, Auth, Detail string } `json:"servers"`
	}
	if json.Unmarshal([]byte(out), &rep) != nil || len(rep.Servers) != 2 {
		t.Fatalf("auth status --json: %v\n%s%s", err, out, stderr)
	}
	for _, s := range rep.Servers {
		switch {
		case s.Server == "internal" && s.Auth != authNone:
			t.Errorf("auth status: internal is %q (%s), want %q: it answers over mutual TLS", s.Auth, s.Detail, authNone)
		case s.Server == "untrusted" && (s.Auth != authUnknown || !strings.Contains(s.Detail, fix)):
			t.Errorf("auth status: untrusted is %q (%s), want %q with the fix", s.Auth, s.Detail, authUnknown)
		}
	}

	serve := toolgateCmd(t, data, "serve", "--config", cfg, "--mode", "bm25")
	serve.Stderr = testLog(t, "serve: ")
	ctx, cs := connectStdio(t, serve, 2*time.Minute)
	if res := callTool(t, ctx, cs, nil, "execute_tool", map[string]any{"name": "internal__echo", "arguments": map[string]any{"text": "over mutual TLS"}}); res.IsError || resultText(res) != "over mutual TLS" {
		t.Errorf("execute_tool internal__echo: %+v", res.Content)
	}
	testenv.Eventually(t, "untrusted down with the fix in `toolgate status`", func() bool {
		out, _, _ := runToolgate(t, data, "status", "--json")
		for _, rep := range decodeReports(t, out) {
			for _, b := range rep.Backends {
				if b.Name == "untrusted" {
					if b.State == "down" && !strings.Contains(b.Err, fix) {
						t.Fatalf("status: untrusted is down with %q, want the fix %q", b.Err, fix)
					}
					return b.State == "down"
				}
			}
		}
		return false
	})
}
