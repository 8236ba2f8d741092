package backend

import (
	"bytes"
	"cmp"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolgate/toolgate/gateway/config"
	"github.com/toolgate/toolgate/index/catalog"
	"github.com/toolgate/toolgate/internal/jsonwords"
	"github.com/toolgate/toolgate/internal/linerpc"
	"github.com/toolgate/toolgate/internal/mask"
	"github.com/toolgate/toolgate/internal/oneline"
	"github.com/toolgate/toolgate/internal/plural"
	"github.com/toolgate/toolgate/internal/proxyenv"
	"github.com/toolgate/toolgate/internal/tlsfiles"
	"github.com/toolgate/toolgate/internal/tracemeta"
)

// maxDescription caps a tool description; longer ones are cut (with a warning).
const maxDescription = catalog.MaxDescription

// maxEmptyPages is how many tools/list pages in a row may bring no tool
// before listTools stops asking: a server whose cursor runs past its end
// (an offset that grows forever) would otherwise be asked until the
// timeout, with the CPU busy, and then be reported as not speaking MCP.
const maxEmptyPages = 100

// exitWait is how long a broken connection waits for the process's exit
// status, so that errors can say how it ended. The wait is short unless the
// process lives on; under a reaper the exit comes once the backend's
// leftovers are gone (reaperLeftoverGrace). A variable for the tests that
// check the exit's words (waitExits): on a loaded machine a reaper's exit
// came more than a second after the EOF.
var exitWait = time.Second

var (
	errStopping = errors.New("backend is stopping")
	errStopped  = errors.New("stopped")
	// Causes of a backend's end by Reconfigure.
	errRemoved  = errors.New("it was removed from the config")
	errReplaced = errors.New("its config entry changed and it is restarting with the new one")
	// errRestarted ends a backend that Pool.Restart replaced; it is an
	// errReplaced (a call made meanwhile goes to the new backend).
	errRestarted error = restartedError{}
)

// configError marks a failure that a restart cannot fix (command not found,
// bad cwd, bad URL): the backend stays down until the config changes.
type configError struct{ error }

func (e configError) Unwrap() error { return e.error }

// loginError marks a failure that only a login fixes (`toolgate auth
// login`): the backend waits for its stored login to change instead of
// restarting. err is the Authorizer's ("needs a login: run `…` (why)").
type loginError struct {
	server string
	err    error
}

func (e *loginError) Error() string  { return fmt.Sprintf("backend %q %v", e.server, e.err) }
func (e *loginError) Unwrap() error  { return e.err }
func (e *loginError) forKey() string { return fmt.Sprintf("backend %q %s", e.server, ErrForKey(e.err)) }

// loginWords is the Authorizer's error for a server that wants a login
// (oauth.NeedsLoginError: "needs a login: " and its Fix) with the
// gateway's words kept apart from the fix (OwnWords), which an API key
// that is not admin reads hidden: a command that names the config file
// and the data folder, and why, which may quote the authorization server
// or the server's URL. An error without a Fix stays as it is.
func loginWords(err error) error {
	var f interface{ Fix() string }
	if !errors.As(err, &f) {
		return err
	}
	return &OwnWords{Before: "needs a login: ", Said: quietCause{f.Fix(), err}}
}

// downState is the state a failure leaves a backend in.
func downState(err error) State {
	var le *loginError
	if errors.As(err, &le) {
		return StateNeedsLogin
	}
	return StateDown
}

// Disabled is the cause of a server's leaving the pool when it was
// disabled at run time (ReconfigureWhy), by who ("the console", "" when
// not known): a call in flight on it fails saying so.
func Disabled(by string) error {
	if by == "" {
		return errors.New("it was disabled")
	}
	return errors.New("it was disabled by " + by)
}

type restartedError struct{}

func (restartedError) Error() string        { return "it was restarted on request" }
func (restartedError) Is(target error) bool { return target == errReplaced }

// backend is one configured server: its state, its last known tools, and the
// live connection (run) while up.
type backend struct {
	p    *Pool
	cfg  config.Server
	log  *slog.Logger
	mask func(string) string
	// errMask hides the configured secrets in its errors' text.
	errMask func(string) string
	// logMask hides them in the data of a log message relayed to a
	// client, as mask does in a stderr line.
	logMask func(any) any
	stderr  *lineTail // stdio: the last stderr lines across runs (Pool.Stderr)
	// ctx ends with the pool, or earlier when Reconfigure removes or
	// replaces the backend (the cause says which).
	ctx    context.Context
	cancel context.CancelCauseFunc

	// Timeouts (time.Duration), changed in place by Reconfigure.
	connectTimeout atomic.Int64
	callTimeout    atomic.Int64
	keepAlive      atomic.Int64
	// discoverLate: the server answered server/discover after the probe
	// had fallen back to initialize; its next starts wait for that answer.
	discoverLate atomic.Bool
	// legacyStart: the server ended on the server/discover probe, having
	// read it, and then took the legacy initialize (rmcp 0.8.5's stdio
	// server, which stops at a first message it cannot parse); its next
	// starts send initialize first, with no probe.
	legacyStart atomic.Bool
	// legacySSE is the URL at which an "http" server refused the
	// streamable handshake's POST (a 4xx, see trySSE) and took the older
	// HTTP+SSE transport, until a connect takes streamable HTTP again: its
	// status says sse, and a reconnect's fallback is not news (debug).
	legacySSE atomic.Pointer[string]

	notifyMu sync.Mutex // serializes list + OnToolsChanged

	// cutMu guards cut: the length of each description the last listing
	// cut, by tool name, so that a listing logs the cut of a description
	// only when it is new (a list_changed for another tool said it again).
	cutMu sync.Mutex
	cut   map[string]int

	lazy          bool
	lazyListed    bool // "lazy" in its entry, started at once to list its tools: lazy once it has
	idleTimeout   time.Duration
	restartDelays []time.Duration // Options.RestartDelays or the server's own policy
	stableAfter   time.Duration
	wakeCh        chan struct{} // lazy: a call wants the backend started (capacity 1)

	mu       sync.Mutex
	state    State
	err      error
	lastErr  error // latest failure, kept when up again
	since    time.Time
	stateCh  chan struct{} // closed and replaced on every state change
	connects int           // connect attempts so far
	rechecks int           // looks at a wrong command (waitCommand) so far
	tools    []*mcp.Tool
	info     *mcp.InitializeResult // the server's answer to the last handshake (kept while down)
	said     string                // what it said of itself in that handshake, unless flagged (selfDescription)
	restarts int
	run      *run
	inFlight int // calls running on run (Status.InFlight)
	// staysDown: the supervisor gave up (restarts used up, or a config
	// error): no restart comes until Reconfigure replaces the backend or,
	// for a stdio command or cwd that is wrong, until they change
	// (waitCommand).
	staysDown  bool
	quietRetry bool      // retrying past restart.delays (a resource shortage, a remote server): "backend down" at debug level
	lastUse    time.Time // last call start or end
	// loginChanged is closed when the stored login changes; taken before
	// each connect of a remote backend with an Authorizer (nil otherwise).
	loginChanged <-chan struct{}
	// woke is closed when the machine wakes from a sleep (Pool.woken);
	// taken before each connect.
	woke <-chan struct{}
}

// run is one live connection: session, process (stdio), and the goroutines
// that watch it.
type run struct {
	sess     *mcp.ClientSession
	proc     *proc           // stdio only
	http     *http.Client    // http and sse only
	ctx      context.Context // session lifetime; cancelled at teardown
	cancel   context.CancelCauseFunc
	done     chan struct{}  // closed when the session has ended
	changed  chan struct{}  // list_changed signals (capacity 1)
	listed   chan struct{}  // closed once its first listing went to OnToolsChanged (see admitted)
	wg       sync.WaitGroup // watcher and re-lister
	upAt     time.Time
	protocol string
	// calls are the calls in flight, for relaying progress and log
	// messages to the caller (see CallEvents).
	calls calls
	// stash decodes the tools/list results read (stdio and SSE; see
	// listStash).
	stash *listStash
	// loginLost is closed when the server wants a login that cannot be
	// given (loginErr says why); remote backends with an Authorizer only.
	loginLost chan struct{}
	loginOnce sync.Once
	loginErr  error
	// unreachable is why a remote run's server could not be reached by a
	// call (see unreachable); its session is then closed (broke).
	unreachable atomic.Pointer[error]
}

// broke ends a remote run whose server a call could not reach: go-sdk
// keeps such a session open, every call failing the same way, the
// backend "up". The supervisor then marks it down with err.
func (r *run) broke(err error) { r.end(err, false) }

// end records err as why r ended, unless a reason is recorded already;
// with dropped (a ping found the network gone), the run's requests fail at
// once from then on (headerTransport.dropped), so that the session's close
// (its DELETE) does not wait on that network. err is recorded first: a
// request that fails so can end the session by itself (go-sdk's SSE client
// closes its connection when a POST fails), and the supervisor, reading
// why the run ended, found only "connection lost: Post …: not sent: the
// network to the server dropped the connection", without the ping's words
// (1 in 10–30 SSE runs under load, TestSilentDropSeenByPing/sse).
func (r *run) end(err error, dropped bool) {
	first := r.unreachable.CompareAndSwap(nil, &err)
	if t := r.headers(); dropped && t != nil {
		t.dropped.Store(true)
	}
	if first {
		go r.sess.Close()
	}
}

// loginRequired is the Authorizer's callback for this run.
func (r *run) loginRequired(err error) {
	r.loginOnce.Do(func() {
		r.loginErr = loginWords(err)
		close(r.loginLost)
	})
}

// lostLogin returns the login error of the run, or nil.
func (r *run) lostLogin() error {
	select {
	case <-r.loginLost:
		return r.loginErr
	default:
		return nil
	}
}

// headers is a remote run's headerTransport, or nil.
func (r *run) headers() *headerTransport {
	if r.http == nil {
		return nil
	}
	t, _ := r.http.Transport.(*headerTransport)
	return t
}

