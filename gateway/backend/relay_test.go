package backend

//lint:file-ignore SA1019 MCP logging is deprecated from protocol 2026-07-28 on (SEP-2577) but is what 2025-11-25 clients and servers speak, and it stays functional in the deprecation window; execute_tool relays it (issue 13)

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolgate/toolgate/gateway/backend/backendtest"
	"github.com/toolgate/toolgate/gateway/config"
	"github.com/toolgate/toolgate/internal/mask"
)

// recorder collects what CallEvents report.
type recorder struct {
	mu       sync.Mutex
	progress []*mcp.ProgressNotificationParams
	logs     []*mcp.LoggingMessageParams
}

func (r *recorder) events(level mcp.LoggingLevel) *CallEvents {
	ev := &CallEvents{Progress: func(p *mcp.ProgressNotificationParams) {
		r.mu.Lock()
		r.progress = append(r.progress, p)
		r.mu.Unlock()
	}}
	if level != "" {
		ev.LogLevel = level
		ev.Log = func(p *mcp.LoggingMessageParams) {
			r.mu.Lock()
			r.logs = append(r.logs, p)
			r.mu.Unlock()
		}
	}
	return ev
}

// TestCallEventsRelayed: over stdio, streamable HTTP (event streams) and
// SSE, each progress notification and log message a backend sends during a
// call reaches the call's CallEvents before CallTool returns, in order, the
// progress without the pool's token; log messages below the wanted level
// are not passed on.
func TestCallEventsRelayed(t *testing.T) {
	for _, tc := range []struct {
		name   string
		server func(t *testing.T) config.Server
	}{
		{"stdio", func(t *testing.T) config.Server { return named(backendtest.Command(t, backendtest.ModeProgress), "p") }},
		// Like the Python SDK's MCPServer: logs to a request that opts in
		// (_meta) without declaring the logging capability.
		{"stdio-no-logging-capability", func(t *testing.T) config.Server {
			return named(backendtest.Command(t, backendtest.ModeProgress+","+backendtest.ModeNoLoggingCap), "p")
		}},
		{"http", func(t *testing.T) config.Server {
			return backendtest.NewHTTPServer(t, config.TypeHTTP, backendtest.ModeProgress).Config("p", nil)
		}},
		{"sse", func(t *testing.T) config.Server {
			return backendtest.NewHTTPServer(t, config.TypeSSE, backendtest.ModeProgress).Config("p", nil)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := startPool(t, []config.Server{tc.server(t)}, testOptions(nil))
			for round, level := range []mcp.LoggingLevel{"info", "warning", "debug"} {
				var rec recorder
				ctx := WithCallEvents(context.Background(), rec.events(level))
				res, err := p.CallTool(ctx, "p", "progress", map[string]any{"steps": 3})
				if err != nil || res.IsError {
					t.Fatalf("round %d: %v %v", round, err, res)
				}
				// No waiting: everything came before the result.
				rec.mu.Lock()
				if len(rec.progress) != 3 {
					t.Fatalf("round %d: %d progress notifications when CallTool returned, want 3", round, len(rec.progress))
				}
				for i, pr := range rec.progress {
					if pr.ProgressToken != nil || pr.Progress != float64(i+1) || pr.Total != 3 || pr.Message != backendtest.ProgressMessage(i+1) {
						t.Errorf("round %d: progress %d = %+v", round, i, pr)
					}
				}
				wantLogs := 3
				if level == "warning" {
					wantLogs = 0 // the fake logs at info
				}
				if len(rec.logs) != wantLogs {
					t.Errorf("round %d (level %s): %d log messages, want %d", round, level, len(rec.logs), wantLogs)
				}
				for i, l := range rec.logs {
					if l.Level != "info" || l.Data != backendtest.ProgressMessage(i+1) {
						t.Errorf("round %d: log %d = %+v", round, i, l)
					}
				}
				rec.mu.Unlock()
			}
			// Without events, nothing is asked of the backend: no token.
			res, err := p.CallTool(context.Background(), "p", "progress", map[string]any{"steps": 2})
			if err != nil || res.IsError {
				t.Fatalf("without events: %v %v", err, res)
			}
		})
	}
}

