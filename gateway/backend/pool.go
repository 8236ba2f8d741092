package backend

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolgate/toolgate/gateway/config"
	"github.com/toolgate/toolgate/index/catalog"
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
	keyAfter     = "after"
	keySlept     = "slept"
)

// Defaults of Options.
const (
	DefaultConnectTimeout        = 30 * time.Second
	DefaultCallTimeout           = 55 * time.Second
	DefaultMaxConcurrentConnects = 8
	DefaultProbeTimeout          = 3 * time.Second
	DefaultStopGrace             = 2 * time.Second
	DefaultKillAfter             = 5 * time.Second
	DefaultMaxMessageBytes       = 16 << 20
	DefaultMaxTools              = 5000
	DefaultStderrTail            = 20
	DefaultStderrRate            = 50
	DefaultStableAfter           = time.Minute
	DefaultCommandRecheck        = 10 * time.Second
	DefaultKeepAlive             = 30 * time.Second
	DefaultPingTimeout           = 10 * time.Second
)

// DefaultRestartDelays is the backoff between restarts of a backend that died.
var DefaultRestartDelays = []time.Duration{2 * time.Second, 5 * time.Second, 10 * time.Second}

// LegacyProtocolVersion is the protocol spoken with servers that do not
// answer server/discover.
const LegacyProtocolVersion = "2025-11-25"

// StatelessProtocolVersion is the first protocol version of stateless MCP
// (SEP-2575): each request carries what a session used to hold, its log
// level among them (_meta "io.modelcontextprotocol/logLevel").
const StatelessProtocolVersion = "2026-07-28"

// Options configure a Pool. The zero value (or nil) means defaults.
type Options struct {
	Logger *slog.Logger // nil = discard

	// ConnectTimeout bounds start-up plus MCP handshake plus the first tool
	// listing (default 30s; a server's connectTimeout overrides it).
	ConnectTimeout time.Duration
	// CallTimeout bounds each tool call (default 55s: under the 60s after
	// which a client of the TypeScript SDK gives up, so that it reads
	// toolgate's error, not its own; a server's callTimeout overrides it).
	CallTimeout time.Duration
	// KeepAlive is how often a remote (http, sse) server's session is
	// pinged while up (default 30s; a server's keepAlive overrides it): a
	// network that drops the connection without a word (a Wi-Fi or VPN
	// that changed, a NAT that timed it out, a laptop that slept) is seen
	// within KeepAlive and PingTimeout, not at a call's timeout, and the
	// pings keep a NAT's or proxy's idle timer from running out. A server
	// of the stateless protocol is asked server/discover instead.
	KeepAlive time.Duration
	// PingTimeout is how long a ping may wait for its answer before the
	// session is taken for dropped (default 10s).
	PingTimeout time.Duration
	// MaxConcurrentConnects bounds how many backends connect at once (default 8).
	MaxConcurrentConnects int
	// OnToolsChanged is called with a server's full tool list after it
	// connects and after each notifications/tools/list_changed (re-listed).
	// Calls for one server are serialized; a backend that Reconfigure
	// removed or replaced calls it no more. It may be nil.
	OnToolsChanged func(server string, tools []*mcp.Tool)
	// OnDescriptionCut, when set, is told of each tool description the
	// backend cut to catalog.MaxDescription (logged too), with its length
	// before in bytes: `toolgate index --config`, whose log shows errors
	// only, says so to the server's author. Backends call it concurrently.
	OnDescriptionCut func(server, tool string, bytes int)
	// Known, when set, returns the tool of that server and name in the
	// catalog being served. A listed tool takes Known's name, title,
	// description and input schema where they are equal to its own, so a
	// catalog that did not change is held once, not once served and once
	// listed (at 50,000 tools the listed copies were about 25 MB). Only
	// stdio and SSE listings, which the list stash decodes, are shared so.
	Known func(server, name string) (catalog.Tool, bool)
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
	// or failed to start; after the last one a stdio backend stays down,
	// while a remote one (or one short of a resource) is tried again at the
	// last delay until it answers. nil means
	// DefaultRestartDelays; an empty non-nil slice disables restarts. The
	// count starts over once a backend stayed up for StableAfter. A
	// server's own config.Server.Restart overrides both.
	RestartDelays []time.Duration
	// StableAfter is how long a backend must stay up for its restart count
	// to start over (default 1m).
	StableAfter time.Duration
	// CommandRecheck is how often a stdio backend that stays down because
	// its command or cwd is wrong (not found, not executable, no such
	// folder), or because it kept dying, looks at them and at the files its
	// args name again; when they change (the command was installed, the
	// folder made, its script saved) it starts again (default 10s). A
	// restart policy with no delays never does.
	CommandRecheck time.Duration
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
	// RestartDelays has passed. Reconfigure calls it for the servers it
	// adds or restarts, with the pool locked: it must not call the pool.
	Lazy func(config.Server) bool
	// IdleTimeout stops a lazy backend after this long without calls
	// (0 = keep it running; a server's own idleTimeout overrides it).
	IdleTimeout time.Duration
	// StderrRate is the number of stderr lines per second and backend that
	// are logged (burst 4×; default 50).
	StderrRate float64
	// Auth gives http and sse backends the access tokens of `toolgate auth
	// login` (nil = none: only their configured headers). A server with a
	// static Authorization header never gets a token.
	Auth Authorizer
	// Reaper runs each stdio backend under a reaper (Linux; ignored
	// elsewhere): this program's own executable, re-executed, which becomes
	// a child subreaper for the backend's process tree and kills all of it,
	// grandchildren included, when the gateway dies, even by SIGKILL. The
	// program's main must call ReaperMain when IsReaper reports true, before
	// anything else.
	Reaper bool
	// StartAfter, if set, is called by StartAsync's goroutine before any
	// backend connects; the connections begin when it returns. Its context
	// ends as soon as a call needs a backend (CallTool), or the pool closes.
	// On a warm start `toolgate serve` waits there for the embedding model,
	// so that the first search does not queue behind the backends'
	// start-up; nil connects at once.
	StartAfter func(ctx context.Context)
	// Described, if set, returns what a server said of itself in a
	// handshake of an earlier run (kept by OnDescribed): Describe answers
	// with it until this run's handshake, so that a warm start describes
	// the server in search_tools as the run before did, and the handshake,
	// saying the same, changes nothing a client must be told of. A text the
	// scan of tool definitions flags is not taken. nil: none.
	Described func(server string) string
	// OnDescribed, if set, is called after a handshake with what the
	// server said of itself ("" for nothing, or a flagged text) when it
	// differs from what Describe took before (Described's, or the last
	// handshake's). It runs on the backend's connect goroutine.
	OnDescribed func(server, said string)
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
	def(&r.CommandRecheck, DefaultCommandRecheck)
	def(&r.KeepAlive, DefaultKeepAlive)
	def(&r.PingTimeout, DefaultPingTimeout)
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
	// StateNeedsLogin: a remote server wants a login that toolgate cannot
	// give (none stored, or its refresh was refused). Its error names the
	// command to run; it connects again when the stored login changes.
	StateNeedsLogin State = "needs-login"
)

