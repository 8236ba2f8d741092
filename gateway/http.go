package gateway

//lint:file-ignore SA1019 MCP logging is deprecated from protocol 2026-07-28 on (SEP-2577) but is what 2025-11-25 clients and servers speak, and it stays functional in the deprecation window; execute_tool relays it (issue 13)

import (
	"bytes"
	"cmp"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"mime"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"path"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolgate/toolgate/gateway/audit"
	"github.com/toolgate/toolgate/gateway/keys"
	"github.com/toolgate/toolgate/gateway/limit"
	"github.com/toolgate/toolgate/gateway/policy"
	"github.com/toolgate/toolgate/internal/hostport"
	"github.com/toolgate/toolgate/internal/linerpc"
	"github.com/toolgate/toolgate/internal/oneline"
	"github.com/toolgate/toolgate/internal/servemux"
)

// HTTPOptions configure the streamable HTTP front. Nil means defaults.
type HTTPOptions struct {
	// AllowedHosts are extra Host header values accepted besides loopback
	// names (localhost, 127.0.0.1, ::1): a host (any port) or host:port
	// (that port), an IPv6 address with or without brackets.
	AllowedHosts []string
	// CertHosts, when set, gives more Host values accepted: the names of
	// the HTTPS front's certificate as served now (a renewal may add or
	// drop names). Asked only for a Host that AllowedHosts does not take.
	CertHosts func() []string
	// AllowedOrigins are extra Origin values accepted besides loopback
	// origins (http(s)://localhost:*, 127.0.0.1, [::1]). "*" accepts any.
	AllowedOrigins []string
	// MaxBodyBytes caps request bodies; larger ones get 413 and are never
	// handed to the MCP server. Default 4 MiB.
	MaxBodyBytes int64
	Logger       *slog.Logger
	// Extra handlers mounted beside /mcp (e.g. /status); they get the same
	// Host/Origin and key checks.
	Extra map[string]http.Handler
	// Wrap, if set, decorates the whole front, checks included (metrics
	// count every request, refused ones too). route names the route a
	// request matches: its path pattern ("/mcp", "/status", "/ui/"), or
	// "" when none does.
	Wrap func(h http.Handler, route func(*http.Request) string) http.Handler
	// Keys, when set, makes every route need an API key as soon as one
	// exists (the probes GET /healthz and /readyz excepted); RequireKey
	// needs one even while none exists (a non-loopback address).
	Keys       KeyChecker
	RequireKey bool
	// KeyRecheck is how often the key of a request still running is
	// checked again: a request whose key was revoked or expired meanwhile
	// is ended (default DefaultKeyRecheck).
	KeyRecheck time.Duration
	// Heartbeat is how often an answer still being worked on sends a
	// byte of nothing (an SSE comment, or whitespace before a JSON
	// answer), so that a proxy's idle limit does not cut a long call and a
	// client can tell a dead connection (HeartbeatHeader); 0:
	// DefaultHeartbeat, negative: none.
	Heartbeat time.Duration
	// Rates limits each key's requests (nil = no limit).
	Rates *limit.Rates
	// Streams limits the subscriptions/listen streams each key holds open
	// at once: one over it gets 429 (nil = no limit).
	Streams *limit.Streams
	// Refusals limits, per client address (RemoteAddr: a proxy's when one
	// is in front; X-Forwarded-For is not read), the requests refused
	// before a valid key is known (401, and the Host/Origin/body-size
	// 403s and 413s): over it they get 429 with Retry-After and are
	// counted into a summary record instead of audited one by one (nil =
	// no limit).
	Refusals *limit.Refusals
	// OwnAuth are path prefixes whose handlers check keys themselves
	// (the console: a login page, then a session cookie); the Host/Origin
	// checks still apply to them.
	OwnAuth []string
	// Home is where GET / sends a browser (the console's path), or "":
	// then it says in a line what is served where.
	Home string
	// route is the path of the route that serves r, "" for the catch-all
	// (routeOf; HTTPHandler sets it, see openProbe).
	route func(*http.Request) string
}

// DefaultMaxBodyBytes is the default request body cap of the HTTP front.
const DefaultMaxBodyBytes = 4 << 20

