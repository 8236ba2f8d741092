package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/toolgate/toolgate/gateway/audit"
	"github.com/toolgate/toolgate/gateway/backend/backendtest"
	"github.com/toolgate/toolgate/internal/dirs"
)

// activityRows are the recent activity's rows: who, what, decision,
// outcome and why of each.
const activityRows = `[...document.querySelectorAll("#activity-rows tr[data-decision]")].map((r) => [...r.cells].slice(1).map((c) => c.textContent).join(" | "))`

// TestConsoleActivityInBrowser: an admin key's console shows the recent
// activity, the audit log's last records (who, which tool, allowed or
// denied, why), another key's calls and refusals among them, and its
// Refresh button reads the records written since; a key that is not admin
// sees no such section, no link to it, and is refused the records (403).
func TestConsoleActivityInBrowser(t *testing.T) {
	chromium := findChromium(t)
	data := t.TempDir()
	admin := createKey(t, data, "--name", "ops", "--admin")
	dev := createKey(t, data, "--name", "dev", "--allow", "fake__add")
	addr, _ := startGateway(t, data, fakeConfig(t, map[string]string{"fake": backendtest.ModeNormal}, nil), noModelFlags(t)...)

	cctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cs, err := connectKey(cctx, t, addr, "/mcp", dev, "activity")
	if err != nil {
		t.Fatal(err)
	}
	if res := executeTool(t, cctx, cs, "fake__add", map[string]any{"a": 1, "b": 2}); res.IsError {
		t.Fatalf("fake__add with key dev: %+v", res.Content)
	}
	executeTool(t, cctx, cs, "fake__echo", map[string]any{"text": "hi"}) // outside dev's scope
	auditRecords(t, data, audit.Filter{Key: "dev"}, func(rs []audit.Record) bool {
		return slices.ContainsFunc(rs, func(r audit.Record) bool { return r.Tool == "fake__echo" })
	})

	ctx, do, eval := newBrowser(t, chromium)
	poll := poller(t, ctx)
	do("log in as ops (admin)", chromedp.Navigate("http://"+addr+"/ui/"), chromedp.WaitVisible(`#login-key`),
		chromedp.SendKeys(`#login-key`, admin), chromedp.Click(`#login-form button[type=submit]`),
		chromedp.WaitVisible(`#backend-rows tr[data-server="fake"]`))
	poll("the recent activity", `document.querySelector("#activity").checkVisibility() && document.querySelectorAll("#activity-rows tr[data-decision]").length > 0`)
	var rows []string
	eval("the recent activity's rows", activityRows, &rows)
	t.Logf("recent activity:\n%s", strings.Join(rows, "\n"))
	has := func(prefix string) bool {
		return slices.ContainsFunc(rows, func(r string) bool { return strings.HasPrefix(r, prefix) })
	}
	if !has("dev | fake__add | allowed | ok") || !has("dev | fake__echo | denied | ") {
		t.Errorf("the admin's recent activity does not show dev's call of fake__add (allowed, ok) and refusal of fake__echo (denied, why):\n%s", strings.Join(rows, "\n"))
	}
	if i, j := slices.IndexFunc(rows, func(r string) bool { return strings.HasPrefix(r, "dev | fake__add") }),
		slices.IndexFunc(rows, func(r string) bool { return strings.HasPrefix(r, "dev | fake__echo") }); j > i {
		t.Errorf("the recent activity is not newest first: fake__add's row %d, fake__echo's (later) %d", i, j)
	}
	for _, r := range rows {
		if strings.Contains(r, admin) || strings.Contains(r, dev) {
			t.Errorf("a key's secret in the recent activity: %s", r)
		}
	}
	var links [][]any
	eval("the section links", navLinks, &links)
	if !strings.Contains(fmt.Sprint(links), "[#activity true]") {
		t.Errorf("the admin's section links %v lead to no recent activity", links)
	}

	// A call made since: the Refresh button reads it.
	executeTool(t, cctx, cs, "fake__add", map[string]any{"a": 2, "b": 3})
	auditRecords(t, data, audit.Filter{Key: "dev", Tool: "fake__add"}, func(rs []audit.Record) bool { return len(rs) == 2 })
	do("refresh the recent activity", chromedp.Click(`#activity-refresh`))
	poll("the new call's row", `(`+activityRows+`).filter((r) => r.startsWith("dev | fake__add | allowed")).length === 2`)

	// Key dev (not admin): no section, no link, and the records refused.
	do("log out", chromedp.Click(`#logout`), chromedp.WaitVisible(`#login-key`))
	do("log in as dev", chromedp.SendKeys(`#login-key`, dev), chromedp.Click(`#login-form button[type=submit]`),
		chromedp.WaitVisible(`#backend-rows tr[data-server="fake"]`))
	var shown bool
	eval("the recent activity's section", `document.querySelector("#activity").checkVisibility()`, &shown)
	eval("the section links", navLinks, &links)
	if shown || strings.Contains(fmt.Sprint(links), "#activity") {
		t.Errorf("key dev (not admin): the recent activity shows %v, the section links %v", shown, links)
	}
	var status int
	do("ask for the records", chromedp.Evaluate[chromedp.Void](`fetch("api/activity").then((r) => { window.__status = r.status; })`, chromedp.EvalAwaitPromise))
	eval("the status", `window.__status`, &status)
	if status != 403 {
		t.Errorf("GET /ui/api/activity with key dev's session: %d, want 403", status)
	}
}

