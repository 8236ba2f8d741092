package proxyenv

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
)

// refusingProxy is a proxy that answers every request (a CONNECT too)
// with status and the Proxy-Authenticate challenges; it counts them.
func refusingProxy(t *testing.T, status int, challenges ...string) (*httptest.Server, *atomic.Int32) {
	var asked atomic.Int32
	p := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		asked.Add(1)
		for _, c := range challenges {
			w.Header().Add("Proxy-Authenticate", c)
		}
		http.Error(w, "no", status)
	}))
	t.Cleanup(p.Close)
	return p, &asked
}

func TestRefusedConnectSaid(t *testing.T) {
	for _, tc := range []struct {
		name       string
		status     int
		userinfo   string
		challenges []string
		want       string
	}{
		{"407", http.StatusProxyAuthRequired, "", []string{`Basic realm="corp"`},
			"answered the CONNECT to the server with 407 Proxy Authentication Required: the proxy wants credentials: give them in HTTPS_PROXY (http://USER:PASSWORD@"},
		{"407 with credentials", http.StatusProxyAuthRequired, "alice:s3cret@", []string{`Basic realm="corp"`},
			"407 Proxy Authentication Required: the proxy refused the credentials in HTTPS_PROXY: check them"},
		{"407 negotiate", http.StatusProxyAuthRequired, "", []string{"Negotiate", "NTLM"},
			"the proxy wants Negotiate or NTLM authentication, which toolgate does not speak (Basic only): run a relay"},
		{"403", http.StatusForbidden, "", nil,
			"403 Forbidden: the proxy does not let toolgate reach this host: ask its administrators to allow it, or list the url's host in NO_PROXY"},
		{"502", http.StatusBadGateway, "", nil,
			"502 Bad Gateway: the proxy could not reach the server (the host name does not resolve from the proxy"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, asked := refusingProxy(t, tc.status, tc.challenges...)
			t.Setenv("HTTPS_PROXY", strings.Replace(p.URL, "http://", "http://"+tc.userinfo, 1))
			t.Setenv("NO_PROXY", "")
			_, err := (&http.Client{Transport: Transport()}).Get("https://mcp.corp.example/mcp")
			var re *RefusedError
			if !errors.As(err, &re) {
				t.Fatalf("err = %v, want a *RefusedError", err)
			}
			host := strings.TrimPrefix(p.URL, "http://")
			if !strings.HasPrefix(re.Error(), "the proxy "+host+" (HTTPS_PROXY in toolgate's environment) ") || !strings.Contains(re.Error(), tc.want) {
				t.Errorf("error:\n%s\nwant it to name the proxy and say:\n%s", re, tc.want)
			}
			if strings.Contains(err.Error(), "s3cret") {
				t.Errorf("the proxy's password is in the error: %s", err)
			}
			if asked.Load() == 0 {
				t.Error("the proxy was not asked")
			}
		})
	}
}

// proxyOf is the proxy tr sends a POST to u through ("" for none).
func proxyOf(tr *http.Transport, u string) (string, error) {
	req, _ := http.NewRequest(http.MethodPost, u, nil)
	p, err := tr.Proxy(req)
	if p == nil {
		return "", err
	}
	return p.String(), err
}

func TestProxyOfTheEnvironment(t *testing.T) {
	t.Setenv("HTTPS_PROXY", "")
	t.Setenv("https_proxy", "http://proxy.corp.example:3128")
	t.Setenv("NO_PROXY", ".internal.example")
	tr := Transport()
	for u, want := range map[string]string{
		"https://mcp.corp.example/mcp":     "http://proxy.corp.example:3128",
		"https://mcp.internal.example/mcp": "", // NO_PROXY
		"https://localhost:8443/mcp":       "", // loopback: never through a proxy (Go's rule)
	} {
		if got, err := proxyOf(tr, u); err != nil || got != want {
			t.Errorf("proxy of %s = %q, %v; want %q", u, got, err, want)
		}
	}
	if v := Var("https"); v != "https_proxy" {
		t.Errorf("Var(https) = %q, want the lower case one that is set", v)
	}
}

// A proxy variable Go cannot read (a password with a bare % or space) is
// ignored by Go without a word, and the request goes without a proxy: a
// host name that then does not resolve says so, never the password.
func TestUnreadableProxySaid(t *testing.T) {
	t.Setenv("HTTPS_PROXY", "http://alice:s3cr et%zz@proxy.corp.example:3128")
	t.Setenv("NO_PROXY", "")
	u, _ := url.Parse("https://mcp.corp.example/mcp")
	got := ResolveNote(u)
	want := " (HTTPS_PROXY is set, but to no URL, which Go ignores: the request went without a proxy; write it http://USER:PASSWORD@HOST:PORT"
	if !strings.HasPrefix(got, want) || strings.Contains(got, "s3cr") {
		t.Errorf("ResolveNote = %q, want it to start %q", got, want)
	}
	t.Setenv("HTTPS_PROXY", "proxy.corp.example:3128") // no scheme: read as http://
	if got := ResolveNote(u); got != "" {
		t.Errorf("ResolveNote with a proxy = %q, want none", got)
	}
}

// TestIPv6HostsAndTheProxy: NO_PROXY takes an IPv6 address in brackets
// ("[fd00::2]", as it is written in a URL), which Go's rule matched only
// with a port; and a link-local address with its zone (fe80::1%eth0: an
// interface of this machine, which no proxy can reach) never goes through
// a proxy. Both went to the proxy.
func TestIPv6HostsAndTheProxy(t *testing.T) {
	t.Setenv("HTTP_PROXY", "http://proxy.corp.example:3128")
	t.Setenv("NO_PROXY", "[fd00::2], example.org")
	tr := Transport()
	for u, want := range map[string]string{
		"http://[fd00::2]:3000/mcp":            "",
		"http://[fd00::3]:3000/mcp":            "http://proxy.corp.example:3128",
		"http://[fe80::1%25eth0]:3000/mcp":     "",
		"http://[fe80::1]:3000/mcp":            "http://proxy.corp.example:3128",
		"http://[::1]:3000/mcp":                "",
		"http://mcp.example.org:3000/mcp":      "",
		"http://[2001:db8::7]:3000/mcp":        "http://proxy.corp.example:3128",
		"http://[::ffff:127.0.0.1]:3000/mcp":   "",
		"http://[fe80::1%25eth0]:3000/mcp?x=1": "",
	} {
		if got, err := proxyOf(tr, u); err != nil || got != want {
			t.Errorf("proxy of %s = %q, %v; want %q", u, got, err, want)
		}
		pu, _ := url.Parse(u)
		if f := For(pu); (f == nil) != (want == "") {
			t.Errorf("For(%s) = %v; want %q", u, f, want)
		}
	}
}
