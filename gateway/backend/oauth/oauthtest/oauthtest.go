// Package oauthtest is a small OAuth 2.1 authorization server and an MCP
// server protected by it, for tests of toolgate's logins and tokens: what
// the TypeScript SDK's demo server cannot do (short-lived tokens that
// lapse, refresh tokens, revocation, client management, a wrong resource,
// going down) under the test's control. Both bind 127.0.0.1 only.
package oauthtest

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/tls"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/modelcontextprotocol/go-sdk/oauthex"
)

// Scope is the one scope the authorization server knows.
const Scope = "tools"

// AuthServer approves every authorization request at once (no page: the
// authorize endpoint redirects with a code), so a test follows the
// authorization URL with an HTTP client. It checks PKCE S256, the redirect
// URI (a loopback one on any port, RFC 8252 §7.3) and the resource
// parameter (RFC 8707) of every authorization, code and refresh request,
// and rotates refresh tokens.
type AuthServer struct {
	t    testing.TB
	addr string      // 127.0.0.1:port, kept across Stop and Start
	URL  string      // issuer, e.g. http://127.0.0.1:1234
	tls  *tls.Config // nil: plain HTTP

	srvMu sync.Mutex
	srv   *http.Server
	done  chan struct{}

	// Lifetime of the access tokens issued from now on (default 1h).
	lifetime atomic.Int64
	// enforce: an authorization request for a scope the client did not
	// register is refused (EnforceRegisteredScopes).
	enforce atomic.Bool
	// manage: registrations give a registration_client_uri and
	// registration_access_token, and DELETE there deletes the client
	// (RFC 7592; ManageClients).
	manage atomic.Bool
	// revocation: the metadata names a revocation_endpoint (RFC 7009;
	// OfferRevocation).
	revocation atomic.Bool

	mu        sync.Mutex
	resource  string              // the resource tokens are for ("" = any)
	clients   map[string][]string // client id → redirect URIs
	cscopes   map[string][]string // client id → the scopes it registered
	codes     map[string]codeGrant
	access    map[string]tokenGrant
	refresh   map[string]bool   // refresh token → usable
	rclient   map[string]string // refresh token → the client it was issued to
	rscope    map[string]string // refresh token → the scope of its grant
	resources []string          // resource parameters seen, in order
	scopes    []string          // scope parameters of the authorization requests, in order
	mtokens   map[string]string // client id → its registration access token (ManageClients)
	deleted   []string          // the clients deleted (RFC 7592), in order
	revoked   []Revocation      // the revocation requests (RFC 7009), in order
	// deleteRefusals counts the DELETEs of a registration refused (a
	// wrong token, an unknown client).
	deleteRefusals atomic.Int64

	registrations, codeExchanges, refreshes, refused atomic.Int64
}

type codeGrant struct {
	client, redirect, challenge, resource, scope string
}

type tokenGrant struct {
	client, resource, scope string
	expiry                  time.Time
	dead                    bool
}

// NewAuthServer starts an authorization server on a free loopback port; it
// stops when the test ends.
func NewAuthServer(t testing.TB) *AuthServer {
	t.Helper()
	return NewAuthServerTLS(t, nil)
}

// NewAuthServerTLS is NewAuthServer over HTTPS with c (nil: plain HTTP).
func NewAuthServerTLS(t testing.TB, c *tls.Config) *AuthServer {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	a := &AuthServer{
		t: t, addr: ln.Addr().String(), URL: scheme(c) + ln.Addr().String(), tls: c,
		clients: map[string][]string{}, cscopes: map[string][]string{}, codes: map[string]codeGrant{},
		access: map[string]tokenGrant{}, refresh: map[string]bool{}, rclient: map[string]string{}, rscope: map[string]string{}, mtokens: map[string]string{},
	}
	a.lifetime.Store(int64(time.Hour))
	a.serve(ln)
	t.Cleanup(a.Stop)
	return a
}

func (a *AuthServer) serve(ln net.Listener) {
	if a.tls != nil {
		ln = tls.NewListener(ln, a.tls)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /.well-known/oauth-authorization-server", a.metadata)
	mux.HandleFunc("POST /register", a.register)
	mux.HandleFunc("DELETE /register/{id}", a.unregister)
	mux.HandleFunc("GET /authorize", a.authorize)
	mux.HandleFunc("POST /token", a.token)
	mux.HandleFunc("POST /revoke", a.revoke)
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = srv.Serve(ln)
	}()
	a.srvMu.Lock()
	a.srv, a.done = srv, done
	a.srvMu.Unlock()
}

