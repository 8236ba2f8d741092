package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/toolgate/toolgate/gateway"
	"github.com/toolgate/toolgate/gateway/audit"
	"github.com/toolgate/toolgate/gateway/backend/backendtest"
	"github.com/toolgate/toolgate/gateway/config"
	"github.com/toolgate/toolgate/gateway/live"
	"github.com/toolgate/toolgate/internal/testenv"
)

func writeConfig(t *testing.T, body string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "toolgate.json")
	if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestServersListsWithoutSecrets(t *testing.T) {
	t.Setenv("TG_TEST_TOKEN", "hunter2-token")
	t.Setenv("TG_TEST_KEY", "hunter2-key")
	cfg := writeConfig(t, `{"mcpServers": {
		"local": {"command": "npx", "args": ["-y", "some server", "--token", "${TG_TEST_TOKEN}", "--api-key", "hunter2-argkey", "--github-token=hunter2-eqkey"], "env": {"API_TOKEN": "hunter2-literal", "B": "${TG_TEST_TOKEN}"}},
		"remote": {"url": "https://user:hunter2-pw@example.com/mcp?api_key=hunter2-q&x=${TG_TEST_KEY}", "headers": {"Authorization": "Bearer ${TG_TEST_KEY}"}},
		"off": {"type": "sse", "url": "https://example.com/sse", "disabled": true},
		"zap": {"url": "https://actions.example.com/mcp/sk-ak-hunter2hunter2hunter2x9/sse"},
		"gh": {"url": "https://hunter2usertoken@git.example.com/mcp"},
		"ghv": {"url": "https://${TG_TEST_TOKEN}@git.example.com/mcp"}}}`)
	for _, asJSON := range []bool{false, true} {
		var out bytes.Buffer
		if err := runServers(&out, &globals{dataDir: t.TempDir()}, []string{cfg}, asJSON); err != nil {
			t.Fatalf("runServers(json=%v): %v", asJSON, err)
		}
		got := out.String()
		if strings.Contains(got, "hunter2") {
			t.Errorf("output (json=%v) leaks a secret:\n%s", asJSON, got)
		}
		for _, want := range []string{"local", "remote", "off", "API_TOKEN", "Authorization", "${TG_TEST_TOKEN}", "sse", "https://actions.example.com/mcp/xxxxx/sse", "https://xxxxx@git.example.com/mcp", "https://${TG_TEST_TOKEN}@git.example.com/mcp", "--api-key", "--github-token=xxxxx"} {
			if !strings.Contains(got, want) {
				t.Errorf("output (json=%v) lacks %q:\n%s", asJSON, want, got)
			}
		}
		if asJSON {
			var rep serversReport
			if err := json.Unmarshal(out.Bytes(), &rep); err != nil {
				t.Fatalf("--json output is not JSON: %v", err)
			}
			if !rep.Valid || len(rep.Servers) != 6 || !rep.Servers[3].Disabled || rep.Servers[3].Name != "off" {
				t.Errorf("report = %+v", rep)
			}
		} else if !strings.Contains(got, `'some server'`) || !strings.Contains(got, "disabled") {
			t.Errorf("table lacks the quoted argument or the disabled status:\n%s", got)
		}
	}
}

// A local server whose command this shell cannot start is listed as such,
// with why (its env's values masked), and the file is still valid.
func TestServersListCannotStart(t *testing.T) {
	cfg := writeConfig(t, `{"mcpServers": {
		"time": {"command": "toolgate-no-such-command-xyz", "env": {"PATH": "/opt/hunter2-path"}},
		"mine": {"command": "./bin/toolgate-no-such-server"},
		"ok": {"command": "sh", "args": ["-c", "true"]},
		"off": {"command": "toolgate-no-such-command-xyz", "disabled": true}}}`)
	var out bytes.Buffer
	if err := runServers(&out, &globals{dataDir: t.TempDir()}, []string{cfg}, false); err != nil {
		t.Fatal(err)
	}
	got := out.String()
	for _, want := range []string{"valid, 4 servers", "time  stdio  CANNOT START (below)", "\ncannot start with this shell's environment (a gateway started with another environment may):\n",
		`  mine: command "./bin/toolgate-no-such-server" not found (a relative path is read from toolgate's working directory): check command`,
		`  time: command "toolgate-no-such-command-xyz" not found in PATH (PATH=***): check command/PATH`} {
		if !strings.Contains(got, want) {
			t.Errorf("listing lacks %q:\n%s", want, got)
		}
	}
	if strings.Contains(got, "hunter2") || strings.Contains(got, "  ok:") || strings.Contains(got, "  off:") {
		t.Errorf("listing leaks the env's PATH, or says a startable or disabled server cannot start:\n%s", got)
	}
	out.Reset()
	if err := runServers(&out, &globals{dataDir: t.TempDir()}, []string{cfg}, true); err != nil {
		t.Fatal(err)
	}
	var rep serversReport
	if err := json.Unmarshal(out.Bytes(), &rep); err != nil {
		t.Fatal(err)
	}
	for _, s := range rep.Servers {
		if (s.CannotStart != "") != (s.Name == "time" || s.Name == "mine" || s.Name == "off") {
			t.Errorf("--json: %s cannotStart %q", s.Name, s.CannotStart)
		}
	}
}

