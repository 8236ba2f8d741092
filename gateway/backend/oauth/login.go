package oauth

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"html"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/oauthex"
	"golang.org/x/oauth2"

	"github.com/toolgate/toolgate/internal/oneline"
	"github.com/toolgate/toolgate/internal/proxyenv"
)

// Server is the server to log in to, as its config entry gives it.
type Server struct {
	Name      string
	URL       string
	Transport string // TransportHTTP or TransportSSE
	// From the entry's "oauth": a client registered ahead of time ("" =
	// register dynamically) and the scopes to ask for (none = the ones the
	// server names).
	ClientID     string
	ClientSecret string
	Scopes       []string
	// RedirectURI is the entry's "redirectUri" (config.CheckRedirectURI
	// checked it): "" is http://127.0.0.1:<a free port>/callback.
	RedirectURI string
}

// redirectAt is where the login of srv listens for the redirect: the
// host and port of its redirect URI ("0": a free one), the address to
// listen on (localhost: 127.0.0.1, where browsers that try ::1 first go
// on to) and its path as written ("" for none: the URI registered and
// asked for is the entry's byte for byte, which a provider compares as a
// string; the browser asks for "/", servedPath).
func (srv Server) redirectAt() (host, port, listen, path string) {
	host, port, path = "127.0.0.1", "0", CallbackPath
	if u, err := url.Parse(srv.RedirectURI); srv.RedirectURI != "" && err == nil {
		host, port, path = u.Hostname(), cmp.Or(u.Port(), "0"), u.Path
	}
	listen = host
	if host == "localhost" {
		listen = "127.0.0.1"
	}
	return host, port, listen, path
}

// LoginOptions configure Login. Nil means defaults.
type LoginOptions struct {
	// Authorize is given the authorization URL once the redirect listener
	// is up; it shows it to the user (print, open a browser). Default:
	// print it to stderr.
	Authorize func(authURL string) error
	// Timeout bounds the wait for the redirect (default 5m).
	Timeout time.Duration
	// HTTPClient makes the discovery, registration and token requests
	// (default: one with DefaultHTTPTimeout).
	HTTPClient *http.Client
	// Pasted, when not nil, gives the lines the user pastes: the address
	// the browser ended at (http://127.0.0.1:PORT/callback?code=…&state=…),
	// when the browser is on another machine and its redirect cannot reach
	// this one. Such a line completes the login as the redirect does.
	Pasted <-chan string
	// Rejected, when not nil, is told of a pasted line that is not the
	// redirect of this login, and why; the wait goes on.
	Rejected func(line, why string)
	// StepUp, when not nil, is told before Authorize that the login asks
	// for scopes (all of them) beyond the usual ones because a gateway
	// recorded a step-up (stepUp: the scopes the server's 403 asked for),
	// and which of those the authorization server does not list (unlisted:
	// it may refuse them), so that no scope is asked for unsaid.
	StepUp func(scopes, stepUp, unlisted []string)
	// ClientName is sent when registering (default "toolgate").
	ClientName string
	Logger     *slog.Logger // nil = discard
	Now        func() time.Time
}

// Defaults of LoginOptions and Options.
const (
	DefaultLoginTimeout  = 5 * time.Minute
	DefaultHTTPTimeout   = 30 * time.Second
	DefaultClientName    = "toolgate"
	DefaultRefreshBefore = time.Minute
	DefaultPollInterval  = time.Second
)

// CallbackPath is the path of the loopback redirect URI.
const CallbackPath = "/callback"

// ErrLoginTimeout is wrapped by Login's error when no redirect came within
// LoginOptions.Timeout.
var ErrLoginTimeout = errors.New("no redirect from the authorization server")

func (o *LoginOptions) withDefaults() LoginOptions {
	var r LoginOptions
	if o != nil {
		r = *o
	}
	if r.Timeout <= 0 {
		r.Timeout = DefaultLoginTimeout
	}
	if r.HTTPClient == nil {
		r.HTTPClient = defaultHTTPClient()
	}
	if r.ClientName == "" {
		r.ClientName = DefaultClientName
	}
	if r.Logger == nil {
		r.Logger = slog.New(slog.DiscardHandler)
	}
	if r.Now == nil {
		r.Now = time.Now
	}
	if r.Authorize == nil {
		r.Authorize = func(u string) error {
			_, err := fmt.Fprintf(os.Stderr, "Open this URL to log in:\n\n  %s\n\n", u)
			return err
		}
	}
	return r
}

