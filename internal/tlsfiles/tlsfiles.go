// Package tlsfiles builds TLS settings from PEM files: a remote server's
// "tls" entry (config.TLS: CAs trusted besides the system's, a client
// certificate for servers that ask for one), and the HTTP front's
// certificate (toolgate.http.tls). One place reads the files, so the
// config's check, the connections and the OAuth requests agree on them;
// certificates are read again when their files change (renewals).
package tlsfiles

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"
)

// FieldError is a problem with one of the files, named by its field
// ("ca", "cert", "key") so that the config's error names it too.
type FieldError struct {
	Field string
	Err   error
}

func (e *FieldError) Error() string { return e.Err.Error() }
func (e *FieldError) Unwrap() error { return e.Err }

// Client is the TLS client config of ca (PEM certificates trusted besides
// the system's roots; "" for the system's alone) and cert/key (a client
// certificate and its key, both or neither). The files are read now; the
// client certificate is read again at a handshake after either file
// changed (a renewal by cert-manager or certbot), so a renewed certificate
// is used without a restart. A renewed CA file applies when the server
// connects again (at a restart, or a config reload that changes its entry).
func Client(ca, cert, key string) (*tls.Config, error) {
	c := &tls.Config{MinVersion: tls.VersionTLS12}
	if ca != "" {
		pool, err := roots(ca)
		if err != nil {
			return nil, &FieldError{"ca", err}
		}
		c.RootCAs = pool
	}
	switch {
	case cert == "" && key == "":
		return c, nil
	case cert == "":
		return nil, &FieldError{"cert", errors.New(`is missing: "key" needs the certificate it belongs to: add "cert" (a PEM file), or remove "key"`)}
	case key == "":
		return nil, &FieldError{"key", errors.New(`is missing: "cert" needs its private key: add "key" (a PEM file), or remove "cert"`)}
	}
	kp, err := loadPair(cert, key)
	if err != nil {
		return nil, err
	}
	c.GetClientCertificate = func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return kp.get() }
	return c, nil
}

// ServerCert is a server's certificate read from its files, and read again
// at a handshake after either changed, so a renewed certificate is served
// without a restart (a renewal caught half-written keeps the previous one).
type ServerCert struct{ kp *keyPair }

// Server reads the certificate cert (PEM, its chain after it) and its
// private key.
func Server(cert, key string) (*ServerCert, error) {
	switch {
	case cert == "":
		return nil, &FieldError{"cert", errors.New(`is missing: give the server's certificate (a PEM file, its chain after it) in "cert" and its private key in "key"`)}
	case key == "":
		return nil, &FieldError{"key", errors.New(`is missing: give the private key (a PEM file) of "cert"`)}
	}
	kp, err := loadPair(cert, key)
	if err != nil {
		return nil, err
	}
	return &ServerCert{kp}, nil
}

// Config is the TLS config of a server presenting the certificate.
func (s *ServerCert) Config() *tls.Config {
	return &tls.Config{MinVersion: tls.VersionTLS12, GetCertificate: func(*tls.ClientHelloInfo) (*tls.Certificate, error) { return s.kp.get() }}
}

// Leaf is the certificate served from now on: the files' once they
// changed and read whole.
func (s *ServerCert) Leaf() *x509.Certificate {
	c, err := s.kp.get()
	if err != nil || c == nil {
		return nil
	}
	return c.Leaf // set by tls.X509KeyPair
}

// Fault says why the certificate's files, changed since the certificate
// served was read, cannot be read, and since when; nil while they are the
// ones served. The files are looked at now.
func (s *ServerCert) Fault() (since time.Time, err error) {
	_, _ = s.kp.get()
	s.kp.mu.Lock()
	defer s.kp.mu.Unlock()
	return s.kp.faultSince, s.kp.fault
}

// OnChange sets f, told once for each change of the files seen (at a
// handshake, or Leaf and Fault): err nil when the new certificate is
// served, else why the files cannot be read (the previous one is served).
func (s *ServerCert) OnChange(f func(err error)) {
	s.kp.mu.Lock()
	defer s.kp.mu.Unlock()
	s.kp.changed = f
}

