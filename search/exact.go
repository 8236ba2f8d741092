package search

import (
	"slices"
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
	tools []catalog.Tool
	bare  map[string][]int // nameKey(tool name) → rows
	ids   map[string]int   // nameKey(server) + "__" + nameKey(tool name) → first row
	// same holds the rows of an ids key that several tools of one server
	// have (getFile and get_file, Straße and STRASSE): rare, so not a
	// slice a tool.
	same map[string][]int
}

func newNames(tools []catalog.Tool) *names {
	n := &names{tools: tools, bare: make(map[string][]int, len(tools)), ids: make(map[string]int, len(tools))}
	for i, t := range tools {
		k := nameKey(t.Name)
		if k == "" {
			continue
		}
		n.bare[k] = append(n.bare[k], i)
		id := nameKey(t.Server) + catalog.Sep + k
		first, ok := n.ids[id]
		switch {
		case !ok:
			n.ids[id] = i
		case n.same == nil:
			n.same = map[string][]int{id: {first, i}}
		case n.same[id] == nil:
			n.same[id] = []int{first, i}
		default:
			n.same[id] = append(n.same[id], i)
		}
	}
	return n
}

// asWritten is rows, those tools of one server whose names are one name
// (nameKey: Straße and STRASSE, café composed and decomposed) but for the
// one named name byte for byte, when one is: a name written as it is
// means that tool, not every tool of that server it reads as. Rows of
// servers that have no tool so named stay.
func (n *names) asWritten(rows []int, name string) []int {
	if len(rows) < 2 {
		return rows
	}
	var named map[string]bool // servers with a tool named name
	for _, r := range rows {
		if n.tools[r].Name == name {
			if named == nil {
				named = map[string]bool{}
			}
			named[n.tools[r].Server] = true
		}
	}
	if named == nil {
		return rows
	}
	return slices.DeleteFunc(slices.Clone(rows), func(r int) bool {
		return named[n.tools[r].Server] && n.tools[r].Name != name
	})
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
	add(n.id(whole)...)
	if rs := n.bare[nameKey(whole)]; len(rs) > 0 && isOneIdent(whole) {
		add(n.asWritten(rs, whole)...)
	}
	// Identifiers inside the query.
	for _, tok := range identTokens(query) {
		if rs := n.id(tok); len(rs) > 0 {
			add(rs...)
			continue
		}
		if len(catalog.SplitIdent([]byte(tok))) < 2 {
			continue
		}
		add(n.asWritten(n.bare[nameKey(tok)], tok)...)
	}
	return rows
}

// id looks s up as a server__tool ID: the rows of the tools it names,
// the one named so byte for byte when several read as s (asWritten).
func (n *names) id(s string) []int {
	server, tool, ok := strings.Cut(s, catalog.Sep)
	if !ok || server == "" || tool == "" {
		return nil
	}
	key := nameKey(server) + catalog.Sep + nameKey(tool)
	first, ok := n.ids[key]
	if !ok {
		return nil
	}
	rows := n.same[key]
	for _, r := range rows {
		if n.tools[r].Server == server && n.tools[r].Name == tool {
			return []int{r}
		}
	}
	if rows == nil {
		return []int{first}
	}
	return rows
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
