// Package linerpc owns toolgate's stdio MCP transport: JSON-RPC messages one
// a line (newline-delimited JSON), for the gateway's own stdio server and for
// its stdio backends.
//
// It does what go-sdk's IOTransport and StdioTransport do with less decoding.
// go-sdk v1.8.0 decodes each line three times: a stream decoder into a raw
// message, a trial decode as a batch array (which fails for the usual single
// object), and jsonrpc.DecodeMessage (a fourth decode for a request's
// method). Each of those decodes allocates a fresh 32 KiB buffer and scans
// the value twice. A Conn reads lines into one reused buffer and parses a
// line once, with go-sdk's own parser and flags and no per-call decoder,
// into the same messages jsonrpc.DecodeMessage returns (FuzzDecodeMessage
// holds them equal).
//
// Behaviour kept from go-sdk: a line over the size cap ends the connection
// with an error that says so; JSON-RPC batches (arrays, legal before
// protocol 2025-06-18) are read member by member and the responses to a
// batch's calls are written back as one array, and a server whose session
// negotiated 2025-06-18 or later rejects a batch; Read unblocks on Close and
// on its context; Close closes the reader and the writer. One difference:
// a message must fit on one line (the MCP stdio transport requires it); a
// value spread over several lines is an error instead of being joined.
//
// A Transport with Server set (the gateway's own stdio: Stdio, StdioFrom)
// does two things more, which a server owes its client and go-sdk v1.8.0
// does not do: a line that is not a message it can take is answered with a
// JSON-RPC error and reading goes on (go-sdk ends the connection, so one bad
// line stopped the gateway), and the answer to a call the client cancelled
// (notifications/cancelled) is not written (go-sdk writes it).
package linerpc

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"math/big"
	"regexp"
	"strconv"
	"strings"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	segjson "github.com/segmentio/encoding/json"

	"github.com/toolgate/toolgate/internal/oneline"
)

// BatchlessVersion is the first MCP protocol version without JSON-RPC
// batches.
const BatchlessVersion = "2025-06-18"

// BatchRefused says that a batch is refused at protocol version (one
// BatchlessVersion or later), in go-sdk's words.
func BatchRefused(version string) string {
	return fmt.Sprintf("JSON-RPC batching is not supported in %s and later (request version: %s)", BatchlessVersion, version)
}

// wireVersion is the "jsonrpc" member every message carries.
const wireVersion = "2.0"

// errInvalidRequest is go-sdk's answer to a message that is neither a
// request nor a response with an id.
var errInvalidRequest = &jsonrpc.Error{Code: jsonrpc.CodeInvalidRequest, Message: "invalid request"}

// methodInitialize is the request whose answer names the negotiated
// protocol version.
const methodInitialize = "initialize"

// readBufferSize is the reused read buffer; longer lines are gathered in a
// second buffer, kept while it is at most keepLineBuffer. A gateway holds
// one per backend, so the kept one stays small: a listing page of a
// thousand tools is allocated once and left to the collector, where 1 MiB
// kept by each of 20 backends was 10 MB held for good.
const (
	readBufferSize = 64 << 10
	keepLineBuffer = 256 << 10
)

// ErrLineTooLong means an inbound line exceeded the transport's
// MaxLineLength; the connection ends with it, unless the Transport serves
// (Server): then the line is skipped and answered (SkipLong).
var ErrLineTooLong = errors.New("inbound JSON-RPC line exceeded the maximum line length")

// Transport is an mcp.Transport over a reader and a writer, one JSON-RPC
// message a line.
type Transport struct {
	Reader io.ReadCloser
	Writer io.WriteCloser
	// MaxLineLength caps an inbound line in bytes (without its newline):
	// 0 selects mcp.DefaultMaxLineLength, a negative value means no cap.
	MaxLineLength int
	// Server says the connection serves a client. A line that is not a
	// message it can take (not JSON, a "jsonrpc" other than "2.0", an id
	// that is neither a string nor a number, an empty batch, a batch at a
	// protocol without them) is then answered with a JSON-RPC error
	// (-32700 parse error, or -32600 invalid request with the line's id
	// when it has one, JSON-RPC 2.0 §5) and reading goes on, where it
	// otherwise ends the connection; and the answer to a call the client
	// cancelled with notifications/cancelled before it was answered is
	// not written (the protocol's cancellation: the receiver does not
	// answer a cancelled request). A line over MaxLineLength is skipped
	// and answered -32600 (TooLongMessage) with its id where it says one
	// (SkipLong), where it otherwise ends the connection.
	Server bool
	// Busy, if set, is called when a serving connection refuses a call
	// over MaxPendingCalls after it had taken every call before (once a
	// spell, not once a call: a log line).
	Busy func()

	mu   sync.Mutex
	conn *Conn // the connection Connect made
}

var _ mcp.Transport = (*Transport)(nil)

// MaxPendingCalls is how many calls a serving connection (Transport.Server)
// holds unanswered at once. go-sdk queues every call it reads, without
// bound, and a client that sends calls and reads no answers (its stdout
// pipe full) made the gateway read on and hold each call and its answer:
// 200,000 searches grew it past 860 MB in a minute. A call over the limit is
// answered CodeBusy at once; while the client reads none of those either,
// the gateway reads no more of its input.
const MaxPendingCalls = 1024

