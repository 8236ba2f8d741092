package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolgate/toolgate/gateway/backend/backendtest"
	"github.com/toolgate/toolgate/gateway/config"
	"github.com/toolgate/toolgate/internal/testenv"
)

// teeLog keeps a child's stderr for assertions and forwards it to the test log.
type teeLog struct {
	testenv.LogBuffer
	t *testing.T
}

func (w *teeLog) Write(p []byte) (int, error) {
	(&testLogWriter{t: w.t, prefix: "toolgate: "}).Write(p)
	return w.LogBuffer.Write(p)
}

// writeServers writes an mcpServers file; rename replaces the file by a rename
// (an atomic writer, vim) instead of writing it in place.
func writeServers(t *testing.T, path string, servers map[string]config.Server, rename bool) {
	t.Helper()
	m := map[string]any{}
	for name, s := range servers {
		m[name] = map[string]any{"command": s.Command, "env": s.Env}
	}
	b, err := json.MarshalIndent(map[string]any{"mcpServers": m}, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	writeRaw(t, path, b, rename)
}

func writeRaw(t *testing.T, path string, b []byte, rename bool) {
	t.Helper()
	if !rename {
		if err := os.WriteFile(path, b, 0o600); err != nil {
			t.Fatal(err)
		}
		return
	}
	tmp := filepath.Join(filepath.Dir(path), ".toolgate.json.tmp")
	if err := os.WriteFile(tmp, b, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}

// TestConfigReload serves a config of two fake backends over stdio and
// changes the file under the running gateway: a removed server's tools
// never show up in search_tools once the reload is logged, and execute_tool
// on them says why; an added server's tools are found and run; a config that
// does not parse changes nothing; a changed server restarts; SIGHUP reloads.
func TestConfigReload(t *testing.T) {
	srv := func(mark string) config.Server {
		// Distinct env per server, so each is its own process and entry.
		return backendtest.Command(t, backendtest.ModeNormal, "RELOAD_TEST_SERVER="+mark)
	}
	alpha, beta, gamma := srv("alpha"), srv("beta"), srv("gamma")
	dir := t.TempDir()
	path := filepath.Join(dir, "toolgate.json")
	writeServers(t, path, map[string]config.Server{"alpha": alpha, "beta": beta}, false)

	cmd := toolgateCmd(t, t.TempDir(), "serve", "--config", path, "--mode", "bm25")
	logs := &teeLog{t: t}
	cmd.Stderr = logs
	ctx, cs := connectStdio(t, cmd, 3*time.Minute)

	// removed holds servers whose tools must never be returned again.
	removed := map[string]bool{}
	search := func(t *testing.T) []string {
		t.Helper()
		out, _ := searchTools(t, ctx, cs, "echo the given text back", 10)
		var ids []string
		for _, x := range out.Tools {
			ids = append(ids, x.Name)
			if server, _, _ := strings.Cut(x.Name, "__"); removed[server] {
				t.Fatalf("search_tools returned %s after %q was removed from the config: %v", x.Name, server, out.Tools)
			}
		}
		return ids
	}
	exec := func(t *testing.T, name string) *mcp.CallToolResult {
		t.Helper()
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "execute_tool", Arguments: map[string]any{"name": name, "arguments": map[string]any{"text": "hi " + name}}})
		if err != nil {
			t.Fatalf("execute_tool(%s): protocol error %v", name, err)
		}
		return res
	}
	works := func(t *testing.T, name string) bool {
		res := exec(t, name)
		return !res.IsError && resultText(res) == "hi "+name
	}
	reloads := func() int { return strings.Count(logs.String(), `msg="config reloaded"`) }

	if ids := search(t); !slices.Contains(ids, "alpha__echo") || !slices.Contains(ids, "beta__echo") {
		t.Fatalf("before any reload: search = %v, want alpha__echo and beta__echo", ids)
	}

	t.Run("rename-over removes beta, adds gamma", func(t *testing.T) {
		writeServers(t, path, map[string]config.Server{"alpha": alpha, "gamma": gamma}, true)
		testenv.Eventually(t, "the reload logged", func() bool { return reloads() == 1 })
		removed["beta"] = true
		log := logs.String()
		if !strings.Contains(log, "added=[gamma]") || !strings.Contains(log, "removed=[beta]") || !strings.Contains(log, "unchanged=[alpha]") {
			t.Errorf("reload log line does not list added, removed, unchanged servers:\n%s", log)
		}
		// From here on search never returns beta's tools (checked by search).
		search(t)
		res := exec(t, "beta__echo")
		if !res.IsError || !strings.Contains(resultText(res), "removed from the config") {
			t.Errorf("execute_tool on a removed server: isError=%v %q, want it to say the server was removed", res.IsError, resultText(res))
		}
		testenv.Eventually(t, "gamma's tools found", func() bool { return slices.Contains(search(t), "gamma__echo") })
		if !works(t, "gamma__echo") || !works(t, "alpha__echo") {
			t.Error("added or unchanged server does not answer")
		}
		testenv.Eventually(t, "the index without beta's 3 tools", func() bool {
			return strings.Contains(logs.String(), "removed=3") // catalogSync's "index ready" line
		})
		search(t)
	})

	t.Run("broken config changes nothing", func(t *testing.T) {
		writeRaw(t, path, []byte(`{"mcpServers": {"alpha": {"command": `), false)
		testenv.Eventually(t, "the error logged", func() bool { return strings.Contains(logs.String(), "config reload failed") })
		log := logs.String()
		line := log[strings.Index(log, "config reload failed"):]
		line = line[:strings.IndexByte(line, '\n')]
		for _, want := range []string{path, "previous config stays in effect", "invalid JSON"} {
			if !strings.Contains(line, want) {
				t.Errorf("error line does not say %q: %s", want, line)
			}
		}
		if !works(t, "alpha__echo") || !works(t, "gamma__echo") {
			t.Error("servers stopped answering after a broken config")
		}
		if ids := search(t); !slices.Contains(ids, "gamma__echo") {
			t.Errorf("search after a broken config: %v", ids)
		}
		if n := reloads(); n != 1 {
			t.Errorf("%d reloads logged, want still 1", n)
		}
	})

	t.Run("in place: beta back, gamma removed", func(t *testing.T) {
		writeServers(t, path, map[string]config.Server{"alpha": alpha, "beta": beta}, false)
		testenv.Eventually(t, "the reload logged", func() bool { return reloads() == 2 })
		delete(removed, "beta")
		removed["gamma"] = true
		search(t)
		res := exec(t, "gamma__echo")
		if !res.IsError || !strings.Contains(resultText(res), "removed from the config") {
			t.Errorf("execute_tool on a removed server: isError=%v %q", res.IsError, resultText(res))
		}
		testenv.Eventually(t, "beta's tools found again", func() bool { return slices.Contains(search(t), "beta__echo") })
		testenv.Eventually(t, "beta answers", func() bool { return works(t, "beta__echo") })
	})

	t.Run("changed entry restarts; a search setting waits for a restart", func(t *testing.T) {
		alpha2 := backendtest.Command(t, backendtest.ModeNormal, "RELOAD_TEST_SERVER=alpha", "RELOAD_TEST_VERSION=2")
		b, _ := json.Marshal(map[string]any{
			"mcpServers": map[string]any{
				"alpha": map[string]any{"command": alpha2.Command, "env": alpha2.Env},
				"beta":  map[string]any{"command": beta.Command, "env": beta.Env},
			},
			"toolgate": map[string]any{"search": map[string]any{"defaultLimit": 3}},
		})
		writeRaw(t, path, b, true)
		testenv.Eventually(t, "the reload logged", func() bool { return reloads() == 3 })
		log := logs.String()
		if !strings.Contains(log, "changed=[alpha]") || !strings.Contains(log, `unchanged=[beta]`) {
			t.Errorf("reload line does not say alpha changed and beta did not:\n%s", log)
		}
		if !strings.Contains(log, "take effect on restart") || !strings.Contains(log, "toolgate.search") {
			t.Errorf("the search setting's change is not reported as waiting for a restart:\n%s", log)
		}
		testenv.Eventually(t, "the restarted alpha answers", func() bool { return works(t, "alpha__echo") })
		if !works(t, "beta__echo") {
			t.Error("beta does not answer")
		}
		search(t)
	})

	t.Run("SIGHUP reloads", func(t *testing.T) {
		if err := cmd.Process.Signal(syscall.SIGHUP); err != nil {
			t.Fatal(err)
		}
		testenv.Eventually(t, "the SIGHUP reload logged", func() bool { return reloads() == 4 })
		if !strings.Contains(logs.String(), "trigger=SIGHUP") {
			t.Errorf("reload not attributed to SIGHUP:\n%s", logs.String())
		}
		if !works(t, "alpha__echo") || !works(t, "beta__echo") {
			t.Error("servers do not answer after SIGHUP")
		}
		search(t)
	})
}
