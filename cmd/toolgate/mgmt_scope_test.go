package main

import (
	"context"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/toolgate/toolgate/gateway"
	"github.com/toolgate/toolgate/internal/testenv"
)

// TestScopedKeyMgmt: a key that is not an admin key manages only the
// servers whose tools its scope lets it see. A key scoped to memory__* and
// toolgate__* could restart, disable, enable and inspect every backend
// (the README's known limit); now a server outside its scope reads as
// refused by the key, in the same words as one that does not exist, and
// its state does not change, while the key still manages memory and an
// admin key still manages everything, over MCP and from the console.
// GET /status, the console's state and `toolgate status` show the key
// the servers it manages only.
func TestScopedKeyMgmt(t *testing.T) {
	cfg := bundledConfig(t, nil)
	data := t.TempDir()
	admin := createKey(t, data, "--name", "admin", "--admin")
	mem := createKey(t, data, "--name", "mem-ops", "--allow", "memory__*", "--allow", "toolgate__*")
	addr, _ := startGateway(t, data, cfg)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	adminCS, err := connectKey(ctx, t, addr, "/mcp", admin, "admin-client")
	if err != nil {
		t.Fatal(err)
	}
	memCS, err := connectKey(ctx, t, addr, "/mcp", mem, "mem-client")
	if err != nil {
		t.Fatal(err)
	}
	statusAs := func(key, route string) gateway.StatusReport { t.Helper(); return statusAs(t, addr, key, route) }
	status := func() gateway.StatusReport { t.Helper(); return statusAs(admin, "/status") }
	// GET /status and the console's state, as the memory key sees them:
	// memory only, counted alone.
	scoped := func(what string, disabled []string) {
		t.Helper()
		for _, route := range []string{"/status", "/ui/api/state"} {
			rep := statusAs(mem, route)
			var names []string
			for _, b := range rep.Backends {
				names = append(names, b.Name)
			}
			if !slices.Equal(names, []string{"memory"}) || rep.Total != 1 || rep.Up > 1 || rep.Stats == nil || !slices.Equal(rep.Stats.Disabled, disabled) {
				t.Errorf("%s, GET %s with the memory key: backends %v, %d of %d up, disabled %v; want memory alone, disabled %v", what, route, names, rep.Up, rep.Total, rep.Stats.Disabled, disabled)
			}
		}
	}
	restarts := func(rep gateway.StatusReport, server string) int {
		for _, b := range rep.Backends {
			if b.Name == server {
				return b.Restarts
			}
		}
		return -1
	}
	var rep gateway.StatusReport
	testenv.Eventually(t, "the three backends up", func() bool {
		rep = status()
		up := 0
		for _, b := range rep.Backends {
			if b.State == "up" {
				up++
			}
		}
		return up == 3
	})
	before := restarts(rep, "everything")
	scoped("all up", nil)
	// `toolgate status` with the key prints the servers it sees.
	st := toolgateCmd(t, data, "status", "--addr", addr)
	st.Env = append(st.Env, "TOOLGATE_KEY="+mem)
	if out, err := st.CombinedOutput(); err != nil || !strings.Contains(string(out), "memory") || strings.Contains(string(out), "everything") || strings.Contains(string(out), "filesystem") {
		t.Errorf("toolgate status with the memory key: %v\n%s", err, out)
	}

	// The scoped key lists and inspects memory only.
	res := executeTool(t, ctx, memCS, "toolgate__list_servers", nil)
	if txt := resultText(res); res.IsError || !strings.Contains(txt, "1 MCP server behind") || !strings.Contains(txt, "memory: ") ||
		strings.Contains(txt, "everything") || strings.Contains(txt, "filesystem") {
		t.Errorf("list_servers with the memory key: %s", txt)
	}
	if res := executeTool(t, ctx, memCS, "toolgate__server_status", map[string]any{"name": "memory"}); res.IsError {
		t.Errorf("server_status memory with the memory key: %s", resultText(res))
	}
	if res := executeTool(t, ctx, memCS, "toolgate__server_status", map[string]any{"name": ""}); !res.IsError || !strings.HasSuffix(resultText(res), "(servers: memory)") {
		t.Errorf("server_status without a server, memory key: %s", resultText(res))
	}
	// Outside its scope: refused, in the words it gets for a server that
	// does not exist.
	for _, tool := range []string{"server_status", "restart_server", "disable_server", "enable_server"} {
		for _, server := range []string{"everything", "filesystem"} {
			res := executeTool(t, ctx, memCS, "toolgate__"+tool, map[string]any{"name": server})
			none := executeTool(t, ctx, memCS, "toolgate__"+tool, map[string]any{"name": "nosuch"})
			txt := resultText(res)
			if !res.IsError || !strings.Contains(txt, `the API key "mem-ops" lacks access`) || strings.Contains(txt, "pid") ||
				strings.ReplaceAll(txt, server, "nosuch") != resultText(none) {
				t.Errorf("%s %s with the memory key: isError=%v %q (a server that does not exist: %q)", tool, server, res.IsError, txt, resultText(none))
			}
		}
	}
	// Nothing changed: the admin's restart is the first everything has.
	if res := executeTool(t, ctx, adminCS, "toolgate__restart_server", map[string]any{"name": "everything"}); res.IsError {
		t.Fatalf("restart everything with the admin key: %s", resultText(res))
	}
	testenv.Eventually(t, "everything restarted by the admin", func() bool { rep = status(); return restarts(rep, "everything") > before })
	if got := restarts(status(), "everything"); got != before+1 || len(rep.Stats.Disabled) != 0 {
		t.Errorf("everything restarted %d times (want %d: the admin's only), disabled %v", got-before, 1, rep.Stats.Disabled)
	}
	// The admin disables filesystem; the memory key cannot enable it.
	if res := executeTool(t, ctx, adminCS, "toolgate__disable_server", map[string]any{"name": "filesystem"}); res.IsError {
		t.Fatalf("disable filesystem with the admin key: %s", resultText(res))
	}
	if res := executeTool(t, ctx, memCS, "toolgate__enable_server", map[string]any{"name": "filesystem"}); !res.IsError {
		t.Errorf("enable filesystem with the memory key: %s", resultText(res))
	}
	if d := status().Stats.Disabled; !slices.Equal(d, []string{"filesystem"}) {
		t.Errorf("disabled after the memory key's enable: %v, want [filesystem]", d)
	}
	scoped("filesystem disabled", nil)
	if res := executeTool(t, ctx, adminCS, "toolgate__enable_server", map[string]any{"name": "filesystem"}); res.IsError {
		t.Fatalf("enable filesystem with the admin key: %s", resultText(res))
	}

	// Inside its scope the key still manages: memory restarts.
	memBefore := restarts(status(), "memory")
	if res := executeTool(t, ctx, memCS, "toolgate__restart_server", map[string]any{"name": "memory"}); res.IsError {
		t.Fatalf("restart memory with the memory key: %s", resultText(res))
	}
	testenv.Eventually(t, "memory restarted by its key", func() bool { return restarts(status(), "memory") > memBefore })

	// The console's restart route: the same rule.
	restart := func(key, server string) int {
		t.Helper()
		req, _ := http.NewRequest(http.MethodPost, "http://"+addr+"/ui/api/restart", strings.NewReader(`{"server": "`+server+`"}`))
		req.Header.Set("Authorization", "Bearer "+key)
		req.Header.Set("Content-Type", "application/json")
		r, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		r.Body.Close()
		return r.StatusCode
	}
	evBefore := restarts(status(), "everything")
	if got, none := restart(mem, "everything"), restart(mem, "nosuch"); got != http.StatusForbidden || none != got {
		t.Errorf("console restart of everything with the memory key: %d (nosuch: %d), want 403 for both", got, none)
	}
	if got := restart(admin, "everything"); got != http.StatusAccepted {
		t.Errorf("console restart of everything with the admin key: %d", got)
	}
	testenv.Eventually(t, "everything restarted from the console", func() bool { return restarts(status(), "everything") > evBefore })
	if got := restarts(status(), "everything"); got != evBefore+1 {
		t.Errorf("everything restarted %d times from the console, want 1 (the admin's)", got-evBefore)
	}
	if got := restart(mem, "memory"); got != http.StatusAccepted {
		t.Errorf("console restart of memory with the memory key: %d", got)
	}
}
