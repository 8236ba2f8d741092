package index

import (
	"encoding/binary"
	"errors"
	"strings"
	"testing"
)

// A snapshot of another toolgate version is told from a damaged one: at the
// upgrade to format 7 every first start met format 6's "TGC2", which the
// gateway called "could not be read" and `toolgate doctor` "damaged: bad
// header".
func TestCatalogSnapshotOfAnotherVersion(t *testing.T) {
	// One tool as the toolgate of formats 4 to 6 wrote it: six fields.
	older := func(magic string) []byte {
		b := append([]byte(magic), 1)
		for _, f := range []string{"a", "apple", "", "An apple.", `{"type":"object"}`, ""} {
			b = binary.AppendUvarint(b, uint64(len(f)))
			b = append(b, f...)
		}
		return b
	}
	for _, tc := range []struct {
		name string
		b    []byte
		want string // "" for a damaged snapshot
	}{
		{"format 6", older("TGC2"), `"TGC2" is an older toolgate's (index formats 4 to 6; this one writes "TGC3", format 7)`},
		{"format 3", older("TGC1"), `"TGC1" is an older toolgate's (index formats 2 to 3;`},
		{"newer", older("TGC4"), `"TGC4" is a newer toolgate's (this one reads "TGC3", format 7)`},
		{"not a snapshot", older("XYZ1"), ""},
		{"short", []byte("TG"), ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := decodeCatalog(tc.b)
			if tc.want == "" {
				if !errors.Is(err, errBadCatalog) || errors.Is(err, ErrSnapshotFormat) {
					t.Fatalf("decodeCatalog = %v, want a damaged snapshot", err)
				}
				return
			}
			if !errors.Is(err, ErrSnapshotFormat) || errors.Is(err, errBadCatalog) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("decodeCatalog = %v, want ErrSnapshotFormat saying %s", err, tc.want)
			}
		})
	}
	if tools, err := decodeCatalog(encodeCatalog(nil)); err != nil || len(tools) != 0 {
		t.Fatalf("this version's empty snapshot: %v, %v", tools, err)
	}
}
