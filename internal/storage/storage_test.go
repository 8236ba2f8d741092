package storage

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/toolgate/toolgate/internal/testenv"
)

func TestCheckFaults(t *testing.T) {
	for _, tc := range []struct {
		name    string
		break_  func(t *testing.T, dir string)
		minFree uint64
		problem string
		fix     string
		is      error
	}{
		{name: "removed", break_: func(t *testing.T, dir string) { mustRemove(t, dir) },
			problem: "does not exist", fix: "mkdir -p", is: os.ErrNotExist},
		{name: "replaced by a file", break_: func(t *testing.T, dir string) {
			mustRemove(t, dir)
			if err := os.WriteFile(dir, []byte("x"), 0o644); err != nil {
				t.Fatal(err)
			}
		}, problem: "is not a folder", fix: "move the file"},
		// No file system has 4 EiB: too small (a full one is TestFullSaysWhatIsShort's).
		{name: "full", minFree: 1 << 62, problem: "file system too small", fix: "give the data folder a file system with more than", is: syscall.ENOSPC},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "data")
			var logs testenv.LogBuffer
			h := New(dir, &Options{Logger: logs.Logger(), MinFree: tc.minFree})
			if err := h.Prepare(); err != nil {
				t.Fatal(err)
			}
			if tc.minFree == 0 {
				if err := h.Check(); err != nil {
					t.Fatalf("Check of a fresh folder: %v", err)
				}
			}
			if tc.break_ != nil {
				tc.break_(t, dir)
			}
			err := h.Check()
			var fe *FolderError
			if !errors.As(err, &fe) || !strings.Contains(err.Error(), dir) || !strings.Contains(err.Error(), tc.problem) || !strings.Contains(fe.Fix, tc.fix) {
				t.Fatalf("Check = %v (fix %q), want a FolderError naming %s, %q and the fix %q", err, fixOf(fe), dir, tc.problem, tc.fix)
			}
			if tc.is != nil && !errors.Is(err, tc.is) {
				t.Errorf("Check = %v, want it to wrap %v", err, tc.is)
			}
			r := h.Report()
			if r.Writable || r.Error == "" || !strings.Contains(r.Fix, tc.fix) || r.Since.IsZero() || !r.Failing() {
				t.Errorf("Report = %+v, want not writable with the error, the fix and since", r)
			}
		})
	}
}

func fixOf(fe *FolderError) string {
	if fe == nil {
		return ""
	}
	return fe.Fix
}

func mustRemove(t *testing.T, dir string) {
	t.Helper()
	if err := os.RemoveAll(dir); err != nil {
		t.Fatal(err)
	}
}

// TestWriterReportsOnce: a writer that keeps failing is logged once with
// the fix, its recovery once; the report follows, and the last error stays.
func TestWriterReportsOnce(t *testing.T) {
	dir := t.TempDir()
	var logs testenv.LogBuffer
	h := New(dir, &Options{Logger: logs.Logger()})
	cache := h.Writer("embedding cache", "searches embed without storing new vectors")
	ix := h.Writer("index", "the index is kept in memory")

	if r := h.Report(); !r.Writable || r.Failing() || len(r.Writers) != 2 || r.Error != "" || r.FreeBytes == 0 {
		t.Fatalf("healthy report = %+v", r)
	}
	mustRemove(t, dir)
	for range 50 {
		if cache.Check() == nil {
			t.Fatal("Check passed on a removed folder")
		}
	}
	cache.Fail(errors.New("write: no such file or directory"))
	if n := strings.Count(logs.String(), "storage fault:"); n != 1 {
		t.Fatalf("%d fault lines for one fault, want 1:\n%s", n, logs.String())
	}
	if !strings.Contains(logs.String(), "searches embed without storing new vectors") || !strings.Contains(logs.String(), "mkdir -p "+dir) {
		t.Errorf("fault line lacks what degrades or the fix:\n%s", logs.String())
	}
	r := h.Report()
	if r.Writable || !r.Failing() || r.Writers[0].OK || r.Writers[0].Failures != 51 || r.Writers[0].Since.IsZero() || !r.Writers[1].OK {
		t.Fatalf("report while failing = %+v", r)
	}
	if !strings.HasPrefix(r.LastError, "embedding cache: ") || r.LastErrorAt.IsZero() {
		t.Errorf("lastError = %q at %v", r.LastError, r.LastErrorAt)
	}

	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := cache.Check(); err != nil {
		t.Fatalf("Check after the folder is back: %v", err)
	}
	cache.OK()
	cache.OK()
	if n := strings.Count(logs.String(), "storage recovered:"); n != 1 {
		t.Fatalf("%d recovery lines, want 1:\n%s", n, logs.String())
	}
	r = h.Report()
	if !r.Writable || r.Failing() || r.Error != "" || !r.Since.IsZero() || r.LastError == "" {
		t.Errorf("report after recovery = %+v (lastError must stay)", r)
	}
	if cache.Failing() || ix.Failing() {
		t.Error("a writer still failing after recovery")
	}
}

