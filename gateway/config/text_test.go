package config

import (
	"bytes"
	"errors"
	"strings"
	"testing"

	"golang.org/x/text/encoding/unicode"
)

const textDoc = `{"mcpServers": {"memory": {"command": "npx", "args": ["-y", "@modelcontextprotocol/server-memory", "–ünï"]}}}`

// storedAs is textDoc as a Windows program may have written it.
func storedAs(t *testing.T, e textEncoding) []byte {
	t.Helper()
	switch e {
	case bomUTF8:
		return append([]byte("\xef\xbb\xbf"), textDoc...)
	case bomUTF16LE, bomUTF16BE:
		order := map[textEncoding]unicode.Endianness{bomUTF16LE: unicode.LittleEndian, bomUTF16BE: unicode.BigEndian}[e]
		b, err := unicode.UTF16(order, unicode.UseBOM).NewEncoder().Bytes([]byte(textDoc))
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	return []byte(textDoc)
}

// Every encoding a Windows editor or PowerShell writes is read, and an
// edit writes the file back in it.
func TestTextEncodings(t *testing.T) {
	for _, e := range []textEncoding{plainUTF8, bomUTF8, bomUTF16LE, bomUTF16BE} {
		data := storedAs(t, e)
		text, got, err := decodeText(data)
		if err != nil || got != e || string(text) != textDoc {
			t.Fatalf("encoding %d: decodeText = %q, %d, %v", e, text, got, err)
		}
		f, err := Parse(data, "toolgate.json", nil)
		if err != nil || f.MCPServers["memory"].Args[2] != "–ünï" {
			t.Fatalf("encoding %d: Parse: %v", e, err)
		}
		edited, err := SetServer(data, "fs", []byte(`{"command": "node"}`))
		if err != nil {
			t.Fatalf("encoding %d: SetServer: %v", e, err)
		}
		if text, got, err := decodeText(edited); err != nil || got != e || !strings.Contains(string(text), `"fs"`) {
			t.Errorf("encoding %d: after SetServer the file is %q (encoding %d, %v)", e, edited, got, err)
		}
		if _, ok := ServerEntry(edited, "fs"); !ok {
			t.Errorf("encoding %d: ServerEntry does not find the server added", e)
		}
		removed, ok, err := DeleteServer(edited, "memory")
		if err != nil || !ok {
			t.Fatalf("encoding %d: DeleteServer: %v, %v", e, ok, err)
		}
		if text, got, err := decodeText(removed); err != nil || got != e || strings.Contains(string(text), "memory") {
			t.Errorf("encoding %d: after DeleteServer the file is %q (encoding %d, %v)", e, removed, got, err)
		}
		if e == plainUTF8 && (bytes.HasPrefix(edited, markUTF8) || bytes.HasPrefix(removed, markUTF8)) {
			t.Errorf("a file without a mark got one")
		}
	}
}

// UTF-16 without its mark is named, with the fix, not reported as a JSON
// syntax error at byte 2.
func TestTextUTF16WithoutMark(t *testing.T) {
	b, err := unicode.UTF16(unicode.LittleEndian, unicode.IgnoreBOM).NewEncoder().Bytes([]byte(textDoc))
	if err != nil {
		t.Fatal(err)
	}
	_, err = Parse(b, "toolgate.json", nil)
	if !errors.Is(err, errUTF16NoMark) || !strings.Contains(err.Error(), "toolgate.json: ") {
		t.Errorf("Parse of UTF-16 without a mark: %v", err)
	}
	if _, err := SetServer(b, "fs", []byte(`{"command": "node"}`)); !errors.Is(err, errUTF16NoMark) {
		t.Errorf("SetServer of UTF-16 without a mark: %v", err)
	}
	if _, _, err := Merge([]Doc{{Path: "a.json", Data: b}}); !errors.Is(err, errUTF16NoMark) {
		t.Errorf("Merge of UTF-16 without a mark: %v", err)
	}
}
