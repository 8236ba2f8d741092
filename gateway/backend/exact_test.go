package backend

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolgate/toolgate/gateway/backend/backendtest"
	"github.com/toolgate/toolgate/gateway/config"
)

// TestStructuredNumbersExact: a result's structuredContent with integers
// past 2^53 (a Python server's ints) reaches the caller with every digit,
// over stdio (both protocol generations), streamable HTTP (event streams and
// plain JSON answers) and SSE; go-sdk alone decodes them into float64s.
func TestStructuredNumbersExact(t *testing.T) {
	modes := backendtest.ModeBigNumbers
	cases := slices.Insert(everyTransport(modes), 1, transportCase{"stdio-legacy", func(tb testing.TB) config.Server {
		return named(backendtest.Command(tb, modes+","+backendtest.ModeIgnoreDiscover), "b")
	}})
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			o := testOptions(nil)
			if tc.name == "stdio-legacy" {
				// It answers the probe's ping and never server/discover:
				// the probe timeout is what its fallback costs.
				o.ProbeTimeout = 300 * time.Millisecond
			}
			p := startPool(t, []config.Server{tc.server(t)}, o)
			for range 2 { // the second call on the same connection too
				res, err := p.CallTool(context.Background(), "b", "big", nil)
				if err != nil || res.IsError {
					t.Fatalf("big: %v %v", err, res)
				}
				b, err := json.Marshal(res.StructuredContent)
				if err != nil || string(b) != backendtest.BigNumbers {
					t.Errorf("structuredContent %s (%v), want %s", b, err, backendtest.BigNumbers)
				}
			}
			// A result without long numbers is go-sdk's, as before.
			res, err := p.CallTool(context.Background(), "b", "add", map[string]any{"a": 1, "b": 2})
			if err != nil || res.IsError {
				t.Fatalf("add: %v %v", err, res)
			}
			if m, ok := res.StructuredContent.(map[string]any); !ok || m["sum"] != 3.0 {
				t.Errorf("add's structuredContent %#v", res.StructuredContent)
			}
		})
	}
}

// transportCase is a server named "b" of the test backend, made for a
// test or a benchmark.
type transportCase struct {
	name   string
	server func(tb testing.TB) config.Server
}

// everyTransport is the test backend in modes on each transport go-sdk
// reads a result from in its own way: stdio (with env, KEY=VALUE pairs,
// added to its environment), streamable HTTP answering with an event
// stream and with plain JSON, and SSE.
func everyTransport(modes string, env ...string) []transportCase {
	return []transportCase{
		{"stdio", func(tb testing.TB) config.Server { return named(backendtest.Command(tb, modes, env...), "b") }},
		{"http", func(tb testing.TB) config.Server {
			return backendtest.NewHTTPServer(tb, config.TypeHTTP, modes).Config("b", nil)
		}},
		{"http-json", func(tb testing.TB) config.Server {
			return backendtest.NewHTTPServer(tb, config.TypeHTTP, modes+","+backendtest.ModeJSONResponse).Config("b", nil)
		}},
		{"sse", func(tb testing.TB) config.Server {
			return backendtest.NewHTTPServer(tb, config.TypeSSE, modes).Config("b", nil)
		}},
	}
}

// throughExact reads result, a tools/call result as a backend wrote it,
// through an exactConn as a call's answer: what go-sdk decodes (small),
// go-sdk's reading of it, and the call's exactResult, whose apply is yet
// to come.
func throughExact(t *testing.T, result string) (small json.RawMessage, res mcp.CallToolResult, e *exactResult) {
	t.Helper()
	id, _ := jsonrpc.MakeID(float64(1))
	conn := &fakeConn{msgs: []jsonrpc.Message{&jsonrpc.Response{ID: id, Result: json.RawMessage(result)}}}
	c := &exactConn{Connection: conn, pending: map[jsonrpc.ID]*exactResult{}}
	ctx, e := withExact(context.Background())
	if err := c.Write(ctx, &jsonrpc.Request{ID: id, Method: "tools/call"}); err != nil {
		t.Fatal(err)
	}
	msg, err := c.Read(ctx)
	if err != nil {
		t.Fatal(err)
	}
	small = msg.(*jsonrpc.Response).Result
	if err := json.Unmarshal(small, &res); err != nil {
		t.Fatalf("what go-sdk decodes: %v", err)
	}
	return small, res, e
}

// fakeConn is a connection whose Read answers msgs in turn.
type fakeConn struct {
	mcp.Connection
	msgs []jsonrpc.Message
}

