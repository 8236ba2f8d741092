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
// Every error reads "NAME:LINE: what is wrong", name being the file's.
func ReadJSONL(r io.Reader, name string) ([]Tool, error) {
	var tools []Tool
	seen := map[string]int{}
	err := EachLine(r, name, func(line int, b []byte) error {
		var jt jsonlTool
		if err := json.Unmarshal(b, &jt); err != nil {
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
	return tools, err
}

// EachLine calls f with each non-blank line of a JSON-lines stream and its
// 1-based number; an error from f or from reading is returned as
// "name:line: err". Lines may be up to 64 MiB long.
func EachLine(r io.Reader, name string, f func(line int, b []byte) error) error {
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
