package gateway

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/toolgate/toolgate/gateway/audit"
	"github.com/toolgate/toolgate/gateway/keys"
	"github.com/toolgate/toolgate/gateway/limit"
	"github.com/toolgate/toolgate/gateway/policy"
)

// KeysUnreadable is the body of the 503 every request gets while the API
// key store cannot be read (fail closed); `toolgate status` knows it.
const KeysUnreadable = "Service Unavailable: " + keys.UnavailableWords

// NeedsKeyFix is what a client of the gateway's is told to do when the
// gateway wants an API key it did not send: keyEnv names where the client
// reads one ("$TOOLGATE_KEY").
func NeedsKeyFix(keyEnv string) string {
	return "the gateway needs an API key: put one in " + keyEnv + " (`toolgate keys create` makes one)"
}

// KeyRefusedFix is what a client of the gateway's is told to do when the
// gateway refused the API key it sent (401): the key in keyEnv. said is
// the gateway's own answer (its body, when OwnKeyRefusal; else ""): a
// revoked or expired key is told as such (keys.Refusal), of the key in
// keyEnv; `toolgate status` and `connect` said "is not one of the
// gateway's, or was revoked or has expired" to a key the gateway had named
// revoked.
func KeyRefusedFix(keyEnv, said string) string {
	said = strings.TrimPrefix(strings.TrimSpace(said), "Unauthorized: ")
	if rest, ok := strings.CutPrefix(said, "the API key "); ok && said != keys.UnknownWords && !strings.Contains(said, "\n") {
		return "the key in " + keyEnv + " " + rest + ", and put it in " + keyEnv
	}
	return "the key in " + keyEnv + " is not one of the gateway's, or was revoked or has expired: put one of its keys in force there " +
		"(`toolgate keys list` on the gateway's machine lists them, `toolgate keys create` makes one)"
}

// KeyChecker checks the API key of an HTTP request. keys.Store implements
// it.
type KeyChecker interface {
	// Verify returns the key whose secret this is; keys.ErrNoKeys when no
	// key exists, keys.ErrUnavailable when the keys cannot be read, and
	// another error (keys.ErrMissing, ErrUnknown, ErrExpired, ErrRevoked)
	// for a request to refuse.
	Verify(secret string) (keys.Entry, error)
}

var _ KeyChecker = (*keys.Store)(nil)

// AuditLog takes audit records. audit.Log implements it.
type AuditLog interface {
	Write(audit.Record)
}

var _ AuditLog = (*audit.Log)(nil)

// keyRealm is the realm of the Bearer challenge.
const keyRealm = "toolgate"

// OwnKeyRefusal reports whether resp is a gateway's refusal of a request's
// API key (401 with the gateway's Bearer challenge), whose body says in the
// gateway's terms what NeedsKeyFix or KeyRefusedFix says in its client's:
// a client that gives the fix leaves the body out, where `toolgate
// connect` said the same thing twice.
func OwnKeyRefusal(resp *http.Response) bool {
	return resp.StatusCode == http.StatusUnauthorized && strings.HasPrefix(resp.Header.Get("WWW-Authenticate"), fmt.Sprintf("Bearer realm=%q", keyRealm))
}

