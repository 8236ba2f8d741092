// Package gateway owns the client-facing MCP server: it shows exactly two
// tools, search_tools and execute_tool, and routes execute_tool to the
// backend that owns the namespaced tool. It also owns the streamable HTTP
// front with its Host/Origin and body-size guards, and the GET /status
// report.
//
// The gateway never parses config files and never touches the index:
// ranking comes through a Searcher (`toolgate serve` passes the runtime loop,
// gateway/live, which wraps a search.Engine; the gateway speaks search's
// Query and Result), tool calls through a Caller and backend states through
// a StatusSource (backend.Pool implements both; of gateway/backend it uses
// only the types those speak: Status, UnavailableError, ErrCallTimeout, and
// CallEvents, which a call's context carries to the pool so that progress
// and log messages reach the client), and the loop's counters for GET
// /status through a StatsSource (live.Stats). search_tools' description
// names the servers behind the gateway; Refresh keeps it current.
//
// What each caller may see and run is the Policy's to say (gateway/policy):
// the gateway puts the caller of each request in its context (stdio: one
// session per process; HTTP: /mcp, or /profiles/NAME/mcp for a profile),
// filters search_tools with the caller's search filter and asks for a
// decision before each execute_tool.
package gateway

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"go.opentelemetry.io/otel/trace"

	"github.com/toolgate/toolgate/gateway/policy"
	"github.com/toolgate/toolgate/index/catalog"
	"github.com/toolgate/toolgate/internal/jsonwords"
	"github.com/toolgate/toolgate/internal/linerpc"
	"github.com/toolgate/toolgate/internal/oneline"
	"github.com/toolgate/toolgate/search"
)

// Searcher ranks catalog tools for a query and looks tools up by ID. The
// search engine implements it, and so does the runtime loop (live.Loop).
type Searcher interface {
	Search(ctx context.Context, q search.Query) (search.Result, error)
	Tool(id string) (catalog.Tool, bool)
	IDs() []string
}

// Suggestion reports whether ctx is that of a search the gateway runs for
// an answer of its own, not for a search_tools call: execute_tool looking
// for the tools an unknown name may have meant. A Searcher that counts
// searches (the metrics) leaves it out.
func Suggestion(ctx context.Context) bool { return ctx.Value(suggestionKey{}) != nil }

type suggestionKey struct{}

// Caller runs one tool on one backend. The backend pool implements it.
type Caller interface {
	CallTool(ctx context.Context, server, tool string, args map[string]any) (*mcp.CallToolResult, error)
}

// Policy says what the caller of a request may see and run. policy.Set
// implements it.
type Policy interface {
	// Filter is the search filter of the caller (nil = no restriction).
	Filter(c *policy.Caller) *search.Filter
	// Decide says whether the caller may see and run t, and why not.
	Decide(c *policy.Caller, t catalog.Tool) policy.Decision
	// Allowed is Decide's Allowed without building the reason (the lists
	// of the tools a caller sees ask it of every tool of the catalog).
	Allowed(c *policy.Caller, t catalog.Tool) bool
	// HasProfile reports whether a profile is configured (the HTTP route
	// /profiles/NAME/mcp answers 404 for one that is not).
	HasProfile(name string) bool
	// Sees reports whether the caller's own rules (its profile, its key's
	// scope) let it see t, whatever the state of t's server.
	Sees(c *policy.Caller, t catalog.Tool) bool
	// Reach says whether the caller may see and run a tool of tools and,
	// when it may not, the rules' distinct refusals (more: how many more).
	Reach(c *policy.Caller, tools policy.Tools) (ok bool, refused []policy.Decision, more int)
}

var _ Policy = (*policy.Set)(nil)

// Names of the two tools the client sees. They never change, so clients that
// ignore notifications/tools/list_changed still reach new backend tools.
const (
	SearchToolName  = "search_tools"
	ExecuteToolName = "execute_tool"
)

// Limits of search_tools: how many tools it returns when the client gives
// no "limit" (the ranker's own default, search.DefaultLimit), and the most
// it returns. The config's toolgate.search.defaultLimit and maxLimit
// override them through Options.
const (
	DefaultLimit = search.DefaultLimit
	MaxLimit     = 50
)

