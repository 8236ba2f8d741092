package catalog

import (
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/google/jsonschema-go/jsonschema"
)

// TestCutBytes: a cut keeps a character whole or leaves it out, never a
// part of it (a cut that fell just after a two-byte character left its
// first byte, not valid UTF-8), and never goes over n bytes.
func TestCutBytes(t *testing.T) {
	for _, tc := range []struct {
		s    string
		n    int
		want string
	}{
		{"abc", 5, "abc"},
		{"abc", 2, "ab"},
		{"éa", 2, "é"},
		{"aé", 2, "a"},
		{"a€b", 3, "a"},
		{"a€b", 4, "a€"},
		{"€", 0, ""},
	} {
		got := CutBytes(tc.s, tc.n)
		if got != tc.want || !utf8.ValidString(got) || len(got) > tc.n && len(tc.s) > tc.n {
			t.Errorf("CutBytes(%q, %d) = %q, want %q", tc.s, tc.n, got, tc.want)
		}
	}
}

// The walk of passable names the fields that hold schemas (reflection made
// the check of 10,000 schemas 60 % slower): each field of the library's
// Schema that holds schemas must be among them, or a misspelt type inside
// a keyword the library adds would be missed.
func TestSchemaWalkReadsEveryField(t *testing.T) {
	one, list, byName := reflect.TypeFor[*jsonschema.Schema](), reflect.TypeFor[[]*jsonschema.Schema](), reflect.TypeFor[map[string]*jsonschema.Schema]()
	bogus := &jsonschema.Schema{Type: "bogus"}
	n := 0
	for _, sf := range reflect.VisibleFields(reflect.TypeFor[jsonschema.Schema]()) {
		var s jsonschema.Schema
		f := reflect.ValueOf(&s).Elem().FieldByIndex(sf.Index)
		switch sf.Type {
		case one:
			f.Set(reflect.ValueOf(bogus))
		case list:
			f.Set(reflect.ValueOf([]*jsonschema.Schema{{}, bogus}))
		case byName:
			f.Set(reflect.ValueOf(map[string]*jsonschema.Schema{"a": {}, "b": bogus}))
		default:
			continue
		}
		n++
		if w := (schemaWalk{}); !w.walk(&s) {
			t.Errorf("Schema.%s: a misspelt type in it is not found", sf.Name)
		}
	}
	if n < 23 {
		t.Errorf("%d fields of Schema hold schemas, want at least the 23 of jsonschema-go v0.4.3", n)
	}
}

// TestShownFlaws: the tools served whose input schema is over
// MaxSchemaShown (with its size) and those whose name MCP does not
// recommend (with what is wrong: its length, or the characters it may not
// have, each once and quoted, a control character escaped), by ID; a
// schema that is long only for its spaces is not over the cap.
func TestShownFlaws(t *testing.T) {
	enum := make([]string, 5000)
	for i := range enum {
		enum[i] = fmt.Sprintf("c%05d", i)
	}
	huge, err := json.Marshal(map[string]any{"type": "object", "properties": map[string]any{"code": map[string]any{"type": "string", "enum": enum}}})
	if err != nil {
		t.Fatal(err)
	}
	spaced := json.RawMessage(`{"type": "object"` + strings.Repeat(" ", MaxSchemaShown) + `}`)
	tools := []Tool{
		{Server: "z", Name: "pick", InputSchema: huge},
		{Server: "a", Name: "send payment!", InputSchema: spaced},
		{Server: "a", Name: strings.Repeat("n", 129)},
		{Server: "a", Name: "x\x1b]0;t\a y"},
		{Server: "a", Name: "fine_name-1.2"},
	}
	gotHuge, gotNames := ShownFlaws(tools)
	wantHuge := []ToolFlaw{{Tool: "z__pick", Flaw: fmt.Sprintf("%d KB of compact JSON", len(huge)>>10)}}
	wantNames := []ToolFlaw{
		{Tool: "a__" + strings.Repeat("n", 129), Flaw: "129 characters, not 1 to 128"},
		{Tool: "a__send payment!", Flaw: `' ', '!' are not among A-Z a-z 0-9 _ - .`},
		{Tool: "a__x\x1b]0;t\a y", Flaw: `'\x1b', ']', ';', '\a', ' ' are not among A-Z a-z 0-9 _ - .`},
	}
	if !slices.Equal(gotHuge, wantHuge) || !slices.Equal(gotNames, wantNames) {
		t.Errorf("ShownFlaws:\n%q\n%q\nwant\n%q\n%q", gotHuge, gotNames, wantHuge, wantNames)
	}
}