// refused is the last answer of a remote run's server with an error
// status (headerTransport.refused), or nil, and how many there were.
func (r *run) refused() (*refusal, uint64) {
	if t := r.headers(); t != nil {
		return t.refused.Load(), t.refusals.Load()
	}
	return nil, 0
}

// oversized is how many events over the size cap the run's streams
// carried (0 for a stdio run).
func (r *run) oversized() uint64 {
	if t := r.headers(); t != nil {
		return t.oversized.Load()
	}
	return 0
}

// notMCP is the last answer of a remote run's server that was not MCP's
// (headerTransport.notMCP), or nil, and how many there were.
func (r *run) notMCP() (*notMCP, uint64) {
	if t := r.headers(); t != nil {
		return t.notMCP.Load(), t.notMCPs.Load()
	}
	return nil, 0
}

func newBackend(p *Pool, s config.Server) *backend {
	if s.Type == "" {
		s.Type = config.TypeStdio
		if s.URL != "" {
			s.Type = config.TypeHTTP
		}
	}
	b := &backend{
		p:             p,
		cfg:           s,
		log:           p.log.With(keyServer, s.Name, keyTransport, s.Type),
		mask:          newMasker(s),
		logMask:       mask.New(Secrets(s)).Value,
		errMask:       newErrMasker(s),
		stderr:        newLineTail(p.opts.StderrTail),
		state:         StateConnecting,
		since:         time.Now(),
		stateCh:       make(chan struct{}),
		wakeCh:        make(chan struct{}, 1),
		restartDelays: p.opts.RestartDelays,
		stableAfter:   p.opts.StableAfter,
	}
	b.said = p.saidBefore(s.Name)
	b.ctx, b.cancel = context.WithCancelCause(p.ctx)
	b.setTimeouts(s)
	if s.Lazy || p.opts.Lazy != nil && p.opts.Lazy(s) {
		b.idleTimeout = p.opts.IdleTimeout
		if d := s.IdleTimeout.Duration; d > 0 {
			b.idleTimeout = d
		}
	}
	switch {
	case p.opts.Lazy != nil && p.opts.Lazy(s):
		b.lazy, b.state = true, StateIdle
	case s.Lazy && p.opts.Lazy != nil:
		// Its tools are not known (a cold start, a server added by a
		// reload): it starts now to list them, and is lazy from then on.
		// It used to stay eager for as long as the gateway ran, its idle
		// timeout never applied (TestLazyStartedToListGoesIdle).
		b.lazyListed = true
	}
	if r := s.Restart; r != nil {
		if d := r.DelayDurations(); d != nil {
			b.restartDelays = d
		}
		if r.StableAfter.Duration > 0 {
			b.stableAfter = r.StableAfter.Duration
		}
	}
	return b
}

// setTimeouts applies s's connect and call timeouts (0 = the pool's).
func (b *backend) setTimeouts(s config.Server) {
	connect, call := serverTimeouts(s, &b.p.opts)
	b.connectTimeout.Store(int64(connect))
	b.callTimeout.Store(int64(call))
	b.keepAlive.Store(int64(serverKeepAlive(s, &b.p.opts)))
}

// KeepAlive returns how often a pool built with opts pings remote server
// s's session while up (0 for a stdio server, which is not pinged).
func KeepAlive(s config.Server, opts *Options) time.Duration {
	if s.Type != config.TypeHTTP && s.Type != config.TypeSSE {
		return 0
	}
	o := opts.withDefaults()
	return serverKeepAlive(s, &o)
}

// serverKeepAlive is the server's keepAlive, else o's (defaults applied).
func serverKeepAlive(s config.Server, o *Options) time.Duration {
	if d := s.KeepAlive.Duration; d > 0 {
		return d
	}
	return o.KeepAlive
}

// Timeouts returns the connect and call timeouts a pool built with opts
// gives server s: the server's own, else opts', else the defaults.
func Timeouts(s config.Server, opts *Options) (connect, call time.Duration) {
	o := opts.withDefaults()
	return serverTimeouts(s, &o)
}

// serverTimeouts is Timeouts over options with defaults applied.
func serverTimeouts(s config.Server, o *Options) (connect, call time.Duration) {
	connect, call = o.ConnectTimeout, o.CallTimeout
	if d := s.ConnectTimeout.Duration; d > 0 {
		connect = d
	}
	if d := s.CallTimeout.Duration; d > 0 {
		call = d
	}
	return connect, call
}

func (b *backend) connectTO() time.Duration { return time.Duration(b.connectTimeout.Load()) }
func (b *backend) callTO() time.Duration    { return time.Duration(b.callTimeout.Load()) }

// stop ends the backend for good (Reconfigure removed or replaced it): its
// supervisor tears the run down; calls fail with cause.
func (b *backend) stop(cause error) { b.cancel(cause) }

// gone is the error for a call on a backend that was stopped for good.
func (b *backend) gone() error {
	if b.p.ctx.Err() != nil {
		return &UnavailableError{Server: b.cfg.Name, Err: own("the gateway is stopping", nil)}
	}
	cause := context.Cause(b.ctx) // the gateway's: errReplaced, restartedError, a removal
	return &UnavailableError{Server: b.cfg.Name, Err: own(cause.Error(), cause)}
}

// restartCount is b's Status.Restarts.
func (b *backend) restartCount() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.restarts
}

func (b *backend) status() Status {
	st := b.snapshot()
	if t := b.cfg.TLS; t != nil && t.Cert != "" { // the file read with no lock held
		st.TLSCert = t.Cert
		if nb, na, err := tlsfiles.Dates(t.Cert); err == nil {
			st.TLSCertNotBefore, st.TLSCertNotAfter = &nb, &na
		} else {
			st.TLSCertError = err.Error()
		}
	}
	st.StepUp = b.stepUp() // read from the login file, with no lock held
	if st.State != StateNeedsLogin {
		st.LoginExpiry = b.loginExpiry()
	}
	return st
}

// snapshot is status but for what it reads from files: what b.mu guards.
func (b *backend) snapshot() Status {
	b.mu.Lock()
	defer b.mu.Unlock()
	st := Status{
		Name:      b.cfg.Name,
		Transport: b.transport(),
		State:     b.state,
		Tools:     len(b.tools),
		InFlight:  b.inFlight,
		Since:     b.since,
		Restarts:  b.restarts,
	}
	if b.err != nil {
		st.Err, st.ErrForKey = ErrText(b.err), ErrForKey(b.err)
	}
	if b.lastErr != nil {
		st.LastErr, st.LastErrForKey = ErrText(b.lastErr), ErrForKey(b.lastErr)
	}
	if b.run != nil {
		st.Protocol = b.run.protocol
		if b.run.proc != nil {
			st.PID = b.run.proc.pid
			if b.run.proc.lifeline != nil { // under a reaper: the server is its child
				st.ServerPID = childOf(st.PID)
			}
		}
	}
	return st
}

func (b *backend) setState(s State, err error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.setStateLocked(s, err)
}

// setStateLocked is setState with b.mu held.
func (b *backend) setStateLocked(s State, err error) {
	err = maskErr(err, b.errMask) // shown in /status, the console, execute_tool's errors
	if b.state != s {
		b.since = time.Now()
	}
	b.state, b.err = s, err
	if err != nil && !errors.Is(err, errStopped) {
		b.lastErr = err
	} else if s == StateUp && errors.As(b.lastErr, new(*loginError)) {
		// The login it waited for was given: a failure kept when up again
		// tells what went wrong, but this one only said to run a command
		// that has been run (toolgate status and list_servers went on
		// saying "needs a login: run `toolgate auth login …`").
		b.lastErr = nil
	}
	close(b.stateCh)
	b.stateCh = make(chan struct{})
}

// connect makes one attempt and records the backend up or down.
func (b *backend) connect(ctx context.Context) {
	if b.ctx.Err() != nil {
		return // removed or replaced meanwhile
	}
	b.mu.Lock()
	b.connects++
	if a := b.auth(); a != nil {
		// Before dialing: a login saved while it runs must not be missed.
		b.loginChanged = a.Changed(b.cfg.Name)
	}
	// Before dialing too: a wake from a sleep during the attempt (which
	// the sleep most likely failed) is not missed by the wait after it,
	// nor by the run's pings.
	b.woke = b.p.woken()
	// In the same step as the count: a call that sees this attempt's count
	// sees it connecting (acquire). Apart, a lazy backend's first call
	// could read the new count and the old idle state, wait for one more
	// attempt that nobody would make, and hang (TestLazyBackend, once).
	b.setStateLocked(StateConnecting, nil)
	b.mu.Unlock()
	b.log.Debug("connecting")
	r, tools, err := b.dial(ctx)
	if err != nil {
		err = maskErr(err, b.errMask)
		b.mu.Lock()
		quiet := b.quietRetry
		b.mu.Unlock()
		switch {
		case errors.As(err, new(abortedError)):
			b.log.Debug("connect aborted", keyErr, err) // a stop: nothing went wrong
		case quiet:
			b.log.Debug("backend still down", keyErr, err)
		default:
			b.log.Warn("backend down", keyErr, err)
		}
		b.setState(downState(err), err)
		return
	}
	b.mu.Lock()
	b.run = r
	b.quietRetry = false
	b.tools = tools
	if b.lazyListed {
		// Its tools are known now: its next start waits for a call, and
		// its idle timeout applies to this run (watch reads it after).
		b.lazy, b.lazyListed = true, false
	}
	b.info = r.sess.InitializeResult()
	said, flagged := selfDescription(b.info, b.cfg.Name)
	saidBefore := b.said
	b.said = said
	b.setStateLocked(StateUp, nil)
	b.mu.Unlock()
	b.log.Info("backend up", keyTools, len(tools), keyProtocol, r.protocol)
	if said != saidBefore && b.p.opts.OnDescribed != nil {
		b.p.opts.OnDescribed(b.cfg.Name, said)
	}
	if said != saidBefore && said != "" && saidBefore != "" && strings.TrimSpace(b.cfg.Description) == "" {
		// Tool definitions are pinned, and held when they change; this
		// text, which every client's model reads, is not: the operator
		// is told.
		b.log.Warn("what the server says of itself differs from its last handshake: search_tools' description, which every client's model reads, quotes it, and it is not pinned for review as tool definitions are (give the server a \"description\" in the config to fix what search_tools says of it)",
			"was", saidBefore, "now", said) // both passed the scan, control characters included
	}
	if len(flagged) > 0 {
		why := make([]string, len(flagged))
		for i, f := range flagged {
			why[i] = f.Summary()
		}
		b.log.Warn("what the server says of itself in its handshake is left out of search_tools' description, which names it by its tools instead: the scan of tool definitions flags it (give the server a \"description\" in the config to describe it)",
			"why", strings.Join(why, "; "))
	}
	if t := b.cfg.TLS; t != nil && t.Cert != "" {
		if nb, na, err := tlsfiles.Dates(t.Cert); err == nil {
			switch {
			case time.Now().Before(nb):
				b.log.Warn("the client certificate of tls.cert is not valid yet by this machine's clock: if it was issued just now, this machine's clock is behind (timedatectl)",
					"file", t.Cert, "not_before", nb)
			case time.Until(na) < tlsfiles.RenewWithin:
				b.log.Warn("the client certificate of tls.cert expires soon, or has: renew it before the server refuses it (written over the files, it is used from the next handshake)",
					"file", t.Cert, "not_after", na)
			}
		}
		if fix := tlsfiles.Exposed(t.Key); fix != "" {
			b.log.Warn("the private key of tls.key is readable by every user of this machine", "file", t.Key, "fix", fix)
		}
	}
	b.notifyMu.Lock()
	b.notify(tools)
	b.notifyMu.Unlock()
	close(r.listed)
	r.wg.Add(1)
	go b.relist(r)
}

