package catalog

import (
	"encoding/json"
	"slices"
	"testing"
)

func TestSplitID(t *testing.T) {
	for _, tc := range []struct {
		id, server, tool string
		ok               bool
	}{
		{"memory__create_entities", "memory", "create_entities", true},
		{"weird__do__it", "weird", "do__it", true},
		{"a__b", "a", "b", true},
		{"my-server__tool_x", "my-server", "tool_x", true},
		{"nosep", "", "", false},
		{"__tool", "", "", false},
		{"server__", "", "", false},
		{"", "", "", false},
	} {
		s, tl, err := SplitID(tc.id)
		if (err == nil) != tc.ok || s != tc.server || tl != tc.tool {
			t.Errorf("SplitID(%q) = %q, %q, %v; want %q, %q, ok=%v", tc.id, s, tl, err, tc.server, tc.tool, tc.ok)
		}
	}
}

// A tool is read-only only when it declares readOnlyHint: true: one
// without annotations, or without the hint, is not (MCP's default).
func TestToolReadOnly(t *testing.T) {
	for _, tt := range []struct {
		annotations string
		want        bool
	}{
		{"", false},
		{`null`, false},
		{`{}`, false},
		{`{"title": "x"}`, false},
		{`{"readOnlyHint": false}`, false},
		{`{"readOnlyHint": "true"}`, false},
		{`[true]`, false},
		{`{"readOnlyHint": true}`, true},
		{`{"readOnlyHint": true, "destructiveHint": true}`, true},
	} {
		tool := Tool{Server: "s", Name: "t", Annotations: json.RawMessage(tt.annotations)}
		if got := tool.ReadOnly(); got != tt.want {
			t.Errorf("ReadOnly with annotations %q = %v, want %v", tt.annotations, got, tt.want)
		}
	}
}

// TestFingerprintOutputSchema: a tool's output schema is part of the
// catalog's fingerprint (the snapshot serves it), but a catalog without
// output schemas keeps the fingerprint toolgate gave it before they were
// kept (the value is what the main branch of 2026-12-07 computed), so its
// index on disk stays up to date after an upgrade; and an output schema
// cannot read as the next tool's fields.
func TestFingerprintOutputSchema(t *testing.T) {
	tools := []Tool{
		{Server: "memory", Name: "read_graph", Title: "Read graph", Description: "Read the entire knowledge graph.", InputSchema: json.RawMessage(`{"type":"object"}`), Annotations: json.RawMessage(`{"readOnlyHint":true}`)},
		{Server: "fs", Name: "read_file", Description: "Read a file."},
	}
	const before = "1371859a17b12d92887be0fa88bb77c77a69cd0ffafdbc02d24778eecccb5516"
	if got := Fingerprint(tools); got != before {
		t.Errorf("fingerprint of a catalog without output schemas = %s, want the one of before %s", got, before)
	}
	with := slices.Clone(tools)
	with[1].OutputSchema = json.RawMessage(`{"type":"object","properties":{"content":{"type":"string"}}}`)
	other := slices.Clone(with)
	other[1].OutputSchema = json.RawMessage(`{"type":"object","properties":{"text":{"type":"string"}}}`)
	spaced := slices.Clone(with)
	spaced[1].OutputSchema = append(json.RawMessage(" "), with[1].OutputSchema...)
	null := slices.Clone(tools)
	null[1].OutputSchema = json.RawMessage(`null`)
	fw := Fingerprint(with)
	switch {
	case fw == before:
		t.Error("an output schema added does not change the fingerprint")
	case Fingerprint(other) == fw:
		t.Error("an output schema changed does not change the fingerprint")
	case Fingerprint(spaced) != fw:
		t.Error("space around an output schema changes the fingerprint")
	case Fingerprint(null) != before:
		t.Error("an output schema of null is not one left out")
	}
}

// TestMeantNearestFirst: a name written as none of the names is read
// nearest first: in another case only (strings.EqualFold: straße for
// Straße), then caselessly (STRASSE, ｇｅｔ), then with "_" for "-". With
// Straße and STRASSE side by side, straße means Straße: caselessly it
// reads as both, and the call was refused as ambiguous.
func TestMeantNearestFirst(t *testing.T) {
	names := []string{"fs__Straße", "fs__STRASSE", "fs__read-file", "fs__read_file", "fs__Read_File"}
	for _, tc := range []struct {
		name string
		want []string
	}{
		{"fs__straße", []string{"fs__Straße"}},
		{"FS__STRASSE", []string{"fs__STRASSE"}},
		{"fs__strasse", []string{"fs__STRASSE"}},
		{"fs__STRAẞE", []string{"fs__Straße"}},                                         // ẞ folds simply to ß
		{"ｆｓ__ｓｔｒａｓｓｅ", []string{"fs__Straße", "fs__STRASSE"}},                         // only caselessly: both
		{"FS__READ_FILE", []string{"fs__read-file", "fs__read_file", "fs__Read_File"}}, // two in another case: all it may be
		{"FS__READ-FILE", []string{"fs__read-file"}},
	} {
		if got := Meant(tc.name, names); !slices.Equal(got, tc.want) {
			t.Errorf("Meant(%q) = %q, want %q", tc.name, got, tc.want)
		}
	}
}
