// Package datafile owns how toolgate's small state files (the API keys, the
// pins of tool definitions, the logins to remote servers) are shared
// between processes: a running gateway reads them, and commands such as
// `toolgate keys revoke`, `toolgate tools approve` or `toolgate auth login`
// change them.
//
//   - View holds the parsed content of one file and reads it again when the
//     file's stat stamp changes, so a change made by another process counts
//     from the next request on, at the cost of one stat per Load (no watcher
//     goroutine, nothing to miss on file systems without change events, and
//     a revoked key is refused at once rather than after a debounce).
//   - Update changes a file under an exclusive lock (Lock: flock on a
//     ".lock" file beside it, where the platform has one), writing the new
//     content with WriteFile: to a temporary file that is synced and
//     renamed over the old one, so a reader sees the old content or the
//     new, never a mix, and two writers never lose each other's change.
package datafile

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
	"syscall"
)

// View is the parsed content of one file, read again when it changes. The
// zero value is not usable: use NewView. It is safe for concurrent use.
type View[T any] struct {
	path  string
	parse func([]byte) (T, error)
	// missing is the value of a file that does not exist; nil means a
	// missing file is an error.
	missing func() T

	mu    sync.Mutex
	info  fs.FileInfo // stamp of the content held; nil: none read
	val   T
	err   error
	valid bool // val/err are for info (or for a missing file)
	gone  bool // the file was missing at the last look
}

// NewView returns a view of path. parse turns the content into a value;
// an error from it is what Load returns until the file changes again.
// missing gives the value of a file that does not exist (nil: a missing
// file is an error that names it).
func NewView[T any](path string, parse func([]byte) (T, error), missing func() T) *View[T] {
	return &View[T]{path: path, parse: parse, missing: missing}
}

// Path is the file viewed.
func (v *View[T]) Path() string { return v.path }

// Load returns the file's content as of now: the value held when the file's
// stamp (identity, size, mode and modification time) is the one it was read
// at, else the file read and parsed again. An error (unreadable, malformed,
// missing when that is an error) is returned until the file changes.
func (v *View[T]) Load() (T, error) {
	v.mu.Lock()
	defer v.mu.Unlock()
	fi, err := os.Stat(v.path)
	switch {
	case missing(err):
		if v.valid && v.gone {
			return v.val, v.err
		}
		v.info, v.gone, v.valid = nil, true, true
		if v.missing != nil {
			var zero error
			v.val, v.err = v.missing(), zero
		} else {
			var zero T
			v.val, v.err = zero, fmt.Errorf("%s does not exist", v.path)
		}
		return v.val, v.err
	case err != nil:
		// Not cached: the next Load looks again.
		var zero T
		v.valid = false
		return zero, fmt.Errorf("read %s: %w", v.path, err)
	}
	if v.valid && !v.gone && same(v.info, fi) {
		return v.val, v.err
	}
	v.gone = false
	v.val, v.info, v.err = read(v.path, v.parse)
	v.valid = v.info != nil
	return v.val, v.err
}

// Update changes the file under its lock, as the package's Update does, but
// from the parsed content: change gets the value as of now (the one held
// when the file's stamp is the one it was read at, so a large file is not
// read and parsed again for every change) and returns the new value with
// a function writing its encoding, or a nil one to leave the file as it is
// (a large file is written as it is encoded, never held whole). change must not
// modify cur: it is shared with Load's callers. After a write the view
// holds the new value, so the next Load need not read the file again.
// The file's folder must exist: a caller that may make it does so first,
// a caller in a running gateway without making the data folder again
// (storage.Gate's MkdirAll).
//
// When the file cannot be read or parsed, change is not called and the
// error is returned; a parse error is a *ContentError (the file is there
// but not usable: an Update must not overwrite what it could not read).
func (v *View[T]) Update(change func(cur T) (T, func(io.Writer) error, error)) error {
	unlock, err := Lock(v.path + ".lock")
	if err != nil {
		return fmt.Errorf("lock %s: %w", v.path, err)
	}
	defer unlock()
	cur, err := v.Load()
	if err != nil {
		return err
	}
	next, write, err := change(cur)
	if err != nil || write == nil {
		return err
	}
	if err := WriteFileFunc(v.path, write); err != nil {
		return err
	}
	// Under the lock no other writer can have replaced the file since.
	fi, err := os.Stat(v.path)
	v.mu.Lock()
	defer v.mu.Unlock()
	if err != nil {
		v.valid = false // read it again next time
		return nil
	}
	var zero error
	v.val, v.info, v.err, v.valid, v.gone = next, fi, zero, true, false
	return nil
}

