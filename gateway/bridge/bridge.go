// Package bridge connects an MCP client on stdio to a gateway served over
// streamable HTTP (`toolgate connect`): many clients that speak only stdio
// (each would start a gateway of its own, with its own backends, model and
// caches) share one `toolgate serve --http`, its API keys and scopes, its
// audit log and what it learns.
//
// The bridge relays JSON-RPC messages as they are, one line each way:
// every message the client writes is POSTed to the gateway's endpoint, and
// what the gateway answers (a JSON body, or the events of an SSE stream: the
// response and, before it, the requests and notifications it sends while
// it works) is written back. It keeps no MCP state but the protocol version
// the gateway agreed in initialize (sent as MCP-Protocol-Version, as a
// client of streamable HTTP must) and a session ID: the gateway's if it
// gives one, else the bridge's own, which names its client to the gateway
// (what it learns from use, its audit log). toolgate's HTTP front is
// stateless, so a gateway restarted under the bridge answers the next call
// as if nothing happened.
//
// A call the gateway cannot take (it is down, refuses the key, the body is
// too large) is answered with a JSON-RPC error that says why and how to fix
// it, and the bridge goes on; it stops when the client closes stdin.
package bridge

import (
	"bufio"
	"bytes"
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"mime"
	"net"
	"net/http"
	"net/http/httptrace"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/toolgate/toolgate/gateway"
	"github.com/toolgate/toolgate/internal/linerpc"
	"github.com/toolgate/toolgate/internal/proxyenv"
	"github.com/toolgate/toolgate/internal/sleepwatch"
)

// Options configure Run.
type Options struct {
	// URL is the gateway's MCP endpoint (http://127.0.0.1:8931/mcp, or a
	// profile's /profiles/NAME/mcp).
	URL string
	// Key, if set, is sent as "Authorization: Bearer KEY" (an API key of
	// the gateway's, `toolgate keys create`).
	Key string
	// KeyEnv names where Key came from, for the fix of a refused key
	// (e.g. "$TOOLGATE_KEY").
	KeyEnv string
	// Client sends the requests; nil is a client without a timeout (a
	// call runs as long as the gateway lets it, and an SSE stream as long
	// as the call). Its transport should wait for the gateway's 100
	// Continue before a message's body (http.Transport's
	// ExpectContinueTimeout, 1 s in http.DefaultTransport): a message
	// whose connection closes before it is sent again (see post).
	Client *http.Client
	// Logger receives what the client cannot see: a notification or a
	// response the gateway refused. Nil discards.
	Logger *slog.Logger
	// MaxLineBytes bounds one message from the client (0: 16 MiB, as
	// go-sdk's stdio transport); a longer one is skipped and answered
	// -32600 (linerpc.SkipLong, TooLongMessage), as toolgate's own stdio
	// transport does.
	MaxLineBytes int
	// MaxPending bounds the client's messages relayed at once (0:
	// linerpc.MaxPendingCalls, as the gateway's stdio): a call over it is
	// answered linerpc.CodeBusy, another message waits.
	MaxPending int
	// Grace is how long calls still running when the client closes stdin
	// may finish (0: DefaultGrace).
	Grace time.Duration
	// Revive, if set, is called when the gateway refuses the connection
	// (it is not running): once it returns nil the message is sent again,
	// once (it never reached a gateway, so it cannot run twice).
	// `toolgate connect --start` starts the gateway again there.
	Revive func(ctx context.Context) error
	// RestartWait is how long a message waits for a gateway that answered
	// this bridge before and now refuses its connections: one restarting
	// (an upgrade, systemd's restart, a config change that needs one),
	// whose gap was 1.5 s between two toolgate binaries. It is sent again
	// once the gateway takes the connection (a refused connection carried
	// nothing, so it cannot run twice); past RestartWait it is answered
	// that the gateway does not answer. 0: DefaultRestartWait; negative:
	// no wait. Not with Revive, which starts a gateway at once instead.
	RestartWait time.Duration
	// Fix, if set, says what to do about a request that failed for a
	// reason other than the gateway not running ("" when it knows none):
	// toolgate connect words the TLS failures (an untrusted certificate:
	// its --ca) there, which the client then reads instead of "start it".
	Fix func(err error) string
	// Silence is how long a request may get no byte from a gateway that
	// beats (gateway.HeartbeatHeader: it sends a byte of nothing that
	// often while it answers) before its connection is taken as dead (a
	// Wi-Fi gone, a VPN that reconnected, a NAT that forgot it, a sleep):
	// the call is answered CodeUnreachable, and the next one connects
	// anew. 0: SilentBeats of the gateway's beat; negative: never. A
	// gateway that does not say its beat (one older than the heartbeat,
	// or a proxy that drops the header) is pinged after Silence (0:
	// DefaultSilence) with no byte, and again after each Silence the ping
	// was answered: the call is taken as dead only when a ping gets no
	// answer within PingWait, so a long call of a gateway that answers
	// runs on.
	Silence time.Duration
	// PingWait is how long that ping may wait for its answer (0:
	// DefaultPingWait; Silence when that is shorter).
	PingWait time.Duration
	// Down, if set, is said when no gateway answers, in place of "start
	// it (toolgate serve --http ADDR) or check the address": toolgate
	// connect says there how it came to the address (the gateways on the
	// data folder it passed over, and why) and the fix.
	Down string
}