// CodeBusy is the JSON-RPC error code of a call refused because the client
// has MaxPendingCalls calls unanswered: in the implementation-defined
// range, beside toolgate connect's -32050 and -32051.
const CodeBusy = -32052

// ErrGaveUp is the error of a write given up (LineWriter.GiveUp).
var ErrGaveUp = errors.New("the client reads no more: write given up as the gateway stops")

// LineWriter writes lines to a peer one at a time (so they never
// interleave), each write on a goroutine of its own so that GiveUp can end
// the wait for a peer that reads no more: a write to a full pipe cannot be
// interrupted. A line given up may still go out if the peer reads again,
// before any later one.
type LineWriter struct {
	w       io.Writer
	writing chan struct{} // held by the write in progress
	gone    chan struct{} // closed by GiveUp
	once    sync.Once
}

// NewLineWriter returns a LineWriter to w.
func NewLineWriter(w io.Writer) *LineWriter {
	return &LineWriter{w: w, writing: make(chan struct{}, 1), gone: make(chan struct{})}
}

// WriteLine writes data and a newline, or returns ErrGaveUp once GiveUp
// was called.
func (lw *LineWriter) WriteLine(data []byte) error {
	select {
	case lw.writing <- struct{}{}:
	case <-lw.gone:
		return ErrGaveUp
	}
	done := make(chan error, 1)
	go func() {
		_, err := lw.w.Write(append(data, '\n'))
		<-lw.writing
		done <- err
	}()
	select {
	case err := <-done:
		return err
	case <-lw.gone:
		return ErrGaveUp
	}
}

// GiveUp makes the writes that wait, and those after them, return
// ErrGaveUp at once.
func (lw *LineWriter) GiveUp() { lw.once.Do(func() { close(lw.gone) }) }

// Stdio is the transport of a stdio server: stdin and stdout, with go-sdk's
// default line cap; a stdin or stdout that is a pipe or a socket is read and
// written through Go's poller (pollable). Closing it closes stdin, not
// stdout (as go-sdk's StdioTransport).
func Stdio() *Transport { return StdioFrom(stdin()) }

// StdioFrom is Stdio reading in (a Watch of stdin) instead of os.Stdin.
func StdioFrom(in io.ReadCloser) *Transport {
	return &Transport{Reader: in, Writer: nopCloser{stdout()}, Server: true}
}

type nopCloser struct{ io.Writer }

func (nopCloser) Close() error { return nil }

// Connect starts the connection's read loop. It is called once.
func (t *Transport) Connect(context.Context) (mcp.Connection, error) {
	limit := t.MaxLineLength
	switch {
	case limit == 0:
		limit = mcp.DefaultMaxLineLength
	case limit < 0:
		limit = -1
	}
	c := &Conn{
		r:        t.Reader,
		w:        t.Writer,
		server:   t.Server,
		incoming: make(chan incoming),
		closed:   make(chan struct{}),
		lw:       NewLineWriter(t.Writer),
		busy:     t.Busy,
	}
	t.mu.Lock()
	t.conn = c
	t.mu.Unlock()
	go c.readLoop(limit)
	return c, nil
}

// GiveUpWrites makes the writes of the connection Connect made that wait
// for the peer to read (its end of the pipe full) fail at once, and the
// writes after them too. A stop calls it before closing the session:
// go-sdk closes the connection only once every call is answered, so a
// client that reads no more held the stop until its budget ran out, the
// stores left unflushed.
func (t *Transport) GiveUpWrites() {
	t.mu.Lock()
	c := t.conn
	t.mu.Unlock()
	if c != nil {
		c.lw.GiveUp()
	}
}

// Conn is a connection made by Transport.Connect.
type Conn struct {
	r      io.ReadCloser
	w      io.WriteCloser
	server bool // Transport.Server

	// incoming carries the read loop's messages to Read; the loop stops
	// after sending an error, or when closed is closed.
	incoming chan incoming
	queue    []jsonrpc.Message // the rest of the last batch read; Reads are serial

	lw *LineWriter // writes to w; GiveUpWrites gives up its writes

	busy     func() // Transport.Busy
	refusing bool   // the last call was refused over MaxPendingCalls

	mu      sync.Mutex
	initID  jsonrpc.ID                   // the initialize call read, when serving
	version string                       // the protocol version this side answered initialize with
	batches map[jsonrpc.ID]*inboundBatch // inbound batch calls awaiting their answers
	// calls are the inbound calls not yet answered, outside batches, when
	// serving: true once the client cancelled the call.
	calls map[jsonrpc.ID]bool

	closeOnce sync.Once
	closeErr  error
	closed    chan struct{}
}

var _ mcp.Connection = (*Conn)(nil)

// incoming is one decoded line: msg, or the members of a batch (those that
// are messages in batch, those that are not in bad), or err.
type incoming struct {
	msg   jsonrpc.Message
	batch []jsonrpc.Message
	bad   []badMember
	err   error
}

