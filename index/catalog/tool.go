// Package catalog is the leaf every stage shares: a backend tool as the
// catalog knows it (Tool), its namespaced ID (server__tool), the text that
// is embedded and keyword-indexed for it, the fingerprint of a whole catalog,
// and the one reader of the tools.jsonl format (index, eval, benchmarks and
// tests all load catalogs through it, so they accept and refuse the same
// files).
//
// It never speaks MCP: the gateway converts backends' tools into Tool values.
package catalog

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"unicode/utf8"

	"github.com/toolgate/toolgate/internal/oneline"
	"golang.org/x/text/cases"
	"golang.org/x/text/unicode/norm"
)

// Sep separates the server name from the tool name in a namespaced ID.
const Sep = "__"

// Tool is one backend tool as the catalog knows it.
type Tool struct {
	Server      string          `json:"server"`
	Name        string          `json:"name"`
	Title       string          `json:"title,omitempty"`
	Description string          `json:"description,omitempty"`
	InputSchema json.RawMessage `json:"input_schema,omitempty"`
	// Annotations are the backend tool's annotations (readOnlyHint,
	// destructiveHint, idempotentHint, openWorldHint, title) as JSON, kept
	// as the backend declared them so search_tools can hand them on and
	// filter on readOnlyHint; empty when the tool declares none. They are
	// not indexed.
	Annotations json.RawMessage `json:"annotations,omitempty"`
	// OutputSchema is the backend tool's outputSchema as listed (empty
	// when it declares none): what its structuredContent holds, which a
	// full search_tools answer shows so that an agent can plan the steps
	// after a call. Like the annotations it is never indexed: the text
	// searched and embedded is the same with it or without it.
	OutputSchema json.RawMessage `json:"output_schema,omitempty"`
	// Language is the language the tool's server names and describes its
	// tools in (a code of Languages; "" for English), from the server's
	// "language" in the config: the keyword index stems its words with
	// that language's rules, and every query is read in it as well as in
	// English. Never sent to a client.
	Language string `json:"language,omitempty"`
}

// ID is the namespaced name the client sees: server__tool.
func (t Tool) ID() string { return JoinID(t.Server, t.Name) }

// ReadOnly reports whether t's annotations declare readOnlyHint: true
// (search_tools' readOnly, a profile's readOnly). A tool that declares no
// annotations, or no readOnlyHint, is not read-only: MCP's default for
// the hint is false.
func (t Tool) ReadOnly() bool {
	var h struct {
		ReadOnly *bool `json:"readOnlyHint"`
	}
	if len(t.Annotations) == 0 || json.Unmarshal(t.Annotations, &h) != nil {
		return false // none, or not an object: no hints
	}
	return h.ReadOnly != nil && *h.ReadOnly
}

// JoinID builds the namespaced ID of a tool.
func JoinID(server, tool string) string { return server + Sep + tool }

// SplitID splits a namespaced ID at the first "__". Server names never
// contain "__" (config validation rejects them), while tool names may, so the
// first separator is always the right one.
func SplitID(id string) (server, tool string, err error) {
	server, tool, ok := strings.Cut(id, Sep)
	if !ok || server == "" || tool == "" {
		return "", "", fmt.Errorf("tool name %q is not namespaced: want server%stool (use a name returned by search_tools)", oneline.Echo(id), Sep)
	}
	return server, tool, nil
}

// ServersMeant is the servers of servers that name may mean: itself; else
// as written with space around it or the separator after it ("github__",
// as IDs start); else those named so in another case ("GitHub" for
// github), else with "_" for "-" or the reverse (FoldName), as
// execute_tool reads a tool's ID. Several when name cannot tell them apart
// ("my.fs" or "My-Fs" beside my-fs and my_fs, AmbiguousName); none when it
// names none.
func ServersMeant(name string, servers []string) []string {
	if slices.Contains(servers, name) {
		return []string{name}
	}
	name = strings.TrimSuffix(strings.TrimSpace(name), Sep)
	if slices.Contains(servers, name) {
		return []string{name}
	}
	return Meant(name, servers)
}

