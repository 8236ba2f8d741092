package main

import (
	"context"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/toolgate/toolgate/gateway"
	"github.com/toolgate/toolgate/internal/testenv"
)

// TestScopedKeyDownReasons: why a server is down reaches the model of a
// key that is not admin as GET /status shows it to that key (hidden), not
// with the command's path: search_tools' "unavailable", execute_tool's
// answer and the console's search. It read `server "x" is down: backend
// "x": command "/…/bin/server" not found: check command` to any key that
// may use x. The admin key's client keeps the whole reason.
func TestScopedKeyDownReasons(t *testing.T) {
	memory := filepath.Join(repoRoot(t), "examples", "servers", "node_modules", "@modelcontextprotocol", "server-memory", "dist", "index.js")
	if _, err := os.Stat(memory); err != nil {
		testenv.Missing(t, "bundled npm servers are not installed in examples/servers/node_modules (make deps-servers)")
	}
	dir := t.TempDir()
	script := filepath.Join(dir, "bin", "server")
	if err := os.MkdirAll(filepath.Dir(script), 0o755); err != nil {
		t.Fatal(err)
	}
	body := fmt.Sprintf("#!/bin/sh\nMEMORY_FILE_PATH=%s exec node %s\n", filepath.Join(dir, "memory.jsonl"), memory)
	if err := os.WriteFile(script, []byte(body), 0o755); err != nil {
		t.Fatal(err)
	}
	cfg := writeConfig(t, fmt.Sprintf(`{"mcpServers": {"x": {"command": %q}}}`, script))
	data := t.TempDir()
	admin := createKey(t, data, "--name", "admin", "--admin")
	scoped := createKey(t, data, "--name", "k", "--allow", "x__*")
	addr, _ := startGateway(t, data, cfg)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	adminCS, err := connectKey(ctx, t, addr, "/mcp", admin, "admin-client")
	if err != nil {
		t.Fatal(err)
	}
	keyCS, err := connectKey(ctx, t, addr, "/mcp", scoped, "key-client")
	if err != nil {
		t.Fatal(err)
	}
	x := func() gateway.BackendStatus {
		var rep gateway.StatusReport
		getAs(t, addr, admin, "/status", &rep)
		for _, b := range rep.Backends {
			if b.Name == "x" {
				return b
			}
		}
		return gateway.BackendStatus{}
	}
	var st gateway.BackendStatus
	testenv.Eventually(t, "x up with its tools", func() bool { st = x(); return st.State == "up" && st.Tools > 0 && st.ServerPID > 0 })
	indexServed(t, ctx, adminCS) // x is up before its tools are indexed: a cold start past its wait answers "being built"
	searchFinds(t, ctx, keyCS, "read graph", "x__read_graph")

	// Its command goes, then its process: the restart finds no command.
	if err := os.Rename(script, script+".off"); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Kill(st.ServerPID, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, "x down for its missing command", func() bool {
		st = x()
		return st.State == "down" && strings.Contains(st.Err, script)
	})

	hidden := `server "x" is down: ` + gateway.HiddenFromKey
	for _, c := range []struct {
		who  string
		key  string
		full bool
	}{{"the scoped key", scoped, false}, {"the admin key", admin, true}} {
		cs := keyCS
		if c.full {
			cs = adminCS
		}
		// Its reason, as the key's model reads it.
		says := func(where, text string) {
			t.Helper()
			if c.full != strings.Contains(text, script) || !c.full && !strings.Contains(text, gateway.HiddenFromKey) {
				t.Errorf("%s, %s: %q (the command's path %q shown: %v)", where, c.who, text, script, c.full)
			}
		}
		ans, res := searchTools(t, ctx, cs, "read graph", 1)
		if len(ans.Tools) != 1 || ans.Tools[0].Name != "x__read_graph" || !c.full && ans.Tools[0].Unavailable != hidden {
			t.Errorf("search_tools, %s: %+v (want x__read_graph, unavailable %q)", c.who, ans.Tools, hidden)
		}
		for _, tool := range ans.Tools {
			says("search_tools' unavailable", tool.Unavailable)
		}
		says("search_tools' text", resultText(res))
		res = executeTool(t, ctx, cs, "x__read_graph", nil)
		if !res.IsError {
			t.Errorf("execute_tool x__read_graph, %s: not an error: %s", c.who, resultText(res))
		}
		says("execute_tool", resultText(res))
		var found struct {
			Tools []struct{ Server, Unavailable string }
		}
		getAs(t, addr, c.key, "/ui/api/search?q="+url.QueryEscape("read graph"), &found)
		if len(found.Tools) == 0 || found.Tools[0].Server != "x" {
			t.Errorf("the console's search, %s: %+v (want x's tools first)", c.who, found.Tools)
		}
		for _, tool := range found.Tools {
			if tool.Server == "x" { // the admin's answer holds the built-in server's too
				says("the console's search", tool.Unavailable)
			}
		}
	}
}
