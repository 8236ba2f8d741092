// Package console owns the gateway's web console at /ui/: a page embedded
// in the binary (plain HTML, CSS and JavaScript, nothing fetched from
// elsewhere) that shows the backends with a restart button, the catalog,
// a search playground with each hit's score breakdown, the recent tool
// calls, the recent activity (the audit log's last records, to an admin
// key) and the index state, and the JSON endpoints under /ui/api/ it reads
// them from.
//
// It is mounted beside /mcp (gateway.HTTPOptions.Extra), so the same
// Host/Origin checks guard it. With keys (Options.Keys), the page asks for
// one and keeps a session in a same-site, HttpOnly cookie; every
// state-changing request is a POST that must come from the console's own
// origin with the session's CSRF token.
package console

import (
	"context"
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"html/template"
	"io/fs"
	"log/slog"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/klauspost/compress/gzhttp"
	"golang.org/x/sync/singleflight"

	"github.com/toolgate/toolgate/gateway"
	"github.com/toolgate/toolgate/gateway/audit"
	"github.com/toolgate/toolgate/gateway/backend"
	"github.com/toolgate/toolgate/gateway/config"
	"github.com/toolgate/toolgate/gateway/keys"
	"github.com/toolgate/toolgate/gateway/limit"
	"github.com/toolgate/toolgate/gateway/live"
	"github.com/toolgate/toolgate/gateway/policy"
	"github.com/toolgate/toolgate/index/catalog"
	"github.com/toolgate/toolgate/internal/oneline"
	"github.com/toolgate/toolgate/internal/servemux"
	"github.com/toolgate/toolgate/search"
)

//go:embed static
var static embed.FS

// Path is where the console is mounted.
const Path = "/ui/"

// Backends reports the backend pool's state. backend.Pool implements it.
type Backends interface {
	Status() []backend.Status
}

// Restarter restarts one backend. backend.Pool implements it.
type Restarter interface {
	Restart(server string) error
}

// Switcher disables a server at run time, or enables it again, as
// toolgate__disable_server and toolgate__enable_server do. live.Loop
// implements it.
type Switcher interface {
	SetDisabled(ctx context.Context, server string, disabled bool) (bool, error)
}

// Catalog ranks and lists the tools served. live.Loop implements it.
type Catalog interface {
	Search(ctx context.Context, q search.Query) (search.Result, error)
	Tool(id string) (catalog.Tool, bool)
	IDs() []string
}

// Loop reports the runtime loop's counters. live.Loop implements it.
type Loop interface {
	Stats() live.Stats
}

// Calls lists recent tool calls, newest first. A Recorder implements it.
type Calls interface {
	Calls() []Call
}

// Activity reads the audit log's last records, oldest first, masked as
// the log masks them. audit.Log implements it.
type Activity interface {
	Tail(n int) ([]audit.Record, error)
}

var (
	_ Activity  = (*audit.Log)(nil)
	_ Backends  = (*backend.Pool)(nil)
	_ Restarter = (*backend.Pool)(nil)
	_ Switcher  = (*live.Loop)(nil)
	_ Catalog   = (*live.Loop)(nil)
	_ Loop      = (*live.Loop)(nil)
	_ Calls     = (*Recorder)(nil)
)

// Options configure the console. Backends and Catalog are required; a nil
// optional field hides its part of the page.
type Options struct {
	Backends  Backends
	Catalog   Catalog
	Restarter Restarter // the restart buttons
	Switcher  Switcher  // the disable and enable buttons
	Loop      Loop      // the index state
	Calls     Calls     // the recent calls
	// Activity, if set, is the recent activity: the audit log's last
	// records (every key's calls and refusals, the management actions),
	// to a caller that is not scoped (no keys, an admin key) only.
	Activity Activity
	// Search, if set, says how searches rank now (GET /status's "search").
	Search func() *search.State
	// Unavailable says why a server's tools cannot run now, or "";
	// forKey, to an API key that is not admin (gateway.Options.Unavailable).
	Unavailable func(server string, forKey bool) string
	// NoServers, if set, is what the backends table says when no server
	// runs and none is disabled at run time: that the config has none,
	// and how to add one ("": nothing to say). A key whose scope holds no
	// server is told that instead (it learns nothing of the config).
	NoServers func() string
	// DisabledInConfig, if set, names the servers the config file
	// disables ("disabled": true), in name order: the backends table
	// lists them, each in a row of its own, to a caller that is not
	// scoped (no keys, an admin key). It listed none: such a server was missing from the page.
	DisabledInConfig func() []string
	// Status, if set, is where GET /status reads its report (its storage,
	// security, process and learning sections too): the state holds the
	// same report. Nil: the report of Backends, Loop, Search and Policy.
	Status *gateway.StatusOptions
	Keys   Keys // nil = the gateway has no keys
	// Policy is the gateway's rules. The catalog, the playground, the
	// recent calls and the restart button are seen through them as the
	// caller sees tools over MCP: a key sees only the tools of its scope,
	// and restarts only when its scope includes toolgate__restart_server.
	// Nil: no rule (everything is shown).
	Policy *policy.Set
	// Audit, if set, records each restart asked from the console and each
	// refused key, login or restart.
	Audit gateway.AuditLog
	// Rates, if set, limits each key's requests to the console as the
	// HTTP front limits its other requests (the same buckets): over its
	// rate, a key gets 429 with Retry-After.
	Rates Rates
	// Refusals, if set, limits per client address the refused keys and
	// logins it records (the HTTP front's limit, toolgate.limits.
	// refusedPerMinute): over it a login gets 429 with Retry-After, a
	// refused bearer key still its 401, and neither is recorded one by one
	// (the limit writes a summary).
	Refusals Refusals
	Version  string
	Started  time.Time // default: when New was called
	Logger   *slog.Logger
	// Now is the clock (default time.Now); tests set it.
	Now func() time.Time
}

// Rates limits requests per key. limit.Rates implements it.
type Rates interface {
	// Allow takes a token of key's bucket, or says how long until one is
	// free.
	Allow(key string) (ok bool, retryAfter time.Duration)
	// Record counts a request Allow refused, and reports whether to
	// audit it (false past the key's limit of those recorded).
	Record(key string) bool
}

