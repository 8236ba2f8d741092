package catalog

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"

	"github.com/toolgate/toolgate/internal/testenv"
)

// BenchmarkFlawLog10k is serve's cost of FlawLog at a start: the first
// listing of 10,000 tools (the azure-mcp and metatool definitions over
// and over, renamed, each schema made its own with a "$comment", as a
// real catalog's are) checks every schema; a listing again checks none;
// a first listing seeded with the verdicts the last run saved (Seed, a
// warm start) resolves none either; saving them (Checks) resolves none,
// and nor does listing the flawed tools (Flawed), nor serve's settle
// after each index (Settled: both in one pass).
//
//	TOOLGATE_BENCH_DIR=/work/shared/bench go test -run X -bench FlawLog10k ./index/catalog/
//	TOOLGATE_BENCH_DIR=/work/shared/bench go test -run X -bench 'FlawLog10k/settle' -benchmem -count 10 ./index/catalog/
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
		if sc := tools[i].InputSchema; len(sc) > 2 && sc[0] == '{' {
			sep := ","
			if strings.TrimSpace(string(sc[1:])) == "}" {
				sep = ""
			}
			tools[i].InputSchema = json.RawMessage(fmt.Sprintf(`{"$comment":"%d"%s%s`, i, sep, sc[1:]))
		}
	}
	log := slog.New(slog.DiscardHandler)
	b.Run("first", func(b *testing.B) {
		for b.Loop() {
			var f FlawLog
			f.Listed(log, "s", tools)
		}
	})
	var last FlawLog
	saved := last.Checks(tools)
	b.Run("seeded", func(b *testing.B) {
		for b.Loop() {
			var f FlawLog
			f.Seed(saved)
			f.Listed(log, "s", tools)
			if f.resolved != 0 {
				b.Fatalf("%d schemas resolved", f.resolved)
			}
		}
	})
	b.Run("save", func(b *testing.B) {
		for b.Loop() {
			last.Checks(tools)
		}
	})
	// What serve does after each save: the tools of the catalog served
	// whose schema it cannot read (GET /status's schemaFlaws).
	b.Run("flawed", func(b *testing.B) {
		for b.Loop() {
			last.Flawed(tools)
		}
	})
	// serve's settle after each index: the flawed tools for GET /status
	// and the verdicts to save, of one catalog, in one pass (Settled);
	// "settle-two-passes" is how serve took them before (Flawed, then
	// Checks), each schema hashed twice.
	b.Run("settle", func(b *testing.B) {
		for b.Loop() {
			last.Settled(tools)
		}
	})
	b.Run("settle-two-passes", func(b *testing.B) {
		for b.Loop() {
			last.Flawed(tools)
			last.Checks(tools)
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
