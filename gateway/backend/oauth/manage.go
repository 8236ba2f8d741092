package oauth

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"

	"github.com/toolgate/toolgate/internal/oneline"
	"github.com/toolgate/toolgate/internal/peek"
)

// Client management (RFC 7592): an authorization server may answer a
// registration with the URI of the client's registration and a token
// that manages it. toolgate keeps both with the login, and deletes a client
// it registered once a new login replaces it with another (a step-up's
// wider scopes, a redirect port taken): such a client was left behind at
// the authorization server at each step-up. So is one registered for a
// login that does not finish (no approval within its timeout, Ctrl-C, a
// refusal), and the one of a login removed (Logout).

// maxRegistrationBody bounds the registration answer read for its
// management fields: go-sdk's own bound (oauthex.RegisterClient).
const maxRegistrationBody = 1 << 20

// registrationCapture is the RoundTripper of a registration request: it
// keeps the body of a successful answer (200 or 201) for the fields
// go-sdk's ClientRegistrationResponse leaves out, and puts it back for
// go-sdk to read.
type registrationCapture struct {
	base http.RoundTripper
	body []byte
}

func (c *registrationCapture) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := c.base.RoundTrip(req)
	if err != nil || (resp.StatusCode != http.StatusOK && resp.StatusCode != http.StatusCreated) {
		return resp, err
	}
	if body, err := peek.Body(resp, maxRegistrationBody+1); err == nil {
		c.body = body
	}
	return resp, nil
}

// capturing is hc with its transport wrapped in a registrationCapture.
func capturing(hc *http.Client) (*http.Client, *registrationCapture) {
	rc := &registrationCapture{base: cmp.Or[http.RoundTripper](hc.Transport, http.DefaultTransport)}
	c := *hc
	c.Transport = rc
	return &c, rc
}

// management is the registration_client_uri and registration_access_token
// of a registration answer (RFC 7592 §3), or "" and "" when it gave either
// not, or a URI on another origin than the registration endpoint: the
// token goes to no host but the authorization server's.
func management(body []byte, endpoint string) (uri, token string) {
	var m struct {
		URI   string `json:"registration_client_uri"`
		Token string `json:"registration_access_token"`
	}
	if json.Unmarshal(body, &m) != nil || m.URI == "" || m.Token == "" {
		return "", ""
	}
	u, err1 := url.Parse(m.URI)
	e, err2 := url.Parse(endpoint)
	if err1 != nil || err2 != nil || !u.IsAbs() || u.Scheme != e.Scheme || u.Host != e.Host {
		return "", ""
	}
	return m.URI, m.Token
}

// deleteClient deletes the registration of c (RFC 7592 §2.3), a client
// toolgate registered that no login uses (which names it in the log: the
// previous login's, replaced; this login's, which did not finish), when
// the authorization server gave it a registration URI and token. Best
// effort: the login's outcome stands whatever the answer, which is logged.
func deleteClient(ctx context.Context, hc *http.Client, log *slog.Logger, server, which string, c Client) {
	if !c.Registered {
		return
	}
	if c.RegistrationURI == "" || c.RegistrationToken == "" {
		log.Debug(which+" stays registered at the authorization server: it gave no means to delete it (RFC 7592)", "server", server, "client", c.ID)
		return
	}
	switch err := deleteRegistration(ctx, hc, c); {
	case errors.Is(err, errClientGone):
		log.Info("the authorization server no longer knows "+which+": nothing to delete", "server", server, "client", c.ID)
		return
	case err != nil:
		log.Warn(which+" is left at the authorization server: deleting it failed (nothing to do: it is not used)",
			"server", server, "client", c.ID, "err", err)
		return
	}
	log.Info("deleted "+which+" at the authorization server (RFC 7592)", "server", server, "client", c.ID)
}

// errClientGone says the authorization server no longer knows the client.
var errClientGone = errors.New("the authorization server no longer knows it")

func deleteRegistration(ctx context.Context, hc *http.Client, c Client) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodDelete, c.RegistrationURI, nil)
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+c.RegistrationToken)
	resp, err := notFollowing(hc).Do(req)
	if err != nil {
		return fmt.Errorf("no answer from %s: %w", redacted(c.RegistrationURI), unwrapURL(err))
	}
	defer resp.Body.Close()
	said, _ := io.ReadAll(io.LimitReader(resp.Body, 4<<10))
	switch {
	case isRedirect(resp):
		return fmt.Errorf("DELETE %s answered %s, a redirect to %s, which is not followed with the registration token: the client may still be registered there", redacted(c.RegistrationURI), resp.Status, redirectTarget(resp))
	case resp.StatusCode >= 200 && resp.StatusCode < 300:
		return nil
	case resp.StatusCode == http.StatusNotFound || resp.StatusCode == http.StatusGone:
		return errClientGone
	}
	return fmt.Errorf("DELETE %s answered %s (%q)", redacted(c.RegistrationURI), resp.Status, oneline.Cut(string(bytes.TrimSpace(said)), 120))
}

// notFollowing is hc for a request that carries a token (a revocation,
// a client's DELETE): a redirect is its answer, not followed. Followed, a
// 301, 302 or 303 turned it into a GET of the new address, whose 200 (a
// login page, the client's own registration) read as revoked or deleted
// when nothing was; a 307 or 308 sent the token on to wherever it led.
func notFollowing(hc *http.Client) *http.Client {
	c := *hc
	c.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	return &c
}

// isRedirect reports whether resp (of a request sent notFollowing) is a
// redirect.
func isRedirect(resp *http.Response) bool {
	return resp.StatusCode >= 300 && resp.StatusCode < 400 && resp.Header.Get("Location") != ""
}

// redirectTarget is where resp, a redirect, leads, for a message.
func redirectTarget(resp *http.Response) string {
	if u, err := resp.Location(); err == nil {
		return redacted(u.String())
	}
	return "an unparsable Location"
}

// redacted is raw with any password and query left out, for a log.
func redacted(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return "(an unparsable URI)"
	}
	u.RawQuery = ""
	return u.Redacted()
}
