package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolgate/toolgate/gateway"
	"github.com/toolgate/toolgate/gateway/backend"
	"github.com/toolgate/toolgate/gateway/backend/backendtest"
	"github.com/toolgate/toolgate/gateway/config"
	"github.com/toolgate/toolgate/internal/testenv"
	"github.com/toolgate/toolgate/internal/tlsfiles"
	"github.com/toolgate/toolgate/internal/tlsfiles/tlstest"
)

// TestRemoteServerWithPrivateCA: a config whose remote server has a
// certificate from a private CA and asks for a client certificate, with
// its "tls" files next to the config: the gateway calls its tools,
// `auth status` reaches it, and the same server without "tls" is down
// with the fix in `toolgate status` and `auth status`.
func TestRemoteServerWithPrivateCA(t *testing.T) {
	dir := t.TempDir()
	certs := filepath.Join(dir, "certs")
	if err := os.Mkdir(certs, 0o700); err != nil {
		t.Fatal(err)
	}
	ca := tlstest.NewCA(t, "private CA")
	clients := tlstest.NewCA(t, "clients CA")
	client := clients.Issue(t, tlstest.Options{Client: true})
	tlstest.Write(t, certs, "ca.pem", ca.PEM)
	tlstest.Write(t, certs, "client.pem", client.CertPEM)
	tlstest.Write(t, certs, "client-key.pem", client.KeyPEM)
	srv := backendtest.NewHTTPSServer(t, config.TypeHTTP, backendtest.ModeNormal,
		tlstest.ServerConfig(ca.Issue(t, tlstest.Options{Names: []string{"127.0.0.1"}}), clients))
	cfg := filepath.Join(dir, "toolgate.json")
	doc := `{"mcpServers": {"untrusted": {"url": "` + srv.Endpoint + `"}},
		"toolgate": {"learn": {"enabled": false}, "restart": {"delays": []}}}`
	if err := os.WriteFile(cfg, []byte(doc), 0o600); err != nil {
		t.Fatal(err)
	}
	data := t.TempDir()
	// servers add takes the files as the shell names them (here relative
	// to the config's folder, the command's working directory).
	add := toolgateCmd(t, data, "servers", "add", "internal", "--config", cfg, "--url", srv.Endpoint,
		"--tls-ca", "certs/ca.pem", "--tls-cert", "certs/client.pem", "--tls-key", "certs/client-key.pem")
	add.Dir = dir
	if out, err := add.CombinedOutput(); err != nil {
		t.Fatalf("servers add --tls-…: %v\n%s", err, out)
	}
	out, stderr, err := runToolgate(t, data, "servers", "--config", cfg, "--json")
	if err != nil || !strings.Contains(out, `"tls": {`) || !strings.Contains(out, `"ca": "`+filepath.Join(certs, "ca.pem")+`"`) || !strings.Contains(out, `"key": "`+filepath.Join(certs, "client-key.pem")+`"`) {
		t.Errorf("servers --json: %v, want internal's tls files\n%s%s", err, out, stderr)
	}
	const fix = `give that CA's certificate, a PEM file, in the server's "tls": {"ca": "…"}`

	out, stderr, err = runToolgate(t, data, "auth", "status", "--config", cfg, "--json")
	var rep struct {
		Servers []struct{ Server, Auth, Detail string } `json:"servers"`
	}
	if json.Unmarshal([]byte(out), &rep) != nil || len(rep.Servers) != 2 {
		t.Fatalf("auth status --json: %v\n%s%s", err, out, stderr)
	}
	// A server that could not be asked is no clean bill: exit status 3, as
	// for one that needs a login (it exited 0).
	if ee := (*exec.ExitError)(nil); !errors.As(err, &ee) || ee.ExitCode() != degradedExit || !strings.Contains(stderr, "untrusted could not be asked") {
		t.Errorf("auth status with a server it could not ask: %v, want exit status %d saying untrusted could not be asked\n%s", err, degradedExit, stderr)
	}
	for _, s := range rep.Servers {
		switch {
		case s.Server == "internal" && s.Auth != authNone:
			t.Errorf("auth status: internal is %q (%s), want %q: it answers over mutual TLS", s.Auth, s.Detail, authNone)
		case s.Server == "untrusted" && (s.Auth != authUnknown || !strings.Contains(s.Detail, fix)):
			t.Errorf("auth status: untrusted is %q (%s), want %q with the fix", s.Auth, s.Detail, authUnknown)
		}
	}

	serve := toolgateCmd(t, data, "serve", "--config", cfg, "--mode", "bm25")
	serve.Stderr = testLog(t, "serve: ")
	ctx, cs := connectStdio(t, serve, 2*time.Minute)
	if res := callTool(t, ctx, cs, nil, "execute_tool", map[string]any{"name": "internal__echo", "arguments": map[string]any{"text": "over mutual TLS"}}); res.IsError || resultText(res) != "over mutual TLS" {
		t.Errorf("execute_tool internal__echo: %+v", res.Content)
	}
	testenv.Eventually(t, "untrusted down with the fix in `toolgate status`", func() bool {
		out, _, _ := runToolgate(t, data, "status", "--json")
		for _, rep := range decodeReports(t, out) {
			for _, b := range rep.Backends {
				if b.Name == "untrusted" {
					if b.State == "down" && !strings.Contains(b.Err, fix) {
						t.Fatalf("status: untrusted is down with %q, want the fix %q", b.Err, fix)
					}
					return b.State == "down"
				}
			}
		}
		return false
	})
	// internal's client certificate, a day from expiry, is in the report
	// and, due for renewal, below the table.
	out, _, _ = runToolgate(t, data, "status", "--json")
	for _, rep := range decodeReports(t, out) {
		for _, b := range rep.Backends {
			if b.Name == "internal" && (b.TLSCert != filepath.Join(certs, "client.pem") || b.TLSCertNotAfter == nil || !b.TLSCertNotAfter.Equal(client.TLS.Leaf.NotAfter)) {
				t.Errorf("status --json: internal's client certificate %q until %v, want certs/client.pem until %s", b.TLSCert, b.TLSCertNotAfter, client.TLS.Leaf.NotAfter)
			}
		}
	}
	out, _, _ = runToolgate(t, data, "status")
	if want := "internal: client certificate " + filepath.Join(certs, "client.pem") + " expires at "; !strings.Contains(out, want) {
		t.Errorf("status: no %q in\n%s", want, out)
	}
}

