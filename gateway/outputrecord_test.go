package gateway

import (
	"encoding/json"
	"log/slog"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolgate/toolgate/gateway/audit/audittest"
	"github.com/toolgate/toolgate/index/catalog"
	"github.com/toolgate/toolgate/search"
)

// TestOutputMismatchRecordsNoValue: the audit record's outputMismatch and
// the log's warning say where a result does not fit its output schema
// and how, not the value there: they wrote the result's data (a
// password, an account number, up to 40 characters of it) in the audit
// log, which keeps a call's arguments only as a hash, and in the log. The
// note to the client, which has the result anyway, still names it.
func TestOutputMismatchRecordsNoValue(t *testing.T) {
	const secret = "hunter2-acct-99812"
	tool := testCatalog[1] // filesystem__list_directory
	for _, tc := range []struct {
		name, schema string
		sc           map[string]any
		recorded     string
	}{
		{"type", `{"type":"object","properties":{"pin":{"type":"integer"}}}`, map[string]any{"pin": secret},
			`"pin" must be an integer, not a string`},
		{"enum", `{"type":"object","properties":{"pin":{"enum":["a","b"]}}}`, map[string]any{"pin": secret},
			`"pin" must be one of "a", "b"`},
		{"maximum", `{"type":"object","properties":{"pin":{"type":"number","maximum":10}}}`, map[string]any{"pin": 99812.0},
			`"pin" must be at most 10`},
		{"pattern", `{"type":"object","properties":{"pin":{"type":"string","pattern":"^[0-9]+$"}}}`, map[string]any{"pin": secret},
			`"pin" does not fit the schema's "pattern"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tool := tool
			tool.OutputSchema = json.RawMessage(tc.schema)
			caller := &fakeCaller{call: func(string, string, map[string]any) (*mcp.CallToolResult, error) {
				return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "listing"}}, StructuredContent: tc.sc}, nil
			}}
			logs := &lockedBuffer{}
			log := &audittest.Log{}
			fs := &fakeSearcher{tools: []catalog.Tool{tool}, search: func(search.Query) (search.Result, error) { return search.Result{}, nil }}
			g := New(fs, caller, &Options{
				Logger: slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelWarn})),
				Audit:  log,
			})
			res := call(t, connect(t, g), ExecuteToolName, map[string]any{"name": "filesystem__list_directory", "arguments": map[string]any{"path": "."}})
			value := secret
			if tc.name == "maximum" {
				value = "99812"
			}
			if note := text(res); !strings.Contains(note, value) {
				t.Errorf("the note to the client lacks the value %q:\n%s", value, note)
			}
			recs := log.Records()
			if len(recs) != 1 || recs[0].OutputMismatch != tc.recorded {
				t.Fatalf("audit records %+v\nwant one whose outputMismatch reads %q", recs, tc.recorded)
			}
			if l := logs.String(); strings.Contains(l, value) || !strings.Contains(l, "tool result does not fit its output schema") {
				t.Errorf("the log names the value, or warns not:\n%s", l)
			}
		})
	}
}
