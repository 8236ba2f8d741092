package quarantine

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/toolgate/toolgate/index/catalog"
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

// ParseFile reads with segmentio's decoder (fast at start); it must read a
// pins file, texts and holds included, as encoding/json does.
func TestParseFileIsUnmarshal(t *testing.T) {
	g, path, _ := newGuard(t, nil)
	tool := catalog.Tool{Server: "s", Name: "t", Title: "T\u00e9", Description: "Line one.\nLine \"two\" <b>&</b> \u2028 \U000E0041",
		InputSchema: []byte(`{"type":"object","properties":{"p":{"type":"number","default":1.50,"description":"P\\u0000"}}}`), Annotations: []byte(`{"readOnlyHint":true}`)}
	g.Observe([]catalog.Tool{tool, poisoned})
	tool.Description += " Changed."
	g.Observe([]catalog.Tool{tool})
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	got, err := ParseFile(b)
	if err != nil {
		t.Fatal(err)
	}
	want := &File{}
	if err := json.Unmarshal(b, want); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want, got); diff != "" || got.Tools[tool.ID()].Texts == nil || got.Tools[tool.ID()].Hold == nil {
		t.Errorf("ParseFile differs from json.Unmarshal (-want +got):\n%s", diff)
	}
}