// Stop takes the server down: connections to it are refused until Start.
func (a *AuthServer) Stop() {
	a.srvMu.Lock()
	srv, done := a.srv, a.done
	a.srv = nil
	a.srvMu.Unlock()
	if srv != nil {
		srv.Close()
		<-done
	}
}

// Start brings a stopped server back on the same address, with its state.
func (a *AuthServer) Start() {
	a.t.Helper()
	ln, err := net.Listen("tcp", a.addr)
	if err != nil {
		a.t.Fatalf("oauthtest: listen again on %s: %v", a.addr, err)
	}
	a.serve(ln)
}

// EnforceRegisteredScopes makes the authorization endpoint refuse, from now
// on, a request for a scope its client did not register (its registration's
// "scope"; Scope for one that named none), with invalid_scope (RFC 6749
// §4.1.2.1), as authorization servers that hold a dynamically registered
// client to its registration do.
func (a *AuthServer) EnforceRegisteredScopes() { a.enforce.Store(true) }

// ManageClients makes the registrations from now on give a
// registration_client_uri and a registration_access_token, with which a
// DELETE of that URI deletes the client (RFC 7592): DeletedClients lists
// them.
func (a *AuthServer) ManageClients() { a.manage.Store(true) }

// DeletedClients returns the IDs of the clients deleted so far (RFC 7592),
// in order; DeleteRefusals counts the DELETEs refused.
func (a *AuthServer) DeletedClients() []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return slices.Clone(a.deleted)
}

func (a *AuthServer) DeleteRefusals() int64 { return a.deleteRefusals.Load() }

// OfferRevocation makes the metadata name a revocation_endpoint from now
// on (RFC 7009), where a client revokes the tokens issued to it, naming
// itself as at the token endpoint (its client_id in the form, or HTTP
// Basic): Revocations lists the requests.
func (a *AuthServer) OfferRevocation() { a.revocation.Store(true) }

// Revocation is one request to the revocation endpoint.
type Revocation struct {
	Token, Hint string
	Client      string // the client it named ("" for none)
	Basic       bool   // named in HTTP Basic rather than the form
	// Status is the answer: 200 revoked (or a token it did not know,
	// RFC 7009 §2.2), 401 an unknown client, 400 another client's token.
	Status int
}

// Revocations returns the revocation requests so far, in order.
func (a *AuthServer) Revocations() []Revocation {
	a.mu.Lock()
	defer a.mu.Unlock()
	return slices.Clone(a.revoked)
}

// SetLifetime sets the lifetime of the access tokens issued from now on.
func (a *AuthServer) SetLifetime(d time.Duration) { a.lifetime.Store(int64(d)) }

// ExpireAccessTokens ends every access token issued so far, as if their
// short lives had run out: the resource server answers 401 to them.
func (a *AuthServer) ExpireAccessTokens() {
	a.mu.Lock()
	defer a.mu.Unlock()
	for k, g := range a.access {
		g.dead = true
		a.access[k] = g
	}
}

// ForgetClients forgets every client registered so far, as an
// authorization server that keeps them in memory does when it restarts:
// its authorization endpoint answers 400 to them.
func (a *AuthServer) ForgetClients() {
	a.mu.Lock()
	defer a.mu.Unlock()
	clear(a.clients)
	clear(a.mtokens)
}

// RevokeRefreshTokens refuses every refresh token issued so far
// (invalid_grant), as when the user revokes toolgate's access.
func (a *AuthServer) RevokeRefreshTokens() {
	a.mu.Lock()
	defer a.mu.Unlock()
	for k := range a.refresh {
		a.refresh[k] = false
	}
}

// Registrations, CodeExchanges and Refreshes count the successful
// requests of each kind; Refused counts token requests answered with an
// error.
func (a *AuthServer) Registrations() int64 { return a.registrations.Load() }
func (a *AuthServer) CodeExchanges() int64 { return a.codeExchanges.Load() }
func (a *AuthServer) Refreshes() int64     { return a.refreshes.Load() }
func (a *AuthServer) Refused() int64       { return a.refused.Load() }