var _ Rates = (*limit.Rates)(nil)

// Refusals limits refused requests per client address. limit.Refusals
// implements it.
type Refusals interface {
	// Refuse counts a refused request; false (with how long to wait)
	// when its address is over the limit: not to be recorded.
	Refuse(remoteAddr string) (record bool, retryAfter time.Duration)
}

var _ Refusals = (*limit.Refusals)(nil)

// recordRefusal reports whether a refused request is to be audited (its
// address under Options.Refusals), and how long to wait when it is not.
func (c *Console) recordRefusal(r *http.Request) (bool, time.Duration) {
	if c.o.Refusals == nil {
		return true, 0
	}
	return c.o.Refusals.Refuse(r.RemoteAddr)
}

// Limits of the JSON endpoints.
const (
	defaultSearchLimit = 10
	maxSearchLimit     = 50
	maxCatalogTools    = 200 // tools listed per catalog answer; a filter narrows the rest
	// The recent activity's records per answer: ?n= asks for another
	// number, up to maxActivity. Each answer reads the log's newest file
	// (10 MiB at most by default), so the page asks for it when shown and
	// on its Refresh button, not every 3 s.
	defaultActivity = 50
	maxActivity     = 500
)

// Console serves the console. Build it with New and mount Handler at Path.
type Console struct {
	o        Options
	log      *slog.Logger
	sessions *sessions
	page     *template.Template
	files    http.Handler
	// reads are the recent activity's reads of the audit log, one per
	// number of records asked for, shared by the requests that come while
	// it is out (serveActivity).
	reads singleflight.Group
}

// New returns a console over opts.
func New(opts *Options) *Console {
	var o Options
	if opts != nil {
		o = *opts
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Started.IsZero() {
		o.Started = o.Now()
	}
	if o.Version == "" {
		o.Version = "dev"
	}
	if o.Unavailable == nil {
		o.Unavailable = func(string, bool) string { return "" }
	}
	// The state's report: Status's sources, the console's where it has
	// none, and the console's version, start and clock.
	var st gateway.StatusOptions
	if o.Status != nil {
		st = *o.Status
	}
	st.Version, st.Started, st.Now = o.Version, o.Started, o.Now
	if st.Loop == nil && o.Loop != nil {
		st.Loop = o.Loop
	}
	if st.Search == nil {
		st.Search = o.Search
	}
	if st.Policy == nil {
		st.Policy, st.Catalog = o.Policy, o.Catalog
	}
	o.Status = &st
	log := o.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	sub, err := fs.Sub(static, "static")
	if err != nil {
		panic(err) // the embedded folder is part of the binary
	}
	return &Console{
		o:        o,
		log:      log,
		sessions: newSessions(),
		page:     template.Must(template.ParseFS(sub, "index.html")),
		files:    http.StripPrefix(Path, http.FileServerFS(sub)),
	}
}

// Handler serves everything under Path. Mount it at Path.
func (c *Console) Handler() http.Handler { return securityHeaders(c.mux()) }

// Routes are the patterns Handler serves ("GET /ui/api/state" …), read
// from its mux, for the README's test of the routes.
func Routes() []string { return New(nil).mux().Patterns() }

func (c *Console) mux() *servemux.Mux {
	mux := servemux.New()
	mux.HandleFunc("GET /ui/{$}", c.servePage)
	mux.HandleFunc("GET /ui/app.js", compressed(c.serveFile))
	mux.HandleFunc("GET /ui/app.css", compressed(c.serveFile))
	mux.HandleFunc("GET /ui/api/state", compressed(c.api(c.serveState)))
	mux.HandleFunc("GET /ui/api/search", compressed(c.api(c.serveSearch)))
	mux.HandleFunc("GET /ui/api/catalog", compressed(c.api(c.serveCatalog)))
	mux.HandleFunc("GET /ui/api/activity", compressed(c.api(c.serveActivity)))
	mux.HandleFunc("POST /ui/api/restart", c.post(c.serveAction(restartAction, c.restart)))
	mux.HandleFunc("POST /ui/api/disable", c.post(c.serveAction(disableAction, c.switcher(true))))
	mux.HandleFunc("POST /ui/api/enable", c.post(c.serveAction(enableAction, c.switcher(false))))
	mux.HandleFunc("POST /ui/api/logout", c.post(c.serveLogout))
	mux.HandleFunc("POST /ui/api/login", c.serveLogin)
	return mux
}

// gzipped compresses an answer for a browser that takes gzip (every one
// does): a page of a large catalog polls 16 KB of state every 3 s and
// loads 111 KB of catalog, 3 and 11 KB compressed. Not the page itself:
// it holds the session's CSRF token beside the query of a deep link, what
// a BREACH attack needs (a chosen text compressed with a secret; no answer
// compressed here holds a secret). Nor the POSTs: their answers are short.
var gzipped = func() func(http.Handler) http.HandlerFunc {
	wrap, err := gzhttp.NewWrapper(gzhttp.MinSize(512))
	if err != nil {
		panic(err) // fixed options
	}
	return wrap
}()

// compressed is h, gzipped.
func compressed(h http.HandlerFunc) http.HandlerFunc { return gzipped(h) }

// securityHeaders keeps the page to its own origin: scripts, styles and
// requests only from it, never framed (the restart button cannot be
// clickjacked), nothing sniffed.
func securityHeaders(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("Content-Security-Policy", "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; form-action 'self'; base-uri 'none'; frame-ancestors 'none'")
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("X-Frame-Options", "DENY")
		h.Set("Referrer-Policy", "no-referrer")
		h.Set("Cache-Control", "no-store")
		next.ServeHTTP(w, r)
	})
}

func (c *Console) serveFile(w http.ResponseWriter, r *http.Request) { c.files.ServeHTTP(w, r) }

// keysRequired reports whether callers need a key.
func (c *Console) keysRequired() bool { return c.o.Keys != nil && c.o.Keys.Required() }