// Error codes of the JSON-RPC errors the bridge answers with itself, in
// the implementation-defined range and clear of the codes MCP and its SDKs
// give a meaning (-32000 and -32001 are the TypeScript SDK's connection
// closed and request timeout, -32002 MCP's resource not found, -32020 to
// -32022 and -32042 go-sdk's): the client takes them as the one call's
// failure and goes on.
const (
	// CodeUnreachable: the gateway did not answer (down, wrong address),
	// or stopped answering during the call.
	CodeUnreachable = -32050
	// CodeRefused: the gateway answered with an HTTP error (a key it
	// refuses, a body over its limit, a profile it does not have).
	CodeRefused = -32051
)

// Run relays between the client on in and out and the gateway at
// opts.URL until in ends (nil) or ctx is done (ctx.Err()). Calls still running when in
// ends get Grace to finish (a script that writes its requests and closes
// stdin reads their answers; a client that leaves is gone), then are
// cancelled, as they are at once when ctx is done or out is closed.
func Run(ctx context.Context, in io.Reader, out io.Writer, opts Options) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	b := &bridge{opts: opts, out: linerpc.NewLineWriter(out), inflight: map[string]context.CancelFunc{}, dogs: map[*watchdog]struct{}{}, gone: cancel, session: newSessionID()}
	if b.opts.Client == nil {
		b.opts.Client = &http.Client{}
	}
	// An https:// gateway is most often a remote one, where waiting for
	// 100 Continue costs a network round trip a message; over HTTP/2 (what
	// Go's client and toolgate's front agree on over TLS) a gateway that
	// stops says which requests it never began (GOAWAY), and Go's client
	// sends those again by itself.
	if u, err := url.Parse(b.opts.URL); err == nil && strings.EqualFold(u.Scheme, "https") {
		b.noExpect.Store(true)
	}
	// Once stopping, the answers that wait for a client that reads no
	// more are given up: a stop waited for them for good.
	context.AfterFunc(ctx, b.out.GiveUp)
	if b.opts.Logger == nil {
		b.opts.Logger = slog.New(slog.DiscardHandler)
	}
	limit := b.opts.MaxLineBytes
	if limit <= 0 {
		limit = 16 << 20
	}
	grace := b.opts.Grace
	if grace <= 0 {
		grace = DefaultGrace
	}
	slept := make(chan struct{})
	go func() { defer close(slept); (*watchSleep.Load())(ctx, b.woke) }()
	defer func() { cancel(); <-slept }()
	// Lines are read on a goroutine of their own, so that ctx ends Run
	// while a read waits (stdin cannot be interrupted).
	type read struct {
		line []byte
		err  error
	}
	reads := make(chan read)
	go func() {
		r := bufio.NewReaderSize(in, 64<<10)
		var long []byte
		for {
			line, err := linerpc.ReadLine(r, &long, limit)
			if errors.Is(err, linerpc.ErrLineTooLong) {
				// Skipped and answered; the client goes on.
				var size int
				var id json.RawMessage
				size, id, err = linerpc.SkipLong(r, line)
				b.write(errorResponse(id, -32600, linerpc.TooLongMessage(size, limit)))
				if err == nil {
					continue
				}
				line = nil
			}
			select {
			case reads <- read{bytes.Clone(line), err}:
			case <-ctx.Done():
				return
			}
			if err != nil {
				return
			}
		}
	}()
	var wg sync.WaitGroup
	// At most MaxPending messages are relayed at once, as the
	// gateway's own stdio holds: a client that sent calls and read no
	// answers had every one relayed and its answer held (200,000 searches:
	// past 1.4 GB in a minute, and as much in the gateway).
	maxPending := b.opts.MaxPending
	if maxPending <= 0 {
		maxPending = linerpc.MaxPendingCalls
	}
	slots := make(chan struct{}, maxPending)
	for {
		var rd read
		select {
		case rd = <-reads:
		case <-ctx.Done():
			wg.Wait() // the calls' requests end with ctx
			if b.clientGone.Load() {
				return nil // the client closed its end: as an end of stdin
			}
			return ctx.Err()
		}
		if len(bytes.TrimSpace(rd.line)) > 0 && b.slot(ctx, slots, rd.line) {
			wg.Go(func() {
				defer func() { <-slots }()
				b.relay(ctx, rd.line)
			})
		}
		if rd.err == nil {
			continue
		}
		done := make(chan struct{})
		go func() { wg.Wait(); close(done) }()
		select {
		case <-done:
		case <-ctx.Done():
		case <-time.After(grace):
		}
		cancel()
		wg.Wait()
		if errors.Is(rd.err, io.EOF) {
			return nil
		}
		return fmt.Errorf("read the client's messages: %w", rd.err)
	}
}

// SilentBeats is how many of the gateway's beats a request may miss
// before its connection is taken as dead (Options.Silence).
const SilentBeats = 3

// DefaultSilence is Options.Silence's default for a gateway that says no
// beat: three of the default beat's, as for one that says it.
const DefaultSilence = SilentBeats * gateway.DefaultHeartbeat

// DefaultPingWait is Options.PingWait's default.
const DefaultPingWait = 10 * time.Second

// DefaultRestartWait is Options.RestartWait's default.
const DefaultRestartWait = 5 * time.Second

// DefaultGrace is Options.Grace's default: what go-sdk's CommandTransport
// waits after closing a server's stdin before it sends SIGTERM.
const DefaultGrace = 5 * time.Second

type bridge struct {
	opts       Options
	gone       context.CancelFunc // the client closed its end of out: cancel everything
	clientGone atomic.Bool        // … and gone was called for it
	refusing   bool               // the last call was answered busy (slot; Run's loop only)

	out *linerpc.LineWriter

	mu       sync.Mutex
	version  string // MCP-Protocol-Version agreed in initialize
	session  string // Mcp-Session-Id: the gateway's if it gives one, else the bridge's own
	initID   string // the initialize request's id
	agent    string // User-Agent: the client's name and version, from initialize
	inflight map[string]context.CancelFunc
	dogs     map[*watchdog]struct{} // of the requests in flight

	// answered says the gateway has answered this bridge (a connection
	// it refuses later is a restart: awaitRestart).
	answered atomic.Bool
	// beat is how often the gateway sends a byte while it answers, as it
	// said last (gateway.HeartbeatHeader), 0 while it has not.
	beat atomic.Int64
	// noExpect says messages go without "Expect: 100-continue" (post):
	// to an https:// gateway, and once a proxy on the way answered 417.
	noExpect atomic.Bool
}