// Resources returns the resource parameters of every authorization, code
// and refresh request so far.
func (a *AuthServer) Resources() []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return slices.Clone(a.resources)
}

// AuthorizedScopes returns the scope parameter of every authorization
// request so far, in order ("" for one without).
func (a *AuthServer) AuthorizedScopes() []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return slices.Clone(a.scopes)
}

// Verify is the resource server's token check (go-sdk's TokenVerifier): a
// live access token issued for resource.
func (a *AuthServer) Verify(resource string) auth.TokenVerifier {
	return func(_ context.Context, token string, _ *http.Request) (*auth.TokenInfo, error) {
		a.mu.Lock()
		g, ok := a.access[token]
		a.mu.Unlock()
		switch {
		case !ok:
			return nil, fmt.Errorf("%w: unknown token", auth.ErrInvalidToken)
		case g.dead || time.Now().After(g.expiry):
			return nil, fmt.Errorf("%w: expired", auth.ErrInvalidToken)
		case g.resource != resource:
			return nil, fmt.Errorf("%w: issued for %s", auth.ErrInvalidToken, g.resource)
		}
		return &auth.TokenInfo{Scopes: strings.Fields(g.scope), Expiration: g.expiry}, nil
	}
}

func (a *AuthServer) metadata(w http.ResponseWriter, _ *http.Request) {
	revocation := ""
	if a.revocation.Load() {
		revocation = a.URL + "/revoke"
	}
	writeJSON(w, http.StatusOK, oauthex.AuthServerMeta{
		RevocationEndpoint:                revocation,
		Issuer:                            a.URL,
		AuthorizationEndpoint:             a.URL + "/authorize",
		TokenEndpoint:                     a.URL + "/token",
		RegistrationEndpoint:              a.URL + "/register",
		ScopesSupported:                   []string{Scope},
		ResponseTypesSupported:            []string{"code"},
		GrantTypesSupported:               []string{"authorization_code", "refresh_token"},
		TokenEndpointAuthMethodsSupported: []string{"none"},
		CodeChallengeMethodsSupported:     []string{"S256"},
	})
}

func (a *AuthServer) register(w http.ResponseWriter, r *http.Request) {
	var m oauthex.ClientRegistrationMetadata
	if err := json.NewDecoder(r.Body).Decode(&m); err != nil || len(m.RedirectURIs) == 0 {
		writeJSON(w, http.StatusBadRequest, map[string]string{"error": "invalid_client_metadata", "error_description": "redirect_uris required"})
		return
	}
	id := "client-" + rand.Text()[:8]
	a.mu.Lock()
	a.clients[id] = m.RedirectURIs
	a.cscopes[id] = strings.Fields(m.Scope)
	if m.Scope == "" {
		a.cscopes[id] = []string{Scope}
	}
	resp := map[string]any{
		"client_id": id, "redirect_uris": m.RedirectURIs, "token_endpoint_auth_method": "none",
		"grant_types": m.GrantTypes, "response_types": m.ResponseTypes, "client_name": m.ClientName, "scope": m.Scope,
	}
	if a.manage.Load() {
		tok := "rat-" + rand.Text()
		a.mtokens[id] = tok
		resp["registration_client_uri"], resp["registration_access_token"] = a.URL+"/register/"+id, tok
	}
	a.mu.Unlock()
	a.registrations.Add(1)
	writeJSON(w, http.StatusCreated, resp)
}

// unregister deletes a client with its registration access token (RFC
// 7592 §2.3): 204, 401 for another token, 404 for a client it does not
// know.
func (a *AuthServer) unregister(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	a.mu.Lock()
	defer a.mu.Unlock()
	tok, ok := a.mtokens[id]
	switch {
	case !ok:
		a.deleteRefusals.Add(1)
		writeJSON(w, http.StatusNotFound, map[string]string{"error": "invalid_client_id"})
		return
	case r.Header.Get("Authorization") != "Bearer "+tok:
		a.deleteRefusals.Add(1)
		w.Header().Set("WWW-Authenticate", `Bearer error="invalid_token"`)
		writeJSON(w, http.StatusUnauthorized, map[string]string{"error": "invalid_token"})
		return
	}
	delete(a.mtokens, id)
	delete(a.clients, id)
	delete(a.cscopes, id)
	a.deleted = append(a.deleted, id)
	w.WriteHeader(http.StatusNoContent)
}

