package oauth

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"golang.org/x/oauth2"

	"github.com/toolgate/toolgate/internal/oneline"
)

// Logout (run by `toolgate auth logout`) removes a server's stored login
// and then ends it at the authorization server, best effort: it revokes
// the refresh and access tokens (RFC 7009) at the revocation_endpoint of
// the issuer's metadata, authenticating as the token endpoint does, and
// deletes the client toolgate registered (RFC 7592) when the registration
// gave the means. It only removed the file: the tokens stayed valid until
// they expired, and the client stayed registered.

// DefaultLogoutTimeout bounds the requests a logout sends to the
// authorization server, all of them together.
const DefaultLogoutTimeout = 10 * time.Second

// LogoutOptions configure Logout. Nil means defaults.
type LogoutOptions struct {
	// HTTPClient sends the requests to the authorization server (default:
	// one with DefaultHTTPTimeout).
	HTTPClient *http.Client
	// Timeout bounds those requests together (default
	// DefaultLogoutTimeout); the login file is removed before them.
	Timeout time.Duration
}

// Parts of a login that a logout ends at the authorization server.
const (
	PartRefreshToken = "refresh token"
	PartAccessToken  = "access token"
	PartClient       = "client"
)

// LogoutStep is what became of one part of the login at the authorization
// server.
type LogoutStep struct {
	Part string // PartRefreshToken, PartAccessToken or PartClient
	// Done: the token was revoked, or the client deleted (or unknown there
	// already).
	Done bool
	// Why it was not done, in the words a user reads after "not revoked:"
	// (no token or secret in it); "" when Done.
	Why string
}

// LogoutReport says what a logout removed and ended.
type LogoutReport struct {
	Path  string       // the login file removed
	Login *Credentials // what it held; nil when it could not be read
	// Unread is why the file could not be read ("" when it was): nothing
	// could be ended at the authorization server.
	Unread string
	Steps  []LogoutStep
}

// Logout removes server's stored login (ErrNoLogin when none is stored)
// and then, best effort and within opts.Timeout, revokes its tokens and
// deletes the client toolgate registered at its authorization server. Only
// the removal can fail it: the report says what was ended there and what
// was not, and why.
//
// The file is removed under the login's lock, so a gateway refreshing at
// that moment either saved its new tokens first (which are the ones
// revoked) or finds no login after.
func Logout(ctx context.Context, store *Store, server string, opts *LogoutOptions) (*LogoutReport, error) {
	var o LogoutOptions
	if opts != nil {
		o = *opts
	}
	if o.HTTPClient == nil {
		o.HTTPClient = defaultHTTPClient()
	}
	if o.Timeout <= 0 {
		o.Timeout = DefaultLogoutTimeout
	}
	rep := &LogoutReport{Path: store.Path(server)}
	if err := func() error {
		unlock, err := store.lock(server)
		if err != nil {
			return err
		}
		defer unlock()
		c, err := store.Load(server)
		if err != nil {
			rep.Unread = err.Error()
		}
		rep.Login = c
		return store.Delete(server)
	}(); err != nil {
		return nil, err
	}
	if rep.Login == nil {
		return rep, nil
	}
	rctx, cancel := context.WithTimeout(ctx, o.Timeout)
	defer cancel()
	rep.Steps = endRemotely(rctx, o.HTTPClient, rep.Login, o.Timeout)
	return rep, nil
}

// endRemotely revokes c's tokens and deletes its registered client: one
// step for each that c holds.
func endRemotely(ctx context.Context, hc *http.Client, c *Credentials, timeout time.Duration) []LogoutStep {
	type part struct {
		name, token string
	}
	var tokens []part
	if c.Token.RefreshToken != "" {
		tokens = append(tokens, part{PartRefreshToken, c.Token.RefreshToken})
	}
	// An access token that has expired needs no revoking.
	if c.Token.AccessToken != "" && (c.Token.Expiry.IsZero() || time.Now().Before(c.Token.Expiry)) {
		tokens = append(tokens, part{PartAccessToken, c.Token.AccessToken})
	}
	var steps []LogoutStep
	if len(tokens) > 0 {
		endpoint, none := revocationEndpoint(ctx, hc, c.Issuer, timeout)
		for _, p := range tokens {
			why := none
			if why == "" {
				why = said(ctx, revoke(ctx, hc, endpoint, c.Client, p.token, strings.ReplaceAll(p.name, " ", "_")), timeout)
			}
			steps = append(steps, LogoutStep{Part: p.name, Done: why == "", Why: why})
		}
	}
	if c.Client.Registered {
		step := LogoutStep{Part: PartClient, Done: true}
		if c.Client.RegistrationURI == "" || c.Client.RegistrationToken == "" {
			step.Done, step.Why = false, "the authorization server gave no means to delete it (no registration_client_uri and registration_access_token, RFC 7592)"
		} else if err := deleteRegistration(ctx, hc, c.Client); err != nil && !errors.Is(err, errClientGone) {
			step.Done, step.Why = false, said(ctx, err, timeout)
		}
		steps = append(steps, step)
	}
	return steps
}

