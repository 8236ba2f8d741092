package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/emulation"
	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolgate/toolgate/gateway/backend/backendtest"
	"github.com/toolgate/toolgate/internal/testenv"
)

// axeSource is axe-core's script (axe.min.js), installed with the bundled
// servers from examples/servers/package-lock.json (make deps-servers),
// where it is pinned by version and integrity; missing, the test is a
// missing dependency (a failure with CI=true).
func axeSource(t *testing.T) string {
	t.Helper()
	p := filepath.Join(repoRoot(t), "examples", "servers", "node_modules", "axe-core", "axe.min.js")
	b, err := os.ReadFile(p)
	if errors.Is(err, os.ErrNotExist) {
		testenv.Missing(t, "axe-core is not installed in examples/servers/node_modules (make deps-servers)")
	}
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// axeViolation is one rule axe-core found broken on the page: its id, how
// bad (minor, moderate, serious, critical), its words, and the elements.
type axeViolation struct {
	ID     string   `json:"id"`
	Impact string   `json:"impact"`
	Help   string   `json:"help"`
	Nodes  []string `json:"nodes"`
}

func (v axeViolation) String() string {
	return fmt.Sprintf("%s (%s): %s: %s", v.ID, v.Impact, v.Help, strings.Join(v.Nodes, "; "))
}

// axeRules are the axe-core rules the console is held to, by tag: WCAG
// 2.0, 2.1 and 2.2 levels A and AA, and axe-core's best practices (not
// AAA: its enhanced contrast of 7:1 the console's links and muted text do
// not reach).
var axeRules = []string{"wcag2a", "wcag2aa", "wcag21a", "wcag21aa", "wcag22aa", "best-practice"}

// runAxe runs axe-core (src, the script) on the page of ctx and returns
// its violations, each with its first 5 elements.
func runAxe(ctx context.Context, src string) ([]axeViolation, error) {
	tags, _ := json.Marshal(axeRules)
	raw, err := chromedp.Run(ctx, chromedp.Evaluate[json.RawMessage](`(async () => {
		if (!window.axe) {
`+src+`
		}
		const r = await axe.run(document, { resultTypes: ["violations"], runOnly: { type: "tag", values: `+string(tags)+` } });
		return r.violations.map((v) => ({ id: v.id, impact: v.impact, help: v.help,
			nodes: v.nodes.slice(0, 5).map((n) => n.target.join(" ") + (n.failureSummary ? " [" + n.failureSummary.replace(/\s+/g, " ") + "]" : "")) }));
	})()`, chromedp.EvalAwaitPromise))
	if err != nil {
		return nil, err
	}
	var vs []axeViolation
	return vs, json.Unmarshal(raw, &vs)
}

// TestConsoleAccessibilityInBrowser runs axe-core (axeRules) on each state
// of the console an operator meets — the login form, a refused key, the
// backends, the recent calls, a search's results, a failed search, a
// server disabled, a phone's width with an input schema open, dark mode,
// and the gateway not answering (greyed) — and fails on each violation of
// impact serious or critical (the others are logged). And it uses the
// page with the keyboard alone: Tab reaches each control, each stop shows
// a focus ring, Enter or Space logs in, searches, disables, enables,
// restarts and logs out, the focus stays on the row's buttons, and a table
// wider than a phone scrolls with the arrow keys. One Chromium, one
// gateway.
func TestConsoleAccessibilityInBrowser(t *testing.T) {
	axe := axeSource(t)
	chromium := findChromium(t)
	data := t.TempDir()
	key := createKey(t, data, "--name", "ops", "--admin")
	addr, _, stop := startGatewayStop(t, data, fakeConfig(t, map[string]string{"fake": backendtest.ModeNormal}, nil), noModelFlags(t)...)
	ctx, do, eval := newBrowser(t, chromium)
	poll := poller(t, ctx)

	var found []string
	check := func(state string) {
		t.Helper()
		vs, err := runAxe(ctx, axe)
		if err != nil {
			t.Fatalf("axe-core on %s: %v", state, err)
		}
		for _, v := range vs {
			if v.Impact == "serious" || v.Impact == "critical" {
				found = append(found, state+": "+v.String())
			} else {
				t.Logf("axe-core on %s: %s", state, v)
			}
		}
	}
	// tabTo presses Tab until the focus is on what cond (of f, the
	// focused element) says; each stop on the way must show a focus ring
	// (but the page itself, where Tab goes past the last control).
	tabTo := func(what, cond string) {
		t.Helper()
		for range 200 {
			do("Tab", chromedp.KeyEvent(kb.Tab))
			var at []any
			eval("the focus", `(() => { const f = document.activeElement, s = getComputedStyle(f);
				return [`+cond+`, f === document.body || s.outlineStyle !== "none" && parseFloat(s.outlineWidth) >= 2, f.outerHTML.slice(0, 100)]; })()`, &at)
			if at[1] != true {
				t.Errorf("on the way to %s: no focus ring on %s", what, at[2])
			}
			if at[0] == true {
				return
			}
		}
		t.Fatalf("200 Tabs did not reach %s", what)
	}
	focusIs := func(what, cond string) {
		t.Helper()
		var ok bool
		var at string
		eval("the focus", `(() => { const f = document.activeElement; return `+cond+`; })()`, &ok)
		if !ok {
			eval("the focus", `document.activeElement.outerHTML.slice(0, 100)`, &at)
			t.Errorf("the focus is on %s, want it on %s", at, what)
		}
	}
	logIn := func() {
		t.Helper()
		tabTo("the key field", `f.id === "login-key"`)
		do("type the key and Enter", chromedp.KeyEvent(key), chromedp.KeyEvent(kb.Enter), chromedp.WaitVisible(`#backend-rows tr[data-server="fake"]`))
		poll("the backends and the catalog", `!!document.querySelector('#backend-rows tr[data-server="fake"][data-state="up"]') && !!document.querySelector("#catalog-list li")`)
	}

	do("load /ui/", chromedp.Navigate("http://"+addr+"/ui/"), chromedp.WaitVisible(`#login-key`))
	check("the login form")
	do("to the page's start", chromedp.Evaluate[chromedp.Void](`document.activeElement.blur()`))
	tabTo("the skip link", `f.matches("a.skip")`)
	var skip []float64
	eval("the skip link's place", `(() => { const r = document.activeElement.getBoundingClientRect(); return [r.left, r.width]; })()`, &skip)
	if skip[0] < 0 || skip[1] == 0 {
		t.Errorf("the focused skip link is at %v, off the screen", skip)
	}
	tabTo("the key field", `f.id === "login-key"`)
	do("type a wrong key and Enter", chromedp.KeyEvent("tg_wrong"), chromedp.KeyEvent(kb.Enter))
	poll("the refusal", `document.querySelector("#notice").textContent !== ""`)
	focusIs("the key field, marked refused", `f.id === "login-key" && f.getAttribute("aria-invalid") === "true" && f.getAttribute("aria-describedby") === "notice"`)
	check("a refused key")
	do("clear the key", chromedp.Evaluate[chromedp.Void](`document.querySelector("#login-key").value = ""`))
	logIn()
	check("the backends and the catalog")
	// No landmark a screen reader lists is empty: the search results'
	// region shows with the first search's results.
	var empty []string
	eval("the empty regions", `[...document.querySelectorAll("[role=region]")].filter((r) => r.checkVisibility() && !r.querySelector("tbody tr")).map((r) => r.getAttribute("aria-label"))`, &empty)
	if len(empty) > 0 {
		t.Errorf("before a search the page shows the regions %q with nothing in them", empty)
	}

	cctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	cs, err := connectKey(cctx, t, addr, "/mcp", key, "a11y")
	if err != nil {
		t.Fatal(err)
	}
	if res, err := cs.CallTool(cctx, &mcp.CallToolParams{Name: "execute_tool", Arguments: map[string]any{"name": "fake__echo", "arguments": map[string]any{"text": "hi"}}}); err != nil || res.IsError {
		t.Fatalf("execute fake__echo: %v %s", err, resultText(res))
	}
	poll("the recent calls", `document.querySelectorAll("#call-rows tr[data-tool]").length >= 1`)
	// Who made the call: its API key, in a column of its own (an admin
	// reads the whole team's calls; the table named no one).
	var who []string
	eval("the recent call's key", `[document.querySelector("#call-key-h").checkVisibility() ? document.querySelector("#call-key-h").textContent : "",
		document.querySelector("#call-rows tr[data-tool] td[data-key]")?.textContent || ""]`, &who)
	if fmt.Sprint(who) != "[API key ops]" {
		t.Errorf("the recent calls' key column and the call's key: %q, want the header API key and ops", who)
	}
	check("the recent calls")

	tabTo("the query field", `f.id === "q"`)
	do("type a query and Enter", chromedp.KeyEvent("echo text"), chromedp.KeyEvent(kb.Enter))
	poll("the results", `!!document.querySelector("#search-rows tr[data-tool]")`)
	check("a search's results")
	do("choose a server with no tools", chromedp.Evaluate[chromedp.Void](`(() => { const s = document.querySelector("#server"); s.append(new Option("nope", "nope")); s.value = "nope"; })()`))
	tabTo("the search button", `f.matches("#search-form button")`)
	do("Space on Search", chromedp.KeyEvent(" "))
	poll("the failed search", `document.querySelector("#search-summary").textContent.startsWith("Search failed")`)
	check("a failed search")

	do("to the page's start", chromedp.Evaluate[chromedp.Void](`document.activeElement.blur()`))
	tabTo("fake's Disable", `f.dataset.disable === "fake"`)
	do("Enter on Disable", chromedp.KeyEvent(kb.Enter))
	poll("fake disabled, the focus on its Enable", `document.activeElement.dataset.enable === "fake"`)
	check("a server disabled")
	do("Space on Enable", chromedp.KeyEvent(" "))
	poll("fake up again", `!!document.querySelector('#backend-rows tr[data-server="fake"][data-state="up"]')`)
	focusIs("a button of fake's row", `!!f.closest('tr[data-server="fake"]') && f.tagName === "BUTTON"`)
	do("to the page's start", chromedp.Evaluate[chromedp.Void](`document.activeElement.blur()`))
	tabTo("fake's Restart", `f.dataset.restart === "fake"`)
	do("Enter on Restart", chromedp.KeyEvent(kb.Enter))
	poll("the restart requested", `document.querySelector("#notice").textContent.includes("Restart of fake requested.")`)
	focusIs("fake's Restart still", `f.dataset.restart === "fake"`)

	do("to the page's start", chromedp.Evaluate[chromedp.Void](`document.activeElement.blur()`))
	tabTo("Log out", `f.id === "logout"`)
	do("Enter on Log out", chromedp.KeyEvent(kb.Enter), chromedp.WaitVisible(`#login-key`))
	logIn()

	// A phone's width: the tables wider than it scroll, with the keyboard
	// too.
	do("a phone's width", chromedp.EmulateViewport(375, 800))
	poll("the recent calls wider than the page", `(() => { const b = document.querySelector("#calls .scroll"); return b.scrollWidth > b.clientWidth; })()`)
	do("to the page's start", chromedp.Evaluate[chromedp.Void](`document.activeElement.blur()`))
	tabTo("the recent calls' table", `f.matches("#calls .scroll")`)
	do("ArrowRight", chromedp.KeyEvent(kb.ArrowRight))
	poll("the recent calls scrolled sideways", `document.querySelector("#calls .scroll").scrollLeft > 0`)
	tabTo("fake__echo's input schema", `f.matches('#catalog-list li[data-tool="fake__echo"] summary')`)
	var name string
	eval("the summary's words", `document.activeElement.textContent`, &name)
	if name != "Input schema of fake__echo" {
		t.Errorf("the catalog's summary says %q to a screen reader, want the tool named", name)
	}
	do("Enter on it", chromedp.KeyEvent(kb.Enter))
	poll("the schema open", `document.querySelector('#catalog-list li[data-tool="fake__echo"] details').open`)
	// A tool that declares an output schema (fake__add's {"sum": number})
	// shows it below its input schema, named with its tool as well.
	var output []string
	eval("fake__add's output schema", `(() => { const d = document.querySelector('#catalog-list li[data-tool="fake__add"] details[data-schema="output"]');
		return d ? [d.querySelector("summary").textContent, String(d.querySelector("pre").textContent.includes('"sum"'))] : []; })()`, &output)
	if fmt.Sprint(output) != "[Output schema of fake__add true]" {
		t.Errorf("fake__add's output schema in the catalog: %q, want its summary named and its schema with \"sum\"", output)
	}
	check("a phone's width, an input schema open")

	if _, err := chromedp.Call(ctx, emulation.SetEmulatedMedia, emulation.SetEmulatedMediaParams{Features: []*emulation.MediaFeature{{Name: "prefers-color-scheme", Value: "dark"}}}); err != nil {
		t.Fatalf("dark mode: %v", err)
	}
	check("dark mode")

	// The gateway gone: the page greys what it shows, still legible.
	do("count the page's requests", chromedp.Evaluate[chromedp.Void](`(() => {
		window.__fetches = 0;
		const f = window.fetch;
		window.fetch = (...args) => { window.__fetches++; return f(...args); };
	})()`))
	stop()
	poll("the page greyed", `document.querySelector("#backends").classList.contains("stale")`)
	// The notice, a live region, is written once: each write of the same
	// words, every 3 s, had a screen reader say them again.
	do("watch the notice", chromedp.Evaluate[chromedp.Void](`(() => {
		window.__said = 0; window.__asked = window.__fetches;
		new MutationObserver((ms) => { window.__said += ms.length; }).observe(document.querySelector("#notice"), { childList: true, characterData: true, subtree: true });
	})()`))
	poll("two more refreshes", `window.__fetches >= window.__asked + 2`)
	var said int
	eval("the notice's writes", `window.__said`, &said)
	if said != 0 {
		t.Errorf("while the gateway did not answer the notice (a live region) was written %d times over two refreshes, want none: a screen reader says it again at each", said)
	}
	check("the gateway not answering, dark")
	if _, err := chromedp.Call(ctx, emulation.SetEmulatedMedia, emulation.SetEmulatedMediaParams{Features: []*emulation.MediaFeature{{Name: "prefers-color-scheme", Value: "light"}}}); err != nil {
		t.Fatalf("light mode: %v", err)
	}
	check("the gateway not answering, light")

	if len(found) > 0 {
		t.Errorf("axe-core found %d violations of impact serious or critical:\n%s", len(found), strings.Join(found, "\n"))
	}
}