// TestHTTPSFront: with toolgate.http.tls the front serves HTTPS: a remote
// client that trusts the CA reaches it by the certificate's name; on this
// machine `toolgate status` and `toolgate connect` find it on the data
// folder and pin its certificate (they reach it at 127.0.0.1, a name the
// certificate does not hold); plain HTTP to it gets a usage error that
// says so; and a renewed certificate is served without a restart.
func TestHTTPSFront(t *testing.T) {
	addr := freeAddr(t)
	cfg, dir, ca := httpsConfig(t, addr)
	data := t.TempDir()
	serve := toolgateCmd(t, data, "serve", "--config", cfg, "--http", addr)
	serve.Stderr = testLog(t, "serve: ")
	if err := serve.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = serve.Process.Signal(os.Interrupt); _ = serve.Wait() })

	// A remote client: the CA trusted, the certificate's name asked for.
	remote := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: ca.Pool(), ServerName: "gw.example"}}}
	testenv.Eventually(t, "the gateway serves over HTTPS", func() bool { return serving(remote, "https://"+addr+"/") })
	// The certificate's names pass the Host check as allowedHosts do; other
	// names do not (DNS rebinding). (/status: the probes, /healthz and
	// /readyz, answer any Host.)
	for host, want := range map[string]int{"gw.example": http.StatusOK, "evil.example": http.StatusForbidden} {
		req, err := http.NewRequest(http.MethodGet, "https://"+addr+"/status", nil)
		if err != nil {
			t.Fatal(err)
		}
		req.Host = host
		resp, err := remote.Do(req)
		if err != nil {
			t.Fatalf("GET /status with Host %s: %v", host, err)
		}
		resp.Body.Close()
		if resp.StatusCode != want {
			t.Errorf("GET /status with Host %s: %s, want %d", host, resp.Status, want)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "remote"}, nil).Connect(ctx, &mcp.StreamableClientTransport{Endpoint: "https://" + addr + "/mcp", HTTPClient: remote}, nil)
	if err != nil {
		t.Fatalf("connect over HTTPS: %v", err)
	}
	if res := callTool(t, ctx, cs, nil, "execute_tool", map[string]any{"name": "fake__echo", "arguments": map[string]any{"text": "over https"}}); res.IsError || resultText(res) != "over https" {
		t.Errorf("execute_tool over HTTPS: %+v", res.Content)
	}
	cs.Close()

	// This machine's commands find it on the data folder, or by its config.
	out, stderr, err := runToolgate(t, data, "status")
	if err != nil || !strings.Contains(out, "(https "+addr+")") {
		t.Errorf("status: %v, want the process line to say https %s\n%s%s", err, addr, out, stderr)
	}
	if out, stderr, err := runToolgate(t, data, "status", "--config", cfg, "--data-dir", t.TempDir()); err != nil || !strings.Contains(out, "backends up") {
		t.Errorf("status --config (its http.addr, its certificate pinned): %v\n%s%s", err, out, stderr)
	}
	var ee *exec.ExitError
	if _, stderr, err := runToolgate(t, data, "status", "--addr", addr); !errors.As(err, &ee) || ee.ExitCode() != 2 || !strings.Contains(stderr, "the gateway at "+addr+" serves HTTPS (toolgate.http.tls): use --addr https://"+addr) {
		t.Errorf("status --addr %s (plain HTTP): %v, want exit status 2 saying it serves HTTPS\n%s", addr, err, stderr)
	}
	plain := toolgateCmd(t, data, "connect", "--addr", addr)
	plainCtx, plainCancel := context.WithTimeout(context.Background(), time.Minute)
	defer plainCancel()
	if pcs, err := mcp.NewClient(&mcp.Implementation{Name: "e2e"}, nil).Connect(plainCtx, &mcp.CommandTransport{Command: plain}, nil); err == nil {
		pcs.Close()
		t.Errorf("connect --addr %s (plain HTTP to HTTPS): the handshake went through", addr)
	} else if !strings.Contains(err.Error(), "the gateway serves HTTPS, toolgate.http.tls: give --addr https://HOST:PORT") {
		t.Errorf("connect --addr %s (plain HTTP to HTTPS): %v, want the fix", addr, err)
	}
	connect := toolgateCmd(t, data, "connect")
	connect.Stderr = testLog(t, "connect: ")
	cctx, ccs := connectStdio(t, connect, 2*time.Minute)
	if res := callTool(t, cctx, ccs, nil, "execute_tool", map[string]any{"name": "fake__echo", "arguments": map[string]any{"text": "through connect"}}); res.IsError || resultText(res) != "through connect" {
		t.Errorf("execute_tool through connect: %+v", res.Content)
	}

	// A renewal is served from the next handshake, and the names it adds
	// pass the Host check.
	renewed := ca.Issue(t, tlstest.Options{Names: []string{"gw.example", "gw2.example"}})
	later := time.Now().Add(time.Minute)
	for name, b := range map[string][]byte{"front.pem": renewed.CertPEM, "front-key.pem": renewed.KeyPEM} {
		p := tlstest.Write(t, dir, name, b)
		if err := os.Chtimes(p, later, later); err != nil {
			t.Fatal(err)
		}
	}
	conn, err := tls.Dial("tcp", addr, &tls.Config{RootCAs: ca.Pool(), ServerName: "gw.example"})
	if err != nil {
		t.Fatalf("handshake after the renewal: %v", err)
	}
	defer conn.Close()
	if got := conn.ConnectionState().PeerCertificates[0]; !got.Equal(renewed.TLS.Leaf) {
		t.Errorf("after the renewal the front presents serial %s, want the renewed %s", got.SerialNumber, renewed.TLS.Leaf.SerialNumber)
	}
	req, err := http.NewRequest(http.MethodGet, "https://"+addr+"/status", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Host = "gw2.example"
	if resp, err := remote.Do(req); err != nil || resp.StatusCode != http.StatusOK {
		t.Errorf("GET /status with Host gw2.example, a name the renewal added: %v %v, want 200", resp, err)
	} else {
		resp.Body.Close()
	}
	// Its expiry is reported: /status, toolgate status, the metric.
	out, _, _ = runToolgate(t, data, "status", "--json")
	if reps := decodeReports(t, out); len(reps) != 1 || reps[0].Process == nil || reps[0].Process.TLSNotAfter == nil || !reps[0].Process.TLSNotAfter.Equal(renewed.TLS.Leaf.NotAfter) ||
		reps[0].Process.TLSNotBefore == nil || !reps[0].Process.TLSNotBefore.Equal(renewed.TLS.Leaf.NotBefore) {
		t.Errorf("status --json: process.tlsNotBefore/tlsNotAfter are not the renewed certificate's %s, %s\n%s", renewed.TLS.Leaf.NotBefore, renewed.TLS.Leaf.NotAfter, out)
	}
	if out, _, _ := runToolgate(t, data, "status"); !strings.Contains(out, "https: certificate "+filepath.Join(dir, "front.pem")+" expires at ") || !strings.Contains(out, "hours: renew it") {
		t.Errorf("status: want the certificate's expiry within a day (the test CA's certificates last a day)\n%s", out)
	}
	resp, err := remote.Get("https://" + addr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	metrics, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if want := fmt.Sprintf("toolgate_tls_cert_expiry_timestamp_seconds %g", float64(renewed.TLS.Leaf.NotAfter.Unix())); !strings.Contains(string(metrics), want) {
		t.Errorf("/metrics: no %q", want)
	}

	// A certificate file removed (a renewal gone wrong) keeps the one
	// served, and status says so until the file is back.
	front := filepath.Join(dir, "front.pem")
	if err := os.Remove(front); err != nil {
		t.Fatal(err)
	}
	out, _, _ = runToolgate(t, data, "status", "--json")
	if reps := decodeReports(t, out); len(reps) != 1 || reps[0].Process == nil || !strings.Contains(reps[0].Process.TLSError, "cannot read "+front) || reps[0].Process.TLSErrorSince == nil {
		t.Errorf("status --json with the certificate file removed: want process.tlsError saying so\n%s", out)
	}
	out, _, err = runToolgate(t, data, "status")
	if err != nil || !strings.Contains(out, "but CANNOT BE READ: cannot read "+front) || !strings.Contains(out, "the certificate read before is served") {
		t.Errorf("status with the certificate file removed: %v, want a line saying it (exit 0: still served)\n%s", err, out)
	}
	if _, err := remote.Get("https://" + addr + "/healthz"); err != nil {
		t.Errorf("GET /healthz with the certificate file removed: %v", err)
	}
	tlstest.Write(t, dir, "front.pem", renewed.CertPEM)
	if out, _, _ := runToolgate(t, data, "status", "--json"); strings.Contains(out, "tlsError") {
		t.Errorf("status --json with the file back: still a tlsError\n%s", out)
	}
}

// TestCertChangedLog: the log says when the front's certificate files
// changed: the certificate served, or why they cannot be read.
func TestCertChangedLog(t *testing.T) {
	dir := t.TempDir()
	leaf := tlstest.NewCA(t, "ca").Issue(t, tlstest.Options{Names: []string{"gw.example"}})
	c, err := tlsfiles.Server(tlstest.Write(t, dir, "c.pem", leaf.CertPEM), tlstest.Write(t, dir, "k.pem", leaf.KeyPEM))
	if err != nil {
		t.Fatal(err)
	}
	for err, want := range map[error]string{
		nil:                         `level=INFO msg="the HTTPS front serves the certificate of its files" file=c.pem not_after=`,
		errors.New("cannot read x"): `level=WARN msg="the HTTPS front's certificate files changed but cannot be read: the certificate read before is served" file=c.pem err="cannot read x" fix="write the certificate`,
	} {
		logs := &testenv.LogBuffer{}
		certChanged(logs.Logger(), "c.pem", c, err)
		if !strings.Contains(logs.String(), want) {
			t.Errorf("certChanged(%v): %q, want %q", err, logs.String(), want)
		}
	}
}

// TestCertExpiry: the front's certificate's line in toolgate status, and
// an expired one counted as degraded.
func TestCertExpiry(t *testing.T) {
	now := time.Date(2027, 1, 1, 0, 0, 0, 0, time.UTC)
	issued := now.Add(-30 * 24 * time.Hour)
	for _, tc := range []struct {
		notBefore, notAfter time.Time
		says, problem       string
	}{
		{issued, now.Add(90 * 24 * time.Hour), "https: certificate f.pem valid until 2027-04-01 00:00 UTC (90 days)", ""},
		{issued, now.Add(5 * 24 * time.Hour), "https: certificate f.pem expires at 2027-01-06 00:00 UTC, in 5 days: renew it", ""},
		{issued, now.Add(-time.Hour), "https: certificate f.pem EXPIRED at 2026-12-31 23:00 UTC: clients refuse it", "has expired"},
		// Issued a moment ago for a machine whose clock is right, served
		// by one whose clock is behind.
		{now.Add(20 * time.Minute), now.Add(90 * 24 * time.Hour),
			"https: certificate f.pem NOT VALID YET: valid from 2027-01-01 00:20 UTC, in 1 hour by this machine's clock (2027-01-01 00:00 UTC): clients refuse it until then; if it was issued just now, this machine's clock is behind (timedatectl)", "is not valid yet"},
		{time.Time{}, now.Add(90 * 24 * time.Hour), "https: certificate f.pem valid until", ""}, // no NotBefore in the report (an older gateway)
	} {
		line, problem := gateway.FrontExpiry("f.pem", tc.notBefore, tc.notAfter, now)
		if !strings.HasPrefix(line, tc.says) || problem != tc.problem {
			t.Errorf("FrontExpiry(%s, %s) = %q, %q; want %q, %q", tc.notBefore, tc.notAfter, line, problem, tc.says, tc.problem)
		}
	}
	// At start the log says so: an error once expired or while not valid
	// yet, a warning within 14 days, nothing before.
	for _, tc := range []struct {
		from, left time.Duration
		want       string
	}{
		{-time.Hour, -time.Hour, `level=ERROR msg="the HTTPS front's certificate has expired: clients refuse it" file=f.pem not_after=`},
		{time.Hour, 90 * 24 * time.Hour, `level=ERROR msg="the HTTPS front's certificate is not valid yet by this machine's clock: clients whose clock agrees refuse it" file=f.pem not_before=`},
		{-time.Hour, 5 * 24 * time.Hour, `level=WARN msg="the HTTPS front's certificate expires soon"`},
		{-time.Hour, 90 * 24 * time.Hour, ""},
	} {
		logs := &testenv.LogBuffer{}
		warnExpiry(logs.Logger(), "f.pem", &x509.Certificate{NotBefore: now.Add(tc.from), NotAfter: now.Add(tc.left)}, now)
		if got := logs.String(); tc.want == "" && got != "" || !strings.Contains(got, tc.want) {
			t.Errorf("warnExpiry valid from %s to %s: %q, want %q", tc.from, tc.left, got, tc.want)
		}
	}
	past, future, lastMonth := time.Now().Add(-time.Minute), time.Now().Add(time.Hour), time.Now().Add(-30*24*time.Hour)
	rep := gateway.StatusReport{Process: &gateway.ProcessInfo{TLS: true, TLSCert: "f.pem", TLSNotBefore: &lastMonth, TLSNotAfter: &past}}
	if bad := degradedReasons(rep); !slices.Contains(bad, "the HTTPS front's certificate has expired") {
		t.Errorf("degraded reasons %v: want the expired certificate", bad)
	}
	later := time.Now().Add(90 * 24 * time.Hour)
	rep = gateway.StatusReport{Process: &gateway.ProcessInfo{TLS: true, TLSCert: "f.pem", TLSNotBefore: &future, TLSNotAfter: &later}}
	if bad := degradedReasons(rep); !slices.Equal(bad, []string{"the HTTPS front's certificate is not valid yet"}) {
		t.Errorf("degraded reasons %v: want the certificate not valid yet", bad)
	}
	var front strings.Builder
	if err := printStatus(&front, rep); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(front.String(), "\nhttps: certificate f.pem NOT VALID YET: valid from ") {
		t.Errorf("status of a front whose certificate is not valid yet:\n%s", front.String())
	}

	// A remote server's client certificate: a line below the table once
	// it is due for renewal, and degraded once expired.
	soon := time.Now().Add(3*24*time.Hour + time.Minute)
	remote := func(name string, na *time.Time) gateway.BackendStatus {
		return gateway.BackendStatus{Status: backend.Status{Name: name, State: backend.StateUp, TLSCert: "/etc/" + name + ".pem", TLSCertNotBefore: &lastMonth, TLSCertNotAfter: na}}
	}
	unread := remote("unread", nil)
	unread.TLSCertNotBefore, unread.TLSCertError = nil, "cannot read /etc/unread.pem: no such file or directory"
	early := remote("early", &later)
	early.TLSCertNotBefore = &future
	rep = gateway.StatusReport{Backends: []gateway.BackendStatus{remote("soon", &soon), remote("later", &later), remote("gone", &past), unread, early}}
	var out strings.Builder
	if err := printStatus(&out, rep); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"\nsoon: client certificate /etc/soon.pem expires at ", ", in 3 days: renew it\n",
		"\ngone: client certificate /etc/gone.pem EXPIRED at ",
		"\nunread: client certificate CANNOT BE READ: cannot read /etc/unread.pem: no such file or directory: the server's next connect fails on it",
		"\nearly: client certificate /etc/early.pem NOT VALID YET: valid from "} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("status: no %q in\n%s", want, out.String())
		}
	}
	if strings.Contains(out.String(), "later.pem") {
		t.Errorf("status names a client certificate far from expiry:\n%s", out.String())
	}
	if line, _ := gateway.FrontExpiry("", issued, now.Add(90*24*time.Hour), now); line != "https: certificate valid until 2027-04-01 00:00 UTC (90 days)" {
		t.Errorf("no file (a report for a key that is not admin): %q", line)
	}
	if bad := degradedReasons(rep); !slices.Equal(bad, []string{"gone's client certificate has expired", "early's client certificate is not valid yet"}) {
		t.Errorf("degraded reasons %v: want gone's and early's client certificates alone", bad)
	}
}