// silentError ends a request that got no byte for a while from a gateway
// that beats: its connection is dead.
type silentError struct {
	silence, beat time.Duration
	woke          bool          // the silence was after a sleep of the machine's
	pinged        time.Duration // no beat: a ping got no answer for this long
}

func (e silentError) Error() string {
	if e.beat == 0 {
		if e.woke {
			return fmt.Sprintf("this machine woke from a sleep, and the gateway did not answer a ping within %s: the connection to it died in the sleep", e.pinged)
		}
		return fmt.Sprintf("it sent nothing for %s and did not answer a ping within %s: the connection to it is dead (the network dropped: Wi-Fi, VPN, a sleep)", e.silence, e.pinged)
	}
	if e.woke {
		return fmt.Sprintf("it sent nothing for %s after this machine woke from a sleep, though it sends a byte every %s while it answers: the connection to it died in the sleep", e.silence, e.beat)
	}
	return fmt.Sprintf("it sent nothing for %s, though it sends a byte every %s while it answers: the connection to it is dead (the network dropped: Wi-Fi, VPN, a sleep)", e.silence, e.beat)
}

// watchdog ends a request (cancel) once it got nothing for a while.
type watchdog struct {
	t     *time.Timer
	after time.Duration
	woke  atomic.Bool
}

// watch returns the watchdog of a request (ctx), or nil when
// Options.Silence is negative. It is known to woke while the request
// lasts (stop). Of a gateway that has not said it beats, it pings the
// gateway once the request got nothing for Silence (at once after a
// wake), and ends the request only when the ping gets no answer. Which
// of the two is the gateway's last word at the time (a gateway restarted
// as an older version says no beat any more).
func (b *bridge) watch(ctx context.Context, cancel context.CancelCauseFunc) *watchdog {
	beat := time.Duration(b.beat.Load())
	after := b.opts.Silence
	if after < 0 {
		return nil
	}
	if after == 0 {
		after = DefaultSilence
		if beat > 0 {
			after = SilentBeats * beat
		}
	}
	w := &watchdog{after: after}
	w.t = time.AfterFunc(after, func() {
		beat := time.Duration(b.beat.Load())
		se := silentError{silence: after, beat: beat}
		if w.woke.Load() {
			se.silence, se.woke = wakeSilence(after, beat), true
		}
		if beat == 0 {
			se.pinged = min(after, cmp.Or(b.opts.PingWait, DefaultPingWait))
			if b.answersPing(ctx, se.pinged) {
				if ctx.Err() == nil {
					w.touch() // alive: another Silence
				}
				return
			}
		}
		cancel(se)
	})
	b.mu.Lock()
	b.dogs[w] = struct{}{}
	b.mu.Unlock()
	return w
}

// wakeSilence is how long a request may get nothing after the machine
// woke: a connection that lived through the sleep has the gateway's next
// beat within one beat; a gateway that says no beat is pinged at once.
func wakeSilence(after, beat time.Duration) time.Duration { return min(after, 2*beat) }

