package quarantine

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"testing"
	"time"

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

// benchPins writes the pins file of n tools (benchTools, their texts
// kept, none held) and returns its path.
func benchPins(b *testing.B, n int) string {
	now := time.Date(2026, 12, 6, 0, 0, 0, 0, time.UTC)
	f := &File{Version: fileVersion, Tools: map[string]*Pin{}}
	for _, t := range benchTools(n) {
		h := Hash(t)
		f.Tools[t.ID()] = &Pin{Pinned: h, Current: h, FirstSeen: now, Seen: now, Hints: noHints, Texts: &Texts{Description: t.Description, InputSchema: string(t.InputSchema)}}
	}
	path := filepath.Join(b.TempDir(), "pins.json")
	w, err := os.Create(path)
	if err != nil {
		b.Fatal(err)
	}
	defer w.Close()
	if err := f.writeTo(w); err != nil {
		b.Fatal(err)
	}
	return path
}

// BenchmarkHeldIDs is the held tools' IDs as each GET /status and console
// poll asks them of the snapshot, at 50,000 pins: found again at each
// call, they were most of a report's CPU.
func BenchmarkHeldIDs(b *testing.B) {
	g := New(benchPins(b, 50_000), &Options{Approved: []string{"s7__*"}})
	defer g.Close()
	s := g.Snapshot()
	b.ReportAllocs()
	for b.Loop() {
		if ids := s.HeldIDs(); len(ids) != 0 {
			b.Fatal(ids)
		}
	}
}

// BenchmarkHeldList is `toolgate tools quarantined` on the pins of 50,000
// tools (their texts kept, none held): the file read whole (Read), as it
// was, or one pin at a time (EachPin). live-MiB is what the heap holds
// once it is read.
func BenchmarkHeldList(b *testing.B) {
	path := benchPins(b, 50_000)
	live := func(b *testing.B, read func() any) {
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		var kept any
		for b.Loop() {
			kept = read()
		}
		runtime.GC()
		runtime.ReadMemStats(&after)
		runtime.KeepAlive(kept)
		b.ReportMetric(float64(int64(after.HeapAlloc)-int64(before.HeapAlloc))/(1<<20), "live-MiB")
	}
	b.Run("read-whole", func(b *testing.B) {
		b.ReportAllocs()
		live(b, func() any {
			f, err := Read(path)
			if err != nil || len(f.Tools) != 50_000 {
				b.Fatal(err)
			}
			return f
		})
	})
	b.Run("each-pin", func(b *testing.B) {
		b.ReportAllocs()
		live(b, func() any {
			var held []*Pin
			n, err := EachPin(path, func(_ string, p *Pin) {
				if p.Hold != nil {
					held = append(held, p)
				}
			})
			if err != nil || n != 50_000 {
				b.Fatal(n, err)
			}
			return held
		})
	})
}
