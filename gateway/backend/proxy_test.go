package backend

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolgate/toolgate/gateway/backend/backendtest"
	"github.com/toolgate/toolgate/gateway/config"
	"github.com/toolgate/toolgate/internal/testenv"
	"github.com/toolgate/toolgate/internal/tlsfiles/tlstest"
)

// A remote server reached through the proxy of toolgate's environment
// (HTTPS_PROXY, HTTP_PROXY), which refuses: the error names the proxy,
// the variable and the fix, never the proxy's password. A refused CONNECT
// read "rejected by transport: Post "https://…": Proxy Authentication
// Required", a proxy that was not running "nothing listens at the url's
// address", and a plain HTTP proxy's 407 "check url, type (http) and
// headers".
func TestRemoteThroughRefusingProxy(t *testing.T) {
	proxy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Proxy-Authenticate", `Basic realm="corp"`)
		http.Error(w, "Proxy Authentication Required", http.StatusProxyAuthRequired)
	}))
	defer proxy.Close()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := ln.Addr().String()
	ln.Close()
	at := strings.TrimPrefix(proxy.URL, "http://")
	for _, tc := range []struct {
		name, url, proxy, want string
	}{
		{"connect", "https://mcp.corp.example/mcp", proxy.URL,
			"the proxy " + at + " (HTTPS_PROXY in toolgate's environment) answered the CONNECT to the server with 407 Proxy Authentication Required: the proxy wants credentials: give them in HTTPS_PROXY (http://USER:PASSWORD@" + at + ") where toolgate starts"},
		{"forward", "http://mcp.corp.example/mcp", proxy.URL,
			"the server answered a POST with 407 Proxy Authentication Required: the proxy wants credentials: give them in HTTP_PROXY (http://USER:PASSWORD@" + at + ") where toolgate starts"},
		{"down", "https://mcp.corp.example/mcp", "http://alice:s3cret@" + closed,
			"nothing listens at the proxy " + closed + " (HTTPS_PROXY in toolgate's environment; connection refused): check HTTPS_PROXY, or list the url's host in NO_PROXY if the server is reached without the proxy"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv("HTTPS_PROXY", tc.proxy)
			t.Setenv("HTTP_PROXY", tc.proxy)
			t.Setenv("NO_PROXY", "")
			s := config.Server{Name: tc.name, Type: config.TypeHTTP, URL: tc.url}
			p := startPool(t, []config.Server{s}, testOptions(&testenv.LogBuffer{}))
			testenv.Eventually(t, "the server down", func() bool { return statusOf(t, p, tc.name).LastErr != "" })
			want := fmt.Sprintf("backend %q at %s: %s", tc.name, tc.url, tc.want)
			if got := statusOf(t, p, tc.name).LastErr; !strings.HasPrefix(got, want) || strings.Contains(got, "s3cret") {
				t.Errorf("error:\n%s\nwant it to start:\n%s", got, want)
			}
		})
	}
}

// tunnelProxy is a proxy whose every CONNECT is a tunnel to the address
// to, or, while refuse (nil: never) is true, answered 407.
func tunnelProxy(t *testing.T, to string, refuse *atomic.Bool) *httptest.Server {
	proxy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if refuse != nil && refuse.Load() {
			http.Error(w, "no", http.StatusProxyAuthRequired)
			return
		}
		up, err := net.Dial("tcp", to)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		defer up.Close()
		w.WriteHeader(http.StatusOK)
		c, buf, err := w.(http.Hijacker).Hijack()
		if err != nil {
			return
		}
		defer c.Close()
		go io.Copy(up, buf)
		io.Copy(c, up)
	}))
	t.Cleanup(proxy.Close)
	return proxy
}

