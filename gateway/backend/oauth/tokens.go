package oauth

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"slices"
	"sync"
	"time"

	"github.com/toolgate/toolgate/internal/storage"
	"golang.org/x/oauth2"
)

// Options configure Tokens. Nil means defaults.
type Options struct {
	Logger *slog.Logger // nil = discard
	// HTTPClient makes token requests (default: one with DefaultHTTPTimeout
	// over the base transport given to Transport, so that a refresh uses
	// the server's TLS settings).
	HTTPClient *http.Client
	// LoginCommand is the command a user runs to log in to server, quoted
	// in errors (default "toolgate auth login SERVER").
	LoginCommand func(server string) string
	// RefreshBefore refreshes an access token this long before it expires
	// (default 1m; at most half the token's lifetime).
	RefreshBefore time.Duration
	// PollInterval is how often a login file someone waits on (Changed)
	// is looked at (default 1s).
	PollInterval time.Duration
	// Now is the clock that decides when a token expires (default
	// time.Now); tests move it forward.
	Now func() time.Time
	// ExpiryRecheck is how often Now is looked at while the warning of a
	// login that cannot be refreshed is due later (default 1m): the
	// warning is due at a wall time, and timers run on a clock that stands
	// still while the machine sleeps and does not follow the wall clock
	// when it is set.
	ExpiryRecheck time.Duration
	// Storage is asked before a login is written back to the data folder
	// (a refreshed token, a refused login) and told how the write went
	// (nil: every write is tried). While it refuses, refreshed tokens are
	// kept in memory only, a refresh goes without the cross-process file
	// lock (this process's own refresh slot still holds), and a login file
	// gone with the folder is not taken for a logout.
	Storage Storage
}

// Storage is the data folder's health as the login writer uses it (serve passes an
// *storage.Writer; nil Options.Storage is storage.Unchecked).
type Storage = storage.Gate

func (o *Options) withDefaults() Options {
	var r Options
	if o != nil {
		r = *o
	}
	if r.Logger == nil {
		r.Logger = slog.New(slog.DiscardHandler)
	}
	if r.LoginCommand == nil {
		r.LoginCommand = func(server string) string { return "toolgate auth login " + server }
	}
	if r.RefreshBefore <= 0 {
		r.RefreshBefore = DefaultRefreshBefore
	}
	if r.PollInterval <= 0 {
		r.PollInterval = DefaultPollInterval
	}
	if r.Now == nil {
		r.Now = time.Now
	}
	if r.ExpiryRecheck <= 0 {
		r.ExpiryRecheck = time.Minute
	}
	if r.Storage == nil {
		r.Storage = storage.Unchecked
	}
	return r
}

// NeedsLoginError says that a server wants a login toolgate cannot give
// (none stored, or its refresh was refused) and the command that fixes it.
type NeedsLoginError struct {
	Server  string
	Command string // e.g. "toolgate auth login linear --config /home/me/toolgate.json"
	Reason  string
}

func (e *NeedsLoginError) Error() string { return "needs a login: " + e.Fix() }

// Fix is what to do, the words of Error after "needs a login: ": run the
// command, and why. The gateway shows it to admins only: the command names
// the config file and the data folder, and why may quote the authorization
// server or the server's URL.
func (e *NeedsLoginError) Fix() string { return fmt.Sprintf("run `%s` (%s)", e.Command, e.Reason) }

// Tokens gives a gateway's remote backends their access tokens from the
// Store: Transport per connection, Changed to learn of a new login. Close
// stops it.
type Tokens struct {
	store *Store
	opts  Options
	log   *slog.Logger

	mu      sync.Mutex
	flights map[string]chan struct{} // one refresh at a time per server (capacity 1)
	waits   map[string]*wait         // Changed channels by server
	// stepUps caches each login file's step-up for StepUp, by server;
	// unrecorded holds the step-ups the data folder would not take.
	stepUps    map[string]stepUpFile
	unrecorded map[string]Unrecorded
	// expiring is, by server, the warning due for an access token that
	// cannot be refreshed (watchExpiry).
	expiring map[string]*expiryWatch

	stop chan struct{}
	done chan struct{}
}