// TestConnectStartHTTPS: connect --start with a config whose front serves
// HTTPS starts that gateway, waits for it over HTTPS (its certificate
// pinned: it is for another name than 127.0.0.1) and relays to it.
func TestConnectStartHTTPS(t *testing.T) {
	cfg, _, _ := httpsConfig(t, "")
	data := t.TempDir()
	t.Cleanup(func() { // the gateway it starts runs in a session of its own
		for _, gw := range localGateways(context.Background(), data, 5*time.Second) {
			if p := gw.rep.Process; gw.err == nil && p != nil {
				_ = syscall.Kill(p.PID, syscall.SIGKILL)
			}
		}
	})
	connect := toolgateCmd(t, data, "connect", "--start", "--config", cfg, "--addr", freeAddr(t), "--idle", "1m")
	connect.Stderr = testLog(t, "connect: ")
	ctx, cs := connectStdio(t, connect, 3*time.Minute)
	if res := callTool(t, ctx, cs, nil, "execute_tool", map[string]any{"name": "fake__echo", "arguments": map[string]any{"text": "started over https"}}); res.IsError || resultText(res) != "started over https" {
		t.Errorf("execute_tool through connect --start: %+v", res.Content)
	}
	gws := localGateways(context.Background(), data, 5*time.Second)
	if len(gws) != 1 || gws[0].rep.Process == nil || !gws[0].rep.Process.TLS {
		t.Errorf("gateways on the data folder: %d, want the one started, serving HTTPS", len(gws))
	}
}

