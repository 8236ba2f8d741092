package linerpc

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolgate/toolgate/internal/testenv"
)

// buffer is a goroutine-safe write sink that can be closed.
type buffer struct{ testenv.LogBuffer }

func (*buffer) Close() error { return nil }

// connect connects a Transport reading input and writing to the returned
// buffer.
func connect(t *testing.T, input string, limit int) (*Conn, *buffer) {
	t.Helper()
	out := &buffer{}
	c, err := (&Transport{Reader: io.NopCloser(strings.NewReader(input)), Writer: out, MaxLineLength: limit}).Connect(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c.(*Conn), out
}

// serving is connect for a Transport that serves (Server): the gateway's
// own stdio.
func serving(t *testing.T, r io.Reader, limit int) (*Conn, *buffer) {
	t.Helper()
	out := &buffer{}
	c, err := (&Transport{Reader: io.NopCloser(r), Writer: out, Server: true, MaxLineLength: limit}).Connect(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c.(*Conn), out
}

// answeredThenRead serves line, then a notification "after": line is
// answered want, and "after" is read, then the end of the input.
func answeredThenRead(t *testing.T, line string, limit int, want string) {
	t.Helper()
	c, out := serving(t, strings.NewReader(line+"\n"+`{"jsonrpc":"2.0","method":"after"}`+"\n"), limit)
	msgs, err := readAll(c)
	if !errors.Is(err, io.EOF) || len(msgs) != 1 || msgs[0].(*jsonrpc.Request).Method != "after" {
		t.Fatalf("got %v, %v; want the message after the line answered, then io.EOF", msgs, err)
	}
	if got := out.String(); got != want+"\n" {
		t.Errorf("answered:\n%s\nwant:\n%s", got, want)
	}
}

func mustID(t *testing.T, v any) jsonrpc.ID {
	t.Helper()
	id, err := jsonrpc.MakeID(v)
	if err != nil {
		t.Fatal(err)
	}
	return id
}

// readAll reads until an error and returns the messages and the error.
func readAll(c *Conn) ([]jsonrpc.Message, error) {
	var msgs []jsonrpc.Message
	for {
		msg, err := c.Read(context.Background())
		if err != nil {
			return msgs, err
		}
		msgs = append(msgs, msg)
	}
}

func TestReadFraming(t *testing.T) {
	// CRLF, blank lines, spaces around a message and an unterminated last
	// line: each message once, in order, then io.EOF.
	big := strings.Repeat("x", 3*readBufferSize) // gathered over several buffer fills
	input := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"a"}}` + "\r\n" +
		"\n   \n" +
		` {"jsonrpc":"2.0","method":"notifications/progress","params":{"big":"` + big + `"}} ` + "\n" +
		`{"jsonrpc":"2.0","id":"s","result":{"ok":true}}`
	c, _ := connect(t, input, 0)
	msgs, err := readAll(c)
	if !errors.Is(err, io.EOF) {
		t.Fatalf("after the last message: %v, want io.EOF", err)
	}
	want := []jsonrpc.Message{
		&jsonrpc.Request{ID: mustID(t, float64(1)), Method: "tools/call", Params: json.RawMessage(`{"name":"a"}`)},
		&jsonrpc.Request{Method: "notifications/progress", Params: json.RawMessage(`{"big":"` + big + `"}`)},
		&jsonrpc.Response{ID: mustID(t, "s"), Result: json.RawMessage(`{"ok":true}`)},
	}
	// Compared after every read: a message must not alias the reused line
	// buffer.
	if diff := cmp.Diff(want, msgs, cmp.Comparer(func(a, b jsonrpc.ID) bool { return a == b })); diff != "" {
		t.Errorf("messages (-want +got):\n%s", diff)
	}
}

func TestWriteOneLine(t *testing.T) {
	c, out := connect(t, "", 0)
	msgs := []jsonrpc.Message{
		&jsonrpc.Request{ID: mustID(t, float64(7)), Method: "tools/call", Params: json.RawMessage(`{"name":"a\nb"}`)},
		&jsonrpc.Response{ID: mustID(t, "x"), Error: &jsonrpc.Error{Code: jsonrpc.CodeMethodNotFound, Message: "no"}},
	}
	var want strings.Builder
	for _, msg := range msgs {
		if err := c.Write(context.Background(), msg); err != nil {
			t.Fatal(err)
		}
		data, err := jsonrpc.EncodeMessage(msg)
		if err != nil {
			t.Fatal(err)
		}
		want.Write(data)
		want.WriteByte('\n')
	}
	if got := out.String(); got != want.String() {
		t.Errorf("written:\n%s\nwant:\n%s", got, want.String())
	}
	if n := strings.Count(out.String(), "\n"); n != len(msgs) {
		t.Errorf("%d lines for %d messages", n, len(msgs))
	}
}

func TestLineCap(t *testing.T) {
	msg := `{"jsonrpc":"2.0","method":"m","params":{"s":"` + strings.Repeat("y", 200) + `"}}`
	for _, tc := range []struct {
		name  string
		limit int
		input string
		fail  bool
	}{
		{"exactly the cap", len(msg), msg + "\r\n", false},
		{"one byte over", len(msg) - 1, msg + "\n", true},
		{"over, unterminated", len(msg) - 1, msg, true},
		{"over, longer than the read buffer", readBufferSize, `{"jsonrpc":"2.0","method":"m","params":"` + strings.Repeat("z", 2*readBufferSize) + `"}` + "\n", true},
		{"no cap", -1, `{"jsonrpc":"2.0","method":"m","params":"` + strings.Repeat("z", 2*readBufferSize) + `"}` + "\n", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, _ := connect(t, tc.input, tc.limit)
			msgs, err := readAll(c)
			if !tc.fail {
				if len(msgs) != 1 || !errors.Is(err, io.EOF) {
					t.Fatalf("got %d messages, %v; want 1, io.EOF", len(msgs), err)
				}
				return
			}
			if len(msgs) != 0 || !errors.Is(err, ErrLineTooLong) {
				t.Fatalf("got %d messages, %v; want 0, ErrLineTooLong", len(msgs), err)
			}
			if !strings.Contains(err.Error(), "maximum line length") {
				t.Errorf("error %q does not name the cap", err)
			}
		})
	}
}

func TestMalformedLines(t *testing.T) {
	for _, tc := range []struct{ name, line, want string }{
		{"two messages on a line", `{"jsonrpc":"2.0","method":"a"} {"jsonrpc":"2.0","method":"b"}`, "trailing data"},
		{"junk after a message", `{"jsonrpc":"2.0","method":"a"}x`, "trailing data"},
		{"not JSON", `{"jsonrpc":`, "unmarshaling"},
		{"wrong version", `{"jsonrpc":"1.0","method":"a"}`, "version"},
		{"empty batch", `[]`, "empty"},
		{"bad batch member", `[{"jsonrpc":"2.0","method":"a"},{"jsonrpc":"2.0"}]`, "invalid"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, _ := connect(t, tc.line+"\n"+`{"jsonrpc":"2.0","method":"after"}`+"\n", 0)
			msgs, err := readAll(c)
			if len(msgs) != 0 || err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %d messages, %v; want an error containing %q and nothing after it", len(msgs), err, tc.want)
			}
		})
	}
}

// TestServerAnswersInvalidLines: serving, a line that is no message the
// connection can take is answered with a JSON-RPC error and the next line is
// read; go-sdk's transport (and a Transport without Server) ends the
// connection on it, which ended the gateway's stdio.
func TestServerAnswersInvalidLines(t *testing.T) {
	for _, tc := range []struct{ name, line, want string }{
		{"not JSON", `{"jsonrpc":"2.0","id":5,"method":`, `{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"parse error: unexpected end of JSON input"}}`},
		{"two messages on a line", `{"jsonrpc":"2.0","method":"a"} {"jsonrpc":"2.0","method":"b"}`, `{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"parse error: invalid character '{' after top-level value"}}`},
		{"wrong version", `{"jsonrpc":"1.0","id":6,"method":"ping"}`, `{"jsonrpc":"2.0","id":6,"error":{"code":-32600,"message":"invalid request: invalid message version tag \"1.0\"; expected \"2.0\""}}`},
		{"string id kept", `{"id":"s1","method":"ping"}`, `{"jsonrpc":"2.0","id":"s1","error":{"code":-32600,"message":"invalid request: invalid message version tag \"\"; expected \"2.0\""}}`},
		{"object id", `{"jsonrpc":"2.0","id":{},"method":"ping"}`, `{"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"invalid request: parse error: invalid ID type map[string]interface {}"}}`},
		{"empty batch", `[]`, `{"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"invalid request: empty JSON-RPC batch"}}`},
		// An id that an answer cannot carry back as sent: it was answered
		// as 1, or as -9223372036854775808, and the client waited on.
		{"fractional id", `{"jsonrpc":"2.0","id":1.5,"method":"tools/call","params":{}}`, `{"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"invalid request: id 1.5 is not a whole number: an answer cannot carry it back as sent; give each call a string id or an integer up to 9007199254740991"}}`},
		{"id past 2^63", `{"jsonrpc":"2.0","id":12345678901234567890,"method":"ping"}`, `{"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"invalid request: id 12345678901234567890 is past 2^53, where it loses digits when read: an answer cannot carry it back as sent; give each call a string id or an integer up to 9007199254740991"}}`},
		{"id past 2^53", `{"jsonrpc":"2.0","id":9007199254740993,"method":"ping"}`, `{"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"invalid request: id 9007199254740993 is past 2^53, where it loses digits when read: an answer cannot carry it back as sent; give each call a string id or an integer up to 9007199254740991"}}`},
		// A call without an id is a notification to go-sdk, which answers
		// none: the client waited for good (the HTTP front says 400).
		{"call with a null id", `{"jsonrpc":"2.0","id":null,"method":"tools/call","params":{}}`, `{"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"invalid request: missing id for \"tools/call\": a request without an id is a notification, which is not answered; give each call an id (a string or an integer)"}}`},
		{"call without an id", `{"jsonrpc":"2.0","method":"tools/call","params":{}}`, `{"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"invalid request: missing id for \"tools/call\": a request without an id is a notification, which is not answered; give each call an id (a string or an integer)"}}`},
	} {
		t.Run(tc.name, func(t *testing.T) { answeredThenRead(t, tc.line, 0, tc.want) })
	}
	if !StdioFrom(io.NopCloser(strings.NewReader(""))).Server {
		t.Error("the gateway's stdio (StdioFrom) does not serve: a bad line would end it")
	}
}