// A proxy that inspects TLS answers the CONNECT and presents a certificate
// of its own CA, which this machine does not trust: the fix names the
// proxy and its CA (tls.ca, or SSL_CERT_FILE for every server) besides the
// server's "tls.ca", which alone read as the server's own private CA.
func TestRemoteThroughInspectingProxy(t *testing.T) {
	ca := tlstest.NewCA(t, "Corp Inspection CA")
	leaf := ca.Issue(t, tlstest.Options{Names: []string{"mcp.corp.example"}})
	inner := httptest.NewUnstartedServer(http.NotFoundHandler())
	inner.TLS = tlstest.ServerConfig(leaf, nil)
	inner.Config.ErrorLog = log.New(io.Discard, "", 0)
	inner.StartTLS()
	defer inner.Close()
	proxy := tunnelProxy(t, inner.Listener.Addr().String(), nil)
	t.Setenv("HTTPS_PROXY", proxy.URL)
	t.Setenv("NO_PROXY", "")
	s := config.Server{Name: "corp", Type: config.TypeHTTP, URL: "https://mcp.corp.example/mcp"}
	p := startPool(t, []config.Server{s}, testOptions(&testenv.LogBuffer{}))
	testenv.Eventually(t, "the server down", func() bool { return statusOf(t, p, "corp").LastErr != "" })
	want := `give that CA's certificate, a PEM file, in the server's "tls": {"ca": "…"} (or install it in the system's trust store); the requests go through the proxy ` +
		strings.TrimPrefix(proxy.URL, "http://") + ` (HTTPS_PROXY), and a proxy that inspects TLS signs with a CA of its own: give that CA then, in "tls.ca" or, for every server, in SSL_CERT_FILE`
	if got := statusOf(t, p, "corp").LastErr; !strings.Contains(got, "x509: certificate signed by unknown authority") || !strings.Contains(got, want) {
		t.Errorf("error:\n%s\nwant it to say:\n%s", got, want)
	}
}

// A server that takes the connection and answers nothing (no status, no
// byte, no FIN: a stuck process, a firewall or proxy that swallows the
// request) is said so when the connect timeout ends; it read "check url
// and that the server is running", as for a server that did not run.
func TestRemoteAcceptsAndAnswersNothing(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	held := make(chan net.Conn, 16)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			held <- c
		}
	}()
	defer func() {
		for {
			select {
			case c := <-held:
				c.Close()
			default:
				return
			}
		}
	}()
	url := "http://" + ln.Addr().String() + "/mcp"
	s := config.Server{Name: "hole", Type: config.TypeHTTP, URL: url, ConnectTimeout: config.Duration{Duration: 300 * time.Millisecond}}
	p := startPool(t, []config.Server{s}, testOptions(&testenv.LogBuffer{}))
	testenv.Eventually(t, "the server down", func() bool { return statusOf(t, p, "hole").LastErr != "" })
	want := fmt.Sprintf(`backend "hole" at %s: no complete MCP handshake and tool list within the connect timeout (300ms): the request was sent to the url's address, which took the connection, and nothing came back, not even a status`, url)
	if got := statusOf(t, p, "hole").LastErr; !strings.HasPrefix(got, want) {
		t.Errorf("error:\n%s\nwant it to start:\n%s", got, want)
	}
}

// noProxyNote ends the fix of a host name that does not resolve when no
// proxy is set.
const noProxyNote = " (no proxy is set: a host that only a proxy resolves needs HTTPS_PROXY in toolgate's environment)"

// A host name that does not resolve, reached without a proxy, says why no
// proxy was asked: none is set (a gateway an MCP client started, without
// the shell's HTTPS_PROXY), or NO_PROXY keeps the host off it.
func TestUnresolvedHostAndTheProxy(t *testing.T) {
	err := fmt.Errorf("sending: %w", &net.OpError{Op: "dial", Err: &net.DNSError{Name: "mcp.corp.example", Err: "no such host", IsNotFound: true}})
	for _, tc := range []struct{ proxy, noProxy, want string }{
		{"", "", noProxyNote},
		{"http://proxy.corp.example:3128", ".corp.example", " (NO_PROXY keeps it off the proxy of HTTPS_PROXY)"},
	} {
		t.Setenv("HTTPS_PROXY", tc.proxy)
		t.Setenv("https_proxy", "")
		t.Setenv("NO_PROXY", tc.noProxy)
		want := `the host name "mcp.corp.example" does not resolve (no such host): check the url's host` + tc.want
		if got := unreachable(err, "https://mcp.corp.example/mcp"); got == nil || got.Error() != want {
			t.Errorf("with HTTPS_PROXY=%q NO_PROXY=%q:\n%v\nwant:\n%s", tc.proxy, tc.noProxy, got, want)
		}
	}
}