// TestServersListCannotStartBesideErrors: a file with one invalid server
// listed only its errors; another that cannot start was said once that
// one was fixed. The valid servers a gateway would start are checked as
// import checks them (validServers), their relative "cwd" against the
// config's folder. The variables written without braces are named below,
// as for a valid file (unbracedNote).
func TestServersListCannotStartBesideErrors(t *testing.T) {
	cfg := writeConfig(t, `{"mcpServers": {
		"broken": {"command": "sh", "callTimeout": "-1s"},
		"missing": {"command": "toolgate-no-such-command-xyz"},
		"rel": {"command": "sh", "cwd": "work"},
		"bare": {"command": "sh", "env": {"TOKEN": "$BARE_TOKEN"}},
		"off": {"command": "toolgate-no-such-command-xyz", "disabled": true},
		"paused": {"command": "toolgate-no-such-command-xyz"}}}`)
	data := t.TempDir()
	if err := live.WriteState(live.StateFile(data), live.State{Disabled: []string{"paused"}}); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(filepath.Dir(cfg), "work"), 0o700); err != nil {
		t.Fatal(err)
	}
	t.Chdir(t.TempDir()) // "work" is the config's folder's, not this one's
	var out bytes.Buffer
	err := runServers(&out, &globals{dataDir: data}, []string{cfg}, false)
	if err == nil {
		t.Fatal("runServers succeeded on a bad file")
	}
	got := err.Error()
	for _, want := range []string{`mcpServers["broken"].callTimeout: -1s is negative`,
		"\n\ncannot start with this shell's environment (a gateway started with another environment may):\n" +
			`  missing: command "toolgate-no-such-command-xyz" not found in PATH`,
		"\n\nvariables written without braces (a shell's way) reach the server as written:\n" +
			`  bare: env.TOKEN is "$BARE_TOKEN", passed as written: toolgate expands ${BARE_TOKEN} (with braces)`} {
		if !strings.Contains(got, want) {
			t.Errorf("error lacks %q:\n%s", want, got)
		}
	}
	for _, not := range []string{"  rel:", "  off:", "  paused:", "  broken:", "  bare: command"} {
		if strings.Contains(got, not) {
			t.Errorf("error says %q cannot start:\n%s", not, got)
		}
	}
	out.Reset()
	if err := runServers(&out, &globals{dataDir: data}, []string{cfg}, true); err == nil {
		t.Fatal("runServers --json succeeded on a bad file")
	}
	var rep serversReport
	if err := json.Unmarshal(out.Bytes(), &rep); err != nil || rep.Valid || len(rep.Errors) != 1 || len(rep.CannotStart) != 1 || rep.CannotStart["missing"] == "" {
		t.Errorf("--json report = %+v (%v)", rep, err)
	}
	// ... and its variables without braces, which the text says below the
	// errors, by server as a valid file's servers carry them.
	if want := map[string][]string{"bare": {`env.TOKEN is "$BARE_TOKEN", passed as written: toolgate expands ${BARE_TOKEN} (with braces)`}}; !reflect.DeepEqual(rep.Unexpanded, want) {
		t.Errorf("--json unexpanded = %q, want %q", rep.Unexpanded, want)
	}
}

// A config imported from a repository's .mcp.json may hold terminal
// escapes in a command, its arguments or an env key: the listing prints
// them escaped, not as the escapes they are.
func TestServersListEscapes(t *testing.T) {
	cfg := writeConfig(t, `{"mcpServers": {"evil": {"command": "node\u001b]0;pwned\u0007", "args": ["x\u001b[2J"], "env": {"K\u001b[31m": "v"}}}}`)
	var out bytes.Buffer
	if err := runServers(&out, &globals{dataDir: t.TempDir()}, []string{cfg}, false); err != nil {
		t.Fatal(err)
	}
	got := out.String()
	if strings.ContainsAny(got, "\x1b\a") || !strings.Contains(got, `'node\x1b]0;pwned\a' 'x\x1b[2J'`) || !strings.Contains(got, `env: K\x1b[31m`) {
		t.Errorf("the listing does not escape the config's control characters:\n%q", got)
	}
}

