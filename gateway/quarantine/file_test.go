package quarantine

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
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

// EachPin reads a pins file one pin at a time (`tools quarantined` keeps
// the held ones only: it held the whole 40 MB file and every pin of it,
// 166 MiB at 50,000 tools); it reads what ParseFile reads, and refuses
// what ParseFile refuses, with its words and the file's path.
func TestEachPinIsParseFile(t *testing.T) {
	g, path, _ := newGuard(t, nil)
	tool := catalog.Tool{Server: "s", Name: "t", Description: "Line one.", Annotations: []byte(`{"readOnlyHint":true}`)}
	g.Observe([]catalog.Tool{tool, poisoned, {Server: "s", Name: "u"}})
	tool.Description += " Changed."
	g.Observe([]catalog.Tool{tool})
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	want, err := ParseFile(b)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]*Pin{}
	n, err := EachPin(path, func(id string, p *Pin) { got[id] = p })
	if err != nil || n != 3 {
		t.Fatalf("EachPin = %d, %v; want 3 pins", n, err)
	}
	if diff := cmp.Diff(want.Tools, got); diff != "" || got[tool.ID()].Hold == nil || got[tool.ID()].Texts == nil {
		t.Errorf("EachPin differs from ParseFile (-want +got):\n%s", diff)
	}

	dir := t.TempDir()
	for _, tc := range []struct{ name, content, err string }{
		{"missing", "", ""},
		{"empty", "", ""},
		{"blank", " \n\t", ""},
		{"no tools", `{"version":1}`, ""},
		{"null tools", `{"version":1,"tools":null}`, ""},
		{"tools first", `{"tools":{"a__b":{"pinned":"x","current":"x"}},"Version":1,"more":[1,{}]}`, ""},
		{"newer", `{"version":2,"tools":{}}`, "newer toolgate"},
		{"no version", `{"tools":{}}`, ""},
		{"older", `{"version":0,"tools":{}}`, "pins file version 0, this toolgate reads version 1"},
		{"not json", "pins!", "not a pins file (invalid character 'p'"},
		{"array", "[]", "not a pins file (want an object"},
		{"cut", `{"version":1,"tools":{"a__b":{"pinned":"x"`, "not a pins file ("},
		{"a pin of another shape", `{"version":1,"tools":{"a__b":7}}`, "not a pins file ("},
		{"trailing", `{"version":1,"tools":{}} {}`, "after the object"},
	} {
		p := filepath.Join(dir, tc.name+".json")
		if tc.name != "missing" {
			if err := os.WriteFile(p, []byte(tc.content), 0o600); err != nil {
				t.Fatal(err)
			}
		}
		_, perr := ParseFile([]byte(tc.content))
		_, err := EachPin(p, func(string, *Pin) {})
		switch {
		case tc.err == "" && (err != nil || perr != nil):
			t.Errorf("%s: EachPin: %v, ParseFile: %v; want no error", tc.name, err, perr)
		case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err) || perr == nil):
			t.Errorf("%s: EachPin: %v, want %q; ParseFile: %v", tc.name, err, tc.err, perr)
		case tc.name == "newer" && !strings.Contains(err.Error(), p):
			t.Errorf("%s: %v does not name the file", tc.name, err)
		}
	}
}