func (b *backend) notify(tools []*mcp.Tool) {
	if b.p.roster.Load().byName[b.cfg.Name] != b {
		return // removed or replaced: its tools are not the server's any more
	}
	if f := b.p.opts.OnToolsChanged; f != nil {
		f(b.cfg.Name, tools)
	}
}

// known makes a listed tool share the served catalog's copies of its
// fields (Options.Known); it is called before the tool is shared.
func (b *backend) known(t *mcp.Tool) {
	known := b.p.opts.Known
	if known == nil {
		return
	}
	k, ok := known(b.cfg.Name, t.Name)
	if !ok {
		return
	}
	t.Name = k.Name
	if t.Title == k.Title {
		t.Title = k.Title
	}
	if t.Description == k.Description {
		t.Description = k.Description
	}
	if raw, ok := t.InputSchema.(json.RawMessage); ok && bytes.Equal(raw, k.InputSchema) {
		t.InputSchema = k.InputSchema
	}
}

// dial starts the backend, completes the MCP handshake and lists its tools,
// all within the connect timeout. On failure everything it started is stopped.
func (b *backend) dial(startCtx context.Context) (*run, []*mcp.Tool, error) {
	r := &run{done: make(chan struct{}), changed: make(chan struct{}, 1), listed: make(chan struct{}), loginLost: make(chan struct{}), stash: newListStash(b.known)}
	r.calls.mask = b.logMask
	// The session context lives as long as the session (legacy SSE streams
	// die with the context given to Connect); the connect timeout and a
	// cancelled Start cancel it only while dialing.
	r.ctx, r.cancel = context.WithCancelCause(b.ctx)
	connectTimeout := b.connectTO()
	var errTimeout error = connectTimeoutError{connectTimeout}
	timer := time.AfterFunc(connectTimeout, func() { r.cancel(errTimeout) })
	stopStart := context.AfterFunc(startCtx, func() {
		r.cancel(fmt.Errorf("connect aborted: %w", context.Cause(startCtx)))
	})

	client := mcp.NewClient(b.p.opts.ClientInfo, &mcp.ClientOptions{
		Logger: b.log,
		// No roots, sampling or elicitation over the session: a backend on
		// protocol 2026-07-28 asks with an input-required result instead,
		// which CallTool hands to its caller (questions.go).
		Capabilities:   &mcp.ClientCapabilities{},
		MultiRoundTrip: &mcp.MultiRoundTripOptions{Disabled: true},
		ToolListChangedHandler: func(context.Context, *mcp.ToolListChangedRequest) {
			select {
			case r.changed <- struct{}{}:
			default: // a re-list is already due
			}
		},
	})
	var (
		sess  *mcp.ClientSession
		tools []*mcp.Tool
		err   error
	)
	switch ue := b.cfg.UnsetError(); {
	case ue != nil:
		// Set where toolgate starts: no later attempt finds it set. What
		// the command lacks besides is said with it (checkCommand).
		err = configError{checkCommand(b.cfg, os.Environ(), b.p.opts.EnvAllow)}
	case b.cfg.Type == config.TypeStdio:
		sess, err = b.dialStdio(r, client, connectTimeout)
	case b.cfg.Type == config.TypeHTTP || b.cfg.Type == config.TypeSSE:
		sess, err = b.connectRemote(r.ctx, r, client)
	default:
		err = configError{fmt.Errorf("unknown transport type %q: use stdio, http or sse", b.cfg.Type)}
	}
	if err == nil {
		tools, err = b.listTools(r.ctx, sess, r.stash)
	}
	timedOut := !timer.Stop()
	aborted := !stopStart()
	if err == nil && (timedOut || aborted) {
		err = context.Cause(r.ctx) // the deadline hit just as we finished
	}
	if err != nil {
		err = b.explain(startCtx, err, r)
		r.cancel(err)
		if sess != nil {
			closed := make(chan struct{})
			go func() { sess.Close(); close(closed) }()
			if r.proc != nil {
				r.proc.stop(0, b.p.opts.KillAfter)
			}
			<-closed
		} else if r.proc != nil {
			r.proc.stop(0, b.p.opts.KillAfter)
		}
		r.closeIdle()
		return nil, nil, err
	}
	r.sess = sess
	r.upAt = time.Now()
	if res := sess.InitializeResult(); res != nil {
		r.protocol = res.ProtocolVersion
	}
	r.wg.Add(1)
	go func() {
		defer r.wg.Done()
		_ = sess.Wait()
		close(r.done)
	}()
	if r.http != nil {
		r.wg.Add(1)
		b.mu.Lock()
		woke := b.woke
		b.mu.Unlock()
		go func() {
			defer r.wg.Done()
			b.keepAliveLoop(r, woke)
		}()
	}
	return r, tools, nil
}

// dialStdio starts the process and makes the MCP handshake over its stdin
// and stdout (connectProbed: a start that failed after the discover
// probe's fallback stops the process and starts it again).
func (b *backend) dialStdio(r *run, client *mcp.Client, connectTimeout time.Duration) (*mcp.ClientSession, error) {
	return b.connectProbed(r.ctx, r, client, func(patient bool) (*probeTransport, error) {
		if r.proc != nil {
			r.proc.stop(0, b.p.opts.KillAfter)
		}
		var err error
		r.proc, err = startProc(b.cfg, procConfig{
			envAllow:    b.p.opts.EnvAllow,
			maxFrame:    b.p.opts.MaxMessageBytes,
			stderrTail:  b.p.opts.StderrTail,
			history:     b.stderr,
			stderrRate:  b.p.opts.StderrRate,
			log:         b.log,
			mask:        b.mask,
			environment: os.Environ(),
			reaper:      b.p.opts.Reaper,
		})
		if err != nil {
			// A command, cwd or PATH that is wrong stays wrong until the
			// config changes; a system out of descriptors, processes or
			// memory may not be by the next attempt.
			var re resourceError
			if !errors.As(err, &re) {
				err = configError{err}
			}
			return nil, err
		}
		b.log.Debug("process started", keyPID, r.proc.pid)
		return &probeTransport{
			inner: &linerpc.Transport{
				Reader:        r.proc.out,
				Writer:        r.proc.stdin,
				MaxLineLength: b.p.opts.MaxMessageBytes + 4096, // the stdout pump enforces the cap
			},
			timeout: b.p.opts.ProbeTimeout,
			ceiling: connectTimeout / 2,
			log:     b.log,
			unread:  pipeUnread(r.proc.stdin),
			late:    &b.discoverLate,
			patient: patient,
		}, nil
	})
}

// connectProbed makes the MCP handshake over the transport probe gives
// (patient false), wrapped in probeTransport. When the discover probe fell
// back to the legacy initialize and the handshake then failed, the server
// was slow to answer server/discover, not legacy (a legacy one takes
// initialize): it refused the initialize after a discover (go-sdk's
// server says "duplicate"). So probe is called once more, patient, and
// that handshake waits for the discover answer, within the same connect
// timeout (ctx). Such a server read as down, and every restart fell back
// and failed the same way.
//
// A server that read the probe and ended without answering it (its
// stdout closed: rmcp 0.8.5's stdio server stops at a first message it
// cannot parse, "Error: connection closed: initialized request") is
// started once more and sent the legacy initialize first; when that
// connects, its later starts do so at once (legacyStart). Such a server
// was down, every restart probing and failing the same way.
func (b *backend) connectProbed(ctx context.Context, r *run, client *mcp.Client, probe func(patient bool) (*probeTransport, error)) (*mcp.ClientSession, error) {
	connect := func(t *probeTransport, legacy bool) (*mcp.ClientSession, error) {
		var opts *mcp.ClientSessionOptions
		if legacy {
			opts = &mcp.ClientSessionOptions{ProtocolVersion: LegacyProtocolVersion}
		}
		return client.Connect(ctx, r.stash.transport(exacting(observing(t, r.calls.observe))), opts)
	}
	for patient := false; ; patient = true {
		t, err := probe(patient)
		if err != nil {
			return nil, err
		}
		legacy := b.legacyStart.Load()
		sess, err := connect(t, legacy)
		if err != nil && !legacy && t.endedOnProbe.Load() && ctx.Err() == nil {
			b.log.Info(msgEndedOnDiscover, keyErr, maskErr(err, b.errMask))
			if t, err = probe(false); err != nil {
				return nil, err
			}
			if sess, err = connect(t, true); err == nil {
				b.legacyStart.Store(true)
			}
			return sess, err
		}
		if err == nil || patient || !t.fellBack.Load() || ctx.Err() != nil {
			return sess, err
		}
		b.log.Info(msgWaitDiscover, keyErr, maskErr(err, b.errMask))
	}
}