// requireKey makes every route need an API key (Authorization: Bearer
// tg_…) once any key exists, or always with o.RequireKey; the probes
// (GET /healthz, /readyz) stay open. A missing, unknown or expired key gets
// 401 with a Bearer challenge; keys that cannot be read get 503 (no one
// gets in); a key over its rate gets 429 with Retry-After. Refused
// requests are audited. The key of a request let in goes into its context
// as the policy.Caller's Key.
func (g *Gateway) requireKey(next http.Handler, o HTTPOptions, log *slog.Logger) http.Handler {
	if o.Keys == nil {
		return next
	}
	period := o.KeyRecheck
	if period <= 0 {
		period = DefaultKeyRecheck
	}
	watch := &keyWatch{keys: o.Keys, period: period, log: log, live: map[*watched]struct{}{}, onEnd: func(r *http.Request, key string) {
		g.auditRefused(r, keys.Entry{Name: key}, 0, audit.Denied, "ended while it ran: "+ErrKeyRevoked.Error())
	}}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// The root says only where things are (or sends a browser to the
		// console, which asks for a key itself).
		if o.openProbe(r) || homeEntry(r, o.Home) {
			next.ServeHTTP(w, r)
			return
		}
		if g.proxiedWithoutKeys(w, r, o, log) {
			return
		}
		if slices.ContainsFunc(o.OwnAuth, func(p string) bool { return strings.HasPrefix(r.URL.Path, p) }) {
			next.ServeHTTP(w, r)
			return
		}
		secret := bearer(r)
		e, err := o.Keys.Verify(secret)
		switch {
		case err == nil:
		case errors.Is(err, keys.ErrNoKeys) && !o.RequireKey:
			next.ServeHTTP(w, r)
			return
		case errors.Is(err, keys.ErrUnavailable):
			// Logged by the store, once per distinct error.
			g.auditRefused(r, e, http.StatusServiceUnavailable, audit.Denied, "the API key store cannot be read")
			http.Error(w, KeysUnreadable, http.StatusServiceUnavailable)
			return
		default:
			challenge := fmt.Sprintf("Bearer realm=%q", keyRealm)
			msg := "Unauthorized: this gateway needs an API key: send Authorization: Bearer tg_… (create one with `toolgate keys create`)"
			if secret != "" {
				challenge += `, error="invalid_token"`
				msg = "Unauthorized: " + keys.Refusal(err)
			}
			if overRefused(w, r, o, msg) {
				return
			}
			log.Debug("refused request: API key", "reason", err, "key", e.Name, "route", r.Method+" "+r.URL.Path, "remote", r.RemoteAddr)
			g.auditRefused(r, e, http.StatusUnauthorized, audit.Denied, err.Error())
			w.Header().Set("WWW-Authenticate", challenge)
			http.Error(w, msg, http.StatusUnauthorized)
			return
		}
		if o.Rates != nil {
			if ok, after := o.Rates.Allow(e.Name); !ok {
				g.overRate(w, r, o, e, after, "")
				return
			}
		}
		// The route's handler (withCaller) keeps the key when it puts its
		// own caller in the context; the policy reads the key's scope.
		c := &policy.Caller{Transport: policy.TransportHTTP, Key: e.Caller(), Remote: r.RemoteAddr}
		// A key revoked or expired while the request runs (a long
		// execute_tool, a subscriptions/listen stream) ends it.
		ctx, done := watch.add(r, secret, e.Name)
		defer done()
		next.ServeHTTP(w, r.WithContext(policy.WithCaller(ctx, c)))
	})
}

// proxyHeaders are the request headers a reverse proxy adds (nginx, Caddy,
// Traefik, Apache, HAProxy as usually configured): a request with one came
// through a proxy, most often from another machine.
var proxyHeaders = []string{"Forwarded", "X-Forwarded-For", "X-Real-IP", "X-Forwarded-Host", "X-Forwarded-Proto"}

