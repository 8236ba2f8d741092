package config

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/toolgate/toolgate/internal/storage"
)

// env is a fixed environment for tests.
func env(kv ...string) func(string) (string, bool) {
	m := map[string]string{}
	for i := 0; i+1 < len(kv); i += 2 {
		m[kv[i]] = kv[i+1]
	}
	return func(k string) (string, bool) { v, ok := m[k]; return v, ok }
}

func sec(n float64) Duration { return Duration{time.Duration(n * float64(time.Second))} }

func TestParseGood(t *testing.T) {
	dir := t.TempDir()
	cfgPath := filepath.Join(dir, "toolgate.json")
	tests := []struct {
		name     string
		in       string
		env      func(string) (string, bool)
		servers  []Server
		settings func(*Settings)
	}{
		{
			name:    "stdio minimal",
			in:      `{"mcpServers": {"memory": {"command": "npx", "args": ["-y", "@modelcontextprotocol/server-memory"]}}}`,
			servers: []Server{{Name: "memory", Type: TypeStdio, Command: "npx", Args: []string{"-y", "@modelcontextprotocol/server-memory"}}},
		},
		{
			name: "url infers http, aliases, sse, per-server timeouts",
			in: `{"mcpServers": {
				"a": {"url": "https://a.example/mcp"},
				"b": {"type": "streamable-http", "url": "http://127.0.0.1:9/mcp", "connectTimeout": 5},
				"c": {"type": "streamableHttp", "url": "http://x/mcp", "callTimeout": "1m30s"},
				"d": {"type": "SSE", "url": "https://d.example/sse", "headers": {"X-Key": "k"}, "keepAlive": "15s"}}}`,
			servers: []Server{
				{Name: "a", Type: TypeHTTP, URL: "https://a.example/mcp"},
				{Name: "b", Type: TypeHTTP, URL: "http://127.0.0.1:9/mcp", ConnectTimeout: sec(5)},
				{Name: "c", Type: TypeHTTP, URL: "http://x/mcp", CallTimeout: sec(90)},
				{Name: "d", Type: TypeSSE, URL: "https://d.example/sse", Headers: map[string]string{"X-Key": "k"}, KeepAlive: sec(15)},
			},
		},
		{
			name: "oauth: pre-registered client with a secret from the environment, scopes; empty oauth object",
			in: `{"mcpServers": {
				"a": {"url": "https://a.example/mcp", "oauth": {"clientId": "toolgate-cli", "clientSecret": "${A_SECRET}", "scopes": ["read", "write"]}},
				"b": {"type": "sse", "url": "https://b.example/sse", "oauth": {}}}}`,
			env: env("A_SECRET", "s3cr3t"),
			servers: []Server{
				{Name: "a", Type: TypeHTTP, URL: "https://a.example/mcp", OAuth: &OAuth{ClientID: "toolgate-cli", ClientSecret: "s3cr3t", Scopes: []string{"read", "write"}}},
				{Name: "b", Type: TypeSSE, URL: "https://b.example/sse", OAuth: &OAuth{}},
			},
		},
		{
			name: "disabled servers are left out, relative cwd resolves against the file",
			in: `{"mcpServers": {"on": {"command": "node", "cwd": "servers"}, "off": {"command": "x", "disabled": true}},
				"toolgate": {"connectTimeout": "10s", "callTimeout": 0.5}}`,
			servers: []Server{{Name: "on", Type: TypeStdio, Command: "node", Cwd: filepath.Join(dir, "servers"), ConnectTimeout: sec(10), CallTimeout: sec(0.5)}},
			settings: func(s *Settings) {
				s.ConnectTimeout, s.CallTimeout = sec(10), sec(0.5)
			},
		},
		{
			name: "the section's keepAlive for remote servers without their own",
			in: `{"mcpServers": {"a": {"url": "https://a.example/mcp"}, "b": {"url": "https://b.example/mcp", "keepAlive": 5}},
				"toolgate": {"keepAlive": "1m"}}`,
			servers: []Server{
				{Name: "a", Type: TypeHTTP, URL: "https://a.example/mcp", KeepAlive: sec(60)},
				{Name: "b", Type: TypeHTTP, URL: "https://b.example/mcp", KeepAlive: sec(5)},
			},
			settings: func(s *Settings) { s.KeepAlive = sec(60) },
		},
		{
			name: "the section's maxResultBytes for servers without their own",
			in: `{"mcpServers": {"a": {"command": "x"}, "b": {"command": "x", "maxResultBytes": 1000000}},
				"toolgate": {"maxResultBytes": 20000}}`,
			servers: []Server{
				{Name: "a", Type: TypeStdio, Command: "x", MaxResultBytes: 20000},
				{Name: "b", Type: TypeStdio, Command: "x", MaxResultBytes: 1000000},
			},
			settings: func(s *Settings) { s.MaxResultBytes = 20000 },
		},
		{
			name: "expansion everywhere Claude Code expands",
			in: `{"mcpServers": {"s": {"command": "${BIN}", "args": ["--db", "${DB:-/tmp/db}", "$HOME", "${EMPTY:-dflt}", "${EMPTY}"],
				"env": {"TOKEN": "${TOKEN}", "PORT": 8080, "DEBUG": true}, "cwd": "${TOOLGATE_CONFIG_DIR}/w"}}}`,
			env: env("BIN", "/usr/bin/srv", "TOKEN", "s3cr3t", "EMPTY", ""),
			servers: []Server{{Name: "s", Type: TypeStdio, Command: "/usr/bin/srv", Args: []string{"--db", "/tmp/db", "$HOME", "dflt", ""},
				Env: map[string]string{"TOKEN": "s3cr3t", "PORT": "8080", "DEBUG": "true"}, Cwd: filepath.Join(dir, "w")}},
		},
		{
			name: "toolgate section",
			in: `{"mcpServers": {"m": {"command": "x"}}, "toolgate": {
				"maxConcurrentConnects": 2,
				"search": {"mode": "bm25", "keywordWeight": 0.3, "defaultLimit": 7, "maxLimit": 20, "minConfidence": 0.2, "stepWeight": 0},
				"learn": {"enabled": false},
				"embed": {"variant": "int8", "modelDir": "models", "ortLib": "/opt/ort/libonnxruntime.so.1", "threads": 2, "keepUnused": "168h"},
				"http": {"addr": "127.0.0.1:8080", "allowedOrigins": ["http://localhost:3000"], "allowedHosts": ["localhost:8080"], "maxBodyBytes": 1024},
				"telemetry": {"otlpEndpoint": "${OTLP:-http://localhost:4318}"},
				"dataDir": "${DATA:-data}"}}`,
			servers: []Server{{Name: "m", Type: TypeStdio, Command: "x"}},
			settings: func(s *Settings) {
				s.MaxConcurrentConnects = 2
				minConf, steps, off := 0.2, 0.0, false
				s.Search = SearchSettings{Mode: "bm25", KeywordWeight: 0.3, VectorWeight: 0.7, DefaultLimit: 7, MaxLimit: 20, MinConfidence: &minConf, StepWeight: &steps}
				s.Learn = LearnSettings{Enabled: &off}
				s.Embed = EmbedSettings{Variant: "int8", ModelDir: filepath.Join(dir, "models"), ORTLib: "/opt/ort/libonnxruntime.so.1", Threads: 2, KeepUnused: Duration{7 * 24 * time.Hour}}
				s.HTTP = HTTPSettings{Addr: "127.0.0.1:8080", AllowedOrigins: []string{"http://localhost:3000"}, AllowedHosts: []string{"localhost:8080"}, MaxBodyBytes: 1024}
				s.Telemetry = TelemetrySettings{OTLPEndpoint: "http://localhost:4318"}
				s.DataDir = filepath.Join(dir, "data")
			},
		},
		// The HTTP front's address and names expand, as otlpEndpoint
		// does: they were taken as written ("${ADDR:-…}" was "not
		// host:port").
		{
			name: "variables in the HTTP front's address and names",
			in: `{"mcpServers": {"m": {"command": "x"}}, "toolgate": {"http": {"addr": "${TG_ADDR:-127.0.0.1:8931}",
				"allowedOrigins": ["https://${PUBLIC_HOST}"], "allowedHosts": ["${PUBLIC_HOST}:8931", "localhost"]}}}`,
			env:     env("PUBLIC_HOST", "gw.example"),
			servers: []Server{{Name: "m", Type: TypeStdio, Command: "x"}},
			settings: func(s *Settings) {
				s.HTTP = HTTPSettings{Addr: "127.0.0.1:8931", AllowedOrigins: []string{"https://gw.example"}, AllowedHosts: []string{"gw.example:8931", "localhost"}}
			},
		},
		{
			name: "security, audit, limits and keysFile",
			in: `{"mcpServers": {"m": {"command": "x"}}, "toolgate": {
				"keysFile": "secrets/keys.jsonl",
				"security": {"onDefinitionChange": "warn", "approvedTools": ["internal__*", "m__t"], "maxTextLength": 500},
				"audit": {"arguments": "masked", "maxFileBytes": 1000000, "maxFiles": 3, "minRetention": "168h"},
				"limits": {"requestsPerSecond": 2.5, "burst": 5, "maxStreams": 8, "maxInFlight": 4, "queueTimeout": "3s", "refusedPerMinute": 30, "refusedBurst": 10}}}`,
			servers: []Server{{Name: "m", Type: TypeStdio, Command: "x"}},
			settings: func(s *Settings) {
				s.KeysFile = filepath.Join(dir, "secrets", "keys.jsonl")
				s.Security = SecuritySettings{OnDefinitionChange: "warn", ApprovedTools: []string{"internal__*", "m__t"}, MaxTextLength: 500}
				s.Audit = AuditSettings{Arguments: "masked", MaxFileBytes: 1000000, MaxFiles: 3, MinRetention: Duration{168 * time.Hour}}
				s.Limits = LimitSettings{RequestsPerSecond: 2.5, Burst: 5, MaxStreams: 8, MaxInFlight: 4, QueueTimeout: sec(3), RefusedPerMinute: 30, RefusedBurst: 10}
			},
		},
		{
			name:    "only vectorWeight given sets keywordWeight; an unset defaultLimit stays unset",
			in:      `{"mcpServers": {"m": {"command": "x"}}, "toolgate": {"search": {"vectorWeight": 1, "maxLimit": 3}}}`,
			servers: []Server{{Name: "m", Type: TypeStdio, Command: "x"}},
			settings: func(s *Settings) {
				s.Search.KeywordWeight, s.Search.VectorWeight, s.Search.MaxLimit = 0, 1, 3
			},
		},
		{
			name:    "defaultLimit above the default maximum, maxLimit unset (the gateway raises its maximum)",
			in:      `{"mcpServers": {"m": {"command": "x"}}, "toolgate": {"search": {"defaultLimit": 80}}}`,
			servers: []Server{{Name: "m", Type: TypeStdio, Command: "x"}},
			settings: func(s *Settings) {
				s.Search.DefaultLimit = 80
			},
		},
		{
			name: "lazy, idle timeout, restart policy with per-server overrides",
			in: `{"mcpServers": {
				"a": {"command": "x", "lazy": true, "idleTimeout": "10m"},
				"b": {"command": "x", "restart": {"delays": []}},
				"c": {"command": "x", "restart": {"stableAfter": 30}},
				"d": {"command": "x", "restart": {"delays": ["1s", 0.5], "stableAfter": "2m"}}},
				"toolgate": {"restart": {"delays": ["3s"], "stableAfter": "5m"}}}`,
			servers: []Server{
				{Name: "a", Type: TypeStdio, Command: "x", Lazy: true, IdleTimeout: sec(600)},
				{Name: "b", Type: TypeStdio, Command: "x", Restart: &Restart{Delays: []Duration{}, StableAfter: sec(300)}},
				{Name: "c", Type: TypeStdio, Command: "x", Restart: &Restart{Delays: []Duration{sec(3)}, StableAfter: sec(30)}},
				{Name: "d", Type: TypeStdio, Command: "x", Restart: &Restart{Delays: []Duration{sec(1), sec(0.5)}, StableAfter: sec(120)}},
			},
			settings: func(s *Settings) {
				s.Restart = Restart{Delays: []Duration{sec(3)}, StableAfter: sec(300)}
			},
		},
		{
			name:    "empty restart delays in the toolgate section mean never restart",
			in:      `{"mcpServers": {"m": {"command": "x"}}, "toolgate": {"restart": {"delays": []}}}`,
			servers: []Server{{Name: "m", Type: TypeStdio, Command: "x"}},
			settings: func(s *Settings) {
				s.Restart.Delays = []Duration{}
			},
		},
		{
			name: "profiles and management",
			in: `{"mcpServers": {"memory": {"command": "x"}, "filesystem": {"command": "y"}},
				"toolgate": {"profiles": {
					"kg": {"servers": ["memory"], "tools": {"deny": ["memory__delete_*"]}},
					"readers": {"tools": {"allow": ["*__read_*", "toolgate__list_*"]}},
					"ops": {"servers": ["toolgate", "filesystem"]},
					"reviewer": {"readOnly": true, "tools": {"deny": ["filesystem__*"]}}},
				"management": {"allowConfigChanges": true}}}`,
			servers: []Server{{Name: "filesystem", Type: TypeStdio, Command: "y"}, {Name: "memory", Type: TypeStdio, Command: "x"}},
			settings: func(s *Settings) {
				s.Profiles = map[string]Profile{
					"kg":       {Servers: []string{"memory"}, Tools: ToolGlobs{Deny: []string{"memory__delete_*"}}},
					"readers":  {Tools: ToolGlobs{Allow: []string{"*__read_*", "toolgate__list_*"}}},
					"ops":      {Servers: []string{"toolgate", "filesystem"}},
					"reviewer": {ReadOnly: true, Tools: ToolGlobs{Deny: []string{"filesystem__*"}}},
				}
				s.Management.AllowConfigChanges = true
			},
		},
		{
			name:    "BOM, null toolgate section, unknown keys tolerated",
			in:      "\xef\xbb\xbf" + `{"globalShortcut": "x", "mcpServers": {"A-1_b": {"command": "x", "autoApprove": [], "timeout": 5, "envFile": ".env"}}, "toolgate": null}`,
			servers: []Server{{Name: "A-1_b", Type: TypeStdio, Command: "x"}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			lookup := tt.env
			if lookup == nil {
				lookup = env()
			}
			f, err := Parse([]byte(tt.in), cfgPath, lookup)
			if err != nil {
				t.Fatalf("Parse: %v", err)
			}
			if diff := cmp.Diff(tt.servers, f.Servers()); diff != "" {
				t.Errorf("Servers() mismatch (-want +got):\n%s", diff)
			}
			var want Settings // unset fields stay zero: the libraries apply their defaults
			if tt.settings != nil {
				tt.settings(&want)
			}
			if diff := cmp.Diff(want, f.Toolgate); diff != "" {
				t.Errorf("Toolgate mismatch (-want +got):\n%s", diff)
			}
			if err := f.Validate(); err != nil {
				t.Errorf("Validate after Parse: %v", err)
			}
		})
	}
}

