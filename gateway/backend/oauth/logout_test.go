package oauth_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/toolgate/toolgate/gateway/backend/oauth"
	"github.com/toolgate/toolgate/gateway/backend/oauth/oauthtest"
	"github.com/toolgate/toolgate/internal/testenv"
)

// loggedIn logs in to a server whose authorization server revokes tokens
// (RFC 7009) and lets clients be managed (RFC 7592), as configured by
// setUp, and returns the login.
func loggedIn(t *testing.T, setUp func(*oauthtest.AuthServer)) (*oauthtest.AuthServer, *oauthtest.ResourceServer, *oauth.Store, *oauth.Credentials) {
	t.Helper()
	ctx := context.Background()
	as, rs := protected(t, nil)
	if setUp != nil {
		setUp(as)
	}
	store := oauth.NewStore(t.TempDir())
	c, err := oauth.Login(ctx, store, server(rs), &oauth.LoginOptions{Authorize: follow(ctx)})
	if err != nil {
		t.Fatal(err)
	}
	return as, rs, store, c
}

func stepsSay(steps []oauth.LogoutStep) string {
	var b strings.Builder
	for _, s := range steps {
		b.WriteString(s.Part + ": ")
		if s.Done {
			b.WriteString("done\n")
		} else {
			b.WriteString("not done: " + s.Why + "\n")
		}
	}
	return b.String()
}