// TestServersAddConcurrent: `servers add` run many at once on one config
// (a setup script, several terminals) loses no server: 20 of them left 16
// before the edits were locked (config.Edit).
func TestServersAddConcurrent(t *testing.T) {
	cfg := writeConfig(t, `{"mcpServers": {}}`)
	data := t.TempDir()
	var wg sync.WaitGroup
	for i := range 12 {
		wg.Go(func() {
			if _, stderr, err := runToolgate(t, data, "servers", "add", fmt.Sprintf("s%02d", i), "--config", cfg, "--", "node", "x.js"); err != nil {
				t.Errorf("servers add s%02d: %v\n%s", i, err, stderr)
			}
		})
	}
	wg.Wait()
	b, err := os.ReadFile(cfg)
	if err != nil {
		t.Fatal(err)
	}
	var doc struct{ MCPServers map[string]json.RawMessage }
	if err := json.Unmarshal(b, &doc); err != nil || len(doc.MCPServers) != 12 {
		t.Errorf("12 servers added at once: %v, %d in the file:\n%s", err, len(doc.MCPServers), b)
	}
}

func TestServersBadFile(t *testing.T) {
	cfg := writeConfig(t, `{"mcpServers": {"a b": {"command": "x"}, "c": {"url": "nope"}}, "toolgate": {"serach": {}}}`)
	var out bytes.Buffer
	err := runServers(&out, &globals{dataDir: t.TempDir()}, []string{cfg}, true)
	if err == nil {
		t.Fatal("runServers succeeded on a bad file")
	}
	for _, want := range []string{`mcpServers["a b"]: invalid server name`, `mcpServers["c"].url`, `toolgate.serach: unknown setting: did you mean "search"?`} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error lacks %q:\n%v", want, err)
		}
	}
	var rep serversReport
	if err := json.Unmarshal(out.Bytes(), &rep); err != nil || rep.Valid || len(rep.Errors) != 3 {
		t.Errorf("--json report on a bad file = %+v (%v)", rep, err)
	}
}

func TestServersBundledExample(t *testing.T) {
	var out bytes.Buffer
	if err := runServers(&out, &globals{dataDir: t.TempDir()}, []string{filepath.Join("..", "..", "examples", "toolgate.json")}, false); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"everything", "memory", "filesystem"} {
		if !strings.Contains(out.String(), name) {
			t.Errorf("bundled example lacks %s:\n%s", name, out.String())
		}
	}
}

// Several config files are listed read as one, as serve runs them: a
// settings-only file over another, and a server one replaces.
func TestServersListSeveralFiles(t *testing.T) {
	user := writeConfig(t, `{"mcpServers": {"a": {"command": "sh"}, "b": {"command": "sh", "args": ["-c", "old"]}}}`)
	project := writeConfig(t, `{"mcpServers": {"b": {"command": "sh", "args": ["-c", "new"]}}, "toolgate": {"callTimeout": "2m"}}`)
	var out bytes.Buffer
	if err := runServers(&out, &globals{dataDir: t.TempDir()}, []string{user, project}, false); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		user + " + " + project + ": valid, 2 servers (2 enabled)\n",
		`note: server "b" is defined in ` + user + " and in " + project + ": keeping " + project + "'s entry",
		"sh -c new", "a     stdio",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("listing lacks %q:\n%s", want, out.String())
		}
	}
	if strings.Contains(out.String(), "old") {
		t.Errorf("the replaced entry is listed:\n%s", out.String())
	}
}

// A config with no servers yet is valid, and the listing says how to add
// one instead of an empty table.
func TestServersListNoServersYet(t *testing.T) {
	cfg := writeConfig(t, `{"mcpServers": {}}`)
	var out bytes.Buffer
	if err := runServers(&out, &globals{dataDir: t.TempDir()}, []string{cfg}, false); err != nil {
		t.Fatal(err)
	}
	if want := cfg + ": valid, no servers yet: add one with toolgate servers add NAME --config " + cfg + " -- COMMAND [ARG...] (or --url URL)\n"; out.String() != want {
		t.Errorf("listing:\n%s\nwant:\n%s", out.String(), want)
	}
}

