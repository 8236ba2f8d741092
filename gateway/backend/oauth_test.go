package backend

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"

	"github.com/toolgate/toolgate/gateway/backend/backendtest"
	"github.com/toolgate/toolgate/gateway/backend/oauth"
	"github.com/toolgate/toolgate/gateway/backend/oauth/oauthtest"
	"github.com/toolgate/toolgate/gateway/config"
	"github.com/toolgate/toolgate/internal/storage"
	"github.com/toolgate/toolgate/internal/storage/storagetest"
	"github.com/toolgate/toolgate/internal/testenv"
)

// clock is a moveable clock for token expiry.
type clock struct{ offset atomic.Int64 }

func (c *clock) Now() time.Time          { return time.Now().Add(time.Duration(c.offset.Load())) }
func (c *clock) Advance(d time.Duration) { c.offset.Add(int64(d)) }

// loginCommand is what the errors of the tests' pools tell to run.
const loginCommand = "toolgate auth login demo --config /etc/toolgate.json"

// oauthEnv is a protected MCP server, its authorization server, a login
// store and a pool whose backend "demo" gets its tokens from the store.
type oauthEnv struct {
	data  string // the data folder holding the store
	as    *oauthtest.AuthServer
	rs    *oauthtest.ResourceServer
	store *oauth.Store
	clock *clock
	logs  *testenv.LogBuffer
	pool  *Pool
	srv   oauth.Server
}

// newOAuthEnv starts the servers; with login set, it logs in before the
// pool starts.
func newOAuthEnv(t *testing.T, transport string, login bool) *oauthEnv {
	return newOAuthEnvWith(t, transport, login, nil)
}

// newOAuthEnvWith is newOAuthEnv with the data folder's health st (nil:
// none) reported to.
func newOAuthEnvWith(t *testing.T, transport string, login bool, st func(data string) oauth.Storage) *oauthEnv {
	t.Helper()
	e := newOAuthServers(t, transport, login)
	data := e.data
	tokens := oauth.NewTokens(e.store, &oauth.Options{
		Logger:       e.logs.Logger(),
		Now:          e.clock.Now,
		PollInterval: 10 * time.Millisecond,
		LoginCommand: func(server string) string { return "toolgate auth login " + server + " --config /etc/toolgate.json" },
		Storage:      storageFor(st, data),
	})
	t.Cleanup(func() { tokens.Close() })
	o := testOptions(e.logs)
	o.Auth = tokens
	e.pool = startPool(t, []config.Server{{Name: "demo", Type: transport, URL: e.rs.URL}}, o)
	return e
}

// newOAuthServers is newOAuthEnv without the pool.
func newOAuthServers(t *testing.T, transport string, login bool) *oauthEnv {
	t.Helper()
	data := t.TempDir()
	e := &oauthEnv{data: data, as: oauthtest.NewAuthServer(t), store: oauth.NewStore(data), clock: &clock{}, logs: &testenv.LogBuffer{}}
	e.rs = oauthtest.NewResourceServer(t, e.as, backendtest.NewServer(backendtest.ParseModes("normal")), &oauthtest.ResourceOptions{Transport: transport})
	e.srv = oauth.Server{Name: "demo", URL: e.rs.URL, Transport: transport}
	if login {
		e.login(t)
	}
	return e
}

func storageFor(st func(string) oauth.Storage, data string) oauth.Storage {
	if st == nil {
		return nil
	}
	return st(data)
}

// login logs in the way `toolgate auth login` does, approving at once.
func (e *oauthEnv) login(t *testing.T) *oauth.Credentials {
	t.Helper()
	ctx := context.Background()
	c, err := oauth.Login(ctx, e.store, e.srv, &oauth.LoginOptions{
		Authorize: func(u string) error { return oauthtest.FollowAuthorization(ctx, u) },
	})
	if err != nil {
		t.Fatalf("login: %v", err)
	}
	return c
}

func (e *oauthEnv) echo(t *testing.T, text string) {
	t.Helper()
	res, err := e.pool.CallTool(context.Background(), "demo", "echo", map[string]any{"text": text})
	if err != nil || textOf(t, res) != text {
		t.Fatalf("echo %q = %v, %v", text, res, err)
	}
}

// stored returns the stored credentials.
func (e *oauthEnv) stored(t *testing.T) *oauth.Credentials {
	t.Helper()
	c, err := e.store.Load("demo")
	if err != nil || c == nil {
		t.Fatalf("stored login: %v, %v", c, err)
	}
	return c
}

// noTokensLogged fails when a token of creds is in the logs.
func (e *oauthEnv) noTokensLogged(t *testing.T, creds ...*oauth.Credentials) {
	t.Helper()
	logs := e.logs.String()
	for _, c := range creds {
		for _, tok := range []string{c.Token.AccessToken, c.Token.RefreshToken} {
			if tok != "" && strings.Contains(logs, tok) {
				t.Errorf("a token is in the log:\n%s", logs)
				return
			}
		}
	}
}

func TestOAuthRefreshBeforeExpiry(t *testing.T) {
	for _, transport := range []string{config.TypeHTTP, config.TypeSSE} {
		t.Run(transport, func(t *testing.T) {
			e := newOAuthEnv(t, transport, true)
			if st := statusOf(t, e.pool, "demo"); st.State != StateUp {
				t.Fatalf("state %s: %s", st.State, st.Err)
			}
			first := e.stored(t)
			unauthorized := e.rs.Unauthorized() // the login's probe
			e.echo(t, "with the first token")
			if n := e.as.Refreshes(); n != 0 {
				t.Fatalf("%d refreshes while the token is fresh", n)
			}
			// 30 s before the token expires: inside the refresh margin (1 m).
			e.clock.Advance(time.Until(first.Token.Expiry) - 30*time.Second)
			e.echo(t, "with a refreshed token")
			if n := e.as.Refreshes(); n != 1 {
				t.Errorf("%d refreshes, want 1", n)
			}
			if n := e.rs.Unauthorized() - unauthorized; n != 0 {
				t.Errorf("the server answered 401 %d times: the token was not refreshed before it expired", n)
			}
			second := e.stored(t)
			if second.Token.AccessToken == first.Token.AccessToken || second.Token.RefreshToken == first.Token.RefreshToken || second.Refreshed.IsZero() {
				t.Error("the refreshed tokens were not saved")
			}
			// RFC 8707 on the refresh too.
			for i, r := range e.as.Resources() {
				if r != e.rs.URL {
					t.Errorf("request %d to the authorization server had resource %q, want %q", i, r, e.rs.URL)
				}
			}
			e.echo(t, "again, no second refresh")
			if n := e.as.Refreshes(); n != 1 {
				t.Errorf("%d refreshes after a call with a fresh token, want 1", n)
			}
			e.noTokensLogged(t, first, second)
		})
	}
}

