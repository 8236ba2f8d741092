package main

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolgate/toolgate/gateway"
	"github.com/toolgate/toolgate/gateway/audit"
	"github.com/toolgate/toolgate/internal/testenv"
)

// TestPythonOutputSchemaChecked puts a Python SDK low-level server
// (testdata/pyoutput.py, which sends what its tool returns unchecked)
// behind a real `toolgate serve`, over stdio and over streamable HTTP. Its
// w__forecast declares an outputSchema and answers structuredContent that
// fits it, that does not ("temperature": "warm"), none, or an isError
// result. What fits and the error come back as the server sent them; the
// other two come back whole with a note after their content naming what
// is wrong, and the operator sees them: one warning in the log, each in
// its audit record (outputMismatch) and in
// toolgate_output_mismatches_total. Before, each came back as it was and
// nothing said so; a TypeScript SDK client of the server itself throws the
// two results away. A 2 MB one that does not fit is trimmed to
// maxResultBytes and not checked (the client gets none of it whole): the
// trim's note alone, nothing counted; it was checked whole and noted.
func TestPythonOutputSchemaChecked(t *testing.T) {
	py := pythonSDK(t, pythonV2)
	dir := t.TempDir()
	cfg := filepath.Join(dir, "toolgate.json")
	b, _ := json.Marshal(map[string]any{"mcpServers": map[string]any{
		"w": map[string]any{"command": py, "args": []string{pyTestdata(t, "pyoutput.py")}},
	}})
	if err := os.WriteFile(cfg, b, 0o600); err != nil {
		t.Fatal(err)
	}
	const wrong = `toolgate: this result's structuredContent does not fit the outputSchema w__forecast declares: "temperature" must be a number, not a string ("warm"). It is passed on as the server sent it: do not count on the shape search_tools showed.`
	want := map[string]struct {
		text    string
		sc      string // structuredContent as JSON, "" for none
		isError bool
	}{
		"fits":  {"forecast (fits)", `{"conditions":"sunny","temperature":22.5}`, false},
		"wrong": {"forecast (wrong)" + wrong, `{"conditions":"sunny","temperature":"warm"}`, false},
		"none":  {"forecast (none)toolgate: w__forecast declares an outputSchema, but this result has no structuredContent, which MCP requires of it: what the tool returned is the content above.", "", false},
		"error": {"no forecast for that city", "", true},
	}
	check := func(t *testing.T, ctx context.Context, cs *mcp.ClientSession) {
		var res *mcp.CallToolResult
		run := func(mode string) bool {
			var err error
			res, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: gateway.ExecuteToolName, Arguments: map[string]any{"name": "w__forecast", "arguments": map[string]any{"mode": mode}}})
			if err != nil {
				t.Fatalf("execute_tool w__forecast %s: %v", mode, err)
			}
			return !strings.Contains(resultText(res), "unknown tool")
		}
		testenv.Eventually(t, "w__forecast listed", func() bool { return run("fits") })
		for _, mode := range []string{"fits", "wrong", "none", "error", "big"} {
			run(mode)
			if mode == "big" {
				// Trimmed (its structuredContent cut to maxResultBytes) and
				// not checked: the trim's note alone.
				got := resultText(res)
				sc, _ := json.Marshal(res.StructuredContent)
				m, _ := res.StructuredContent.(map[string]any)
				cond, _ := m["conditions"].(string)
				if !strings.HasPrefix(got, "forecast (big)[toolgate: this result was trimmed") || !strings.Contains(got, "structuredContent cut from") ||
					strings.Contains(got, "does not fit") || len(sc) > gateway.DefaultMaxResultBytes || !strings.HasPrefix(cond, "cloudy cloudy") || !strings.HasSuffix(cond, "…") {
					t.Errorf("big: text %.300q structuredContent of %d bytes %.80s; want the trim's note alone and the structuredContent cut", got, len(sc), sc)
				}
				continue
			}
			w := want[mode]
			sc := ""
			if res.StructuredContent != nil {
				b, _ := json.Marshal(res.StructuredContent)
				sc = string(b)
			}
			if got := resultText(res); got != w.text || sc != w.sc || res.IsError != w.isError {
				t.Errorf("%s: text %q structuredContent %s isError %v\nwant text %q structuredContent %s isError %v", mode, got, sc, res.IsError, w.text, w.sc, w.isError)
			}
		}
	}

	t.Run("stdio", func(t *testing.T) {
		cmd := toolgateCmd(t, t.TempDir(), "serve", "--config", cfg, "--mode", "bm25")
		cmd.Stderr = testLog(t, "toolgate: ")
		ctx, cs := connectStdio(t, cmd, 3*time.Minute)
		check(t, ctx, cs)
	})

	t.Run("http", func(t *testing.T) {
		data := t.TempDir()
		addr, logs, stop := startGatewayStop(t, data, cfg)
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
		defer cancel()
		cs, err := connectKey(ctx, t, addr, "/mcp", "", "e2e")
		if err != nil {
			t.Fatal(err)
		}
		check(t, ctx, cs)
		_, metrics := httpGet(t, "http://"+addr+"/metrics", "")
		if !strings.Contains(metrics, `toolgate_output_mismatches_total{server="w",tool="forecast"} 2`) {
			t.Errorf("/metrics counts no 2 results of w__forecast that do not fit:\n%s", grepLines(metrics, "toolgate_output"))
		}
		cs.Close()
		stop()
		if n := strings.Count(logs.String(), "tool result does not fit its output schema"); n != 1 {
			t.Errorf("%d warnings in the log, want 1 (once a tool):\n%s", n, logs.String())
		}
		var mismatches []string
		f, err := os.ReadFile(filepath.Join(data, "audit", "audit.jsonl"))
		if err != nil {
			t.Fatal(err)
		}
		for line := range strings.Lines(string(f)) {
			var r audit.Record
			if json.Unmarshal([]byte(line), &r) == nil && r.Tool == "w__forecast" {
				mismatches = append(mismatches, r.OutputMismatch)
			}
		}
		// The first "fits" may have been tried before the tool was listed;
		// "big" was trimmed, not checked.
		wantAudit := []string{"", `"temperature" must be a number, not a string`, "no structuredContent", "", ""} // no value of the result
		if len(mismatches) < 5 || strings.Join(mismatches[len(mismatches)-5:], "|") != strings.Join(wantAudit, "|") {
			t.Errorf("audit records' outputMismatch %q, want the last five %q", mismatches, wantAudit)
		}
	})
}
