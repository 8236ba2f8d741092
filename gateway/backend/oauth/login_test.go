package oauth_test

import (
	"context"
	"errors"
	"io/fs"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/toolgate/toolgate/gateway/backend"
	"github.com/toolgate/toolgate/gateway/backend/backendtest"
	"github.com/toolgate/toolgate/gateway/backend/oauth"
	"github.com/toolgate/toolgate/gateway/backend/oauth/oauthtest"
)

var _ backend.Authorizer = (*oauth.Tokens)(nil)

// protected starts an authorization server and an MCP server behind it.
func protected(t *testing.T, opts *oauthtest.ResourceOptions) (*oauthtest.AuthServer, *oauthtest.ResourceServer) {
	t.Helper()
	as := oauthtest.NewAuthServer(t)
	rs := oauthtest.NewResourceServer(t, as, backendtest.NewServer(backendtest.ParseModes("normal")), opts)
	return as, rs
}

// follow is LoginOptions.Authorize for tests: a browser that approves.
func follow(ctx context.Context) func(string) error {
	return func(u string) error { return oauthtest.FollowAuthorization(ctx, u) }
}

func server(rs *oauthtest.ResourceServer) oauth.Server {
	return oauth.Server{Name: "demo", URL: rs.URL, Transport: oauth.TransportHTTP}
}

func TestLogin(t *testing.T) {
	ctx := context.Background()
	as, rs := protected(t, nil)
	store := oauth.NewStore(t.TempDir())
	c, err := oauth.Login(ctx, store, server(rs), &oauth.LoginOptions{Authorize: follow(ctx)})
	if err != nil {
		t.Fatal(err)
	}
	if c.Token.AccessToken == "" || c.Token.RefreshToken == "" || c.Resource != rs.URL || c.Issuer != as.URL || !c.Client.Registered {
		t.Errorf("credentials: %+v", c.LogValue())
	}
	if !slices.Equal(c.Scopes, []string{oauthtest.Scope}) {
		t.Errorf("scopes %v, want the server's", c.Scopes)
	}
	// RFC 8707: the resource went with the authorization and the code exchange.
	if got := as.Resources(); len(got) != 2 || got[0] != rs.URL || got[1] != rs.URL {
		t.Errorf("resource parameters seen by the authorization server: %q, want %q twice", got, rs.URL)
	}
	// Owner-only files, written atomically (no temporary file left).
	fi, err := os.Stat(store.Dir())
	if err != nil || fi.Mode().Perm() != 0o700 {
		t.Errorf("login folder: %v, %v; want mode 0700", fi.Mode(), err)
	}
	fi, err = os.Stat(store.Path("demo"))
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("login file: %v, %v; want mode 0600", fi.Mode(), err)
	}
	entries, _ := os.ReadDir(store.Dir())
	for _, e := range entries {
		if strings.HasSuffix(e.Name(), ".tmp") {
			t.Errorf("temporary file left behind: %s", e.Name())
		}
	}
	got, err := store.Load("demo")
	if err != nil || got.Token.AccessToken != c.Token.AccessToken {
		t.Fatalf("Load = %v, %v", got, err)
	}

	// A second login reuses the registered client while its port is free.
	c2, err := oauth.Login(ctx, store, server(rs), &oauth.LoginOptions{Authorize: follow(ctx)})
	if err != nil {
		t.Fatal(err)
	}
	if as.Registrations() != 1 || c2.Client.ID != c.Client.ID {
		t.Errorf("second login: %d registrations, client %q (first %q); want the first client again", as.Registrations(), c2.Client.ID, c.Client.ID)
	}
	if c2.Token.AccessToken == c.Token.AccessToken {
		t.Error("second login kept the old token")
	}
	if err := store.Delete("demo"); err != nil {
		t.Fatal(err)
	}
	if err := store.Delete("demo"); !errors.Is(err, oauth.ErrNoLogin) {
		t.Errorf("second Delete = %v, want ErrNoLogin", err)
	}
	if _, err := os.Stat(store.Path("demo")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("login file after Delete: %v", err)
	}
}

