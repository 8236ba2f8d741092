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
	if got, err := SaveChecks(dir, (&catalog.FlawLog{}).Checks(nil), want); err != nil || got.Same(want) || len(ReadChecks(dir).Clean) != 0 {
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

// The verdicts saved are written again once their file is gone, though
// they did not change: the data folder removed while serving and made
// again (mkdir -p) gets its index written back by the runtime loop, which
// then saves the verdicts of the catalog it serves. SaveChecks skipped
// them as the ones saved, so the next start resolved every schema again
// (seen: index/ written back without flaws.json).
func TestSaveChecksWritesAGoneFileAgain(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "index")
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	tools := []catalog.Tool{{Server: "fs", Name: "read", InputSchema: []byte(`{"type":"object"}`)}}
	var f catalog.FlawLog
	saved, err := SaveChecks(dir, f.Checks(tools), catalog.Checks{})
	if err != nil || len(saved.Clean) != 1 {
		t.Fatalf("first save: %+v, %v", saved, err)
	}
	if err := os.RemoveAll(dir); err != nil { // rm -rf of the data folder …
		t.Fatal(err)
	}
	if _, err := SaveChecks(dir, f.Checks(tools), saved); err == nil {
		t.Error("saved into a folder that is not there")
	}
	if err := os.Mkdir(dir, 0o700); err != nil { // … mkdir -p, the index written back
		t.Fatal(err)
	}
	got, err := SaveChecks(dir, f.Checks(tools), saved)
	if err != nil || !got.Same(saved) {
		t.Fatalf("save after the folder came back: %+v, %v", got, err)
	}
	if c := ReadChecks(dir); !c.Same(saved) {
		t.Errorf("flaws.json after the folder came back: %+v, want the verdicts written again", c)
	}
}
