package backend

import (
	"bytes"
	"errors"
	"io"
	"unsafe"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/tidwall/gjson"

	"github.com/toolgate/toolgate/internal/linerpc"
)

// On streamable HTTP, go-sdk's connection cannot be wrapped (it is
// type-asserted), so a call's big result is kept (exactResult.keep) in the
// answer to the call's POST, as go-sdk reads it from the HTTP client the
// pool gives it: a JSON body whole (keptBody), an event stream event by
// event (keptEvents). go-sdk then decodes the message with {} and "" in
// place of what was kept; before, it decoded 15 MB of rows into maps, or
// allocated eight times a 15 MB text's size.

// keepMessage is data, a JSON-RPC message the backend wrote in answer to
// the call, as go-sdk is to read it: the result of a response as keep
// makes it. A message of less than bigStructured bytes, one that is no
// response with a result, and one that is not JSON are as they were
// (go-sdk says what is wrong with the last).
func (e *exactResult) keepMessage(data []byte) []byte {
	if len(data) < bigStructured {
		e.takeMessage(data)
		return data
	}
	// data is not changed while read; of a "result" named twice, go-sdk's
	// is the last.
	view := unsafe.String(unsafe.SliceData(data), len(data))
	res := lastMember(view, "result")
	at, end := res.Index, res.Index+len(res.Raw)
	if !res.IsObject() || at <= 0 || end > len(data) || !gjson.Valid(view) {
		e.takeMessage(data)
		return data
	}
	small := e.keep(data[at:end:end])
	if len(small) == end-at {
		return data
	}
	out := make([]byte, 0, len(data)-(end-at)+len(small))
	out = append(append(append(out, data[:at]...), small...), data[end:]...)
	return out
}

// keptBody is the JSON body of the answer to a call's POST: read whole at
// the first Read, the message it holds given to keepMessage, and what that
// returns read by go-sdk (which reads such a body whole too), then the
// error the body ended with.
type keptBody struct {
	rc   io.ReadCloser
	e    *exactResult
	size int64 // the body's Content-Length, or less than 1 when unknown
	max  int64 // the message cap: a body is not longer (cappedBody)
	read bool
	out  []byte
	err  error
}

func (b *keptBody) Read(p []byte) (int, error) {
	if !b.read {
		b.read = true
		var buf bytes.Buffer
		if b.size > 0 {
			buf.Grow(int(min(b.size, b.max)) + bytes.MinRead) // one buffer, where growing it copied it over and over
		}
		_, err := buf.ReadFrom(b.rc)
		b.out, b.err = buf.Bytes(), err
		if err == nil {
			b.err = io.EOF
			b.out = b.e.keepMessage(b.out)
		}
	}
	if len(b.out) == 0 {
		return 0, b.err
	}
	n := copy(p, b.out)
	b.out = b.out[n:]
	return n, nil
}

func (b *keptBody) Close() error { return b.rc.Close() }

// keptEvents is the event stream that answers a call's POST, handed to
// go-sdk one whole event at a time: each event's message goes to observe
// first (as observeEvents does) and, when keep makes it smaller, the event
// is written again with the smaller message as its data (its other fields
// as they were). An event of more than max bytes is handed on as it comes,
// not observed, for go-sdk to refuse (MaxEventSize, the same cap).
type keptEvents struct {
	rc       io.ReadCloser
	observe  func(jsonrpc.Message)
	keep     func([]byte) []byte
	max      int
	oversize func() // called once for each event over max

	event  []byte // the bytes of the event so far
	lineAt int    // where its last, unended line starts in event
	// data is where its data is: from, to in event while it has one
	// "data:" line; joined holds them from the second on.
	from, to int
	lines    int
	joined   []byte
	other    bool // its "event:" names another than "message": go-sdk skips it
	noField  bool // a line of the stream was no field: go-sdk reads no event after it (observeEvents.noField)
	over     bool // the event is over max: handed on as it comes
	mid      bool // (over) the bytes handed on last did not end a line

	buf []byte // rc is read into it
	out []byte // what go-sdk reads next
	err error  // rc's error: returned once out is read
}

