package catalog

import (
	"bytes"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"golang.org/x/text/encoding"
	"golang.org/x/text/encoding/unicode"

	"github.com/toolgate/toolgate/internal/testenv"
)

func TestReadJSONL(t *testing.T) {
	in := `{"server": "azure", "name": "acr_registry_list", "description": "List registries.", "input_schema": {"type": "object"}}

{"server": "my server", "name": "PDF&URLTool", "description": "odd characters", "input_schema": null, "extra": 1}
{"server": "s", "name": "a__b", "description": "tool names may hold the separator"}
{"server": "s", "name": "ro", "annotations": {"readOnlyHint": true}}
{"server": "s", "name": "nul", "annotations": null}
{"server": "s", "name": "mcp", "inputSchema": {"type": "object"}}
{"server": "s", "name": "both", "input_schema": {"type": "object"}, "inputSchema": {"type": "object"}}
{"server": "s", "name": "out", "output_schema": {"type": "object", "required": ["n"]}}
{"server": "s", "name": "outmcp", "outputSchema": {"type": "object"}}
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
		// MCP's spelling of the key (a tools/list result's tools, given a
		// server each) is read too: it was skipped as unknown.
		{Server: "s", Name: "mcp", InputSchema: json.RawMessage(`{"type": "object"}`)},
		{Server: "s", Name: "both", InputSchema: json.RawMessage(`{"type": "object"}`)},
		// An output schema is kept (it was skipped as an unknown key),
		// under either spelling.
		{Server: "s", Name: "out", OutputSchema: json.RawMessage(`{"type": "object", "required": ["n"]}`)},
		{Server: "s", Name: "outmcp", OutputSchema: json.RawMessage(`{"type": "object"}`)},
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
		{"ID in name", `{"name":"fs__read_file","description":"d"}`, `tools.jsonl:1: missing "server": "name" holds a server__tool ID, "fs__read_file": split it into "server" and "name" at the first "__", e.g. jq -c '(.name | index("__")) as $i | .server = .name[:$i] | .name = .name[$i+2:]' tools.jsonl > tools-split.jsonl`},
		{"ID in id", `{"id":"fs__read_file","description":"d"}`, `tools.jsonl:1: missing "server" and "name": "id" holds a server__tool ID, "fs__read_file": split it into "server" and "name" at the first "__", e.g. jq -c '(.id | index("__")) as $i | .server = .id[:$i] | .name = .id[$i+2:]' tools.jsonl > tools-split.jsonl`},
		{"schema encoded twice", `{"server":"a","name":"b","input_schema":"{\"type\": \"object\"}"}`, `tools.jsonl:1: "input_schema" of "a__b" is a JSON string that holds the schema (encoded twice): write the object itself, e.g. jq -c '.input_schema |= (if type == "string" then fromjson else . end)' tools.jsonl > tools-fixed.jsonl`},
		{"no tools", "\n  \n", `tools.jsonl holds no tools: each line is one tool`},
		{"no server", "\n\n" + `{"name":"b"}`, `tools.jsonl:3: missing "server": each line names the tool's server (an MCP tools/list result's tools name none): add it to every line, e.g. jq -c --arg server SERVER '{server: $server} + .' tools.jsonl > tools-with-server.jsonl`},
		{"nothing", `{"description":"b"}`, `tools.jsonl:1: missing "server"`},
		{"no name", `{"server":"a"}`, `tools.jsonl:1: missing "name"`},
		{"separator in server", `{"server":"a__b","name":"c"}`, `tools.jsonl:1: server "a__b" contains "__"`},
		{"annotations not an object", `{"server":"a","name":"b","annotations":true}`, `tools.jsonl:1: "annotations" of "a__b" must be an object`},
		{"duplicate", `{"server":"a","name":"b"}` + "\n" + `{"server":"a","name":"b"}`, `tools.jsonl:2: duplicate tool "a__b" (first on line 1)`},
		{"two schemas", `{"server":"a","name":"b","input_schema":{"type":"object"},"inputSchema":{}}`, `tools.jsonl:1: "a__b" has both "input_schema" and "inputSchema", which differ: keep one`},
		{"mcp schema not an object", `{"server":"a","name":"b","inputSchema":[]}`, `tools.jsonl:1: "inputSchema" of "a__b" must be a JSON Schema object`},
		{"two output schemas", `{"server":"a","name":"b","output_schema":{"type":"object"},"outputSchema":{}}`, `tools.jsonl:1: "a__b" has both "output_schema" and "outputSchema", which differ: keep one`},
		{"output schema not an object", `{"server":"a","name":"b","outputSchema":true}`, `tools.jsonl:1: "outputSchema" of "a__b" must be a JSON Schema object`},
		{"output schema encoded twice", `{"server":"a","name":"b","output_schema":"{\"type\": \"object\"}"}`, `tools.jsonl:1: "output_schema" of "a__b" is a JSON string that holds the schema (encoded twice): write the object itself, e.g. jq -c '.output_schema |= (if type == "string" then fromjson else . end)' tools.jsonl > tools-fixed.jsonl`},
		// What iconv -t UTF-16LE writes: it read "invalid character '\x00'".
		{"UTF-16 without a mark", "{\x00\"\x00s\x00\"\x00:\x00\"\x00a\x00\"\x00}\x00\n\x00", `tools.jsonl:1: the file looks like UTF-16 without a byte-order mark: save it as UTF-8 (iconv -f UTF-16LE -t UTF-8`},
		{"line too long", `{"server":"a","name":"b"}` + "\n" + `{"server":"a","name":"c","description":"` + strings.Repeat("x", 1024) + `"}`, `tools.jsonl:2: the line is longer than `},
	}
	defer func(n int) { maxLine = n }(maxLine)
	maxLine = 1000
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := ReadJSONL(strings.NewReader(tt.in), "tools.jsonl")
			if err == nil || !strings.HasPrefix(err.Error(), tt.want) {
				t.Errorf("error = %v, want prefix %q", err, tt.want)
			}
		})
	}
}

// A file that is JSON but not JSON lines, in the forms people hand the
// loader in their place, is said so with the jq command that makes the
// lines; it read `t.json:1: missing "server"` or `not valid JSON at
// column 1 (unexpected end of JSON input)`.
func TestReadFileNotLines(t *testing.T) {
	dir := t.TempDir()
	list := `{"tools": [{"name": "read_file", "description": "Read a file", "inputSchema": {"type": "object"}}]}`
	tests := []struct{ name, file, in, want string }{
		{"tools/list result", "list.json", list, `list.json is an MCP tools/list result ({"tools": [...]}), not JSON lines of tools: write each tool on a line of its own with its server's name, e.g. jq -c --arg server SERVER '.tools[] | {server: $server} + .' DIR/list.json > DIR/tools.jsonl`},
		{"JSON-RPC response", "rpc.json", `{"jsonrpc": "2.0", "id": 1, "result": ` + list + `}`, `jq -c --arg server SERVER '.result.tools[] | {server: $server} + .' DIR/rpc.json > DIR/tools.jsonl`},
		{"pretty tools/list", "pretty.json", strings.ReplaceAll(list, ", ", ",\n  "), `pretty.json is an MCP tools/list result`},
		{"array", "tools.jsonl", `[{"server": "a", "name": "b"},` + "\n" + `{"server": "a", "name": "c"}]`, `tools.jsonl is one JSON array, not JSON lines (one tool a line): write each element on a line of its own, e.g. jq -c '.[]' DIR/tools.jsonl > DIR/tools-lines.jsonl`},
		{"pretty lines", "t.jsonl", "{\n  \"server\": \"a\",\n  \"name\": \"b\"\n}\n{\"server\": \"a\", \"name\": \"c\"}\n", `t.jsonl holds JSON written over several lines, not JSON lines (one tool a line): write each object on one line, e.g. jq -c . DIR/t.jsonl > DIR/tools.jsonl`},
		// JSON lines with a mistake keep the line's own message.
		{"lines", "bad.jsonl", `{"server": "a", "name": "b"}` + "\n" + `{"name": "c"}`, `bad.jsonl:2: missing "server"`},
		{"one line", "one.jsonl", `{"name": "c"}`, `one.jsonl:1: missing "server"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(dir, tt.file)
			if err := os.WriteFile(path, []byte(tt.in), 0o644); err != nil {
				t.Fatal(err)
			}
			_, err := ReadFile(path)
			if want := strings.ReplaceAll(tt.want, "DIR", dir); err == nil || !strings.Contains(err.Error(), want) {
				t.Errorf("error = %v, want %q", err, want)
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

// BenchmarkEachLineLong reads one 16 MiB line (a tool whose description
// or schema is huge): the scanner's buffer grows to hold it, and each read
// into it is searched for the line's end.
func BenchmarkEachLineLong(b *testing.B) {
	line := append(bytes.Repeat([]byte("x"), 16<<20), '\n')
	b.SetBytes(int64(len(line)))
	for b.Loop() {
		if err := EachLine(bytes.NewReader(line), "long", func(int, []byte) error { return nil }); err != nil {
			b.Fatal(err)
		}
	}
}

// A description over MaxDescription is cut, at a character's start, as
// the gateway cuts a backend's, with a warning.
func TestReviewCutsDescriptions(t *testing.T) {
	long := strings.Repeat("x", MaxDescription-1) + "é and more"
	tools := []Tool{{Server: "a", Name: "long", Description: long}, {Server: "a", Name: "short", Description: "fine"}}
	var w strings.Builder
	if n := Review(&w, "t.jsonl", tools); n != 1 {
		t.Errorf("Review = %d, want 1", n)
	}
	if want := strings.Repeat("x", MaxDescription-1); tools[0].Description != want || tools[1].Description != "fine" {
		t.Errorf("descriptions of %d and %q bytes, want %d and fine", len(tools[0].Description), tools[1].Description, len(want))
	}
	if want := `toolgate: warning: t.jsonl: the description of 1 tool is over 16 KiB, cut there as the gateway cuts a backend's: "a__long" (16394 bytes)` + "\n"; w.String() != want {
		t.Errorf("warning = %q, want %q", w.String(), want)
	}
}

// An input schema the gateway cannot validate with is taken, as a
// backend's is, with a warning naming the tools and why in JSON's words:
// a "properties" written as a list was silently no argument.
func TestReviewSchemas(t *testing.T) {
	tools, err := ReadJSONL(strings.NewReader(`{"server":"a","name":"ok","description":"d","input_schema":{"type":"object","properties":{"x":{"type":"string"}}}}
{"server":"a","name":"none","description":"d"}
{"server":"a","name":"list","description":"d","input_schema":{"type":"object","properties":[{"x":"string"}]}}
{"server":"a","name":"req","description":"d","inputSchema":{"type":"object","required":"x"}}
`), "t.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	var w strings.Builder
	if n := Review(&w, "t.jsonl", tools); n != 2 {
		t.Errorf("Review = %d, want 2", n)
	}
	want := `toolgate: warning: t.jsonl: the input schema of 2 tools is not a JSON Schema the gateway can read: "a__list" ("properties" must be an object, not a JSON array), "a__req" ("required" must be a list of strings, not a JSON string): the gateway lets their calls through unchecked, and leaves the arguments it cannot read out of the index` + "\n"
	if w.String() != want {
		t.Errorf("warning =\n%s\nwant\n%s", w.String(), want)
	}
	w.Reset()
	if n := Review(&w, "t.jsonl", tools[:2]); n != 0 || w.Len() != 0 {
		t.Errorf("good schemas: %d, %q; want no warning", n, w.String())
	}
}

// A schema that the JSON Schema library reads but that no call can pass
// (a misspelt type, a top-level type other than object, a required
// argument "additionalProperties": false forbids) is a flaw: validating
// with it refused every call with words a model cannot act on ("must be a
// objetc"), so the gateway lets such a tool's calls through, as it does
// those of a schema it cannot read, and says which keyword and the fix.
// The other tools of the server are checked as before.
func TestReviewSchemasNoCallCanPass(t *testing.T) {
	for _, tc := range []struct{ schema, why string }{
		{`{"type":"string"}`, `the top-level "type" is "string", but a tool's arguments are always a JSON object, so no call could pass: it must be "object"`},
		{`{"type":["string","null"]}`, `the top-level "type" is ["string","null"], but a tool's arguments are always a JSON object, so no call could pass: it must be "object"`},
		{`{"type":"objetc","properties":{"title":{"type":"string"}}}`, `"type" is "objetc", not a JSON Schema type (array, boolean, integer, null, number, object, string)`},
		{`{"type":"object","properties":{"n":{"type":"integer "}}}`, `properties.n: "type" is "integer ", not a JSON Schema type (array, boolean, integer, null, number, object, string)`},
		{`{"type":"object","$defs":{"a":{"type":["strin","null"]}},"properties":{"x":{"$ref":"#/$defs/a"}}}`, `$defs.a: "type" is "strin", not a JSON Schema type (array, boolean, integer, null, number, object, string)`},
		{`{"type":"object","properties":{"list":{"type":"array","items":{"type":"Integer"}}}}`, `properties.list.items: "type" is "Integer", not a JSON Schema type (array, boolean, integer, null, number, object, string)`},
		{`{"type":"object","properties":{"path":{"type":"string"}},"required":["path","ghost"],"additionalProperties":false}`, `"required" names "ghost", which is not in "properties", and "additionalProperties" is false, so no call could pass: add "ghost" to "properties" or take it out of "required"`},
	} {
		tools := []Tool{{Server: "a", Name: "bad", Description: "d", InputSchema: json.RawMessage(tc.schema)},
			{Server: "a", Name: "ok", Description: "d", InputSchema: json.RawMessage(`{"type":"object","properties":{"x":{"type":"string"}}}`)}}
		var w strings.Builder
		if n := Review(&w, "t.jsonl", tools); n != 1 {
			t.Errorf("%s: Review = %d, want 1", tc.schema, n)
		}
		want := `toolgate: warning: t.jsonl: the input schema of 1 tool is not a JSON Schema the gateway can read: "a__bad" (` + tc.why + `): the gateway lets its calls through unchecked, and leaves the arguments it cannot read out of the index` + "\n"
		if w.String() != want {
			t.Errorf("%s: warning =\n%s\nwant\n%s", tc.schema, w.String(), want)
		}
	}
	// What any call can pass stays a schema the gateway validates with.
	for _, ok := range []string{
		`{"type":["object","null"],"properties":{"w":{"type":"integer"}}}`,
		`{"properties":{"to":{"type":"string"}},"required":["to"]}`,
		`{"oneOf":[{"type":"object","required":["a"]},{"type":"object","required":["b"]}]}`,
		`{"type":"object","properties":{"path":{"type":"string"}},"required":["path","ghost"]}`,
		`{"type":"object","patternProperties":{"^g":{}},"required":["ghost"],"additionalProperties":false}`,
		`{"type":"object","$defs":{"n":{"type":"object","properties":{"kids":{"type":"array","items":{"$ref":"#/$defs/n"}}}}},"properties":{"root":{"$ref":"#/$defs/n"}}}`,
	} {
		if _, err := ResolveSchema(json.RawMessage(ok)); err != nil {
			t.Errorf("%s: %v, want a schema the gateway validates with", ok, err)
		}
	}
}

// An input schema over MaxSchemaShown is warned of by name and size, by
// Review and once per definition by FlawLog: a search answer gives its
// arguments in its place, and its server's author should know why.
func TestReviewHugeSchemas(t *testing.T) {
	big := `{"type":"object","properties":{"code":{"type":"string","enum":["` + strings.Repeat("x", 40<<10) + `"]}}}`
	tools := []Tool{{Server: "a", Name: "huge", Description: "d", InputSchema: json.RawMessage(big)},
		{Server: "a", Name: "ok", Description: "d", InputSchema: json.RawMessage(`{"type":"object"}`)}}
	var w strings.Builder
	if n := Review(&w, "t.jsonl", tools); n != 1 {
		t.Errorf("Review = %d, want 1", n)
	}
	want := `toolgate: warning: t.jsonl: the input schema of 1 tool is over 32 KB: "a__huge" (40 KB): a compact search_tools answer gives its arguments in its place (the whole schema only in a "detail": "full" answer of that tool alone), as an answer that carried it would fill the model's context; ask its server's author for a smaller one (an enum of thousands of values is better a string the tool checks)` + "\n"
	if w.String() != want {
		t.Errorf("warning =\n%s\nwant\n%s", w.String(), want)
	}
	var logs testenv.LogBuffer
	var f FlawLog
	f.Listed(logs.Logger(), "a", tools)
	f.Listed(logs.Logger(), "a", tools)
	msg := `msg="the input schema of a tool is over 32 KB: a compact search_tools answer gives its arguments in its place (the whole schema only in a \"detail\": \"full\" answer of that tool alone), as an answer that carried it would fill the model's context; ask its server's author for a smaller one (an enum of thousands of values is better a string the tool checks)" tool=a__huge kb=40`
	if strings.Count(logs.String(), msg) != 1 {
		t.Errorf("serve's log: want once\n%s\ngot\n%s", msg, logs.String())
	}
}

// A tool name outside what MCP recommends (1 to 128 of A-Z a-z 0-9 _ - .)
// is taken, with a warning naming the tools: a server's author learns it
// before a client that connects to the server directly refuses it.
func TestReviewNames(t *testing.T) {
	tools := []Tool{{Server: "a", Name: "refund payment!", Description: "d"}, {Server: "a", Name: "ok_name-1.2", Description: "d"}, {Server: "a", Name: strings.Repeat("n", 129), Description: "d"}}
	var w strings.Builder
	if n := Review(&w, "t.jsonl", tools); n != 2 {
		t.Errorf("Review = %d, want 2", n)
	}
	want := `toolgate: warning: t.jsonl: the name of 2 tools is not one MCP recommends (1 to 128 characters of A-Z a-z 0-9 _ - .): "a__refund payment!", "a__` + strings.Repeat("n", 129) + `" (129 characters): the gateway serves them as they are (a model calls them through execute_tool, by the name search_tools gives), but a client that connects to the server directly may refuse them` + "\n"
	if w.String() != want {
		t.Errorf("warning =\n%s\nwant\n%s", w.String(), want)
	}
}

// A serving gateway logs the flaws of a definition (FlawLog) with the
// words of Review's warnings, once per definition: a server listed again
// because another of its tools changed says nothing more; a flawed schema
// edited (still flawed) is said again, and so is one mended then broken.
func TestFlawLog(t *testing.T) {
	var logs testenv.LogBuffer
	log := logs.Logger()
	var f FlawLog
	bad := Tool{Server: "a", Name: "remind", InputSchema: json.RawMessage(`{"type":"object","properties":[{"to":"string"}]}`)}
	badName := Tool{Server: "a", Name: "send reminder"}
	ok := Tool{Server: "a", Name: "ok", Description: "v1", InputSchema: json.RawMessage(`{"type":"object"}`)}
	count := func(s string) int { return strings.Count(logs.String(), s) }
	schemaMsg := `msg="the input schema of a tool is not a JSON Schema the gateway can read: the gateway lets its calls through unchecked, and leaves the arguments it cannot read out of the index" tool=a__remind why="\"properties\" must be an object, not a JSON array"`
	nameMsg := `msg="the name of a tool is not one MCP recommends (1 to 128 characters of A-Z a-z 0-9 _ - .): the gateway serves it as it is (a model calls it through execute_tool, by the name search_tools gives), but a client that connects to the server directly may refuse it" tool="a__send reminder"`

	f.Listed(log, "a", []Tool{ok, bad, badName})
	if count(schemaMsg) != 1 || count(nameMsg) != 1 {
		t.Fatalf("first listing: want each flaw once:\n%s", logs.String())
	}
	ok.Description = "v2" // another tool edited: listed again
	f.Listed(log, "a", []Tool{ok, bad, badName})
	f.Listed(log, "b", []Tool{ok}) // another server's listing
	if count(schemaMsg) != 1 || count(nameMsg) != 1 {
		t.Errorf("listed again unchanged: want no second warning:\n%s", logs.String())
	}
	bad.InputSchema = json.RawMessage(`{"type":"object","properties":[{"to":"string"},{"at":"string"}]}`)
	f.Listed(log, "a", []Tool{ok, bad, badName})
	if count(schemaMsg) != 2 {
		t.Errorf("a flawed schema edited: want it said again:\n%s", logs.String())
	}
	mended := bad
	mended.InputSchema = json.RawMessage(`{"type":"object"}`)
	f.Listed(log, "a", []Tool{ok, mended, badName})
	f.Listed(log, "a", []Tool{ok, bad, badName})
	if count(schemaMsg) != 3 || count(nameMsg) != 1 {
		t.Errorf("mended, then broken again: want it said again:\n%s", logs.String())
	}
}

// untimed is a debug-level text logger into b without the time of each
// line, so that two runs' logs compare equal (they differed by a
// millisecond once on CI).
func untimed(b *testenv.LogBuffer) *slog.Logger {
	return slog.New(slog.NewTextHandler(b, &slog.HandlerOptions{Level: slog.LevelDebug, ReplaceAttr: func(groups []string, a slog.Attr) slog.Attr {
		if a.Key == slog.TimeKey && len(groups) == 0 {
			return slog.Attr{}
		}
		return a
	}}))
}

// A start seeded with the verdicts the last run saved (Checks) resolves
// no schema of a listing like the last one, yet logs each flaw once, with
// the words a check gives; a definition changed since is checked anew,
// and verdicts of another checker (an upgrade) are not taken.
func TestFlawLogSeeded(t *testing.T) {
	bad := Tool{Server: "a", Name: "remind", InputSchema: json.RawMessage(`{"type":"object","properties":[{"to":"string"}]}`)}
	badName := Tool{Server: "a", Name: "send reminder", InputSchema: json.RawMessage(`{"type":"object"}`)}
	ok := Tool{Server: "a", Name: "ok", InputSchema: json.RawMessage(`{"type":"object","properties":{"x":{"type":"string"}}}`)}
	tools := []Tool{ok, bad, badName}
	var last FlawLog // the last run
	var lastLogs testenv.LogBuffer
	last.Listed(untimed(&lastLogs), "a", tools)
	saved := last.Checks(tools)
	if len(saved.Clean) != 2 || len(saved.Flawed) != 1 || saved.Checker != Checker() || saved.Format != ChecksFormat {
		t.Fatalf("Checks = %+v, want 2 clean and 1 flawed schema by this checker", saved)
	}

	var logs testenv.LogBuffer
	var f FlawLog
	f.Seed(saved)
	f.Listed(untimed(&logs), "a", tools)
	if f.resolved != 0 {
		t.Errorf("a listing like the last run's resolved %d schemas, want 0", f.resolved)
	}
	if logs.String() != lastLogs.String() {
		t.Errorf("seeded, the warnings are\n%s\nwant those of a check:\n%s", logs.String(), lastLogs.String())
	}
	if c := f.Checks(tools); !c.Same(saved) || f.resolved != 0 {
		t.Errorf("Checks of the same tools = %+v (%d resolved), want those saved, none resolved", c, f.resolved)
	}

	ok.InputSchema = json.RawMessage(`{"type":"object","properties":{"x":{"type":"integer"}}}`)
	f.Listed(untimed(&logs), "a", []Tool{ok, bad, badName})
	if f.resolved != 1 {
		t.Errorf("one definition changed: %d schemas resolved, want 1", f.resolved)
	}

	var upgraded FlawLog
	foreign := saved
	foreign.Checker = "0 jsonschema-go@v0.0.1 go1.20"
	upgraded.Seed(foreign)
	upgraded.Listed(slog.New(slog.DiscardHandler), "a", tools)
	if upgraded.resolved != 3 {
		t.Errorf("verdicts of another checker: %d schemas resolved, want all 3", upgraded.resolved)
	}
}

// Flawed lists the tools whose input schema the gateway cannot read (what
// GET /status says), by ID, with the verdicts the log knows: seeded or
// logged before, a schema is not resolved again. A bad name is not a
// schema's flaw.
func TestFlawLogFlawed(t *testing.T) {
	typo := Tool{Server: "acme", Name: "create_invoice", InputSchema: json.RawMessage(`{"type":"objetc"}`)}
	list := Tool{Server: "acme", Name: "void_invoice", InputSchema: json.RawMessage(`{"type":"object","properties":[{"id":"string"}]}`)}
	badName := Tool{Server: "acme", Name: "send reminder", InputSchema: json.RawMessage(`{"type":"object"}`)}
	ok := Tool{Server: "acme", Name: "list_invoices", InputSchema: json.RawMessage(`{"type":"object","properties":{"customer":{"type":"string"}}}`)}
	none := Tool{Server: "acme", Name: "ping"}
	tools := []Tool{list, ok, typo, badName, none}
	var f FlawLog
	f.Listed(slog.New(slog.DiscardHandler), "acme", tools)
	resolved := f.resolved
	got := f.Flawed(tools)
	want := []ToolFlaw{
		{Tool: "acme__create_invoice", Flaw: schemaFlaw(typo.InputSchema)},
		{Tool: "acme__void_invoice", Flaw: `"properties" must be an object, not a JSON array`},
	}
	if !reflect.DeepEqual(got, want) || !strings.Contains(got[0].Flaw, "objetc") {
		t.Errorf("Flawed = %+v, want %+v", got, want)
	}
	if f.resolved != resolved {
		t.Errorf("Flawed resolved %d schemas again, want none", f.resolved-resolved)
	}
	var seeded FlawLog
	seeded.Seed(f.Checks(tools))
	if got := seeded.Flawed(tools); !reflect.DeepEqual(got, want) || seeded.resolved != 0 {
		t.Errorf("seeded: Flawed = %+v (%d resolved), want %+v, none resolved", got, seeded.resolved, want)
	}
	if got := f.Flawed([]Tool{ok, none}); got != nil {
		t.Errorf("Flawed of clean tools = %+v, want none", got)
	}
}

// A tool without a description (missing, empty or blank) is taken, with a
// warning naming the tools: a catalog joined from two sources that lost
// them gave figures of names alone, silently.
func TestReviewNoDescription(t *testing.T) {
	var tools []Tool
	for i := range 7 {
		tools = append(tools, Tool{Server: "a", Name: fmt.Sprintf("t%d", i), Description: []string{"", " \n"}[i%2]})
	}
	tools = append(tools, Tool{Server: "a", Name: "ok", Description: "Does a thing."})
	var w strings.Builder
	if n := Review(&w, "t.jsonl", tools); n != 7 {
		t.Errorf("Review = %d, want 7", n)
	}
	want := `toolgate: warning: t.jsonl: 7 tools have no "description": "a__t0", "a__t1", "a__t2", "a__t3", "a__t4", and 2 more: they are ranked by their names (and schemas) alone; give each its description if the source had one` + "\n"
	if w.String() != want {
		t.Errorf("warning =\n%s\nwant\n%s", w.String(), want)
	}
	w.Reset()
	Review(&w, "t.jsonl", tools[6:])
	if want := `toolgate: warning: t.jsonl: 1 tool has no "description": "a__t6": they`; !strings.HasPrefix(w.String(), want) {
		t.Errorf("warning = %q, want prefix %q", w.String(), want)
	}
}

// Settled gives what Flawed and Checks give of one catalog (serve takes
// both after each index), hashing each schema once: the two hashed each
// twice, 20,000 SHA-256s a re-index at 10,000 tools.
func TestFlawLogSettled(t *testing.T) {
	tools := []Tool{
		{Server: "acme", Name: "create_invoice", InputSchema: json.RawMessage(`{"type":"objetc"}`)},
		{Server: "acme", Name: "void_invoice", InputSchema: json.RawMessage(`{"type":"object","properties":[{"id":"string"}]}`)},
		{Server: "acme", Name: "list", InputSchema: json.RawMessage(`{"type":"object"}`)},
		{Server: "acme", Name: "again", InputSchema: json.RawMessage(`{"type":"object"}`)},
		{Server: "acme", Name: "none"},
	}
	var f FlawLog
	f.Listed(slog.New(slog.DiscardHandler), "acme", tools)
	wantFlawed, wantChecks := f.Flawed(tools), f.Checks(tools)
	f.hashed = 0
	flawed, checks := f.Settled(tools)
	if !reflect.DeepEqual(flawed, wantFlawed) || !checks.Same(wantChecks) || len(flawed) != 2 || len(checks.Clean) != 1 {
		t.Errorf("Settled = %+v, %+v; want %+v, %+v", flawed, checks, wantFlawed, wantChecks)
	}
	if f.hashed != 4 {
		t.Errorf("Settled hashed %d schemas, want each of the 4 once", f.hashed)
	}
}