// HTTPHandler serves MCP over streamable HTTP at /mcp and, for each
// profile, at /profiles/NAME/mcp (404 for a name that is not a profile),
// plus the probes GET /healthz and GET /readyz.
//
// It runs go-sdk's handler in stateless mode: each POST is a whole exchange,
// which is what protocol 2026-07-28 clients require (the stateful handler
// rejects them) and what 2025-11-25 clients get too. go-sdk v1.8.0's
// stateless mode neither hands out nor reads Mcp-Session-Id, so an HTTP
// caller has no session: its profile is the route's (or Options.Profile at
// /mcp), and toolgate__activate_profile tells it to use the route instead.
// The caller is put in each request's context; a caller already there (an
// authenticating middleware in front, with its Key) keeps its Key.
//
// A request is answered with one JSON body, except an execute_tool call
// whose client wants to hear from the backend while it runs (a progress
// token, or a log level in its _meta): that one is answered as an SSE
// stream, so the notifications reach the client before the result. go-sdk
// chooses the response type per handler (StreamableHTTPOptions.JSONResponse,
// and only subscriptions/listen overrides it), so there are two handlers on
// the one server and each POST is routed by its body (streamedCall).
func (g *Gateway) HTTPHandler(opts *HTTPOptions) http.Handler {
	var o HTTPOptions
	if opts != nil {
		o = *opts
	}
	if o.MaxBodyBytes <= 0 {
		o.MaxBodyBytes = DefaultMaxBodyBytes
	}
	if o.Heartbeat == 0 {
		o.Heartbeat = DefaultHeartbeat
	}
	log := o.Logger
	if log == nil {
		log = g.log
	}
	handler := func(jsonResponse bool) http.Handler {
		return mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return g.server }, &mcp.StreamableHTTPOptions{
			Stateless:                    true,
			JSONResponse:                 jsonResponse,
			Logger:                       log,
			MaxRequestBodyBytes:          o.MaxBodyBytes,
			PropagateRequestCancellation: true,
			// guard checks Host against loopback, allowedHosts and the
			// HTTPS front's certificate; go-sdk's own check, for a
			// loopback listener, took loopback names only, so a client
			// on this machine using the gateway's name (or a reverse
			// proxy here keeping the Host) got 403 at /mcp alone.
			DisableLocalhostProtection: true,
		})
	}
	plain, streamed := handler(true), handler(false)
	mcpHandler := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// execute_tool ends its backend call when the request's client goes.
		r = r.WithContext(context.WithValue(r.Context(), httpRequestKey{}, r.Context()))
		if r.Method == http.MethodDelete {
			// go-sdk's: a bare 405 (which the protocol allows: the
			// server does not let clients end sessions), or under
			// MCPGODEBUG=allowsessionsinstateless=1 a no-op; the 405
			// says why.
			rw := &refusedWriter{ResponseWriter: w}
			plain.ServeHTTP(rw, r)
			if rw.refused {
				notPost(w, r)
			}
			return
		}
		if r.Method != http.MethodPost {
			notPost(w, r) // go-sdk's stateless handler answers a bare 405
			return
		}
		body, err := io.ReadAll(r.Body)
		if err != nil {
			var mbe *http.MaxBytesError
			if errors.As(err, &mbe) {
				g.auditRefused(r, keys.Entry{}, http.StatusRequestEntityTooLarge, audit.Denied, fmt.Sprintf("request body over the %d-byte limit", mbe.Limit))
				http.Error(w, tooLarge("", mbe.Limit), http.StatusRequestEntityTooLarge)
				return
			}
			var ne net.Error
			if srv, ok := r.Context().Value(http.ServerContextKey).(*http.Server); ok && srv.ReadTimeout > 0 && errors.As(err, &ne) && ne.Timeout() {
				// It said "failed to read body", a 400, after the wait.
				why := fmt.Sprintf("the request body did not arrive within %s, the HTTP front's read timeout", srv.ReadTimeout)
				g.auditRefused(r, keys.Entry{}, http.StatusRequestTimeout, audit.Denied, why)
				http.Error(w, "Request Timeout: "+why+": send the whole request at once", http.StatusRequestTimeout)
				return
			}
			http.Error(w, "Bad Request: failed to read the request body: "+err.Error(), http.StatusBadRequest)
			return
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		if v := r.Header.Get("MCP-Protocol-Version"); v >= linerpc.BatchlessVersion && bytes.HasPrefix(bytes.TrimSpace(body), []byte("[")) {
			// go-sdk decodes a batch's members before it looks at the
			// version: a batch with a bad member was refused for that
			// member ("malformed payload: invalid message version tag …"),
			// as if batches were taken.
			http.Error(w, linerpc.BatchRefused(v)+": send each message in a request of its own", http.StatusBadRequest)
			return
		}
		if n := batchLen(body); n > MaxBatch {
			g.auditRefused(r, keys.Entry{}, http.StatusBadRequest, audit.Denied, fmt.Sprintf("a JSON-RPC batch of %d messages, over the gateway's limit of %d", n, MaxBatch))
			http.Error(w, fmt.Sprintf("Bad Request: a JSON-RPC batch of %d messages is over the gateway's limit of %d in one request: send fewer at once, or each in a request of its own", n, MaxBatch), http.StatusBadRequest)
			return
		} else if c := policy.CallerFrom(r.Context()); n > 1 && o.Rates != nil && c != nil && c.Key != nil {
			// The request took one of the key's tokens; its other
			// messages take theirs.
			if ok, after := o.Rates.AllowN(c.Key.Name, n-1); !ok {
				g.overRate(w, r, o, keys.Entry{Name: c.Key.Name}, after, fmt.Sprintf("a JSON-RPC batch of %d messages: ", n))
				return
			}
		}
		if err := linerpc.BodyInexactID(body); err != nil {
			// go-sdk answered 1.5 as id 1: the client waited for good.
			http.Error(w, "invalid request: "+err.Error(), http.StatusBadRequest)
			return
		}
		if p, ok := cancelledApart(body); ok {
			// go-sdk takes it (202) and cancels nothing: the POST has
			// no session, and the call it means is another POST's.
			c, key := policy.CallerFrom(r.Context()), ""
			if c != nil && c.Key != nil {
				key = c.Key.Name
			}
			log.Info("a client cancelled a request in a POST of its own, which the stateless HTTP front cannot tie to a call: the call runs on to its end or its callTimeout (a client cancels over HTTP by closing the call's request: protocol 2026-07-28 clients and go-sdk's do, and so does a stdio client through toolgate connect)",
				"request", oneline.Echo(fmt.Sprint(p.RequestID)), "reason", oneline.Echo(p.Reason), "client", oneline.Echo(r.UserAgent()), "key", key, "remote", r.RemoteAddr)
		}
		if o.Heartbeat > 0 {
			// nginx buffers an answer unless told (proxy_buffering), and
			// passes the beats to its client only once a buffer fills.
			w.Header().Set("X-Accel-Buffering", "no")
			w.Header().Set(HeartbeatHeader, o.Heartbeat.String())
			bw := &beatWriter{ResponseWriter: w, every: o.Heartbeat}
			w = bw
			r = r.WithContext(context.WithValue(r.Context(), beatKey{}, bw))
		}
		nh := &notHandledWriter{ResponseWriter: w, body: body}
		defer nh.finish()
		w = nh
		if o.Streams != nil && listenCall(body) {
			c := policy.CallerFrom(r.Context())
			if c != nil && c.Key != nil {
				done, ok := o.Streams.Open(c.Key.Name)
				if !ok {
					g.overStreams(w, r, o, c.Key.Name)
					return
				}
				defer done()
			}
		}
		if jsonOnly(r.Header) {
			// A client that takes JSON answers only (the protocol wants
			// both in Accept; some clients and scripts send one) gets
			// JSON: go-sdk refused it with 400.
			r.Header.Set("Accept", "application/json, text/event-stream")
			plain.ServeHTTP(w, r)
			return
		}
		if streamedCall(body) {
			streamed.ServeHTTP(w, r)
			return
		}
		plain.ServeHTTP(w, r)
	})
	mux := g.httpMux(o, mcpHandler)
	o.route = func(r *http.Request) string { return routeOf(mux.ServeMux, r) }
	h := g.guard(g.requireKey(mux, o, log), o, log)
	if o.Wrap != nil {
		h = o.Wrap(h, func(r *http.Request) string { return routeOf(mux.ServeMux, r) })
	}
	return h
}

// HTTPRoutes are the patterns HTTPHandler serves with extra as
// HTTPOptions.Extra ("GET /healthz", "/mcp", the catch-all "/" …): read
// from the mux itself, for the README's test of the routes.
func HTTPRoutes(extra map[string]http.Handler) []string {
	return (&Gateway{}).httpMux(HTTPOptions{Extra: extra}, http.NotFoundHandler()).Patterns()
}

