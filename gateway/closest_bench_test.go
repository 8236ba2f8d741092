package gateway

import (
	"fmt"
	"strings"
	"testing"
)

// BenchmarkClosest is what an unknown name costs execute_tool's answer:
// the edit distance to each of 10,000 tool IDs, for a name of 40 runes and
// one of maxMatchRunes (repair.go quotes the figures).
//
//	go test ./gateway -run '^$' -bench Closest -count 5
func BenchmarkClosest(b *testing.B) {
	ids := make([]string, 10_000)
	for i := range ids {
		ids[i] = fmt.Sprintf("server%03d__tool_number_%05d", i%100, i)
	}
	for _, n := range []int{40, maxMatchRunes} {
		name := ("filesystem__read_" + strings.Repeat("x", n))[:n]
		b.Run(fmt.Sprintf("runes=%d", n), func(b *testing.B) {
			for b.Loop() {
				Closest(name, ids, 3)
			}
		})
	}
}
