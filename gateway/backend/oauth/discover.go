package oauth

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/oauthex"

	"github.com/toolgate/toolgate/internal/proxyenv"
)

// Transports a server may speak, as in the config's "type".
const (
	TransportHTTP = "http"
	TransportSSE  = "sse"
)

// Challenge is what a server that wants a login said in its 401.
type Challenge struct {
	// ResourceMetadata is the challenge's resource_metadata: where its
	// protected-resource metadata is ("" when it did not say).
	ResourceMetadata string
	// Scopes are the challenge's scope parameter, if any.
	Scopes []string
}

// ErrNoLoginNeeded is returned by Login for a server that answers without
// asking for a login.
var ErrNoLoginNeeded = errors.New("the server answers without asking for a login")

// Probe sends one request without a token to the MCP server at serverURL
// (a JSON-RPC ping POSTed for streamable HTTP, the event stream's GET for
// SSE) and returns its Bearer challenge when it answers 401 with one, nil
// when it answers without asking for a login. A 401 without a Bearer
// challenge, a 403, a 5xx or no answer is an error that says so.
func Probe(ctx context.Context, client *http.Client, transport, serverURL string) (*Challenge, error) {
	var req *http.Request
	var err error
	if transport == TransportSSE {
		req, err = http.NewRequestWithContext(ctx, http.MethodGet, serverURL, nil)
		if err == nil {
			req.Header.Set("Accept", "text/event-stream")
		}
	} else {
		req, err = http.NewRequestWithContext(ctx, http.MethodPost, serverURL,
			strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"ping"}`))
		if err == nil {
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Accept", "application/json, text/event-stream")
		}
	}
	if err != nil {
		return nil, fmt.Errorf("ask %s: %w", serverURL, err)
	}
	resp, err := client.Do(req)
	if err != nil {
		if fix, ok := proxyenv.Fix(err, req.URL.Scheme); ok {
			// The proxy of the environment is why: a refusal says its fix.
			if fix != "" {
				fix = ": " + fix
			}
			return nil, fmt.Errorf("no answer from %s: %w%s", serverURL, unwrapURL(err), fix)
		}
		if r, ok := proxyenv.Refused(err); ok {
			return nil, fmt.Errorf("no answer from %s: %s", serverURL, r) // Go's words said again less plainly
		}
		if dns := (*net.DNSError)(nil); errors.As(err, &dns) && dns.IsNotFound {
			return nil, fmt.Errorf("no answer from %s: %w: check the url's host%s", serverURL, unwrapURL(err), proxyenv.ResolveNote(req.URL))
		}
		return nil, fmt.Errorf("no answer from %s: %w: check url and that the server is running", serverURL, unwrapURL(err))
	}
	// An SSE stream that opened stays open: read nothing of it.
	defer resp.Body.Close()
	switch {
	case resp.StatusCode == http.StatusUnauthorized:
		io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
		ch, ok := bearerChallenge(resp.Header)
		if !ok {
			return nil, fmt.Errorf("%s answered 401 without a Bearer challenge (WWW-Authenticate: %q): it does not use OAuth; give its credentials in the server's \"headers\"",
				serverURL, resp.Header.Get("WWW-Authenticate"))
		}
		return ch, nil
	case resp.StatusCode == http.StatusForbidden:
		return nil, fmt.Errorf("%s answered 403 Forbidden to a request without a token: check url", serverURL)
	case resp.StatusCode >= 500:
		return nil, fmt.Errorf("%s answered %s: the server has a problem; try again later", serverURL, resp.Status)
	}
	// 2xx, or a complaint about the request itself (400, 404 for a
	// session, 405, 406): the server got past authorization.
	return nil, nil
}

// OffersLogin reports whether a server at serverURL that answered 401 with
// the Bearer challenge ch offers a login toolgate can make: the challenge
// names its protected-resource metadata, or metadata answers at a
// well-known URL (RFC 9728; the MCP authorization spec wants one or the
// other). A Bearer challenge alone is also what a server that takes only a
// static token sends (a personal access token, another toolgate's API
// keys): `auth status` and the gateway told to run `toolgate auth login`,
// which then failed with "publishes no usable protected-resource
// metadata"; the fix there is a token in the entry's "headers". A
// well-known URL that cannot be asked (no answer) counts as offering one:
// the login's own error then says what failed.
func OffersLogin(ctx context.Context, client *http.Client, serverURL string, ch *Challenge) bool {
	if ch == nil {
		return false
	}
	if ch.ResourceMetadata != "" {
		return true
	}
	for _, c := range prmCandidates("", serverURL) {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.url, nil)
		if err != nil {
			return true
		}
		req.Header.Set("Accept", "application/json")
		resp, err := client.Do(req)
		if err != nil {
			return true
		}
		io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
		resp.Body.Close()
		if resp.StatusCode == http.StatusOK {
			return true
		}
	}
	return false
}

// bearerChallenge finds the Bearer challenge of a 401's WWW-Authenticate.
func bearerChallenge(h http.Header) (*Challenge, bool) {
	cs, err := oauthex.ParseWWWAuthenticate(h.Values("WWW-Authenticate"))
	if err != nil {
		return nil, false
	}
	for _, c := range cs {
		if c.Scheme != "bearer" {
			continue
		}
		return &Challenge{ResourceMetadata: c.Params["resource_metadata"], Scopes: strings.Fields(c.Params["scope"])}, true
	}
	return nil, false
}

// discovery is what a login needs to know about a server.
type discovery struct {
	prm *oauthex.ProtectedResourceMetadata
	asm *oauthex.AuthServerMeta
}

// discover finds serverURL's protected-resource metadata (RFC 9728: the
// challenge's resource_metadata, else the well-known URL with the server's
// path, else the one at the root) and its first authorization server's
// metadata (RFC 8414, with the OpenID discovery fallback). go-sdk checks
// that the metadata's resource is the server's, that its URLs are https or
// loopback, and that the authorization server supports PKCE.
func discover(ctx context.Context, client *http.Client, serverURL string, ch *Challenge) (*discovery, error) {
	var tried []string
	var prm *oauthex.ProtectedResourceMetadata
	for _, c := range prmCandidates(ch.ResourceMetadata, serverURL) {
		m, err := oauthex.GetProtectedResourceMetadata(ctx, c.url, c.resource, client)
		if r, ok := resourceAbove(err, serverURL); ok {
			// The metadata names a resource above the server's URL on its
			// origin (Cloudflare's workers-oauth-provider names the origin
			// by default), which the TypeScript and Python SDKs' clients
			// take, and send as written: read again for it, go-sdk's
			// other checks kept.
			m, err = oauthex.GetProtectedResourceMetadata(ctx, c.url, r, client)
		}
		if err == nil && len(m.AuthorizationServers) == 0 {
			err = errors.New("it names no authorization_servers")
		}
		if err != nil {
			// go-sdk says "got metadata resource X, want Y" when the
			// metadata describes another server: say what that means.
			if strings.Contains(err.Error(), "got metadata resource") {
				return nil, fmt.Errorf("the protected-resource metadata at %s is for another resource: %v: check url (it must be the address the server calls itself), or the server is misconfigured",
					c.url, errors.Unwrap(err))
			}
			tried = append(tried, fmt.Sprintf("%s (%v)", c.url, err))
			continue
		}
		prm = m
		break
	}
	if prm == nil {
		return nil, fmt.Errorf("%s asks for a login but publishes no usable protected-resource metadata (RFC 9728); tried %s. toolgate logs in to servers that follow the MCP authorization spec (2025-06-18 or later); for others, give a token in \"headers\"",
			serverURL, strings.Join(tried, "; "))
	}
	issuer := prm.AuthorizationServers[0]
	asm, err := auth.GetAuthServerMetadata(ctx, issuer, client)
	if err != nil {
		return nil, fmt.Errorf("the authorization server %s of %s: %w: check that it is up", issuer, serverURL, unwrapURL(err))
	}
	if asm == nil {
		return nil, fmt.Errorf("the authorization server %s of %s publishes no metadata (RFC 8414 /.well-known/oauth-authorization-server or OpenID /.well-known/openid-configuration)", issuer, serverURL)
	}
	if !slices.Contains(asm.CodeChallengeMethodsSupported, "S256") {
		return nil, fmt.Errorf("the authorization server %s does not support PKCE with S256 (it lists %v), which the MCP authorization spec requires", issuer, asm.CodeChallengeMethodsSupported)
	}
	if asm.AuthorizationEndpoint == "" || asm.TokenEndpoint == "" {
		return nil, fmt.Errorf("the authorization server %s names no authorization_endpoint or token_endpoint in its metadata", issuer)
	}
	return &discovery{prm: prm, asm: asm}, nil
}

// resourceAbove returns the resource that go-sdk's err says metadata
// names instead of serverURL ("got metadata resource X, want Y") when
// covers allows it.
func resourceAbove(err error, serverURL string) (string, bool) {
	var got, want string
	if err == nil || errors.Unwrap(err) == nil {
		return "", false
	}
	if _, serr := fmt.Sscanf(errors.Unwrap(err).Error(), "got metadata resource %q, want %q", &got, &want); serr != nil {
		return "", false
	}
	return got, covers(got, serverURL)
}

// covers reports whether resource, named by serverURL's metadata, covers
// it: the same scheme and host, and a path that is the server's or a
// folder above it (https://mcp.example.com for https://mcp.example.com/mcp;
// not https://mcp.example.com/other), the rule of the TypeScript SDK's
// checkResourceAllowed.
func covers(resource, serverURL string) bool {
	r, rerr := url.Parse(resource)
	s, serr := url.Parse(serverURL)
	if rerr != nil || serr != nil || r.Host == "" || !strings.EqualFold(r.Scheme, s.Scheme) || !strings.EqualFold(r.Host, s.Host) ||
		r.RawQuery != "" || r.Fragment != "" {
		return false
	}
	dir := func(p string) string { return strings.TrimSuffix(p, "/") + "/" }
	return strings.HasPrefix(dir(s.Path), dir(r.Path))
}

type prmCandidate struct{ url, resource string }

// prmCandidates lists where protected-resource metadata may be, in the
// order the MCP authorization spec gives, each with the resource it must
// name (RFC 9728 §3.3).
func prmCandidates(fromChallenge, serverURL string) []prmCandidate {
	var out []prmCandidate
	if fromChallenge != "" {
		out = append(out, prmCandidate{fromChallenge, serverURL})
	}
	u, err := url.Parse(serverURL)
	if err != nil {
		return out
	}
	if p := strings.Trim(u.Path, "/"); p != "" {
		w := *u
		w.Path, w.RawQuery = "/.well-known/oauth-protected-resource/"+p, ""
		if w.String() != fromChallenge { // tried already
			out = append(out, prmCandidate{w.String(), serverURL})
		}
	}
	root := *u
	root.Path, root.RawQuery = "/.well-known/oauth-protected-resource", ""
	origin := *u
	origin.Path, origin.RawQuery = "", ""
	return append(out, prmCandidate{root.String(), origin.String()})
}

// unwrapURL drops net/http's `Get "url":` prefix: messages name the URL.
func unwrapURL(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		return ue.Err
	}
	return err
}
