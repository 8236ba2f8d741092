package oauth

import (
	"bytes"
	"io"
	"net/http"
	"net/url"
	"strings"
)

// withResource returns a client like hc whose POSTed forms carry the
// resource parameter (RFC 8707). x/oauth2 takes extra parameters for the
// code exchange but sends only grant_type and refresh_token when
// refreshing; the MCP authorization spec wants the resource in every token
// request.
func withResource(hc *http.Client, resource string) *http.Client {
	c := *hc
	base := c.Transport
	if base == nil {
		base = http.DefaultTransport
	}
	c.Transport = &resourceParam{base: base, resource: resource}
	return &c
}

type resourceParam struct {
	base     http.RoundTripper
	resource string
}

func (p *resourceParam) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.Method != http.MethodPost || req.Body == nil ||
		!strings.HasPrefix(req.Header.Get("Content-Type"), "application/x-www-form-urlencoded") {
		return p.base.RoundTrip(req)
	}
	b, err := io.ReadAll(req.Body)
	req.Body.Close()
	if err != nil {
		return nil, err
	}
	form, err := url.ParseQuery(string(b))
	if err == nil && !form.Has("resource") {
		form.Set("resource", p.resource)
		b = []byte(form.Encode())
	}
	req = req.Clone(req.Context())
	req.Body = io.NopCloser(bytes.NewReader(b))
	req.ContentLength = int64(len(b))
	req.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(b)), nil }
	return p.base.RoundTrip(req)
}
