package keys

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestKeyFilesOthersMayWrite: a file of the keys in force that every user
// of the machine may write, or that sits in a folder they may write in
// (and so rename it and put theirs in its place), lets no one in: anyone
// could have added an admin key of their own. It was read as any other
// (a keysFile of mode 0666 served its keys, and a local user's line added
// to it). A group that may write, and a sticky folder, pass.
func TestKeyFilesOthersMayWrite(t *testing.T) {
	dir := t.TempDir()
	data := filepath.Join(dir, "data", "keys.jsonl")
	shared := filepath.Join(dir, "shared")
	file := filepath.Join(shared, "keys.jsonl")
	for _, d := range []string{filepath.Dir(data), shared} {
		if err := os.Mkdir(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	dataSecret, dataKey := newKey(t, Spec{Name: "local"})
	if err := Add(data, dataKey); err != nil {
		t.Fatal(err)
	}
	fileSecret, fileKey := newKey(t, Spec{Name: "replica", Admin: true})
	if err := os.WriteFile(file, fileKey.Line(), 0o600); err != nil {
		t.Fatal(err)
	}
	chmod := func(p string, m os.FileMode) {
		t.Helper()
		if err := os.Chmod(p, m); err != nil {
			t.Fatal(err)
		}
	}
	s := Open(data, &Options{File: file})
	if _, err := s.Verify(fileSecret); err != nil {
		t.Fatalf("keysFile 0600: %v", err)
	}

	// The keysFile others may write: refused from the next request (its
	// mode is in the stamp), the data folder's keys too, with the fix.
	chmod(file, 0o666)
	for _, secret := range []string{fileSecret, dataSecret} {
		_, err := s.Verify(secret)
		if !errors.Is(err, ErrUnavailable) || !strings.Contains(err.Error(), "toolgate.keysFile: "+file+" can be written by every user of this machine (mode 0666)") ||
			!strings.Contains(err.Error(), "chmod o-w "+file) {
			t.Errorf("keysFile 0666: %v", err)
		}
	}
	if _, err := s.List(); !errors.Is(err, ErrUnavailable) {
		t.Errorf("List with a keysFile 0666: %v", err)
	}
	// A group that may write it is a choice.
	chmod(file, 0o660)
	if _, err := s.Verify(fileSecret); err != nil {
		t.Errorf("keysFile 0660: %v", err)
	}

	// Its folder others may write in: they could replace it.
	chmod(shared, 0o777)
	_, err := Open(data, &Options{File: file}).Verify(fileSecret)
	if !errors.Is(err, ErrUnavailable) || !strings.Contains(err.Error(), "is in "+shared+", a folder every user of this machine may write in (mode 0777)") ||
		!strings.Contains(err.Error(), "chmod o-w "+shared) {
		t.Errorf("keysFile in a folder of mode 0777: %v", err)
	}
	// Sticky (as /tmp): others cannot rename what is not theirs.
	chmod(shared, 0o777|os.ModeSticky)
	if _, err := Open(data, &Options{File: file}).Verify(fileSecret); err != nil {
		t.Errorf("keysFile in a sticky folder: %v", err)
	}
	chmod(shared, 0o700)

	// The data folder's keys.jsonl alike; the next `keys create` writes it
	// anew, owner-only, which ends the refusal.
	s = Open(data, nil)
	chmod(data, 0o646)
	if _, err := s.Verify(dataSecret); !errors.Is(err, ErrUnavailable) || !strings.Contains(err.Error(), "the data folder's keys: "+data+" can be written by every user") {
		t.Errorf("data folder's keys.jsonl 0646: %v", err)
	}
	_, other := newKey(t, Spec{Name: "other"})
	if err := Add(data, other); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(data); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("keys.jsonl after keys create: %v %v", fi.Mode(), err)
	}
	if _, err := s.Verify(dataSecret); err != nil {
		t.Errorf("data folder's keys.jsonl written anew: %v", err)
	}
}
