package backend

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"golang.org/x/sync/errgroup"

	"github.com/toolgate/toolgate/gateway/config"
)

// Log attribute keys.
const (
	keyServer    = "server"
	keyTransport = "transport"
	keyErr       = "err"
	keyLine      = "line"
	keyTools     = "tools"
	keyTimeout   = "timeout"
	keyGrace     = "grace"
	keyBytes     = "bytes"
	keyLimit     = "limit"
	keyCount     = "count"
	keyDelay     = "delay"
	keyAttempt   = "attempt"
	keyPID       = "pid"
	keyProtocol  = "protocol"
)

// Defaults of Options.
const (
	DefaultConnectTimeout        = 30 * time.Second
	DefaultCallTimeout           = 60 * time.Second
	DefaultMaxConcurrentConnects = 8
	DefaultProbeTimeout          = 3 * time.Second
	DefaultStopGrace             = 2 * time.Second
	DefaultKillAfter             = 5 * time.Second
	DefaultMaxMessageBytes       = 16 << 20
	DefaultMaxTools              = 5000
	DefaultStderrTail            = 20
	DefaultStderrRate            = 50
	DefaultStableAfter           = time.Minute
)

// DefaultRestartDelays is the backoff between restarts of a backend that died.
var DefaultRestartDelays = []time.Duration{2 * time.Second, 5 * time.Second, 10 * time.Second}

// LegacyProtocolVersion is the protocol spoken with servers that do not
// answer server/discover.
const LegacyProtocolVersion = "2025-11-25"

// Options configure a Pool. The zero value (or nil) means defaults.
type Options struct {
	Logger *slog.Logger // nil = discard

	// ConnectTimeout bounds start-up plus MCP handshake plus the first tool
	// listing (default 30s; a server's connectTimeout overrides it).
	ConnectTimeout time.Duration
	// CallTimeout bounds each tool call (default 60s; a server's
	// callTimeout overrides it).
	CallTimeout time.Duration
	// MaxConcurrentConnects bounds how many backends connect at once (default 8).
	MaxConcurrentConnects int
	// OnToolsChanged is called with a server's full tool list after it
	// connects and after each notifications/tools/list_changed (re-listed).
	// Calls for one server are serialized; it may be nil.
	OnToolsChanged func(server string, tools []*mcp.Tool)
	// ClientInfo is the client implementation sent to backends
	// (default {"toolgate", "dev"}).
	ClientInfo *mcp.Implementation

	// ProbeTimeout bounds the wait for an answer to server/discover before
	// falling back to the legacy initialize handshake (default 3s).
	ProbeTimeout time.Duration
	// StopGrace is how long a stdio backend gets to exit after its stdin is
	// closed before its process group gets SIGTERM (default 2s).
	StopGrace time.Duration
	// KillAfter is how long the process group gets after SIGTERM before
	// SIGKILL (default 5s).
	KillAfter time.Duration
	// RestartDelays are the waits before each restart of a backend that died
	// or failed to start; after the last one it stays down. nil means
	// DefaultRestartDelays; an empty non-nil slice disables restarts. The
	// count starts over once a backend stayed up for StableAfter. A
	// server's own config.Server.Restart overrides both.
	RestartDelays []time.Duration
	// StableAfter is how long a backend must stay up for its restart count
	// to start over (default 1m).
	StableAfter time.Duration
	// MaxMessageBytes caps one inbound JSON-RPC message: a stdio line, an SSE
	// event, a plain JSON HTTP body (default 16 MiB).
	MaxMessageBytes int
	// MaxTools caps a server's tool list; more is an error for that server
	// (default 5000).
	MaxTools int
	// EnvAllow adds names (or "PREFIX*") to DefaultEnvAllow for what stdio
	// backends inherit from the gateway's environment.
	EnvAllow []string
	// StderrTail is how many stderr lines are kept for error messages
	// (default 20).
	StderrTail int
	// Lazy reports whether a server is started on its first CallTool rather
	// than by Start (nil = none is). A lazy backend that dies, or stays
	// unused for IdleTimeout, goes back to "idle" instead of being restarted;
	// after a failed start the next call retries once the first of
	// RestartDelays has passed.
	Lazy func(config.Server) bool
	// IdleTimeout stops a lazy backend after this long without calls
	// (0 = keep it running; a server's own idleTimeout overrides it).
	IdleTimeout time.Duration
	// StderrRate is the number of stderr lines per second and backend that
	// are logged (burst 4×; default 50).
	StderrRate float64
	// Reaper runs each stdio backend under a reaper (Linux; ignored
	// elsewhere): this program's own executable, re-executed, which becomes
	// a child subreaper for the backend's process tree and kills all of it,
	// grandchildren included, when the gateway dies, even by SIGKILL. The
	// program's main must call ReaperMain when IsReaper reports true, before
	// anything else.
	Reaper bool
}