// Authorizer attaches OAuth access tokens to a remote backend's requests
// (package oauth implements it).
type Authorizer interface {
	// Transport returns the RoundTripper of one connection to server at url
	// over base. When the server wants a login that cannot be given, it
	// calls loginRequired (at most once) with an error that says what to
	// run, and fails that connection's requests from then on.
	Transport(server, url string, base http.RoundTripper, loginRequired func(error)) http.RoundTripper
	// Changed returns a channel that is closed when server's stored login
	// changes after the call.
	Changed(server string) <-chan struct{}
}

// LoginCommander is an Authorizer that names the exact command that logs
// in to a server (oauth.Tokens: with the config and data folder of the
// gateway), for the fixes of a server's refusals (401, 403) to quote as
// its needs-login error does.
type LoginCommander interface {
	LoginCommand(server string) string
}

// StepUpKeeper is an Authorizer that keeps the step-ups servers asked for
// (oauth.Tokens), for a backend's status and the fix of a 403 to tell.
type StepUpKeeper interface {
	// StepUp is the step-up server at url asked for that its login was
	// not granted yet (scopes), and those of them the gateway could not
	// record for the next login (unrecorded, why: the data folder refused
	// the write), which that login would then not ask for.
	StepUp(server, url string) (scopes, unrecorded []string, why error)
}

// ExpiryKeeper is an Authorizer that knows when the access token of a
// login that cannot be refreshed expires (oauth.Tokens), for a backend's
// status to say before the server's calls fail.
type ExpiryKeeper interface {
	// LoginExpiry is when the access token of server's login (for url)
	// expires, false for a login that can be refreshed or none.
	LoginExpiry(server, url string) (time.Time, bool)
	// Forget stops the warning due before server's login expires: the
	// server left the pool (removed, disabled), or its changed entry
	// names another URL or no OAuth login (a stdio command, a static
	// Authorization header).
	Forget(server string)
}

