package importer

import (
	"encoding/json"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/toolgate/toolgate/gateway/config"
)

func read(t *testing.T, path, format string) (*Result, map[string]map[string]any) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	r, err := Read(path, data, format)
	if err != nil {
		t.Fatalf("Read(%s): %v", path, err)
	}
	var doc struct {
		MCPServers map[string]map[string]any `json:"mcpServers"`
	}
	if err := json.Unmarshal(r.Doc.Data, &doc); err != nil {
		t.Fatal(err)
	}
	// Every document is a config toolgate loads (variables aside).
	if _, err := config.Parse(r.Doc.Data, path, nil); err != nil {
		t.Errorf("%s: the document does not load: %v\n%s", path, err, r.Doc.Data)
	}
	return r, doc.MCPServers
}

func TestReadEachFormat(t *testing.T) {
	abs := func(p string) string { a, _ := filepath.Abs(p); return a }
	proj := abs("testdata/proj")
	for _, tc := range []struct {
		path, format string
		servers      []string
		check        func(t *testing.T, r *Result, s map[string]map[string]any)
	}{
		{"testdata/claude_desktop_config.json", ClaudeDesktop, []string{"memory", "github"}, func(t *testing.T, r *Result, s map[string]map[string]any) {
			if !slices.ContainsFunc(r.Notes, func(n string) bool { return strings.Contains(n, `"toolgate" left out: it is toolgate itself`) }) {
				t.Errorf("notes %v do not say toolgate was left out", r.Notes)
			}
			if s["github"]["env"].(map[string]any)["GITHUB_PERSONAL_ACCESS_TOKEN"] != "${GITHUB_TOKEN}" {
				t.Errorf("github env: %v", s["github"]["env"])
			}
		}},
		{"testdata/proj/.mcp.json", ClaudeCode, []string{"sentry", "local", "memory"}, func(t *testing.T, r *Result, s map[string]map[string]any) {
			if s["sentry"]["url"] != "https://mcp.sentry.dev/mcp" || s["sentry"]["type"] != "http" {
				t.Errorf("sentry: %v", s["sentry"])
			}
			if s["local"]["cwd"] != proj || s["local"]["env"].(map[string]any)["LEVEL"] != "${LOG_LEVEL:-info}" {
				t.Errorf("local (a project's server runs in the project): %v", s["local"])
			}
		}},
		{"testdata/proj/.vscode/mcp.json", VSCode, []string{"Perplexity", "fs", "remote-api", "gh"}, func(t *testing.T, r *Result, s map[string]map[string]any) {
			if d := cmp.Diff([]Input{{ID: "perplexity-key", Var: "PERPLEXITY_KEY", Description: "Perplexity API Key", Password: true}}, r.Inputs); d != "" {
				t.Errorf("inputs (-want +got):\n%s", d)
			}
			if s["Perplexity"]["env"].(map[string]any)["PERPLEXITY_API_KEY"] != "${PERPLEXITY_KEY}" {
				t.Errorf("Perplexity env: %v", s["Perplexity"]["env"])
			}
			if args := s["fs"]["args"].([]any); args[2] != proj {
				t.Errorf("${workspaceFolder} = %v, want %s", args[2], proj)
			}
			if _, ok := s["remote-api"]["envFile"]; ok || s["remote-api"]["url"] != "http://localhost:3000/sse" {
				t.Errorf("remote-api: %v", s["remote-api"])
			}
			if s["gh"]["headers"].(map[string]any)["Authorization"] != "Bearer ${GH_TOKEN}" {
				t.Errorf("${env:GH_TOKEN}: %v", s["gh"]["headers"])
			}
			for _, want := range []string{`"remote api" is named "remote-api"`, `"envFile" is not read`} {
				if !slices.ContainsFunc(r.Notes, func(n string) bool { return strings.Contains(n, want) }) {
					t.Errorf("notes %v lack %q", r.Notes, want)
				}
			}
		}},
		{"testdata/proj/.cursor/mcp.json", Cursor, []string{"linear", "db"}, func(t *testing.T, r *Result, s map[string]map[string]any) {
			if s["db"]["cwd"] != filepath.Join(proj, "tools") || s["db"]["args"].([]any)[2] != proj+"/data.db" {
				t.Errorf("db: %v", s["db"])
			}
		}},
		{"testdata/windsurf/mcp_config.json", Windsurf, []string{"figma", "brave"}, func(t *testing.T, r *Result, s map[string]map[string]any) {
			if s["figma"]["url"] != "http://127.0.0.1:3845/sse" || s["figma"]["serverUrl"] != nil {
				t.Errorf("figma: serverUrl not turned into url: %v", s["figma"])
			}
		}},
		{"testdata/zed/settings.json", Zed, []string{"git", "fetch", "linear", "off"}, func(t *testing.T, r *Result, s map[string]map[string]any) {
			want := map[string]map[string]any{
				"git":    {"command": "uvx", "args": []any{"mcp-server-git"}, "env": map[string]any{"GIT_TOKEN": "${GIT_TOKEN}"}},
				"fetch":  {"command": "uvx", "args": []any{"mcp-server-fetch"}, "env": map[string]any{}},
				"linear": {"url": "https://mcp.linear.app/mcp", "headers": map[string]any{"Authorization": "Bearer ${LINEAR_KEY}"}},
				"off":    {"command": "npx", "args": []any{"-y", "some-server"}, "disabled": true},
			}
			if d := cmp.Diff(want, s); d != "" {
				t.Errorf("servers (-want +got):\n%s", d)
			}
			for _, note := range []string{
				`"off" is turned off in Zed ("enabled": false): imported with "disabled": true`,
				`"brave-search" left out: its Zed entry has no "command" or "url"; it is a Zed extension's server`,
				"toolgate servers add brave-search --config FILE -- COMMAND",
				`"gateway" left out: it is toolgate itself`,
			} {
				if !slices.ContainsFunc(r.Notes, func(n string) bool { return strings.Contains(n, note) }) {
					t.Errorf("notes %q lack %q", r.Notes, note)
				}
			}
		}},
		{"testdata/codex/config.toml", Codex, []string{"docs", "figma", "git", "linear"}, func(t *testing.T, r *Result, s map[string]map[string]any) {
			want := map[string]map[string]any{
				"docs": {"command": "npx", "args": []any{"-y", "docs-mcp"}, "connectTimeout": 20.0, "callTimeout": 90.0,
					"env": map[string]any{"HOME_DIR": "/srv/docs", "LEVEL": "debug", "DOCS_TOKEN": "${DOCS_TOKEN}"}},
				"figma": {"url": "https://mcp.figma.com/mcp", "connectTimeout": 2.5,
					"headers": map[string]any{"Authorization": "Bearer ${FIGMA_TOKEN}", "X-Region": "us-east-1", "X-Org": "${FIGMA_ORG}"}},
				"linear": {"url": "https://mcp.linear.app/mcp"},
				"git":    {"command": "uvx", "args": []any{"mcp-server-git"}, "disabled": true},
			}
			if d := cmp.Diff(want, s); d != "" {
				t.Errorf("servers (-want +got):\n%s", d)
			}
			for _, note := range []string{
				`"git" is turned off in Codex (enabled = false): imported with "disabled": true`,
				`"docs": "enabled_tools" is not read by toolgate, which serves every tool of the server, not only search, fetch: to keep the others from a client, allow them in the profile it uses, "toolgate": {"profiles": {"NAME": {"tools": {"allow": ["docs__search", "docs__fetch"]}}}}`,
				`"git": "disabled_tools" is not read by toolgate, which serves git_push: to keep them from a client, deny them`,
				"toolgate auth login linear",
			} {
				if !slices.ContainsFunc(r.Notes, func(n string) bool { return strings.Contains(n, note) }) {
					t.Errorf("notes %q lack %q", r.Notes, note)
				}
			}
		}},
		{"testdata/gproj/.gemini/settings.json", Gemini, []string{"py", "ctx7", "events", "hosted", "old"}, func(t *testing.T, r *Result, s map[string]map[string]any) {
			gproj := abs("testdata/gproj")
			want := map[string]map[string]any{
				"py": {"command": "python", "args": []any{"-m", "tools", "${DATA_DIR}/x"}, "env": map[string]any{"API_KEY": "${MY_API_TOKEN}", "B": "${BRACED}"},
					"cwd": filepath.Join(gproj, "srv"), "callTimeout": 30.0},
				"ctx7":   {"type": "http", "url": "https://mcp.context7.com/mcp", "headers": map[string]any{"CONTEXT7_API_KEY": "${CONTEXT7_API_KEY}"}},
				"events": {"type": "sse", "url": "http://127.0.0.1:8080/sse"},
				"hosted": {"type": "http", "url": "https://mcp.example.com/mcp", "oauth": map[string]any{"clientId": "abc", "scopes": []any{"read"}, "redirectUri": "http://localhost:7777/oauth/callback"}},
				"old":    {"command": "node", "args": []any{"old.js"}, "cwd": gproj, "disabled": true},
			}
			if d := cmp.Diff(want, s); d != "" {
				t.Errorf("servers (-want +got):\n%s", d)
			}
			for _, note := range []string{
				`"py": "excludeTools" is not read by toolgate, which serves drop_db`,
				`"ctx7": "includeTools" is not read by toolgate, which serves every tool of the server, not only resolve`,
				"toolgate auth login hosted",
				`"old" is turned off in Gemini CLI ("mcp": {"excluded": […]})`,
			} {
				if !slices.ContainsFunc(r.Notes, func(n string) bool { return strings.Contains(n, note) }) {
					t.Errorf("notes %q lack %q", r.Notes, note)
				}
			}
		}},
		{"testdata/claude.json", ClaudeCode, []string{"user-mem", "app-db"}, func(t *testing.T, r *Result, s map[string]map[string]any) {
			if s["app-db"]["cwd"] != "/home/me/app" || s["user-mem"]["cwd"] != nil {
				t.Errorf("~/.claude.json: project server %v, user server %v", s["app-db"], s["user-mem"])
			}
		}},
	} {
		t.Run(tc.path, func(t *testing.T) {
			r, s := read(t, tc.path, "")
			if r.Format != tc.format {
				t.Errorf("detected %s, want %s", r.Format, tc.format)
			}
			if !slices.Equal(r.Servers, tc.servers) || len(s) != len(tc.servers) {
				t.Errorf("servers %v (document: %d), want %v", r.Servers, len(s), tc.servers)
			}
			tc.check(t, r, s)
		})
	}
}

