package index

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
)

// ReadToolsJSONL reads tools in the bench format, one JSON object per line:
// {"server": str, "name": str, "title"?: str, "description": str, "input_schema": object|null}.
// Blank lines are skipped; errors name the line. Server and tool names are
// taken as they are (the bench holds spaces and "&"): the index accepts any
// string.
func ReadToolsJSONL(r io.Reader) ([]Tool, error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64<<10), 64<<20)
	var tools []Tool
	for line := 1; sc.Scan(); line++ {
		b := bytes.TrimSpace(sc.Bytes())
		if len(b) == 0 {
			continue
		}
		var t Tool
		if err := json.Unmarshal(b, &t); err != nil {
			return nil, fmt.Errorf("line %d: %w", line, err)
		}
		if t.Server == "" || t.Name == "" {
			return nil, fmt.Errorf("line %d: \"server\" and \"name\" are required", line)
		}
		if string(t.InputSchema) == "null" {
			t.InputSchema = nil
		} else if t.InputSchema != nil {
			t.InputSchema = append(json.RawMessage(nil), t.InputSchema...)
		}
		tools = append(tools, t)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("read tools: %w", err)
	}
	return tools, nil
}

// ReadToolsFile reads a bench-format JSONL file (see ReadToolsJSONL).
func ReadToolsFile(path string) ([]Tool, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	tools, err := ReadToolsJSONL(f)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return tools, nil
}