// badMember is a member of a batch that is not a message: JSON-RPC 2.0 §6
// answers it within the batch's answer (-32600, with its id where it has
// one), and the batch's other members are served.
type badMember struct {
	pos int // its place in the batch
	id  jsonrpc.ID
	err error
}

// inboundBatch collects the answers to one inbound batch: its calls'
// responses, and the errors its bad members were answered with, in the
// order of the batch.
type inboundBatch struct {
	pending int
	answers []json.RawMessage
	index   map[jsonrpc.ID]int
}

// readLoop reads and decodes lines until an error, which it hands to Read
// as the last item. Decoding here lets the line buffer be reused at once
// (decoded messages do not alias it).
func (c *Conn) readLoop(limit int) {
	br := bufio.NewReaderSize(c.r, readBufferSize)
	var long []byte // a line longer than br's buffer, gathered
	for {
		line, err := ReadLine(br, &long, limit)
		if c.server && errors.Is(err, ErrLineTooLong) {
			// Skipped and answered, as a line that is no message is.
			size, raw, serr := SkipLong(br, line)
			var v any
			_ = json.Unmarshal(raw, &v)
			id, _ := jsonrpc.MakeID(v)
			if werr := c.writeError(id, jsonrpc.CodeInvalidRequest, TooLongMessage(size, limit)); werr != nil {
				serr = werr // the client is gone
			}
			if serr != nil {
				c.send(incoming{err: serr})
				return
			}
			continue
		}
		if errors.Is(err, ErrLineTooLong) {
			c.send(incoming{err: err})
			return
		}
		if t := bytes.TrimSpace(line); len(t) > 0 {
			in := decodeLine(t, c.server)
			switch {
			case in.err != nil && c.server:
				if err := c.answerInvalid(t, in.err); err != nil {
					c.send(incoming{err: err}) // the client is gone
					return
				}
			case len(in.bad) > 0 && !c.server:
				in = incoming{err: in.bad[0].err} // a peer that serves us: ends the connection, as go-sdk does
				c.send(in)
				return
			case !c.send(in) || in.err != nil:
				return
			}
		}
		if err != nil {
			c.send(incoming{err: err})
			return
		}
	}
}

// send hands in to Read and reports whether the connection is still open.
func (c *Conn) send(in incoming) bool {
	select {
	case c.incoming <- in:
		return true
	case <-c.closed:
		return false
	}
}

// ReadLine returns the next line without its newline, valid until the next
// call; at the end of the input it returns the unterminated rest with
// io.EOF. long is where lines longer than br's buffer are gathered. A line
// longer than limit (not counting its "\n" or "\r\n") is an error
// (ErrLineTooLong), returned with the line's start as read (up to limit+2
// bytes, with its newline if it ended there), which SkipLong takes. The
// bridge of `toolgate connect` reads its client's lines with it too.
func ReadLine(br *bufio.Reader, long *[]byte, limit int) ([]byte, error) {
	line, err := br.ReadSlice('\n')
	if err == bufio.ErrBufferFull {
		buf := Gather((*long)[:0], line)
		for err == bufio.ErrBufferFull && (limit < 0 || len(buf) <= limit+2) {
			line, err = br.ReadSlice('\n')
			buf = Gather(buf, line)
		}
		if cap(buf) <= keepLineBuffer {
			*long = buf
		} else {
			*long = nil
		}
		line = buf
	}
	trimmed := bytes.TrimSuffix(bytes.TrimSuffix(line, []byte("\n")), []byte("\r"))
	if limit >= 0 && len(trimmed) > limit {
		return line, fmt.Errorf("%w of %d bytes", ErrLineTooLong, limit)
	}
	return trimmed, err
}

// Gather appends part to buf, a long line being gathered, doubling buf's
// room when it runs out: append's growth by a quarter, past a few hundred
// bytes, copied a 15 MB line some twenty times over (75 MB allocated for
// it, where doubling allocates 30 at most).
func Gather(buf, part []byte) []byte {
	if len(buf)+len(part) > cap(buf) {
		nb := make([]byte, len(buf), max(2*cap(buf), len(buf)+len(part), 4<<10))
		copy(nb, buf)
		buf = nb
	}
	return append(buf, part...)
}

// tailKeep is how much of a skipped line's end SkipLong keeps, to find an
// id written last.
const tailKeep = 512

// idLast matches a top-level "id" written last in an object that ends the
// line: `…,"id":42}` (the TypeScript SDK writes a request's id after its
// params). A nested object that ends with an "id" is followed by the
// closing braces of its parents, and does not match.
var idLast = regexp.MustCompile(`"id"\s*:\s*("(?:[^"\\]|\\.)*"|-?[0-9]+)\s*}\s*$`)