// httpMux routes the HTTP front's requests: mcpHandler at /mcp and a
// profile's path, the probes, o.Extra, the root and the catch-all.
func (g *Gateway) httpMux(o HTTPOptions, mcpHandler http.Handler) *servemux.Mux {
	mux := servemux.New()
	mux.Handle("/mcp", g.withCaller(mcpHandler, func(*http.Request) (string, bool) { return g.opts.Profile, true }))
	mux.Handle("/profiles/{name}/mcp", g.withCaller(mcpHandler, func(r *http.Request) (string, bool) {
		name := r.PathValue("name")
		return name, g.opts.Policy != nil && g.opts.Policy.HasProfile(name)
	}))
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		fmt.Fprintln(w, ProbeAlive)
	})
	// Readiness: 503 with why while a cold start's first index is built
	// (search_tools cannot find tools yet), 200 once there is one. A
	// server down or a data folder failing leaves it ready: the gateway
	// serves the others, and searches from memory (GET /status says what).
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		if g.opts.Building != nil {
			if err := g.opts.Building(); err != nil {
				w.WriteHeader(http.StatusServiceUnavailable)
				fmt.Fprintf(w, "%s %v\n", NotReadyPrefix, err)
				return
			}
		}
		fmt.Fprintln(w, ProbeReady)
	})
	routes := []string{"/healthz", "/readyz"}
	for path, h := range o.Extra {
		mux.Handle(path, h)
		if _, p, ok := strings.Cut(path, " "); ok {
			path = p // "GET /status"
		}
		routes = append(routes, path)
	}
	slices.Sort(routes)
	// The root, which a person opens first, sends a browser to the
	// console, or says what is served (it answered "404 page not found").
	served := fmt.Sprintf("MCP (streamable HTTP) at /mcp, a profile's at /profiles/NAME/mcp; also %s", strings.Join(routes, ", "))
	mux.HandleFunc("GET /{$}", func(w http.ResponseWriter, r *http.Request) {
		if o.Home != "" {
			homeRedirect(w, o.Home)
			return
		}
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		fmt.Fprintf(w, "toolgate: %s\n", served)
	})
	if dir := strings.TrimSuffix(o.Home, "/"); dir != o.Home && dir != "" {
		// /ui: ServeMux's own redirect to /ui/ is an absolute path too.
		mux.HandleFunc("GET "+dir, func(w http.ResponseWriter, _ *http.Request) { homeRedirect(w, o.Home) })
	}
	// Any other path says what is served ("404 page not found" said
	// nothing), and a client of the older HTTP+SSE transport, which opens
	// /sse and posts to /messages, what to configure instead.
	legacySSE := newLegacySSE()
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		// A served path asked with a method it does not take (PUT
		// /status) falls through to here, as the catch-all takes every
		// method: 405, not "Not Found".
		if allow := getOnly(mux.ServeMux, r); allow != "" {
			w.Header().Set("Allow", allow)
			http.Error(w, fmt.Sprintf("Method Not Allowed: %s %s: it answers %s only", r.Method, r.URL.Path, allow), http.StatusMethodNotAllowed)
			return
		}
		msg := "Not Found: toolgate serves " + served
		if legacySSEStream(r) {
			legacySSE.ServeHTTP(w, r)
			return
		}
		if sseRoute(r.URL.Path) {
			msg = "Not Found: " + legacySSERefused
		} else if prefix, route := prefixed(mux.ServeMux, r); route != "" {
			msg = fmt.Sprintf("Not Found: toolgate serves %s at its root, not under %s: %s; have it strip the prefix (nginx: `location %s/ { proxy_pass http://HOST:PORT/; }`, the slash after the port strips it)", route, prefix, PrefixNotStripped, prefix)
		}
		http.Error(w, msg, http.StatusNotFound)
	})
	return mux
}

// PrefixNotStripped is in the 404 the gateway answers a path under a
// prefix a reverse proxy passed on (/toolgate/status): `toolgate status`
// knows the gateway's own answer by it, and says it whole.
const PrefixNotStripped = "a reverse proxy in front passed its path prefix on"

// maxPrefixDepth is how many segments a path prefix that prefixed finds
// may have (/a/b/c/mcp: 3).
const maxPrefixDepth = 4

// homeRedirect sends a browser at the root, or at home without its slash
// (/ui), to home (/ui/) by a Location relative to the request's path,
// "ui/": behind a reverse proxy that serves the gateway under a path
// (/toolgate/ → the gateway's /) the browser stays under it. It was the
// absolute "/ui/" (http.Redirect makes every Location absolute), which
// led out of the proxy's path to another service or its 404.
func homeRedirect(w http.ResponseWriter, home string) {
	w.Header().Set("Location", strings.TrimPrefix(home, "/"))
	w.WriteHeader(http.StatusFound)
}

// homeEntry reports whether r only asks to be sent to the console: a GET
// of the root, or of Home without its slash. Neither needs a key (the
// console asks for one itself).
func homeEntry(r *http.Request, home string) bool {
	return r.Method == http.MethodGet && (r.URL.Path == "/" || home != "" && r.URL.Path+"/" == home)
}

// prefixed finds, in a path nothing serves, a served route after a
// prefix (/toolgate/mcp: /toolgate and /mcp), as a reverse proxy that
// keeps its location's path sends it (nginx's proxy_pass without a path).
// The root is not taken for one (/nope/ is no prefix of /). A prefix of
// more than maxPrefixDepth segments is not looked for: a path of many
// slashes would cost a route lookup each.
func prefixed(mux *http.ServeMux, r *http.Request) (prefix, route string) {
	p := r.URL.Path
	for i, depth := 1, 0; i < len(p) && depth < maxPrefixDepth; i++ {
		if p[i] != '/' {
			continue
		}
		depth++
		probe := r.Clone(r.Context())
		probe.URL.Path, probe.URL.RawPath = p[i:], ""
		if rt := routeOf(mux, probe); rt != "" && rt != "/" {
			return p[:i], p[i:]
		}
	}
	return "", ""
}

// routeOf is the path of the mux pattern r matches ("GET /status" →
// "/status"), or "" for a path nothing serves.
// A served path asked with a method it does not take (PUT /status) is
// counted under that path, as its 405 answer names it.
func routeOf(mux *http.ServeMux, r *http.Request) string {
	_, pattern := mux.Handler(r)
	if pattern == "/" {
		pattern = getPattern(mux, r)
	}
	if i := strings.IndexByte(pattern, ' '); i >= 0 {
		pattern = pattern[i+1:]
	}
	if pattern == "/" || pattern == "" {
		return "" // the catch-all that answers 404
	}
	return strings.TrimSuffix(pattern, "{$}") // the root, "/{$}", is "/"
}

// getOnly is the Allow header of a path mux serves with GET (and HEAD)
// only, when r asks it with another method; "" otherwise.
func getOnly(mux *http.ServeMux, r *http.Request) string {
	if getPattern(mux, r) != "" {
		return "GET, HEAD"
	}
	return ""
}

// getPattern is the pattern ("GET /status") of the path r asks with
// another method than GET or HEAD, when mux serves it with GET only; ""
// otherwise.
func getPattern(mux *http.ServeMux, r *http.Request) string {
	if r.Method == http.MethodGet || r.Method == http.MethodHead {
		return ""
	}
	probe := r.Clone(r.Context())
	probe.Method = http.MethodGet
	if _, pattern := mux.Handler(probe); strings.HasPrefix(pattern, http.MethodGet+" ") {
		return pattern
	}
	return ""
}

// legacySSERefused tells a client of the older HTTP+SSE transport what to
// configure instead.
const legacySSERefused = "toolgate does not serve the older HTTP+SSE transport (a GET of /sse, then POSTs to /messages); it serves MCP over streamable HTTP at /mcp: configure the client with that URL and transport \"http\" (streamable), or have a stdio client run `toolgate connect`"

