package gateway

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// contentFromBackend is a tools/call result with every kind of content
// block a tool may answer (MCP 2025-11-25), as a backend writes it: text,
// image, audio, a resource link (title, size, icons), embedded text and
// blob resources, an embedded empty text file, each with annotations or
// _meta.
const contentFromBackend = `{"content":[
 {"type":"text","text":"plain","annotations":{"audience":["user","assistant"],"priority":0.7,"lastModified":"2025-01-12T15:00:58Z"}},
 {"type":"text","text":""},
 {"type":"image","data":"iVBORw0KGgo=","mimeType":"image/png","_meta":{"example.com/alt":"dot"}},
 {"type":"audio","data":"UklGRiQ=","mimeType":"audio/wav","annotations":{"priority":1}},
 {"type":"resource_link","uri":"file:///src/main.rs","name":"main.rs","title":"Main","description":"Entry point","mimeType":"text/x-rust","size":1234,"icons":[{"src":"https://example.com/rust.png","mimeType":"image/png","sizes":["48x48"]}],"annotations":{"audience":["user"]},"_meta":{"k":1}},
 {"type":"resource","resource":{"uri":"file:///a.txt","mimeType":"text/plain","text":"embedded","_meta":{"k":2}},"annotations":{"priority":0.2}},
 {"type":"resource","resource":{"uri":"file:///a.bin","mimeType":"application/octet-stream","blob":"iVBORw0KGgo="}},
 {"type":"resource","resource":{"uri":"file:///empty.txt","mimeType":"text/plain","text":""}},
 {"type":"resource","resource":{"uri":"file:///empty.bin","blob":""}}
]}`

// contentGateway is a test gateway whose every tool answers sent, the
// result of contentFromBackend.
func contentGateway(t *testing.T) (g *Gateway, sent mcp.CallToolResult) {
	t.Helper()
	if err := json.Unmarshal([]byte(contentFromBackend), &sent); err != nil {
		t.Fatal(err)
	}
	g, _ = newTestGateway(t, &fakeCaller{call: func(string, string, map[string]any) (*mcp.CallToolResult, error) {
		r := sent
		return &r, nil
	}})
	return g, sent
}

// TestContentRelayedWhole: execute_tool passes every content block of a
// tool's answer on as the backend wrote it, field for field. An embedded
// empty text file lost its "text" (go-sdk v1.8.0 writes a resource's text
// with omitempty), which left a resource with neither text nor blob: the
// TypeScript SDK's client refused the whole answer (invalid_union).
func TestContentRelayedWhole(t *testing.T) {
	g, _ := contentGateway(t)
	var wire lockedBuffer
	ct, st := mcp.NewInMemoryTransports()
	ctx := context.Background()
	ss, err := g.Server().Connect(ctx, st, nil)
	if err != nil {
		t.Fatal(err)
	}
	// The client's side logs what it read before the call returns it (the
	// server's logs what it wrote after the client may have read it).
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "c"}, nil).Connect(ctx, &mcp.LoggingTransport{Transport: ct, Writer: &wire}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close(); ss.Wait() })
	if res := call(t, cs, ExecuteToolName, map[string]any{"name": "everything__add", "arguments": map[string]any{"a": 1, "b": 2}}); res.IsError {
		t.Fatalf("isError: %s", text(res))
	}
	var got struct {
		Result struct {
			Content any `json:"content"`
		} `json:"result"`
	}
	sc := bufio.NewScanner(strings.NewReader(wire.String()))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		line, ok := strings.CutPrefix(sc.Text(), "read: ")
		if ok && strings.Contains(line, `"content":[`) {
			if err := json.Unmarshal([]byte(line), &got); err != nil {
				t.Fatal(err)
			}
		}
	}
	var want struct {
		Content any `json:"content"`
	}
	if err := json.Unmarshal([]byte(contentFromBackend), &want); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want.Content, got.Result.Content); diff != "" {
		t.Errorf("content the client got differs from what the backend wrote (-backend +client):\n%s", diff)
	}
}

