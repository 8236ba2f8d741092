package datafile

import (
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
)

func count(b []byte) (int, error) {
	s := strings.TrimSpace(string(b))
	if s == "bad" {
		return 0, errors.New("bad content")
	}
	return strconv.Atoi(s)
}

// A View reads the file again as soon as it changes (written in place or
// renamed over), keeps a parse error until the next change, and gives the
// missing value for a file that does not exist.
func TestViewSeesEveryChange(t *testing.T) {
	path := filepath.Join(t.TempDir(), "n")
	v := NewView(path, count, func() int { return -1 })
	load := func(want int, wantErr bool) {
		t.Helper()
		got, err := v.Load()
		if (err != nil) != wantErr || (!wantErr && got != want) {
			t.Fatalf("Load = %d, %v; want %d (error %v)", got, err, want, wantErr)
		}
	}
	load(-1, false)
	if err := os.WriteFile(path, []byte("1"), 0o600); err != nil {
		t.Fatal(err)
	}
	load(1, false)
	if err := WriteFile(path, []byte("2")); err != nil { // rename over
		t.Fatal(err)
	}
	load(2, false)
	if err := os.WriteFile(path, []byte("33"), 0o600); err != nil { // in place, other size
		t.Fatal(err)
	}
	load(33, false)
	if err := os.WriteFile(path, []byte("bad"), 0o600); err != nil {
		t.Fatal(err)
	}
	load(0, true)
	load(0, true)                                 // kept until the file changes
	if err := os.Chmod(path, 0o640); err != nil { // a mode change is a change
		t.Fatal(err)
	}
	if err := WriteFile(path, []byte("4")); err != nil {
		t.Fatal(err)
	}
	load(4, false)
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	load(-1, false)

	// A file where the folder should be: the file cannot exist either.
	blocked := filepath.Join(path+"-file", "n")
	if err := os.WriteFile(path+"-file", nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if n, err := NewView(blocked, count, func() int { return -1 }).Load(); err != nil || n != -1 {
		t.Errorf("a file in place of the folder: %d, %v; want the missing value", n, err)
	}

	required := NewView(path, count, nil)
	if _, err := required.Load(); err == nil || !strings.Contains(err.Error(), path) {
		t.Errorf("a required file that is missing: %v, want an error naming it", err)
	}
}

// Unreadable (here a folder where the file should be, which even root
// cannot read as a file): an error, never the stale value.
func TestViewUnreadable(t *testing.T) {
	path := filepath.Join(t.TempDir(), "n")
	if err := os.WriteFile(path, []byte("1"), 0o600); err != nil {
		t.Fatal(err)
	}
	v := NewView(path, count, nil)
	if n, err := v.Load(); err != nil || n != 1 {
		t.Fatal(n, err)
	}
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(path, 0o700); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if n, err := v.Load(); err == nil {
			t.Errorf("an unreadable file loaded: %d", n)
		}
	}
}

