package catalog

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"golang.org/x/text/encoding"
	"golang.org/x/text/encoding/unicode"
)

func TestReadJSONL(t *testing.T) {
	in := `{"server": "azure", "name": "acr_registry_list", "description": "List registries.", "input_schema": {"type": "object"}}

{"server": "my server", "name": "PDF&URLTool", "description": "odd characters", "input_schema": null, "extra": 1}
{"server": "s", "name": "a__b", "description": "tool names may hold the separator"}
{"server": "s", "name": "ro", "annotations": {"readOnlyHint": true}}
{"server": "s", "name": "nul", "annotations": null}
`
	got, err := ReadJSONL(strings.NewReader(in), "tools.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	want := []Tool{
		{Server: "azure", Name: "acr_registry_list", Description: "List registries.", InputSchema: json.RawMessage(`{"type": "object"}`)},
		{Server: "my server", Name: "PDF&URLTool", Description: "odd characters"},
		{Server: "s", Name: "a__b", Description: "tool names may hold the separator"},
		{Server: "s", Name: "ro", Annotations: json.RawMessage(`{"readOnlyHint": true}`)},
		{Server: "s", Name: "nul"},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("ReadJSONL (-want +got):\n%s", diff)
	}
	if got[1].ID() != "my server__PDF&URLTool" {
		t.Errorf("ID = %q", got[1].ID())
	}
	// Written with a byte-order mark (Notepad's UTF-8, PowerShell's UTF-16),
	// the same file reads the same.
	for enc, e := range map[string]encoding.Encoding{
		"UTF-8 with a mark": unicode.UTF8BOM,
		"UTF-16LE":          unicode.UTF16(unicode.LittleEndian, unicode.UseBOM),
		"UTF-16BE":          unicode.UTF16(unicode.BigEndian, unicode.UseBOM),
	} {
		b, err := e.NewEncoder().Bytes([]byte(in))
		if err != nil {
			t.Fatal(err)
		}
		marked, err := ReadJSONL(bytes.NewReader(b), "tools.jsonl")
		if err != nil {
			t.Errorf("%s: %v", enc, err)
		} else if diff := cmp.Diff(want, marked); diff != "" {
			t.Errorf("%s (-want +got):\n%s", enc, diff)
		}
	}
}

func TestReadJSONLErrors(t *testing.T) {
	tests := []struct{ name, in, want string }{
		{"bad json", `{"server":"a","name":"b"}` + "\n" + `{"server":`, "tools.jsonl:2: not valid JSON at column 10 (unexpected end of JSON input): each line holds one JSON object"},
		{"unquoted key", `{"server": "a", name: "x"}`, "tools.jsonl:1: not valid JSON at column 17 (invalid character 'n' looking for beginning of object key string)"},
		{"not an object", `["a","b"]`, "tools.jsonl:1: the line is a JSON array: each line must be one JSON object"},
		{"server not a string", `{"server":["a"],"name":"b"}`, `tools.jsonl:1: "server" must be a string, not a JSON array`},
		{"schema not an object", `{"server":"a","name":"b","input_schema":"x"}`, `tools.jsonl:1: "input_schema" of "a__b" must be a JSON Schema object`},
		{"no tools", "\n  \n", `tools.jsonl holds no tools: each line is one tool`},
		{"no server", "\n\n" + `{"name":"b"}`, `tools.jsonl:3: missing "server"`},
		{"no name", `{"server":"a"}`, `tools.jsonl:1: missing "name"`},
		{"separator in server", `{"server":"a__b","name":"c"}`, `tools.jsonl:1: server "a__b" contains "__"`},
		{"annotations not an object", `{"server":"a","name":"b","annotations":true}`, `tools.jsonl:1: "annotations" of "a__b" must be an object`},
		{"duplicate", `{"server":"a","name":"b"}` + "\n" + `{"server":"a","name":"b"}`, `tools.jsonl:2: duplicate tool "a__b" (first on line 1)`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := ReadJSONL(strings.NewReader(tt.in), "tools.jsonl")
			if err == nil || !strings.HasPrefix(err.Error(), tt.want) {
				t.Errorf("error = %v, want prefix %q", err, tt.want)
			}
		})
	}
}

// FuzzReadJSONL: never panics; accepted tools have a server without the
// separator and a name.
func FuzzReadJSONL(f *testing.F) {
	f.Add([]byte(`{"server":"a b","name":"x&y","description":"d","input_schema":null}` + "\n"))
	f.Add([]byte("{}\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		tools, err := ReadJSONL(bytes.NewReader(b), "fuzz")
		if err != nil {
			return
		}
		for _, tl := range tools {
			if tl.Server == "" || tl.Name == "" || strings.Contains(tl.Server, Sep) {
				t.Fatalf("accepted %+v", tl)
			}
		}
	})
}