func (a *AuthServer) authorize(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	a.mu.Lock()
	redirects, known := a.clients[q.Get("client_id")]
	registered := a.cscopes[q.Get("client_id")]
	a.resources = append(a.resources, q.Get("resource"))
	a.scopes = append(a.scopes, q.Get("scope"))
	want := a.resource
	a.mu.Unlock()
	redirect := q.Get("redirect_uri")
	if !known || !slices.ContainsFunc(redirects, func(r string) bool { return sameRedirect(r, redirect) }) {
		http.Error(w, "unknown client or unregistered redirect_uri", http.StatusBadRequest)
		return
	}
	back, _ := url.Parse(redirect)
	v := url.Values{"state": {q.Get("state")}}
	switch {
	case q.Get("response_type") != "code" || q.Get("code_challenge_method") != "S256" || q.Get("code_challenge") == "":
		v.Set("error", "invalid_request")
		v.Set("error_description", "code flow with PKCE S256 required")
	case a.enforce.Load() && !containsAll(registered, strings.Fields(q.Get("scope"))):
		v.Set("error", "invalid_scope")
		v.Set("error_description", "the client registered the scope "+strings.Join(registered, " ")+", not "+q.Get("scope"))
	case want != "" && q.Get("resource") != want:
		v.Set("error", "invalid_target")
		v.Set("error_description", "unknown resource "+q.Get("resource"))
	default:
		code := rand.Text()
		a.mu.Lock()
		a.codes[code] = codeGrant{client: q.Get("client_id"), redirect: redirect, challenge: q.Get("code_challenge"), resource: q.Get("resource"), scope: q.Get("scope")}
		a.mu.Unlock()
		v.Set("code", code)
	}
	back.RawQuery = v.Encode()
	http.Redirect(w, r, back.String(), http.StatusFound)
}

// sameRedirect matches a redirect URI against a registered one; a loopback
// IP literal matches on any port (RFC 8252 §7.3).
func sameRedirect(registered, got string) bool {
	if registered == got {
		return true
	}
	a, err1 := url.Parse(registered)
	b, err2 := url.Parse(got)
	return err1 == nil && err2 == nil && a.Hostname() == "127.0.0.1" && b.Hostname() == "127.0.0.1" &&
		a.Scheme == b.Scheme && a.Path == b.Path
}

func (a *AuthServer) token(w http.ResponseWriter, r *http.Request) {
	if err := r.ParseForm(); err != nil {
		a.fail(w, "invalid_request", err.Error())
		return
	}
	f := r.PostForm
	a.mu.Lock()
	a.resources = append(a.resources, f.Get("resource"))
	want := a.resource
	a.mu.Unlock()
	if want != "" && f.Get("resource") != want {
		a.fail(w, "invalid_target", "resource must be "+want)
		return
	}
	switch f.Get("grant_type") {
	case "authorization_code":
		a.mu.Lock()
		g, ok := a.codes[f.Get("code")]
		delete(a.codes, f.Get("code"))
		a.mu.Unlock()
		sum := sha256.Sum256([]byte(f.Get("code_verifier")))
		switch {
		case !ok || g.client != f.Get("client_id") || g.redirect != f.Get("redirect_uri"):
			a.fail(w, "invalid_grant", "unknown code")
		case base64.RawURLEncoding.EncodeToString(sum[:]) != g.challenge:
			a.fail(w, "invalid_grant", "PKCE verifier does not match")
		default:
			a.codeExchanges.Add(1)
			a.issue(w, g.client, g.resource, g.scope)
		}
	case "refresh_token":
		rt := f.Get("refresh_token")
		a.mu.Lock()
		usable, scope, client := a.refresh[rt], a.rscope[rt], a.rclient[rt]
		a.refresh[rt] = false // rotated: each refresh token works once
		a.mu.Unlock()
		if !usable {
			a.fail(w, "invalid_grant", "refresh token revoked or used")
			return
		}
		if scope == "" {
			scope = Scope
		}
		a.refreshes.Add(1)
		a.issue(w, client, f.Get("resource"), scope)
	default:
		a.fail(w, "unsupported_grant_type", f.Get("grant_type"))
	}
}