// TestServerKeepsExactIDs: serving, ids that an answer carries back as
// sent are taken (a number with a fraction of zero, an exponent, one past
// 2^53 that a float64 holds exactly), and a batch member whose id it
// cannot carry back, or a call's without one, is answered with a null id,
// as a line is.
func TestServerKeepsExactIDs(t *testing.T) {
	in := `{"jsonrpc":"2.0","id":1e3,"method":"ping"}` + "\n" +
		`{"jsonrpc":"2.0","id":-9007199254740991,"method":"ping"}` + "\n" +
		`{"jsonrpc":"2.0","id":2.0,"method":"ping"}` + "\n" +
		`{"jsonrpc":"2.0","id":9007199254740994,"method":"ping"}` + "\n" +
		`[{"jsonrpc":"2.0","method":"n"},{"jsonrpc":"2.0","id":7.25,"method":"ping"},{"jsonrpc":"2.0","method":"tools/list"}]` + "\n"
	c, out := serving(t, strings.NewReader(in), 0)
	msgs, err := readAll(c)
	if !errors.Is(err, io.EOF) {
		t.Fatal(err)
	}
	var ids []any
	for _, m := range msgs {
		ids = append(ids, m.(*jsonrpc.Request).ID.Raw())
	}
	if want := []any{int64(1000), int64(-9007199254740991), int64(2), int64(9007199254740994), nil}; !slices.Equal(ids, want) {
		t.Errorf("read ids %v, want %v", ids, want)
	}
	if got := out.String(); !strings.Contains(got, `"id":null,"error":{"code":-32600,"message":"invalid request: id 7.25 is not a whole number`) ||
		!strings.Contains(got, `"id":null,"error":{"code":-32600,"message":"invalid request: missing id for \"tools/list\"`) {
		t.Errorf("the batch members with id 7.25 and with none answered: %s", got)
	}
}

