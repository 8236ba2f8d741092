package main

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/toolgate/toolgate/gateway/audit"
	"github.com/toolgate/toolgate/gateway/backend/backendtest"
	"github.com/toolgate/toolgate/internal/testenv"
)

// tsClientAnswer is what testdata/tsclient.mjs prints: each answer as
// JSON text, or "CODE message" of the error the SDK raised.
type tsClientAnswer struct {
	Ping, BadLevel, Level, Timeout, Abort, PingAfter, Hangs string
}

// runTSClient runs testdata/tsclient.mjs (the TypeScript SDK's client)
// against the server that args name until fake__hangs says until.
func runTSClient(t *testing.T, env []string, until string, args ...string) tsClientAnswer {
	t.Helper()
	node, err := exec.LookPath("node")
	sdk := filepath.Join(repoRoot(t), "examples", "servers", "node_modules", "@modelcontextprotocol", "sdk", "package.json")
	if _, serr := os.Stat(sdk); err != nil || serr != nil {
		testenv.Missing(t, "the TypeScript SDK's client needs node and scripts/install-servers.sh: %v %v", err, serr)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute) // a hang guard
	defer cancel()
	script, err := filepath.Abs(filepath.Join("testdata", "tsclient.mjs"))
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.CommandContext(ctx, node, append([]string{script, until}, args...)...)
	cmd.Env = env
	cmd.Stderr = testLog(t, "tsclient: ")
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("tsclient %v: %v\n%s", args, err, out)
	}
	var ans tsClientAnswer
	if err := json.Unmarshal(out, &ans); err != nil {
		t.Fatalf("tsclient answer: %v\n%s", err, out)
	}
	return ans
}

// TestTypeScriptClientGivesUp drives toolgate with the TypeScript SDK's
// client (1.32.2, protocol 2025-11-25) as a client author uses it beyond
// the happy path: ping, logging/setLevel with a level the protocol does not
// have (-32602 naming the eight), and an execute_tool given up on with the
// SDK's `timeout` and with an AbortSignal. Over stdio and through `toolgate
// connect`, both reach the backend as cancellations, the audit records say
// `cancelled by the client`, and the gateway answers on. Over the HTTP
// front the SDK sends notifications/cancelled in a POST of its own, which
// the stateless front cannot tie to the call (README): the calls run on,
// the log says so for each, and they end when the client leaves.
func TestTypeScriptClientGivesUp(t *testing.T) {
	cfg := fakeConfig(t, map[string]string{"fake": backendtest.ModeHang}, nil)
	check := func(t *testing.T, ans tsClientAnswer, hangs string) {
		t.Helper()
		if ans.Ping != "{}" || ans.PingAfter != "{}" || ans.Level != "{}" {
			t.Errorf("ping %q, ping after %q, setLevel debug %q; want {} each", ans.Ping, ans.PingAfter, ans.Level)
		}
		if !strings.HasPrefix(ans.BadLevel, "-32602 ") || !strings.Contains(ans.BadLevel, "debug, info, notice, warning, error, critical, alert, emergency") {
			t.Errorf("logging/setLevel warn: %q, want -32602 naming the protocol's levels", ans.BadLevel)
		}
		if ans.Timeout != "-32001 MCP error -32001: Request timed out" || ans.Abort != "-32001 MCP error -32001: user pressed Esc" {
			t.Errorf("the calls given up on: timeout %q, abort %q", ans.Timeout, ans.Abort)
		}
		if ans.Hangs != hangs {
			t.Errorf("the backend's hang calls: %q, want %q", ans.Hangs, hangs)
		}
	}
	cancelled := backendtest.HangCount(0, 2)
	auditSays := func(t *testing.T, data string, n int) {
		t.Helper()
		testenv.Eventually(t, "the hang calls' audit records", func() bool {
			recs := 0
			b, _ := os.ReadFile(filepath.Join(data, "audit", "audit.jsonl"))
			for line := range strings.Lines(string(b)) {
				var r audit.Record
				if json.Unmarshal([]byte(line), &r) == nil && r.Tool == "fake__hang" {
					if !strings.HasPrefix(r.Reason, "cancelled by the client") {
						t.Fatalf("a hang call's audit record says %q, want cancelled by the client", r.Reason)
					}
					recs++
				}
			}
			return recs == n
		})
	}

	t.Run("stdio", func(t *testing.T) {
		data := t.TempDir()
		gw := toolgateCmd(t, data, "serve", "--config", cfg, "--mode", "bm25")
		check(t, runTSClient(t, gw.Env, cancelled, append([]string{"stdio"}, gw.Args...)...), cancelled)
		auditSays(t, data, 2)
	})

	t.Run("connect", func(t *testing.T) {
		data := t.TempDir()
		addr, _ := startGateway(t, data, cfg)
		bridge := toolgateCmd(t, data, "connect", "--addr", addr)
		check(t, runTSClient(t, bridge.Env, cancelled, append([]string{"stdio"}, bridge.Args...)...), cancelled)
		auditSays(t, data, 2)
	})

	t.Run("http", func(t *testing.T) {
		data := t.TempDir()
		addr, logs := startGateway(t, data, cfg)
		// Both calls still wait at the backend when the client reads the
		// count: nothing cancelled them.
		running := backendtest.HangCount(2, 0)
		check(t, runTSClient(t, os.Environ(), running, "http", "http://"+addr+"/mcp"), running)
		// Each give-up logged, with the SDK's words for the abort.
		testenv.Eventually(t, "both cancellations logged", func() bool {
			return strings.Count(logs.String(), "in a POST of its own") == 2 && strings.Contains(logs.String(), `reason="user pressed Esc"`)
		})
		// The client left (its connections closed): the calls ended.
		auditSays(t, data, 2)
	})
}