// legacySSEHold is how long a stream of the older HTTP+SSE transport is
// kept open for its client to post the request that is refused (it does
// so at once, and leaves when refused): a client that stays holds it no
// longer, nor a stop of the gateway past its grace.
const legacySSEHold = 10 * time.Second

// newLegacySSE serves the older HTTP+SSE transport at /sse to refuse it in
// the protocol: a client of it (the TypeScript SDK's SSEClientTransport,
// the Python SDK's sse_client) shows only the status of a GET that is not
// 200 ("SSE error: Non-200 status code (404)"), never the body that says
// what to configure instead. go-sdk's SSE handler opens the stream and
// takes the posts; its server answers every request with legacySSERefused,
// which the client reports as the error of its initialize.
func newLegacySSE() http.Handler {
	refuser := mcp.NewServer(&mcp.Implementation{Name: "toolgate"}, nil)
	refuser.AddReceivingMiddleware(func(mcp.MethodHandler) mcp.MethodHandler {
		return func(context.Context, string, mcp.Request) (mcp.Result, error) {
			return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidRequest, Message: legacySSERefused}
		}
	})
	h := mcp.NewSSEHandler(func(*http.Request) *mcp.Server { return refuser }, &mcp.SSEOptions{
		DisableLocalhostProtection: true, // guard checks Host
		MaxRequestBodyBytes:        64 << 10,
	})
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ctx, cancel := context.WithTimeout(r.Context(), legacySSEHold)
		defer cancel()
		r = r.WithContext(ctx)
		if r.Method == http.MethodGet {
			// go-sdk names the endpoint to post to from the request's
			// URL: "/sse?sessionid=…", an absolute path, which leaves the
			// path prefix of a reverse proxy serving the gateway under
			// one (the client posted to the proxy's 404, never told).
			// Relative, "sse?sessionid=…", the client resolves it
			// against the stream's own URL. (Opaque: a relative Path is
			// made absolute again when go-sdk resolves the query.)
			u := *r.URL
			u.Opaque, u.Path, u.RawPath = path.Base(u.Path), "", ""
			if strings.HasSuffix(r.URL.Path, "/") {
				u.Opaque = "./"
			}
			r.URL = &u
		}
		h.ServeHTTP(w, r)
	})
}

// legacySSEStream reports whether r is an HTTP+SSE client's at /sse: the
// GET of its stream, or a post to the endpoint such a stream named
// (?sessionid=). A streamable HTTP client given that URL posts with no
// sessionid, and is answered in words: it shows a refused POST's body.
func legacySSEStream(r *http.Request) bool {
	switch strings.TrimSuffix(r.URL.Path, "/") {
	case "/sse", "/mcp/sse":
	default:
		return false
	}
	switch r.Method {
	case http.MethodGet:
		// Its clients ask for exactly this (a person's curl, */*, gets
		// the words of the 404).
		return slices.Contains(acceptMedia(r.Header), "text/event-stream")
	case http.MethodPost:
		return r.URL.Query().Has("sessionid")
	}
	return false
}

// sseRoute reports whether path is one an HTTP+SSE client (protocol
// 2024-11-05) asks for: its stream, /sse, or the endpoint it posts to,
// /messages or /message.
func sseRoute(path string) bool {
	switch strings.TrimSuffix(path, "/") {
	case "/sse", "/messages", "/message", "/mcp/sse":
		return true
	}
	return false
}

// withCaller puts the HTTP caller of the profile that route chooses in the
// request's context, or answers 404 when route says the profile does not
// exist.
func (g *Gateway) withCaller(next http.Handler, route func(*http.Request) (string, bool)) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		profile, ok := route(r)
		if !ok {
			http.Error(w, fmt.Sprintf("Not Found: there is no profile named %q (toolgate.profiles in the config lists them; /mcp serves every server)", profile), http.StatusNotFound)
			return
		}
		c := &policy.Caller{Transport: policy.TransportHTTP, Profile: profile, Remote: r.RemoteAddr, Origin: requestOrigin(r), Route: r.Method + " " + r.URL.Path}
		if outer := policy.CallerFrom(r.Context()); outer != nil {
			c.Key = outer.Key
		}
		next.ServeHTTP(w, r.WithContext(policy.WithCaller(r.Context(), c)))
	})
}

// requestOrigin is the gateway as r's client reached it: the Host it asked
// for (checked against the allowed hosts before this), else the address
// of the listener that took the connection, with https under TLS; "" when
// neither is known.
func requestOrigin(r *http.Request) string {
	host := r.Host
	if a, ok := r.Context().Value(http.LocalAddrContextKey).(net.Addr); host == "" && ok {
		host = a.String()
	}
	if host == "" {
		return ""
	}
	if r.TLS != nil {
		return "https://" + host
	}
	return "http://" + host
}

// httpRequestKey holds, in the context of a request's handlers, the HTTP
// request's own context (go-sdk keeps context values, not cancellation).
type httpRequestKey struct{}

// streamedCall reports whether body is an execute_tool call whose client
// wants notifications while it runs: a progress token, or a log level, in
// its _meta. Bodies that cannot hold one are not decoded.
func streamedCall(body []byte) bool {
	if !bytes.Contains(body, []byte(`"_meta"`)) || !bytes.Contains(body, []byte(ExecuteToolName)) {
		return false
	}
	var m struct {
		Method string `json:"method"`
		Params struct {
			Name string         `json:"name"`
			Meta map[string]any `json:"_meta"`
		} `json:"params"`
	}
	if json.Unmarshal(body, &m) != nil || m.Method != "tools/call" || m.Params.Name != ExecuteToolName {
		return false
	}
	if m.Params.Meta["progressToken"] != nil {
		return true
	}
	level, _ := m.Params.Meta[mcp.MetaKeyLogLevel].(string)
	return level != ""
}

// cancelledApart decodes body when it is a notifications/cancelled
// alone (what a client of protocol 2025-11-25 sends to cancel a call over
// streamable HTTP: the TypeScript and Python SDKs). Bodies that cannot
// be one are not decoded.
func cancelledApart(body []byte) (*mcp.CancelledParams, bool) {
	if !bytes.Contains(body, []byte("notifications/cancelled")) {
		return nil, false
	}
	var m struct {
		Method string               `json:"method"`
		Params *mcp.CancelledParams `json:"params"`
	}
	if json.Unmarshal(body, &m) != nil || m.Method != "notifications/cancelled" || m.Params == nil {
		return nil, false
	}
	return m.Params, true
}

// listenMethod opens a stream that lasts as long as the client keeps it
// (protocol 2026-07-28): the notifications it subscribed to.
const listenMethod = "subscriptions/listen"

