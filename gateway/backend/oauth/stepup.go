package oauth

import (
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/oauthex"
)

// MaxStepUpScope caps the scopes a step-up record holds, as the length of
// their scope string (space-separated): a server that asks for ever more
// scopes on each 403 must not make the login file grow without bound.
// Scopes past it are left out of the record (the gateway's error still
// names them, up to its own bound); the config's oauth.scopes can ask for
// them.
const MaxStepUpScope = 1024

// PendingScopes are the scopes of the step-up the server asked for that no
// login has been granted yet (nil for none).
func (l *Credentials) PendingScopes() []string {
	if l == nil || l.StepUp == nil {
		return nil
	}
	return l.StepUp.Scopes
}

// askStepUp adds to l's step-up record the scopes of asked that l was not
// granted and that the record does not hold yet, as long as the record's
// scope string stays within MaxStepUpScope; it reports whether it added
// any. A scope that is not a valid scope-token (RFC 6749 §3.3) is left out.
func askStepUp(l *Credentials, asked []string, now time.Time) bool {
	pending := slices.Clone(l.PendingScopes())
	size := len(strings.Join(pending, " "))
	added := false
	for _, s := range asked {
		n := len(s)
		if len(pending) > 0 {
			n++ // the space before it
		}
		// The size first: a 403 may ask for a million scopes, each
		// compared with those the record holds.
		if size+n > MaxStepUpScope || !scopeToken(s) || slices.Contains(l.Scopes, s) || slices.Contains(pending, s) {
			continue
		}
		pending, size, added = append(pending, s), size+n, true
	}
	if added {
		l.StepUp = &StepUp{Scopes: pending, Asked: now}
	}
	return added
}

// grant clears from l's step-up record the scopes l now has; the record
// goes when none is left.
func (l *Credentials) grant() {
	if l.StepUp == nil {
		return
	}
	left := slices.DeleteFunc(slices.Clone(l.StepUp.Scopes), func(s string) bool { return slices.Contains(l.Scopes, s) })
	if len(left) == 0 {
		l.StepUp = nil
		return
	}
	l.StepUp.Scopes = left
}

// scopeToken reports whether s is a scope-token of RFC 6749 §3.3:
// 1*( %x21 / %x23-5B / %x5D-7E ), no space, quote or backslash.
func scopeToken(s string) bool {
	if s == "" || len(s) > MaxStepUpScope {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c < 0x21 || c > 0x7e || c == '"' || c == '\\' {
			return false
		}
	}
	return true
}

// insufficientScope returns the scopes a 403's Bearer challenge asks for
// (InsufficientScope); nil for any other answer.
func insufficientScope(h http.Header) []string {
	return strings.Fields(InsufficientScope(h))
}

// InsufficientScope returns the scope string a 403's Bearer challenge
// asks for: error="insufficient_scope" with a scope (RFC 6750 §3.1; the
// MCP 2025-11-25 step-up), or a scope with no error code, as go-sdk's
// middleware sends it. "" for any other answer.
func InsufficientScope(h http.Header) string {
	cs, err := oauthex.ParseWWWAuthenticate(h.Values("WWW-Authenticate"))
	if err != nil {
		return ""
	}
	for _, c := range cs {
		if e := c.Params["error"]; c.Scheme == "bearer" && (e == "insufficient_scope" || e == "" && c.Params["scope"] != "") {
			return c.Params["scope"]
		}
	}
	return ""
}

// union is a's scopes, then those of each of more not in it yet.
func union(a []string, more ...[]string) []string {
	out := slices.Clone(a)
	for _, m := range more {
		for _, s := range m {
			if !slices.Contains(out, s) {
				out = append(out, s)
			}
		}
	}
	return out
}