// A store another gateway holds by design is said once and shown, and is
// no fault.
func TestWriterShared(t *testing.T) {
	var logs testenv.LogBuffer
	h := New(t.TempDir(), &Options{Logger: logs.Logger()})
	cache := h.Writer("embedding cache", "searches embed without storing new vectors")
	const note = "held by another toolgate on the data folder (pid 4242): this one embeds without the cache"
	cache.Shared(note)
	cache.Shared(note)
	if n := strings.Count(logs.String(), "embedding cache: "+note); n != 1 {
		t.Errorf("%d log lines for the note, want 1:\n%s", n, logs.String())
	}
	r := h.Report()
	if r.Failing() || !r.Writers[0].OK || r.Writers[0].Shared != note || r.Error != "" || strings.Contains(logs.String(), "storage fault") {
		t.Errorf("report of a shared store = %+v, want healthy with the note", r)
	}
	// The other process let it go: the note is cleared, quietly (the
	// store says it took over).
	before := logs.String()
	cache.Shared("")
	if r := h.Report(); r.Writers[0].Shared != "" || logs.String() != before {
		t.Errorf("cleared note: report %+v, log grew by %q", r, strings.TrimPrefix(logs.String(), before))
	}
}

func TestFixNamesTheCause(t *testing.T) {
	for err, want := range map[error]string{
		syscall.EROFS:         "read-write",
		syscall.EACCES:        "write access",
		syscall.ENOSPC:        "free space",
		syscall.EDQUOT:        "free space",
		os.ErrNotExist:        "mkdir -p /d",
		errors.New("mystery"): "check the data folder /d",
		// Not the folder's fault: the process's limits.
		&os.PathError{Op: "open", Path: "/d/learn/000001.sst", Err: syscall.EMFILE}: "open-files limit",
		syscall.ENFILE: "fs.file-max",
		syscall.ENOMEM: "ulimit -v",
	} {
		if got := Fix("/d", err); !strings.Contains(got, want) {
			t.Errorf("Fix(%v) = %q, want it to say %q", err, got, want)
		}
	}
	// A command to paste is quoted for the shell.
	if got, want := Fix("/srv/tool gate", os.ErrNotExist), "(mkdir -p '/srv/tool gate')"; !strings.Contains(got, want) {
		t.Errorf("Fix of a folder with a space = %q, want it to say %q", got, want)
	}
}