func TestReadErrorsAndFormat(t *testing.T) {
	if _, err := Read("x.json", []byte(`{"other": 1}`), ""); err == nil || !strings.Contains(err.Error(), "--format") {
		t.Errorf("no servers: %v", err)
	}
	if _, err := Read("x.json", []byte(`{"mcpServers": {}}`), "emacs"); err == nil || !strings.Contains(err.Error(), "vscode") {
		t.Errorf("bad --format: %v", err)
	}
	if _, err := Read("x.json", []byte(`{"mcpServers": [1]}`), ""); err == nil || !strings.Contains(err.Error(), "want an object") {
		t.Errorf("mcpServers not an object: %v", err)
	}
	// --format forces the kind: a VS Code file read as VS Code though its
	// key is mcpServers-shaped content under "servers".
	r, err := Read("whatever.json", []byte(`{"servers": {"a": {"command": "x", "env": {"K": "${input:k}"}}}}`), VSCode)
	if err != nil || len(r.Inputs) != 1 || r.Inputs[0].Var != "K" || !slices.ContainsFunc(r.Notes, func(n string) bool { return strings.Contains(n, "inputs do not describe") }) {
		t.Errorf("forced vscode: %+v %v", r, err)
	}
	// VS Code's user settings.json keeps servers under "mcp".
	r, err = Read("settings.json", []byte(`{"editor.fontSize": 12, "mcp": {"servers": {"a": {"command": "x"}}}}`), "")
	if err != nil || r.Format != VSCode || !slices.Equal(r.Servers, []string{"a"}) {
		t.Errorf("settings.json: %+v %v", r, err)
	}
	// ... which VS Code writes with comments, as JSONC.
	r, err = Read("settings.json", []byte("{\n  // editor\n  \"editor.fontSize\": 12,\n  \"mcp\": {\"servers\": {\"a\": {\"command\": \"x\"},},},\n}"), "")
	if err != nil || r.Format != VSCode || !slices.Equal(r.Servers, []string{"a"}) {
		t.Errorf("settings.json with comments: %+v %v", r, err)
	}
	// A file whose JSON is no object, or that is empty, says so in JSON's
	// words ("cannot unmarshal array into Go value of type
	// map[string]json.RawMessage", "unexpected end of JSON input").
	for data, want := range map[string]string{
		"[]":   `x.json: a JSON array, not an object: a client's MCP config is an object, {"mcpServers": {…}}`,
		"\n":   `x.json: the file is empty: a client's MCP config is an object, {"mcpServers": {…}}`,
		"null": `x.json: a JSON null, not an object: a client's MCP config is an object, {"mcpServers": {…}}`,
		`"a"`:  `x.json: a JSON string, not an object: a client's MCP config is an object, {"mcpServers": {…}}`,
	} {
		if _, err := Read("x.json", []byte(data), ""); err == nil || err.Error() != want {
			t.Errorf("%q: error %v, want %q", data, err, want)
		}
	}
	// A file that is not JSON says where, not that it has no servers.
	if _, err := Read("x.json", []byte("{\"mcpServers\": {\n  \"a\" {}}}"), ""); err == nil || !strings.HasPrefix(err.Error(), "x.json:2:7: invalid JSON: invalid character '{' after object key") {
		t.Errorf("not JSON: %v", err)
	}
}