// A server whose entry refers to a variable toolgate's environment lacks
// does not keep the gateway from starting: the others serve, it is down
// with the variable to set, and `toolgate servers` says it cannot start.
// (The whole gateway used to refuse to start.)
func TestServeWithUnsetVariable(t *testing.T) {
	s := backendtest.Command(t, backendtest.ModeNormal)
	gh := maps.Clone(s.Env)
	gh["GITHUB_TOKEN"] = "${TOOLGATE_TEST_UNSET_TOKEN}"
	fake := maps.Clone(s.Env)
	fake["API_TOKEN"] = "$API_TOKEN" // a shell's way: passed as written, and said
	b, err := json.Marshal(map[string]any{"mcpServers": map[string]any{
		"fake": map[string]any{"command": s.Command, "env": fake},
		"gh":   map[string]any{"command": s.Command, "env": gh},
	}})
	if err != nil {
		t.Fatal(err)
	}
	cfg := writeConfig(t, string(b))
	data := t.TempDir()
	stdio := toolgateCmd(t, data, "serve", "--config", cfg, "--mode", "bm25")
	stdio.Stderr = testLog(t, "stdio: ")
	ctx, cs := connectStdio(t, stdio, 3*time.Minute)
	var ghErr string
	testenv.Eventually(t, "fake up and gh down", func() bool {
		out, _, _ := runToolgate(t, data, "status", "--json")
		reps := decodeReports(t, out)
		if len(reps) != 1 {
			return false
		}
		states := map[string]string{}
		for _, b := range reps[0].Backends {
			states[b.Name] = string(b.State)
			if b.Name == "gh" {
				ghErr = b.Err
			}
		}
		return states["fake"] == "up" && states["gh"] == "down"
	})
	if want := `backend "gh": variable ${TOOLGATE_TEST_UNSET_TOKEN} (env.GITHUB_TOKEN) is not set in toolgate's environment: set it where toolgate starts`; !strings.HasPrefix(ghErr, want) {
		t.Errorf("gh's error: %q, want it to start with %q", ghErr, want)
	}
	indexServed(t, ctx, cs) // fake is up before its tools are indexed: a cold start past its wait answers "being built"
	if ans, _ := searchTools(t, ctx, cs, "echo", 5); len(toolNames(ans)) == 0 {
		t.Errorf("search_tools found nothing while gh is down")
	}
	// A search that finds nothing says which server it could not search.
	if _, res := searchTools(t, ctx, cs, "zzyzx qwxv", 5); !strings.Contains(resultText(res), "Not searched: 1 server never listed its tools and cannot run now") ||
		!strings.Contains(resultText(res), `- gh: server "gh" is down: backend "gh": variable ${TOOLGATE_TEST_UNSET_TOKEN} (env.GITHUB_TOKEN) is not set`) {
		t.Errorf("search for nothing: %s", resultText(res))
	}
	out, _, err := runToolgate(t, data, "servers", "--config", cfg)
	if err != nil || !strings.Contains(out, "gh    stdio  CANNOT START (below)") || !strings.Contains(out, "  gh: variable ${TOOLGATE_TEST_UNSET_TOKEN} (env.GITHUB_TOKEN) is not set") {
		t.Errorf("servers: %v\n%s", err, out)
	}
	const bare = `env.API_TOKEN is "$API_TOKEN", passed as written: toolgate expands ${API_TOKEN} (with braces)`
	if !strings.Contains(out, "variables written without braces (a shell's way) reach the server as written:\n  fake: "+bare) {
		t.Errorf("servers does not say the variable without braces:\n%s", out)
	}
	if log, _, err := runToolgate(t, data, "logs", "-n", "0"); err != nil || !strings.Contains(log, "a variable written without braces reaches the server as written") || !strings.Contains(log, "server=fake") {
		t.Errorf("serve's log does not say the variable without braces: %v\n%s", err, log)
	}
}

// Flags that name a path take "~/" as the home folder: an MCP client
// passes its "args" without a shell (--config ~/servers.json named a
// folder called "~" in the client's working directory).
func TestFlagsExpandHome(t *testing.T) {
	home := t.TempDir()
	t.Setenv("HOME", home)
	if err := os.WriteFile(filepath.Join(home, "servers.json"), []byte(`{"mcpServers": {"a": {"command": "sh"}}}`), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := toolgateCmd(t, "", "--data-dir", "~/tg", "servers", "--config", "~/servers.json", "--json")
	cmd.Dir = t.TempDir()                           // where a "~" folder would have been made
	cmd.Env = append(cmd.Env, "TOOLGATE_DATA_DIR=") // --data-dir decides
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), `"config": "`+filepath.Join(home, "servers.json")+`"`) {
		t.Fatalf("servers --config ~/servers.json: %v\n%s", err, out)
	}
	if _, err := os.Stat(filepath.Join(cmd.Dir, "~")); err == nil {
		t.Errorf("a folder named ~ was made in the working directory")
	}
	keys := toolgateCmd(t, "", "--data-dir", "~/tg", "keys", "create", "--name", "k")
	keys.Dir = cmd.Dir
	keys.Env = append(keys.Env, "TOOLGATE_DATA_DIR=")
	if out, err := keys.CombinedOutput(); err != nil {
		t.Fatalf("keys create --data-dir ~/tg: %v\n%s", err, out)
	}
	if _, err := os.Stat(filepath.Join(home, "tg", "keys.jsonl")); err != nil {
		t.Errorf("--data-dir ~/tg: %v", err)
	}
}