// SkipLong reads the rest of a line over the limit, whose start ReadLine
// returned with ErrLineTooLong, so that reading can go on with the next
// line. It returns the line's length and the id an answer to it goes to
// (JSON null when the line says none): its top-level "id", read in its
// start or, for a client that writes it last, at its end. err is the
// reader's when the line never ends.
func SkipLong(br *bufio.Reader, head []byte) (size int, id json.RawMessage, err error) {
	size = len(head)
	var tail []byte
	if bytes.HasSuffix(head, []byte("\n")) {
		tail = head[max(0, len(head)-tailKeep):]
	} else {
		for {
			chunk, rerr := br.ReadSlice('\n')
			size += len(chunk)
			tail = append(tail, chunk...)
			if len(tail) > tailKeep {
				tail = append(tail[:0], tail[len(tail)-tailKeep:]...)
			}
			if rerr == nil {
				break
			}
			if rerr != bufio.ErrBufferFull {
				err = rerr
				break
			}
		}
	}
	size -= len(tail) - len(bytes.TrimRight(tail, "\r\n"))
	if id = firstID(head); id == nil {
		if m := idLast.FindSubmatch(bytes.TrimRight(tail, "\r\n")); m != nil {
			id = json.RawMessage(bytes.Clone(m[1]))
		}
	}
	if id == nil {
		id = json.RawMessage("null")
	}
	return size, id, err
}

// firstID is the top-level "id" of the object line starts, when it comes
// before the first value that does not end within line; nil otherwise.
func firstID(line []byte) json.RawMessage {
	var id json.RawMessage
	Members(line, func(key string, v json.RawMessage) bool {
		if key != "id" {
			return true
		}
		if v = bytes.TrimSpace(v); len(v) > 0 && (v[0] == '"' || v[0] == '-' || (v[0] >= '0' && v[0] <= '9')) {
			id = v
		}
		return false
	})
	return id
}

// Members calls each with the top-level members of the JSON object data
// holds, in order, as a JSON decoder reads them (escapes in keys read, each
// of duplicate keys given), until each returns false or a value does not
// decode.
func Members(data []byte, each func(key string, v json.RawMessage) bool) {
	dec := json.NewDecoder(bytes.NewReader(data))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return
	}
	for dec.More() {
		key, err := dec.Token()
		if err != nil {
			return
		}
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return
		}
		if k, _ := key.(string); !each(k, v) {
			return
		}
	}
}

// TooLongMessage is the answer to a line over the limit that SkipLong
// skipped (JSON-RPC -32600).
func TooLongMessage(size, limit int) string {
	return fmt.Sprintf("invalid request: a message of %d bytes is over the %d-byte limit of one line; send less in one call (a large file by its path, or in parts)", size, limit)
}

// decodeLine decodes one trimmed, non-empty line: a message, or a batch.
// Serving, a request whose id an answer cannot carry back as sent
// (InexactID), and a call sent without an id (CallMethod), are no
// messages it can take.
func decodeLine(line []byte, serving bool) incoming {
	if err := checkLine(line); err != nil {
		return incoming{err: err}
	}
	decode := func(data []byte) (jsonrpc.Message, error) {
		msg, id, err := decodeWire(data)
		if req, ok := msg.(*jsonrpc.Request); err == nil && ok && serving {
			err = InexactID(id)
			if !req.IsCall() && CallMethod(req.Method) {
				// go-sdk takes it for a notification and answers
				// nothing: the client waited for good. The HTTP front
				// answers 400.
				err = errMissingID(req.Method)
			}
		}
		return msg, err
	}
	if line[0] != '[' {
		msg, err := decode(line)
		return incoming{msg: msg, err: err}
	}
	var raws []json.RawMessage
	if _, err := segjson.Parse(line, &raws, segjson.DontCopyRawMessage); err != nil {
		return incoming{err: fmt.Errorf("unmarshaling JSON-RPC batch: %w", err)}
	}
	if len(raws) == 0 {
		return incoming{err: errors.New("empty JSON-RPC batch")}
	}
	in := incoming{batch: make([]jsonrpc.Message, 0, len(raws))}
	for i, raw := range raws {
		if len(raw) == 0 || raw[0] != '{' {
			in.bad = append(in.bad, badMember{pos: i, err: fmt.Errorf("member %d of the batch is not a JSON-RPC message (an object)", i+1)})
			continue
		}
		msg, err := decode(raw)
		if err != nil {
			in.bad = append(in.bad, badMember{pos: i, id: idOf(raw), err: err})
			continue
		}
		in.batch = append(in.batch, msg)
	}
	return in
}

// maxDepth bounds the nesting of a line, as go-sdk's decoder does (its
// internal/json limit): the parser recurses.
const maxDepth = 1000

// MaxDepth is maxDepth, and TooDeep begins the error of a message nested
// deeper: a reader of the error (a listing's) words it for its own case.
const (
	MaxDepth = maxDepth
	TooDeep  = "JSON-RPC message nested deeper than"
)