// TestRelayedLogsMasked: a backend's log message (and progress message)
// relayed to the client hides the server's configured secrets and the fields named like one, as
// its stderr lines in the log do: a client of a shared gateway does not
// read the operator's GITHUB_TOKEN in a server's debug message.
func TestRelayedLogsMasked(t *testing.T) {
	const secret = "relay-secret-value-123"
	srv := named(backendtest.Command(t, backendtest.ModeProgress, "GITHUB_TOKEN="+secret, backendtest.EnvLogSays+"=token "+secret), "p")
	p := startPool(t, []config.Server{srv}, testOptions(nil))
	var rec recorder
	res, err := p.CallTool(WithCallEvents(context.Background(), rec.events("info")), "p", "progress", map[string]any{"steps": 2})
	if err != nil || res.IsError {
		t.Fatalf("call: %v %v", err, res)
	}
	rec.mu.Lock()
	defer rec.mu.Unlock()
	if len(rec.logs) != 2 || len(rec.progress) != 2 {
		t.Fatalf("%d log messages and %d progress notifications, want 2 each", len(rec.logs), len(rec.progress))
	}
	for _, pr := range rec.progress {
		if strings.Contains(pr.Message, secret) || !strings.HasPrefix(pr.Message, "step ") {
			t.Errorf("relayed progress message %q: want the secret masked, the message kept", pr.Message)
		}
	}
	for _, l := range rec.logs {
		data, _ := json.Marshal(l.Data)
		if strings.Contains(string(data), secret) || !strings.Contains(string(data), "step 1") && !strings.Contains(string(data), "step 2") {
			t.Errorf("relayed log %s: want the secret masked, the message kept", data)
		}
	}
}

// TestLogsOnlyWhenAttributable: a backend's log message names no request,
// so it goes to the call in flight only when that is the only one.
func TestLogsOnlyWhenAttributable(t *testing.T) {
	var c calls
	var got []string
	ev := &CallEvents{LogLevel: "info", Log: func(p *mcp.LoggingMessageParams) { got = append(got, fmt.Sprint(p.Data)) }}
	msg := func(s string) jsonrpc.Message {
		b, _ := json.Marshal(&mcp.LoggingMessageParams{Level: "info", Data: s})
		return &jsonrpc.Request{Method: methodMessage, Params: b}
	}
	a := c.add(ev)
	c.observe(msg("alone"))
	b := c.add(nil)
	c.observe(msg("with another call"))
	c.done(b)
	c.observe(msg("alone again"))
	c.done(a)
	c.observe(msg("no call"))
	if strings.Join(got, ",") != "alone,alone again" {
		t.Errorf("relayed %q, want the two sent while the call was alone", got)
	}
}

// TestObserveEvents: messages are observed once their event is complete
// (multi-line data, CRLF, comments and other fields as SSE has them),
// whatever the read boundaries, and the bytes pass through unchanged.
func TestObserveEvents(t *testing.T) {
	stream := ": comment\r\nevent: message\r\nid: 1\r\ndata: {\"jsonrpc\":\"2.0\",\r\ndata: \"method\":\"notifications/progress\",\"params\":{\"progressToken\":\"t\",\"progress\":1}}\r\n\r\n" +
		"data: {\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{}}\n\n"
	for _, chunk := range []int{1, 7, len(stream)} {
		var seen []string
		e := &observeEvents{rc: io.NopCloser(&chunked{s: stream, n: chunk}), max: 1 << 20, observe: func(m jsonrpc.Message) {
			switch m := m.(type) {
			case *jsonrpc.Request:
				seen = append(seen, m.Method)
			case *jsonrpc.Response:
				seen = append(seen, "response")
			}
		}}
		out, err := io.ReadAll(e)
		if err != nil || string(out) != stream {
			t.Fatalf("chunk %d: bytes changed (%v)", chunk, err)
		}
		if strings.Join(seen, ",") != "notifications/progress,response" {
			t.Errorf("chunk %d: observed %v", chunk, seen)
		}
	}
}

