package quarantine

import (
	"bytes"
	"encoding/json"
	"fmt"
	"testing"
	"time"
)

// The pins file is written one pin at a time, byte for byte what
// json.Marshal makes of the whole (sorted IDs, escaped characters), so a
// file written before reads and compares the same.
func TestFileWriteToIsMarshal(t *testing.T) {
	now := time.Date(2026, 12, 1, 18, 0, 0, 0, time.UTC)
	f := &File{Version: fileVersion, Tools: map[string]*Pin{
		"b__x":       {Pinned: "aa", Current: "aa", FirstSeen: now, Seen: now},
		"a__<y>&z":   {Pinned: "bb", Current: "cc", FirstSeen: now, Seen: now, Hold: &Hold{Since: now, Changed: true, Findings: []Finding{{}}}},
		"a__é\u2028": {Pinned: "dd", Current: "dd", FirstSeen: now, Approved: true, ApprovedAt: now, Seen: now},
	}}
	for i := range 50 {
		f.Tools[fmt.Sprintf("s%d__t", i)] = &Pin{Pinned: "ee", Current: "ee", FirstSeen: now, Seen: now}
	}
	for _, tc := range []*File{f, {Version: fileVersion, Tools: map[string]*Pin{}}, {Version: fileVersion}} {
		want, err := json.Marshal(tc)
		if err != nil {
			t.Fatal(err)
		}
		want = append(want, '\n')
		var got bytes.Buffer
		if err := tc.writeTo(&got); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got.Bytes(), want) {
			t.Fatalf("writeTo:\n%s\njson.Marshal:\n%s", got.Bytes(), want)
		}
	}
}
