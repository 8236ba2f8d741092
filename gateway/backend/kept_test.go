package backend

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"testing/iotest"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolgate/toolgate/gateway/backend/backendtest"
	"github.com/toolgate/toolgate/gateway/config"
)

// TestBigResultKept: a big structuredContent (rows) reaches the caller as
// the backend wrote it, and a big text (a log with quotes, tabs, line ends
// and letters beyond ASCII) as go-sdk would have decoded it, over every
// transport: stdio, streamable HTTP answering with an event stream and
// with plain JSON, and SSE. Over streamable HTTP, go-sdk decoded the rows
// into maps (kept as written on stdio and SSE only). It fails the day
// go-sdk's client stops handing a result over as the pool relies on
// (exactResult.apply): its content blocks in order, a text block as an
// *mcp.TextContent, and a structuredContent of {} as a non-nil value.
func TestBigResultKept(t *testing.T) {
	const size = 3 << 20
	t.Setenv(backendtest.EnvHugeBytes, strconv.Itoa(size))
	modes := backendtest.ModeHugeOutput
	rows, log := backendtest.HugeRows(size), backendtest.HugeLog(size)
	for _, tc := range everyTransport(modes, backendtest.EnvHugeBytes+"="+strconv.Itoa(size)) {
		t.Run(tc.name, func(t *testing.T) {
			p := startPool(t, []config.Server{tc.server(t)}, testOptions(nil))
			for range 2 { // the second call on the same connection too
				res, err := p.CallTool(context.Background(), "b", "huge_rows", nil)
				if err != nil || res.IsError {
					t.Fatalf("huge_rows: %v %v", err, res)
				}
				if raw, ok := res.StructuredContent.(json.RawMessage); !ok || !bytes.Equal(raw, rows) {
					t.Errorf("huge_rows' structuredContent is a %T (as written: %v), want the rows as the server wrote them (does go-sdk still decode {} into a non-nil structuredContent?)", res.StructuredContent, ok && bytes.Equal(raw, rows))
				}
				if len(res.Content) != 1 || res.Content[0].(*mcp.TextContent).Text != "rows in structuredContent" {
					t.Errorf("huge_rows' content %v", res.Content)
				}
				res, err = p.CallTool(context.Background(), "b", "huge_log", nil)
				if err != nil || res.IsError {
					t.Fatalf("huge_log: %v %v", err, res)
				}
				if len(res.Content) != 2 || res.Content[0].(*mcp.TextContent).Text != "the log:" || res.Content[1].(*mcp.TextContent).Text != log {
					t.Errorf("huge_log's content is not the server's (%d blocks; does go-sdk still hand content over in order, a text block as *mcp.TextContent?)", len(res.Content))
				}
			}
			// A small result is go-sdk's, as before.
			res, err := p.CallTool(context.Background(), "b", "echo", map[string]any{"text": "hi"})
			if err != nil || res.IsError || res.Content[0].(*mcp.TextContent).Text != "hi" {
				t.Errorf("echo: %v %v", err, res)
			}
		})
	}
}

// bigLogResult is a result as a Python server writes it: a big text block
// between two small ones, its text escaped.
func bigLogResult() (result string, text string) {
	text = backendtest.HugeLog(bigStructured + 10)
	q, _ := json.Marshal(text)
	return `{"content": [{"type": "text", "text": "a"}, {"type": "text", "annotations": {"audience": ["user"]}, "text": ` + string(q) + `}, {"type": "image", "data": "AA==", "mimeType": "image/png"}], "isError": false}`, text
}

// TestBigTextKept: a text block of bigStructured bytes or more reaches
// go-sdk as "", and the caller whole: go-sdk's reading allocated eight
// times a 15 MB text's size. Smaller blocks, and blocks of other types, are go-sdk's.
func TestBigTextKept(t *testing.T) {
	result, text := bigLogResult()
	small, res, e := throughExact(t, result)
	if len(small) > 300 {
		t.Errorf("go-sdk decodes %d bytes, want the result without its big text", len(small))
	}
	e.apply(&res)
	if len(res.Content) != 3 || res.Content[0].(*mcp.TextContent).Text != "a" || res.Content[1].(*mcp.TextContent).Text != text {
		t.Fatalf("content after apply: %d blocks, the big text whole: %v", len(res.Content), len(res.Content) > 1 && res.Content[1].(*mcp.TextContent).Text == text)
	}
	if a := res.Content[1].(*mcp.TextContent).Annotations; a == nil || len(a.Audience) != 1 {
		t.Errorf("the big block's annotations: %v", a)
	}
	if img, ok := res.Content[2].(*mcp.ImageContent); !ok || img.MIMEType != "image/png" {
		t.Errorf("the image block: %v", res.Content[2])
	}
}

// chunked reads s n bytes at a time.
type chunkReader struct {
	s string
	n int
}

func (c *chunkReader) Read(p []byte) (int, error) {
	if c.s == "" {
		return 0, io.EOF
	}
	n := copy(p[:min(len(p), c.n)], c.s)
	c.s = c.s[n:]
	return n, nil
}