// TestFixNamesTheFileSystemThatFailed: a write that fails for want of space
// (or inodes, or on a read-only file system) in a folder of the data
// folder that is another file system (a log volume mounted at audit/)
// names that one, not the data folder's, which may have plenty free: the
// fix said "free space on the file system of DATA" while `df DATA` showed
// 56 GB free and the audit log's own 1 MiB volume was full.
func TestFixNamesTheFileSystemThatFailed(t *testing.T) {
	dir := t.TempDir()
	other := "/dev/shm" // a tmpfs of its own on Linux
	var ds, ss unix.Stat_t
	if unix.Stat(dir, &ds) != nil || unix.Stat(other, &ss) != nil || ds.Dev == ss.Dev {
		testenv.Missing(t, "%s on a file system other than %s's", other, dir)
		return
	}
	vol := filepath.Join(dir, "audit")
	if err := os.Symlink(other, vol); err != nil { // stat follows it, as it does a mount
		t.Fatal(err)
	}
	for _, errno := range []syscall.Errno{syscall.ENOSPC, syscall.EROFS} {
		err := fmt.Errorf("audit log: %w", &os.PathError{Op: "write", Path: filepath.Join(vol, "audit.jsonl"), Err: errno})
		if got := Fix(dir, err); !strings.Contains(got, "file system of "+vol+";") && !strings.Contains(got, "file system of "+vol+" read-write") {
			t.Errorf("Fix(%v) = %q, want it to name %s", err, got, vol)
		}
		// A write on the data folder's own file system names the data folder.
		err = &os.PathError{Op: "write", Path: filepath.Join(dir, "state.json"), Err: errno}
		if got := Fix(dir, err); !strings.Contains(got, "file system of "+dir) {
			t.Errorf("Fix(%v) = %q, want it to name %s", err, got, dir)
		}
	}
}

