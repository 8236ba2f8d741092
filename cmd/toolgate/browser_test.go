package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
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
	addr, _, _ := serveHTTP(t, bundledConfig(t, nil))
	base := "http://" + addr

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
	defer cancelAlloc()
	bctx, cancel := chromedp.NewContext(actx, chromedp.WithLogf(t.Logf))
	defer cancel()
	// The first call starts the browser, for as long as bctx lives; the
	// steps after it are bounded.
	if err := chromedp.Do(bctx); err != nil {
		t.Fatalf("start chromium: %v", err)
	}
	ctx, cancelT := context.WithTimeout(bctx, 3*time.Minute)
	defer cancelT()
	do := func(what string, steps ...chromedp.Action[chromedp.Void]) {
		t.Helper()
		if err := chromedp.Do(ctx, steps...); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	}
	eval := func(what, expr string, v any) {
		t.Helper()
		raw, err := chromedp.Run(ctx, chromedp.Evaluate[json.RawMessage](expr))
		if err == nil {
			err = json.Unmarshal(raw, v)
		}
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	}

	// The backends table: every bundled server up, with its PID.
	do("load /ui/", chromedp.Navigate(base+"/ui/"), chromedp.WaitVisible(`#backend-rows tr[data-server="memory"]`))
	var rows [][]string
	eval("backend rows", `[...document.querySelectorAll("#backend-rows tr")].map(r => [r.dataset.server, r.dataset.state, r.dataset.pid])`, &rows)
	pids := map[string]string{}
	for _, r := range rows {
		if r[1] != "up" || r[2] == "" {
			t.Errorf("backend row %v: want up with a PID", r)
		}
		pids[r[0]] = r[2]
	}
	for _, s := range bundledServers {
		if pids[s] == "" {
			t.Errorf("no row for %s in %v", s, rows)
		}
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
	do("restart memory", chromedp.Click(`button[data-restart="memory"]`))
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
