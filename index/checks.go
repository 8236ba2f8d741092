package index

import (
	"encoding/json"
	"os"
	"path/filepath"

	"github.com/toolgate/toolgate/index/catalog"
)

// checksFile, in the index folder, holds the verdicts of the input schemas
// of the last catalog checked (catalog.Checks), so that a start seeds its
// catalog.FlawLog with them instead of resolving every schema again.
const checksFile = "flaws.json"

// ReadChecks reads the schema verdicts saved in the index folder dir. A
// file missing, damaged or of another format gives none: every schema is
// checked, as by a first start.
func ReadChecks(dir string) catalog.Checks {
	b, err := os.ReadFile(filepath.Join(dir, checksFile))
	if err != nil {
		return catalog.Checks{}
	}
	var c catalog.Checks
	if json.Unmarshal(b, &c) != nil || c.Format != catalog.ChecksFormat {
		return catalog.Checks{}
	}
	return c
}

// WriteChecks saves c in the index folder dir, replacing what was there
// by a rename (two writers leave one's whole file). The folder is not
// made: without an index there is nothing to start warm from. An error
// is for the caller to log, never to stop for: the file only spares work.
func WriteChecks(dir string, c catalog.Checks) error {
	b, err := json.Marshal(c)
	if err != nil {
		return err
	}
	f, err := os.CreateTemp(dir, checksFile+".*.tmp")
	if err != nil {
		return err
	}
	if _, err := f.Write(b); err != nil {
		f.Close()
		os.Remove(f.Name())
		return err
	}
	if err := f.Close(); err != nil {
		os.Remove(f.Name())
		return err
	}
	if err := os.Rename(f.Name(), filepath.Join(dir, checksFile)); err != nil {
		os.Remove(f.Name())
		return err
	}
	return nil
}

// SaveChecks writes the verdicts c of a catalog's input schemas
// (catalog.FlawLog's Checks or Settled) to the index folder dir, unless
// they are those of saved (the file as read or last written) and the file
// is still there: one that went with its folder (the data folder removed
// while serving, then made again, where the index is written back) is
// written again. It returns the verdicts the file holds now.
func SaveChecks(dir string, c catalog.Checks, saved catalog.Checks) (catalog.Checks, error) {
	if c.Same(saved) {
		if _, err := os.Stat(filepath.Join(dir, checksFile)); err == nil {
			return saved, nil
		}
	}
	if err := WriteChecks(dir, c); err != nil {
		return saved, err
	}
	return c, nil
}
