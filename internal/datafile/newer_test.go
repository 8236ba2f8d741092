package datafile

import (
	"fmt"
	"strings"
	"testing"
)

// Only a later format is a newer toolgate's; an older one, or a stamp that
// is no number, is left to the caller's own error.
func TestNewer(t *testing.T) {
	for _, tc := range []struct {
		found string
		newer bool
	}{{"2", true}, {"10", true}, {"1", false}, {"0", false}, {"x", false}, {"", false}} {
		err := Newer("learned pairs", "/d/learn", tc.found, 1, "learning starts afresh")
		if (err != nil) != tc.newer {
			t.Errorf("Newer(%q, reads 1) = %v, want newer %v", tc.found, err, tc.newer)
		}
	}
	err := fmt.Errorf("open: %w", Newer("learned pairs", "/d/learn", "2", 1, "learning starts afresh"))
	ne, ok := AsNewer(err)
	if !ok {
		t.Fatalf("AsNewer(%v) = false", err)
	}
	for _, want := range []string{"learned pairs /d/learn was written by a newer toolgate (format 2; this one reads format 1)"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q lacks %q", err, want)
		}
	}
	if fix := ne.Fix(); !strings.Contains(fix, "run the newer toolgate again") || !strings.Contains(fix, "mv /d/learn /d/learn.newer): learning starts afresh;") {
		t.Errorf("fix %q", fix)
	}
}
