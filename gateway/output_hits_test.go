package gateway

import (
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/toolgate/toolgate/index/catalog"
	"github.com/toolgate/toolgate/search"
)

// TestSearchShowsOutputSchema: a "detail": "full" answer gives each hit's
// output schema (what its structuredContent holds), in structuredContent
// as listed and in the text as compact JSON without "$schema"; a compact
// answer, sized for a model's context, has none of it; a tool without one
// has no outputSchema field. An output schema over catalog.MaxSchemaShown
// is a stand-in that says how to get it, but in a full answer of that tool
// alone.
func TestSearchShowsOutputSchema(t *testing.T) {
	out := json.RawMessage(`{"$schema":"http://json-schema.org/draft-07/schema#","type":"object","properties":{"temperature":{"type":"number","description":"Temperature in celsius"}},"required":["temperature"]}`)
	weather := catalog.Tool{Server: "w", Name: "weather", Description: "Get the weather of a city.",
		InputSchema: json.RawMessage(`{"type":"object","properties":{"city":{"type":"string"}}}`), OutputSchema: out}
	plain := catalog.Tool{Server: "w", Name: "plain", Description: "Say hello.", InputSchema: json.RawMessage(`{"type":"object"}`)}
	values := make([]string, 5000)
	for i := range values {
		values[i] = fmt.Sprintf("condition_%d", i)
	}
	enum, _ := json.Marshal(values)
	huge := catalog.Tool{Server: "w", Name: "forecast", Description: "Forecast.", InputSchema: json.RawMessage(`{"type":"object"}`),
		OutputSchema: json.RawMessage(`{"type":"object","properties":{"sky":{"type":"string","enum":` + string(enum) + `}}}`)}
	fs := &fakeSearcher{tools: []catalog.Tool{weather, plain, huge}, search: func(q search.Query) (search.Result, error) {
		hits := []search.Hit{{Tool: weather, Score: 1, Fits: true}, {Tool: plain, Score: 0.5, Fits: true}, {Tool: huge, Score: 0.2, Fits: true}}
		if strings.Contains(q.Text, "w__forecast") {
			hits = []search.Hit{{Tool: huge, Score: 1, Fits: true}}
		}
		return search.Result{Hits: hits[:min(len(hits), q.Limit)], Mode: search.ModeHybrid}, nil
	}}
	cs := connect(t, New(fs, &fakeCaller{}, nil))
	same := func(a, b json.RawMessage) bool {
		var x, y any
		return json.Unmarshal(a, &x) == nil && json.Unmarshal(b, &y) == nil && reflect.DeepEqual(x, y)
	}

	res := call(t, cs, SearchToolName, map[string]any{"query": "weather"})
	b, _ := json.Marshal(res.StructuredContent)
	if strings.Contains(string(b), "outputSchema") || strings.Contains(text(res), "outputSchema") {
		t.Errorf("a compact answer shows output schemas:\n%s\n%s", b, text(res))
	}

	res = call(t, cs, SearchToolName, map[string]any{"query": "weather", "detail": "full"})
	got := structured(t, res)
	if len(got.Tools) != 3 {
		t.Fatalf("full answer: %d tools, want 3", len(got.Tools))
	}
	if !same(got.Tools[0].OutputSchema, out) {
		t.Errorf("full answer: outputSchema %s, want %s", got.Tools[0].OutputSchema, out)
	}
	if got.Tools[1].OutputSchema != nil {
		t.Errorf("a tool that declares none: outputSchema %s", got.Tools[1].OutputSchema)
	}
	want := `   outputSchema: {"type":"object","properties":{"temperature":{"type":"number","description":"Temperature in celsius"}},"required":["temperature"]}` + "\n"
	if !strings.Contains(text(res), want) || strings.Count(text(res), "outputSchema: ") != 2 {
		t.Errorf("full text: want the output schema of w__weather as\n%sand the stand-in of w__forecast's, got\n%.2000s", want, text(res))
	}
	stand := `{"type":"object","description":"The output schema of w__forecast is 81 KB, too long for a search answer; search_tools with {\"query\": \"w__forecast\", \"limit\": 1, \"detail\": \"full\"} gives it whole."}`
	if !same(got.Tools[2].OutputSchema, json.RawMessage(stand)) {
		t.Errorf("a huge output schema in a full answer of several tools:\n%s\nwant\n%s", got.Tools[2].OutputSchema, stand)
	}

	res = call(t, cs, SearchToolName, map[string]any{"query": "w__forecast", "limit": 1, "detail": "full"})
	got = structured(t, res)
	if len(got.Tools) != 1 || !same(got.Tools[0].OutputSchema, huge.OutputSchema) || !strings.Contains(text(res), "condition_4999") {
		t.Errorf("a full answer of w__forecast alone: want its whole output schema, got %d tools, text of %d bytes", len(got.Tools), len(text(res)))
	}
}