// answersPing reports whether the gateway answers an MCP ping within
// wait, on a connection made now (the kept ones went through the network
// that may have dropped): an answer of any kind (an error status, or a
// gateway of protocol 2026-07-28 that refuses "ping") says it is
// reachable. ctx is the request's: a ping for a request that ended is not
// waited for.
func (b *bridge) answersPing(ctx context.Context, wait time.Duration) bool {
	if ctx.Err() != nil {
		return true // the request ended: nothing to watch
	}
	b.opts.Client.CloseIdleConnections()
	pctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	resp, err := b.ping(pctx, "toolgate-connect-ping")
	if err != nil {
		if ctx.Err() != nil {
			return true
		}
		b.opts.Logger.Info("the gateway, silent during a call, did not answer a ping", "wait", wait, "err", err)
		return false
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	resp.Body.Close()
	return true
}

// touch says a byte came: the silence starts again.
func (w *watchdog) touch() {
	if w != nil {
		w.woke.Store(false)
		w.t.Reset(w.after)
	}
}

// stop stops w (while a gateway is started, or for good: done).
func (w *watchdog) stop() {
	if w != nil {
		w.t.Stop()
	}
}

// done stops w for good.
func (b *bridge) done(w *watchdog) {
	if w == nil {
		return
	}
	w.stop()
	b.mu.Lock()
	delete(b.dogs, w)
	b.mu.Unlock()
}

// woke is told that the machine woke from a sleep (sleepwatch): the
// connections kept for the next requests most often died in it (a Wi-Fi
// joined again, a NAT that forgot them) and are closed, and a request in
// flight gets the gateway's next beat soon or is taken as dead, rather
// than after the rest of its Silence (its timer stood still in the sleep).
func (b *bridge) woke(slept time.Duration) {
	b.opts.Logger.Info("the machine slept, or its clock was set: connecting to the gateway anew", "slept", slept.Round(time.Second))
	b.opts.Client.CloseIdleConnections()
	b.mu.Lock()
	defer b.mu.Unlock()
	for w := range b.dogs {
		w.woke.Store(true)
		w.t.Reset(wakeSilence(w.after, time.Duration(b.beat.Load())))
	}
}

// watchSleep is sleepwatch.Watch (a test wakes the bridge itself).
var watchSleep atomic.Pointer[func(context.Context, func(time.Duration))]

func init() {
	w := sleepwatch.Watch
	watchSleep.Store(&w)
}

// touchReader touches a watchdog at each read that carried bytes.
type touchReader struct {
	io.Reader
	w *watchdog
}

func (r touchReader) Read(p []byte) (int, error) {
	n, err := r.Reader.Read(p)
	if n > 0 {
		r.w.touch()
	}
	return n, err
}

// silent is the silentError that ended ctx, if one did.
func silent(ctx context.Context) (silentError, bool) {
	var se silentError
	ok := errors.As(context.Cause(ctx), &se)
	return se, ok
}

// dead says the call's connection died (ctx ended by its watchdog): the
// connections kept for the next calls went through the same network, so
// they are closed, and the next call connects anew.
func (b *bridge) dead(env envelope, isCall bool, se silentError) {
	b.opts.Client.CloseIdleConnections()
	b.fail(env, isCall, CodeUnreachable, fmt.Sprintf("toolgate at %s stopped answering during the call: %s; it may have run: check before calling again (the next call connects anew)", b.opts.URL, se))
}

// envelope is what the bridge reads of a message: enough to tell a request
// (method and id) from a notification (method) and a response (id).
type envelope struct {
	ID     json.RawMessage `json:"id,omitempty"`
	Method string          `json:"method,omitempty"`
	Params json.RawMessage `json:"params,omitempty"`
	Result json.RawMessage `json:"result,omitempty"`
}

// call reports whether the message is a request with an id.
func (e envelope) call() bool {
	return e.Method != "" && len(e.ID) > 0 && string(e.ID) != "null"
}

// relay sends one message of the client's to the gateway and writes back
// what it answers.
func (b *bridge) relay(ctx context.Context, msg []byte) {
	var env envelope
	if err := json.Unmarshal(msg, &env); err != nil {
		if t := bytes.TrimSpace(msg); bytes.HasPrefix(t, []byte("[")) && json.Valid(t) {
			// A batch (JSON-RPC allows them before protocol 2025-06-18) is
			// JSON: "parse error: cannot unmarshal array" misled.
			b.write(errorResponse(nil, -32600, "invalid request: toolgate connect does not relay JSON-RPC batches: send each message on a line of its own"))
			return
		}
		// Not JSON-RPC: the gateway would say so, but with no id to
		// answer to; say it here.
		b.write(errorResponse(nil, -32700, "parse error: "+err.Error()))
		return
	}
	isCall := env.call()
	if !isCall && linerpc.CallMethod(env.Method) {
		// The gateway takes it for a notification: its 400 reached only
		// the log, and the client waited for good. Answered as
		// toolgate's own stdio answers it.
		b.write(errorResponse(nil, -32600, linerpc.MissingID(env.Method)))
		return
	}
	id := string(env.ID)
	if isCall {
		var cancel context.CancelFunc
		ctx, cancel = context.WithCancel(ctx)
		b.mu.Lock()
		b.inflight[id] = cancel
		if env.Method == "initialize" {
			b.initID = id
			b.agent = userAgent(env.Params)
		}
		b.mu.Unlock()
		defer func() {
			b.mu.Lock()
			delete(b.inflight, id)
			b.mu.Unlock()
			cancel()
		}()
	}
	if env.Method == "notifications/cancelled" {
		b.cancelled(env.Params)
	}

	// The request's own context: ended by the client's (a cancel, the
	// client gone) and by its watchdog.
	callCtx := ctx
	ctx, cancelReq := context.WithCancelCause(ctx)
	defer cancelReq(nil)
	// wrote says the message reached a connection to the gateway whole (a
	// refused connection carried none).
	var wrote atomic.Bool
	ctx = httptrace.WithClientTrace(ctx, &httptrace.ClientTrace{WroteRequest: func(i httptrace.WroteRequestInfo) {
		if i.Err == nil {
			wrote.Store(true)
		}
	}})
	wd := b.watch(ctx, cancelReq)
	defer b.done(wd)
	resp, err := b.post(ctx, msg, env)
	if err != nil && closedUnsent(err) && ctx.Err() == nil {
		// The gateway closed the connection before it took the message:
		// one stopping (a restart, an upgrade) closes its idle connections
		// and drops a request it has read and not begun, and a proxy
		// closes an idle one. It never ran: sent again, on a new
		// connection (the closed one is dropped).
		b.opts.Logger.Info("the gateway closed the connection before it took the message (stopping, or an idle connection closed): sending it again", "url", b.opts.URL, "err", unwrap(err))
		resp, err = b.post(ctx, msg, env)
	}
	var reviveErr error
	if err != nil && b.opts.Revive != nil && errors.Is(err, syscall.ECONNREFUSED) && ctx.Err() == nil {
		wd.stop() // starting a gateway is no silence of one
		if reviveErr = b.opts.Revive(ctx); reviveErr == nil {
			wd.touch()
			resp, err = b.post(ctx, msg, env)
		}
	}
	waited := time.Duration(0)
	if err != nil && b.opts.Revive == nil && b.opts.RestartWait >= 0 && restarting(err) && b.answered.Load() {
		resp, waited, err = b.awaitRestart(ctx, msg, env, err)
	}
	if err != nil {
		if se, ok := silent(ctx); ok && callCtx.Err() == nil {
			b.dead(env, isCall, se)
			return
		}
		if ctx.Err() != nil {
			return // cancelled by the client, or the client is gone
		}
		down := "start it (toolgate serve --http ADDR) or check the address given to toolgate connect"
		if waited > 0 {
			how := "refused connections"
			if closedUnsent(err) {
				how = "closed each connection before taking the message"
			}
			down = fmt.Sprintf("it answered before and has %s for %s since (stopped, or a restart that failed): %s", how, waited.Round(100*time.Millisecond), down)
		}
		if b.opts.Down != "" {
			down = b.opts.Down
		}
		why := fmt.Sprintf("toolgate at %s does not answer: %v; %s", b.opts.URL, unwrap(err), down)
		switch {
		case !isCall || !wrote.Load() || unsent(err):
		case errors.Is(err, syscall.ETIMEDOUT):
			// TCP keepalive found the call's connection dead (a NAT that
			// forgot it, an address gone with the Wi-Fi): the kept ones
			// went through the same network.
			b.opts.Client.CloseIdleConnections()
			why = fmt.Sprintf("toolgate at %s does not answer: the connection to it died during the call (%v: the network dropped), which may have run: check before calling again (the next call connects anew)", b.opts.URL, unwrap(err))
		case closedOn(err):
			// It took the call and closed the connection without a byte of
			// answer: a gateway killed or out of memory mid-call (before
			// its first beat), or one stopping; or a tunnel (ssh -L,
			// kubectl port-forward) whose gateway is down.
			why = fmt.Sprintf("toolgate at %s does not answer: it closed the connection after the request without an answer (%v): it stopped or crashed during the call, which may have run: check before calling again; or it is down behind a tunnel or proxy: %s", b.opts.URL, unwrap(err), down)
		}
		if fix := b.fix(err); fix != "" {
			why = fmt.Sprintf("toolgate at %s answers, but the TLS handshake failed: %v: %s", b.opts.URL, unwrap(err), fix)
		}
		if reviveErr != nil {
			why = fmt.Sprintf("toolgate at %s does not answer (%v), and starting it failed: %v", b.opts.URL, unwrap(err), reviveErr)
		}
		b.fail(env, isCall, CodeUnreachable, why)
		return
	}
	defer resp.Body.Close()
	b.answered.Store(true)
	wd.touch()
	// Each MCP answer says the gateway's beat, or none (one restarted as
	// a version older than the heartbeat): the last word holds. An error
	// status (a refused key, a proxy's 502) says nothing of it.
	beat, err := time.ParseDuration(resp.Header.Get(gateway.HeartbeatHeader))
	if err != nil || beat < 0 {
		beat = 0
	}
	if resp.StatusCode >= 300 {
		beat = time.Duration(b.beat.Load())
	}
	if old := b.beat.Swap(int64(beat)); old != int64(beat) && beat > 0 && b.opts.Silence > 0 && b.opts.Silence <= beat {
		b.opts.Logger.Warn("the silence limit is not above the gateway's beat: a call that runs longer than a beat is taken for dead; give three of its beats", "silence", b.opts.Silence, "beat", beat, "want", SilentBeats*beat)
	}
	if wd != nil {
		resp.Body = struct {
			io.Reader
			io.Closer
		}{touchReader{resp.Body, wd}, resp.Body}
	}
	if resp.StatusCode >= 300 {
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
		if isCall && isErrorFor(body, env.ID) {
			// The gateway's own JSON-RPC error (an unsupported protocol
			// version, with the versions it supports): the client acts
			// on its code, so it goes as it is.
			b.write(body)
			return
		}
		b.fail(env, isCall, CodeRefused, b.refusal(resp, body))
		return
	}
	if sid := resp.Header.Get("Mcp-Session-Id"); sid != "" {
		b.mu.Lock()
		b.session = sid
		b.mu.Unlock()
	}
	ct, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type"))
	answered := false
	var readErr error
	switch ct {
	case "text/event-stream":
		answered, readErr = b.events(resp.Body, env.ID)
	case "application/json":
		var body []byte
		if body, readErr = io.ReadAll(resp.Body); readErr == nil && len(bytes.TrimSpace(body)) > 0 {
			answered = b.deliver(body, env.ID)
		}
	default:
		// 202 Accepted for a notification or a response: nothing to pass on.
		if isCall {
			b.fail(env, isCall, CodeRefused, fmt.Sprintf("toolgate at %s answered %s with no JSON-RPC response (Content-Type %q): is it a toolgate gateway's MCP endpoint? check the address", b.opts.URL, resp.Status, ct))
		}
		return
	}
	if se, ok := silent(ctx); ok && !answered && callCtx.Err() == nil {
		b.dead(env, isCall, se)
		return
	}
	if isCall && !answered && ctx.Err() == nil {
		// The stream ended before the call's answer (the gateway stopped
		// mid-call): the client would wait for it forever.
		if refused, ok := b.keyRefused(callCtx); ok {
			b.fail(env, isCall, CodeRefused, refused+"; it ended the call, which may have run: check before calling again")
			return
		}
		why := "the answer ended before the call's response"
		if readErr != nil {
			why = readErr.Error()
		}
		b.fail(env, isCall, CodeUnreachable, fmt.Sprintf("toolgate at %s stopped answering during the call (%s); it may have run: check before calling again", b.opts.URL, why))
	}
}

// keyRefused asks the gateway, when a call's answer ended before its
// response, whether it still takes the key: one revoked or expired while
// the call ran ends it (the gateway checks again the keys of the requests
// it runs, gateway.DefaultKeyRecheck), which the client was told as the
// gateway stopping. It returns what the gateway's refusal says, and the
// fix, when it refuses the key now.
func (b *bridge) keyRefused(ctx context.Context) (string, bool) {
	if b.opts.Key == "" {
		return "", false
	}
	resp, err := b.ping(ctx, "toolgate-connect-key")
	if err != nil {
		return "", false
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		return "", false
	}
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	return b.refusal(resp, body), true
}

// ping sends the gateway an MCP ping of the bridge's own, with id.
func (b *bridge) ping(ctx context.Context, id string) (*http.Response, error) {
	env := envelope{ID: json.RawMessage(strconv.Quote(id)), Method: "ping"}
	return b.post(ctx, []byte(`{"jsonrpc":"2.0","id":`+string(env.ID)+`,"method":"ping"}`), env)
}

// awaitRestart sends msg again, at growing intervals (50 ms up to 500 ms)
// for up to Options.RestartWait, while the gateway, which answered before,
// is restarting (err): until it takes the message, its answer or its
// error then returned, or the wait is over (err, and how long it waited).
func (b *bridge) awaitRestart(ctx context.Context, msg []byte, env envelope, err error) (*http.Response, time.Duration, error) {
	wait := b.opts.RestartWait
	if wait == 0 {
		wait = DefaultRestartWait
	}
	start := time.Now()
	b.opts.Logger.Info("the gateway does not take messages (restarting?): waiting for it to come back", "url", b.opts.URL, "wait", wait, "err", unwrap(err))
	for delay := 50 * time.Millisecond; ; delay = min(2*delay, 500*time.Millisecond) {
		left := wait - time.Since(start)
		if left <= 0 {
			return nil, time.Since(start), err
		}
		t := time.NewTimer(min(delay, left))
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return nil, time.Since(start), ctx.Err()
		}
		resp, err2 := b.post(ctx, msg, env)
		if err2 == nil || !restarting(err2) {
			b.opts.Logger.Info("the gateway takes messages again", "url", b.opts.URL, "after", time.Since(start).Round(time.Millisecond))
			return resp, 0, err2
		}
		err = err2
	}
}