// wait is one server's Changed channel and the state of its file when it
// was handed out.
type wait struct {
	ch   chan struct{}
	seen fileState
}

// NewTokens returns the token keeper over store. It polls the login files
// that Changed was asked about until Close.
func NewTokens(store *Store, opts *Options) *Tokens {
	o := opts.withDefaults()
	guarded := *store
	guarded.mkdirAll = o.Storage.MkdirAll
	t := &Tokens{
		store:   &guarded,
		opts:    o,
		log:     o.Logger,
		flights: map[string]chan struct{}{},
		waits:   map[string]*wait{},

		stepUps:    map[string]stepUpFile{},
		unrecorded: map[string]Unrecorded{},
		expiring:   map[string]*expiryWatch{},
		stop:       make(chan struct{}),
		done:       make(chan struct{}),
	}
	go t.poll()
	return t
}

// Close stops watching the login files and waits for that to end.
func (t *Tokens) Close() error {
	select {
	case <-t.stop:
	default:
		close(t.stop)
	}
	<-t.done
	t.mu.Lock()
	for _, w := range t.expiring {
		w.timer.Stop()
	}
	t.mu.Unlock()
	return nil
}

// LoginCommand is the command that logs in to server (Options.LoginCommand),
// for the pool's errors to quote (backend.LoginCommander).
func (t *Tokens) LoginCommand(server string) string { return t.opts.LoginCommand(server) }

// stepUpFile is what a login file, as stat saw it, says of a step-up:
// the login's scopes and those pending, for a server at url.
type stepUpFile struct {
	seen             fileState
	url              string
	granted, pending []string
	// expires is when the access token of a login that cannot be
	// refreshed expires (zero for one that can, or that never expires).
	expires time.Time
}

// Unrecorded are the scopes of a step-up a server asked for that could
// not be written to its login file (for the next login to ask for), and
// why.
type Unrecorded struct {
	Scopes []string
	Why    error
}

// StepUp is the step-up server at url asked for that its login lacks
// (backend.StepUpKeeper): the scopes its login file records as pending,
// with those this gateway could not record there (unrecorded, and why:
// the data folder refused the write), which the next `auth login` would
// not ask for. None while no usable login is stored (the backend needs a
// login then, which says so). The file is read again only when it
// changed.
func (t *Tokens) StepUp(server, url string) (scopes, unrecorded []string, why error) {
	f := t.loginFile(server, url)
	t.mu.Lock()
	u := t.unrecorded[server]
	t.mu.Unlock()
	for _, s := range u.Scopes {
		if !slices.Contains(f.granted, s) && !slices.Contains(f.pending, s) {
			unrecorded = append(unrecorded, s)
		}
	}
	if len(unrecorded) == 0 {
		return f.pending, nil, nil
	}
	return union(f.pending, unrecorded), unrecorded, u.Why
}

// loginFile is what server's login file for url says of a step-up and of
// an expiry, read again only when the file changed.
func (t *Tokens) loginFile(server, url string) stepUpFile {
	st := t.stat(server)
	t.mu.Lock()
	f, ok := t.stepUps[server]
	t.mu.Unlock()
	if !ok || f.seen != st || f.url != url {
		f = stepUpFile{seen: st, url: url}
		if c, _, err := t.load(server, url); err == nil && c != nil {
			f.granted, f.pending = c.Scopes, c.PendingScopes()
			if !refreshable(c) {
				f.expires = c.Token.Expiry
			}
		}
		t.mu.Lock()
		t.stepUps[server] = f
		t.mu.Unlock()
	}
	return f
}