// ServerMeant is the server of servers that name means (ServersMeant):
// the one it names, or name as written when it names none (the caller
// then says that there is no such server, with the servers there are);
// an error, "server "my.fs" may be any of …" (AmbiguousName), when it may
// mean several. The management tools, the console and the command line
// read a server's name with it.
func ServerMeant(name string, servers []string) (string, error) {
	switch meant := ServersMeant(name, servers); {
	case len(meant) > 1:
		return name, errors.New("server " + AmbiguousName(name, meant))
	case len(meant) == 1:
		return meant[0], nil
	}
	return name, nil
}

// Meant is the names of names that name, none of them as written, may
// mean, nearest first: the one named so in another case
// (strings.EqualFold: straße for Straße), when one is; else the one named
// so caselessly (Caseless: STRASSE, ｇｅｔ), when one is; else those named
// so with "_" for "-" or the reverse too (FoldName). Several when name
// cannot tell them apart (AmbiguousName). (Read caselessly alone, straße
// beside Straße and STRASSE meant both, and was refused as ambiguous.)
func Meant(name string, names []string) []string {
	var cased, same, folded []string
	caseless, fold := Caseless(name), FoldName(name)
	for _, n := range names {
		if strings.EqualFold(n, name) {
			cased = append(cased, n)
		}
		if Caseless(n) == caseless {
			same = append(same, n)
		}
		if FoldName(n) == fold {
			folded = append(folded, n)
		}
	}
	switch {
	case len(cased) == 1:
		return cased
	case len(same) == 1:
		return same
	}
	return folded
}

// FoldName is a name (a server's, a tool's ID) as the forgiving lookups
// compare it: Caseless, "-" as "_".
func FoldName(s string) string {
	return strings.ReplaceAll(Caseless(s), "-", "_")
}

// Caseless is s as names compare when neither case nor the way Unicode
// writes a character matters (Unicode's compatibility caseless match,
// D146): one normal form (café composed or decomposed, as a Mac's
// clipboard may give it), full case folding (STRASSE is straße, ẞ is ß)
// and compatibility forms as the characters they stand for (full-width
// ｇｅｔ, typed by a Japanese input method, is get). Turkish ı stays
// another letter than i, as Unicode folds it. An ASCII name is its lower
// case.
func Caseless(s string) string {
	for i := 0; i < len(s); i++ {
		if s[i] >= utf8.RuneSelf {
			return norm.NFKC.String(cases.Fold().String(norm.NFKC.String(s)))
		}
	}
	return strings.ToLower(s)
}

// AmbiguousName says that name, written in another case or with "_" for
// "-" (or the reverse), may mean any of names (tool IDs or servers), so
// the caller must write one as it is: two servers my-fs and my_fs may
// stand side by side, and a forgiving lookup of either answered that
// there was no such tool or server.
func AmbiguousName(name string, names []string) string {
	q := make([]string, len(names))
	for i, n := range names {
		q[i] = fmt.Sprintf("%q", n)
	}
	return fmt.Sprintf("%q may be any of %s, which differ only in case or in \"-\" and \"_\": give one of them exactly as written", oneline.Echo(name), strings.Join(q, ", "))
}

// SortByID sorts tools by ID without building the IDs (building them
// allocated a string a tool: 8.5 MB at 50,000 tools, at every merge of a
// backend's first listing).
func SortByID(tools []Tool) {
	sort.Slice(tools, func(i, j int) bool { return CompareID(&tools[i], &tools[j]) < 0 })
}

// CompareID orders a and b as strings.Compare orders their IDs, without
// building them.
func CompareID(a, b *Tool) int {
	if a.Server == b.Server {
		return strings.Compare(a.Name, b.Name)
	}
	n := min(len(a.Server), len(b.Server))
	if c := strings.Compare(a.Server[:n], b.Server[:n]); c != 0 {
		return c
	}
	// One server starts the other ("db" and "db2"): the shorter one's
	// separator meets the rest of the longer one. Rare enough to build.
	if len(a.Server) < len(b.Server) {
		return strings.Compare(Sep+a.Name, b.Server[n:]+Sep+b.Name)
	}
	return strings.Compare(a.Server[n:]+Sep+a.Name, Sep+b.Name)
}