func TestOAuthRefreshOn401(t *testing.T) {
	e := newOAuthEnv(t, config.TypeHTTP, true)
	e.echo(t, "before")
	// The server drops the token early (its short life ran out by the
	// server's clock, or it was revoked): toolgate holds it valid.
	e.as.ExpireAccessTokens()
	before := e.rs.Unauthorized()
	e.echo(t, "after a 401 and a refresh")
	if n := e.rs.Unauthorized() - before; n != 1 {
		t.Errorf("%d 401 answers, want 1 (then the retry with the refreshed token)", n)
	}
	if n := e.as.Refreshes(); n != 1 {
		t.Errorf("%d refreshes, want 1", n)
	}
	if st := statusOf(t, e.pool, "demo"); st.State != StateUp || st.Restarts != 0 {
		t.Errorf("state %s, %d restarts; want up on the same session", st.State, st.Restarts)
	}
}

func TestOAuthSingleFlightRefresh(t *testing.T) {
	for _, tc := range []struct {
		name   string
		expire func(t *testing.T, e *oauthEnv)
	}{
		{"expiring on our clock", func(t *testing.T, e *oauthEnv) { e.clock.Advance(time.Until(e.stored(t).Token.Expiry)) }},
		{"refused by the server", func(_ *testing.T, e *oauthEnv) { e.as.ExpireAccessTokens() }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newOAuthEnv(t, config.TypeHTTP, true)
			e.echo(t, "warm")
			tc.expire(t, e)
			const calls = 8
			var wg sync.WaitGroup
			errs := make(chan error, calls)
			for range calls {
				wg.Go(func() {
					res, err := e.pool.CallTool(context.Background(), "demo", "echo", map[string]any{"text": "x"})
					if err == nil && (res.IsError || len(res.Content) == 0) {
						err = errors.New("bad result")
					}
					if err != nil {
						errs <- err
					}
				})
			}
			wg.Wait()
			close(errs)
			for err := range errs {
				t.Errorf("concurrent call: %v", err)
			}
			if n := e.as.Refreshes(); n != 1 {
				t.Errorf("%d refreshes for %d concurrent calls, want 1", n, calls)
			}
		})
	}
}

func TestOAuthNeedsLoginAfterRevokedRefresh(t *testing.T) {
	e := newOAuthEnv(t, config.TypeHTTP, true)
	first := e.stored(t)
	e.echo(t, "before")
	e.as.RevokeRefreshTokens()
	e.as.ExpireAccessTokens()
	_, err := e.pool.CallTool(context.Background(), "demo", "echo", map[string]any{"text": "x"})
	var ue *UnavailableError
	if !errors.As(err, &ue) || !strings.Contains(err.Error(), "run `"+loginCommand+"`") {
		t.Fatalf("call after the refresh token was revoked: %v; want an UnavailableError naming the login command", err)
	}
	testenv.Eventually(t, "state needs-login", func() bool { return statusOf(t, e.pool, "demo").State == StateNeedsLogin })
	st := statusOf(t, e.pool, "demo")
	for _, want := range []string{`backend "demo" needs a login: run ` + "`" + loginCommand + "`", "invalid_grant"} {
		if !strings.Contains(st.Err, want) {
			t.Errorf("status error %q lacks %q", st.Err, want)
		}
	}
	if got := e.pool.Unavailable("demo", false); !strings.HasPrefix(got, `server "demo" needs a login: run `+"`"+loginCommand+"`") {
		t.Errorf("Unavailable = %q", got)
	}
	// The login command names the config file: not for a key's model.
	if got, want := e.pool.Unavailable("demo", true), `server "demo" needs a login: `+HiddenFromKey; got != want {
		t.Errorf("Unavailable for a key = %q, want %q", got, want)
	}
	_, err = e.pool.CallTool(context.Background(), "demo", "echo", map[string]any{"text": "x"})
	if err == nil || !strings.Contains(err.Error(), `backend "demo" is unavailable: it needs a login: run `) {
		t.Errorf("call while it needs a login: %v", err)
	}
	if c := e.stored(t); !strings.Contains(c.Refused, "invalid_grant") {
		t.Errorf("the stored login is not marked refused: %q", c.Refused)
	}

	// A new login brings it back without a restart of the pool.
	second := e.login(t)
	testenv.Eventually(t, "up again after the new login", func() bool { return statusOf(t, e.pool, "demo").State == StateUp })
	e.echo(t, "after the new login")
	e.noTokensLogged(t, first, second)
}

