package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/toolgate/toolgate/gateway"
	"github.com/toolgate/toolgate/gateway/backend/backendtest"
)

// TestMaxLimitEndToEnd: with toolgate.search.maxLimit 100, a go-sdk client
// of a real toolgate process whose backend serves 200 tools gets 80 tools
// for a limit of 80, 100 for a limit above the maximum, and search_tools'
// default without a limit; tools/list advertises the configured maximum.
// BM25 only (no native pieces): the tools' descriptions are all alike.
// (The allow-list of the quarantine lets their overlong texts through.)
func TestMaxLimitEndToEnd(t *testing.T) {
	many := backendtest.Command(t, backendtest.ModeManyTools, backendtest.EnvManyTools+"=200")
	cfg, _ := json.Marshal(map[string]any{
		"mcpServers": map[string]any{"many": map[string]any{"command": many.Command, "env": many.Env}},
		// The fake's descriptions are overlong (20 kB) on purpose; the
		// quarantine would hold them, so the config approves them.
		"toolgate": map[string]any{"search": map[string]any{"maxLimit": 100}, "security": map[string]any{"approvedTools": []string{"many__*"}}},
	})
	path := filepath.Join(t.TempDir(), "toolgate.json")
	if err := os.WriteFile(path, cfg, 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := toolgateCmd(t, t.TempDir(), "serve", "--config", path, "--mode", "bm25", "--ort-lib", filepath.Join(t.TempDir(), "none.so"))
	cmd.Stderr = testLog(t, "toolgate: ")
	ctx, cs := connectStdio(t, cmd, 2*time.Minute)
	indexServed(t, ctx, cs) // a cold start past its wait answers "being built"

	lt, err := cs.ListTools(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, tl := range lt.Tools {
		if tl.Name != gateway.SearchToolName {
			continue
		}
		var schema struct {
			Properties struct {
				Limit struct{ Maximum, Default int }
			}
		}
		b, _ := json.Marshal(tl.InputSchema)
		if err := json.Unmarshal(b, &schema); err != nil || schema.Properties.Limit.Maximum != 100 || schema.Properties.Limit.Default != gateway.DefaultLimit {
			t.Errorf("search_tools' limit schema = %+v (%v), want maximum 100, default %d", schema.Properties.Limit, err, gateway.DefaultLimit)
		}
	}
	for _, tc := range []struct{ limit, want int }{{80, 80}, {150, 100}, {0, gateway.DefaultLimit}} {
		out, _ := searchTools(t, ctx, cs, "a very long description", tc.limit)
		if len(out.Tools) != tc.want {
			t.Errorf("search_tools with limit %d returned %d tools, want %d", tc.limit, len(out.Tools), tc.want)
		}
	}
}
