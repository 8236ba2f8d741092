package gateway

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"unicode"
)

// headingSlugs are the anchors GitHub gives a Markdown file's headings: the
// heading's text as shown (code spans, emphasis and links reduced to their
// text), lowercased, with every character other than a letter, a digit, a
// mark, '-' or '_' dropped and each space made '-'; a slug seen before gets
// -1, -2 … (github-slugger). Lines inside fenced code blocks are not headings.
func headingSlugs(md string) map[string]bool {
	link := regexp.MustCompile(`\[([^\]]*)\]\([^)]*\)`)
	slugs := map[string]bool{}
	seen := map[string]int{}
	fence := ""
	for line := range strings.SplitSeq(md, "\n") {
		trimmed := strings.TrimLeft(line, " ")
		if f := fenceOf(trimmed); f != "" {
			switch {
			case fence == "":
				fence = f
			case strings.HasPrefix(f, fence) && strings.TrimSpace(trimmed[len(f):]) == "":
				fence = ""
			}
			continue
		}
		if fence != "" || len(line)-len(trimmed) > 3 {
			continue
		}
		level := len(trimmed) - len(strings.TrimLeft(trimmed, "#"))
		if level < 1 || level > 6 || len(trimmed) > level && trimmed[level] != ' ' {
			continue
		}
		text := strings.TrimSpace(strings.TrimRight(strings.TrimSpace(trimmed[level:]), "#"))
		text = link.ReplaceAllString(text, "$1")
		text = strings.NewReplacer("`", "", "**", "", "*", "").Replace(text)
		var b strings.Builder
		for _, r := range strings.ToLower(text) {
			switch {
			case r == ' ':
				b.WriteRune('-')
			case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r) || unicode.IsMark(r):
				b.WriteRune(r)
			}
		}
		slug := b.String()
		if n := seen[slug]; n > 0 {
			seen[slug]++
			slug = fmt.Sprintf("%s-%d", slug, n)
		} else {
			seen[slug] = 1
		}
		slugs[slug] = true
	}
	return slugs
}

// fenceOf is the fence (``` or ~~~, three or more) a line opens or closes
// a code block with, or "".
func fenceOf(line string) string {
	for _, c := range []string{"`", "~"} {
		n := len(line) - len(strings.TrimLeft(line, c))
		if n >= 3 {
			return line[:n]
		}
	}
	return ""
}

func TestHeadingSlugs(t *testing.T) {
	md := "# toolgate\n## Use it from an MCP client\n### `search_tools`\n" +
		"## Where things live on disk (and why)\n### A large shared gateway: 100 servers, 50,000 tools, 200 API keys\n" +
		"```sh\n# not a heading\n```\n## Reliability\n## Reliability\n#### Times in flags\n#nope\n"
	got := headingSlugs(md)
	for _, want := range []string{"toolgate", "use-it-from-an-mcp-client", "search_tools",
		"where-things-live-on-disk-and-why", "a-large-shared-gateway-100-servers-50000-tools-200-api-keys",
		"reliability", "reliability-1", "times-in-flags"} {
		if !got[want] {
			t.Errorf("no slug %q in %v", want, got)
		}
	}
	for _, not := range []string{"not-a-heading", "nope"} {
		if got[not] {
			t.Errorf("slug %q from a line that is no heading", not)
		}
	}
}

// TestREADMEAnchors holds every link to a section of the project's
// Markdown files, (#x) into the file itself and (FILE.md#x) into another
// (CHANGELOG.md's (README.md#x), examples/README.md's (../README.md#x)), to
// a heading of the file it names: a section renamed or removed leaves no
// link that lands at the top of the page. A link to a file of the
// repository ((docs/console.png), (gateway/testdata/tools_list.json)) names
// one that is there: a file moved leaves no link to nothing.
func TestREADMEAnchors(t *testing.T) {
	files := []string{"README.md", "CHANGELOG.md", "examples/README.md"}
	slugs := map[string]map[string]bool{} // file, from the repository's root → its headings' slugs
	texts := map[string]string{}
	for _, f := range files {
		b, err := os.ReadFile(filepath.Join("..", f))
		if err != nil {
			t.Fatal(err)
		}
		texts[f], slugs[f] = string(b), headingSlugs(string(b))
	}
	anchor := regexp.MustCompile(`\]\(([^)\s#]*\.md)?#([^)\s]*)\)`)
	fileLink := regexp.MustCompile(`\]\(([^)\s#]+)(?:#[^)\s]*)?\)`)
	codeSpan := regexp.MustCompile("`[^`]*`")
	links, fileLinks := 0, 0
	for _, f := range files {
		for i, line := range strings.Split(texts[f], "\n") {
			// A link written in a code span (`![…](https://…)`, the
			// quarantine's examples) is text, not a link.
			for _, m := range fileLink.FindAllStringSubmatch(codeSpan.ReplaceAllString(line, ""), -1) {
				if strings.Contains(m[1], ":") || strings.HasPrefix(m[1], "//") {
					continue // https://…, mailto:
				}
				fileLinks++
				target := filepath.Join("..", filepath.Dir(f), m[1])
				if _, err := os.Stat(target); err != nil {
					t.Errorf("%s:%d: the link (%s) names no file of the repository (%s): correct the path, or link the file where it went", f, i+1, m[1], filepath.ToSlash(filepath.Clean(filepath.Join(filepath.Dir(f), m[1]))))
				}
			}
			for _, m := range anchor.FindAllStringSubmatch(line, -1) {
				links++
				target := f
				if m[1] != "" {
					target = filepath.ToSlash(filepath.Join(filepath.Dir(f), m[1]))
				}
				known, ok := slugs[target]
				switch {
				case !ok:
					t.Errorf("%s:%d: the link %s goes to %s, which this test does not read: add it to files", f, i+1, strings.TrimPrefix(m[0], "]"), target)
				case !known[m[2]]:
					t.Errorf("%s:%d: the link %s names no heading of %s", f, i+1, strings.TrimPrefix(m[0], "]"), target)
				}
			}
		}
	}
	t.Logf("%d links to sections and %d to files checked", links, fileLinks)
}