// A file where a folder of the data folder's path should be: the fix names
// that file (mkdir -p would fail on it).
func TestFixNamesTheFileInTheWay(t *testing.T) {
	f := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(f, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, dir := range []string{f, filepath.Join(f, "data", "more")} {
		h := New(dir, nil)
		err := h.Prepare()
		if err == nil {
			t.Fatalf("Prepare of %s: no error", dir)
		}
		if got := Fix(dir, err); !strings.Contains(got, "move the file "+f+" aside") {
			t.Errorf("Fix for %s = %q, want it to name %s", dir, got, f)
		}
	}
}

// A data folder that could not be made at the start (a file in its place,
// or on its path; a read-only mount is the same) is made by Check once the
// fix is applied, with no mkdir by the operator: the start would have made
// it. One that was there and vanished is not (the "removed" case of the table above).
func TestFolderNotMadeAtStartMadeOnceItCanBe(t *testing.T) {
	for _, c := range []struct{ name, sub string }{{"a file in its place", ""}, {"a file on its path", "data"}} {
		t.Run(c.name, func(t *testing.T) {
			f := filepath.Join(t.TempDir(), "file")
			if err := os.WriteFile(f, nil, 0o644); err != nil {
				t.Fatal(err)
			}
			dir := filepath.Join(f, c.sub)
			h := New(dir, nil)
			if err := h.Prepare(); err == nil {
				t.Fatal("Prepare: no error")
			}
			err := h.Check()
			if err == nil || !strings.Contains(Fix(dir, err), "move the file "+f+" aside") {
				t.Fatalf("Check before the fix = %v (fix %q), want the file named", err, Fix(dir, err))
			}
			if err := os.Remove(f); err != nil {
				t.Fatal(err)
			}
			if err := h.Check(); err != nil {
				t.Fatalf("Check once the file is aside = %v (fix %q), want the folder made", err, Fix(dir, err))
			}
			if r := h.Report(); !r.Writable || r.Failing() {
				t.Errorf("report once the folder is made: %+v", r)
			}
			// Made once: removed now, it is a fault again.
			if err := os.RemoveAll(f); err != nil {
				t.Fatal(err)
			}
			if err := h.Check(); err == nil || !errors.Is(err, os.ErrNotExist) {
				t.Errorf("Check after the folder made was removed = %v, want it missing", err)
			}
			if _, err := os.Stat(dir); err == nil {
				t.Error("the folder was made again after it had been there")
			}
		})
	}
}

// A file system out of inodes is said to be, not to be out of space: it
// may have plenty.
func TestFullSaysWhatIsShort(t *testing.T) {
	const minFree = 64 << 20
	for _, c := range []struct {
		name               string
		free, files, ffree uint64
		problem, fix, not  string
	}{
		{"inodes", 200 << 20, 60, 0, "out of inodes", "free inodes", "free space"},
		{"space", 1 << 20, 60, 10, "full file system (1.0 MiB free", "free space", "inodes"},
		{"both", 1 << 20, 60, 0, "no inodes free", "free space and files", "out of inodes"},
	} {
		t.Run(c.name, func(t *testing.T) {
			err := full("/d", c.free, 1<<30, c.files, c.ffree, minFree)
			var fe *FolderError
			if !errors.As(err, &fe) || !strings.Contains(fe.Problem, c.problem) || !strings.Contains(fe.Fix, c.fix) ||
				strings.Contains(fe.Problem+fe.Fix, c.not) || !errors.Is(err, syscall.ENOSPC) {
				t.Errorf("full = %v (fix %q), want %q, fix %q, and no %q", err, fixOf(fe), c.problem, c.fix, c.not)
			}
		})
	}
	if err := full("/d", 200<<20, 1<<30, 0, 0, minFree); err != nil { // no inode count (btrfs)
		t.Errorf("a file system that does not count inodes: %v", err)
	}
}

// A data folder on a file system smaller than the room toolgate keeps free
// (a tmpfs of 1 MiB) is said to be too small, with the fix to give it a
// larger one: "free space on the file system", the fix of a full one,
// could never be enough there.
func TestFileSystemTooSmall(t *testing.T) {
	mnt := t.TempDir()
	if err := unix.Mount("tmpfs", mnt, "tmpfs", 0, "size=1m"); err != nil {
		testenv.Missing(t, "mounting a tmpfs needs root (%v)", err)
	}
	t.Cleanup(func() { _ = unix.Unmount(mnt, unix.MNT_DETACH) })
	data := filepath.Join(mnt, "data")
	h := New(data, nil)
	if err := h.Prepare(); err != nil {
		t.Fatal(err)
	}
	err := h.Check()
	var fe *FolderError
	if !errors.As(err, &fe) || !strings.Contains(fe.Problem, "too small for toolgate (1.0 MiB in all") ||
		!strings.Contains(fe.Fix, "mount -o remount,size=256m "+mnt) || !strings.Contains(fe.Fix, "--data-dir") || !errors.Is(err, syscall.ENOSPC) {
		t.Errorf("Check = %v (fix %q), want a file system too small, with the fix to give it more room", err, fixOf(fe))
	}
	// A full file system of room enough keeps its fix: free space.
	if err := full("/d", 1<<20, 200<<20, 0, 0, DefaultMinFree); err == nil || !strings.Contains(Fix("/d", err), "free space on the file system") {
		t.Errorf("full of a large file system = %v (fix %q)", err, Fix("/d", err))
	}
}

// On a real file system out of inodes (a tmpfs with few, all used):
// Check, a start that cannot make the folder, and a write that fails with
// ENOSPC all say inodes, not space, with the inode fix.
func TestOutOfInodes(t *testing.T) {
	mnt := t.TempDir()
	if err := unix.Mount("tmpfs", mnt, "tmpfs", 0, "size=8m,nr_inodes=16"); err != nil {
		testenv.Missing(t, "mounting a tmpfs needs root (%v)", err)
	}
	t.Cleanup(func() { _ = unix.Unmount(mnt, unix.MNT_DETACH) })
	data := filepath.Join(mnt, "data")
	h := New(data, &Options{MinFree: 1 << 20})
	if err := h.Prepare(); err != nil {
		t.Fatal(err)
	}
	var werr error
	for i := 0; werr == nil && i < 100; i++ {
		werr = os.WriteFile(filepath.Join(data, fmt.Sprint(i)), nil, 0o644)
	}
	if !errors.Is(werr, syscall.ENOSPC) {
		t.Fatalf("filling the inodes: %v", werr)
	}
	if fix := Fix(data, werr); !strings.Contains(fix, "free inodes") {
		t.Errorf("Fix of a write refused for want of inodes = %q", fix)
	}
	err := h.Check()
	var fe *FolderError
	if !errors.As(err, &fe) || !strings.Contains(fe.Problem, "out of inodes") || !strings.Contains(fe.Fix, "free inodes") {
		t.Errorf("Check = %v (fix %q), want out of inodes", err, fixOf(fe))
	}
	err = New(filepath.Join(mnt, "other"), nil).Prepare()
	if !errors.As(err, &fe) || !strings.Contains(fe.Problem, "out of inodes") || !strings.Contains(fe.Fix, "free inodes") {
		t.Errorf("Prepare = %v (fix %q), want out of inodes", err, fixOf(fe))
	}
}

// A data folder that is a mount point, its volume unmounted under the
// gateway: the folder left there is another one (another device), so no
// store writes in it, and the fault says so with its fix. One removed and
// made again on the same file system (mkdir -p, the fix of a removal) is
// the folder from then on.
func TestFolderReplaced(t *testing.T) {
	data := filepath.Join(t.TempDir(), "data")
	if err := os.Mkdir(data, 0o755); err != nil {
		t.Fatal(err)
	}
	h := New(data, &Options{MinFree: 1 << 20})
	if err := h.Check(); err != nil {
		t.Fatal(err)
	}
	if err := os.RemoveAll(data); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(data, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := h.Check(); err != nil {
		t.Fatalf("Check of the folder made again on the same file system: %v", err)
	}

	if err := unix.Mount("tmpfs", data, "tmpfs", 0, "size=8m"); err != nil {
		testenv.Missing(t, "mounting a tmpfs needs root (%v)", err)
	}
	t.Cleanup(func() { _ = unix.Unmount(data, unix.MNT_DETACH) })
	h = New(data, &Options{MinFree: 1 << 20})
	if err := h.Check(); err != nil {
		t.Fatal(err)
	}
	if err := unix.Unmount(data, unix.MNT_DETACH); err != nil {
		t.Fatal(err)
	}
	err := h.Check()
	var fe *FolderError
	if !errors.Is(err, ErrReplaced) || !errors.As(err, &fe) || !strings.Contains(fe.Problem, "unmounted") || !strings.Contains(Fix(data, err), "mount the volume again at "+data) {
		t.Errorf("Check once the volume is unmounted = %v (fix %q), want ErrReplaced with the fix", err, fixOf(fe))
	}
	if err := h.Replaced(); !errors.Is(err, ErrReplaced) {
		t.Errorf("Replaced = %v", err)
	}
	if r := h.Report(); r.Writable {
		t.Errorf("report once the volume is unmounted: %+v", r)
	}
}

func TestPrepareNamesTheFolder(t *testing.T) {
	f := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(f, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	h := New(filepath.Join(f, "data"), nil)
	err := h.Prepare()
	if err == nil || !strings.Contains(err.Error(), filepath.Join(f, "data")) {
		t.Fatalf("Prepare under a file = %v, want an error naming the folder", err)
	}
}

// CommandFix names the fix of a command's write that its file system
// refused, with the nearest folder that exists, and nothing for other
// errors.
func TestCommandFix(t *testing.T) {
	dir := t.TempDir()
	gone := filepath.Join(dir, "gen-2", "catalog.bin") // its folder was removed by the failed write
	for _, tc := range []struct {
		errno syscall.Errno
		want  string
	}{
		{syscall.ENOSPC, "free space on the file system of " + dir + " "},
		{syscall.EDQUOT, "free space on the file system of " + dir + " "},
		{syscall.EROFS, dir + " is on a read-only file system: remount it read-write"},
		{syscall.EACCES, "give this user access to " + dir + " "},
		{syscall.EFBIG, "raise its file-size limit (ulimit -f unlimited; LimitFSIZE= in a systemd unit), then run the command again"},
	} {
		err := fmt.Errorf("index %s: %w", dir, &os.PathError{Op: "write", Path: gone, Err: tc.errno})
		if got := CommandFix(err); !strings.Contains(got, tc.want) {
			t.Errorf("CommandFix(%v) = %q, want it to say %q", err, got, tc.want)
		}
	}
	for _, err := range []error{errors.New("config: mcpServers: is empty"), &os.PathError{Op: "open", Path: gone, Err: syscall.ENOENT}} {
		if got := CommandFix(err); got != "" {
			t.Errorf("CommandFix(%v) = %q, want none", err, got)
		}
	}
}

// TestShortage: a process refused descriptors or memory is told apart from
// a fault of the folder, from the errno or from the message alone (Badger
// keeps only the message of a failed memory map).
func TestShortage(t *testing.T) {
	for err, want := range map[error]syscall.Errno{
		&os.PathError{Op: "open", Path: "/d/x", Err: syscall.EMFILE}:                                      syscall.EMFILE,
		errors.New("while mmapping /d/learn/000001.vlog with size: 33554432 err: cannot allocate memory"): syscall.ENOMEM,
		errors.New("open /d/learn/MANIFEST: too many open files in system"):                               syscall.ENFILE,
		errors.New("while truncation: truncate /d/cache/embeddings/00001.mem: file too large"):            syscall.EFBIG,
		&os.PathError{Op: "write", Path: "/d/index/x", Err: syscall.EFBIG}:                                syscall.EFBIG,
		errors.New("Value log truncate required to run DB. This might result in data loss"):               0,
		&os.PathError{Op: "open", Path: "/d/x", Err: syscall.EROFS}:                                       0,
	} {
		if got := Shortage(err); got != want {
			t.Errorf("Shortage(%v) = %v, want %v", err, got, want)
		}
	}
}

// TestMkdirBelow: folders are made below the root only; a missing root is
// an error and is not made; a file in the way is ENOTDIR; a folder outside
// the root is made as os.MkdirAll makes it.
func TestMkdirBelow(t *testing.T) {
	base := t.TempDir()
	root := filepath.Join(base, "data")
	deep := filepath.Join(root, "cache", "embeddings")
	if err := MkdirBelow(root, deep, 0o755); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("MkdirBelow under a missing root = %v, want ErrNotExist", err)
	}
	if err := MkdirBelow(root, root, 0o755); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("MkdirBelow of the missing root itself = %v, want ErrNotExist", err)
	}
	if _, err := os.Stat(root); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the missing root was made (%v)", err)
	}

	if err := os.Mkdir(root, 0o755); err != nil {
		t.Fatal(err)
	}
	for range 2 { // the second time, everything exists
		if err := MkdirBelow(root, deep, 0o700); err != nil {
			t.Fatal(err)
		}
		if fi, err := os.Stat(deep); err != nil || !fi.IsDir() || fi.Mode().Perm()&0o077 != 0 {
			t.Fatalf("made %s: %v, %v", deep, fi, err)
		}
	}
	if err := MkdirBelow(root, root, 0o755); err != nil {
		t.Fatalf("MkdirBelow of the root itself = %v", err)
	}

	if err := os.WriteFile(filepath.Join(root, "file"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := MkdirBelow(root, filepath.Join(root, "file", "sub"), 0o755); !errors.Is(err, syscall.ENOTDIR) {
		t.Errorf("MkdirBelow through a file = %v, want ENOTDIR", err)
	}
	if err := MkdirBelow(root, filepath.Join(root, "file"), 0o755); !errors.Is(err, syscall.ENOTDIR) {
		t.Errorf("MkdirBelow of a file = %v, want ENOTDIR", err)
	}

	outside := filepath.Join(base, "elsewhere", "audit")
	if err := MkdirBelow(root, outside, 0o755); err != nil {
		t.Fatalf("MkdirBelow outside the root = %v, want it made", err)
	}
	if _, err := os.Stat(outside); err != nil {
		t.Fatal(err)
	}
}

// TestMkdirBelowRacesRemoval: an rm -rf of the root while folders are made
// in it ends with no root, whichever wins each step (os.MkdirAll would
// make the root again whenever it ran after the removal's last step).
func TestMkdirBelowRacesRemoval(t *testing.T) {
	base := t.TempDir()
	for i := range 200 {
		root := filepath.Join(base, fmt.Sprint(i))
		deep := filepath.Join(root, "a", "b", "c")
		if err := os.MkdirAll(deep, 0o755); err != nil {
			t.Fatal(err)
		}
		removed := make(chan error, 1)
		go func() {
			var err error
			for range 1000 { // "directory not empty": remove what appeared meanwhile
				if err = os.RemoveAll(root); err == nil {
					break
				}
			}
			removed <- err
		}()
		for done := false; !done; {
			select {
			case err := <-removed:
				if err != nil {
					t.Fatal(err)
				}
				done = true
			default:
			}
			MkdirBelow(root, deep, 0o755) // fails once the root is gone
		}
		if _, err := os.Stat(root); !errors.Is(err, os.ErrNotExist) {
			t.Fatalf("round %d: the removed root is there again (%v)", i, err)
		}
	}
}

// TestHealthMkdirAll: a store's folder is made in the data folder, but a
// data folder removed while toolgate runs is reported (with Check's
// problem and fix), not made again.
func TestHealthMkdirAll(t *testing.T) {
	data := filepath.Join(t.TempDir(), "data")
	h := New(data, nil)
	if err := h.Prepare(); err != nil {
		t.Fatal(err)
	}
	w := h.Writer("embedding cache", "searches embed without storing new vectors")
	store := filepath.Join(data, "cache", "embeddings")
	if err := w.MkdirAll(store, 0o755); err != nil {
		t.Fatal(err)
	}
	mustRemove(t, data)
	err := w.MkdirAll(store, 0o755)
	var fe *FolderError
	if !errors.As(err, &fe) || !strings.Contains(fe.Problem, "does not exist") || !strings.Contains(fe.Fix, "mkdir -p") {
		t.Fatalf("MkdirAll in a removed data folder = %v, want the folder error with its fix", err)
	}
	if _, err := os.Stat(data); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the removed data folder was made again (%v)", err)
	}
}

// A store whose files this user may not open (Badger says only "permission
// denied") is reported as such, not as damage nor as the data folder's
// fault, with the fix that gives the files back; the folder stays writable.
func TestStoreDenied(t *testing.T) {
	dir := t.TempDir()
	h := New(dir, nil)
	learned := h.Writer("learned pairs", "pairs are not recorded")
	store := filepath.Join(dir, "learn")
	badger := fmt.Errorf(`Cannot write pid file "%s/LOCK" err: open %s/LOCK: permission denied`, store, store) // the errno lost
	if !Denied(badger) || Denied(errors.New("file does not exist")) {
		t.Fatal("Denied does not read Badger's message")
	}
	learned.Fail(StoreDenied(store, badger))
	r := h.Report()
	w := r.Writers[0]
	if !r.Writable || w.OK || !strings.Contains(w.Error, store+" holds files this user may not open") || !strings.Contains(w.Fix, "chown -R ") || !strings.Contains(w.Fix, store) {
		t.Errorf("report = %+v, writer %+v: want the folder writable and the store's files named, with chown -R", r, w)
	}
	if got := StoreDenied(store, errors.New("unexpected EOF")); Denied(got) {
		t.Errorf("StoreDenied(%v) calls damage a denial", got)
	}
}

// TestExposed: the folders a toolgate before FolderMode made 0755 are kept
// so by MkdirOwnerOnly; Exposed names them with the chmod that closes
// them. A data folder others may only read (models fetch makes the
// default one 0755), a store a group may read (a choice) and one not made
// yet pass; a data folder others may write in is said with its own fix,
// not a -R that would close the models folder in it too.
func TestExposed(t *testing.T) {
	data := filepath.Join(t.TempDir(), "data")
	mk := func(p string, mode os.FileMode) string {
		t.Helper()
		if err := os.MkdirAll(p, 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(p, mode); err != nil {
			t.Fatal(err)
		}
		return p
	}
	mk(data, 0o755)
	mk(filepath.Join(data, "models"), 0o755)
	index := mk(filepath.Join(data, "index"), 0o755)
	cache := mk(filepath.Join(data, "cache"), 0o755)
	embeddings := mk(filepath.Join(cache, "embeddings"), 0o755)
	learn := mk(filepath.Join(data, "learn"), 0o750)
	audit := mk(filepath.Join(data, "audit"), 0o700)
	stores := []string{index, cache, embeddings, learn, audit, filepath.Join(data, "auth")}

	open, fix := Exposed(data, stores)
	if want := fmt.Sprintf("%s (0755), %s (0755), %s (0755)", index, cache, embeddings); open != want {
		t.Errorf("open = %q, want %q", open, want)
	}
	// The gateway's report says it (toolgate status), as found at each report.
	h := New(data, &Options{Stores: stores})
	if r := h.Report(); r.Open != open || r.OpenFix != fix {
		t.Errorf("Report: open %q, fix %q; want %q, %q", r.Open, r.OpenFix, open, fix)
	}
	if want := fmt.Sprintf("chmod -R go= %s %s", index, cache); fix != want {
		t.Errorf("fix = %q, want %q", fix, want)
	}
	// Not chmod'ed: the operator is told.
	if fi, err := os.Stat(index); err != nil || fi.Mode().Perm() != 0o755 {
		t.Errorf("index/ is %v (%v), want left 0755", fi.Mode(), err)
	}

	mk(data, 0o777)
	if open, fix := Exposed(data, stores); !strings.HasPrefix(open, data+" (0777), ") || !strings.HasPrefix(fix, "chmod o-w "+data+" && chmod -R go= ") {
		t.Errorf("a data folder others may write in: %q, %q", open, fix)
	}
	for _, p := range []string{data, index, cache, embeddings} {
		mk(p, 0o700)
	}
	if open, fix := Exposed(data, stores); open != "" || fix != "" {
		t.Errorf("owner-only folders: %q, %q", open, fix)
	}
	if r := h.Report(); r.Open != "" || r.OpenFix != "" {
		t.Errorf("Report once closed: open %q, fix %q", r.Open, r.OpenFix)
	}
}

// A data folder replaced by a symlink to a folder on another file system
// (moved to a larger disk while serving: mv, then ln -s) is not followed,
// as an unmounted volume's is not, and the fault says it is a link and to
// where, with the fix of a link: it said the volume mounted there may
// have been unmounted, and to mount it again.
func TestFolderReplacedBySymlink(t *testing.T) {
	data := filepath.Join(t.TempDir(), "data")
	if err := os.Mkdir(data, 0o755); err != nil {
		t.Fatal(err)
	}
	elsewhere, err := os.MkdirTemp("/dev/shm", "toolgate-test-")
	if err != nil {
		testenv.Missing(t, "no /dev/shm for a folder on another file system (%v)", err)
	}
	t.Cleanup(func() { os.RemoveAll(elsewhere) })
	var a, b unix.Stat_t
	if unix.Stat(data, &a) != nil || unix.Stat(elsewhere, &b) != nil || a.Dev == b.Dev {
		testenv.Missing(t, "/dev/shm is on the same file system as %s", data)
	}
	h := New(data, &Options{MinFree: 1 << 20})
	if err := h.Check(); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(data, data+".old"); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(elsewhere, data); err != nil {
		t.Fatal(err)
	}
	err = h.Check()
	var fe *FolderError
	if !errors.Is(err, ErrReplaced) || !errors.As(err, &fe) || !strings.Contains(fe.Problem, "is a symlink to "+elsewhere) || strings.Contains(fe.Problem, "the volume mounted there may have been unmounted") ||
		!strings.Contains(fe.Fix, "restart toolgate to use "+elsewhere) || strings.Contains(fe.Fix, "mount the volume again at "+data) {
		t.Errorf("Check once the folder is a symlink to another file system = %v (fix %q), want ErrReplaced naming the link and its fix", err, fixOf(fe))
	}
}