// notRecorded keeps in memory the scopes of a step-up that could not be
// written to server's login file, for StepUp; recorded forgets them once
// a write took the record.
func (t *Tokens) notRecorded(server string, scopes []string, why error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	u := t.unrecorded[server]
	t.unrecorded[server] = Unrecorded{Scopes: union(u.Scopes, scopes), Why: why}
}

func (t *Tokens) recorded(server string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	delete(t.unrecorded, server)
}

// Changed returns a channel that is closed once server's login file
// changes (a login, a logout, a refresh by another gateway) after this
// call. The file is polled (Options.PollInterval) while someone waits, so
// it works on every file system.
func (t *Tokens) Changed(server string) <-chan struct{} {
	t.mu.Lock()
	defer t.mu.Unlock()
	if w, ok := t.waits[server]; ok {
		return w.ch
	}
	w := &wait{ch: make(chan struct{}), seen: t.stat(server)}
	t.waits[server] = w
	return w.ch
}

// fileState is what polling compares: a rename over the file or a write
// changes it.
type fileState struct {
	exists bool
	mod    time.Time
	size   int64
}

func (t *Tokens) stat(server string) fileState {
	fi, err := os.Stat(t.store.Path(server))
	if err != nil {
		return fileState{}
	}
	return fileState{exists: true, mod: fi.ModTime(), size: fi.Size()}
}

func (t *Tokens) poll() {
	defer close(t.done)
	tick := time.NewTicker(t.opts.PollInterval)
	defer tick.Stop()
	for {
		select {
		case <-t.stop:
			return
		case <-tick.C:
		}
		t.mu.Lock()
		for server, w := range t.waits {
			if t.stat(server) != w.seen {
				close(w.ch)
				delete(t.waits, server)
			}
		}
		t.mu.Unlock()
	}
}

// flight takes server's refresh slot, waiting for a refresh in progress
// (or until ctx ends), and returns its release.
func (t *Tokens) flight(ctx context.Context, server string) (func(), error) {
	t.mu.Lock()
	slot, ok := t.flights[server]
	if !ok {
		slot = make(chan struct{}, 1)
		t.flights[server] = slot
	}
	t.mu.Unlock()
	select {
	case slot <- struct{}{}:
		return func() { <-slot }, nil
	case <-ctx.Done():
		return nil, fmt.Errorf("wait for the refresh of %q's access token: %w", server, context.Cause(ctx))
	}
}

func (t *Tokens) needsLogin(server, reason string) *NeedsLoginError {
	return &NeedsLoginError{Server: server, Command: t.opts.LoginCommand(server), Reason: reason}
}

// Transport returns the RoundTripper of one connection to server at
// serverURL over base. Requests to the server's origin carry the stored
// access token, refreshed before it expires and when the server answers
// 401; requests elsewhere go out untouched. A server without a stored
// login gets requests without a token: if it answers 401 with a Bearer
// challenge, or a refresh is refused, loginRequired is called once with a
// *NeedsLoginError, and from then on every request fails with it without
// being sent.
func (t *Tokens) Transport(server, serverURL string, base http.RoundTripper, loginRequired func(error)) http.RoundTripper {
	tr := &transport{t: t, server: server, url: serverURL, base: base, required: loginRequired, seen: t.stat(server), checked: time.Now()}
	if u, err := url.Parse(serverURL); err == nil {
		tr.origin = u.Scheme + "://" + u.Host
	}
	c, reason, err := t.load(server, serverURL)
	switch {
	case err != nil:
		tr.why = err.Error()
	case c != nil:
		tr.creds = c
		t.watchExpiry(server, c)
	default:
		tr.why = reason
	}
	return tr
}

// Why a server needs a login, when no login file is there: none was
// stored, or the one a connection used was removed.
const (
	whyNoneStored = "the server asks for a login and none is stored"
	whyRemoved    = "the login was removed (toolgate auth logout)"
)