// listenCall reports whether body is a subscriptions/listen request, as
// go-sdk decodes it: escapes read ("subscriptions\/listen"), the key
// "method" matched case-sensitively (encoding/json's struct decoding took
// a later "METHOD" for it), and any of duplicate keys. Only a body with
// neither the method written plainly nor an escape that writes a letter or
// a slash (\/, \uXXXX) cannot be one, and is not decoded: a call whose
// arguments hold lines of text (\n, \") was decoded twice.
func listenCall(body []byte) bool {
	if !bytes.Contains(body, []byte(listenMethod)) && !bytes.Contains(body, []byte(`\/`)) && !bytes.Contains(body, []byte(`\u`)) {
		return false
	}
	listen := false
	linerpc.Members(body, func(key string, v json.RawMessage) bool {
		var method string
		listen = key == "method" && json.Unmarshal(v, &method) == nil && method == listenMethod
		return !listen
	})
	return listen
}

// MaxBatch is how many messages a JSON-RPC batch over HTTP may hold (one
// of protocol 2025-03-26 or before; later ones have none). go-sdk serves
// any: 25,000 searches in one 3.3 MB POST took 17 s of CPU and 410 MB,
// and counted once against the key's rate; now each message counts.
const MaxBatch = 100

// batchLen is how many messages body holds when it is a JSON-RPC batch (a
// JSON array), else 0.
func batchLen(body []byte) int {
	if !bytes.HasPrefix(bytes.TrimSpace(body), []byte("[")) {
		return 0
	}
	var msgs []json.RawMessage
	if json.Unmarshal(body, &msgs) != nil {
		return 0 // go-sdk answers what it cannot read
	}
	return len(msgs)
}

// overRate answers a request of key e over its rate: 429 with
// Retry-After, audited as rate-limited (one by one up to the key's limit
// of those records, then summed up); what, if set, begins the record's
// reason and the answer's text with what took the tokens.
func (g *Gateway) overRate(w http.ResponseWriter, r *http.Request, o HTTPOptions, e keys.Entry, after time.Duration, what string) {
	if o.Rates.Record(e.Name) { // else counted into the key's summary record
		g.auditRefused(r, e, http.StatusTooManyRequests, audit.RateLimited, what+limit.OverRate(after))
	}
	w.Header().Set("Retry-After", limit.RetryAfter(after))
	http.Error(w, "Too Many Requests: "+what+"this API key is over its rate (toolgate.limits); retry after the time in Retry-After", http.StatusTooManyRequests)
}

// overStreams answers a subscriptions/listen request of key, which holds
// o.Streams' limit of streams already: 429, audited as rate-limited (one
// by one up to the key's limit of those records, as its requests over its
// rate).
func (g *Gateway) overStreams(w http.ResponseWriter, r *http.Request, o HTTPOptions, key string) {
	max := o.Streams.Max()
	if o.Rates == nil || o.Rates.Record(key) {
		g.auditRefused(r, keys.Entry{Name: key}, http.StatusTooManyRequests, audit.RateLimited, fmt.Sprintf("%s: the key holds %d streams open, its limit", listenMethod, max))
	}
	http.Error(w, fmt.Sprintf("Too Many Requests: this API key holds %d %s streams open, its limit (toolgate.limits.maxStreams): close one (a client needs one), or raise the limit", max, listenMethod), http.StatusTooManyRequests)
}

// notHandled is how go-sdk v1.8.0's streamable handler begins its answer to
// a call of a method it does not know, before protocol 2026-07-28: a 400
// whose text is `JSON RPC not handled: "foo" unsupported`
// (streamableServerConn.servePOST; from 2026-07-28 on it answers -32601 in
// JSON itself).
const notHandled = "JSON RPC not handled"

// notPost is the answer to a request of /mcp that is not a POST: 405, as
// go-sdk's stateless handler answers, with why and what to send. A DELETE
// (which ends a session in streamable HTTP) is told there is none to end:
// the gateway gives no Mcp-Session-Id (the one a client sends of itself
// only keys what search learns from its calls, which is kept bounded).
func notPost(w http.ResponseWriter, r *http.Request) {
	why := "there is no stream to GET"
	if r.Method == http.MethodDelete {
		given := ""
		if id := r.Header.Get("Mcp-Session-Id"); id != "" {
			given = fmt.Sprintf(" (%q was not given by it)", id)
		}
		why = "there is no session to end: it gives no Mcp-Session-Id" + given + ", and a client that is done just stops sending"
	}
	w.Header().Set("Allow", http.MethodPost)
	http.Error(w, fmt.Sprintf("Method Not Allowed: %s %s: toolgate serves streamable HTTP stateless, so %s; send each JSON-RPC request as a POST to this URL", r.Method, r.URL.Path, why), http.StatusMethodNotAllowed)
}

// refusedWriter holds back a 405 and its body, for the caller to answer
// with one that says why; any other answer goes through.
type refusedWriter struct {
	http.ResponseWriter
	refused bool
}

