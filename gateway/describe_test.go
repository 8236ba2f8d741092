package gateway

import (
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
