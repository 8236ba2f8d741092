package oauth_test

import (
	"context"
	"net/http"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/toolgate/toolgate/gateway/backend/oauth"
	"github.com/toolgate/toolgate/gateway/backend/oauth/oauthtest"
	"github.com/toolgate/toolgate/internal/testenv"
)

// TestStepUpRecordedThenAskedFor: a server that answers a call 403
// insufficient_scope (a step-up, MCP 2025-11-25) gets it recorded in the
// login file once, however often it answers so; the next login, with the
// same config, asks for the scopes the login had and those the server
// asked for, says so before the browser opens (naming the one the
// authorization server does not list), and, granted them, clears the
// record; the call then passes. The authorization server holds a client to
// the scopes it registered: the client registered for the first login's
// scopes is not used for the step-up's, a new one is registered (the login
// was refused invalid_scope).
func TestStepUpRecordedThenAskedFor(t *testing.T) {
	ctx := context.Background()
	as, rs := protected(t, &oauthtest.ResourceOptions{CallScopes: []string{"write"}})
	as.EnforceRegisteredScopes()
	store := oauth.NewStore(t.TempDir())
	if _, err := oauth.Login(ctx, store, server(rs), &oauth.LoginOptions{Authorize: follow(ctx)}); err != nil {
		t.Fatal(err)
	}
	tokens := oauth.NewTokens(store, &oauth.Options{PollInterval: time.Millisecond})
	t.Cleanup(func() { tokens.Close() })
	client := &http.Client{Transport: tokens.Transport("demo", rs.URL, http.DefaultTransport, nil)}
	call := func() int {
		t.Helper()
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, rs.URL, strings.NewReader(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"echo"}}`))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	if code := call(); code != http.StatusForbidden {
		t.Fatalf("the call answered %d, want 403", code)
	}
	c, err := store.Load("demo")
	if err != nil || !slices.Equal(c.PendingScopes(), []string{"write"}) {
		t.Fatalf("after the 403 the login records %v (%v), want the step-up [write]", c.PendingScopes(), err)
	}
	first, _ := os.Stat(store.Path("demo"))
	for range 5 {
		call()
	}
	if again, _ := os.Stat(store.Path("demo")); !os.SameFile(first, again) || !again.ModTime().Equal(first.ModTime()) {
		t.Error("the same 403 again wrote the login file again")
	}

	var told [][]string
	l, err := oauth.Login(ctx, store, server(rs), &oauth.LoginOptions{Authorize: follow(ctx),
		StepUp: func(scopes, stepUp, unlisted []string) { told = append(told, scopes, stepUp, unlisted) }})
	if err != nil {
		t.Fatal(err)
	}
	if as.Registrations() != 2 || !slices.Equal(l.Client.Scopes, []string{oauthtest.Scope, "write"}) {
		t.Errorf("the step-up login: %d registrations, client registered for %v; want a second one, for [%s write]", as.Registrations(), l.Client.Scopes, oauthtest.Scope)
	}
	asked := as.AuthorizedScopes()
	if got := asked[len(asked)-1]; got != oauthtest.Scope+" write" {
		t.Errorf("the step-up login's authorization request asked for scope %q, want %q", got, oauthtest.Scope+" write")
	}
	want := [][]string{{oauthtest.Scope, "write"}, {"write"}, {"write"}}
	if !slices.EqualFunc(told, want, slices.Equal) {
		t.Errorf("LoginOptions.StepUp told %q, want %q (all, the step-up's, those the authorization server does not list)", told, want)
	}
	if l.StepUp != nil || !slices.Contains(l.Scopes, "write") {
		t.Errorf("the login granted write: scopes %v, step-up %+v left", l.Scopes, l.StepUp)
	}
	if c, _ := store.Load("demo"); c.StepUp != nil {
		t.Errorf("the stored login keeps the step-up %+v", c.StepUp)
	}
	// The transport takes up the new login file at its next request.
	testenv.Eventually(t, "the call passes the step-up", func() bool { return call() != http.StatusForbidden })
}
