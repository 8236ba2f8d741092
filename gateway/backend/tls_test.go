package backend

import (
	"context"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/toolgate/toolgate/gateway/backend/backendtest"
	"github.com/toolgate/toolgate/gateway/backend/oauth"
	"github.com/toolgate/toolgate/gateway/backend/oauth/oauthtest"
	"github.com/toolgate/toolgate/gateway/config"
	"github.com/toolgate/toolgate/internal/testenv"
	"github.com/toolgate/toolgate/internal/tlsfiles/tlstest"
)

// TestRemoteOverTLS: a remote server whose certificate a private CA signed
// and that asks for a client certificate (mutual TLS) is reached, over
// streamable HTTP and SSE, with the files of its "tls" entry; without
// them it is down with the fix that names the entry.
func TestRemoteOverTLS(t *testing.T) {
	dir := t.TempDir()
	ca := tlstest.NewCA(t, "private CA")
	clients := tlstest.NewCA(t, "clients CA")
	srvCfg := tlstest.ServerConfig(ca.Issue(t, tlstest.Options{Names: []string{"127.0.0.1"}}), clients)
	client := clients.Issue(t, tlstest.Options{Client: true})
	full := &config.TLS{
		CA:   tlstest.Write(t, dir, "ca.pem", ca.PEM),
		Cert: tlstest.Write(t, dir, "client.pem", client.CertPEM),
		Key:  tlstest.Write(t, dir, "client-key.pem", client.KeyPEM),
	}
	streamable := backendtest.NewHTTPSServer(t, config.TypeHTTP, backendtest.ModeNormal, srvCfg)
	sse := backendtest.NewHTTPSServer(t, config.TypeSSE, backendtest.ModeNormal, srvCfg)
	misnamed := backendtest.NewHTTPSServer(t, config.TypeHTTP, backendtest.ModeNormal, tlstest.ServerConfig(ca.Issue(t, tlstest.Options{Names: []string{"mcp.internal.example"}}), nil))
	with := func(s config.Server, t *config.TLS) config.Server {
		s.TLS = t
		return s
	}
	if err := os.Chmod(full.Key, 0o644); err != nil { // every user may read it: the log says so
		t.Fatal(err)
	}
	expired := clients.Issue(t, tlstest.Options{Client: true, NotBefore: time.Now().Add(-48 * time.Hour), NotAfter: time.Now().Add(-time.Hour)})
	stale := &config.TLS{CA: full.CA,
		Cert: tlstest.Write(t, dir, "expired.pem", expired.CertPEM),
		Key:  tlstest.Write(t, dir, "expired-key.pem", expired.KeyPEM),
	}
	// Valid from tomorrow: issued for a machine whose clock is ahead of
	// this one's (or this one's is behind).
	tomorrow := clients.Issue(t, tlstest.Options{Client: true, NotBefore: time.Now().Add(24 * time.Hour), NotAfter: time.Now().Add(48 * time.Hour)})
	early := &config.TLS{CA: full.CA,
		Cert: tlstest.Write(t, dir, "early.pem", tomorrow.CertPEM),
		Key:  tlstest.Write(t, dir, "early-key.pem", tomorrow.KeyPEM),
	}
	l := &testenv.LogBuffer{}
	p := startPool(t, []config.Server{
		with(streamable.Config("https", nil), full),
		with(sse.Config("sse", nil), full),
		with(streamable.Config("expired", nil), stale),
		with(streamable.Config("early", nil), early),
		streamable.Config("noca", nil),
		with(streamable.Config("nocert", nil), &config.TLS{CA: full.CA}),
		with(misnamed.Config("misnamed", nil), &config.TLS{CA: full.CA}),
	}, testOptions(l))

	for _, name := range []string{"https", "sse"} {
		if st := statusOf(t, p, name); st.State != StateUp {
			t.Fatalf("%s: %s (%s), want up\n%s", name, st.State, st.Err, l)
		}
		res, err := p.CallTool(context.Background(), name, "echo", map[string]any{"text": "over mutual TLS"})
		if err != nil || textOf(t, res) != "over mutual TLS" {
			t.Errorf("%s: echo: %v %v", name, res, err)
		}
		// Its client certificate's expiry is in the status; a day left
		// is within tlsfiles.RenewWithin, which the log says at connect.
		if st := statusOf(t, p, name); st.TLSCert != full.Cert || st.TLSCertNotAfter == nil || !st.TLSCertNotAfter.Equal(client.TLS.Leaf.NotAfter) ||
			st.TLSCertNotBefore == nil || !st.TLSCertNotBefore.Equal(client.TLS.Leaf.NotBefore) {
			t.Errorf("%s: status's client certificate %q from %v until %v, want %s from %s until %s", name, st.TLSCert, st.TLSCertNotBefore, st.TLSCertNotAfter, full.Cert, client.TLS.Leaf.NotBefore, client.TLS.Leaf.NotAfter)
		}
		for _, want := range []string{"msg=\"the client certificate of tls.cert expires soon, or has: renew it",
			"msg=\"the private key of tls.key is readable by every user of this machine\"",
			"file=" + full.Key + " fix=\"every user of this machine can read it (mode 0644): chmod 600 " + full.Key} {
			if !strings.Contains(l.String(), want) || !strings.Contains(l.String(), "server="+name) {
				t.Errorf("%s: no %q in the log\n%s", name, want, l)
			}
		}
	}
	// A client certificate file removed while connected: the status says
	// so (the next connect fails on it), and no more once it is back.
	if err := os.Rename(full.Cert, full.Cert+".away"); err != nil {
		t.Fatal(err)
	}
	if st := statusOf(t, p, "https"); st.TLSCertNotAfter != nil || !strings.Contains(st.TLSCertError, "cannot read "+full.Cert) {
		t.Errorf("client certificate removed: status %v %q, want the error", st.TLSCertNotAfter, st.TLSCertError)
	}
	if err := os.Rename(full.Cert+".away", full.Cert); err != nil {
		t.Fatal(err)
	}
	if st := statusOf(t, p, "https"); st.TLSCertNotAfter == nil || st.TLSCertError != "" {
		t.Errorf("client certificate back: status %v %q, want its expiry", st.TLSCertNotAfter, st.TLSCertError)
	}
	for name, fix := range map[string]string{
		"noca":     `the server's certificate is signed by an authority this machine does not trust (a private CA, or a self-signed certificate): give that CA's certificate, a PEM file, in the server's "tls": {"ca": "…"}`,
		"misnamed": `the server's certificate is for [mcp.internal.example], not 127.0.0.1: write the server's "url" with a name the certificate holds`,
		"expired":  `the server refused the client certificate of "tls.cert" (` + stale.Cert + `): it is not valid now`,
		"early":    `the server refused the client certificate of "tls.cert" (` + early.Cert + `): it is not valid now`,
		"nocert":   `the server refused the TLS handshake, as a server does that asks for a client certificate (mutual TLS): give one in the server's "tls": {"cert": "…", "key": "…"}`,
	} {
		if st := statusOf(t, p, name); st.State != StateDown || !strings.Contains(st.Err, fix) {
			t.Errorf("%s: %s %q, want down with the fix %q", name, st.State, st.Err, fix)
		}
	}
	// Its dates are in the status, for toolgate status to say why.
	if st := statusOf(t, p, "early"); st.TLSCertNotBefore == nil || !st.TLSCertNotBefore.Equal(tomorrow.TLS.Leaf.NotBefore) {
		t.Errorf("early: status's client certificate valid from %v, want %s", st.TLSCertNotBefore, tomorrow.TLS.Leaf.NotBefore)
	}
}

