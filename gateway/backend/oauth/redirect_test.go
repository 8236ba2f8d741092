package oauth

import (
	"context"
	"net"
	"net/http"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/oauthex"
)

// TestNoRegistrationNamesTheRedirectURI: an authorization server without
// dynamic client registration is told of with the redirect URI to
// register: the entry's redirectUri when it has one (it said
// http://127.0.0.1/callback on any port, which that login does not send).
func TestNoRegistrationNamesTheRedirectURI(t *testing.T) {
	asm := &oauthex.AuthServerMeta{Issuer: "https://as.example"}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	_, port, _ := net.SplitHostPort(ln.Addr().String())
	ln.Close()
	for _, tc := range []struct{ redirect, want string }{
		{"", "redirect URI http://127.0.0.1" + CallbackPath + " on any port"},
		{"http://localhost:0/oauth/cb", `redirect URI http://localhost/oauth/cb on any port, the entry's "oauth": {"redirectUri"})`},
		{"http://[::1]/cb", `redirect URI http://[::1]/cb on any port, the entry's "oauth": {"redirectUri"})`},
		{"http://localhost:" + port, `redirect URI http://localhost:` + port + `, the entry's "oauth": {"redirectUri"})`},
	} {
		_, _, err := listenAndRegister(context.Background(), http.DefaultClient, Server{Name: "demo", RedirectURI: tc.redirect}, asm, nil, nil, "toolgate")
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("redirectUri %q: %v, want it to say %q", tc.redirect, err, tc.want)
		}
	}
}