// authorize returns the request's session (nil when it has none), its
// caller (with the key's scope), and whether the request may read the
// console: any request when the gateway has no keys, else a session logged
// in with a key still in force, or a valid bearer key (for scripts; then
// the session is nil). Only the page starts sessions, so scripts reading
// the JSON never crowd out a browser's. A bearer key refused from an
// address over its refusal limit (Options.Refusals) is answered with 429
// here, as every other route answers it, and ok is false with written
// true.
//
// refused is why the key was not accepted (a bearer key's, or the
// session's that was revoked or expired): the 401's words (refusedKey).
func (c *Console) authorize(w http.ResponseWriter, r *http.Request) (ss *session, caller *policy.Caller, ok, written bool, refused error) {
	ss = c.sessions.get(r)
	caller = &policy.Caller{Transport: policy.TransportHTTP, Remote: r.RemoteAddr}
	if !c.keysRequired() {
		return ss, caller, true, false, nil
	}
	if k := bearer(r); k != "" {
		key, err := c.o.Keys.Scope(k)
		caller.Key = key // a revoked or expired one too: its refusal names it
		if c.keysUnreadable(w, r, caller, "console", err) {
			return nil, caller, false, true, err
		}
		if err != nil {
			record, after := c.recordRefusal(r)
			if !record {
				tooManyRefused(w, after, "an unknown, revoked or expired API key")
				return nil, caller, false, true, err
			}
			c.audit(r, caller, audit.Record{Action: "http", Decision: audit.Denied, Reason: "console: " + err.Error(), Status: http.StatusUnauthorized})
		}
		return nil, caller, err == nil, false, err
	}
	if ss != nil && ss.key != "" {
		key, err := c.o.Keys.Scope(ss.key)
		if err == nil {
			caller.Key = key
			return ss, caller, true, false, nil
		}
		if c.keysUnreadable(w, r, caller, "console", err) {
			return ss, caller, false, true, err // the session stands: its key may be in force
		}
		return ss, caller, false, false, err
	}
	return ss, caller, false, false, nil
}

// keysUnreadable answers 503, audited, when err says the key store cannot
// be read (keys.ErrUnavailable), as the HTTP front answers every request
// then, and reports whether it did. The console said 401 "unknown, revoked
// or expired" (or, to a session, that its key was revoked), so a key in
// force was taken for a bad one. Such a request is no refusal of a key:
// it is not counted against the address (the front's 503 is not either).
func (c *Console) keysUnreadable(w http.ResponseWriter, r *http.Request, caller *policy.Caller, what string, err error) bool {
	if !errors.Is(err, keys.ErrUnavailable) {
		return false
	}
	c.audit(r, caller, audit.Record{Action: "http", Decision: audit.Denied, Reason: what + ": " + keys.ErrUnavailable.Error(), Status: http.StatusServiceUnavailable})
	writeError(w, http.StatusServiceUnavailable, keys.UnavailableWords)
	return true
}

// tooManyRefused answers 429 to an address over its refusal limit; last
// says what its last refused request lacked.
func tooManyRefused(w http.ResponseWriter, after time.Duration, last string) {
	w.Header().Set("Retry-After", limit.RetryAfter(after))
	writeError(w, http.StatusTooManyRequests, "too many refused requests from this address (toolgate.limits.refusedPerMinute); retry after the time in Retry-After. The last one: "+last)
}

// overRate answers 429 (with Retry-After, audited) when caller's key is
// over its rate, and reports whether it did.
func (c *Console) overRate(w http.ResponseWriter, r *http.Request, caller *policy.Caller) bool {
	if c.o.Rates == nil || caller == nil || caller.Key == nil {
		return false
	}
	ok, after := c.o.Rates.Allow(caller.Key.Name)
	if ok {
		return false
	}
	if c.o.Rates.Record(caller.Key.Name) {
		c.audit(r, caller, audit.Record{Action: "http", Decision: audit.RateLimited, Reason: limit.OverRate(after), Status: http.StatusTooManyRequests})
	}
	w.Header().Set("Retry-After", limit.RetryAfter(after))
	writeError(w, http.StatusTooManyRequests, "this API key is over its rate (toolgate.limits); retry after the time in Retry-After")
	return true
}

// audit writes rec, with the request's caller, to Options.Audit.
func (c *Console) audit(r *http.Request, caller *policy.Caller, rec audit.Record) {
	if c.o.Audit == nil {
		return
	}
	rec.Transport, rec.Client, rec.Remote = policy.TransportHTTP, r.UserAgent(), r.RemoteAddr
	if caller != nil && caller.Key != nil {
		rec.Key, rec.KeyProfile = caller.Key.Name, caller.Key.Profile
	}
	rec.Route = r.Method + " " + r.URL.Path
	c.o.Audit.Write(rec)
}

// catalog is the catalog as caller sees it through the policy.
func (c *Console) catalog(caller *policy.Caller) Catalog {
	if c.o.Policy == nil {
		return c.o.Catalog
	}
	return policy.NewView(c.o.Catalog, c.o.Policy, caller)
}

// action is a button that acts on one server: the management tool it
// stands for (a caller may press it when the policy lets it run that
// tool, and only on a server it may manage, as with the tool) and its
// words.
type action struct {
	tool  catalog.Tool
	verb  string // "restart"
	doing string // "restarting"
	// offered reports whether the gateway gave the console what the
	// action needs.
	offered func(o *Options) bool
}

var (
	restartAction = action{catalog.Tool{Server: config.BuiltinServer, Name: "restart_server"}, "restart", "restarting", func(o *Options) bool { return o.Restarter != nil }}
	disableAction = action{catalog.Tool{Server: config.BuiltinServer, Name: "disable_server"}, "disable", "disabling", func(o *Options) bool { return o.Switcher != nil }}
	enableAction  = action{catalog.Tool{Server: config.BuiltinServer, Name: "enable_server"}, "enable", "enabling", disableAction.offered}
)

// offers reports whether the gateway gave the console what a does.
func (c *Console) offers(a action) bool { return a.offered(&c.o) }

