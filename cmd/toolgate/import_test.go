package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"golang.org/x/text/encoding/unicode"

	"github.com/toolgate/toolgate/gateway/audit"
	"github.com/toolgate/toolgate/gateway/config"
	"github.com/toolgate/toolgate/gateway/config/importer"
)

// importData is the importer's sample of each client's file.
// importFile writes src as a client's config file named name and returns
// what `toolgate import` of it prints (stdout and stderr); it must succeed.
func importFile(t *testing.T, name, src string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(path, []byte(src), 0o600); err != nil {
		t.Fatal(err)
	}
	out, err := toolgateCmd(t, t.TempDir(), "import", path).CombinedOutput()
	if err != nil {
		t.Fatalf("import: %v\n%s", err, out)
	}
	return string(out)
}

func importData(t *testing.T, name string) string {
	t.Helper()
	return filepath.Join(repoRoot(t), "gateway", "config", "importer", "testdata", name)
}

// Two clients' files whose servers' names differ only in case: import
// says so up front and imports the later as NAME-FORMAT, and --into writes
// a config that loads; it refused the result with the case error.
func TestImportCaseTwins(t *testing.T) {
	dir := t.TempDir()
	claude, cursor, into := filepath.Join(dir, "claude_desktop_config.json"), filepath.Join(dir, ".cursor", "mcp.json"), filepath.Join(dir, "toolgate.json")
	for path, data := range map[string]string{
		claude: `{"mcpServers": {"Memory": {"command": "npx", "args": ["server-memory"]}}}`,
		cursor: `{"mcpServers": {"memory": {"command": "npx", "args": ["server-memory", "--other"]}}}`,
		into:   `{"mcpServers": {}}`,
	} {
		if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(data), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	out, err := toolgateCmd(t, t.TempDir(), "import", claude, cursor, "--into", into).CombinedOutput()
	b, _ := os.ReadFile(into)
	f, perr := config.Parse(b, into, nil)
	if err != nil || perr != nil || len(f.All()) != 2 || f.MCPServers["memory-cursor"].Command != "npx" {
		t.Fatalf("import --into: %v, %v\n%s\n%s", err, perr, out, b)
	}
	if want := `note: server "memory" of ` + cursor + ` is imported as "memory-cursor": server "Memory" of ` + claude + ` differs from it only in case`; !strings.Contains(string(out), want) {
		t.Errorf("stderr lacks %q:\n%s", want, out)
	}
}

// TestImportCommand is the "done when": the real binary imports a
// Claude Desktop file, a .mcp.json and a .vscode/mcp.json into one config
// holding all their servers (an HTTP server's url kept), listing the
// conflict and the VS Code input on stderr; --into merges into a config
// file, --dry-run showing the diff first.
func TestImportCommand(t *testing.T) {
	files := []string{importData(t, "claude_desktop_config.json"), importData(t, "proj/.mcp.json"), importData(t, "proj/.vscode/mcp.json")}
	cmd := toolgateCmd(t, t.TempDir(), append([]string{"import"}, files...)...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("toolgate import: %v\n%s", err, stderr.String())
	}
	f, err := config.Parse(stdout.Bytes(), "", nil)
	if err != nil {
		t.Fatalf("the printed config does not load: %v\n%s", err, stdout.String())
	}
	var names []string
	for _, s := range f.All() {
		names = append(names, s.Name)
	}
	want := []string{"Perplexity", "fs", "gh", "github", "local", "memory", "remote-api", "sentry"}
	if !slices.Equal(names, want) {
		t.Errorf("servers %v, want %v", names, want)
	}
	if s := f.MCPServers["sentry"]; s.Type != config.TypeHTTP || s.URL != "https://mcp.sentry.dev/mcp" {
		t.Errorf("the HTTP server's url is not kept: %+v", s)
	}
	if got := f.MCPServers["memory"].Args; !slices.Contains(got, "@modelcontextprotocol/server-memory@latest") {
		t.Errorf("memory: the later file's entry wins, got %v", got)
	}
	errs := stderr.String()
	for _, w := range []string{`conflict: server "memory" is defined in`, "PERPLEXITY_KEY", `"toolgate" left out`, "(vscode): 4 servers"} {
		if !strings.Contains(errs, w) {
			t.Errorf("stderr lacks %q:\n%s", w, errs)
		}
	}
	if strings.Contains(stdout.String(), "input:") {
		t.Errorf("a VS Code ${input:…} is left in the config:\n%s", stdout.String())
	}

	t.Run("into", func(t *testing.T) {
		into := filepath.Join(t.TempDir(), "toolgate.json")
		orig := "{\n  \"mcpServers\": {\n    \"memory\": {\"command\": \"node\", \"args\": [\"old.js\"]}\n  },\n  \"toolgate\": {\"callTimeout\": \"2m\"}\n}\n"
		if err := os.WriteFile(into, []byte(orig), 0o600); err != nil {
			t.Fatal(err)
		}
		args := append([]string{"import", "--into", into, "--dry-run"}, files[:2]...)
		cmd := toolgateCmd(t, t.TempDir(), args...)
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		if err := cmd.Run(); err != nil {
			t.Fatalf("import --dry-run: %v\n%s", err, stderr.String())
		}
		diff := stdout.String()
		for _, w := range []string{"--- " + into, "+++ " + into + " (imported)", `+    "sentry": {`, `-    "memory": {"command": "node", "args": ["old.js"]}`} {
			if !strings.Contains(diff, w) {
				t.Errorf("the diff lacks %q:\n%s", w, diff)
			}
		}
		if b, _ := os.ReadFile(into); string(b) != orig {
			t.Fatalf("--dry-run wrote the file:\n%s", b)
		}
		out, err := toolgateCmd(t, t.TempDir(), append([]string{"import", "--into", into}, files[:2]...)...).CombinedOutput()
		if err != nil {
			t.Fatalf("import --into: %v\n%s", err, out)
		}
		b, _ := os.ReadFile(into)
		g, err := config.Parse(b, into, nil)
		if err != nil {
			t.Fatalf("after --into: %v\n%s", err, b)
		}
		if len(g.All()) != 4 || g.Toolgate.CallTimeout.String() != "2m0s" || !strings.Contains(string(out), `server "memory" is in `+into+` already`) {
			t.Errorf("after --into: %d servers, callTimeout %v, output %s\n%s", len(g.All()), g.Toolgate.CallTimeout, out, b)
		}
		var raw map[string]json.RawMessage
		if json.Unmarshal(b, &raw) != nil || string(raw["toolgate"]) != `{"callTimeout": "2m"}` {
			t.Errorf("the toolgate section was rewritten: %s", raw["toolgate"])
		}
	})

	t.Run("errors", func(t *testing.T) {
		bad := filepath.Join(t.TempDir(), "x.json")
		if err := os.WriteFile(bad, []byte(`{"theme": "dark"}`), 0o600); err != nil {
			t.Fatal(err)
		}
		for _, c := range []struct {
			args []string
			want string
		}{
			{[]string{"import", bad}, "no MCP servers found"},
			{[]string{"import", "--format", "emacs", files[0]}, `--format "emacs": use one of ` + strings.Join(importer.Formats, ", ")},
			{[]string{"import"}, "requires at least 1 arg"},
		} {
			out, err := toolgateCmd(t, t.TempDir(), c.args...).CombinedOutput()
			if err == nil || !strings.Contains(string(out), c.want) {
				t.Errorf("%v: %v\n%s", c.args, err, out)
			}
		}
	})
}

// A config file written on Windows (UTF-8 with a byte-order mark, or
// UTF-16 from PowerShell's `>`) is served as it is, and toolgate servers
// add and remove edit it in its own encoding: with a mark, add said "the
// file is not valid JSON".
// A server whose command this shell cannot find is imported, with a
// warning that names it and why; a disabled one is not named (no gateway
// starts it: it was listed as one that CANNOT START).
func TestImportWarnsCommandMissing(t *testing.T) {
	path := filepath.Join(t.TempDir(), "claude_desktop_config.json")
	src := `{"mcpServers": {"memory": {"command": "npx", "args": ["-y", "@modelcontextprotocol/server-memory"]},
	  "clock": {"command": "no-such-mcp-server-xyz"}, "tools": {"command": "./bin/tools-server"},
	  "old": {"command": "no-such-uvx-xyz", "disabled": true}}}`
	if err := os.WriteFile(path, []byte(src), 0o600); err != nil {
		t.Fatal(err)
	}
	into := filepath.Join(t.TempDir(), "toolgate.json")
	out, err := toolgateCmd(t, t.TempDir(), "import", "--into", into, path).CombinedOutput()
	if err != nil {
		t.Fatalf("import: %v\n%s", err, out)
	}
	warning := "warning: with this shell's environment these servers CANNOT START (a gateway shows them down until fixed; one started with another environment may start them):\n" +
		`  clock: command "no-such-mcp-server-xyz" not found in PATH (PATH=`
	if !strings.Contains(string(out), warning) || !strings.Contains(string(out), `  tools: command "./bin/tools-server" not found (a relative path is read from toolgate's working directory): check command`) || strings.Contains(string(out), "  memory:") || strings.Contains(string(out), "  old:") {
		t.Errorf("import output: want clock and tools (not memory, not the disabled old) named as unable to start:\n%s", out)
	}
	if !strings.Contains(string(out), "(claude-desktop): 4 servers: memory, clock, tools, old\n") {
		t.Errorf("import output does not count the file's servers:\n%s", out)
	}
	// One server is "1 server".
	one := filepath.Join(t.TempDir(), "mcp_config.json")
	if err := os.WriteFile(one, []byte(`{"mcpServers": {"figma": {"serverUrl": "http://127.0.0.1:3845/sse"}}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	out, err = toolgateCmd(t, t.TempDir(), "import", "--into", into, one).CombinedOutput()
	if err != nil || !strings.Contains(string(out), "(windsurf): 1 server: figma\n") || !strings.Contains(string(out), "(1 server imported)") {
		t.Errorf("import of one server: %v\n%s", err, out)
	}
	if f, err := config.Load(into); err != nil || len(f.All()) != 5 {
		t.Errorf("imported config: %v, %v", f, err)
	}
}

// TestImportSaysAllAtOnce: what keeps each server from starting is said
// whole, and beside the servers that are invalid, so that the file is
// fixed in one pass. A server with a variable unset and a command not
// installed was said to want the variable alone, and no server was said
// unable to start while another was invalid.
func TestImportSaysAllAtOnce(t *testing.T) {
	out := importFile(t, "claude_desktop_config.json", `{"mcpServers": {"clock": {"command": "no-such-mcp-server-xyz", "env": {"TOKEN": "${TOOLGATE_TEST_UNSET_CLOCK}"}},
	  "both": {"command": "node", "url": "http://127.0.0.1:9/mcp"}}}`)
	for _, want := range []string{
		"  clock: variable ${TOOLGATE_TEST_UNSET_CLOCK} (env.TOKEN) is not set in toolgate's environment",
		`; and command "no-such-mcp-server-xyz" not found in PATH (PATH=`,
		`mcpServers["both"]: has both "command" and "url"`,
	} {
		if !strings.Contains(string(out), want) {
			t.Errorf("import output lacks %q:\n%s", want, out)
		}
	}
}

func TestServersCommandsKeepEncoding(t *testing.T) {
	doc := `{"mcpServers": {"memory": {"command": "npx", "args": ["-y", "@modelcontextprotocol/server-memory"]}}}`
	utf16le, err := unicode.UTF16(unicode.LittleEndian, unicode.UseBOM).NewEncoder().Bytes([]byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	for name, stored := range map[string][]byte{"utf-8 with a mark": append([]byte("\xef\xbb\xbf"), doc...), "utf-16": utf16le} {
		t.Run(name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "toolgate.json")
			if err := os.WriteFile(path, stored, 0o600); err != nil {
				t.Fatal(err)
			}
			data := t.TempDir()
			for _, c := range [][]string{
				{"servers", "add", "fs", "--config", path, "--", "npx", "-y", "@modelcontextprotocol/server-filesystem", "/tmp"},
				{"servers", "remove", "memory", "--config", path},
				{"servers", "--config", path},
			} {
				if out, err := toolgateCmd(t, data, c...).CombinedOutput(); err != nil {
					t.Fatalf("%v: %v\n%s", c, err, out)
				}
			}
			b, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.HasPrefix(b, stored[:2]) {
				t.Errorf("the file lost its encoding: % x…", b[:min(8, len(b))])
			}
			f, err := config.Parse(b, path, nil)
			if err != nil || len(f.All()) != 1 || f.MCPServers["fs"].Command != "npx" {
				t.Errorf("after add and remove: %v, %+v", err, f)
			}
		})
	}
}

// TestServersAddMissingConfig: servers add to a config file not made yet
// says how to make it (it said only "no such file or directory"), and the
// command it quotes, run as printed, lets the same add go through.
func TestServersAddMissingConfig(t *testing.T) {
	path := filepath.Join(t.TempDir(), "my servers.json")
	args := []string{"servers", "add", "memory", "--config", path, "--", "npx", "-y", "@modelcontextprotocol/server-memory"}
	_, stderr, err := runToolgate(t, t.TempDir(), args...)
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 1 || !strings.Contains(stderr, "no such file or directory: check the path, or make the file first: echo ") {
		t.Fatalf("servers add to a missing file: %v\n%s", err, stderr)
	}
	_, rest, _ := strings.Cut(stderr, "make the file first: ")
	mk, _, _ := strings.Cut(rest, " (toolgate import")
	if out, err := exec.Command("sh", "-c", mk).CombinedOutput(); err != nil {
		t.Fatalf("%s: %v\n%s", mk, err, out)
	}
	if _, stderr, err := runToolgate(t, t.TempDir(), args...); err != nil || !strings.Contains(stderr, `added server "memory"`) {
		t.Errorf("servers add after %s: %v\n%s", mk, err, stderr)
	}
}

// toolgate servers add, remove, disable and enable edit the config file
// (keeping its other keys) and the state file.
func TestServersCommands(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "claude_desktop_config.json")
	orig := `{"globalShortcut": "Ctrl+Space", "mcpServers": {"memory": {"command": "npx", "args": ["-y", "@modelcontextprotocol/server-memory"]}}}`
	if err := os.WriteFile(path, []byte(orig), 0o600); err != nil {
		t.Fatal(err)
	}
	data := t.TempDir()
	run := func(args ...string) (string, error) {
		out, err := toolgateCmd(t, data, args...).CombinedOutput()
		return string(out), err
	}
	for _, c := range [][]string{
		{"servers", "add", "fs", "--config", path, "--env", "ROOT=${HOME}", "--", "npx", "-y", "@modelcontextprotocol/server-filesystem", "/tmp"},
		{"servers", "add", "web", "--config", path, "--url", "https://mcp.example.com/mcp", "--header", "Authorization: Bearer ${WEB_TOKEN}"},
		{"servers", "remove", "memory", "--config", path},
		{"servers", "disable", "fs", "--config", path},
	} {
		// web's token is not set in this shell (it is below): said, not refused.
		out, err := run(c...)
		if err != nil || strings.Contains(out, "CANNOT START") != (c[2] == "web") {
			t.Fatalf("%v: %v\n%s", c, err, out)
		}
		if c[2] == "web" && !strings.Contains(out, "CANNOT START: variable ${WEB_TOKEN} (headers.Authorization) is not set") {
			t.Errorf("servers add web: %s", out)
		}
	}
	b, _ := os.ReadFile(path)
	f, err := config.Parse(b, path, nil)
	if err != nil || !strings.Contains(string(b), `"globalShortcut": "Ctrl+Space"`) {
		t.Fatalf("after the edits: %v\n%s", err, b)
	}
	if fs, web := f.MCPServers["fs"], f.MCPServers["web"]; len(f.All()) != 2 || fs.Env["ROOT"] != os.Getenv("HOME") || len(web.Unset) != 1 {
		t.Errorf("servers after the edits: %+v", f.All())
	}
	// Listing validates with the real environment: the token must be set.
	t.Setenv("WEB_TOKEN", "x")
	out, err := run("servers", "--config", path)
	if err != nil || !strings.Contains(out, "disabled (toolgate servers enable fs)") {
		t.Errorf("servers list after disable: %v\n%s", err, out)
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"servers", "add", "fs", "--config", path, "--", "x"}, `a server named "fs" is in`},
		{[]string{"servers", "add", "bad name", "--config", path, "--", "x"}, `invalid server name "bad name": use letters`},
		{[]string{"servers", "add", "x", "--config", path}, "give the command that starts it after --"},
		{[]string{"servers", "add", "x", "--config", path, "--url", "ftp://h/", "--", "x"}, "either a command"},
		{[]string{"servers", "add", "x", "--config", path, "--url", "ftp://h/"}, "is not an absolute http(s) URL"},
		// --type contradicted by the other flags: said in their words.
		{[]string{"servers", "add", "x", "--config", path, "--type", "sse", "--", "node", "y"}, "servers add x: --type sse needs --url; a command after -- makes a stdio server (leave --type out)"},
		{[]string{"servers", "add", "x", "--config", path, "--type", "http", "--", "node"}, "--type http needs --url; a command after -- makes a stdio server"},
		{[]string{"servers", "add", "x", "--config", path, "--type", "stdio", "--url", "https://h/mcp"}, "--type stdio needs a command after --; --url makes an http server"},
		// Flags for the other kind of server, or one of a pair alone:
		// said with the flags' names, not the config keys they make.
		{[]string{"servers", "add", "x", "--config", path, "--url", "https://h/mcp", "--tls-cert", "c.pem"}, "servers add x: --tls-cert needs --tls-key, the private key (PEM) of the certificate"},
		{[]string{"servers", "add", "x", "--config", path, "--url", "https://h/mcp", "--tls-key", "k.pem"}, "servers add x: --tls-key needs --tls-cert"},
		{[]string{"servers", "add", "x", "--config", path, "--tls-ca", "ca.pem", "--", "node"}, "servers add x: --tls-ca is for a remote server (--url), not a local one started by a command"},
		{[]string{"servers", "add", "x", "--config", path, "--header", "A: b", "--", "node"}, "servers add x: --header is for a remote server (--url)"},
		{[]string{"servers", "add", "x", "--config", path, "--url", "https://h/mcp", "--env", "A=b"}, "servers add x: --env is for a local server (a command after --), not one at --url"},
		{[]string{"servers", "add", "x", "--config", path, "--url", "https://h/mcp", "--cwd", "/tmp"}, "servers add x: --cwd is for a local server"},
		// A whole command line quoted as one word after --.
		{[]string{"servers", "add", "x", "--config", path, "--", "sh ./server.sh --port 3"}, `servers add x: "sh ./server.sh --port 3" is one argument holding a whole command line: give the program and its arguments as separate words after --, unquoted: toolgate servers add x --config ` + path + ` -- sh ./server.sh --port 3`},
		{[]string{"servers", "remove", "nope", "--config", path}, `no server named "nope"`},
		{[]string{"servers", "disable", "toolgate"}, "built into the gateway"},
		{[]string{"servers", "enable", "toolgate"}, `server "toolgate" is built into the gateway and always enabled`},
		{[]string{"servers", "enable", "nope", "--config", path}, `no server named "nope"`},
		{[]string{"servers", "restart", "toolgate"}, "built into the gateway"},
		{[]string{"servers", "restart", "nope", "--config", path}, `no server named "nope"`},
		{[]string{"servers", "restart", "fs", "--config", path}, "`toolgate servers enable fs` starts it"},
	} {
		out, err := run(c.args...)
		if err == nil || !strings.Contains(out, c.want) {
			t.Errorf("%v: %v\n%s", c.args, err, out)
		}
	}
	if out, err := run("servers", "enable", "fs", "--config", path); err != nil || !strings.Contains(out, `"fs" enabled`) {
		t.Errorf("enable: %v\n%s", err, out)
	}
	if out, err := run("servers", "restart", "fs", "--config", path); err != nil || !strings.Contains(out, "no gateway runs on the data folder "+data+": nothing to restart now") {
		t.Errorf("restart with no gateway running: %v\n%s", err, out)
	}
	// A command this shell cannot find is added (it may be installed
	// later, or found by a gateway with another PATH), with a warning.
	if out, err := run("servers", "add", "clock", "--config", path, "--", "no-such-mcp-server-xyz"); err != nil ||
		!strings.Contains(out, `warning: with this shell's environment it CANNOT START: command "no-such-mcp-server-xyz" not found in PATH`) {
		t.Errorf("servers add of a missing command: %v\n%s", err, out)
	}
	if out, err := run("servers", "remove", "clock", "--config", path); err != nil {
		t.Errorf("servers remove clock: %v\n%s", err, out)
	}
	// Each change made is a management action in the audit log, as the
	// local user's; a refused one is not.
	var got []string
	for _, r := range auditRecords(t, data, audit.Filter{}, func([]audit.Record) bool { return true }) {
		if r.Transport != "cli" || r.Decision != audit.Allowed || r.Client == "" {
			t.Errorf("audit record %+v", r)
		}
		got = append(got, r.Action+" "+r.Reason)
	}
	want := []string{
		`servers add server "fs" in ` + path,
		`servers add server "web" in ` + path,
		`servers remove server "memory" in ` + path,
		`servers disable server "fs"`,
		`servers enable server "fs"`,
		`servers restart server "fs"`,
		`servers add server "clock" in ` + path,
		`servers remove server "clock" in ` + path,
	}
	if !slices.Equal(got, want) {
		t.Errorf("audit records:\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// A problem of an imported entry names the file it came from, in the
// printed config's warning and in --into's refusal: the servers of several
// files are merged, and the config's own path (or none) did not say which
// file to edit.
func TestImportProblemsNameTheirFile(t *testing.T) {
	dir := t.TempDir()
	bad, good, into := filepath.Join(dir, "claude_desktop_config.json"), filepath.Join(dir, "mcp.json"), filepath.Join(dir, "toolgate.json")
	for path, data := range map[string]string{
		bad:  `{"mcpServers": {"a": {"args": ["x"]}, "b": {"command": 5}}}`,
		good: `{"servers": {"c": {"command": "npx"}}}`,
	} {
		if err := os.WriteFile(path, []byte(data), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	for _, args := range [][]string{{"import", good, bad}, {"import", good, bad, "--into", into}} {
		out, _ := toolgateCmd(t, t.TempDir(), args...).CombinedOutput()
		for _, want := range []string{
			"  " + bad + `: mcpServers["a"]: needs "command"`,
			"  " + bad + `: mcpServers["b"].command: got a number, want a string`,
		} {
			if !strings.Contains(string(out), want) {
				t.Errorf("%v: output lacks %q:\n%s", args, want, out)
			}
		}
	}
	if _, err := os.Stat(into); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("--into wrote %s from an invalid import (stat: %v)", into, err)
	}
}

// A variable written a shell's way ("$MY_TOKEN") in an imported entry is
// said, as toolgate servers and serve say it: it reaches the server as
// written. Import said nothing of it.
func TestImportSaysBareVariables(t *testing.T) {
	out := importFile(t, ".mcp.json", `{"mcpServers": {"scripts": {"command": "npx", "env": {"TOKEN": "$MY_TOKEN", "PW": "pa$$word"}}, "api": {"url": "https://api.example.com/mcp", "headers": {"Authorization": "Bearer $API_KEY"}}}}`)
	for _, want := range []string{
		"warning: variables written without braces (a shell's way) reach the server as written:\n",
		`  api: headers.Authorization is "Bearer $API_KEY", passed as written: toolgate expands ${API_KEY} (with braces)` + "\n",
		`  scripts: env.TOKEN is "$MY_TOKEN", passed as written: toolgate expands ${MY_TOKEN} (with braces)` + "\n",
	} {
		if !strings.Contains(string(out), want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(string(out), "env.PW") {
		t.Errorf("a password with a $ is named as a variable:\n%s", out)
	}
}

// Secrets imported into an existing config of mode 0644 (an editor's) are
// said, with the file and `chmod 600 FILE`: the mode is kept, as its owner
// may have chosen it, and import said nothing while copying a GitHub token
// in clear into a file others can read. A new file (0600), a file only its
// owner reads, and values taken from ${VAR} are not warned of.
func TestImportIntoReadableFile(t *testing.T) {
	dir := openFolder(t)
	src := filepath.Join(dir, "claude_desktop_config.json")
	writeRaw(t, src, []byte(`{"mcpServers": {"github": {"command": "npx", "args": ["-y", "@modelcontextprotocol/server-github"],
	  "env": {"GITHUB_PERSONAL_ACCESS_TOKEN": "ghp_abcdefghijklmnopqrstuvwxyz0123456789", "LOG_LEVEL": "debug"}},
	  "notes": {"url": "https://notes.example/mcp", "headers": {"Authorization": "Bearer ${NOTES_TOKEN}"}},
	  "search": {"command": "search-mcp", "args": ["--api-key", "bsk-0123456789abcdef", "--token=${SEARCH_TOKEN}"]}}}`), false)
	into := filepath.Join(dir, "toolgate.json")
	run := func(mode os.FileMode) string {
		t.Helper()
		if mode != 0 {
			writeRaw(t, into, []byte(`{"mcpServers": {}}`), false)
			if err := os.Chmod(into, mode); err != nil {
				t.Fatal(err)
			}
		} else {
			os.Remove(into)
		}
		var stdout, stderr bytes.Buffer
		if err := runImport(&stdout, &stderr, []string{src}, importFlags{into: into}); err != nil {
			t.Fatalf("import: %v\n%s", err, stderr.String())
		}
		if fi, err := os.Stat(into); err != nil || mode != 0 && fi.Mode().Perm() != mode {
			t.Fatalf("after import: %v, mode %v, want %v kept", err, fi.Mode().Perm(), mode)
		}
		return stderr.String()
	}
	want := "warning: " + into + " is readable by other users (mode 0644) and now holds secrets written out (github: env GITHUB_PERSONAL_ACCESS_TOKEN, search: args --api-key): run `chmod 600 " + into + "`"
	if out := run(0o644); !strings.Contains(out, want) {
		t.Errorf("into a file of mode 0644: %s\nwant %s", out, want)
	}
	for _, mode := range []os.FileMode{0, 0o600} {
		if out := run(mode); strings.Contains(out, "readable") {
			t.Errorf("into a file of mode %04o (0: new): %s", mode, out)
		}
	}
}

// A config imported into that is not JSON is said with its line and
// column, in the words a client's file gets and the gateway gives of its
// config (config.JSONError); it read "the file is not valid JSON: fix it
// first".
func TestImportIntoNotJSON(t *testing.T) {
	dir := t.TempDir()
	bad := "{\"mcpServers\": {\n  \"a\": {\"command\": \"x\",}\n}}\n"
	src, into := filepath.Join(dir, "mcp.json"), filepath.Join(dir, "toolgate.json")
	writeRaw(t, src, []byte(`{"mcpServers": {"memory": {"command": "npx"}}}`), false)
	writeRaw(t, into, []byte(bad), false)
	var stdout, stderr bytes.Buffer
	err := runImport(&stdout, &stderr, []string{src}, importFlags{into: into})
	if want := "import --into: " + into + ":2:24: invalid JSON: invalid character '}' looking for beginning of object key string (remove the comma before '}'): fix it first"; err == nil || err.Error() != want {
		t.Errorf("import --into a file that is not JSON: %v\nwant %s", err, want)
	}
	if b, _ := os.ReadFile(into); string(b) != bad {
		t.Errorf("the file was changed: %s", b)
	}
	// A client's file broken the same way (JSONC aside) reads the same.
	writeRaw(t, src, []byte("{\"mcpServers\": {\n  \"a\": {\"command\": \"x\" \"y\"}\n}}\n"), false)
	data, _ := os.ReadFile(src)
	if _, err := importer.Read(src, data, ""); err == nil || !strings.HasPrefix(err.Error(), src+":2:24: invalid JSON: invalid character '\"' after object key:value pair") {
		t.Errorf("a client's file: %v", err)
	}
}

// The README's first import prints the config into a file by the shell's
// redirect (`toolgate import … > servers.json`), which the shell makes
// 0644 under the usual umask: a token the client's file held written out
// was then readable by every user of the machine, and import said nothing
// (it warns of the same in a file --into writes to).
func TestImportToReadableStdout(t *testing.T) {
	dir := openFolder(t)
	src := filepath.Join(dir, "claude_desktop_config.json")
	writeRaw(t, src, []byte(`{"mcpServers": {"github": {"command": "npx", "args": ["-y", "@modelcontextprotocol/server-github"],
	  "env": {"GITHUB_PERSONAL_ACCESS_TOKEN": "ghp_abcdefghijklmnopqrstuvwxyz0123456789"}},
	  "notes": {"url": "https://notes.example/mcp", "headers": {"Authorization": "Bearer ${NOTES_TOKEN}"}}}}`), false)
	plain := filepath.Join(dir, "plain.json")
	writeRaw(t, plain, []byte(`{"mcpServers": {"notes": {"url": "https://notes.example/mcp", "headers": {"Authorization": "Bearer ${NOTES_TOKEN}"}}}}`), false)
	run := func(mode os.FileMode, in string) string {
		t.Helper()
		out := filepath.Join(dir, "servers.json")
		os.Remove(out)
		f, err := os.OpenFile(out, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, mode)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		if err := f.Chmod(mode); err != nil { // whatever the umask
			t.Fatal(err)
		}
		var stderr bytes.Buffer
		if err := runImport(f, &stderr, []string{in}, importFlags{}); err != nil {
			t.Fatalf("import: %v\n%s", err, stderr.String())
		}
		return stderr.String()
	}
	out := filepath.Join(dir, "servers.json")
	want := "warning: " + out + " (stdout) is readable by other users (mode 0644) and now holds secrets written out (github: env GITHUB_PERSONAL_ACCESS_TOKEN): run `chmod 600 " + out + "`"
	if got := run(0o644, src); !strings.Contains(got, want) {
		t.Errorf("stdout to a file of mode 0644:\n%s\nwant %s", got, want)
	}
	if got := run(0o600, src); strings.Contains(got, "readable") {
		t.Errorf("stdout to a file of mode 0600: %s", got)
	}
	if got := run(0o644, plain); strings.Contains(got, "readable") {
		t.Errorf("no secret written out, to a file of mode 0644: %s", got)
	}
}

// openFolder is a t.TempDir that other users may pass through to a file in
// it (t.TempDir's is 0700, as is the test's folder above it).
func openFolder(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	for _, d := range []string{dir, filepath.Dir(dir)} {
		if err := os.Chmod(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// A file of mode 0644 in a folder of mode 0700 (a home folder as Fedora
// makes it, ~/.config/toolgate as toolgate makes it) is read by no other
// user: they cannot reach it. import warned all the same that it "is
// readable by other users", at every import into such a folder, by
// --into as by the shell's redirect; a folder of mode 0750 lets its group
// through, and the warning stands.
func TestImportReadableFileInPrivateFolder(t *testing.T) {
	dir := openFolder(t)
	src := filepath.Join(dir, "claude_desktop_config.json")
	writeRaw(t, src, []byte(`{"mcpServers": {"github": {"command": "npx", "args": ["-y", "@modelcontextprotocol/server-github"],
	  "env": {"GITHUB_PERSONAL_ACCESS_TOKEN": "ghp_abcdefghijklmnopqrstuvwxyz0123456789"}}}}`), false)
	for _, tc := range []struct {
		folder os.FileMode
		warns  bool
	}{{0o700, false}, {0o711, true}, {0o750, true}} {
		sub := filepath.Join(dir, fmt.Sprintf("folder%04o", tc.folder), "inner")
		if err := os.MkdirAll(sub, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(filepath.Dir(sub), tc.folder); err != nil {
			t.Fatal(err)
		}
		into, out := filepath.Join(sub, "toolgate.json"), filepath.Join(sub, "servers.json")
		writeRaw(t, into, []byte(`{"mcpServers": {}}`), false)
		f, err := os.OpenFile(out, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o644)
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range []string{into, out} {
			if err := os.Chmod(p, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		var stdout, stderr bytes.Buffer
		if err := runImport(&stdout, &stderr, []string{src}, importFlags{into: into}); err != nil {
			t.Fatalf("import --into: %v\n%s", err, stderr.String())
		}
		if err := runImport(f, &stderr, []string{src}, importFlags{}); err != nil {
			t.Fatalf("import > %s: %v\n%s", out, err, stderr.String())
		}
		f.Close()
		got := stderr.String()
		for _, p := range []string{into, out} {
			if said := strings.Contains(got, "warning: "+p); said != tc.warns {
				t.Errorf("a file of mode 0644 under a folder of mode %04o: warned of %s %v, want %v:\n%s", tc.folder, p, said, tc.warns, got)
			}
		}
	}
}
