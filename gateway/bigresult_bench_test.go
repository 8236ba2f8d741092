package gateway

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolgate/toolgate/gateway/audit"
	"github.com/toolgate/toolgate/index/catalog"
)

// rowsSchema is the output schema of a log search that answers rows.
const rowsSchema = `{"type":"object","properties":{"rows":{"type":"array","items":{"type":"object","properties":{"id":{"type":"integer"},"path":{"type":"string"},"status":{"type":"integer"},"msg":{"type":"string"}},"required":["id","path","status","msg"]}}},"required":["rows"]}`

// bigRows is the structuredContent of a log search of about n bytes of
// JSON, {"rows": [...]}, decoded as go-sdk hands a result over.
func bigRows(tb testing.TB, n int) map[string]any {
	tb.Helper()
	var b strings.Builder
	b.WriteString(`{"rows":[`)
	for i := 0; b.Len() < n; i++ {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `{"id":%d,"path":"/api/v1/items/%d","status":200,"msg":"request served ok in 12 ms by worker-3"}`, i, i)
	}
	b.WriteString(`]}`)
	var sc map[string]any
	if err := json.Unmarshal([]byte(b.String()), &sc); err != nil {
		tb.Fatal(err)
	}
	return sc
}

// bigLog is a log text of about n bytes.
func bigLog(n int) string {
	var b strings.Builder
	for i := 0; b.Len() < n; i++ {
		fmt.Fprintf(&b, "2026-12-07T19:%02d:00Z\tweb-%d GET \"/api/v1/items/%d\" 200 in 12 ms\n", i%60, i%17, i)
	}
	return b.String()
}

// BenchmarkBigResult is what the gateway's own work on one execute_tool
// call costs when the backend answers megabytes of structuredContent (a
// log search's rows, decoded as go-sdk hands it over) and the default
// maxResultBytes keeps about 100 KB of it: the handler with an audit log,
// as serve runs it (a client over go-sdk's in-memory transport), for a
// tool with and without an outputSchema. What go-sdk pays to read and
// decode the backend's message is not in it.
//
//	go test ./gateway -run '^$' -bench BigResult -benchtime 10x -count 5 -benchmem
func BenchmarkBigResult(b *testing.B) {
	ctx := context.Background()
	for _, mb := range []int{1, 5} {
		sc := bigRows(b, mb*1_000_000)
		for _, kind := range []string{"schema", "plain", "raw", "text"} {
			if mb == 1 && (kind == "raw" || kind == "text") {
				continue
			}
			b.Run(fmt.Sprintf("%dMB-%s", mb, kind), func(b *testing.B) {
				tool := catalog.Tool{Server: "logs", Name: "search", InputSchema: json.RawMessage(`{"type":"object","properties":{"limit":{"type":"integer"}}}`)}
				if kind == "schema" {
					tool.OutputSchema = json.RawMessage(rowsSchema)
				}
				answer := &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "rows in structuredContent"}}, StructuredContent: sc}
				switch kind {
				case "raw": // as the pool hands over rows of a megabyte or more, over any transport
					raw, err := json.Marshal(sc)
					if err != nil {
						b.Fatal(err)
					}
					answer.StructuredContent = json.RawMessage(raw)
				case "text": // a log read
					answer = &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: bigLog(mb * 1_000_000)}}}
				}
				log := audit.Open(filepath.Join(b.TempDir(), "audit.jsonl"), nil)
				b.Cleanup(func() { log.Close() })
				g := New(&fakeSearcher{tools: []catalog.Tool{tool}}, &fakeCaller{call: func(string, string, map[string]any) (*mcp.CallToolResult, error) {
					r := *answer
					return &r, nil
				}}, &Options{Audit: log})
				ct, st := mcp.NewInMemoryTransports()
				ss, err := g.Server().Connect(ctx, st, nil)
				if err != nil {
					b.Fatal(err)
				}
				cs, err := mcp.NewClient(&mcp.Implementation{Name: "bench"}, nil).Connect(ctx, ct, nil)
				if err != nil {
					b.Fatal(err)
				}
				b.Cleanup(func() { cs.Close(); ss.Wait() })
				params := &mcp.CallToolParams{Name: ExecuteToolName, Arguments: map[string]any{"name": "logs__search", "arguments": map[string]any{}}}
				b.ReportAllocs()
				for b.Loop() {
					res, err := cs.CallTool(ctx, params)
					if err != nil || res.IsError || res.StructuredContent == nil && kind != "text" {
						b.Fatal(err, text(res))
					}
				}
			})
		}
	}
}
