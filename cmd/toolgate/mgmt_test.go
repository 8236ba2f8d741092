package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/toolgate/toolgate/gateway"
	"github.com/toolgate/toolgate/gateway/audit"
	"github.com/toolgate/toolgate/gateway/backend"
	"github.com/toolgate/toolgate/gateway/backend/backendtest"
	"github.com/toolgate/toolgate/gateway/config"
	"github.com/toolgate/toolgate/gateway/live"
	"github.com/toolgate/toolgate/internal/shellword"
	"github.com/toolgate/toolgate/internal/testenv"
)

// kgProfile is the profile: the memory server without its delete
// tools.
var kgProfile = map[string]any{"servers": []string{"memory"}, "tools": map[string]any{"deny": []string{"memory__delete_*"}}}

// toolNames are the names of a search answer's tools.
func toolNames(a searchAnswer) []string {
	var out []string
	for _, tl := range a.Tools {
		out = append(out, tl.Name)
	}
	return out
}

func hasPrefix(names []string, prefix string) bool {
	return slices.ContainsFunc(names, func(n string) bool { return strings.HasPrefix(n, prefix) })
}

// connectURL connects a go-sdk client to a streamable HTTP endpoint; the
// session is closed when the test ends.
func connectURL(t *testing.T, ctx context.Context, url string) *mcp.ClientSession {
	t.Helper()
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "e2e"}, nil).Connect(ctx, &mcp.StreamableClientTransport{Endpoint: url}, nil)
	if err != nil {
		t.Fatalf("connect to %s: %v", url, err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs
}

// TestManagementOverHTTP is the "done when" with a go-sdk client
// (scripts/smoke.mjs runs it with the TypeScript SDK, in `make test`): the three
// bundled servers and profile kg behind a real toolgate serve --http.
func TestManagementOverHTTP(t *testing.T) {
	cfgPath := bundledConfig(t, nil)
	withSettings(t, cfgPath, map[string]any{"profiles": map[string]any{"kg": kgProfile}})
	before, _ := os.ReadFile(cfgPath)
	dataDir := t.TempDir()
	addr := freeAddr(t)
	cmd := toolgateCmd(t, dataDir, "serve", "--config", cfgPath, "--http", addr)
	cmd.Stderr = testLog(t, "toolgate: ")
	ctx, cs := connectHTTP(t, cmd, addr, 3*time.Minute)
	indexServedHTTP(t, addr)

	// tools/list is still the two tools.
	lt, err := cs.ListTools(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	var listed []string
	for _, tl := range lt.Tools {
		listed = append(listed, tl.Name)
	}
	if !slices.Equal(listed, []string{"execute_tool", "search_tools"}) && !slices.Equal(listed, []string{"search_tools", "execute_tool"}) {
		t.Fatalf("tools/list = %v, want the two tools", listed)
	}

	// Search finds the management tool, whose result names the servers.
	ans, _ := searchTools(t, ctx, cs, "which MCP servers are connected and are they healthy", 3)
	if names := toolNames(ans); len(names) == 0 || names[0] != "toolgate__list_servers" {
		t.Fatalf("search for the servers' health = %v, want toolgate__list_servers first", names)
	}
	res := executeTool(t, ctx, cs, "toolgate__list_servers", nil)
	for _, s := range []string{"everything", "memory", "filesystem"} {
		if res.IsError || !strings.Contains(resultText(res), s+": ") {
			t.Errorf("list_servers does not name %s: %s", s, resultText(res))
		}
	}
	var list struct {
		Servers []struct{ Name, State string }
	}
	b, _ := json.Marshal(res.StructuredContent)
	if err := json.Unmarshal(b, &list); err != nil || len(list.Servers) != 3 {
		t.Errorf("list_servers structuredContent: %v %s", err, b)
	}
	if ans, _ := searchTools(t, ctx, cs, "turn off the everything server", 3); !slices.Contains(toolNames(ans), "toolgate__disable_server") {
		t.Errorf("search to turn a server off = %v, want toolgate__disable_server", toolNames(ans))
	}

	t.Run("disable and enable", func(t *testing.T) {
		const q = "echo back the message it is given"
		if ans, _ := searchTools(t, ctx, cs, q, 10); !hasPrefix(toolNames(ans), "everything__") {
			t.Fatalf("before disabling: %v", toolNames(ans))
		}
		if res := executeTool(t, ctx, cs, "toolgate__disable_server", map[string]any{"name": "everything"}); res.IsError {
			t.Fatalf("disable_server: %s", resultText(res))
		}
		// At once: the answer to disable_server came after the tools left.
		if ans, _ := searchTools(t, ctx, cs, q, 50); hasPrefix(toolNames(ans), "everything__") {
			t.Errorf("everything's tools still searchable after disabling it: %v", toolNames(ans))
		}
		if res := executeTool(t, ctx, cs, "everything__echo", map[string]any{"message": "hi"}); !res.IsError || !strings.Contains(resultText(res), "disabled") {
			t.Errorf("execute on a disabled server: %s", resultText(res))
		}
		rep := getStatus(t, addr)
		if !slices.Equal(rep.Stats.Disabled, []string{"everything"}) || slices.ContainsFunc(rep.Backends, func(b gateway.BackendStatus) bool { return b.Name == "everything" }) {
			t.Errorf("/status after disabling: disabled %v, backends %v", rep.Stats.Disabled, rep.Backends)
		}
		if st, err := live.ReadState(live.StateFile(dataDir)); err != nil || !slices.Equal(st.Disabled, []string{"everything"}) {
			t.Errorf("state file: %+v %v", st, err)
		}
		// The answer comes once it is up, or says it still connects after
		// the 10 s it waits (a loaded machine).
		if res := executeTool(t, ctx, cs, "toolgate__enable_server", map[string]any{"name": "everything"}); res.IsError ||
			!strings.HasPrefix(resultText(res), `Server "everything" is enabled and up, with 13 tools.`) && !strings.HasPrefix(resultText(res), `Server "everything" is enabled and still connecting`) {
			t.Fatalf("enable_server: %s", resultText(res))
		}
		if ans, _ := searchTools(t, ctx, cs, q, 10); !hasPrefix(toolNames(ans), "everything__") {
			t.Errorf("everything's tools not back after enabling it: %v", toolNames(ans))
		}
		if res := executeTool(t, ctx, cs, "everything__echo", map[string]any{"message": "back"}); res.IsError || !strings.Contains(resultText(res), "back") {
			t.Errorf("everything__echo after enabling: %s", resultText(res))
		}
		// The shell's way, on the running gateway: the state file is watched.
		// It waits for the gateway to apply it, and says so.
		out, err := toolgateCmd(t, dataDir, "servers", "disable", "memory", "--config", cfgPath).CombinedOutput()
		if err != nil || !strings.Contains(string(out), "(http "+addr+"): disabled: stopped, its tools hidden") {
			t.Fatalf("toolgate servers disable: %v\n%s", err, out)
		}
		waitStatus(t, addr, "memory disabled by the CLI", func(s live.Stats) bool { return slices.Equal(s.Disabled, []string{"memory"}) })
		if ans, _ := searchTools(t, ctx, cs, "create entities in the knowledge graph", 20); hasPrefix(toolNames(ans), "memory__") {
			t.Errorf("memory's tools after `servers disable memory`: %v", toolNames(ans))
		}
		// The state once its start is over (or still connecting on a
		// loaded machine).
		if out, err := toolgateCmd(t, dataDir, "servers", "enable", "memory").CombinedOutput(); err != nil ||
			!strings.Contains(string(out), "(http "+addr+"): enabled: up, 9 tools") && !strings.Contains(string(out), "(http "+addr+"): enabled: still connecting") {
			t.Fatalf("toolgate servers enable: %v\n%s", err, out)
		}
		waitStatus(t, addr, "memory enabled by the CLI", func(s live.Stats) bool { return len(s.Disabled) == 0 })
		// servers restart: the running gateway starts memory again (a
		// new process), and its tools work.
		restarts := func() (int, int) {
			for _, b := range getStatus(t, addr).Backends {
				if b.Name == "memory" && b.State == backend.StateUp {
					return b.Restarts, b.PID
				}
			}
			return -1, 0
		}
		var before, pid int
		testenv.Eventually(t, "memory up", func() bool { before, pid = restarts(); return before >= 0 })
		out, err = toolgateCmd(t, dataDir, "servers", "restart", "memory", "--config", cfgPath).CombinedOutput()
		if err != nil || !strings.Contains(string(out), `restart of server "memory" requested`) || !strings.Contains(string(out), "(http "+addr+"): restarted") {
			t.Fatalf("toolgate servers restart: %v\n%s", err, out)
		}
		testenv.Eventually(t, "memory restarted by the CLI", func() bool { n, p := restarts(); return n == before+1 && p != pid && p != 0 })
		if res := executeTool(t, ctx, cs, "memory__read_graph", map[string]any{}); res.IsError {
			t.Errorf("memory__read_graph after `servers restart memory`: %s", resultText(res))
		}
	})

	t.Run("add_server refused", func(t *testing.T) {
		marker := filepath.Join(t.TempDir(), "ran")
		res := executeTool(t, ctx, cs, "toolgate__add_server", map[string]any{
			"name": "evil", "command": "sh", "args": []string{"-c", "touch " + marker + "; sleep 60"}})
		if !res.IsError || !strings.Contains(resultText(res), "allowConfigChanges") {
			t.Fatalf("add_server: isError=%v %s", res.IsError, resultText(res))
		}
		res = executeTool(t, ctx, cs, "toolgate__remove_server", map[string]any{"name": "memory"})
		if !res.IsError || !strings.Contains(resultText(res), "refused") {
			t.Errorf("remove_server: isError=%v %s", res.IsError, resultText(res))
		}
		if _, err := os.Stat(marker); err == nil {
			t.Error("the refused server's command ran")
		}
		if after, _ := os.ReadFile(cfgPath); string(after) != string(before) {
			t.Error("the config file changed")
		}
		if rep := getStatus(t, addr); len(rep.Backends) != 3 || rep.Stats.ReloadGeneration != 0 {
			t.Errorf("after the refusal: %d backends, %d reloads", len(rep.Backends), rep.Stats.ReloadGeneration)
		}
		// A policy refused them: the metric and the audit log say denied
		// (the metric used to count them as errors).
		_, body := httpGet(t, "http://"+addr+"/metrics", "")
		parser := expfmt.NewTextParser(model.UTF8Validation)
		mfs, err := parser.TextToMetricFamilies(strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		for _, tool := range []string{"add_server", "remove_server"} {
			denied, _ := metricValue(mfs, "toolgate_tool_calls_total", map[string]string{"server": "toolgate", "tool": tool, "outcome": "denied"})
			failed, _ := metricValue(mfs, "toolgate_tool_calls_total", map[string]string{"server": "toolgate", "tool": tool, "outcome": "error"})
			if denied != 1 || failed != 0 {
				t.Errorf("toolgate_tool_calls_total for %s: denied %v, error %v; want denied 1, error 0", tool, denied, failed)
			}
		}
		recs := auditRecords(t, dataDir, audit.Filter{Tool: "toolgate__add_server"}, func(rs []audit.Record) bool { return len(rs) > 0 })
		if r := recs[len(recs)-1]; r.Decision != audit.Denied || r.Outcome != "" || !strings.Contains(r.Reason, "allowConfigChanges") {
			t.Errorf("audit record of the refused add_server: decision %q, outcome %q, reason %q; want denied, no outcome, the reason", r.Decision, r.Outcome, r.Reason)
		}
	})

	t.Run("profile route", func(t *testing.T) {
		kg := connectURL(t, ctx, "http://"+addr+"/profiles/kg/mcp")
		ans, _ := searchTools(t, ctx, kg, "delete or create entities, relations and observations; read files and directories", 50)
		names := toolNames(ans)
		if len(names) == 0 {
			t.Fatal("no tools at /profiles/kg/mcp")
		}
		for _, n := range names {
			if !strings.HasPrefix(n, "memory__") || strings.HasPrefix(n, "memory__delete_") {
				t.Errorf("/profiles/kg/mcp shows %s (all: %v)", n, names)
			}
		}
		for _, name := range []string{"filesystem__list_allowed_directories", "memory__delete_entities"} {
			res := executeTool(t, ctx, kg, name, map[string]any{})
			if !res.IsError || !strings.Contains(resultText(res), `profile "kg"`) {
				t.Errorf("execute %s at /profiles/kg/mcp: isError=%v %s", name, res.IsError, resultText(res))
			}
		}
		res := executeTool(t, ctx, kg, "memory__read_graph", map[string]any{})
		if res.IsError {
			t.Errorf("memory__read_graph at /profiles/kg/mcp: %s", resultText(res))
		}
		// The session-less HTTP client is told to use the route, at the
		// address it reached the gateway at (it read http://HOST:PORT).
		// And to the command that serves this config, address and data
		// folder with the profile (it read `toolgate serve --profile
		// NAME`, which serve refuses without --config).
		res = executeTool(t, ctx, cs, "toolgate__activate_profile", map[string]any{"name": "kg"})
		serve := shellword.Join("toolgate", "serve", "--config", cfgPath, "--http", addr, "--profile", "kg", "--data-dir", dataDir)
		if !res.IsError || !strings.Contains(resultText(res), " http://"+addr+"/profiles/kg/mcp,") || !strings.Contains(resultText(res), "`"+serve+"`") {
			t.Errorf("activate_profile over HTTP: isError=%v %s\nwant the command %s", res.IsError, resultText(res), serve)
		}
		resp, err := http.Post("http://"+addr+"/profiles/nope/mcp", "application/json", strings.NewReader(`{}`))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusNotFound {
			t.Errorf("/profiles/nope/mcp: %s, want 404", resp.Status)
		}
	})
}

// Over stdio a session may switch profiles, and with allowConfigChanges
// the management tools add a server (a real process) and remove it,
// keeping the file's other keys. serve --profile fixes the profile, and an
// unknown one is an error at start.
func TestManagementOverStdio(t *testing.T) {
	cfgPath := bundledConfig(t, nil)
	withSettings(t, cfgPath, map[string]any{"profiles": map[string]any{"kg": kgProfile}, "management": map[string]any{"allowConfigChanges": true}})
	dataDir := t.TempDir()
	cmd := toolgateCmd(t, dataDir, "serve", "--config", cfgPath)
	cmd.Stderr = testLog(t, "toolgate: ")
	ctx, cs := connectStdio(t, cmd, 3*time.Minute)
	indexServed(t, ctx, cs)

	const q = "delete entities; list the files of a directory; echo a message"
	if res := executeTool(t, ctx, cs, "toolgate__activate_profile", map[string]any{"name": "kg"}); res.IsError {
		t.Fatalf("activate_profile: %s", resultText(res))
	}
	ans, _ := searchTools(t, ctx, cs, q, 50)
	for _, n := range toolNames(ans) {
		// A profile the session chose keeps the tools to switch again.
		if n == "toolgate__activate_profile" || n == "toolgate__list_profiles" {
			continue
		}
		if !strings.HasPrefix(n, "memory__") || strings.HasPrefix(n, "memory__delete_") {
			t.Errorf("profile kg active, search shows %s", n)
		}
	}
	if res := executeTool(t, ctx, cs, "toolgate__list_servers", nil); !res.IsError || !strings.Contains(resultText(res), `profile "kg"`) {
		t.Errorf("list_servers inside kg: %s", resultText(res))
	}
	if res := executeTool(t, ctx, cs, "toolgate__list_profiles", nil); res.IsError || !strings.Contains(resultText(res), "(active)") {
		t.Errorf("list_profiles inside kg: %s", resultText(res))
	}
	if res := executeTool(t, ctx, cs, "toolgate__activate_profile", map[string]any{"name": ""}); res.IsError {
		t.Fatalf("activate_profile back to none: %s", resultText(res))
	}
	if ans, _ := searchTools(t, ctx, cs, q, 50); !hasPrefix(toolNames(ans), "filesystem__") {
		t.Errorf("after leaving kg: %v", toolNames(ans))
	}
	res := executeTool(t, ctx, cs, "toolgate__list_profiles", nil)
	if res.IsError || !strings.Contains(resultText(res), "kg: servers: memory; deny: memory__delete_*") {
		t.Errorf("list_profiles: %s", resultText(res))
	}

	// add_server: a real process, its tools searchable once it listed them.
	root := repoRoot(t)
	res = executeTool(t, ctx, cs, "toolgate__add_server", map[string]any{
		"name":    "notes",
		"command": "node",
		"args":    []string{filepath.Join(root, "examples/servers/node_modules/@modelcontextprotocol/server-memory/dist/index.js")},
		"env":     map[string]string{"MEMORY_FILE_PATH": filepath.Join(t.TempDir(), "notes.jsonl")},
		// The keys every entry may have, through execute_tool's check of
		// the tool's schema (the durations a string or a number).
		"description": "a knowledge graph of notes", "maxResultBytes": 20000, "callTimeout": 90, "connectTimeout": "1m",
	})
	if res.IsError {
		t.Fatalf("add_server: %s", resultText(res))
	}
	if b, _ := os.ReadFile(cfgPath); !strings.Contains(string(b), `"description": "a knowledge graph of notes"`) || !strings.Contains(string(b), `"callTimeout": 90`) ||
		!strings.Contains(string(b), `"connectTimeout": "1m"`) || !strings.Contains(string(b), `"maxResultBytes": 20000`) {
		t.Errorf("add_server's settings are not in the file:\n%s", b)
	}
	// A value the config refuses: in the config's words, nothing written.
	res = executeTool(t, ctx, cs, "toolgate__add_server", map[string]any{"name": "tight", "command": "node", "maxResultBytes": 0, "language": "German"})
	if !res.IsError || !strings.Contains(resultText(res), `mcpServers["tight"].maxResultBytes: 0 is out of range`) || !strings.Contains(resultText(res), `mcpServers["tight"].language: unknown language "German": write "de" (German)`) {
		t.Errorf("add_server with values the config refuses: isError=%v %s", res.IsError, resultText(res))
	}
	testenv.Eventually(t, "notes up", func() bool {
		r := executeTool(t, ctx, cs, "toolgate__server_status", map[string]any{"name": "notes"})
		return !r.IsError && strings.HasPrefix(resultText(r), "notes: up")
	})
	testenv.Eventually(t, "notes' tools searchable", func() bool {
		ans, _ := searchTools(t, ctx, cs, "read the whole knowledge graph", 10)
		return slices.Contains(toolNames(ans), "notes__read_graph")
	})
	// A command this gateway cannot find: added (it starts once
	// installed), and the answer says so now rather than "starting".
	res = executeTool(t, ctx, cs, "toolgate__add_server", map[string]any{"name": "clock", "command": "no-such-mcp-server-xyz"})
	if res.IsError || !strings.Contains(resultText(res), `Server "clock" is added to `+cfgPath+` but CANNOT START: command "no-such-mcp-server-xyz" not found in PATH`) {
		t.Errorf("add_server of a missing command: isError=%v %s", res.IsError, resultText(res))
	}
	if sc, _ := res.StructuredContent.(map[string]any); sc == nil || !strings.Contains(fmt.Sprint(sc["cannotStart"]), "not found in PATH") {
		t.Errorf("add_server of a missing command: structuredContent %v, want cannotStart", res.StructuredContent)
	}
	if res := executeTool(t, ctx, cs, "toolgate__remove_server", map[string]any{"name": "clock"}); res.IsError {
		t.Fatalf("remove_server clock: %s", resultText(res))
	}
	// A variable the gateway's environment lacks: added too (it used to
	// make the config invalid, and the call was refused), and said.
	res = executeTool(t, ctx, cs, "toolgate__add_server", map[string]any{"name": "vars", "command": "node", "env": map[string]string{"T": "${TOOLGATE_TEST_UNSET_T2}"}})
	if res.IsError || !strings.Contains(resultText(res), `but CANNOT START: variable ${TOOLGATE_TEST_UNSET_T2} (env.T) is not set in toolgate's environment`) ||
		!strings.Contains(resultText(res), "see above, or remove_server and add_server it with the values written out") {
		t.Errorf("add_server with an unset variable: isError=%v %s", res.IsError, resultText(res))
	}
	if res := executeTool(t, ctx, cs, "toolgate__remove_server", map[string]any{"name": "vars"}); res.IsError {
		t.Fatalf("remove_server vars: %s", resultText(res))
	}
	b, _ := os.ReadFile(cfgPath)
	var cfg map[string]any
	if err := json.Unmarshal(b, &cfg); err != nil || cfg["toolgate"].(map[string]any)["profiles"] == nil {
		t.Fatalf("the config file lost its other keys: %v\n%s", err, b)
	}
	// Disabled, then removed: the name leaves the state file too, so that
	// a server added later under it starts (it came back disabled).
	if res := executeTool(t, ctx, cs, "toolgate__disable_server", map[string]any{"name": "notes"}); res.IsError {
		t.Fatalf("disable_server notes: %s", resultText(res))
	}
	res = executeTool(t, ctx, cs, "toolgate__remove_server", map[string]any{"name": "notes"})
	if res.IsError {
		t.Fatalf("remove_server: %s", resultText(res))
	}
	if st, err := live.ReadState(live.StateFile(dataDir)); err != nil || slices.Contains(st.Disabled, "notes") {
		t.Errorf("after remove_server, the state file: %+v, %v; want notes no longer disabled", st, err)
	}
	if ans, _ := searchTools(t, ctx, cs, "read the whole knowledge graph", 10); slices.Contains(toolNames(ans), "notes__read_graph") {
		t.Error("notes' tools searchable after remove_server")
	}
	if b, _ := os.ReadFile(cfgPath); strings.Contains(string(b), `"notes"`) {
		t.Errorf("notes is still in the config:\n%s", b)
	}
	cs.Close() // the gateway has exited: its audit log is written
	// add_server and remove_server record their edits: the reloads they
	// made, and the watcher's look at the files they wrote, record none.
	if recs := readAudit(t, dataDir, audit.Filter{Tool: audit.ConfigReload}); len(recs) != 0 {
		t.Errorf("the management tools' edits were recorded again as config reloads: %+v", recs)
	}

	// serve --profile fixes the session's profile.
	cmd = toolgateCmd(t, dataDir, "serve", "--config", cfgPath, "--profile", "kg")
	cmd.Stderr = testLog(t, "toolgate: ")
	ctx, cs = connectStdio(t, cmd, 3*time.Minute)
	// A cold start again when the re-index of the removals had not ended
	// before the last gateway stopped: the index it left holds notes, which
	// the config no longer lists.
	indexServed(t, ctx, cs)
	if ans, _ := searchTools(t, ctx, cs, q, 50); hasPrefix(toolNames(ans), "filesystem__") || !hasPrefix(toolNames(ans), "memory__") {
		t.Errorf("serve --profile kg: %v", toolNames(ans))
	}
	cs.Close()

	out, err := toolgateCmd(t, dataDir, "serve", "--config", cfgPath, "--profile", "nope").CombinedOutput()
	if err == nil || !strings.Contains(string(out), `--profile "nope"`) || !strings.Contains(string(out), "kg") {
		t.Errorf("serve --profile nope: %v\n%s", err, out)
	}
}

// serve --config read several times: a user's file and a project's, read as
// one (the project's profile and server over the user's).
func TestServeSeveralConfigs(t *testing.T) {
	srv := func(mark string) config.Server {
		return backendtest.Command(t, backendtest.ModeNormal, "RELOAD_TEST_SERVER="+mark)
	}
	user := filepath.Join(t.TempDir(), "toolgate.json")
	writeServers(t, user, map[string]config.Server{"alpha": srv("alpha")}, false)
	proj := filepath.Join(t.TempDir(), ".mcp.json")
	writeServers(t, proj, map[string]config.Server{"beta": srv("beta")}, false)
	withSettings(t, proj, map[string]any{"profiles": map[string]any{"b": map[string]any{"servers": []string{"beta"}}}})
	dataDir := t.TempDir()

	cmd := toolgateCmd(t, dataDir, "serve", "--config", user, "--config", proj)
	cmd.Stderr = testLog(t, "toolgate: ")
	ctx, cs := connectStdio(t, cmd, 3*time.Minute)
	indexServed(t, ctx, cs) // a cold start past its wait answers "being built"; the next serve starts warm
	ans, _ := searchTools(t, ctx, cs, "echo the text back", 10)
	if names := toolNames(ans); !slices.Contains(names, "alpha__echo") || !slices.Contains(names, "beta__echo") {
		t.Errorf("two config files: %v, want both servers' tools", names)
	}
	cs.Close()

	cmd = toolgateCmd(t, dataDir, "serve", "--config", user, "--config", proj, "--profile", "b")
	cmd.Stderr = testLog(t, "toolgate: ")
	ctx, cs = connectStdio(t, cmd, 3*time.Minute)
	ans, _ = searchTools(t, ctx, cs, "echo the text back", 10)
	if names := toolNames(ans); slices.Contains(names, "alpha__echo") || !slices.Contains(names, "beta__echo") {
		t.Errorf("the project file's profile b: %v, want beta's tools only", names)
	}
}

// TestProfileListChangedOverStdio: toolgate__activate_profile over stdio
// sends notifications/tools/list_changed, and the next tools/list shows
// search_tools' description of the profile (its servers only): before,
// the client kept the description naming every server.
func TestProfileListChangedOverStdio(t *testing.T) {
	cfgPath := bundledConfig(t, nil)
	withSettings(t, cfgPath, map[string]any{"profiles": map[string]any{"kg": kgProfile}})
	cmd := toolgateCmd(t, t.TempDir(), "serve", "--config", cfgPath)
	cmd.Stderr = testLog(t, "toolgate: ")
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	changed := make(chan struct{}, 10)
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "e2e"}, &mcp.ClientOptions{
		ToolListChangedHandler: func(context.Context, *mcp.ToolListChangedRequest) { changed <- struct{}{} },
	}).Connect(ctx, &mcp.CommandTransport{Command: cmd}, nil)
	if err != nil {
		t.Fatalf("connect over stdio: %v", err)
	}
	defer cs.Close()
	describe := func() string {
		t.Helper()
		res, err := cs.ListTools(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		for _, tl := range res.Tools {
			if tl.Name == "search_tools" {
				return tl.Description
			}
		}
		t.Fatal("no search_tools in tools/list")
		return ""
	}
	// Wait for the whole catalog: a description naming every server (each
	// change of it before is notified too).
	all := func(d string) bool {
		return strings.Contains(d, "filesystem (") && strings.Contains(d, "memory (") && strings.Contains(d, "everything (")
	}
	for !all(describe()) {
		select {
		case <-changed:
		case <-ctx.Done():
			t.Fatalf("search_tools never named filesystem: %q", describe())
		}
	}
	for len(changed) > 0 {
		<-changed
	}
	if res := executeTool(t, ctx, cs, "toolgate__activate_profile", map[string]any{"name": "kg"}); res.IsError {
		t.Fatalf("activate_profile: %s", resultText(res))
	}
	select {
	case <-changed:
	case <-time.After(30 * time.Second):
		t.Fatal("no notifications/tools/list_changed after activate_profile")
	}
	if d := describe(); strings.Contains(d, "filesystem") || !strings.Contains(d, "memory") {
		t.Fatalf("tools/list after activate_profile kg: search_tools says %q, want memory's servers only", d)
	}
	// And back: every server again, notified.
	if res := executeTool(t, ctx, cs, "toolgate__activate_profile", map[string]any{"name": ""}); res.IsError {
		t.Fatalf("activate_profile none: %s", resultText(res))
	}
	select {
	case <-changed:
	case <-time.After(30 * time.Second):
		t.Fatal("no notifications/tools/list_changed after leaving the profile")
	}
	if d := describe(); !all(d) {
		t.Fatalf("tools/list after leaving the profile: search_tools says %q, want every server", d)
	}
}