// LoginExpiry is when the access token of a remote server's OAuth login
// expires, for a login that cannot be refreshed (the authorization server
// gave no refresh token): the server's calls fail from then until Login.
type LoginExpiry struct {
	Expires time.Time `json:"expires"`
	Login   string    `json:"login"` // the command that logs in again
}

// StepUp is a step-up authorization a logged-in remote server asked for
// (a 403 insufficient_scope naming scopes its login lacks, MCP
// 2025-11-25): the calls that need them fail until the login it names.
type StepUp struct {
	Scopes []string `json:"scopes,omitempty"` // what the server asked for beyond the login's
	Login  string   `json:"login"`            // the command that asks for them, as the call's error gives it
	// NotRecorded says why the scopes could not be recorded for that
	// login (the data folder refused the write), and what to do instead:
	// the login alone would ask for the old scopes again.
	NotRecorded string `json:"notRecorded,omitempty"`
}

// Status is a snapshot of one backend.
type Status struct {
	Name      string    `json:"name"`
	Transport string    `json:"transport"` // stdio | http | sse
	State     State     `json:"state"`
	Err       string    `json:"error,omitempty"`     // why it is down
	LastErr   string    `json:"lastError,omitempty"` // the latest failure, kept after a restart
	Tools     int       `json:"tools"`               // tools known (kept while down)
	InFlight  int       `json:"inFlight"`            // tool calls under way: from dispatch until the answer or error
	Since     time.Time `json:"since"`               // when State last changed
	Restarts  int       `json:"restarts"`            // restarts after the first connect
	PID       int       `json:"pid,omitempty"`       // stdio process id while running (the reaper's, under one)
	// ServerPID is the server's own process id when it runs under a
	// reaper (Options.Reaper), which PID is: what to look at with ps, or
	// to signal.
	ServerPID int    `json:"serverPid,omitempty"`
	Protocol  string `json:"protocol,omitempty"`
	// TLSCert is the client certificate the server is reached with (its
	// "tls.cert"), TLSCertNotBefore and TLSCertNotAfter the dates it is
	// valid between, so that it is renewed before the server refuses it;
	// TLSCertError says why the file cannot be read (removed, not PEM),
	// which the next connect fails on.
	TLSCert          string     `json:"tlsCert,omitempty"`
	TLSCertNotBefore *time.Time `json:"tlsCertNotBefore,omitempty"`
	TLSCertNotAfter  *time.Time `json:"tlsCertNotAfter,omitempty"`
	TLSCertError     string     `json:"tlsCertError,omitempty"`
	// StepUp is the step-up the server asked for that its login lacks
	// (nil for none): it may be up while the calls that need it fail 403.
	StepUp *StepUp `json:"stepUp,omitempty"`
	// LoginExpiry is when the access token of the server's OAuth login
	// expires, for a login that cannot be refreshed (nil otherwise, and
	// while the server needs a login).
	LoginExpiry *LoginExpiry `json:"loginExpiry,omitempty"`
	// ErrForKey and LastErrForKey are what an API key that is not admin
	// reads of Err and LastErr (ErrForKey of the errors they are the text
	// of: the gateway's words and fix, what the server said hidden), which
	// ForKey puts in their place; "" when the pool did not fill them in (a
	// Status decoded or made by hand), and then ForKey hides the whole text.
	ErrForKey     string `json:"-"`
	LastErrForKey string `json:"-"`
}

// HiddenFromKey stands, in what an API key that is not admin sees, for a
// text that may hold paths on the gateway's machine or name servers
// outside the key's scope.
const HiddenFromKey = "hidden from this API key: an admin key sees it"