// TestOAuthOwnRefusalIsNoNewLogin: the refusal a gateway marks in the
// login file is its own write, not a login saved by someone else: Changed
// stays open (a backend waiting for a login used to wake on it, connect
// again and be refused, and `toolgate status` could catch it
// "connecting"). A new login still wakes it.
func TestOAuthOwnRefusalIsNoNewLogin(t *testing.T) {
	e := newOAuthServers(t, config.TypeHTTP, true) // no pool: its refresh would be another writer
	tokens := oauth.NewTokens(e.store, &oauth.Options{Now: e.clock.Now, PollInterval: 5 * time.Millisecond})
	t.Cleanup(func() { tokens.Close() })
	changed := tokens.Changed("demo") // as a backend registers at its connect
	var required atomic.Int32
	client := &http.Client{Transport: tokens.Transport("demo", e.rs.URL, http.DefaultTransport, func(error) { required.Add(1) })}
	e.as.RevokeRefreshTokens()
	e.as.ExpireAccessTokens()
	e.clock.Advance(2 * time.Hour)
	if resp, err := client.Get(e.rs.URL); err == nil || !strings.Contains(err.Error(), "needs a login") {
		if resp != nil {
			resp.Body.Close()
		}
		t.Fatalf("request after the refresh token was revoked: %v; want it to need a login", err)
	}
	if c := e.stored(t); !strings.Contains(c.Refused, "invalid_grant") || required.Load() != 1 {
		t.Fatalf("refused %q, login required %d times; want the refusal marked and reported once", c.Refused, required.Load())
	}
	// A login file of another server written after the refusal: once the
	// poll has seen it, it has compared demo's file too, since the refusal.
	other := tokens.Changed("other")
	saved := e.stored(t)
	saved.Server, saved.Refused = "other", ""
	if err := e.store.Save(saved); err != nil {
		t.Fatal(err)
	}
	select {
	case <-other:
	case <-time.After(testenv.Timeout):
		t.Fatal("the poll never saw another server's new login")
	}
	tokens.Changed("sync") // waits for the poll's pass to end (it holds the lock)
	select {
	case <-changed:
		t.Fatal("the gateway's own refusal woke a wait for a new login")
	default:
	}
	e.login(t)
	select {
	case <-changed:
	case <-time.After(testenv.Timeout):
		t.Fatal("a new login did not wake the wait")
	}
}

func TestOAuthNoLoginStored(t *testing.T) {
	for _, transport := range []string{config.TypeHTTP, config.TypeSSE} {
		t.Run(transport, func(t *testing.T) {
			e := newOAuthEnv(t, transport, false)
			st := statusOf(t, e.pool, "demo")
			if st.State != StateNeedsLogin || !strings.Contains(st.Err, "run `"+loginCommand+"` (the server asks for a login and none is stored)") {
				t.Fatalf("state %s: %s", st.State, st.Err)
			}
			// A key that is not admin reads that it needs a login, the
			// command (it names the config file and the data folder) and
			// why hidden: in its status, and in a call's error (which read
			// all hidden).
			if got, want := st.ForKey().Err, `backend "demo" needs a login: `+HiddenFromKey; got != want {
				t.Errorf("its status, as a key that is not admin reads it:\n%s\nwant:\n%s", got, want)
			}
			_, err := e.pool.CallTool(context.Background(), "demo", "echo", map[string]any{"text": "x"})
			var un *UnavailableError
			if !errors.As(err, &un) || ErrForKey(un.Err) != "it needs a login: "+HiddenFromKey || !strings.Contains(err.Error(), loginCommand) {
				t.Errorf("a call before the login: %v; a key that is not admin reads %q", err, ErrForKey(un.Err))
			}
			if got, want := e.pool.Unavailable("demo", true), `server "demo" needs a login: `+HiddenFromKey; got != want {
				t.Errorf("Unavailable for a key: %q, want %q", got, want)
			}
			c := e.login(t)
			testenv.Eventually(t, "up after the login", func() bool { return statusOf(t, e.pool, "demo").State == StateUp })
			// The login asked for was given: its command is no failure to
			// keep (toolgate status and list_servers went on saying to run it).
			if st := statusOf(t, e.pool, "demo"); st.LastErr != "" {
				t.Errorf("up after the login, last error %q; want none", st.LastErr)
			}
			e.echo(t, "logged in")
			e.noTokensLogged(t, c)
		})
	}
}

func TestOAuthAuthorizationServerDown(t *testing.T) {
	e := newOAuthEnv(t, config.TypeHTTP, true)
	e.echo(t, "before")
	e.clock.Advance(time.Until(e.stored(t).Token.Expiry))
	e.as.Stop()
	_, err := e.pool.CallTool(context.Background(), "demo", "echo", map[string]any{"text": "x"})
	if err == nil || !strings.Contains(err.Error(), `refresh the access token of "demo" at `+e.as.URL+"/token") || !strings.Contains(err.Error(), "the next request tries again") {
		t.Fatalf("call while the authorization server is down: %v", err)
	}
	if st := statusOf(t, e.pool, "demo"); st.State != StateUp {
		t.Errorf("state %s (%s): an unreachable authorization server is not a reason to log in again", st.State, st.Err)
	}
	e.as.Start()
	e.echo(t, "after the authorization server came back")
	if n := e.as.Refreshes(); n != 1 {
		t.Errorf("%d refreshes, want 1", n)
	}
}

func TestOAuthStaticHeaderWins(t *testing.T) {
	// A server with a static Authorization header is never given a token.
	hs := backendtest.NewHTTPServer(t, config.TypeHTTP, "normal")
	tokens := oauth.NewTokens(oauth.NewStore(t.TempDir()), nil)
	t.Cleanup(func() { tokens.Close() })
	o := testOptions(nil)
	o.Auth = tokens
	p := startPool(t, []config.Server{hs.Config("static", map[string]string{"Authorization": "Bearer static-123456"})}, o)
	if st := statusOf(t, p, "static"); st.State != StateUp {
		t.Fatalf("state %s: %s", st.State, st.Err)
	}
	for _, h := range hs.Headers() {
		if h.Get("Authorization") != "Bearer static-123456" {
			t.Errorf("Authorization %q, want the configured one", h.Get("Authorization"))
		}
	}
}