// restarting reports whether err is what a gateway restarting gives a
// message: a refused connection, or one it closed before it took the
// message (closedUnsent); either carried nothing, so the message is sent
// again.
func restarting(err error) bool {
	return errors.Is(err, syscall.ECONNREFUSED) || closedUnsent(err)
}

// unsentError is a message whose request failed before the transport read
// a byte of its body: the gateway never had it, so it cannot have run.
type unsentError struct{ error }

func (e unsentError) Unwrap() error { return e.error }

// unsent reports whether err is a message's that was never sent.
func unsent(err error) bool { return errors.As(err, new(unsentError)) }

// closedUnsent reports whether err is a connection the gateway closed (or
// reset) before it took the message's body. A gateway stopping closes its
// idle connections (one the bridge had just sent a request on) and
// net/http drops a request it read while stopping without running it,
// which the bridge would otherwise tell from a crash during the call only
// by the body: it waits for the gateway's 100 Continue before sending it.
func closedUnsent(err error) bool { return unsent(err) && closedOn(err) }

// trackedBody is a message's body that notes whether the transport read
// it.
type trackedBody struct {
	*bytes.Reader
	read *atomic.Bool
}

func (t trackedBody) Read(p []byte) (int, error) {
	t.read.Store(true)
	return t.Reader.Read(p)
}