func (a *AuthServer) issue(w http.ResponseWriter, client, resource, scope string) {
	life := time.Duration(a.lifetime.Load())
	at, rt := "at-"+rand.Text(), "rt-"+rand.Text()
	a.mu.Lock()
	a.access[at] = tokenGrant{client: client, resource: resource, scope: scope, expiry: time.Now().Add(life)}
	a.refresh[rt] = true
	a.rclient[rt] = client
	a.rscope[rt] = scope
	a.mu.Unlock()
	writeJSON(w, http.StatusOK, map[string]any{
		"access_token": at, "token_type": "Bearer", "expires_in": int(life.Seconds()),
		"refresh_token": rt, "scope": scope,
	})
}

// revoke ends a token issued to the client that asks (RFC 7009 §2): an
// access token is refused from then on, a refresh token refused at the
// token endpoint. The client names itself in HTTP Basic or the form's
// client_id, and must be one registered (401 invalid_client otherwise);
// another client's token is refused (400), an unknown one answered 200.
func (a *AuthServer) revoke(w http.ResponseWriter, r *http.Request) {
	if err := r.ParseForm(); err != nil || r.PostForm.Get("token") == "" {
		writeJSON(w, http.StatusBadRequest, map[string]string{"error": "invalid_request", "error_description": "token required"})
		return
	}
	rv := Revocation{Token: r.PostForm.Get("token"), Hint: r.PostForm.Get("token_type_hint"), Client: r.PostForm.Get("client_id")}
	if id, _, ok := r.BasicAuth(); ok {
		rv.Client, rv.Basic = id, true
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	_, known := a.clients[rv.Client]
	g, isAccess := a.access[rv.Token]
	rclient, isRefresh := a.rclient[rv.Token]
	switch {
	case !known:
		rv.Status = http.StatusUnauthorized
		writeJSON(w, rv.Status, map[string]string{"error": "invalid_client", "error_description": "unknown client " + rv.Client})
	case isAccess && g.client != rv.Client, isRefresh && rclient != rv.Client:
		rv.Status = http.StatusBadRequest
		writeJSON(w, rv.Status, map[string]string{"error": "invalid_request", "error_description": "the token was issued to another client"})
	default:
		if isAccess {
			g.dead = true
			a.access[rv.Token] = g
		}
		if isRefresh {
			a.refresh[rv.Token] = false
		}
		rv.Status = http.StatusOK
		writeJSON(w, rv.Status, map[string]string{})
	}
	a.revoked = append(a.revoked, rv)
}

func (a *AuthServer) fail(w http.ResponseWriter, code, desc string) {
	a.refused.Add(1)
	writeJSON(w, http.StatusBadRequest, map[string]string{"error": code, "error_description": desc})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// ResourceOptions configure NewResourceServer. Nil means defaults.
type ResourceOptions struct {
	// Transport is "http" (streamable, default) or "sse".
	Transport string
	// ClaimResource, when set, is the resource the server's metadata
	// names instead of its own URL (a misconfigured or impostor server).
	ClaimResource string
	// TLS serves it over HTTPS (nil: plain HTTP).
	TLS *tls.Config
	// AtRoot lays the server out as Cloudflare's workers-oauth-provider
	// does by default: its metadata at the root well-known URL only
	// (/.well-known/oauth-protected-resource, which the challenge names),
	// naming the origin (http://127.0.0.1:PORT) as the resource; tokens
	// are issued and checked for that resource.
	AtRoot bool
	// Scopes are the scopes a token needs (go-sdk's middleware answers
	// 403 insufficient_scope to one without them).
	Scopes []string
	// FailOnBadToken makes its token check fail as a hand-written one
	// that does not wrap auth.ErrInvalidToken does (the TypeScript SDK's
	// example server's, whose introspection throws a plain Error): a
	// token it no longer takes is answered 500, not 401.
	FailOnBadToken bool
	// EchoToken makes that failure quote the token it got, as a server
	// whose errors echo the request do (FailOnBadToken only).
	EchoToken bool
	// CallScopes are the scopes a tools/call needs beyond Scopes: one
	// whose token lacks them is answered 403 insufficient_scope naming
	// Scopes and CallScopes, the MCP 2025-11-25 step-up (the conformance
	// suite's auth/scope-step-up server), while the handshake and
	// listings pass.
	CallScopes []string
	// CallScopesTools, when set, are the tools whose calls need
	// CallScopes (nil: every tool's): a server that refuses one tool for
	// want of a scope and runs the others.
	CallScopesTools []string
}

// scheme is the URL scheme of a server with TLS config c.
func scheme(c *tls.Config) string {
	if c != nil {
		return "https://"
	}
	return "http://"
}

// stepUp answers a tools/call (of one of tools; nil: of any) whose token
// lacks one of scopes 403 with an insufficient_scope challenge naming them
// all, as the conformance suite's step-up server does; other requests go
// to next.
func stepUp(next http.Handler, metadataURL string, scopes, tools []string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost {
			body, err := io.ReadAll(r.Body)
			r.Body.Close()
			if err != nil {
				http.Error(w, err.Error(), http.StatusBadRequest)
				return
			}
			r.Body = io.NopCloser(bytes.NewReader(body))
			var msg struct {
				Method string `json:"method"`
				Params struct {
					Name string `json:"name"`
				} `json:"params"`
			}
			_ = json.Unmarshal(body, &msg)
			ti := auth.TokenInfoFromContext(r.Context())
			if msg.Method == "tools/call" && (tools == nil || slices.Contains(tools, msg.Params.Name)) && (ti == nil || !containsAll(ti.Scopes, scopes)) {
				w.Header().Set("WWW-Authenticate", fmt.Sprintf(`Bearer error="insufficient_scope", scope=%q, resource_metadata=%q`, strings.Join(scopes, " "), metadataURL))
				writeJSON(w, http.StatusForbidden, map[string]string{"error": "insufficient_scope", "error_description": "the call needs " + strings.Join(scopes, " ")})
				return
			}
		}
		next.ServeHTTP(w, r)
	})
}

