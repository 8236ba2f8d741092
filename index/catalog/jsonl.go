package catalog

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"golang.org/x/text/encoding"
	"golang.org/x/text/encoding/unicode"
	"golang.org/x/text/transform"

	"github.com/toolgate/toolgate/internal/jsonwords"
	"github.com/toolgate/toolgate/internal/shellword"
)

// jsonlTool is one line of a tools.jsonl file. Pointers tell a missing key
// from an empty one.
type jsonlTool struct {
	Server      *string         `json:"server"`
	Name        *string         `json:"name"`
	Title       string          `json:"title"`
	Description string          `json:"description"`
	InputSchema json.RawMessage `json:"input_schema"`
	// InputSchemaMCP is MCP's spelling of the key (a tools/list result's
	// tools, given a server each, are lines of this format): it was an
	// unknown key, skipped, and the tool indexed without its schema.
	InputSchemaMCP json.RawMessage `json:"inputSchema"`
	// OutputSchema and OutputSchemaMCP are the tool's output schema, as
	// input_schema and inputSchema: a tools file made from a tools/list
	// result keeps it, which search_tools' full answers and toolgate
	// search --json then show.
	OutputSchema    json.RawMessage `json:"output_schema"`
	OutputSchemaMCP json.RawMessage `json:"outputSchema"`
	Annotations     json.RawMessage `json:"annotations"`
	// Language is the tool's language (see Tool.Language; "en" or
	// absent for English).
	Language string `json:"language"`
	// ID is a benchmark's own key for the tool: when it holds a
	// server__tool ID and "server" is missing, the message says how to
	// split it.
	ID json.RawMessage `json:"id"`
}

// ReadFile reads a tools.jsonl file (see ReadJSONL); messages start with
// the path.
func ReadFile(path string) ([]Tool, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("read tools: %w", err)
	}
	defer f.Close()
	tools, err := ReadJSONL(f, path)
	if err != nil {
		return nil, NotLines(path, "tools", err)
	}
	return tools, nil
}

// maxDocument bounds the file NotLines reads whole.
const maxDocument = 256 << 20

// NotLines is err, the failure to read the file at path as JSON lines of
// what ("tools" or "queries"), unless the file is JSON all the same in a
// form people hand a JSON-lines loader: an MCP tools/list result
// ({"tools": [...]}, bare or as a JSON-RPC response's "result"), one JSON
// array of the objects, or objects written over several lines (jq's or an
// editor's pretty print). Then it is an error naming the form and the jq
// command that makes the lines; it read `FILE:1: missing "server"` or
// `not valid JSON at column 1 (unexpected end of JSON input)`.
func NotLines(path, what string, err error) error {
	// A line too long to read is not read whole again: one of 70 MB took
	// 8 s and 450 MB more to be refused.
	if le := (*lineError)(nil); errors.As(err, &le) && le.tooLong {
		return err
	}
	f, oerr := os.Open(path)
	if oerr != nil {
		return err
	}
	defer f.Close()
	if st, serr := f.Stat(); serr != nil || st.Size() > maxDocument {
		return err
	}
	dec := json.NewDecoder(unmarked(f))
	var vals []json.RawMessage
	for {
		var v json.RawMessage
		if derr := dec.Decode(&v); derr == io.EOF {
			break
		} else if derr != nil {
			return err
		}
		vals = append(vals, v)
	}
	if len(vals) == 0 {
		return err
	}
	out := filepath.Join(filepath.Dir(path), what+".jsonl")
	if filepath.Clean(out) == filepath.Clean(path) {
		out = filepath.Join(filepath.Dir(path), what+"-lines.jsonl")
	}
	var doc struct {
		Tools  json.RawMessage `json:"tools"`
		Result struct {
			Tools json.RawMessage `json:"tools"`
		} `json:"result"`
	}
	one := map[string]string{"tools": "tool", "queries": "query"}[what]
	fix := func(jq ...string) string {
		return shellword.Join(append(append([]string{"jq", "-c"}, jq...), path)...) + " > " + shellword.Join(out)
	}
	if what == "tools" && len(vals) == 1 && json.Unmarshal(vals[0], &doc) == nil {
		if list := ".tools[]"; isArray(doc.Tools) || isArray(doc.Result.Tools) {
			if isArray(doc.Result.Tools) {
				list = ".result.tools[]"
			}
			return fmt.Errorf(`%s is an MCP tools/list result ({"tools": [...]}), not JSON lines of tools: write each tool on a line of its own with its server's name, e.g. %s`,
				path, fix("--arg", "server", "SERVER", list+" | {server: $server} + ."))
		}
	}
	switch {
	case len(vals) == 1 && isArray(vals[0]):
		return fmt.Errorf("%s is one JSON array, not JSON lines (one %s a line): write each element on a line of its own, e.g. %s", path, one, fix(".[]"))
	case slices.ContainsFunc(vals, func(v json.RawMessage) bool { return bytes.ContainsRune(v, '\n') }):
		return fmt.Errorf("%s holds JSON written over several lines, not JSON lines (one %s a line): write each object on one line, e.g. %s", path, one, fix("."))
	}
	return err
}