// Serving, a line over the limit is skipped and answered -32600 with the
// id a client matches the answer to, whether it writes it first or last
// (the TypeScript SDK writes a request's id after its params); the next
// line is read. It ended the connection, and the gateway with it.
func TestServerSkipsLongLine(t *testing.T) {
	big := strings.Repeat("z", 3*readBufferSize)
	const limit = 2 * readBufferSize
	for _, tc := range []struct{ name, line, id string }{
		{"id first", `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"x":"` + big + `"}}`, "7"},
		{"id last", `{"method":"tools/call","params":{"x":"` + big + `","o":{"id":9}},"jsonrpc":"2.0","id":"last"}`, `"last"`},
		{"nested id only", `{"jsonrpc":"2.0","method":"notifications/x","params":{"x":"` + big + `","o":{"id":9}}}`, "null"},
		{"read whole, CRLF", `{"jsonrpc":"2.0","id":3,"method":"m","params":"` + strings.Repeat("z", limit) + `"}` + "\r", "3"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			size := len(strings.TrimSuffix(tc.line, "\r"))
			answeredThenRead(t, tc.line, limit, `{"jsonrpc":"2.0","id":`+tc.id+`,"error":{"code":-32600,"message":"`+TooLongMessage(size, limit)+`"}}`)
		})
	}
}