// msgEndedOnDiscover is logged when a server that read the server/discover
// probe ended without answering it, and is started again for the legacy
// initialize.
const msgEndedOnDiscover = "backend ended on the server/discover probe without answering it; starting it again with the legacy initialize handshake"

// msgWaitDiscover is logged when a connect starts again, after the
// fallback to the legacy initialize was refused, to wait for the server's
// server/discover answer.
const msgWaitDiscover = "backend refused the legacy initialize the discover probe fell back to; connecting again to wait for its server/discover answer"

// abortedError is a connect that a stop ended, not the backend: the pool
// closing, Reconfigure removing or replacing the backend, or the start's
// context cancelled (a SIGTERM or a closed stdin while serve starts).
type abortedError struct{ error }

func (e abortedError) Unwrap() error { return e.error }

// quietCause is an error that says msg and wraps cause without saying it:
// a cause whose words add nothing an operator can act on to a message that
// says it all (go-sdk's "connection closed: calling "initialize": client
// is closing: EOF" after "exited with exit status 1; last stderr lines: …").
type quietCause struct {
	msg   string
	cause error
}

func (e quietCause) Error() string { return e.msg }
func (e quietCause) Unwrap() error { return e.cause }

// refusedError is a remote server's connect answered with a 4xx status:
// the server answers, and refuses (credentials, scopes, the path).
type refusedError struct{ error }

func (e refusedError) Unwrap() error  { return e.error }
func (e refusedError) forKey() string { return ErrForKey(e.error) }

// aborted is why a connect was stopped from outside, or nil when it was not.
func (b *backend) aborted(startCtx context.Context) error {
	switch {
	case b.p.ctx.Err() != nil:
		return errors.New("the gateway is stopping")
	case b.ctx.Err() != nil:
		return context.Cause(b.ctx)
	case startCtx.Err() != nil:
		return context.Cause(startCtx)
	}
	return nil
}

// connectTimeoutError is the cause of a dial the connect timeout ended.
type connectTimeoutError struct{ d time.Duration }

func (e connectTimeoutError) Error() string {
	return fmt.Sprintf("no complete MCP handshake and tool list within the connect timeout (%s)", e.d)
}

// explain turns a connect failure into a message that names the server and
// says what to check, or says that a stop aborted it (abortedError).
func (b *backend) explain(startCtx context.Context, err error, r *run) error {
	name := b.cfg.Name
	if le := r.lostLogin(); le != nil {
		return &loginError{server: name, err: le}
	}
	var ce configError
	if errors.As(err, &ce) {
		return configError{fmt.Errorf("backend %q: %w", name, ce.error)}
	}
	var re resourceError
	if errors.As(exhausted(err), &re) {
		return resourceError{fmt.Errorf("backend %q: %w", name, re.error)}
	}
	if why := b.aborted(startCtx); why != nil {
		// The stop closed its stdin (a process that reads it then exits)
		// or its connection: nothing for the operator to check.
		return abortedError{fmt.Errorf("backend %q: connect aborted: %w", name, why)}
	}
	cause := context.Cause(r.ctx)
	if r.proc != nil {
		var te connectTimeoutError
		if errors.As(cause, &te) {
			// The connect timeout: it closes stdin, so a process that was
			// waiting on it may exit now; the timeout is the cause.
			if u := r.proc.localURL(); u != "" {
				// A server of HTTP started as a stdio command.
				return fmt.Errorf(`backend %q: %w: %q seems to serve HTTP at %s, not MCP on stdout: start it yourself and give that address as the entry's "url" in place of "command"%s`,
					name, cause, b.cfg.Command, u, r.proc.outputSuffix())
			}
			return fmt.Errorf(`backend %q: %w: check that %q starts an MCP server speaking JSON-RPC on stdout, or raise the entry's "connectTimeout" if it is only slow to start (a first npx or uvx run downloads the package)%s`,
				name, cause, b.cfg.Command, r.proc.outputSuffix())
		}
		// A process that died during start-up: its stderr says why. One
		// whose handshake failed for a reason of its own (a JSON-RPC
		// error to "initialize", a protocol version go-sdk does not speak)
		// exits once go-sdk closes its stdin: that reason is the cause,
		// said below, not the exit.
		select {
		case <-r.proc.exited:
			if !connectionEnded(err) {
				break
			}
			// The process said why on stderr, or nothing; go-sdk's error
			// (`connection closed: calling "initialize": client is
			// closing: EOF`) stays wrapped but is not said.
			exit := r.proc.exitStatus()
			if line, fix := r.proc.tail.exhaustion(); fix != "" {
				// Not the config: the next start may find the resource.
				return resourceError{quietCause{fmt.Sprintf("backend %q: %s %s during start-up: %s (it said %q); retried after restart.delays%s",
					name, b.cfg.Command, exit, fix, truncate(line, 200), r.proc.stderrSuffix()), err}}
			}
			return quietCause{fmt.Sprintf("backend %q: %s %s during start-up: check command, args and env%s",
				name, b.cfg.Command, exit, r.proc.outputSuffix()), err}
		case <-time.After(exitWait):
		}
		if cause != nil && !errors.Is(cause, context.Canceled) {
			return fmt.Errorf("backend %q: %w: check that %q starts an MCP server speaking JSON-RPC on stdout%s",
				name, cause, b.cfg.Command, r.proc.outputSuffix())
		}
		return fmt.Errorf("backend %q: MCP handshake failed: %w%s", name, err, r.proc.outputSuffix())
	}
	if n, _ := r.notMCP(); n != nil {
		fix := cmp.Or(n.fix, "check that url is the server's MCP endpoint (often ending in /mcp, or /sse for type sse) and that no proxy or sign-in page answers in its place")
		return fmt.Errorf("backend %q at %s: the server answered %s, not MCP: %s", name, b.cfg.URL, n.in(b.cfg.URL), fix)
	}
	if rf, _ := r.refused(); rf != nil && rf.answersBefore == r.headers().answers.Load() {
		// go-sdk said the status text alone, under its calls. (A refusal
		// the server answered past is not why the connect failed.)
		w := b.atURL(rf.ownWords(b.cfg.URL, b.loginCommand(), b.cfg.Type, err))
		if rf.code < 500 {
			return refusedError{w}
		}
		return w // 5xx: the server, or a proxy in its place, failed
	}
	if te := (connectTimeoutError{}); errors.As(cause, &te) && r.headers() != nil && r.headers().answers.Load() > 0 {
		// It answered, and then took longer than that (a slow tools/list).
		return fmt.Errorf(`backend %q at %s: %w: the server answered, then took longer than that: raise the entry's "connectTimeout" if it is only slow`, name, b.cfg.URL, cause)
	}
	if te := (connectTimeoutError{}); errors.As(cause, &te) && r.headers() != nil {
		// Nothing came back at all: say how far the requests got.
		return fmt.Errorf("backend %q at %s: %w: %s", name, b.cfg.URL, cause, b.silence(r.headers()))
	}
	if cause != nil && !errors.Is(cause, context.Canceled) {
		return fmt.Errorf("backend %q at %s: %w: check url and that the server is running", name, b.cfg.URL, cause)
	}
	if why := unreachable(err, b.cfg.URL); why != nil {
		return b.atURL(why)
	}
	if fix := b.cfg.TLSFix(err); fix != "" {
		return fmt.Errorf("backend %q at %s: %w: %s", name, b.cfg.URL, err, fix)
	}
	if rpcErr := (*jsonrpc.Error)(nil); errors.As(err, &rpcErr) {
		// The server answered, at this url, over this transport: its own
		// reason is the cause, not the entry.
		return fmt.Errorf("backend %q at %s: MCP handshake failed: %w", name, b.cfg.URL, err)
	}
	return fmt.Errorf("backend %q at %s: %w: check url, type (%s) and headers", name, b.cfg.URL, err, b.cfg.Type)
}

// OverCap reports whether err, a call's, says its answer was over the
// message size cap (MaxMessageBytes): not read, so not trimmed either.
func OverCap(err error) bool { return err != nil && overCap(err) }

// overCap reports whether err is an answer over the message size cap: the
// stdio pump's error in its place, a JSON body over it, or go-sdk's words
// for an event over it.
func overCap(err error) bool {
	return errors.Is(err, errBodyTooLarge) || strings.Contains(err.Error(), capWords) ||
		strings.Contains(err.Error(), "SSE event exceeded")
}

