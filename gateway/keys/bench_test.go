package keys

import (
	"fmt"
	"path/filepath"
	"testing"
	"time"
)

// BenchmarkVerify is the key check of one HTTP request, with n keys in the
// data folder's file: a stat of the file (unchanged, so not read again),
// one SHA-256 and n constant-time compares.
func BenchmarkVerify(b *testing.B) {
	for _, n := range []int{1, 100} {
		b.Run(fmt.Sprintf("keys=%d", n), func(b *testing.B) {
			path := filepath.Join(b.TempDir(), "keys.jsonl")
			var last string
			for i := range n {
				secret, e, err := New(Spec{Name: fmt.Sprintf("k%d", i)}, time.Now())
				if err != nil {
					b.Fatal(err)
				}
				if err := Add(path, e); err != nil {
					b.Fatal(err)
				}
				last = secret
			}
			s := Open(path, nil)
			b.ReportAllocs()
			b.ResetTimer()
			for b.Loop() {
				if _, err := s.Verify(last); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