// TestConsoleActivityUnsafeTextInBrowser: what a client chose (a tool's
// name of an execute_tool, echoed in its refusal's reason) reaches the
// recent activity as text, never as markup, and a control or format
// character in it (a bidi override that makes "gnp.exe" read "exe.png")
// shows as its escape, \u202e, as `toolgate audit tail` prints it: the page
// drew it as it is, so the name read as another.
func TestConsoleActivityUnsafeTextInBrowser(t *testing.T) {
	chromium := findChromium(t)
	data := t.TempDir()
	addr, _ := startGateway(t, data, fakeConfig(t, map[string]string{"fake": backendtest.ModeNormal}, nil), noModelFlags(t)...)

	cctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cs, err := connectKey(cctx, t, addr, "/mcp", "", "unsafe")
	if err != nil {
		t.Fatal(err)
	}
	const name = "fake__<img src=x onerror=\"window.__xss=1\">\u202egnp.exe\x1b[2J"
	executeTool(t, cctx, cs, name, map[string]any{})
	auditRecords(t, data, audit.Filter{}, func(rs []audit.Record) bool {
		return slices.ContainsFunc(rs, func(r audit.Record) bool { return r.Tool == name })
	})

	ctx, do, eval := newBrowser(t, chromium)
	poll := poller(t, ctx)
	do("load /ui/", chromedp.Navigate("http://"+addr+"/ui/"))
	poll("the recent activity", `document.querySelectorAll("#activity-rows tr[data-decision]").length > 0`)
	var rows []string
	eval("the recent activity's rows", activityRows, &rows)
	t.Logf("recent activity:\n%s", strings.Join(rows, "\n"))
	var markup bool
	eval("markup in the rows", `document.querySelector("#activity-rows img") !== null || window.__xss === 1`, &markup)
	if markup {
		t.Error("a tool's name in the recent activity was drawn as markup")
	}
	want := `fake__<img src=x onerror="window.__xss=1">\u202egnp.exe\x1b[2J`
	if !slices.ContainsFunc(rows, func(r string) bool { return strings.Contains(r, " | "+want+" | ") }) {
		t.Errorf("the recent activity does not show the tool's name %q with its control and format characters escaped:\n%s", want, strings.Join(rows, "\n"))
	}
	for _, r := range rows {
		if strings.ContainsAny(r, "\u202e\x1b") {
			t.Errorf("a control or format character drawn as it is: %q", r)
		}
	}
}