// may reports whether caller may press a's buttons, or why not.
func (c *Console) may(caller *policy.Caller, a action) (bool, string) {
	if !c.offers(a) {
		return false, fmt.Sprintf("this gateway does not %s backends from the console", a.verb)
	}
	if c.o.Policy == nil {
		return true, ""
	}
	t, ok := c.o.Catalog.Tool(a.tool.ID())
	if !ok {
		t = a.tool
	}
	if d := c.o.Policy.Decide(caller, t); !d.Allowed {
		return false, d.Reason
	}
	return true, ""
}

// mayServer is the refusal of a on server by caller, the HTTP status and
// message (0 when it may): a caller that manages all acts on any server;
// any other, only on one it may manage (policy.Set.MayManage, as the
// management tool), and one it may not, or that is neither in the pool
// nor disabled at run time, reads the same: 404, or 403 in the words of
// the key's scope.
func (c *Console) mayServer(caller *policy.Caller, server string, a action) (int, string) {
	if c.o.Policy == nil || caller.ManagesAll() {
		return 0, ""
	}
	ok, why := c.o.Policy.MayManage(caller, c.o.Catalog, server)
	// The built-in server is in no pool: known all the same, so that the
	// switch says why it cannot be disabled (409), as for a caller that
	// manages all, rather than that there is no such server (404).
	known := server == config.BuiltinServer ||
		slices.ContainsFunc(c.o.Backends.Status(), func(st backend.Status) bool { return st.Name == server }) ||
		c.o.Policy.Disabled().Has(server)
	if ok && known {
		return 0, ""
	}
	if why != "" {
		return http.StatusForbidden, fmt.Sprintf("%s server %q is outside what this API key may do: %s", a.doing, server, why)
	}
	return http.StatusNotFound, fmt.Sprintf("there is no server named %q among the servers this client may %s", oneline.Echo(server), a.verb)
}

// actionable is the servers caller may press the button of a on (those
// mayServer lets through): the pool's, those disabled at run time and the
// built-in one.
func (c *Console) actionable(caller *policy.Caller, a action) []string {
	names := []string{config.BuiltinServer}
	for _, st := range c.o.Backends.Status() {
		names = append(names, st.Name)
	}
	if c.o.Policy != nil {
		names = append(names, c.o.Policy.Disabled().Servers()...)
	}
	slices.Sort(names)
	return slices.DeleteFunc(slices.Compact(names), func(n string) bool {
		code, _ := c.mayServer(caller, n, a)
		return code != 0
	})
}

// admit is authorize for an endpoint of the API: it answers a request it
// does not admit itself (401 without a session or key, 429 past the
// address's refusal limit or the key's rate) and then reports false.
func (c *Console) admit(w http.ResponseWriter, r *http.Request) (*session, *policy.Caller, bool) {
	ss, caller, ok, written, refused := c.authorize(w, r)
	switch {
	case written:
		return nil, nil, false
	case !ok && bearer(r) != "": // refused and audited by authorize
		unauthorized(w, refusedKey(refused))
		return nil, nil, false
	case !ok:
		c.refuseWithoutKey(w, r, caller, refused)
		return nil, nil, false
	case c.overRate(w, r, caller):
		return nil, nil, false
	}
	return ss, caller, true
}

// api guards a read endpoint (admit).
func (c *Console) api(h func(w http.ResponseWriter, r *http.Request, caller *policy.Caller)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if _, caller, ok := c.admit(w, r); ok {
			h(w, r, caller)
		}
	}
}

// post guards a state-changing endpoint: an authorized request that comes
// from the console's own origin with its session's CSRF token (or, from a
// script, with a bearer key, which a browser never sends by itself).
func (c *Console) post(h func(w http.ResponseWriter, r *http.Request, caller *policy.Caller)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		ss, caller, ok := c.admit(w, r)
		if !ok {
			return
		}
		if ss == nil && bearer(r) != "" && c.keysRequired() { // a script with a valid key
			h(w, r, caller)
			return
		}
		if !sameOrigin(r) {
			c.audit(r, caller, audit.Record{Action: "http", Decision: audit.Denied, Reason: "console: Origin header missing or foreign", Status: http.StatusForbidden})
			writeError(w, http.StatusForbidden, "state-changing requests must come from the console's own page (Origin header missing or foreign)")
			return
		}
		if !csrfOK(r, ss) {
			c.audit(r, caller, audit.Record{Action: "http", Decision: audit.Denied, Reason: "console: missing or wrong CSRF token", Status: http.StatusForbidden})
			writeError(w, http.StatusForbidden, "missing or wrong CSRF token: reload the console and try again")
			return
		}
		h(w, r, caller)
	}
}

// refuseWithoutKey answers an endpoint asked without an API key or a live
// session as the HTTP front answers a request without a key: 401, audited
// one by one under the address's refusal limit, 429 past it. (The page
// itself is the login form then, not a refusal; its script stops polling
// while the form shows.)
func (c *Console) refuseWithoutKey(w http.ResponseWriter, r *http.Request, caller *policy.Caller, sessionKeyEnded error) {
	why, msg := "no API key or console session", needKey
	if sessionKeyEnded != nil {
		why, msg = "the console session's API key was revoked or expired", sessionEnds
		if keys.Refusal(sessionKeyEnded) != keys.UnknownWords {
			msg = "the console session ended: " + keys.Refusal(sessionKeyEnded) + ", and log in again with it"
		}
	} else if _, err := r.Cookie(cookieName); err == nil {
		// A session cookie this gateway does not know: the page was
		// opened before the gateway restarted (sessions are kept in
		// memory), or its session grew too old.
		why, msg = "a console session this gateway does not know (it restarted, or the session ended)", sessionGone
	}
	record, after := c.recordRefusal(r)
	if !record {
		tooManyRefused(w, after, why)
		return
	}
	c.audit(r, caller, audit.Record{Action: "http", Decision: audit.Denied, Reason: "console: " + why, Status: http.StatusUnauthorized})
	unauthorized(w, msg)
}

// refusedKey is the 401's text for a key sent (to log in, or as a bearer)
// that is not accepted: a revoked or expired key is told so with what to
// do, as the HTTP front tells it (keys.Refusal: only the holder of its
// secret hears it), any other badKey. The console said badKey to a key the
// front named revoked.
func refusedKey(err error) string {
	if words := keys.Refusal(err); words != keys.UnknownWords {
		return words + ", and log in with it"
	}
	return badKey
}

