package indextest

import (
	"encoding/json"
	"os"
	"path/filepath"
)

// SetFormat rewrites the manifest of the index folder dir (index.Dir of a
// data folder: its manifest.json) to say format, as a toolgate of that
// format wrote it: tests of an upgrade or a rollback that changes the
// format (formats 5 and 6 differ in what the vectors were made of, not in
// the files' layout). The manifest's other fields are kept.
func SetFormat(dir string, format int) error {
	path := filepath.Join(dir, "manifest.json")
	data, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	var m map[string]any
	if err := json.Unmarshal(data, &m); err != nil {
		return err
	}
	m["format"] = format
	if data, err = json.Marshal(m); err != nil {
		return err
	}
	return os.WriteFile(path, data, 0o644)
}
