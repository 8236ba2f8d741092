// Package proxyenv is the HTTP proxy of toolgate's environment
// (HTTPS_PROXY, HTTP_PROXY, NO_PROXY, as Go reads them) for the requests it
// makes to remote servers and their authorization servers, and the words
// for a proxy that refuses them: which proxy, which variable names it, and
// what to change; and the words for an address where nothing listens
// (Refused). Go's own error for a refused CONNECT is the status text
// alone ("Post "https://…": Proxy Authentication Required"), which named
// no proxy at all.
package proxyenv

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"strings"
	"syscall"

	"golang.org/x/net/http/httpproxy"
)

// Transport is a clone of http.DefaultTransport whose proxy is the one
// the environment names now (Go's ProxyFromEnvironment reads it once per
// process) and whose proxy's refusal of a CONNECT is a *RefusedError.
func Transport() *http.Transport {
	t := http.DefaultTransport.(*http.Transport).Clone()
	proxy := proxyFunc()
	t.Proxy = func(r *http.Request) (*url.URL, error) { return proxy(r.URL) }
	t.OnProxyConnectResponse = func(_ context.Context, p *url.URL, req *http.Request, resp *http.Response) error {
		if resp.StatusCode == http.StatusOK {
			return nil
		}
		return &RefusedError{Proxy: p.Host, Var: Var("https"), Code: resp.StatusCode, Status: resp.Status, Credentials: p.User != nil,
			Schemes: schemes(resp.Header)}
	}
	return t
}

// proxyFunc is the proxy rule of the environment now (httpproxy's, as Go
// reads it), with two IPv6 cases of its own: a NO_PROXY entry of an IPv6
// address in brackets ("[fd00::2]", as a URL writes it), which Go's rule
// matches only with a port, matches the address; and a link-local address
// with its zone (fe80::1%eth0: an interface of this machine, which no
// proxy reaches) goes direct. Both went to the proxy.
func proxyFunc() func(*url.URL) (*url.URL, error) {
	c := httpproxy.FromEnvironment()
	entries := strings.Split(c.NoProxy, ",")
	for i, e := range entries {
		if e = strings.TrimSpace(e); strings.HasPrefix(e, "[") && strings.HasSuffix(e, "]") {
			entries[i] = e[1 : len(e)-1]
		}
	}
	c.NoProxy = strings.Join(entries, ",")
	proxy := c.ProxyFunc()
	return func(u *url.URL) (*url.URL, error) {
		if strings.Contains(u.Hostname(), "%") {
			return nil, nil
		}
		return proxy(u)
	}
}

// schemes are those of the Proxy-Authenticate challenges of h.
func schemes(h http.Header) []string {
	var s []string
	for _, c := range h.Values("Proxy-Authenticate") {
		scheme, _, _ := strings.Cut(strings.TrimSpace(c), " ")
		s = append(s, scheme)
	}
	return s
}

// AuthFix is the fix of a 407 answered to a request to u by a proxy of
// plain HTTP (HTTP_PROXY, which gets the request itself rather than a
// CONNECT), from the proxy the environment names for u and the
// challenges of the answer's headers h.
func AuthFix(u *url.URL, h http.Header) string {
	p := For(u)
	if p == nil {
		return CredentialsFix(Var(u.Scheme), "PROXY:PORT", false, schemes(h))
	}
	return CredentialsFix(Var(u.Scheme), p.Host, p.User != nil, schemes(h))
}

// For is the proxy the environment names for a request to u, nil for
// none (NO_PROXY, a loopback host, no proxy set).
func For(u *url.URL) *url.URL {
	p, err := proxyFunc()(u)
	if err != nil {
		return nil
	}
	return p
}

// ResolveNote is what to add to the fix of a host name of u that does not
// resolve, when the request went to it without a proxy: NO_PROXY kept it
// off the proxy the environment names, or none is named for its scheme,
// and a host of an office's network may resolve on its proxy alone (a
// gateway started by an MCP client, without the shell's variables). ""
// when the request went through a proxy.
func ResolveNote(u *url.URL) string {
	if u.Host == "" || For(u) != nil {
		return ""
	}
	v := Var(u.Scheme)
	if !readable(os.Getenv(v)) {
		return fmt.Sprintf(" (%s is set, but to no URL, which Go ignores: the request went without a proxy; write it http://USER:PASSWORD@HOST:PORT,"+
			" a @, :, %%, / or space in the user or password written %%40, %%3A, %%25, %%2F, %%20)", v)
	}
	if os.Getenv(v) != "" {
		return fmt.Sprintf(" (NO_PROXY keeps it off the proxy of %s)", v)
	}
	return fmt.Sprintf(" (no proxy is set: a host that only a proxy resolves needs %s in toolgate's environment)", v)
}

