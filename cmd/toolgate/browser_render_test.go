package main

import (
	"strconv"
	"strings"
	"testing"

	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"

	"github.com/toolgate/toolgate/gateway/backend/backendtest"
)

// breakState is put in the page before its scripts: it spoils the next
// window.__break states the page reads (the one embedded in the page, then
// those of GET /ui/api/state) as window.__spoil says, after JSON.parse,
// as a gateway of another version, or a proxy that rewrites the answers,
// would send them.
const breakState = `(() => {
	window.__break = 1;
	window.__spoil = (st) => { st.backends = null; }; // a null where a list was
	const parse = JSON.parse;
	JSON.parse = function (...args) {
		const v = parse.apply(this, args);
		const st = v && (v.state || (Array.isArray(v.backends) && "catalogGeneration" in v ? v : null));
		if (st && window.__break > 0) {
			window.__break--;
			window.__spoil(st);
		}
		return v;
	};
})()`

// TestConsoleRenderErrorInBrowser: a state the page cannot draw (a null
// where a list was, a field of another shape) is said on the page, and the
// refresh every 3 s goes on and draws the next state that it can. One
// embedded in the page stopped its script before it started refreshing
// (nothing said, nothing refreshed again); one of a refresh said nothing
// and left the refresh asked for meanwhile (a button's) set for good, so
// every button's refresh after it was the old failure.
func TestConsoleRenderErrorInBrowser(t *testing.T) {
	chromium := findChromium(t)
	cfg := fakeConfig(t, map[string]string{"alpha": backendtest.ModeNormal}, nil)
	addr, _ := startGateway(t, t.TempDir(), cfg, noModelFlags(t)...)
	ctx, do, eval := newBrowser(t, chromium)
	poll := poller(t, ctx)
	if _, err := chromedp.Call(ctx, page.AddScriptToEvaluateOnNewDocument, page.AddScriptToEvaluateOnNewDocumentParams{Source: breakState}); err != nil {
		t.Fatal(err)
	}

	// The state embedded in the page cannot be drawn: said, and the
	// next refresh draws the gateway's.
	do("load /ui/", chromedp.Navigate("http://"+addr+"/ui/"))
	poll("the page to say it cannot show the state", `document.querySelector("#notice").textContent.startsWith("Could not show the gateway's state: ")`)
	var said string
	eval("the notice", `document.querySelector("#notice").textContent`, &said)
	t.Logf("embedded state: %s", said)
	// The page that says so is one a screen reader reads: the notice is a
	// live region (role status), and axe-core finds nothing serious on it
	// (the refreshes meanwhile cannot draw either: it stays so).
	do("spoil the refreshes too", chromedp.Evaluate[chromedp.Void](`window.__break = 1e9`))
	var role string
	eval("the notice's role", `document.querySelector("#notice").getAttribute("role")`, &role)
	if role != "status" {
		t.Errorf("the notice's role is %q, want status (a live region a screen reader says)", role)
	}
	vs, err := runAxe(ctx, axeSource(t))
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range vs {
		if v.Impact == "serious" || v.Impact == "critical" {
			t.Errorf("axe-core on the page that cannot draw its state: %s", v)
		}
	}
	eval("the notice", `document.querySelector("#notice").textContent`, &said)
	if !strings.HasPrefix(said, "Could not show the gateway's state: ") {
		t.Errorf("axe-core ran on a page that says %q, not the one that cannot draw its state", said)
	}
	do("let the refreshes draw", chromedp.Evaluate[chromedp.Void](`window.__break = 0`))
	poll("the refresh to draw the state and clear the notice", `document.querySelector('#backend-rows tr[data-server="alpha"]') !== null &&
		document.querySelector("#notice").textContent === ""`)

	// A refresh's state of another shape, with a button's refresh asked
	// for while it is out: both said, and the refresh queue is clear.
	do("spoil two refreshes", chromedp.Evaluate[chromedp.Void](`window.__spoil = (st) => {
		st.calls = [{at: st.started, server: "alpha", tool: "echo", outcome: "ok", durationMs: "12 ms"}];
	}; window.__break = 2;
	Promise.allSettled([refreshState(), refreshState()])`, chromedp.EvalAwaitPromise))
	eval("the notice", `document.querySelector("#notice").textContent`, &said)
	if want := "Could not show the gateway's state: "; !strings.HasPrefix(said, want) {
		t.Errorf("a refresh's state of another shape: the notice says %q, want it to start %q", said, want)
	}
	var queued bool
	eval("the queued refresh", `queued !== null`, &queued)
	if queued {
		t.Error("after a refresh whose state could not be drawn, a refresh is still queued: every later button's refresh is that failure")
	}

	// A server's name of odd characters draws, and the next good state
	// clears the notice.
	const oddName = `a"]<b>&#x y'\`
	do("an odd name", chromedp.Evaluate[chromedp.Void](`window.__spoil = (st) => {
		st.backends.push(Object.assign({}, st.backends[0], {name: `+strconv.Quote(oddName)+`, state: "down", error: "x\ny"}));
	}; window.__break = 1; refreshState()`, chromedp.EvalAwaitPromise))
	var odd int
	eval("the odd row", `[...document.querySelectorAll("#backend-rows tr")].filter((r) => r.dataset.server === `+strconv.Quote(oddName)+`).length`, &odd)
	if odd != 1 {
		eval("the notice", `document.querySelector("#notice").textContent`, &said)
		t.Errorf("a server named %s: %d rows, want 1 (notice %q)", oddName, odd, said)
	}
	poll("a good state to clear the notice", `document.querySelector("#notice").textContent === ""`)
}