// listTools lists every page of tools, bounded by MaxTools: go-sdk's
// ListTools (requests, its cache and validation) page by page, each page's
// tools taken from the stash where it decoded them. A name listed again
// (on the same page or a later one) is dropped, with a warning: names are
// unique per server, and the index refuses a catalog with an ID twice, so
// one such listing stopped a cold start and every re-index after it.
// Pages that loop (a cursor given again, or maxEmptyPages empty pages in a
// row) end the listing with the tools listed so far, with a warning: such
// a server was asked until the timeout and then reported as not speaking
// MCP, or, when its pages repeated their tools, as listing too many.
func (b *backend) listTools(ctx context.Context, sess *mcp.ClientSession, stash *listStash) ([]*mcp.Tool, error) {
	stash.begin()
	tools := []*mcp.Tool{}
	entries := 0              // every entry, a name again too, counts against MaxTools
	times := map[string]int{} // how many times each name came
	var again []string
	nameless := 0 // entries without a name (or null)
	defer func() {
		if nameless > 0 {
			b.log.Warn(fmt.Sprintf("the server lists %s without a name: %s left out (a tool needs a name to be called; tell the server's authors)",
				plural.Of(nameless, "tool"), plural.Pick(nameless, "it is", "they are")))
		}
		if len(again) > 0 {
			b.log.Warn("the server lists a tool name more than once: the first is kept, the others are left out (names must be unique per server; tell the server's authors)",
				"tools", strings.Join(again, ", "))
		}
	}()
	cut := map[string]int{} // the descriptions this listing cut
	defer func() {
		b.cutMu.Lock()
		b.cut = cut
		b.cutMu.Unlock()
	}()
	b.cutMu.Lock()
	wasCut := b.cut
	b.cutMu.Unlock()
	asked := map[string]bool{"": true} // the cursors requested
	empty := 0                         // pages in a row without a tool
	params := &mcp.ListToolsParams{}
	for page := 1; ; page++ {
		res, err := sess.ListTools(ctx, params)
		if err != nil {
			if page == 1 && offersNoTools(sess, err) {
				// A server of resources or prompts only: up, with nothing
				// to search (it was down, and restarted again and again).
				b.log.Info("the server offers no tools (its capabilities name none, and it does not know tools/list): nothing of it to search")
				return tools, nil
			}
			if overCap(err) {
				// Not a call that asked too much ("ask for less output"):
				// the definitions themselves are too large.
				return nil, fmt.Errorf("list tools: the server's tools/list answer is over toolgate's message size cap of %d bytes: its tool definitions are too large for one message (an input schema of megabytes, most likely): have the server list its tools in pages (tools/list takes a cursor) or with smaller schemas", b.p.opts.MaxMessageBytes)
			}
			if strings.Contains(err.Error(), linerpc.TooDeep) {
				return nil, fmt.Errorf("list tools: the server's tools/list answer is nested deeper than the %d levels of JSON toolgate reads: a tool's input schema, most likely (objects inside objects): have the server list it flatter (a $ref to a $defs entry for a model used again)", linerpc.MaxDepth)
			}
			return nil, fmt.Errorf("list tools: %w", err)
		}
		listed := stash.merge(params.Cursor, res.Tools)
		if empty++; len(listed) > 0 {
			empty = 0
		}
		for _, t := range listed {
			if entries == b.p.opts.MaxTools {
				return nil, fmt.Errorf("list tools: more than %d tools, the most toolgate takes from one server: have the server list fewer (its own settings choose which), or split them between servers", b.p.opts.MaxTools)
			}
			entries++
			if t == nil || t.Name == "" {
				nameless++
				continue
			}
			if times[t.Name]++; times[t.Name] > 1 {
				if times[t.Name] == 2 {
					again = append(again, t.Name)
				}
				continue
			}
			if d, ok := catalog.CutDescription(t.Description); ok {
				if n, ok := wasCut[t.Name]; !ok || n != len(t.Description) {
					b.log.Warn("tool description too long; cut", "tool", t.Name, keyBytes, len(t.Description), keyLimit, maxDescription)
				}
				cut[t.Name] = len(t.Description)
				if cut := b.p.opts.OnDescriptionCut; cut != nil {
					cut(b.cfg.Name, t.Name, len(t.Description))
				}
				c := *t
				c.Description = d
				t = &c
			}
			tools = append(tools, t)
		}
		next := res.NextCursor
		if next == "" {
			return tools, nil
		}
		if why := pagesLoop(asked[next], empty); why != "" {
			b.log.Warn("the server's tools/list pages do not end: toolgate keeps the tools listed so far and stops asking (tell the server's authors)",
				"why", why, "pages", page, "tools", len(tools), "cursor", oneline.Echo(next))
			return tools, nil
		}
		asked[next] = true
		params = &mcp.ListToolsParams{Cursor: next}
	}
}

// pagesLoop says why a listing does not end: its next cursor is one asked
// for before (again), or the last empty pages in a row brought no tool;
// "" while it may go on.
func pagesLoop(again bool, empty int) string {
	switch {
	case again:
		return "its next cursor is one toolgate asked for before"
	case empty >= maxEmptyPages:
		return fmt.Sprintf("%d pages in a row listed no tool", empty)
	}
	return ""
}

// relist re-lists tools after each list_changed notification until the run
// ends.
//
// At most one listing starts per relistEvery: the notifications that come
// meanwhile are one (r.changed holds one), so a server that sends
// list_changed in a loop is listed once a second. A listing that finds the
// same tools changes nothing and is logged at debug level. Such a server
// (a notification a millisecond) was listed 9,700 times in 10 s, each
// logged as "tool list changed", at a third of a core.
func (b *backend) relist(r *run) {
	defer r.wg.Done()
	var last time.Time // when the last listing started
	for {
		select {
		case <-r.done:
			return
		case <-r.ctx.Done():
			return
		case <-r.changed:
		}
		if wait := relistEvery - time.Since(last); !last.IsZero() && wait > 0 {
			t := time.NewTimer(wait)
			select {
			case <-r.done:
				t.Stop()
				return
			case <-r.ctx.Done():
				t.Stop()
				return
			case <-t.C:
			}
		}
		last = time.Now()
		ctx, cancel := context.WithTimeout(r.ctx, b.callTO())
		tools, err := b.listTools(ctx, r.sess, r.stash)
		cancel()
		if err != nil {
			b.log.Warn("re-listing tools after list_changed failed", keyErr, maskErr(err, b.errMask))
			continue
		}
		b.notifyMu.Lock()
		b.mu.Lock()
		current := b.run == r
		same := sameTools(b.tools, tools)
		if current {
			b.tools = tools
		}
		b.mu.Unlock()
		switch {
		case !current:
		case same:
			b.log.Debug("list_changed, but the tools are the same", keyTools, len(tools))
		default:
			b.log.Info("tool list changed", keyTools, len(tools))
			b.notify(tools)
		}
		b.notifyMu.Unlock()
	}
}

// relistEvery is the least time between two listings of a run's tools
// after list_changed notifications.
const relistEvery = time.Second

// sameTools reports whether two listings hold the same tools, in the same
// order, each the same as JSON.
func sameTools(a, b []*mcp.Tool) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i].Name != b[i].Name {
			return false
		}
		ja, erra := json.Marshal(a[i])
		jb, errb := json.Marshal(b[i])
		if erra != nil || errb != nil || !bytes.Equal(ja, jb) {
			return false
		}
	}
	return true
}

// callTool calls a tool on the current run with the call deadline.
func (b *backend) callTool(ctx context.Context, tool string, args map[string]any) (*mcp.CallToolResult, error) {
	start := time.Now()
	res, err := b.call(ctx, tool, args)
	if errors.Is(err, mcp.ErrSessionMissing) && b.awaitReopen(ctx, start) {
		// The server did not know the session (it expired, or the server
		// restarted and forgot it), so it did not run the call: sent
		// again, once, on the session opened since. The caller got
		// "connection lost during the call".
		b.log.Info("the server no longer knew the session; the call is sent again on a new one", "tool", tool)
		res, err = b.call(ctx, tool, args)
	}
	return res, maskErr(err, b.errMask) // the client reads it
}

// awaitReopen waits until the backend is up on a session opened after
// start (true), or its next connect attempt has failed, or ctx or the
// call timeout ends (false).
func (b *backend) awaitReopen(ctx context.Context, start time.Time) bool {
	wctx, cancel := context.WithTimeout(ctx, b.callTO())
	defer cancel()
	b.mu.Lock()
	defer b.mu.Unlock()
	gen := b.connects
	for {
		switch {
		case b.run != nil && b.run.upAt.After(start):
			return true
		case b.connects > gen && b.state != StateConnecting && b.run == nil, // that attempt failed
			b.lazy, b.staysDown:
			return false
		}
		if !b.awaitState(wctx) {
			return false
		}
	}
}

// awaitState waits, with b.mu held (released meanwhile), for the next
// change of the backend's state; false when ctx ended or the backend was
// removed or replaced first.
func (b *backend) awaitState(ctx context.Context) bool {
	ch := b.stateCh
	b.mu.Unlock()
	select {
	case <-ch:
	case <-ctx.Done():
	case <-b.ctx.Done():
	}
	b.mu.Lock()
	return ctx.Err() == nil && b.ctx.Err() == nil
}

