package catalog

import (
	"fmt"
	"log/slog"
	"path/filepath"
	"testing"

	"github.com/toolgate/toolgate/internal/testenv"
)

// BenchmarkFlawLog10k is serve's cost of FlawLog at a start: the first
// listing of 10,000 tools (the azure-mcp and metatool definitions over
// and over, renamed) checks every schema; a listing again, with one tool
// changed, checks that one.
//
//	TOOLGATE_BENCH_DIR=/work/shared/bench go test -run X -bench FlawLog10k ./index/catalog/
func BenchmarkFlawLog10k(b *testing.B) {
	var base []Tool
	for _, split := range []string{"azure-mcp", "metatool"} {
		ts, err := ReadFile(filepath.Join(testenv.BenchSplit(b, split), "tools.jsonl"))
		if err != nil {
			b.Fatal(err)
		}
		base = append(base, ts...)
	}
	tools := make([]Tool, 10000)
	for i := range tools {
		tools[i] = base[i%len(base)]
		tools[i].Server, tools[i].Name = "s", fmt.Sprintf("%s_%d", tools[i].Name, i)
	}
	log := slog.New(slog.DiscardHandler)
	b.Run("first", func(b *testing.B) {
		for b.Loop() {
			var f FlawLog
			f.Listed(log, "s", tools)
		}
	})
	b.Run("again", func(b *testing.B) {
		var f FlawLog
		f.Listed(log, "s", tools)
		for b.Loop() {
			f.Listed(log, "s", tools)
		}
	})
}