// Codex's config.toml: its errors say where, as a JSON file's do, and its
// content tells its kind whatever the file's name.
func TestCodexErrorsAndDetect(t *testing.T) {
	if _, err := Read("config.toml", []byte("[mcp_servers.a]\ncommand = \"x\"\nargs = [\"a\",\n"), ""); err == nil || !strings.HasPrefix(err.Error(), "config.toml:3:") || !strings.Contains(err.Error(), "invalid TOML") {
		t.Errorf("bad TOML: %v", err)
	}
	if _, err := Read("config.toml", []byte("model = \"o3\"\n"), ""); err == nil || !strings.Contains(err.Error(), "[mcp_servers.NAME]") {
		t.Errorf("no servers: %v", err)
	}
	data := []byte("[mcp_servers.a]\ncommand = \"x\"\n")
	if f := Detect("codex-backup.txt", data); f != Codex {
		t.Errorf("Detect = %q, want %q", f, Codex)
	}
	if r, err := Read("codex-backup.txt", data, Codex); err != nil || !slices.Equal(r.Servers, []string{"a"}) {
		t.Errorf("--format codex: %+v %v", r, err)
	}
	if f := Detect("x.json", []byte(`{"mcpServers": {}}`)); f == Codex {
		t.Errorf("a JSON file detected as %q", f)
	}
	if _, err := Read("x.json", []byte(`{"mcpServers": {"a": {"command": "x"}}}`), Codex); err == nil || err.Error() != "x.json: --format codex reads Codex's TOML, and it reads as a claude-desktop file: leave --format out, or give --format claude-desktop" {
		t.Errorf("--format codex of a JSON file: %v", err)
	}
}

