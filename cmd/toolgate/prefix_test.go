package main

import (
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/toolgate/toolgate/gateway/backend/backendtest"
)

// prefixProxy is a reverse proxy in front of the gateway at addr that
// serves it under prefix ("/toolgate"), stripping it, as nginx's
// `location /toolgate/ { proxy_pass http://127.0.0.1:8931/; }` does: it
// keeps the Host, adds X-Forwarded-For, and answers any other path with
// its own 404, so a URL that leaves the prefix (an absolute /ui/…) fails
// as it fails behind nginx. It returns the proxy's base URL, prefix
// included.
func prefixProxy(t *testing.T, addr, prefix string) string {
	t.Helper()
	target := &url.URL{Scheme: "http", Host: addr}
	rp := &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.SetURL(target)
			pr.Out.Host = pr.In.Host
			pr.SetXForwarded()
		},
		FlushInterval: -1,
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rest, ok := strings.CutPrefix(r.URL.Path, prefix+"/")
		if !ok {
			http.Error(w, "the proxy serves nothing at "+r.URL.Path, http.StatusNotFound)
			return
		}
		r.URL.Path, r.URL.RawPath = "/"+rest, ""
		rp.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	return srv.URL + prefix
}

// TestConsoleUnderPrefixInBrowser: behind a proxy that serves the gateway
// under /toolgate/, the console works as at the root: the root and /ui
// send the browser to /toolgate/ui/ (they sent it to /ui/, outside the
// prefix), the page loads its script and style, a key logs in (the
// session cookie was scoped to /ui/, so the browser never sent it back),
// the state, searches and buttons reach the API, a search's deep link
// keeps the prefix, and logging out shows the login form again.
func TestConsoleUnderPrefixInBrowser(t *testing.T) {
	chromium := findChromium(t)
	data := t.TempDir()
	key := createKey(t, data, "--name", "ops", "--admin")
	addr, _ := startGateway(t, data, fakeConfig(t, map[string]string{"fake": backendtest.ModeNormal}, nil), noModelFlags(t)...)
	base := prefixProxy(t, addr, "/toolgate")
	ctx, do, eval := newBrowser(t, chromium)
	poll := poller(t, ctx)

	for _, from := range []string{"/", "/ui"} {
		var path string
		do("open "+from, chromedp.Navigate(base+from))
		eval("the page's path", `location.pathname`, &path)
		if path != "/toolgate/ui/" {
			t.Fatalf("/toolgate%s led to %s, want /toolgate/ui/", from, path)
		}
	}
	// The script ran and the style applies (the skip link is off screen
	// until focused).
	var loaded []bool
	eval("the script and the style", `[typeof refreshState === "function", getComputedStyle(document.querySelector(".skip")).position === "absolute"]`, &loaded)
	if len(loaded) != 2 || !loaded[0] || !loaded[1] {
		t.Fatalf("the page's script, style loaded: %v, want both", loaded)
	}
	do("the login form", chromedp.WaitVisible(`#login-key`))
	do("log in", chromedp.SendKeys(`#login-key`, key), chromedp.Click(`#login-form button[type=submit]`),
		chromedp.WaitVisible(`#backend-rows tr[data-server="fake"]`))

	do("load a deep link", chromedp.Navigate(base+"/ui/?q=echo+the+given+text"), chromedp.WaitVisible(`#search-rows tr[data-tool="fake__echo"]`))
	do("search from the form", chromedp.Evaluate[chromedp.Void](`document.querySelector("#search-rows").replaceChildren(); document.querySelector("#q").value = "add two numbers"`),
		chromedp.Click(`#search-form button[type=submit]`), chromedp.WaitVisible(`#search-rows tr[data-tool="fake__add"]`))
	var link string
	eval("the deep link", `location.pathname + location.search`, &link)
	if !strings.HasPrefix(link, "/toolgate/ui/?q=add+two+numbers") {
		t.Errorf("the search's deep link %q, want /toolgate/ui/?q=add+two+numbers…", link)
	}
	do("disable fake", redrawn(chromedp.Click(`button[data-disable="fake"]`)))
	poll("fake disabled", `document.querySelector('#backend-rows tr[data-server="fake"]')?.dataset.state === "disabled"`)
	do("enable fake", redrawn(chromedp.Click(`button[data-enable="fake"]`)))
	poll("fake up again", `document.querySelector('#backend-rows tr[data-server="fake"]')?.dataset.state === "up"`)
	var notice string
	eval("the notice", `document.querySelector("#notice").textContent`, &notice)
	if strings.Contains(notice, "failed") {
		t.Errorf("notice %q", notice)
	}
	do("log out", chromedp.Click(`#logout`), chromedp.WaitVisible(`#login-key`))
}