// httpsConfig writes a config of one fake server (ModeNormal) whose front
// serves HTTPS at addr ("" = left to --http) with a certificate for
// names (default gw.example) that ca signed, the files next to it; it returns the config's
// path, its folder and the CA.
func httpsConfig(t *testing.T, addr string, names ...string) (cfg, dir string, ca *tlstest.CA) {
	t.Helper()
	dir = t.TempDir()
	ca = tlstest.NewCA(t, "private CA")
	if names == nil {
		names = []string{"gw.example"}
	}
	leaf := ca.Issue(t, tlstest.Options{Names: names})
	tlstest.Write(t, dir, "front.pem", leaf.CertPEM)
	tlstest.Write(t, dir, "front-key.pem", leaf.KeyPEM)
	front := map[string]any{"tls": map[string]any{"cert": "front.pem", "key": "front-key.pem"}}
	if addr != "" {
		front["addr"] = addr
	}
	srv := backendtest.Command(t, backendtest.ModeNormal)
	doc, err := json.Marshal(map[string]any{
		"mcpServers": map[string]any{"fake": map[string]any{"command": srv.Command, "env": srv.Env}},
		"toolgate":   map[string]any{"learn": map[string]any{"enabled": false}, "search": map[string]any{"mode": "bm25"}, "http": front},
	})
	if err != nil {
		t.Fatal(err)
	}
	return tlstest.Write(t, dir, "toolgate.json", doc), dir, ca
}

