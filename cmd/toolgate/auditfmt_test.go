package main

import (
	"strings"
	"testing"
	"time"
	"unicode"

	"github.com/toolgate/toolgate/gateway/audit"
)

// TestFormatRecordEscapes: `audit tail` prints what clients chose (a tool
// name, a User-Agent, a session id) on one line, with no control
// character: a newline in a tool name forged a second record on the
// operator's screen, and a terminal escape could rewrite it.
func TestFormatRecordEscapes(t *testing.T) {
	r := audit.Record{Time: time.Unix(0, 0), Key: "ci", Transport: "http", Action: "execute_tool",
		Tool:    "memory__x\x1b[31mRED\x1b[0m\n2026-12-01 00:00:00.000  key=admin  execute_tool  memory__read_graph  allowed",
		Session: "s\rid", Client: "agent\u202egnp.exe", Remote: "127.0.0.1:5555", Decision: "denied", Reason: "unknown tool \"x\nforged\""}
	line := formatRecord(r)
	if strings.ContainsFunc(line, func(c rune) bool { return unicode.IsControl(c) || unicode.Is(unicode.Cf, c) }) {
		t.Errorf("a control or format character reaches the terminal: %q", line)
	}
	for _, want := range []string{`\x1b[31mRED`, `\n2026-12-01`, `\u202e`, "remote=127.0.0.1:5555"} {
		if !strings.Contains(line, want) {
			t.Errorf("line %q lacks %q", line, want)
		}
	}
	if plain := formatRecord(audit.Record{Time: time.Unix(0, 0), Action: "search_tools", Decision: "allowed", Tool: "memory__read_graph"}); strings.Contains(plain, `"`) {
		t.Errorf("a plain record is quoted: %s", plain)
	}
}
