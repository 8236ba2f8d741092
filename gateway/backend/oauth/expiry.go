package oauth

import (
	"time"
)

// ExpiryWarnWithin is how long before the access token of a login that
// cannot be refreshed expires a gateway logs a warning with the login to
// run: the server needs that login once the token has expired, and it
// needs a person at a browser.
const ExpiryWarnWithin = 10 * time.Minute

// WhyNotRefreshable is why a login's access token cannot be refreshed,
// as the warning and the gateway's status say it.
const WhyNotRefreshable = "the authorization server gave no refresh token"

// refreshable reports whether c's access token can be renewed without a
// person: it carries a refresh token, or never expires.
func refreshable(c *Credentials) bool {
	return c.Token.RefreshToken != "" || c.Token.Expiry.IsZero()
}

// LoginExpiry is when the access token of server's login (for url) expires,
// for a login that cannot be refreshed (backend.ExpiryKeeper): the server
// needs a new login by then. False for a login that can be refreshed, or
// without a usable one (the backend needs a login then, which says so).
// The file is read again only when it changed.
func (t *Tokens) LoginExpiry(server, url string) (time.Time, bool) {
	f := t.loginFile(server, url)
	return f.expires, !f.expires.IsZero()
}

// expiryWatch is the warning due for one login's access token.
type expiryWatch struct {
	expires time.Time
	timer   *time.Timer
	warned  bool // the warning was logged
}

// Forget stops the expiry warning of server's login (backend.ExpiryKeeper):
// the server left the gateway (removed from the config, disabled, or its
// entry changed), and the warning, due later, named a login no server of
// the gateway used, with a command for a server the config no longer had.
// A login warned of already is not warned of again when the server
// comes back with it.
func (t *Tokens) Forget(server string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if w, ok := t.expiring[server]; ok && !w.warned {
		w.timer.Stop()
		delete(t.expiring, server)
	}
}

// watchExpiry logs, once per access token, a warning ExpiryWarnWithin
// before the token of c expires when c cannot be refreshed: at once when
// it is that close already, else from a timer Close stops.
func (t *Tokens) watchExpiry(server string, c *Credentials) {
	if c == nil || refreshable(c) {
		return
	}
	exp := c.Token.Expiry
	t.mu.Lock()
	defer t.mu.Unlock()
	select {
	case <-t.stop:
		return
	default:
	}
	if w, ok := t.expiring[server]; ok {
		if w.expires.Equal(exp) {
			return // warned, or the warning is due
		}
		w.timer.Stop()
	}
	w := &expiryWatch{expires: exp}
	t.expiring[server] = w
	d := exp.Add(-ExpiryWarnWithin).Sub(t.opts.Now())
	if d <= 0 {
		w.timer = time.NewTimer(0)
		w.timer.Stop()
		w.warned = true
		t.warnExpiry(server, exp)
		return
	}
	t.armExpiry(server, w, d)
}

// armExpiry sets w's timer to look at server's login in d, or in
// ExpiryRecheck when that is sooner: the warning is due at a wall time, and
// the timer's clock stands still while the machine sleeps (a laptop's lid
// closed over lunch warned an hour late, after the token had expired) and
// does not follow the wall clock when it is set. t.mu is held.
func (t *Tokens) armExpiry(server string, w *expiryWatch, d time.Duration) {
	w.timer = time.AfterFunc(min(d, t.opts.ExpiryRecheck), func() { t.expiryDue(server, w) })
}

// expiryDue is w's timer: it warns of server's login when the warning is
// due by the wall clock, else waits on.
func (t *Tokens) expiryDue(server string, w *expiryWatch) {
	exp := w.expires
	t.mu.Lock()
	current := t.expiring[server] == w
	t.mu.Unlock()
	if !current {
		return // forgotten, or another login's since
	}
	// The login may have changed since, with no request to say so.
	c, err := t.store.Load(server)
	switch {
	case err != nil || c == nil || c.Refused != "":
	case c.Token.Expiry.Equal(exp) && !refreshable(c):
		t.mu.Lock()
		current = t.expiring[server] == w
		if wait := exp.Add(-ExpiryWarnWithin).Sub(t.opts.Now()); current && wait > 0 {
			// Not due yet by the wall clock: wait on, unless stopped.
			select {
			case <-t.stop:
			default:
				t.armExpiry(server, w, wait)
			}
			t.mu.Unlock()
			return
		}
		w.warned = current
		t.mu.Unlock()
		if current {
			t.warnExpiry(server, exp)
		}
	default:
		t.watchExpiry(server, c) // a new login
	}
}

// warnExpiry logs that server's access token, expiring at exp, cannot be
// refreshed, and the login to run before then.
func (t *Tokens) warnExpiry(server string, exp time.Time) {
	t.log.Warn(ExpiryNotice(server, t.opts.LoginCommand(server), exp, t.opts.Now()), "server", server, "expires", exp.UTC().Format(time.RFC3339))
}

// ExpiryNotice is what the log, toolgate status and the console say of
// server's login, whose access token expires at exp and cannot be
// refreshed: when, and login, the command to run.
func ExpiryNotice(server, login string, exp, now time.Time) string {
	when := exp.UTC().Format("2006-01-02 15:04:05 UTC")
	if in := exp.Sub(now).Round(time.Second); in > 0 {
		return server + ": the access token of its OAuth login expires at " + when + ", in " + in.String() +
			", and cannot be refreshed (" + WhyNotRefreshable + "): run `" + login + "` before then, or its calls fail from then until you do"
	}
	return server + ": the access token of its OAuth login expired at " + when +
		" and cannot be refreshed (" + WhyNotRefreshable + "): run `" + login + "`; its calls fail until you do"
}
