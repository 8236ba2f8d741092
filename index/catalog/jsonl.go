package catalog

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"

	"golang.org/x/text/encoding"
	"golang.org/x/text/encoding/unicode"
	"golang.org/x/text/transform"

	"github.com/toolgate/toolgate/internal/jsonwords"
)

// jsonlTool is one line of a tools.jsonl file. Pointers tell a missing key
// from an empty one.
type jsonlTool struct {
	Server      *string         `json:"server"`
	Name        *string         `json:"name"`
	Title       string          `json:"title"`
	Description string          `json:"description"`
	InputSchema json.RawMessage `json:"input_schema"`
	Annotations json.RawMessage `json:"annotations"`
}

// ReadFile reads a tools.jsonl file (see ReadJSONL); messages start with
// the path.
func ReadFile(path string) ([]Tool, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("read tools: %w", err)
	}
	defer f.Close()
	return ReadJSONL(f, path)
}

// ReadJSONL reads tools in the bench format, one JSON object per line:
//
//	{"server": str, "name": str, "title"?: str, "description"?: str, "input_schema"?: object|null, "annotations"?: object|null}
//
// Blank lines and unknown keys are skipped. Names may hold any characters
// (the public benchmarks hold a space in a server key and "&" in a tool
// name), except that a server name may not contain "__", the ID separator:
// its tools' IDs would split at the wrong place. A duplicate ID is an error.
// Every error reads "NAME:LINE: what is wrong", name being the file's; a
// file without a tool is an error too.
func ReadJSONL(r io.Reader, name string) ([]Tool, error) {
	var tools []Tool
	seen := map[string]int{}
	err := EachLine(r, name, func(line int, b []byte) error {
		var jt jsonlTool
		if err := DecodeLine(b, &jt); err != nil {
			return err
		}
		if jt.Server == nil || *jt.Server == "" {
			return errors.New(`missing "server"`)
		}
		if jt.Name == nil || *jt.Name == "" {
			return errors.New(`missing "name"`)
		}
		if strings.Contains(*jt.Server, Sep) {
			return fmt.Errorf("server %q contains %q, the ID separator: rename the server", *jt.Server, Sep)
		}
		t := Tool{Server: *jt.Server, Name: *jt.Name, Title: jt.Title, Description: jt.Description}
		if s := bytes.TrimSpace(jt.InputSchema); len(s) > 0 && !bytes.Equal(s, []byte("null")) {
			if s[0] != '{' {
				return fmt.Errorf(`"input_schema" of %q must be a JSON Schema object like {"type": "object", "properties": {...}}, or null`, t.ID())
			}
			t.InputSchema = slices.Clone(s)
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

// EachLine calls f with each non-blank line of a JSON-lines stream and its
// 1-based number; an error from f or from reading is returned as
// "name:line: err". Lines may be up to 64 MiB long. A stream that starts
// with a byte-order mark is read as it says: UTF-8 with one (Notepad), or
// UTF-16 (Windows PowerShell's `>` and Out-File); the mark used to be the
// first line's first "character", not valid JSON.
func EachLine(r io.Reader, name string, f func(line int, b []byte) error) error {
	r = transform.NewReader(r, unicode.BOMOverride(encoding.Nop.NewDecoder()))
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64*1024), 64*1024*1024)
	line := 0
	for sc.Scan() {
		line++
		b := bytes.TrimSpace(sc.Bytes())
		if len(b) == 0 {
			continue
		}
		if err := f(line, b); err != nil {
			return fmt.Errorf("%s:%d: %w", name, line, err)
		}
	}
	if err := sc.Err(); err != nil {
		return fmt.Errorf("%s:%d: %w", name, line+1, err)
	}
	return nil
}

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