func TestOAuthLogoutWhileUp(t *testing.T) {
	e := newOAuthEnv(t, config.TypeHTTP, true)
	e.echo(t, "logged in")
	if err := e.store.Delete("demo"); err != nil {
		t.Fatal(err)
	}
	// The connection looks at the login file at most every PollInterval.
	testenv.Eventually(t, "calls refused after the logout", func() bool {
		_, err := e.pool.CallTool(context.Background(), "demo", "echo", map[string]any{"text": "x"})
		return err != nil && strings.Contains(err.Error(), "(the login was removed (toolgate auth logout))")
	})
	testenv.Eventually(t, "state needs-login", func() bool { return statusOf(t, e.pool, "demo").State == StateNeedsLogin })
	e.login(t)
	testenv.Eventually(t, "up after logging in again", func() bool { return statusOf(t, e.pool, "demo").State == StateUp })
	e.echo(t, "logged in again")
}

// The data folder removed under a logged-in gateway: calls go on with the
// login in memory (its file going with the folder is no logout), a refresh
// works and keeps the new token in memory, the login writer reports the
// fault; once the folder is back the next refresh is saved there.
// TestOAuthDataFolderRemovedAfterCheck: a data folder removed between the
// logins' check and a refresh's write (the lock file, the login) is not
// made again: the refresh fails instead, and the folder stays gone.
func TestOAuthDataFolderRemovedAfterCheck(t *testing.T) {
	e := newOAuthServers(t, config.TypeHTTP, true)
	w := storage.New(e.data, nil).Writer("logins", "refreshed tokens are kept in memory only")
	tokens := oauth.NewTokens(e.store, &oauth.Options{
		Logger: e.logs.Logger(),
		Now:    e.clock.Now,
		// No look at the login file in this test: a look would find it
		// gone and, with a check that always passes, take it for a logout.
		PollInterval: 24 * time.Hour,
		Storage:      storagetest.CheckedBefore(w),
	})
	t.Cleanup(func() { tokens.Close() })
	o := testOptions(e.logs)
	o.Auth = tokens
	e.pool = startPool(t, []config.Server{{Name: "demo", Type: config.TypeHTTP, URL: e.rs.URL}}, o)
	first := e.stored(t)
	e.echo(t, "logged in")
	if err := os.RemoveAll(e.data); err != nil {
		t.Fatal(err)
	}
	e.clock.Advance(time.Until(first.Token.Expiry) - 30*time.Second)
	if _, err := e.pool.CallTool(context.Background(), "demo", "echo", map[string]any{"text": "refresh"}); err == nil {
		t.Error("the call went through a refresh that could not take the login's lock")
	}
	if _, err := os.Stat(e.data); !os.IsNotExist(err) {
		t.Errorf("the data folder was made again: %v", err)
	}
}

func TestOAuthDataFolderGone(t *testing.T) {
	var w *storage.Writer
	e := newOAuthEnvWith(t, config.TypeHTTP, true, func(data string) oauth.Storage {
		w = storage.New(data, nil).Writer("logins", "refreshed tokens are kept in memory only")
		return w
	})
	first := e.stored(t)
	e.echo(t, "logged in")
	if err := os.RemoveAll(e.data); err != nil {
		t.Fatal(err)
	}
	// The connection looks at the login file every PollInterval (10ms):
	// calls keep working across several looks.
	for i, end := 0, time.Now().Add(100*time.Millisecond); time.Now().Before(end); i++ {
		e.echo(t, fmt.Sprintf("call %d with the folder gone", i))
	}
	e.clock.Advance(time.Until(first.Token.Expiry) - 30*time.Second)
	e.echo(t, "after a refresh with the folder gone")
	if n := e.as.Refreshes(); n != 1 {
		t.Fatalf("%d refreshes, want 1", n)
	}
	if !w.Failing() {
		t.Error("the login writer does not report the fault")
	}
	if _, err := os.Stat(e.data); err == nil {
		t.Error("the data folder was created again while it was gone")
	}

	if err := os.MkdirAll(e.data, 0o755); err != nil {
		t.Fatal(err)
	}
	e.clock.Advance(time.Hour - 30*time.Second) // the refreshed token (1h) is about to expire too
	e.echo(t, "after a refresh with the folder back")
	if n := e.as.Refreshes(); n != 2 {
		t.Fatalf("%d refreshes, want 2", n)
	}
	if saved := e.stored(t); saved.Token.AccessToken == first.Token.AccessToken || w.Failing() {
		t.Errorf("the second refresh was not saved (writer failing: %v)", w.Failing())
	}
}