// TestServerDropsCancelledAnswer: serving, the answer to a call the client
// cancelled is not written (the client has given up on it; the TypeScript
// SDK reports "Received a response for an unknown message ID"); the answers
// to other calls, and to a call cancelled only after it was answered, are.
func TestServerDropsCancelledAnswer(t *testing.T) {
	pr, pw := io.Pipe()
	c, out := serving(t, pr, 0)
	go func() {
		io.WriteString(pw, `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{}}`+"\n")
		io.WriteString(pw, `{"jsonrpc":"2.0","id":"two","method":"tools/call","params":{}}`+"\n")
		io.WriteString(pw, `{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":1,"reason":"user"}}`+"\n")
		pw.Close()
	}()
	ctx := context.Background()
	msgs, err := readAll(c)
	if !errors.Is(err, io.EOF) || len(msgs) != 3 {
		t.Fatalf("read %d messages, %v; want 3 (the cancellation passed on too), io.EOF", len(msgs), err)
	}
	for _, id := range []any{float64(1), "two"} {
		if err := c.Write(ctx, &jsonrpc.Response{ID: mustID(t, id), Result: json.RawMessage(`{}`)}); err != nil {
			t.Fatal(err)
		}
	}
	want := `{"jsonrpc":"2.0","id":"two","result":{}}` + "\n"
	if got := out.String(); got != want {
		t.Errorf("written:\n%s\nwant only:\n%s", got, want)
	}
}

func TestBatch(t *testing.T) {
	input := `[{"jsonrpc":"2.0","id":1,"method":"ping"},{"jsonrpc":"2.0","method":"notifications/initialized"},{"jsonrpc":"2.0","id":"b","method":"tools/list"}]` + "\n"
	c, out := connect(t, input, 0)
	msgs, err := readAll(c)
	if !errors.Is(err, io.EOF) {
		t.Fatal(err)
	}
	var methods []string
	for _, msg := range msgs {
		methods = append(methods, msg.(*jsonrpc.Request).Method)
	}
	if diff := cmp.Diff([]string{"ping", "notifications/initialized", "tools/list"}, methods); diff != "" {
		t.Fatalf("batch members (-want +got):\n%s", diff)
	}
	// The answers go out as one array, in the order of the calls, once the
	// last is written; a message outside the batch goes out at once.
	ctx := context.Background()
	write := func(msg jsonrpc.Message) {
		t.Helper()
		if err := c.Write(ctx, msg); err != nil {
			t.Fatal(err)
		}
	}
	write(&jsonrpc.Response{ID: mustID(t, "b"), Result: json.RawMessage(`{"tools":[]}`)})
	if got := out.String(); got != "" {
		t.Fatalf("wrote %q before the batch was answered", got)
	}
	write(&jsonrpc.Request{Method: "notifications/message", Params: json.RawMessage(`{}`)})
	write(&jsonrpc.Response{ID: mustID(t, float64(1)), Result: json.RawMessage(`{}`)})
	want := `{"jsonrpc":"2.0","method":"notifications/message","params":{}}` + "\n" +
		`[{"jsonrpc":"2.0","id":1,"result":{}},{"jsonrpc":"2.0","id":"b","result":{"tools":[]}}]` + "\n"
	if got := out.String(); got != want {
		t.Errorf("written:\n%s\nwant:\n%s", got, want)
	}
}