// TestObserveEventsOtherNames: an event whose "event:" names another than
// "message" (trimmed as go-sdk trims it) is not observed, as go-sdk skips
// it: its log message or progress was relayed to the call all the same.
// One named " message " or with an empty name is a message.
func TestObserveEventsOtherNames(t *testing.T) {
	note := func(s string) string {
		return `{"jsonrpc":"2.0","method":"notifications/message","params":{"level":"info","data":"` + s + `"}}`
	}
	stream := "event: debug\ndata: " + note("debug") + "\n\n" +
		"event:  message \r\ndata: " + note("spaced") + "\r\n\r\n" +
		"event: ping\nevent:\ndata: " + note("renamed empty") + "\n\n" +
		"event: message\nevent: other\ndata: " + note("renamed other") + "\n\n" +
		"data: " + note("unnamed") + "\n\n"
	for _, chunk := range []int{1, 9, len(stream)} {
		var seen []string
		e := &observeEvents{rc: io.NopCloser(&chunked{s: stream, n: chunk}), max: 1 << 20, observe: func(m jsonrpc.Message) {
			var p mcp.LoggingMessageParams
			if json.Unmarshal(m.(*jsonrpc.Request).Params, &p) == nil {
				seen = append(seen, fmt.Sprint(p.Data))
			}
		}}
		if out, err := io.ReadAll(e); err != nil || string(out) != stream {
			t.Fatalf("chunk %d: bytes changed (%v)", chunk, err)
		}
		if got := strings.Join(seen, ","); got != "spaced,renamed empty,unnamed" {
			t.Errorf("chunk %d: observed %q, want the events go-sdk reads", chunk, got)
		}
	}
}

// An event of more bytes than the cap is told once (go-sdk's reader fails
// it and drops the connection; the call then knows why), and the count
// starts again at the next event.
func TestObserveEventsOversize(t *testing.T) {
	small := "data: {\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{}}\n\n"
	big := "data: " + strings.Repeat("x", 100) + "\ndata: " + strings.Repeat("y", 100) + "\n\n"
	for _, tc := range []struct {
		stream string
		want   int
	}{{small + small, 0}, {small + big, 1}, {big + small + big, 2}} {
		for _, chunk := range []int{1, 13, len(tc.stream)} {
			n := 0
			e := &observeEvents{rc: io.NopCloser(&chunked{s: tc.stream, n: chunk}), max: 64, observe: func(jsonrpc.Message) {}, oversize: func() { n++ }}
			if _, err := io.ReadAll(e); err != nil {
				t.Fatal(err)
			}
			if n != tc.want {
				t.Errorf("%d events over the cap told, want %d (chunk %d)", n, tc.want, chunk)
			}
		}
	}
}

type chunked struct {
	s string
	n int
}

func (c *chunked) Read(p []byte) (int, error) {
	if c.s == "" {
		return 0, io.EOF
	}
	n := copy(p[:min(len(p), c.n)], c.s)
	c.s = c.s[n:]
	return n, nil
}