// TestConnectWithCA: from another machine (a data folder without the
// gateway, its address given), a gateway whose certificate a private CA
// signed is reached by status and connect with --ca; without it, or by a
// name the certificate does not hold, they say what to change instead of
// "start it".
func TestConnectWithCA(t *testing.T) {
	addr := freeAddr(t)
	cfg, dir, ca := httpsConfig(t, addr, "127.0.0.1")
	serve := toolgateCmd(t, t.TempDir(), "serve", "--config", cfg, "--http", addr)
	serve.Stderr = testLog(t, "serve: ")
	if err := serve.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = serve.Process.Signal(os.Interrupt); _ = serve.Wait() })
	caFile := tlstest.Write(t, dir, "ca.pem", ca.PEM)
	laptop := t.TempDir() // no gateway runs on it
	gw := "https://" + addr
	testenv.Eventually(t, "status --addr https://… --ca", func() bool {
		_, _, err := runToolgate(t, laptop, "status", "--addr", gw, "--ca", caFile)
		return err == nil
	})
	_, port, _ := net.SplitHostPort(addr)
	var ee *exec.ExitError
	for _, tc := range []struct {
		name string
		args []string
		exit int
		says string
	}{
		{"no --ca", []string{"--addr", gw}, 1, "fix: the gateway's certificate is signed by an authority this machine does not trust (a private CA, or a self-signed certificate): give that CA's certificate, a PEM file, with --ca FILE"},
		{"another name", []string{"--addr", "https://localhost:" + port, "--ca", caFile}, 1, "fix: the gateway's certificate is for [127.0.0.1], not localhost: give --addr with a name it holds"},
		{"--ca not there", []string{"--addr", gw, "--ca", filepath.Join(dir, "nope.pem")}, 2, "--ca: cannot read " + filepath.Join(dir, "nope.pem") + ": no such file or directory"},
	} {
		_, stderr, err := runToolgate(t, laptop, append([]string{"status"}, tc.args...)...)
		if !errors.As(err, &ee) || ee.ExitCode() != tc.exit || !strings.Contains(stderr, tc.says) {
			t.Errorf("status %s: %v, want exit status %d saying %q\n%s", tc.name, err, tc.exit, tc.says, stderr)
		}
	}

	connect := toolgateCmd(t, laptop, "connect", "--addr", gw, "--ca", caFile)
	connect.Stderr = testLog(t, "connect: ")
	ctx, cs := connectStdio(t, connect, 2*time.Minute)
	if res := callTool(t, ctx, cs, nil, "execute_tool", map[string]any{"name": "fake__echo", "arguments": map[string]any{"text": "trusted by --ca"}}); res.IsError || resultText(res) != "trusted by --ca" {
		t.Errorf("execute_tool through connect --ca: %+v", res.Content)
	}
	untrusted := toolgateCmd(t, laptop, "connect", "--addr", gw)
	uctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if ucs, err := mcp.NewClient(&mcp.Implementation{Name: "e2e"}, nil).Connect(uctx, &mcp.CommandTransport{Command: untrusted}, nil); err == nil {
		ucs.Close()
		t.Error("connect without --ca: the handshake went through")
	} else if !strings.Contains(err.Error(), "answers, but the TLS handshake failed") || !strings.Contains(err.Error(), "with --ca FILE") {
		t.Errorf("connect without --ca: %v, want the fix naming --ca", err)
	}
}

