package backend

//lint:file-ignore SA1019 MCP logging is deprecated from protocol 2026-07-28 on (SEP-2577) but is what 2025-11-25 clients and servers speak, and it stays functional in the deprecation window; execute_tool relays it (issue 13)

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolgate/toolgate/internal/termtext"
)

// CallEvents receive what a backend sends about one call while it runs, so
// the gateway can relay it to the client that made the call. Give them to
// CallTool with WithCallEvents. The funcs are called as the backend's
// messages are read, in the order the backend sent them, and before
// CallTool returns: a notification the backend sent before its result is
// relayed before the result. (go-sdk hands notifications to its handlers on
// a queue of their own, after it has handed the result on, so they are
// taken from the connection instead: observing, observeEvents.) They
// must not block for long: every call on that backend waits meanwhile.
type CallEvents struct {
	// Progress, if set, asks the backend for progress (the call carries a
	// progress token of the pool's own) and receives each
	// notifications/progress of the call. Its ProgressToken is nil: the
	// receiver puts its own client's token there.
	Progress func(*mcp.ProgressNotificationParams)
	// Log, if set with LogLevel, receives the backend's notifications/message
	// at LogLevel or above that belong to the call. Over a backend session
	// a log message names no request, so a message is taken to belong to
	// the call only while it is the only call in flight on that backend;
	// messages that arrive while other calls run too are not relayed.
	Log      func(*mcp.LoggingMessageParams)
	LogLevel mcp.LoggingLevel
}

type callEventsKey struct{}

// WithCallEvents returns a context that makes Pool.CallTool report ev.
func WithCallEvents(ctx context.Context, ev *CallEvents) context.Context {
	return context.WithValue(ctx, callEventsKey{}, ev)
}

func callEventsFrom(ctx context.Context) *CallEvents {
	ev, _ := ctx.Value(callEventsKey{}).(*CallEvents)
	return ev
}

// progressTokens numbers the progress tokens the pool gives backends, unique
// in the process.
var progressTokens atomic.Uint64

// calls are the calls in flight on one run, with the events they want.
type calls struct {
	mu      sync.Mutex
	all     map[*call]struct{}
	byToken map[string]*call

	levelMu  sync.Mutex
	logLevel mcp.LoggingLevel // the level last set on the backend ("" = never set)

	// mask hides the server's secrets in a log message's data and a
	// progress message (nil: none).
	mask func(any) any
}

// call is one call in flight.
type call struct {
	ev    *CallEvents // nil: the caller wants no events
	token string      // progress token given to the backend ("" = none)
}

// add registers a call in flight and returns it; done must follow.
func (c *calls) add(ev *CallEvents) *call {
	k := &call{ev: ev}
	if ev != nil && ev.Progress != nil {
		k.token = "toolgate-" + strconv.FormatUint(progressTokens.Add(1), 10)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.all == nil {
		c.all, c.byToken = map[*call]struct{}{}, map[string]*call{}
	}
	c.all[k] = struct{}{}
	if k.token != "" {
		c.byToken[k.token] = k
	}
	return k
}

func (c *calls) done(k *call) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.all, k)
	if k.token != "" {
		delete(c.byToken, k.token)
	}
}

// Methods of the notifications relayed.
const (
	methodProgress = "notifications/progress"
	methodMessage  = "notifications/message"
)

// observe relays msg, a message the backend sent, when it is a
// notification a call in flight wants. Only those are decoded.
func (c *calls) observe(msg jsonrpc.Message) {
	req, ok := msg.(*jsonrpc.Request)
	if !ok || req.IsCall() || req.Method != methodProgress && req.Method != methodMessage {
		return
	}
	c.mu.Lock()
	tokens, calls := len(c.byToken), len(c.all)
	c.mu.Unlock()
	switch {
	case req.Method == methodProgress && tokens > 0:
		var p mcp.ProgressNotificationParams
		if json.Unmarshal(req.Params, &p) == nil {
			c.progress(&p)
		}
	case req.Method == methodMessage && calls == 1:
		var p mcp.LoggingMessageParams
		if json.Unmarshal(req.Params, &p) == nil {
			c.log(&p)
		}
	}
}

// wrapTransport connects inner and hands the connection it makes to wrap.
// Only connections go-sdk does not type-assert may be wrapped (stdio, SSE;
// see probeTransport).
type wrapTransport struct {
	inner mcp.Transport
	wrap  func(mcp.Connection) mcp.Connection
}

func (t *wrapTransport) Connect(ctx context.Context) (mcp.Connection, error) {
	c, err := t.inner.Connect(ctx)
	if err != nil {
		return nil, err
	}
	return t.wrap(c), nil
}