// proxiedWithoutKeys refuses (403) a request that came through a reverse
// proxy to a gateway that has no API keys, and reports whether it did. A
// gateway serves without keys only on a loopback address, trusting that
// only this machine reaches it; a proxy in front makes it reachable from
// wherever the proxy is, which a non-loopback address is refused for
// without keys (KeysNeeded). It served every tool, and the console's
// buttons, to whoever the proxy let in. The first refusal is logged as a
// warning, for the operator who set the proxy up.
func (g *Gateway) proxiedWithoutKeys(w http.ResponseWriter, r *http.Request, o HTTPOptions, log *slog.Logger) bool {
	i := slices.IndexFunc(proxyHeaders, func(h string) bool { return r.Header.Get(h) != "" })
	if i < 0 || o.RequireKey {
		return false
	}
	if _, err := o.Keys.Verify(""); !errors.Is(err, keys.ErrNoKeys) {
		return false // keys exist (or cannot be read): the checks after this decide
	}
	msg := fmt.Sprintf("Forbidden: this request came through a proxy (%s) to a gateway that has no API keys: behind a reverse proxy anyone the proxy lets in could run every tool. "+
		"On the gateway's machine, create a key for each client (toolgate keys create --name NAME) and send it as Authorization: Bearer tg_…", proxyHeaders[i])
	if overRefused(w, r, o, msg) {
		return true
	}
	if g.proxyWarned.CompareAndSwap(false, true) {
		log.Warn("refusing requests that came through a reverse proxy: the gateway has no API keys", "header", proxyHeaders[i],
			"remote", r.RemoteAddr, "fix", "toolgate keys create --name NAME, and give each client its key")
	}
	g.auditRefused(r, keys.Entry{}, http.StatusForbidden, audit.Denied, "came through a proxy ("+proxyHeaders[i]+") to a gateway without API keys")
	http.Error(w, msg, http.StatusForbidden)
	return true
}

// DefaultKeyRecheck is how often the keys of requests still running are
// checked again (HTTPOptions.KeyRecheck).
const DefaultKeyRecheck = time.Second

// ErrKeyRevoked ends a request whose API key stopped being valid while it
// ran (revoked, expired, or the keys could no longer be read).
var ErrKeyRevoked = errors.New("the API key was revoked or expired while the request ran")

// keyWatch checks again, every period, the key of each request still
// running, and cancels the requests of a key no longer in force. Its
// goroutine runs only while some request does: the requests own it.
type keyWatch struct {
	keys   KeyChecker
	period time.Duration
	log    *slog.Logger
	onEnd  func(r *http.Request, key string) // audits an ended request

	mu      sync.Mutex
	live    map[*watched]struct{}
	running bool
}

type watched struct {
	r            *http.Request
	secret, name string
	cancel       context.CancelCauseFunc
}

// add watches request r with key secret (named name); done stops.
func (kw *keyWatch) add(r *http.Request, secret, name string) (context.Context, func()) {
	ctx, cancel := context.WithCancelCause(r.Context())
	w := &watched{r: r, secret: secret, name: name, cancel: cancel}
	kw.mu.Lock()
	kw.live[w] = struct{}{}
	if !kw.running {
		kw.running = true
		go kw.loop()
	}
	kw.mu.Unlock()
	return ctx, func() {
		kw.mu.Lock()
		delete(kw.live, w)
		kw.mu.Unlock()
		cancel(nil)
	}
}

func (kw *keyWatch) loop() {
	t := time.NewTicker(kw.period)
	defer t.Stop()
	for range t.C {
		kw.mu.Lock()
		if len(kw.live) == 0 {
			kw.running = false
			kw.mu.Unlock()
			return
		}
		ws := slices.Collect(maps.Keys(kw.live))
		kw.mu.Unlock()
		for _, w := range ws {
			if _, err := kw.keys.Verify(w.secret); err != nil {
				kw.mu.Lock()
				_, still := kw.live[w]
				delete(kw.live, w)
				kw.mu.Unlock()
				if still {
					kw.log.Info("ended a request: its API key is no longer in force", "key", w.name, "reason", err)
					kw.onEnd(w.r, w.name)
					w.cancel(ErrKeyRevoked)
				}
			}
		}
	}
}