// Concurrent updates from many goroutines (the same lock file as processes
// use) lose none of their changes.
func TestUpdateLosesNothing(t *testing.T) {
	path := filepath.Join(t.TempDir(), "sub", "n")
	var wg sync.WaitGroup
	for range 20 {
		wg.Go(func() {
			err := Update(path, func(old []byte) ([]byte, error) {
				n := 0
				if old != nil {
					var err error
					if n, err = count(old); err != nil {
						return nil, err
					}
				}
				return []byte(strconv.Itoa(n + 1)), nil
			})
			if err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	b, err := os.ReadFile(path)
	if err != nil || string(b) != "20" {
		t.Fatalf("after 20 updates: %q, %v", b, err)
	}
	fi, err := os.Stat(path)
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("mode %v, %v; want 0600", fi.Mode(), err)
	}
	// nil leaves the file alone; an error is returned.
	if err := Update(path, func([]byte) ([]byte, error) { return nil, nil }); err != nil {
		t.Fatal(err)
	}
	if err := Update(path, func([]byte) ([]byte, error) { return nil, errors.New("no") }); err == nil {
		t.Error("the change's error was not returned")
	}
	if b, _ := os.ReadFile(path); string(b) != "20" {
		t.Errorf("file changed to %q", b)
	}
}

// View.Update hands change the value the view holds (no read while the
// file is the one read last), holds what it wrote without reading it back,
// still sees another writer's change, and never calls change or writes
// over a file it cannot parse.
func TestViewUpdate(t *testing.T) {
	path := filepath.Join(t.TempDir(), "n")
	parses := 0
	v := NewView(path, func(b []byte) (int, error) { parses++; return count(b) }, func() int { return 0 })
	add := func(n int) func(int) (int, func(io.Writer) error, error) {
		return func(cur int) (int, func(io.Writer) error, error) {
			next := cur + n
			return next, func(w io.Writer) error { _, err := io.WriteString(w, strconv.Itoa(next)); return err }, nil
		}
	}
	for range 3 {
		if err := v.Update(add(1)); err != nil {
			t.Fatal(err)
		}
	}
	if got, err := v.Load(); got != 3 || err != nil {
		t.Fatalf("Load after three updates = %d, %v; want 3", got, err)
	}
	if parses != 0 {
		t.Fatalf("the file was parsed %d times; the view wrote every version of it and should parse none", parses)
	}
	if b, _ := os.ReadFile(path); string(b) != "3" {
		t.Fatalf("file holds %q, want 3", b)
	}
	// A nil encoding leaves the file alone.
	if err := v.Update(func(cur int) (int, func(io.Writer) error, error) { return cur + 100, nil, nil }); err != nil {
		t.Fatal(err)
	}
	if got, _ := v.Load(); got != 3 {
		t.Fatalf("Load after an update that wrote nothing = %d, want 3", got)
	}
	// Another process's write is read before the next change.
	if err := WriteFile(path, []byte("10")); err != nil {
		t.Fatal(err)
	}
	if err := v.Update(add(1)); err != nil {
		t.Fatal(err)
	}
	if got, _ := v.Load(); got != 11 || parses != 1 {
		t.Fatalf("after another writer's 10 and +1: Load = %d with %d parses, want 11 with 1", got, parses)
	}
	// Content that does not parse: change is not called, the file is kept.
	if err := os.WriteFile(path, []byte("bad"), 0o600); err != nil {
		t.Fatal(err)
	}
	called := false
	err := v.Update(func(cur int) (int, func(io.Writer) error, error) { called = true; return 0, nil, nil })
	var ce *ContentError
	if !errors.As(err, &ce) || called {
		t.Fatalf("Update over unparsable content = %v (called %v); want a *ContentError and change not called", err, called)
	}
	if b, _ := os.ReadFile(path); string(b) != "bad" {
		t.Fatalf("file holds %q after the refused update, want it untouched", b)
	}
}

// A View seeded with what Read read does not parse the file again at its
// first Load, unless the file changed in between; Read reports a parse
// error as a *ContentError and a missing file as fs.ErrNotExist.
func TestViewSeed(t *testing.T) {
	path := filepath.Join(t.TempDir(), "n")
	if _, err := Read(path, count); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("Read of a missing file: %v, want fs.ErrNotExist", err)
	}
	if err := os.WriteFile(path, []byte("bad"), 0o600); err != nil {
		t.Fatal(err)
	}
	var ce *ContentError
	if _, err := Read(path, count); !errors.As(err, &ce) {
		t.Errorf("Read of bad content: %v, want a *ContentError", err)
	}
	if err := WriteFile(path, []byte("7")); err != nil {
		t.Fatal(err)
	}
	parses := 0
	counted := func(b []byte) (int, error) { parses++; return count(b) }
	s, err := Read(path, counted)
	if err != nil || s.Val != 7 || parses != 1 {
		t.Fatalf("Read = %d, %v after %d parses", s.Val, err, parses)
	}
	v := NewView(path, counted, nil)
	v.Seed(s)
	if n, err := v.Load(); n != 7 || err != nil || parses != 1 {
		t.Errorf("seeded Load = %d, %v after %d parses; want 7 without parsing again", n, err, parses)
	}

	// Changed between Read and the first Load: read again.
	s, _ = Read(path, counted)
	if err := WriteFile(path, []byte("8")); err != nil {
		t.Fatal(err)
	}
	v = NewView(path, counted, nil)
	v.Seed(s)
	if n, err := v.Load(); n != 8 || err != nil {
		t.Errorf("Load after a change since Read = %d, %v; want 8", n, err)
	}
	// A zero Stamped (the file was missing) seeds nothing.
	v = NewView(path, counted, nil)
	v.Seed(Stamped[int]{})
	if n, err := v.Load(); n != 8 || err != nil {
		t.Errorf("Load after an empty seed = %d, %v; want 8", n, err)
	}
}