func (b *backend) call(ctx context.Context, tool string, args map[string]any) (*mcp.CallToolResult, error) {
	name := b.cfg.Name
	r, waited, err := b.acquire(ctx)
	if err != nil {
		return nil, err
	}
	defer b.release()
	if err := admitted(ctx, r, waited); err != nil {
		return nil, err
	}
	if args == nil {
		args = map[string]any{}
	}
	// The call ends at its timeout (ErrCallTimeout: a pause of the gateway
	// does not count) or when the run stops (errStopping), whichever
	// comes first; context.Cause(cctx) says which.
	callTimeout := b.callTO()
	cctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	defer cancelAfterRunning(cctx, cancel, callTimeout, ErrCallTimeout)()
	stop := context.AfterFunc(r.ctx, func() { cancel(errStopping) })
	defer stop()

	// The caller's trace context (W3C traceparent) goes on in _meta.
	params := &mcp.CallToolParams{Name: tool, Arguments: args, Meta: tracemeta.Inject(ctx, nil)}
	ev := callEventsFrom(ctx)
	k := r.calls.add(ev)
	defer r.calls.done(k)
	if k.token != "" {
		params.SetProgressToken(k.token)
	}
	if ev != nil && ev.Log != nil && ev.LogLevel != "" {
		r.wantLogs(cctx, params, ev.LogLevel)
	}
	withCallInput(params, callInputFrom(ctx), r.protocol)
	ectx, exact := withExact(cctx)
	defer exact.finish()
	ectx = withCancelWhy(ectx, func() string { return b.cancelWhy(cctx, callTimeout) })
	_, pagesBefore := r.notMCP()
	_, refusedBefore := r.refused()
	oversizedBefore := r.oversized()
	res, err := r.sess.CallTool(ectx, params)
	if err == nil {
		exact.apply(res)
		return res, nil
	}
	if le := r.lostLogin(); le != nil {
		return nil, &UnavailableError{Server: name, Err: &OwnWords{Before: "it ", Said: le}}
	}
	// An answer over the size cap resets the connection, and the
	// supervisor may tear the run down (errStopping) before this call
	// reads its error: the cap is still why it failed (it read "it stopped
	// during the call" under load).
	tooLarge := errors.Is(err, errBodyTooLarge) || !errors.Is(err, mcp.ErrConnectionClosed) && strings.Contains(err.Error(), "exceeded") ||
		r.oversized() > oversizedBefore // an event over the cap came on a stream of this run during the call
	if tooLarge && ctx.Err() == nil && !errors.Is(context.Cause(cctx), ErrCallTimeout) {
		// go-sdk's event reader says "SSE event exceeded N bytes" and drops
		// the connection (stdio oversize is answered per call by the pump).
		return nil, &UnavailableError{Server: name, Err: &OwnWords{Before: fmt.Sprintf(
			"the response to %q exceeds toolgate's message size cap of %d bytes (ask the tool for less output); the connection is reset: ",
			tool, b.p.opts.MaxMessageBytes), Said: err}}
	}
	// A page in place of the answer (a proxy's sign-in page once its
	// session expired): said so, where go-sdk said "unsupported content
	// type" and the call read "connection lost during the call".
	if n, pages := r.notMCP(); n != nil && pages > pagesBefore && ctx.Err() == nil {
		return nil, &UnavailableError{Server: name, Err: &OwnWords{Before: "the server answered ", Said: errors.New(n.in(b.cfg.URL)),
			After: ", not MCP: a proxy or sign-in page answers in its place (check url and what stands between toolgate and the server)"}}
	}
	// An error status in place of the answer (a token revoked, the
	// server failing, a rate limit): said with what the body says, where
	// go-sdk said the status text and the call read "connection lost
	// during the call". A JSON-RPC error in such a body is the server's
	// own answer (below).
	// A refusal of one call alone (callOnly) is that call's error: the
	// session went on, and another call that failed meanwhile read it.
	// A refusal of this call alone is kept with it (exactResult.refused).
	rf, n := r.refused()
	if own := exact.refused.Load(); own != nil {
		rf, n = own, refusedBefore+1
	}
	if rf != nil && !rf.rpc && n > refusedBefore && (!rf.callOnly || rf.call == exact) && ctx.Err() == nil && !errors.Is(context.Cause(cctx), ErrCallTimeout) {
		if rf.sessionGone() && rf.call == exact && !errors.Is(err, mcp.ErrSessionMissing) {
			// This call's own request was answered 404 on its session, so
			// the server did not run it (callTool sends it again). go-sdk
			// says ErrSessionMissing, unless the supervisor, seeing the
			// session end, tore the run down first: then the call read
			// "context canceled" and was not sent again (CI, under load).
			err = fmt.Errorf("%w: %w", mcp.ErrSessionMissing, err)
		}
		w := rf.ownWords(b.cfg.URL, b.loginCommand(), b.cfg.Type, err)
		if rf.mayHaveRun(exact) {
			last := w
			for last.Then != nil {
				last = last.Then
			}
			last.Then = noAnswer(true, "", nil, "")
		}
		if rf.callOnly {
			return nil, &RefusedError{Server: name, Err: w}
		}
		return nil, &UnavailableError{Server: name, Err: w}
	}
	if c := exact.cut.Load(); c != nil && (cctx.Err() == nil || ctx.Err() == nil && b.ctx.Err() == nil && errors.Is(context.Cause(cctx), errStopping)) {
		// The call's answer began and ended before its result: the
		// server had the call, and may have run it. The supervisor,
		// seeing the connection break, may tear the run down
		// (errStopping) before this call reads its error: the cut answer
		// is still why (it read "it stopped during the call" under load).
		return nil, &UnavailableError{Server: name, Err: c.words(err)}
	}
	ue := ownRequestError(err)
	if why := unreachable(ue, b.cfg.URL); why != nil && r.proc == nil && ctx.Err() == nil {
		// go-sdk says it as a JSON-RPC error, which read as the server's
		// own ("answered with an error: … rejected by transport").
		r.broke(b.atURL(why))
		return nil, &UnavailableError{Server: name, Err: &OwnWords{Before: "it cannot be reached: ", Said: quietCause{"", err}, Then: why}}
	}
	if ue != nil && r.proc == nil && ctx.Err() == nil && (errors.Is(ue, io.EOF) || errors.Is(ue, io.ErrUnexpectedEOF) || errors.Is(ue, syscall.ECONNRESET) || closedIdle(ue)) {
		// The connection the request went on was closed (a server stopping,
		// a proxy's idle timeout): no answer, and not the server's error.
		return nil, &UnavailableError{Server: name, Err: noAnswer(true, "the connection closed before the server answered (",
			quietCause{errors.Unwrap(ue).Error(), err}, ")")}
	}
	// From here on the request was sent and no answer came (the server may
	// have run the call: ErrMayHaveRun), unless go-sdk refused to send it
	// or the server answered that it did not know the session.
	sent := !notSent(err) && !errors.Is(err, mcp.ErrSessionMissing)
	switch cause := context.Cause(cctx); {
	case ctx.Err() != nil:
		// The caller gave up (its client cancelled, its key was revoked):
		// a call sent may have run all the same.
		return nil, unanswered(sent, fmt.Sprintf("call %q on %q: ", tool, name), context.Cause(ctx))
	case errors.Is(cause, ErrCallTimeout):
		// notifications/cancelled went to the server, which may have done
		// the work, or part of it, before it read that.
		err := unanswered(sent, fmt.Sprintf("call %q on %q: no answer within %s: ", tool, name, callTimeout), ErrCallTimeout)
		// Kept as the server's last failure: one that stopped answering
		// (stopped, hung) stayed "up" with no error in its status.
		b.mu.Lock()
		b.lastErr = maskErr(err, b.errMask)
		b.mu.Unlock()
		return nil, err
	case b.ctx.Err() != nil:
		// The gateway is stopping, or Reconfigure removed or replaced the
		// backend (the session may have closed before cctx saw it).
		if b.p.ctx.Err() != nil {
			return nil, &UnavailableError{Server: name, Err: noAnswer(sent, "the gateway is stopping", nil, "")}
		}
		cause := context.Cause(b.ctx)
		next := "search_tools finds what the gateway serves now"
		if errors.Is(cause, errReplaced) {
			next = "call again: the restarted server takes it"
		}
		// The warning before what to do next: check, then call again.
		w := noAnswer(sent, cause.Error()+" during the call", nil, "")
		w.After += "; " + next
		return nil, &UnavailableError{Server: name, Err: w}
	case errors.Is(cause, errStopping):
		// Torn down by the supervisor: usually because the process died,
		// or a ping found the network gone (keepAliveLoop).
		if e := r.unreachable.Load(); e != nil {
			return nil, &UnavailableError{Server: name, Err: noAnswer(sent, "connection lost during the call: ", *e, "")}
		}
		if r.proc != nil {
			select {
			case <-r.proc.exited:
				return nil, &UnavailableError{Server: name, Err: noAnswer(sent, "its process ", r.proc.exitErr(), " during the call")}
			case <-time.After(exitWait):
			}
		}
		return nil, &UnavailableError{Server: name, Err: noAnswer(sent, "it stopped during the call", nil, "")}
	}
	var werr *jsonrpc.Error
	if errors.As(err, &werr) {
		return nil, fmt.Errorf("call %q on %q: %w", tool, name, err)
	}
	if undecodable(err) {
		// The answer arrived and go-sdk could not read it into a result:
		// the connection is fine, and so is the server for other calls.
		what := "the server wrote something this gateway's MCP library does not accept"
		var b64 base64.CorruptInputError
		switch d, m := jsonwords.Describe(err), unknownContent.FindStringSubmatch(err.Error()); {
		case d != "":
			what = d // `"content" must be a list of objects, not a JSON object`, not Go's words
		case m != nil:
			what = fmt.Sprintf("a content block of type %s, which toolgate's MCP library does not know", m[1])
		case errors.As(err, &b64):
			what = fmt.Sprintf(`binary data in it, the "data" of an image or audio block or the "blob" of a resource, is not base64: %v`, b64)
		}
		return nil, fmt.Errorf("call %q on %q: its answer could not be read as a tools/call result (%s; check the server's version): %w", tool, name, what, err)
	}
	// The transport broke: the process died or the connection dropped.
	if r.proc != nil {
		select {
		case <-r.proc.exited:
			return nil, &UnavailableError{Server: name, Err: noAnswer(sent, "its process ", r.proc.exitErr(), " during the call")}
		case <-time.After(exitWait):
		}
	}
	return nil, &UnavailableError{Server: name, Err: noAnswer(sent, "connection lost during the call: ", err, "")}
}

// noAnswer is the words of a call that got no answer, with the warning
// ErrMayHaveRun after them when its request was sent (the server may have
// run it: an agent checks before running a write twice), which an API key
// that is not admin reads too.
func noAnswer(sent bool, before string, said error, after string) *OwnWords {
	if !sent {
		return &OwnWords{Before: before, Said: said, After: after}
	}
	return &OwnWords{Before: before, Said: said, After: after + ": " + ErrMayHaveRun.Error(), Mark: ErrMayHaveRun}
}