// TestOAuthOverTLS: a login to a server whose authorization server has a
// certificate from the same private CA, and the refresh of its token while
// serving, go through the server's "tls" settings (the refresh used to go
// out with the system's trust store alone, and failed).
func TestOAuthOverTLS(t *testing.T) {
	ca := tlstest.NewCA(t, "private CA")
	srvTLS := tlstest.ServerConfig(ca.Issue(t, tlstest.Options{Names: []string{"127.0.0.1"}}), nil)
	as := oauthtest.NewAuthServerTLS(t, srvTLS)
	rs := oauthtest.NewResourceServer(t, as, backendtest.NewServer(backendtest.ParseModes(backendtest.ModeNormal)), &oauthtest.ResourceOptions{TLS: srvTLS})
	entry := config.Server{Name: "demo", Type: config.TypeHTTP, URL: rs.URL, TLS: &config.TLS{CA: tlstest.Write(t, t.TempDir(), "ca.pem", ca.PEM)}}
	tc, err := entry.TLS.Client()
	if err != nil {
		t.Fatal(err)
	}
	hc := &http.Client{Transport: &http.Transport{TLSClientConfig: tc}, Timeout: time.Minute}
	data := t.TempDir()
	store := oauth.NewStore(data)
	ctx := context.Background()
	first, err := oauth.Login(ctx, store, oauth.Server{Name: "demo", URL: rs.URL, Transport: config.TypeHTTP}, &oauth.LoginOptions{
		HTTPClient: hc,
		Authorize: func(u string) error { // the user's browser, which trusts the CA
			res, err := hc.Get(u)
			if err == nil {
				res.Body.Close()
			}
			return err
		},
	})
	if err != nil {
		t.Fatalf("login over TLS: %v", err)
	}

	clk := &clock{}
	l := &testenv.LogBuffer{}
	tokens := oauth.NewTokens(store, &oauth.Options{Logger: l.Logger(), Now: clk.Now})
	t.Cleanup(func() { tokens.Close() })
	o := testOptions(l)
	o.Auth = tokens
	p := startPool(t, []config.Server{entry}, o)
	echo := func(text string) {
		t.Helper()
		res, err := p.CallTool(ctx, "demo", "echo", map[string]any{"text": text})
		if err != nil || textOf(t, res) != text {
			t.Fatalf("echo %q = %v, %v\n%s", text, res, err, l)
		}
	}
	echo("with the first token")
	clk.Advance(time.Until(first.Token.Expiry) - 30*time.Second) // inside the refresh margin
	echo("with a token refreshed over TLS")
	if n := as.Refreshes(); n != 1 {
		t.Errorf("%d refreshes, want 1\n%s", n, l)
	}
}
