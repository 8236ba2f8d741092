// Package importer reads the MCP server configs other clients keep —
// Claude Desktop (claude_desktop_config.json), Claude Code (.mcp.json, and
// ~/.claude.json with its user-level and per-project servers), Cursor
// (mcp.json), VS Code (.vscode/mcp.json, or settings.json's "mcp", with its
// "servers" and "inputs"), Windsurf (mcp_config.json), Gemini CLI
// (.gemini/settings.json), Zed (settings.json's "context_servers") and Codex
// (config.toml's [mcp_servers.NAME]) — and turns each
// into a toolgate config document (config.Doc), which config.Merge merges
// like any other. `toolgate import` is its command.
//
// The kind of a file is told from its content ("servers"/"inputs" is VS
// Code, "projects" is ~/.claude.json, "context_servers" is Zed, "serverUrl" is
// Windsurf, "includeTools" or "excludeTools" (or a .gemini folder) is Gemini
// CLI, TOML with "mcp_servers" is Codex; the rest
// share Claude's "mcpServers" shape, and the file name only names them).
// Each client's variable syntax becomes toolgate's ${VAR}: VS Code's
// ${input:ID} (a value VS Code prompts for) becomes ${ID_IN_CAPITALS}, and
// the names are reported so the user can set them; ${env:NAME} becomes
// ${NAME}; ${workspaceFolder}, and Claude Code's ${CLAUDE_PROJECT_DIR}, the
// project's folder; ${userHome} ${HOME}.
// Nothing is written that was not in a file already: secrets stay where
// they were, or stay references.
package importer

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/pelletier/go-toml/v2"
	"github.com/tidwall/jsonc"

	"github.com/toolgate/toolgate/gateway/config"
	"github.com/toolgate/toolgate/index/catalog"
	"github.com/toolgate/toolgate/internal/jsonwords"
)

// Formats of the files read.
const (
	ClaudeDesktop = "claude-desktop"
	ClaudeCode    = "claude-code" // .mcp.json and ~/.claude.json
	Cursor        = "cursor"
	VSCode        = "vscode"
	Windsurf      = "windsurf"
	Gemini        = "gemini" // Gemini CLI's settings.json
	Zed           = "zed"    // settings.json's "context_servers"
	Codex         = "codex"  // config.toml's [mcp_servers.NAME]
)

// Formats lists the formats, for --format.
var Formats = []string{ClaudeDesktop, ClaudeCode, Cursor, VSCode, Windsurf, Gemini, Zed, Codex}

// Input is a VS Code input a server refers to: the variable that takes its
// place.
type Input struct {
	ID          string // the input's id
	Var         string // the ${VAR} that replaces ${input:ID}
	Description string
	Password    bool
}

// Result is one file read.
type Result struct {
	Format string
	Doc    config.Doc // {"mcpServers": {...}}, Path the file's
	// Servers names the servers read, in the order the file lists them.
	Servers []string
	Inputs  []Input  // VS Code inputs referred to
	Notes   []string // what was changed or left out, for stderr
}

// Detect tells the format of a file from its content; name (the file's
// path) only tells apart the formats that share Claude's shape. "" when
// the content is none of them.
func Detect(name string, data []byte) string {
	var top map[string]json.RawMessage
	plain, err := plainJSON(data)
	if err != nil || json.Unmarshal(plain, &top) != nil {
		if _, err := codexJSON(name, data); err == nil {
			return Codex
		}
		return ""
	}
	if _, ok := top["servers"]; ok {
		return VSCode
	}
	if raw, ok := top["mcp"]; ok && bytes.Contains(raw, []byte(`"servers"`)) {
		return VSCode // settings.json
	}
	if _, ok := top["projects"]; ok {
		return ClaudeCode // ~/.claude.json
	}
	if _, ok := top["context_servers"]; ok {
		return Zed // settings.json
	}
	raw, ok := top["mcpServers"]
	if !ok {
		return ""
	}
	if bytes.Contains(raw, []byte(`"serverUrl"`)) {
		return Windsurf
	}
	base, dir := filepath.Base(name), filepath.Base(filepath.Dir(name))
	if dir == ".gemini" || bytes.Contains(raw, []byte(`"includeTools"`)) || bytes.Contains(raw, []byte(`"excludeTools"`)) {
		return Gemini
	}
	switch {
	case base == "claude_desktop_config.json":
		return ClaudeDesktop
	case base == ".mcp.json" || base == ".claude.json":
		return ClaudeCode
	case dir == ".cursor":
		return Cursor
	case base == "mcp_config.json" || dir == "windsurf":
		return Windsurf
	}
	return ClaudeDesktop // the shape every other client copied
}