// TestLogoutRevokes: a logout removes the login file, then revokes the
// refresh and the access token at the revocation endpoint of the
// authorization server's metadata (RFC 7009), naming the login's client
// as the token endpoint does, and deletes the client toolgate registered
// (RFC 7592). Before, it removed the file only: the access token went on
// working at the server until it expired, and the client stayed.
func TestLogoutRevokes(t *testing.T) {
	as, rs, store, c := loggedIn(t, func(as *oauthtest.AuthServer) {
		as.OfferRevocation()
		as.ManageClients()
	})
	if !rs.TakesToken(t, c.Token.AccessToken) {
		t.Fatal("the server refuses the login's access token before the logout")
	}
	rep, err := oauth.Logout(context.Background(), store, "demo", nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(store.Path("demo")); !errors.Is(err, os.ErrNotExist) || rep.Path != store.Path("demo") {
		t.Errorf("the login file after the logout: %v (report's path %q)", err, rep.Path)
	}
	want := []oauthtest.Revocation{
		{Token: c.Token.RefreshToken, Hint: "refresh_token", Client: c.Client.ID, Status: http.StatusOK},
		{Token: c.Token.AccessToken, Hint: "access_token", Client: c.Client.ID, Status: http.StatusOK},
	}
	if got := as.Revocations(); !slices.Equal(got, want) {
		t.Errorf("revocation requests %+v, want %+v", got, want)
	}
	if got := as.DeletedClients(); !slices.Equal(got, []string{c.Client.ID}) {
		t.Errorf("deleted clients %v, want the login's %q", got, c.Client.ID)
	}
	if len(rep.Steps) != 3 || slices.ContainsFunc(rep.Steps, func(s oauth.LogoutStep) bool { return !s.Done }) {
		t.Errorf("steps:\n%s", stepsSay(rep.Steps))
	}
	if rs.TakesToken(t, c.Token.AccessToken) {
		t.Error("the server still takes the access token after the logout")
	}
}

// TestLogoutBestEffort: whatever the authorization server does — it
// names no revocation endpoint, refuses the client, does not answer, or
// answers too late — the login file is removed and no error is returned;
// each step not done says why, with no token in it.
func TestLogoutBestEffort(t *testing.T) {
	for _, tc := range []struct {
		name  string
		setUp func(*oauthtest.AuthServer)
		// then runs after the login, before the logout.
		then    func(*oauthtest.AuthServer, *oauth.Store, *oauth.Credentials)
		timeout time.Duration
		want    map[string]string // part → what its Why says
	}{
		{name: "no revocation endpoint", want: map[string]string{
			oauth.PartRefreshToken: "it offers no token revocation (no revocation_endpoint in its metadata, RFC 7009)",
			oauth.PartAccessToken:  "it offers no token revocation",
			oauth.PartClient:       "the authorization server gave no means to delete it (no registration_client_uri and registration_access_token, RFC 7592)",
		}},
		{name: "client refused", setUp: func(as *oauthtest.AuthServer) { as.OfferRevocation(); as.ManageClients() },
			then: func(_ *oauthtest.AuthServer, store *oauth.Store, c *oauth.Credentials) {
				c.Client.ID, c.Client.RegistrationToken = "client-unknown", "rat-not-this-one"
				if err := store.Save(c); err != nil {
					t.Fatal(err)
				}
			},
			want: map[string]string{
				oauth.PartRefreshToken: "the authorization server refused it: invalid_client (unknown client client-unknown) (401 Unauthorized)",
				oauth.PartAccessToken:  "invalid_client",
				oauth.PartClient:       "answered 401 Unauthorized",
			}},
		{name: "down", setUp: func(as *oauthtest.AuthServer) { as.OfferRevocation(); as.ManageClients() },
			then: func(as *oauthtest.AuthServer, _ *oauth.Store, _ *oauth.Credentials) { as.Stop() },
			want: map[string]string{
				oauth.PartRefreshToken: "its metadata could not be read: ",
				oauth.PartAccessToken:  "connection refused",
				oauth.PartClient:       "no answer from " + "http://127.0.0.1:",
			}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			as, _, store, c := loggedIn(t, tc.setUp)
			if tc.then != nil {
				tc.then(as, store, c)
			}
			rep, err := oauth.Logout(context.Background(), store, "demo", &oauth.LogoutOptions{Timeout: tc.timeout})
			if err != nil {
				t.Fatal(err)
			}
			if _, err := os.Stat(store.Path("demo")); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("the login file after the logout: %v", err)
			}
			if len(rep.Steps) != len(tc.want) {
				t.Errorf("steps:\n%s", stepsSay(rep.Steps))
			}
			for _, s := range rep.Steps {
				if s.Done || !strings.Contains(s.Why, tc.want[s.Part]) {
					t.Errorf("%s: done=%v %q; want not done, %q", s.Part, s.Done, s.Why, tc.want[s.Part])
				}
				for _, secret := range []string{c.Token.AccessToken, c.Token.RefreshToken, c.Client.RegistrationToken} {
					if secret != "" && strings.Contains(s.Why, secret) {
						t.Errorf("%s: a secret is in %q", s.Part, s.Why)
					}
				}
			}
			if len(as.DeletedClients()) != 0 {
				t.Errorf("deleted clients %v", as.DeletedClients())
			}
		})
	}
}