// Options configure a Gateway. The zero value (or nil) means defaults.
type Options struct {
	Logger  *slog.Logger // nil = discard
	Name    string       // server name reported to clients; default "toolgate"
	Version string       // default "dev"
	// DefaultLimit is search_tools' "limit" when the client gives none
	// (0 = DefaultLimit, or MaxLimit when that is smaller; never above
	// MaxLimit).
	DefaultLimit int
	// MaxLimit is the largest "limit" search_tools honours; larger ones are
	// lowered to it (0 = MaxLimit, or DefaultLimit when that is larger, so
	// a default limit above MaxLimit is not silently cut).
	MaxLimit int
	// Describe, if set, says in a few words what a server offers (the
	// config's description, else what the server says of itself), or ""
	// when nothing does; search_tools' description names each server with
	// them (see Refresh).
	Describe func(server string) string
	// Unavailable, if set, says why a server's tools cannot run right now
	// (still connecting after a warm start, down, ...), or "" when they can;
	// search_tools marks such tools. execute_tool still dispatches: the
	// Caller waits for a connection in progress and explains a down server.
	// forKey asks for the words an API key that is not admin may read
	// (backend.ForKey: no paths on the gateway's machine).
	Unavailable func(server string, forKey bool) string
	// AwaitTool, if set, is asked by execute_tool of a name the Searcher
	// lacks, server__tool of a server of Servers: it waits while the server
	// connects (a warm start's catalog holds what it listed in its last
	// run) and, when its listing holds tool, until the catalog served does,
	// and reports whether it may now. It returns false at once when there
	// is nothing to wait for (the server is up and lists no such tool, or
	// is down). execute_tool bounds the wait with MaxToolWait.
	AwaitTool func(ctx context.Context, server, tool string) bool
	// Building, if set, says without waiting why the Searcher has no
	// index to search yet (a cold start's first index being built: a
	// *live.BuildingError, as its Search answers past its wait), or nil.
	// execute_tool then runs the tools the Searcher knows (those the
	// servers listed), and explains an unknown name without searching.
	Building func() error
	// Servers, if set, lists the servers the gateway runs (the enabled ones
	// of its config). A search that finds no tool that fits names those
	// whose tools are not in the catalog and that are unavailable (down
	// since they were added: a command not found, a variable not set …),
	// so that an agent does not rephrase for a tool that is not there to
	// be found (SearchResult.DownServers).
	Servers func() []string
	// TracerProvider, if set, traces search_tools and execute_tool (with
	// their stages) as spans that continue the client's trace; nil = no
	// spans.
	TracerProvider trace.TracerProvider
	// Learner, if set, is told when a session runs a tool that one of its
	// recent searches returned (learning from use); the gateway then
	// remembers each session's last searches. Nil learns nothing.
	Learner Learner
	// LearnFromKeys says which callers with an API key teach the Learner:
	// "all", "admin" or "none" (toolgate.learn.fromKeys; "" =
	// DefaultLearnFromKeys). A caller without a key always does.
	LearnFromKeys string
	// Policy filters what each caller sees and runs (nil = everything).
	Policy Policy
	// Catalog numbers the searcher's catalogs (live.Loop): what the
	// policy keeps per caller scope for search_tools (why a caller
	// reaches no tool: policy.Set.Reach) is kept until it moves. nil =
	// nothing kept.
	Catalog policy.CatalogNumberer
	// Profile is the profile of the stdio client and of /mcp (serve
	// --profile; "" = none); the stdio client cannot change it.
	Profile string
	// ObserveRefused, if set, decorates the Caller that stands in for the
	// backends when the Policy refuses a call: the gateway's own, which
	// runs nothing and fails with an error wrapping ErrDenied. Observers
	// of calls (metrics, the console's recent calls) wrap it as they wrap
	// the Caller, so a refusal counts as OutcomeDenied there too.
	ObserveRefused func(Caller) Caller
	// Audit, if set, gets a record of every search_tools and execute_tool
	// call and every refused HTTP request.
	Audit AuditLog
	// MaxResultBytes, if set, gives the bound on the text of an
	// execute_tool result of a server's tools (the config's
	// maxResultBytes, the server's own or the toolgate section's), read at
	// each call; 0 or nil = DefaultMaxResultBytes. A result over it is
	// trimmed, with a note that says what was left out (trimResult).
	MaxResultBytes func(server string) int
	// Trimmed, if set, is told of each result execute_tool trimmed (the
	// metrics count them). It runs on the call's goroutine: it must be
	// quick.
	Trimmed func(Trimmed)
	// AuditArguments, if set, gives the arguments an audit record keeps
	// (audit.arguments "masked": the values with secrets masked); nil =
	// only their SHA-256.
	AuditArguments func(args any) any
	// OutputMismatch, if set, is called for each result execute_tool
	// passes on that does not fit its tool's output schema (outputProblem):
	// the metrics count them.
	OutputMismatch func(server, tool string)
}