// Read turns one file into a toolgate config document. format "" detects
// it (Detect).
func Read(path string, data []byte, format string) (*Result, error) {
	if format == Codex || format == "" && filepath.Ext(path) == ".toml" {
		asJSON, err := codexJSON(path, data)
		if err != nil {
			if other := Detect(path, data); format == Codex && other != "" && other != Codex {
				return nil, fmt.Errorf("%s: --format codex reads Codex's TOML, and it reads as a %s file: leave --format out, or give --format %s", path, other, other)
			}
			return nil, err
		}
		data, format = asJSON, Codex
	}
	data, err := plainJSON(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	var top map[string]json.RawMessage
	if len(bytes.TrimSpace(data)) == 0 {
		return nil, fmt.Errorf("%s: the file is empty: %s", path, wantObject)
	}
	if err := json.Unmarshal(data, &top); err != nil {
		return nil, notJSON(path, data, err)
	}
	if top == nil { // null
		return nil, fmt.Errorf("%s: a JSON null, not an object: %s", path, wantObject)
	}
	if format == "" {
		if format = Detect(path, data); format == "" {
			return nil, fmt.Errorf(`%s: no MCP servers found: want "mcpServers" (Claude, Cursor, Windsurf), "servers" (VS Code), "projects" (~/.claude.json), "context_servers" (Zed) or [mcp_servers.NAME] tables (Codex's config.toml); --format names the kind`, path)
		}
	} else if !slices.Contains(Formats, format) {
		return nil, fmt.Errorf("--format %q: use one of %s", format, strings.Join(Formats, ", "))
	}
	r := &Result{Format: format}
	x := &rewriter{r: r, workspace: workspace(path), project: projectFile(path)}
	servers := map[string]any{}
	// add reads the entries of raw, found at where; project names the
	// project they belong to ("" for a file's own servers).
	add := func(where, project string, raw json.RawMessage) error {
		if len(raw) == 0 || string(raw) == "null" {
			return nil
		}
		var entries orderedEntries
		if err := json.Unmarshal(raw, &entries); err != nil {
			return fmt.Errorf("%s: %s: want an object of server entries: %w", path, where, err)
		}
		for _, e := range entries {
			name, entry, ok := x.server(e.name, e.value)
			if !ok {
				continue
			}
			if prev, dup := servers[name]; dup {
				switch {
				case reflect.DeepEqual(prev, entry):
					r.note("server %q of %s is the same as the one read before it: imported once", name, where)
					continue
				case project != "":
					// Two projects (or a project and the user's servers)
					// with a server of one name, each its own: both kept.
					alt := uniqueName(servers, validName(name+"-"+filepath.Base(project)))
					r.note("server %q of %s differs from the one of that name read before it: imported as %q", name, where, alt)
					name = alt
				default:
					r.note("server %q of %s replaces the one read before it", name, where)
					servers[name] = entry
					continue
				}
			}
			r.Servers = append(r.Servers, name)
			servers[name] = entry
		}
		return nil
	}
	switch format {
	case VSCode:
		body := top
		if mcp, ok := top["mcp"]; ok { // settings.json
			body = nil
			if err := json.Unmarshal(mcp, &body); err != nil {
				return nil, fmt.Errorf("%s: mcp: want an object: %w", path, err)
			}
		}
		if err := x.readInputs(body["inputs"]); err != nil {
			return nil, fmt.Errorf("%s: inputs: %w", path, err)
		}
		if err := add("servers", "", body["servers"]); err != nil {
			return nil, err
		}
	case Zed:
		if err := add("context_servers", "", top["context_servers"]); err != nil {
			return nil, err
		}
	case Codex:
		if err := add("mcp_servers", "", top["mcp_servers"]); err != nil {
			return nil, err
		}
	default:
		if format == Gemini {
			if err := x.geminiLists(top["mcp"]); err != nil {
				return nil, fmt.Errorf("%s: mcp: %w", path, err)
			}
		}
		if err := add("mcpServers", "", top["mcpServers"]); err != nil {
			return nil, err
		}
		if raw, ok := top["projects"]; ok { // ~/.claude.json
			var projects map[string]struct {
				MCPServers json.RawMessage `json:"mcpServers"`
			}
			if err := json.Unmarshal(raw, &projects); err != nil {
				return nil, fmt.Errorf("%s: projects: %w", path, err)
			}
			for _, dir := range slices.Sorted(maps.Keys(projects)) {
				x.workspace, x.project = dir, true
				if err := add("project "+dir, dir, projects[dir].MCPServers); err != nil {
					return nil, err
				}
			}
		}
	}
	doc, err := json.MarshalIndent(map[string]any{"mcpServers": servers}, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	r.Doc = config.Doc{Path: path, Data: doc}
	return r, nil
}

// uniqueName is name, or name-2, name-3 … when servers has it already.
func uniqueName(servers map[string]any, name string) string {
	out := name
	for i := 2; ; i++ {
		if _, taken := servers[out]; !taken {
			return out
		}
		out = validName(fmt.Sprintf("%s-%d", name, i))
	}
}

// plainJSON turns a client's file into plain JSON: UTF-8 without a
// byte-order mark (config.Text), and without the comments and trailing
// commas VS Code's settings.json and mcp.json allow (JSONC; VS Code writes
// its own files with comments). Offsets in the text are kept, so errors
// point at the right line.
func plainJSON(data []byte) ([]byte, error) {
	text, err := config.Text(data)
	if err != nil {
		return nil, err
	}
	return jsonc.ToJSON(text), nil
}

// notJSON says where a file that is not a JSON object goes wrong.
func notJSON(path string, data []byte, err error) error {
	if se := (*json.SyntaxError)(nil); errors.As(err, &se) {
		return config.JSONError(path, data, err) // as the gateway says it of its config
	}
	// In JSON's words: "a JSON array, not an object".
	return fmt.Errorf("%s: %w: %s", path, jsonwords.Explain(err, map[string]json.RawMessage(nil)), wantObject)
}

// wantObject is what a client's file holds, for a file that holds another
// JSON value or none.
const wantObject = `a client's MCP config is an object, {"mcpServers": {…}}`

func (r *Result) note(format string, args ...any) {
	r.Notes = append(r.Notes, fmt.Sprintf(format, args...))
}

// workspace is the project folder a file belongs to, for
// ${workspaceFolder}: the parent of .vscode or .cursor, else its folder.
func workspace(path string) string {
	abs, err := filepath.Abs(path)
	if err != nil {
		abs = path
	}
	dir := filepath.Dir(abs)
	if b := filepath.Base(dir); b == ".vscode" || b == ".cursor" || b == ".gemini" {
		return filepath.Dir(dir)
	}
	return dir
}

// projectFile reports whether a file holds one project's servers (the
// client starts them in the project's folder): .mcp.json, .vscode/ and
// .cursor/ files.
func projectFile(path string) bool {
	abs, err := filepath.Abs(path)
	if err != nil {
		abs = path
	}
	dir := filepath.Dir(abs)
	switch {
	case filepath.Base(abs) == ".mcp.json", filepath.Base(dir) == ".vscode":
		return true
	case filepath.Base(dir) == ".cursor", filepath.Base(dir) == ".gemini":
		home, err := os.UserHomeDir()
		return err != nil || filepath.Dir(dir) != home // ~/.cursor/mcp.json, ~/.gemini/settings.json are the user's
	}
	return false
}

// rewriter turns one file's server entries into toolgate's.
type rewriter struct {
	r         *Result
	workspace string // the project folder ${workspaceFolder} names
	project   bool   // the servers run in workspace (see projectFile)
	inputs    map[string]*Input
	unfolded  map[string]bool // servers noted by noFolder
	// Gemini CLI's "mcp": {"allowed", "excluded"}: the servers it
	// connects only, and those it never does (nil: no such list).
	allowed, excluded []string
}

// noFolder notes, once per server, that a user-level file's ${name} (a
// client's workspace folder) had no one folder to stand for: the client
// reads whichever project is open, and the import wrote as instead.
func (x *rewriter) noFolder(server, name, as string) {
	if x.project {
		return
	}
	if x.unfolded == nil {
		x.unfolded = map[string]bool{}
	}
	if x.unfolded[server] {
		return
	}
	x.unfolded[server] = true
	x.r.note("server %q: ${%s} in a file of the user's, not of a project, has no one folder (the client reads the project open at the time); it is written as %s: edit the entry to the folder the server should use", server, name, as)
}

// readInputs reads VS Code's "inputs".
func (x *rewriter) readInputs(raw json.RawMessage) error {
	x.inputs = map[string]*Input{}
	if len(raw) == 0 {
		return nil
	}
	var list []struct {
		ID          string `json:"id"`
		Description string `json:"description"`
		Password    bool   `json:"password"`
	}
	if err := json.Unmarshal(raw, &list); err != nil {
		return err
	}
	for _, in := range list {
		x.inputs[in.ID] = &Input{ID: in.ID, Var: config.InputVar(in.ID), Description: in.Description, Password: in.Password}
	}
	return nil
}

// server returns the toolgate entry for one of the file's servers, under a
// valid name; false when it is left out (with a note saying why).
func (x *rewriter) server(name string, raw json.RawMessage) (string, map[string]any, bool) {
	var e map[string]any
	if err := json.Unmarshal(raw, &e); err != nil || e == nil {
		x.r.note("server %q left out: its entry is not an object", name)
		return "", nil, false
	}
	valid := validName(name)
	if valid != name {
		x.r.note("server %q is named %q: %s", name, valid, config.NameProblem(name))
	}
	if x.r.Format == Zed && !x.zed(valid, e) {
		return "", nil, false
	}
	if x.r.Format == Codex {
		x.codex(valid, e)
	}
	if isToolgate(e) {
		x.r.note("server %q left out: it is toolgate itself (the gateway's own tools are its built-in %q server)", name, config.BuiltinServer)
		return "", nil, false
	}
	if strings.EqualFold(valid, config.BuiltinServer) {
		// Another program under the built-in server's name: kept, under
		// the name the refusal of that name suggests.
		x.r.note("server %q is named %q: %s", name, config.ReservedRename(valid), config.NameProblem(valid))
		valid = config.ReservedRename(valid)
	}
	if x.r.Format == Gemini {
		x.gemini(valid, e)
	}
	// Other clients' names for toolgate's keys: Windsurf's serverUrl,
	// Gemini CLI's httpUrl (streamable HTTP), transport or transportType.
	if _, ok := e["httpUrl"]; ok && e["type"] == nil && e["transport"] == nil && e["transportType"] == nil {
		e["type"] = config.TypeHTTP
	}
	config.RenameForeign(e)
	if _, ok := e["envFile"]; ok { // VS Code
		x.r.note("server %q: \"envFile\" is not read by toolgate: copy the variables it needs into \"env\" (or the gateway's environment)", valid)
		delete(e, "envFile")
	}
	x.toolList(valid, e, "disabledTools", "deny") // Windsurf's tools turned off
	if t, ok := e["type"].(string); ok && t == "local" {
		delete(e, "type")
	}
	e = x.rewrite(valid, e).(map[string]any)
	// A relative cwd is the project's; a project's server without one ran
	// in the project folder.
	if cwd, ok := e["cwd"].(string); ok && cwd != "" && !filepath.IsAbs(cwd) && !strings.Contains(cwd, "${") {
		e["cwd"] = filepath.Join(x.workspace, cwd)
	} else if _, has := e["command"]; has && !ok && x.project {
		e["cwd"] = x.workspace
	}
	return valid, e, true
}

// toolList notes a client's list of a server's tools turned off ("deny")
// or of the only ones on ("allow"), under key, and drops it: toolgate has
// no such key in a server's entry and serves every tool the server lists,
// so the note gives the profile that keeps the others from a client.
func (x *rewriter) toolList(server string, e map[string]any, key, verb string) {
	tools, ok := e[key]
	if !ok {
		return
	}
	delete(e, key)
	var names, ids []string
	if list, ok := tools.([]any); ok {
		for _, t := range list {
			if n, ok := t.(string); ok && n != "" {
				names = append(names, n)
				ids = append(ids, strconv.Quote(server+catalog.Sep+n))
			}
		}
	}
	if len(names) == 0 {
		return
	}
	serves, them := strings.Join(names, ", "), "them"
	if verb == "allow" {
		serves, them = "every tool of the server, not only "+serves, "the others"
	}
	x.r.note(`server %q: %q is not read by toolgate, which serves %s: to keep %s from a client, %s them in the profile it uses, "toolgate": {"profiles": {"NAME": {"tools": {%q: [%s]}}}} (see toolgate's README, Profiles)`,
		server, key, serves, them, verb, verb, strings.Join(ids, ", "))
}

// turnedOff notes a server a client's file turns off, imported with
// "disabled": true (toolgate's key, which Claude's and Windsurf's files
// share).
func (x *rewriter) turnedOff(server, client, as string, e map[string]any) {
	e["disabled"] = true
	x.r.note("server %q is turned off in %s (%s): imported with \"disabled\": true, so no gateway starts it", server, client, as)
}

// zed turns one of Zed's "context_servers" entries into toolgate's, in
// place: the form Zed wrote before 2025's, "command": {"path", "args",
// "env"}, is flattened; "enabled": false becomes "disabled": true; Zed's own
// keys ("source", "settings") go. False, with a note, for an extension's
// server, whose command the extension supplies and the file does not hold.
func (x *rewriter) zed(name string, e map[string]any) bool {
	if cmd, ok := e["command"].(map[string]any); ok {
		delete(e, "command")
		for from, to := range map[string]string{"path": "command", "args": "args", "env": "env"} {
			if v, ok := cmd[from]; ok {
				if _, set := e[to]; !set {
					e[to] = v
				}
			}
		}
	}
	_, cmd := e["command"]
	_, url := e["url"]
	if !cmd && !url {
		why := "add its command"
		if src, _ := e["source"].(string); src == "extension" {
			why = "it is a Zed extension's server, started with the command the extension supplies: add that command"
		}
		x.r.note("server %q left out: its Zed entry has no \"command\" or \"url\"; %s with `toolgate servers add %s --config FILE -- COMMAND [ARG…]`", name, why, name)
		return false
	}
	if on, ok := e["enabled"].(bool); ok && !on {
		x.turnedOff(name, "Zed", `"enabled": false`, e)
	}
	delete(e, "enabled")
	delete(e, "source")
	delete(e, "settings")
	return true
}

// geminiLists reads Gemini CLI's "mcp" settings: the servers it connects
// ("allowed": only these) and those it never does ("excluded").
func (x *rewriter) geminiLists(raw json.RawMessage) error {
	if len(raw) == 0 {
		return nil
	}
	var mcp struct {
		Allowed  []string `json:"allowed"`
		Excluded []string `json:"excluded"`
	}
	if err := json.Unmarshal(raw, &mcp); err != nil {
		return err
	}
	x.allowed, x.excluded = mcp.Allowed, mcp.Excluded
	return nil
}

// bareVar is a variable written a shell's way, $NAME, which Gemini CLI
// expands in its settings as it does ${NAME}.
var bareVar = regexp.MustCompile(`\$([A-Za-z_][A-Za-z0-9_]*)`)

// gemini turns one of Gemini CLI's server entries into toolgate's, in
// place. Its "url" is an SSE server's (a streamable HTTP one's is
// "httpUrl", renamed with the other clients' keys); "timeout" is a
// request's, in milliseconds (callTimeout); "includeTools" and
// "excludeTools" are noted (toolList); $NAME becomes ${NAME}; an "oauth"
// object keeps what toolgate's has (clientId, clientSecret, scopes, a
// loopback redirectUri: it discovers the rest); a server "mcp.excluded" names, or "mcp.allowed"
// does not, is imported disabled.
func (x *rewriter) gemini(name string, e map[string]any) {
	for k, v := range e {
		e[k] = config.MapStrings(v, func(s string) string { return bareVar.ReplaceAllString(s, "$${$1}") })
	}
	if _, ok := e["url"]; ok && e["type"] == nil && e["httpUrl"] == nil {
		e["type"] = config.TypeSSE
	}
	if ms, ok := e["timeout"].(float64); ok {
		if _, set := e["callTimeout"]; !set {
			e["callTimeout"] = ms / 1000
		}
	}
	x.toolList(name, e, "includeTools", "allow")
	x.toolList(name, e, "excludeTools", "deny")
	if o, ok := e["oauth"].(map[string]any); ok {
		kept := map[string]any{}
		for _, k := range []string{"clientId", "clientSecret", "scopes"} {
			if v, ok := o[k]; ok {
				kept[k] = v
			}
		}
		// A loopback redirectUri is the one its client is registered
		// with (Gemini's default http://localhost:7777/oauth/callback).
		if u, ok := o["redirectUri"].(string); ok && config.CheckRedirectURI(u) == "" {
			kept["redirectUri"] = u
		}
		if on, ok := o["enabled"].(bool); ok && !on || len(kept) == 0 {
			delete(e, "oauth")
		} else {
			e["oauth"] = kept
		}
		x.r.note("server %q: its OAuth login is Gemini CLI's: toolgate logs in itself (the server's authorization server found from its answers), with `toolgate auth login %s` once the gateway runs", name, name)
	}
	switch {
	case slices.Contains(x.excluded, name):
		x.turnedOff(name, "Gemini CLI", `"mcp": {"excluded": […]}`, e)
	case x.allowed != nil && !slices.Contains(x.allowed, name):
		x.turnedOff(name, "Gemini CLI", `not in "mcp": {"allowed": […]}`, e)
	}
	for _, k := range []string{"timeout", "trust", "extensionName", "authProviderType", "targetAudience", "targetServiceAccount"} {
		delete(e, k)
	}
}

// codexJSON reads Codex's config.toml as JSON holding its "mcp_servers"
// (the rest of the file is Codex's own settings). TOML tables have no
// order, so its servers are read in name order.
func codexJSON(path string, data []byte) ([]byte, error) {
	var top map[string]any
	if err := toml.Unmarshal(data, &top); err != nil {
		if de := (*toml.DecodeError)(nil); errors.As(err, &de) {
			row, col := de.Position()
			return nil, fmt.Errorf("%s:%d:%d: invalid TOML: %s", path, row, col, de.Error())
		}
		return nil, fmt.Errorf("%s: invalid TOML: %w", path, err)
	}
	servers, ok := top["mcp_servers"]
	if !ok {
		return nil, fmt.Errorf(`%s: no MCP servers found: Codex keeps them as [mcp_servers.NAME] tables`, path)
	}
	return json.Marshal(map[string]any{"mcp_servers": servers})
}

// codex turns one of Codex's [mcp_servers.NAME] tables into toolgate's
// entry, in place: the variables it passes on (env_vars) become ${NAME}
// values, its bearer token and headers (also those taken from variables)
// become "headers", its start-up and tool timeouts connectTimeout and
// callTimeout, "enabled = false" "disabled": true; the tools it turns on
// or off are noted (toolList), and so is an OAuth login, which toolgate
// makes itself.
func (x *rewriter) codex(name string, e map[string]any) {
	headers, _ := e["headers"].(map[string]any)
	header := func(k string, v any) {
		if headers == nil {
			headers = map[string]any{}
		}
		if _, set := headers[k]; !set {
			headers[k] = v
		}
	}
	if h, ok := e["http_headers"].(map[string]any); ok {
		for k, v := range h {
			header(k, v)
		}
	}
	if h, ok := e["env_http_headers"].(map[string]any); ok {
		for k, v := range h {
			if s, ok := v.(string); ok {
				header(k, "${"+s+"}")
			}
		}
	}
	if v, ok := e["bearer_token_env_var"].(string); ok && v != "" {
		header("Authorization", "Bearer ${"+v+"}")
	} else if v, ok := e["bearer_token"].(string); ok && v != "" {
		header("Authorization", "Bearer "+v)
	}
	if headers != nil {
		e["headers"] = headers
	}
	if vars, ok := e["env_vars"].([]any); ok {
		env, _ := e["env"].(map[string]any)
		if env == nil {
			env = map[string]any{}
		}
		for _, v := range vars {
			if s, ok := v.(string); ok && s != "" {
				if _, set := env[s]; !set {
					env[s] = "${" + s + "}"
				}
			}
		}
		e["env"] = env
	}
	if v, ok := e["startup_timeout_sec"].(float64); ok {
		e["connectTimeout"] = v
	} else if v, ok := e["startup_timeout_ms"].(float64); ok {
		e["connectTimeout"] = v / 1000
	}
	if v, ok := e["tool_timeout_sec"].(float64); ok {
		e["callTimeout"] = v
	}
	if on, ok := e["enabled"].(bool); ok && !on {
		x.turnedOff(name, "Codex", "enabled = false", e)
	}
	x.toolList(name, e, "enabled_tools", "allow")
	x.toolList(name, e, "disabled_tools", "deny")
	if _, ok := e["oauth"]; ok {
		x.r.note("server %q: its OAuth settings are Codex's: toolgate logs in itself, with `toolgate auth login %s` once the gateway runs", name, name)
	}
	for _, k := range []string{"http_headers", "env_http_headers", "bearer_token_env_var", "bearer_token", "env_vars",
		"startup_timeout_sec", "startup_timeout_ms", "tool_timeout_sec", "enabled", "oauth", "scopes", "oauth_resource", "required"} {
		delete(e, k)
	}
}

// isToolgate reports whether an entry starts toolgate itself.
func isToolgate(e map[string]any) bool {
	cmd, _ := e["command"].(string)
	return filepath.Base(cmd) == "toolgate"
}

var refPattern = regexp.MustCompile(`\$\{([^}]*)\}`)

// claudeProjectDir is the variable Claude Code sets, for the servers it
// starts, to the folder of the project open: Claude Code's
// ${workspaceFolder}.
const claudeProjectDir = "CLAUDE_PROJECT_DIR"

// rewrite replaces the client's variable references in every string of v.
func (x *rewriter) rewrite(server string, v any) any {
	return config.MapStrings(v, func(t string) string {
		return refPattern.ReplaceAllStringFunc(t, func(ref string) string {
			body := ref[2 : len(ref)-1]
			switch {
			case strings.HasPrefix(body, "input:"):
				id := strings.TrimPrefix(body, "input:")
				in := x.inputs[id]
				if in == nil {
					in = &Input{ID: id, Var: config.InputVar(id)}
					x.r.note("server %q refers to ${input:%s}, which the file's inputs do not describe", server, id)
				}
				if !slices.ContainsFunc(x.r.Inputs, func(i Input) bool { return i.ID == id }) {
					x.r.Inputs = append(x.r.Inputs, *in)
				}
				return "${" + in.Var + "}"
			case strings.HasPrefix(body, "env:"):
				return "${" + strings.TrimPrefix(body, "env:") + "}"
			case body == "workspaceFolder" || body == "workspaceRoot":
				x.noFolder(server, body, x.workspace)
				return x.workspace
			case x.r.Format == ClaudeCode && (body == claudeProjectDir || strings.HasPrefix(body, claudeProjectDir+":-")):
				// Claude Code sets it to the project's folder, so its
				// default never applies.
				x.noFolder(server, claudeProjectDir, x.workspace)
				return x.workspace
			case body == "workspaceFolderBasename":
				x.noFolder(server, body, filepath.Base(x.workspace))
				return filepath.Base(x.workspace)
			case body == "userHome":
				return "${HOME}"
			case body == "pathSeparator" || body == "/":
				return string(filepath.Separator)
			}
			return ref
		})
	})
}

// validName makes name a valid server name (config.ASCIIName).
func validName(name string) string { return config.ASCIIName(name) }

// orderedEntries reads a JSON object's members in the order written.
type orderedEntries []struct {
	name  string
	value json.RawMessage
}

func (o *orderedEntries) UnmarshalJSON(b []byte) error {
	dec := json.NewDecoder(bytes.NewReader(b))
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return fmt.Errorf("got %s, want an object", strings.TrimSpace(string(b[:min(len(b), 20)])))
	}
	for dec.More() {
		t, err := dec.Token()
		if err != nil {
			return err
		}
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return err
		}
		*o = append(*o, struct {
			name  string
			value json.RawMessage
		}{t.(string), v})
	}
	return nil
}

