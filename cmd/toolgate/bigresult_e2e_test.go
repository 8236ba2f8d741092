package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolgate/toolgate/gateway"
	"github.com/toolgate/toolgate/gateway/audit"
	"github.com/toolgate/toolgate/gateway/live"
	"github.com/toolgate/toolgate/internal/testenv"
)

// TestBigResultTrimmed: the bundled filesystem server reads a 5 MB log
// file of its folder through a real `toolgate serve --http`. It answered
// the client 10 MB (the text and its structuredContent again), far past
// any agent's context; the client now gets the first DefaultMaxResultBytes
// of text, cut at a line end, and a note that names the arguments that
// read less (head, tail). The audit record says how many bytes were left
// out and /metrics counts the trim. A server's own maxResultBytes, saved
// in the file while the gateway runs, applies at the next call.
func TestBigResultTrimmed(t *testing.T) {
	root := repoRoot(t)
	dir := t.TempDir()
	const line = "2026-12-07T14:00:00Z INFO request served path=/api/v1/items status=200 ms=12\n"
	big := strings.Repeat(line, 5_000_000/len(line))
	if err := os.WriteFile(filepath.Join(dir, "big.log"), []byte(big), 0o644); err != nil {
		t.Fatal(err)
	}
	fs := func(extra map[string]any) map[string]any {
		s := map[string]any{"command": "node", "args": []string{filepath.Join(root, "examples", "servers", "node_modules", "@modelcontextprotocol", "server-filesystem", "dist", "index.js"), dir}}
		for k, v := range extra {
			s[k] = v
		}
		return s
	}
	cfgPath := bundledConfig(t, map[string]any{"logs": fs(nil)})
	dataDir := t.TempDir()
	addr := runServeHTTP(t, dataDir, cfgPath)
	indexServedHTTP(t, addr)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "e2e"}, nil).Connect(ctx, &mcp.StreamableClientTransport{Endpoint: "http://" + addr + "/mcp"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	read := func() (*mcp.CallToolResult, int) {
		t.Helper()
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: gateway.ExecuteToolName, Arguments: map[string]any{
			"name": "logs__read_text_file", "arguments": map[string]any{"path": filepath.Join(dir, "big.log")}}})
		if err != nil || res.IsError {
			t.Fatalf("execute_tool: %v %s", err, resultText(res))
		}
		wire, _ := json.Marshal(res)
		return res, len(wire)
	}

	res, wire := read()
	if len(res.Content) != 2 {
		t.Fatalf("%d content blocks, want the text cut and the note", len(res.Content))
	}
	kept := res.Content[0].(*mcp.TextContent).Text
	note := res.Content[1].(*mcp.TextContent).Text
	if len(kept) > gateway.DefaultMaxResultBytes || !strings.HasPrefix(big, kept) || !strings.HasSuffix(kept, "\n") || res.StructuredContent != nil {
		t.Errorf("kept %d bytes of text (a prefix: %v), structuredContent %v; want at most %d bytes, whole lines, and no structuredContent",
			len(kept), strings.HasPrefix(big, kept), res.StructuredContent != nil, gateway.DefaultMaxResultBytes)
	}
	for _, want := range []string{"trimmed to its limit of 100000 bytes", "structuredContent (", "call logs__read_text_file again", `"head", "tail"`} {
		if !strings.Contains(note, want) {
			t.Errorf("note %q lacks %q", note, want)
		}
	}
	if wire > 110_000 {
		t.Errorf("the client got %d bytes of result", wire)
	}
	var recs []audit.Record
	testenv.Eventually(t, "the call's audit record", func() bool {
		recs = readAudit(t, dataDir, audit.Filter{Tool: "logs__read_text_file"})
		return len(recs) > 0
	})
	if len(recs) != 1 || recs[0].TrimmedBytes < 2*len(big)-gateway.DefaultMaxResultBytes {
		t.Errorf("audit records %+v, want one whose trimmedBytes counts the text and structuredContent left out", recs)
	}
	if m := getMetrics(t, addr); !strings.Contains(m, `toolgate_tool_results_trimmed_total{server="logs",tool="read_text_file"} 1`) {
		t.Errorf("/metrics does not count the trimmed result:\n%s", grepLines(m, "trimmed"))
	}

	before := getStatus(t, addr).Stats.ReloadGeneration
	b, _ := os.ReadFile(cfgPath)
	var cfg map[string]any
	if err := json.Unmarshal(b, &cfg); err != nil {
		t.Fatal(err)
	}
	cfg["mcpServers"].(map[string]any)["logs"] = fs(map[string]any{"maxResultBytes": 20000})
	b, _ = json.Marshal(cfg)
	writeRaw(t, cfgPath, b, true)
	rep := waitStatus(t, addr, "the reload of the server's maxResultBytes", func(s live.Stats) bool { return s.ReloadGeneration > before })
	if r := rep.Stats.LastReload; r == nil || len(r.Changed) > 0 || fmt.Sprint(r.Updated) != "[logs]" {
		t.Errorf("last reload %+v: want logs updated in place, no server restarted", r)
	}
	res, _ = read()
	if kept := res.Content[0].(*mcp.TextContent).Text; len(kept) > 20000 || len(kept) < 20000-4096 {
		t.Errorf("after the reload, kept %d bytes, want at most the server's 20000", len(kept))
	}
}

// getMetrics is GET /metrics of the gateway at addr.
func getMetrics(t *testing.T, addr string) string {
	t.Helper()
	r, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer r.Body.Close()
	b, _ := io.ReadAll(r.Body)
	return string(b)
}

// grepLines is the lines of s that hold sub.
func grepLines(s, sub string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}
