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
	"github.com/toolgate/toolgate/gateway/quarantine"
	"github.com/toolgate/toolgate/internal/testenv"
)

// TestOutputSchemaUpgrade: the bundled npm servers declare output schemas
// (24 of their 36 tools), which a "detail": "full" search_tools answer
// shows, in structuredContent and in the text, and a compact one does
// not. A data folder whose pins file the toolgate of before wrote
// (testdata/pins-before-output-schemas.json: the main branch's binary of
// 2026-12-07 serving examples/toolgate.json, its "sources" left out; its
// hashes leave output schemas out) holds none of them at the upgrade:
// each pin has the output schema listed then pinned with it, apart from
// its hash, which stays the one that toolgate wrote, so that rolled back
// to, it holds none of them either (quarantine's TestGuardRollback).
func TestOutputSchemaUpgrade(t *testing.T) {
	cfg := bundledConfig(t, nil)
	data := t.TempDir()
	before, err := os.ReadFile(filepath.Join("testdata", "pins-before-output-schemas.json"))
	if err != nil {
		t.Fatal(err)
	}
	pins := filepath.Join(data, "quarantine", "pins.json")
	if err := os.MkdirAll(filepath.Dir(pins), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(pins, before, 0o600); err != nil {
		t.Fatal(err)
	}
	addr, logs, stop := startGatewayStop(t, data, cfg)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	cs, err := connectKey(ctx, t, addr, "/mcp", "", "planner")
	if err != nil {
		t.Fatal(err)
	}
	indexServed(t, ctx, cs)

	full := func(id string) (*gateway.FoundTool, string) {
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: gateway.SearchToolName, Arguments: map[string]any{"query": id, "limit": 1, "detail": "full"}})
		if err != nil || res.IsError {
			return nil, resultText(res)
		}
		if err := checkedAnswer(ctx, cs, res); err != nil {
			t.Fatalf("search_tools %s: %v", id, err)
		}
		var out gateway.SearchResult
		b, _ := json.Marshal(res.StructuredContent)
		if json.Unmarshal(b, &out) != nil || len(out.Tools) == 0 || out.Tools[0].Name != id {
			return nil, resultText(res)
		}
		return &out.Tools[0], resultText(res)
	}
	for id, field := range map[string]string{
		"memory__read_graph":                 `"relations"`,
		"filesystem__read_text_file":         `"content"`,
		"everything__get-structured-content": `"temperature"`,
		"filesystem__list_directory":         `"content"`,
		"memory__create_entities":            `"entities"`,
		"everything__echo":                   "", // declares none
	} {
		var hit *gateway.FoundTool
		var txt string
		// Found once its server listed it (a cold start: the index of
		// before is rebuilt), and not held.
		testenv.Eventually(t, id+" found", func() bool { hit, txt = full(id); return hit != nil && hit.Unavailable == "" })
		switch {
		case field == "" && (hit.OutputSchema != nil || strings.Contains(txt, "outputSchema: ")):
			t.Errorf("%s declares no output schema, the answer shows one: %s\n%s", id, hit.OutputSchema, txt)
		case field != "" && (!strings.Contains(string(hit.OutputSchema), field) || !strings.Contains(txt, "   outputSchema: {")):
			t.Errorf("%s: outputSchema %s, want one with %s, in the text too:\n%s", id, hit.OutputSchema, field, txt)
		case field != "" && strings.Contains(txt[strings.Index(txt, "outputSchema: "):], "$schema"):
			t.Errorf("%s: the text's output schema keeps its \"$schema\":\n%s", id, txt)
		}
	}
	res, err := callSearch(ctx, cs, "read the knowledge graph", 5)
	if err != nil {
		t.Fatal(err)
	}
	if b, _ := json.Marshal(res.StructuredContent); strings.Contains(string(b), "outputSchema") || strings.Contains(resultText(res), "outputSchema") {
		t.Errorf("a compact answer shows output schemas:\n%s\n%s", b, resultText(res))
	}
	stop()
	if strings.Contains(logs.String(), "tool quarantined") {
		t.Errorf("the upgrade quarantined tools:\n%s", logs)
	}
	f, err := quarantine.Read(pins)
	if err != nil {
		t.Fatal(err)
	}
	var old quarantine.File
	if err := json.Unmarshal(before, &old); err != nil {
		t.Fatal(err)
	}
	outputs := 0
	for id, was := range old.Tools {
		p := f.Tools[id]
		if p == nil || !p.OutputPinned || p.Hold != nil || p.Pinned != was.Pinned || p.Current != p.Pinned || p.CurrentOutput != p.PinnedOutput {
			t.Errorf("%s after the upgrade: %+v, want its output schema pinned, its hash the one of before (%s) and nothing held", id, p, was.Pinned)
			continue
		}
		if p.PinnedOutput != "" {
			outputs++
		}
	}
	if outputs != 24 {
		t.Errorf("%d pins have an output schema pinned, want the 24 tools that declare one", outputs)
	}
}