// Gateway is the MCP server with the two tools. One Gateway serves any number
// of client sessions, over stdio or HTTP.
type Gateway struct {
	searcher Searcher
	caller   Caller
	refused  Caller // stands in for caller when the Policy refuses a call
	opts     Options
	log      *slog.Logger
	server   *mcp.Server
	schemas  schemaCache
	// outSchemas is the tools' output schemas, resolved (outputProblem).
	outSchemas schemaCache
	tracer     trace.Tracer // nil = no spans
	recent     *recent      // nil without a Learner
	// relayDropped counts the notifications dropped for clients that read
	// them slower than their backends sent them (eventRelay).
	relayDropped atomic.Int64

	descMu sync.Mutex
	desc   string // search_tools' description as registered
	// scopedDescs holds search_tools' description per search filter for
	// callers a profile or key limits (*search.Filter → string).
	scopedDescs sync.Map
	scopedCount atomic.Int32
	// listed is the servers with a tool in the catalog, of the catalog
	// numbered gen (Options.Catalog): listedServers.
	listed atomic.Pointer[listedServers]

	levels sessionLevels // log levels clients set (logging/setLevel)
	// proxyWarned: the refusal of a request through a reverse proxy to a
	// gateway without API keys was logged (once).
	proxyWarned atomic.Bool
	// stdio is the session of the stdio client, once connected
	// (StdioClient).
	stdio atomic.Pointer[mcp.ServerSession]
	// limits are search_tools' default and largest "limit" now (Options'
	// at New, SetLimits after).
	limits atomic.Pointer[searchLimits]
	// args holds argCounts' counts per server (string → map[string]int);
	// Refresh clears it.
	args sync.Map
	// inflight holds the cancel of each tools/call running
	// (*context.CancelCauseFunc → itself), for StopCalls; stopping says
	// StopCalls was called.
	inflight sync.Map
	stopping atomic.Bool
}

// ErrStopping is the cause of the context of a call that StopCalls ended.
var ErrStopping = errors.New("the gateway is stopping")

// stoppable lets StopCalls end every tools/call in flight. go-sdk does not
// end a handler's context with its session's (jsonrpc2 wraps it so that it
// does not), and closing a session waits for the calls in flight: a stop
// waited for a running call to end by itself, the whole stop budget.
func (g *Gateway) stoppable(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		if method == "notifications/cancelled" {
			// Which request, and the client's words: the call's own
			// context says only that its client cancelled it (go-sdk
			// does not give a handler its request's id).
			if p, ok := req.GetParams().(*mcp.CancelledParams); ok && p != nil {
				g.log.Info("the client cancelled a request", "request", oneline.Echo(fmt.Sprint(p.RequestID)), "reason", oneline.Echo(p.Reason))
			}
		}
		if method != "tools/call" {
			return next(ctx, method, req)
		}
		// The call's context ends with its client's, with a cause that
		// says who ended it (callEnded): go-sdk's is context.Canceled
		// whether the client cancelled or went away.
		parent := ctx
		ctx, cancel := context.WithCancelCause(context.WithoutCancel(parent))
		defer cancel(nil)
		defer context.AfterFunc(parent, func() { cancel(callEnded(parent)) })()
		key := &cancel
		g.inflight.Store(key, cancel)
		defer g.inflight.Delete(key)
		if g.stopping.Load() { // after StopCalls ranged over the calls
			cancel(ErrStopping)
		}
		return next(ctx, method, req)
	}
}

// ErrClientCancelled is the cause of the context of a call its client
// cancelled (notifications/cancelled, or a closed request over HTTP).
var ErrClientCancelled = errors.New("cancelled by the client")

// ErrClientGone is the cause of the context of a call whose client went
// away (its connection ended: stdin closed, its pipe broken).
var ErrClientGone = errors.New("the client disconnected")

// callEnded says why ctx, the context go-sdk gave a tools/call, ended: a
// client cancelling or going away (go-sdk's cause: context.Canceled for a
// cancel, the connection's read or write error for a client gone), an API
// key revoked, or the gateway stopping.
func callEnded(ctx context.Context) error {
	cause := context.Cause(ctx)
	switch {
	case keyEnded(ctx):
		return ErrKeyRevoked
	case errors.Is(cause, ErrStopping), errors.Is(cause, context.DeadlineExceeded):
		return cause
	case errors.Is(cause, context.Canceled):
		return ErrClientCancelled
	case errors.Is(cause, io.EOF), errors.Is(cause, io.ErrClosedPipe):
		return ErrClientGone
	}
	return fmt.Errorf("%w (%v)", ErrClientGone, cause)
}

