package main

import (
	"bytes"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/toolgate/toolgate/internal/storage"
	"github.com/toolgate/toolgate/internal/testenv"
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
	said := err.Error() + "\n" + storage.CommandFix(err)
	for _, want := range []string{path + " was written by a newer toolgate (format 2; this one reads format 1)", "run the newer toolgate again", "mv " + path + " " + path + ".newer"} {
		if !strings.Contains(said, want) {
			t.Errorf("error and fix lack %q:\n%s", want, said)
		}
	}
	if strings.Contains(said, "backup") {
		t.Errorf("error advises a backup over a newer toolgate's pins:\n%v", err)
	}
	if b, _ := os.ReadFile(path); string(b) != body {
		t.Errorf("pins file now %q", b)
	}
}

// TestPinsOfAnotherUser: a pins file this user may not read (a data folder
// copied or restored by root) stops serve, but is not to be moved aside,
// which would release the tools it holds (and which this user could not
// do either): the fix gives the file back. It said to restore it from a
// backup or move it aside, and only then the fix.
func TestPinsOfAnotherUser(t *testing.T) {
	dir := t.TempDir()
	for _, d := range []string{filepath.Dir(dir), dir} { // reachable by nobody
		if err := os.Chmod(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	path := filepath.Join(dir, "pins.json")
	if err := os.WriteFile(path, []byte(`{"version":1,"tools":{}}`), 0o000); err != nil {
		t.Fatal(err)
	}
	var err error
	testenv.AsAnotherUser(func() { _, err = checkPins(path) })
	if err == nil {
		t.Fatal("checkPins of a pins file this user may not read: no error")
	}
	if strings.Contains(err.Error(), "move it aside") || strings.Contains(err.Error(), "backup") {
		t.Errorf("error advises moving aside or restoring a pins file that only needs its owner:\n%v", err)
	}
	var fix string
	testenv.AsAnotherUser(func() { fix = storage.CommandFix(err) })
	if !strings.Contains(fix, "chown ") {
		t.Errorf("fix %q, want the chown that gives it back", fix)
	}
}

// TestDoctorDataFolderOfAnotherUser: doctor's data folder line is bad (it
// fails doctor) when this user may not use what is in it, a data folder
// restored by root, naming it with serve's one fix (chown -R).
func TestDoctorDataFolderOfAnotherUser(t *testing.T) {
	data := filepath.Join(t.TempDir(), "data")
	for _, d := range []string{filepath.Dir(filepath.Dir(data)), filepath.Dir(data)} { // reachable by nobody
		if err := os.Chmod(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.MkdirAll(filepath.Join(data, "learn"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(data, testenv.NobodyUID, testenv.NobodyUID); err != nil {
		t.Fatal(err)
	}
	health := storage.New(data, nil)
	if c := dataDirCheck(data, health); c.Status != statusOK {
		t.Errorf("as root: %+v, want ok", c)
	}
	var c doctorCheck
	testenv.AsAnotherUser(func() { c = dataDirCheck(data, health) })
	if c.Status != statusBad || !strings.Contains(c.Detail, "this user may not use: "+filepath.Join(data, "learn")+" (root's, mode 0700)") || !strings.Contains(c.Fix, "chown -R ") {
		t.Errorf("as nobody: %+v, want bad, naming learn/, with chown -R", c)
	}
}

// TestNewerFilesFixInCommands: a command that meets a newer toolgate's
// pins file (tools quarantined, tools approve) or learned pairs ends with
// the fix line, as serve says it, once: they named the file alone.
func TestNewerFilesFixInCommands(t *testing.T) {
	path := filepath.Join(t.TempDir(), "pins.json")
	if err := os.WriteFile(path, []byte(`{"version":2,"tools":{}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	err := runToolsQuarantined(io.Discard, path, nil, false, false)
	var out bytes.Buffer
	(&globals{}).fail(&out, err)
	if got := out.String(); strings.Count(got, "toolgate: fix: run the newer toolgate again") != 1 || !strings.Contains(got, "every tool is then pinned afresh") {
		t.Errorf("tools quarantined on a newer pins file printed:\n%s", got)
	}
	_, err = checkPins(path)
	out.Reset()
	(&globals{}).fail(&out, err)
	if got := out.String(); strings.Count(got, "run the newer toolgate again") != 1 {
		t.Errorf("serve on a newer pins file printed:\n%s", got)
	}
}
