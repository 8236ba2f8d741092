package index

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/toolgate/toolgate/index/catalog"
)

// The saved verdicts come back as written; a file missing, damaged or of
// another format gives none (every schema is checked, as at a first
// start), and a folder that cannot take the file is an error for the
// caller to log, never a panic or a file left half written.
func TestChecksFile(t *testing.T) {
	dir := t.TempDir()
	if c := ReadChecks(dir); c.Checker != "" || c.Clean != nil || c.Flawed != nil {
		t.Errorf("no file: %+v, want none", c)
	}
	want := catalog.Checks{Format: catalog.ChecksFormat, Checker: catalog.Checker(), Clean: []string{"a", "b"}, Flawed: map[string]string{"c": "why"}}
	if err := WriteChecks(dir, want); err != nil {
		t.Fatal(err)
	}
	if got := ReadChecks(dir); !got.Same(want) {
		t.Errorf("read back %+v, want %+v", got, want)
	}
	if got, err := SaveChecks(dir, &catalog.FlawLog{}, nil, want); err != nil || got.Same(want) || len(ReadChecks(dir).Clean) != 0 {
		t.Errorf("saved for no tools: %+v, %v; want the file emptied of verdicts", got, err)
	}
	for name, text := range map[string]string{
		"damaged":        `{"format":1,"checker":"x","clean":["a"`,
		"another format": `{"format":2,"checker":"x","clean":["a"]}`,
		"not JSON":       "\x00\x01",
	} {
		if err := os.WriteFile(filepath.Join(dir, checksFile), []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
		if c := ReadChecks(dir); c.Clean != nil || c.Checker != "" {
			t.Errorf("%s: %+v, want none", name, c)
		}
	}
	gone := filepath.Join(dir, "gone")
	if err := WriteChecks(gone, want); err == nil {
		t.Error("a folder that is not there: no error")
	}
	if _, err := os.Stat(gone); err == nil {
		t.Error("the folder was made")
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 1 {
		t.Errorf("the folder holds %d files, want the one", len(entries))
	}
}
