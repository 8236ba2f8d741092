package console

import (
	"crypto/rand"
	"crypto/subtle"
	"encoding/base64"
	"net/http"
	"path"
	"strings"
	"sync"
	"time"

	"github.com/toolgate/toolgate/gateway"
	"github.com/toolgate/toolgate/gateway/policy"
)

// Keys checks bearer keys and gives their scope. The key store of the
// HTTP front stands behind it; nil Options.Keys means the gateway has no
// keys (the Host/Origin checks alone guard it, as they guard /mcp).
type Keys interface {
	// Required reports whether callers need a key (some key exists).
	Required() bool
	// Scope returns the key's scope when key is in force (known, not
	// expired, not revoked), else an error that says why, with the key
	// when it is known (revoked, expired), so that the audit record names
	// it. It is asked on every request, so a revoked key's sessions end at
	// once.
	Scope(key string) (*policy.Key, error)
}

// The session cookie: same-site strict, HttpOnly, scoped to the console.
const (
	cookieName = "toolgate_console"
	csrfHeader = "X-CSRF-Token"
	// pageHeader is the path the page's script was loaded from, which it
	// sends with each request ("/toolgate/ui/" behind a reverse proxy that
	// serves the gateway under /toolgate/): the session cookie is scoped
	// to it.
	pageHeader = "Toolgate-Console-Path"
)

// cookiePath is the session cookie's Path for r: the console's folder as
// the browser sees it. A request of the page's script says it
// (pageHeader, "/toolgate/ui/" → "/toolgate/ui"); the page itself is left
// to the browser's default, the folder of the page's own path, which is
// the same ("" omits the attribute); another client (a script's login)
// gets the gateway's own "/ui". The gateway cannot tell a path prefix a
// proxy strips: the fixed "/ui/" it gave was never sent back to
// /toolgate/ui/, so a login behind such a proxy led back to the login
// form. A header that is not a clean path ending in the console's path is
// ignored.
func cookiePath(r *http.Request) string {
	if p := r.Header.Get(pageHeader); cleanPagePath(p) {
		return strings.TrimSuffix(p, "/")
	}
	if r.URL.Path == Path {
		return ""
	}
	return strings.TrimSuffix(Path, "/")
}