// TestKeptEvents: the event stream of a call's answer reaches go-sdk event
// by event: the notification before the result as it was, to the byte; the
// result's event with the big text as "" in its one data line, its id,
// event and retry fields kept; each message observed before the bytes that
// follow it are read. An event over the cap is handed on as it came, not
// observed, and counted.
func TestKeptEvents(t *testing.T) {
	result, text := bigLogResult()
	note := `{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":"t","progress":1}}`
	answer := `{"jsonrpc":"2.0","id":1,"result":` + result + `}`
	stream := ": a comment\r\nid: 7\r\nevent: message\r\ndata: " + note + "\r\n\r\n" +
		"id: 8\nevent: message\nretry: 1000\ndata: " + answer + "\n\n"
	for _, chunk := range []int{1, 7, 64 << 10, len(stream)} {
		t.Run(fmt.Sprint(chunk), func(t *testing.T) {
			_, e := withExact(context.Background())
			var seen []string
			var read bytes.Buffer
			k := &keptEvents{rc: io.NopCloser(&chunkReader{s: stream, n: chunk}), keep: e.keepMessage, max: 16 << 20,
				observe: func(m jsonrpc.Message) {
					kind := "request"
					if _, ok := m.(*jsonrpc.Response); ok {
						kind = "response"
					}
					seen = append(seen, fmt.Sprintf("%s at %d", kind, read.Len()))
				}}
			buf := make([]byte, 5000)
			for {
				n, err := k.Read(buf)
				read.Write(buf[:n])
				if err == io.EOF {
					break
				}
				if err != nil {
					t.Fatal(err)
				}
			}
			first := ": a comment\r\nid: 7\r\nevent: message\r\ndata: " + note + "\r\n\r\n"
			if !strings.HasPrefix(read.String(), first) {
				t.Fatalf("the notification's event is not as it was: %.200q", read.String())
			}
			rest := strings.TrimPrefix(read.String(), first)
			head, data, ok := strings.Cut(rest, "data: ")
			if !ok || head != "id: 8\nevent: message\nretry: 1000\n" || !strings.HasSuffix(data, "\n\n") || len(data) > 400 {
				t.Fatalf("the result's event: %.400q", rest)
			}
			res := applied(t, e, []byte(strings.TrimSuffix(data, "\n\n")))
			if len(res.Content) != 3 || res.Content[1].(*mcp.TextContent).Text != text {
				t.Errorf("the big text is not whole after apply")
			}
			want := []string{"request at 0", fmt.Sprintf("response at %d", len(first))}
			if fmt.Sprint(seen) != fmt.Sprint(want) {
				t.Errorf("observed %v, want %v (each before the bytes after its event)", seen, want)
			}
		})
	}
	t.Run("over the cap", func(t *testing.T) {
		_, e := withExact(context.Background())
		var seen, over int
		k := &keptEvents{rc: io.NopCloser(&chunkReader{s: stream, n: 1000}), keep: e.keepMessage, max: 1 << 20,
			observe: func(jsonrpc.Message) { seen++ }, oversize: func() { over++ }}
		got, err := io.ReadAll(k)
		if err != nil || string(got) != stream {
			t.Errorf("read %d bytes (%v), want the stream as it came (%d)", len(got), err, len(stream))
		}
		if seen != 1 || over != 1 {
			t.Errorf("observed %d messages and %d events over the cap, want 1 and 1", seen, over)
		}
	})
}

// applied is go-sdk's reading of message, a call's response as the
// gateway hands it on, with what e kept put back (exactResult.apply).
func applied(t *testing.T, e *exactResult, message []byte) mcp.CallToolResult {
	t.Helper()
	msg, err := jsonrpc.DecodeMessage(message)
	if err != nil {
		t.Fatal(err)
	}
	var res mcp.CallToolResult
	if err := json.Unmarshal(msg.(*jsonrpc.Response).Result, &res); err != nil {
		t.Fatal(err)
	}
	e.apply(&res)
	return res
}

// TestKeptBody: the JSON body of a call's answer reaches go-sdk with the
// big text as "", and a body cut short as it came, with its error.
func TestKeptBody(t *testing.T) {
	result, text := bigLogResult()
	answer := `{"jsonrpc":"2.0","id":1,"result":` + result + `}`
	_, e := withExact(context.Background())
	got, err := io.ReadAll(&keptBody{rc: io.NopCloser(&chunkReader{s: answer, n: 4096}), e: e, size: int64(len(answer)), max: 16 << 20})
	if err != nil || len(got) > 400 {
		t.Fatalf("read %d bytes (%v), want the answer without its big text", len(got), err)
	}
	res := applied(t, e, got)
	if len(res.Content) != 3 || res.Content[1].(*mcp.TextContent).Text != text {
		t.Errorf("the big text is not whole after apply")
	}
	cut := answer[:len(answer)/2]
	_, e = withExact(context.Background())
	got, err = io.ReadAll(&keptBody{rc: io.NopCloser(io.MultiReader(strings.NewReader(cut), iotestErr{})), e: e, size: int64(len(answer)), max: 16 << 20})
	if string(got) != cut || err != errCut {
		t.Errorf("a body cut short read %d bytes (%v), want %d and its error", len(got), err, len(cut))
	}
	// Not JSON: as it came, for go-sdk to say so.
	bad := strings.Replace(answer, `"isError": false`, `"isError": fals`, 1)
	_, e = withExact(context.Background())
	if got, _ := io.ReadAll(&keptBody{rc: io.NopCloser(strings.NewReader(bad)), e: e, size: -1, max: 16 << 20}); string(got) != bad {
		t.Errorf("a body that is not JSON was changed (%d bytes of %d)", len(got), len(bad))
	}
}