func isArray(v json.RawMessage) bool {
	v = bytes.TrimSpace(v)
	return len(v) > 0 && v[0] == '['
}

// ReadJSONL reads tools in the bench format, one JSON object per line:
//
//	{"server": str, "name": str, "title"?: str, "description"?: str, "input_schema"?: object|null, "annotations"?: object|null, "output_schema"?: object|null}
//
// Blank lines and unknown keys are skipped; "inputSchema" and
// "outputSchema", MCP's names for the keys, are read as "input_schema"
// and "output_schema". Names may hold any characters
// (the public benchmarks hold a space in a server key and "&" in a tool
// name), except that a server name may not contain "__", the ID separator:
// its tools' IDs would split at the wrong place. A duplicate ID is an error.
// Every error reads "NAME:LINE: what is wrong", name being the file's; a
// file without a tool is an error too.
func ReadJSONL(r io.Reader, name string) ([]Tool, error) {
	var tools []Tool
	seen := map[string]int{}
	type firstLanguage struct {
		lang string
		line int
	}
	languages := map[string]firstLanguage{} // a server's, by its first line
	err := EachLine(r, name, func(line int, b []byte) error {
		var jt jsonlTool
		if err := DecodeLine(b, &jt); err != nil {
			return err
		}
		if jt.Server == nil || *jt.Server == "" {
			// A server__tool ID in "name" or "id" (other benchmarks' form):
			// split at the first "__", as a server may not hold one.
			var id string
			_ = json.Unmarshal(jt.ID, &id)
			switch {
			case jt.Name != nil && strings.Contains(*jt.Name, Sep):
				return fmt.Errorf(`missing "server": "name" holds a server__tool ID, %q: split it into "server" and "name" at the first %q, e.g. %s > tools-split.jsonl`,
					*jt.Name, Sep, shellword.Join("jq", "-c", `(.name | index("__")) as $i | .server = .name[:$i] | .name = .name[$i+2:]`, name))
			case (jt.Name == nil || *jt.Name == "") && strings.Contains(id, Sep):
				return fmt.Errorf(`missing "server" and "name": "id" holds a server__tool ID, %q: split it into "server" and "name" at the first %q, e.g. %s > tools-split.jsonl`,
					id, Sep, shellword.Join("jq", "-c", `(.id | index("__")) as $i | .server = .id[:$i] | .name = .id[$i+2:]`, name))
			}
			if jt.Name != nil && *jt.Name != "" {
				// A tool as tools/list lists it (jq -c '.tools[]'): it
				// names no server, which the file must.
				return fmt.Errorf(`missing "server": each line names the tool's server (an MCP tools/list result's tools name none): add it to every line, e.g. %s > tools-with-server.jsonl`,
					shellword.Join("jq", "-c", "--arg", "server", "SERVER", "{server: $server} + .", name))
			}
			return errors.New(`missing "server"`)
		}
		if jt.Name == nil || *jt.Name == "" {
			return errors.New(`missing "name"`)
		}
		if strings.Contains(*jt.Server, Sep) {
			return fmt.Errorf("server %q contains %q, the ID separator: rename the server", *jt.Server, Sep)
		}
		t := Tool{Server: *jt.Server, Name: *jt.Name, Title: jt.Title, Description: jt.Description}
		lang, err := CanonicalLanguage(jt.Language)
		if err != nil {
			return fmt.Errorf(`"language" of %q: %w`, t.ID(), err)
		}
		t.Language = lang
		// Said here, with the lines: the index refused it later naming
		// the server alone.
		if first, ok := languages[t.Server]; !ok {
			languages[t.Server] = firstLanguage{lang, line}
		} else if first.lang != lang {
			return fmt.Errorf(`%q is in %s, but line %d has server %q's tools in %s: a server's tools are in one language: give every line of server %q the same "language"`,
				t.ID(), LanguageName(lang), first.line, t.Server, LanguageName(first.lang), t.Server)
		}
		if t.InputSchema, err = fileSchema(t.ID(), name, "input_schema", jt.InputSchema, "inputSchema", jt.InputSchemaMCP); err != nil {
			return err
		}
		if t.OutputSchema, err = fileSchema(t.ID(), name, "output_schema", jt.OutputSchema, "outputSchema", jt.OutputSchemaMCP); err != nil {
			return err
		}
		if a := bytes.TrimSpace(jt.Annotations); len(a) > 0 && !bytes.Equal(a, []byte("null")) {
			if a[0] != '{' {
				return fmt.Errorf(`"annotations" of %q must be an object like {"readOnlyHint": true}`, t.ID())
			}
			t.Annotations = slices.Clone(a)
		}
		if prev, ok := seen[t.ID()]; ok {
			return fmt.Errorf("duplicate tool %q (first on line %d)", t.ID(), prev)
		}
		seen[t.ID()] = line
		tools = append(tools, t)
		return nil
	})
	if err == nil && len(tools) == 0 {
		err = fmt.Errorf(`%s holds no tools: each line is one tool, {"server": "...", "name": "...", "description": "...", "input_schema": {...}}`, name)
	}
	return tools, err
}

