package termtext

import (
	"bytes"
	"io"
	"strings"

	"github.com/rivo/uniseg"
)

// Table lines text up in columns as text/tabwriter does with padding 2
// and spaces (cells end with a tab, a line with a newline; the text after
// a line's last tab is not aligned; a column is aligned over the run of
// lines that have it), but by how wide each cell shows on a terminal
// (uniseg.StringWidth) rather than by its runes: a Chinese or Japanese
// character takes two columns, an emoji two, a combining accent none.
// With tabwriter a tool named 天気を取得 pushed the rest of its line five
// columns right. A table of ASCII is the same as tabwriter's.
type Table struct {
	w   io.Writer
	buf bytes.Buffer
}

// tablePadding is the spaces between two columns.
const tablePadding = 2

// NewTable returns a Table that writes to w at Flush.
func NewTable(w io.Writer) *Table { return &Table{w: w} }

// Write buffers p.
func (t *Table) Write(p []byte) (int, error) { return t.buf.Write(p) }

// Flush writes what was buffered, aligned, and empties the buffer.
func (t *Table) Flush() error {
	text := t.buf.String()
	t.buf.Reset()
	end := ""
	if strings.HasSuffix(text, "\n") {
		text, end = text[:len(text)-1], "\n"
	}
	if text == "" {
		_, err := io.WriteString(t.w, end)
		return err
	}
	var rows [][]string
	for line := range strings.SplitSeq(text, "\n") {
		rows = append(rows, strings.Split(line, "\t"))
	}
	widths := make([][]int, len(rows))
	for i, r := range rows {
		widths[i] = make([]int, len(r)-1)
	}
	columns(rows, widths, 0, 0, len(rows))
	var out strings.Builder
	for i, r := range rows {
		for j, cell := range r {
			out.WriteString(cell)
			if j < len(r)-1 {
				out.WriteString(strings.Repeat(" ", widths[i][j]-uniseg.StringWidth(cell)))
			}
		}
		if i < len(rows)-1 {
			out.WriteByte('\n')
		}
	}
	out.WriteString(end)
	_, err := io.WriteString(t.w, out.String())
	return err
}

// columns sets the width of column col over rows[start:end]: each run of
// lines that have a cell col ended by a tab is one block, as wide as its
// widest cell and the padding; the next column is then set within each
// block (tabwriter's rule).
func columns(rows [][]string, widths [][]int, col, start, end int) {
	for i := start; i < end; {
		if col >= len(rows[i])-1 {
			i++
			continue
		}
		j, w := i, 0
		for ; j < end && col < len(rows[j])-1; j++ {
			w = max(w, uniseg.StringWidth(rows[j][col]))
		}
		for k := i; k < j; k++ {
			widths[k][col] = w + tablePadding
		}
		columns(rows, widths, col+1, i, j)
		i = j
	}
}
