package storage

import (
	"os"
	"path/filepath"
	"testing"
)

// TestOthersMayWrite: a file others may write, or one in a folder (or
// below one) they may write in without the sticky bit, is said with the
// chmod that closes it; a group's write, a sticky folder, a link into a
// folder of the owner's alone, and a missing file pass.
func TestOthersMayWrite(t *testing.T) {
	dir := t.TempDir()
	owned := filepath.Join(dir, "owned")
	open := filepath.Join(dir, "open")
	for _, d := range []string{owned, open} {
		if err := os.Mkdir(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	file := filepath.Join(owned, "f.json")
	if err := os.WriteFile(file, []byte("{}"), 0o600); err != nil {
		t.Fatal(err)
	}
	below := filepath.Join(open, "sub", "f.json")
	if err := os.MkdirAll(filepath.Dir(below), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(below, []byte("{}"), 0o600); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(open, "link.json") // the link's folder is chmod'ed below
	if err := os.Symlink(file, link); err != nil {
		t.Fatal(err)
	}
	chmod := func(p string, m os.FileMode) {
		t.Helper()
		if err := os.Chmod(p, m); err != nil {
			t.Fatal(err)
		}
	}
	check := func(what, path, wantHow, wantFix string) {
		t.Helper()
		if how, fix := OthersMayWrite(path); how != wantHow || fix != wantFix {
			t.Errorf("%s: OthersMayWrite = %q, %q; want %q, %q", what, how, fix, wantHow, wantFix)
		}
	}
	check("0600 in folders of the owner's", file, "", "")
	check("missing", filepath.Join(owned, "none.json"), "", "")
	chmod(file, 0o666)
	check("0666", file, "can be written by every user of this machine (mode 0666)", "chmod o-w "+file)
	chmod(file, 0o664)
	check("a group's write", file, "", "")

	chmod(open, 0o777)
	check("below a folder of mode 0777", below, "is in "+open+", a folder every user of this machine may write in (mode 0777)",
		"chmod o-w "+open+" (or chmod +t "+open+")")
	// The link may be replaced from its folder, whatever it leads to.
	check("a link in a folder of mode 0777", link, "is in "+open+", a folder every user of this machine may write in (mode 0777)",
		"chmod o-w "+open+" (or chmod +t "+open+")")
	chmod(open, 0o777|os.ModeSticky)
	check("below a sticky folder", below, "", "")
	chmod(open, 0o700)
	chmod(owned, 0o777)
	// A link in a folder of the owner's, to a file in a folder others may
	// write in: the file may be replaced where it is.
	check("a link to a file in a folder of mode 0777", link, "is in "+owned+", a folder every user of this machine may write in (mode 0777)",
		"chmod o-w "+owned+" (or chmod +t "+owned+")")
	chmod(owned, 0o700)
}