// readable says Go reads the value of a proxy variable as a URL (or it is
// empty), as httpproxy does: as written, or with "http://" before it. One
// it cannot read is ignored without a word, and the request goes without
// a proxy.
func readable(v string) bool {
	if v == "" {
		return true
	}
	if u, err := url.Parse(v); err == nil && u.Scheme != "" && u.Host != "" {
		return true
	}
	_, err := url.Parse("http://" + v)
	return err == nil
}

// InspectedNote is what to add to the fix of a server's certificate signed
// by an authority this machine does not trust, when the requests to
// rawURL go through a proxy: one that inspects TLS (a company's) signs
// with a CA of its own, which every server's certificate then seems to
// come from. "" when they do not.
func InspectedNote(rawURL string) string {
	u, err := url.Parse(rawURL)
	if err != nil {
		return ""
	}
	p := For(u)
	if p == nil {
		return ""
	}
	return fmt.Sprintf("; the requests go through the proxy %s (%s), and a proxy that inspects TLS signs with a CA of its own: give that CA then, "+
		"in \"tls.ca\" or, for every server, in SSL_CERT_FILE (a PEM file of the system's CAs and it: it replaces the system's trust store)", p.Host, Var(u.Scheme))
}

// Var is the environment variable that names the proxy of a URL of the
// scheme ("https" or "http"): the one set, in upper case unless only
// the lower case one is (Go reads the upper case one first).
func Var(scheme string) string {
	v := "HTTP_PROXY"
	if scheme == "https" {
		v = "HTTPS_PROXY"
	}
	if os.Getenv(v) == "" && os.Getenv(strings.ToLower(v)) != "" {
		return strings.ToLower(v)
	}
	return v
}

// RefusedError is a proxy's answer other than 200 to the CONNECT that
// opens the tunnel to an https server: the server never got the request.
type RefusedError struct {
	// Proxy is the proxy's host:port (never its credentials).
	Proxy string
	// Var is the variable that names it (HTTPS_PROXY).
	Var    string
	Code   int
	Status string // "407 Proxy Authentication Required"
	// Credentials says the proxy URL carries credentials (user:password@).
	Credentials bool
	// Schemes are those of the Proxy-Authenticate challenges (Basic,
	// Negotiate, NTLM).
	Schemes []string
	// Method, for a plain http URL's request, which the proxy gets itself
	// (no CONNECT), is that request's method ("POST"), and Sign the
	// header of the answer that shows the proxy made it (OwnAnswer).
	Method, Sign string
}

func (e *RefusedError) Error() string { return "the proxy " + e.Proxy + e.Tail() }

// Tail is the words of the error after the proxy's address, for a message
// that keeps the address apart.
func (e *RefusedError) Tail() string {
	if e.Method != "" {
		return fmt.Sprintf(" (%s in toolgate's environment) answered the %s for the server itself with %s (%s): %s", e.Var, e.Method, e.Status, e.Sign, e.fix())
	}
	return fmt.Sprintf(" (%s in toolgate's environment) answered the CONNECT to the server with %s: %s", e.Var, e.Status, e.fix())
}

// OwnAnswer is the proxy's refusal when resp, the answer to a request to
// a plain http URL (which the proxy of the environment gets itself, with
// no CONNECT), shows that the proxy made it rather than relayed the
// server's: Squid's X-Squid-Error, or a last Proxy-Status member (RFC
// 9209: the proxy nearest toolgate) with an error. nil when the answer
// does not say so: a Via is put on relayed answers too, and a body that
// is not MCP is no sign (a server's own 403 page is none either), so such
// an answer is still said as the server's.
func OwnAnswer(resp *http.Response) *RefusedError {
	u := resp.Request.URL
	if u.Scheme != "http" || resp.StatusCode < 400 {
		return nil
	}
	p := For(u)
	if p == nil {
		return nil
	}
	sign := ""
	if v := resp.Header.Get("X-Squid-Error"); v != "" {
		sign = "X-Squid-Error: " + v
	} else if ps := resp.Header.Values("Proxy-Status"); len(ps) > 0 {
		members := strings.Split(ps[len(ps)-1], ",")
		last := strings.TrimSpace(members[len(members)-1])
		if strings.Contains(last, ";error=") || strings.Contains(last, "; error=") {
			sign = "Proxy-Status: " + last
		}
	}
	if sign == "" {
		return nil
	}
	return &RefusedError{Proxy: p.Host, Var: Var(u.Scheme), Code: resp.StatusCode, Status: resp.Status, Credentials: p.User != nil,
		Schemes: schemes(resp.Header), Method: resp.Request.Method, Sign: sign}
}