var errCut = fmt.Errorf("unexpected EOF")

type iotestErr struct{}

func (iotestErr) Read([]byte) (int, error) { return 0, errCut }

// FuzzKeptEvents: an event stream without a message keep changes (none of
// a megabyte) reaches go-sdk as it came, to the byte, whatever its lines,
// line ends, fields and chunks, and an event over the cap too.
func FuzzKeptEvents(f *testing.F) {
	f.Add("id: 1\ndata: {\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{}}\n\n", 3, 1<<20)
	f.Add(": c\r\n\r\nevent: message\r\ndata: a\r\ndata: b\r\n\r\ndata: x", 1, 8)
	f.Add("data: {}\n\n\n\ndata:\ndata\n\n", 64, 2)
	f.Fuzz(func(t *testing.T, stream string, chunk, max int) {
		chunk = 1 + abs(chunk)%4096
		max = 1 + abs(max)%(2<<20)
		_, e := withExact(context.Background())
		k := &keptEvents{rc: io.NopCloser(&chunkReader{s: stream, n: chunk}), keep: e.keepMessage, max: max, observe: func(jsonrpc.Message) {}}
		got, err := io.ReadAll(k)
		if err != nil || string(got) != stream {
			t.Errorf("read %q (%v), want %q", got, err, stream)
		}
	})
}

func abs(n int) int {
	if n < 0 {
		return -n
	}
	return n
}

// TestCappedBodyAtTheCap: a plain JSON body of exactly the message cap is
// read whole, as a stdio line or an SSE event of that size is; one byte
// more is refused with the cap's error, read alone and through keptBody,
// whether the server's last read ends the body (a Content-Length) or a
// read after it does (chunked).
func TestCappedBodyAtTheCap(t *testing.T) {
	const max = 64
	msg := `{"jsonrpc":"2.0","id":1,"result":{}}`
	wantErr := fmt.Sprintf("response body exceeds toolgate's message size cap of %d bytes", max)
	readers := map[string]func(string) io.Reader{
		"EOF after": func(s string) io.Reader { return &chunkReader{s: s, n: 7} },
		"EOF with":  func(s string) io.Reader { return iotest.DataErrReader(strings.NewReader(s)) },
		// A server that ends its chunked body once all of it was read:
		// the end is a read of its own.
		"chunked HTTP": func(s string) io.Reader {
			done := make(chan struct{})
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", "application/json")
				io.WriteString(w, s)
				w.(http.Flusher).Flush() // no Content-Length
				select {
				case <-done:
				case <-r.Context().Done():
				}
			}))
			t.Cleanup(srv.Close)
			resp, err := srv.Client().Get(srv.URL)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { resp.Body.Close() })
			return &readTill{r: resp.Body, left: len(s), done: done}
		},
	}
	for _, size := range []int{max - 1, max, max + 1} {
		body := msg + strings.Repeat(" ", size-len(msg))
		for name, reader := range readers {
			for _, kept := range []bool{false, true} {
				t.Run(fmt.Sprintf("%d bytes, %s, kept %v", size, name, kept), func(t *testing.T) {
					var rc io.ReadCloser = &cappedBody{rc: io.NopCloser(reader(body)), left: max, max: max}
					if kept {
						_, e := withExact(context.Background())
						rc = &keptBody{rc: rc, e: e, size: int64(size), max: max}
					}
					got, err := io.ReadAll(rc)
					if size <= max {
						if err != nil || string(got) != body {
							t.Errorf("read %d bytes (%v), want the body whole (%d)", len(got), err, size)
						}
						return
					}
					if !errors.Is(err, errBodyTooLarge) || err.Error() != wantErr || len(got) != max {
						t.Errorf("read %d bytes (%v), want %d and %q", len(got), err, max, wantErr)
					}
					if _, err := rc.Read(make([]byte, 8)); err == nil || err.Error() != wantErr {
						t.Errorf("read again: %v, want %q", err, wantErr)
					}
				})
			}
		}
	}
}

// readTill closes done once left bytes were read from r.
type readTill struct {
	r    io.Reader
	left int
	done chan struct{}
}

func (c *readTill) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	if c.left > 0 {
		if c.left -= n; c.left <= 0 {
			close(c.done)
		}
	}
	return n, err
}
