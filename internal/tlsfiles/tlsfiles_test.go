package tlsfiles_test

import (
	"crypto/tls"
	"errors"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/toolgate/toolgate/internal/tlsfiles"
	"github.com/toolgate/toolgate/internal/tlsfiles/tlstest"
)

// server is an HTTPS server presenting leaf (asking for a client
// certificate that clients signed, when not nil); it answers with the
// common name of the client certificate it got.
func server(t *testing.T, leaf *tlstest.Leaf, clients *tlstest.CA) *httptest.Server {
	t.Helper()
	s := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if len(r.TLS.PeerCertificates) > 0 {
			io.WriteString(w, r.TLS.PeerCertificates[0].SerialNumber.String())
		}
	}))
	s.TLS = tlstest.ServerConfig(leaf, clients)
	s.Config.ErrorLog = log.New(io.Discard, "", 0) // the failures are the test's
	s.StartTLS()
	t.Cleanup(s.Close)
	return s
}

// get makes one request over a new connection with c.
func get(s *httptest.Server, c *tls.Config) (string, error) {
	tr := &http.Transport{TLSClientConfig: c, DisableKeepAlives: true}
	defer tr.CloseIdleConnections()
	res, err := (&http.Client{Transport: tr, Timeout: 10 * time.Second}).Get(s.URL)
	if err != nil {
		return "", err
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	return string(b), err
}

func TestClientTrustsCAAndPresentsCertificate(t *testing.T) {
	dir := t.TempDir()
	ca := tlstest.NewCA(t, "private CA")
	clients := tlstest.NewCA(t, "clients CA")
	s := server(t, ca.Issue(t, tlstest.Options{Names: []string{"127.0.0.1"}}), clients)
	first := clients.Issue(t, tlstest.Options{Client: true})
	caFile := tlstest.Write(t, dir, "ca.pem", ca.PEM)
	certFile := tlstest.Write(t, dir, "client.pem", first.CertPEM)
	keyFile := tlstest.Write(t, dir, "client-key.pem", first.KeyPEM)

	c, err := tlsfiles.Client(caFile, certFile, keyFile)
	if err != nil {
		t.Fatal(err)
	}
	got, err := get(s, c)
	if err != nil || got != first.TLS.Leaf.SerialNumber.String() {
		t.Fatalf("GET with the CA and the client certificate: %q, %v; want the first certificate's serial", got, err)
	}

	// A renewal (cert-manager, certbot) is presented at the next handshake.
	renewed := clients.Issue(t, tlstest.Options{Client: true})
	later := time.Now().Add(time.Minute)
	for path, b := range map[string][]byte{certFile: renewed.CertPEM, keyFile: renewed.KeyPEM} {
		tlstest.Write(t, dir, path[len(dir)+1:], b)
		if err := os.Chtimes(path, later, later); err != nil {
			t.Fatal(err)
		}
	}
	if got, err := get(s, c); err != nil || got != renewed.TLS.Leaf.SerialNumber.String() {
		t.Fatalf("GET after the renewal: %q, %v; want the renewed certificate's serial", got, err)
	}
	// A renewal half written keeps the certificate that works.
	tlstest.Write(t, dir, "client-key.pem", []byte("-----BEGIN EC PRIVATE KEY-----\n"))
	if err := os.Chtimes(keyFile, later.Add(time.Minute), later.Add(time.Minute)); err != nil {
		t.Fatal(err)
	}
	if got, err := get(s, c); err != nil || got != renewed.TLS.Leaf.SerialNumber.String() {
		t.Fatalf("GET with a half-written key: %q, %v; want the renewed certificate still", got, err)
	}
}

func TestClientFileErrorsNameTheField(t *testing.T) {
	dir := t.TempDir()
	ca := tlstest.NewCA(t, "ca")
	leaf := ca.Issue(t, tlstest.Options{Client: true})
	other := ca.Issue(t, tlstest.Options{Client: true})
	caFile := tlstest.Write(t, dir, "ca.pem", ca.PEM)
	certFile := tlstest.Write(t, dir, "c.pem", leaf.CertPEM)
	keyFile := tlstest.Write(t, dir, "k.pem", leaf.KeyPEM)
	otherKey := tlstest.Write(t, dir, "other-k.pem", other.KeyPEM)
	notPEM := tlstest.Write(t, dir, "ca.der", ca.Cert.Raw)
	for _, tc := range []struct {
		name, ca, cert, key, field, says string
	}{
		{"missing CA file", dir + "/nope.pem", "", "", "ca", "cannot read " + dir + "/nope.pem: no such file or directory"},
		{"CA in DER", notPEM, "", "", "ca", "holds no PEM certificate"},
		{"cert without key", caFile, certFile, "", "key", `"cert" needs its private key`},
		{"key without cert", "", "", keyFile, "cert", `"key" needs the certificate it belongs to`},
		{"key of another certificate", "", certFile, otherKey, "cert", "c.pem and " + otherKey + " do not match: the key is not the one the certificate was made for (tls: private key does not match public key): give the key of this certificate"},
		{"missing key file", "", certFile, dir + "/gone.pem", "key", "cannot read " + dir + "/gone.pem"},
	} {
		_, err := tlsfiles.Client(tc.ca, tc.cert, tc.key)
		var fe *tlsfiles.FieldError
		if !errors.As(err, &fe) || fe.Field != tc.field || !strings.Contains(err.Error(), tc.says) {
			t.Errorf("%s: %v, want a problem of %q saying %q", tc.name, err, tc.field, tc.says)
		}
	}
	if c, err := tlsfiles.Client("", "", ""); err != nil || c.RootCAs != nil || c.GetClientCertificate != nil {
		t.Errorf("no files: %v, %v; want the system's trust store and no client certificate", c, err)
	}
}

// TestFix: each TLS failure a remote server's connection meets, made for
// real, gets the fix that names what to change.
func TestFix(t *testing.T) {
	dir := t.TempDir()
	ca := tlstest.NewCA(t, "private CA")
	otherCA := tlstest.NewCA(t, "another CA")
	clients := tlstest.NewCA(t, "clients CA")
	caFile := tlstest.Write(t, dir, "ca.pem", ca.PEM)
	otherFile := tlstest.Write(t, dir, "other.pem", otherCA.PEM)
	good := ca.Issue(t, tlstest.Options{Names: []string{"127.0.0.1"}})
	stranger := clients.Issue(t, tlstest.Options{Client: true})
	foreign := otherCA.Issue(t, tlstest.Options{Client: true})

	withCA := func(file string) *tls.Config {
		c, err := tlsfiles.Client(file, "", "")
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	// withCert is a client presenting l, written as name.pem and
	// name-key.pem in dir, and the certificate's file.
	withCert := func(name string, l *tlstest.Leaf) (*tls.Config, string) {
		cert := tlstest.Write(t, dir, name+".pem", l.CertPEM)
		c, err := tlsfiles.Client(caFile, cert, tlstest.Write(t, dir, name+"-key.pem", l.KeyPEM))
		if err != nil {
			t.Fatal(err)
		}
		return c, cert
	}
	foreignClient, foreignFile := withCert("foreign", foreign)
	expiredClient, expiredFile := withCert("expired", clients.Issue(t, tlstest.Options{Client: true,
		NotBefore: time.Now().Add(-48 * time.Hour), NotAfter: time.Now().Add(-24 * time.Hour)}))
	for _, tc := range []struct {
		name   string
		srv    *httptest.Server
		client *tls.Config
		ca     string
		cert   string
		says   string
	}{
		{"private CA, none given", server(t, good, nil), withCA(""), "", "", `give that CA's certificate, a PEM file, in the server's "tls": {"ca": "…"}`},
		{"private CA, another given", server(t, good, nil), withCA(otherFile), otherFile, "", `signed by none of the CAs in "tls.ca" (` + otherFile + `)`},
		{"certificate for another name", server(t, ca.Issue(t, tlstest.Options{Names: []string{"mcp.internal.example"}}), nil), withCA(caFile), caFile, "", `is for [mcp.internal.example], not 127.0.0.1: write the server's "url" with a name the certificate holds`},
		// A certificate made without subjectAltName (openssl req -subj
		// /CN=host): Go reads no name from its CN, and the fix said it
		// was "for [127.0.0.1], not 127.0.0.1".
		{"host in the Common Name only", server(t, ca.Issue(t, tlstest.Options{CommonName: "127.0.0.1"}), nil), withCA(caFile), caFile, "", `the server's certificate names its host in the Common Name only (CN=127.0.0.1), which Go, like browsers, no longer reads: the server needs a certificate with its names in subjectAltName`},
		{"expired certificate", server(t, ca.Issue(t, tlstest.Options{Names: []string{"127.0.0.1"}, NotBefore: time.Now().Add(-48 * time.Hour), NotAfter: time.Now().Add(-24 * time.Hour)}), nil), withCA(caFile), caFile, "", "is not valid now"},
		{"client certificate wanted, none given", server(t, good, clients), withCA(caFile), caFile, "", `give one in the server's "tls": {"cert": "…", "key": "…"}`},
		{"client certificate of another CA", server(t, good, clients), foreignClient, caFile, foreignFile, `the server refused the client certificate of "tls.cert" (` + foreignFile + `): it must be one the server's CA signed`},
		// Go's server sends "expired certificate" (other servers "bad
		// certificate"): either way the file says why.
		{"client certificate expired", server(t, good, clients), expiredClient, caFile, expiredFile, `the server refused the client certificate of "tls.cert" (` + expiredFile + `): it is not valid now`},
	} {
		_, err := get(tc.srv, tc.client)
		if err == nil {
			t.Errorf("%s: the request went through", tc.name)
			continue
		}
		t.Logf("%s: %v", tc.name, err)
		if fix := tlsfiles.Fix(err, tc.ca, tc.cert); !strings.Contains(fix, tc.says) {
			t.Errorf("%s: %v\nfix %q, want %q", tc.name, err, fix, tc.says)
		}
	}
	// What is not a TLS failure gets no fix; a client certificate the
	// server takes goes through.
	if fix := tlsfiles.Fix(errors.New("connection refused"), "", ""); fix != "" {
		t.Errorf("connection refused: fix %q, want none", fix)
	}
	strangerClient, _ := withCert("stranger", stranger)
	if _, err := get(server(t, good, clients), strangerClient); err != nil {
		t.Errorf("client certificate of the server's client CA: %v", err)
	}
}

// TestServerCertChanges: a server's certificate renewed on disk is served
// from the next look; files that cannot be read (removed, half written)
// keep the one served and are a fault, told once per change of the files,
// until they read again.
func TestServerCertChanges(t *testing.T) {
	dir := t.TempDir()
	ca := tlstest.NewCA(t, "ca")
	first, renewed := ca.Issue(t, tlstest.Options{Names: []string{"gw.example"}}), ca.Issue(t, tlstest.Options{Names: []string{"gw.example"}})
	cert, key := tlstest.Write(t, dir, "cert.pem", first.CertPEM), tlstest.Write(t, dir, "key.pem", first.KeyPEM)
	s, err := tlsfiles.Server(cert, key)
	if err != nil {
		t.Fatal(err)
	}
	var told []string
	s.OnChange(func(err error) {
		if err != nil {
			told = append(told, err.Error())
		} else {
			told = append(told, "read")
		}
	})
	tick := time.Now()
	write := func(name string, b []byte) { // each write a minute later: a change
		t.Helper()
		tick = tick.Add(time.Minute)
		path := tlstest.Write(t, dir, name, b)
		if err := os.Chtimes(path, tick, tick); err != nil {
			t.Fatal(err)
		}
	}
	serving := func(l *tlstest.Leaf, fault string) {
		t.Helper()
		if got := s.Leaf(); got == nil || !got.Equal(l.TLS.Leaf) {
			t.Errorf("Leaf is not the certificate expected (serial %v)", l.TLS.Leaf.SerialNumber)
		}
		since, err := s.Fault()
		if fault == "" && err != nil || fault != "" && (err == nil || !strings.Contains(err.Error(), fault) || since.IsZero()) {
			t.Errorf("Fault() = %v, %v; want %q", since, err, fault)
		}
	}
	serving(first, "")
	write("cert.pem", renewed.CertPEM)
	write("key.pem", renewed.KeyPEM)
	serving(renewed, "")
	if err := os.Remove(cert); err != nil {
		t.Fatal(err)
	}
	serving(renewed, "cannot read "+cert+": no such file or directory")
	serving(renewed, "cannot read "+cert) // looked at again: not told again
	write("cert.pem", renewed.CertPEM)
	write("key.pem", []byte("-----BEGIN EC PRIVATE KEY-----\n")) // half written
	serving(renewed, "are not a certificate and its private key")
	write("key.pem", renewed.KeyPEM)
	serving(renewed, "")
	// One tell a change seen, whatever the files written in between.
	if len(told) != 4 || told[0] != "read" || told[1] != "cannot read "+cert+": no such file or directory" ||
		!strings.Contains(told[2], "are not a certificate") || told[3] != "read" {
		t.Errorf("told %q; want read, the removed file, the half-written key, read", told)
	}
}

// TestExposed: a private key every user may read is said, with the chmod;
// the owner's alone, or a group's, is not.
func TestExposed(t *testing.T) {
	key := tlstest.Write(t, t.TempDir(), "key.pem", []byte("key"))
	for mode, want := range map[os.FileMode]string{0o600: "", 0o640: "", 0o644: "every user of this machine can read it (mode 0644): chmod 600 " + key, 0o604: "(mode 0604)"} {
		if err := os.Chmod(key, mode); err != nil {
			t.Fatal(err)
		}
		if got := tlsfiles.Exposed(key); want == "" && got != "" || !strings.Contains(got, want) {
			t.Errorf("mode %04o: %q, want %q", mode, got, want)
		}
	}
	if got := tlsfiles.Exposed(key + ".gone"); got != "" {
		t.Errorf("no file: %q, want nothing (the load says it)", got)
	}
	// A Kubernetes Secret volume (cert-manager's): tls.key -> ..data/tls.key,
	// read-only, 0644 unless the volume's defaultMode says otherwise. chmod
	// cannot change it there.
	vol := t.TempDir()
	stamp := filepath.Join(vol, "..2026_12_06_17_40_00.123")
	if err := os.Mkdir(stamp, 0o755); err != nil {
		t.Fatal(err)
	}
	tlstest.Write(t, stamp, "tls.key", []byte("key"))
	if err := os.Chmod(filepath.Join(stamp, "tls.key"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Base(stamp), filepath.Join(vol, "..data")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join("..data", "tls.key"), filepath.Join(vol, "tls.key")); err != nil {
		t.Fatal(err)
	}
	if got := tlsfiles.Exposed(filepath.Join(vol, "tls.key")); !strings.Contains(got, "(mode 0644): it is in a Kubernetes Secret volume") || !strings.Contains(got, "defaultMode: 0440") || strings.Contains(got, "chmod") {
		t.Errorf("a key in a Secret volume: %q, want the volume's defaultMode, not chmod", got)
	}
}

// TestExpiryDays: the days left are counted to the nearest day. A
// certificate issued for 5 days, read a moment later, read "in 4 days"
// (the count rounded down); so did one with 4 days 23 h left.
func TestExpiryDays(t *testing.T) {
	now := time.Date(2027, 1, 1, 0, 0, 0, 0, time.UTC)
	issued := now.Add(-time.Hour)
	for _, tc := range []struct {
		left time.Duration
		says string
	}{
		{5 * 24 * time.Hour, "in 5 days: renew it"},
		{5*24*time.Hour - time.Second, "in 5 days: renew it"},
		{4*24*time.Hour + 12*time.Hour, "in 5 days: renew it"},
		{4*24*time.Hour + 12*time.Hour - time.Second, "in 4 days: renew it"},
		{2*24*time.Hour + time.Second, "in 2 days: renew it"},
		{48*time.Hour - time.Second, "in 48 hours: renew it"},
		{30 * time.Minute, "in 1 hour: renew it"},
		{90*24*time.Hour - time.Minute, "(90 days)"},
	} {
		line, _ := tlsfiles.Expiry("cert", "clients refuse it", issued, now.Add(tc.left), now)
		if !strings.HasSuffix(line, tc.says) {
			t.Errorf("%s left: %q, want it to end %q", tc.left, line, tc.says)
		}
	}
}