// Other clients' names for toolgate's keys, in an entry copied by hand into
// any client's file, are renamed (config.RenameForeign): the config printed
// loads, where it was refused with "rename it to url".
func TestForeignKeysRenamed(t *testing.T) {
	r, err := Read("x.json", []byte(`{"mcpServers": {"g": {"httpUrl": "http://h/mcp"}, "t": {"transport": "sse", "url": "http://h/sse"}, "w": {"serverUrl": "http://h/w"}}}`), "")
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		MCPServers map[string]map[string]any `json:"mcpServers"`
	}
	if err := json.Unmarshal(r.Doc.Data, &doc); err != nil {
		t.Fatal(err)
	}
	want := map[string]map[string]any{"g": {"type": "http", "url": "http://h/mcp"}, "t": {"type": "sse", "url": "http://h/sse"}, "w": {"url": "http://h/w"}}
	if d := cmp.Diff(want, doc.MCPServers); d != "" {
		t.Errorf("servers (-want +got):\n%s", d)
	}
	if _, err := config.Parse(r.Doc.Data, "x.json", nil); err != nil {
		t.Errorf("the document does not load: %v", err)
	}
}

func TestNames(t *testing.T) {
	for in, want := range map[string]string{"api-key": "API_KEY", "9lives": "_9LIVES", "": "INPUT", "a.b": "A_B"} {
		if got := config.InputVar(in); got != want {
			t.Errorf("InputVar(%q) = %q, want %q", in, got, want)
		}
	}
	for in, want := range map[string]string{"remote api": "remote-api", "a__b": "a_b", "github.com/x": "github-com-x", "é": "e", "ok_name": "ok_name", "café": "cafe", "Straße": "Strasse", "天気": "server", "météo 天気": "meteo"} {
		if got := validName(in); got != want || !config.ValidName(got) {
			t.Errorf("validName(%q) = %q, want %q", in, got, want)
		}
	}
}