// A server entry that refers to a variable toolgate's environment does not
// set is valid: the server records the variables (expanded to "") and
// cannot start until they are set; the other servers run. Validation does
// not judge the fields they left empty; a disabled server keeps them as
// written.
func TestParseUnset(t *testing.T) {
	in := `{"mcpServers": {
		"gh": {"command": "npx", "args": ["-y", "gh-server"], "env": {"GITHUB_TOKEN": "${GH_TOKEN}", "LEVEL": "${LEVEL:-info}"}},
		"api": {"url": "${API_URL}", "headers": {"Authorization": "Bearer ${API_KEY}"}},
		"ok": {"command": "x", "env": {"HOME_DIR": "${HOME}"}},
		"off": {"command": "x", "env": {"T": "${OFF_TOKEN}"}, "disabled": true}}}`
	f, err := Parse([]byte(in), "unset.json", env("HOME", "/home/u"))
	if err != nil {
		t.Fatalf("Parse: %v", err)
	}
	gh, api, ok, off := f.MCPServers["gh"], f.MCPServers["api"], f.MCPServers["ok"], f.MCPServers["off"]
	if !slices.Equal(gh.Unset, []UnsetVar{{Name: "GH_TOKEN", Field: "env.GITHUB_TOKEN"}}) || gh.Env["GITHUB_TOKEN"] != "" || gh.Env["LEVEL"] != "info" {
		t.Errorf("gh: unset %v, env %v", gh.Unset, gh.Env)
	}
	if !slices.Equal(api.Unset, []UnsetVar{{Name: "API_KEY", Field: "headers.Authorization"}, {Name: "API_URL", Field: "url"}}) || api.Headers["Authorization"] != "Bearer " || api.Type != TypeHTTP {
		t.Errorf("api: unset %v, headers %v", api.Unset, api.Headers)
	}
	if ok.Unset != nil || ok.UnsetError() != nil || off.Unset != nil || off.Env["T"] != "${OFF_TOKEN}" {
		t.Errorf("ok %v, off %v %v", ok.Unset, off.Unset, off.Env)
	}
	want := "variable ${GH_TOKEN} (env.GITHUB_TOKEN) is not set in toolgate's environment: set it where toolgate starts (the client's config for a stdio gateway, the service's environment) and restart toolgate, or give a default in the config, ${GH_TOKEN:-value}"
	if err := gh.UnsetError(); err == nil || err.Error() != want {
		t.Errorf("gh.UnsetError() = %v\nwant %s", err, want)
	}
	if err := api.UnsetError(); err == nil || !strings.HasPrefix(err.Error(), "variables ${API_KEY} (headers.Authorization), ${API_URL} (url) are not set") {
		t.Errorf("api.UnsetError() = %v", err)
	}
	// Several in one map come in one order, parse after parse (a reload
	// must not take the entry for a changed one).
	many := `{"mcpServers": {"m": {"command": "x", "env": {"A": "${X1}", "B": "${X2}", "C": "${X3}", "D": "${X4}"}}}}`
	first, err := Parse([]byte(many), "m.json", env())
	for i := 0; err == nil && i < 20; i++ {
		again, err2 := Parse([]byte(many), "m.json", env())
		if err2 != nil || first.MCPServers["m"].Changes(again.MCPServers["m"]) != nil {
			t.Fatalf("parse %d: %v, changes %v (%v, %v)", i, err2, first.MCPServers["m"].Changes(again.MCPServers["m"]), first.MCPServers["m"].Unset, again.MCPServers["m"].Unset)
		}
	}
	if err != nil || len(first.MCPServers["m"].Unset) != 4 {
		t.Fatalf("four unset: %v, %v", err, first.MCPServers["m"].Unset)
	}
	// The same entry once the variable is set is a changed entry (a
	// restart of toolgate with it reads the file anew anyway).
	g2, err := Parse([]byte(in), "unset.json", env("HOME", "/home/u", "GH_TOKEN", "t0k3n-value", "API_URL", "https://h/mcp", "API_KEY", "k"))
	if err != nil || g2.MCPServers["gh"].Unset != nil || !slices.Contains(gh.Changes(g2.MCPServers["gh"]), "unset") {
		t.Errorf("with the variables set: %v, %v, changes %v", err, g2.MCPServers["gh"].Unset, gh.Changes(g2.MCPServers["gh"]))
	}
}