// defaultHTTPClient is a client with an overall timeout over a plain
// *http.Transport, so that go-sdk's metadata fetches keep their checks
// (no redirects into private networks), through the proxy of the
// environment (proxyenv: a refusal names the proxy).
func defaultHTTPClient() *http.Client {
	return &http.Client{Transport: proxyenv.Transport(), Timeout: DefaultHTTPTimeout}
}

// Login logs in to srv and saves the login in store: it asks the server
// (which must answer 401 with a Bearer challenge), discovers its
// authorization server, registers toolgate there unless srv names a client,
// listens on a free loopback port for the redirect, hands the authorization
// URL to opts.Authorize, waits for the redirect (opts.Timeout), exchanges
// the code with its PKCE verifier and saves the tokens.
//
// A client toolgate registered is kept with the login and used again by
// the next login to the same authorization server when its redirect port
// is free.
func Login(ctx context.Context, store *Store, srv Server, opts *LoginOptions) (*Credentials, error) {
	o := opts.withDefaults()
	hc := o.HTTPClient
	ch, err := Probe(ctx, hc, srv.Transport, srv.URL)
	if err != nil {
		return nil, err
	}
	if ch == nil {
		return nil, fmt.Errorf("%s: %w, so it needs none", srv.URL, ErrNoLoginNeeded)
	}
	d, err := discover(ctx, hc, srv.URL, ch)
	if err != nil {
		return nil, err
	}
	scopes := srv.Scopes
	if len(scopes) == 0 {
		scopes = ch.Scopes
	}
	if len(scopes) == 0 {
		scopes = d.prm.ScopesSupported
	}
	// Ask for a refresh token where the server offers one that way.
	if len(srv.Scopes) == 0 && slices.Contains(d.asm.ScopesSupported, "offline_access") && !slices.Contains(scopes, "offline_access") {
		scopes = append(slices.Clone(scopes), "offline_access")
	}

	prev, _ := store.Load(srv.Name)
	stepUp := pendingFor(prev, srv.URL)
	if len(stepUp) > 0 {
		// A step-up a gateway recorded (the server's 403 asked for more):
		// the scopes the login has stay, and the user approves the new
		// ones in the browser, as any login.
		scopes = union(scopes, prev.Scopes, stepUp)
		if o.StepUp != nil {
			o.StepUp(scopes, stepUp, unlisted(stepUp, d))
		}
	}
	ln, client, err := listenAndRegister(ctx, hc, srv, d.asm, scopes, prev, o.ClientName)
	if err != nil {
		return nil, err
	}
	verifier := oauth2.GenerateVerifier()
	state := rand.Text()
	cfg := authConfig(d, client, scopes)
	authURL := cfg.AuthCodeURL(state, oauth2.S256ChallengeOption(verifier), oauth2.SetAuthURLParam("resource", d.prm.Resource))
	if srv.ClientID != "" {
		// The config's client, which the authorization server may not
		// know (a typo, another server's): the browser showed its error
		// and the login waited out its timeout for a redirect that could
		// not come.
		if refused, why := refusesClient(ctx, hc, authURL); refused {
			ln.Close()
			return nil, fmt.Errorf("the authorization endpoint %s refuses this login's request before any page (%s): it does not know the client %q of the entry's \"oauth\": {\"clientId\"}, or not its redirect URI %s (a client registered ahead of time must allow any loopback port, RFC 8252 §7.3): check clientId with the authorization server's registration, or remove \"clientId\" where the server lets toolgate register itself",
				d.asm.AuthorizationEndpoint, why, srv.ClientID, client.RedirectURI)
		}
	}
	if client.ID == prevClientID(prev) && client.Registered {
		if refused, _ := refusesClient(ctx, hc, authURL); refused {
			// The client registered by the previous login is unknown
			// there now (an authorization server that keeps registrations
			// in memory, restarted): the browser showed "invalid client"
			// and the login waited for a redirect that could not come.
			o.Logger.Info("the authorization server no longer knows the client registered before; registering anew", "server", srv.Name, "issuer", d.asm.Issuer)
			ln.Close()
			if ln, client, err = listenAndRegister(ctx, hc, srv, d.asm, scopes, nil, o.ClientName); err != nil {
				return nil, err
			}
			cfg = authConfig(d, client, scopes)
			authURL = cfg.AuthCodeURL(state, oauth2.S256ChallengeOption(verifier), oauth2.SetAuthURLParam("resource", d.prm.Resource))
		}
	}

	// A client registered for this login that it does not save is deleted
	// again (RFC 7592, best effort, within DefaultLogoutTimeout even once
	// ctx is cancelled): each login abandoned (no approval, Ctrl-C) or
	// refused left one more client registered at the authorization server.
	saved := false
	if client.Registered && client.ID != prevClientID(prev) {
		defer func(c Client) {
			if !saved {
				dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), DefaultLogoutTimeout)
				defer cancel()
				deleteClient(dctx, hc, o.Logger, srv.Name, "the client registered for this unfinished login", c)
			}
		}(client)
	}

	_, _, _, path := srv.redirectAt()
	res, err := awaitRedirect(ctx, ln, path, state, srv.Name, o, func() error { return o.Authorize(authURL) })
	if err != nil {
		return nil, err
	}
	if res.iss != "" && !sameIssuer(res.iss, d.asm.Issuer) {
		// RFC 9207: a redirect from another authorization server (mix-up).
		return nil, fmt.Errorf("the redirect came from issuer %q, not from %q, the authorization server of %s: not using it", res.iss, d.asm.Issuer, srv.URL)
	}
	tctx := context.WithValue(ctx, oauth2.HTTPClient, withResource(hc, d.prm.Resource))
	tok, err := cfg.Exchange(tctx, res.code, oauth2.VerifierOption(verifier), oauth2.SetAuthURLParam("resource", d.prm.Resource))
	if err != nil {
		return nil, fmt.Errorf("exchange the authorization code at %s: %w", d.asm.TokenEndpoint, tokenError(err))
	}
	now := o.Now()
	l := &Credentials{
		Server:        srv.Name,
		URL:           srv.URL,
		Resource:      d.prm.Resource,
		Issuer:        d.asm.Issuer,
		TokenEndpoint: d.asm.TokenEndpoint,
		Client:        client,
		Scopes:        grantedScopes(tok, scopes),
		Token:         fromOAuth2(tok, now),
		LoggedIn:      now,
	}
	// The client of the login this one replaces, when it is another that
	// toolgate registered: deleted at the authorization server once this
	// login is saved and the lock released (best effort, RFC 7592).
	var replaced *Client
	defer func() {
		if replaced != nil {
			deleteClient(ctx, hc, o.Logger, srv.Name, "the client registered by the previous login", *replaced)
		}
	}()
	unlock, err := store.lock(srv.Name)
	if err != nil {
		return nil, err
	}
	defer unlock()
	// The step-up stays pending for the scopes this login was not
	// granted, with those a gateway asked for while the user approved.
	cur, _ := store.Load(srv.Name)
	if pending := union(stepUp, pendingFor(cur, srv.URL)); len(pending) > 0 {
		l.StepUp = &StepUp{Scopes: pending, Asked: now}
		for _, c := range []*Credentials{prev, cur} {
			if len(pendingFor(c, srv.URL)) > 0 {
				l.StepUp.Asked = c.StepUp.Asked
			}
		}
		l.grant()
	}
	if err := store.Save(l); err != nil {
		return nil, err
	}
	saved = true
	for _, c := range []*Credentials{cur, prev} {
		if c != nil && c.Client.Registered && c.Client.ID != client.ID {
			replaced = &c.Client
			break
		}
	}
	o.Logger.Info("logged in", "server", srv.Name, "issuer", l.Issuer, "scopes", l.Scopes, "expiry", l.Token.Expiry)
	return l, nil
}