// A server named after the built-in one (in any case) that is not toolgate
// itself is imported as NAME-server, with the reason config.NameProblem
// gives; it was left out as "toolgate itself". One that starts toolgate is
// still left out.
func TestReservedName(t *testing.T) {
	path := filepath.Join(t.TempDir(), "claude_desktop_config.json")
	data := `{"mcpServers": {"Toolgate": {"command": "node", "args": ["tg.js"]}, "gw": {"command": "/usr/local/bin/toolgate", "args": ["serve"]}}}`
	if err := os.WriteFile(path, []byte(data), 0o600); err != nil {
		t.Fatal(err)
	}
	r, servers := read(t, path, "")
	if want := []string{"Toolgate-server"}; !slices.Equal(slices.Sorted(maps.Keys(servers)), want) || servers["Toolgate-server"]["command"] != "node" {
		t.Fatalf("servers %v, want %v; notes %q", servers, want, r.Notes)
	}
	for _, want := range []string{`server "Toolgate" is named "Toolgate-server": ` + config.NameProblem("Toolgate"), `server "gw" left out: it is toolgate itself`} {
		if !slices.Contains(r.Notes, want) && !slices.ContainsFunc(r.Notes, func(n string) bool { return strings.HasPrefix(n, want) }) {
			t.Errorf("notes %q lack %q", r.Notes, want)
		}
	}
}