// ForKey is st as an API key that is not admin sees it (GET /status, the
// console, toolgate__list_servers and toolgate__server_status): no paths
// on the gateway's machine. The client certificate's file is left out
// (its dates kept) and its error reads HiddenFromKey; the server's errors,
// which may hold the command line, the cwd, the last stderr lines, a
// file's path or what a remote server answered, keep the gateway's own
// words and fix with those hidden (ErrForKey), as execute_tool's answer
// does.
func (st Status) ForKey() Status {
	st.TLSCert = ""
	st.TLSCertError = ForKey(st.TLSCertError)
	if st.StepUp != nil {
		// As the 403's fix reads to such a key: the command bare, the
		// server's scopes hidden.
		st.StepUp = &StepUp{Login: bareLogin(st.Name), NotRecorded: ForKey(st.StepUp.NotRecorded)}
	}
	if le := st.LoginExpiry; le != nil {
		st.LoginExpiry = &LoginExpiry{Expires: le.Expires, Login: bareLogin(st.Name)}
	}
	for _, s := range []struct{ text, forKey *string }{{&st.Err, &st.ErrForKey}, {&st.LastErr, &st.LastErrForKey}} {
		if *s.forKey == "" {
			*s.forKey = ForKey(*s.text)
		}
		*s.text, *s.forKey = *s.forKey, ""
	}
	return st
}

// ForKey is text, a server's or the gateway's error, as an API key that is
// not admin reads it: HiddenFromKey, or "" when there is none. What the
// model of such a key reads (search_tools' "unavailable", execute_tool's
// answer for a server that cannot run) goes through it as GET /status
// does: such a text may hold a command's path, its stderr lines, the
// config file's path or a URL. It is ErrForKey of an error that keeps no
// words of the gateway's apart: a text alone does not say which are.
func ForKey(text string) string {
	if text == "" {
		return ""
	}
	return HiddenFromKey
}

// ErrForKey is err's text as an API key that is not admin reads it: the
// gateway's own words of an error that keeps them apart (OwnWords, an
// UnavailableError), with what another said hidden (ForKey of it, or its
// own ErrForKey when it keeps words apart too); the whole text hidden
// (ForKey) for any other error. "" for nil.
func ErrForKey(err error) string {
	switch e := err.(type) {
	case nil:
		return ""
	case interface{ forKey() string }:
		return e.forKey()
	}
	return ForKey(err.Error())
}

// OwnWords is an error in the gateway's own words, Before and After,
// around what another said, Said: a server's or its transport's error, a
// status and body, an address, a list that names servers outside a key's
// scope, a command line that names files on the gateway's machine. Its
// text is all of them, then Then's; an API key that is not admin reads the
// gateway's words with Said hidden (ErrForKey), in brackets when the words
// go on after it: "the connection closed before the server answered
// (hidden from this API key: an admin key sees it): the call may or may
// not have run; check before calling again", or the fix the gateway
// suggests after a server's refusal. errors.Is and errors.As see Said,
// Then and Mark.
type OwnWords struct {
	Before string
	Said   error // nil: all the words are the gateway's
	After  string
	// Then goes on after After, kept apart the same way: words that quote
	// another a second time (a fix that names the scopes a server asked
	// for, after its refusal's body). Nil when there is none.
	Then *OwnWords
	// Mark is an error of the gateway's that the words say (ErrMayHaveRun,
	// ErrUnknownServer), for errors.Is; nil when there is none.
	Mark error
}

func (e *OwnWords) Error() string {
	var b strings.Builder
	for w := e; w != nil; w = w.Then {
		b.WriteString(w.Before)
		if w.Said != nil {
			b.WriteString(w.Said.Error())
		}
		b.WriteString(w.After)
	}
	return b.String()
}

func (e *OwnWords) forKey() string {
	var b strings.Builder
	for w := e; w != nil; w = w.Then {
		b.WriteString(w.Before)
		hidden := ErrForKey(w.Said)
		if hidden == HiddenFromKey && (w.After != "" || w.Then != nil) && !strings.HasSuffix(b.String(), "(") {
			// Mid-sentence: "the server answered (hidden …), not MCP".
			hidden = "(" + hidden + ")"
		}
		b.WriteString(hidden)
		b.WriteString(w.After)
	}
	return b.String()
}

func (e *OwnWords) Unwrap() []error {
	var errs []error
	for _, err := range []error{e.Said, e.Mark} {
		if err != nil {
			errs = append(errs, err)
		}
	}
	if e.Then != nil {
		errs = append(errs, e.Then)
	}
	return errs
}

// own is words that are all the gateway's, which mark is when it is one
// of its errors (errReplaced, a stop's cause): an API key that is not
// admin reads them whole.
func own(words string, mark error) *OwnWords { return &OwnWords{Before: words, Mark: mark} }