func (w *refusedWriter) WriteHeader(code int) {
	if code == http.StatusMethodNotAllowed {
		w.refused = true
		return
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *refusedWriter) Write(p []byte) (int, error) {
	if w.refused {
		return len(p), nil
	}
	return w.ResponseWriter.Write(p)
}

// notHandledWriter turns go-sdk's 400 for a call of an unknown method
// (notHandled) into the answer the protocol wants and stdio gives: JSON-RPC
// -32601 method not found, in a 200 JSON response (a POST that holds a
// request is answered with JSON or an event stream). A client SDK turned the
// 400 into a transport error ("Error POSTing to endpoint (HTTP 400)"), and
// `toolgate connect` into -32051, the gateway refusing the request. Other
// answers pass unchanged; only a 400 is held back, to be read.
type notHandledWriter struct {
	http.ResponseWriter
	body []byte // the request's
	held *bytes.Buffer
	code int // the status held back (400), 0 while none is
}

func (w *notHandledWriter) WriteHeader(code int) {
	if code == http.StatusBadRequest && w.held == nil {
		w.code, w.held = code, &bytes.Buffer{}
		return
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *notHandledWriter) Write(p []byte) (int, error) {
	if w.held != nil {
		return w.held.Write(p)
	}
	return w.ResponseWriter.Write(p)
}

// Unwrap lets http.ResponseController reach the connection (go-sdk flushes
// event streams through it).
func (w *notHandledWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// finish writes what was held back: the -32601 answer, or the 400 as it was.
func (w *notHandledWriter) finish() {
	if w.held == nil {
		return
	}
	var call struct {
		ID     any    `json:"id"`
		Method string `json:"method"`
	}
	if bytes.HasPrefix(w.held.Bytes(), []byte(notHandled)) && json.Unmarshal(w.body, &call) == nil {
		if id, err := jsonrpc.MakeID(call.ID); err == nil && id.IsValid() {
			data, err := jsonrpc.EncodeMessage(&jsonrpc.Response{ID: id, Error: &jsonrpc.Error{Code: jsonrpc.CodeMethodNotFound, Message: fmt.Sprintf("method not found: %q", call.Method)}})
			if err == nil {
				h := w.ResponseWriter.Header()
				h.Set("Content-Type", "application/json")
				h.Del("Content-Length")
				w.ResponseWriter.WriteHeader(http.StatusOK)
				w.ResponseWriter.Write(data)
				return
			}
		}
	}
	w.ResponseWriter.WriteHeader(w.code)
	w.ResponseWriter.Write(w.held.Bytes())
}

// guard rejects foreign Host and Origin headers with 403 on every method
// (DNS rebinding and cross-site requests from a browser), and bodies over
// the cap with 413 before anything reads them. Each refusal is audited.
func (g *Gateway) guard(next http.Handler, o HTTPOptions, log *slog.Logger) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if o.openProbe(r) {
			next.ServeHTTP(w, r)
			return
		}
		if !hostAllowed(r.Host, o.AllowedHosts) && (o.CertHosts == nil || !hostAllowed(r.Host, o.CertHosts())) && !dialledAddress(r) {
			if overRefused(w, r, o, "") {
				return
			}
			log.Warn("rejected request: foreign Host header", "host", r.Host, "remote", r.RemoteAddr)
			g.auditRefused(r, keys.Entry{}, http.StatusForbidden, audit.Denied, fmt.Sprintf("foreign Host header %q (DNS rebinding?)", r.Host))
			http.Error(w, fmt.Sprintf("Forbidden: Host %q is not allowed (add it to toolgate.http.allowedHosts and restart the gateway to accept it)", r.Host), http.StatusForbidden)
			return
		}
		// The page's own origin is no other site's: the console opened by
		// a name of allowedHosts or of the certificate (its login POSTs
		// carry Origin) was refused unless allowedOrigins named it too.
		if origin := r.Header.Get("Origin"); origin != "" && !SameOrigin(r) && !originAllowed(origin, o.AllowedOrigins) {
			if overRefused(w, r, o, "") {
				return
			}
			log.Warn("rejected request: foreign Origin header", "origin", origin, "remote", r.RemoteAddr)
			g.auditRefused(r, keys.Entry{}, http.StatusForbidden, audit.Denied, fmt.Sprintf("foreign Origin header %q (a page of another site?)", origin))
			http.Error(w, fmt.Sprintf("Forbidden: Origin %q is not allowed (add it to toolgate.http.allowedOrigins and restart the gateway to accept it)", origin), http.StatusForbidden)
			return
		}
		if r.ContentLength > o.MaxBodyBytes {
			if overRefused(w, r, o, "") {
				return
			}
			g.auditRefused(r, keys.Entry{}, http.StatusRequestEntityTooLarge, audit.Denied, fmt.Sprintf("request body of %d bytes over the %d-byte limit", r.ContentLength, o.MaxBodyBytes))
			http.Error(w, tooLarge(fmt.Sprintf(" of %d bytes", r.ContentLength), o.MaxBodyBytes), http.StatusRequestEntityTooLarge)
			return
		}
		if r.Body != nil {
			// On a copy of the request: net/http reads a body the
			// handler left unread before it answers, unless the
			// request's body is still its own (the one that says 100
			// Continue, and that it closes the connection for instead).
			// A refusal (a key, a rate) to a client that waits for 100
			// Continue (toolgate connect) waited for the client to give
			// up on it (1 s for Go's) and send the body.
			r = r.WithContext(r.Context())
			r.Body = http.MaxBytesReader(w, r.Body, o.MaxBodyBytes)
		}
		next.ServeHTTP(w, r)
	})
}

// tooLarge is the 413 answer's text for a request body (size: " of N
// bytes", or "" when unknown) over limit: the setting that raises it, as
// the 403s name theirs, and the restart it takes (toolgate.http settings
// apply at the next start; a reload says so).
func tooLarge(size string, limit int64) string {
	return fmt.Sprintf("request body%s exceeds the %d-byte limit (raise toolgate.http.maxBodyBytes and restart the gateway)", size, limit)
}

// probe reports whether r is a liveness or readiness probe (GET or HEAD
// of /healthz or /readyz), which every client may send: an orchestrator's
// (a kubelet's httpGet, a load balancer's health check) comes from another
// address, with the pod's address as Host and no key, and was refused 403
// or 401. Their answers name nothing (ok, ready, or why not yet), so the
// Host check against DNS rebinding and the key guard nothing there.
func probe(r *http.Request) bool {
	return (r.Method == http.MethodGet || r.Method == http.MethodHead) && (r.URL.Path == "/healthz" || r.URL.Path == "/readyz")
}

// openProbe reports whether r is a probe (probe) or a probe under a path
// prefix a reverse proxy passed on (GET /toolgate/healthz), which the
// catch-all answers 404 with the fix (strip the prefix). Both are open:
// under a prefix, a gateway with API keys answered it 401, and `toolgate
// health --addr URL/toolgate` said another program listened there. A path
// a route serves (one under the console's /ui/, say) is never open, but
// for a probe's in another form (//healthz, /a/../readyz: a prober's base
// URL that ends in a slash), which the mux sends to the probe: with keys
// it was answered 401, without keys with the redirect.
func (o HTTPOptions) openProbe(r *http.Request) bool {
	if probe(r) {
		return true
	}
	if r.Method != http.MethodGet && r.Method != http.MethodHead || o.route == nil {
		return false
	}
	switch o.route(r) {
	case "/healthz", "/readyz":
		return true
	case "":
	default:
		return false
	}
	p := r.URL.Path
	for _, probe := range []string{"/healthz", "/readyz"} {
		if prefix, ok := strings.CutSuffix(p, probe); ok && len(prefix) > 1 && strings.HasPrefix(prefix, "/") && strings.Count(prefix, "/") <= maxPrefixDepth {
			return true
		}
	}
	return false
}

func isLoopbackHost(h string) bool {
	if strings.EqualFold(h, "localhost") {
		return true
	}
	ip := net.ParseIP(strings.Trim(h, "[]"))
	return ip != nil && ip.IsLoopback()
}

// hostAllowed reports whether the Host header hostport names a loopback
// host or one of extra (allowedHosts, the certificate's names).
func hostAllowed(hostport string, extra []string) bool {
	h, port := splitHost(hostport)
	if h == "" {
		return false
	}
	return isLoopbackHost(h) || slices.ContainsFunc(extra, func(e string) bool { return hostMatches(e, h, port) })
}

// dialledAddress reports whether r's Host is the address, an IP literal,
// that its connection was accepted on: the gateway's own address as the
// client dialled it (http://10.0.0.7:8931/mcp of a gateway on 0.0.0.0,
// or on [fd00::2]), which only allowedHosts let in before. DNS rebinding
// needs a name that resolves to the gateway; a Host of an address is no
// such name, and a page of another site that asks for the address
// directly sends its own Origin, which the Origin check refuses.
func dialledAddress(r *http.Request) bool {
	h, _ := splitHost(r.Host)
	ip, err := netip.ParseAddr(h)
	if err != nil {
		return false
	}
	local, ok := r.Context().Value(http.LocalAddrContextKey).(*net.TCPAddr)
	if !ok {
		return false
	}
	own, ok := netip.AddrFromSlice(local.IP)
	own = own.Unmap() // net.IP holds an IPv4 address in 16 bytes
	return ok && !own.IsUnspecified() && own == ip.WithZone("").Unmap()
}

