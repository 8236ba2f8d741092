package search_test

import (
	"context"
	"hash/fnv"
	"math"
	"strings"
	"unicode"
)

// hashEmbedder is a deterministic stand-in for MiniLM in unit tests: a
// hashed bag of words projected to 384 dimensions and L2-normalised. It is
// never used for the golden figures.
type hashEmbedder struct{}

func (hashEmbedder) ModelID() string { return "test/hash-bow" }
func (hashEmbedder) Dim() int        { return 384 }

func (h *hashEmbedder) Embed(_ context.Context, texts []string) ([][]float32, error) {
	out := make([][]float32, len(texts))
	for i, t := range texts {
		v := make([]float32, 384)
		for _, w := range strings.FieldsFunc(strings.ToLower(t), func(r rune) bool { return !unicode.IsLetter(r) && !unicode.IsDigit(r) }) {
			f := fnv.New32a()
			f.Write([]byte(w))
			s := f.Sum32()
			sign := float32(1)
			if s&1 == 1 {
				sign = -1
			}
			v[(s>>1)%384] += sign
		}
		var n float64
		for _, x := range v {
			n += float64(x * x)
		}
		if n > 0 {
			for j := range v {
				v[j] /= float32(math.Sqrt(n))
			}
		}
		out[i] = v
	}
	return out, nil
}