// auditRefused audits a request the HTTP front refused.
func (g *Gateway) auditRefused(r *http.Request, e keys.Entry, status int, decision, reason string) {
	if g.opts.Audit == nil {
		return
	}
	if c := policy.CallerFrom(r.Context()); e.Name == "" && c != nil && c.Key != nil {
		e.Name, e.Profile = c.Key.Name, c.Key.Profile // refused after the key was checked
	}
	g.opts.Audit.Write(audit.Record{
		Key:        e.Name,
		KeyProfile: e.Profile,
		Transport:  "http",
		Session:    r.Header.Get("Mcp-Session-Id"),
		Client:     r.UserAgent(),
		Remote:     r.RemoteAddr,
		Action:     "http",
		Decision:   decision,
		Reason:     reason,
		Route:      r.Method + " " + r.URL.Path,
		Status:     status,
		Unlisted:   true, // the path is the client's
	})
}

// overRefused counts a request the front is about to refuse before it
// knows a valid key against its address's limit (HTTPOptions.Refusals);
// over it, it answers 429 with Retry-After (why, if set, saying what was
// wrong with the request) and reports true: the request is neither
// audited nor logged, only counted into the address's summary record.
func overRefused(w http.ResponseWriter, r *http.Request, o HTTPOptions, why string) bool {
	if o.Refusals == nil {
		return false
	}
	record, after := o.Refusals.Refuse(r.RemoteAddr)
	if record {
		return false
	}
	msg := "Too Many Requests: too many refused requests from this address (toolgate.limits.refusedPerMinute); retry after the time in Retry-After"
	if why != "" {
		msg += ". The last one: " + why
	}
	w.Header().Set("Retry-After", limit.RetryAfter(after))
	http.Error(w, msg, http.StatusTooManyRequests)
	return true
}

// RefusalSummary writes the summary record of an address over its limit of
// refused requests (limit.RefusalOptions.Summary) to a, and logs it.
func RefusalSummary(a AuditLog, log *slog.Logger) func(addr string, n int, since time.Time) {
	return func(addr string, n int, since time.Time) {
		writeSuppressed(a, log, audit.Record{Remote: addr, Count: n, FirstTime: since},
			fmt.Sprintf("%d refused requests from %s suppressed since %s", n, addr, since.UTC().Format(time.RFC3339)),
			"refused requests over the per-address limit", "remote", addr, "suppressed", n, "since", since.UTC().Format(time.RFC3339))
	}
}

// RateSummary writes the summary record of an API key whose requests over
// its rate went over the limit of those audited (limit.Rates.RecordOver)
// to a, and logs it.
func RateSummary(a AuditLog, log *slog.Logger) func(key string, n int, since time.Time) {
	return func(key string, n int, since time.Time) {
		writeSuppressed(a, log, audit.Record{Key: key, Count: n, FirstTime: since},
			fmt.Sprintf("%d requests of API key %q over its rate suppressed since %s", n, key, since.UTC().Format(time.RFC3339)),
			"requests over a key's rate past the limit of those recorded", "key", key, "suppressed", n, "since", since.UTC().Format(time.RFC3339))
	}
}

// writeSuppressed logs (msg, attrs) and writes rec, a summary of requests
// answered 429 and not recorded one by one, as the rate-limited record
// whose reason is what. rec's Count and FirstTime say how many since
// when: a record that stands for several, as a key's refusals alike
// coalesced are (and so never coalesced itself).
func writeSuppressed(a AuditLog, log *slog.Logger, rec audit.Record, what, msg string, attrs ...any) {
	if log != nil {
		log.Warn(msg, attrs...)
	}
	if a != nil {
		rec.Transport, rec.Action, rec.Decision, rec.Status = "http", "http", audit.RateLimited, http.StatusTooManyRequests
		rec.Reason = what + ": over toolgate.limits.refusedPerMinute, each was answered 429 and not recorded"
		a.Write(rec)
	}
}

// bearer is the token of an Authorization: Bearer header ("" for none).
func bearer(r *http.Request) string {
	scheme, tok, ok := strings.Cut(strings.TrimSpace(r.Header.Get("Authorization")), " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return ""
	}
	return strings.TrimSpace(tok)
}