func containsAll(have, want []string) bool {
	for _, s := range want {
		if !slices.Contains(have, s) {
			return false
		}
	}
	return true
}

// ResourceServer is an MCP server behind go-sdk's bearer-token middleware:
// 401 with a Bearer challenge that points at its protected-resource
// metadata (RFC 9728), which names the AuthServer.
type ResourceServer struct {
	URL      string // the MCP endpoint, e.g. http://127.0.0.1:1234/mcp
	Resource string // what its metadata names
	srv      *http.Server
	done     chan struct{}

	unauthorized, served atomic.Int64
}

// NewResourceServer serves mcpServer on a free loopback port, protected by
// as, which from then on issues tokens for this server only. It stops when
// the test ends.
func NewResourceServer(t testing.TB, as *AuthServer, mcpServer *mcp.Server, opts *ResourceOptions) *ResourceServer {
	t.Helper()
	var o ResourceOptions
	if opts != nil {
		o = *opts
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	base := scheme(o.TLS) + ln.Addr().String()
	if o.TLS != nil {
		ln = tls.NewListener(ln, o.TLS)
	}
	path := "/mcp"
	get := func(*http.Request) *mcp.Server { return mcpServer }
	var h http.Handler = mcp.NewStreamableHTTPHandler(get, nil)
	if o.Transport == "sse" {
		path = "/sse"
		h = mcp.NewSSEHandler(get, nil)
	}
	rs := &ResourceServer{URL: base + path, Resource: base + path, done: make(chan struct{})}
	metaPath := "/.well-known/oauth-protected-resource" + path
	if o.AtRoot {
		rs.Resource, metaPath = base, "/.well-known/oauth-protected-resource"
	}
	tokensFor := rs.Resource
	if o.ClaimResource != "" {
		rs.Resource = o.ClaimResource
	}
	as.mu.Lock()
	as.resource = tokensFor
	as.mu.Unlock()
	verify := as.Verify(tokensFor)
	if o.FailOnBadToken {
		check := verify
		verify = func(ctx context.Context, token string, r *http.Request) (*auth.TokenInfo, error) {
			ti, err := check(ctx, token, r)
			if err != nil {
				if o.EchoToken {
					return nil, fmt.Errorf("token introspection failed for %s", token)
				}
				return nil, errors.New("token introspection failed")
			}
			return ti, nil
		}
	}
	protect := auth.RequireBearerToken(verify, &auth.RequireBearerTokenOptions{ResourceMetadataURL: base + metaPath, Scopes: o.Scopes})
	mux := http.NewServeMux()
	mux.Handle("GET "+metaPath, auth.ProtectedResourceMetadataHandler(&oauthex.ProtectedResourceMetadata{
		Resource: rs.Resource, AuthorizationServers: []string{as.URL}, ScopesSupported: []string{Scope},
	}))
	if len(o.CallScopes) > 0 {
		h = stepUp(h, base+metaPath, append(slices.Clone(o.Scopes), o.CallScopes...), o.CallScopesTools)
	}
	mux.Handle(path, protect(h))
	rs.srv = &http.Server{ReadHeaderTimeout: 10 * time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		cw := &codeWriter{ResponseWriter: w}
		mux.ServeHTTP(cw, r)
		if cw.code == http.StatusUnauthorized {
			rs.unauthorized.Add(1)
		} else if strings.HasPrefix(r.URL.Path, path) {
			rs.served.Add(1)
		}
	})}
	go func() {
		defer close(rs.done)
		_ = rs.srv.Serve(ln)
	}()
	t.Cleanup(func() {
		rs.srv.Close()
		<-rs.done
	})
	return rs
}