// TestConsoleActivityCoalescedInBrowser: a record that stands for many
// refusals of a key alike (count, firstTime: a key refused 240 times in a
// minute) says how many and since when, as `toolgate audit tail` prints it
// (×240 since …): the recent activity drew it as one refusal.
func TestConsoleActivityCoalescedInBrowser(t *testing.T) {
	chromium := findChromium(t)
	data := t.TempDir()
	if err := os.MkdirAll(filepath.Join(data, "audit"), 0o700); err != nil {
		t.Fatal(err)
	}
	line := `{"time":"2026-12-08T01:00:59Z","key":"dev","transport":"http","action":"execute_tool","tool":"fake__echo","decision":"denied","reason":"the API key \"dev\" lacks access to this tool","durationMs":0,"resultBytes":0,` +
		`"count":240,"firstTime":"2026-12-08T01:00:00Z","lastTime":"2026-12-08T01:00:59Z"}` + "\n"
	if err := os.WriteFile(filepath.Join(data, "audit", "audit.jsonl"), []byte(line), 0o600); err != nil {
		t.Fatal(err)
	}
	addr, _ := startGateway(t, data, fakeConfig(t, map[string]string{"fake": backendtest.ModeNormal}, nil), noModelFlags(t)...)
	ctx, do, eval := newBrowser(t, chromium)
	poll := poller(t, ctx)
	do("load /ui/", chromedp.Navigate("http://"+addr+"/ui/"))
	poll("the recent activity", `document.querySelector('#activity-rows tr[data-key="dev"]') !== null`)
	var rows []string
	eval("the recent activity's rows", activityRows, &rows)
	t.Logf("recent activity:\n%s", strings.Join(rows, "\n"))
	if !slices.ContainsFunc(rows, func(r string) bool { return strings.HasPrefix(r, "dev | fake__echo | denied ×240 since ") }) {
		t.Errorf("a record of 240 refusals alike does not say how many and since when (denied ×240 since …):\n%s", strings.Join(rows, "\n"))
	}
}

// TestConsoleActivityShowsCount: a record that stands for an API key's
// refusals alike (count, firstTime) shows how many and since when in the
// recent activity, as `audit tail` prints ×N since FIRST. Before, its row
// read as one refusal at its lastTime: 500 refusals of a minute looked
// like one.
func TestConsoleActivityShowsCount(t *testing.T) {
	chromium := findChromium(t)
	data := t.TempDir()
	admin := createKey(t, data, "--name", "ops", "--admin")
	addr, _ := startGateway(t, data, fakeConfig(t, map[string]string{"fake": backendtest.ModeNormal}, nil), noModelFlags(t)...)
	first := time.Now().Add(-time.Minute).UTC()
	for _, r := range []audit.Record{
		{Time: first, Key: "mallory", Transport: "http", Action: "execute_tool", Tool: "fake__echo", Decision: audit.Denied, Reason: "outside the key's scope"},
		{Time: first.Add(59 * time.Second), Key: "mallory", Transport: "http", Action: "execute_tool", Tool: "fake__echo", Decision: audit.Denied, Reason: "outside the key's scope",
			Count: 500, FirstTime: first.Add(time.Second), LastTime: first.Add(59 * time.Second)},
	} {
		if err := audit.Append(dirs.Audit(data), r); err != nil {
			t.Fatal(err)
		}
	}

	ctx, do, eval := newBrowser(t, chromium)
	poll := poller(t, ctx)
	do("log in as ops (admin)", chromedp.Navigate("http://"+addr+"/ui/"), chromedp.WaitVisible(`#login-key`),
		chromedp.SendKeys(`#login-key`, admin), chromedp.Click(`#login-form button[type=submit]`),
		chromedp.WaitVisible(`#backend-rows tr[data-server="fake"]`))
	poll("mallory's rows", `document.querySelectorAll("#activity-rows tr[data-key=mallory]").length === 2`)
	var decisions []string
	eval("the rows' decisions", `[...document.querySelectorAll("#activity-rows tr[data-key=mallory]")].map((r) => r.cells[3].textContent)`, &decisions)
	t.Logf("mallory's rows' decisions: %q", decisions)
	if len(decisions) != 2 || !strings.HasPrefix(decisions[0], "denied ×500 since ") || strings.Contains(decisions[1], "×") {
		t.Errorf("mallory's rows' decisions %q: want the newest (the summary) to say ×500 since its first refusal, the one in full no count", decisions)
	}
}