func (t trackedBody) Close() error { return nil }

// post sends msg (env) to the gateway with the headers of streamable HTTP:
// the protocol version (the one msg names in its _meta, else the one agreed
// in initialize) and, from protocol 2026-07-28 on, the method and name the
// body carries (Mcp-Method, Mcp-Name), which the gateway checks.
//
// The body goes once the gateway says 100 Continue (it reads it when it
// begins the request): a connection closed before that carried no message
// (unsentError), which is then sent again rather than answered that it
// may have run.
func (b *bridge) post(ctx context.Context, msg []byte, env envelope) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, b.opts.URL, nil)
	if err != nil {
		return nil, err
	}
	var read atomic.Bool
	req.Body = trackedBody{bytes.NewReader(msg), &read}
	req.GetBody = func() (io.ReadCloser, error) { return trackedBody{bytes.NewReader(msg), &read}, nil }
	req.ContentLength = int64(len(msg))
	expect := !b.noExpect.Load()
	if expect {
		req.Header.Set("Expect", "100-continue")
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	version := metaVersion(env.Params)
	b.mu.Lock()
	if version == "" {
		version = b.version
	}
	if version != "" {
		req.Header.Set("MCP-Protocol-Version", version)
	}
	if version >= standardHeadersFrom && env.Method != "" {
		req.Header.Set("Mcp-Method", env.Method)
		if name, ok := nameOf(env); ok {
			req.Header.Set("Mcp-Name", name)
		}
	}
	if b.session != "" && env.Method != "initialize" {
		// toolgate's stateless front issues none: the bridge's own names
		// its one client across requests (the gateway learns from a
		// session's search then call, and the audit log says the session).
		req.Header.Set("Mcp-Session-Id", b.session)
	}
	agent := b.agent
	b.mu.Unlock()
	if agent == "" { // a 2026-07-28 client names itself in each request's _meta
		if agent = userAgent(env.Params); agent != "" {
			b.mu.Lock()
			b.agent = agent
			b.mu.Unlock()
		}
	}
	req.Header.Set("User-Agent", cmp.Or(agent, "toolgate-connect"))
	if b.opts.Key != "" {
		req.Header.Set("Authorization", "Bearer "+b.opts.Key)
	}
	resp, err := b.opts.Client.Do(req)
	if err != nil && !read.Load() {
		err = unsentError{err}
	}
	if err == nil && expect && resp.StatusCode == http.StatusExpectationFailed {
		// A proxy that does not take the expectation (an HTTP/1.0 one)
		// refused the message before its body (RFC 9110, 10.1.1): sent
		// again without it, as every message from now on.
		resp.Body.Close()
		b.noExpect.Store(true)
		b.opts.Logger.Warn("a proxy on the way to the gateway refuses \"Expect: 100-continue\": sending without it (a message whose connection closes before an answer is then said to have maybe run)", "url", b.opts.URL)
		return b.post(ctx, msg, env)
	}
	return resp, err
}