func TestBatchRejectedAfterNegotiation(t *testing.T) {
	for _, tc := range []struct {
		version string
		allowed bool
	}{
		{"2025-03-26", true},
		{"2025-06-18", false},
		{"2025-11-25", false},
	} {
		t.Run(tc.version, func(t *testing.T) {
			pr, pw := io.Pipe()
			out := &buffer{}
			conn, err := (&Transport{Reader: pr, Writer: out}).Connect(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			c := conn.(*Conn)
			t.Cleanup(func() { c.Close() })
			go func() {
				io.WriteString(pw, `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{}}`+"\n")
				io.WriteString(pw, `[{"jsonrpc":"2.0","id":1,"method":"ping"}]`+"\n")
				pw.Close()
			}()
			ctx := context.Background()
			msg, err := c.Read(ctx)
			if err != nil {
				t.Fatal(err)
			}
			init := msg.(*jsonrpc.Request)
			if err := c.Write(ctx, &jsonrpc.Response{ID: init.ID, Result: json.RawMessage(`{"protocolVersion":"` + tc.version + `"}`)}); err != nil {
				t.Fatal(err)
			}
			_, err = c.Read(ctx)
			if tc.allowed != (err == nil) {
				t.Fatalf("batch after negotiating %s: %v", tc.version, err)
			}
			if !tc.allowed && !strings.Contains(err.Error(), "batching is not supported") {
				t.Errorf("error %q does not say why", err)
			}
		})
	}
}

// TestServerAnswersBatchMembers: serving, at a protocol with batches, a
// batch's members that are no message are answered within the batch's
// answer (-32600, with the member's id where it has one), and its other
// members are served, as JSON-RPC 2.0 §6 has it; the whole batch used to
// get one -32600 with a null id, and its good calls no answer.
func TestServerAnswersBatchMembers(t *testing.T) {
	pr, pw := io.Pipe()
	c, out := serving(t, pr, 0)
	go func() {
		io.WriteString(pw, `[{"jsonrpc":"2.0","id":2,"method":"ping"},{"jsonrpc":"1.0","id":3,"method":"ping"},{"jsonrpc":"2.0","method":"notifications/x"},1]`+"\n")
		io.WriteString(pw, `[{"jsonrpc":"2.0","method":"notifications/y"},{"jsonrpc":"2.0","id":{},"method":"ping"}]`+"\n")
		io.WriteString(pw, `{"jsonrpc":"2.0","id":9,"method":"ping"}`+"\n")
		pw.Close()
	}()
	msgs, err := readAll(c)
	if !errors.Is(err, io.EOF) {
		t.Fatal(err)
	}
	var read []string
	for _, msg := range msgs {
		req := msg.(*jsonrpc.Request)
		read = append(read, fmt.Sprint(req.Method, req.ID.Raw()))
	}
	if diff := cmp.Diff([]string{"ping2", "notifications/x<nil>", "notifications/y<nil>", "ping9"}, read); diff != "" {
		t.Fatalf("members served (-want +got):\n%s", diff)
	}
	// The batch without a call to wait for is answered at once; the other
	// once its call is.
	ctx := context.Background()
	for _, id := range []float64{9, 2} {
		if err := c.Write(ctx, &jsonrpc.Response{ID: mustID(t, id), Result: json.RawMessage(`{}`)}); err != nil {
			t.Fatal(err)
		}
	}
	want := `[{"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"invalid request: parse error: invalid ID type map[string]interface {}"}}]` + "\n" +
		`{"jsonrpc":"2.0","id":9,"result":{}}` + "\n" +
		`[{"jsonrpc":"2.0","id":2,"result":{}},{"jsonrpc":"2.0","id":3,"error":{"code":-32600,"message":"invalid request: invalid message version tag \"1.0\"; expected \"2.0\""}},{"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"invalid request: member 4 of the batch is not a JSON-RPC message (an object)"}}]` + "\n"
	if got := out.String(); got != want {
		t.Errorf("answered:\n%s\nwant:\n%s", got, want)
	}
}

// TestServerAnswersForbiddenBatch: serving, a batch after a protocol
// without batches was negotiated is answered with an error that says so,
// and the next message is read (the connection, and the gateway, ended).
func TestServerAnswersForbiddenBatch(t *testing.T) {
	pr, pw := io.Pipe()
	c, out := serving(t, pr, 0)
	go func() {
		io.WriteString(pw, `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{}}`+"\n")
		io.WriteString(pw, `[{"jsonrpc":"2.0","id":1,"method":"ping"}]`+"\n")
		// A bad member does not change the answer: batches are refused
		// whole (it was answered with the member's fault).
		io.WriteString(pw, `[{"jsonrpc":"2.0","id":1,"method":"ping"},{"jsonrpc":"1.0","id":3,"method":"ping"}]`+"\n")
		io.WriteString(pw, `{"jsonrpc":"2.0","id":2,"method":"ping"}`+"\n")
		pw.Close()
	}()
	ctx := context.Background()
	msg, err := c.Read(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Write(ctx, &jsonrpc.Response{ID: msg.(*jsonrpc.Request).ID, Result: json.RawMessage(`{"protocolVersion":"2025-06-18"}`)}); err != nil {
		t.Fatal(err)
	}
	msg, err = c.Read(ctx)
	if err != nil || msg.(*jsonrpc.Request).ID != mustID(t, float64(2)) {
		t.Fatalf("after the batch: %v, %v; want the ping of id 2", msg, err)
	}
	want := `{"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"invalid request: JSON-RPC batching is not supported in 2025-06-18 and later (request version: 2025-06-18): send each message on a line of its own"}}`
	if _, answer, _ := strings.Cut(out.String(), "\n"); answer != want+"\n"+want+"\n" {
		t.Errorf("answered:\n%s\nwant:\n%s", answer, want)
	}
}

// blockingReader blocks in Read until released, whatever Close does (like
// os.Stdin).
type blockingReader struct{ release chan struct{} }

func (r blockingReader) Read([]byte) (int, error) {
	<-r.release
	return 0, io.EOF
}

func (blockingReader) Close() error { return nil }

func TestCloseUnblocksRead(t *testing.T) {
	r := blockingReader{release: make(chan struct{})}
	defer close(r.release)
	c, err := (&Transport{Reader: r, Writer: &buffer{}}).Connect(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error)
	go func() {
		_, err := c.Read(context.Background())
		done <- err
	}()
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if err := <-done; !errors.Is(err, io.EOF) {
		t.Errorf("Read after Close: %v, want io.EOF", err)
	}
	if err := c.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
}

func TestReadContextKeepsMessage(t *testing.T) {
	pr, pw := io.Pipe()
	c, err := (&Transport{Reader: pr, Writer: &buffer{}}).Connect(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := c.Read(ctx); !errors.Is(err, context.Canceled) {
		t.Fatalf("Read with an ended context: %v", err)
	}
	go io.WriteString(pw, `{"jsonrpc":"2.0","method":"m"}`+"\n")
	msg, err := c.Read(context.Background())
	if err != nil || msg.(*jsonrpc.Request).Method != "m" {
		t.Fatalf("Read after a cancelled Read: %v, %v", msg, err)
	}
}

// TestSession runs a real MCP session: a go-sdk client on go-sdk's own
// transport against a server on this one, over OS-level pipes.
func TestSession(t *testing.T) {
	ctx := context.Background()
	c2sR, c2sW := io.Pipe()
	s2cR, s2cW := io.Pipe()
	server := mcp.NewServer(&mcp.Implementation{Name: "s"}, nil)
	type args struct {
		Text string `json:"text"`
	}
	mcp.AddTool(server, &mcp.Tool{Name: "echo"}, func(_ context.Context, _ *mcp.CallToolRequest, a args) (*mcp.CallToolResult, any, error) {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: a.Text}}}, nil, nil
	})
	ss, err := server.Connect(ctx, &Transport{Reader: c2sR, Writer: s2cW}, nil)
	if err != nil {
		t.Fatal(err)
	}
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "c"}, nil).Connect(ctx, &mcp.IOTransport{Reader: s2cR, Writer: c2sW}, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, text := range []string{"one", "two\nlines", strings.Repeat("é", 100_000)} {
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"text": text}})
		if err != nil {
			t.Fatal(err)
		}
		if got := res.Content[0].(*mcp.TextContent).Text; got != text {
			t.Errorf("echo %.20q: got %.20q", text, got)
		}
	}
	if err := cs.Close(); err != nil {
		t.Fatal(err)
	}
	if err := ss.Wait(); err != nil && !errors.Is(err, io.EOF) && !errors.Is(err, mcp.ErrConnectionClosed) {
		t.Errorf("server session ended with %v", err)
	}
}