// A URL made of a variable is one the loader accepts (the variable is the
// gateway's to set, or its default applies): servers add writes it,
// import --into takes it, and neither says the URL is not absolute, nor
// shows a made-up value for the variable.
func TestVariableURLAcceptedWhereTheLoaderIs(t *testing.T) {
	t.Setenv("TG_TEST_API_BASE", "")
	os.Unsetenv("TG_TEST_API_BASE")
	cfg := writeConfig(t, `{"mcpServers": {}}`)
	for i, url := range []string{"${TG_TEST_API_BASE:-https://api.example.com}/mcp", "${TG_TEST_API_BASE}/mcp"} {
		var stderr bytes.Buffer
		name := fmt.Sprintf("api%d", i)
		if err := runServersAdd(&stderr, name, nil, serversAddFlags{config: cfg, url: url}); err != nil {
			t.Fatalf("servers add --url %s: %v", url, err)
		}
		if i == 1 && !strings.Contains(stderr.String(), "CANNOT START: variable ${TG_TEST_API_BASE} (url) is not set") {
			t.Errorf("servers add --url %s does not say the variable is unset:\n%s", url, stderr.String())
		}
	}
	var out bytes.Buffer
	if err := runServers(&out, &globals{dataDir: t.TempDir()}, []string{cfg}, false); err != nil || !strings.Contains(out.String(), "valid, 2 servers") {
		t.Errorf("servers -c after the adds: %v\n%s", err, out.String())
	}
	mcp := filepath.Join(t.TempDir(), ".mcp.json")
	if err := os.WriteFile(mcp, []byte(`{"mcpServers": {"api": {"type": "http", "url": "${TG_TEST_API_BASE}/mcp"}}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	into := writeConfig(t, `{"mcpServers": {}}`)
	for _, f := range []importFlags{{}, {into: into}} {
		var stdout, stderr bytes.Buffer
		if err := runImport(&stdout, &stderr, []string{mcp}, f); err != nil {
			t.Fatalf("import %+v: %v", f, err)
		}
		if s := stderr.String(); strings.Contains(s, "not an absolute") || strings.Contains(s, "placeholder") {
			t.Errorf("import %+v:\n%s", f, s)
		}
	}
}

// servers disable/enable/restart NAME with no gateway running: against
// --config a name it lacks is a usage error, and nothing is recorded;
// with no config either, the name is recorded with a warning that it could
// not be checked, and how to check it.
func TestServersToggleUncheckedName(t *testing.T) {
	g := &globals{dataDir: t.TempDir()}
	cfg := writeConfig(t, `{"mcpServers": {"memory": {"command": "npx"}}}`)
	var stderr bytes.Buffer
	err := runServersToggle(context.Background(), &stderr, g, cfg, "memroy", true)
	if ue := (usageError{}); !errors.As(err, &ue) || !strings.Contains(err.Error(), `no server named "memroy"`) || !strings.Contains(err.Error(), "memory") {
		t.Errorf("disable memroy --config: %v", err)
	}
	if _, err := os.Stat(live.StateFile(g.DataDir())); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a refused disable wrote the state file: %v", err)
	}
	for _, c := range []struct {
		name    string
		run     func(io.Writer) error
		warning bool
	}{
		{"disable memroy", func(w io.Writer) error { return runServersToggle(context.Background(), w, g, "", "memroy", true) }, true},
		{"enable totally-bogus", func(w io.Writer) error {
			return runServersToggle(context.Background(), w, g, "", "totally-bogus", false)
		}, true},
		{"restart memroi", func(w io.Writer) error { return runServersRestart(context.Background(), w, g, "", "memroi") }, true},
		// Disabled at run time (above): the state file knows it.
		{"enable memroy", func(w io.Writer) error { return runServersToggle(context.Background(), w, g, "", "memroy", false) }, false},
	} {
		stderr.Reset()
		if err := c.run(&stderr); err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		want := fmt.Sprintf("could not check that %q is a server", strings.Fields(c.name)[1])
		if strings.Contains(stderr.String(), want) != c.warning || c.warning && !strings.Contains(stderr.String(), "pass --config FILE") {
			t.Errorf("%s: warning %v wanted:\n%s", c.name, c.warning, stderr.String())
		}
	}
}

// A server disabled at run time and then removed is not disabled when it
// is added again: remove clears the name in state.json; and add says when
// a name is disabled there (disabled after the removal, or by an older
// toolgate), with the command that enables it.
func TestServersRemoveClearsDisabled(t *testing.T) {
	data := t.TempDir()
	cfg := writeConfig(t, `{"mcpServers": {"mem": {"command": "sh"}}}`)
	run := func(args ...string) string {
		t.Helper()
		out, err := toolgateCmd(t, data, args...).CombinedOutput()
		if err != nil {
			t.Fatalf("%v: %v\n%s", args, err, out)
		}
		return string(out)
	}
	disabled := func() []string {
		st, err := live.ReadState(live.StateFile(data))
		if err != nil {
			t.Fatal(err)
		}
		return st.Disabled
	}
	run("servers", "disable", "mem", "--config", cfg)
	if out := run("servers", "remove", "mem", "--config", cfg); !strings.Contains(out, `"mem" was disabled at run time`) || len(disabled()) != 0 {
		t.Errorf("remove of a disabled server: disabled %v after it\n%s", disabled(), out)
	}
	if out := run("servers", "add", "mem", "--config", cfg, "--", "sh"); strings.Contains(out, "disabled") {
		t.Errorf("add after remove:\n%s", out)
	}
	run("servers", "remove", "mem", "--config", cfg)
	run("servers", "disable", "mem")
	if out := run("servers", "add", "mem", "--config", cfg, "--", "sh"); !strings.Contains(out, `warning: "mem" is disabled at run time in the data folder`) || !strings.Contains(out, "toolgate servers enable mem starts it") {
		t.Errorf("add of a name disabled at run time:\n%s", out)
	}
	// Each change is in the audit log under the server: `audit tail
	// --server mem` finds them (the record's "server").
	out, stderr, err := runToolgate(t, data, "audit", "tail", "--server", "mem", "-n", "0", "--json")
	if err != nil {
		t.Fatalf("audit tail --server mem: %v\n%s", err, stderr)
	}
	var actions []string
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		var r audit.Record
		if err := json.Unmarshal([]byte(line), &r); err != nil || r.Server != "mem" {
			t.Errorf("audit tail --server mem printed %s (%v)", line, err)
		}
		actions = append(actions, r.Action)
	}
	if want := []string{"servers disable", "servers remove", "servers add", "servers remove", "servers disable", "servers add"}; !slices.Equal(actions, want) {
		t.Errorf("audit tail --server mem: %q, want %q", actions, want)
	}
	if _, stderr, _ := runToolgate(t, data, "audit", "tail", "--server", "other"); !strings.Contains(stderr, "matches --server other") {
		t.Errorf("audit tail --server other: %s", stderr)
	}
}

// TestNoServersNote: what the console's backends table says when no server
// runs: a config without servers, and how to add one to its last file; a
// config whose servers are all "disabled": true, that; else nothing (its
// servers show once started).
func TestNoServersNote(t *testing.T) {
	for _, c := range []struct{ doc, want string }{
		{`{"mcpServers": {}}`, `No servers are configured: add one to "mcpServers" in /etc/tg/my config.json (the gateway applies the saved file), with toolgate servers add NAME --config '/etc/tg/my config.json' -- COMMAND [ARG...] (or --url URL), or from an MCP client with toolgate__add_server (once the config says "toolgate": {"management": {"allowConfigChanges": true}}).`},
		{`{"mcpServers": {"mem": {"command": "true", "disabled": true}}}`, `No server runs: each one in the config is "disabled": true there.`},
		{`{"mcpServers": {"mem": {"command": "true"}, "off": {"command": "true", "disabled": true}}}`, ""},
	} {
		cfg, err := config.Parse([]byte(c.doc), "/etc/tg/my config.json", func(string) (string, bool) { return "", false })
		if err != nil {
			t.Fatalf("%s: %v", c.doc, err)
		}
		if got := noServersNote(cfg, "/etc/tg/my config.json"); got != c.want {
			t.Errorf("%s: the console's note %q, want %q", c.doc, got, c.want)
		}
	}
}

// TestServerNamesForgiving: the commands that take a server's name read it
// as the management tools read theirs (catalog.ServerMeant): in another
// case or with "_" for "-", it is the one server named so; a name that may
// be several is a usage error naming them, in the tools' words. They
// answered that there was no server "MEMORY".
func TestServerNamesForgiving(t *testing.T) {
	path := writeConfig(t, `{"mcpServers": {"memory": {"command": "true"}, "x-y_z": {"command": "true"}, "x_y-z": {"command": "true"},
		"web": {"url": "https://127.0.0.1:1/mcp"}}}`)
	data := t.TempDir()
	run := func(args ...string) (string, int) {
		t.Helper()
		out, err := toolgateCmd(t, data, args...).CombinedOutput()
		code := 0
		if ee := (*exec.ExitError)(nil); errors.As(err, &ee) {
			code = ee.ExitCode()
		} else if err != nil {
			t.Fatal(err)
		}
		return string(out), code
	}
	const ambiguous = `server "x-y-z" may be any of "x-y_z", "x_y-z", which differ only in case or in "-" and "_": give one of them exactly as written`
	for _, c := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"servers", "disable", "MEMORY", "--config", path}, 0, `server "memory" disabled`},
		{[]string{"servers", "restart", "Memory", "--config", path}, 1, "`toolgate servers enable memory` starts it"},
		// No config, no gateway: the state file's disabled servers.
		{[]string{"servers", "enable", "MEMORY"}, 0, `server "memory" enabled`},
		{[]string{"servers", "disable", "x-y-z", "--config", path}, 2, ambiguous},
		{[]string{"servers", "restart", "x-y-z", "--config", path}, 2, ambiguous},
		{[]string{"servers", "remove", "x-y-z", "--config", path}, 2, ambiguous},
		{[]string{"auth", "login", "x-y-z", "--config", path}, 2, ambiguous},
		{[]string{"auth", "login", "MEMORY", "--config", path}, 2, `server "memory" in ` + path + ` is a stdio server`},
		{[]string{"auth", "logout", "WEB", "--config", path}, 2, `no login of "web" is stored`},
		{[]string{"servers", "remove", "Memory", "--config", path}, 0, `removed server "memory" from ` + path},
	} {
		out, code := run(c.args...)
		if code != c.code || !strings.Contains(out, c.want) {
			t.Errorf("toolgate %s: exit status %d\n%s\nwant %d and %q", strings.Join(c.args, " "), code, out, c.code, c.want)
		}
	}
}