// load reads server's credentials if they may be used for serverURL; else
// nil and why not.
func (t *Tokens) load(server, serverURL string) (*Credentials, string, error) {
	c, err := t.store.Load(server)
	switch {
	case err != nil:
		return nil, "", err
	case c == nil:
		return nil, whyNoneStored, nil
	case !c.For(serverURL):
		return nil, fmt.Sprintf("the stored login is for %s, and the server's url is now %s", c.URL, serverURL), nil
	case c.Refused != "":
		return nil, c.Refused, nil
	}
	return c, "", nil
}

// transport is one connection's RoundTripper.
type transport struct {
	t        *Tokens
	server   string
	url      string
	origin   string
	base     http.RoundTripper
	required func(error)

	mu      sync.Mutex
	creds   *Credentials // nil: no usable login
	why     string       // why creds is nil
	lost    error        // set once the login is required
	seen    fileState    // the login file as last read
	checked time.Time    // when the file was last looked at
	// memOnly: the login file went with the data folder, and creds is
	// the login until a refresh writes it back.
	memOnly bool
	// offers caches OffersLogin's answer for this connection: 0 not
	// asked yet, 1 yes, -1 no.
	offers int
}

// offersLogin is OffersLogin for the server of tr, asked once per
// connection (a reconnect asks again: the server may have changed).
func (tr *transport) offersLogin(ctx context.Context, ch *Challenge) bool {
	tr.mu.Lock()
	o := tr.offers
	tr.mu.Unlock()
	if o == 0 {
		o = -1
		if OffersLogin(ctx, &http.Client{Transport: tr.base}, tr.url, ch) {
			o = 1
		}
		tr.mu.Lock()
		tr.offers = o
		tr.mu.Unlock()
	}
	return o > 0
}

func (tr *transport) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.URL.Scheme+"://"+req.URL.Host != tr.origin {
		return tr.base.RoundTrip(req) // a token never leaves its server
	}
	ctx := req.Context()
	tok, err := tr.token(ctx)
	if err != nil {
		closeBody(req)
		return nil, err
	}
	resp, err := tr.send(req, req.Body, tok)
	if err != nil || resp.StatusCode != http.StatusUnauthorized {
		tr.forbidden(resp, tok)
		return resp, err
	}
	if tok == "" {
		if ch, bearer := bearerChallenge(resp.Header); !bearer || !tr.offersLogin(ctx, ch) {
			return resp, nil // not OAuth: the caller reports the 401 as it is
		}
		discard(resp)
		tr.mu.Lock()
		why := tr.why
		tr.mu.Unlock()
		return nil, tr.lose(why)
	}
	// The server refused a token we hold valid (revoked, or our clock is
	// off): refresh once and send the request again.
	discard(resp)
	fresh, err := tr.refresh(ctx, tok)
	if err != nil {
		return nil, err
	}
	body := req.Body
	if req.Body != nil && req.Body != http.NoBody {
		if req.GetBody == nil {
			return nil, fmt.Errorf("%s refused the access token of %q, which is now refreshed; this request cannot be sent again: send it again", tr.url, tr.server)
		}
		if body, err = req.GetBody(); err != nil {
			return nil, err
		}
	}
	resp, err = tr.send(req, body, fresh)
	if err == nil && resp.StatusCode == http.StatusUnauthorized {
		discard(resp)
		return nil, tr.lose("the server refused a freshly refreshed access token: the login may lack a permission the server wants")
	}
	tr.forbidden(resp, fresh)
	return resp, err
}

// forbidden records the step-up that resp, the answer to a request that
// carried the login's token tok, asks for: a 403 insufficient_scope naming
// scopes the login lacks (MCP 2025-11-25). The server's answer goes on to
// the caller as it is: the backend's error names the scopes and the login
// to run, which asks for them.
func (tr *transport) forbidden(resp *http.Response, tok string) {
	if resp == nil || resp.StatusCode != http.StatusForbidden || tok == "" {
		return
	}
	if scopes := insufficientScope(resp.Header); len(scopes) > 0 {
		tr.stepUp(scopes)
	}
}