// ContentError is a file that could be read but not parsed.
type ContentError struct{ Err error }

func (e *ContentError) Error() string { return e.Err.Error() }
func (e *ContentError) Unwrap() error { return e.Err }

// missing reports whether err says the file does not exist: not there, or
// a file stands where one of its folders should be (then it cannot exist).
func missing(err error) bool {
	return errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR)
}

// read reads and parses the file at path and returns the stamp of what it
// read (nil when the read failed: not cached).
func read[T any](path string, parse func([]byte) (T, error)) (T, fs.FileInfo, error) {
	var zero T
	f, err := os.Open(path)
	if err != nil {
		return zero, nil, fmt.Errorf("read %s: %w", path, err)
	}
	defer f.Close()
	// The stamp of the open file: a rename over it after this point
	// changes what Stat sees, so the next Load reads again.
	fi, err := f.Stat()
	if err != nil {
		return zero, nil, fmt.Errorf("read %s: %w", path, err)
	}
	b, err := io.ReadAll(f)
	if err != nil {
		return zero, nil, fmt.Errorf("read %s: %w", path, err)
	}
	val, perr := parse(b)
	if perr != nil {
		return zero, fi, &ContentError{perr}
	}
	return val, fi, nil
}

// Stamped is a file's parsed content and the stamp of what was read
// (Read). A View given it (Seed) holds it instead of reading the file
// again at its first Load, unless the file changed meanwhile.
type Stamped[T any] struct {
	Val  T
	info fs.FileInfo
}

// Read reads and parses path once, as a View does (a parse error is a
// *ContentError). A start that must check a large file before it goes on
// reads it so, and seeds the View that serves it afterwards.
func Read[T any](path string, parse func([]byte) (T, error)) (Stamped[T], error) {
	val, fi, err := read(path, parse)
	if err != nil {
		return Stamped[T]{}, err
	}
	return Stamped[T]{val, fi}, nil
}

// Seed gives the view content from Read, if it holds none yet: its first
// Load returns it when the file's stamp is still the one read.
func (v *View[T]) Seed(s Stamped[T]) {
	if s.info == nil {
		return
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.valid {
		return
	}
	var zero error
	v.val, v.info, v.err, v.valid, v.gone = s.Val, s.info, zero, true, false
}

// same reports whether two stamps are of the same content: the same file
// (device and inode where the platform has them), size, mode and
// modification time.
func same(a, b fs.FileInfo) bool {
	return os.SameFile(a, b) && a.Size() == b.Size() && a.Mode() == b.Mode() && a.ModTime().Equal(b.ModTime())
}

// Update changes path under its lock: change gets the current content (nil
// when the file does not exist) and returns the new one; a nil result
// leaves the file as it is. The folder is made (0700) when missing; the
// file is written 0600.
func Update(path string, change func(old []byte) ([]byte, error)) error {
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("create %s: %w", dir, err)
	}
	unlock, err := Lock(path + ".lock")
	if err != nil {
		return fmt.Errorf("lock %s: %w", path, err)
	}
	defer unlock()
	old, err := os.ReadFile(path)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("read %s: %w", path, err)
	}
	if errors.Is(err, fs.ErrNotExist) {
		old = nil
	}
	next, err := change(old)
	if err != nil || next == nil {
		return err
	}
	return WriteFile(path, next)
}

// WriteFile writes b to path atomically: a temporary file in the same
// folder (0600; written by root, given to the owner of what is there:
// GiveToOwner), synced, renamed over path, then the folder synced.
func WriteFile(path string, b []byte) error {
	return WriteFileFunc(path, func(w io.Writer) error {
		_, err := w.Write(b)
		return err
	})
}

// WriteFileFunc is WriteFile with the content written by write (through a
// buffer), so that it need not be held whole.
func WriteFileFunc(path string, write func(io.Writer) error) error {
	dir := filepath.Dir(path)
	f, err := os.CreateTemp(dir, "."+filepath.Base(path)+"-*.tmp")
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	tmp := f.Name()
	giveFolderToOwner(dir)
	GiveToOwner(f, path)
	bw := bufio.NewWriterSize(f, 64<<10)
	err = write(bw)
	if err == nil {
		err = bw.Flush()
	}
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err != nil {
		os.Remove(tmp)
		return fmt.Errorf("write %s: %w", path, err)
	}
	SyncDir(dir)
	return nil
}

// SyncDir makes a rename or removal in dir durable (best effort: not every
// platform can sync a folder).
func SyncDir(dir string) {
	if d, err := os.Open(dir); err == nil {
		_ = d.Sync()
		d.Close()
	}
}