// checkLine reports a line nested deeper than maxDepth, or one whose first
// JSON value ends before the line does ("{...} {...}", "{...} junk"), which
// go-sdk's stream decoder rejects as trailing data.
func checkLine(line []byte) error {
	depth, inString, escaped := 0, false, false
	for i, b := range line {
		switch {
		case inString:
			switch {
			case escaped:
				escaped = false
			case b == '\\':
				escaped = true
			case b == '"':
				inString = false
			}
		case b == '"':
			inString = true
		case b == '{' || b == '[':
			if depth++; depth > maxDepth {
				return fmt.Errorf("%s %d", TooDeep, maxDepth)
			}
		case b == '}' || b == ']':
			if depth--; depth == 0 {
				if len(bytes.TrimSpace(line[i+1:])) != 0 {
					return errors.New("invalid trailing data after a JSON-RPC message")
				}
				return nil
			}
		}
	}
	return nil // not an object or array, or unterminated: the parser says which
}

// answerInvalid answers line, which err says is no message the connection
// can take (Transport.Server): -32700 when it is not JSON, else -32600 with
// its id when it has one a client could match.
func (c *Conn) answerInvalid(line []byte, err error) error {
	var v any
	if perr := json.Unmarshal(line, &v); perr != nil { // encoding/json's words: "unexpected end of JSON input"
		return c.writeError(jsonrpc.ID{}, jsonrpc.CodeParseError, "parse error: "+perr.Error())
	}
	return c.writeError(idOf(line), jsonrpc.CodeInvalidRequest, "invalid request: "+err.Error())
}

// idOf is the id of a message that could not be taken, where it has one
// that is a string or a number an answer carries back as sent; the zero
// ID (null) otherwise.
func idOf(raw []byte) jsonrpc.ID {
	var m struct {
		ID json.RawMessage `json:"id"`
	}
	var id jsonrpc.ID
	if json.Unmarshal(raw, &m) == nil && InexactID(m.ID) == nil {
		id, _ = makeID(m.ID) // an id of another type is answered with null
	}
	return id
}

// maxExactID is the largest integer every JSON reader keeps exactly
// (2^53-1): go-sdk reads an id as a float64, then an int64.
const maxExactID = 1<<53 - 1

// InexactID says why raw, a request's id as sent, cannot be carried back
// as sent by an answer: go-sdk reads a number through a float64 into an
// int64, so 1.5 was answered as id 1 and 12345678901234567890 as
// -9223372036854775808, and the client waited for its answer for good (or
// took it as another call's). nil for a string, null, or a number that
// comes back as written in value (2.0, 1e3, 2^60). Both transports of the
// gateway refuse such a request with its words.
func InexactID(raw json.RawMessage) error {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || raw[0] != '-' && (raw[0] < '0' || raw[0] > '9') {
		return nil
	}
	if len(raw) <= 15 && !bytes.ContainsAny(raw, ".eE") {
		return nil // a whole number within 2^53: the usual id, at once
	}
	sent, ok := new(big.Rat).SetString(string(raw))
	if !ok {
		return nil // not a number: the decoder says so
	}
	f, _ := sent.Float64()
	if math.Abs(f) < 1<<63 && sent.Cmp(new(big.Rat).SetInt64(int64(f))) == 0 {
		return nil
	}
	why := "is not a whole number"
	if sent.IsInt() {
		why = "is past 2^53, where it loses digits when read"
	}
	return fmt.Errorf("id %s %s: an answer cannot carry it back as sent; give each call a string id or an integer up to %d", oneline.Cut(string(raw), 40), why, maxExactID)
}

// BodyInexactID is InexactID of the first request in body, an HTTP
// request's JSON-RPC message or batch, whose id an answer cannot carry back
// as sent; nil when there is none. Only a body in which some "id" is
// followed by a number with a fraction, an exponent or over 15 digits is
// decoded: the others cost a scan for "id".
func BodyInexactID(body []byte) error {
	if !suspectID(body) {
		return nil
	}
	type message struct {
		ID     json.RawMessage `json:"id"`
		Method json.RawMessage `json:"method"`
	}
	var msgs []message
	if err := json.Unmarshal(body, &msgs); err != nil {
		var m message
		if json.Unmarshal(body, &m) != nil {
			return nil // go-sdk answers what it cannot read
		}
		msgs = []message{m}
	}
	for _, m := range msgs {
		if len(m.Method) == 0 {
			continue
		}
		if err := InexactID(m.ID); err != nil {
			return err
		}
	}
	return nil
}

// suspectID reports whether some "id" key of body (at any depth) has a
// number that InexactID may refuse.
func suspectID(body []byte) bool {
	for i := 0; ; {
		j := bytes.Index(body[i:], []byte(`"id"`))
		if j < 0 {
			return false
		}
		k := skipSpace(body, i+j+4)
		if k < len(body) && body[k] == ':' {
			k = skipSpace(body, k+1)
			if k < len(body) && body[k] == '-' {
				k++
			}
			start := k
			for k < len(body) && body[k] >= '0' && body[k] <= '9' {
				k++
			}
			if k > start && (k-start > 15 || k < len(body) && (body[k] == '.' || body[k] == 'e' || body[k] == 'E')) {
				return true
			}
		}
		i = k
	}
}

func skipSpace(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r') {
		i++
	}
	return i
}

