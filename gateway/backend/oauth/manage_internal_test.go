package oauth

import "testing"

// TestManagement: the registration's management URI and token are kept
// only when both are there and the URI is on the registration endpoint's
// origin: the token goes to no other host.
func TestManagement(t *testing.T) {
	const endpoint = "https://as.example/register"
	for _, c := range []struct {
		name, body, uri string
	}{
		{"both", `{"client_id":"a","registration_client_uri":"https://as.example/register/a","registration_access_token":"t"}`, "https://as.example/register/a"},
		{"no token", `{"client_id":"a","registration_client_uri":"https://as.example/register/a"}`, ""},
		{"no uri", `{"client_id":"a","registration_access_token":"t"}`, ""},
		{"another host", `{"registration_client_uri":"https://evil.example/register/a","registration_access_token":"t"}`, ""},
		{"another scheme", `{"registration_client_uri":"http://as.example/register/a","registration_access_token":"t"}`, ""},
		{"another port", `{"registration_client_uri":"https://as.example:8443/register/a","registration_access_token":"t"}`, ""},
		{"relative", `{"registration_client_uri":"/register/a","registration_access_token":"t"}`, ""},
		{"not JSON", `<html>`, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			uri, tok := management([]byte(c.body), endpoint)
			if uri != c.uri || (uri != "") != (tok != "") {
				t.Errorf("management = %q, token set=%v; want %q", uri, tok != "", c.uri)
			}
		})
	}
}