func (o *Options) withDefaults() Options {
	var r Options
	if o != nil {
		r = *o
	}
	if r.Logger == nil {
		r.Logger = slog.New(slog.DiscardHandler)
	}
	def := func(d *time.Duration, v time.Duration) {
		if *d <= 0 {
			*d = v
		}
	}
	def(&r.ConnectTimeout, DefaultConnectTimeout)
	def(&r.CallTimeout, DefaultCallTimeout)
	def(&r.ProbeTimeout, DefaultProbeTimeout)
	def(&r.StopGrace, DefaultStopGrace)
	def(&r.KillAfter, DefaultKillAfter)
	def(&r.StableAfter, DefaultStableAfter)
	if r.MaxConcurrentConnects <= 0 {
		r.MaxConcurrentConnects = DefaultMaxConcurrentConnects
	}
	if r.ClientInfo == nil {
		r.ClientInfo = &mcp.Implementation{Name: "toolgate", Version: "dev"}
	}
	if r.RestartDelays == nil {
		r.RestartDelays = DefaultRestartDelays
	}
	if r.MaxMessageBytes <= 0 {
		r.MaxMessageBytes = DefaultMaxMessageBytes
	}
	if r.MaxTools <= 0 {
		r.MaxTools = DefaultMaxTools
	}
	if r.StderrTail <= 0 {
		r.StderrTail = DefaultStderrTail
	}
	if r.StderrRate <= 0 {
		r.StderrRate = DefaultStderrRate
	}
	r.EnvAllow = append(slices.Clone(DefaultEnvAllow), r.EnvAllow...)
	return r
}

// State is a backend's connection state.
type State string

// States.
const (
	StateConnecting State = "connecting"
	StateUp         State = "up"
	StateDown       State = "down"
	StateIdle       State = "idle" // lazy: not started (or stopped when unused)
)

// Status is a snapshot of one backend.
type Status struct {
	Name      string    `json:"name"`
	Transport string    `json:"transport"` // stdio | http | sse
	State     State     `json:"state"`
	Err       string    `json:"error,omitempty"`     // why it is down
	LastErr   string    `json:"lastError,omitempty"` // the latest failure, kept after a restart
	Tools     int       `json:"tools"`               // tools known (kept while down)
	Since     time.Time `json:"since"`               // when State last changed
	Restarts  int       `json:"restarts"`            // restarts after the first connect
	PID       int       `json:"pid,omitempty"`       // stdio process id while running
	Protocol  string    `json:"protocol,omitempty"`
}

// UnavailableError is returned by CallTool when the server is unknown, not
// connected, down, or its connection broke during the call.
type UnavailableError struct {
	Server string
	Err    error
}

func (e *UnavailableError) Error() string {
	return fmt.Sprintf("backend %q is unavailable: %v", e.Server, e.Err)
}

func (e *UnavailableError) Unwrap() error { return e.Err }

// ErrCallTimeout is wrapped by CallTool's error when the per-call deadline
// expired (the backend was sent notifications/cancelled).
var ErrCallTimeout = errors.New("tool call timed out")

// ErrUnknownServer is wrapped in the UnavailableError for a server name that
// is not in the pool.
var ErrUnknownServer = errors.New("no such server")

// Pool holds one supervised session per configured server.
type Pool struct {
	opts     Options
	log      *slog.Logger
	backends map[string]*backend
	order    []string // names in config order

	ctx    context.Context // cancelled by Close
	cancel context.CancelFunc
	wg     sync.WaitGroup // supervisors

	mu      sync.Mutex
	started bool
	closed  bool
}

// New returns a pool for the given servers (disabled ones are skipped). It
// starts nothing: call Start.
func New(servers []config.Server, opts *Options) *Pool {
	o := opts.withDefaults()
	ctx, cancel := context.WithCancel(context.Background())
	p := &Pool{opts: o, log: o.Logger, backends: map[string]*backend{}, ctx: ctx, cancel: cancel}
	for _, s := range servers {
		if s.Disabled {
			continue
		}
		if _, dup := p.backends[s.Name]; dup {
			p.log.Warn("duplicate server name; keeping the first", keyServer, s.Name)
			continue
		}
		p.backends[s.Name] = newBackend(p, s)
		p.order = append(p.order, s.Name)
	}
	return p
}