// TestParseBad asserts that every problem is reported, each naming where it is
// (server and field) and carrying the words a user needs to fix it.
func TestParseBad(t *testing.T) {
	type want struct{ where, contains string }
	tests := []struct {
		name string
		in   string
		env  func(string) (string, bool)
		want []want // in the order they are reported
	}{
		{"no mcpServers", `{"globalShortcut": ""}`, nil, []want{{"mcpServers", "add at least one"}}},
		{"VS Code servers key", `{"servers": {}}`, nil, []want{{"mcpServers", `rename it to "mcpServers"`}}},
		{"mcpServers not an object", `{"mcpServers": []}`, nil, []want{{"mcpServers", "got an array, want an object"}}},
		{"entry not an object", `{"mcpServers": {"a": "npx"}}`, nil, []want{{`mcpServers["a"]`, "got a string, want an object"}}},
		{"bad names", `{"mcpServers": {"my server": {"command": "x"}, "a__b": {"command": "x"}, "_a": {"command": "x"}, "": {"command": "x"}}}`, nil, []want{
			{`mcpServers[""]`, "a server needs a name"},
			{`mcpServers["_a"]`, `must start with a letter or digit`},
			{`mcpServers["a__b"]`, `must not contain "__"`},
			{`mcpServers["my server"]`, `use letters, digits, "_" and "-"`},
		}},
		// Tool IDs start with the server's name and are found in any
		// case: a pair differing in case only is refused, both named.
		{"names differing in case", `{"mcpServers": {"everything": {"command": "x"}, "Everything": {"command": "x"}, "EVERYTHING": {"command": "x"}, "other": {"command": "x"}}}`, nil, []want{
			{`mcpServers["Everything"]`, `"Everything" and server "EVERYTHING" differ only in case: tool IDs start with the server's name and are matched in any case (EVERYTHING__echo is also Everything__echo)`},
			{`mcpServers["everything"]`, `"everything" and server "EVERYTHING" differ only in case`},
		}},
		{"names differing in case, beside a decoding error", `{"mcpServers": {"a": {"command": 1}, "A": {"command": "x"}}}`, nil, []want{
			{`mcpServers["a"]`, `"a" and server "A" differ only in case`},
			{`mcpServers["a"].command`, "got a number, want a string"},
		}},
		{"reserved name", `{"mcpServers": {"toolgate": {"command": "toolgate", "args": ["serve"]}}}`, nil, []want{{`mcpServers["toolgate"]`, `"toolgate" is reserved for the gateway's own management tools`}}},
		// In any case, as two servers' names may not differ only in case.
		{"reserved name in another case", `{"mcpServers": {"Toolgate": {"command": "x"}}}`, nil, []want{{`mcpServers["Toolgate"]`, `the name "Toolgate" is reserved for the gateway's own management tools (toolgate__list_servers, …) in any case (tool IDs are matched in any case: Toolgate__list_servers would be taken for toolgate__list_servers): choose another name, e.g. "Toolgate-server"`}}},
		{"bad profiles", `{"mcpServers": {"memory": {"command": "x"}}, "toolgate": {"profiles": {
			"kg": {"servers": ["memroy"], "tools": {"deny": ["delete_*", "memory__[", "github__*"], "alow": []}},
			"a b": {"servers": [], "tools": {"allow": []}},
			"x": "memory",
			"only": {"servers": ["memory"], "tools": {"allow": ["toolgate__*"]}, "server": 1},
			"ro": {"readOnly": "yes"},
			"ro2": {"readonly": true}}}}`, nil, []want{
			{`toolgate.profiles.kg.servers[0]`, `no server named "memroy" in mcpServers: use one of "memory"`},
			{`toolgate.profiles.kg.tools.alow`, `did you mean "allow"?`},
			{`toolgate.profiles.kg.tools.deny[0]`, `"delete_*" can never match`},
			{`toolgate.profiles.kg.tools.deny[1]`, `"memory__[" is not a valid glob`},
			{`toolgate.profiles.kg.tools.deny[2]`, `names server "github", which is not in mcpServers`},
			{`toolgate.profiles.only.server`, `did you mean "servers"?`},
			{`toolgate.profiles.only.tools.allow[0]`, `not among the profile's servers (memory)`},
			{`toolgate.profiles.ro.readOnly`, `got a string, want true or false`},
			{`toolgate.profiles.ro2.readonly`, `did you mean "readOnly"?`},
			{`toolgate.profiles.x`, "got a string, want an object"},
			{`toolgate.profiles["a b"]`, "invalid profile name"},
			{`toolgate.profiles["a b"].servers`, `is empty`},
			{`toolgate.profiles["a b"].tools.allow`, `is empty, so the profile would show no tool`},
		}},
		// A profile written before any server: "use one of  (or …".
		{"profiles before any server", `{"mcpServers": {}, "toolgate": {"profiles": {"kg": {"servers": ["memory"], "tools": {"deny": ["memory__delete_*"]}}}}}`, nil, []want{
			{`toolgate.profiles.kg.servers[0]`, `no server named "memory" in mcpServers: mcpServers has no server yet: add it there first (or "toolgate" for the management tools)`},
			{`toolgate.profiles.kg.tools.deny[0]`, `"memory__delete_*" names server "memory", which is not in mcpServers: mcpServers has no server yet: add it there first`},
		}},
		{"management", `{"mcpServers": {"a": {"command": "x"}}, "toolgate": {"management": {"allowConfigChange": true}}}`, nil, []want{
			{`toolgate.management.allowConfigChange`, `did you mean "allowConfigChanges"?`},
		}},
		{"long name", `{"mcpServers": {"` + strings.Repeat("a", 65) + `": {"command": "x"}}}`, nil, []want{{`mcpServers["aaaa`, "at most 64"}}},
		{"neither command nor url", `{"mcpServers": {"a": {"args": ["x"]}}}`, nil, []want{{`mcpServers["a"]`, `needs "command"`}}},
		{"both command and url", `{"mcpServers": {"a": {"command": "x", "url": "http://h/"}}}`, nil, []want{{`mcpServers["a"]`, `has both "command" and "url"`}}},
		{"unknown type", `{"mcpServers": {"a": {"type": "grpc", "url": "http://h/"}}}`, nil, []want{{`mcpServers["a"].type`, `unknown type "grpc": use "stdio", "http", "sse"`}}},
		// An entry whose type is not settled stopped there: its other
		// problems showed on the next run. The form of each key and the
		// keys every type shares are checked; whether a key belongs to
		// the type waits for it, and "both" says what each choice drops.
		{"the rest of an entry whose type is not settled", `{"mcpServers": {
			"both": {"command": "npx ", "url": "x.example.com/mcp", "args": ["a"], "headers": {"Bad Name": "v"}, "callTimeout": "-5s"},
			"neither": {"env": {"A=B": "1"}, "idleTimeout": "5m", "descripton": "x"},
			"weird": {"type": "websocket", "url": "https://x.example/mcp", "connectTimeout": "-1s", "headers": {"X": "a\nb"}}}}`, nil, []want{
			{`mcpServers["both"]`, `has both "command" and "url": keep "command" to start a local server (stdio) or "url" for a remote one (http/sse); keeping "command" means removing "headers" too; keeping "url" means removing "args" too`},
			{`mcpServers["both"].callTimeout`, "-5s is negative"},
			{`mcpServers["both"].command`, "leading or trailing spaces"},
			{`mcpServers["both"].headers["Bad Name"]`, "invalid header name"},
			{`mcpServers["both"].url`, `has no scheme: write "https://x.example.com/mcp"`},
			{`mcpServers["neither"]`, `needs "command"`},
			{`mcpServers["neither"].descripton`, `did you mean "description"?`},
			{`mcpServers["neither"].env["A=B"]`, "invalid variable name"},
			{`mcpServers["neither"].idleTimeout`, "only applies to lazy servers"},
			{`mcpServers["weird"].connectTimeout`, "-1s is negative"},
			{`mcpServers["weird"].headers.X`, "line break"},
			{`mcpServers["weird"].type`, `unknown type "websocket"`},
		}},
		{"stdio without command", `{"mcpServers": {"a": {"type": "stdio", "command": " "}}}`, nil, []want{{`mcpServers["a"].command`, `needs a command`}}},
		{"stdio with url and headers", `{"mcpServers": {"a": {"type": "stdio", "command": "x", "url": "http://h/", "headers": {"A": "b"}}}}`, nil, []want{
			{`mcpServers["a"].headers`, "only sent to http and sse"},
			{`mcpServers["a"].url`, "only used by http and sse"},
		}},
		{"http without url", `{"mcpServers": {"a": {"type": "http"}}}`, nil, []want{{`mcpServers["a"].url`, `type "http" needs a url`}}},
		// Not "it has a url": it has none.
		{"sse with a command", `{"mcpServers": {"a": {"type": "sse", "command": "node"}}}`, nil, []want{
			{`mcpServers["a"].command`, `is only used by stdio servers, but this one is "sse" (its "type" says so; without "type", "command" makes a stdio server): remove "command"`},
			{`mcpServers["a"].url`, `type "sse" needs a url`},
		}},
		{"relative and non-http urls", `{"mcpServers": {"a": {"url": "localhost:3000/mcp"}, "b": {"type": "sse", "url": "ftp://h/x"}, "c": {"url": "/mcp"}, "d": {"url": "mcp.example.com/mcp"}}}`, nil, []want{
			// Written without the scheme: the URL meant, http on this machine.
			{`mcpServers["a"].url`, `"localhost:3000/mcp" has no scheme: write "http://localhost:3000/mcp"`},
			{`mcpServers["b"].url`, `"ftp://h/x" is not an absolute http(s) URL`},
			{`mcpServers["c"].url`, `is not an absolute http(s) URL`},
			{`mcpServers["d"].url`, `"mcp.example.com/mcp" has no scheme: write "https://mcp.example.com/mcp"`},
		}},
		{"oauth problems", `{"mcpServers": {
			"a": {"command": "x", "oauth": {"clientId": "c"}},
			"b": {"url": "http://h/", "headers": {"authorization": "Bearer k"}, "oauth": {"clientSecret": "s", "scopes": ["read write", ""]}},
			"c": {"url": "http://h/", "oauth": {"clientId": " c"}},
			"d": {"url": "http://h/", "oauth": ["c"]},
			"e": {"url": "http://h/", "oauth": {"clientID": "c", "scopes": "read"}}}}`, nil, []want{
			{`mcpServers["a"].oauth`, "only used by http and sse servers"},
			{`mcpServers["b"].oauth`, `static "Authorization" header both authorize`},
			{`mcpServers["b"].oauth.clientSecret`, `needs "clientId"`},
			{`mcpServers["b"].oauth.scopes[0]`, `"read write" is not a scope`},
			{`mcpServers["b"].oauth.scopes[1]`, `"" is not a scope`},
			{`mcpServers["c"].oauth.clientId`, "leading or trailing spaces"},
			{`mcpServers["d"].oauth`, "got an array, want an object"},
			{`mcpServers["e"].oauth.clientID`, `did you mean "clientId"?`},
			{`mcpServers["e"].oauth.scopes`, "got a string, want an array of strings"},
		}},
		// An unset ${LINEAR_SECRET} in "oauth" hid the conflict with a
		// static header: `toolgate servers` called the file valid.
		{"oauth with a variable unset beside a static header", `{"mcpServers": {"l": {"url": "https://h/mcp", "headers": {"Authorization": "Bearer k"}, "oauth": {"clientId": "c", "clientSecret": "${LINEAR_SECRET}"}}}}`, env(), []want{
			{`mcpServers["l"].oauth`, `static "Authorization" header both authorize`},
		}},
		{"http with stdio fields", `{"mcpServers": {"a": {"type": "http", "url": "http://h/", "args": ["x"], "env": {"A": "b"}, "cwd": "."}}}`, nil, []want{
			{`mcpServers["a"].args`, "only used by stdio servers"},
			{`mcpServers["a"].cwd`, "only used by stdio servers"},
			{`mcpServers["a"].env`, "only used by stdio servers"},
		}},
		{"wrong JSON types", `{"mcpServers": {"a": {"command": 1, "args": "x y", "env": ["A"], "disabled": "yes", "cwd": false}, "b": {"command": "x", "args": ["ok", 2], "env": {"A": {}}}}}`, nil, []want{
			{`mcpServers["a"].args`, "got a string, want an array of strings"},
			{`mcpServers["a"].command`, "got a number, want a string"},
			{`mcpServers["a"].cwd`, "got a boolean, want a string"},
			{`mcpServers["a"].disabled`, "got a string, want true or false"},
			{`mcpServers["a"].env`, "got an array, want an object of strings"},
			{`mcpServers["b"].args[1]`, "got a number, want a string"},
			{`mcpServers["b"].env.A`, "got an object, want a string"},
		}},
		{"bad env and header names", `{"mcpServers": {"a": {"command": "x", "env": {"A=B": "1"}}, "b": {"url": "http://h/", "headers": {"Bad Header": "v", "X-Ok": "a\nb"}}}}`, nil, []want{
			{`mcpServers["a"].env["A=B"]`, "invalid variable name"},
			{`mcpServers["b"].headers.X-Ok`, "line break"},
			{`mcpServers["b"].headers["Bad Header"]`, "invalid header name"},
		}},
		// An unset variable is not a problem of the file (TestParseUnset);
		// a malformed reference is.
		{"bad variable references", `{"mcpServers": {"a": {"command": "x", "env": {"TOKEN": "${GH_TOKEN}"}, "args": ["${1X}", "${OPEN"]}, "b": {"url": "https://h/", "headers": {"Authorization": "Bearer ${API_KEY}"}}}}`, env(), []want{
			{`mcpServers["a"].args[0]`, "${1X} is not a variable reference"},
			{`mcpServers["a"].args[1]`, `"${" without a closing "}"`},
		}},
		// Other clients' forms, in a file copied by hand.
		{"other clients' variable references", `{"mcpServers": {"a": {"command": "x", "env": {"GH": "${env:GITHUB_TOKEN}", "KEY": "${input:perplexity-key}"}}}}`, env(), []want{
			{`mcpServers["a"].env.GH`, "${env:GITHUB_TOKEN} is Cursor's and VS Code's form: write ${GITHUB_TOKEN} (toolgate import rewrites it)"},
			{`mcpServers["a"].env.KEY`, "${input:perplexity-key} is a VS Code prompt, and toolgate asks no one: write a variable, ${PERPLEXITY_KEY}, and set it in toolgate's environment"},
		}},
		{"durations", `{"mcpServers": {"a": {"command": "x", "connectTimeout": "-1s", "callTimeout": "soon"}, "b": {"command": "x", "callTimeout": true}}, "toolgate": {"connectTimeout": -3, "callTimeout": "1x"}}`, nil, []want{
			{`mcpServers["a"].callTimeout`, `"soon" is not a duration`},
			{`mcpServers["a"].connectTimeout`, "-1s is negative"},
			{`mcpServers["b"].callTimeout`, "got a boolean, want a duration string"},
			{`toolgate.callTimeout`, `"1x" is not a duration`},
			{`toolgate.connectTimeout`, "-3s is negative"},
		}},
		// Durations take no variables (README "Variables and secrets"): it
		// said only "is not a duration", as of a bad default.
		{"a variable in a duration", `{"mcpServers": {"a": {"command": "x", "callTimeout": "${CT}"}}, "toolgate": {"callTimeout": "${CT:-30s}", "restart": {"delays": ["${D}"]}}}`, env("CT", "20s", "D", "1s"), []want{
			{`mcpServers["a"].callTimeout`, `"${CT}": variables are not expanded in durations: write the duration itself`},
			{`toolgate.callTimeout`, `"${CT:-30s}": variables are not expanded in durations: write the duration itself, a string like "30s"`},
			{`toolgate.restart.delays[0]`, `"${D}": variables are not expanded in durations`},
		}},
		// A setting of a few words takes no variable: refused as such,
		// once (it said `unknown mode "${MODE:-bm25}"`, as of a typo).
		{"a variable in a setting of words", `{"mcpServers": {"a": {"command": "x"}}, "toolgate": {"search": {"mode": "${MODE:-bm25}"},
			"learn": {"fromKeys": "${FROM}"}, "embed": {"variant": "${V}"}, "security": {"onDefinitionChange": "${ODC}"}, "audit": {"arguments": "${AA}"}}}`,
			env("MODE", "rrf", "FROM", "all", "V", "int8", "ODC", "warn", "AA", "masked"), []want{
				{`toolgate.audit.arguments`, `"${AA}": variables are not expanded in this setting: write its value itself`},
				{`toolgate.embed.variant`, `"${V}": variables are not expanded in this setting`},
				{`toolgate.learn.fromKeys`, `"${FROM}": variables are not expanded in this setting`},
				{`toolgate.search.mode`, `"${MODE:-bm25}": variables are not expanded in this setting: write its value itself (they expand in the toolgate section's paths, http.addr`},
				{`toolgate.security.onDefinitionChange`, `"${ODC}": variables are not expanded in this setting`},
			}},
		{"an unset variable in the HTTP front's address", `{"mcpServers": {"a": {"command": "x"}}, "toolgate": {"http": {"addr": "${TG_ADDR}"}}}`, env(), []want{
			{`toolgate.http.addr`, "variable ${TG_ADDR} is not set: set it in toolgate's environment or give a default, ${TG_ADDR:-value}"},
		}},
		{"typo of one of our keys in a server entry", `{"mcpServers": {"a": {"comand": "npx"}, "b": {"url": "http://h/", "header": {"A": "b"}}}}`, nil, []want{
			{`mcpServers["a"]`, `needs "command"`},
			{`mcpServers["a"].comand`, `did you mean "command"?`},
			{`mcpServers["b"].header`, `did you mean "headers"?`},
		}},
		// Other clients' names for our keys, in an entry copied by hand.
		{"other clients' keys", `{"mcpServers": {"w": {"serverUrl": "http://h/sse"}, "g": {"httpUrl": "http://h/mcp"}, "c": {"transportType": "sse", "url": "http://h/sse"},
			"n": {"transport": {"type": "sse", "url": "http://h/sse"}}, "ok": {"transport": "sse", "type": "sse", "url": "http://h/sse"}}}`, nil, []want{
			{`mcpServers["c"].transportType`, `unknown key: the transport is given by "type" here: rename it to "type" ("stdio", "http" or "sse"`},
			{`mcpServers["g"]`, `needs "command"`},
			{`mcpServers["g"].httpUrl`, `unknown key: "httpUrl" is Gemini CLI's name for a streamable HTTP "url": rename it to "url"`},
			{`mcpServers["n"]`, `needs "command"`},
			{`mcpServers["n"].transport`, `unknown key: an object of settings that go in the entry itself here: its "type", "url", "command", "args" … as keys of mcpServers["n"]`},
			{`mcpServers["w"]`, `needs "command"`},
			{`mcpServers["w"].serverUrl`, `unknown key: "serverUrl" is Windsurf's name for "url": rename it to "url"`},
		}},
		{"toolgate unknown keys", `{"mcpServers": {"a": {"command": "x"}}, "toolgate": {"serach": {}, "CallTimeout": "1s", "search": {"mdoe": "x"}, "zzz": 1}}`, nil, []want{
			{`toolgate.CallTimeout`, `did you mean "callTimeout"?`},
			{`toolgate.search.mdoe`, `did you mean "mode"?`},
			{`toolgate.serach`, `did you mean "search"?`},
			{`toolgate.zzz`, "valid keys here are connectTimeout, callTimeout"},
		}},
		{"toolgate ranges", `{"mcpServers": {"a": {"command": "x"}}, "toolgate": {"maxConcurrentConnects": -1,
			"search": {"mode": "dense", "keywordWeight": 1.5, "vectorWeight": -0.1, "defaultLimit": 60, "maxLimit": 50, "minConfidence": 1.5, "stepWeight": -0.5},
			"learn": {"enabled": "yes", "fromKeys": "admins"},
			"embed": {"variant": "fp16", "threads": -2, "keepUnused": "12h"},
			"http": {"addr": "8080", "allowedOrigins": ["localhost"], "allowedHosts": ["http://h/"], "maxBodyBytes": -1},
			"telemetry": {"otlpEndpoint": "localhost:4318"}}}`, nil, []want{
			{`toolgate.embed.keepUnused`, "12h0m0s is out of range: use 24h0m0s (a day: the cache is swept once a day) to 87600h0m0s (10 years), or leave it out for 720h (30 days)"},
			{`toolgate.embed.threads`, "-2 is out of range"},
			{`toolgate.embed.variant`, `unknown variant "fp16": use one of "fp32", "int8"`},
			{`toolgate.http.addr`, `"8080" is not host:port`},
			{`toolgate.http.allowedHosts[0]`, "is not a host"},
			{`toolgate.http.allowedOrigins[0]`, "is not an origin"},
			{`toolgate.http.maxBodyBytes`, "-1 is out of range"},
			{`toolgate.learn.enabled`, "want true or false"},
			{`toolgate.learn.fromKeys`, `unknown value "admins": use one of "all", "admin", "none"`},
			{`toolgate.maxConcurrentConnects`, "-1 is out of range"},
			{`toolgate.search.defaultLimit`, "60 is out of range"},
			{`toolgate.search.keywordWeight`, "1.5 is out of range"},
			{`toolgate.search.minConfidence`, "1.5 is out of range: use a confidence from 0 to 1"},
			{`toolgate.search.mode`, `unknown mode "dense": use one of "hybrid", "bm25", "vector", "rrf"`},
			{`toolgate.search.stepWeight`, "-0.5 is out of range: use a weight from 0 to 1 (0 ranks whole queries only"},
			{`toolgate.search.vectorWeight`, "-0.1 is out of range"},
			{`toolgate.telemetry.otlpEndpoint`, `"localhost:4318" is not an OTLP/HTTP endpoint`},
		}},
		{"security, audit and limits ranges", `{"mcpServers": {"a": {"command": "x"}}, "toolgate": {
			"security": {"onDefinitionChange": "block", "approvedTools": ["memory", "["], "maxTextLength": -1, "allow": []},
			"audit": {"arguments": "plain", "maxFileBytes": -5, "maxFiles": 5000, "minRetention": "-5m"},
			"limits": {"requestsPerSecond": -1, "burst": -1, "maxStreams": -4, "maxInFlight": 100000, "queueTimeout": "2h", "refusedPerMinute": -2, "refusedBurst": -3}}}`, nil, []want{
			{`toolgate.audit.arguments`, `unknown value "plain": use "hash"`},
			{`toolgate.audit.maxFileBytes`, "-5 is out of range"},
			{`toolgate.audit.maxFiles`, "5000 is out of range"},
			{`toolgate.audit.minRetention`, "-5m0s is negative"},
			{`toolgate.limits.burst`, "-1 is out of range"},
			{`toolgate.limits.maxInFlight`, "100000 is out of range"},
			{`toolgate.limits.maxStreams`, "-4 is out of range"},
			{`toolgate.limits.queueTimeout`, "2h0m0s is out of range"},
			{`toolgate.limits.refusedBurst`, "-3 is out of range"},
			{`toolgate.limits.refusedPerMinute`, "-2 is out of range"},
			{`toolgate.limits.requestsPerSecond`, "-1 is out of range"},
			{`toolgate.security.allow`, "unknown setting"},
			{`toolgate.security.approvedTools[0]`, `"memory" can never match`},
			{`toolgate.security.approvedTools[1]`, "not a valid glob"},
			{`toolgate.security.maxTextLength`, "-1 is out of range"},
			{`toolgate.security.onDefinitionChange`, `unknown value "block": use one of "quarantine", "warn"`},
		}},
		{"defaultLimit without maxLimit", `{"mcpServers": {"a": {"command": "x"}}, "toolgate": {"search": {"defaultLimit": 1001}}}`, nil, []want{
			{`toolgate.search.defaultLimit`, "1001 is out of range: use 1 to 1000"},
		}},
		{"weights both zero", `{"mcpServers": {"a": {"command": "x"}}, "toolgate": {"search": {"keywordWeight": 0, "vectorWeight": 0}}}`, nil, []want{
			{`toolgate.search.vectorWeight`, "both 0"},
		}},
		{"toolgate wrong types", `{"mcpServers": {"a": {"command": "x"}}, "toolgate": {"maxConcurrentConnects": 1.5, "search": [], "http": {"allowedHosts": "h"}}}`, nil, []want{
			{`toolgate.http.allowedHosts`, "want an array of strings"},
			{`toolgate.maxConcurrentConnects`, "want a whole number"},
			{`toolgate.search`, "got an array, want an object"},
		}},
		{"lazy, idleTimeout and restart in a server", `{"mcpServers": {
			"a": {"command": "x", "idleTimeout": "5m"},
			"b": {"command": "x", "lazy": "yes", "idleTimeout": "-1s"},
			"c": {"command": "x", "lazy": true, "idleTimeout": "800h"},
			"d": {"command": "x", "restart": {"delays": ["-2s", "2h", "x"], "stableAfter": "48h", "delay": 1}},
			"e": {"command": "x", "restart": ["2s"]},
			"f": {"command": "x", "restart": {"delays": "2s"}}}}`, nil, []want{
			{`mcpServers["a"].idleTimeout`, `only applies to lazy servers (started by their first call): add "lazy": true`},
			{`mcpServers["b"].idleTimeout`, "-1s is out of range"},
			{`mcpServers["b"].lazy`, "got a string, want true or false"},
			{`mcpServers["c"].idleTimeout`, "800h0m0s is out of range"},
			{`mcpServers["d"].restart.delay`, `did you mean "delays"?`},
			{`mcpServers["d"].restart.delays[2]`, `"x" is not a duration`},
			{`mcpServers["e"].restart`, "got an array, want an object"},
			{`mcpServers["f"].restart.delays`, "want an array of durations"},
		}},
		{"keepAlive", `{"mcpServers": {
			"a": {"command": "x", "keepAlive": "30s"},
			"b": {"url": "https://mcp.example.com/mcp", "keepAlive": "-1s"},
			"c": {"url": "https://mcp.example.com/mcp", "keepAlive": "often"}},
			"toolgate": {"keepAlive": "-5s"}}`, nil, []want{
			{`mcpServers["a"].keepAlive`, `is only used by http and sse servers (a ping over the network, which a stdio server's pipe does not cross): remove it`},
			{`mcpServers["b"].keepAlive`, `-1s is negative: use a positive duration like "30s"`},
			{`mcpServers["c"].keepAlive`, `"often" is not a duration`},
			{`toolgate.keepAlive`, `-5s is negative: use a positive duration like "30s"`},
		}},
		{"maxResultBytes", `{"mcpServers": {
			"a": {"command": "x", "maxResultBytes": -1},
			"b": {"command": "x", "maxResultBytes": "100KB"},
			"c": {"command": "x", "maxResultBytes": 1e20}},
			"toolgate": {"maxResultBytes": 2000000000}}`, nil, []want{
			{`mcpServers["a"].maxResultBytes`, `-1 is out of range: use 1 to 1073741824 bytes of text (or leave it out for the toolgate section's value)`},
			{`mcpServers["b"].maxResultBytes`, `got "100KB", want a whole number`},
			{`mcpServers["c"].maxResultBytes`, `1e20 is out of range: no setting takes a number that large`},
			{`toolgate.maxResultBytes`, `2000000000 is out of range: use 1 to 1073741824 bytes of text (or leave it out for the default)`},
		}},
		{"maxResultBytes 0 is no way to turn trimming off", `{"mcpServers": {
			"a": {"command": "x", "maxResultBytes": 0},
			"b": {"command": "x", "maxResultBytes": 0.0}},
			"toolgate": {"maxResultBytes": 0}}`, nil, []want{
			{`mcpServers["a"].maxResultBytes`, `0 is out of range (it does not turn trimming off: a bound at the top of the range does): use 1 to 1073741824 bytes of text (or leave it out for the toolgate section's value)`},
			{`mcpServers["b"].maxResultBytes`, `0 is out of range (it does not turn trimming off`},
			{`toolgate.maxResultBytes`, `0 is out of range (it does not turn trimming off: a bound at the top of the range does): use 1 to 1073741824 bytes of text (or leave it out for the default)`},
		}},
		{"restart ranges (decoded fine)", `{"mcpServers": {"a": {"command": "x", "restart": {"delays": ["-2s", "2h"], "stableAfter": "48h"}}},
			"toolgate": {"restart": {"delays": [-1], "stableAfter": -5}}}`, nil, []want{
			{`mcpServers["a"].restart.delays[0]`, "-2s is out of range: use 0s to 1h0m0s"},
			{`mcpServers["a"].restart.delays[1]`, "2h0m0s is out of range"},
			{`mcpServers["a"].restart.stableAfter`, "48h0m0s is out of range"},
			{`toolgate.restart.delays[0]`, "-1s is out of range"},
			{`toolgate.restart.stableAfter`, "-5s is out of range"},
		}},
		{"too many restart delays", `{"mcpServers": {"a": {"command": "x"}}, "toolgate": {"restart": {"delays": [` + strings.Repeat(`"1s",`, 100) + `"1s"], "restr": 1}}}`, nil, []want{
			{`toolgate.restart.delays`, "has 101 entries: use at most 100"},
			{`toolgate.restart.restr`, `unknown setting: valid keys here are delays, stableAfter`},
		}},
		{"toolgate not an object", `{"mcpServers": {"a": {"command": "x"}}, "toolgate": 1}`, nil, []want{{"toolgate", "want an object of settings"}}},
		{"a key twice", "{\"mcpServers\": {\n\"a\": {\"command\": \"x\"},\n\"a\": {\"command\": \"y\", \"env\": {\"K\": \"1\", \"K\": \"2\"}}},\n\"toolgate\": {\"search\": {\"mode\": \"bm25\", \"mode\": \"hybrid\"}}}", nil, []want{
			{"mcpServers", `server "a" is defined twice (lines 2 and 3): only the last would be used; rename one or remove it`},
			{`mcpServers["a"].env.K`, "appears twice (line 3)"},
			{"toolgate.search.mode", "appears twice (line 4)"},
		}},
		{"typo of a top-level key", `{"mcpServer": {"a": {"command": "x"}}, "tolgate": {"callTimeout": "1s"}, "globalShortcut": ""}`, nil, []want{
			{"mcpServer", `unknown key: did you mean "mcpServers"?`},
			{"mcpServers", "no servers configured"},
			{"tolgate", `unknown key: did you mean "toolgate"?`},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			lookup := tt.env
			if lookup == nil {
				lookup = env()
			}
			f, err := Parse([]byte(tt.in), "bad.json", lookup)
			if err == nil {
				t.Fatalf("Parse succeeded, want errors; got %+v", f)
			}
			var ce *Error
			if !errors.As(err, &ce) {
				t.Fatalf("error is %T, want *Error: %v", err, err)
			}
			if len(ce.Errs) != len(tt.want) {
				t.Fatalf("got %d problems, want %d:\n%v", len(ce.Errs), len(tt.want), err)
			}
			for i, w := range tt.want {
				got := ce.Errs[i].Error()
				if !strings.HasPrefix(got, w.where) || !strings.Contains(got, w.contains) {
					t.Errorf("problem %d = %q\nwant prefix %q containing %q", i, got, w.where, w.contains)
				}
			}
			if !strings.HasPrefix(err.Error(), "config bad.json: ") {
				t.Errorf("error does not name the file: %v", err)
			}
		})
	}
}