// fileLeaf is the first certificate of the PEM file at path: what a server
// configured with it presents (see Pinned).
func fileLeaf(path string) (*x509.Certificate, error) {
	certs, err := pemCerts(path)
	if err != nil {
		return nil, err
	}
	return certs[0], nil
}

// Exposed says what to do when the private key file at path can be read
// by every user of this machine (its mode lets others read it), else "";
// in a Kubernetes Secret volume, where chmod cannot change it, the
// volume's defaultMode.
// A group that may read it (ssl-cert) is a choice, and passes.
func Exposed(path string) string {
	fi, err := os.Stat(path)
	if err != nil || fi.Mode().Perm()&0o004 == 0 {
		return ""
	}
	if _, err := os.Lstat(filepath.Join(filepath.Dir(path), "..data")); err == nil {
		// Kubernetes' atomic writer: a Secret (or projected) volume,
		// read-only, whose files take the volume's defaultMode (0644).
		return fmt.Sprintf("every user of this machine can read it (mode %04o): it is in a Kubernetes Secret volume, read-only, whose files take the volume's mode: give the volume defaultMode: 0440 and the pod a securityContext.fsGroup (0400 for a container that runs as root)", fi.Mode().Perm())
	}
	return fmt.Sprintf("every user of this machine can read it (mode %04o): chmod 600 %s (or 640 and a group that needs it)", fi.Mode().Perm(), path)
}

// RenewWithin is how long before a certificate expires toolgate says to
// renew it: in toolgate status and in the log.
const RenewWithin = 14 * 24 * time.Hour

// What Expiry says is wrong with a certificate now.
const (
	Expired     = "has expired"
	NotYetValid = "is not valid yet"
)

// When is how the certificate lines write a time: "2026-12-06 08:06 UTC"
// (a gateway's lines read the same from any machine's time zone).
func When(t time.Time) string { return t.UTC().Format("2006-01-02 15:04 UTC") }

// Expiry says how a certificate valid from notBefore until notAfter
// stands at now, in a line headed by subject ("https: certificate FILE"):
// valid until when, due for renewal (within RenewWithin), expired or not
// valid yet, when refusers (who refuses it then: "clients refuse it") is
// said; and problem, what is wrong with it now (Expired, NotYetValid;
// "" when it is valid).
//
// A certificate not valid yet by this machine's clock is most often one
// issued a moment ago (or for a machine whose clock is right) on a machine
// whose clock is behind: the line says to look at the clock.
func Expiry(subject, refusers string, notBefore, notAfter, now time.Time) (line, problem string) {
	until := When(notAfter)
	left := notAfter.Sub(now)
	switch {
	case left <= 0:
		return fmt.Sprintf("%s EXPIRED at %s: %s; renew it (written over the files, it is used from the next handshake)", subject, until, refusers), Expired
	case now.Before(notBefore):
		return fmt.Sprintf("%s NOT VALID YET: valid from %s, in %s by this machine's clock (%s): %s until then; if it was issued just now, this machine's clock is behind (timedatectl)",
			subject, When(notBefore), Days(notBefore.Sub(now)), When(now), refusers), NotYetValid
	case left < RenewWithin:
		return fmt.Sprintf("%s expires at %s, in %s: renew it", subject, until, Days(left)), ""
	}
	return fmt.Sprintf("%s valid until %s (%s)", subject, until, Days(left)), ""
}

// Days is d to the nearest day ("3 days"), or in hours (rounded up) under
// two days: a certificate issued for 5 days, read a moment later, has 5
// days left, not 4.
func Days(d time.Duration) string {
	if h := int(math.Ceil(d.Hours())); h == 1 {
		return "1 hour"
	} else if d < 48*time.Hour {
		return fmt.Sprintf("%d hours", h)
	}
	return fmt.Sprintf("%d days", int(math.Round(d.Hours()/24)))
}