// ErrMayHaveRun is in an UnavailableError (errors.Is) when the call was
// sent and no answer came: the server may have run it. Its text is the
// gateway's own warning against calling a write twice, which an API key
// that is not admin reads too (OwnWords).
var ErrMayHaveRun = errors.New("the call may or may not have run; check before calling again")

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

func (e *UnavailableError) forKey() string {
	return fmt.Sprintf("backend %q is unavailable: %s", e.Server, ErrForKey(e.Err))
}

// RefusedError is returned by CallTool when the server, which stays up,
// refused this one call (a 403 asking for scopes its login lacks, MCP's
// step-up): its other tools work, and this one once the login has them.
// It was an UnavailableError, and read "unavailable … retry later".
type RefusedError struct {
	Server string
	Err    error
}

func (e *RefusedError) Error() string {
	return fmt.Sprintf("backend %q refused the call: %v", e.Server, e.Err)
}

func (e *RefusedError) Unwrap() error { return e.Err }

func (e *RefusedError) forKey() string {
	return fmt.Sprintf("backend %q refused the call: %s", e.Server, ErrForKey(e.Err))
}

// ErrCallTimeout is wrapped by CallTool's error when the per-call deadline
// expired (the backend was sent notifications/cancelled).
var ErrCallTimeout = errors.New("tool call timed out")

// ErrUnknownServer is wrapped in the UnavailableError for a server name that
// is not in the pool.
var ErrUnknownServer = errors.New("no such server")

// unknownServer is ErrUnknownServer, then why, then the configured servers,
// which an API key that is not admin reads hidden: they name servers
// outside its scope.
func unknownServer(why string, configured []string) *OwnWords {
	return &OwnWords{Before: ErrUnknownServer.Error() + why + " (configured: ", Said: errors.New(fmt.Sprint(configured)), After: ")", Mark: ErrUnknownServer}
}

// Pool holds one supervised session per configured server. Reconfigure
// changes the set of servers while it runs.
type Pool struct {
	opts   Options
	log    *slog.Logger
	roster atomic.Pointer[roster] // replaced whole by Reconfigure, read without locks

	ctx    context.Context // cancelled by Close
	cancel context.CancelFunc
	wg     sync.WaitGroup // supervisors
	sem    chan struct{}  // bounds first connects (MaxConcurrentConnects)

	mu      sync.Mutex // started, closed, pastRestarts; serializes roster changes
	started bool
	closed  bool
	// pastRestarts are the restarts of servers Reconfigure removed (from
	// the config, or disabled at run time), by name: one that comes back
	// counts on from there, so that Status.Restarts (a Prometheus counter,
	// toolgate_backend_restarts_total) never goes back while the process
	// lives.
	pastRestarts map[string]int
	// startNow ends the wait in Options.StartAfter (a call needs a
	// backend); set by StartAsync.
	startNow context.CancelFunc
	// wakeCh is closed (and replaced) when the machine woke from a sleep
	// (watchSleep).
	wakeMu sync.Mutex
	wakeCh chan struct{}
}

// roster is the pool's set of backends at one moment. It is never changed
// once stored: Reconfigure stores a new one.
type roster struct {
	byName  map[string]*backend
	order   []string                 // names in config order
	cfgs    map[string]config.Server // each backend's entry as given, for Reconfigure
	removed map[string]bool          // names Reconfigure dropped (for error messages)
}

func (r *roster) list() []*backend {
	out := make([]*backend, 0, len(r.order))
	for _, name := range r.order {
		out = append(out, r.byName[name])
	}
	return out
}

// New returns a pool for the given servers (disabled ones are skipped). It
// starts nothing: call Start.
func New(servers []config.Server, opts *Options) *Pool {
	o := opts.withDefaults()
	ctx, cancel := context.WithCancel(context.Background())
	p := &Pool{opts: o, log: o.Logger, ctx: ctx, cancel: cancel, sem: make(chan struct{}, o.MaxConcurrentConnects), wakeCh: make(chan struct{})}
	r := &roster{byName: map[string]*backend{}, cfgs: map[string]config.Server{}, removed: map[string]bool{}}
	for _, s := range p.enabled(servers) {
		r.byName[s.Name] = newBackend(p, s)
		r.cfgs[s.Name] = s
		r.order = append(r.order, s.Name)
	}
	p.roster.Store(r)
	return p
}

