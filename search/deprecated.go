package search

import (
	"regexp"
	"strings"
)

// Deprecated tools. A server keeps an old tool beside its replacement and
// says so in its words: the filesystem server's read_file is described
// "Read the complete contents of a file as text. DEPRECATED: Use
// read_text_file instead." Its text still matches "open README.md" as well
// as the new tool's, so it came first for a model to call. When a hit's
// description names the tool that replaces it ("use X instead", X a tool of
// the same server among the hits below it, found for the same part of the
// query), the two swap places and scores, unless the query names the old
// tool (keyword, vector and confidence stay each tool's own): the
// old tool stays in the answer, and the others keep theirs (moving the new
// one up and the rest down pushed another step's tool out of the top
// five). A deprecated tool that names
// no replacement keeps its place (moving it down measured worse: it is
// often as right as the tools after it).

// replacedBy finds "use X instead" in a description ("Use `read_text_file`
// instead", "please use read_text_file instead").
var replacedBy = regexp.MustCompile("(?i)\\buse\\s+[`'\"]?([A-Za-z0-9_.:/-]+?)[`'\"]?\\s+instead\\b")

// promoteReplacements swaps each deprecated hit with its replacement, when
// its description names one found below it.
func promoteReplacements(hits []Hit) {
	for i := 0; i < len(hits); i++ {
		old := hits[i]
		if old.Exact || !strings.Contains(strings.ToLower(old.Tool.Description), "deprecated") {
			continue
		}
		m := replacedBy.FindStringSubmatch(old.Tool.Description)
		if m == nil {
			continue
		}
		name := m[1]
		if _, tool, ok := strings.Cut(name, "__"); ok {
			name = tool // written as an ID
		}
		for j := i + 1; j < len(hits); j++ {
			if h := hits[j]; h.Tool.Server == old.Tool.Server && h.Tool.Name == name && h.Clause == old.Clause {
				// Places and scores: the list stays best first.
				h.Score, old.Score = old.Score, h.Score
				hits[i], hits[j] = h, old
				break
			}
		}
	}
}
