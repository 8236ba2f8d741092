package gateway

import (
	"strings"
	"testing"

	"github.com/toolgate/toolgate/search"
)

// The example of a task of several steps in search_tools' description is
// one: each of its steps is a part of the query, so each is ranked on its
// own (search's minStepParts, 2). "read notes.txt, then email it to Bob"
// had one part.
func TestSeveralStepsExampleSplits(t *testing.T) {
	if parts := search.QueryParts(severalSteps); len(parts) != 2 {
		t.Errorf("QueryParts(%q) = %q, want its two steps", severalSteps, parts)
	}
}

// search_tools' description is in the client's context with every
// request: past the list of servers, it says what the two tools' input
// schemas and answers do not. It said that each hit carries its
// inputSchema and score (the text, which a model reads, has neither: its
// arguments and confidence) and repeated what the schema's "readOnly" and
// "detail" say: 584 characters with the test catalog, now 449.
func TestSearchDescriptionBudget(t *testing.T) {
	g, _ := newTestGateway(t, nil)
	d := g.describeSearch()
	fixed := len(d) - len(g.serverList())
	t.Logf("search_tools' description: %d characters, %d of them past the list of servers", len(d), fixed)
	if fixed > 460 {
		t.Errorf("the description past the list of servers is %d characters, want at most 460:\n%s", fixed, d)
	}
	for _, absent := range []string{"inputSchema", "score", `"readOnly"`, `"detail"`} {
		if strings.Contains(d, absent) {
			t.Errorf("the description says %s:\n%s", absent, d)
		}
	}
}