// fileSchema is a tool's schema from a line of the tools file name: the
// value of key, or of mcpKey (MCP's spelling), which may not differ; nil
// for none or null. One that is not an object is an error naming the key,
// with the jq command that fixes a schema encoded twice as a string.
func fileSchema(id, name, key string, v json.RawMessage, mcpKey string, mcp json.RawMessage) (json.RawMessage, error) {
	schema := bytes.TrimSpace(v)
	if m := bytes.TrimSpace(mcp); len(m) > 0 {
		if len(schema) > 0 && !bytes.Equal(schema, m) {
			return nil, fmt.Errorf(`%q has both %q and %q, which differ: keep one`, id, key, mcpKey)
		}
		schema, key = m, mcpKey
	}
	if len(schema) == 0 || bytes.Equal(schema, []byte("null")) {
		return nil, nil
	}
	if schema[0] != '{' {
		// A schema written as a string of its JSON (encoded twice,
		// as a CSV export or a Python str() leaves it).
		var str string
		if json.Unmarshal(schema, &str) == nil && json.Valid([]byte(str)) && strings.HasPrefix(strings.TrimSpace(str), "{") {
			return nil, fmt.Errorf(`%q of %q is a JSON string that holds the schema (encoded twice): write the object itself, e.g. %s > tools-fixed.jsonl`,
				key, id, shellword.Join("jq", "-c", "."+key+" |= (if type == \"string\" then fromjson else . end)", name))
		}
		return nil, fmt.Errorf(`%q of %q must be a JSON Schema object like {"type": "object", "properties": {...}}, or null`, key, id)
	}
	return slices.Clone(schema), nil
}