// TestRelayedEventsEscaped: the strings a backend puts in a log message
// (its logger, each string of its data, an object's keys among them) and in
// a progress message reach the client with their control and format
// characters escaped (termtext.Escape), newlines and tabs kept, the data's
// shape and other values unchanged, the secrets still masked: a client that
// prints them on a terminal had its line erased by ESC[2K ESC[1A and its
// title set by ESC]0;…BEL.
func TestRelayedEventsEscaped(t *testing.T) {
	const secret = "relay-secret-value-123"
	rec, token, notify := relayMasking(t, secret)
	notify(methodProgress, map[string]any{"progressToken": token, "progress": 1, "total": 2,
		"message": "ok\x1b[2K\x1b[1A\x1b]0;pwned\a \u202eevil\u009b31m\tline2\nline3 " + secret})
	notify(methodMessage, map[string]any{"level": "info", "logger": "lg\x1b[31mRED\u202e", "data": "plain\x1b[8mHIDDEN\x1b[0m\u200b"})
	notify(methodMessage, map[string]any{"level": "info", "data": map[string]any{
		"msg": "x\x1b]8;;http://e.vil\aclick\x1b]8;;\a " + secret, "n": 3, "list": []any{"\u009b2J", true, nil, map[string]any{"k": "\x7f"}}, "key\x1b": "v",
	}})
	rec.mu.Lock()
	defer rec.mu.Unlock()
	if len(rec.progress) != 1 || len(rec.logs) != 2 {
		t.Fatalf("%d progress notifications and %d log messages, want 1 and 2", len(rec.progress), len(rec.logs))
	}
	if got, want := rec.progress[0].Message, `ok\x1b[2K\x1b[1A\x1b]0;pwned\a \u202eevil\u009b31m`+"\tline2\nline3 "+mask.Hidden; got != want {
		t.Errorf("progress message %q, want %q", got, want)
	}
	if pr := rec.progress[0]; pr.Progress != 1 || pr.Total != 2 {
		t.Errorf("progress %+v: want its numbers kept", pr)
	}
	if l := rec.logs[0]; l.Logger != `lg\x1b[31mRED\u202e` || l.Data != `plain\x1b[8mHIDDEN\x1b[0m\u200b` || l.Level != "info" {
		t.Errorf("log message %+v: want logger and data escaped", l)
	}
	want := map[string]any{
		"msg": `x\x1b]8;;http://e.vil\aclick\x1b]8;;\a ` + mask.Hidden, "n": float64(3),
		"list": []any{`\u009b2J`, true, nil, map[string]any{"k": `\x7f`}}, `key\x1b`: "v",
	}
	if diff := cmp.Diff(want, rec.logs[1].Data); diff != "" || rec.logs[1].Logger != "" {
		t.Errorf("log message's data (-want +got):\n%s logger %q", diff, rec.logs[1].Logger)
	}
}

// TestRelayedEventsMetaAndLogger: a log message's logger reaches the
// client with the server's secrets masked, as its data does (a backend
// that named its logger after its API key showed the key to every client
// that set a log level), and the backend's _meta of a log or progress
// notification is left out: it names things of the backend's session, and
// its strings went to the client unescaped and unmasked.
func TestRelayedEventsMetaAndLogger(t *testing.T) {
	const secret = "relay-secret-value-123"
	rec, token, notify := relayMasking(t, secret)
	meta := map[string]any{"k\x1b[31m": "v " + secret + "\x1b]0;t\a", "io.modelcontextprotocol/related-task": map[string]any{"taskId": "backend-task-1"}}
	notify(methodProgress, map[string]any{"progressToken": token, "progress": 1, "message": "step", "_meta": meta})
	notify(methodMessage, map[string]any{"level": "info", "logger": "lg-" + secret + "\x1b[2K", "data": "d", "_meta": meta})
	rec.mu.Lock()
	defer rec.mu.Unlock()
	if len(rec.progress) != 1 || len(rec.logs) != 1 {
		t.Fatalf("%d progress notifications and %d log messages, want 1 each", len(rec.progress), len(rec.logs))
	}
	if l := rec.logs[0]; l.Logger != `lg-`+mask.Hidden+`\x1b[2K` || l.Meta != nil {
		t.Errorf("log message: logger %q, _meta %v; want the secret masked, the escape escaped and no _meta", l.Logger, l.Meta)
	}
	if pr := rec.progress[0]; pr.Meta != nil || pr.Message != "step" {
		t.Errorf("progress: message %q, _meta %v; want the message and no _meta", pr.Message, pr.Meta)
	}
}

// relayMasking is a call in flight that wants progress and log messages
// at info and up, on a run whose mask knows secret: what was relayed to
// it, its progress token, and notify, which hands the run a notification
// its backend sent.
func relayMasking(t *testing.T, secret string) (rec *recorder, token string, notify func(method string, params any)) {
	c := &calls{mask: mask.New([]string{secret}).Value}
	rec = &recorder{}
	k := c.add(rec.events("info"))
	t.Cleanup(func() { c.done(k) })
	return rec, k.token, func(method string, params any) {
		b, err := json.Marshal(params)
		if err != nil {
			t.Fatal(err)
		}
		c.observe(&jsonrpc.Request{Method: method, Params: b})
	}
}