// `servers --json` gives each server's effective timeouts, and a remote
// server's keepAlive (its own, else the toolgate section's, else the
// default); a stdio server, which is not pinged, none.
func TestServersJSONKeepAlive(t *testing.T) {
	cfg := writeConfig(t, `{"mcpServers": {"local": {"command": "sh"}, "a": {"url": "https://a.example/mcp"},
		"b": {"url": "https://b.example/mcp", "keepAlive": "15s"}}, "toolgate": {"keepAlive": "1m"}}`)
	var out bytes.Buffer
	if err := runServers(&out, &globals{dataDir: t.TempDir()}, []string{cfg}, true); err != nil {
		t.Fatal(err)
	}
	var rep struct {
		Servers []struct{ Name, KeepAlive, CallTimeout string }
	}
	if err := json.Unmarshal(out.Bytes(), &rep); err != nil {
		t.Fatalf("%v:\n%s", err, out.String())
	}
	got := map[string]string{}
	for _, s := range rep.Servers {
		got[s.Name] = s.KeepAlive + " " + s.CallTimeout
	}
	want := map[string]string{"local": " 55s", "a": "1m0s 55s", "b": "15s 55s"}
	if !maps.Equal(got, want) {
		t.Errorf("keepAlive and callTimeout by server: %v, want %v", got, want)
	}
}