// Dates are the dates the first certificate of the PEM file at path is
// valid between: a client certificate's ("tls.cert"), which toolgate
// status and the metrics show so that it is renewed before a server
// refuses it.
func Dates(path string) (notBefore, notAfter time.Time, err error) {
	c, err := fileLeaf(path)
	if err != nil {
		return time.Time{}, time.Time{}, err
	}
	return c.NotBefore, c.NotAfter, nil
}

// pemCerts are the certificates of the PEM file at path, at least one.
func pemCerts(path string) ([]*x509.Certificate, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("cannot read %s: %w", path, unwrapPath(err))
	}
	var out []*x509.Certificate
	for rest := b; ; {
		var blk *pem.Block
		if blk, rest = pem.Decode(rest); blk == nil {
			break
		}
		if blk.Type != "CERTIFICATE" {
			continue
		}
		c, err := x509.ParseCertificate(blk.Bytes)
		if err != nil {
			return nil, fmt.Errorf("%s: certificate %d cannot be parsed: %w", path, len(out)+1, err)
		}
		out = append(out, c)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%s holds no PEM certificate (-----BEGIN CERTIFICATE-----): give it in PEM form (openssl x509 -in cert.der -inform der -out cert.pem)", path)
	}
	return out, nil
}

// Pinned is the TLS client config of a client that trusts exactly the
// certificate in the PEM file at path, whatever the name it is reached by
// and whoever signed it: for a gateway on this machine whose own config
// names the file (toolgate connect, status), reached at 127.0.0.1 while its
// certificate is for the name remote clients use. The file is read at each
// handshake, so a renewal is followed. The chain is not verified: the
// certificate itself is compared, byte for byte.
func Pinned(path string) *tls.Config {
	return &tls.Config{
		MinVersion: tls.VersionTLS12,
		// Verification is VerifyConnection's exact comparison below, not
		// the name and chain checks (the name differs by design).
		InsecureSkipVerify: true, //nolint:gosec // pinned: see VerifyConnection
		VerifyConnection: func(cs tls.ConnectionState) error {
			want, err := fileLeaf(path)
			if err != nil {
				return fmt.Errorf("the gateway's certificate: %w", err)
			}
			if len(cs.PeerCertificates) == 0 || !cs.PeerCertificates[0].Equal(want) {
				return fmt.Errorf("the server presented another certificate than the gateway's (%s): it is not that gateway", path)
			}
			return nil
		},
	}
}

// roots is the system's root pool plus the certificates of the PEM file.
func roots(path string) (*x509.CertPool, error) {
	certs, err := pemCerts(path)
	if err != nil {
		return nil, err
	}
	pool, err := x509.SystemCertPool()
	if err != nil || pool == nil {
		pool = x509.NewCertPool()
	}
	for _, c := range certs {
		pool.AddCert(c)
	}
	return pool, nil
}

// keyPair is a certificate (a client's, or the front's) read from its
// files, read again when they change.
type keyPair struct {
	cert, key string
	mu        sync.Mutex
	stamp     [2]stamp // of the files cur was read from
	cur       *tls.Certificate
	// fault is why the files, changed since cur was read, cannot be read
	// (nil: they are cur's), as they were at faultStamp, since faultSince.
	fault      error
	faultStamp [2]stamp
	faultSince time.Time
	changed    func(err error) // see ServerCert.OnChange
}

type stamp struct {
	mod  time.Time
	size int64
}

func stampOf(path string) stamp {
	fi, err := os.Stat(path)
	if err != nil {
		return stamp{}
	}
	return stamp{fi.ModTime(), fi.Size()}
}