// TestObserveEventsAsGoSDKReads: the events observed are those go-sdk's
// reader yields: one the stream ends in without its empty line (or its
// last line's end) is one, as is an event ended by a line of CRs before
// its LF ("\r\r\n": go-sdk trims every CR and LF off a line's end, so that
// line is empty); a data value is trimmed of white space as go-sdk trims
// it. Both were missed: the last event was never observed, and the next
// event's data joined to the one before, neither decoded.
func TestObserveEventsAsGoSDKReads(t *testing.T) {
	note := func(s string) string {
		return `{"jsonrpc":"2.0","method":"notifications/message","params":{"level":"info","data":"` + s + `"}}`
	}
	for _, tc := range []struct {
		name, stream, want string
	}{
		{"no empty line at the end", "data: " + note("a") + "\n\ndata: " + note("b") + "\n", "a,b"},
		{"no line end at the end", "data: " + note("a") + "\r\n\r\ndata: " + note("b"), "a,b"},
		{"CRLF, no empty line at the end", "data: " + note("a") + "\r\n", "a"},
		{"CR CR LF ends the event", "data: " + note("a") + "\r\n\r\r\ndata: " + note("b") + "\r\r\n\r\r\n", "a,b"},
		{"white space around the data", "data:\t" + note("a") + " \t\r\n\r\n", "a"},
		{"stream of an empty line only", "\n", ""},
		// go-sdk fails the stream at a line that is no field (no ":"):
		// it reads no event after it.
		{"a line that is no field", "data: " + note("a") + "\n\nbogus\n\ndata: " + note("b") + "\n\n", "a"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, chunk := range []int{1, 5, len(tc.stream)} {
				var seen []string
				e := &observeEvents{rc: io.NopCloser(&chunked{s: tc.stream, n: chunk}), max: 1 << 20, observe: func(m jsonrpc.Message) {
					var p mcp.LoggingMessageParams
					if json.Unmarshal(m.(*jsonrpc.Request).Params, &p) == nil {
						seen = append(seen, fmt.Sprint(p.Data))
					}
				}}
				if out, err := io.ReadAll(e); err != nil || string(out) != tc.stream {
					t.Fatalf("chunk %d: bytes changed (%v)", chunk, err)
				}
				if got := strings.Join(seen, ","); got != tc.want {
					t.Errorf("chunk %d: observed %q, want %q, as go-sdk reads them", chunk, got, tc.want)
				}
			}
		})
	}
}

// TestKeptEventsNoField: keptEvents, like observeEvents, observes no event
// after a line that is no field, where go-sdk's reader fails the stream,
// and hands the bytes on unchanged.
func TestKeptEventsNoField(t *testing.T) {
	note := func(s string) string {
		return `{"jsonrpc":"2.0","method":"notifications/message","params":{"level":"info","data":"` + s + `"}}`
	}
	stream := "data: " + note("a") + "\r\n\r\r\ndata: " + note("b") + "\nbogus\n\ndata: " + note("c") + "\n\n"
	for _, chunk := range []int{1, 5, len(stream)} {
		var seen []string
		k := &keptEvents{rc: io.NopCloser(&chunked{s: stream, n: chunk}), max: 1 << 20, keep: func(b []byte) []byte { return b }, observe: func(m jsonrpc.Message) {
			var p mcp.LoggingMessageParams
			if json.Unmarshal(m.(*jsonrpc.Request).Params, &p) == nil {
				seen = append(seen, fmt.Sprint(p.Data))
			}
		}}
		if out, err := io.ReadAll(k); err != nil || string(out) != stream {
			t.Fatalf("chunk %d: bytes changed (%v)", chunk, err)
		}
		if got := strings.Join(seen, ","); got != "a" {
			t.Errorf("chunk %d: observed %q, want \"a\", as go-sdk reads them", chunk, got)
		}
	}
}
