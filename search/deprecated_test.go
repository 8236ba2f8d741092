package search

import (
	"strings"
	"testing"

	"github.com/toolgate/toolgate/index/catalog"
)

// A deprecated tool that names its replacement ("DEPRECATED: Use
// read_text_file instead.") swaps places with it when the replacement is
// found below it for the same part of the query; the others keep theirs,
// and a query that names the old tool keeps it first.
func TestPromoteReplacements(t *testing.T) {
	tool := func(name, desc string) catalog.Tool {
		return catalog.Tool{Server: "filesystem", Name: name, Description: desc}
	}
	old := tool("read_file", "Read the complete contents of a file as text. DEPRECATED: Use read_text_file instead.")
	hits := func(exact bool, clause string) []Hit {
		return []Hit{{Tool: old, Exact: exact}, {Tool: tool("get_file_info", "Metadata.")}, {Tool: tool("read_text_file", "Read a file as text."), Clause: clause}, {Tool: tool("list_directory", "List.")}}
	}
	order := func(hs []Hit) string {
		var names []string
		for _, h := range hs {
			names = append(names, h.Tool.Name)
		}
		return strings.Join(names, " ")
	}
	scored := hits(false, "")
	for i := range scored {
		scored[i].Score = 1 - float64(i)/10
	}
	promoteReplacements(scored)
	if scored[0].Tool.Name != "read_text_file" || scored[0].Score != 1 || scored[2].Score != 0.8 {
		t.Errorf("the swap keeps the list best first: %+v", scored)
	}
	for _, c := range []struct {
		hits []Hit
		want string
	}{
		{hits(false, ""), "read_text_file get_file_info read_file list_directory"},
		{hits(true, ""), "read_file get_file_info read_text_file list_directory"},        // named by the query
		{hits(false, "then x"), "read_file get_file_info read_text_file list_directory"}, // another step's
		{[]Hit{{Tool: tool("old", "Deprecated. Use `new` instead.")}, {Tool: tool("new", "")}}, "new old"},
		{[]Hit{{Tool: tool("old", "Ping web tests are deprecated and not supported.")}, {Tool: tool("new", "")}}, "old new"},
	} {
		promoteReplacements(c.hits)
		if got := order(c.hits); got != c.want {
			t.Errorf("got %s, want %s", got, c.want)
		}
	}
}
