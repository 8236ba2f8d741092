package indextest

import (
	"encoding/json"
	"fmt"
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

// SetSnapshotHeader rewrites the header of the catalog snapshot of the
// current generation of the index folder dir (gen-N/catalog.bin, N the
// manifest's generation) to head, as a toolgate of another version wrote
// it ("TGC2": formats 4 to 6): the snapshot then does not read as this
// toolgate's, as an upgrade's first start finds it.
func SetSnapshotHeader(dir, head string) error {
	data, err := os.ReadFile(filepath.Join(dir, "manifest.json"))
	if err != nil {
		return err
	}
	var m struct {
		Generation int `json:"generation"`
	}
	if err := json.Unmarshal(data, &m); err != nil {
		return err
	}
	path := filepath.Join(dir, fmt.Sprintf("gen-%d", m.Generation), "catalog.bin")
	snap, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	if len(snap) < len(head) {
		return fmt.Errorf("%s: %d bytes, shorter than a header", path, len(snap))
	}
	copy(snap, head)
	return os.WriteFile(path, snap, 0o600)
}