// noProxy is the way around a proxy, for a server reached without it.
const noProxy = "list the url's host in NO_PROXY if the server is reached without the proxy"

// CheckFix is the fix of a proxy that variable names and that cannot be
// reached (Go's "proxyconnect" error): its address, or the way around it.
func CheckFix(variable string) string { return "check " + variable + ", or " + noProxy }

// Fix is what to do about err, a request's failure, when the proxy of the
// environment for a URL of scheme is why ("" otherwise): that it cannot
// be reached, or said already, for a refusal (RefusedError says its fix).
// ok says the proxy is why.
func Fix(err error, scheme string) (fix string, ok bool) {
	var re *RefusedError
	if errors.As(err, &re) {
		return "", true
	}
	var op *net.OpError
	if errors.As(err, &op) && op.Op == "proxyconnect" {
		return CheckFix(Var(scheme)) + " (toolgate's environment)", true
	}
	return "", false
}

func (e *RefusedError) fix() string {
	switch {
	case e.Code == http.StatusProxyAuthRequired:
		return CredentialsFix(e.Var, e.Proxy, e.Credentials, e.Schemes)
	case e.Code == http.StatusForbidden:
		return "the proxy does not let toolgate reach this host: ask its administrators to allow it, or " + noProxy
	case e.Code == http.StatusBadGateway || e.Code == http.StatusServiceUnavailable || e.Code == http.StatusGatewayTimeout:
		return "the proxy could not reach the server (the host name does not resolve from the proxy, or the server is down or slow): check the url's host and port, and that the server is running"
	}
	return CheckFix(e.Var)
}

// CredentialsFix is the fix of a 407 from the proxy at proxy (host:port)
// that variable names: the credentials to give it in the variable, or that
// those given were refused; a proxy that asks for Negotiate or NTLM alone,
// which Go does not speak, needs a relay on this machine.
func CredentialsFix(variable, proxy string, credentials bool, schemes []string) string {
	basic := len(schemes) == 0
	for _, s := range schemes {
		basic = basic || strings.EqualFold(s, "Basic")
	}
	switch {
	case !basic:
		return fmt.Sprintf("the proxy wants %s authentication, which toolgate does not speak (Basic only): run a relay on this machine that logs in to it (cntlm, px) and set %s to the relay's address, or %s",
			strings.Join(schemes, " or "), variable, noProxy)
	case credentials:
		return fmt.Sprintf("the proxy refused the credentials in %s: check them (a character such as @, : or %% in the user or password written %%40, %%3A, %%25)", variable)
	}
	return fmt.Sprintf("the proxy wants credentials: give them in %s (http://USER:PASSWORD@%s) where toolgate starts, or %s", variable, proxy, noProxy)
}

// A Refusal is a connection refused (ECONNREFUSED): nothing listens at
// Addr, the address it was made to ("" when the error does not give it).
type Refusal struct{ Addr string }

// RefusedSaid follows a Refusal's address: what the system said.
const RefusedSaid = " (connection refused)"

// RefusedAfter follows a Refusal's address: what it means and what to
// check.
const RefusedAfter = RefusedSaid + ": check that the server is running, and the url's host and port"

// Refused is the Refusal err is, when it is one: a connection to a
// remote server, or to its authorization server, that nothing took.
// Go's own words, "dial tcp 127.0.0.1:1: connect: connection refused",
// are kept in err.
func Refused(err error) (Refusal, bool) {
	if !errors.Is(err, syscall.ECONNREFUSED) {
		return Refusal{}, false
	}
	var op *net.OpError
	if errors.As(err, &op) && op.Addr != nil {
		return Refusal{Addr: op.Addr.String()}, true
	}
	return Refusal{}, true
}

// Before is what precedes r's address: "nothing listens at ", or, without
// one, "nothing listens at the url's address".
func (r Refusal) Before() string {
	if r.Addr == "" {
		return "nothing listens at the url's address"
	}
	return "nothing listens at "
}

// Said is r without the check: `nothing listens at 127.0.0.1:1
// (connection refused)`, for a caller that names its own fix (no gateway
// at the address: start one).
func (r Refusal) Said() string { return r.Before() + r.Addr + RefusedSaid }

// Error is err said as r.Said(); errors.Is and As still see err.
func (r Refusal) Error(err error) error { return refusedError{r.Said(), err} }

type refusedError struct {
	said string
	err  error
}

func (e refusedError) Error() string { return e.said }
func (e refusedError) Unwrap() error { return e.err }

// String is r in the gateway's words: `nothing listens at 127.0.0.1:1
// (connection refused): check …`.
func (r Refusal) String() string { return r.Before() + r.Addr + RefusedAfter }