// TestCertCommonNameOnly: a front certificate made without subjectAltName
// (openssl req -x509 -subj /CN=gw.example, the usual first try), which Go
// clients and browsers refuse for every name: the log says so at start,
// and `toolgate status` / `connect` say to make it again, where they said
// "the gateway's certificate is for [localhost], not localhost".
func TestCertCommonNameOnly(t *testing.T) {
	leaf := &x509.Certificate{Subject: pkix.Name{CommonName: "gw.example"}}
	err := fmt.Errorf("Get \"https://gw.example:8931/status\": %w", &tls.CertificateVerificationError{Err: x509.HostnameError{Certificate: leaf, Host: "gw.example"}})
	want := `the gateway's certificate names its host in the Common Name only (CN=gw.example), which Go clients, like browsers, no longer read: make it again with its names in subjectAltName (openssl req -x509 … -addext "subjectAltName=DNS:gw.example")`
	if fix := gatewayTLSFix(err, "ca.pem"); fix != want {
		t.Errorf("fix %q, want %q", fix, want)
	}
	logs := &testenv.LogBuffer{}
	warnNoNames(logs.Logger(), "gw.pem", leaf)
	if got, want := logs.String(), `level=WARN msg="the HTTPS front's certificate names no host in subjectAltName, only in its Common Name, which clients no longer read: they refuse it for every name" file=gw.pem cn=gw.example fix=`; !strings.Contains(got, want) {
		t.Errorf("at start: %q, want %q", got, want)
	}
	logs = &testenv.LogBuffer{}
	warnNoNames(logs.Logger(), "gw.pem", &x509.Certificate{Subject: pkix.Name{CommonName: "gw.example"}, DNSNames: []string{"gw.example"}})
	if got := logs.String(); got != "" {
		t.Errorf("a certificate with subjectAltName: %q, want nothing logged", got)
	}
}