// enabled returns the servers the pool runs: disabled ones are left out,
// and of two entries with one name the first is kept (with a warning).
func (p *Pool) enabled(servers []config.Server) []config.Server {
	seen := map[string]bool{}
	var out []config.Server
	for _, s := range servers {
		if s.Disabled {
			continue
		}
		if seen[s.Name] {
			p.log.Warn("duplicate server name; keeping the first", keyServer, s.Name)
			continue
		}
		seen[s.Name] = true
		out = append(out, s)
	}
	return out
}

// Start connects every backend (except lazy ones) concurrently (at most MaxConcurrentConnects at
// a time, each bounded by its connect timeout) and returns when each is up or
// down. It never fails as a whole: a backend that fails is down with its
// error in Status. Backends are then supervised until Close. Cancelling ctx
// aborts the connects still running (they are recorded down). Start may be
// called once.
func (p *Pool) Start(ctx context.Context) {
	if list, ok := p.begin(); ok {
		p.connectAll(ctx, list)
	}
}

// StartAsync is Start without the wait: it returns at once and connects in
// the background (a warm start serves from the last catalog meanwhile). A
// call to a backend whose connection is still being made waits for it,
// bounded by the connect timeout and the call's context. Close stops the
// connecting too.
func (p *Pool) StartAsync(ctx context.Context) {
	list, ok := p.begin()
	if !ok {
		return
	}
	ctx, cancel := context.WithCancel(ctx)
	stop := context.AfterFunc(p.ctx, cancel)
	wait, waitEnd := context.WithCancel(ctx)
	p.mu.Lock()
	p.startNow = waitEnd
	p.mu.Unlock()
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		defer stop()
		defer cancel()
		if f := p.opts.StartAfter; f != nil {
			f(wait)
		}
		waitEnd()
		p.connectAll(ctx, list)
	}()
}

// begin marks the pool started and returns the backends to start; false
// when it already was started, or is closed.
func (p *Pool) begin() ([]*backend, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.started || p.closed {
		return nil, false
	}
	p.started = true
	list := p.roster.Load().list()
	p.wg.Add(len(list) + 1) // under mu, so that Close waits for the supervisors and watchSleep
	go p.watchSleep()
	return list, true
}

// connectAll makes every eager backend's first connection, at most
// MaxConcurrentConnects at a time, then hands each to its supervisor.
func (p *Pool) connectAll(ctx context.Context, list []*backend) {
	var wg sync.WaitGroup
	for _, b := range list {
		if b.lazy {
			continue // started by its first call
		}
		wg.Go(func() { p.firstConnect(ctx, b) })
	}
	wg.Wait()
	for _, b := range list {
		go b.supervise()
	}
}

// firstConnect makes b's first connection once a connect slot is free.
func (p *Pool) firstConnect(ctx context.Context, b *backend) {
	select {
	case p.sem <- struct{}{}:
	case <-b.ctx.Done():
		return
	case <-ctx.Done():
		b.setState(StateDown, fmt.Errorf("backend %q: connect aborted: %w", b.cfg.Name, context.Cause(ctx)))
		return
	}
	defer func() { <-p.sem }()
	b.connect(ctx)
}

// Diff says what Reconfigure did, by server name in config order.
type Diff struct {
	Added     []string // new servers, connecting (or idle when lazy)
	Removed   []string // stopped and gone
	Changed   []string // stopped and started again with the new entry
	Updated   []string // only fields of inPlace changed: applied in place, not restarted
	Unchanged []string // left running, untouched
	// Fields are the entry's fields that changed, by server of Changed
	// and Updated (config.Server.Changes).
	Fields map[string][]string
}

// Empty reports whether nothing changed.
func (d Diff) Empty() bool {
	return len(d.Added)+len(d.Removed)+len(d.Changed)+len(d.Updated) == 0
}

// inPlace are the fields of a server entry that Reconfigure applies to a
// running backend without restarting it (the description is read from the
// roster's entry by Describe, the language by the index's build). The
// gateway reads maxResultBytes from the config at each call.
var inPlace = []string{"connectTimeout", "callTimeout", "keepAlive", "description", "language", "maxResultBytes"}

// Reconfigure makes the pool run servers (disabled ones are skipped): by
// name, a server that is no longer listed is removed, a new one added, one
// whose entry changed (config.Server.Changes) is stopped and started again
// with the new entry; one that did not change keeps running untouched.
// A change of the fields of inPlace only is applied in place.
//
// It returns at once. Stopping (stdin → SIGTERM → SIGKILL for stdio)
// happens in the background, and Close waits for it. Added and changed
// servers connect in the background as with StartAsync (lazy ones wait for
// their first call); ctx aborts those first connection attempts. Before
// Start it only changes the set that Start will start; after Close it does
// nothing.
//
// A call in flight on a removed or changed server fails with an
// UnavailableError that says so; a new call on a removed server gets
// ErrUnknownServer, one on a changed server goes to its new backend.
func (p *Pool) Reconfigure(ctx context.Context, servers []config.Server) Diff {
	return p.ReconfigureWhy(ctx, servers, nil)
}