// The 401s' texts: no key at all, and a key sent (to log in, or as a
// bearer) that is not accepted and not named (refusedKey), which says
// nothing of which keys exist.
const (
	needKey     = "an API key is required: log in on the console page, or send Authorization: Bearer KEY"
	badKey      = "the API key was not accepted: it is unknown, revoked or expired. Log in with a valid key (`toolgate keys create` makes one)"
	sessionEnds = "the console session's API key was revoked or expired: log in again with a valid key"
)

// sessionGone answers a session cookie the gateway does not know.
var sessionGone = fmt.Sprintf("the console session has ended (the gateway restarted, or the session is over %d hours old): log in again", int(sessionTTL.Hours()))

func unauthorized(w http.ResponseWriter, msg string) {
	w.Header().Set("WWW-Authenticate", `Bearer realm="toolgate"`)
	writeError(w, http.StatusUnauthorized, msg)
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(v)
}

func writeError(w http.ResponseWriter, code int, msg string) {
	writeJSON(w, code, map[string]string{"error": msg})
}

// State is the console's view of the gateway: the GET /status report plus
// the recent calls. GET /ui/api/state serves it.
type State struct {
	gateway.StatusReport
	Calls      []Call `json:"calls"`
	CanRestart bool   `json:"canRestart"`
	// CanDisable and CanEnable say whether the caller may disable a
	// server at run time, or enable one again (the servers disabled are
	// Stats.Disabled).
	CanDisable bool `json:"canDisable"`
	CanEnable  bool `json:"canEnable"`
	HasCalls   bool `json:"hasCalls"`
	// HasActivity says whether the caller may read the recent activity
	// (GET /ui/api/activity): the gateway has an audit log, and the
	// caller is not scoped (no keys, an admin key).
	HasActivity bool `json:"hasActivity"`
	// Warnings are what needs doing that the backends table does not say:
	// the HTTPS front's certificate (gateway.ProcessInfo.FrontNotices) and
	// client certificates (gateway.BackendStatus.CertNotice) due for
	// renewal, expired, or unreadable, and OAuth logins whose access
	// token cannot be refreshed (LoginNotice), as toolgate status prints
	// them.
	Warnings []string `json:"warnings"`
	// NoServers is what the backends table says in place of its rows
	// when it has none (Options.NoServers).
	NoServers string `json:"noServers,omitempty"`
	// DisabledInConfig are the servers the config file disables
	// (Options.DisabledInConfig), to a caller that is not scoped.
	DisabledInConfig []string `json:"disabledInConfig,omitempty"`
}

func (c *Console) state(caller *policy.Caller) State {
	rep := c.o.Status.Report(c.o.Backends, caller)
	s := State{StatusReport: rep, HasCalls: c.o.Calls != nil, Calls: []Call{}, Warnings: []string{}}
	// The HTTPS front's own certificate first: it was said only by
	// toolgate status and the log, so the console of a gateway whose
	// certificate expired in days showed nothing to do.
	s.Warnings = append(s.Warnings, rep.Process.FrontNotices(c.o.Now())...)
	for _, b := range rep.Backends {
		if line, _ := b.CertNotice(c.o.Now()); line != "" {
			s.Warnings = append(s.Warnings, line)
		}
		if line, _ := b.LoginNotice(c.o.Now()); line != "" {
			s.Warnings = append(s.Warnings, line)
		}
	}
	if rep.Security != nil { // an admin's: keys due for rotation, or expired
		for _, k := range rep.Security.KeysExpiring {
			s.Warnings = append(s.Warnings, k.Notice(c.o.Now()))
		}
	}
	s.CanRestart, _ = c.may(caller, restartAction)
	s.CanDisable, _ = c.may(caller, disableAction)
	s.CanEnable, _ = c.may(caller, enableAction)
	if c.o.Calls != nil {
		s.Calls = c.calls(caller)
	}
	s.HasActivity = c.o.Activity != nil && !caller.Scoped()
	if c.o.DisabledInConfig != nil && !caller.Scoped() {
		s.DisabledInConfig = c.o.DisabledInConfig()
	}
	if len(rep.Backends) == 0 && (rep.Stats == nil || len(rep.Stats.Disabled) == 0) {
		switch {
		case caller.Scoped():
			s.NoServers = "No server is in this API key's scope: an admin key sees every server."
		case c.o.NoServers != nil:
			s.NoServers = c.o.NoServers()
		}
	}
	return s
}

// calls are the recent calls caller may see: all of them without a key
// or with an admin key; a key that is not admin sees only the calls made
// with it (another's errors name that key, its scope and its refusals),
// of the tools it may still run.
func (c *Console) calls(caller *policy.Caller) []Call {
	all := c.o.Calls.Calls()
	if caller.Key == nil || caller.Admin() {
		return all
	}
	out := []Call{}
	for _, call := range all {
		if call.Key != caller.Key.Name {
			continue
		}
		if c.o.Policy == nil {
			out = append(out, call)
			continue
		}
		t, ok := c.o.Catalog.Tool(call.Server + catalog.Sep + call.Tool)
		if !ok {
			t = catalog.Tool{Server: call.Server, Name: call.Tool}
		}
		if c.o.Policy.Allowed(caller, t) {
			out = append(out, call)
		}
	}
	return out
}

func (c *Console) serveState(w http.ResponseWriter, r *http.Request, caller *policy.Caller) {
	if _, err := r.Cookie(cookieName); err == nil && !c.keysRequired() && c.sessions.get(r) == nil {
		// A page opened before the gateway restarted, without keys: its
		// session (the CSRF token of its buttons) went with the process.
		// A new one is handed over here, so its buttons work without a
		// reload (they answered "missing or wrong CSRF token").
		w.Header().Set(csrfHeader, c.sessions.create(w, r, "").csrf)
	}
	writeJSON(w, http.StatusOK, c.state(caller))
}

// ActivityAnswer is the recent activity: the audit log's last records,
// newest first, with the log's fields (`toolgate audit tail --json`'s,
// those this toolgate knows), masked as the log masks them.
type ActivityAnswer struct {
	Records []audit.Record `json:"records"`
	// Limit is how many records were asked for: fewer came when the log
	// holds fewer.
	Limit int `json:"limit"`
}