// unanswered is noAnswer for a call that one of the gateway's own causes
// ended (the call timeout, the caller's context): words and cause's text,
// errors.Is finding cause.
func unanswered(sent bool, words string, cause error) *OwnWords {
	w := noAnswer(sent, words+cause.Error(), nil, "")
	w.Mark = errors.Join(cause, w.Mark)
	return w
}

// notSent reports whether err is go-sdk's refusal to send a call on a
// connection that was closing or broken already ("connection closed:
// calling "tools/call": client is closing: EOF", or "server is closing"
// from its last check before the write): the request was never written,
// so the server did not run it. go-sdk keeps its jsonrpc2 errors internal
// and formats them into the text (%v), so they are known by their words
// (TestNotSentWords fails the day they change).
func notSent(err error) bool {
	if !errors.Is(err, mcp.ErrConnectionClosed) {
		return false
	}
	s := err.Error()
	return strings.Contains(s, "client is closing") || strings.Contains(s, "server is closing")
}

// ownRequestError is the error of a call's request to the server itself
// when the network gave no answer (a *url.Error whose cause is the
// network's: a *net.OpError, or EOF, or the refusal of the proxy of the
// environment), or nil; not the error of a request
// made for it on the way (a token refresh at the authorization server,
// said in words of its own).
func ownRequestError(err error) error {
	var ue *url.Error
	if !errors.As(err, &ue) {
		return nil
	}
	var op *net.OpError
	if errors.As(ue.Err, &op) && op == ue.Err || ue.Err == io.EOF || ue.Err == io.ErrUnexpectedEOF || closedIdle(ue) {
		return ue
	}
	if re := (*proxyenv.RefusedError)(nil); errors.As(ue.Err, &re) {
		return ue // the proxy refused the CONNECT: the server never got the request
	}
	return nil
}

// closedIdle reports whether err is net/http's error for a request put on a
// kept-alive connection that the server closed just then (a server
// stopping, a proxy's idle timeout). net/http sends such a request again
// only when it may be repeated, and a POST may not; its error is not
// exported, so it is known by its words. The call read as the server's
// own error ("rejected by transport: … server closed idle connection";
// TestServerGoneMidSession failed so under load).
func closedIdle(err error) bool {
	var ue *url.Error
	return errors.As(err, &ue) && ue.Err != nil && ue.Err.Error() == "http: server closed idle connection"
}

// acquire returns the live run for a call (starting a lazy backend first)
// and counts the call as in flight; release must follow. waited says
// there was no run when the call came: it waited for this one.
func (b *backend) acquire(ctx context.Context) (_ *run, waited bool, err error) {
	if b.ctx.Err() != nil {
		return nil, false, b.gone()
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	waited = b.run == nil
	// A connection being made (the first one after a warm start, a
	// restart, or a lazy backend's start) is waited for, not failed.
	if b.run == nil && (b.state == StateConnecting || b.lazy && b.startable()) {
		gen, woke := b.connects, false
		if b.state != StateConnecting {
			woke = true
			select {
			case b.wakeCh <- struct{}{}:
			default:
			}
		}
		// Wait for the supervisor's attempt (bounded by the connect
		// timeout), or for a run whichever attempt made.
		for b.run == nil && ((woke && b.connects == gen) || b.state == StateConnecting) {
			ch := b.stateCh
			b.mu.Unlock()
			select {
			case <-ch:
			case <-ctx.Done():
				b.mu.Lock()
				return nil, false, fmt.Errorf("start %q: %w", b.cfg.Name, context.Cause(ctx))
			case <-b.ctx.Done():
				b.mu.Lock()
				return nil, false, b.gone()
			}
			b.mu.Lock()
		}
	}
	switch {
	case b.run == nil && b.ctx.Err() != nil:
		return nil, false, b.gone() // removed, replaced, or the pool closed as it connected
	case b.run == nil && errors.As(b.err, new(abortedError)):
		// The start's context cancelled as it connected: serve stopping
		// (a SIGTERM, a closed stdin) before its pool closes. Not "it is
		// down: … connect aborted: context canceled".
		return nil, false, &UnavailableError{Server: b.cfg.Name, Err: own("the gateway is stopping", nil)}
	}
	if b.run == nil {
		var err error = own(fmt.Sprintf("it is %s", b.state), nil)
		var le *loginError
		switch {
		case errors.As(b.err, &le):
			err = &OwnWords{Before: "it ", Said: le.err}
		case b.err != nil:
			err = &OwnWords{Before: fmt.Sprintf("it is %s: ", b.state), Said: b.err}
		}
		return nil, false, &UnavailableError{Server: b.cfg.Name, Err: err}
	}
	b.inFlight++
	b.lastUse = time.Now()
	return b.run, waited, nil
}

func (b *backend) release() {
	b.mu.Lock()
	b.inFlight--
	b.lastUse = time.Now()
	b.mu.Unlock()
}

// startable says whether a call may start a lazy backend now: when idle, or
// down for longer than the first restart delay (so a crash loop cannot spin
// at the rate of calls). b.mu must be held.
func (b *backend) startable() bool {
	switch b.state {
	case StateIdle:
		return true
	case StateDown:
		var ce configError
		if errors.As(b.err, &ce) {
			return false
		}
		hold := time.Duration(0)
		if d := b.restartDelays; len(d) > 0 {
			hold = d[0]
		}
		return time.Since(b.since) >= hold
	}
	return false
}

// takeIdle detaches r if the backend is lazy and r has been unused for the
// idle timeout. b.mu is taken so no call can slip in.
func (b *backend) takeIdle(r *run) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.run != r || b.inFlight > 0 || time.Since(b.lastUse) < b.idleTimeout {
		return false
	}
	b.run = nil
	return true
}

// needsLogin reports whether the backend waits for a login.
func (b *backend) needsLogin() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.state == StateNeedsLogin && b.loginChanged != nil
}

// waitLogin waits until the backend's stored login changes (true) or the
// backend ends (false).
func (b *backend) waitLogin() bool {
	b.mu.Lock()
	changed := b.loginChanged
	b.mu.Unlock()
	b.log.Info("waiting for a login; it connects again once one is saved")
	select {
	case <-b.ctx.Done():
		return false
	case <-changed:
		b.log.Info("the stored login changed; connecting again")
		return true
	}
}

// waitCommand waits while a stdio backend stays down because its command
// or cwd is wrong: every Options.CommandRecheck it looks at them again
// (commandState), and returns true once they changed (the command was
// installed, replaced or made executable, the folder made), false when
// the backend stops. A server that failed at start for want of what an
// install puts there used to stay down until its config entry changed.
func (b *backend) waitCommand() bool {
	env := func() []string { return childEnv(os.Environ(), b.p.opts.EnvAllow, b.cfg.Env) }
	state := func() string { return commandState(b.cfg, env()) + "\n" + argFilesState(b.cfg) }
	was := state()
	t := time.NewTicker(b.p.opts.CommandRecheck)
	defer t.Stop()
	for {
		select {
		case <-b.ctx.Done():
			return false
		case <-t.C:
		}
		b.mu.Lock()
		b.rechecks++
		b.mu.Unlock()
		if now := state(); now != was {
			b.log.Info("backend's command, cwd or a file its args name changed: starting it again", "command", commandState(b.cfg, env()))
			return true
		}
	}
}