// observing wraps t so that every message its connection reads goes to
// observe before go-sdk gets it. Streamable HTTP uses observeEvents on the
// response bodies instead.
func observing(t mcp.Transport, observe func(jsonrpc.Message)) mcp.Transport {
	return &wrapTransport{inner: t, wrap: func(c mcp.Connection) mcp.Connection {
		return &observeConn{Connection: c, observe: observe}
	}}
}

type observeConn struct {
	mcp.Connection
	observe func(jsonrpc.Message)
}

func (c *observeConn) Read(ctx context.Context) (jsonrpc.Message, error) {
	msg, err := c.Connection.Read(ctx)
	if err == nil {
		c.observe(msg)
	}
	return msg, err
}

// observeEvents reads an event stream (a streamable HTTP response body) for
// go-sdk and hands each event's message to observe as soon as the event is
// complete, before the bytes that follow it are returned: a notification is
// observed before go-sdk can read the result behind it. It reads the SSE
// format as go-sdk's reader does (eventLine, eventData): "data:" lines
// joined by newlines, an event ended by an empty line or by the end of the
// stream, one named other than "message" skipped as go-sdk skips it
// (otherEvent), other fields ignored.
type observeEvents struct {
	rc      io.ReadCloser
	observe func(jsonrpc.Message)
	line    []byte // the incomplete line so far
	data    []byte // the event's data so far
	max     int    // longest line or event kept (longer ones are not observed)
	// oversize, when set, is called once for each event of more than max
	// bytes, which go-sdk's reader (MaxEventSize, the same cap) fails and
	// drops the connection for: a call can tell why it failed even when
	// the run is torn down before it reads go-sdk's error.
	oversize func()
	size     int  // the event's bytes so far, line ends included
	over     bool // oversize was called for this event
	other    bool // its "event:" names another than "message": go-sdk skips it
	// noField: a line of the stream was no field (no ":"), which go-sdk's
	// reader fails the stream at: it reads no event after it, so none is
	// observed.
	noField bool
}

func (e *observeEvents) Read(p []byte) (int, error) {
	n, err := e.rc.Read(p)
	for _, b := range p[:n] {
		if e.size++; e.size > e.max && !e.over {
			e.over = true
			if e.oversize != nil {
				e.oversize()
			}
		}
		if b != '\n' {
			if len(e.line) <= e.max {
				e.line = append(e.line, b)
			}
			continue
		}
		e.endLine()
	}
	if errors.Is(err, io.EOF) {
		// go-sdk's reader takes the line and the event a stream ends in
		// without their line ends as ended.
		if len(e.line) > 0 {
			e.endLine()
		}
		e.endLine() // the empty line
	}
	return n, err
}

// eventLine is a line of an event stream without its line end, as go-sdk's
// reader takes it: every CR and LF trimmed off its end, so that "\r\r\n"
// is an empty line, which ends an event. (The SSE standard ends a line at
// a CR alone too, which go-sdk does not: toolgate reads what go-sdk reads.)
func eventLine(line []byte) []byte { return bytes.TrimRight(line, "\r\n") }

// eventData is the value of a "data:" line (without its line end), as
// go-sdk's reader takes it: trimmed of white space; ok is false for
// another field.
func eventData(line []byte) (v []byte, ok bool) {
	v, ok = bytes.CutPrefix(line, []byte("data:"))
	return bytes.TrimSpace(v), ok
}

// isField reports whether line (not empty, without its line end) is a
// field or a comment of an event stream, as go-sdk's reader takes it: it
// holds a ":". go-sdk fails the stream at any other line.
func isField(line []byte) bool { return bytes.IndexByte(line, ':') >= 0 }

func (e *observeEvents) endLine() {
	line := eventLine(e.line)
	e.line = e.line[:0]
	if len(line) == 0 {
		other := e.other
		e.size, e.over, e.other = 0, false, false
		if len(e.data) > 0 && len(e.data) <= e.max && !other && !e.noField {
			if msg, err := jsonrpc.DecodeMessage(e.data); err == nil {
				e.observe(msg)
			}
		}
		e.data = e.data[:0]
		return
	}
	if !isField(line) {
		e.noField = true
		return
	}
	if other, ok := otherEvent(line); ok {
		e.other = other
		return
	}
	if v, ok := eventData(line); ok {
		if len(e.data) > 0 {
			e.data = append(e.data, '\n')
		}
		e.data = append(e.data, v...)
	}
}

func (e *observeEvents) Close() error { return e.rc.Close() }