func TestErrorsNeverEchoSecrets(t *testing.T) {
	in := `{"mcpServers": {"a": {"url": "https://h/", "headers": {"Authorization": "Bearer hunter2\n${NOPE}"}}, "b": {"command": "x", "env": {"K": "hunter2\u0000"}}}}`
	_, err := Parse([]byte(in), "", env())
	if err == nil {
		t.Fatal("Parse succeeded, want errors")
	}
	if strings.Contains(err.Error(), "hunter2") {
		t.Errorf("error echoes a header or env value:\n%v", err)
	}
}

func TestJSONSyntaxErrorsHaveLineAndColumn(t *testing.T) {
	tests := []struct{ in, want string }{
		{"{\n  \"mcpServers\": {\n    \"a\": {\"command\": \"x\",}\n  }\n}", "f.json:3:26: invalid JSON"},
		{"{\n  \"mcpServers\": {", "f.json:2:18: invalid JSON: unexpected end of JSON input"},
		{"[]", "f.json:1:1: the file must be a JSON object"},
		{"{\n  // the servers\n  \"mcpServers\": {}}", "f.json:2:3: invalid JSON: invalid character '/' looking for beginning of object key string (comments are not JSON: remove the // or /* */ comment)"},
		{"{\"mcpServers\": {\"a\": {\"command\": \"x\"},\n}}", "f.json:2:1: invalid JSON: invalid character '}' looking for beginning of object key string (remove the comma before '}')"},
		{"", "f.json:1:1: invalid JSON"},
	}
	for _, tt := range tests {
		_, err := Parse([]byte(tt.in), "f.json", env())
		if err == nil || !strings.HasPrefix(err.Error(), tt.want) {
			t.Errorf("Parse(%q) error = %v, want prefix %q", tt.in, err, tt.want)
		}
	}
}

