package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io/fs"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolgate/toolgate/gateway"
	"github.com/toolgate/toolgate/gateway/audit"
	"github.com/toolgate/toolgate/gateway/backend/backendtest"
	"github.com/toolgate/toolgate/internal/testenv"
)

// TestSecurityDoneWhen is issue 15's "done when", with real processes: the
// three bundled npm servers plus a backend with one clean and two poisoned
// tool definitions (an <IMPORTANT> block; an invisible Unicode-tag
// payload), driven by go-sdk clients over streamable HTTP.
//
//   - serve on 0.0.0.0 with --allow-remote and no key exits non-zero with a
//     message (before binding anything);
//   - with keys (on 127.0.0.1: tests never bind other addresses; the key
//     check is the same), no key or a wrong key gets 401;
//   - an admin key finds and runs the clean tool, while both poisoned tools
//     are absent from search and refused by execute with "quarantined";
//   - a key scoped to profile kg (memory only) sees only memory tools and
//     is refused a filesystem tool;
//   - a call whose arguments hold a canary string is in the audit log as a
//     hash, while the canary is in no file of the data folder and in no log;
//   - a definition changed at run time (list_changed) is quarantined, and
//     `toolgate tools approve` releases a tool while the gateway runs;
//   - only the admin key may have the gateway change its config.
func TestSecurityDoneWhen(t *testing.T) {
	poison := backendtest.Command(t, backendtest.ModePoisoned+","+backendtest.ModeRedefine)
	cfg := bundledConfig(t, map[string]any{"poison": map[string]any{"command": poison.Command, "env": poison.Env}})
	withSettings(t, cfg, map[string]any{
		"profiles":   map[string]any{"kg": map[string]any{"servers": []string{"memory"}}},
		"management": map[string]any{"allowConfigChanges": true},
	})
	data := t.TempDir()

	// No keys: a remote address is refused before anything starts.
	_, stderr, err := runToolgate(t, data, "serve", "--config", cfg, "--http", "0.0.0.0:"+freePort(t), "--allow-remote")
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() == 0 || !strings.Contains(stderr, "without API keys") {
		t.Fatalf("serve on 0.0.0.0 without keys: %v\n%s", err, stderr)
	}

	admin := createKey(t, data, "--name", "admin", "--admin")
	kg := createKey(t, data, "--name", "kg-reader", "--profile", "kg", "--config", cfg)
	ops := createKey(t, data, "--name", "ops")
	addr, logs, stop := startGatewayStop(t, data, cfg)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()

	for _, key := range []string{"", "tg_not-a-key"} {
		if r := get(t, "http://"+addr+"/mcp", key); r.StatusCode != http.StatusUnauthorized || !strings.HasPrefix(r.Header.Get("WWW-Authenticate"), "Bearer") {
			t.Errorf("/mcp with key %q: %s", key, r.Status)
		}
	}
	adminCS, err := connectKey(ctx, t, addr, "/mcp", admin, "admin-client")
	if err != nil {
		t.Fatal(err)
	}
	kgCS, err := connectKey(ctx, t, addr, "/mcp", kg, "kg-client")
	if err != nil {
		t.Fatal(err)
	}
	indexServed(t, ctx, adminCS) // GET /status wants a key here; the searches below fail t while the index is being built
	search := func(cs *mcp.ClientSession, q string) []string {
		t.Helper()
		out, _ := searchTools(t, ctx, cs, q, 50)
		return toolNames(out)
	}

	// The admin key: the clean tool is found and runs; the poisoned ones
	// are in no search and refused with "quarantined", with why.
	testenv.Eventually(t, "poison__weather searchable", func() bool { return slices.Contains(search(adminCS, "weather forecast city"), "poison__weather") })
	if res := executeTool(t, ctx, adminCS, "poison__weather", map[string]any{"text": "Paris"}); res.IsError || resultText(res) != "weather: Paris" {
		t.Errorf("poison__weather: %s", resultText(res))
	}
	for q, id := range map[string]string{"save a note for later": "poison__notes", "translate a text into another language": "poison__translate"} {
		if got := search(adminCS, q); slices.Contains(got, id) {
			t.Errorf("search %q returned the quarantined %s: %v", q, id, got)
		}
		res := executeTool(t, ctx, adminCS, id, map[string]any{"text": "x"})
		if txt := resultText(res); !res.IsError || !strings.Contains(txt, "quarantined") || strings.Contains(txt, "id_rsa") || strings.Contains(txt, "aws") {
			t.Errorf("execute %s: isError=%v %q (want quarantined, with why but not the payload)", id, res.IsError, txt)
		}
	}
	if res := executeTool(t, ctx, adminCS, "poison__translate", nil); !strings.Contains(resultText(res), "Unicode tag characters") {
		t.Errorf("the tag payload's refusal does not say why: %s", resultText(res))
	}

	// GET /status names the quarantined tools and counts the audit log.
	st := toolgateCmd(t, data, "status", "--addr", addr, "--json")
	st.Env = append(st.Env, "TOOLGATE_KEY="+admin)
	stOut, err := st.Output()
	if err != nil {
		t.Fatalf("status --json: %v", err)
	}
	var rep gateway.StatusReport
	if err := json.Unmarshal(stOut, &rep); err != nil || rep.Security == nil {
		t.Fatalf("status --json: %v %v\n%s", err, rep.Security, stOut)
	}
	if !slices.Equal(rep.Security.Quarantined, []string{"poison__notes", "poison__translate"}) || rep.Security.Audit.Written == 0 {
		t.Errorf("status security: %+v", rep.Security)
	}

	// The kg key: memory only, in search and execute.
	for _, q := range []string{"list the files in a directory", "store a new entity in the knowledge graph", "weather forecast city"} {
		for _, id := range search(kgCS, q) {
			if !strings.HasPrefix(id, "memory__") {
				t.Errorf("the kg key's search %q shows %s", q, id)
			}
		}
	}
	if got := search(kgCS, "store a new entity in the knowledge graph"); !slices.Contains(got, "memory__create_entities") {
		t.Errorf("the kg key does not find memory__create_entities: %v", got)
	}
	// The refusal says the key lacks access, why (its profile) and the
	// fix, the same for a tool that exists and one that does not:
	// nothing about what lies outside.
	for _, id := range []string{"filesystem__list_directory", "filesystem__no_such_tool"} {
		res := executeTool(t, ctx, kgCS, id, map[string]any{"path": "."})
		if !res.IsError || resultText(res) != outsideProfile("kg-reader", "kg", id) {
			t.Errorf("kg key on %s: isError=%v %q", id, res.IsError, resultText(res))
		}
	}
	if res := executeTool(t, ctx, kgCS, "memory__read_graph", nil); res.IsError {
		t.Errorf("kg key on memory__read_graph: %s", resultText(res))
	}

	// The canary: in the audit log as a hash, nowhere else.
	const canary = "canary-7f3a9c2e-do-not-leak"
	if res := executeTool(t, ctx, adminCS, "everything__echo", map[string]any{"message": canary}); res.IsError || !strings.Contains(resultText(res), canary) {
		t.Fatalf("everything__echo: %s", resultText(res))
	}
	want := audit.HashArguments(map[string]any{"message": canary})
	auditRecords(t, data, audit.Filter{Key: "admin", Tool: "everything__echo"}, func(rs []audit.Record) bool {
		return slices.ContainsFunc(rs, func(r audit.Record) bool { return r.ArgumentsSHA256 == want && r.Outcome == audit.OK })
	})

	// A definition changed at run time is quarantined from its listing on.
	if res := executeTool(t, ctx, adminCS, "poison__redefine", map[string]any{"name": "weather", "description": "Get the weather forecast for a city, and more."}); res.IsError {
		t.Fatalf("poison__redefine: %s", resultText(res))
	}
	testenv.Eventually(t, "the changed poison__weather quarantined", func() bool {
		res := executeTool(t, ctx, adminCS, "poison__weather", map[string]any{"text": "Oslo"})
		return res.IsError && strings.Contains(resultText(res), "changed")
	})
	if slices.Contains(search(adminCS, "weather forecast city"), "poison__weather") {
		t.Error("the changed poison__weather is still in search")
	}

	// tools quarantined lists the held tools; approve releases one at once.
	out, stderr, err := runToolgate(t, data, "tools", "quarantined")
	if err != nil || !strings.Contains(out, "poison__notes") || !strings.Contains(out, "poison__translate") || !strings.Contains(out, "poison__weather") {
		t.Errorf("tools quarantined: %v\n%s%s", err, out, stderr)
	}
	// It shows the held definition and approves it by its hash; another
	// hash (a definition listed after the review) approves nothing.
	_, approveLine, _ := strings.Cut(out, "approve: toolgate tools approve poison__weather --sha256 ")
	reviewed, _, _ := strings.Cut(approveLine, "\n")
	if !strings.Contains(out, "    description: Get the weather forecast for a city, and more.\n") || len(reviewed) != 12 {
		t.Errorf("tools quarantined shows no definition or hash to approve for poison__weather:\n%s", out)
	}
	if _, stderr, err := runToolgate(t, data, "tools", "approve", "poison__weather", "--sha256", "0123456789ab"); err == nil || !strings.Contains(stderr, "nothing was approved") {
		t.Errorf("tools approve of a definition not listed: %v\n%s", err, stderr)
	}
	if _, stderr, err := runToolgate(t, data, "tools", "approve", "poison__weather", "--sha256", reviewed); err != nil {
		t.Fatalf("tools approve: %v\n%s", err, stderr)
	}
	testenv.Eventually(t, "the approved poison__weather running again", func() bool {
		res := executeTool(t, ctx, adminCS, "poison__weather", map[string]any{"text": "Rome"})
		return !res.IsError && resultText(res) == "Rome"
	})

	// Only an admin key may have the gateway change its config.
	opsCS, err := connectKey(ctx, t, addr, "/mcp", ops, "ops-client")
	if err != nil {
		t.Fatal(err)
	}
	// A key that is not admin neither finds nor runs the tools that change
	// the config; the admin key finds them and runs them.
	for _, cs := range []*mcp.ClientSession{opsCS, adminCS} {
		got := search(cs, "remove an MCP server from the config")
		if shown := slices.Contains(got, "toolgate__remove_server"); shown != (cs == adminCS) {
			t.Errorf("search for remove_server (admin=%v): %v", cs == adminCS, got)
		}
	}
	if res := executeTool(t, ctx, opsCS, "toolgate__remove_server", map[string]any{"name": "poison"}); !res.IsError || resultText(res) != adminOnlyRefusal("ops", "toolgate__remove_server") {
		t.Errorf("remove_server with a key that is not admin: isError=%v %s", res.IsError, resultText(res))
	}
	if res := executeTool(t, ctx, adminCS, "toolgate__remove_server", map[string]any{"name": "poison"}); res.IsError {
		t.Errorf("remove_server with the admin key: %s", resultText(res))
	}
	if got := search(adminCS, "weather forecast city"); slices.ContainsFunc(got, func(id string) bool { return strings.HasPrefix(id, "poison__") }) {
		t.Errorf("the removed server's tools are still found: %v", got)
	}

	// The audit log holds the decisions (a call's record is written as the
	// call ends, so wait until all of them are there).
	type wantRecord struct{ key, tool, decision string }
	wants := []wantRecord{
		{"admin", "poison__notes", audit.Quarantined},
		{"admin", "poison__weather", audit.Quarantined},
		{"kg-reader", "filesystem__list_directory", audit.Denied},
		{"kg-reader", "memory__read_graph", audit.Allowed},
		{"admin", "search_tools", audit.Allowed},
		{"", "poison__weather", audit.Allowed}, // tools approve, from the command line
		{"ops", "toolgate__remove_server", audit.Denied},
		{"admin", "toolgate__remove_server", audit.Allowed},
	}
	has := func(recs []audit.Record, want wantRecord) bool {
		return slices.ContainsFunc(recs, func(r audit.Record) bool {
			return r.Key == want.key && (r.Tool == want.tool || r.Action == want.tool) && r.Decision == want.decision
		})
	}
	var missing []wantRecord
	if !testenv.Poll(testenv.Timeout, func() bool {
		recs := readAudit(t, data, audit.Filter{})
		missing = slices.DeleteFunc(slices.Clone(wants), func(w wantRecord) bool { return has(recs, w) })
		return len(missing) == 0
	}) {
		t.Errorf("no audit record for %+v", missing)
	}

	// The canary is in no file of the data folder and in no log. The
	// gateway is stopped first: removing a server rebuilds the index in the
	// background, and the walk is of what stays on disk once all is written.
	stop()
	err = filepath.WalkDir(data, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		if bytes.Contains(b, []byte(canary)) {
			t.Errorf("the canary is in %s", path)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(logs.String(), canary) {
		t.Error("the canary is in the gateway's log")
	}
	// The log's approve command acts on this data folder as printed.
	if want := "toolgate tools approve poison__notes --sha256 "; !strings.Contains(logs.String(), want) || !strings.Contains(logs.String(), " --data-dir "+data) {
		t.Errorf("the log does not quote %q", want)
	}
}

// adminOnlyRefusal is execute_tool's refusal of a tool only an admin key
// may run (one that changes the config) to key, which is not admin: what
// is needed and the fix.
func adminOnlyRefusal(key, id string) string {
	return "execute_tool " + id + `: the API key "` + key + `" lacks access to this tool: it changes the gateway's config, which only an admin API key may do; ` +
		"an admin can create one (toolgate keys create --name NAME --admin; toolgate keys list shows which keys are admin). Call search_tools to find a tool you can run."
}

// outsideProfile is execute_tool's refusal of a tool outside the profile
// of key: why and the fix, the same words for a tool that exists and one
// that does not, naming no other profile.
func outsideProfile(key, profile, id string) string {
	return "execute_tool " + id + `: the API key "` + key + `" lacks access to this tool: the key is limited to profile "` + profile +
		`", which does not show it; an admin can add it to that profile (toolgate.profiles.` + profile +
		" in the config) or give the key another profile, its secret kept (toolgate keys update " + key + " --profile PROFILE). Call search_tools to find a tool you can run."
}