// Projects of ~/.claude.json with a server of one name, each its own, are
// all imported (the later under the name and its project's folder): one
// replaced the other with only a note. The same entry twice is imported
// once.
func TestClaudeProjectsSameName(t *testing.T) {
	path := filepath.Join(t.TempDir(), ".claude.json")
	data := `{"mcpServers": {"db": {"command": "pg-mcp", "args": ["postgres://localhost/user"]}, "sentry": {"type": "http", "url": "https://mcp.sentry.dev/mcp"}},
  "projects": {
    "/home/me/code/webapp": {"mcpServers": {"db": {"command": "pg-mcp", "args": ["postgres://localhost/webapp"]}}},
    "/home/me/code/api": {"mcpServers": {"db": {"command": "pg-mcp", "args": ["postgres://localhost/api"]}, "sentry": {"type": "http", "url": "https://mcp.sentry.dev/mcp"}}},
    "/home/me/code/same": {"mcpServers": {"db": {"command": "pg-mcp", "args": ["postgres://localhost/user"]}}}
  }}`
	if err := os.WriteFile(path, []byte(data), 0o600); err != nil {
		t.Fatal(err)
	}
	r, servers := read(t, path, "")
	if want := []string{"db", "db-api", "db-same", "db-webapp", "sentry"}; !slices.Equal(slices.Sorted(maps.Keys(servers)), want) {
		t.Fatalf("servers %v, want %v; notes %q", slices.Sorted(maps.Keys(servers)), want, r.Notes)
	}
	for name, db := range map[string]string{"db": "user", "db-api": "api", "db-webapp": "webapp"} {
		if args := servers[name]["args"].([]any); args[0] != "postgres://localhost/"+db {
			t.Errorf("%s: %v", name, servers[name])
		}
	}
	for _, want := range []string{`imported as "db-webapp"`, `server "sentry" of project /home/me/code/api is the same as the one read before it: imported once`} {
		if !slices.ContainsFunc(r.Notes, func(n string) bool { return strings.Contains(n, want) }) {
			t.Errorf("notes %q lack %q", r.Notes, want)
		}
	}
}

// ${workspaceFolder} in a file of the user's (not a project's) has no one
// folder: written as the file's folder, with a note that says so (it was
// silent); in a project's file it is the project's folder, as before.
func TestWorkspaceFolderOfAUserFile(t *testing.T) {
	dir := t.TempDir()
	entry := `{"mcpServers": {"srv": {"command": "node", "args": ["${workspaceFolder}/srv.js", "${workspaceFolder}/b.js"]}}}`
	user := filepath.Join(dir, "claude_desktop_config.json")
	proj := filepath.Join(dir, "proj", ".cursor", "mcp.json")
	for _, p := range []string{user, proj} {
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(entry), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	noted := func(r *Result) int {
		n := 0
		for _, note := range r.Notes {
			if strings.Contains(note, "${workspaceFolder} in a file of the user's, not of a project, has no one folder") {
				n++
			}
		}
		return n
	}
	r, servers := read(t, user, "")
	if n := noted(r); n != 1 || servers["srv"]["args"].([]any)[0] != dir+"/srv.js" {
		t.Errorf("user file: %d notes (want one), args %v; notes %q", n, servers["srv"]["args"], r.Notes)
	}
	r, servers = read(t, proj, "")
	if n := noted(r); n != 0 || servers["srv"]["args"].([]any)[0] != filepath.Join(dir, "proj")+"/srv.js" {
		t.Errorf("project file: %d notes, args %v", n, servers["srv"]["args"])
	}
}

// Claude Code sets ${CLAUDE_PROJECT_DIR} to the project's folder for the
// servers it starts: a project's .mcp.json, or a project of ~/.claude.json,
// has it written as that folder (it was left a variable no gateway sets,
// and the server could not start); its user-level servers get the file's
// folder with a note, as ${workspaceFolder} does; another client's file
// keeps it as written.
func TestClaudeProjectDir(t *testing.T) {
	dir := t.TempDir()
	write := func(path, data string) string {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(data), 0o600); err != nil {
			t.Fatal(err)
		}
		return path
	}
	entry := `{"command": "${CLAUDE_PROJECT_DIR}/scripts/db.sh", "args": ["${CLAUDE_PROJECT_DIR:-.}/data", "$CLAUDE_PROJECT_DIR"]}`
	mcp := write(filepath.Join(dir, "proj", ".mcp.json"), `{"mcpServers": {"db": `+entry+`}}`)
	r, servers := read(t, mcp, "")
	proj := filepath.Join(dir, "proj")
	if db := servers["db"]; db["command"] != proj+"/scripts/db.sh" || !slices.Equal(db["args"].([]any), []any{proj + "/data", "$CLAUDE_PROJECT_DIR"}) || len(r.Notes) != 0 {
		t.Errorf(".mcp.json: %v, notes %q", db, r.Notes)
	}
	claude := write(filepath.Join(dir, ".claude.json"), `{"mcpServers": {"user": `+entry+`}, "projects": {"/home/me/app": {"mcpServers": {"app": `+entry+`}}}}`)
	r, servers = read(t, claude, "")
	if app := servers["app"]; app["command"] != "/home/me/app/scripts/db.sh" || app["args"].([]any)[0] != "/home/me/app/data" {
		t.Errorf("a project of ~/.claude.json: %v", app)
	}
	if user := servers["user"]; user["command"] != dir+"/scripts/db.sh" || len(r.Notes) != 1 || !strings.Contains(r.Notes[0], `server "user": ${CLAUDE_PROJECT_DIR} in a file of the user's, not of a project, has no one folder`) {
		t.Errorf("the user's servers of ~/.claude.json: %v, notes %q", user, r.Notes)
	}
	desktop := write(filepath.Join(dir, "claude_desktop_config.json"), `{"mcpServers": {"db": `+entry+`}}`)
	if _, servers = read(t, desktop, ""); servers["db"]["command"] != "${CLAUDE_PROJECT_DIR}/scripts/db.sh" {
		t.Errorf("Claude Desktop's file: %v", servers["db"])
	}
}