// supervise watches the backend until the pool closes: when its session ends
// it is torn down, marked down with the reason, and restarted after the next
// delay of RestartDelays; after the last one a stdio backend stays down and
// a remote one is tried again at the last delay.
func (b *backend) supervise() {
	defer b.p.wg.Done()
	delays := b.restartDelays
	attempt := 0
	for {
		b.mu.Lock()
		r := b.run
		b.mu.Unlock()
		if r != nil {
			switch b.watch(r) {
			case endClosing:
				b.teardown(r, errStopped)
				return
			case endIdle:
				b.log.Info("stopping unused lazy backend", keyTimeout, b.idleTimeout)
				b.teardown(r, nil)
				b.setState(StateIdle, nil)
				continue
			}
			err := maskErr(b.deathErr(r), b.errMask)
			reopen := b.reopens(r)
			if reopen {
				b.log.Info("the server ended the session or closed its stream; opening a new one at once", keyErr, err)
			} else {
				b.log.Warn("backend died", keyErr, err)
			}
			b.teardown(r, err)
			if time.Since(r.upAt) >= b.stableAfter {
				attempt = 0
			}
			if reopen {
				b.mu.Lock()
				b.restarts++
				b.mu.Unlock()
				b.connect(b.ctx)
				continue
			}
		}
		if b.ctx.Err() != nil {
			return
		}
		if b.needsLogin() {
			if !b.waitLogin() {
				return
			}
			// A new login (or logout) was saved: try it at once.
			attempt = 0
			if b.lazy {
				b.setState(StateIdle, nil)
			} else {
				b.connect(b.ctx)
			}
			continue
		}
		if b.lazy {
			// Started by the next call, not by a timer.
			select {
			case <-b.ctx.Done():
				return
			case <-b.wakeCh:
			}
			b.connect(b.ctx)
			select {
			case <-b.wakeCh: // callers that woke it during the attempt were served by it
			default:
			}
			continue
		}
		b.mu.Lock()
		lastErr := b.err
		b.mu.Unlock()
		var ce configError
		var re resourceError
		// Out of descriptors, processes or memory, a server is tried
		// again at the last delay for as long as it takes: the shortage
		// passes, or the operator raises the limit; it used to stay down
		// once the delays were spent. So is a remote server that cannot be
		// reached or does not answer: an outage, a network change, a
		// server started after the gateway pass too, and a try costs a
		// request (a stdio server that keeps dying costs a process start
		// each time, and stays down). Both used to stay down once the
		// delays were spent, until toolgate restarted.
		short := errors.As(lastErr, &re)
		remote := b.cfg.Type == config.TypeHTTP || b.cfg.Type == config.TypeSSE
		if len(delays) == 0 || (attempt >= len(delays) && !short && !remote) || errors.As(lastErr, &ce) {
			unset := len(b.cfg.Unset) > 0
			// A stdio server is looked at again: its command or cwd when
			// they are wrong, the files its args name (its script, being
			// mended) when it kept dying.
			recheck := len(delays) > 0 && b.cfg.Type == config.TypeStdio && !unset
			if len(delays) > 0 {
				switch {
				case unset:
					b.log.Warn("backend stays down until toolgate restarts with the variables of its entry set, or its config entry changes", keyErr, lastErr)
				case recheck && errors.As(lastErr, &ce):
					b.log.Warn("backend stays down until its command or cwd changes (looked at every "+b.p.opts.CommandRecheck.String()+") or its config entry does", keyErr, lastErr, keyAttempt, attempt)
				case recheck:
					b.log.Warn("backend stays down until a file its args name changes (looked at every "+b.p.opts.CommandRecheck.String()+"), or its command does", keyErr, lastErr, keyAttempt, attempt,
						"fix", "mend what makes it fail (its last stderr lines: toolgate__server_status): saving its script starts it again, and `toolgate servers restart "+b.cfg.Name+"` (or toolgate__restart_server, the console's Restart) does at once")
				}
			}
			b.mu.Lock()
			b.staysDown = true
			b.mu.Unlock()
			if !recheck || !b.waitCommand() {
				<-b.ctx.Done()
				return
			}
			b.mu.Lock()
			b.staysDown = false
			b.mu.Unlock()
			attempt = 0
			b.connect(b.ctx)
			continue
		}
		delay := delays[min(attempt, len(delays)-1)]
		attempt++
		switch {
		case attempt == 1 && errors.Is(lastErr, context.Canceled):
			// The first connect was aborted by Start's context: the
			// gateway is stopping, most often (a client that closes
			// stdin during a cold start), which is no failure to report.
			b.log.Debug("restarting backend after its connect was aborted", keyDelay, delay, keyAttempt, attempt)
		case attempt <= len(delays):
			b.log.Info("restarting backend", keyDelay, delay, keyAttempt, attempt)
		case attempt == len(delays)+1:
			msg := "remote server still does not answer: tried again every " + delay.String() + " until it does"
			if errors.As(lastErr, new(refusedError)) {
				msg = "remote server still refuses the connection: tried again every " + delay.String() + " until it takes it"
			}
			if short {
				msg = "backend still cannot start for want of a resource: tried again every " + delay.String() + " until it can"
			}
			b.log.Warn(msg+" (logged at debug level)", keyErr, lastErr)
			b.mu.Lock()
			b.quietRetry = true
			b.mu.Unlock()
		default:
			b.log.Debug("restarting backend", keyDelay, delay, keyAttempt, attempt)
		}
		// A login saved meanwhile (the scopes a 403 asked for, an account
		// with access) is tried at once, as by a backend that needs one:
		// it waited out the delay, 10 s once the first ones were spent.
		b.mu.Lock()
		loginChanged := b.loginChanged
		b.mu.Unlock()
		// A remote server is tried at once when the machine wakes from a
		// sleep (watchSleep): the delay's timer stood still meanwhile, and
		// the network the server was not reached on has most often changed.
		var woke <-chan struct{}
		if remote {
			b.mu.Lock()
			woke = b.woke
			b.mu.Unlock()
		}
		t := time.NewTimer(delay)
		select {
		case <-b.ctx.Done():
			t.Stop()
			return
		case <-t.C:
		case <-loginChanged:
			t.Stop()
			b.log.Info("the stored login changed; connecting again")
			attempt = 0
		case <-woke:
			t.Stop()
			b.log.Info("the machine woke from a sleep; connecting again now")
			attempt = 0
		}
		b.mu.Lock()
		b.restarts++
		b.mu.Unlock()
		b.connect(b.ctx)
	}
}

// reopens says whether the run r of a remote backend, which ended, is
// connected again at once rather than after the first restart delay: a
// server that ends sessions (an idle expiry, a restart that forgets them:
// 404 on the session) or closes its SSE stream (a proxy's time limit)
// answers, and the calls in between failed for that delay ("it is
// down"). Only when r had been up for stableAfter (a server that ends
// every session early waits out the delays as before), and not for a
// lazy backend (its next call starts it), a lost login, a server a call
// found unreachable, or "delays": [].
func (b *backend) reopens(r *run) bool {
	remote := b.cfg.Type == config.TypeHTTP || b.cfg.Type == config.TypeSSE
	return remote && !b.lazy && len(b.restartDelays) > 0 && r.lostLogin() == nil && r.unreachable.Load() == nil &&
		b.ctx.Err() == nil && time.Since(r.upAt) >= b.stableAfter
}

type runEnd int

const (
	endDied    runEnd = iota // the session or process ended
	endClosing               // the pool is closing
	endIdle                  // a lazy backend went unused for its idle timeout
)

// watch waits until r ends, the pool closes, or a lazy r has gone idle.
func (b *backend) watch(r *run) runEnd {
	var exited <-chan struct{}
	if r.proc != nil {
		exited = r.proc.exited
	}
	var tick <-chan time.Time
	if b.lazy && b.idleTimeout > 0 {
		t := time.NewTicker(max(b.idleTimeout/4, 10*time.Millisecond))
		defer t.Stop()
		tick = t.C
	}
	for {
		select {
		case <-b.ctx.Done():
			return endClosing
		case <-r.done:
			return endDied
		case <-exited:
			return endDied
		case <-r.loginLost:
			return endDied
		case <-tick:
			if b.takeIdle(r) {
				return endIdle
			}
		}
	}
}

// deathErr says why a run ended.
func (b *backend) deathErr(r *run) error {
	if le := r.lostLogin(); le != nil {
		return &loginError{server: b.cfg.Name, err: le}
	}
	if e := r.unreachable.Load(); e != nil {
		return *e
	}
	if r.proc != nil {
		select {
		case <-r.proc.exited:
			return fmt.Errorf("backend %q: process %s", b.cfg.Name, r.proc.exitErr())
		case <-time.After(exitWait):
		}
		return fmt.Errorf("backend %q: connection to the process broke (stdout closed or invalid JSON-RPC)%s", b.cfg.Name, r.proc.stderrSuffix())
	}
	if err := r.sess.Wait(); err != nil {
		if t := r.headers(); t != nil {
			// The server refused the GET of its stream of its own, and
			// answered nothing since: that ended the session.
			if rf := t.streamRefused.Load(); rf != nil && rf.answersBefore == t.answers.Load() {
				return b.atURL(rf.ownWords(b.cfg.URL, b.loginCommand(), b.cfg.Type, err))
			}
		}
		return fmt.Errorf("backend %q at %s: connection lost: %w", b.cfg.Name, b.cfg.URL, err)
	}
	return fmt.Errorf("backend %q at %s: connection closed by the server", b.cfg.Name, b.cfg.URL)
}

// teardown ends a run: calls in flight fail as unavailable, the session is
// closed, the process group stopped, and the run's goroutines awaited. The
// backend is marked down with err.
func (b *backend) teardown(r *run, err error) {
	// One step: a backend "up" without a run answered a call that came
	// in between with "unavailable: it is up", and /status with no PID.
	b.mu.Lock()
	if b.run == r {
		b.run = nil
	}
	b.setStateLocked(downState(err), err)
	b.mu.Unlock()
	r.cancel(errStopping)
	closed := make(chan struct{})
	go func() {
		_ = r.sess.Close()
		close(closed)
	}()
	if r.proc != nil {
		r.proc.stop(b.p.opts.StopGrace, b.p.opts.KillAfter)
	}
	<-closed
	r.wg.Wait()
	r.closeIdle()
}

// closeIdle drops a remote backend's kept-alive connections.
func (r *run) closeIdle() {
	if r.http != nil {
		r.http.CloseIdleConnections()
	}
}

// undecodable reports whether err, from a call, is go-sdk failing to decode
// the answer into the result (the call's Await unmarshals it with
// encoding/json), not the transport breaking, which it reports as
// ErrConnectionClosed or the transport's own error.
//
// Besides encoding/json's errors, go-sdk's own: a content block's binary
// data that is not base64 (a data: URL in an image's "data"), and a content
// type it does not know (a type of a later protocol, a server's typo),
// which it says in words alone. Both read "connection lost during the
// call", with the warning that the call may have run.
func undecodable(err error) bool {
	var syntax *json.SyntaxError
	var typ *json.UnmarshalTypeError
	var b64 base64.CorruptInputError
	return !errors.Is(err, mcp.ErrConnectionClosed) && (errors.As(err, &syntax) || errors.As(err, &typ) ||
		errors.As(err, &b64) || unknownContent.MatchString(err.Error()))
}

// unknownContent matches go-sdk v1.8.0's error for a content block of a
// type it does not know (mcp/content.go, contentFromWire), the type quoted.
var unknownContent = regexp.MustCompile(`(?:unrecognized|invalid) content type ("(?:[^"\\]|\\.)*")`)

// offersNoTools reports whether err, the answer to a first tools/list,
// says the server has no tools: it does not know the method, and its
// capabilities name no tools.
func offersNoTools(sess *mcp.ClientSession, err error) bool {
	var werr *jsonrpc.Error
	if !errors.As(err, &werr) || werr.Code != jsonrpc.CodeMethodNotFound {
		return false
	}
	res := sess.InitializeResult()
	return res != nil && (res.Capabilities == nil || res.Capabilities.Tools == nil)
}

// connectionEnded reports whether err says only that the connection to a
// stdio server ended (its stdout closed, its stdin gone): what a process
// that exits causes, not a reason the server gave.
func connectionEnded(err error) bool {
	for _, end := range []error{mcp.ErrConnectionClosed, io.EOF, io.ErrUnexpectedEOF, io.ErrClosedPipe, os.ErrClosed, syscall.EPIPE} {
		if errors.Is(err, end) {
			return true
		}
	}
	return false
}