// ReconfigureWhy is Reconfigure, with why saying why a server that leaves
// the pool leaves it (nil, or why nil: it was removed from the config): a
// call in flight on it fails with those words (Disabled: "it was disabled
// by the console during the call"). A server disabled at run time left
// the pool as a removal, and its call said "it was removed from the
// config during the call", which the config was not.
func (p *Pool) ReconfigureWhy(ctx context.Context, servers []config.Server, why func(server string) error) Diff {
	p.mu.Lock()
	defer p.mu.Unlock()
	var d Diff
	if p.closed {
		return d
	}
	old := p.roster.Load()
	next := &roster{byName: map[string]*backend{}, cfgs: map[string]config.Server{}, removed: maps.Clone(old.removed)}
	var start, replaced []*backend
	for _, s := range p.enabled(servers) {
		next.order = append(next.order, s.Name)
		next.cfgs[s.Name] = s
		delete(next.removed, s.Name)
		b, ok := old.byName[s.Name]
		if !ok {
			nb := newBackend(p, s)
			nb.restarts = p.pastRestarts[s.Name]
			delete(p.pastRestarts, s.Name)
			next.byName[s.Name] = nb
			start = append(start, nb)
			d.Added = append(d.Added, s.Name)
			continue
		}
		changes := old.cfgs[s.Name].Changes(s)
		if len(changes) > 0 {
			if d.Fields == nil {
				d.Fields = map[string][]string{}
			}
			d.Fields[s.Name] = changes
		}
		switch {
		case len(changes) == 0:
			next.byName[s.Name] = b
			d.Unchanged = append(d.Unchanged, s.Name)
		case !slices.ContainsFunc(changes, func(f string) bool { return !slices.Contains(inPlace, f) }):
			b.setTimeouts(s)
			next.byName[s.Name] = b
			d.Updated = append(d.Updated, s.Name)
			b.log.Info("config entry changed; applied without a restart", "fields", changes)
		default:
			nb := newBackend(p, s)
			nb.restarts = b.restartCount() // the server's count goes on
			next.byName[s.Name] = nb
			start = append(start, nb)
			replaced = append(replaced, b)
			d.Changed = append(d.Changed, s.Name)
			b.log.Info("config entry changed; restarting the backend", "fields", changes)
		}
	}
	var removed []*backend
	for _, name := range old.order {
		if _, ok := next.byName[name]; !ok {
			if p.pastRestarts == nil {
				p.pastRestarts = map[string]int{}
			}
			p.pastRestarts[name] = old.byName[name].restartCount()
			removed = append(removed, old.byName[name])
			next.removed[name] = true
			d.Removed = append(d.Removed, name)
		}
	}
	// From here on no new call reaches a removed or replaced backend; the
	// ones in flight fail with the cause, and the supervisors tear down.
	p.roster.Store(next)
	for _, b := range removed {
		cause := errRemoved
		if why != nil {
			if err := why(b.cfg.Name); err != nil {
				cause = err
			}
		}
		b.log.Info(strings.TrimPrefix(cause.Error(), "it was ") + "; stopping the backend")
		b.stop(cause)
		b.forgetLogin()
	}
	for _, b := range replaced {
		b.stop(errReplaced)
		if nb := next.byName[b.cfg.Name]; nb.auth() == nil || nb.cfg.URL != b.cfg.URL {
			b.forgetLogin() // the new entry's login is another, or none
		}
	}
	if p.started {
		for _, b := range start {
			p.launch(ctx, b)
		}
	}
	return d
}

// launch makes b's first connection in the background (none for a lazy
// backend: its first call does) and then supervises it. ctx aborts the
// first connection attempt. p.mu is held, so that Close waits for it.
func (p *Pool) launch(ctx context.Context, b *backend) {
	p.wg.Add(1)
	go func() {
		if !b.lazy {
			p.firstConnect(ctx, b)
		}
		b.supervise()
	}()
}

