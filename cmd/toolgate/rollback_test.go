package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestPinsOfNewerToolgate: a pins file a newer toolgate wrote (a rollback)
// stops serve, as any pins file it cannot read does, but says that a newer
// toolgate wrote it and to run that one again or move it aside for it;
// not to restore it from a backup, which would lose the newer pins. The
// file is left as it is.
func TestPinsOfNewerToolgate(t *testing.T) {
	path := filepath.Join(t.TempDir(), "pins.json")
	body := `{"version":2,"tools":{}}`
	if err := os.WriteFile(path, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err := checkPins(path)
	if err == nil {
		t.Fatal("checkPins of a version-2 pins file: no error")
	}
	for _, want := range []string{path + " was written by a newer toolgate (format 2; this one reads format 1)", "run the newer toolgate again", "mv " + path + " " + path + ".newer"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error lacks %q:\n%v", want, err)
		}
	}
	if strings.Contains(err.Error(), "backup") {
		t.Errorf("error advises a backup over a newer toolgate's pins:\n%v", err)
	}
	if b, _ := os.ReadFile(path); string(b) != body {
		t.Errorf("pins file now %q", b)
	}
}