// TestLogoutTimeout: an authorization server that does not answer holds
// the logout up for its timeout only; the file is removed first.
func TestLogoutTimeout(t *testing.T) {
	_, _, store, _ := loggedIn(t, nil)
	hung := make(chan struct{})
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-hung:
		case <-r.Context().Done():
		}
	}))
	t.Cleanup(func() { close(hung); hs.Close() })
	c, _ := store.Load("demo")
	c.Issuer = hs.URL
	if err := store.Save(c); err != nil {
		t.Fatal(err)
	}
	rep, err := oauth.Logout(context.Background(), store, "demo", &oauth.LogoutOptions{Timeout: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(store.Path("demo")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the login file after the logout: %v", err)
	}
	if len(rep.Steps) != 3 || rep.Steps[0].Why != "its metadata could not be read: no answer within 100ms" {
		t.Errorf("steps:\n%s", stepsSay(rep.Steps))
	}
}

// TestLogoutErrors: no login stored is ErrNoLogin; a file that cannot be
// read is removed, and the report says why nothing was ended remotely.
func TestLogoutErrors(t *testing.T) {
	store := oauth.NewStore(t.TempDir())
	if _, err := oauth.Logout(context.Background(), store, "demo", nil); !errors.Is(err, oauth.ErrNoLogin) {
		t.Errorf("Logout without a login: %v, want ErrNoLogin", err)
	}
	if err := os.MkdirAll(store.Dir(), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(store.Path("demo"), []byte("{"), 0o600); err != nil {
		t.Fatal(err)
	}
	rep, err := oauth.Logout(context.Background(), store, "demo", nil)
	if err != nil || rep.Login != nil || !strings.Contains(rep.Unread, "is not valid JSON") || len(rep.Steps) != 0 {
		t.Errorf("Logout of an unreadable file: %+v, %v", rep, err)
	}
	if _, err := os.Stat(store.Path("demo")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the unreadable login file after the logout: %v", err)
	}
}

// TestAbandonedLoginDeletesItsClient: a login that registered a client
// and then did not finish (nobody approved within its timeout; the user
// pressed Ctrl-C) deletes that client again (RFC 7592): each attempt left
// one more client registered at the authorization server. A login that
// finishes keeps its client.
func TestAbandonedLoginDeletesItsClient(t *testing.T) {
	as, rs := protected(t, nil)
	as.ManageClients()
	store := oauth.NewStore(t.TempDir())
	logs := &testenv.LogBuffer{}
	_, err := oauth.Login(context.Background(), store, server(rs), &oauth.LoginOptions{
		Authorize: func(string) error { return nil }, Timeout: 50 * time.Millisecond, Logger: logs.Logger()})
	if !errors.Is(err, oauth.ErrLoginTimeout) {
		t.Fatalf("a login nobody approves: %v", err)
	}
	if as.Registrations() != 1 || len(as.DeletedClients()) != 1 {
		t.Errorf("after a login not approved: %d registrations, deleted %v; want its client deleted", as.Registrations(), as.DeletedClients())
	}
	if !strings.Contains(logs.String(), "deleted the client registered for this unfinished login") {
		t.Errorf("the deletion is not logged:\n%s", logs)
	}

	ctx, cancel := context.WithCancel(context.Background())
	_, err = oauth.Login(ctx, store, server(rs), &oauth.LoginOptions{Authorize: func(string) error { cancel(); return nil }})
	if err == nil || !strings.Contains(err.Error(), "interrupted") {
		t.Fatalf("an interrupted login: %v", err)
	}
	if as.Registrations() != 2 || len(as.DeletedClients()) != 2 {
		t.Errorf("after an interrupted login: %d registrations, deleted %v; want its client deleted", as.Registrations(), as.DeletedClients())
	}

	c, err := oauth.Login(context.Background(), store, server(rs), &oauth.LoginOptions{Authorize: follow(context.Background())})
	if err != nil {
		t.Fatal(err)
	}
	if slices.Contains(as.DeletedClients(), c.Client.ID) || len(as.DeletedClients()) != 2 {
		t.Errorf("a login that finished: deleted %v, its client %q", as.DeletedClients(), c.Client.ID)
	}
}

// TestLogoutWhileConnected: a connection that sends the token a logout
// just revoked, before its next look at the login file, is answered 401
// and finds no login to refresh: it needs a login because "the login was
// removed", as when it sees the file gone. It said "none is stored",
// which the server's own 401 made possible only once logouts revoked.
func TestLogoutWhileConnected(t *testing.T) {
	_, rs, store, _ := loggedIn(t, func(as *oauthtest.AuthServer) { as.OfferRevocation() })
	tokens := oauth.NewTokens(store, &oauth.Options{PollInterval: time.Hour})
	t.Cleanup(func() { tokens.Close() })
	client := &http.Client{Transport: tokens.Transport("demo", rs.URL, http.DefaultTransport, nil)}
	ping := func() error {
		req, _ := http.NewRequest(http.MethodPost, rs.URL, strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"ping"}`))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		resp, err := client.Do(req)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusUnauthorized {
				return errors.New(resp.Status)
			}
		}
		return err
	}
	if err := ping(); err != nil {
		t.Fatalf("a request with the login: %v", err)
	}
	if _, err := oauth.Logout(context.Background(), store, "demo", nil); err != nil {
		t.Fatal(err)
	}
	var nl *oauth.NeedsLoginError
	if err := ping(); !errors.As(err, &nl) || nl.Reason != "the login was removed (toolgate auth logout)" {
		t.Errorf("a request after the logout: %v; want a login needed, the login removed", err)
	}
}

// TestLogoutRedirectNotFollowed: a revocation endpoint or a registration
// URI that answers with a redirect has not revoked or deleted anything,
// and the token goes nowhere else: the logout says where it was sent,
// and does not follow. It followed: a 302 of the revocation endpoint
// became a GET of a login page, a 301 of the registration URI a GET of
// the client's registration, and each 200 read as "Revoked …" and
// "Deleted there the client …" when nothing was.
func TestLogoutRedirectNotFollowed(t *testing.T) {
	_, _, store, _ := loggedIn(t, nil)
	var followed atomic.Int64 // requests that reached where a redirect led
	mux := http.NewServeMux()
	hs := httptest.NewServer(mux)
	t.Cleanup(hs.Close)
	mux.HandleFunc("GET /.well-known/oauth-authorization-server", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"issuer": %q, "authorization_endpoint": "%[1]s/authorize", "token_endpoint": "%[1]s/token", "revocation_endpoint": "%[1]s/revoke",
			"response_types_supported": ["code"], "code_challenge_methods_supported": ["S256"]}`, hs.URL)
	})
	mux.HandleFunc("POST /revoke", func(w http.ResponseWriter, r *http.Request) { http.Redirect(w, r, "/login", http.StatusFound) })
	mux.HandleFunc("DELETE /register/c1", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "/register/c1/", http.StatusMovedPermanently)
	})
	for _, p := range []string{"/login", "/register/c1/"} {
		mux.HandleFunc(p, func(w http.ResponseWriter, _ *http.Request) {
			followed.Add(1)
			w.Write([]byte("ok"))
		})
	}
	c, _ := store.Load("demo")
	c.Issuer = hs.URL
	c.Client.ID, c.Client.RegistrationURI, c.Client.RegistrationToken = "c1", hs.URL+"/register/c1", "rat-c1"
	if err := store.Save(c); err != nil {
		t.Fatal(err)
	}
	rep, err := oauth.Logout(context.Background(), store, "demo", nil)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{
		oauth.PartRefreshToken: hs.URL + "/revoke answered 302 Found, a redirect to " + hs.URL + "/login, which is not followed with a token",
		oauth.PartAccessToken:  "a redirect to " + hs.URL + "/login",
		oauth.PartClient:       "DELETE " + hs.URL + "/register/c1 answered 301 Moved Permanently, a redirect to " + hs.URL + "/register/c1/, which is not followed",
	}
	if len(rep.Steps) != len(want) {
		t.Errorf("steps:\n%s", stepsSay(rep.Steps))
	}
	for _, s := range rep.Steps {
		if s.Done || !strings.Contains(s.Why, want[s.Part]) {
			t.Errorf("%s: done=%v %q; want not done, %q", s.Part, s.Done, s.Why, want[s.Part])
		}
	}
	if n := followed.Load(); n != 0 {
		t.Errorf("%d requests followed a redirect", n)
	}
}

// TestLogoutInterrupted: a logout stopped by a signal says the
// authorization server was interrupted, not "context canceled".
func TestLogoutInterrupted(t *testing.T) {
	_, _, store, _ := loggedIn(t, func(as *oauthtest.AuthServer) { as.OfferRevocation(); as.ManageClients() })
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	rep, err := oauth.Logout(ctx, store, "demo", nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range rep.Steps {
		if s.Done || !strings.HasSuffix(s.Why, "interrupted before it answered") {
			t.Errorf("%s: done=%v %q; want not done, interrupted", s.Part, s.Done, s.Why)
		}
	}
}