func TestLoginPreregisteredClient(t *testing.T) {
	ctx := context.Background()
	as, rs := protected(t, nil)
	// The test server knows only registered clients: register one the way
	// a user would in the provider's console, then name it in the config.
	reg, err := oauth.Login(ctx, oauth.NewStore(t.TempDir()), server(rs), &oauth.LoginOptions{Authorize: follow(ctx)})
	if err != nil {
		t.Fatal(err)
	}
	srv := server(rs)
	srv.ClientID, srv.Scopes = reg.Client.ID, []string{oauthtest.Scope}
	c, err := oauth.Login(ctx, oauth.NewStore(t.TempDir()), srv, &oauth.LoginOptions{Authorize: follow(ctx)})
	if err != nil {
		t.Fatalf("login with the config's client: %v", err)
	}
	if c.Client.ID != reg.Client.ID || c.Client.Registered || as.Registrations() != 1 {
		t.Errorf("client %+v after %d registrations; want the config's client, not a new registration", c.Client, as.Registrations())
	}
}

// TestLoginResourceAtRoot: a server laid out as Cloudflare's
// workers-oauth-provider lays it out by default (many hosted MCP servers
// are) names its origin as the resource, in metadata at the root that its
// challenge points at. The TypeScript and Python SDKs' clients take a
// resource that is the server's URL or a path above it on the same
// origin, and send it as it is written; toolgate refused it as metadata
// "for another resource", so such a server could not be logged in to.
func TestLoginResourceAtRoot(t *testing.T) {
	ctx := context.Background()
	as, rs := protected(t, &oauthtest.ResourceOptions{AtRoot: true})
	store := oauth.NewStore(t.TempDir())
	c, err := oauth.Login(ctx, store, server(rs), &oauth.LoginOptions{Authorize: follow(ctx)})
	if err != nil {
		t.Fatal(err)
	}
	if c.Resource != rs.Resource || c.URL != rs.URL {
		t.Errorf("login for resource %q at %q, want %q at %q", c.Resource, c.URL, rs.Resource, rs.URL)
	}
	if got := as.Resources(); len(got) != 2 || got[0] != rs.Resource || got[1] != rs.Resource {
		t.Errorf("resource parameters seen by the authorization server: %q, want %q twice", got, rs.Resource)
	}
	// The token is the server's: a request with it gets through.
	req, _ := http.NewRequest(http.MethodPost, rs.URL, strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"ping"}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Authorization", "Bearer "+c.Token.AccessToken)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode == http.StatusUnauthorized {
		t.Errorf("the server refused the login's token: %s", resp.Status)
	}

}

// TestLoginRegistersAgainWhenForgotten: an authorization server that
// keeps its registrations in memory (the TypeScript SDK's demo) forgets
// toolgate's client when it restarts; the next login registered nothing
// new, and the browser showed "invalid client" while the login waited
// five minutes for a redirect that could not come.
func TestLoginRegistersAgainWhenForgotten(t *testing.T) {
	ctx := context.Background()
	as, rs := protected(t, nil)
	store := oauth.NewStore(t.TempDir())
	first, err := oauth.Login(ctx, store, server(rs), &oauth.LoginOptions{Authorize: follow(ctx)})
	if err != nil {
		t.Fatal(err)
	}
	as.ForgetClients()
	second, err := oauth.Login(ctx, store, server(rs), &oauth.LoginOptions{Authorize: follow(ctx), Timeout: 10 * time.Second})
	if err != nil {
		t.Fatalf("login after the authorization server forgot the client: %v", err)
	}
	if as.Registrations() != 2 || second.Client.ID == first.Client.ID {
		t.Errorf("%d registrations, client %q (first %q): want a new one", as.Registrations(), second.Client.ID, first.Client.ID)
	}
}