// pendingFor is the step-up the stored login l records, when l is for a
// server at url.
func pendingFor(l *Credentials, url string) []string {
	if !l.For(url) {
		return nil
	}
	return l.PendingScopes()
}

// unlisted are the scopes of stepUp that neither the authorization
// server's metadata nor the protected-resource metadata lists in its
// scopes_supported, when either lists some: the authorization server may
// refuse them (invalid_scope), or not advertise them all (RFC 8414 lets
// it). The login asks for them all the same, and says so.
func unlisted(stepUp []string, d *discovery) []string {
	known := union(d.asm.ScopesSupported, d.prm.ScopesSupported)
	if len(known) == 0 {
		return nil
	}
	var out []string
	for _, s := range stepUp {
		if !slices.Contains(known, s) {
			out = append(out, s)
		}
	}
	return out
}

// authConfig is the OAuth client config of a login as client.
func authConfig(d *discovery, client Client, scopes []string) *oauth2.Config {
	return &oauth2.Config{
		ClientID:     client.ID,
		ClientSecret: client.Secret,
		Endpoint: oauth2.Endpoint{
			AuthURL:   d.asm.AuthorizationEndpoint,
			TokenURL:  d.asm.TokenEndpoint,
			AuthStyle: authStyle(client.AuthMethod),
		},
		RedirectURL: client.RedirectURI,
		Scopes:      scopes,
	}
}

