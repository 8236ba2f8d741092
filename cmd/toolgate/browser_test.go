package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto"
	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/fetch"
	"github.com/chromedp/cdproto/input"
	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/chromedp"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolgate/toolgate/gateway"
	"github.com/toolgate/toolgate/gateway/audit"
	"github.com/toolgate/toolgate/gateway/backend/backendtest"
	"github.com/toolgate/toolgate/gateway/config"
	"github.com/toolgate/toolgate/gateway/live"
	"github.com/toolgate/toolgate/internal/tlsfiles/tlstest"
)

var updateScreenshot = flag.Bool("update-screenshot", false, "write the console screenshot of TestConsoleInBrowser to docs/console.png")

// TestConsoleInBrowser drives the console of a real toolgate (bundled
// servers) in Debian's headless Chromium through chromedp (the system
// browser, never a downloaded one): the three servers are listed up, a
// playground query finds the expected tool, the restart button restarts a
// backend (its PID changes, in the page and in GET /status), and a
// screenshot is written to the test's temp folder (and to docs/console.png
// with -update-screenshot).
func TestConsoleInBrowser(t *testing.T) {
	chromium := findChromium(t)
	// Beside the bundled servers, a remote one reached with a client
	// certificate (mutual TLS) that expires within a day: due for renewal.
	certs := t.TempDir()
	ca, clients := tlstest.NewCA(t, "private CA"), tlstest.NewCA(t, "clients CA")
	client := clients.Issue(t, tlstest.Options{Client: true})
	internal := backendtest.NewHTTPSServer(t, config.TypeHTTP, backendtest.ModeNormal,
		tlstest.ServerConfig(ca.Issue(t, tlstest.Options{Names: []string{"127.0.0.1"}}), clients))
	cfgPath := bundledConfig(t, map[string]any{"internal": map[string]any{"url": internal.Endpoint, "tls": map[string]any{
		"ca": tlstest.Write(t, certs, "ca.pem", ca.PEM), "cert": tlstest.Write(t, certs, "client.pem", client.CertPEM),
		"key": tlstest.Write(t, certs, "client-key.pem", client.KeyPEM)}}})
	addr, _, _ := serveHTTP(t, cfgPath)
	base := "http://" + addr
	ctx, do, eval := newBrowser(t, chromium)

	// The backends table: every server up, the bundled ones with their PID.
	do("load /ui/", chromedp.Navigate(base+"/ui/"), chromedp.WaitVisible(`#backend-rows tr[data-server="memory"]`))
	var rows [][]string
	eval("backend rows", `[...document.querySelectorAll("#backend-rows tr")].map(r => [r.dataset.server, r.dataset.state, r.dataset.pid])`, &rows)
	pids := map[string]string{}
	for _, r := range rows {
		if r[1] != "up" || r[2] == "" && r[0] != "internal" {
			t.Errorf("backend row %v: want up with a PID", r)
		}
		pids[r[0]] = r[2]
	}
	// Under the table, what needs doing: internal's client certificate.
	var warnings []string
	eval("the warnings", `[...document.querySelectorAll("#backend-warnings:not([hidden]) li")].map(li => li.textContent)`, &warnings)
	if want := "internal: client certificate " + filepath.Join(certs, "client.pem") + " expires at "; len(warnings) != 1 || !strings.HasPrefix(warnings[0], want) || !strings.HasSuffix(warnings[0], " hours: renew it") {
		t.Errorf("the console's warnings %q, want %q… hours: renew it", warnings, want)
	}
	for _, s := range bundledServers {
		if pids[s] == "" {
			t.Errorf("no row for %s in %v", s, rows)
		}
	}
	// How searches rank, from GET /status's "search" section.
	var ranking string
	eval("the ranking fact", `[...document.querySelectorAll("#index-state dt")].find((d) => d.textContent === "Ranking")?.nextElementSibling.textContent ?? ""`, &ranking)
	if !strings.HasPrefix(ranking, "hybrid (all-MiniLM-L6-v2/") {
		t.Errorf("the console's ranking fact %q, want hybrid with the model", ranking)
	}
	// A setting that waits for a restart, once the config changed it.
	var doc map[string]any
	if b, err := os.ReadFile(cfgPath); err != nil || json.Unmarshal(b, &doc) != nil {
		t.Fatalf("read the config: %v", err)
	}
	doc["toolgate"].(map[string]any)["embed"] = map[string]any{"variant": "int8"}
	b, _ := json.Marshal(doc)
	writeRaw(t, cfgPath, b, true)
	waitStatus(t, addr, "the reload", func(s live.Stats) bool { return s.ReloadGeneration >= 1 })
	const pendingFact = `[...document.querySelectorAll("#index-state dt")].find((d) => d.textContent === "Waiting for a restart")?.nextElementSibling.textContent ?? ""`
	do("the fact of a setting waiting for a restart", chromedp.Poll[chromedp.Void](pendingFact+` !== ""`,
		chromedp.WithPollingInterval(100*time.Millisecond), chromedp.WithPollingTimeout(time.Minute)))
	var pending string
	eval("the restart fact", pendingFact, &pending)
	if pending != "toolgate.embed (changed since the start)" {
		t.Errorf("the console's restart fact %q", pending)
	}

	// The playground: a query typed into the form.
	do("search in the playground",
		chromedp.SendKeys(`#q`, "list the files in a directory"),
		chromedp.Click(`#search-form button[type=submit]`),
		chromedp.WaitVisible(`#search-rows tr[data-tool]`))
	var first, url string
	eval("first hit", `document.querySelector("#search-rows tr").dataset.tool`, &first)
	if first != "filesystem__list_directory" {
		t.Errorf("playground's first hit %q, want filesystem__list_directory", first)
	}
	eval("the page's URL", `location.pathname + location.search`, &url)
	if !strings.Contains(url, "q=list+the+files+in+a+directory") {
		t.Errorf("the page's URL after a search is %q, want a deep link with the query", url)
	}
	var heads []string
	eval("the score columns", `[...document.querySelectorAll("#search-head th")].map(th => th.textContent)`, &heads)
	if !slices.Contains(heads, "Confidence") {
		t.Errorf("playground columns %v, want Confidence among them", heads)
	}
	// A request of two steps: the second step's tool says which step found it.
	const twoSteps = "store a new entity in the knowledge graph and then list the files in a directory"
	step := `#search-rows tr[data-tool="filesystem__list_directory"] .clause`
	do("search a request of two steps",
		chromedp.Evaluate[chromedp.Void](`document.querySelector("#q").value = ""`),
		chromedp.SendKeys(`#q`, twoSteps),
		chromedp.Click(`#search-form button[type=submit]`),
		chromedp.WaitVisible(step))
	var clause string
	eval("the step's clause", `document.querySelector('`+step+`').textContent`, &clause)
	if !strings.Contains(clause, "list the files in a directory") {
		t.Errorf("filesystem__list_directory's step %q, want the clause that found it", clause)
	}

	// The restart button: memory comes back up with another process.
	old := pids["memory"]
	do("restart memory", redrawn(chromedp.Click(`button[data-restart="memory"]`)))
	if _, err := chromedp.Run(ctx, chromedp.Poll[chromedp.Void](fmt.Sprintf(`(() => {
			const r = document.querySelector('#backend-rows tr[data-server="memory"]');
			return r && r.dataset.state === "up" && r.dataset.pid !== "" && r.dataset.pid !== %q; })()`, old),
		chromedp.WithPollingInterval(100*time.Millisecond), chromedp.WithPollingTimeout(2*time.Minute))); err != nil {
		t.Fatalf("waiting for the page to show memory up with a new PID: %v", err)
	}
	rep := getStatus(t, addr)
	for _, b := range rep.Backends {
		if b.Name == "memory" && (fmt.Sprint(b.PID) == old || b.Restarts != 1) {
			t.Errorf("GET /status after the restart: memory pid %d (was %s), restarts %d; want a new process, 1 restart", b.PID, old, b.Restarts)
		}
	}
	notice, err := chromedp.Run(ctx, chromedp.Text(`#notice`))
	if err != nil || !strings.Contains(notice, "Restart of memory requested") {
		t.Errorf("notice after restart: %q %v", notice, err)
	}

	// Disable memory: its row says so, with an Enable button that starts
	// it again.
	pollRow := func(what, cond string) {
		t.Helper()
		if _, err := chromedp.Run(ctx, chromedp.Poll[chromedp.Void](`(() => {
			const r = document.querySelector('#backend-rows tr[data-server="memory"]');
			return r && `+cond+`; })()`,
			chromedp.WithPollingInterval(100*time.Millisecond), chromedp.WithPollingTimeout(2*time.Minute))); err != nil {
			t.Fatalf("waiting for the page to show memory %s: %v", what, err)
		}
	}
	do("disable memory", redrawn(chromedp.Click(`button[data-disable="memory"]`)))
	pollRow("disabled", `r.dataset.state === "disabled" && r.querySelector("button[data-enable]") !== null`)
	if rep := getStatus(t, addr); !slices.Contains(rep.Stats.Disabled, "memory") || slices.ContainsFunc(rep.Backends, func(b gateway.BackendStatus) bool { return b.Name == "memory" }) {
		t.Errorf("GET /status after Disable: disabled %v, backends %v; want memory disabled and not running", rep.Stats.Disabled, rep.Backends)
	}
	do("enable memory", redrawn(chromedp.Click(`button[data-enable="memory"]`)))
	pollRow("up again", `r.dataset.state === "up"`)

	do("scroll to the top", chromedp.Evaluate[chromedp.Void](`window.scrollTo(0, 0)`))
	png, err := chromedp.Run(ctx, chromedp.CaptureScreenshot())
	if err != nil {
		t.Fatalf("screenshot: %v", err)
	}
	shot := filepath.Join(t.TempDir(), "console.png")
	if err := os.WriteFile(shot, png, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("screenshot: %s (%d bytes)", shot, len(png))
	if len(png) < 1000 || string(png[1:4]) != "PNG" {
		t.Errorf("screenshot is not a PNG (%d bytes)", len(png))
	}
	if *updateScreenshot {
		if err := os.WriteFile(filepath.Join(repoRoot(t), "docs", "console.png"), png, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// newBrowser starts Debian's Chromium headless for the test (it ends with
// the test) and returns a context bounded to 3 minutes, with do (steps
// that must succeed) and eval (a JavaScript expression decoded into v).
func newBrowser(t *testing.T, chromium string) (ctx context.Context, do func(what string, steps ...chromedp.Action[chromedp.Void]), eval func(what, expr string, v any)) {
	opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(chromium), chromedp.WindowSize(1280, 1000), chromedp.Env(chromiumTmp(t)))
	for _, f := range chromiumFlags(t) {
		name, value, ok := strings.Cut(strings.TrimPrefix(f, "--"), "=")
		if ok {
			opts = append(opts, chromedp.Flag(name, value))
		} else {
			opts = append(opts, chromedp.Flag(name, true))
		}
	}
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	t.Cleanup(cancelAlloc)
	bctx, cancel := chromedp.NewContext(actx, chromedp.WithLogf(t.Logf))
	t.Cleanup(cancel)
	// The first call starts the browser, for as long as bctx lives; the
	// steps after it are bounded.
	if err := chromedp.Do(bctx); err != nil {
		t.Fatalf("start chromium: %v", err)
	}
	ctx, cancelT := context.WithTimeout(bctx, 3*time.Minute)
	t.Cleanup(cancelT)
	do = func(what string, steps ...chromedp.Action[chromedp.Void]) {
		t.Helper()
		if err := chromedp.Do(ctx, steps...); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	}
	eval = func(what, expr string, v any) {
		t.Helper()
		raw, err := chromedp.Run(ctx, chromedp.Evaluate[json.RawMessage](expr))
		if err == nil {
			err = json.Unmarshal(raw, v)
		}
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	}
	return ctx, do, eval
}

// poller returns poll, which waits (2 minutes at most) until the
// JavaScript expression cond holds in the page of ctx, else fails the test
// waiting for what.
func poller(t *testing.T, ctx context.Context) func(what, cond string) {
	return func(what, cond string) {
		t.Helper()
		if _, err := chromedp.Run(ctx, chromedp.Poll[chromedp.Void](cond,
			chromedp.WithPollingInterval(100*time.Millisecond), chromedp.WithPollingTimeout(2*time.Minute))); err != nil {
			t.Fatalf("waiting for %s: %v", what, err)
		}
	}
}

// redrawn runs action, an action on the node its selector finds (Click,
// Focus), again while it fails because the page replaced that node between
// chromedp's query and the action: a refresh draws the backends' rows anew
// when their servers or buttons changed (one disabled, enabled), and the
// action then fails with "Could not find node with given id". chromedp
// retries its query and waits, not the action after them. A retry is
// safe: the failed action reached no node, so it did nothing.
func redrawn(action chromedp.Action[chromedp.Void]) chromedp.Action[chromedp.Void] {
	return func(ctx context.Context, tg *chromedp.Target) (chromedp.Void, error) {
		for {
			v, err := action(ctx, tg)
			var e *cdproto.Error
			if !errors.As(err, &e) || e.Message != "Could not find node with given id" || ctx.Err() != nil {
				return v, err
			}
		}
	}
}

// navLinks are the section links the page shows, each with whether the
// section it leads to shows.
const navLinks = `[...document.querySelectorAll("header nav a")].filter((a) => a.checkVisibility()).map((a) => [a.hash, document.querySelector(a.hash).checkVisibility()])`

// TestConsoleLoginInBrowser: with API keys, the console page shows its
// login form and no section links (they led to hidden sections), a key
// logs in, and when the session's key is revoked the next refresh is
// refused (audited once, with why), the form shows again, and the page
// stops asking: a tab left open no longer fills the audit log with one
// refusal every 3 s.
func TestConsoleLoginInBrowser(t *testing.T) {
	chromium := findChromium(t)
	data := t.TempDir()
	key := createKey(t, data, "--name", "ops", "--admin")
	addr, _ := startGateway(t, data, fakeConfig(t, map[string]string{"fake": backendtest.ModeNormal}, nil))
	ctx, do, eval := newBrowser(t, chromium)

	do("load /ui/ without a key", chromedp.Navigate("http://"+addr+"/ui/"), chromedp.WaitVisible(`#login-key`))
	// The section links lead to sections the page shows: none before the
	// login (they led to hidden ones), every one after it.
	var links [][]any
	eval("the section links", navLinks, &links)
	if len(links) != 0 {
		t.Errorf("before the login the page shows the section links %v, want none", links)
	}
	// A key it does not accept: the form says so in the gateway's words
	// (it said "log in first").
	do("log in with a wrong key", chromedp.SendKeys(`#login-key`, "tg_wrong"), chromedp.Click(`#login-form button[type=submit]`))
	if _, err := chromedp.Run(ctx, chromedp.Poll[chromedp.Void](`document.querySelector("#notice").textContent !== ""`,
		chromedp.WithPollingInterval(100*time.Millisecond), chromedp.WithPollingTimeout(time.Minute))); err != nil {
		t.Fatalf("waiting for the notice of a wrong key: %v", err)
	}
	var refused string
	eval("the notice", `document.querySelector("#notice").textContent`, &refused)
	if !strings.HasPrefix(refused, "Login failed: the API key was not accepted: it is unknown, revoked or expired") {
		t.Errorf("notice after a wrong key: %q, want the gateway's reason", refused)
	}
	do("clear the key", chromedp.Evaluate[chromedp.Void](`document.querySelector("#login-key").value = ""`))
	do("log in",
		chromedp.SendKeys(`#login-key`, key),
		chromedp.Click(`#login-form button[type=submit]`),
		chromedp.WaitVisible(`#backend-rows tr[data-server="fake"]`))
	eval("the section links", navLinks, &links)
	if fmt.Sprint(links) != "[[#backends true] [#playground true] [#calls true] [#activity true] [#index true] [#catalog true]]" {
		t.Errorf("once logged in (an admin key) the section links and whether each leads to a section shown: %v, want the six, each to one", links)
	}
	do("count the page's requests", chromedp.Evaluate[chromedp.Void](`(() => {
		window.__fetches = 0;
		const f = window.fetch;
		window.fetch = (...args) => { window.__fetches++; return f(...args); };
	})()`))
	if _, stderr, err := runToolgate(t, data, "keys", "revoke", "ops"); err != nil {
		t.Fatalf("keys revoke: %v\n%s", err, stderr)
	}
	if _, err := chromedp.Run(ctx, chromedp.Poll[chromedp.Void](`!document.querySelector("#login").hidden`,
		chromedp.WithPollingInterval(100*time.Millisecond), chromedp.WithPollingTimeout(time.Minute))); err != nil {
		t.Fatalf("waiting for the login form after the key was revoked: %v", err)
	}
	eval("the section links", navLinks, &links)
	if len(links) != 0 {
		t.Errorf("with the login form shown again the page shows the section links %v, want none", links)
	}
	var before, after int
	eval("requests so far", `window.__fetches`, &before)
	do("a refresh while logged out", chromedp.Evaluate[chromedp.Void](`refreshState()`, chromedp.EvalAwaitPromise))
	eval("requests after", `window.__fetches`, &after)
	if after != before {
		t.Errorf("the page asked for the state again while its login form showed (%d requests, then %d)", before, after)
	}
	recs := auditRecords(t, data, audit.Filter{}, func(rs []audit.Record) bool {
		return slices.ContainsFunc(rs, func(r audit.Record) bool { return strings.HasPrefix(r.Reason, "console: ") })
	})
	for _, r := range recs {
		if strings.HasPrefix(r.Reason, "console: ") && (r.Reason != "console: the console session's API key was revoked or expired" || r.Status != 401) {
			t.Errorf("audit record of the refused refresh: %+v", r)
		}
		// The page names its icon: the browser's own GET /favicon.ico,
		// at each load, was a 401 refusal in the audit log (and in the
		// address's refusal budget) for every console opened.
		if strings.Contains(r.Route, "favicon") {
			t.Errorf("the console's page had the browser ask for an icon, refused and audited: %+v", r)
		}
	}
}

// noModelFlags are the flags of a gateway (--mode bm25) that loads no
// model and embeds nothing (--ort-lib to no file): for a test that needs
// the tools in the page, not their vectors.
func noModelFlags(t *testing.T) []string {
	return []string{"--ort-lib", filepath.Join(t.TempDir(), "none.so")}
}

// TestConsoleNoServersInBrowser: with no servers in the config, the
// backends table says so, and how to add one, in place of its rows (it was
// empty); and a deep link's limit (/ui/?q=…&limit=3) is the results field's
// value (it showed 10) and that of the searches made with the form, whose
// deep link keeps it.
func TestConsoleNoServersInBrowser(t *testing.T) {
	chromium := findChromium(t)
	cfg := fakeConfig(t, map[string]string{}, nil)
	addr, _ := startGateway(t, t.TempDir(), cfg, noModelFlags(t)...)
	_, do, eval := newBrowser(t, chromium)

	do("load a deep link with a limit", chromedp.Navigate("http://"+addr+"/ui/?q=restart+a+server&limit=3"),
		chromedp.WaitVisible(`#search-rows tr[data-tool]`)) // drawn with the backends, from the page's own JSON
	var note string
	eval("the backends table", `document.querySelector("#backend-rows").textContent`, &note)
	if want := `No servers are configured: add one to "mcpServers" in ` + cfg + ` (the gateway applies the saved file), with toolgate servers add NAME --config ` + cfg + ` -- COMMAND [ARG...] (or --url URL), or from an MCP client with toolgate__add_server`; !strings.HasPrefix(note, want) {
		t.Errorf("the backends table of a config without servers says %q, want %q…", note, want)
	}
	// The page's search, its field and its deep link carry the link's
	// limit, and then the field's.
	searched := func(what string) (limit string, rows int, url string) {
		t.Helper()
		var got []any
		eval(what, `[document.querySelector("#limit").value, document.querySelectorAll("#search-rows tr[data-tool]").length, location.search]`, &got)
		return got[0].(string), int(got[1].(float64)), got[2].(string)
	}
	if limit, rows, _ := searched("the deep link's search"); limit != "3" || rows != 3 {
		t.Errorf("the deep link with limit=3 shows the results field %q and %d results, want 3 and 3", limit, rows)
	}
	search := func(what string) {
		t.Helper()
		do(what, chromedp.Evaluate[chromedp.Void](`document.querySelector("#search-rows").replaceChildren()`),
			chromedp.Click(`#search-form button[type=submit]`), chromedp.WaitVisible(`#search-rows tr[data-tool]`))
	}
	search("search again with the form")
	if limit, rows, url := searched("the form's search"); limit != "3" || rows != 3 || !strings.Contains(url, "limit=3") {
		t.Errorf("searching again from the deep link: the results field %q, %d results, deep link %q; want 3, 3 and limit=3", limit, rows, url)
	}
	do("ask for 2", chromedp.SetValue(`#limit`, "2"))
	search("search with 2 results")
	if limit, rows, url := searched("the search for 2"); limit != "2" || rows != 2 || !strings.Contains(url, "limit=2") {
		t.Errorf("a search for 2 results: the results field %q, %d results, deep link %q; want 2, 2 and limit=2", limit, rows, url)
	}
}

// TestConsoleSearchServerInBrowser: the playground's server field offers
// the servers the key may see (alpha and beta, not gamma nor the built-in
// toolgate), a deep link's server (/ui/?q=…&server=beta) is chosen in it
// and limits its search, and a search from the form limits itself to the
// server chosen and puts it in its deep link (none for all).
func TestConsoleSearchServerInBrowser(t *testing.T) {
	chromium := findChromium(t)
	data := t.TempDir()
	key := createKey(t, data, "--name", "ops", "--allow", "alpha__*", "--allow", "beta__*")
	cfg := fakeConfig(t, map[string]string{"alpha": backendtest.ModeNormal, "beta": backendtest.ModeNormal, "gamma": backendtest.ModeNormal}, nil)
	addr, _ := startGateway(t, data, cfg, noModelFlags(t)...)
	ctx, do, eval := newBrowser(t, chromium)
	poll := poller(t, ctx)
	const serverOptions = `[...document.querySelectorAll("#server option")].map((o) => o.value)`
	do("log in", chromedp.Navigate("http://"+addr+"/ui/"), chromedp.WaitVisible(`#login-key`),
		chromedp.SendKeys(`#login-key`, key), chromedp.Click(`#login-form button[type=submit]`),
		chromedp.WaitVisible(`#backend-rows tr[data-server="alpha"]`)) // the page loaded again, with a session
	poll("the playground to offer the key's servers", serverOptions+`.length === 3`)
	var options []string
	eval("the server field", serverOptions, &options)
	if fmt.Sprint(options) != "[ alpha beta]" {
		t.Errorf("the playground's servers %q, want all, alpha and beta", options)
	}

	// found is the server field's value, the servers of the tools found
	// and the page's address.
	found := func(what string) (server string, servers []string, url string) {
		t.Helper()
		var got struct {
			Server  string
			Servers []string
			URL     string
		}
		eval(what, `({server: document.querySelector("#server").value, url: location.search,
			servers: [...new Set([...document.querySelectorAll("#search-rows tr[data-tool]")].map((r) => r.dataset.tool.split("__")[0]))].sort()})`, &got)
		return got.Server, got.Servers, got.URL
	}
	do("load a deep link to beta", chromedp.Navigate("http://"+addr+"/ui/?q=echo+the+given+text&server=beta"),
		chromedp.WaitVisible(`#search-rows tr[data-tool]`))
	poll("the catalog's servers", serverOptions+`.length === 3`)
	if server, servers, _ := found("the deep link's search"); server != "beta" || fmt.Sprint(servers) != "[beta]" {
		t.Errorf("the deep link with server=beta: the server field %q, tools of %v; want beta and beta's only", server, servers)
	}
	search := func(what, server string) {
		t.Helper()
		do(what, chromedp.Evaluate[chromedp.Void](`document.querySelector("#search-rows").replaceChildren(); document.querySelector("#server").value = "`+server+`"`),
			chromedp.Click(`#search-form button[type=submit]`), chromedp.WaitVisible(`#search-rows tr[data-tool]`))
	}
	search("search alpha from the form", "alpha")
	if server, servers, url := found("alpha's search"); server != "alpha" || fmt.Sprint(servers) != "[alpha]" || !strings.Contains(url, "&server=alpha") {
		t.Errorf("a search of alpha: the server field %q, tools of %v, deep link %q; want alpha, alpha's only, &server=alpha", server, servers, url)
	}
	search("search every server", "")
	if server, servers, url := found("the search of all"); server != "" || fmt.Sprint(servers) != "[alpha beta]" || strings.Contains(url, "server=") {
		t.Errorf("a search of all: the server field %q, tools of %v, deep link %q; want all, alpha's and beta's, no server", server, servers, url)
	}
}

// TestConsoleOperatorInBrowser is the console an operator keeps open all
// day, in a phone-sized window: quarantined tools are named under the
// backends, as toolgate status names them; the page never scrolls sideways (a tool
// name of 120 letters wraps, the tables' hidden labels stay in them); a
// catalog longer than one answer says that only the first 200 are shown;
// a tool added while the page is open shows up in the catalog without a
// reload; the refresh every 3 s updates the backends' rows in place, so
// the keyboard focus on a backend's button stays there and a click across
// a refresh is not lost; and when the gateway stops, the page
// says that it does not answer and greys what it shows, then, once a new
// gateway answers on the address, that it is back and restarted.
func TestConsoleOperatorInBrowser(t *testing.T) {
	chromium := findChromium(t)
	data := t.TempDir()
	fake := backendtest.Command(t, backendtest.ModeToolsChange+","+backendtest.ModeManyTools+","+backendtest.ModePoisoned, backendtest.EnvManyTools+"=201")
	b, _ := json.Marshal(map[string]any{"mcpServers": map[string]any{"fake": map[string]any{"command": fake.Command, "env": fake.Env}},
		"toolgate": map[string]any{"security": map[string]any{"approvedTools": []string{"fake__t*"}}}}) // their long descriptions
	cfg := filepath.Join(t.TempDir(), "toolgate.json")
	writeRaw(t, cfg, b, false)
	// BM25 only: the page needs 201 tools, not their vectors, and
	// embedding 208 descriptions of 16 kB was most of the cold start (10 s
	// under a test suite's load, over the minute the first index is
	// waited for with 8 test binaries at once).
	noModel := noModelFlags(t)
	addr, _, stop := startGatewayStop(t, data, cfg, noModel...)
	base := "http://" + addr
	ctx, do, eval := newBrowser(t, chromium)
	poll := poller(t, ctx)

	// A tool whose name is one long word.
	long := strings.Repeat("abcdefghij", 12)
	cctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cs, err := connectKey(cctx, t, addr, "/mcp", "", "e2e")
	if err != nil {
		t.Fatal(err)
	}
	addTool := func(name string) {
		t.Helper()
		res, err := cs.CallTool(cctx, &mcp.CallToolParams{Name: "execute_tool", Arguments: map[string]any{"name": "fake__add_tool", "arguments": map[string]any{"name": name}}})
		if err != nil || res.IsError {
			t.Fatalf("add tool %s: %v %s", name, err, resultText(res))
		}
	}
	waitStatus(t, addr, "the first index", func(s live.Stats) bool { return s.CatalogTools >= 201 })
	addTool(long)
	waitStatus(t, addr, "the long tool indexed", func(s live.Stats) bool { return s.CatalogTools >= 205 })

	do("load /ui/ in a phone-sized window", chromedp.EmulateViewport(375, 800), chromedp.Navigate(base+"/ui/"),
		chromedp.WaitVisible(`#backend-rows tr[data-server="fake"]`), chromedp.WaitVisible(`#catalog-list li`))
	// What toolgate status flags beside the backends is said under them:
	// here the tools held in quarantine (the console said nothing of them).
	var warnings []string
	eval("the warnings", `[...document.querySelectorAll("#backend-warnings:not([hidden]) li")].map(li => li.textContent)`, &warnings)
	if !slices.ContainsFunc(warnings, func(w string) bool {
		return strings.HasPrefix(w, "Quarantined, held from search_tools and execute_tool until approved: ") && strings.Contains(w, "fake__notes")
	}) {
		t.Errorf("the console's warnings %q, want fake__notes quarantined", warnings)
	}
	var summary string
	eval("the catalog's summary", `document.querySelector("#catalog-summary").textContent`, &summary)
	if !strings.Contains(summary, "(the first 200 shown: filter by name or server for the others)") {
		t.Errorf("catalog summary %q, want it to say that only the first 200 tools are shown", summary)
	}
	do("filter the catalog for the long name", chromedp.SendKeys(`#catalog-filter`, long[:30]))
	poll("the long tool alone in the catalog", `document.querySelectorAll("#catalog-list li").length === 1`)
	var widths []int
	eval("the page's width", `[document.documentElement.scrollWidth, window.innerWidth]`, &widths)
	if widths[0] > widths[1] {
		t.Errorf("the page is %d px wide in a %d px window: it scrolls sideways", widths[0], widths[1])
	}
	// A search's results widen no phone's page either, and beside long
	// descriptions their numbers stay whole in a 1100 px window (the
	// results' overflow-wrap: anywhere broke a score 0.990 into 0.99 and 0).
	do("search in the phone-sized window", chromedp.SetValue(`#q`, "very long description"),
		chromedp.Click(`#search-form button[type=submit]`), chromedp.WaitVisible(`#search-rows tr[data-tool]`))
	eval("the page's width with the results", `[document.documentElement.scrollWidth, window.innerWidth]`, &widths)
	if widths[0] > widths[1] {
		t.Errorf("with search results the page is %d px wide in a %d px window: it scrolls sideways", widths[0], widths[1])
	}
	do("widen the window to 1100 px", chromedp.EmulateViewport(1100, 800))
	var broken []string
	eval("the results' numbers on more than one line", `[...document.querySelectorAll("#search-rows td.num")].filter(td => {
		const r = document.createRange(); r.selectNodeContents(td); return r.getClientRects().length > 1; }).map(td => td.textContent)`, &broken)
	if len(broken) > 0 {
		t.Errorf("in a 1100 px window these numbers of the search results wrap onto two lines: %q", broken)
	}
	do("back to the phone-sized window", chromedp.EmulateViewport(375, 800))

	// A tool added while the page is open: the catalog shows it by itself.
	addTool("added_while_open")
	do("clear the filter", chromedp.Evaluate[chromedp.Void](`document.querySelector("#catalog-filter").value = ""`),
		chromedp.SendKeys(`#catalog-filter`, "added_while"))
	poll("the added tool in the catalog", `document.querySelector('#catalog-list li[data-tool="fake__added_while_open"]') !== null`)
	do("clear the filter again", chromedp.Evaluate[chromedp.Void](`document.querySelector("#catalog-filter").value = ""`))
	var before string
	eval("the catalog's summary", `document.querySelector("#catalog-summary").textContent`, &before)
	// An input schema the operator opened stays open when the catalog is
	// drawn again (it closed), and the keyboard focus on it stays there.
	// Opened and focused in one step of the page's own, on the summary it
	// shows then: the catalog may be drawn again any moment (the added
	// tool's generation, the filter cleared), and a mouse click aimed at a
	// summary of the list before landed elsewhere in the list after
	// ([the schema open, the focus on its summary] = [false true]).
	const schema = `#catalog-list li[data-tool="fake__added_while_open"] details`
	poll("fake__added_while_open's input schema to open", `(() => { const s = document.querySelector('`+schema+` summary');
		return !!s && (s.click(), s.focus(), window.__schema = s.parentElement, true); })()`)
	addTool("added_later")
	poll("the catalog's count to grow without a reload or a filter", fmt.Sprintf(`document.querySelector("#catalog-summary").textContent !== %q`, before))
	poll("the catalog drawn again since the schema was opened", `!window.__schema.isConnected`)
	var open []bool
	eval("the schema, drawn again", `[document.querySelector('`+schema+`').open, document.activeElement === document.querySelector('`+schema+` summary')]`, &open)
	if fmt.Sprint(open) != "[true true]" {
		t.Errorf("once the catalog was drawn again: [the schema open, the focus on its summary] = %v, want [true true]", open)
	}

	// A refresh (every 3 s) updates the rows in place: the keyboard focus
	// on Restart stays there, and a click pressed on it before a refresh
	// and released after it restarts fake (rows drawn anew lost it).
	const forCell = `document.querySelector('#backend-rows tr[data-server="fake"] td:nth-child(7)')` // how long fake has been up
	do("focus Restart fake", chromedp.Evaluate[chromedp.Void](`(() => {
		window.__for = `+forCell+`;
		document.querySelector('button[data-restart="fake"]').focus(); })()`))
	poll("a refresh that updates the row", `!window.__for.isConnected`)
	var focused string
	eval("the focused element", `document.activeElement.getAttribute("data-restart") ?? document.activeElement.tagName`, &focused)
	if focused != "fake" {
		t.Errorf("after a refresh the focus is on %q, want the Restart button of fake still", focused)
	}
	// Pressed and released on the button, wherever the row's new cells
	// moved it.
	const restartAt = `(() => { const r = document.querySelector('button[data-restart="fake"]').getBoundingClientRect();
		window.__for = ` + forCell + `; return [r.x + r.width / 2, r.y + r.height / 2]; })()`
	var xy []float64
	do("scroll to Restart fake", chromedp.Evaluate[chromedp.Void](`document.querySelector('button[data-restart="fake"]').scrollIntoView({ block: "center" })`))
	eval("where Restart fake is", restartAt, &xy)
	do("press Restart fake", chromedp.MouseEvent(input.DispatchMouseEventTypeMousePressed, xy[0], xy[1], chromedp.ButtonLeft, chromedp.ClickCount(1)))
	poll("a refresh while Restart is pressed", `!window.__for.isConnected`)
	eval("where Restart fake is now", restartAt, &xy)
	do("release Restart fake", chromedp.MouseEvent(input.DispatchMouseEventTypeMouseReleased, xy[0], xy[1], chromedp.ButtonLeft, chromedp.ClickCount(1)))
	poll("the restart pressed across a refresh to be requested", `document.querySelector("#notice").textContent.includes("Restart of fake requested.")`)

	// The gateway stops: the page says so; a new one answers: it says that.
	stop()
	poll("the page to say the gateway does not answer", `document.querySelector("#notice").textContent.includes("does not answer") && document.querySelector("#backends").classList.contains("stale")`)
	cmd := toolgateCmd(t, data, append([]string{"serve", "--config", cfg, "--http", addr, "--mode", "bm25"}, noModel...)...)
	cmd.Stderr = testLog(t, "toolgate (again): ")
	startHTTP(t, cmd, addr, 2*time.Minute)
	poll("the page to say the gateway is back", `document.querySelector("#notice").textContent.includes("answers again: it restarted") && !document.querySelector("#backends").classList.contains("stale")`)
	// Its buttons work without a reload: the state brought a new session
	// (they answered "missing or wrong CSRF token").
	poll("Restart fake, once it is up again", `(() => { const b = document.querySelector('button[data-restart="fake"]'); return !!b && !b.disabled && (b.click(), true); })()`)
	poll("the restart to be requested", `document.querySelector("#notice").textContent.includes("Restart of fake requested.")`)
}

// TestConsoleCatalogLatestInBrowser: of two catalog requests in flight
// (a server chosen, then another, as typing in the filter makes too), the
// page draws the newer one's answer and drops the older one's, whichever
// comes last. The older answer, coming last, was drawn over the newer:
// the list showed the server chosen before. The browser holds the first
// request (the DevTools protocol's Fetch domain pauses it) until the
// second's answer is drawn, then lets it go: the order is made, not timed.
func TestConsoleCatalogLatestInBrowser(t *testing.T) {
	chromium := findChromium(t)
	cfg := fakeConfig(t, map[string]string{"alpha": backendtest.ModeNormal, "beta": backendtest.ModeNormal}, nil)
	addr, _ := startGateway(t, t.TempDir(), cfg, noModelFlags(t)...)
	ctx, do, eval := newBrowser(t, chromium)
	poll := poller(t, ctx)
	do("load /ui/", chromedp.Navigate("http://"+addr+"/ui/"), chromedp.WaitVisible(`#catalog-list li`))
	poll("the catalog's servers", `(() => { const v = [...document.querySelectorAll("#catalog-server option")].map((o) => o.value);
		return v.includes("alpha") && v.includes("beta"); })()`)

	// The catalog's requests pause in the browser: the first of alpha is
	// held, the others go on. How each request ends is watched.
	tg := chromedp.FromContext(ctx).Target
	evctx, stop := context.WithCancel(ctx)
	defer stop()
	paused := cdp.Events(evctx, tg, fetch.RequestPaused)
	failed := cdp.Events(evctx, tg, network.LoadingFailed)
	finished := cdp.Events(evctx, tg, network.LoadingFinished)
	type end struct {
		id       network.RequestID
		finished bool // answered; else failed (canceled: aborted by the page)
		canceled bool
	}
	ends := make(chan end, 1024)
	go func() {
		for ev, err := range failed {
			if err != nil {
				return
			}
			ends <- end{id: ev.RequestID, canceled: ev.Canceled}
		}
	}()
	go func() {
		for ev, err := range finished {
			if err != nil {
				return
			}
			ends <- end{id: ev.RequestID, finished: true}
		}
	}()
	held := make(chan fetch.EventRequestPaused, 1)
	go func() {
		holding := false
		for ev, err := range paused {
			if err != nil {
				return
			}
			if !holding && strings.Contains(ev.Request.URL, "server=alpha") {
				holding = true
				held <- ev
				continue
			}
			// An error: the page gave the request up meanwhile.
			_, _ = chromedp.Call(evctx, fetch.ContinueRequest, fetch.ContinueRequestParams{RequestID: ev.RequestID})
		}
	}()
	if _, err := chromedp.Call(ctx, network.Enable, network.EnableParams{}); err != nil {
		t.Fatal(err)
	}
	if _, err := chromedp.Call(ctx, fetch.Enable, fetch.EnableParams{Patterns: []*fetch.RequestPattern{{URLPattern: "*/ui/api/catalog?*"}}}); err != nil {
		t.Fatal(err)
	}

	choose := func(server string) chromedp.Action[chromedp.Void] {
		return chromedp.Evaluate[chromedp.Void](`(() => { const s = document.querySelector("#catalog-server");
			s.value = "` + server + `"; s.dispatchEvent(new Event("change")); })()`)
	}
	const shows = `(() => { const ids = [...document.querySelectorAll("#catalog-list li[data-tool]")].map((li) => li.dataset.tool);
		return ids.length > 0 && ids.every((id) => id.startsWith("%s__")); })()`
	do("choose alpha", choose("alpha"))
	var first fetch.EventRequestPaused
	select {
	case first = <-held:
	case <-ctx.Done():
		t.Fatal("alpha's catalog request never came")
	}
	do("choose beta while alpha's request is held", choose("beta"))
	poll("beta's catalog drawn", fmt.Sprintf(shows, "beta"))

	// alpha's request goes on now (if the page still wants it), and ends.
	if _, err := chromedp.Call(ctx, fetch.ContinueRequest, fetch.ContinueRequestParams{RequestID: first.RequestID}); err != nil {
		t.Logf("alpha's request, let go: %v (the page gave it up)", err)
	}
	var e end
	for e = range ends {
		if e.id == first.NetworkID {
			break
		}
	}
	if e.finished {
		// Answered after beta's: its list must not be drawn.
		poll("alpha's older answer drawn over beta's", fmt.Sprintf(shows, "alpha"))
		t.Fatalf("the catalog shows alpha's tools, the answer of the older request, though beta is chosen")
	}
	if !e.canceled {
		t.Errorf("alpha's request failed but was not aborted by the page: %+v", e)
	}
	var got struct {
		Beta    bool
		Chosen  string
		Summary string
	}
	eval("the catalog", `({beta: `+fmt.Sprintf(shows, "beta")+`, chosen: document.querySelector("#catalog-server").value,
		summary: document.querySelector("#catalog-summary").textContent})`, &got)
	if !got.Beta || got.Chosen != "beta" || strings.Contains(got.Summary, "Could not") {
		t.Errorf("once alpha's request ended: beta's tools alone %v, the server chosen %q, the summary %q; want beta's, beta and no error", got.Beta, got.Chosen, got.Summary)
	}
}

// alphaConsole is a gateway of one server, alpha, without the model, and
// a browser that has its console loaded (alpha's row shown), with
// newBrowser's do and eval and poller's poll.
func alphaConsole(t *testing.T) (ctx context.Context, do func(what string, steps ...chromedp.Action[chromedp.Void]), eval func(what, expr string, v any), poll func(what, cond string)) {
	t.Helper()
	chromium := findChromium(t)
	cfg := fakeConfig(t, map[string]string{"alpha": backendtest.ModeNormal}, nil)
	addr, _ := startGateway(t, t.TempDir(), cfg, noModelFlags(t)...)
	ctx, do, eval = newBrowser(t, chromium)
	poll = poller(t, ctx)
	do("load /ui/", chromedp.Navigate("http://"+addr+"/ui/"), chromedp.WaitVisible(`#backend-rows tr[data-server="alpha"]`))
	return ctx, do, eval, poll
}

// TestConsoleNonJSONInBrowser: an answer that is not the gateway's JSON —
// a reverse proxy's 502 page in HTML, a plain-text 403 — is shown with its
// HTTP status and its text, readable; the page said only the JSON parser's
// "Unexpected token '<', "<html>…" is not valid JSON". The browser answers
// the page's requests itself (the DevTools protocol's Fetch domain), as a
// proxy in front of the gateway would.
func TestConsoleNonJSONInBrowser(t *testing.T) {
	ctx, do, eval, poll := alphaConsole(t)

	const proxyPage = "<html>\r\n<head><title>502 Bad Gateway</title><style>body { width: 35em; }</style></head>\r\n" +
		"<body>\r\n<center><h1>502 Bad Gateway</h1></center>\r\n<hr><center>nginx/1.22.1</center>\r\n</body>\r\n</html>\r\n"
	answers := map[string]fetch.FulfillRequestParams{
		"/ui/api/search": {ResponseCode: 502, Body: []byte(proxyPage),
			ResponseHeaders: []*fetch.HeaderEntry{{Name: "Content-Type", Value: "text/html"}}},
		"/ui/api/state": {ResponseCode: 403, Body: []byte(`Forbidden: Origin "https://gw.example" is not allowed` + "\n"),
			ResponseHeaders: []*fetch.HeaderEntry{{Name: "Content-Type", Value: "text/plain; charset=utf-8"}}},
		// A proxy's own login page, answered 200.
		"/ui/api/catalog": {ResponseCode: 200, Body: []byte("<!doctype html><html><body><script>var x = 1;</script><h1>Sign in</h1><p>to the company proxy</p></body></html>"),
			ResponseHeaders: []*fetch.HeaderEntry{{Name: "Content-Type", Value: "text/html"}}},
	}
	tg := chromedp.FromContext(ctx).Target
	evctx, stop := context.WithCancel(ctx)
	defer stop()
	paused := cdp.Events(evctx, tg, fetch.RequestPaused)
	go func() {
		for ev, err := range paused {
			if err != nil {
				return
			}
			for path, a := range answers {
				if strings.Contains(ev.Request.URL, path) {
					a.RequestID = ev.RequestID
					_, _ = chromedp.Call(evctx, fetch.FulfillRequest, a)
				}
			}
		}
	}()
	if _, err := chromedp.Call(ctx, fetch.Enable, fetch.EnableParams{Patterns: []*fetch.RequestPattern{
		{URLPattern: "*/ui/api/search?*"}, {URLPattern: "*/ui/api/state*"}, {URLPattern: "*/ui/api/catalog?*"}}}); err != nil {
		t.Fatal(err)
	}

	do("search", chromedp.SendKeys(`#q`, "echo"), chromedp.Click(`#search-form button[type=submit]`))
	poll("the search's failure", `document.querySelector("#search-summary").textContent.startsWith("Search failed")`)
	var said string
	eval("the search summary", `document.querySelector("#search-summary").textContent`, &said)
	if want := "Search failed: HTTP 502 Bad Gateway: 502 Bad Gateway nginx/1.22.1"; said != want {
		t.Errorf("a proxy's 502 page for a search: the page says %q, want %q", said, want)
	}
	do("refresh", chromedp.Evaluate[chromedp.Void](`refreshState()`, chromedp.EvalAwaitPromise))
	eval("the notice", `document.querySelector("#notice").textContent`, &said)
	if want := `Could not refresh: HTTP 403 Forbidden: Origin "https://gw.example" is not allowed`; said != want {
		t.Errorf("a plain-text 403 for the state: the page says %q, want %q", said, want)
	}
	do("load the catalog", chromedp.Evaluate[chromedp.Void](`loadCatalog()`, chromedp.EvalAwaitPromise))
	eval("the catalog summary", `document.querySelector("#catalog-summary").textContent`, &said)
	if want := "Could not load the catalog: HTTP 200 OK, not the gateway's JSON: Sign in to the company proxy"; said != want {
		t.Errorf("a proxy's login page for the catalog: the page says %q, want %q", said, want)
	}
}

// TestConsoleHungGatewayInBrowser: a gateway that takes the page's
// requests and does not answer them (its process stopped, a network that
// drops the packets, a laptop back from sleep) is said as one that does not
// answer: the page greys what it shows and says since when, with one
// request for the state out at a time, and says so once it answers again.
// It showed its last state as current, said nothing, and sent another
// request every 3 s (7 waiting after 25 s, as a gateway stopped with
// SIGSTOP showed). The browser holds the requests (the DevTools protocol's
// Fetch domain), then lets them through.
func TestConsoleHungGatewayInBrowser(t *testing.T) {
	ctx, do, eval, poll := alphaConsole(t)
	do("count the requests for the state out at once", chromedp.Evaluate[chromedp.Void](`(() => {
		window.__out = 0; window.__most = 0;
		const f = window.fetch;
		window.fetch = (url, ...rest) => {
			if (!String(url).startsWith("api/state")) return f(url, ...rest);
			window.__most = Math.max(window.__most, ++window.__out);
			return f(url, ...rest).finally(() => window.__out--);
		};
	})()`))

	// Every request for the state is held from now on: none is answered.
	tg := chromedp.FromContext(ctx).Target
	evctx, stop := context.WithCancel(ctx)
	defer stop()
	paused := cdp.Events(evctx, tg, fetch.RequestPaused)
	held := make(chan struct{}, 1024)
	go func() {
		for _, err := range paused {
			if err != nil {
				return
			}
			held <- struct{}{}
		}
	}()
	if _, err := chromedp.Call(ctx, fetch.Enable, fetch.EnableParams{Patterns: []*fetch.RequestPattern{{URLPattern: "*/ui/api/state*"}}}); err != nil {
		t.Fatal(err)
	}
	poll("the page to say the gateway does not answer", `document.querySelector("#notice").textContent.includes("does not answer") &&
		document.querySelector("#backends").classList.contains("stale")`)
	var most int
	eval("the most requests for the state out at once", `window.__most`, &most)
	if most != 1 {
		t.Errorf("while the gateway did not answer, the page had %d requests for its state out at once, want 1", most)
	}

	// The gateway answers again.
	if _, err := chromedp.Call(ctx, fetch.Disable, cdp.Empty{}); err != nil {
		t.Fatal(err)
	}
	poll("the page to say the gateway answers again", `document.querySelector("#notice").textContent === "The gateway answers again." &&
		!document.querySelector("#backends").classList.contains("stale")`)
	if len(held) == 0 {
		t.Error("no request for the state was held")
	}
}

// TestConsoleLongNamesInBrowser: a server's name of 64 characters (the
// longest the config takes) beside a server that failed (a long last
// error) keeps the page within a phone's width and each row's buttons on
// one line. The playground's and the catalog's Server lists took the
// width of that name (540 px in a 375 px window: the whole page scrolled
// sideways), and in a 1024 px window each row's Disable button wrapped
// under its Restart.
func TestConsoleLongNamesInBrowser(t *testing.T) {
	chromium := findChromium(t)
	long := "accounts-payable-reconciliation-team-eu-west-1-production-clust"
	long += strings.Repeat("r", 64-len(long))
	cfg := fakeConfig(t, map[string]string{long: backendtest.ModeNormal, "broken": backendtest.ModeCrashAtStart}, nil)
	addr, _ := startGateway(t, t.TempDir(), cfg, noModelFlags(t)...)
	ctx, do, eval := newBrowser(t, chromium)
	poll := poller(t, ctx)
	do("load /ui/ in a 1024 px window", chromedp.EmulateViewport(1024, 800), chromedp.Navigate("http://"+addr+"/ui/"),
		chromedp.WaitVisible(`#backend-rows tr[data-server="`+long+`"]`))
	poll("broken down, and the Server lists filled", `document.querySelector('#backend-rows tr[data-server="broken"]')?.dataset.state === "down" &&
		[...document.querySelectorAll("#server option")].some((o) => o.value === "`+long+`")`)
	var wrapped []string
	eval("the rows whose buttons wrap", `[...document.querySelectorAll("#backend-rows tr")].filter((r) => {
		const tops = [...r.querySelectorAll("td.actions button")].map((b) => b.getBoundingClientRect().top);
		return tops.some((t) => t !== tops[0]); }).map((r) => r.dataset.server)`, &wrapped)
	if len(wrapped) > 0 {
		t.Errorf("in a 1024 px window the buttons of these rows wrap onto two lines: %q", wrapped)
	}
	do("a phone's width", chromedp.EmulateViewport(375, 800))
	var widths []int
	eval("the page's width", `[document.documentElement.scrollWidth, window.innerWidth]`, &widths)
	if widths[0] > widths[1] {
		t.Errorf("with a server named %q the page is %d px wide in a %d px window: it scrolls sideways", long, widths[0], widths[1])
	}
}

// TestConsoleNotUpInBrowser: above the backends, the servers that are not
// up are named, each a link to its row, which the keyboard follows (Enter)
// and which keeps the focus across the refreshes. Among 200 servers the
// summary said "197 of 200 up" and the ones down were rows to find in a
// table 9,000 px long.
func TestConsoleNotUpInBrowser(t *testing.T) {
	chromium := findChromium(t)
	cfg := fakeConfig(t, map[string]string{"alpha": backendtest.ModeNormal, "broken": backendtest.ModeCrashAtStart}, nil)
	addr, _ := startGateway(t, t.TempDir(), cfg, noModelFlags(t)...)
	ctx, do, eval := newBrowser(t, chromium)
	poll := poller(t, ctx)
	do("load /ui/ in a short window", chromedp.EmulateViewport(1024, 300), chromedp.Navigate("http://"+addr+"/ui/"),
		chromedp.WaitVisible(`#backend-rows tr[data-server="alpha"]`))
	poll("broken down", `document.querySelector('#backend-rows tr[data-server="broken"]')?.dataset.state === "down"`)
	poll("the servers not up named above the table", `document.querySelector("#backends-attention")?.checkVisibility() &&
		document.querySelector("#backends-attention").textContent === "Not up: broken (down)"`)
	const link = `#backends-attention a[href="#backend-broken"]`
	do("follow the link with the keyboard", chromedp.Focus(link), chromedp.KeyEvent("\r"))
	poll("broken's row, the link's target, in view", `(() => { const r = document.querySelector(":target");
		if (!r || r.dataset.server !== "broken") return false;
		const b = r.getBoundingClientRect(); return b.top > -1 && b.top < window.innerHeight / 2; })()`)
	do("focus the link, and mark a cell a refresh replaces", chromedp.Evaluate[chromedp.Void](`(() => {
		window.__for = document.querySelector('#backend-rows tr[data-server="alpha"] td:nth-child(7)');
		document.querySelector('`+link+`').focus(); })()`))
	poll("a refresh", `!window.__for.isConnected`)
	var focused bool
	eval("the focus", `document.activeElement === document.querySelector('`+link+`')`, &focused)
	if !focused {
		t.Error("after a refresh the focus left the link to broken's row")
	}
}

// TestConsoleLongErrorInBrowser: a backend's last error of several lines
// (the stderr lines of a server that failed to start) shows its first line,
// the others folded under "3 more lines", which Enter opens and which
// stays open across the refreshes. Written whole, run together, a Node.js
// start-up failure's 15 lines made its row 480 px tall.
func TestConsoleLongErrorInBrowser(t *testing.T) {
	chromium := findChromium(t)
	cfg := fakeConfig(t, map[string]string{"alpha": backendtest.ModeNormal, "broken": backendtest.ModeCrashAtStart}, nil)
	addr, _ := startGateway(t, t.TempDir(), cfg, noModelFlags(t)...)
	ctx, do, eval := newBrowser(t, chromium)
	poll := poller(t, ctx)
	do("load /ui/", chromedp.Navigate("http://"+addr+"/ui/"), chromedp.WaitVisible(`#backend-rows tr[data-server="alpha"]`))
	const cell = `document.querySelector('#backend-rows tr[data-server="broken"] td.err')`
	poll("broken down with its error", cell+`?.textContent.includes("exited")`)
	var shown struct {
		Text    string
		Summary string
		Lines   string
		Open    bool
	}
	const read = `(() => { const c = ` + cell + `, d = c.querySelector("details");
		return { text: c.checkVisibility() ? c.innerText : "", summary: d?.querySelector("summary").textContent ?? "",
			lines: d?.querySelector("pre").textContent ?? "", open: !!d?.open }; })()`
	eval("broken's error", read, &shown)
	more := fmt.Sprintf("%d more lines", strings.Count(shown.Lines, "\n")+1)
	if !strings.Contains(shown.Text, "last stderr lines:\n"+more) || strings.Contains(shown.Text, "fatal: giving up") ||
		shown.Summary != more+" of the error of broken" || !strings.Contains(shown.Lines, "fatal: giving up") || shown.Open {
		t.Fatalf("broken's error cell shows %q, its summary %q, its lines %q (open %v); want the first line shown, the stderr lines folded under \"N more lines\"",
			shown.Text, shown.Summary, shown.Lines, shown.Open)
	}
	do("open the lines with the keyboard", chromedp.Focus(`#backend-rows tr[data-server="broken"] td.err summary`), chromedp.KeyEvent("\r"))
	poll("the lines open", cell+`.querySelector("details").open`)
	do("mark a cell a refresh replaces", chromedp.Evaluate[chromedp.Void](`window.__for = document.querySelector('#backend-rows tr[data-server="broken"] td:nth-child(7)')`))
	poll("a refresh", `!window.__for.isConnected`)
	eval("broken's error after a refresh", read, &shown)
	if !shown.Open || !strings.Contains(shown.Text, "fatal: giving up") {
		t.Errorf("after a refresh broken's error lines are open %v, shown %q; want them open still", shown.Open, shown.Text)
	}
}

// TestConsoleDisabledInConfigInBrowser: a server the config file disables
// ("disabled": true) has a row of its own in the backends table, which
// says so and how to start it, with no button (none can start it). The
// page left it out: an operator looking for it found no trace of it,
// though toolgate__list_servers names it "disabled in config".
func TestConsoleDisabledInConfigInBrowser(t *testing.T) {
	chromium := findChromium(t)
	fake := backendtest.Command(t, backendtest.ModeNormal)
	b, _ := json.Marshal(map[string]any{"mcpServers": map[string]any{
		"alpha": map[string]any{"command": fake.Command, "env": fake.Env},
		"off":   map[string]any{"command": fake.Command, "env": fake.Env, "disabled": true}}})
	cfg := filepath.Join(t.TempDir(), "toolgate.json")
	writeRaw(t, cfg, b, false)
	addr, _ := startGateway(t, t.TempDir(), cfg, noModelFlags(t)...)
	_, do, eval := newBrowser(t, chromium)
	do("load /ui/", chromedp.Navigate("http://"+addr+"/ui/"), chromedp.WaitVisible(`#backend-rows tr[data-server="alpha"]`))
	var row []any
	eval("off's row", `(() => { const r = document.querySelector('#backend-rows tr[data-server="off"]');
		return r ? [r.dataset.state, r.textContent, r.querySelectorAll("button").length] : []; })()`, &row)
	if len(row) != 3 || row[0] != "disabled in config" || !strings.Contains(row[1].(string), `the config file disables it ("disabled": true)`) || row[2] != 0.0 {
		t.Errorf("off's row in the backends table: %v; want its state disabled in config, why and how to start it, no button", row)
	}
}

// TestConsoleDisabledTwiceInBrowser: a server disabled at run time (state.json)
// whose entry the config then disables too has one row, which says both
// and what starts it. It had two rows of one id (#backend-off): one
// "disabled" with an Enable button (which the console answers 409 while the
// config disables it), and one "disabled in config" that said removing
// "disabled": true starts it, which it does not while state.json disables it.
func TestConsoleDisabledTwiceInBrowser(t *testing.T) {
	chromium := findChromium(t)
	fake := backendtest.Command(t, backendtest.ModeNormal)
	write := func(off map[string]any) string {
		b, _ := json.Marshal(map[string]any{"mcpServers": map[string]any{
			"alpha": map[string]any{"command": fake.Command, "env": fake.Env}, "off": off}})
		cfg := filepath.Join(t.TempDir(), "toolgate.json")
		writeRaw(t, cfg, b, false)
		return cfg
	}
	dataDir := t.TempDir()
	cfg := write(map[string]any{"command": fake.Command, "env": fake.Env})
	if out, err := toolgateCmd(t, dataDir, "servers", "disable", "off", "--config", cfg).CombinedOutput(); err != nil {
		t.Fatalf("servers disable off: %v\n%s", err, out)
	}
	cfg = write(map[string]any{"command": fake.Command, "env": fake.Env, "disabled": true})
	addr, _ := startGateway(t, dataDir, cfg, noModelFlags(t)...)
	_, do, eval := newBrowser(t, chromium)
	do("load /ui/", chromedp.Navigate("http://"+addr+"/ui/"), chromedp.WaitVisible(`#backend-rows tr[data-server="off"]`))
	var rows []any
	eval("off's rows", `[...document.querySelectorAll('#backend-rows tr[data-server="off"]')].map((r) =>
		[r.dataset.state, r.textContent, r.querySelectorAll("button").length])`, &rows)
	if len(rows) != 1 {
		t.Fatalf("off, disabled at run time and in the config, has %d rows in the backends table, want 1: %v", len(rows), rows)
	}
	row := rows[0].([]any)
	if row[0] != "disabled in config" || !strings.Contains(row[1].(string), "toolgate servers enable off") || row[2] != 0.0 {
		t.Errorf("off's row: %v; want disabled in config, saying that it is disabled at run time too and the command that enables it, no button", row)
	}
}