// serveActivity answers GET /ui/api/activity?n=N: the audit log's last N
// records (defaultActivity; at most maxActivity). Only to a caller that is
// not scoped: the log holds every key's calls, refusals and reasons (a
// key's name, its scope, its refused tools), which a key that is not
// admin is not told (its own calls are under the recent calls); it gets
// 403, audited.
func (c *Console) serveActivity(w http.ResponseWriter, r *http.Request, caller *policy.Caller) {
	if c.o.Activity == nil {
		writeError(w, http.StatusNotFound, "this gateway's console has no audit log to read")
		return
	}
	if caller.Scoped() {
		c.audit(r, caller, audit.Record{Action: "http", Decision: audit.Denied, Reason: "console: the recent activity is for admin keys", Status: http.StatusForbidden})
		writeError(w, http.StatusForbidden, "the recent activity (the audit log of every key's calls) is for admin keys: this key's own calls are under Recent calls")
		return
	}
	n := defaultActivity
	if v := r.URL.Query().Get("n"); v != "" {
		i, err := strconv.Atoi(v)
		if err != nil || i < 1 || i > maxActivity {
			writeError(w, http.StatusBadRequest, fmt.Sprintf("n=%s: want a number of records from 1 to %d", v, maxActivity))
			return
		}
		n = i
	}
	// A read goes through the log's newest file (the rotated ones too
	// just after a rotation: a second or so): the requests that come
	// while one for as many records is out share it, as a Refresh button
	// pressed again aborts its request, not the read.
	v, err, _ := c.reads.Do(strconv.Itoa(n), func() (any, error) { return c.o.Activity.Tail(n) })
	if err != nil {
		writeError(w, http.StatusInternalServerError, "read the audit log: "+err.Error())
		return
	}
	recs := slices.Clone(v.([]audit.Record)) // shared: reversed on a copy
	slices.Reverse(recs)
	if recs == nil {
		recs = []audit.Record{}
	}
	writeJSON(w, http.StatusOK, ActivityAnswer{Records: recs, Limit: n})
}

// SearchAnswer is a playground search: the ranked tools with every score
// the ranker gave them.
type SearchAnswer struct {
	Query string `json:"query"`
	Mode  string `json:"mode"` // the mode that ranked them
	// Server is the server the search was limited to ("": every one the
	// caller may see), as search_tools' "server" limits it.
	Server string `json:"server,omitempty"`
	Tools  []Hit  `json:"tools"`
	// NoMatch: no tool reaches minConfidence (search_tools would answer
	// "noMatch" with the closest few).
	NoMatch bool    `json:"noMatch,omitempty"`
	TookMS  float64 `json:"tookMs"`
}

// Hit is one ranked tool and its score breakdown.
type Hit struct {
	Name        string  `json:"name"` // server__tool
	Server      string  `json:"server"`
	Description string  `json:"description"`
	Score       float64 `json:"score"`
	Keyword     float64 `json:"keyword"` // normalised BM25
	Vector      float64 `json:"vector"`  // normalised cosine
	BM25        float64 `json:"bm25"`    // raw
	Cosine      float64 `json:"cosine"`  // raw
	Confidence  float64 `json:"confidence"`
	// Clause is the step of the query that found the tool (search/steps.go).
	Clause      string `json:"clause,omitempty"`
	Unavailable string `json:"unavailable,omitempty"`
}

// searchParams reads q, mode, limit and server; an error says which is
// wrong.
func searchParams(r *http.Request) (search.Query, error) {
	v := r.URL.Query()
	q := search.Query{Text: strings.TrimSpace(v.Get("q")), Limit: defaultSearchLimit, Server: v.Get("server")}
	m, err := search.ParseMode(v.Get("mode"))
	if err != nil {
		return q, err
	}
	q.Mode = m
	if l := v.Get("limit"); l != "" {
		n, err := strconv.Atoi(l)
		if err != nil || n < 1 || n > maxSearchLimit {
			return q, fmt.Errorf("limit %q: want a whole number from 1 to %d", l, maxSearchLimit)
		}
		q.Limit = n
	}
	return q, nil
}

func (c *Console) search(ctx context.Context, caller *policy.Caller, q search.Query) (*SearchAnswer, error) {
	start := time.Now()
	res, err := c.catalog(caller).Search(ctx, q)
	if err != nil {
		return nil, err
	}
	a := &SearchAnswer{Query: q.Text, Mode: string(res.Mode), Server: q.Server, Tools: make([]Hit, 0, len(res.Hits)), NoMatch: res.NoMatch,
		TookMS: float64(time.Since(start).Microseconds()) / 1000}
	for _, h := range res.Hits {
		a.Tools = append(a.Tools, Hit{
			Name: h.Tool.ID(), Server: h.Tool.Server, Description: h.Tool.Description,
			Score: h.Score, Keyword: h.Keyword, Vector: h.Vector, BM25: h.BM25, Cosine: h.Cosine,
			Confidence: h.Confidence, Clause: h.Clause,
			Unavailable: c.o.Unavailable(h.Tool.Server, caller.Scoped()),
		})
	}
	return a, nil
}

func (c *Console) serveSearch(w http.ResponseWriter, r *http.Request, caller *policy.Caller) {
	q, err := searchParams(r)
	if err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	if q.Server != "" {
		// As search_tools reads "server" (" Memory ", "memory__"); one the
		// caller has no tool of answered noMatch, as if no tool fitted.
		servers := catalogServers(c.catalog(caller))
		if q.Server, err = catalog.ServerMeant(q.Server, servers); err != nil {
			writeError(w, http.StatusBadRequest, err.Error())
			return
		}
		if !slices.Contains(servers, q.Server) {
			writeError(w, http.StatusBadRequest, fmt.Sprintf("server %q: no tool of it is in the catalog (servers: %s): leave server out to search them all",
				oneline.Echo(q.Server), strings.Join(servers, ", ")))
			return
		}
	}
	a, err := c.search(r.Context(), caller, q)
	switch {
	case errors.Is(err, search.ErrEmptyQuery):
		writeError(w, http.StatusBadRequest, "type a query: a few words describing what you want to do")
	case err != nil:
		writeError(w, http.StatusInternalServerError, "search failed: "+err.Error())
	default:
		writeJSON(w, http.StatusOK, a)
	}
}