// `servers --json` gives each server's maxResultBytes: its own, else the
// toolgate section's, else the gateway's default.
func TestServersJSONMaxResultBytes(t *testing.T) {
	for _, tc := range []struct{ section, want string }{
		{``, fmt.Sprintf("a=%d b=500000", gateway.DefaultMaxResultBytes)},
		{`, "toolgate": {"maxResultBytes": 20000}`, "a=20000 b=500000"},
	} {
		cfg := writeConfig(t, `{"mcpServers": {"a": {"command": "sh"}, "b": {"command": "sh", "maxResultBytes": 500000}}`+tc.section+`}`)
		var out bytes.Buffer
		if err := runServers(&out, &globals{dataDir: t.TempDir()}, []string{cfg}, true); err != nil {
			t.Fatal(err)
		}
		var rep struct {
			Servers []struct {
				Name           string
				MaxResultBytes int
			}
		}
		if err := json.Unmarshal(out.Bytes(), &rep); err != nil {
			t.Fatalf("%v:\n%s", err, out.String())
		}
		var got []string
		for _, s := range rep.Servers {
			got = append(got, fmt.Sprintf("%s=%d", s.Name, s.MaxResultBytes))
		}
		if slices.Sort(got); strings.Join(got, " ") != tc.want {
			t.Errorf("toolgate section %q: maxResultBytes by server %v, want %s", tc.section, got, tc.want)
		}
	}
}