func TestLoginErrors(t *testing.T) {
	ctx := context.Background()
	t.Run("metadata for another resource", func(t *testing.T) {
		_, rs := protected(t, &oauthtest.ResourceOptions{ClaimResource: "http://127.0.0.1:1/elsewhere"})
		_, err := oauth.Login(ctx, oauth.NewStore(t.TempDir()), server(rs), &oauth.LoginOptions{Authorize: follow(ctx)})
		if err == nil || !strings.Contains(err.Error(), "is for another resource") || !strings.Contains(err.Error(), "http://127.0.0.1:1/elsewhere") {
			t.Fatalf("err = %v, want one naming the other resource", err)
		}
	})
	t.Run("authorization server down", func(t *testing.T) {
		as, rs := protected(t, nil)
		as.Stop()
		_, err := oauth.Login(ctx, oauth.NewStore(t.TempDir()), server(rs), &oauth.LoginOptions{Authorize: follow(ctx)})
		if err == nil || !strings.Contains(err.Error(), as.URL) || !strings.Contains(err.Error(), "check that it is up") {
			t.Fatalf("err = %v, want one naming the authorization server", err)
		}
	})
	t.Run("no login needed", func(t *testing.T) {
		hs := backendtest.NewHTTPServer(t, "http", "normal")
		_, err := oauth.Login(ctx, oauth.NewStore(t.TempDir()), oauth.Server{Name: "open", URL: hs.Endpoint, Transport: oauth.TransportHTTP}, nil)
		if !errors.Is(err, oauth.ErrNoLoginNeeded) {
			t.Fatalf("err = %v, want ErrNoLoginNeeded", err)
		}
	})
	t.Run("no redirect in time", func(t *testing.T) {
		_, rs := protected(t, nil)
		_, err := oauth.Login(ctx, oauth.NewStore(t.TempDir()), server(rs), &oauth.LoginOptions{
			Authorize: func(string) error { return nil }, // the user never approves
			Timeout:   50 * time.Millisecond,
		})
		if !errors.Is(err, oauth.ErrLoginTimeout) {
			t.Fatalf("err = %v, want ErrLoginTimeout", err)
		}
	})
	t.Run("a client of the config the authorization server does not know", func(t *testing.T) {
		// It waited for a redirect that could not come (the browser
		// showed the refusal) until its timeout.
		_, rs := protected(t, nil)
		srv := server(rs)
		srv.ClientID = "typo-client"
		asked := false
		_, err := oauth.Login(ctx, oauth.NewStore(t.TempDir()), srv, &oauth.LoginOptions{
			Authorize: func(string) error { asked = true; return nil },
			Timeout:   2 * time.Second,
		})
		if err == nil || !strings.Contains(err.Error(), `does not know the client "typo-client"`) || !strings.Contains(err.Error(), "400 Bad Request") || asked {
			t.Fatalf("err = %v (browser asked: %v), want the refusal before any browser", err, asked)
		}
	})
	t.Run("server not running", func(t *testing.T) {
		_, err := oauth.Login(ctx, oauth.NewStore(t.TempDir()), oauth.Server{Name: "x", URL: "http://127.0.0.1:1/mcp", Transport: oauth.TransportHTTP}, nil)
		if err == nil || !strings.Contains(err.Error(), "no answer from http://127.0.0.1:1/mcp") {
			t.Fatalf("err = %v", err)
		}
	})
	t.Run("401 without a Bearer challenge", func(t *testing.T) {
		hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("WWW-Authenticate", `Basic realm="x"`)
			w.WriteHeader(http.StatusUnauthorized)
		}))
		defer hs.Close()
		_, err := oauth.Login(ctx, oauth.NewStore(t.TempDir()), oauth.Server{Name: "basic", URL: hs.URL + "/mcp", Transport: oauth.TransportHTTP}, nil)
		if err == nil || !strings.Contains(err.Error(), "without a Bearer challenge") {
			t.Fatalf("err = %v", err)
		}
	})
}

func TestStoreRejectsForeignFile(t *testing.T) {
	store := oauth.NewStore(t.TempDir())
	if err := store.Save(&oauth.Credentials{Server: "a", URL: "http://x/mcp", Token: oauth.Token{AccessToken: "secret-token-value"}}); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(store.Path("a"), store.Path("b")); err != nil {
		t.Fatal(err)
	}
	if _, err := store.Load("b"); err == nil || !strings.Contains(err.Error(), `is for server "a"`) {
		t.Errorf("Load of a renamed file: %v", err)
	}
	if err := os.WriteFile(filepath.Join(store.Dir(), "c.json"), []byte(`{"token": {"accessToken": "secret-token-value"`), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err := store.Load("c")
	if err == nil || strings.Contains(err.Error(), "secret-token-value") {
		t.Errorf("Load of a broken file = %v; want an error without its content", err)
	}
}

// TestLoginRedirectURIAsWritten: an entry's redirectUri without a path
// (http://127.0.0.1:PORT, as registered with a provider that compares
// redirect URIs as strings) is the redirect URI the login registers and
// asks for, byte for byte: it sent http://127.0.0.1:PORT/, which such a
// provider refuses as another URI.
func TestLoginRedirectURIAsWritten(t *testing.T) {
	ctx := context.Background()
	_, rs := protected(t, nil)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	redirect := "http://" + ln.Addr().String()
	ln.Close()
	srv := server(rs)
	srv.RedirectURI = redirect
	c, err := oauth.Login(ctx, oauth.NewStore(t.TempDir()), srv, &oauth.LoginOptions{Authorize: follow(ctx)})
	if err != nil {
		t.Fatal(err)
	}
	if c.Client.RedirectURI != redirect {
		t.Errorf("the login's redirect URI %q, want %q as the entry writes it", c.Client.RedirectURI, redirect)
	}
}