func (k *keptEvents) Read(p []byte) (int, error) {
	for len(k.out) == 0 && k.err == nil {
		if k.buf == nil {
			k.buf = make([]byte, 64<<10)
		}
		n, err := k.rc.Read(k.buf)
		k.feed(k.buf[:n])
		if err != nil {
			k.err = err
			if errors.Is(err, io.EOF) && !k.over && len(k.event) > 0 {
				// go-sdk's reader takes the event a stream ends in
				// without its empty line (the line it ends in too), as
				// ended: so is it kept and observed (a 64-bit ID was
				// rounded). After any other error go-sdk reads none of it.
				if len(k.event) > k.lineAt {
					k.endLine()
				}
				if len(k.event) > 0 {
					k.dispatch()
				}
			}
			k.out = append(k.out, k.event...) // an event the stream broke off in, as it came
			k.event = nil
		}
	}
	n := copy(p, k.out)
	k.out = k.out[n:]
	if len(k.out) > 0 {
		return n, nil
	}
	k.out = nil // not kept: it may be a big event's
	return n, k.err
}

// feed takes the next bytes of the stream.
func (k *keptEvents) feed(p []byte) {
	for len(p) > 0 {
		part := p
		i := bytes.IndexByte(p, '\n')
		if i >= 0 {
			part = p[:i+1]
		}
		p = p[len(part):]
		if !k.over && len(k.event)+len(part) > k.max {
			k.over = true
			if k.oversize != nil {
				k.oversize()
			}
			k.mid = len(k.event) > k.lineAt
			k.out = append(k.out, k.event...)
			k.event = k.event[:0]
		}
		if !k.over {
			k.event = linerpc.Gather(k.event, part)
			if i >= 0 {
				k.endLine()
			}
			continue
		}
		k.out = append(k.out, part...)
		if i >= 0 && !k.mid && len(eventLine(part)) == 0 {
			k.reset() // the empty line that ends the event
			continue
		}
		k.mid = i < 0
	}
}

// endLine ends the line that ends event.
func (k *keptEvents) endLine() {
	line := eventLine(k.event[k.lineAt:])
	at := k.lineAt
	k.lineAt = len(k.event)
	if len(line) == 0 {
		k.dispatch()
		return
	}
	if !isField(line) {
		k.noField = true
		return
	}
	if other, ok := otherEvent(line); ok {
		k.other = other
		return
	}
	v, ok := eventData(line)
	if !ok {
		return
	}
	from, to := at, at // an empty value (eventData gives nil)
	if len(v) > 0 {
		// v is a part of line (it ends where line's capacity ends),
		// which starts at at in event.
		from = at + cap(line) - cap(v)
		to = from + len(v)
	}
	k.lines++
	switch k.lines {
	case 1:
		k.from, k.to = from, to
	case 2:
		k.joined = append(append(append([]byte(nil), k.event[k.from:k.to]...), '\n'), k.event[from:to]...)
	default:
		k.joined = append(append(k.joined, '\n'), k.event[from:to]...)
	}
}

// dispatch hands on the event that ended.
func (k *keptEvents) dispatch() {
	data := k.joined
	if k.lines == 1 {
		data = k.event[k.from:k.to]
	}
	ev := k.event
	if len(data) > 0 && !k.other && !k.noField {
		small := k.keep(data)
		if msg, err := jsonrpc.DecodeMessage(small); err == nil {
			k.observe(msg)
		}
		if len(small) != len(data) {
			ev = k.rewrite(small)
		}
	}
	if len(k.out) == 0 {
		k.out = ev // not a copy
	} else {
		k.out = append(k.out, ev...)
	}
	k.event = nil // out may hold it
	k.reset()
}

// rewrite is the event with data as its "data:" lines, its other lines
// as they were.
func (k *keptEvents) rewrite(data []byte) []byte {
	out := make([]byte, 0, len(data)+256)
	for rest := k.event; len(rest) > 0; {
		i := bytes.IndexByte(rest, '\n')
		if i < 0 {
			i = len(rest) - 1
		}
		line := rest[:i+1]
		rest = rest[i+1:]
		if t := bytes.TrimRight(line, "\r\n"); len(t) > 0 && !bytes.HasPrefix(t, []byte("data:")) {
			out = append(out, line...)
		}
	}
	// One "data:" line for each line of data: go-sdk joins them with
	// line ends again (a message written on several lines has some).
	for line := range bytes.Lines(data) {
		out = append(append(append(out, "data: "...), bytes.TrimSuffix(line, []byte("\n"))...), '\n')
	}
	return append(out, '\n')
}

// reset starts the next event.
func (k *keptEvents) reset() {
	k.event = k.event[:0]
	k.lineAt, k.from, k.to, k.lines, k.joined, k.over, k.mid, k.other = 0, 0, 0, 0, nil, false, false, false
}

func (k *keptEvents) Close() error { return k.rc.Close() }