// makeID is the ID of raw, an id as sent, as go-sdk makes it
// (jsonrpc.MakeID of the value decoded): the zero ID when raw is empty or
// null.
func makeID(raw json.RawMessage) (jsonrpc.ID, error) {
	if len(raw) == 0 {
		return jsonrpc.ID{}, nil
	}
	if len(raw) <= 15 && (raw[0] == '-' || raw[0] >= '0' && raw[0] <= '9') {
		// The usual id, a whole number within 2^53, which a float64
		// holds exactly: read without one (and without allocating).
		if n, err := strconv.ParseInt(string(raw), 10, 64); err == nil {
			return jsonrpc.MakeID(float64(n))
		}
	}
	var v any
	if _, err := segjson.Parse(raw, &v, ParseFlags); err != nil {
		return jsonrpc.ID{}, err
	}
	return jsonrpc.MakeID(v)
}

// writeError writes a JSON-RPC error response to id (errorMessage).
func (c *Conn) writeError(id jsonrpc.ID, code int64, msg string) error {
	data, err := errorMessage(id, code, msg)
	if err != nil {
		return err
	}
	return c.writeLine(data)
}

// errorMessage is a JSON-RPC error response to id; the zero ID is written
// as null (the id of a request that could not be read), which
// jsonrpc.EncodeMessage would leave out.
func errorMessage(id jsonrpc.ID, code int64, msg string) ([]byte, error) {
	return json.Marshal(struct {
		VersionTag string         `json:"jsonrpc"`
		ID         any            `json:"id"`
		Error      *jsonrpc.Error `json:"error"`
	}{wireVersion, id.Raw(), &jsonrpc.Error{Code: code, Message: msg}})
}

// wireMessage is a JSON-RPC message as sent, decoded the way
// jsonrpc.DecodeMessage decodes it.
type wireMessage struct {
	VersionTag string          `json:"jsonrpc"`
	ID         json.RawMessage `json:"id,omitempty"`
	Method     json.RawMessage `json:"method"`
	Params     json.RawMessage `json:"params,omitempty"`
	Result     json.RawMessage `json:"result,omitempty"`
	Error      *jsonrpc.Error  `json:"error,omitempty"`
}

// ParseFlags are the flags go-sdk decodes messages and results with
// (segmentio/encoding/json, case-sensitive field names).
const ParseFlags = segjson.DontMatchCaseInsensitiveStructFields

// decodeMessage is jsonrpc.DecodeMessage without go-sdk's per-call decoder
// (a 32 KiB buffer and a second pass over data each time): the same parser
// and flags straight over data, with the same checks and results
// (FuzzDecodeMessage compares them). The message does not alias data.
func decodeMessage(data []byte) (jsonrpc.Message, error) {
	msg, _, err := decodeWire(data)
	return msg, err
}

// decodeWire is decodeMessage that also returns the message's id as sent
// (empty when it has none), for InexactID.
func decodeWire(data []byte) (jsonrpc.Message, json.RawMessage, error) {
	var w wireMessage
	rest, err := segjson.Parse(data, &w, ParseFlags)
	if err == nil && len(bytes.TrimSpace(rest)) != 0 {
		err = errors.New("invalid trailing data after a JSON-RPC message")
	}
	if err != nil {
		return nil, nil, fmt.Errorf("unmarshaling jsonrpc message: %w", err)
	}
	if w.VersionTag != wireVersion {
		return nil, nil, fmt.Errorf("invalid message version tag %q; expected %q", w.VersionTag, wireVersion)
	}
	id, err := makeID(w.ID)
	if err != nil {
		return nil, nil, err
	}
	if len(w.Method) > 0 {
		var method string
		if _, err := segjson.Parse(w.Method, &method, ParseFlags); err != nil {
			return nil, nil, fmt.Errorf("unmarshaling jsonrpc message: %w", err)
		}
		return &jsonrpc.Request{ID: id, Method: method, Params: w.Params}, w.ID, nil
	}
	if !id.IsValid() {
		return nil, nil, errInvalidRequest
	}
	resp := &jsonrpc.Response{ID: id, Result: w.Result}
	if w.Error != nil { // not a typed nil in the error interface
		resp.Error = w.Error
	}
	return resp, w.ID, nil
}

