package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/toolgate/toolgate/gateway"
	"github.com/toolgate/toolgate/gateway/config"
	"github.com/toolgate/toolgate/internal/proxyenv"
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
	ca   string // --ca: CAs trusted besides the system's, when nothing is pinned
	// down is what toolgate connect says when nothing answers at addr,
	// which it fell back to: the gateways it passed over and the fix.
	down string
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

// anyPort says the address addr (host:port) has port 0: the gateway takes
// a free port at each start, which only its status socket names.
func anyPort(addr string) bool {
	_, port, err := net.SplitHostPort(addr)
	return err == nil && port == "0"
}

// configGateway is the front of a gateway on dataDir serving config (its
// path as given), found by its status socket; false when none does.
func configGateway(ctx context.Context, dataDir, config string, timeout time.Duration) (frontTarget, bool) {
	for _, lg := range localGateways(ctx, dataDir, timeout) {
		if p := lg.rep.Process; lg.err == nil && p != nil && p.Transport == "http" && p.Addr != "" && servesConfig(p, config) {
			return processFront(p), true
		}
	}
	return frontTarget{}, false
}

// anyPortError is what status and health say when no gateway on dataDir
// serves config, whose toolgate.http.addr addr has port 0.
func anyPortError(dataDir, config, addr string) error {
	return fmt.Errorf("no gateway on the data folder %s serves %s, whose toolgate.http.addr %s takes a free port at each start: start one (toolgate serve --config %s), or pass --addr with the port its log's `serving MCP over streamable HTTP` names",
		dataDir, config, addr, config)
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
	var c *tls.Config
	switch {
	case t.pin != "":
		c = tlsfiles.Pinned(t.pin)
	case t.ca != "":
		c, _ = tlsfiles.Client(t.ca, "", "") // checkCA read it; gone since: the system's store, and the fix names --ca
	}
	if c == nil {
		return http.DefaultClient
	}
	return tlsHTTPClient(c, 0)
}

// tlsHTTPClient is an HTTP client over a transport of its own with the TLS
// settings c (nil: the system's trust store), and timeout (0: the
// context's), through the proxy of the environment (proxyenv: a refusal
// names the proxy).
func tlsHTTPClient(c *tls.Config, timeout time.Duration) *http.Client {
	tr := proxyenv.Transport()
	tr.TLSClientConfig = c
	return &http.Client{Transport: tr, Timeout: timeout}
}

// caFlag is the help of --ca (connect, status).
const caFlag = "CA certificates (a PEM file) to trust besides the system's, for a gateway serving HTTPS with a certificate from a private CA"

// checkCA is nil when --ca is empty or names a file of PEM certificates,
// else a usage error that says what is wrong with it.
func checkCA(ca string) error {
	if ca == "" {
		return nil
	}
	if _, err := tlsfiles.Client(ca, "", ""); err != nil {
		var fe *tlsfiles.FieldError
		if errors.As(err, &fe) {
			err = fe.Err
		}
		return usageError{fmt.Errorf("--ca: %w", err)}
	}
	return nil
}

// gatewayTLSFix says what to do about err, a failed request to a gateway's
// HTTPS front, when the gateway's certificate is why ("" otherwise); ca is
// --ca.
func gatewayTLSFix(err error, ca string) string {
	p := tlsfiles.Diagnose(err)
	switch {
	case p == nil:
		return ""
	case p.UnknownAuthority && ca != "":
		return fmt.Sprintf("the gateway's certificate is signed by none of the CAs in --ca %s nor by one this machine trusts: give the CA that signed it (its issuer, openssl s_client -showcerts tells)", ca)
	case p.UnknownAuthority:
		return "the gateway's certificate is signed by an authority this machine does not trust (a private CA, or a self-signed certificate): give that CA's certificate, a PEM file, with --ca FILE"
	case p.CommonName != "":
		return fmt.Sprintf("the gateway's certificate names its host in the Common Name only (CN=%s), which Go clients, like browsers, no longer read: make it again with its names in subjectAltName (openssl req -x509 … -addext \"subjectAltName=DNS:%s\")", p.CommonName, p.CommonName)
	case p.Host != "":
		return fmt.Sprintf("the gateway's certificate is for %v, not %s: give --addr with a name it holds", p.Names, p.Host)
	}
	return fmt.Sprintf("the gateway's certificate is not valid now (it is %s): renew it on the gateway (toolgate status there says so), or this machine's clock is wrong", p.Validity())
}