func prevClientID(prev *Credentials) string {
	if prev == nil {
		return ""
	}
	return prev.Client.ID
}

// refusesClient asks the authorization endpoint authURL, as a browser
// would first, without following its redirect: an authorization server
// answers a request from a client it does not know 400 (or 401) rather
// than redirecting (RFC 6749 §4.1.2.1), and a login page or a redirect
// otherwise. No answer is no refusal: the browser will say.
// why is the refusal's OAuth error code and description when its body is
// a JSON error, else its status.
func refusesClient(ctx context.Context, hc *http.Client, authURL string) (refused bool, why string) {
	c := *hc
	c.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, authURL, nil)
	if err != nil {
		return false, ""
	}
	resp, err := c.Do(req)
	if err != nil {
		return false, ""
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusBadRequest && resp.StatusCode != http.StatusUnauthorized {
		return false, ""
	}
	var e struct {
		Error       string `json:"error"`
		Description string `json:"error_description"`
	}
	if json.NewDecoder(io.LimitReader(resp.Body, 16<<10)).Decode(&e) == nil && e.Error != "" {
		return true, oneline.Cut(oauthErrorText(e.Error, e.Description), 200)
	}
	return true, "it answered " + resp.Status
}

// listenAndRegister opens the loopback listener of the redirect (RFC 8252
// §7.3: an IP literal, any port) and returns it with the client to log in
// as: the config's, the one registered by the previous login when its port
// is free again and it was registered for every scope asked for now, or a
// new registration (RFC 7591) for this port and these scopes.
//
// A step-up asks for scopes beyond those the previous login's client was
// registered for: an authorization server that holds a client to its
// registration refuses them (invalid_scope), on a page or in the redirect,
// once the user went through the browser. So such a login registers anew
// before the browser opens, rather than retrying after that refusal: one
// registration request, and the user approves once. A client from the
// config (oauth.clientId) is used as it is: its registration is the
// operator's.
func listenAndRegister(ctx context.Context, hc *http.Client, srv Server, asm *oauthex.AuthServerMeta, scopes []string, prev *Credentials, clientName string) (net.Listener, Client, error) {
	host, port, listen, path := srv.redirectAt()
	if prev != nil && prev.Client.Registered && srv.ClientID == "" && sameIssuer(prev.Issuer, asm.Issuer) && registeredFor(prev, scopes) {
		if u, err := url.Parse(prev.Client.RedirectURI); err == nil && u.Hostname() == host && u.Path == path && (port == "0" || u.Port() == port) {
			if ln, err := net.Listen("tcp", net.JoinHostPort(listen, u.Port())); err == nil {
				return ln, prev.Client, nil
			}
		}
	}
	ln, err := net.Listen("tcp", net.JoinHostPort(listen, port))
	if err != nil {
		if srv.RedirectURI != "" {
			return nil, Client{}, fmt.Errorf("listen for the redirect at %s (the entry's \"oauth\": {\"redirectUri\"}): %w: stop what uses the port, or register another one", srv.RedirectURI, err)
		}
		return nil, Client{}, fmt.Errorf("listen on a loopback port for the redirect: %w", err)
	}
	redirect := "http://" + net.JoinHostPort(host, strconv.Itoa(ln.Addr().(*net.TCPAddr).Port)) + path
	if srv.ClientID != "" {
		method := "none"
		if srv.ClientSecret != "" {
			method = secretMethod(asm.TokenEndpointAuthMethodsSupported)
		}
		return ln, Client{ID: srv.ClientID, Secret: srv.ClientSecret, AuthMethod: method, RedirectURI: redirect}, nil
	}
	if asm.RegistrationEndpoint == "" {
		ln.Close()
		// The redirect URI this login sends, to register (the entry's
		// when it has one: the default is not what it sends).
		uri := "http://127.0.0.1" + CallbackPath + " on any port"
		switch {
		case srv.RedirectURI != "" && port == "0":
			uri = "http://" + strings.TrimSuffix(net.JoinHostPort(host, "0"), ":0") + path + ` on any port, the entry's "oauth": {"redirectUri"}`
		case srv.RedirectURI != "":
			uri = srv.RedirectURI + `, the entry's "oauth": {"redirectUri"}`
		}
		return nil, Client{}, fmt.Errorf("the authorization server %s does not offer dynamic client registration (RFC 7591): register a client for toolgate there (redirect URI %s) and give it in the server's \"oauth\": {\"clientId\": ...}",
			asm.Issuer, uri)
	}
	rc, capture := capturing(hc)
	reg, err := oauthex.RegisterClient(ctx, asm.RegistrationEndpoint, &oauthex.ClientRegistrationMetadata{
		RedirectURIs:            []string{redirect},
		TokenEndpointAuthMethod: "none",
		GrantTypes:              []string{"authorization_code", "refresh_token"},
		ResponseTypes:           []string{"code"},
		ClientName:              clientName,
		Scope:                   strings.Join(scopes, " "),
		ApplicationType:         "native",
	}, rc)
	if err != nil {
		ln.Close()
		return nil, Client{}, fmt.Errorf("register toolgate with the authorization server at %s: %w", asm.RegistrationEndpoint, unwrapURL(err))
	}
	method := reg.TokenEndpointAuthMethod
	if method == "" {
		method = "none"
		if reg.ClientSecret != "" {
			method = "client_secret_basic" // RFC 7591's default
		}
	}
	registered := strings.Fields(reg.Scope)
	if len(registered) == 0 {
		registered = scopes // the server did not say: what it was asked for
	}
	c := Client{ID: reg.ClientID, Secret: reg.ClientSecret, AuthMethod: method, RedirectURI: redirect, Registered: true, Scopes: registered}
	c.RegistrationURI, c.RegistrationToken = management(capture.body, asm.RegistrationEndpoint)
	return ln, c, nil
}