// TestOAuthInsufficientScopeThenLogin: a server that wants a scope the
// login was not given answers 403 insufficient_scope: the backend is down
// with the scope and the fix, `auth login` with no config change (the
// gateway recorded the step-up in the login file, which the login asks
// for with the scopes it had: it said to list them in the config first);
// that login, saved while the backend waits to try again, connects it at
// once, as a backend that needs a login is: it waited out its restart
// delay (10 s once the first were spent).
func TestOAuthInsufficientScopeThenLogin(t *testing.T) {
	e := &oauthEnv{data: t.TempDir(), as: oauthtest.NewAuthServer(t), clock: &clock{}, logs: &testenv.LogBuffer{}}
	e.store = oauth.NewStore(e.data)
	e.rs = oauthtest.NewResourceServer(t, e.as, backendtest.NewServer(backendtest.ParseModes("normal")), &oauthtest.ResourceOptions{Scopes: []string{"write"}})
	e.srv = oauth.Server{Name: "demo", URL: e.rs.URL, Transport: config.TypeHTTP, Scopes: []string{"read"}}
	e.login(t)
	const login = "toolgate auth login demo --config /etc/toolgate.json --data-dir /srv/tg"
	st := e.startDown(t, "demo down for want of the scope", " --config /etc/toolgate.json --data-dir /srv/tg")
	// The command in full, as the needs-login error gives it: it said
	// `toolgate auth login demo`, which on another data folder than the
	// default logs in to the wrong one.
	if want := "the server wants the scopes \"write\", which the login was not given: run `" + login + "`, which asks for them"; !strings.Contains(st.Err, want) {
		t.Errorf("status error %q, want %q", st.Err, want)
	}
	if c := e.stored(t); !slices.Equal(c.PendingScopes(), []string{"write"}) {
		t.Errorf("the login file records the step-up %v, want [write]", c.PendingScopes())
	}
	// Its status carries the step-up, as toolgate status and the console
	// show it; to a key that is not admin the command bare, no scopes.
	if su := st.StepUp; su == nil || !slices.Equal(su.Scopes, []string{"write"}) || su.Login != login || su.NotRecorded != "" {
		t.Errorf("status stepUp %+v, want scopes [write] and login %q", su, login)
	}
	if su := st.ForKey().StepUp; su == nil || su.Scopes != nil || su.Login != "toolgate auth login demo" {
		t.Errorf("status stepUp as a key that is not admin reads it: %+v", su)
	}
	// A key that is not admin reads the gateway's words and the fix, what
	// the server said hidden: its URL, its answer's body and the scopes of
	// its WWW-Authenticate header (it read all hidden); the command bare,
	// without the paths of the gateway's machine.
	want := `backend "demo" at (` + HiddenFromKey + `): the server answered a POST with 403 Forbidden`
	fix := `: the server wants the scopes (` + HiddenFromKey + `), which the login was not given: run ` + "`toolgate auth login demo" + stepUpThen
	if got := st.ForKey().Err; !strings.HasPrefix(got, want) || !strings.HasSuffix(got, fix) || strings.Contains(got, "write") || strings.Contains(got, e.rs.URL) || strings.Contains(got, "/etc/") {
		t.Errorf("its status, as a key that is not admin reads it:\n%s\nwant:\n%s … %s", got, want, fix)
	}
	e.login(t)
	if asked := e.as.AuthorizedScopes(); asked[len(asked)-1] != "read write" {
		t.Errorf("the second login asked for %q, want the configured read and the step-up's write", asked[len(asked)-1])
	}
	if c := e.stored(t); c.StepUp != nil {
		t.Errorf("the login granted write keeps the step-up %+v", c.StepUp)
	}
	testenv.Eventually(t, "demo up with the new login", func() bool { return statusOf(t, e.pool, "demo").State == StateUp })
	e.echo(t, "with the scope")
	if su := statusOf(t, e.pool, "demo").StepUp; su != nil {
		t.Errorf("status stepUp after the login granted write: %+v", su)
	}
}

// startDown starts e's pool on its http server "demo", whose errors name
// `toolgate auth login demo` and then paths, with a restart delay no test
// waits out, and returns demo's status once it is down (what for says).
func (e *oauthEnv) startDown(t *testing.T, what, paths string) Status {
	t.Helper()
	tokens := oauth.NewTokens(e.store, &oauth.Options{Logger: e.logs.Logger(), PollInterval: 10 * time.Millisecond,
		LoginCommand: func(server string) string { return "toolgate auth login " + server + paths }})
	t.Cleanup(func() { tokens.Close() })
	o := testOptions(e.logs)
	o.Auth = tokens
	o.RestartDelays = []time.Duration{time.Hour}
	e.pool = startPool(t, []config.Server{{Name: "demo", Type: config.TypeHTTP, URL: e.rs.URL}}, o)
	var st Status
	testenv.Eventually(t, what, func() bool {
		st = statusOf(t, e.pool, "demo")
		return st.State == StateDown
	})
	return st
}

// A server that answers 401 with a bare Bearer challenge and publishes no
// protected-resource metadata takes a token given to it (a personal access
// token, another toolgate's API keys): it is down with its 401 and the fix
// in the entry's "headers". It was needs-login, telling to run `toolgate
// auth login`, which could only fail ("publishes no usable
// protected-resource metadata"). With the metadata at its well-known URL
// instead of in the challenge, it needs a login as before.
func TestOAuthBearerWithoutMetadata(t *testing.T) {
	for _, metadata := range []bool{false, true} {
		t.Run(fmt.Sprintf("metadata=%v", metadata), func(t *testing.T) {
			hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if metadata && r.URL.Path == "/.well-known/oauth-protected-resource/mcp" {
					w.Header().Set("Content-Type", "application/json")
					fmt.Fprintf(w, `{"resource": %q, "authorization_servers": ["http://%s/as"]}`, "http://"+r.Host+"/mcp", r.Host)
					return
				}
				w.Header().Set("WWW-Authenticate", `Bearer realm="toolgate"`)
				http.Error(w, "this gateway needs an API key", http.StatusUnauthorized)
			}))
			t.Cleanup(hs.Close)
			tokens := oauth.NewTokens(oauth.NewStore(t.TempDir()), &oauth.Options{
				LoginCommand: func(server string) string { return "toolgate auth login " + server },
			})
			t.Cleanup(func() { tokens.Close() })
			o := testOptions(nil)
			o.Auth = tokens
			p := startPool(t, []config.Server{{Name: "keyed", Type: config.TypeHTTP, URL: hs.URL + "/mcp"}}, o)
			var st Status
			testenv.Eventually(t, "keyed past its first connect", func() bool {
				st = statusOf(t, p, "keyed")
				return st.State == StateDown || st.State == StateNeedsLogin
			})
			if metadata {
				if st.State != StateNeedsLogin || !strings.Contains(st.Err, "toolgate auth login keyed") {
					t.Fatalf("with metadata at the well-known URL: state %s: %s; want needs-login", st.State, st.Err)
				}
				return
			}
			if st.State != StateDown || !strings.Contains(st.Err, "401 Unauthorized") || !strings.Contains(st.Err, `set them in the entry's "headers"`) || strings.Contains(st.Err, "needs a login") {
				t.Fatalf("without metadata: state %s: %s; want down with its 401 and the entry's headers", st.State, st.Err)
			}
		})
	}
}

