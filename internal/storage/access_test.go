//go:build linux

package storage

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/toolgate/toolgate/internal/testenv"
)

// A command refused a file or folder names what refuses it and the fix
// for that: the folder on the way it may not enter, the file itself (a
// config of mode 0600 that is root's), the folder it may not make files
// in, the folder to make for it, or a home folder that does not exist.
// Each used to read "give this user access to <the file's folder>
// (chown/chmod)": /tmp for the config, / for a data folder under
// HOME=/nonexistent.
func TestCommandFixNamesWhatRefuses(t *testing.T) {
	dir := t.TempDir()
	for _, d := range []string{filepath.Dir(dir), dir} { // reachable by nobody
		if err := os.Chmod(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	locked, ro, cfg := filepath.Join(dir, "locked"), filepath.Join(dir, "ro"), filepath.Join(dir, "toolgate.json")
	if err := os.Mkdir(locked, 0o000); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(ro, 0o555); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(cfg, []byte("{}"), 0o000); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.Chmod(locked, 0o755); os.Chmod(ro, 0o755) })
	home := filepath.Join(ro, "home")
	t.Setenv("HOME", home)
	denied := func(op, path string) error { return &os.PathError{Op: op, Path: path, Err: syscall.EACCES} }
	for _, tc := range []struct {
		name string
		err  error
		want []string
	}{
		{"a folder on the way", denied("mkdir", filepath.Join(locked, "in")), []string{"may not enter " + locked, "chmod o+x"}},
		{"the file itself", denied("open", cfg), []string{cfg + " is ", "mode 0000", "may not use", "chown "}},
		{"files in a folder", denied("open", filepath.Join(ro, "keys.jsonl.lock")), []string{"may not make files in " + ro, "chown -R "}},
		{"a folder to make", denied("mkdir", filepath.Join(ro, "data")), []string{filepath.Join(ro, "data") + " does not exist", "may not make it in " + ro, "sudo install -d -o "}},
		{"a home folder that does not exist", denied("mkdir", home), []string{"the home folder of this user", home + " (HOME), does not exist", "--data-dir or TOOLGATE_DATA_DIR"}},
		{"a home folder not this user's", denied("mkdir", filepath.Join(ro, ".local")), []string{"may not write in its home folder " + ro + " (HOME;", "--data-dir or TOOLGATE_DATA_DIR"}},
	} {
		if tc.name == "a home folder not this user's" {
			t.Setenv("HOME", ro)
		}
		var got string
		testenv.AsAnotherUser(func() { got = CommandFix(tc.err) })
		for _, w := range tc.want {
			if !strings.Contains(got, w) {
				t.Errorf("%s: CommandFix(%v) = %q, want it to say %q", tc.name, tc.err, got, w)
			}
		}
		if strings.Contains(got, "give this user access to "+dir+" ") || strings.Contains(got, "give this user access to "+ro+" ") {
			t.Errorf("%s: CommandFix(%v) = %q names the file's folder, not what refuses", tc.name, tc.err, got)
		}
	}
	// The data folder of a start under a home folder that is not there:
	// the fault says it cannot be made, and its fix names the home folder.
	t.Setenv("HOME", home)
	h := New(filepath.Join(home, ".local", "share", "toolgate"), nil)
	var err error
	var fix string
	testenv.AsAnotherUser(func() {
		err = h.Prepare()
		fix = Fix(h.Dir(), err)
	})
	if err == nil || !strings.Contains(err.Error(), "cannot be made by this user") || !strings.Contains(fix, home+" (HOME), does not exist") {
		t.Errorf("Prepare under a missing home = %v, fix %q: want it cannot be made, and the home folder named", err, fix)
	}
}

// A data folder copied or restored by root, used by another user: every
// file and folder it may not use is named at once, with one fix for all
// (chown -R of the data folder); models/ and run/ are not looked into, and
// a folder refused is named alone. A folder of this user's says nothing.
func TestUnusableNamesAllAtOnce(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	for _, d := range []string{filepath.Dir(filepath.Dir(dir)), filepath.Dir(dir)} { // reachable by nobody
		if err := os.Chmod(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for _, d := range []string{"quarantine", "learn", "models/all-MiniLM-L6-v2", "run"} {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o700); err != nil {
			t.Fatal(err)
		}
	}
	for _, f := range []string{"keys.jsonl", "state.json", "quarantine/pins.json", "learn/MANIFEST", "models/all-MiniLM-L6-v2/model.onnx"} {
		if err := os.WriteFile(filepath.Join(dir, f), []byte("x"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if names, fix := Unusable(dir); names != "" || fix != "" {
		t.Errorf("this user's own folder: %q, %q; want nothing", names, fix)
	}
	var names, fix string
	testenv.AsAnotherUser(func() { names, fix = Unusable(dir) })
	for _, want := range []string{dir + " (", "mode 0755", "chown -R "} {
		if !strings.Contains(names+fix, want) {
			t.Errorf("the data folder itself: %q, fix %q; want %q", names, fix, want)
		}
	}
	// The data folder given to nobody, what is in it still root's.
	if err := os.Chown(dir, testenv.NobodyUID, testenv.NobodyUID); err != nil {
		t.Fatal(err)
	}
	testenv.AsAnotherUser(func() { names, fix = Unusable(dir) })
	for _, want := range []string{filepath.Join(dir, "keys.jsonl") + " (", "mode 0600", filepath.Join(dir, "quarantine") + " (", filepath.Join(dir, "learn") + " (", filepath.Join(dir, "state.json"), "chown -R ", " " + dir + ";"} {
		if !strings.Contains(names+fix, want) {
			t.Errorf("files of root's: %q, fix %q; want %q", names, fix, want)
		}
	}
	for _, not := range []string{"pins.json", "MANIFEST", "models", "run"} {
		if strings.Contains(names, not) {
			t.Errorf("names %q: %q should not be named", names, not)
		}
	}
}