// Unauthorized counts the 401 answers so far.
func (rs *ResourceServer) Unauthorized() int64 { return rs.unauthorized.Load() }

// Served counts the MCP requests let through so far.
func (rs *ResourceServer) Served() int64 { return rs.served.Load() }

// TakesToken reports whether the server takes token (any answer but 401
// to a ping): a test's look at whether a logout revoked it.
func (rs *ResourceServer) TakesToken(t testing.TB, token string) bool {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, rs.URL, strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"ping"}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode != http.StatusUnauthorized
}

// codeWriter records the status code a handler wrote.
type codeWriter struct {
	http.ResponseWriter
	code int
}

func (w *codeWriter) WriteHeader(code int) {
	if w.code == 0 {
		w.code = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *codeWriter) Write(b []byte) (int, error) {
	if w.code == 0 {
		w.code = http.StatusOK
	}
	return w.ResponseWriter.Write(b)
}

// Flush keeps event streams streaming through the wrapper.
func (w *codeWriter) Flush() {
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// Unwrap lets http.ResponseController reach the real writer.
func (w *codeWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// FollowAuthorization does what a user's browser does with an
// authorization URL against a server that approves without a page: GET it
// and follow the redirects, the last one to the loopback redirect URI of
// the login in progress. It fails unless that last answer is 200.
func FollowAuthorization(ctx context.Context, authURL string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, authURL, nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("following the authorization URL ended at %s with %s", resp.Request.URL.Redacted(), resp.Status)
	}
	return nil
}

// RedirectOf does what a browser on another machine does with an
// authorization URL: it follows the redirects up to the loopback redirect
// URI of the login in progress, and returns that address without asking
// it (the page that does not load there, whose address the user pastes).
func RedirectOf(ctx context.Context, authURL string) (string, error) {
	var last string
	client := &http.Client{CheckRedirect: func(req *http.Request, _ []*http.Request) error {
		if req.URL.Hostname() == "127.0.0.1" && req.URL.Path == "/callback" {
			last = req.URL.String()
			return http.ErrUseLastResponse
		}
		return nil
	}}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, authURL, nil)
	if err != nil {
		return "", err
	}
	resp, err := client.Do(req)
	if err != nil {
		return "", err
	}
	resp.Body.Close()
	if last == "" {
		return "", fmt.Errorf("following the authorization URL ended at %s with %s, not at the redirect URI", resp.Request.URL.Redacted(), resp.Status)
	}
	return last, nil
}

// ErrNoURL is returned by AuthorizationURL when the text holds none.
var ErrNoURL = errors.New("no authorization URL in the text")

// AuthorizationURL finds the first http(s) URL with a code_challenge in
// text (what `toolgate auth login` prints).
func AuthorizationURL(text string) (string, error) {
	for _, f := range strings.Fields(text) {
		if (strings.HasPrefix(f, "http://") || strings.HasPrefix(f, "https://")) && strings.Contains(f, "code_challenge=") {
			return f, nil
		}
	}
	return "", ErrNoURL
}