// Named is a server a config has already: its name, its entry, and the
// file it is in.
type Named struct {
	Name  string
	Entry json.RawMessage
	From  string
}

// SeparateCaseTwins changes rs, the files of one import in their order,
// so that no two servers' names differ only in case, which one config
// cannot hold (config: tool IDs are matched in any case): two clients'
// files with "Memory" and "memory" made a config that did not load, and
// `--into` refused it after the files were read. A server whose name
// differs only in case from one before it (in taken, the config imported
// into, or in an earlier file) is imported once when its entry is the
// same, else under its name and its file's format ("memory-cursor"); a
// note says which. Servers of the very same name are left to config.Merge
// (the later replaces the earlier, a conflict said).
func SeparateCaseTwins(taken []Named, rs []*Result) ([]string, error) {
	first := map[string]Named{} // lower case → the first server so
	used := map[string]bool{}   // every name of the files and the names given, lower case
	into := map[string]string{} // lower case → the name in the config imported into
	for _, t := range taken {
		first[strings.ToLower(t.Name)] = t
		into[strings.ToLower(t.Name)] = t.Name
	}
	for _, r := range rs {
		for _, name := range r.Servers {
			used[strings.ToLower(name)] = true
		}
	}
	// free says whether a server may be given the name alt: no server of
	// the files and no other name given has it in any case, and the config
	// imported into has it, if at all, as written: that server is replaced
	// as one of the very same name is, so an import run again gives
	// "memory-cursor" again (it made "memory-cursor-2", a copy, each time).
	free := func(alt string) bool {
		in, ok := into[strings.ToLower(alt)]
		return !used[strings.ToLower(alt)] && (!ok || in == alt)
	}
	var notes []string
	for _, r := range rs {
		var doc struct {
			MCPServers map[string]json.RawMessage `json:"mcpServers"`
		}
		if err := json.Unmarshal(r.Doc.Data, &doc); err != nil {
			return nil, fmt.Errorf("%s: %w", r.Doc.Path, err)
		}
		changed := false
		var servers []string
		for _, name := range r.Servers {
			entry := doc.MCPServers[name]
			twin, ok := first[strings.ToLower(name)]
			switch {
			case !ok:
				first[strings.ToLower(name)] = Named{name, entry, r.Doc.Path}
			case twin.Name == name: // config.Merge's, or --into's, to replace
			case config.SameEntry(twin.Entry, entry):
				delete(doc.MCPServers, name)
				changed = true
				notes = append(notes, fmt.Sprintf("server %q of %s is the same as server %q of %s: kept once, as %q", name, r.Doc.Path, twin.Name, twin.From, twin.Name))
				continue
			default:
				alt := validName(name + "-" + r.Format)
				for i := 2; !free(alt); i++ {
					alt = validName(fmt.Sprintf("%s-%s-%d", name, r.Format, i))
				}
				used[strings.ToLower(alt)] = true
				delete(doc.MCPServers, name)
				doc.MCPServers[alt] = entry
				changed = true
				notes = append(notes, fmt.Sprintf("server %q of %s is imported as %q: server %q of %s differs from it only in case, and one config cannot hold both (tool IDs are matched in any case); rename either as you like", name, r.Doc.Path, alt, twin.Name, twin.From))
				first[strings.ToLower(alt)] = Named{alt, entry, r.Doc.Path}
				name = alt
			}
			servers = append(servers, name)
		}
		if changed {
			data, err := json.MarshalIndent(map[string]any{"mcpServers": doc.MCPServers}, "", "  ")
			if err != nil {
				return nil, fmt.Errorf("%s: %w", r.Doc.Path, err)
			}
			r.Doc.Data, r.Servers = data, servers
		}
	}
	return notes, nil
}