// registeredFor reports whether the client of the login prev was
// registered for every one of scopes: its Client.Scopes, or for a login
// saved before they were kept, the scopes that login has.
func registeredFor(prev *Credentials, scopes []string) bool {
	registered := prev.Client.Scopes
	if len(registered) == 0 {
		registered = prev.Scopes
	}
	return !slices.ContainsFunc(scopes, func(s string) bool { return !slices.Contains(registered, s) })
}

type redirectResult struct {
	code, iss string
	err       error
}

// awaitRedirect serves the redirect URI on ln, calls show once it listens,
// and waits for the redirect with the authorization code (or an error), or
// for its address pasted (o.Pasted), for at most o.Timeout. The server is
// shut down before it returns.
func awaitRedirect(ctx context.Context, ln net.Listener, path, state, server string, o LoginOptions, show func() error) (redirectResult, error) {
	results := make(chan redirectResult, 1)
	mux := http.NewServeMux()
	mux.HandleFunc("GET "+servedPath(path), func(w http.ResponseWriter, r *http.Request) {
		q := r.URL.Query()
		if q.Get("state") != state {
			// Not the answer to our request (a stale tab, a forgery): keep waiting.
			http.Error(w, "toolgate: this redirect does not belong to the login in progress (state mismatch)", http.StatusBadRequest)
			return
		}
		res := redirected(q)
		select {
		case results <- res:
		default: // a second redirect: the first one counts
		}
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		msg := "You are logged in to " + server + ". You can close this window."
		if res.err != nil {
			msg = "The login to " + server + " failed: " + res.err.Error()
		}
		fmt.Fprintf(w, "<!doctype html><title>toolgate</title><p>toolgate: %s</p>\n", html.EscapeString(msg))
	})
	hs := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	served := make(chan struct{})
	go func() {
		defer close(served)
		_ = hs.Serve(ln)
	}()
	defer func() {
		sctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		if hs.Shutdown(sctx) != nil {
			hs.Close()
		}
		<-served
	}()
	if err := show(); err != nil {
		return redirectResult{}, err
	}
	timer := time.NewTimer(o.Timeout)
	defer timer.Stop()
	pasted := o.Pasted
	for {
		select {
		case res := <-results:
			return res, res.err
		case line, ok := <-pasted:
			if !ok {
				pasted = nil // no more input: the redirect may still come
				continue
			}
			if res, why := pastedRedirect(line, path, state); why == "" {
				return res, res.err
			} else if o.Rejected != nil && strings.TrimSpace(line) != "" {
				o.Rejected(line, why)
			}
		case <-timer.C:
			return redirectResult{}, fmt.Errorf("%w within %s", ErrLoginTimeout, o.Timeout)
		case <-ctx.Done():
			return redirectResult{}, fmt.Errorf("login to %s interrupted: %w", server, context.Cause(ctx))
		}
	}
}