// TestServersAddSettings: servers add takes the keys every server entry
// may have, as flags (--description, --language, --max-result-bytes, the
// timeouts, --lazy), and writes them as the file would hold them; a value
// the config refuses is a usage error (exit status 2) in the config's own
// words, the ones the same entry written in the file gets, and nothing is
// added. They were unknown flags: a German server with a tight result
// bound took an edit of the file by hand.
func TestServersAddSettings(t *testing.T) {
	path := writeConfig(t, `{"mcpServers": {}}`)
	data := t.TempDir()
	add := func(args ...string) (string, int) {
		out, err := toolgateCmd(t, data, append([]string{"servers", "add"}, args...)...).CombinedOutput()
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			return string(out), ee.ExitCode()
		}
		if err != nil {
			t.Fatal(err)
		}
		return string(out), 0
	}
	if out, code := add("buchhaltung", "--config", path, "--description", "Rechnungen, Kunden und Buchungen", "--language", "de",
		"--max-result-bytes", "2000", "--connect-timeout", "2m", "--call-timeout", "90", "--lazy", "--idle-timeout", "10m", "--", "sh", "buch.sh"); code != 0 {
		t.Fatalf("servers add with settings: exit status %d\n%s", code, out)
	}
	if out, code := add("remote", "--config", path, "--url", "https://r.example/mcp", "--keep-alive", "15s"); code != 0 {
		t.Fatalf("servers add --keep-alive: exit status %d\n%s", code, out)
	}
	after, _ := os.ReadFile(path)
	cfg, err := config.Parse(after, path, nil)
	if err != nil {
		t.Fatalf("%v\n%s", err, after)
	}
	b, r := cfg.MCPServers["buchhaltung"], cfg.MCPServers["remote"]
	if b.Description != "Rechnungen, Kunden und Buchungen" || b.Language != "de" || b.MaxResultBytes != 2000 || b.ConnectTimeout.Duration != 2*time.Minute ||
		b.CallTimeout.Duration != 90*time.Second || !b.Lazy || b.IdleTimeout.Duration != 10*time.Minute || r.KeepAlive.Duration != 15*time.Second {
		t.Errorf("entries added:\n%s", after)
	}
	for _, tc := range []struct {
		flags []string
		entry string // the same, written in a file
	}{
		{[]string{"--max-result-bytes", "0"}, `"maxResultBytes": 0`},
		{[]string{"--max-result-bytes", "1MB"}, `"maxResultBytes": "1MB"`},
		{[]string{"--language", "German"}, `"language": "German"`},
		{[]string{"--call-timeout", "soon"}, `"callTimeout": "soon"`},
		{[]string{"--connect-timeout", "-5"}, `"connectTimeout": -5`},
		{[]string{"--idle-timeout", "10m"}, `"idleTimeout": "10m"`},
		{[]string{"--description", "a\x01b"}, `"description": "a\u0001b"`},
	} {
		_, want := config.Parse([]byte(`{"mcpServers": {"bad": {"command": "sh", `+tc.entry+`}}}`), path, nil)
		if want == nil {
			t.Fatalf("the config takes %s", tc.entry)
		}
		loader := strings.TrimPrefix(want.Error(), "config "+path+": ")
		out, code := add(append(append([]string{"bad", "--config", path}, tc.flags...), "--", "sh")...)
		if again, _ := os.ReadFile(path); code != 2 || !strings.Contains(out, loader) || string(again) != string(after) {
			t.Errorf("servers add %s: exit status %d\n%s\nwant 2, the config's words (%s), the file unchanged", strings.Join(tc.flags, " "), code, out, loader)
		}
	}
	// The config's words name keys; the flags that write them follow.
	if out, _ := add("bad", "--config", path, "--idle-timeout", "10m", "--", "sh"); !strings.Contains(out, `(on this command line, "idleTimeout" is --idle-timeout, "lazy" is --lazy)`) {
		t.Errorf("servers add --idle-timeout without --lazy does not name --lazy:\n%s", out)
	}
	// A remote server's flag beside a command: said with the flag's name.
	if out, code := add("bad", "--config", path, "--keep-alive", "5s", "--", "sh"); code != 2 || !strings.Contains(out, "servers add bad: --keep-alive is for a remote server (--url), not a local one started by a command: leave it out\n") {
		t.Errorf("servers add --keep-alive beside a command: exit status %d\n%s", code, out)
	}
}