// Start connects every backend (except lazy ones) concurrently (at most MaxConcurrentConnects at
// a time, each bounded by its connect timeout) and returns when each is up or
// down. It never fails as a whole: a backend that fails is down with its
// error in Status. Backends are then supervised until Close. Cancelling ctx
// aborts the connects still running (they are recorded down). Start may be
// called once.
func (p *Pool) Start(ctx context.Context) {
	if p.begin() {
		p.connectAll(ctx)
	}
}

// StartAsync is Start without the wait: it returns at once and connects in
// the background (a warm start serves from the last catalog meanwhile). A
// call to a backend whose connection is still being made waits for it,
// bounded by the connect timeout and the call's context. Close stops the
// connecting too.
func (p *Pool) StartAsync(ctx context.Context) {
	if !p.begin() {
		return
	}
	ctx, cancel := context.WithCancel(ctx)
	stop := context.AfterFunc(p.ctx, cancel)
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		defer stop()
		defer cancel()
		p.connectAll(ctx)
	}()
}

// begin marks the pool started; false when it already was, or is closed.
func (p *Pool) begin() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.started || p.closed {
		return false
	}
	p.started = true
	p.wg.Add(len(p.order)) // under mu, so that Close waits for the supervisors
	return true
}

// connectAll makes every eager backend's first connection, at most
// MaxConcurrentConnects at a time, then hands each to its supervisor.
func (p *Pool) connectAll(ctx context.Context) {
	var g errgroup.Group
	g.SetLimit(p.opts.MaxConcurrentConnects)
	for _, name := range p.order {
		b := p.backends[name]
		if b.lazy {
			continue // started by its first call
		}
		g.Go(func() error {
			b.connect(ctx)
			return nil
		})
	}
	_ = g.Wait()
	for _, name := range p.order {
		go p.backends[name].supervise()
	}
}

// Tools returns each server's last known tool list (servers that are down
// keep the tools they had, so that a catalog stays stable across restarts;
// use Status for availability). Servers that never listed are absent.
func (p *Pool) Tools() map[string][]*mcp.Tool {
	out := map[string][]*mcp.Tool{}
	for name, b := range p.backends {
		b.mu.Lock()
		if b.tools != nil {
			out[name] = slices.Clone(b.tools)
		}
		b.mu.Unlock()
	}
	return out
}

// Status returns a snapshot of every backend in config order.
func (p *Pool) Status() []Status {
	out := make([]Status, 0, len(p.order))
	for _, name := range p.order {
		out = append(out, p.backends[name].status())
	}
	return out
}

// Servers returns the configured (enabled) server names in config order.
func (p *Pool) Servers() []string { return slices.Clone(p.order) }

// CallTool calls tool on server with the server's call timeout. Errors:
// *UnavailableError when the server is unknown, not up, or its connection
// broke during the call; an error wrapping ErrCallTimeout when the deadline
// expired; otherwise the protocol error (e.g. a *jsonrpc.Error for an
// unknown tool). A tool's own failure is a result with IsError set, not an
// error.
func (p *Pool) CallTool(ctx context.Context, server, tool string, args map[string]any) (*mcp.CallToolResult, error) {
	b, ok := p.backends[server]
	if !ok {
		return nil, &UnavailableError{Server: server, Err: fmt.Errorf("%w (configured: %v)", ErrUnknownServer, p.order)}
	}
	p.mu.Lock()
	started, closed := p.started, p.closed
	p.mu.Unlock()
	if !started || closed {
		return nil, &UnavailableError{Server: server, Err: errors.New("the pool is not running (Start not called, or closed)")}
	}
	return b.callTool(ctx, tool, args)
}

// Close stops every backend (stdio processes get the stdin → SIGTERM →
// SIGKILL sequence on their process group) and waits for all of the pool's
// goroutines. It is safe to call more than once.
func (p *Pool) Close() error {
	p.mu.Lock()
	p.closed = true
	p.mu.Unlock()
	p.cancel()
	p.wg.Wait()
	return nil
}

var _ io.Closer = (*Pool)(nil)