// A server whose token check fails with a 500 on a token it no longer
// takes (the TypeScript SDK's example OAuth server, once restarted, has
// forgotten every token it issued) is down with that 500, and, as the
// request carried the stored login's token, the fix names the login to
// run again: `auth status` still says "logged in", and the fix read only
// "its own log says why". Once logged in again it is up, without waiting
// out its restart delay.
func TestOAuthServerFailsOnForgottenToken(t *testing.T) {
	e := &oauthEnv{data: t.TempDir(), as: oauthtest.NewAuthServer(t), clock: &clock{}, logs: &testenv.LogBuffer{}}
	e.store = oauth.NewStore(e.data)
	e.rs = oauthtest.NewResourceServer(t, e.as, backendtest.NewServer(backendtest.ParseModes("normal")), &oauthtest.ResourceOptions{FailOnBadToken: true})
	e.srv = oauth.Server{Name: "demo", URL: e.rs.URL, Transport: config.TypeHTTP}
	e.login(t)
	e.as.ExpireAccessTokens()
	st := e.startDown(t, "demo down with the 500", " --config /etc/toolgate.json")
	if want := "`" + loginCommand + "` logs in again"; !strings.Contains(st.Err, "500 Internal Server Error") || !strings.Contains(st.Err, want) {
		t.Errorf("status error %q, want the 500 and %q", st.Err, want)
	}
	if got := st.ForKey().Err; strings.Contains(got, "/etc/") || !strings.Contains(got, "`toolgate auth login demo` logs in again") {
		t.Errorf("its status, as a key that is not admin reads it: %q, want the bare command", got)
	}
	e.login(t)
	testenv.Eventually(t, "demo up with the new login", func() bool { return statusOf(t, e.pool, "demo").State == StateUp })
	e.echo(t, "logged in again")
}

// A server whose error quotes the token it got (a debug page, a check
// that names what it refused) does not put the stored login's access
// token into the status, the log or a call's error: the server's words
// are shown with the Authorization toolgate sent masked.
func TestOAuthEchoedTokenMasked(t *testing.T) {
	e := &oauthEnv{data: t.TempDir(), as: oauthtest.NewAuthServer(t), clock: &clock{}, logs: &testenv.LogBuffer{}}
	e.store = oauth.NewStore(e.data)
	e.rs = oauthtest.NewResourceServer(t, e.as, backendtest.NewServer(backendtest.ParseModes("normal")), &oauthtest.ResourceOptions{FailOnBadToken: true, EchoToken: true})
	e.srv = oauth.Server{Name: "demo", URL: e.rs.URL, Transport: config.TypeHTTP}
	creds := e.login(t)
	e.as.ExpireAccessTokens()
	st := e.startDown(t, "demo down with the 500", "")
	if !strings.Contains(st.Err, "token introspection failed for ***") {
		t.Errorf("status error %q: want the server's words, the token masked", st.Err)
	}
	_, callErr := e.pool.CallTool(context.Background(), "demo", "echo", map[string]any{"text": "x"})
	for what, text := range map[string]string{"status error": st.Err, "status last error": st.LastErr, "call error": fmt.Sprint(callErr)} {
		if strings.Contains(text, creds.Token.AccessToken) {
			t.Errorf("%s holds the login's access token: %s", what, text)
		}
	}
	e.noTokensLogged(t, creds)
}

// TestOAuthStepUpKeepsSession: a logged-in server that refuses one tool's
// call 403 insufficient_scope (a step-up, MCP 2025-11-25) and runs the
// others: that call fails with the scopes and the login to run, the
// step-up is recorded, and the backend stays up on the same session: a
// call to another tool right after passes, and the refused tool is
// refused the same way again. go-sdk ended the session on the 403: the
// backend was down after each refused call (until its restart delay
// passed) and every other call to it failed meanwhile. So over streamable
// HTTP (scopeRefusalAnswer) and over the older HTTP+SSE transport, whose
// answers come on its stream (scopeConn): there the backend stayed down
// after the first refused call ("connection lost: failed to write: 403
// Forbidden").
func TestOAuthStepUpKeepsSession(t *testing.T) {
	for _, transport := range []string{config.TypeHTTP, config.TypeSSE} {
		t.Run(transport, func(t *testing.T) {
			e := &oauthEnv{data: t.TempDir(), as: oauthtest.NewAuthServer(t), clock: &clock{}, logs: &testenv.LogBuffer{}}
			e.store = oauth.NewStore(e.data)
			e.rs = oauthtest.NewResourceServer(t, e.as, backendtest.NewServer(backendtest.ParseModes("normal")),
				&oauthtest.ResourceOptions{Transport: transport, CallScopes: []string{"write"}, CallScopesTools: []string{"add"}})
			e.srv = oauth.Server{Name: "demo", URL: e.rs.URL, Transport: transport}
			e.login(t)
			tokens := oauth.NewTokens(e.store, &oauth.Options{Logger: e.logs.Logger(), PollInterval: 10 * time.Millisecond,
				LoginCommand: func(server string) string { return "toolgate auth login " + server + " --config /etc/toolgate.json" }})
			t.Cleanup(func() { tokens.Close() })
			o := testOptions(e.logs)
			o.Auth = tokens
			o.RestartDelays = []time.Duration{time.Hour} // a session that ends stays ended
			e.pool = startPool(t, []config.Server{{Name: "demo", Type: transport, URL: e.rs.URL}}, o)
			testenv.Eventually(t, "demo up", func() bool { return statusOf(t, e.pool, "demo").State == StateUp })
			up := statusOf(t, e.pool, "demo")

			want := "the server wants the scopes \"write\", which the login was not given: run `" + loginCommand + stepUpThen
			for i := range 2 {
				_, err := e.pool.CallTool(context.Background(), "demo", "add", map[string]any{"a": 1, "b": 2})
				var refused *RefusedError
				if !errors.As(err, &refused) || !strings.Contains(err.Error(), want) {
					t.Fatalf("call %d of add, refused 403 insufficient_scope: %v\nwant a RefusedError that says %q", i+1, err, want)
				}
				if st := statusOf(t, e.pool, "demo"); st.State != StateUp || st.Restarts != 0 || !st.Since.Equal(up.Since) || st.Err != "" {
					t.Fatalf("after refused call %d: demo %s (restarts %d, since %v, was %v): %s; want up on its first session", i+1, st.State, st.Restarts, st.Since, up.Since, st.Err)
				}
				e.echo(t, fmt.Sprintf("after refused call %d", i+1))
			}
			if c := e.stored(t); !slices.Equal(c.PendingScopes(), []string{"write"}) {
				t.Errorf("the login file records the step-up %v, want [write]", c.PendingScopes())
			}
			if su := statusOf(t, e.pool, "demo").StepUp; su == nil || !slices.Equal(su.Scopes, []string{"write"}) {
				t.Errorf("status stepUp %+v, want scopes [write]", su)
			}
		})
	}
}