// get is the certificate to present: the one read last, read again first
// when a file changed since. A renewal that cannot be read (half written,
// the key not there yet, a file removed) keeps the previous certificate;
// files tried once are tried again only after they change again.
func (k *keyPair) get() (*tls.Certificate, error) {
	k.mu.Lock()
	st := [2]stamp{stampOf(k.cert), stampOf(k.key)}
	var told func(error)
	var news error
	switch {
	case st == k.stamp:
		if k.fault != nil { // the files are back as read
			k.fault, told = nil, k.changed
		}
	case k.fault != nil && st == k.faultStamp:
	default:
		if _, err := k.loadLocked(st); err != nil {
			if k.cur == nil {
				k.mu.Unlock()
				return nil, err
			}
			k.fault, k.faultStamp, k.faultSince = err, st, time.Now()
			news = err
		} else {
			k.fault = nil
		}
		told = k.changed
	}
	cur := k.cur
	k.mu.Unlock()
	if told != nil {
		told(news)
	}
	return cur, nil
}

// loadPair reads a certificate and its key, to be read again when they
// change (get).
func loadPair(cert, key string) (*keyPair, error) {
	k := &keyPair{cert: cert, key: key}
	k.mu.Lock()
	defer k.mu.Unlock()
	if _, err := k.loadLocked([2]stamp{stampOf(cert), stampOf(key)}); err != nil {
		return nil, err
	}
	return k, nil
}

// loadLocked reads the files, whose stamps were st before they were read.
func (k *keyPair) loadLocked(st [2]stamp) (*tls.Certificate, error) {
	certPEM, err := os.ReadFile(k.cert)
	if err != nil {
		return nil, &FieldError{"cert", fmt.Errorf("cannot read %s: %w", k.cert, unwrapPath(err))}
	}
	keyPEM, err := os.ReadFile(k.key)
	if err != nil {
		return nil, &FieldError{"key", fmt.Errorf("cannot read %s: %w", k.key, unwrapPath(err))}
	}
	c, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil && strings.Contains(err.Error(), "does not match public key") {
		// Both read (crypto/tls says so only of a parsed pair, and has no
		// error value for it): "not … in PEM form" sent people to fix the
		// form of files that were fine.
		return nil, &FieldError{"cert", fmt.Errorf("%s and %s do not match: the key is not the one the certificate was made for (%w): give the key of this certificate, or the certificate of this key", k.cert, k.key, err)}
	}
	if err != nil {
		return nil, &FieldError{"cert", fmt.Errorf("%s and %s are not a certificate and its private key in PEM form: %w", k.cert, k.key, err)}
	}
	k.cur, k.stamp = &c, st
	return k.cur, nil
}

// unwrapPath drops a *fs.PathError's own "open PATH: " (the message names
// the path already).
func unwrapPath(err error) error {
	var pe *os.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}

// Problem is what a failed TLS handshake with a server says of the
// server's certificate, for a fix worded by who asks (a remote server's
// "tls" entry, toolgate connect's --ca).
type Problem struct {
	// UnknownAuthority: signed by no CA this side trusts.
	UnknownAuthority bool
	// Names and Host: the certificate is for Names, not the Host asked.
	Names []string
	Host  string
	// CommonName, when set, is the only name the certificate gives: its
	// subject's CN, with no subjectAltName, which Go (like browsers) does
	// not read as a name since 1.15. It is made again with the names in
	// subjectAltName, not asked for by another name.
	CommonName string
	// NotBefore and NotAfter, when set: not valid now (expired, not yet
	// valid, or this machine's clock is wrong).
	NotBefore, NotAfter time.Time
}

// Diagnose is the Problem err, a request's failure, says of the server's
// certificate, or nil when it says none.
func Diagnose(err error) *Problem {
	if err == nil {
		return nil
	}
	var ua x509.UnknownAuthorityError
	var he x509.HostnameError
	var ci x509.CertificateInvalidError
	switch {
	case errors.As(err, &ua) || strings.Contains(err.Error(), "x509: certificate signed by unknown authority"):
		return &Problem{UnknownAuthority: true}
	case errors.As(err, &he):
		names := slices.Clone(he.Certificate.DNSNames)
		for _, ip := range he.Certificate.IPAddresses {
			names = append(names, ip.String())
		}
		if len(names) == 0 && he.Certificate.Subject.CommonName != "" {
			cn := he.Certificate.Subject.CommonName
			return &Problem{Names: []string{cn}, Host: he.Host, CommonName: cn}
		}
		return &Problem{Names: names, Host: he.Host}
	case errors.As(err, &ci) && ci.Reason == x509.Expired:
		return &Problem{NotBefore: ci.Cert.NotBefore, NotAfter: ci.Cert.NotAfter}
	}
	return nil
}