// stepUp adds scopes to the step-up record of the login file, under the
// store's lock, when they add to it: a server that answers 403 to every
// call costs a comparison in memory, not a write each time (nor a read,
// once this connection holds the record).
func (tr *transport) stepUp(scopes []string) {
	tr.mu.Lock()
	c := tr.creds
	tr.mu.Unlock()
	if c == nil {
		return
	}
	mem := *c
	if !askStepUp(&mem, scopes, tr.t.opts.Now()) {
		return
	}
	// Not recorded, the next login would ask for the old scopes: the
	// call's error and the backend's status say what to do instead.
	fail := func(err error) {
		tr.t.log.Warn("the server asks for more scopes; not recorded for the next login", "server", tr.server, "scopes", scopes, "err", err)
		tr.t.notRecorded(tr.server, mem.StepUp.Scopes, err)
	}
	if err := tr.t.opts.Storage.Check(); err != nil {
		fail(err)
		return
	}
	unlock, err := tr.t.store.lock(tr.server)
	if err != nil {
		fail(err)
		return
	}
	defer unlock()
	disk, _, err := tr.t.load(tr.server, tr.url)
	if err != nil || disk == nil {
		return // logged out, or another login: its own requests will say
	}
	if askStepUp(disk, scopes, tr.t.opts.Now()) {
		if err := tr.t.save(disk); err != nil {
			fail(err)
			return
		}
		tr.t.log.Info("the server asks for more scopes (step-up); the next `toolgate auth login` asks for them", "server", tr.server, "pending", disk.StepUp.Scopes)
	}
	tr.t.recorded(tr.server)
	tr.mu.Lock()
	tr.seen = tr.t.stat(tr.server)
	tr.mu.Unlock()
	tr.set(disk)
}

// send sends req with body and the token (none when tok is "").
func (tr *transport) send(req *http.Request, body io.ReadCloser, tok string) (*http.Response, error) {
	r := req.Clone(req.Context())
	r.Body = body
	if tok != "" {
		r.Header.Set("Authorization", "Bearer "+tok)
	}
	return tr.base.RoundTrip(r)
}

// token returns the access token to send ("" without a login), refreshing
// it first when it is about to expire.
func (tr *transport) token(ctx context.Context) (string, error) {
	if err := tr.reread(); err != nil {
		return "", err
	}
	tr.mu.Lock()
	c, lost := tr.creds, tr.lost
	tr.mu.Unlock()
	if lost != nil {
		return "", lost
	}
	if c == nil {
		return "", nil
	}
	if tr.fresh(c.Token) {
		return c.Token.AccessToken, nil
	}
	return tr.refresh(ctx, c.Token.AccessToken)
}

// reread takes up a login file that changed (looked at once per
// PollInterval at most): a new login's token is used at once, and a
// logout ends the connection's use of the old one.
func (tr *transport) reread() error {
	tr.mu.Lock()
	if tr.lost != nil || time.Since(tr.checked) < tr.t.opts.PollInterval {
		tr.mu.Unlock()
		return nil
	}
	tr.checked = time.Now()
	st := tr.t.stat(tr.server)
	changed, had := st != tr.seen, tr.creds != nil
	tr.seen = st
	tr.mu.Unlock()
	if !changed {
		return nil
	}
	c, why, err := tr.t.load(tr.server, tr.url)
	switch {
	case err != nil:
		return err
	case c != nil:
		tr.mu.Lock()
		tr.creds, tr.memOnly = c, false
		tr.mu.Unlock()
		tr.t.watchExpiry(tr.server, c)
	case had:
		if !st.exists {
			if tr.t.opts.Storage.Check() != nil {
				// Gone with the data folder, not logged out: the login
				// in memory serves, and the next refresh writes it back
				// once the folder can take it.
				tr.t.log.Debug("login file gone with the data folder; using the login in memory", "server", tr.server)
				tr.mu.Lock()
				tr.memOnly = true
				tr.mu.Unlock()
				return nil
			}
			why = whyRemoved
		}
		return tr.lose(why)
	}
	return nil
}