func TestDisabledServerMayReferenceUnsetVariables(t *testing.T) {
	in := `{"mcpServers": {"on": {"command": "x"}, "off": {"url": "${BASE}/mcp", "headers": {"A": "${KEY}"}, "disabled": true}}}`
	f, err := Parse([]byte(in), "", env())
	if err != nil {
		t.Fatalf("Parse: %v", err)
	}
	if got := f.MCPServers["off"].Headers["A"]; got != "${KEY}" {
		t.Errorf("unset reference in a disabled server = %q, want it kept as ${KEY}", got)
	}
	if n := len(f.Servers()); n != 1 {
		t.Errorf("Servers() has %d entries, want 1 (the enabled one)", n)
	}
	if n := len(f.All()); n != 2 {
		t.Errorf("All() has %d entries, want 2", n)
	}
}

func TestExpand(t *testing.T) {
	lookup := env("A", "a", "EMPTY", "", "B_2", "b")
	tests := []struct{ in, want string }{
		{"plain", "plain"},
		{"${A}", "a"},
		{"x${A}y${B_2}z", "xaybz"},
		{"${A:-d}", "a"},
		{"${UNSET:-d}", "d"},
		{"${UNSET:-}", ""},
		{"${EMPTY:-d}", "d"},
		{"${EMPTY}", ""},
		{"${UNSET:-a:-b}", "a:-b"},
		{"$A ${A}$", "$A a$"},
		{"$${A}", "$a"},
		{"${A}}", "a}"},
	}
	for _, tt := range tests {
		p := &parser{lookup: lookup}
		x := &expander{p: p, lookup: lookup}
		got := x.expand("f", tt.in)
		if len(p.errs) > 0 || got != tt.want {
			t.Errorf("expand(%q) = %q, errs %v; want %q", tt.in, got, p.errs, tt.want)
		}
	}
	// The config directory is always known.
	f, err := Parse([]byte(`{"mcpServers": {"a": {"command": "x", "env": {"D": "${TOOLGATE_CONFIG_DIR}"}}}}`), "/etc/tg/c.json", env())
	if err != nil {
		t.Fatal(err)
	}
	if got := f.MCPServers["a"].Env["D"]; got != "/etc/tg" {
		t.Errorf("${TOOLGATE_CONFIG_DIR} = %q, want /etc/tg", got)
	}
}