// Two clients' files with servers whose names differ only in case made a
// config that did not load ("--into" refused it with the case error): the
// later is imported as NAME-FORMAT when its entry differs, once when it is
// the same, beside the config imported into as beside an earlier file; a
// server of the very same name is left to config.Merge. Each is noted.
func TestSeparateCaseTwins(t *testing.T) {
	dir := t.TempDir()
	readFile := func(name, data string) *Result {
		path := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(data), 0o600); err != nil {
			t.Fatal(err)
		}
		r, err := Read(path, []byte(data), "")
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	claude := readFile("claude_desktop_config.json", `{"mcpServers": {"Memory": {"command": "npx", "args": ["server-memory"]}, "GitHub": {"url": "https://gh.example/mcp"}, "fs": {"command": "fs-mcp"}}}`)
	cursor := readFile(".cursor/mcp.json", `{"mcpServers": {"memory": {"command": "npx", "args": ["server-memory", "--other"]}, "github": {"url": "https://gh.example/mcp"}, "fs": {"command": "fs-mcp", "args": ["x"]}, "Time": {"command": "t"}, "time": {"command": "t2"}}}`)
	taken := []Named{{Name: "FS", Entry: json.RawMessage(`{"command": "fs-mcp"}`), From: "into.json"}}
	notes, err := SeparateCaseTwins(taken, []*Result{claude, cursor})
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"Memory", "GitHub"}; !slices.Equal(claude.Servers, want) {
		t.Errorf("claude's servers %v, want %v", claude.Servers, want)
	}
	if want := []string{"memory-cursor", "fs-cursor", "Time", "time-cursor"}; !slices.Equal(cursor.Servers, want) {
		t.Errorf("cursor's servers %v, want %v", cursor.Servers, want)
	}
	merged, _, err := config.Merge([]config.Doc{claude.Doc, cursor.Doc})
	if err != nil {
		t.Fatal(err)
	}
	f, err := config.Parse(merged, "", nil)
	if err != nil {
		t.Fatalf("the merged config does not load: %v\n%s", err, merged)
	}
	if got := f.MCPServers["memory-cursor"].Args; !slices.Equal(got, []string{"server-memory", "--other"}) {
		t.Errorf("memory-cursor: %v", got)
	}
	for _, want := range []string{
		`server "fs" of ` + claude.Doc.Path + ` is the same as server "FS" of into.json: kept once, as "FS"`,
		`server "github" of ` + cursor.Doc.Path + ` is the same as server "GitHub" of ` + claude.Doc.Path + `: kept once, as "GitHub"`,
		`server "memory" of ` + cursor.Doc.Path + ` is imported as "memory-cursor": server "Memory" of ` + claude.Doc.Path + ` differs from it only in case, and one config cannot hold both`,
		`server "fs" of ` + cursor.Doc.Path + ` is imported as "fs-cursor": server "FS" of into.json differs from it only in case`,
		`server "time" of ` + cursor.Doc.Path + ` is imported as "time-cursor": server "Time" of ` + cursor.Doc.Path + ` differs`,
	} {
		if !slices.ContainsFunc(notes, func(n string) bool { return strings.HasPrefix(n, want) }) {
			t.Errorf("notes %q lack %q", notes, want)
		}
	}
}

