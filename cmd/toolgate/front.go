package main

import (
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"

	"github.com/toolgate/toolgate/gateway"
	"github.com/toolgate/toolgate/gateway/config"
	"github.com/toolgate/toolgate/internal/tlsfiles"
)

// How a command reaches a gateway's HTTP front, which serves HTTPS when
// its config has toolgate.http.tls.

// frontTarget is a gateway's front as a command reaches it: its address
// (host:port or URL) and, when it serves HTTPS with a certificate this
// machine holds, that certificate's file, which the command pins (it
// reaches the gateway at 127.0.0.1, not at the name the certificate is
// issued for).
type frontTarget struct {
	addr string
	tls  bool   // HTTPS; addr without a scheme gets https://
	pin  string // the certificate file to trust exactly ("" = the system's trust store)
}

// configFront is the front of the gateway serving cfg: its http.addr and
// http.tls.
func configFront(cfg *config.File) frontTarget {
	t := frontTarget{addr: cfg.Toolgate.HTTP.Addr}
	if c := cfg.Toolgate.HTTP.TLS; c != nil {
		t.tls, t.pin = true, c.Cert
	}
	return t
}

// processFront is the front of a gateway found on the data folder.
func processFront(p *gateway.ProcessInfo) frontTarget {
	return frontTarget{addr: p.Addr, tls: p.TLS, pin: p.TLSCert}
}

// url is the front's URL (gatewayURL's rules), https when it serves TLS
// and addr names no scheme.
func (t frontTarget) url() (*url.URL, error) {
	u, err := gatewayURL(t.addr)
	if err == nil && t.tls && !strings.Contains(t.addr, "://") {
		u.Scheme = "https"
	}
	return u, err
}

// client is the HTTP client of requests to the front.
func (t frontTarget) client() *http.Client {
	if t.pin == "" {
		return http.DefaultClient
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.TLSClientConfig = tlsfiles.Pinned(t.pin)
	return &http.Client{Transport: tr}
}

// httpsOnly is an error for resp when it is Go's answer to plain HTTP sent
// to an HTTPS server (400, "Client sent an HTTP request to an HTTPS
// server."), else nil; it reads the body of such an answer.
func httpsOnly(resp *http.Response, u string) error {
	if resp.StatusCode != http.StatusBadRequest {
		return nil
	}
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	if !strings.Contains(string(b), "HTTP request to an HTTPS server") {
		return nil
	}
	host := u
	if pu, err := url.Parse(u); err == nil {
		host = pu.Host
	}
	return fmt.Errorf("the gateway at %s serves HTTPS (toolgate.http.tls): use --addr https://%s, or --config FILE of that gateway, which also trusts its certificate", host, host)
}

// certHosts are the names the front's certificate (the PEM file at path)
// is issued for, which the front accepts in a request's Host as it does
// toolgate.http.allowedHosts: the names clients use. A Host check guards
// against DNS rebinding, which a certificate defeats on its own (the
// rebinding name is not the certificate's, so the handshake fails).
// Wildcard names are left to allowedHosts.
func certHosts(path string) []string {
	leaf, err := tlsfiles.Leaf(path)
	if err != nil {
		return nil // checked when the config was read; the handshake says the rest
	}
	var out []string
	for _, n := range leaf.DNSNames {
		if !strings.Contains(n, "*") {
			out = append(out, n)
		}
	}
	for _, ip := range leaf.IPAddresses {
		out = append(out, ip.String())
	}
	return out
}