// TestScopeRefusalAnswer: the 403 insufficient_scope answer to a POST of
// a JSON-RPC request, once the session is up, reaches go-sdk as a JSON-RPC
// error for that request's id (which it takes as the one request's
// failure); a notification's, the handshake's, an SSE server's and a 403
// without a scope go on as they are.
func TestScopeRefusalAnswer(t *testing.T) {
	const challenge = `Bearer error="insufficient_scope", scope="read write"`
	for _, c := range []struct {
		name, body, challenge string
		handshake, sse        bool
		wantRPC               bool
	}{
		{name: "request", body: `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"add"}}`, challenge: challenge, wantRPC: true},
		{name: "string id", body: `{"jsonrpc":"2.0","id":"x7","method":"resources/read","params":{}}`, challenge: challenge, wantRPC: true},
		{name: "notification", body: `{"jsonrpc":"2.0","method":"notifications/cancelled","params":{}}`, challenge: challenge},
		{name: "handshake", body: `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{}}`, challenge: challenge, handshake: true},
		{name: "sse", body: `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{}}`, challenge: challenge, sse: true},
		{name: "no scope", body: `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{}}`, challenge: `Bearer error="invalid_token"`},
	} {
		t.Run(c.name, func(t *testing.T) {
			base := roundTrip(func(r *http.Request) (*http.Response, error) {
				h := http.Header{"Content-Type": {"application/json"}, "Www-Authenticate": {c.challenge}}
				return &http.Response{StatusCode: http.StatusForbidden, Status: "403 Forbidden", Header: h, Request: r,
					Body: io.NopCloser(strings.NewReader(`{"error":"insufficient_scope"}`))}, nil
			})
			ht := &headerTransport{base: base, maxBody: 1 << 20, sse: c.sse, exact: !c.sse}
			ht.handshake.Store(c.handshake)
			req, _ := http.NewRequest(http.MethodPost, "http://127.0.0.1:1/mcp", strings.NewReader(c.body))
			resp, err := ht.RoundTrip(req)
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			msg, _ := jsonrpc.DecodeMessage(body)
			r, isRPC := msg.(*jsonrpc.Response)
			if isRPC != c.wantRPC || resp.StatusCode != http.StatusForbidden || ht.refusals.Load() != 1 {
				t.Fatalf("answer %d %s (refusals %d), JSON-RPC response %v; want one %v", resp.StatusCode, body, ht.refusals.Load(), isRPC, c.wantRPC)
			}
			if !c.wantRPC {
				return
			}
			in, _ := jsonrpc.DecodeMessage([]byte(c.body))
			var werr *jsonrpc.Error
			if r.ID != in.(*jsonrpc.Request).ID || !errors.As(r.Error, &werr) || !strings.Contains(werr.Message, `"read write"`) {
				t.Errorf("response %s: want the request's id and an error naming the scopes", body)
			}
		})
	}
}

// TestOAuthUnrefreshableLoginExpiry: a login whose authorization server
// gave no refresh token (the TypeScript SDK's example server) stops
// working when its access token expires. The backend's status says when,
// with the login to run, and the log warns once within
// oauth.ExpiryWarnWithin of it; a login that can be refreshed says
// nothing. Before, only `toolgate auth status` said "not refreshable".
func TestOAuthUnrefreshableLoginExpiry(t *testing.T) {
	e := newOAuthServers(t, config.TypeHTTP, true)
	c := e.stored(t)
	c.Token.RefreshToken = ""
	c.Token.Expiry = time.Now().Add(oauth.ExpiryWarnWithin / 2).Truncate(time.Second)
	if err := e.store.Save(c); err != nil {
		t.Fatal(err)
	}
	tokens := oauth.NewTokens(e.store, &oauth.Options{
		Logger:       e.logs.Logger(),
		PollInterval: 10 * time.Millisecond,
		LoginCommand: func(server string) string { return "toolgate auth login " + server + " --config /etc/toolgate.json" },
	})
	t.Cleanup(func() { tokens.Close() })
	o := testOptions(e.logs)
	o.Auth = tokens
	e.pool = startPool(t, []config.Server{{Name: "demo", Type: config.TypeHTTP, URL: e.rs.URL}}, o)
	st := statusOf(t, e.pool, "demo")
	if st.State != StateUp {
		t.Fatalf("state %s: %s", st.State, st.Err)
	}
	want := &LoginExpiry{Expires: c.Token.Expiry, Login: loginCommand}
	if le := st.LoginExpiry; le == nil || !le.Expires.Equal(want.Expires) || le.Login != want.Login {
		t.Errorf("loginExpiry = %+v, want %+v", le, want)
	}
	if le := st.ForKey().LoginExpiry; le == nil || le.Login != "toolgate auth login demo" {
		t.Errorf("loginExpiry for a key that is not admin = %+v, want the bare command", le)
	}
	b, err := json.Marshal(st)
	if err != nil || !strings.Contains(string(b), `"loginExpiry":{"expires":`) {
		t.Errorf("status JSON %s: %v", b, err)
	}
	e.echo(t, "still works until it expires")
	// The warning is logged as the connection takes the login up: the
	// backend is up, so it has been.
	logs := e.logs.String()
	if n := strings.Count(logs, "cannot be refreshed"); n != 1 || !strings.Contains(logs, "run `"+loginCommand+"` before then") {
		t.Errorf("want one warning naming the login, got %d in:\n%s", n, logs)
	}
	e.noTokensLogged(t, c)

	// A login that can be refreshed: nothing to say.
	r := newOAuthEnv(t, config.TypeHTTP, true)
	if st := statusOf(t, r.pool, "demo"); st.State != StateUp || st.LoginExpiry != nil {
		t.Errorf("refreshable login: state %s, loginExpiry %+v", st.State, st.LoginExpiry)
	}
	if strings.Contains(r.logs.String(), "cannot be refreshed") {
		t.Errorf("a refreshable login was warned of:\n%s", r.logs.String())
	}
}