// events writes each message of an SSE stream, until it ends, and reports
// whether the response to id was among them.
func (b *bridge) events(body io.Reader, id json.RawMessage) (answered bool, err error) {
	sc := bufio.NewScanner(body)
	sc.Buffer(make([]byte, 64<<10), 64<<20)
	var data []byte
	for sc.Scan() {
		line := sc.Bytes()
		switch {
		case len(line) == 0: // the event's end
			if len(data) > 0 {
				answered = b.deliver(data, id) || answered
				data = nil
			}
		case bytes.HasPrefix(line, []byte("data:")):
			v := bytes.TrimPrefix(bytes.TrimPrefix(line, []byte("data:")), []byte(" "))
			if data != nil {
				data = append(data, '\n')
			}
			data = append(data, v...)
		}
	}
	if len(data) > 0 {
		answered = b.deliver(data, id) || answered
	}
	return answered, sc.Err()
}

// deliver writes one message of the gateway's to the client, noting the
// protocol version of the answer to initialize, and reports whether it is
// the response to id.
func (b *bridge) deliver(msg []byte, id json.RawMessage) bool {
	var env envelope
	ok := json.Unmarshal(msg, &env) == nil
	if ok && env.Method == "" && len(env.Result) > 0 {
		b.mu.Lock()
		if string(env.ID) == b.initID && b.initID != "" {
			var r struct {
				ProtocolVersion string `json:"protocolVersion"`
			}
			if json.Unmarshal(env.Result, &r) == nil && r.ProtocolVersion != "" {
				b.version = r.ProtocolVersion
			}
		}
		b.mu.Unlock()
	}
	b.write(msg)
	return ok && env.Method == "" && len(id) > 0 && bytes.Equal(env.ID, id)
}

// write writes msg to the client on one line.
func (b *bridge) write(msg []byte) {
	var line bytes.Buffer
	if err := json.Compact(&line, msg); err != nil {
		line.Reset()
		line.Write(bytes.ReplaceAll(msg, []byte("\n"), nil))
	}
	if err := b.out.WriteLine(line.Bytes()); err != nil {
		if errors.Is(err, linerpc.ErrGaveUp) {
			return // stopping
		}
		if !errors.Is(err, syscall.EPIPE) && !errors.Is(err, io.ErrClosedPipe) {
			b.opts.Logger.Warn("cannot write to the client; stopping", "err", err)
		}
		b.clientGone.Store(true)
		b.gone()
	}
}

// slot takes a relay slot for line, and reports whether line is to be
// relayed: a call that finds every slot taken is answered busy at once
// (linerpc.CodeBusy, as the gateway's stdio answers), and another message
// waits for a slot (a cancellation is not dropped), as long as ctx lasts.
func (b *bridge) slot(ctx context.Context, slots chan struct{}, line []byte) bool {
	select {
	case slots <- struct{}{}:
		b.refusing = false
		return true
	default:
	}
	var env envelope
	if json.Unmarshal(line, &env) == nil && env.call() {
		if !b.refusing {
			b.opts.Logger.Warn("the stdio client sends calls faster than it reads their answers: more are answered busy (-32052) until it reads", "unanswered", cap(slots))
		}
		b.refusing = true
		b.write(errorResponse(env.ID, linerpc.CodeBusy, linerpc.BusyMessage(1, cap(slots))))
		return false
	}
	b.refusing = false
	select {
	case slots <- struct{}{}:
		return true
	case <-ctx.Done():
		return false
	}
}

// cancelled ends the POST of the call the client cancelled: the gateway
// ends a call whose request goes (and the notification goes on to it too).
func (b *bridge) cancelled(params json.RawMessage) {
	var p struct {
		RequestID json.RawMessage `json:"requestId"`
	}
	if json.Unmarshal(params, &p) != nil {
		return
	}
	b.mu.Lock()
	cancel := b.inflight[string(p.RequestID)]
	b.mu.Unlock()
	if cancel != nil {
		cancel()
	}
}

// fail answers a call with a JSON-RPC error; a notification or a response
// has no one to answer, so the log says it.
func (b *bridge) fail(env envelope, isCall bool, code int, msg string) {
	if isCall {
		b.write(errorResponse(env.ID, code, msg))
		return
	}
	what := "a notification (" + env.Method + ")"
	if env.Method == "" {
		what = "a response to the gateway's request " + string(env.ID)
	}
	b.opts.Logger.Warn("the gateway did not take "+what, "err", msg)
}

