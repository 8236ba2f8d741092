package gateway

import (
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolgate/toolgate/index/catalog"
	"github.com/toolgate/toolgate/search"
)

// A tool whose input schema is over catalog.MaxSchemaShown (an enum of
// 100,000 values, 1.4 MB) is found with a stand-in for it in a compact
// answer: its arguments and how to get the whole. It went whole into
// every search_tools answer that ranked it, even fifth at confidence
// 0.01, and a client that hands the model the structuredContent (Claude
// Code) refused the whole answer, over its 25,000 tokens. detail "full"
// gives it whole in an answer of that tool alone, which the stand-in says
// how to ask for; a full answer of several tools has the stand-in too (a
// generic full search whose fifth hit was such a tool was 2.4 MB, the
// schema in the text and in structuredContent). execute_tool validates
// with the whole schema.
func TestSearchStandsInForHugeSchema(t *testing.T) {
	values := make([]string, 100000)
	for i := range values {
		values[i] = fmt.Sprintf("value_%d", i)
	}
	enum, _ := json.Marshal(values)
	huge := catalog.Tool{Server: "big", Name: "pick_code", Description: "Pick a country code from the list.",
		InputSchema: json.RawMessage(`{"type":"object","properties":{"code":{"type":"string","enum":` + string(enum) + `}},"required":["code"]}`)}
	small := catalog.Tool{Server: "big", Name: "report", Description: "Send a weather report.",
		InputSchema: json.RawMessage(`{"type":"object","properties":{"city":{"type":"string"}}}`)}
	fs := &fakeSearcher{tools: []catalog.Tool{huge, small}, search: func(q search.Query) (search.Result, error) {
		hits := []search.Hit{{Tool: small, Score: 0.9, Fits: true}, {Tool: huge, Score: 0.1, Fits: true}}
		if strings.Contains(q.Text, "pick_code") {
			hits = []search.Hit{{Tool: huge, Score: 1, Fits: true}, {Tool: small, Score: 0.1, Fits: true}}
		}
		return search.Result{Hits: hits[:min(len(hits), max(q.Limit, 1))], Mode: search.ModeHybrid}, nil
	}}
	var got map[string]any
	g := New(fs, &fakeCaller{call: func(_, _ string, args map[string]any) (*mcp.CallToolResult, error) {
		got = args
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "ok"}}}, nil
	}}, nil)
	cs := connect(t, g)

	res := call(t, cs, SearchToolName, map[string]any{"query": "weather report"})
	b, _ := json.Marshal(res.StructuredContent)
	if res.IsError || len(b) > 4<<10 {
		t.Fatalf("compact answer: isError=%v, structuredContent %d bytes, want a small answer", res.IsError, len(b))
	}
	var out SearchResult
	if err := json.Unmarshal(b, &out); err != nil || len(out.Tools) != 2 {
		t.Fatalf("structuredContent %s: %v", b, err)
	}
	same := func(a, b json.RawMessage) bool {
		var x, y any
		return json.Unmarshal(a, &x) == nil && json.Unmarshal(b, &y) == nil && reflect.DeepEqual(x, y)
	}
	if !same(out.Tools[0].InputSchema, small.InputSchema) {
		t.Errorf("a small schema: %s, want it whole", out.Tools[0].InputSchema)
	}
	want := `{"type":"object","description":"The input schema of big__pick_code is 1356 KB, too long for a search answer. Its arguments: code*: string. execute_tool checks a call against the whole schema and, when it does not fit, says what is wrong with a call of the right shape; search_tools with {\"query\": \"big__pick_code\", \"limit\": 1, \"detail\": \"full\"} gives the whole schema."}`
	if !same(out.Tools[1].InputSchema, json.RawMessage(want)) {
		t.Errorf("the huge schema's stand-in:\n%s\nwant\n%s", out.Tools[1].InputSchema, want)
	}

	// A full answer of several tools: the stand-in, in the text too.
	res = call(t, cs, SearchToolName, map[string]any{"query": "weather report", "detail": "full"})
	b, _ = json.Marshal(res.StructuredContent)
	if res.IsError || len(b) > 4<<10 || len(text(res)) > 4<<10 || !strings.Contains(text(res), `\"limit\": 1, \"detail\": \"full\"} gives the whole schema`) {
		t.Errorf("detail full of 2 tools: isError=%v, structuredContent %d bytes, text %d bytes; want the stand-in:\n%.3000s", res.IsError, len(b), len(text(res)), text(res))
	}
	// What the stand-in says to send: the whole schema.
	res = call(t, cs, SearchToolName, map[string]any{"query": "big__pick_code", "limit": 1, "detail": "full"})
	b, _ = json.Marshal(res.StructuredContent)
	if res.IsError || !strings.Contains(string(b), `"value_99999"`) || !strings.Contains(text(res), `"value_99999"`) {
		t.Errorf("detail full of the tool alone: isError=%v, %d bytes; want the whole schema", res.IsError, len(b))
	}

	res = call(t, cs, ExecuteToolName, map[string]any{"name": "big__pick_code", "arguments": map[string]any{"code": "nope"}})
	if !res.IsError || !strings.Contains(text(res), `search_tools with {"query": "big__pick_code", "limit": 1, "detail": "full"} gives it whole`) {
		t.Errorf("a value not in the enum: isError=%v %q", res.IsError, text(res))
	}
	if res = call(t, cs, ExecuteToolName, map[string]any{"name": "big__pick_code", "arguments": map[string]any{"code": "value_99999"}}); res.IsError || got["code"] != "value_99999" {
		t.Errorf("a value of the enum: isError=%v %q, backend got %v", res.IsError, text(res), got)
	}
}