// StopCalls ends the tools/calls in flight and those that start from now
// on: each is cancelled on its backend and answers that the gateway is
// stopping (ErrStopping), so that a stop need not wait for them.
func (g *Gateway) StopCalls() {
	g.stopping.Store(true)
	g.inflight.Range(func(_, v any) bool {
		v.(context.CancelCauseFunc)(ErrStopping)
		return true
	})
}

// searchLimits are search_tools' default and largest "limit".
type searchLimits struct{ def, max int }

// New returns a gateway over s and c.
func New(s Searcher, c Caller, opts *Options) *Gateway {
	g := &Gateway{searcher: s, caller: c}
	if opts != nil {
		g.opts = *opts
	}
	if g.opts.Name == "" {
		g.opts.Name = "toolgate"
	}
	if g.opts.Version == "" {
		g.opts.Version = "dev"
	}
	def, maxLimit := Limits(g.opts.DefaultLimit, g.opts.MaxLimit)
	g.limits.Store(&searchLimits{def, maxLimit})
	g.refused = refuser{}
	if g.opts.ObserveRefused != nil {
		g.refused = g.opts.ObserveRefused(g.refused)
	}
	if g.opts.TracerProvider != nil {
		g.tracer = g.opts.TracerProvider.Tracer("github.com/toolgate/toolgate/gateway")
	}
	g.log = g.opts.Logger
	if g.log == nil {
		g.log = slog.New(slog.DiscardHandler)
	}
	if g.opts.Learner != nil {
		g.recent = newRecent(nil)
	}
	g.server = mcp.NewServer(&mcp.Implementation{Name: g.opts.Name, Version: g.opts.Version}, &mcp.ServerOptions{
		Instructions: "This gateway fronts many MCP servers. Call search_tools with a short description of what you want to do, " +
			"then call execute_tool with the returned name (server__tool) and arguments that match its inputSchema.",
		// go-sdk logs every session at info level, and in stateless HTTP
		// mode every request is a session: keep its warnings only.
		Logger: slog.New(clientFaults{minLevel{g.log.Handler(), slog.LevelWarn}}),
	})
	g.server.AddReceivingMiddleware(heartbeats, g.stoppable, g.levels.middleware, g.scopedTools, g.profileSwitches, g.directCalls, g.unansweredQuestions)
	g.server.AddTool(executeTool(), g.traced(ExecuteToolName, g.audited(ExecuteToolName, g.handleExecute)))
	g.Refresh()
	return g
}

// Limits applies the defaults of Options.DefaultLimit and MaxLimit: the
// limits search_tools uses (and `toolgate search` with a config).
func Limits(def, maxLimit int) (int, int) {
	switch {
	case maxLimit <= 0 && def <= 0:
		return DefaultLimit, MaxLimit
	case maxLimit <= 0:
		return def, max(def, MaxLimit)
	case def <= 0:
		return min(DefaultLimit, maxLimit), maxLimit
	}
	return min(def, maxLimit), maxLimit
}

// SetLimits makes def and maxLimit (as Options.DefaultLimit and MaxLimit)
// search_tools' limits from the next call on (a config reload); when they
// change, search_tools is registered again with them in its input schema,
// and connected clients are told (tools/list_changed).
func (g *Gateway) SetLimits(def, maxLimit int) {
	def, maxLimit = Limits(def, maxLimit)
	g.descMu.Lock()
	defer g.descMu.Unlock()
	if l := g.limits.Load(); l.def == def && l.max == maxLimit {
		return
	}
	g.limits.Store(&searchLimits{def, maxLimit})
	g.addSearchTool()
	g.log.Info("search_tools limits changed", "default_limit", def, "max_limit", maxLimit)
}

// Server is the underlying MCP server, for serving it on any transport.
func (g *Gateway) Server() *mcp.Server { return g.server }

// ServeStdio serves one client on stdin/stdout until the client disconnects
// or ctx ends.
//
// The client is one session: toolgate__activate_profile changes its
// profile, unless Options.Profile fixed it.
func (g *Gateway) ServeStdio(ctx context.Context) error {
	return g.serve(ctx, linerpc.Stdio())
}

// ServeStdioFrom is ServeStdio reading the client from in (serve passes
// stdin watched since it started: linerpc.Watch) instead of os.Stdin.
func (g *Gateway) ServeStdioFrom(ctx context.Context, in io.ReadCloser) error {
	t := linerpc.StdioFrom(in)
	t.Busy = func() {
		g.log.Warn("the stdio client sends calls faster than it reads their answers: more are answered busy (-32052) until it reads", "unanswered", linerpc.MaxPendingCalls)
	}
	return g.serve(ctx, t)
}