// FuzzDecodeMessage holds decodeMessage to jsonrpc.DecodeMessage: on a line
// that is one JSON value both succeed with the same message or both fail;
// on anything else decodeMessage fails whenever DecodeMessage does.
func FuzzDecodeMessage(f *testing.F) {
	for _, seed := range []string{
		`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"a","arguments":{}}}`,
		`{"jsonrpc":"2.0","id":"x","result":{"content":[]}}`,
		`{"jsonrpc":"2.0","id":2.5,"error":{"code":-32601,"message":"m","data":[1]}}`,
		`{"jsonrpc":"2.0","method":null}`,
		`{"jsonrpc":"2.0","method":"n","params":null}`,
		`{"JSONRPC":"2.0","Method":"m"}`,
		`{"jsonrpc":"2.0","id":null,"result":1}`,
		`{"jsonrpc":"2.0","id":true,"method":"m"}`,
		`{"jsonrpc":"2.0","method":"a"} x`,
		`{"jsonrpc":"2.0","method":"\u00e9\n"}`,
		`[1]`, `"s"`, `{`, ``,
	} {
		f.Add([]byte(seed))
	}
	idEq := cmp.Comparer(func(a, b jsonrpc.ID) bool { return a == b })
	f.Fuzz(func(t *testing.T, data []byte) {
		want, wantErr := jsonrpc.DecodeMessage(data)
		got, err := decodeMessage(data)
		switch {
		case wantErr != nil && err == nil:
			t.Fatalf("decodeMessage(%q) = %v; DecodeMessage fails: %v", data, got, wantErr)
		case wantErr == nil && err != nil:
			if json.Valid(data) {
				t.Fatalf("decodeMessage(%q) fails: %v; DecodeMessage = %v", data, err, want)
			}
		case err == nil:
			if diff := cmp.Diff(want, got, idEq); diff != "" {
				t.Fatalf("decodeMessage(%q) (-DecodeMessage +decodeMessage):\n%s", data, diff)
			}
		}
	})
}