// Restart stops server's backend and starts it again with the same entry,
// as a reload that changed the entry would (a stdio server gets a new
// process; a lazy one goes back to idle until its next call). The restart
// counts in Status.Restarts, the last error and the known tools are kept.
// It returns at once: calls in flight fail as unavailable, saying it was
// restarted, and new calls wait for the new connection. The error is an
// *UnavailableError wrapping ErrUnknownServer for a name not in the pool.
func (p *Pool) Restart(server string) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	old := p.roster.Load()
	b, ok := old.byName[server]
	switch {
	case p.closed:
		return &UnavailableError{Server: server, Err: own("the gateway is stopping", nil)}
	case !ok:
		return &UnavailableError{Server: server, Err: unknownServer("", old.order)}
	}
	nb := newBackend(p, old.cfgs[server])
	nb.stderr = b.stderr // the lines before the restart say why it was wanted
	b.mu.Lock()
	nb.restarts, nb.lastErr, nb.tools = b.restarts+1, b.lastErr, b.tools
	b.mu.Unlock()
	nb.discoverLate.Store(b.discoverLate.Load())
	nb.legacyStart.Store(b.legacyStart.Load())
	nb.legacySSE.Store(b.legacySSE.Load())
	next := *old // rosters are never changed once stored: copy, then swap
	next.byName = maps.Clone(old.byName)
	next.byName[server] = nb
	p.roster.Store(&next)
	b.log.Info("restarting the backend on request")
	b.stop(errRestarted)
	if p.started {
		p.launch(nb.ctx, nb)
	}
	return nil
}

// Stderr returns the last lines a stdio server wrote to stderr (masked as
// in the log), across its restarts; nil for a remote server.
func (p *Pool) Stderr(server string) []string {
	b, ok := p.roster.Load().byName[server]
	if !ok || b.stderr == nil {
		return nil
	}
	return b.stderr.get()
}

// Tools returns each server's last known tool list (servers that are down
// keep the tools they had, so that a catalog stays stable across restarts;
// use Status for availability). Servers that never listed are absent.
func (p *Pool) Tools() map[string][]*mcp.Tool {
	out := map[string][]*mcp.Tool{}
	for name, b := range p.roster.Load().byName {
		b.mu.Lock()
		if b.tools != nil {
			out[name] = slices.Clone(b.tools)
		}
		b.mu.Unlock()
	}
	return out
}

// PastRestarts is the restarts of a server that Reconfigure removed (out
// of the config, or disabled at run time) and that has not come back: the
// count it goes on from when it does (0 for any other server).
func (p *Pool) PastRestarts(server string) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.pastRestarts[server]
}

// Status returns a snapshot of every backend in config order.
func (p *Pool) Status() []Status {
	list := p.roster.Load().list()
	out := make([]Status, 0, len(list))
	for _, b := range list {
		out = append(out, b.status())
	}
	return out
}

// Servers returns the configured (enabled) server names in config order.
func (p *Pool) Servers() []string { return slices.Clone(p.roster.Load().order) }

// CallTool calls tool on server with the server's call timeout. Errors:
// *UnavailableError when the server is unknown, not up, or its connection
// broke during the call; an error wrapping ErrCallTimeout when the deadline
// expired; otherwise the protocol error (e.g. a *jsonrpc.Error for an
// unknown tool). A tool's own failure is a result with IsError set, not an
// error.
func (p *Pool) CallTool(ctx context.Context, server, tool string, args map[string]any) (*mcp.CallToolResult, error) {
	p.mu.Lock()
	started, closed, startNow := p.started, p.closed, p.startNow
	p.mu.Unlock()
	if startNow != nil {
		startNow() // the backends connect now, if they were held
	}
	for attempt := 0; ; attempt++ {
		r := p.roster.Load()
		b, ok := r.byName[server]
		if !ok {
			if r.removed[server] {
				return nil, &UnavailableError{Server: server, Err: unknownServer(fmt.Sprintf(": %q was removed from the config", server), r.order)}
			}
			return nil, &UnavailableError{Server: server, Err: unknownServer("", r.order)}
		}
		if !started || closed {
			return nil, &UnavailableError{Server: server, Err: own("the pool is not running (Start not called, or closed)", nil)}
		}
		res, err := b.callTool(ctx, tool, args)
		// Its entry changed before the call was sent: the new backend takes it.
		if errors.Is(err, errReplaced) && attempt < 3 {
			continue
		}
		return res, err
	}
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
