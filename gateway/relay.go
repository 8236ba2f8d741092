package gateway

//lint:file-ignore SA1019 MCP logging is deprecated from protocol 2026-07-28 on (SEP-2577) but is what 2025-11-25 clients and servers speak, and it stays functional in the deprecation window; execute_tool relays it (issue 13)

import (
	"context"
	"fmt"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"weak"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolgate/toolgate/gateway/backend"
)

// This file carries what a backend sends during an execute_tool call back
// to the client that made it: progress notifications (when the client's
// request carries a progress token) and log messages (when the client set a
// log level). Cancellation needs nothing here: go-sdk cancels the handler's
// context on the client's notifications/cancelled (or when a stateless HTTP
// request's stream closes), and the pool cancels the backend call with it.

// callEvents returns what the backend call of req should relay to the
// client, or nil when the client asked for nothing. ctx is the handler's:
// go-sdk finds the request's stream through it (streamable HTTP). The
// events are written to the client by a relay of their own, which
// relayed waits for before the call's result goes out (see eventRelay);
// relayed is nil when ev is.
func (g *Gateway) callEvents(ctx context.Context, req *mcp.CallToolRequest, server, tool string) (ev *backend.CallEvents, relayed func(context.Context)) {
	ss := req.Session
	if ss == nil {
		return nil, nil
	}
	tok, level := req.Params.GetProgressToken(), g.logLevel(req)
	if tok == nil && level == "" {
		return nil, nil // nothing to relay: no queue of 256 made for it
	}
	r := newEventRelay(&g.relayDropped)
	ev = &backend.CallEvents{}
	if tok != nil {
		ev.Progress = func(p *mcp.ProgressNotificationParams) {
			p.ProgressToken = tok
			r.send(func() {
				if err := ss.NotifyProgress(ctx, p); err != nil {
					g.log.Debug("progress not relayed to the client", "server", server, "err", err)
				}
			})
		}
	}
	if level != "" {
		ev.LogLevel = level
		ev.Log = func(p *mcp.LoggingMessageParams) {
			// The client sees which server logged: "memory" or "memory/logger".
			out := *p
			out.Logger = server
			if p.Logger != "" {
				out.Logger = server + "/" + p.Logger
			}
			r.send(func() {
				if err := ss.Log(ctx, &out); err != nil {
					g.log.Debug("log message not relayed to the client", "server", server, "err", err)
				}
			})
		}
	}
	go r.run()
	return ev, func(wctx context.Context) {
		if n := r.finish(wctx); n > 0 {
			g.log.Info("notifications of a call not relayed: its client read them slower than the backend sent them", "server", server, "tool", tool, "dropped", n, "queue", relayQueue)
		}
	}
}

// relayQueue is how many notifications of one call wait for its client
// at most; more are dropped (progress and log messages only inform).
const relayQueue = 256

// eventRelay writes one call's notifications to its client on a goroutine
// of its own. The backend's messages are read on one loop for all its
// calls (backend.CallEvents must not block), and a write blocks while the
// client reads nothing: one HTTP client that left its event stream unread
// once its socket buffers filled (a few MB of progress) held every other
// client's calls to that backend until it closed the connection.
type eventRelay struct {
	q       chan func()
	done    chan struct{}
	mu      sync.Mutex
	closed  bool
	dropped int
	total   *atomic.Int64 // the gateway's count of notifications dropped
}

func newEventRelay(total *atomic.Int64) *eventRelay {
	return &eventRelay{q: make(chan func(), relayQueue), done: make(chan struct{}), total: total}
}

func (r *eventRelay) run() {
	defer close(r.done)
	for write := range r.q {
		write()
	}
}

// send queues write, or drops it when relayQueue writes wait already (or
// the call has ended: the pool may hand on a last event as it ends).
func (r *eventRelay) send(write func()) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return
	}
	select {
	case r.q <- write:
	default:
		r.dropped++
		r.total.Add(1)
	}
}

// finish waits until the queued notifications are written, or ctx ends,
// and reports how many were dropped.
func (r *eventRelay) finish(ctx context.Context) int {
	r.mu.Lock()
	r.closed = true
	close(r.q)
	n := r.dropped
	r.mu.Unlock()
	select {
	case <-r.done:
	case <-ctx.Done():
	}
	return n
}

// logLevel is the log level the client of req wants, or "" for none: a
// request of protocol 2026-07-28 or later names it in its _meta (go-sdk
// then ignores the session's level); an older client sets it for its
// session with logging/setLevel.
func (g *Gateway) logLevel(req *mcp.CallToolRequest) mcp.LoggingLevel {
	if ip := req.Session.InitializeParams(); ip != nil && ip.ProtocolVersion >= backend.StatelessProtocolVersion {
		v, _ := req.Params.Meta[mcp.MetaKeyLogLevel].(string)
		return mcp.LoggingLevel(v)
	}
	return g.levels.get(req.Session)
}

// sessionLevels remembers the level each client session set with
// logging/setLevel (go-sdk keeps it, but does not tell). Sessions are held
// weakly: an entry goes with its session.
type sessionLevels struct {
	m sync.Map // weak.Pointer[mcp.ServerSession] → mcp.LoggingLevel
}

// middleware records the level of each logging/setLevel that succeeds, and
// refuses a level the protocol does not have ("warn", "fatal"): go-sdk
// v1.8.0 takes any string, and such a level matched no message of the
// backends, which refuse it too, so the client heard nothing and was not told.
func (l *sessionLevels) middleware(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		if p, ok := req.GetParams().(*mcp.SetLoggingLevelParams); ok && method == "logging/setLevel" && p != nil && !slices.Contains(backend.Levels(), p.Level) {
			var names []string
			for _, l := range backend.Levels() {
				names = append(names, string(l))
			}
			return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: fmt.Sprintf("invalid params: log level %q is not one of the protocol's: %s", p.Level, strings.Join(names, ", "))}
		}
		res, err := next(ctx, method, req)
		if err == nil && method == "logging/setLevel" {
			p, ok1 := req.GetParams().(*mcp.SetLoggingLevelParams)
			ss, ok2 := req.GetSession().(*mcp.ServerSession)
			if ok1 && ok2 && p != nil {
				l.set(ss, p.Level)
			}
		}
		return res, err
	}
}

func (l *sessionLevels) set(ss *mcp.ServerSession, level mcp.LoggingLevel) {
	k := weak.Make(ss)
	if _, loaded := l.m.Swap(k, level); !loaded {
		runtime.AddCleanup(ss, func(k weak.Pointer[mcp.ServerSession]) { l.m.Delete(k) }, k)
	}
}

func (l *sessionLevels) get(ss *mcp.ServerSession) mcp.LoggingLevel {
	if ss == nil {
		return ""
	}
	v, _ := l.m.Load(weak.Make(ss))
	level, _ := v.(mcp.LoggingLevel)
	return level
}
