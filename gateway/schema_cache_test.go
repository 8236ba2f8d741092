package gateway

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolgate/toolgate/index/catalog"
	"github.com/toolgate/toolgate/search"
)

// swapSearcher serves one catalog at a time and swaps it atomically, as
// search.Engine does when a re-index lands.
type swapSearcher struct {
	tools atomic.Pointer[[]catalog.Tool]
}

func (s *swapSearcher) swap(tools ...catalog.Tool) { s.tools.Store(&tools) }

func (s *swapSearcher) Search(context.Context, search.Query) (search.Result, error) {
	return search.Result{}, nil
}

func (s *swapSearcher) Tool(id string) (catalog.Tool, bool) {
	for _, t := range *s.tools.Load() {
		if t.ID() == id {
			return t, true
		}
	}
	return catalog.Tool{}, false
}

func (s *swapSearcher) IDs() []string { return nil }

func cacheLen(c *schemaCache) int {
	n := 0
	c.m.Range(func(any, any) bool { n++; return true })
	return n
}

// requires is an object schema with one required string property.
func requires(prop string) json.RawMessage {
	return json.RawMessage(fmt.Sprintf(`{"type":"object","properties":{%q:{"type":"string"}},"required":[%q],"additionalProperties":false}`, prop, prop))
}

// A tool's schema is resolved once and reused while the catalog keeps it;
// when a re-index swaps in a catalog where the schema changed, the next call
// is checked against the new schema, and the cache still holds one entry
// per tool.
func TestSchemaCacheFollowsSwaps(t *testing.T) {
	s := &swapSearcher{}
	s.swap(catalog.Tool{Server: "srv", Name: "tool", InputSchema: requires("a")},
		catalog.Tool{Server: "srv", Name: "other", InputSchema: requires("x")})
	g := New(s, &fakeCaller{call: func(string, string, map[string]any) (*mcp.CallToolResult, error) {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "ok"}}}, nil
	}}, nil)
	cs := connect(t, g)
	exec := func(args map[string]any) *mcp.CallToolResult {
		t.Helper()
		return call(t, cs, ExecuteToolName, map[string]any{"name": "srv__tool", "arguments": args})
	}
	for _, step := range []struct {
		name   string
		swap   json.RawMessage // new schema of srv__tool, nil = keep
		args   map[string]any
		errHas string // "" = the call must go through
	}{
		{"v1 accepts a", nil, map[string]any{"a": "1"}, ""},
		{"v1 rejects b", nil, map[string]any{"b": "1"}, "do not match the tool's inputSchema"},
		{"v2 accepts b", requires("b"), map[string]any{"b": "1"}, ""},
		{"v2 rejects a", nil, map[string]any{"a": "1"}, "do not match the tool's inputSchema"},
		{"v2 reindexed with equal text, new bytes", requires("b"), map[string]any{"b": "1"}, ""},
		{"no schema any more", json.RawMessage{}, map[string]any{"anything": 1}, ""},
		{"back to v1", requires("a"), map[string]any{"b": "1"}, "do not match the tool's inputSchema"},
	} {
		if step.swap != nil {
			s.swap(catalog.Tool{Server: "srv", Name: "tool", InputSchema: step.swap},
				catalog.Tool{Server: "srv", Name: "other", InputSchema: requires("x")})
		}
		res := exec(step.args)
		switch {
		case step.errHas == "" && res.IsError:
			t.Errorf("%s: got error %q", step.name, text(res))
		case step.errHas != "" && (!res.IsError || !strings.Contains(text(res), step.errHas)):
			t.Errorf("%s: got isError=%v %q, want an error with %q", step.name, res.IsError, text(res), step.errHas)
		}
		if n := cacheLen(&g.schemas); n != 1 {
			t.Errorf("%s: cache holds %d entries, want 1 (one per called tool)", step.name, n)
		}
	}
}