func TestRealWorldFiles(t *testing.T) {
	t.Run("claude_desktop_config.json", func(t *testing.T) {
		f, err := Load(filepath.Join("testdata", "claude_desktop_config.json"))
		if err != nil {
			t.Fatalf("Load: %v", err)
		}
		var names []string
		for _, s := range f.Servers() {
			names = append(names, s.Name+"/"+s.Type)
		}
		want := []string{"filesystem/stdio", "github/stdio", "memory/stdio", "puppeteer/stdio", "sqlite/stdio"}
		if diff := cmp.Diff(want, names); diff != "" {
			t.Errorf("servers (-want +got):\n%s", diff)
		}
		if got := f.MCPServers["puppeteer"].Env["PUPPETEER_LAUNCH_OPTIONS"]; got != `{ "headless": true }` {
			t.Errorf("env value = %q", got)
		}
	})
	t.Run(".mcp.json", func(t *testing.T) {
		data, err := os.ReadFile(filepath.Join("testdata", "mcp.json"))
		if err != nil {
			t.Fatal(err)
		}
		f, err := Parse(data, "/repo/.mcp.json", env("API_KEY", "k", "HOME", "/home/u"))
		if err != nil {
			t.Fatalf("Parse: %v", err)
		}
		got := map[string]Server{}
		for _, s := range f.Servers() {
			got[s.Name] = s
		}
		if len(got) != 5 {
			t.Errorf("got %d enabled servers, want 5 (old-thing is disabled)", len(got))
		}
		api := got["api-server"]
		if api.Type != TypeHTTP || api.URL != "https://api.example.com/mcp" || api.Headers["Authorization"] != "Bearer k" {
			t.Errorf("api-server = %+v", api)
		}
		if got["context7"].Type != TypeHTTP || got["linear"].Type != TypeSSE {
			t.Errorf("types: context7 %q, linear %q", got["context7"].Type, got["linear"].Type)
		}
		sh := got["shared-server"]
		if diff := cmp.Diff([]string{"--config", "./config.json"}, sh.Args); diff != "" || sh.Env["CACHE_DIR"] != "/home/u/.cache/shared" {
			t.Errorf("shared-server = %+v %s", sh, diff)
		}
	})
}