// cleanPagePath reports whether p is a path the console may be served at:
// clean, ending in Path, of characters a cookie's Path may hold.
func cleanPagePath(p string) bool {
	if !strings.HasPrefix(p, "/") || !strings.HasSuffix(p, Path) || path.Clean(p)+"/" != p {
		return false
	}
	return !strings.ContainsFunc(p, func(c rune) bool { return c <= ' ' || c >= 0x7f || strings.ContainsRune(`;,"\`, c) })
}

// sessionCookie is the session cookie of r holding value, or clearing it
// ("").
func sessionCookie(r *http.Request, value string) *http.Cookie {
	c := &http.Cookie{Name: cookieName, Value: value, Path: cookiePath(r),
		HttpOnly: true, SameSite: http.SameSiteStrictMode, Secure: overHTTPS(r)}
	if value == "" {
		c.MaxAge = -1
	}
	return c
}

// Session limits: sessions end after sessionTTL, and at most maxSessions
// are kept (the oldest go first), so page loads cannot grow memory; one API
// key keeps at most maxKeySessions (its own oldest go first), so that one
// key's logins cannot push the other keys' sessions out: 1,024 logins of
// any key, 20 s at its rate, logged every other console user out.
const (
	sessionTTL     = 12 * time.Hour
	maxSessions    = 1024
	maxKeySessions = 16
)

// session is one browser's console session. The key it logged in with is
// kept server-side only (the cookie holds a random id), and checked again
// on every request.
type session struct {
	id, csrf string
	key      string // "" when the gateway has no keys
	created  time.Time
}

type sessions struct {
	mu  sync.Mutex
	m   map[string]*session
	now func() time.Time
}

func newSessions() *sessions {
	return &sessions{m: map[string]*session{}, now: time.Now}
}

func randomToken() string {
	b := make([]byte, 32)
	_, _ = rand.Read(b) // never fails (crypto/rand)
	return base64.RawURLEncoding.EncodeToString(b)
}

// create starts a session for key and sets its cookie.
func (s *sessions) create(w http.ResponseWriter, r *http.Request, key string) *session {
	ss := &session{id: randomToken(), csrf: randomToken(), key: key, created: s.now()}
	s.mu.Lock()
	if key != "" {
		s.dropOldest(func(x *session) bool { return x.key == key }, maxKeySessions)
	}
	s.dropOldest(func(*session) bool { return true }, maxSessions)
	s.m[ss.id] = ss
	s.mu.Unlock()
	http.SetCookie(w, sessionCookie(r, ss.id))
	return ss
}

// dropOldest drops the oldest of the sessions of holds when it holds limit
// of them or more. s.mu is held.
func (s *sessions) dropOldest(of func(*session) bool, limit int) {
	var oldest *session
	n := 0
	for _, x := range s.m {
		if !of(x) {
			continue
		}
		n++
		if oldest == nil || x.created.Before(oldest.created) {
			oldest = x
		}
	}
	if n >= limit {
		delete(s.m, oldest.id)
	}
}

// get returns the request's live session, or nil. A browser may send
// more than one session cookie, each of its own Path (one that an older
// gateway scoped to /ui/, of a session gone with it, comes before the
// /ui one of now): the first live one counts.
func (s *sessions) get(r *http.Request) *session {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, c := range r.CookiesNamed(cookieName) {
		ss := s.m[c.Value]
		if ss == nil {
			continue
		}
		if s.now().Sub(ss.created) > sessionTTL {
			delete(s.m, ss.id)
			continue
		}
		return ss
	}
	return nil
}

// end forgets the request's session and clears its cookie.
func (s *sessions) end(w http.ResponseWriter, r *http.Request) {
	if ss := s.get(r); ss != nil {
		s.mu.Lock()
		delete(s.m, ss.id)
		s.mu.Unlock()
	}
	http.SetCookie(w, sessionCookie(r, ""))
}

// overHTTPS reports whether the browser reached the console over HTTPS:
// the gateway's own TLS, or a reverse proxy's that ended it and says so
// (X-Forwarded-Proto: https, or proto=https in Forwarded). Only the session
// cookie's Secure flag reads it: a client that claims https over plain
// HTTP gets a cookie its browser keeps from plain HTTP, its own loss.
func overHTTPS(r *http.Request) bool {
	if r.TLS != nil || strings.EqualFold(strings.TrimSpace(r.Header.Get("X-Forwarded-Proto")), "https") {
		return true
	}
	for _, f := range r.Header.Values("Forwarded") {
		for _, part := range strings.FieldsFunc(f, func(c rune) bool { return c == ';' || c == ',' }) {
			if k, v, ok := strings.Cut(strings.TrimSpace(part), "="); ok && strings.EqualFold(k, "proto") && strings.EqualFold(strings.Trim(v, `"`), "https") {
				return true
			}
		}
	}
	return false
}

// sameOrigin reports whether a state-changing request comes from the
// console's own page (gateway.SameOrigin). Browsers send Origin on every
// POST; a request without one is refused.
func sameOrigin(r *http.Request) bool { return gateway.SameOrigin(r) }

// csrfOK reports whether the request carries its session's CSRF token.
func csrfOK(r *http.Request, ss *session) bool {
	got := r.Header.Get(csrfHeader)
	return ss != nil && got != "" && subtle.ConstantTimeCompare([]byte(got), []byte(ss.csrf)) == 1
}

// bearer is the key of an "Authorization: Bearer KEY" header, or "".
func bearer(r *http.Request) string {
	h := r.Header.Get("Authorization")
	if len(h) > 7 && strings.EqualFold(h[:7], "bearer ") {
		return strings.TrimSpace(h[7:])
	}
	return ""
}
