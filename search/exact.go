package search

import (
	"strings"
	"sync"
	"unicode"
	"unicode/utf8"

	"github.com/toolgate/toolgate/index"
	"github.com/toolgate/toolgate/index/catalog"
)

// Exact names. A query that is a tool's name, or its server__tool ID, or
// that holds one as an identifier ("call github__create_issue", "what does
// listDirectory take"), ranks that tool first, whatever the two signals
// say: an agent that knows the name must get the tool. Names compare by
// their words, case-insensitively, so list_directory, list-directory,
// listDirectory, ListDirectory and list.directory are one name. A bare name
// that several servers have brings all of them first.
//
// Inside a longer query only identifiers of two words or more count (a
// tool called "search" or "local" must not capture every query holding
// that word); a one-word name counts when it is the whole query.

// nameKey is the comparison form of a name: its words, caseless
// (catalog.Caseless: lower case, and café, STRASSE or ｇｅｔ as a name
// outside ASCII may be written), joined by one space ("getUserID" → "get
// user id").
func nameKey(name string) string {
	parts := catalog.SplitIdent([]byte(name))
	words := make([]string, len(parts))
	for i, p := range parts {
		words[i] = catalog.Caseless(string(p))
	}
	return strings.Join(words, " ")
}

// names maps the name keys of one index's tools to their rows.
type names struct {
	bare map[string][]int // nameKey(tool name) → rows
	ids  map[string]int   // nameKey(server) + "__" + nameKey(tool name) → row
}

func newNames(tools []catalog.Tool) *names {
	n := &names{bare: make(map[string][]int, len(tools)), ids: make(map[string]int, len(tools))}
	for i, t := range tools {
		k := nameKey(t.Name)
		if k == "" {
			continue
		}
		n.bare[k] = append(n.bare[k], i)
		n.ids[nameKey(t.Server)+catalog.Sep+k] = i
	}
	return n
}

// lazyNames builds an index's names once: in the background when the
// engine gets the index (newSnapshot), or at a search that comes first.
type lazyNames struct {
	once sync.Once
	n    *names
}

func (l *lazyNames) get(ix *index.Index) *names {
	l.once.Do(func() { l.n = newNames(ix.Tools()) })
	return l.n
}

// match returns the rows of the tools query names, in the order found
// (nil when it names none).
func (n *names) match(query string) []int {
	var rows []int
	seen := map[int]bool{}
	add := func(rs ...int) {
		for _, r := range rs {
			if !seen[r] {
				seen[r] = true
				rows = append(rows, r)
			}
		}
	}
	// The whole query, quotes and backticks around it dropped.
	whole := strings.Trim(strings.TrimSpace(query), "`'\"")
	if r, ok := n.id(whole); ok {
		add(r)
	}
	if rs := n.bare[nameKey(whole)]; len(rs) > 0 && isOneIdent(whole) {
		add(rs...)
	}
	// Identifiers inside the query.
	for _, tok := range identTokens(query) {
		if r, ok := n.id(tok); ok {
			add(r)
			continue
		}
		if len(catalog.SplitIdent([]byte(tok))) < 2 {
			continue
		}
		add(n.bare[nameKey(tok)]...)
	}
	return rows
}

// id looks s up as a server__tool ID.
func (n *names) id(s string) (int, bool) {
	server, tool, ok := strings.Cut(s, catalog.Sep)
	if !ok || server == "" || tool == "" {
		return 0, false
	}
	r, ok := n.ids[nameKey(server)+catalog.Sep+nameKey(tool)]
	return r, ok
}

// isOneIdent reports whether s is a single identifier: no spaces.
func isOneIdent(s string) bool {
	return s != "" && !strings.ContainsFunc(s, unicode.IsSpace)
}

// identTokens cuts text into runs of word characters and the characters
// that join the words of an identifier (_ - . / :), trimmed of joiners at
// both ends, as the index's tokenizer does.
func identTokens(text string) []string {
	var out []string
	start := -1
	emit := func(end int) {
		tok := strings.TrimFunc(text[start:end], func(r rune) bool { return !catalog.IsWordRune(r) })
		if tok != "" {
			out = append(out, tok)
		}
	}
	for i := 0; i < len(text); {
		r, size := utf8.DecodeRuneInString(text[i:])
		in := catalog.IsWordRune(r) || strings.ContainsRune("_-./:", r)
		switch {
		case in && start < 0:
			start = i
		case !in && start >= 0:
			emit(i)
			start = -1
		}
		i += size
	}
	if start >= 0 {
		emit(len(text))
	}
	return out
}