// unrefreshableUp is a pool whose server demo is up on a login that cannot
// be refreshed (no refresh token), on e's clock, and that login.
func unrefreshableUp(t *testing.T) (*oauthEnv, *oauth.Credentials) {
	t.Helper()
	e := newOAuthServers(t, config.TypeHTTP, true)
	c := e.stored(t)
	c.Token.RefreshToken = ""
	if err := e.store.Save(c); err != nil {
		t.Fatal(err)
	}
	tokens := oauth.NewTokens(e.store, &oauth.Options{Logger: e.logs.Logger(), Now: e.clock.Now, PollInterval: 10 * time.Millisecond})
	t.Cleanup(func() { tokens.Close() })
	o := testOptions(e.logs)
	o.Auth = tokens
	e.pool = startPool(t, []config.Server{{Name: "demo", Type: config.TypeHTTP, URL: e.rs.URL}}, o)
	if st := statusOf(t, e.pool, "demo"); st.State != StateUp {
		t.Fatalf("state %s: %s", st.State, st.Err)
	}
	return e, c
}

// TestOAuthUnrefreshableUsedUntilExpiry: the access token of a login that
// cannot be refreshed is sent until it expires, as its warning says. It
// was taken for expired RefreshBefore (1m) early, its login file marked
// refused ("the access token expired") and the server needing a login
// while the warning logged at the same moment said "in 55s".
func TestOAuthUnrefreshableUsedUntilExpiry(t *testing.T) {
	e, c := unrefreshableUp(t)
	// 30 s before it expires: within RefreshBefore, which a login that
	// cannot be refreshed has no use for.
	e.clock.Advance(time.Until(c.Token.Expiry) - 30*time.Second)
	e.echo(t, "30 seconds before the token expires")
	if st := statusOf(t, e.pool, "demo"); st.State != StateUp || st.LoginExpiry == nil {
		t.Errorf("30 s before expiry: state %s (%s), loginExpiry %+v", st.State, st.Err, st.LoginExpiry)
	}
	if got := e.stored(t); got.Refused != "" {
		t.Errorf("the login was marked refused 30 s before it expired: %s", got.Refused)
	}
	// Once expired, it needs the login the warning named.
	e.clock.Advance(31 * time.Second)
	_, err := e.pool.CallTool(context.Background(), "demo", "echo", map[string]any{"text": "expired"})
	if err == nil || !strings.Contains(err.Error(), "the access token expired and the authorization server gave no refresh token") {
		t.Errorf("call after expiry: %v", err)
	}
}

// forgetting is oauth.Tokens that records the servers the pool tells it
// to forget.
type forgetting struct {
	*oauth.Tokens
	forgot chan string
}

func (f forgetting) Forget(server string) {
	f.forgot <- server
	f.Tokens.Forget(server)
}

// TestOAuthRemovedServerForgotten: a reload that removes a logged-in
// server, or changes its URL, has the Authorizer forget its login (the
// warning due before it expires, logged after the removal, named a
// server the config no longer had); one left as it was, or changed in
// another field (its login still applies), is not.
func TestOAuthRemovedServerForgotten(t *testing.T) {
	e := newOAuthServers(t, config.TypeHTTP, true)
	tokens := forgetting{oauth.NewTokens(e.store, &oauth.Options{Logger: e.logs.Logger(), PollInterval: 10 * time.Millisecond}), make(chan string, 4)}
	t.Cleanup(func() { tokens.Close() })
	o := testOptions(e.logs)
	o.Auth = tokens
	servers := []config.Server{
		{Name: "demo", Type: config.TypeHTTP, URL: e.rs.URL},
		{Name: "other", Type: config.TypeHTTP, URL: e.rs.URL},
		{Name: "moved", Type: config.TypeHTTP, URL: e.rs.URL},
	}
	e.pool = startPool(t, servers, o)
	other, moved := servers[1], servers[2]
	other.Headers = map[string]string{"X-Changed": "1"}
	moved.URL += "/elsewhere"
	e.pool.Reconfigure(context.Background(), []config.Server{other, moved})
	var got []string // told within Reconfigure
	for len(tokens.forgot) > 0 {
		got = append(got, <-tokens.forgot)
	}
	slices.Sort(got)
	if !slices.Equal(got, []string{"demo", "moved"}) {
		t.Errorf("forgot %q, want demo (removed) and moved (another URL)", got)
	}
	e.pool.Reconfigure(context.Background(), []config.Server{other, moved})
	if len(tokens.forgot) != 0 {
		t.Errorf("forgot %q, left as it was", <-tokens.forgot)
	}
}

// TestOAuthUnrefreshableRefusedEarly: a server that answers 401 to the
// access token of a login that cannot be refreshed before its expiry
// (revoked) has the backend need a login that says so: it said "the
// access token expired", which it had not (its loginExpiry, just shown,
// said when it would).
func TestOAuthUnrefreshableRefusedEarly(t *testing.T) {
	e, _ := unrefreshableUp(t)
	e.as.ExpireAccessTokens() // revoked at the authorization server
	_, err := e.pool.CallTool(context.Background(), "demo", "echo", map[string]any{"text": "revoked"})
	if err == nil || !strings.Contains(err.Error(), "the server refused the access token before it expired") || strings.Contains(err.Error(), "the access token expired") {
		t.Errorf("call with a revoked token: %v", err)
	}
	if got := e.stored(t); !strings.Contains(got.Refused, "before it expired") {
		t.Errorf("the login file says %q", got.Refused)
	}
}