// redirected is what a redirect's query says: the code, or the error.
func redirected(q url.Values) redirectResult {
	var res redirectResult
	switch {
	case q.Get("error") != "":
		res.err = fmt.Errorf("the authorization server refused the login: %s", oauthErrorText(q.Get("error"), q.Get("error_description")))
	case q.Get("code") == "":
		res.err = errors.New("the redirect carries neither a code nor an error")
	default:
		res.code, res.iss = q.Get("code"), q.Get("iss")
	}
	return res
}

// servedPath is the path a browser asks for of a redirect URI whose path
// is path: "/" for none.
func servedPath(path string) string { return cmp.Or(path, "/") }

// pastedRedirect is the redirect of a pasted address, or why it is not
// this login's.
func pastedRedirect(line, path, state string) (redirectResult, string) {
	u, err := url.Parse(strings.TrimSpace(line))
	if err != nil || servedPath(u.Path) != servedPath(path) {
		return redirectResult{}, "it is not the address the browser ended at (http://127.0.0.1:PORT" + servedPath(path) + "?code=…)"
	}
	if u.Query().Get("state") != state {
		return redirectResult{}, "it belongs to another login (state mismatch): paste the address this login's browser tab ended at"
	}
	return redirected(u.Query()), ""
}

// secretMethod picks how a confidential client authenticates at the token
// endpoint (client_secret_basic when the server lists none: RFC 8414's
// default).
func secretMethod(supported []string) string {
	for _, m := range []string{"client_secret_post", "client_secret_basic"} {
		if slices.Contains(supported, m) {
			return m
		}
	}
	return "client_secret_basic"
}

func authStyle(method string) oauth2.AuthStyle {
	switch method {
	case "client_secret_basic":
		return oauth2.AuthStyleInHeader
	default: // none (client_id in the form), client_secret_post
		return oauth2.AuthStyleInParams
	}
}

// sameIssuer compares issuer identifiers, ignoring a trailing slash.
func sameIssuer(a, b string) bool { return strings.TrimSuffix(a, "/") == strings.TrimSuffix(b, "/") }

// grantedScopes are the token response's scope, else the ones asked for.
func grantedScopes(tok *oauth2.Token, asked []string) []string {
	if s, ok := tok.Extra("scope").(string); ok && strings.TrimSpace(s) != "" {
		return strings.Fields(s)
	}
	return asked
}

// fromOAuth2 converts a token response received at now. The expiry is
// counted from expires_in on toolgate's clock (x/oauth2's Expiry uses the
// wall clock), so tests can move that clock.
func fromOAuth2(tok *oauth2.Token, now time.Time) Token {
	expiry := tok.Expiry
	if tok.ExpiresIn > 0 {
		expiry = now.Add(time.Duration(tok.ExpiresIn) * time.Second)
	}
	return Token{AccessToken: tok.AccessToken, TokenType: tok.TokenType, RefreshToken: tok.RefreshToken, Expiry: expiry, Obtained: now}
}

// tokenError turns a token endpoint failure into text without the
// response body (which may echo secrets): the OAuth error code and
// description, or the HTTP status.
func tokenError(err error) error {
	var re *oauth2.RetrieveError
	if errors.As(err, &re) {
		if re.ErrorCode != "" {
			return &refusedError{text: oauthErrorText(re.ErrorCode, re.ErrorDescription), status: statusOf(re)}
		}
		return &refusedError{text: "it answered " + statusText(re), status: statusOf(re)}
	}
	return unwrapURL(err)
}

// refusedError is an answer of the token endpoint that refuses the request
// (as opposed to no answer).
type refusedError struct {
	text   string
	status int
}

func (e *refusedError) Error() string { return e.text }

// permanent reports whether trying again cannot help: the grant, client or
// request was refused (4xx). A 5xx or 429 may pass.
func (e *refusedError) permanent() bool {
	return e.status >= 400 && e.status < 500 && e.status != http.StatusTooManyRequests
}

func statusOf(re *oauth2.RetrieveError) int {
	if re.Response != nil {
		return re.Response.StatusCode
	}
	return 0
}

func statusText(re *oauth2.RetrieveError) string {
	if re.Response != nil {
		return re.Response.Status
	}
	return "an error"
}

func oauthErrorText(code, desc string) string {
	if desc != "" {
		return fmt.Sprintf("%s (%s)", code, desc)
	}
	return code
}