// TestServerRefusesCallsOverPending: serving, a call that would take the
// client over MaxPendingCalls calls unanswered is answered CodeBusy at
// once and not passed on, as is a batch that would (go-sdk queues every
// call it reads, so a client that sent calls and read no answers grew the
// gateway without bound); once a call is answered, the next is taken.
func TestServerRefusesCallsOverPending(t *testing.T) {
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	var spells atomic.Int32
	c, err := (&Transport{Reader: inR, Writer: outW, Server: true, Busy: func() { spells.Add(1) }}).Connect(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { inW.Close(); outR.Close(); c.Close() })
	read := make(chan jsonrpc.Message)
	go func() {
		for {
			msg, err := c.Read(context.Background())
			if err != nil {
				close(read)
				return
			}
			read <- msg
		}
	}()
	out := bufio.NewReader(outR)
	call := func(id int) {
		t.Helper()
		if _, err := fmt.Fprintf(inW, `{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{}}`+"\n", id); err != nil {
			t.Fatal(err)
		}
	}
	lines := make(chan string)
	go func() {
		for {
			line, err := out.ReadString('\n')
			if err != nil {
				close(lines)
				return
			}
			lines <- line
		}
	}()
	answered := func(want string) {
		t.Helper()
		select {
		case line := <-lines:
			if !strings.HasPrefix(line, want) {
				t.Fatalf("answered %q; want it to begin %s", line, want)
			}
		case <-time.After(testenv.Timeout):
			t.Fatalf("no answer; want one that begins %s", want)
		}
	}
	for id := range MaxPendingCalls {
		call(id)
		if msg := <-read; msg.(*jsonrpc.Request).ID != mustID(t, float64(id)) {
			t.Fatalf("read %v, want call %d", msg, id)
		}
	}
	for id := MaxPendingCalls; id < MaxPendingCalls+2; id++ {
		call(id)
		answered(fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"error":{"code":-32052,"message":"the gateway is busy: this client has %d calls unanswered, the limit`, id, MaxPendingCalls))
	}
	if n := spells.Load(); n != 1 {
		t.Errorf("Busy called %d times for two calls refused in a row, want once", n)
	}
	io.WriteString(inW, `[{"jsonrpc":"2.0","id":"a","method":"ping"},{"jsonrpc":"2.0","id":"b","method":"ping"}]`+"\n")
	answered(`{"jsonrpc":"2.0","id":null,"error":{"code":-32052,"message":"the gateway is busy: this batch's 2 calls would take this client over 1024 calls unanswered`)
	go c.Write(context.Background(), &jsonrpc.Response{ID: mustID(t, float64(0)), Result: json.RawMessage(`{}`)})
	answered(`{"jsonrpc":"2.0","id":0,"result":{}}`)
	call(MaxPendingCalls + 1)
	if msg := <-read; msg.(*jsonrpc.Request).ID != mustID(t, float64(MaxPendingCalls+1)) {
		t.Fatalf("read %v after an answer, want call %d", msg, MaxPendingCalls+1)
	}
}

// TestGiveUpWrites: a write the client does not read (its pipe full) ends
// with an error once GiveUpWrites is called, as do the writes after it; a
// stop waited for it for good.
func TestGiveUpWrites(t *testing.T) {
	outR, outW := io.Pipe() // never read
	defer outR.Close()
	tr := &Transport{Reader: io.NopCloser(strings.NewReader("")), Writer: outW, Server: true}
	c, err := tr.Connect(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	stuck := make(chan error, 2)
	for range 2 {
		go func() { stuck <- c.Write(context.Background(), &jsonrpc.Request{Method: "notifications/message"}) }()
	}
	tr.GiveUpWrites()
	for range 2 {
		select {
		case err := <-stuck:
			if !errors.Is(err, ErrGaveUp) {
				t.Errorf("a write to a client that reads no more: %v, want %v", err, ErrGaveUp)
			}
		case <-time.After(testenv.Timeout):
			t.Fatal("a write to a client that reads no more still waits after GiveUpWrites")
		}
	}
	if err := c.Write(context.Background(), &jsonrpc.Request{Method: "notifications/message"}); !errors.Is(err, ErrGaveUp) {
		t.Errorf("a write after GiveUpWrites: %v, want %v", err, ErrGaveUp)
	}
}

// TestServerAnswersReusedID: serving, a call whose id is that of a call
// still unanswered is answered -32600 with a null id (the call in flight
// keeps its own) and not passed on; go-sdk dropped it without a word, so
// the client waited for its answer for good.
func TestServerAnswersReusedID(t *testing.T) {
	call := `{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{}}`
	c, out := serving(t, strings.NewReader(call+"\n"+call+"\n"), 0)
	msgs, err := readAll(c)
	if !errors.Is(err, io.EOF) || len(msgs) != 1 {
		t.Fatalf("read %d messages, %v; want the first call alone, then io.EOF", len(msgs), err)
	}
	want := `{"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"invalid request: id 5 is in use by a call of this client still unanswered, so the call sent again with it was not run: give each call its own id"}}` + "\n"
	if got := out.String(); got != want {
		t.Errorf("answered:\n%s\nwant:\n%s", got, want)
	}
}