func (c *fakeConn) Write(context.Context, jsonrpc.Message) error { return nil }
func (c *fakeConn) Read(context.Context) (jsonrpc.Message, error) {
	m := c.msgs[0]
	c.msgs = c.msgs[1:]
	return m, nil
}

// TestBigStructuredKept: a tools/call result whose structuredContent is
// bigStructured bytes or more (a log search's rows) reaches go-sdk with
// {} in its place, and the caller with it as the backend wrote it (key
// order, spaces): go-sdk decoded megabytes of it into maps that execute_tool
// then encoded again to trim to 100 KB. A smaller one is go-sdk's, as
// before.
func TestBigStructuredKept(t *testing.T) {
	var rows []string
	for i, n := 0, 0; n < bigStructured; i++ {
		rows = append(rows, fmt.Sprintf(`{"z": %d, "a": "/api/v1/items/%d", "status": 200}`, i, i))
		n += len(rows[i]) + 2
	}
	big := `{"rows": [` + strings.Join(rows, ", ") + `]}`
	for name, tc := range map[string]struct {
		sc   string
		kept bool
	}{"big": {big, true}, "small": {`{"z": 1, "a": 2}`, false}} {
		t.Run(name, func(t *testing.T) {
			result := `{"content": [{"type": "text", "text": "rows"}], "structuredContent": ` + tc.sc + `, "isError": false}`
			small, res, e := throughExact(t, result)
			if tc.kept && len(small) > 200 {
				t.Errorf("go-sdk decodes %d bytes, want the result without its structuredContent", len(small))
			}
			e.apply(&res)
			raw, isRaw := res.StructuredContent.(json.RawMessage)
			if isRaw != tc.kept || tc.kept && string(raw) != tc.sc {
				t.Errorf("structuredContent %T (kept as written: %v), want kept: %v", res.StructuredContent, isRaw && string(raw) == tc.sc, tc.kept)
			}
			if len(res.Content) != 1 || res.Content[0].(*mcp.TextContent).Text != "rows" {
				t.Errorf("content %v", res.Content)
			}
		})
	}
}

// TestBigStructuredAsGoSDKReadsIt: a structuredContent kept as written (a
// big one, one with long numbers) is the one go-sdk reads, the last of a
// name written twice (the first was kept: the client got another value
// than a smaller result's reading gives), and a byte in it that is no
// UTF-8 is read as go-sdk reads it, a U+FFFD (kept, it went to the client
// as is: JSON that Python's strict UTF-8 reading refuses whole).
func TestBigStructuredAsGoSDKReadsIt(t *testing.T) {
	pad := strings.Repeat("x", bigStructured)
	for name, tc := range map[string]struct {
		result string
		kept   bool
	}{
		"twice, big first":   {`{"content": [], "structuredContent": {"pad": "` + pad + `"}, "structuredContent": {"small": 1}}`, false},
		"twice, big last":    {`{"content": [], "structuredContent": {"small": 1}, "structuredContent": {"pad": "` + pad + `"}}`, true},
		"not UTF-8":          {`{"content": [], "structuredContent": {"s": "a` + "\xff\xfe\xed\xa0\x80" + `b", "pad": "` + pad + `"}}`, true},
		"not UTF-8, small":   {`{"content": [], "structuredContent": {"id": 12345678901234567891, "s": "a` + "\xff" + `b"}}`, true},
		"escaped name, once": {`{"content": [], "structured\u0043ontent": {"pad": "` + pad + `"}}`, true},
	} {
		t.Run(name, func(t *testing.T) {
			var want mcp.CallToolResult // go-sdk's reading of the whole result
			if err := json.Unmarshal([]byte(tc.result), &want); err != nil {
				t.Fatal(err)
			}
			_, res, e := throughExact(t, tc.result)
			e.apply(&res)
			if _, isRaw := res.StructuredContent.(json.RawMessage); isRaw != tc.kept {
				t.Errorf("structuredContent kept as written: %v, want %v", isRaw, tc.kept)
			}
			got, err := json.Marshal(res.StructuredContent)
			if err != nil {
				t.Fatal(err)
			}
			if !utf8.Valid(got) {
				t.Errorf("structuredContent's JSON is not UTF-8: %q", got[:min(len(got), 40)])
			}
			var g, w any
			wb, _ := json.Marshal(want.StructuredContent)
			if json.Unmarshal(got, &g) != nil || json.Unmarshal(wb, &w) != nil || !reflect.DeepEqual(g, w) {
				t.Errorf("structuredContent %.60s…, want go-sdk's reading %.60s…", got, wb)
			}
		})
	}
}