// EachLine calls f with each non-blank line of a JSON-lines stream and its
// 1-based number; an error from f or from reading is returned as
// "name:line: err". Lines may be up to 64 MiB long. A stream that starts
// with a byte-order mark is read as it says: UTF-8 with one (Notepad), or
// UTF-16 (Windows PowerShell's `>` and Out-File); the mark used to be the
// first line's first "character", not valid JSON.
func EachLine(r io.Reader, name string, f func(line int, b []byte) error) error {
	sc := bufio.NewScanner(unmarked(r))
	sc.Buffer(make([]byte, 0, min(64*1024, maxLine)), maxLine)
	line := 0
	for sc.Scan() {
		line++
		b := bytes.TrimSpace(sc.Bytes())
		if len(b) == 0 {
			continue
		}
		if err := f(line, b); err != nil {
			return &lineError{name: name, line: line, err: err}
		}
	}
	if err := sc.Err(); errors.Is(err, bufio.ErrTooLong) {
		return &lineError{name: name, line: line + 1, tooLong: true, err: fmt.Errorf("the line is longer than %d MiB: each line holds one JSON object, of at most that size", maxLine>>20)}
	} else if err != nil {
		return &lineError{name: name, line: line + 1, err: err}
	}
	return nil
}

// lineError is an error of EachLine, "name:line: err"; tooLong says the
// line was too long to read, which no JSON document in its place explains
// (NotLines).
type lineError struct {
	name    string
	line    int
	tooLong bool
	err     error
}

func (e *lineError) Error() string { return fmt.Sprintf("%s:%d: %v", e.name, e.line, e.err) }
func (e *lineError) Unwrap() error { return e.err }

// maxLine bounds a line of EachLine (a variable for its test).
var maxLine = 64 << 20

// unmarked is r without its byte-order mark, decoded from UTF-16 when the
// mark says so. A stream without one is r itself, read in the scanner's
// large reads: through the decoder every read was 4 KiB, and the scanner
// searches its whole buffer for the line's end after each, which took
// 6.1 s for a line of 16 MiB (BenchmarkEachLineLong), 100 s for one of
// 64 MiB.
func unmarked(r io.Reader) io.Reader {
	br := bufio.NewReader(r)
	switch mark, _ := br.Peek(3); {
	case bytes.HasPrefix(mark, []byte{0xEF, 0xBB, 0xBF}):
		br.Discard(3) //nolint:errcheck // peeked
		return br
	case bytes.HasPrefix(mark, []byte{0xFF, 0xFE}), bytes.HasPrefix(mark, []byte{0xFE, 0xFF}):
		return transform.NewReader(br, unicode.BOMOverride(encoding.Nop.NewDecoder()))
	case len(mark) >= 2 && (mark[0] == 0) != (mark[1] == 0):
		// UTF-16 without the mark that says its byte order (what iconv -t
		// UTF-16LE writes): a
		// NUL beside the first character, which no JSON text starts with.
		// It read "invalid character '\x00'", which names no fix.
		order := "UTF-16LE"
		if mark[0] == 0 {
			order = "UTF-16BE"
		}
		return errReader{fmt.Errorf("the file looks like UTF-16 without a byte-order mark: save it as UTF-8 (iconv -f %s -t UTF-8 FILE > FILE.utf8; in PowerShell, Out-File -Encoding utf8)", order)}
	}
	return br
}

// errReader is a reader whose every read fails with err.
type errReader struct{ err error }

func (r errReader) Read([]byte) (int, error) { return 0, r.err }

// DecodeLine decodes one line of a JSON-lines file into v (a struct),
// saying what is wrong in the file's terms rather than Go's: where the
// JSON breaks, a key of the wrong type by its name and what it must be,
// or a line that is not an object.
func DecodeLine(b []byte, v any) error {
	err := json.Unmarshal(b, v)
	var se *json.SyntaxError
	var te *json.UnmarshalTypeError
	switch {
	case errors.As(err, &se):
		return fmt.Errorf("not valid JSON at column %d (%v): each line holds one JSON object", se.Offset, se)
	case errors.As(err, &te) && te.Field == "":
		return fmt.Errorf("the line is a JSON %s: each line must be one JSON object", te.Value)
	}
	return jsonwords.Explain(err, v)
}