// fresh reports whether tok may be sent: it does not expire within
// RefreshBefore (at most half its lifetime). One without a refresh token
// is sent until it expires: nothing renews it early, and its warning
// (ExpiryNotice) says calls fail from its expiry. It was taken for
// expired RefreshBefore early, its login marked refused.
func (tr *transport) fresh(tok Token) bool {
	if tok.AccessToken == "" {
		return false
	}
	if tok.Expiry.IsZero() {
		return true
	}
	margin := tr.t.opts.RefreshBefore
	if tok.RefreshToken == "" {
		margin = 0
	} else if !tok.Obtained.IsZero() {
		margin = min(margin, tok.Expiry.Sub(tok.Obtained)/2)
	}
	return tr.t.opts.Now().Add(margin).Before(tok.Expiry)
}

// refresh gets a new access token in place of stale: one refresh at a time
// per server (in this process by a slot, across processes by the store's
// file lock). A caller that waited finds the token the one before it got.
// A refresh that is refused loses the login; one that finds no answer is
// an error for this request only.
func (tr *transport) refresh(ctx context.Context, stale string) (string, error) {
	release, err := tr.t.flight(ctx, tr.server)
	if err != nil {
		return "", err
	}
	defer release()
	tr.mu.Lock()
	c, lost := tr.creds, tr.lost
	tr.mu.Unlock()
	if lost != nil {
		return "", lost
	}
	if c != nil && c.Token.AccessToken != stale && tr.fresh(c.Token) {
		return c.Token.AccessToken, nil
	}
	// While the data folder cannot take the lock file, this process's
	// refresh slot is the only lock (and the folder is not created again).
	unlock := func() {}
	if tr.t.opts.Storage.Check() == nil {
		if unlock, err = tr.t.store.lock(tr.server); err != nil {
			return "", err
		}
	}
	defer unlock()
	// The file is the truth: another connection, gateway or `auth login`
	// may have renewed it.
	disk, why, err := tr.t.load(tr.server, tr.url)
	tr.mu.Lock()
	memOnly := tr.memOnly
	tr.mu.Unlock()
	if (err != nil || disk == nil) && c != nil && (memOnly || tr.t.opts.Storage.Check() != nil) {
		// The file went with the data folder: the login in memory is the
		// truth, and is written back once the folder can take it.
		cc := *c
		disk, err = &cc, nil
		tr.mu.Lock()
		tr.memOnly = true
		tr.mu.Unlock()
	}
	if err != nil {
		return "", err
	}
	if disk == nil {
		if c != nil && why == whyNoneStored {
			// The login this connection used is gone: a logout, which
			// revoked its token (the server's 401 that brought this
			// refresh) before the next look at the file said so.
			why = whyRemoved
		}
		return "", tr.lose(why)
	}
	if disk.Token.AccessToken != stale && tr.fresh(disk.Token) {
		tr.set(disk)
		return disk.Token.AccessToken, nil
	}
	if disk.Token.RefreshToken == "" {
		why := "the access token expired and the authorization server gave no refresh token"
		if tr.fresh(disk.Token) {
			// The server's 401 to a token sent before its expiry (fresh
			// with no refresh token is that): "expired" was not so, while
			// the status had just said when it would expire.
			why = "the server refused the access token before it expired (revoked, or the server's clock is ahead) and the authorization server gave no refresh token"
		}
		return "", tr.refuse(disk, why)
	}
	cfg := &oauth2.Config{
		ClientID:     disk.Client.ID,
		ClientSecret: disk.Client.Secret,
		Endpoint:     oauth2.Endpoint{TokenURL: disk.TokenEndpoint, AuthStyle: authStyle(disk.Client.AuthMethod)},
	}
	hc := tr.t.opts.HTTPClient
	if hc == nil {
		hc = &http.Client{Transport: tr.base, Timeout: DefaultHTTPTimeout}
	}
	rctx := context.WithValue(ctx, oauth2.HTTPClient, withResource(hc, disk.Resource))
	tok, err := cfg.TokenSource(rctx, &oauth2.Token{RefreshToken: disk.Token.RefreshToken}).Token()
	if err != nil {
		err = tokenError(err)
		var re *refusedError
		if errors.As(err, &re) && re.permanent() {
			return "", tr.refuse(disk, fmt.Sprintf("the authorization server refused the refresh token: %v", err))
		}
		tr.t.log.Warn("refreshing the access token failed; the next request tries again", "server", tr.server, "endpoint", disk.TokenEndpoint, "err", err)
		return "", fmt.Errorf("refresh the access token of %q at %s: %w (the next request tries again)", tr.server, disk.TokenEndpoint, err)
	}
	now := tr.t.opts.Now()
	disk.Token = fromOAuth2(tok, now)
	disk.Refreshed = now
	if s, ok := tok.Extra("scope").(string); ok && s != "" {
		disk.Scopes = grantedScopes(tok, disk.Scopes)
		disk.grant()
	}
	if err := tr.t.save(disk); err != nil {
		// The new token works for this process; the next start refreshes
		// again. Storage has reported the fault.
		tr.t.log.Debug("refreshed token kept in memory only", "server", tr.server, "err", err)
	} else {
		tr.mu.Lock()
		tr.memOnly = false
		tr.seen = tr.t.stat(tr.server)
		tr.mu.Unlock()
	}
	tr.set(disk)
	tr.t.log.Info("access token refreshed", "server", tr.server, "expiry", disk.Token.Expiry)
	return disk.Token.AccessToken, nil
}