// otherEvent reports whether line (without its line end) is an event
// stream's "event:" field, and whether it names an event other than
// "message": go-sdk's reader trims the name of white space, takes an empty
// one for "message", and skips an event named otherwise, so neither
// observeEvents nor keptEvents reads its message. The last "event:" of an
// event is its name.
func otherEvent(line []byte) (other, ok bool) {
	name, ok := bytes.CutPrefix(line, []byte("event:"))
	if !ok {
		return false, false
	}
	name = bytes.TrimSpace(name)
	return len(name) > 0 && string(name) != "message", true
}

// noMeta: a relayed notification goes without the backend's _meta. What
// MCP puts there (io.modelcontextprotocol/related-task, a progress token)
// names things of the backend's session, which the client's session does
// not have, and the rest is the backend's own, for its own client: nothing
// a client of the gateway can use, and strings that went to it unmasked
// and unescaped.

// progress relays a notifications/progress from the backend to the call
// whose token it carries; one with another token is dropped. Its message
// goes out with the server's secrets masked and its control characters
// escaped (termtext.Escape), without _meta (noMeta).
func (c *calls) progress(p *mcp.ProgressNotificationParams) {
	if p == nil {
		return
	}
	tok, ok := p.ProgressToken.(string)
	if !ok {
		return
	}
	c.mu.Lock()
	k := c.byToken[tok]
	c.mu.Unlock()
	if k == nil {
		return // the call has ended, or the token is not ours
	}
	out := *p
	out.ProgressToken, out.Meta = nil, nil // noMeta
	if c.mask != nil {
		if m, ok := c.mask(out.Message).(string); ok {
			out.Message = m
		}
	}
	out.Message = termtext.Escape(out.Message)
	k.ev.Progress(&out)
}

// log relays a notifications/message from the backend to the call in
// flight, when there is exactly one and it asked for messages at that
// level: its logger and data masked and escaped, without _meta (noMeta).
func (c *calls) log(p *mcp.LoggingMessageParams) {
	if p == nil {
		return
	}
	c.mu.Lock()
	var only *call
	if len(c.all) == 1 {
		for k := range c.all {
			only = k
		}
	}
	c.mu.Unlock()
	if only == nil || only.ev == nil || only.ev.Log == nil || only.ev.LogLevel == "" || levelRank(p.Level) < levelRank(only.ev.LogLevel) {
		return
	}
	out := *p
	out.Meta = nil // noMeta
	if c.mask != nil {
		out.Data = c.mask(out.Data)
		// A logger may be named after a key, as a stderr line may hold one.
		if m, ok := c.mask(out.Logger).(string); ok {
			out.Logger = m
		}
	}
	// Its strings go out escaped, as a progress message does: a client
	// may print them on a terminal, where a backend's ESC[2K ESC[1A
	// erased the line its user read.
	out.Logger, out.Data = termtext.Escape(out.Logger), termtext.Value(out.Data)
	only.ev.Log(&out)
}

// levels are the MCP log levels, lowest first (RFC 5424 severities).
var levels = []mcp.LoggingLevel{"debug", "info", "notice", "warning", "error", "critical", "alert", "emergency"}

// Levels are the MCP log levels, lowest first: the only values of a
// logging/setLevel's "level".
func Levels() []mcp.LoggingLevel { return slices.Clone(levels) }

// levelRank orders log levels; an unknown level ranks with "info".
func levelRank(l mcp.LoggingLevel) int {
	for i, x := range levels {
		if x == l {
			return i
		}
	}
	return 1
}

// wantLogs makes the backend send log messages at level or above for a call
// with params: a backend speaking protocol 2026-07-28 or later reads the
// level from the request's _meta; an older one is sent logging/setLevel,
// once per lower level (the level is never raised again: the relay filters
// by each call's own level). The _meta opt-in is stamped whatever the
// backend's capabilities say: it asks for nothing a server must support,
// and the Python SDK's MCPServer logs (ctx.info) to requests that carry it
// without declaring the logging capability. logging/setLevel, a method, is
// sent only to a backend that declares the capability.
func (r *run) wantLogs(ctx context.Context, params *mcp.CallToolParams, level mcp.LoggingLevel) {
	res := r.sess.InitializeResult()
	if res == nil {
		return
	}
	if res.ProtocolVersion >= StatelessProtocolVersion {
		m := params.GetMeta()
		if m == nil {
			m = map[string]any{}
		}
		m[mcp.MetaKeyLogLevel] = level
		params.SetMeta(m)
		return
	}
	if res.Capabilities == nil || res.Capabilities.Logging == nil {
		return
	}
	c := &r.calls
	c.levelMu.Lock()
	defer c.levelMu.Unlock()
	if c.logLevel != "" && levelRank(c.logLevel) <= levelRank(level) {
		return
	}
	if err := r.sess.SetLoggingLevel(ctx, &mcp.SetLoggingLevelParams{Level: level}); err == nil {
		c.logLevel = level
	}
}