// httpsOnly is an error for resp when it is Go's answer to plain HTTP sent
// to an HTTPS server (400, "Client sent an HTTP request to an HTTPS
// server."), else nil; it reads the body of such an answer.
func httpsOnly(resp *http.Response, u string) error {
	if resp.StatusCode != http.StatusBadRequest {
		return nil
	}
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	if !gateway.PlainToHTTPS(b) {
		return nil
	}
	host := u
	if pu, err := url.Parse(u); err == nil {
		host = pu.Host
	}
	return fmt.Errorf("the gateway at %s serves HTTPS (toolgate.http.tls): use --addr https://%s, or --config FILE of that gateway, which also trusts its certificate", host, host)
}

// certHosts are the names leaf, the front's certificate, is issued for,
// which the front accepts in a request's Host as it does
// toolgate.http.allowedHosts: the names clients use. A Host check guards
// against DNS rebinding, which a certificate defeats on its own (the
// rebinding name is not the certificate's, so the handshake fails).
// Wildcard names are left to allowedHosts.
func certHosts(leaf *x509.Certificate) []string {
	if leaf == nil {
		return nil
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

// warnExpiry logs, at start, a front certificate that expired, is not
// valid yet or expires within tlsfiles.RenewWithin.
func warnExpiry(log *slog.Logger, file string, leaf *x509.Certificate, now time.Time) {
	if leaf == nil {
		return
	}
	line, problem := gateway.FrontExpiry(file, leaf.NotBefore, leaf.NotAfter, now)
	switch {
	case problem == tlsfiles.Expired:
		log.Error("the HTTPS front's certificate has expired: clients refuse it", "file", file, "not_after", leaf.NotAfter, "fix", "renew it: write the new certificate and key over the files (served from the next handshake, no restart)")
	case problem == tlsfiles.NotYetValid:
		log.Error("the HTTPS front's certificate is not valid yet by this machine's clock: clients whose clock agrees refuse it", "file", file, "not_before", leaf.NotBefore,
			"fix", "if it was issued just now, this machine's clock is behind: set it right (timedatectl); else serve a certificate valid now")
	case leaf.NotAfter.Sub(now) < tlsfiles.RenewWithin:
		log.Warn("the HTTPS front's certificate expires soon", "file", file, "not_after", leaf.NotAfter, "detail", line)
	}
}

// warnNoNames logs, at start, a front certificate that names no host in
// subjectAltName, only in its subject's CN (openssl req -subj /CN=host
// without -addext): Go clients and browsers read no name there, so they
// refuse it for every name, and certHosts has none for the Host check.
func warnNoNames(log *slog.Logger, file string, leaf *x509.Certificate) {
	if leaf == nil || len(leaf.DNSNames) > 0 || len(leaf.IPAddresses) > 0 || leaf.Subject.CommonName == "" {
		return
	}
	cn := leaf.Subject.CommonName
	log.Warn("the HTTPS front's certificate names no host in subjectAltName, only in its Common Name, which clients no longer read: they refuse it for every name", "file", file, "cn", cn,
		"fix", fmt.Sprintf("make it again with its names in subjectAltName (openssl req -x509 … -addext \"subjectAltName=DNS:%s\"): read at the next handshake", cn))
}

// certChanged logs a change of the front certificate's files, seen at a
// handshake or a status request: the renewed certificate served, or why
// the files cannot be read (the one read before is served meanwhile).
func certChanged(log *slog.Logger, file string, c *tlsfiles.ServerCert, err error) {
	if err != nil {
		log.Warn("the HTTPS front's certificate files changed but cannot be read: the certificate read before is served", "file", file, "err", err,
			"fix", "write the certificate (its chain after it) and its private key whole, in PEM form, over the files: read at the next handshake")
		return
	}
	if leaf := c.Leaf(); leaf != nil {
		log.Info("the HTTPS front serves the certificate of its files", "file", file, "not_after", leaf.NotAfter)
	}
}