// Validity is "valid from … to …" of the Problem's dates.
func (p *Problem) Validity() string {
	return fmt.Sprintf("valid from %s to %s", p.NotBefore.UTC().Format(time.RFC3339), p.NotAfter.UTC().Format(time.RFC3339))
}

// Fix says what to do about err, a connection's failure, when it is a TLS
// one ("" otherwise): the server's certificate from an authority this
// machine does not trust, for another name, expired, or a server that
// wants a client certificate or refused the one given. ca is the server's
// "tls.ca" and cert its "tls.cert" ("" when none); a client certificate
// the server refused is read again to tell whether it expired.
func Fix(err error, ca, cert string) string {
	if err == nil {
		return ""
	}
	msg := err.Error()
	switch p := Diagnose(err); {
	case p != nil && p.UnknownAuthority && ca != "":
		return fmt.Sprintf(`the server's certificate is signed by none of the CAs in "tls.ca" (%s) nor by one this machine trusts: put the CA that signed it (its issuer, openssl s_client -showcerts tells) in that file`, ca)
	case p != nil && p.UnknownAuthority:
		return `the server's certificate is signed by an authority this machine does not trust (a private CA, or a self-signed certificate): give that CA's certificate, a PEM file, in the server's "tls": {"ca": "…"} (or install it in the system's trust store)`
	case p != nil && p.CommonName != "":
		return fmt.Sprintf("the server's certificate names its host in the Common Name only (CN=%s), which Go, like browsers, no longer reads: the server needs a certificate with its names in subjectAltName", p.CommonName)
	case p != nil && p.Host != "":
		return fmt.Sprintf(`the server's certificate is for %v, not %s: write the server's "url" with a name the certificate holds`, p.Names, p.Host)
	case p != nil:
		return fmt.Sprintf("the server's certificate is not valid now (it is %s): the server must renew it, or this machine's clock is wrong", p.Validity())
	case cert == "" && containsAny(msg, "tls: certificate required", "tls: bad certificate", "tls: handshake failure"):
		return `the server refused the TLS handshake, as a server does that asks for a client certificate (mutual TLS): give one in the server's "tls": {"cert": "…", "key": "…"} (PEM files)`
	case cert != "" && containsAny(msg, "tls: bad certificate", "tls: unknown certificate authority", "tls: certificate required",
		"tls: unknown certificate", "tls: expired certificate", "tls: revoked certificate", "tls: unsupported certificate"):
		if c, err := fileLeaf(cert); err == nil {
			if now := time.Now(); now.After(c.NotAfter) || now.Before(c.NotBefore) {
				return fmt.Sprintf(`the server refused the client certificate of "tls.cert" (%s): it is not valid now (it is %s): renew it, writing the new certificate and key over the files (used from the next handshake), or this machine's clock is wrong`,
					cert, (&Problem{NotBefore: c.NotBefore, NotAfter: c.NotAfter}).Validity())
			}
		}
		if strings.Contains(msg, "tls: revoked certificate") {
			return fmt.Sprintf(`the server refused the client certificate of "tls.cert" (%s) as revoked: get a new one from the CA the server trusts`, cert)
		}
		return fmt.Sprintf(`the server refused the client certificate of "tls.cert" (%s): it must be one the server's CA signed, not expired, and for this client`, cert)
	}
	return ""
}

func containsAny(s string, subs ...string) bool {
	for _, sub := range subs {
		if strings.Contains(s, sub) {
			return true
		}
	}
	return false
}
