package oauth_test

import (
	"context"
	"log/slog"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/toolgate/toolgate/gateway/backend/oauth"
)

// warnings is a slog handler that hands each warning's message to a
// channel, for a test to wait on.
type warnings chan string

func (w warnings) Enabled(_ context.Context, l slog.Level) bool { return l >= slog.LevelWarn }
func (w warnings) Handle(_ context.Context, r slog.Record) error {
	w <- r.Message
	return nil
}
func (w warnings) WithAttrs([]slog.Attr) slog.Handler { return w }
func (w warnings) WithGroup(string) slog.Handler      { return w }

// TestExpiryWarningTimer: a login that cannot be refreshed, taken up
// longer than ExpiryWarnWithin before its access token expires, is warned
// of when that window opens (from a timer: an idle gateway makes no
// request that would notice), once, however many connections take it up.
func TestExpiryWarningTimer(t *testing.T) {
	store := oauth.NewStore(t.TempDir())
	exp := time.Now().Add(oauth.ExpiryWarnWithin + 100*time.Millisecond)
	if err := store.Save(&oauth.Credentials{Server: "demo", URL: "http://127.0.0.1:1/mcp", Token: oauth.Token{AccessToken: "at", Expiry: exp}}); err != nil {
		t.Fatal(err)
	}
	got := make(warnings, 4)
	tokens := oauth.NewTokens(store, &oauth.Options{Logger: slog.New(got)})
	t.Cleanup(func() { tokens.Close() })
	tokens.Transport("demo", "http://127.0.0.1:1/mcp", http.DefaultTransport, nil)
	tokens.Transport("demo", "http://127.0.0.1:1/mcp", http.DefaultTransport, nil) // a reconnect
	if e, ok := tokens.LoginExpiry("demo", "http://127.0.0.1:1/mcp"); !ok || !e.Equal(exp) {
		t.Errorf("LoginExpiry = %v, %v; want %v", e, ok, exp)
	}
	msg := <-got
	if !strings.Contains(msg, "demo: the access token of its OAuth login expires at ") || !strings.Contains(msg, "run `toolgate auth login demo` before then") {
		t.Errorf("warning %q", msg)
	}
	// Within the window now: a connection that took the login up again
	// would warn at once, were it not warned of already.
	tokens.Transport("demo", "http://127.0.0.1:1/mcp", http.DefaultTransport, nil)
	if len(got) != 0 {
		t.Errorf("warned again: %q", <-got)
	}
}

// TestExpiryWarningFollowsWallClock: the warning is due at a wall time, and
// a timer's clock stands still while the machine sleeps. A login expiring in
// 2 h, then the wall clock 1 h 55 m on (a laptop that slept, or a clock
// set): the warning comes at once (within ExpiryRecheck), not 1 h 50 m of
// the timer's clock later, after the token has expired.
func TestExpiryWarningFollowsWallClock(t *testing.T) {
	base := time.Now()
	var ahead atomic.Int64
	now := func() time.Time { return base.Add(time.Duration(ahead.Load())) }
	store := oauth.NewStore(t.TempDir())
	exp := base.Add(2 * time.Hour).Truncate(time.Second)
	if err := store.Save(&oauth.Credentials{Server: "demo", URL: "http://127.0.0.1:1/mcp", Token: oauth.Token{AccessToken: "at", Expiry: exp}}); err != nil {
		t.Fatal(err)
	}
	got := make(warnings, 4)
	tokens := oauth.NewTokens(store, &oauth.Options{Logger: slog.New(got), Now: now, ExpiryRecheck: 5 * time.Millisecond})
	t.Cleanup(func() { tokens.Close() })
	tokens.Transport("demo", "http://127.0.0.1:1/mcp", http.DefaultTransport, nil)
	ahead.Store(int64(time.Hour + 55*time.Minute))
	select {
	case msg := <-got:
		if !strings.Contains(msg, "expires at ") || !strings.Contains(msg, ", in 5m0s,") && !strings.Contains(msg, ", in 4m59s,") {
			t.Errorf("warning %q, want it due in 5 minutes", msg)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no warning 5 minutes before the token expires by the wall clock")
	}
}

// TestExpiryWarningForgotten: a server that left the gateway (a reload
// removed it) is not warned of when its login's window opens: the warning
// named a login no server used, and a command for a server the config no
// longer had. One warned of already is not warned of again when it
// comes back.
func TestExpiryWarningForgotten(t *testing.T) {
	store := oauth.NewStore(t.TempDir())
	const url = "http://127.0.0.1:1/mcp"
	now := time.Now()
	for server, exp := range map[string]time.Time{
		"removed": now.Add(oauth.ExpiryWarnWithin + time.Second),           // forgotten well before
		"kept":    now.Add(oauth.ExpiryWarnWithin + 1500*time.Millisecond), // warned of after "removed" would be
		"close":   now.Add(oauth.ExpiryWarnWithin / 2),                     // warned of at once
	} {
		if err := store.Save(&oauth.Credentials{Server: server, URL: url, Token: oauth.Token{AccessToken: "at", Expiry: exp}}); err != nil {
			t.Fatal(err)
		}
	}
	got := make(warnings, 8)
	tokens := oauth.NewTokens(store, &oauth.Options{Logger: slog.New(got)})
	t.Cleanup(func() { tokens.Close() })
	tokens.Transport("close", url, http.DefaultTransport, nil)
	if msg := <-got; !strings.HasPrefix(msg, "close: ") {
		t.Fatalf("warning %q, want close's", msg)
	}
	tokens.Forget("close")
	tokens.Transport("close", url, http.DefaultTransport, nil) // enabled again
	tokens.Transport("removed", url, http.DefaultTransport, nil)
	tokens.Transport("kept", url, http.DefaultTransport, nil)
	tokens.Forget("removed")
	if msg := <-got; !strings.HasPrefix(msg, "kept: ") {
		t.Errorf("warning %q, want kept's only", msg)
	}
	if len(got) != 0 {
		t.Errorf("warned again: %q", <-got)
	}
}