// Read returns the next message. It returns ctx's error when ctx ends
// first, and io.EOF once the connection is closed.
func (c *Conn) Read(ctx context.Context) (jsonrpc.Message, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if len(c.queue) > 0 {
		msg := c.queue[0]
		c.queue = c.queue[1:]
		return msg, nil
	}
	for {
		var in incoming
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case in = <-c.incoming:
		case <-c.closed:
			return nil, io.EOF
		}
		switch {
		case in.err != nil && c.isClosed():
			// Close ended the read (a pollable reader's Read returns
			// os.ErrClosed): the connection's end, not a read error.
			return nil, io.EOF
		case in.err != nil:
			return nil, in.err
		case in.batch != nil:
			done, err := c.acceptBatch(in.batch, in.bad)
			var busy errBusy
			switch {
			case err != nil && !c.server:
				return nil, err
			case errors.As(err, &busy):
				if err := c.writeError(jsonrpc.ID{}, CodeBusy, BusyMessage(int(busy), MaxPendingCalls)); err != nil {
					return nil, err
				}
				continue
			case err != nil:
				if err := c.writeError(jsonrpc.ID{}, jsonrpc.CodeInvalidRequest, "invalid request: "+err.Error()+": send each message on a line of its own"); err != nil {
					return nil, err
				}
				continue
			}
			if done != nil {
				// No call to wait for: the bad members' answers now.
				if err := c.writeLine(done); err != nil {
					return nil, err
				}
			}
			if len(in.batch) == 0 {
				continue
			}
			c.queue = in.batch[1:]
			return in.batch[0], nil
		}
		if req, ok := in.msg.(*jsonrpc.Request); ok {
			var err error
			switch c.noteRequest(req) {
			case overPending:
				err = c.writeError(req.ID, CodeBusy, BusyMessage(1, MaxPendingCalls))
			case idInUse:
				// Answered with a null id, as go-sdk would (the call in
				// flight keeps its own); go-sdk wrote nothing at all, so
				// the client waited for good.
				err = c.writeError(jsonrpc.ID{}, jsonrpc.CodeInvalidRequest, fmt.Sprintf("invalid request: id %v is in use by a call of this client still unanswered, so the call sent again with it was not run: give each call its own id", req.ID.Raw()))
			default:
				return in.msg, nil
			}
			if err != nil {
				return nil, err
			}
			continue
		}
		return in.msg, nil
	}
}

// CallMethod reports whether method is one of MCP's requests, which a
// client sends to be answered: initialize, ping, and the methods with a
// "/" that are not notifications/ (tools/call, resources/read …).
func CallMethod(method string) bool {
	return method == "initialize" || method == "ping" ||
		strings.Contains(method, "/") && !strings.HasPrefix(method, "notifications/")
}

// MissingID is the answer to a request of a call method (CallMethod) sent
// without an id, or with a null one.
func MissingID(method string) string { return "invalid request: " + errMissingID(method).Error() }

func errMissingID(method string) error {
	return fmt.Errorf("missing id for %q: a request without an id is a notification, which is not answered; give each call an id (a string or an integer)", oneline.Cut(method, 60))
}

// methodCancelled is the notification that cancels a call.
const methodCancelled = "notifications/cancelled"

// noted is what noteRequest made of a request: taken, or a call refused.
type noted int

const (
	taken       noted = iota
	overPending       // over MaxPendingCalls
	idInUse           // its id is a call's still unanswered
)

// noteRequest notes req, a request read outside a batch: the initialize
// call, whose answer names the protocol version; and, when serving, each
// call until it is answered and which of them the client cancels. A call
// it refuses (serving) is not to be served.
func (c *Conn) noteRequest(req *jsonrpc.Request) noted {
	c.mu.Lock()
	defer c.mu.Unlock()
	if req.Method == methodInitialize && req.IsCall() {
		c.initID = req.ID // the client must not cancel it: not noted below
		return taken
	}
	if !c.server {
		return taken
	}
	if req.IsCall() {
		if _, ok := c.calls[req.ID]; ok {
			return idInUse
		}
		if c.pendingLocked() >= MaxPendingCalls {
			if !c.refusing && c.busy != nil {
				c.busy()
			}
			c.refusing = true
			return overPending
		}
		c.refusing = false
		if c.calls == nil {
			c.calls = map[jsonrpc.ID]bool{}
		}
		c.calls[req.ID] = false
		return taken
	}
	if req.Method != methodCancelled {
		return taken
	}
	var p struct {
		RequestID any `json:"requestId"`
	}
	if json.Unmarshal(req.Params, &p) != nil {
		return taken
	}
	if id, err := jsonrpc.MakeID(p.RequestID); err == nil && id.IsValid() {
		if _, ok := c.calls[id]; ok {
			c.calls[id] = true
		}
	}
	return taken
}

// pendingLocked is how many calls the client has unanswered, in batches
// and out of them; c.mu is held.
func (c *Conn) pendingLocked() int { return len(c.calls) + len(c.batches) }

// errBusy refuses a batch of that many calls, which would take the calls
// unanswered over MaxPendingCalls.
type errBusy int

func (e errBusy) Error() string { return BusyMessage(int(e), MaxPendingCalls) }

// BusyMessage is the answer to calls (n of them: one call, or a batch's)
// refused because the client has limit calls unanswered (MaxPendingCalls).
func BusyMessage(n, limit int) string {
	what := fmt.Sprintf("this client has %d calls unanswered, the limit", limit)
	if n > 1 {
		what = fmt.Sprintf("this batch's %d calls would take this client over %d calls unanswered, the limit", n, limit)
	}
	return "the gateway is busy: " + what + " (it sends calls faster than it reads their answers): wait for answers before sending more"
}

// cancelled reports whether resp answers a call the client cancelled, and
// forgets the call.
func (c *Conn) cancelled(resp *jsonrpc.Response) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	cancelled, ok := c.calls[resp.ID]
	if ok {
		delete(c.calls, resp.ID)
	}
	return cancelled
}