// save writes c to the store when the data folder can take it, and tells
// Storage how it went.
func (t *Tokens) save(c *Credentials) error {
	st := t.opts.Storage
	if err := st.Check(); err != nil {
		return err
	}
	// This process's own write (a refresh, a refusal marked) is no login
	// saved by someone else: a backend waiting on Changed goes on waiting.
	// It used to wake once on the refusal it had just been told of, and
	// connect again only to be refused. The store's lock is held, so no
	// other process writes meanwhile; t.mu is held across the write and
	// the new file's stat, so the poll cannot see the file between them
	// (it did, now and then, and took the write for a new login).
	t.mu.Lock()
	err := t.store.Save(c)
	if w, ok := t.waits[c.Server]; ok && err == nil {
		w.seen = t.stat(c.Server)
	}
	t.mu.Unlock()
	if err != nil {
		st.Fail(err)
		return err
	}
	st.OK()
	return nil
}

func (tr *transport) set(c *Credentials) {
	tr.mu.Lock()
	tr.creds = c
	tr.mu.Unlock()
	tr.t.watchExpiry(tr.server, c)
}

// refuse records in the store that c can no longer be used (so `auth
// status` says so and no other gateway tries it again), then loses the
// login. The store's lock is held.
func (tr *transport) refuse(c *Credentials, reason string) error {
	c.Refused = reason
	if err := tr.t.save(c); err != nil {
		tr.t.log.Warn("could not mark the stored login as refused", "server", tr.server, "err", err)
	}
	return tr.lose(reason)
}

// lose marks the login as required: loginRequired is called (once) and
// every later request fails with the same error.
func (tr *transport) lose(reason string) error {
	tr.mu.Lock()
	first := tr.lost == nil
	if first {
		tr.lost = tr.t.needsLogin(tr.server, reason)
		tr.creds = nil
	}
	err := tr.lost
	tr.mu.Unlock()
	if first {
		tr.t.log.Debug("server needs a login", "server", tr.server, "err", err)
		if tr.required != nil {
			tr.required(err)
		}
	}
	return err
}

func discard(resp *http.Response) {
	io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	resp.Body.Close()
}

func closeBody(req *http.Request) {
	if req.Body != nil {
		req.Body.Close()
	}
}
