package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/chromedp/chromedp"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	unorm "golang.org/x/text/unicode/norm"

	"github.com/toolgate/toolgate/internal/testenv"
)

// intlConfig writes a config whose one server, intl, is
// testdata/intl.mjs: tools named and described in German, French,
// Japanese, Chinese, Arabic and Hebrew, on the TypeScript SDK.
func intlConfig(t *testing.T) string {
	t.Helper()
	root := repoRoot(t)
	if _, err := os.Stat(filepath.Join(root, "examples", "servers", "node_modules", "@modelcontextprotocol", "sdk")); err != nil {
		testenv.Missing(t, "the TypeScript SDK is not installed in examples/servers/node_modules (make deps-servers)")
	}
	b, err := json.Marshal(map[string]any{"mcpServers": map[string]any{"intl": map[string]any{
		"command": "node", "args": []string{filepath.Join(root, "cmd", "toolgate", "testdata", "intl.mjs")}}}})
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "toolgate.json")
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// A team that does not work in English, over stdio with the real binary
// and a real backend: a Japanese query finds the Japanese tool by its
// words (the keyword side read a sentence without spaces as one word, so
// 天気 matched nothing), a name typed decomposed (café from a Mac's
// clipboard) or as STRASSE runs its tool.
func TestToolsInOtherLanguages(t *testing.T) {
	cfg := intlConfig(t)
	cmd := toolgateCmd(t, t.TempDir(), append([]string{"serve", "--config", cfg}, noModelFlags(t)...)...)
	cmd.Stderr = testLog(t, "toolgate: ")
	ctx, cs := connectStdio(t, cmd, 2*time.Minute)
	call := func(name string, args map[string]any) (string, *mcp.CallToolResult) {
		t.Helper()
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: args})
		if err != nil {
			t.Fatalf("%s %v: %v", name, args, err)
		}
		var b strings.Builder
		for _, c := range res.Content {
			if tc, ok := c.(*mcp.TextContent); ok {
				b.WriteString(tc.Text)
			}
		}
		return b.String(), res
	}
	for q, want := range map[string]string{"天気": "intl__天気を取得", "东京の天気": "intl__天気を取得", "翻译": "intl__翻译文本", "ترجمة": "intl__ترجمة_النص"} {
		txt, res := call("search_tools", map[string]any{"query": q, "limit": 1})
		if res.IsError || !strings.Contains(txt, "1. "+want) || strings.Contains(txt, "No tool fits") || !utf8.ValidString(txt) {
			t.Errorf("search %q: want %s first, a match:\n%s", q, want, txt)
		}
	}
	for name, want := range map[string]string{unorm.NFD.String("intl__café"): "ran café", "intl__STRASSE_SUCHEN": "ran straße_suchen"} {
		if txt, res := call("execute_tool", map[string]any{"name": name}); res.IsError || txt != want {
			t.Errorf("execute_tool %+q: isError=%v %s", name, res.IsError, txt)
		}
	}
}

// The console shows a description written right to left (Arabic,
// Hebrew) right to left, each from its own first letter (dir="auto"):
// it was laid out left to right like the page, its full stop at the
// wrong end.
func TestConsoleRightToLeftInBrowser(t *testing.T) {
	chromium := findChromium(t)
	addr, _ := startGateway(t, t.TempDir(), intlConfig(t), noModelFlags(t)...)
	_, do, eval := newBrowser(t, chromium)
	do("search for an Arabic word", chromedp.Navigate("http://"+addr+"/ui/?q=ترجمة+النص+שולח+Datei&limit=10"),
		chromedp.WaitVisible(`#search-rows tr[data-tool="intl__ترجمة_النص"]`))
	var dirs map[string]string
	eval("the descriptions' directions", `Object.fromEntries([...document.querySelectorAll("#search-rows tr[data-tool]")].map(r =>
		[r.dataset.tool, getComputedStyle(r.querySelector("td:nth-child(2) div.muted")).direction]))`, &dirs)
	for tool, want := range map[string]string{"intl__ترجمة_النص": "rtl", "intl__שלח_הודעה": "rtl", "intl__dateien_lesen": "ltr"} {
		if dirs[tool] != want {
			t.Errorf("%s's description is laid out %q, want %q (all: %v)", tool, dirs[tool], want, dirs)
		}
	}
	var query string
	eval("the summary's query", `document.querySelector("#search-summary bdi")?.textContent ?? ""`, &query)
	if query != "ترجمة النص שולח Datei" {
		t.Errorf("the summary's query is %q, want it isolated in a <bdi>", query)
	}
}