// A proxy that starts refusing mid-session (a password changed, a policy
// pushed) fails the call as unavailable, said with the proxy and the fix,
// and the server goes down to be connected to again; it read "server
// answered with an error: … rejected by transport: Post …", as the
// server's own, and the server stayed up.
func TestProxyRefusesMidSession(t *testing.T) {
	ca := tlstest.NewCA(t, "Corp CA")
	leaf := ca.Issue(t, tlstest.Options{Names: []string{"mcp.corp.example"}})
	srv := backendtest.NewServer(backendtest.ParseModes("normal"))
	inner := httptest.NewUnstartedServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv },
		&mcp.StreamableHTTPOptions{DisableLocalhostProtection: true})) // reached as mcp.corp.example
	inner.TLS = tlstest.ServerConfig(leaf, nil)
	inner.Config.ErrorLog = log.New(io.Discard, "", 0)
	inner.StartTLS()
	defer inner.Close()
	var refuse atomic.Bool
	proxy := tunnelProxy(t, inner.Listener.Addr().String(), &refuse)
	t.Setenv("HTTPS_PROXY", proxy.URL)
	t.Setenv("NO_PROXY", "")
	s := config.Server{Name: "corp", Type: config.TypeHTTP, URL: "https://mcp.corp.example/mcp",
		TLS: &config.TLS{CA: tlstest.Write(t, t.TempDir(), "ca.pem", ca.PEM)}}
	p := startPool(t, []config.Server{s}, reopenOptions())
	testenv.Eventually(t, "corp up", func() bool { return statusOf(t, p, "corp").State == StateUp })
	refuse.Store(true)
	inner.CloseClientConnections() // the tunnels end: the next request asks the proxy again
	want := "it cannot be reached: the proxy " + strings.TrimPrefix(proxy.URL, "http://") + " (HTTPS_PROXY in toolgate's environment) answered the CONNECT to the server with 407 Proxy Authentication Required"
	testenv.Eventually(t, "a call said unavailable through the proxy", func() bool {
		_, err := p.CallTool(context.Background(), "corp", "echo", map[string]any{"text": "x"})
		var un *UnavailableError
		if !errors.As(err, &un) {
			t.Fatalf("call through a refusing proxy: %v, want it unavailable", err)
		}
		return strings.Contains(err.Error(), want) // the first may meet a tunnel that closed
	})
	testenv.Eventually(t, "corp down", func() bool {
		st := statusOf(t, p, "corp")
		return st.State == StateDown && strings.Contains(st.Err, "407 Proxy Authentication Required")
	})
}

// A proxy of plain HTTP (HTTP_PROXY, for an http url) gets the request
// itself, with no CONNECT, so its own refusals came back as the server's
// ("the server answered a POST with 403 Forbidden: the server refused
// these credentials …"). An answer whose headers show the proxy made it
// (Squid's X-Squid-Error, an error in the last Proxy-Status member) is
// said as the proxy's, with its fix; one that does not show it is still
// the server's, as a relayed answer may be.
func TestPlainHTTPProxyOwnAnswer(t *testing.T) {
	for _, tc := range []struct {
		name   string
		code   int
		header [2]string
		want   string
	}{
		{"squid", http.StatusForbidden, [2]string{"X-Squid-Error", "ERR_ACCESS_DENIED 0"},
			"the proxy %s (HTTP_PROXY in toolgate's environment) answered the POST for the server itself with 403 Forbidden (X-Squid-Error: ERR_ACCESS_DENIED 0): the proxy does not let toolgate reach this host: ask its administrators to allow it, or list the url's host in NO_PROXY if the server is reached without the proxy"},
		{"proxy-status", http.StatusBadGateway, [2]string{"Proxy-Status", "origin-lb, corp-proxy; error=dns_error; rcode=NXDOMAIN"},
			"the proxy %s (HTTP_PROXY in toolgate's environment) answered the POST for the server itself with 502 Bad Gateway (Proxy-Status: corp-proxy; error=dns_error; rcode=NXDOMAIN): the proxy could not reach the server"},
		{"relayed", http.StatusForbidden, [2]string{"Via", "1.1 corp-proxy"},
			"the server answered a POST with 403 Forbidden (\"denied\"): the server refused these credentials or this client"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			proxy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set(tc.header[0], tc.header[1])
				http.Error(w, "denied", tc.code)
			}))
			defer proxy.Close()
			t.Setenv("HTTP_PROXY", proxy.URL)
			t.Setenv("http_proxy", "")
			t.Setenv("NO_PROXY", "")
			url := "http://mcp.corp.example/mcp"
			s := config.Server{Name: tc.name, Type: config.TypeHTTP, URL: url}
			p := startPool(t, []config.Server{s}, testOptions(&testenv.LogBuffer{}))
			testenv.Eventually(t, "the server down", func() bool { return statusOf(t, p, tc.name).LastErr != "" })
			want := fmt.Sprintf("backend %q at %s: "+tc.want, tc.name, url)
			if strings.Contains(tc.want, "%s") {
				want = fmt.Sprintf("backend %q at %s: "+tc.want, tc.name, url, strings.TrimPrefix(proxy.URL, "http://"))
			}
			if got := statusOf(t, p, tc.name).LastErr; !strings.HasPrefix(got, want) {
				t.Errorf("error:\n%s\nwant it to start:\n%s", got, want)
			}
		})
	}
}
