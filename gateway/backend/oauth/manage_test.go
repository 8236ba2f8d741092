package oauth_test

import (
	"context"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/toolgate/toolgate/gateway/backend/oauth"
	"github.com/toolgate/toolgate/gateway/backend/oauth/oauthtest"
	"github.com/toolgate/toolgate/internal/testenv"
)

// stepUp makes the server rs answer a call 403 insufficient_scope to the
// login in store, which records the step-up.
func stepUp(t *testing.T, store *oauth.Store, rs *oauthtest.ResourceServer) {
	t.Helper()
	tokens := oauth.NewTokens(store, nil)
	t.Cleanup(func() { tokens.Close() })
	client := &http.Client{Transport: tokens.Transport("demo", rs.URL, http.DefaultTransport, nil)}
	req, _ := http.NewRequest(http.MethodPost, rs.URL, strings.NewReader(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"echo"}}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if c, _ := store.Load("demo"); resp.StatusCode != http.StatusForbidden || len(c.PendingScopes()) == 0 {
		t.Fatalf("the call answered %d and recorded the step-up %v, want 403 and a step-up", resp.StatusCode, c.PendingScopes())
	}
}

// TestStepUpLoginDeletesOldClient: a step-up login registers a new client
// for the wider scopes; the client the first login registered, which
// nothing uses any more, is deleted at the authorization server with the
// registration_client_uri and registration_access_token its registration
// gave (RFC 7592). It was left there, one more at each step-up. A login
// that keeps its client deletes nothing; the token is never logged.
func TestStepUpLoginDeletesOldClient(t *testing.T) {
	ctx, as, rs, store, logs, opts, first := managedLogin(t)
	if c := first.Client; c.RegistrationURI != as.URL+"/register/"+c.ID || c.RegistrationToken == "" {
		t.Fatalf("the login keeps the client's registration URI %q and token set=%v, want %q and a token", c.RegistrationURI, c.RegistrationToken != "", as.URL+"/register/"+c.ID)
	}
	again, err := oauth.Login(ctx, store, server(rs), opts)
	if err != nil {
		t.Fatal(err)
	}
	if again.Client.ID != first.Client.ID || len(as.DeletedClients()) != 0 {
		t.Fatalf("a login with the same scopes: client %q (first %q), deleted %v; want the same client, none deleted", again.Client.ID, first.Client.ID, as.DeletedClients())
	}

	stepUp(t, store, rs)
	second, err := oauth.Login(ctx, store, server(rs), opts)
	if err != nil {
		t.Fatal(err)
	}
	if second.Client.ID == first.Client.ID || as.Registrations() != 2 {
		t.Fatalf("the step-up login: client %q (first %q), %d registrations; want a new client", second.Client.ID, first.Client.ID, as.Registrations())
	}
	if got := as.DeletedClients(); !slices.Equal(got, []string{first.Client.ID}) || as.DeleteRefusals() != 0 {
		t.Errorf("deleted clients %v (%d refused), want the first login's %q", got, as.DeleteRefusals(), first.Client.ID)
	}
	if !strings.Contains(logs.String(), "deleted the client registered by the previous login") {
		t.Errorf("the deletion is not logged:\n%s", logs)
	}
	for _, c := range []*oauth.Credentials{first, second} {
		if strings.Contains(logs.String(), c.Client.RegistrationToken) {
			t.Errorf("a registration access token is in the log:\n%s", logs)
		}
	}
}

// TestStepUpLoginDeleteRefused: an authorization server that refuses the
// DELETE of the old client (a registration token it no longer takes) does
// not fail the login, which is saved; the refusal is logged, with no
// token in it.
func TestStepUpLoginDeleteRefused(t *testing.T) {
	ctx, as, rs, store, logs, opts, first := managedLogin(t)
	stepUp(t, store, rs)
	c, _ := store.Load("demo")
	c.Client.RegistrationToken = "rat-not-this-one"
	if err := store.Save(c); err != nil {
		t.Fatal(err)
	}
	second, err := oauth.Login(ctx, store, server(rs), opts)
	if err != nil {
		t.Fatalf("the step-up login with the old client's deletion refused: %v", err)
	}
	if saved, _ := store.Load("demo"); saved.Client.ID != second.Client.ID || second.Client.ID == first.Client.ID {
		t.Errorf("saved client %q, want the new %q", saved.Client.ID, second.Client.ID)
	}
	if len(as.DeletedClients()) != 0 || as.DeleteRefusals() != 1 {
		t.Errorf("deleted %v, %d refused; want none deleted, one refused", as.DeletedClients(), as.DeleteRefusals())
	}
	if l := logs.String(); !strings.Contains(l, "deleting it failed") || !strings.Contains(l, "401 Unauthorized") || strings.Contains(l, "rat-") {
		t.Errorf("the refused deletion's log:\n%s", l)
	}
}

// managedLogin logs in to a server whose authorization server registers
// clients for the scopes they asked for and lets them be managed (RFC
// 7592), and whose calls want the scope "write" the login lacks: the first
// login, and what the next ones need.
func managedLogin(t *testing.T) (context.Context, *oauthtest.AuthServer, *oauthtest.ResourceServer, *oauth.Store, *testenv.LogBuffer, *oauth.LoginOptions, *oauth.Credentials) {
	t.Helper()
	ctx := context.Background()
	as, rs := protected(t, &oauthtest.ResourceOptions{CallScopes: []string{"write"}})
	as.EnforceRegisteredScopes()
	as.ManageClients()
	store := oauth.NewStore(t.TempDir())
	logs := &testenv.LogBuffer{}
	opts := &oauth.LoginOptions{Authorize: follow(ctx), Logger: logs.Logger()}
	first, err := oauth.Login(ctx, store, server(rs), opts)
	if err != nil {
		t.Fatal(err)
	}
	return ctx, as, rs, store, logs, opts, first
}
