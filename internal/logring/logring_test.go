package logring

import (
	"fmt"
	"slices"
	"strings"
	"testing"
)

func texts(ls []Line) []string {
	var out []string
	for _, l := range ls {
		out = append(out, fmt.Sprintf("%d:%s", l.Seq, l.Text))
	}
	return out
}

// Lines are kept whole across writes, the oldest dropped past the
// capacity; After reads from a sequence number, the latest n.
func TestRing(t *testing.T) {
	r := New(3)
	fmt.Fprint(r, "a\nb")
	fmt.Fprint(r, "c\n")
	if got, last := r.After(0, 0); !slices.Equal(texts(got), []string{"1:a", "2:bc"}) || last != 2 {
		t.Fatalf("After(0) = %v, %d", texts(got), last)
	}
	fmt.Fprint(r, "d\ne\nf\n")
	if got, last := r.After(0, 0); !slices.Equal(texts(got), []string{"3:d", "4:e", "5:f"}) || last != 5 {
		t.Errorf("after wrapping: %v, %d", texts(got), last)
	}
	if got, _ := r.After(3, 0); !slices.Equal(texts(got), []string{"4:e", "5:f"}) {
		t.Errorf("After(3) = %v", texts(got))
	}
	if got, _ := r.After(0, 1); !slices.Equal(texts(got), []string{"5:f"}) {
		t.Errorf("After(0, 1) = %v", texts(got))
	}
	if got, last := r.After(5, 0); len(got) != 0 || last != 5 {
		t.Errorf("After(5) = %v, %d", texts(got), last)
	}
	r2 := New(2)
	fmt.Fprintln(r2, strings.Repeat("x", maxLine+10))
	if got, _ := r2.After(0, 0); len(got) != 1 || len(got[0].Text) != maxLine {
		t.Errorf("a long line: %d lines, %d bytes", len(got), len(got[0].Text))
	}
}
