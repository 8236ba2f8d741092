package backend

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolgate/toolgate/gateway/config"
)

// rawEventServer is a streamable HTTP server that answers tools/call with
// the event stream stream makes of the JSON-RPC response it is given, as
// bytes: the odd but valid ways servers write SSE, read by go-sdk's own
// client through the pool.
func rawEventServer(t *testing.T, result string, stream func(answer string) string) config.Server {
	return rawEventServerResuming(t, result, stream, nil)
}

// rawEventServerResuming is rawEventServer whose GETs with a Last-Event-ID
// resume returns answers.
func rawEventServerResuming(t *testing.T, result string, stream func(answer string) string, resume func(lastEventID string) string) config.Server {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if id := r.Header.Get("Last-Event-ID"); r.Method == http.MethodGet && id != "" && resume != nil {
			w.Header().Set("Content-Type", "text/event-stream")
			io.WriteString(w, resume(id))
			return
		}
		if r.Method != http.MethodPost {
			w.WriteHeader(http.StatusMethodNotAllowed)
			return
		}
		body, _ := io.ReadAll(r.Body)
		var msg struct {
			ID     json.RawMessage `json:"id"`
			Method string          `json:"method"`
			Params struct {
				ProtocolVersion string `json:"protocolVersion"`
			} `json:"params"`
		}
		if json.Unmarshal(body, &msg) != nil || msg.ID == nil {
			w.WriteHeader(http.StatusAccepted)
			return
		}
		var res string
		switch msg.Method {
		case "initialize":
			w.Header().Set("Mcp-Session-Id", "s1")
			res = `{"protocolVersion":"` + msg.Params.ProtocolVersion + `","capabilities":{"tools":{}},"serverInfo":{"name":"raw","version":"1"}}`
		case "tools/list":
			res = `{"tools":[{"name":"t","inputSchema":{"type":"object"}}]}`
		case "tools/call":
			w.Header().Set("Content-Type", "text/event-stream")
			io.WriteString(w, stream(`{"jsonrpc":"2.0","id":`+string(msg.ID)+`,"result":`+result+`}`))
			return
		default:
			res = `{}`
		}
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"jsonrpc":"2.0","id":`+string(msg.ID)+`,"result":`+res+`}`)
	}))
	t.Cleanup(srv.Close)
	return config.Server{Name: "b", Type: config.TypeHTTP, URL: srv.URL}
}

// TestKeptEventsAsGoSDKReads: a call's result reaches the caller whole
// however the server writes its event stream, as go-sdk's reader takes
// it: a message on several "data:" lines (which keptEvents wrote back with
// its line ends inside one "data:" line: go-sdk read the rest as other
// fields and failed the call, "failed to decode event"), and an event that
// the stream ends in without its empty line (go-sdk reads it; keptEvents
// handed it on as it came, neither kept nor observed: a 64-bit ID was
// rounded, a big text decoded by go-sdk).
func TestKeptEventsAsGoSDKReads(t *testing.T) {
	result, text := bigLogResult()
	long := `{"content":[{"type":"text","text":"id"}],"structuredContent":{"id":9007199254740993}}`
	split := func(answer string) string {
		// A line break in the JSON between its members, as a server that
		// writes one "data:" line per line of pretty-printed JSON does.
		i := strings.Index(answer, `"result"`)
		return "id: 1\ndata: " + answer[:i] + "\ndata:" + answer[i:] + "\n\n"
	}
	for _, tc := range []struct {
		name   string
		result string
		stream func(answer string) string
	}{
		{"several data lines", result, split},
		{"several data lines, CRLF", result, func(a string) string { return strings.ReplaceAll(split(a), "\n", "\r\n") }},
		{"no empty line at the end", result, func(a string) string { return "id: 1\ndata: " + a + "\n" }},
		{"no line end at the end", result, func(a string) string { return "data: " + a }},
		{"long number, no empty line at the end", long, func(a string) string { return "data: " + a + "\r\n" }},
		// go-sdk trims every CR off a line's end: "\r\r\n" is an empty
		// line, which ends the log message's event; keptEvents read on,
		// the answer's data joined to the message's, neither kept.
		{"long number after an event ended by CR CR LF", long, func(a string) string {
			return "data: " + `{"jsonrpc":"2.0","method":"notifications/message","params":{"level":"info","data":"x"}}` + "\r\n\r\r\ndata: " + a + "\r\n\r\n"
		}},
		{"long number, white space around the data", long, func(a string) string { return "data:\t" + a + " \t\n\n" }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := startPool(t, []config.Server{rawEventServer(t, tc.result, tc.stream)}, testOptions(nil))
			res, err := p.CallTool(context.Background(), "b", "t", nil)
			if err != nil || res.IsError {
				t.Fatalf("call: %v %v", err, res)
			}
			if tc.result == long {
				if raw, ok := res.StructuredContent.(json.RawMessage); !ok || !bytes.Contains(raw, []byte("9007199254740993")) {
					t.Errorf("structuredContent %T %v, want the id as the server wrote it", res.StructuredContent, res.StructuredContent)
				}
				return
			}
			if len(res.Content) != 3 || res.Content[1].(*mcp.TextContent).Text != text {
				t.Errorf("the big text is not whole (%d blocks)", len(res.Content))
			}
		})
	}
}

// TestKeptMessageLastResult: the result keepMessage keeps is the one
// go-sdk reads, the last of a message that names "result" twice (gjson's
// Get found the first: its big text was put into the other's empty block).
func TestKeptMessageLastResult(t *testing.T) {
	big, _ := bigLogResult()
	for name, tc := range map[string]struct {
		message string
		want    string // the second block's text as go-sdk reads the whole message
	}{
		"big first": {`{"jsonrpc":"2.0","id":1,"result":` + big + `,"result":{"content":[{"type":"text","text":"a"},{"type":"text","text":""}]}}`, ""},
		"big last":  {`{"jsonrpc":"2.0","id":1,"result":{"content":[]},"result":` + big + `}`, "big"},
	} {
		t.Run(name, func(t *testing.T) {
			_, e := withExact(context.Background())
			res := applied(t, e, e.keepMessage([]byte(tc.message)))
			if len(res.Content) < 2 {
				t.Fatalf("%d blocks", len(res.Content))
			}
			got := res.Content[1].(*mcp.TextContent).Text
			if tc.want == "" && got != "" || tc.want == "big" && len(got) < bigStructured {
				t.Errorf("the second block's text is %d bytes, want go-sdk's reading (%s)", len(got), tc.want)
			}
		})
	}
}

// TestKeptEventsOtherNames: an event named other than "message", which
// go-sdk skips, is neither kept nor observed: its big text was put into
// the empty text block of the result that followed, and its message
// relayed as if go-sdk had read it.
func TestKeptEventsOtherNames(t *testing.T) {
	big, _ := bigLogResult()
	small := `{"content":[{"type":"text","text":"a"},{"type":"text","text":""}]}`
	p := startPool(t, []config.Server{rawEventServer(t, small, func(answer string) string {
		id := answer[strings.Index(answer, `"id":`)+5 : strings.Index(answer, `,"result"`)]
		return "event: debug\ndata: " + `{"jsonrpc":"2.0","id":` + id + `,"result":` + big + "}\n\n" +
			"event:  message \ndata: " + answer + "\n\n"
	})}, testOptions(nil))
	res, err := p.CallTool(context.Background(), "b", "t", nil)
	if err != nil || res.IsError {
		t.Fatalf("call: %v %v", err, res)
	}
	if len(res.Content) != 2 || res.Content[1].(*mcp.TextContent).Text != "" {
		t.Errorf("the result is not the one go-sdk read (%d blocks, the second of %d bytes)", len(res.Content), len(res.Content[len(res.Content)-1].(*mcp.TextContent).Text))
	}
}

// TestKeptEventsResumed: a result that comes on a stream go-sdk resumed
// (a GET with the Last-Event-ID of the call's POST stream, which ended
// before it) is kept as one on the POST's stream: its 64-bit ID was
// rounded.
func TestKeptEventsResumed(t *testing.T) {
	const long = `{"content":[{"type":"text","text":"id"}],"structuredContent":{"id":9007199254740993}}`
	callID := make(chan string, 1)
	p := startPool(t, []config.Server{rawEventServerResuming(t, long, func(answer string) string {
		callID <- answer[strings.Index(answer, `"id":`)+5 : strings.Index(answer, `,"result"`)]
		return "id: e1\ndata:\n\n" // a priming event, then the stream ends
	}, func(lastEventID string) string {
		if lastEventID != "e1" {
			return ""
		}
		return "id: e2\ndata: " + `{"jsonrpc":"2.0","id":` + <-callID + `,"result":` + long + "}\n\n"
	})}, testOptions(nil))
	res, err := p.CallTool(context.Background(), "b", "t", nil)
	if err != nil || res.IsError {
		t.Fatalf("call: %v %v", err, res)
	}
	if raw, ok := res.StructuredContent.(json.RawMessage); !ok || !bytes.Contains(raw, []byte("9007199254740993")) {
		t.Errorf("structuredContent %T %v, want the id as the server wrote it", res.StructuredContent, res.StructuredContent)
	}
}