// An import run again into the config it wrote gives a renamed case twin
// the name it gave it the first time, which replaces that server as one of
// the very same name is: it made "memory-cursor-2", a copy, at each run.
// A name the config has in another case is still not given.
func TestSeparateCaseTwinsImportedAgain(t *testing.T) {
	path := filepath.Join(t.TempDir(), ".cursor", "mcp.json")
	data := `{"mcpServers": {"memory": {"command": "npx", "args": ["server-memory", "--other"]}, "time": {"command": "t2"}}}`
	cursor, err := Read(path, []byte(data), "")
	if err != nil {
		t.Fatal(err)
	}
	taken := []Named{
		{Name: "Memory", Entry: json.RawMessage(`{"command": "npx", "args": ["server-memory"]}`), From: "into.json"},
		{Name: "memory-cursor", Entry: json.RawMessage(`{"command": "npx", "args": ["server-memory", "--other"]}`), From: "into.json"},
		{Name: "Time", Entry: json.RawMessage(`{"command": "t"}`), From: "into.json"},
		{Name: "Time-Cursor", Entry: json.RawMessage(`{"command": "mine"}`), From: "into.json"},
	}
	if _, err := SeparateCaseTwins(taken, []*Result{cursor}); err != nil {
		t.Fatal(err)
	}
	if want := []string{"memory-cursor", "time-cursor-2"}; !slices.Equal(cursor.Servers, want) {
		t.Errorf("servers imported again %v, want %v", cursor.Servers, want)
	}
}

// Tools a client was told to leave out ("disabledTools", Windsurf's) are
// served by toolgate, which has no such key in a server's entry: the note
// says so with the profile that keeps them from a client. They were
// dropped in silence, the tools callable through the gateway.
func TestDisabledToolsNoted(t *testing.T) {
	path := filepath.Join(t.TempDir(), "mcp_config.json")
	data := `{"mcpServers": {"git": {"command": "uvx", "args": ["mcp-server-git"], "disabledTools": ["git_commit", "git_push"]}, "fs": {"command": "npx", "disabledTools": []}}}`
	if err := os.WriteFile(path, []byte(data), 0o600); err != nil {
		t.Fatal(err)
	}
	r, servers := read(t, path, "")
	want := `server "git": "disabledTools" is not read by toolgate, which serves git_commit, git_push: to keep them from a client, deny them in the profile it uses, "toolgate": {"profiles": {"NAME": {"tools": {"deny": ["git__git_commit", "git__git_push"]}}}} (see toolgate's README, Profiles)`
	if !slices.Contains(r.Notes, want) {
		t.Errorf("notes %q lack %q", r.Notes, want)
	}
	if len(r.Notes) != 1 {
		t.Errorf("notes %q: want the one of git (fs's list is empty)", r.Notes)
	}
	if _, ok := servers["git"]["disabledTools"]; ok {
		t.Errorf("git's entry keeps disabledTools, which toolgate does not read: %v", servers["git"])
	}
}
