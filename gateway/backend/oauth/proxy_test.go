package oauth

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// A login's first request goes through the proxy of the environment, and
// its refusal is said with the proxy and the fix; it read "Proxy
// Authentication Required: check url and that the server is running".
func TestProbeThroughRefusingProxy(t *testing.T) {
	proxy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "no", http.StatusProxyAuthRequired)
	}))
	defer proxy.Close()
	t.Setenv("HTTPS_PROXY", proxy.URL)
	t.Setenv("NO_PROXY", "")
	_, err := Probe(context.Background(), defaultHTTPClient(), TransportHTTP, "https://mcp.corp.example/mcp")
	at := strings.TrimPrefix(proxy.URL, "http://")
	want := "no answer from https://mcp.corp.example/mcp: the proxy " + at + " (HTTPS_PROXY in toolgate's environment) answered the CONNECT to the server with 407 Proxy Authentication Required: the proxy wants credentials: give them in HTTPS_PROXY"
	if err == nil || !strings.HasPrefix(err.Error(), want) || strings.Contains(err.Error(), "check url") {
		t.Errorf("err:\n%v\nwant it to start:\n%s\nand not to send to the url", err, want)
	}
}

// A login to a host that does not resolve, with no proxy set, says that a
// host only a proxy resolves needs one (an office's network).
func TestProbeUnresolvedHost(t *testing.T) {
	t.Setenv("HTTPS_PROXY", "")
	t.Setenv("https_proxy", "")
	hc := defaultHTTPClient()
	hc.Transport.(*http.Transport).DialContext = func(context.Context, string, string) (net.Conn, error) {
		return nil, &net.OpError{Op: "dial", Net: "tcp", Err: &net.DNSError{Name: "mcp.corp.example", Err: "no such host", IsNotFound: true}}
	}
	_, err := Probe(context.Background(), hc, TransportHTTP, "https://mcp.corp.example/mcp")
	want := "check the url's host (no proxy is set: a host that only a proxy resolves needs HTTPS_PROXY in toolgate's environment)"
	if err == nil || !strings.HasSuffix(err.Error(), want) {
		t.Errorf("err:\n%v\nwant it to end:\n%s", err, want)
	}
}

// A login or `toolgate auth status` of a server where nothing listens says
// so in the words the gateway's own connect uses (proxyenv.Refused): it
// read Go's "dial tcp 127.0.0.1:1: connect: connection refused".
func TestProbeRefused(t *testing.T) {
	t.Setenv("HTTP_PROXY", "")
	t.Setenv("http_proxy", "")
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := l.Addr().String()
	l.Close()
	_, err = Probe(context.Background(), defaultHTTPClient(), TransportHTTP, "http://"+closed+"/mcp")
	want := "no answer from http://" + closed + "/mcp: nothing listens at " + closed + " (connection refused): check that the server is running, and the url's host and port"
	if err == nil || err.Error() != want {
		t.Errorf("err:\n%v\nwant:\n%s", err, want)
	}
}
