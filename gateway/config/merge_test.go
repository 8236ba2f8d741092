package config

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/toolgate/toolgate/internal/tlsfiles/tlstest"
)

// A project file over a user file: servers replaced whole by name, the
// toolgate section merged key by key (profiles whole), each file's
// relative paths anchored at its own directory.
func TestReadFilesMerges(t *testing.T) {
	root := t.TempDir()
	user := filepath.Join(root, "home", "toolgate.json")
	proj := filepath.Join(root, "proj", ".mcp.json")
	for _, d := range []string{filepath.Dir(user), filepath.Dir(proj)} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	write := func(p, s string) {
		if err := os.WriteFile(p, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write(user, `{"mcpServers": {
		"memory": {"command": "node", "args": ["mem.js"], "cwd": "servers", "env": {"F": "${TOOLGATE_CONFIG_DIR}/m.jsonl"}},
		"remote": {"url": "https://a.example/mcp"}},
		"toolgate": {"callTimeout": "10s", "search": {"mode": "bm25", "maxLimit": 20}, "dataDir": "data",
			"profiles": {"kg": {"servers": ["memory"], "tools": {"deny": ["memory__delete_*"]}}}}}`)
	write(proj, `{"mcpServers": {
		"remote": {"command": "npx", "args": ["remote-mcp"]},
		"fs": {"command": "node", "args": ["fs.js"], "cwd": "."}},
		"toolgate": {"search": {"mode": "hybrid"}, "profiles": {"kg": {"servers": ["fs"]}}}}`)
	f, merged, conflicts, err := ReadFiles([]string{user, proj}, env())
	if err != nil {
		t.Fatalf("ReadFiles: %v\n%s", err, merged)
	}
	home, pdir := filepath.Dir(user), filepath.Dir(proj)
	want := []Server{
		{Name: "fs", Type: TypeStdio, Command: "node", Args: []string{"fs.js"}, Cwd: pdir, CallTimeout: sec(10)},
		{Name: "memory", Type: TypeStdio, Command: "node", Args: []string{"mem.js"}, Cwd: filepath.Join(home, "servers"),
			Env: map[string]string{"F": home + "/m.jsonl"}, CallTimeout: sec(10)},
		{Name: "remote", Type: TypeStdio, Command: "npx", Args: []string{"remote-mcp"}, CallTimeout: sec(10)},
	}
	if d := cmp.Diff(want, f.Servers()); d != "" {
		t.Errorf("servers (-want +got):\n%s", d)
	}
	s := f.Toolgate
	if s.Search.Mode != "hybrid" || s.Search.MaxLimit != 20 || s.DataDir != filepath.Join(home, "data") {
		t.Errorf("settings not merged key by key: %+v", s)
	}
	if d := cmp.Diff(map[string]Profile{"kg": {Servers: []string{"fs"}}}, s.Profiles); d != "" {
		t.Errorf("profiles are replaced whole (-want +got):\n%s", d)
	}
	if len(conflicts) != 1 || conflicts[0].Server != "remote" || conflicts[0].Kept != proj || conflicts[0].Over != user {
		t.Errorf("conflicts = %+v", conflicts)
	}
	if f.Path != proj {
		t.Errorf("Path = %s, want the last file", f.Path)
	}

	// A problem in the merged config names both files.
	write(proj, `{"mcpServers": {"fs": {"command": ""}}}`)
	if _, _, _, err := ReadFiles([]string{user, proj}, env()); err == nil || !strings.Contains(err.Error(), user+" + "+proj) {
		t.Errorf("error %v does not name both files", err)
	}
	write(proj, `{"mcpServers": {"fs": }`)
	if _, _, _, err := ReadFiles([]string{user, proj}, env()); err == nil || !strings.Contains(err.Error(), proj+":1:") {
		t.Errorf("syntax error %v does not point into the file", err)
	}
	write(proj, " \n")
	var ee *EmptyError
	if _, _, _, err := ReadFiles([]string{user, proj}, env()); !errors.As(err, &ee) || ee.Path != proj {
		t.Errorf("empty file: %v", err)
	}
	// One file is parsed as it is.
	g, data, _, err := ReadFiles([]string{user}, env())
	if err != nil || len(g.Servers()) != 2 || !strings.Contains(string(data), `"remote"`) {
		t.Errorf("one file: %v", err)
	}
}

// TestMergeAnchorsFilePaths: a file's tls files (a server's, the HTTP
// front's) and keysFile stay its own folder's when it is read with others
// (they used to resolve against the last file's folder).
func TestMergeAnchorsFilePaths(t *testing.T) {
	root := t.TempDir()
	home, proj := filepath.Join(root, "home"), filepath.Join(root, "proj")
	for _, d := range []string{filepath.Join(home, "certs"), proj} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	ca := tlstest.NewCA(t, "ca")
	front := ca.Issue(t, tlstest.Options{Names: []string{"127.0.0.1"}})
	tlstest.Write(t, filepath.Join(home, "certs"), "ca.pem", ca.PEM)
	tlstest.Write(t, filepath.Join(home, "certs"), "front.pem", front.CertPEM)
	tlstest.Write(t, filepath.Join(home, "certs"), "front-key.pem", front.KeyPEM)
	user := tlstest.Write(t, home, "toolgate.json", []byte(`{"mcpServers": {"corp": {"url": "https://corp.example/mcp", "tls": {"ca": "certs/ca.pem"}}},
		"toolgate": {"keysFile": "keys.jsonl", "http": {"tls": {"cert": "certs/front.pem", "key": "certs/front-key.pem"}}}}`))
	project := tlstest.Write(t, proj, ".mcp.json", []byte(`{"mcpServers": {"fs": {"command": "node"}}}`))
	f, merged, _, err := ReadFiles([]string{user, project}, env())
	if err != nil {
		t.Fatalf("ReadFiles: %v\n%s", err, merged)
	}
	if got := f.MCPServers["corp"].TLS; got == nil || got.CA != filepath.Join(home, "certs", "ca.pem") {
		t.Errorf("corp's tls.ca = %+v, want home's certs/ca.pem", got)
	}
	if got := f.Toolgate.HTTP.TLS; got == nil || got.Cert != filepath.Join(home, "certs", "front.pem") || got.Key != filepath.Join(home, "certs", "front-key.pem") {
		t.Errorf("http.tls = %+v, want home's certs", got)
	}
	if f.Toolgate.KeysFile != filepath.Join(home, "keys.jsonl") {
		t.Errorf("keysFile = %s, want home's keys.jsonl", f.Toolgate.KeysFile)
	}
}