// refusal says why the gateway answered with an HTTP error, and the fix.
func (b *bridge) refusal(resp *http.Response, body []byte) string {
	if resp.StatusCode == http.StatusGatewayTimeout {
		// Not the gateway's (it answers none): a reverse proxy's or load
		// balancer's, past its read timeout; its page says only that.
		by := ""
		if m := proxyName.FindSubmatch(body); m != nil {
			by = " (" + string(m[1]) + ")"
		}
		return fmt.Sprintf("toolgate at %s answered %s%s: a proxy in front of the gateway gave up waiting for the answer; the call may have run: check before calling again. "+
			"Raise the proxy's read timeout above the server's callTimeout (nginx: proxy_read_timeout), and keep the gateway's beat (toolgate.http.heartbeat) below it", b.opts.URL, resp.Status, by)
	}
	text := strings.TrimSpace(string(body))
	if len(text) > 300 {
		text = text[:300] + "…"
	}
	msg := fmt.Sprintf("toolgate at %s answered %s", b.opts.URL, resp.Status)
	if text != "" {
		msg += ": " + text
	}
	keyEnv := b.opts.KeyEnv
	if keyEnv == "" {
		keyEnv = "the API key"
	}
	switch resp.StatusCode {
	case http.StatusUnauthorized:
		fix := gateway.NeedsKeyFix(keyEnv)
		own := gateway.OwnKeyRefusal(resp)
		if b.opts.Key != "" {
			said := ""
			if own {
				said = string(body)
			}
			fix = gateway.KeyRefusedFix(keyEnv, said)
		}
		if own {
			return fmt.Sprintf("toolgate at %s answered %s: %s", b.opts.URL, resp.Status, fix)
		}
		return msg + " (" + fix + ")"
	case http.StatusNotFound:
		return msg + " (check the address: the MCP endpoint is /mcp, or /profiles/NAME/mcp for a profile the gateway's config has)"
	case http.StatusBadRequest:
		if gateway.PlainToHTTPS(body) {
			return msg + " (the gateway serves HTTPS, toolgate.http.tls: give --addr https://HOST:PORT, or --config FILE of that gateway, which also trusts its certificate)"
		}
	}
	return msg
}

// proxyName finds the server a proxy's HTML error page names
// ("<center>nginx/1.22.1</center>").
var proxyName = regexp.MustCompile(`<center>([A-Za-z][\w.-]*(?:/[\w.-]+)?)</center>`)

// newSessionID is the session ID a bridge sends until the gateway gives
// one: "connect-" and 16 random hex digits.
func newSessionID() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return "connect-" + hex.EncodeToString(b[:])
}

// userAgent names the client of an initialize request's params, or of a
// 2026-07-28 request's _meta, for the gateway's audit log (its `client`
// when the request names none): "claude-ai/0.1.0 (toolgate connect)"; ""
// when params name none.
func userAgent(params json.RawMessage) string {
	type impl struct{ Name, Version string }
	var p struct {
		ClientInfo impl `json:"clientInfo"`
		Meta       struct {
			ClientInfo impl `json:"io.modelcontextprotocol/clientInfo"`
		} `json:"_meta"`
	}
	if json.Unmarshal(params, &p) != nil {
		return ""
	}
	ci := p.ClientInfo
	if ci.Name == "" {
		ci = p.Meta.ClientInfo
	}
	if ci.Name == "" {
		return ""
	}
	return strings.TrimSpace(ci.Name+"/"+ci.Version) + " (toolgate connect)"
}

// standardHeadersFrom is the first protocol version whose requests carry
// Mcp-Method and Mcp-Name (SEP-2243).
const standardHeadersFrom = "2026-07-28"

// nameOf is what Mcp-Name repeats of a request: the tool's or prompt's
// name, the resource's URI.
func nameOf(env envelope) (string, bool) {
	var p struct {
		Name string `json:"name"`
		URI  string `json:"uri"`
	}
	if json.Unmarshal(env.Params, &p) != nil {
		return "", false
	}
	switch env.Method {
	case "tools/call", "prompts/get":
		return p.Name, true
	case "resources/read":
		return p.URI, true
	}
	return "", false
}

// metaVersion is the protocol version a request of protocol 2026-07-28 or
// later names in its params' _meta (SEP-2575), or "".
func metaVersion(params json.RawMessage) string {
	var p struct {
		Meta map[string]json.RawMessage `json:"_meta"`
	}
	if json.Unmarshal(params, &p) != nil {
		return ""
	}
	var v string
	_ = json.Unmarshal(p.Meta["io.modelcontextprotocol/protocolVersion"], &v)
	return v
}

// isErrorFor reports whether body is a JSON-RPC error response to id.
func isErrorFor(body []byte, id json.RawMessage) bool {
	var r struct {
		ID    json.RawMessage `json:"id"`
		Error json.RawMessage `json:"error"`
	}
	return json.Unmarshal(body, &r) == nil && len(r.Error) > 0 && bytes.Equal(bytes.TrimSpace(r.ID), bytes.TrimSpace(id))
}

// errorResponse is a JSON-RPC error response to id.
func errorResponse(id json.RawMessage, code int, msg string) []byte {
	if len(id) == 0 {
		id = json.RawMessage("null")
	}
	b, _ := json.Marshal(struct {
		JSONRPC string          `json:"jsonrpc"`
		ID      json.RawMessage `json:"id"`
		Error   struct {
			Code    int    `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
	}{JSONRPC: "2.0", ID: id, Error: struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
	}{code, msg}})
	return b
}

// fix is Options.Fix of err, or "".
func (b *bridge) fix(err error) string {
	if b.opts.Fix == nil {
		return ""
	}
	return b.opts.Fix(err)
}

// unwrap keeps the cause of a client error (connection refused) without
// the method and URL, which the message says already.
func unwrap(err error) error {
	if r, ok := proxyenv.Refused(err); ok {
		return r.Error(err) // nothing listens at …, not Go's connect: …
	}
	if errors.Is(err, io.ErrUnexpectedEOF) {
		// net/http's "transport connection broken: unexpected EOF": the
		// connection closed after the gateway's 100 Continue, before its
		// answer (the body was sent), as any close before an answer.
		return io.EOF
	}
	var op *net.OpError
	if errors.As(err, &op) && op.Err != nil {
		return op.Err
	}
	var ue *url.Error
	if errors.As(err, &ue) && ue.Err != nil {
		return ue.Err
	}
	return err
}

// closedOn reports whether err is a connection the gateway closed (or
// reset) before a byte of its answer.
func closedOn(err error) bool {
	return errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, syscall.ECONNRESET)
}