// splitHost is hostport's host, without the brackets of an IPv6 address,
// and its port ("" when it has none).
func splitHost(hostport string) (host, port string) {
	host = hostport
	if h, p, err := net.SplitHostPort(hostport); err == nil {
		host, port = h, p
	}
	return strings.Trim(host, "[]"), port
}

// hostMatches reports whether the allowedHosts entry e names host (at
// port, "" for the scheme's default): e is a name or an address (an IPv6
// one with or without brackets, in any of its spellings), with a port
// that only that port matches. Entries with a port, and bracketed IPv6
// ones (as the 403 quotes the Host), matched nothing.
func hostMatches(e, host, port string) bool {
	eh, ep := splitHost(e)
	if !strings.EqualFold(eh, host) {
		a, err1 := netip.ParseAddr(eh)
		b, err2 := netip.ParseAddr(host)
		if err1 != nil || err2 != nil || a.Unmap() != b.Unmap() {
			return false
		}
	}
	switch {
	case ep == "" || ep == port:
		return true
	case port == "":
		return ep == "80" || ep == "443"
	}
	return false
}

// SameOrigin reports whether r's Origin header names the host r was sent
// to (the Host, which guard checked): a page the gateway served itself.
func SameOrigin(r *http.Request) bool {
	o := r.Header.Get("Origin")
	if o == "" {
		return false
	}
	u, err := url.Parse(o)
	return err == nil && (u.Scheme == "http" || u.Scheme == "https") && strings.EqualFold(u.Host, r.Host)
}

func originAllowed(origin string, extra []string) bool {
	if slices.Contains(extra, "*") || slices.ContainsFunc(extra, func(a string) bool { return strings.EqualFold(strings.TrimSuffix(a, "/"), origin) }) {
		return true
	}
	u, err := url.Parse(origin)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") {
		return false
	}
	return isLoopbackHost(u.Hostname())
}

// KeysNeeded says whether the HTTP front on addr needs a key on every
// request, and refuses a non-loopback address without API keys (anyKeys
// reports whether one exists), with or without --allow-remote: anyone who
// reaches such an address could run every tool. `serve` asks before it
// listens or starts anything else. create is the command that creates a
// key in the gateway's data folder, quoted in the refusal.
// setting names where addr came from in the errors: "--http", or
// "toolgate.http.addr" for the config's.
func KeysNeeded(setting, addr string, anyKeys func() (bool, error), create string) (bool, error) {
	host, _, err := net.SplitHostPort(addr)
	if err != nil || isLoopbackHost(host) {
		return false, nil // Listen says what is wrong with addr
	}
	any, err := anyKeys()
	if err != nil {
		return false, fmt.Errorf("%s %q: refusing to listen on a non-loopback address: the API keys cannot be read: %w", setting, addr, err)
	}
	if !any {
		return false, fmt.Errorf("%s %q: refusing to listen on a non-loopback address without API keys: anyone who reaches it could run every tool. Create one with `%s` (or name a file of keys in toolgate.keysFile), then start again", setting, addr, create)
	}
	return true, nil
}

// CheckListenAddr is what Listen checks of addr before it binds: a
// host:port, on a loopback host unless allowRemote. serve checks its --http
// flag with it before anything else, so that a mistyped flag is a usage
// error (exit status 2) and a non-loopback one says --allow-remote before
// the API keys it also needs.
func CheckListenAddr(addr string, allowRemote bool) error {
	return CheckListenSetting("--http", addr, allowRemote, RemoteReady{})
}

// RemoteReady is what a gateway already has for a non-loopback address:
// API keys, and HTTPS (toolgate.http.tls). The refusal of such an address
// without --allow-remote names only what is still missing: it advised to
// create keys and set toolgate.http.tls to a gateway that had both.
type RemoteReady struct {
	Keys, TLS bool
}

// CheckListenSetting is CheckListenAddr for an address that setting gave
// ("--http", or "toolgate.http.addr" for the config's), which its errors
// name: an operator who set the config's address looked for a --http
// flag never given. have says what the gateway has already.
func CheckListenSetting(setting, addr string, allowRemote bool, have RemoteReady) error {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		if fix := hostport.IPv6Fix(addr); fix != "" {
			return fmt.Errorf("%s %q: want host:port, e.g. 127.0.0.1:8931: %s", setting, addr, fix)
		}
		return fmt.Errorf("%s %q: want host:port, e.g. 127.0.0.1:8931: %w", setting, addr, err)
	}
	if !allowRemote && !isLoopbackHost(host) {
		var also []string
		if !have.Keys {
			also = append(also, "it also needs API keys, toolgate keys create")
		}
		if !have.TLS {
			also = append(also, "put TLS in front, or set toolgate.http.tls")
		}
		more := ""
		switch {
		case len(also) > 0:
			more = " (" + strings.Join(also, "; ") + ")"
		default:
			more = " (API keys and toolgate.http.tls are set: --allow-remote is all that is missing)"
		}
		return fmt.Errorf("%s %q: refusing to listen on a non-loopback address; use %s, or pass --allow-remote if you really mean it%s", setting, addr, loopbackLike(host), more)
	}
	return nil
}

// loopbackLike is the loopback address to advise instead of host: IPv6's
// for an IPv6 address, both for the IPv6 wildcard [::] (which takes both
// families), IPv4's otherwise.
func loopbackLike(host string) string {
	ip, err := netip.ParseAddr(host)
	switch {
	case err != nil || !ip.Is6() || ip.Is4In6():
		return "127.0.0.1:PORT"
	case ip.IsUnspecified():
		return "[::1]:PORT or 127.0.0.1:PORT"
	}
	return "[::1]:PORT"
}

// interfaceOf is the name of the network interface that holds ip, "" when
// none does.
func interfaceOf(ip netip.Addr) string {
	ifs, _ := net.Interfaces()
	for _, ifc := range ifs {
		addrs, _ := ifc.Addrs()
		for _, a := range addrs {
			if n, ok := a.(*net.IPNet); ok {
				if got, ok := netip.AddrFromSlice(n.IP); ok && got.Unmap() == ip.WithZone("") {
					return ifc.Name
				}
			}
		}
	}
	return ""
}

// zonedListener is a listener on a link-local address given with its zone
// (the interface: [fe80::1%eth0]:8931), whose Addr keeps the zone: the
// kernel's address drops it, and an address without it cannot be dialled,
// so the log's url, the status report's addr and `toolgate connect` found
// by it named an address nothing reaches.
type zonedListener struct {
	net.Listener
	zone string
}

func (l zonedListener) Addr() net.Addr {
	a, ok := l.Listener.Addr().(*net.TCPAddr)
	if !ok || a.Zone != "" {
		return l.Listener.Addr()
	}
	return &net.TCPAddr{IP: a.IP, Port: a.Port, Zone: l.zone}
}

