// Package oauth owns toolgate's side of the MCP authorization spec for
// remote (http, sse) backends: logging in to a server that answers 401 with
// a Bearer challenge, keeping the login, and giving the server's requests
// their access tokens.
//
// Login (run by `toolgate auth login`) follows the challenge to the
// server's protected-resource metadata (RFC 9728), finds its authorization
// server (RFC 8414, with the OpenID discovery fallback), registers toolgate
// there (RFC 7591) unless the config names a client, and runs the
// authorization-code flow with PKCE S256 and the resource parameter (RFC
// 8707) through a redirect to a loopback port picked at random (RFC 8252).
// The pieces come from go-sdk's oauthex and auth packages (metadata
// fetches with their checks, registration) and golang.org/x/oauth2 (the
// authorization URL, PKCE, the code exchange and refreshes); this package
// puts them in order and says, when a step fails, which one and what to do.
//
// Store keeps one file per server under <data dir>/auth: the client
// registration and the tokens, mode 0600 in a 0700 folder, replaced
// atomically (write to a temporary file, sync, rename) under a per-server
// file lock that `auth login` and every gateway sharing the folder take.
//
// Logout (run by `toolgate auth logout`) removes a login and ends it at
// the authorization server, best effort: its tokens revoked (RFC 7009),
// the client toolgate registered deleted (RFC 7592); a login that does not
// finish deletes the client it registered.
//
// Tokens is the gateway's half: Transport wraps a backend's HTTP transport
// so that each request to the server carries the access token. A token is
// refreshed before it expires and when the server answers 401, one refresh
// at a time per server (concurrent requests wait for it and use its
// result; a gateway in another process that refreshed first is noticed
// through the file). When no token can be had (none stored, or the
// refresh token is refused) the transport reports that the server needs a
// login, with the exact command to run, and Changed tells the backend when
// the stored login changes so it can connect again without a restart.
//
// Tokens never appear in logs or error texts: errors name the server, the
// endpoint and the OAuth error code, never a token or a response body.
package oauth