// StdioCaller is the caller of the stdio client: one session, whose profile
// is Options.Profile (fixed when set).
func (g *Gateway) StdioCaller() *policy.Caller {
	return &policy.Caller{Transport: policy.TransportStdio, Session: policy.NewSession(g.opts.Profile, g.opts.Profile != "")}
}

// StdioClient is the name and version the stdio client gave in its
// initialize request ("claude-ai 0.1.0"), or "" before it did (or over
// HTTP). A machine runs one gateway per stdio client: this tells them
// apart in GET /status.
func (g *Gateway) StdioClient() string {
	ss := g.stdio.Load()
	if ss == nil {
		return ""
	}
	ip := ss.InitializeParams()
	if ip == nil || ip.ClientInfo == nil {
		return ""
	}
	return strings.TrimSpace(ip.ClientInfo.Name + " " + ip.ClientInfo.Version)
}

// serve serves one stdio-like client on t (tests pass in-memory transports).
func (g *Gateway) serve(ctx context.Context, t mcp.Transport) error {
	if policy.CallerFrom(ctx) == nil {
		ctx = policy.WithCaller(ctx, g.StdioCaller())
	}
	// Server.Run, less its ERROR line on a cancelled context: a stop
	// (SIGTERM, SIGINT) is not an error.
	ss, err := g.server.Connect(ctx, t, nil)
	if err != nil {
		return err
	}
	g.stdio.Store(ss)
	closed := make(chan error, 1)
	go func() { closed <- ss.Wait() }()
	select {
	case <-ctx.Done():
		g.StopCalls() // else Close waits for them to end by themselves
		if gu, ok := t.(interface{ GiveUpWrites() }); ok {
			// Close waits for every answer to be written: a client that
			// reads no more would hold the stop (linerpc.Transport).
			gu.GiveUpWrites()
		}
		ss.Close()
		<-closed
		return nil
	case err = <-closed:
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, mcp.ErrConnectionClosed) {
		return nil
	}
	return err
}

// toolError is an isError result: what went wrong and what to do next, in
// words a model can act on.
func toolError(format string, args ...any) *mcp.CallToolResult {
	return &mcp.CallToolResult{
		IsError: true,
		Content: []mcp.Content{&mcp.TextContent{Text: fmt.Sprintf(format, args...)}},
	}
}

// decodeArgs unmarshals raw tool arguments into v. An absent body decodes as
// an empty object. go-sdk has already parsed the request, so raw is one
// well-formed JSON value.
func decodeArgs(raw json.RawMessage, v any) error {
	t := bytes.TrimSpace(raw)
	if len(t) == 0 || string(t) == "null" {
		return nil
	}
	return jsonwords.Explain(json.Unmarshal(t, v), v) // the model reads it: JSON's words, not Go's
}

// clientFaultMessages are go-sdk's ERROR lines of a client that sends
// the handshake's messages out of order (a call before initialize, a second
// initialize, initialized twice): its mistake, answered to it, and no fault
// of the gateway's, so they are logged as warnings saying so.
var clientFaultMessages = []string{"method invalid during initialization", "duplicate initialize request", "duplicate initialized notification", "initialized before initialize", "method removed in the new protocol"}

// clientFaults logs clientFaultMessages at WARN level, as the client's.
type clientFaults struct{ slog.Handler }

func (c clientFaults) Handle(ctx context.Context, r slog.Record) error {
	if r.Level == slog.LevelError && slices.Contains(clientFaultMessages, r.Message) {
		r = r.Clone()
		r.Level = slog.LevelWarn
		r.AddAttrs(slog.String("by", "the client: it sent the MCP handshake's messages out of order, and was answered so"))
	}
	if !c.Handler.Enabled(ctx, r.Level) {
		return nil // a log at ERROR only
	}
	return c.Handler.Handle(ctx, r)
}

func (c clientFaults) WithAttrs(as []slog.Attr) slog.Handler {
	return clientFaults{c.Handler.WithAttrs(as)}
}

func (c clientFaults) WithGroup(name string) slog.Handler {
	return clientFaults{c.Handler.WithGroup(name)}
}

// minLevel drops records below its level.
type minLevel struct {
	slog.Handler
	level slog.Level
}

func (m minLevel) Enabled(ctx context.Context, l slog.Level) bool {
	return l >= m.level && m.Handler.Enabled(ctx, l)
}

func (m minLevel) WithAttrs(as []slog.Attr) slog.Handler {
	return minLevel{m.Handler.WithAttrs(as), m.level}
}

func (m minLevel) WithGroup(name string) slog.Handler {
	return minLevel{m.Handler.WithGroup(name), m.level}
}