func TestLoadMissingFile(t *testing.T) {
	_, err := Load(filepath.Join(t.TempDir(), "nope.json"))
	if !errors.Is(err, os.ErrNotExist) {
		t.Errorf("Load of a missing file = %v, want os.ErrNotExist", err)
	}
}

// TestLoadFolder: a config path that is a folder (`serve --config
// somedir`, `servers add --config somedir`) says so and the fix, naming
// the JSON files in it; it read `read config: read somedir: is a
// directory`.
func TestLoadFolder(t *testing.T) {
	dir := t.TempDir()
	_, err := Load(dir)
	var de *DirError
	if !errors.As(err, &de) || err.Error() != "read config: "+dir+" is a folder, not a file: give the config file's path" {
		t.Errorf("Load of a folder = %v, want a *DirError saying so", err)
	}
	if err := os.WriteFile(filepath.Join(dir, "toolgate.json"), []byte(`{}`), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := ReadDocs([]string{dir}); err == nil || !strings.HasSuffix(err.Error(), "give the config file's path ("+filepath.Join(dir, "toolgate.json")+" is in it)") {
		t.Errorf("ReadDocs of a folder holding toolgate.json = %v, want it named", err)
	}
}

// TestLoadDanglingSymlink: a config path that is a symlink to a file that
// is not there (a dotfiles link to a checkout moved away, a ConfigMap's
// link swapped ahead of its file) names the link and its missing target,
// with the fix. It read `open …/toolgate.json: no such file or directory`
// though ls lists the file, and for a relative path added the hint to give
// an absolute one, which was not what went wrong.
func TestLoadDanglingSymlink(t *testing.T) {
	dir := t.TempDir()
	link := filepath.Join(dir, "toolgate.json")
	if err := os.Symlink("real.json", link); err != nil {
		t.Fatal(err)
	}
	want := "read config: " + link + " is a symlink to " + filepath.Join(dir, "real.json") + ", which does not exist: " +
		"put the config file there, or point the link at it (ln -sfn FILE " + link + ")"
	_, err := Load(link)
	if err == nil || err.Error() != want || !errors.Is(err, os.ErrNotExist) {
		t.Errorf("Load of a dangling symlink = %v\nwant %s", err, want)
	}
	// Through a chain (a ConfigMap: toolgate.json -> ..data/toolgate.json,
	// ..data -> a folder removed): the path that is not there is named.
	cm := filepath.Join(dir, "cm")
	if err := os.MkdirAll(cm, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("..2026_12_07", filepath.Join(cm, "..data")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("..data/toolgate.json", filepath.Join(cm, "toolgate.json")); err != nil {
		t.Fatal(err)
	}
	t.Chdir(cm)
	_, err = Load("toolgate.json")
	if err == nil || !strings.Contains(err.Error(), "toolgate.json is a symlink to "+filepath.Join(cm, "..2026_12_07", "toolgate.json")+", which does not exist") ||
		strings.Contains(err.Error(), "absolute path") {
		t.Errorf("Load of a link whose folder link dangles = %v", err)
	}
	if why := ReloadReadError(err); !strings.Contains(why, "is a symlink to "+filepath.Join(cm, "..2026_12_07", "toolgate.json")+" now, which does not exist: put the config file there, or point the link at it") ||
		!strings.Contains(why, "the gateway keeps the config in effect meanwhile") {
		t.Errorf("ReloadReadError = %q", why)
	}
}

// TestReloadReadErrorRefused: a reload of a config file this user may not
// read (replaced by `sudo cp`, root's and 0600; a chmod) says what to
// change, as a command's fix does, and that the config in effect stays. It
// said `read config: open …: permission denied` and no more.
func TestReloadReadErrorRefused(t *testing.T) {
	path := filepath.Join(t.TempDir(), "toolgate.json")
	if err := os.WriteFile(path, []byte(`{}`), 0o600); err != nil {
		t.Fatal(err)
	}
	err := fmt.Errorf("read config: %w", &fs.PathError{Op: "open", Path: path, Err: syscall.EACCES})
	want := "read config: open " + path + ": permission denied: " + storage.ReadFix(path) + " " + keptRefused
	if got := ReloadReadError(err); got != want {
		t.Errorf("ReloadReadError = %q\nwant %q", got, want)
	}
}

func TestDurationJSON(t *testing.T) {
	for _, tt := range []struct {
		in   string
		want time.Duration
	}{{`"30s"`, 30 * time.Second}, {`"1m30s"`, 90 * time.Second}, {`2`, 2 * time.Second}, {`0.25`, 250 * time.Millisecond}} {
		var d Duration
		if err := json.Unmarshal([]byte(tt.in), &d); err != nil || d.Duration != tt.want {
			t.Errorf("Unmarshal(%s) = %v, %v; want %v", tt.in, d, err, tt.want)
		}
		b, _ := json.Marshal(d)
		var back Duration
		if err := json.Unmarshal(b, &back); err != nil || back != d {
			t.Errorf("round trip of %v via %s = %v, %v", d, b, back, err)
		}
	}
	for _, in := range []string{`"abc"`, `true`, `1e300`, `{}`} {
		var d Duration
		if err := json.Unmarshal([]byte(in), &d); err == nil {
			t.Errorf("Unmarshal(%s) succeeded, want an error", in)
		}
	}
}

func TestValidName(t *testing.T) {
	for name, want := range map[string]bool{
		"a": true, "A9": true, "my-server": true, "my_server": true, "9lives": true, "a_b-c_d": true,
		"": false, "_a": false, "-a": false, "a__b": false, "a b": false, "a.b": false, "a/b": false, "ä": false, "a___": false, "a_": false, "a-": true,
		strings.Repeat("x", 64): true, strings.Repeat("x", 65): false,
	} {
		if got := ValidName(name); got != want {
			t.Errorf("ValidName(%q) = %v, want %v", name, got, want)
		}
	}
}

func TestValidateFileBuiltInCode(t *testing.T) {
	f := &File{MCPServers: map[string]Server{"a": {Command: "x"}, "b": {URL: "https://h/mcp", Type: "sse"}}}
	if err := f.Validate(); err != nil {
		t.Fatalf("Validate: %v", err)
	}
	got := f.Servers()
	if got[0].Type != TypeStdio || got[1].Type != TypeSSE {
		t.Errorf("types = %q, %q", got[0].Type, got[1].Type)
	}
	// No servers yet is a config (added later, or all removed).
	if err := (&File{}).Validate(); err != nil {
		t.Errorf("Validate of a File with no servers: %v", err)
	}
	if f, err := Parse([]byte(`{"mcpServers": {}}`), "empty.json", nil); err != nil || len(f.MCPServers) != 0 {
		t.Errorf(`Parse of {"mcpServers": {}}: %v, %+v`, err, f)
	}
}

// FuzzParse: Parse never panics, and anything it accepts validates again and
// survives a JSON round trip unchanged.
func FuzzParse(f *testing.F) {
	for _, name := range []string{"claude_desktop_config.json", "mcp.json"} {
		if b, err := os.ReadFile(filepath.Join("testdata", name)); err == nil {
			f.Add(b)
		}
	}
	f.Add([]byte(`{"mcpServers": {"a": {"command": "x", "args": ["${A:-b}"], "env": {"K": "${A}"}}}, "toolgate": {"search": {"keywordWeight": 0.5}}}`))
	f.Add([]byte(`{"mcpServers": {"a": {"url": "http://h/${A}", "type": "sse", "headers": {"X": "1"}, "callTimeout": 3}}}`))
	f.Add([]byte(`{"mcpServers": {"a__b": {}}, "toolgate": {"http": {"addr": ":1"}}}`))
	f.Add([]byte(`{"mcpServers": {"a": {"command": "x", "lazy": true, "idleTimeout": "1m", "restart": {"delays": []}}}, "toolgate": {"restart": {"delays": ["1s", 2], "stableAfter": "1m"}}}`))
	lookup := env("A", "va")
	f.Fuzz(func(t *testing.T, data []byte) {
		cfg, err := Parse(data, "/cfg/f.json", lookup)
		if err != nil {
			return
		}
		if err := cfg.Validate(); err != nil {
			t.Fatalf("accepted config does not validate: %v\ninput: %q", err, data)
		}
		for _, s := range cfg.Servers() {
			if !ValidName(s.Name) {
				t.Fatalf("accepted invalid name %q", s.Name)
			}
		}
		out, err := json.Marshal(cfg)
		if err != nil {
			t.Fatalf("Marshal: %v", err)
		}
		if strings.Contains(string(out), "${") {
			return // values that look like references would be expanded again
		}
		again, err := Parse(out, "/cfg/f.json", lookup)
		if err != nil {
			t.Fatalf("re-parse of accepted config failed: %v\nfirst: %q\nmarshaled: %s", err, data, out)
		}
		if diff := cmp.Diff(cfg, again); diff != "" {
			t.Fatalf("round trip changed the config (-first +again):\n%s", diff)
		}
	})
}

// The bundled example config (examples/toolgate.json) must always load.
func TestBundledExampleConfig(t *testing.T) {
	f, err := Load(filepath.Join("..", "..", "examples", "toolgate.json"))
	if err != nil {
		t.Fatalf("examples/toolgate.json: %v", err)
	}
	var names []string
	for _, s := range f.Servers() {
		names = append(names, s.Name)
		if s.Type != TypeStdio || s.Command != "node" || !filepath.IsAbs(s.Cwd) {
			t.Errorf("%s: want a stdio server run with node from an absolute cwd, got %+v", s.Name, s)
		}
	}
	if diff := cmp.Diff([]string{"everything", "filesystem", "memory"}, names); diff != "" {
		t.Errorf("servers (-want +got):\n%s", diff)
	}
	if got := f.MCPServers["memory"].Env["MEMORY_FILE_PATH"]; !filepath.IsAbs(got) {
		t.Errorf("MEMORY_FILE_PATH = %q, want an absolute path (the memory server resolves relative ones against its own script)", got)
	}
}

func TestParseUnexpandedKeepsReferences(t *testing.T) {
	in := `{"mcpServers": {"a": {"command": "x", "args": ["--token", "${TOKEN}", "${D:-d}"], "cwd": "${TOOLGATE_CONFIG_DIR}/w"},
		"b": {"url": "${BASE}/mcp", "headers": {"Authorization": "Bearer ${KEY}"}}}}`
	f, err := ParseUnexpanded([]byte(in), "/etc/tg/c.json")
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"--token", "${TOKEN}", "${D:-d}"}, f.MCPServers["a"].Args); diff != "" {
		t.Errorf("args (-want +got):\n%s", diff)
	}
	if got := f.MCPServers["a"].Cwd; got != "/etc/tg/w" {
		t.Errorf("cwd = %q, want /etc/tg/w", got)
	}
	if got := f.MCPServers["b"].URL; got != "${BASE}/mcp" {
		t.Errorf("url = %q", got)
	}
}

// A path that starts with "~/" is the home folder's, in one file and in
// several merged (each anchors its relative paths at its own folder).
func TestHomePaths(t *testing.T) {
	home := t.TempDir()
	t.Setenv("HOME", home)
	const in = `{"mcpServers": {"a": {"command": "x", "cwd": "~/work", "args": ["~/left-as-written"]}}, "toolgate": {"dataDir": "~/tg"}}`
	f, err := Parse([]byte(in), "/etc/tg/c.json", nil)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := f.MCPServers["a"].Cwd, filepath.Join(home, "work"); got != want {
		t.Errorf("cwd = %q, want %q", got, want)
	}
	if got, want := f.Toolgate.DataDir, filepath.Join(home, "tg"); got != want {
		t.Errorf("dataDir = %q, want %q", got, want)
	}
	if got := f.MCPServers["a"].Args[0]; got != "~/left-as-written" {
		t.Errorf("args are the server's: %q", got)
	}
	merged, _, _, err := ParseDocs([]Doc{{Path: "/etc/tg/c.json", Data: []byte(in)}, {Path: "/srv/p.json", Data: []byte(`{"toolgate": {"callTimeout": "1m"}}`)}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := merged.MCPServers["a"].Cwd, filepath.Join(home, "work"); got != want {
		t.Errorf("merged cwd = %q, want %q", got, want)
	}
}

// A relative config path that is not there says from which folder it was
// read; an absolute one does not need to.
func TestReadMissingConfig(t *testing.T) {
	t.Chdir(t.TempDir())
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	_, err = ReadDocs([]string{"servers.json"})
	if want := "read config: open servers.json: no such file or directory (a relative path is read from toolgate's working directory, " + wd + " here (an MCP client starts toolgate in a folder of its choosing): give the file's absolute path)"; err == nil || err.Error() != want {
		t.Errorf("relative: %v\nwant %s", err, want)
	}
	abs := filepath.Join(wd, "none.json")
	if _, err := Load(abs); err == nil || err.Error() != "read config: open "+abs+": no such file or directory" {
		t.Errorf("absolute: %v", err)
	}
}

// Env and header values that are a variable without braces are said; a
// value that only holds a "$" is not.
func TestBareReferences(t *testing.T) {
	s := Server{Env: map[string]string{"A": "$GITHUB_TOKEN", "B": "pa$$word", "C": "${SET}", "D": "$1"},
		Headers: map[string]string{"Authorization": "Bearer $API_KEY", "X-Note": "costs $5"}}
	want := []string{
		`env.A is "$GITHUB_TOKEN", passed as written: toolgate expands ${GITHUB_TOKEN} (with braces)`,
		`headers.Authorization is "Bearer $API_KEY", passed as written: toolgate expands ${API_KEY} (with braces)`,
	}
	if diff := cmp.Diff(want, s.BareReferences()); diff != "" {
		t.Errorf("BareReferences (-want +got):\n%s", diff)
	}
}

// TestIPv6AddrWithoutBrackets: toolgate.http.addr "::1:8931" (Go's "too
// many colons") is told the address as it must be written.
func TestIPv6AddrWithoutBrackets(t *testing.T) {
	_, err := Parse([]byte(`{"mcpServers": {"a": {"command": "x"}}, "toolgate": {"http": {"addr": "::1:8931"}}}`), "t.json", func(string) (string, bool) { return "", false })
	if err == nil || !strings.Contains(err.Error(), `"::1:8931" is not host:port: an IPv6 address goes in brackets before its port: [::1]:8931`) {
		t.Errorf("toolgate.http.addr \"::1:8931\": %v", err)
	}
}

// TestIPv6URLWithoutBrackets: a server's url with an IPv6 address without
// brackets is told the URL as it must be written (it got the generic "is
// not an absolute http(s) URL").
func TestIPv6URLWithoutBrackets(t *testing.T) {
	for u, want := range map[string]string{
		"http://::1:3000/mcp":            `write "http://[::1]:3000/mcp"`,
		"https://fd00::2/mcp":            `write "https://[fd00::2]/mcp"`,
		"http://fe80::1%25eth0:3000/mcp": `write "http://[fe80::1%25eth0]:3000/mcp"`,
		// A zone's % is %25 in a URL (url.Parse: invalid URL escape).
		"http://[fe80::1%eth0]:3000/mcp": `write "http://[fe80::1%25eth0]:3000/mcp"`,
	} {
		_, err := Parse([]byte(`{"mcpServers": {"a": {"url": "`+u+`"}}}`), "t.json", func(string) (string, bool) { return "", false })
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("url %q: %v; want %q", u, err, want)
		}
	}
}

// TestCheckRedirectURI: an "oauth" redirectUri must be a loopback http URI
// (the login listens there for the browser's redirect).
func TestCheckRedirectURI(t *testing.T) {
	for _, c := range []struct {
		uri, want string // want: part of the message, "" when fine
	}{
		{"http://localhost:7777/oauth/callback", ""},
		{"http://127.0.0.1/callback", ""},
		{"http://[::1]:0/cb", ""},
		{"https://localhost:7777/cb", "is not a loopback redirect URI"},
		{"http://example.com:7777/cb", `host "example.com" is not this machine's loopback`},
		{"http://localhost:7777/cb?x=1", "is not a loopback redirect URI"},
		{"http://localhost:99999/cb", `port "99999" is not a port`},
		{"http://localhost:7777/{x}", "its path has a brace"},
		{"localhost:7777", "is not a loopback redirect URI"},
	} {
		got := CheckRedirectURI(c.uri)
		if c.want == "" && got != "" || c.want != "" && !strings.Contains(got, c.want) {
			t.Errorf("CheckRedirectURI(%q) = %q, want %q", c.uri, got, c.want)
		}
	}
}

// TestMaxResultBytesPerServer: the bound of a server's results is its own
// maxResultBytes, else the toolgate section's (for the built-in
// management tools too), else 0 (the gateway's default).
func TestMaxResultBytesPerServer(t *testing.T) {
	f, err := Parse([]byte(`{"mcpServers": {"a": {"command": "x"}, "b": {"command": "x", "maxResultBytes": 500000}}, "toolgate": {"maxResultBytes": 20000}}`), "", nil)
	if err != nil {
		t.Fatal(err)
	}
	for server, want := range map[string]int{"a": 20000, "b": 500000, BuiltinServer: 20000} {
		if got := f.MaxResultBytes(server); got != want {
			t.Errorf("MaxResultBytes(%q) = %d, want %d", server, got, want)
		}
	}
	f, _ = Parse([]byte(`{"mcpServers": {"a": {"command": "x"}}}`), "", nil)
	if got := f.MaxResultBytes("a"); got != 0 {
		t.Errorf("MaxResultBytes with none set = %d, want 0 (the gateway's default)", got)
	}
}

// TestDurationPastFloat: a duration of seconds past a float64's range is
// out of range, in the words of one within it but too long; it was Go's
// `json: cannot unmarshal number 1e400 into Go value of type float64`
// (`servers add --call-timeout 1e400` writes it so).
func TestDurationPastFloat(t *testing.T) {
	for in, want := range map[string]string{
		"1e400":  "1e400 seconds is out of range",
		"-1e400": "-1e400 seconds is out of range",
		"1e300":  "1e+300 seconds is out of range",
	} {
		if _, err := parseDuration([]byte(in)); err == nil || err.Error() != want {
			t.Errorf("parseDuration(%s) = %v, want %q", in, err, want)
		}
	}
}
