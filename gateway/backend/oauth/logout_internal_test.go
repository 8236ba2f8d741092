package oauth

import (
	"context"
	"net/http"
	"net/http/httptest"
	"net/url"
	"testing"
)

// TestRevokeClientAuth: the revocation request names the client as its
// token requests do (RFC 7009 §2.1): client_id in the form for a public
// client, with client_secret for client_secret_post, HTTP Basic (each part
// form-encoded, RFC 6749 §2.3.1) for client_secret_basic.
func TestRevokeClientAuth(t *testing.T) {
	for _, tc := range []struct {
		method, secret string
		form           url.Values // the client's fields of the form
		basic          [2]string  // user, password ("" for none)
	}{
		{method: "none", form: url.Values{"client_id": {"c 1"}}},
		{method: "client_secret_post", secret: "s&1", form: url.Values{"client_id": {"c 1"}, "client_secret": {"s&1"}}},
		{method: "client_secret_basic", secret: "s&1", basic: [2]string{"c+1", "s%261"}},
	} {
		t.Run(tc.method, func(t *testing.T) {
			var got *http.Request
			hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				_ = r.ParseForm()
				got = r
			}))
			defer hs.Close()
			c := Client{ID: "c 1", Secret: tc.secret, AuthMethod: tc.method}
			if err := revoke(context.Background(), hs.Client(), hs.URL, c, "tok", "refresh_token"); err != nil {
				t.Fatal(err)
			}
			f := got.PostForm
			if f.Get("token") != "tok" || f.Get("token_type_hint") != "refresh_token" || got.Header.Get("Content-Type") != "application/x-www-form-urlencoded" {
				t.Errorf("form %v, content type %q", f, got.Header.Get("Content-Type"))
			}
			for _, k := range []string{"client_id", "client_secret"} {
				if f.Get(k) != tc.form.Get(k) {
					t.Errorf("%s = %q, want %q", k, f.Get(k), tc.form.Get(k))
				}
			}
			user, pass, ok := got.BasicAuth()
			if ok != (tc.basic[0] != "") || user != tc.basic[0] || pass != tc.basic[1] {
				t.Errorf("basic auth %q %q %v, want %q", user, pass, ok, tc.basic)
			}
		})
	}
}