// revocationEndpoint is the revocation_endpoint of issuer's metadata, or
// why there is none to use.
func revocationEndpoint(ctx context.Context, hc *http.Client, issuer string, timeout time.Duration) (string, string) {
	asm, err := auth.GetAuthServerMetadata(ctx, issuer, hc)
	switch {
	case err != nil:
		return "", "its metadata could not be read: " + said(ctx, unwrapURL(err), timeout)
	case asm == nil:
		return "", "it publishes no metadata (RFC 8414) to find its revocation endpoint in"
	case asm.RevocationEndpoint == "":
		return "", "it offers no token revocation (no revocation_endpoint in its metadata, RFC 7009)"
	}
	return asm.RevocationEndpoint, ""
}

// said is err in a user's words: "" for none, and a deadline passed is
// "no answer within TIMEOUT".
func said(ctx context.Context, err error, timeout time.Duration) string {
	switch {
	case err == nil:
		return ""
	case errors.Is(ctx.Err(), context.DeadlineExceeded) || errors.Is(err, context.DeadlineExceeded):
		return fmt.Sprintf("no answer within %s", timeout)
	case errors.Is(ctx.Err(), context.Canceled):
		// A signal (Ctrl-C): "no answer from …: context canceled".
		return "interrupted before it answered"
	}
	return err.Error()
}

// revoke asks endpoint to revoke token (RFC 7009 §2.1), with hint
// ("refresh_token" or "access_token"), authenticating as client does at
// the token endpoint: its client_id in the form for a public client
// ("none") and with its secret for client_secret_post, HTTP Basic for
// client_secret_basic (RFC 6749 §2.3.1, what x/oauth2 sends the token
// endpoint). 200 is revoked, whatever the token was (§2.2).
func revoke(ctx context.Context, hc *http.Client, endpoint string, client Client, token, hint string) error {
	form := url.Values{"token": {token}, "token_type_hint": {hint}}
	basic := authStyle(client.AuthMethod) == oauth2.AuthStyleInHeader
	if !basic {
		form.Set("client_id", client.ID)
		if client.Secret != "" {
			form.Set("client_secret", client.Secret)
		}
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, endpoint, strings.NewReader(form.Encode()))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Accept", "application/json")
	if basic {
		req.SetBasicAuth(url.QueryEscape(client.ID), url.QueryEscape(client.Secret))
	}
	resp, err := notFollowing(hc).Do(req)
	if err != nil {
		return fmt.Errorf("no answer from %s: %w", redacted(endpoint), unwrapURL(err))
	}
	defer resp.Body.Close()
	if isRedirect(resp) {
		return fmt.Errorf("%s answered %s, a redirect to %s, which is not followed with a token (the revocation_endpoint of its metadata may be out of date)", redacted(endpoint), resp.Status, redirectTarget(resp))
	}
	if resp.StatusCode == http.StatusOK {
		io.Copy(io.Discard, io.LimitReader(resp.Body, 4<<10))
		return nil
	}
	// Only the OAuth error code and description are said: a body may
	// echo the token.
	var e struct {
		Error       string `json:"error"`
		Description string `json:"error_description"`
	}
	if json.NewDecoder(io.LimitReader(resp.Body, 16<<10)).Decode(&e) == nil && e.Error != "" {
		if e.Error == "unsupported_token_type" {
			return fmt.Errorf("the authorization server refused it: it does not revoke %ss (unsupported_token_type)", strings.ReplaceAll(hint, "_", " "))
		}
		return fmt.Errorf("the authorization server refused it: %s (%s)", oneline.Cut(oauthErrorText(e.Error, e.Description), 200), resp.Status)
	}
	return fmt.Errorf("the authorization server refused it: %s answered %s", redacted(endpoint), resp.Status)
}