// Calls racing with swaps always validate against a schema of the catalog
// they looked the tool up in (run with -race).
func TestSchemaCacheConcurrentSwaps(t *testing.T) {
	s := &swapSearcher{}
	v1 := catalog.Tool{Server: "srv", Name: "tool", InputSchema: requires("a")}
	v2 := catalog.Tool{Server: "srv", Name: "tool", InputSchema: requires("b")}
	s.swap(v1)
	g := New(s, &fakeCaller{call: func(string, string, map[string]any) (*mcp.CallToolResult, error) {
		return &mcp.CallToolResult{}, nil
	}}, nil)
	ctx := context.Background()
	var wg sync.WaitGroup
	stop := make(chan struct{})
	wg.Go(func() {
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			if i%2 == 0 {
				s.swap(v2)
			} else {
				s.swap(v1)
			}
		}
	})
	for range 4 {
		wg.Go(func() {
			for range 300 {
				tool, _ := s.Tool("srv__tool")
				prop := "a"
				if string(tool.InputSchema) == string(v2.InputSchema) {
					prop = "b"
				}
				if msg := g.validate("srv__tool", tool.InputSchema, map[string]any{prop: "1"}); msg != "" {
					t.Errorf("valid arguments for %s rejected: %s", tool.InputSchema, msg)
					return
				}
				if msg := g.validate("srv__tool", tool.InputSchema, map[string]any{"c": "1"}); msg == "" {
					t.Errorf("invalid arguments accepted by %s", tool.InputSchema)
					return
				}
			}
		})
	}
	// The handler path under the same swaps: never a protocol error.
	req := &mcp.CallToolRequest{Params: &mcp.CallToolParamsRaw{Name: ExecuteToolName, Arguments: json.RawMessage(`{"name":"srv__tool","arguments":{"a":"1"}}`)}}
	for range 200 {
		if _, err := g.handleExecute(ctx, req); err != nil {
			t.Fatal(err)
		}
	}
	close(stop)
	wg.Wait()
}

// A tool whose input schema no call could pass (a misspelt type, a
// top-level type other than object) is called: the backend validates, as
// for a schema the gateway cannot read. The gateway refused every call of
// it ("must be a objetc, not an object"), which no model could fix.
func TestUnpassableSchemaCallsGoThrough(t *testing.T) {
	s := &swapSearcher{}
	s.swap(catalog.Tool{Server: "srv", Name: "top_string", InputSchema: json.RawMessage(`{"type":"string"}`)},
		catalog.Tool{Server: "srv", Name: "objetc", InputSchema: json.RawMessage(`{"type":"objetc","properties":{"title":{"type":"string"}}}`)},
		catalog.Tool{Server: "srv", Name: "count", InputSchema: json.RawMessage(`{"type":"object","properties":{"n":{"type":"integer "}}}`)},
		catalog.Tool{Server: "srv", Name: "plain", InputSchema: requires("text")})
	var sent atomic.Int32
	g := New(s, &fakeCaller{call: func(string, string, map[string]any) (*mcp.CallToolResult, error) {
		sent.Add(1)
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "ok"}}}, nil
	}}, nil)
	cs := connect(t, g)
	for _, c := range []struct {
		name string
		args map[string]any
	}{{"srv__top_string", map[string]any{"city": "Paris"}}, {"srv__objetc", map[string]any{"title": "hi"}}, {"srv__count", map[string]any{"n": 3}}} {
		before := sent.Load()
		if res := call(t, cs, ExecuteToolName, map[string]any{"name": c.name, "arguments": c.args}); res.IsError || sent.Load() != before+1 {
			t.Errorf("%s: isError=%v %q, backend called %d times; want the call sent", c.name, res.IsError, text(res), sent.Load()-before)
		}
	}
	// The server's other tools are validated as before.
	if res := call(t, cs, ExecuteToolName, map[string]any{"name": "srv__plain", "arguments": map[string]any{"text": 1}}); !res.IsError || !strings.Contains(text(res), "do not match the tool's inputSchema") {
		t.Errorf("srv__plain with a number: isError=%v %q, want refused", res.IsError, text(res))
	}
}