// acceptBatch checks that a batch is allowed and notes its calls, whose
// answers Write gathers into one array with those of its bad members. A
// batch at a protocol without batches is refused whole, whatever its
// members (it said a bad member's fault, as if batches were taken). When
// the batch has bad members and no call to wait for, done is the array
// that answers them, to write now.
func (c *Conn) acceptBatch(msgs []jsonrpc.Message, bad []badMember) (done []byte, err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.version >= BatchlessVersion {
		return nil, errors.New(BatchRefused(c.version))
	}
	b := &inboundBatch{index: map[jsonrpc.ID]int{}}
	for pos, mi, bi := 0, 0, 0; pos < len(msgs)+len(bad); pos++ {
		if bi < len(bad) && bad[bi].pos == pos {
			raw, err := errorMessage(bad[bi].id, jsonrpc.CodeInvalidRequest, "invalid request: "+bad[bi].err.Error())
			if err != nil {
				return nil, err
			}
			b.answers = append(b.answers, raw)
			bi++
			continue
		}
		req, ok := msgs[mi].(*jsonrpc.Request)
		mi++
		if !ok || !req.IsCall() {
			continue
		}
		if _, dup := b.index[req.ID]; dup {
			return nil, fmt.Errorf("duplicate message ID %v in a JSON-RPC batch", req.ID.Raw())
		}
		if _, seen := c.batches[req.ID]; seen {
			return nil, fmt.Errorf("JSON-RPC batch contains previously seen request %v", req.ID.Raw())
		}
		b.index[req.ID] = len(b.answers)
		b.answers = append(b.answers, nil)
	}
	b.pending = len(b.index)
	if c.server && b.pending > 0 && c.pendingLocked()+b.pending > MaxPendingCalls {
		return nil, errBusy(b.pending)
	}
	if b.pending == 0 {
		if len(b.answers) == 0 {
			return nil, nil // notifications only: no answer
		}
		return json.Marshal(b.answers)
	}
	if c.batches == nil {
		c.batches = map[jsonrpc.ID]*inboundBatch{}
	}
	for id := range b.index {
		c.batches[id] = b
	}
	return nil, nil
}

// Write writes msg as one line. An answer to a call of an inbound batch is
// held until the batch's last answer, then all are written as one array.
func (c *Conn) Write(ctx context.Context, msg jsonrpc.Message) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	var data []byte
	resp, isResp := msg.(*jsonrpc.Response)
	if isResp && c.server && c.cancelled(resp) {
		return nil // the client no longer waits for it
	}
	if isResp {
		var err error
		if data, err = c.answered(resp); errors.Is(err, errMoreToCome) {
			return nil // more answers to come
		} else if err != nil {
			return err
		}
	}
	if data == nil {
		var err error
		if data, err = jsonrpc.EncodeMessage(msg); err != nil {
			return fmt.Errorf("marshaling message: %w", err)
		}
	}
	return c.writeLine(data)
}

// writeLine writes data and a newline (LineWriter: a stop gives up the
// writes a client does not read).
func (c *Conn) writeLine(data []byte) error { return c.lw.WriteLine(data) }

// errMoreToCome is answered's word for an answer to a batch call that is
// held until the batch's last.
var errMoreToCome = errors.New("more answers to the batch to come")

// answered notes resp: the negotiated protocol version when it answers
// initialize, and its place when it answers a batch call. It returns the
// batch's answer once the batch is complete, errMoreToCome before, and nil
// for a response outside a batch.
func (c *Conn) answered(resp *jsonrpc.Response) ([]byte, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.initID.IsValid() && resp.ID == c.initID {
		c.initID = jsonrpc.ID{}
		var res struct {
			ProtocolVersion string `json:"protocolVersion"`
		}
		if resp.Error == nil && json.Unmarshal(resp.Result, &res) == nil {
			c.version = res.ProtocolVersion
		}
	}
	b, ok := c.batches[resp.ID]
	if !ok {
		return nil, nil
	}
	delete(c.batches, resp.ID)
	raw, err := jsonrpc.EncodeMessage(resp)
	if err != nil {
		return nil, fmt.Errorf("encoding batch message: %w", err)
	}
	b.answers[b.index[resp.ID]] = raw
	if b.pending--; b.pending > 0 {
		return nil, errMoreToCome
	}
	return json.Marshal(b.answers)
}

// isClosed reports whether Close has begun.
func (c *Conn) isClosed() bool {
	select {
	case <-c.closed:
		return true
	default:
		return false
	}
}

// SessionID is empty: a stdio connection has no session id.
func (c *Conn) SessionID() string { return "" }

// Close closes the reader and the writer and unblocks Read. The read loop
// ends when the reader's Read returns: at once for a pipe or a socket read
// through the poller (Stdio's stdin); a blocking reader's may not return
// until input comes (go-sdk's transport has the same limit).
func (c *Conn) Close() error {
	c.closeOnce.Do(func() {
		close(c.closed) // first: the read this Close ends sees it (Read)
		c.closeErr = errors.Join(c.r.Close(), c.w.Close())
	})
	return c.closeErr // set before any Do returns
}