// lockedBuffer is a bytes.Buffer that the transport's goroutines may write
// while the test reads it.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// TestEmptyTextResourceFields: emptyTextResource writes an embedded
// resource itself, field by field, as go-sdk v1.8.0's types hold it. The
// day go-sdk adds a field to either type, this fails: emptyTextResource
// would drop it from the empty text files it writes.
func TestEmptyTextResourceFields(t *testing.T) {
	fields := func(v any) []string {
		var names []string
		for f := range reflect.TypeOf(v).Fields() {
			names = append(names, f.Name)
		}
		return names
	}
	if got, want := fields(mcp.EmbeddedResource{}), []string{"Resource", "Meta", "Annotations"}; !slices.Equal(got, want) {
		t.Errorf("mcp.EmbeddedResource has fields %v, emptyTextResource writes %v: write the new ones too", got, want)
	}
	if got, want := fields(mcp.ResourceContents{}), []string{"URI", "MIMEType", "Text", "Blob", "Meta"}; !slices.Equal(got, want) {
		t.Errorf("mcp.ResourceContents has fields %v, emptyTextResource writes %v (a text resource: no Blob): write the new ones too", got, want)
	}
}

// TestContentPerProtocol: a client gets of each content block what its
// protocol defines. A resource link (2025-06-18) reaches a client of an
// older protocol as a text block that names all it says, and audio
// (2025-03-26) reaches a 2024-11-05 client as a text note of its type and
// size: the Python SDK 1.2.1 (2024-11-05) and 1.9.4 (2025-03-26) refused
// the whole result otherwise (a pydantic ValidationError from call_tool),
// so the user lost its text and images too. The other blocks, and every
// block for a client of 2025-06-18 on, are as the backend wrote them.
func TestContentPerProtocol(t *testing.T) {
	g, sent := contentGateway(t)
	const (
		link  = `Resource link: file:///src/main.rs (name "main.rs", title "Main", text/x-rust, 1234 bytes): Entry point`
		audio = `Audio left out (audio/wav, 5 bytes): protocol 2024-11-05 has no audio content; a client of protocol 2025-03-26 or later receives it.`
	)
	for _, tc := range []struct {
		pv          string
		audio, link string // the block's text when it became one, else ""
	}{
		{"2024-11-05", audio, link},
		{"2025-03-26", "", link},
		{"2025-06-18", "", ""},
		{"2025-11-25", "", ""},
	} {
		t.Run(tc.pv, func(t *testing.T) {
			cs := connectClient(t, g, mcp.NewClient(&mcp.Implementation{Name: "old"}, nil), tc.pv)
			res := call(t, cs, ExecuteToolName, map[string]any{"name": "everything__add", "arguments": map[string]any{"a": 1, "b": 2}})
			if len(res.Content) != len(sent.Content) {
				t.Fatalf("%d blocks, want %d", len(res.Content), len(sent.Content))
			}
			for i, c := range res.Content {
				want := sent.Content[i]
				switch i {
				case 3:
					if tc.audio != "" {
						want = &mcp.TextContent{Text: tc.audio, Annotations: sent.Content[3].(*mcp.AudioContent).Annotations}
					}
				case 4:
					if tc.link != "" {
						l := sent.Content[4].(*mcp.ResourceLink)
						want = &mcp.TextContent{Text: tc.link, Annotations: l.Annotations, Meta: l.Meta}
					}
				}
				wb, _ := json.Marshal(want)
				gb, _ := json.Marshal(c)
				if string(wb) != string(gb) {
					t.Errorf("block %d:\n got %s\nwant %s", i, gb, wb)
				}
			}
		})
	}
	// Over the HTTP front, each request's MCP-Protocol-Version (2025-03-26
	// when it has none, as the spec says) decides.
	srv := httptest.NewServer(g.HTTPHandler(nil))
	defer srv.Close()
	const body = `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"execute_tool","arguments":{"name":"everything__add","arguments":{"a":1,"b":2}}}}`
	for _, tc := range []struct {
		header string
		link   bool // the resource link is kept
	}{{"", false}, {"2025-03-26", false}, {"2025-06-18", true}, {"2025-11-25", true}} {
		resp, got := postMCP(t, srv.URL+"/mcp", tc.header, body, nil)
		if resp.StatusCode != http.StatusOK || strings.Contains(got, `"type":"resource_link"`) != tc.link || strings.Contains(got, "Resource link: file:///src/main.rs") == tc.link {
			t.Errorf("over HTTP with MCP-Protocol-Version %q: %s %.600s, want the resource link kept: %v", tc.header, resp.Status, got, tc.link)
		}
	}
}

