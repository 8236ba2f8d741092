package config

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/toolgate/toolgate/internal/tlsfiles/tlstest"
)

// TestTLSEntry: a remote server's "tls" entry is read with its paths
// expanded and resolved against the config's folder, checked by reading
// the files as a connection would, and each problem names its field.
func TestTLSEntry(t *testing.T) {
	dir := t.TempDir()
	if err := os.Mkdir(filepath.Join(dir, "certs"), 0o700); err != nil {
		t.Fatal(err)
	}
	ca := tlstest.NewCA(t, "ca")
	client := ca.Issue(t, tlstest.Options{Client: true})
	tlstest.Write(t, filepath.Join(dir, "certs"), "ca.pem", ca.PEM)
	tlstest.Write(t, filepath.Join(dir, "certs"), "client.pem", client.CertPEM)
	keyDir := t.TempDir()
	tlstest.Write(t, keyDir, "client-key.pem", client.KeyPEM)
	path := filepath.Join(dir, "toolgate.json")

	f, err := Parse([]byte(`{"mcpServers": {"a": {"url": "https://mcp.internal/mcp",
		"tls": {"ca": "certs/ca.pem", "cert": "certs/client.pem", "key": "${KEYS}/client-key.pem"}}}}`), path, env("KEYS", keyDir))
	if err != nil {
		t.Fatal(err)
	}
	want := TLS{CA: filepath.Join(dir, "certs/ca.pem"), Cert: filepath.Join(dir, "certs/client.pem"), Key: filepath.Join(keyDir, "client-key.pem")}
	got := f.MCPServers["a"]
	if got.TLS == nil || *got.TLS != want {
		t.Fatalf("tls = %+v, want %+v", got.TLS, want)
	}
	if c, err := got.TLS.Client(); err != nil || c.RootCAs == nil || c.GetClientCertificate == nil {
		t.Errorf("Client: %v, want the CA and the client certificate", err)
	}
	other := got
	other.TLS = &TLS{CA: want.CA}
	if ch := got.Changes(other); !slices.Equal(ch, []string{"tls"}) {
		t.Errorf("Changes with another tls = %v, want [tls] (the server reconnects with it)", ch)
	}

	type problem struct{ where, says string }
	for _, tc := range []struct {
		name string
		in   string
		want []problem
	}{
		{"stdio", `{"command": "x", "tls": {"ca": "certs/ca.pem"}}`, []problem{{`mcpServers["a"].tls`, "only used by http and sse servers"}}},
		{"plain http", `{"url": "http://h/mcp", "tls": {"ca": "certs/ca.pem"}}`, []problem{{`mcpServers["a"].tls`, `applies to https only, but the url is "http://h/mcp"`}}},
		{"empty", `{"url": "https://h/mcp", "tls": {}}`, []problem{{`mcpServers["a"].tls`, `is empty: give "ca"`}}},
		{"missing file", `{"url": "https://h/mcp", "tls": {"ca": "certs/nope.pem"}}`, []problem{{`mcpServers["a"].tls.ca`, "cannot read " + filepath.Join(dir, "certs/nope.pem") + ": no such file or directory"}}},
		{"cert without key", `{"url": "https://h/mcp", "tls": {"cert": "certs/client.pem"}}`, []problem{{`mcpServers["a"].tls.key`, `"cert" needs its private key`}}},
		{"a key of ours misspelt", `{"url": "https://h/mcp", "tls": {"ca": "certs/ca.pem", "cerf": "x"}}`, []problem{{`mcpServers["a"].tls.cerf`, `did you mean "cert"?`}}},
		{"not an object", `{"url": "https://h/mcp", "tls": "certs/ca.pem"}`, []problem{{`mcpServers["a"].tls`, "got a string, want an object"}}},
	} {
		_, err := Parse([]byte(`{"mcpServers": {"a": `+tc.in+`}}`), path, nil)
		var e *Error
		if !errors.As(err, &e) || len(e.Errs) != len(tc.want) {
			t.Errorf("%s: %v, want %d problem(s)", tc.name, err, len(tc.want))
			continue
		}
		for i, w := range tc.want {
			if e.Errs[i].Where() != w.where || !strings.Contains(e.Errs[i].Msg, w.says) {
				t.Errorf("%s: %s: %s, want %s saying %q", tc.name, e.Errs[i].Where(), e.Errs[i].Msg, w.where, w.says)
			}
		}
	}
	// A disabled server is not started: its files are not read.
	if _, err := Parse([]byte(`{"mcpServers": {"a": {"url": "https://h/mcp", "disabled": true, "tls": {"ca": "certs/nope.pem"}}, "b": {"command": "x"}}}`), path, nil); err != nil {
		t.Errorf("disabled server with a missing CA file: %v", err)
	}
}

// TestFrontTLS: toolgate.http.tls is read with its paths resolved against
// the config's folder and checked by loading the certificate; a client CA
// (mutual TLS for the front's clients) is not a setting.
func TestFrontTLS(t *testing.T) {
	dir := t.TempDir()
	ca := tlstest.NewCA(t, "ca")
	leaf := ca.Issue(t, tlstest.Options{Names: []string{"gw.example"}})
	tlstest.Write(t, dir, "front.pem", leaf.CertPEM)
	tlstest.Write(t, dir, "front-key.pem", leaf.KeyPEM)
	other := ca.Issue(t, tlstest.Options{Names: []string{"gw.example"}})
	tlstest.Write(t, dir, "other-key.pem", other.KeyPEM)
	path := filepath.Join(dir, "toolgate.json")
	parse := func(tlsEntry string) (*File, error) {
		return Parse([]byte(`{"mcpServers": {"a": {"command": "x"}}, "toolgate": {"http": {"tls": `+tlsEntry+`}}}`), path, nil)
	}
	f, err := parse(`{"cert": "front.pem", "key": "front-key.pem"}`)
	if err != nil {
		t.Fatal(err)
	}
	if got := f.Toolgate.HTTP.TLS; got == nil || got.Cert != filepath.Join(dir, "front.pem") || got.Key != filepath.Join(dir, "front-key.pem") {
		t.Errorf("http.tls = %+v", got)
	}
	for _, tc := range []struct{ entry, where, says string }{
		{`{"cert": "front.pem"}`, "toolgate.http.tls.key", "is missing: give the private key"},
		{`{"cert": "nope.pem", "key": "front-key.pem"}`, "toolgate.http.tls.cert", "cannot read " + filepath.Join(dir, "nope.pem")},
		{`{"cert": "front.pem", "key": "other-key.pem"}`, "toolgate.http.tls.cert", "other-key.pem do not match: the key is not the one the certificate was made for"},
		{`{"cert": "front.pem", "key": "front-key.pem", "ca": "front.pem"}`, "toolgate.http.tls.ca", "unknown setting"},
	} {
		_, err := parse(tc.entry)
		var e *Error
		if !errors.As(err, &e) || len(e.Errs) != 1 || e.Errs[0].Where() != tc.where || !strings.Contains(e.Errs[0].Msg, tc.says) {
			t.Errorf("http.tls %s: %v, want %s saying %q", tc.entry, err, tc.where, tc.says)
		}
	}
}