// ShutdownGrace is how long requests in flight get to finish when the
// HTTP front stops (it is part of the process's stop budget).
const ShutdownGrace = 2 * time.Second

// cutGrace is how long a request ended by Serve's cut gets to write its
// answer.
const cutGrace = 500 * time.Millisecond

// Listen opens the HTTP front's listener on addr. addr must be a loopback
// address unless allowRemote is set: the gateway holds every backend's
// credentials and must not be reachable from the network by accident. An
// address that is taken, not local or not allowed is an error that names it
// and the fix. `serve` listens before it starts anything else, so that such
// an error comes at once.
func Listen(addr string, allowRemote bool) (net.Listener, error) {
	if err := CheckListenAddr(addr, allowRemote); err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", addr)
	host, _, _ := net.SplitHostPort(addr)
	ip, _ := netip.ParseAddr(host)
	switch {
	case err == nil && ip.Zone() != "":
		return zonedListener{ln, ip.Zone()}, nil
	case err == nil:
		return ln, nil
	case errors.Is(err, syscall.EINVAL) && ip.Is6() && ip.IsLinkLocalUnicast() && ip.Zone() == "":
		return nil, fmt.Errorf("listen on %s: a link-local address needs its zone, the interface it is on: [%s%%%s]:PORT (`ip -6 addr` names it)", addr, ip, cmp.Or(interfaceOf(ip), "IFACE"))
	case errors.Is(err, syscall.EADDRINUSE):
		return nil, fmt.Errorf("listen on %s: the address is already in use, by another program or another toolgate (`toolgate status --addr %s` tells): stop it, or pass another --http address (or set toolgate.http.addr)", addr, addr)
	case errors.Is(err, syscall.EACCES):
		return nil, fmt.Errorf("listen on %s: permission denied (ports below 1024 need privileges): use a port above 1023, e.g. 127.0.0.1:8931", addr)
	case errors.Is(err, syscall.EADDRNOTAVAIL):
		return nil, fmt.Errorf("listen on %s: no network interface of this machine has that address: use %s", addr, loopbackLike(host))
	}
	return nil, fmt.Errorf("listen on %s: %w", addr, err)
}

// TakenTwin returns the loopback address of the other family on ln's port
// when something else listens there: ln on 127.0.0.1:8931 and another
// program on [::1]:8931, or the reverse. Where localhost resolves to both
// (most systems), a client given localhost:8931 that tries ::1 first
// (Node, curl, Go) reaches that program and not the gateway, while one
// that tries 127.0.0.1 first reaches the gateway: the same URL works in one
// client and not in another. "" when ln is on no loopback address of one
// family, or nothing accepts a connection there.
func TakenTwin(ln net.Listener) string {
	ap, err := netip.ParseAddrPort(ln.Addr().String())
	if err != nil {
		return ""
	}
	var twin netip.Addr
	switch ip := ap.Addr(); {
	case ip == netip.AddrFrom4([4]byte{127, 0, 0, 1}):
		twin = netip.IPv6Loopback()
	case ip == netip.IPv6Loopback():
		twin = netip.AddrFrom4([4]byte{127, 0, 0, 1})
	default:
		return ""
	}
	addr := netip.AddrPortFrom(twin, ap.Port()).String()
	c, err := net.DialTimeout("tcp", addr, time.Second) // a loopback connect is answered at once
	if err != nil {
		return ""
	}
	c.Close()
	return addr
}

// Serve serves h on ln until ctx ends, then shuts down: requests in flight
// get ShutdownGrace to finish; then cut (if not nil) is called to end them
// (Gateway.StopCalls), and they get cutGrace more to write their answer
// before their connections are closed. With tc it serves HTTPS (HTTP/2
// included), the certificate from tc.
func Serve(ctx context.Context, ln net.Listener, h http.Handler, tc *tls.Config, log *slog.Logger, cut func()) error {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	srv := &http.Server{
		Handler:           h,
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       60 * time.Second,
		IdleTimeout:       120 * time.Second,
		MaxHeaderBytes:    64 << 10,
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelWarn),
	}
	scheme := "http"
	if tc != nil {
		scheme = "https"
		srv.TLSConfig = tc
	}
	log.Info("serving MCP over streamable HTTP", "url", (&url.URL{Scheme: scheme, Host: ln.Addr().String(), Path: "/mcp"}).String())
	// Out of descriptors, the listener waits and logs itself (once, with
	// the fix) rather than net/http's line at every try.
	al := newAcceptListener(ln, log)
	errc := make(chan error, 1)
	go func() {
		if tc != nil {
			errc <- srv.ServeTLS(al, "", "") // the certificate is tc's
			return
		}
		errc <- srv.Serve(al)
	}()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
		sctx, cancel := context.WithTimeout(context.Background(), ShutdownGrace)
		defer cancel()
		err := srv.Shutdown(sctx)
		if errors.Is(err, context.DeadlineExceeded) && cut != nil {
			// End the calls still running, so that their clients get an
			// answer that says so rather than a connection closed on them.
			cut()
			cctx, cancel := context.WithTimeout(context.Background(), cutGrace)
			defer cancel()
			err = srv.Shutdown(cctx)
		}
		if errors.Is(err, context.DeadlineExceeded) {
			srv.Close() // cut what did not finish
		}
		<-errc
		if err != nil && !errors.Is(err, context.DeadlineExceeded) {
			return err
		}
		return nil
	}
}

// ListenAndServe is Listen, then Serve.
func ListenAndServe(ctx context.Context, addr string, h http.Handler, allowRemote bool, log *slog.Logger) error {
	ln, err := Listen(addr, allowRemote)
	if err != nil {
		return err
	}
	return Serve(ctx, ln, h, nil, log, nil)
}

// PlainToHTTPS reports whether body is net/http's answer (400) to plain
// HTTP sent to a server that speaks HTTPS, such as a front with
// toolgate.http.tls: "Client sent an HTTP request to an HTTPS server."
func PlainToHTTPS(body []byte) bool {
	return bytes.Contains(body, []byte("HTTP request to an HTTPS server"))
}

// jsonOnly reports whether a request's Accept takes JSON and no event
// stream ("application/json", not "*/*" or "text/event-stream").
func jsonOnly(h http.Header) bool {
	json, stream := false, false
	for _, media := range acceptMedia(h) {
		switch media {
		case "application/json", "application/*":
			json = true
		case "text/event-stream", "text/*", "*/*":
			stream = true
		}
	}
	return json && !stream
}

// acceptMedia is the media types a request's Accept names, in order.
func acceptMedia(h http.Header) []string {
	var all []string
	for _, v := range h.Values("Accept") {
		for _, part := range strings.Split(v, ",") {
			media, _, _ := mime.ParseMediaType(strings.TrimSpace(part))
			all = append(all, media)
		}
	}
	return all
}