// catalogServers is the servers with tools in cat, sorted.
func catalogServers(cat Catalog) []string {
	servers, seen := []string{}, map[string]bool{}
	for _, id := range cat.IDs() {
		if s, _, err := catalog.SplitID(id); err == nil && !seen[s] {
			seen[s] = true
			servers = append(servers, s)
		}
	}
	slices.Sort(servers)
	return servers
}

// CatalogAnswer lists the catalog's tools that match a filter.
type CatalogAnswer struct {
	Total   int           `json:"total"`   // tools in the catalog
	Matched int           `json:"matched"` // of those, matching the filter
	Tools   []CatalogTool `json:"tools"`   // the first maxCatalogTools matches, by name
	Servers []string      `json:"servers"` // servers with tools in the catalog
}

// CatalogTool is one tool of the catalog.
type CatalogTool struct {
	Name        string          `json:"name"` // server__tool
	Server      string          `json:"server"`
	Tool        string          `json:"tool"`
	Title       string          `json:"title,omitempty"`
	Description string          `json:"description"`
	InputSchema json.RawMessage `json:"inputSchema,omitempty"`
	// OutputSchema is what the tool's structuredContent holds, as its
	// server listed it (absent when it declares none).
	OutputSchema json.RawMessage `json:"outputSchema,omitempty"`
	Unavailable  string          `json:"unavailable,omitempty"`
}

func (c *Console) serveCatalog(w http.ResponseWriter, r *http.Request, caller *policy.Caller) {
	filter := strings.ToLower(strings.TrimSpace(r.URL.Query().Get("filter")))
	server := r.URL.Query().Get("server")
	cat := c.catalog(caller)
	ids := cat.IDs()
	slices.Sort(ids)
	a := CatalogAnswer{Total: len(ids), Tools: []CatalogTool{}, Servers: catalogServers(cat)}
	for _, id := range ids {
		t, ok := cat.Tool(id)
		if !ok {
			continue
		}
		if server != "" && t.Server != server {
			continue
		}
		if filter != "" && !strings.Contains(strings.ToLower(id), filter) && !strings.Contains(strings.ToLower(t.Description), filter) {
			continue
		}
		a.Matched++
		if len(a.Tools) < maxCatalogTools {
			a.Tools = append(a.Tools, CatalogTool{Name: id, Server: t.Server, Tool: t.Name, Title: t.Title, Description: t.Description,
				InputSchema: t.InputSchema, OutputSchema: t.OutputSchema, Unavailable: c.o.Unavailable(t.Server, caller.Scoped())})
		}
	}
	writeJSON(w, http.StatusOK, a)
}

// serveAction serves a's button: POST {"server": "NAME"}, checked as the
// management tool it stands for, audited, and done by act, which answers
// with the HTTP status and body of success, or an error and its status.
func (c *Console) serveAction(a action, act func(ctx context.Context, server string) (int, any, error)) func(http.ResponseWriter, *http.Request, *policy.Caller) {
	return func(w http.ResponseWriter, r *http.Request, caller *policy.Caller) {
		if !c.offers(a) {
			writeError(w, http.StatusNotFound, fmt.Sprintf("this gateway does not %s backends from the console", a.verb))
			return
		}
		var body struct {
			Server string `json:"server"`
		}
		if err := json.NewDecoder(r.Body).Decode(&body); err != nil || body.Server == "" {
			writeError(w, http.StatusBadRequest, `send {"server": "NAME"}`)
			return
		}
		rec := audit.Record{Action: a.tool.ID(), Tool: a.tool.ID(), Server: body.Server, Reason: fmt.Sprintf("server %q, from the console", body.Server)}
		if ok, why := c.may(caller, a); !ok {
			// The same rule as the management tool over MCP: a key
			// whose scope leaves it out may not press the button either.
			rec.Decision, rec.Reason, rec.Status = audit.Denied, why, http.StatusForbidden
			c.audit(r, caller, rec)
			writeError(w, http.StatusForbidden, fmt.Sprintf("%s backends is outside what this API key may do: %s", a.doing, why))
			return
		}
		// The server meant, read as the command line and the management
		// tools read one (catalog.ServerMeant): "MEMORY" or "my_fs" is
		// memory or my-fs when no server is named so as written and only
		// one is so in another case or with "_" for "-"; it answered that
		// there was no server "MEMORY". Among the servers the caller may
		// act on only, so an answer names no other.
		server, err := catalog.ServerMeant(body.Server, c.actionable(caller, a))
		if err != nil {
			rec.Decision, rec.Outcome, rec.Reason, rec.Status = audit.Allowed, audit.IsError, err.Error(), http.StatusBadRequest
			c.audit(r, caller, rec)
			writeError(w, http.StatusBadRequest, err.Error())
			return
		}
		body.Server, rec.Server = server, server
		if code, msg := c.mayServer(caller, body.Server, a); code != 0 {
			// The same rule as the management tool over MCP
			// (policy.Set.MayManage): a key acts only on the servers
			// whose tools it may see, and a server outside reads as
			// one that does not exist, or as refused by the key's scope.
			rec.Decision, rec.Reason, rec.Status = audit.Denied, msg, code
			c.audit(r, caller, rec)
			writeError(w, code, msg)
			return
		}
		code, out, err := act(r.Context(), body.Server)
		// The answer's status, as the refused presses record theirs (it
		// was left 0: `audit tail` printed "POST /ui/api/restart→0").
		rec.Decision, rec.Outcome, rec.Status = audit.Allowed, audit.OK, code
		if err != nil {
			rec.Outcome, rec.Reason = audit.IsError, err.Error()
		}
		c.audit(r, caller, rec)
		if err != nil {
			writeError(w, code, err.Error())
			return
		}
		c.log.Info("backend "+a.verb+" requested from the console", "server", body.Server, "remote", r.RemoteAddr)
		writeJSON(w, code, out)
	}
}

