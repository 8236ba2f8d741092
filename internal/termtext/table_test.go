package termtext

import (
	"bytes"
	"fmt"
	"strings"
	"testing"
	"text/tabwriter"
)

// A table of ASCII is text/tabwriter's to the byte, ragged rows and
// blocks included; one of wide characters lines up by terminal columns.
func TestTable(t *testing.T) {
	for _, text := range []string{
		"#\tSCORE\tTOOL\tDESCRIPTION\n1\t0.9\tfs__read_file\tRead a file.\n12\t0.25\tweb__fetch\tFetch.\n",
		"a\tbb\tccc\nlonger line without tabs\nx\ty\n\nq\tr\ts\tt\n",
		"no tabs at all\n",
		"trailing\ttab\t\n",
		"",
		"no newline\tat end",
	} {
		var want, got bytes.Buffer
		tw := tabwriter.NewWriter(&want, 0, 4, 2, ' ', 0)
		fmt.Fprint(tw, text)
		tw.Flush()
		tt := NewTable(&got)
		fmt.Fprint(tt, text)
		if err := tt.Flush(); err != nil {
			t.Fatal(err)
		}
		if got.String() != want.String() {
			t.Errorf("%q:\n got %q\nwant %q", text, got.String(), want.String())
		}
	}
	var b bytes.Buffer
	tt := NewTable(&b)
	fmt.Fprint(tt, "TOOL\tDESC\nintl__天気を取得\tx\nintl__cafe\u0301\ty\nrocket_🚀\tz\n")
	tt.Flush()
	for _, l := range strings.Split(strings.TrimSuffix(b.String(), "\n"), "\n")[1:] {
		if !strings.HasSuffix(l, "  x") && !strings.HasSuffix(l, "y") && !strings.HasSuffix(l, "z") {
			t.Fatalf("line %q", l)
		}
	}
	want := "TOOL              DESC\nintl__天気を取得  x\nintl__cafe\u0301        y\nrocket_🚀         z\n"
	if b.String() != want {
		t.Errorf("got\n%s\nwant\n%s", b.String(), want)
	}
}
