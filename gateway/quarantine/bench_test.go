package quarantine

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"testing"

	"github.com/toolgate/toolgate/index/catalog"
)

// benchTools is a catalog of n tools with descriptions and schemas of the
// size of the bundled servers' longer ones.
func benchTools(n int) []catalog.Tool {
	schema := json.RawMessage(`{"type":"object","properties":{"path":{"type":"string","description":"Path of the file to read, within the allowed directories."},"head":{"type":"number","description":"If provided, returns only the first N lines of the file"},"mode":{"type":"string","enum":["text","binary"],"default":"text"}},"required":["path"]}`)
	desc := "Read the complete contents of a file from the file system as text. Handles various text encodings and provides detailed error messages if the file cannot be read. Use this tool when you need to examine the contents of a single file. Only works within allowed directories."
	out := make([]catalog.Tool, n)
	for i := range out {
		out[i] = catalog.Tool{Server: fmt.Sprintf("s%d", i%50), Name: fmt.Sprintf("tool_%d", i), Description: desc, InputSchema: schema}
	}
	return out
}

// BenchmarkScan is the scan of one tool definition.
func BenchmarkScan(b *testing.B) {
	t := benchTools(1)[0]
	b.ReportAllocs()
	for b.Loop() {
		if fs := (Scanner{}).Scan(t); len(fs) > 0 {
			b.Fatal(fs)
		}
	}
}

// BenchmarkObserve10k is a start with 10,000 tools: each scanned, hashed
// and pinned, the pins file written once.
func BenchmarkObserve10k(b *testing.B) {
	tools := benchTools(10000)
	for b.Loop() {
		g := New(filepath.Join(b.TempDir(), "pins.json"), nil)
		g.Observe(tools)
	}
}

// BenchmarkObserveWarm10k is a warm start with 10,000 tools: the pins file
// already holds every definition (the last run's), as serve finds it.
func BenchmarkObserveWarm10k(b *testing.B) {
	tools := benchTools(10000)
	path := filepath.Join(b.TempDir(), "pins.json")
	New(path, nil).Observe(tools)
	for b.Loop() {
		g := New(path, nil)
		g.Observe(tools)
	}
}