// restart is the restart button: 202 {"restarting": "NAME"}; a server
// disabled at run time (pressed in a page that showed it running, or while
// its cold start went on) is 409 in the words of toolgate__restart_server
// (live.Disabled): the pool, which holds no disabled server, said "no such
// server".
func (c *Console) restart(_ context.Context, server string) (int, any, error) {
	if err := c.o.Restarter.Restart(server); err != nil {
		if errors.Is(err, backend.ErrUnknownServer) && c.o.Policy != nil && c.o.Policy.Disabled().Has(server) {
			return http.StatusConflict, nil, live.Disabled(server, "its Enable button (toolgate__enable_server)")
		}
		if errors.Is(err, backend.ErrUnknownServer) {
			return http.StatusNotFound, nil, err
		}
		return http.StatusConflict, nil, err
	}
	return http.StatusAccepted, map[string]string{"restarting": server}, nil
}

// switcher is the disable (or enable) button: 200 {"server": "NAME",
// "disabled": true, "changed": true}; a server the config does not have
// is 404, one that cannot be switched (the built-in one, one the file
// disables, a state file that cannot be written) 409.
func (c *Console) switcher(disabled bool) func(ctx context.Context, server string) (int, any, error) {
	return func(ctx context.Context, server string) (int, any, error) {
		changed, err := c.o.Switcher.SetDisabled(live.ChangedBy(ctx, "the console"), server, disabled)
		if errors.Is(err, config.ErrNoServer) {
			return http.StatusNotFound, nil, err
		}
		if err != nil {
			return http.StatusConflict, nil, err
		}
		return http.StatusOK, map[string]any{"server": server, "disabled": disabled, "changed": changed}, nil
	}
}

// serveLogin checks a key and starts a session for it. It needs the
// console's own origin (no CSRF token exists before a session does).
func (c *Console) serveLogin(w http.ResponseWriter, r *http.Request) {
	if !sameOrigin(r) {
		writeError(w, http.StatusForbidden, "log in from the console's own page (Origin header missing or foreign)")
		return
	}
	if !c.keysRequired() {
		writeError(w, http.StatusBadRequest, "this gateway has no API keys: the console needs no login")
		return
	}
	var body struct {
		Key string `json:"key"`
	}
	if err := json.NewDecoder(r.Body).Decode(&body); err != nil || strings.TrimSpace(body.Key) == "" {
		writeError(w, http.StatusBadRequest, `send {"key": "tg_..."}`)
		return
	}
	key := strings.TrimSpace(body.Key)
	if k, err := c.o.Keys.Scope(key); c.keysUnreadable(w, r, &policy.Caller{Key: k}, "console login", err) {
		return
	} else if err != nil {
		if record, after := c.recordRefusal(r); !record {
			tooManyRefused(w, after, "an unknown, revoked or expired API key")
			return
		}
		c.log.Warn("console login refused: unknown, expired or revoked key", "remote", r.RemoteAddr)
		// A revoked or expired key is named, with why.
		c.audit(r, &policy.Caller{Key: k}, audit.Record{Action: "http", Decision: audit.Denied, Reason: "console login: " + err.Error(), Status: http.StatusUnauthorized})
		unauthorized(w, refusedKey(err))
		return
	} else if c.overRate(w, r, &policy.Caller{Transport: policy.TransportHTTP, Remote: r.RemoteAddr, Key: k}) {
		return // a login is one of the key's requests
	}
	c.sessions.end(w, r)
	c.sessions.create(w, r, key)
	w.WriteHeader(http.StatusNoContent)
}

func (c *Console) serveLogout(w http.ResponseWriter, r *http.Request, _ *policy.Caller) {
	c.sessions.end(w, r)
	w.WriteHeader(http.StatusNoContent)
}

// Page is what the page starts with, embedded in it as JSON so that it is
// drawn at once (and a deep link /ui/?q=QUERY shows its answer without a
// round trip).
type Page struct {
	LoginRequired bool          `json:"loginRequired"` // keys exist and this browser has no session
	Keys          bool          `json:"keys"`          // keys exist (a logout button)
	State         *State        `json:"state,omitempty"`
	Search        *SearchAnswer `json:"search,omitempty"`
	SearchError   string        `json:"searchError,omitempty"`
	Query         string        `json:"query"`
	Mode          string        `json:"mode"`
	// Server is the playground's server: the link's, else "" (all).
	Server string `json:"server"`
	// Limit is the playground's number of results: the link's limit, as
	// given (its search says when it is wrong), else the default.
	Limit string `json:"limit"`
}

func (c *Console) servePage(w http.ResponseWriter, r *http.Request) {
	ss, caller, ok, written, _ := c.authorize(w, r)
	if written || ok && c.overRate(w, r, caller) {
		return
	}
	if ok && ss == nil && !c.keysRequired() {
		ss = c.sessions.create(w, r, "") // for the CSRF token of its buttons
	}
	p := Page{Keys: c.keysRequired(), LoginRequired: !ok, Query: r.URL.Query().Get("q"), Mode: r.URL.Query().Get("mode"), Limit: r.URL.Query().Get("limit"),
		Server: r.URL.Query().Get("server")}
	if p.Limit == "" {
		p.Limit = strconv.Itoa(defaultSearchLimit)
	}
	if ok {
		st := c.state(caller)
		p.State = &st
		if strings.TrimSpace(p.Query) != "" {
			q, err := searchParams(r)
			if err == nil {
				p.Search, err = c.search(r.Context(), caller, q)
			}
			if err != nil {
				p.SearchError = err.Error()
			}
		}
	}
	csrf := ""
	if ok && ss != nil {
		csrf = ss.csrf
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	if !ok {
		// The login form, answered as every route answers a request
		// without a key: 401 with a Bearer challenge (a browser shows
		// the page all the same).
		w.Header().Set("WWW-Authenticate", `Bearer realm="toolgate"`)
		w.WriteHeader(http.StatusUnauthorized)
	}
	if err := c.page.Execute(w, map[string]any{"Page": p, "CSRF": csrf, "Version": c.o.Version, "MaxLimit": maxSearchLimit}); err != nil {
		c.log.Warn("console page", "err", err)
	}
}