// TestStructuredContentMirroredForOldClients: structuredContent is MCP
// 2025-06-18's, and a client of an older protocol shows its model the
// content alone: a result with no text block (the spec advises a server to
// write the JSON there) reached the Python SDK 1.2.1 as `content: []`, the
// answer only in a field its version does not define. Such a client gets
// the JSON as a text block; a text of the server's own (the JSON in any
// layout, or prose) is left as it is, and a client of 2025-06-18 on gets
// the result unchanged. A structuredContent that is not an object goes for
// every client before 2026-07-28, its JSON kept in text unless a text block
// holds the same value in any layout.
func TestStructuredContentMirroredForOldClients(t *testing.T) {
	results := map[string]*mcp.CallToolResult{
		"add": {StructuredContent: map[string]any{"t": 21.0, "city": "Oslo"}},
		// Fits its tool's output schema (one that does not gets a note: TestOutputChecked).
		"list_directory": {Content: []mcp.Content{&mcp.TextContent{Text: "{\n  \"content\": \"Oslo\",\n  \"t\": 21\n}"}}, StructuredContent: map[string]any{"t": 21.0, "content": "Oslo"}},
		"write_file":     {Content: []mcp.Content{&mcp.TextContent{Text: "Oslo, 21 degrees"}}, StructuredContent: json.RawMessage(`{"t": 21, "city": "Oslo"}`)},
		// Not an object (before 2026-07-28 it goes, its JSON kept in text):
		// its text pretty-printed is not repeated compact.
		"create_entities": {Content: []mcp.Content{&mcp.TextContent{Text: "[\n  \"a\",\n  \"b\"\n]"}}, StructuredContent: []any{"a", "b"}},
	}
	g, _ := newTestGateway(t, &fakeCaller{call: func(_, tool string, _ map[string]any) (*mcp.CallToolResult, error) {
		r := *results[tool]
		return &r, nil
	}})
	for _, tc := range []struct {
		id   string
		args map[string]any
		old  string // the text blocks a client before 2025-06-18 gets, joined
	}{
		{"everything__add", map[string]any{"a": 1, "b": 2}, `{"city":"Oslo","t":21}`},
		{"filesystem__list_directory", map[string]any{"path": "."}, "{\n  \"content\": \"Oslo\",\n  \"t\": 21\n}"},
		{"filesystem__write_file", map[string]any{"path": "a", "content": "b"}, `Oslo, 21 degrees`},
		{"memory__create_entities", map[string]any{"entities": []any{}}, "[\n  \"a\",\n  \"b\"\n]"},
	} {
		sent := results[strings.SplitN(tc.id, "__", 2)[1]]
		for _, pv := range []string{"2024-11-05", "2025-03-26", "2025-06-18"} {
			t.Run(tc.id+" "+pv, func(t *testing.T) {
				cs := connectClient(t, g, mcp.NewClient(&mcp.Implementation{Name: "old"}, nil), pv)
				res := call(t, cs, ExecuteToolName, map[string]any{"name": tc.id, "arguments": tc.args})
				want := tc.old
				if pv >= "2025-06-18" {
					want = text(sent)
				}
				if got := text(res); got != want {
					t.Errorf("text %q, want %q", got, want)
				}
				if _, list := sent.StructuredContent.([]any); res.StructuredContent == nil && !list {
					t.Error("structuredContent left out: every client SDK tried keeps it")
				}
			})
		}
	}
}
