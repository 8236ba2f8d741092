// Package storage owns the health of toolgate's data folder while a
// process runs: whether the folder can take a write now (Check), what each
// store that writes there last reported (a Writer's Fail and OK), and the
// report that GET /status and `toolgate status` show (Report).
//
// A store that writes in the data folder (the index, the embedding cache,
// the logins, and any store added later) plugs in the same way:
//
//	w := health.Writer("learned pairs", "searches rank without what was learned since")
//	...
//	if err := w.Check(); err != nil {
//		return // the folder cannot take a write: serve without writing
//	}
//	if err := write(); err != nil {
//		w.Fail(err) // logged once per fault, with the fix; /status shows it
//	} else {
//		w.OK() // logged once when a failing writer writes again
//	}
//
// and in its Close skips what would flush to a folder that Check refuses
// (Badger, for one, retries a failed flush forever and Close waits for it).
// Each store takes a Gate (what *Writer does for it: Check, Fail, OK, and
// MkdirAll, which makes its folder but never the data folder again), and
// main wires them; a store opened without a Health gets Unchecked.
//
// Check looks before a write rather than after a failure because some
// failures cannot be recovered from: Badger writes through memory-mapped
// files, and a full disk under a mapping kills the process with SIGBUS
// instead of returning an error. So a folder with less than MinFree bytes
// free counts as full.
package storage

import (
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"os/user"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/toolgate/toolgate/internal/datafile"
	"github.com/toolgate/toolgate/internal/shellword"
)

// DefaultMinFree is the free space below which the data folder counts as
// full: room for the embedding cache's next memtable (8 MiB, written
// through a memory map), its flush and a compaction, with a margin.
const DefaultMinFree = 64 << 20

// FolderMode is the mode of the data folder and of the stores' folders in
// it (index/, cache/embeddings, learn/) when toolgate makes them: owner-only
// whatever the umask. The data folder holds the API keys, logins, audit log
// and learned queries; Badger creates its files 0666 less the umask, so under
// umask 000 the learned pairs and the cache were any local user's to write,
// and under the usual 022 any user's to read, in a data folder made 0755.
const FolderMode fs.FileMode = 0o700

// MkdirOwnerOnly makes dir FolderMode, and the folders above it that are
// missing as os.MkdirAll does (0755: ~/.local/share is not toolgate's). One
// that is there is left as it is: a folder the operator made (a systemd
// StateDirectory=) keeps the mode given.
func MkdirOwnerOnly(dir string) error {
	if err := os.MkdirAll(filepath.Dir(dir), 0o755); err != nil {
		return err
	}
	err := os.Mkdir(dir, FolderMode)
	if errors.Is(err, fs.ErrExist) {
		if fi, serr := os.Stat(dir); serr == nil && fi.IsDir() {
			return nil
		}
		// A file in its place: ENOTDIR, as os.MkdirAll says it (Fix names it).
		err = &fs.PathError{Op: "mkdir", Path: dir, Err: syscall.ENOTDIR}
	}
	return err
}

// Exposed says which of the data folder dir and its stores' folders
// (stores, paths in it) are open to every user of this machine beyond what
// toolgate makes them, and the command that closes them; ("", "") when
// none is. A toolgate before FolderMode made them all 0755, and
// MkdirOwnerOnly leaves a folder that is there as it is, so an upgrade
// keeps them readable (the queries searched, the learned pairs). A store
// counts when others may enter it at all; the data folder when they may
// write in it (rename keys.jsonl): reading it shows names only, its files
// and folders being owner-only, and models fetch makes the default one
// 0755. A group given access is a choice, and passes, as tlsfiles.Exposed
// passes a key's. The fix names each folder rather than the data folder
// with -R: the models folder in it may be shared on purpose.
func Exposed(dir string, stores []string) (open, fix string) {
	var opened, stripped []string
	mode := func(p string) fs.FileMode {
		fi, err := os.Stat(p)
		if err != nil || !fi.IsDir() {
			return 0
		}
		return fi.Mode().Perm()
	}
	var cmds []string
	if m := mode(dir); m&0o002 != 0 {
		opened = append(opened, fmt.Sprintf("%s (%04o)", dir, m))
		cmds = append(cmds, shellword.Join("chmod", "o-w", dir))
	}
	for _, p := range stores {
		if m := mode(p); m&0o007 != 0 {
			opened = append(opened, fmt.Sprintf("%s (%04o)", p, m))
			if !slices.ContainsFunc(stripped, func(q string) bool { return strings.HasPrefix(p, q+string(filepath.Separator)) }) {
				stripped = append(stripped, p) // cache/embeddings goes with cache/
			}
		}
	}
	if len(stripped) > 0 {
		cmds = append(cmds, shellword.Join(append([]string{"chmod", "-R", "go="}, stripped...)...))
	}
	return strings.Join(opened, ", "), strings.Join(cmds, " && ")
}

// Options configure New. Nil means defaults.
type Options struct {
	Logger *slog.Logger // nil = discard
	// MinFree is the free space, in bytes, below which the folder counts as
	// full (default DefaultMinFree).
	MinFree uint64
	// Now is the clock of the report's times (default time.Now).
	Now func() time.Time
	// Stores are the stores' folders in the data folder, which Report
	// checks for being open to every user (Exposed).
	Stores []string
}

// Health is the data folder's health as the writers of one process see it.
// Its methods are safe for concurrent use.
type Health struct {
	dir string
	o   Options
	log *slog.Logger
	// create is set while a folder that Prepare could not make has not
	// been there yet: the start would have made it, so Check makes it once
	// it can (the file system remounted read-write, the file in its place
	// moved aside). Once the folder is there it is cleared for good: a
	// folder that vanishes after that is not made again.
	create atomic.Bool
	// id is the data folder's device and inode as toolgate writes there:
	// taken when Check first finds it, and again when it was made again on
	// the same file system (an operator's mkdir -p after a removal). One on
	// another device is another folder: a volume unmounted from under it.
	id atomic.Pointer[folderID]

	mu        sync.Mutex
	writers   []*Writer
	downSince time.Time // when a check first failed in the current fault; zero while writable
	lastErr   string    // the latest failure any writer reported, kept after recovery
	lastErrAt time.Time
}

// New returns the health of the data folder dir. It writes nothing and
// starts nothing.
func New(dir string, opts *Options) *Health {
	var o Options
	if opts != nil {
		o = *opts
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.MinFree == 0 {
		o.MinFree = DefaultMinFree
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	return &Health{dir: dir, o: o, log: o.Logger}
}

// Dir is the data folder.
func (h *Health) Dir() string { return h.dir }

// Prepare creates the data folder (and its parents) if it does not exist.
// Only a start does this: a folder that vanishes while toolgate runs is a
// fault that Check reports, not something to create again behind the
// operator's back (it may be a volume that is no longer mounted). A
// folder that Prepare cannot make (a read-only mount, a file in its
// place) is made by Check once it can be: it was never there at this
// start, so nothing was unmounted.
func (h *Health) Prepare() error {
	if err := MkdirOwnerOnly(h.dir); err != nil {
		if fi, serr := os.Stat(h.dir); serr != nil || !fi.IsDir() {
			h.create.Store(true)
		}
		return h.folderError(err)
	}
	h.create.Store(false)
	return nil
}

// MkdirAll makes dir, a store's folder in the data folder, and the folders
// on its way, as MkdirBelow does from the data folder: a data folder that
// vanished while toolgate runs stays gone (the error is Check's, with the
// fix), even when it vanishes during the call.
func (h *Health) MkdirAll(dir string, perm fs.FileMode) error {
	err := MkdirBelow(h.dir, dir, perm)
	if errors.Is(err, fs.ErrNotExist) {
		if _, serr := os.Stat(h.dir); serr != nil {
			return h.folderError(serr)
		}
	}
	return err
}

// MkdirBelow makes dir and the folders missing on its way from root, as
// os.MkdirAll does, but never root itself or what is above it: a missing
// root is an error (fs.ErrNotExist). Each folder is made by one mkdir in
// its parent, so a root removed at the same moment (an rm -rf under way)
// is not made again. A dir outside root is made as os.MkdirAll makes it.
func MkdirBelow(root, dir string, perm fs.FileMode) error {
	rel, err := filepath.Rel(root, dir)
	if err != nil || rel == ".." || strings.HasPrefix(rel, ".."+string(filepath.Separator)) {
		return os.MkdirAll(dir, perm)
	}
	p := filepath.Clean(root)
	folderThere := func(p string) error {
		fi, err := os.Stat(p)
		if err == nil && !fi.IsDir() {
			err = &fs.PathError{Op: "mkdir", Path: p, Err: syscall.ENOTDIR}
		}
		return err
	}
	if rel == "." {
		return folderThere(p)
	}
	for _, part := range strings.Split(rel, string(filepath.Separator)) {
		p = filepath.Join(p, part)
		err := os.Mkdir(p, perm)
		if errors.Is(err, fs.ErrExist) {
			err = folderThere(p)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// FolderError is a data folder that cannot take writes: what is wrong and
// the fix.
type FolderError struct {
	Dir     string
	Problem string // e.g. "does not exist (removed while toolgate runs?)"
	Fix     string
	Err     error // the underlying error, if any
}

func (e *FolderError) Error() string { return fmt.Sprintf("data folder %s %s", e.Dir, e.Problem) }

func (e *FolderError) Unwrap() error { return e.Err }

// Check reports whether the data folder can take a write now: it exists,
// is a folder, is writable (not on a read-only mount, not denied), and has
// MinFree bytes and some inodes free. It costs three system calls.
func (h *Health) Check() error {
	_, err := h.probe()
	h.mu.Lock()
	defer h.mu.Unlock()
	if err != nil && h.downSince.IsZero() {
		h.downSince = h.o.Now()
	}
	if err == nil {
		h.downSince = time.Time{}
	}
	return err
}

// probe checks the folder and returns its free bytes.
func (h *Health) probe() (uint64, error) {
	fi, err := os.Stat(h.dir)
	if err != nil && h.create.Load() {
		// Never there at this start: made now if it can be.
		if merr := MkdirOwnerOnly(h.dir); merr != nil {
			return 0, h.folderError(merr)
		}
		if h.create.CompareAndSwap(true, false) {
			h.log.Info("created the data folder: it could not be made at the start", "dir", h.dir)
		}
		fi, err = os.Stat(h.dir)
	}
	if err != nil {
		return 0, h.folderError(err)
	}
	if !fi.IsDir() {
		then := "toolgate writes again once a folder is there"
		if h.create.Load() {
			then = "toolgate then makes the folder and writes there"
		}
		return 0, &FolderError{Dir: h.dir, Problem: "is not a folder (a file is in its place)",
			Fix: fmt.Sprintf("move the file %s aside; %s", h.dir, then)}
	}
	h.create.Store(false)
	if err := h.same(fi); err != nil {
		return 0, err
	}
	if err := unix.Access(h.dir, unix.W_OK|unix.X_OK); err != nil {
		return 0, h.folderError(err)
	}
	st, err := statfs(h.dir)
	if err != nil {
		return 0, h.folderError(err)
	}
	free := freeOf(st)
	return free, full(h.dir, free, roomOf(st), st.Files, st.Ffree, h.o.MinFree)
}

// full is the fault of a file system with free bytes and ffree of files
// inodes free, or nil when it has room: more than minFree bytes and, where
// it counts inodes, one at least. It says which is short, space or inodes
// (the free files: a disk with room can still refuse every new file), and
// a file system whose room (all it could ever have free) is not more than
// minFree as too small: freeing space there, the fix of a full one, can
// never be enough (a tmpfs of a few MiB, a small volume).
func full(dir string, free, room, files, ffree, minFree uint64) error {
	noSpace, noInodes := free < minFree, files > 0 && ffree == 0
	switch {
	case noSpace && room <= minFree:
		return &FolderError{Dir: dir, Err: syscall.ENOSPC,
			Problem: fmt.Sprintf("is on a file system too small for toolgate (%s in all, %s free; toolgate stops writing below %s free)", mib(room), mib(free), mib(minFree)),
			Fix:     fmt.Sprintf("give the data folder a file system with more than %s free: make this one larger (a tmpfs: mount -o remount,size=256m %s), or move the data folder to another one (--data-dir or TOOLGATE_DATA_DIR); freeing space here is not enough", mib(minFree), shellword.Join(mountPoint(dir)))}
	case noSpace && noInodes:
		return &FolderError{Dir: dir, Err: syscall.ENOSPC,
			Problem: fmt.Sprintf("is on a full file system (%s free, toolgate stops writing below %s; and no inodes free: no new file can be made)", mib(free), mib(minFree)),
			Fix:     fmt.Sprintf("free space and files on the file system of %s (delete files); toolgate writes again once it has more than %s and some inodes free", dir, mib(minFree))}
	case noSpace:
		return &FolderError{Dir: dir, Err: syscall.ENOSPC,
			Problem: fmt.Sprintf("is on a full file system (%s free; toolgate stops writing below %s)", mib(free), mib(minFree)),
			Fix:     fmt.Sprintf("free space on the file system of %s; toolgate writes again once it has more than %s free", dir, mib(minFree))}
	case noInodes:
		return &FolderError{Dir: dir, Err: syscall.ENOSPC,
			Problem: fmt.Sprintf("is on a file system out of inodes (0 of %d free: no new file can be made, though %s of space is free)", files, mib(free)),
			Fix:     inodesFix(dir) + "; toolgate writes again once files can be made there"}
	}
	return nil
}

// inodesFix is what the operator does about a file system out of inodes.
func inodesFix(dir string) string {
	return fmt.Sprintf("free inodes on the file system of %s: delete files (many small ones count most), or give it more inodes (a tmpfs: mount -o remount,nr_inodes=N)", dir)
}

// outOfInodes reports whether the file system of dir (or of the nearest
// folder on its way that exists) counts inodes and has none free: what
// an ENOSPC means there, though space may be free.
func outOfInodes(dir string) bool {
	for p := filepath.Clean(dir); ; p = filepath.Dir(p) {
		if st, err := statfs(p); err == nil {
			return st.Files > 0 && st.Ffree == 0
		}
		if filepath.Dir(p) == p {
			return false
		}
	}
}

// folderID is a folder's device and inode.
type folderID struct{ dev, ino uint64 }

// ErrReplaced is the error of a data folder that is on another file system
// than when toolgate first wrote there (FolderError.Err).
var ErrReplaced = errors.New("the data folder is on another file system than when toolgate started writing there")

// same checks that fi, the data folder now, is the folder toolgate writes
// in: the first one it finds is, and so is one made again on the same file
// system (it becomes the folder); one on another device is not (the volume
// mounted there was unmounted, and this is the folder it hid): writing
// there would hide the fault.
func (h *Health) same(fi fs.FileInfo) error {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return nil
	}
	now := &folderID{dev: uint64(st.Dev), ino: st.Ino}
	was := h.id.Load()
	switch {
	case was == nil:
		h.id.CompareAndSwap(nil, now)
	case was.dev != now.dev:
		if target, err := os.Readlink(h.dir); err == nil {
			// A link the operator made (the folder moved to a larger
			// disk while serving: mv, then ln -s) or retargeted, or the
			// volume at its target unmounted: not followed either.
			if !filepath.IsAbs(target) {
				target = filepath.Join(filepath.Dir(h.dir), target)
			}
			return &FolderError{Dir: h.dir, Err: ErrReplaced,
				Problem: fmt.Sprintf("is a symlink to %s, which is on another file system (device %d:%d, was %d:%d) than the folder toolgate wrote in: the link was made or changed, or the volume at %s unmounted, and toolgate does not follow its data folder to another file system while it runs",
					target, unix.Major(now.dev), unix.Minor(now.dev), unix.Major(was.dev), unix.Minor(was.dev), target),
				Fix: fmt.Sprintf("restart toolgate to use %s (with the files of the folder it wrote in: its API keys, quarantine pins, learned pairs and index, copied there if they are not), or point %s back at the folder it wrote in", target, h.dir)}
		}
		return &FolderError{Dir: h.dir, Err: ErrReplaced,
			Problem: fmt.Sprintf("is another folder than the one toolgate wrote in: it is on another file system (device %d:%d, was %d:%d), so the volume mounted there may have been unmounted",
				unix.Major(now.dev), unix.Minor(now.dev), unix.Major(was.dev), unix.Minor(was.dev)),
			Fix: fmt.Sprintf("mount the volume again at %s (toolgate writes again once its file system is back), or restart toolgate to use the folder there now", h.dir)}
	case was.ino != now.ino:
		if h.id.CompareAndSwap(was, now) {
			h.log.Info("the data folder was made again: toolgate writes in the new one", "dir", h.dir)
		}
	}
	return nil
}

// Replaced returns the fault of a data folder that is another one than
// toolgate wrote in (see Check), or nil: what a writer that does not ask
// Check (the status socket) must not write into.
func (h *Health) Replaced() error {
	fi, err := os.Stat(h.dir)
	if err != nil || !fi.IsDir() {
		return nil
	}
	return h.same(fi)
}

func mib(b uint64) string { return fmt.Sprintf("%.1f MiB", float64(b)/(1<<20)) }

// folderError names what err says about the folder and its fix.
func (h *Health) folderError(err error) *FolderError {
	var fe *FolderError
	if errors.As(err, &fe) {
		return fe
	}
	e := &FolderError{Dir: h.dir, Err: err, Problem: fmt.Sprintf("cannot take writes: %v", err), Fix: Fix(h.dir, err)}
	var de *DeniedError
	switch {
	case errors.As(err, &de):
		e.Problem = "has a store whose files this user may not open: " + de.Error()
	case errors.Is(err, os.ErrNotExist) && h.create.Load():
		e.Problem = "does not exist: it could not be made at this start (toolgate makes it once it can)"
	case errors.Is(err, os.ErrNotExist):
		e.Problem = "does not exist (removed while toolgate runs, or an unmounted volume?)"
	case errors.Is(err, syscall.ENOTDIR):
		e.Problem = "is not reachable: a file stands where a folder on its path should be"
	case errors.Is(err, syscall.EROFS):
		e.Problem = "is on a read-only file system"
	case errors.Is(err, os.ErrPermission):
		e.Problem = "is not writable by this user"
		if _, serr := os.Stat(h.dir); serr != nil {
			e.Problem = "cannot be made by this user"
		}
	case errors.Is(err, syscall.ENOSPC) && outOfInodes(h.dir):
		e.Problem = "is on a file system out of inodes (no new file can be made, though space may be free)"
	case errors.Is(err, syscall.ENOSPC), errors.Is(err, syscall.EDQUOT):
		e.Problem = "is on a full file system (or over quota)"
	case errors.Is(err, syscall.EMFILE), errors.Is(err, syscall.ENFILE):
		e.Problem = "cannot be written: toolgate has no file descriptors left (the folder itself may be fine)"
	}
	return e
}

// FreeBytes is the space this user may still write on dir's file system.
func FreeBytes(dir string) (uint64, error) {
	st, err := statfs(dir)
	return freeOf(st), err
}

func statfs(dir string) (unix.Statfs_t, error) {
	var st unix.Statfs_t
	err := unix.Statfs(dir, &st)
	return st, err
}

func freeOf(st unix.Statfs_t) uint64 { return st.Bavail * uint64(st.Bsize) }

// faultDir is the folder whose file system a fix for err, a failure to
// write in the data folder dir, names: dir, or, when the path that failed
// (the nearest folder on its way that exists) is on another file system
// than dir (a volume mounted at dir/audit), that file system's mount point.
func faultDir(dir string, err error) string {
	var pe *fs.PathError
	var ds, ps unix.Stat_t
	if !errors.As(err, &pe) || unix.Stat(dir, &ds) != nil {
		return dir
	}
	p := filepath.Dir(filepath.Clean(pe.Path))
	for unix.Stat(p, &ps) != nil {
		if filepath.Dir(p) == p {
			return dir
		}
		p = filepath.Dir(p)
	}
	if ps.Dev == ds.Dev {
		return dir
	}
	return mountPoint(p)
}

// mountPoint is the folder the file system of dir is mounted at: the
// highest folder on dir's way on the same device (dir itself when its
// device cannot be read).
func mountPoint(dir string) string {
	var st unix.Stat_t
	if unix.Stat(dir, &st) != nil {
		return dir
	}
	p := filepath.Clean(dir)
	for p != filepath.Dir(p) {
		var up unix.Stat_t
		if unix.Stat(filepath.Dir(p), &up) != nil || up.Dev != st.Dev {
			break
		}
		p = filepath.Dir(p)
	}
	return p
}

// roomOf is the most a file system could have free for this user: its size
// less what is reserved for root (Bfree - Bavail).
func roomOf(st unix.Statfs_t) uint64 {
	return (st.Blocks - min(st.Bfree-st.Bavail, st.Blocks)) * uint64(st.Bsize)
}

// Fix says what an operator does about err, a failure to write in the data
// folder dir. A file system's refusal (full, out of inodes, read-only)
// names the file system the write failed on: a volume mounted inside dir
// (the audit log's folder on a log volume) is another one than dir's.
func Fix(dir string, err error) string {
	var fe *FolderError
	var de *DeniedError
	at := faultDir(dir, err)
	switch {
	case errors.As(err, &fe) && fe.Fix != "":
		return fe.Fix
	case errors.As(err, &de):
		return DeniedFix(de.Dir)
	case errors.Is(err, os.ErrNotExist), errors.Is(err, syscall.ENOTDIR):
		if f := fileOnPath(dir); f != "" {
			return fmt.Sprintf("move the file %s aside (it stands where a folder of %s should be); writers resume by themselves once the folder can be made", f, dir)
		}
		return fmt.Sprintf("create the folder again (%s): writers resume by themselves once it is there, and write back what they hold in memory (a restart creates it too, but what was held only in memory is lost)", shellword.Join("mkdir", "-p", dir))
	case errors.Is(err, syscall.EROFS):
		return fmt.Sprintf("remount the file system of %s read-write, or restart toolgate with --data-dir on a writable one; writers resume by themselves once it is writable", at)
	case errors.Is(err, os.ErrPermission):
		if _, serr := os.Stat(dir); serr != nil {
			// Not there: what keeps this user from making it.
			if p, folder := deniedPath(err); p != "" {
				if fix := AccessFix(p, folder); fix != "" {
					return fix + "; writers resume by themselves once it can be made"
				}
			}
		}
		return fmt.Sprintf("give this user write access to %s (chown/chmod), or restart toolgate with another --data-dir; writers resume by themselves once it is writable", dir)
	case errors.Is(err, syscall.ENOSPC) && outOfInodes(at):
		return inodesFix(at) + "; writers resume by themselves once files can be made there"
	case errors.Is(err, syscall.ENOSPC), errors.Is(err, syscall.EDQUOT):
		return fmt.Sprintf("free space on the file system of %s; writers resume by themselves once there is room", at)
	case Shortage(err) == syscall.ENFILE:
		return ShortageFix(syscall.ENFILE) + "; writers resume by themselves once descriptors are free"
	case Shortage(err) == syscall.EMFILE:
		return ShortageFix(syscall.EMFILE) + ", or have fewer clients connected or servers configured; the data folder is fine, and writers resume by themselves once descriptors are free"
	case Shortage(err) == syscall.ENOMEM:
		return ShortageFix(syscall.ENOMEM) + "; writers try again on their next write"
	case Shortage(err) == syscall.EFBIG:
		return ShortageFix(syscall.EFBIG) + "; the data folder is fine, and writers try again on their next write"
	}
	return fmt.Sprintf("check the data folder %s and its file system (the error says what failed); writers try again on their next write", dir)
}

// fileOnPath returns the first path on the way to dir (dir included) that
// exists and is not a folder: the file that keeps dir from being made; ""
// when there is none.
func fileOnPath(dir string) string {
	var at string
	for p := filepath.Clean(dir); ; p = filepath.Dir(p) {
		if fi, err := os.Stat(p); err == nil && !fi.IsDir() {
			at = p // the nearest to the root wins: keep climbing
		}
		if parent := filepath.Dir(p); parent == p {
			return at
		}
	}
}

// Shortage returns EMFILE, ENFILE, ENOMEM or EFBIG when err says the
// process was refused a file descriptor, memory (a memory map, under
// ulimit -v or a memory limit) or a file as large as it wrote (a file-size
// limit), else 0: not a fault of the folder, of what it holds, or of
// the files a library loads. Libraries that keep only the message are read
// by it: Badger's, and ONNX Runtime's (its errno as "system error number
// N", its C++ allocator's std::bad_alloc, the dynamic loader's "failed to
// map segment" under an address-space limit).
func Shortage(err error) syscall.Errno {
	if err == nil {
		return 0
	}
	msg := strings.ToLower(err.Error())
	for _, e := range []struct {
		errno syscall.Errno
		says  []string
	}{
		{syscall.ENFILE, []string{"too many open files in system", "system error number 23"}},
		{syscall.EMFILE, []string{"too many open files", "system error number 24"}},
		{syscall.ENOMEM, []string{"cannot allocate memory", "system error number 12", "bad_alloc", "failed to map segment"}},
		// A file-size limit (ulimit -f, LimitFSIZE=): Badger's memtable,
		// made at its full size when a store opens, is refused; Go
		// ignores the SIGXFSZ that would otherwise end the process.
		{syscall.EFBIG, []string{"file too large", "system error number 27"}},
	} {
		if errors.Is(err, e.errno) || slices.ContainsFunc(e.says, func(s string) bool { return strings.Contains(msg, s) }) {
			return e.errno
		}
	}
	return 0
}

// WriteFault reports whether err, a failed write in the data folder, is
// the folder's (full, out of quota, read-only, failing, gone, not a
// folder, denied) or a limit's (descriptors, the file-size limit) rather
// than what was written's: Fix words what to do about it.
func WriteFault(err error) bool {
	for _, e := range []syscall.Errno{syscall.ENOSPC, syscall.EDQUOT, syscall.EROFS, syscall.EIO, syscall.ENOENT, syscall.ENOTDIR,
		syscall.EACCES, syscall.EPERM, syscall.EMFILE, syscall.ENFILE, syscall.EFBIG} {
		if errors.Is(err, e) {
			return true
		}
	}
	return false
}

// Denied reports whether err says this user may not open or write a file
// of a store (EACCES, EPERM; Badger keeps only the message): its files are
// another user's (a data folder copied or restored by root, a command run
// as root), which is not damage. Moving such a store aside lost what it held.
func Denied(err error) bool {
	return err != nil && (errors.Is(err, os.ErrPermission) || strings.Contains(strings.ToLower(err.Error()), "permission denied"))
}

// DeniedError is a store in Dir whose files this user may not open
// (Denied): not damaged, and not a fault of the data folder itself, which
// may take writes.
type DeniedError struct {
	Dir string
	Err error
}

// StoreDenied is err, a store in dir that could not be opened, as a
// *DeniedError when Denied says so, else err.
func StoreDenied(dir string, err error) error {
	if Denied(err) {
		return &DeniedError{Dir: dir, Err: err}
	}
	return err
}

func (e *DeniedError) Error() string {
	return fmt.Sprintf("%s holds files this user may not open (%v)", e.Dir, e.Err)
}

func (e *DeniedError) Unwrap() error { return e.Err }

// DeniedFix is the fix for a store in dir whose files this user may not
// open (Denied): give them back to it.
func DeniedFix(dir string) string {
	who := strconv.Itoa(os.Geteuid())
	if u, err := user.LookupId(who); err == nil {
		who = u.Username
	}
	return fmt.Sprintf("give this user its files back (%s; they are another user's: copied or written by root?); the store opens by itself once it can",
		shellword.Join("chown", "-R", who, dir))
}

// ShortageFix is what the operator does about a shortage (Shortage's
// errno): the one wording of the limit to raise, which each caller follows
// with what happens meanwhile. "" for any other errno.
func ShortageFix(e syscall.Errno) string {
	switch e {
	case syscall.EMFILE:
		return "toolgate has no file descriptors left: raise its open-files limit (ulimit -n; LimitNOFILE= in a systemd unit)"
	case syscall.ENFILE:
		return "the system has no file descriptors left (fs.file-max): close other programs or raise it"
	case syscall.ENOMEM:
		return "toolgate was refused memory: raise its memory or address-space limit (ulimit -v; MemoryMax= in a systemd unit; a container's memory limit) or free memory"
	case syscall.EFBIG:
		return "toolgate may not write files that large: raise its file-size limit (ulimit -f unlimited; LimitFSIZE= in a systemd unit)"
	}
	return ""
}

// Gate is the data folder's health as a store that writes there uses it:
// asked before each write, told how each went. *Writer is the one serve
// passes; Unchecked lets every write through.
type Gate interface {
	// Check returns nil when the folder can take a write now (it reports
	// a refusal itself).
	Check() error
	// Fail reports a write that failed; OK one that succeeded.
	Fail(err error)
	OK()
	// MkdirAll makes a folder the store writes in, with the folders on
	// its way, but never the data folder itself (Health.MkdirAll): one
	// removed while toolgate runs is a fault, not made again behind the
	// operator's back.
	MkdirAll(dir string, perm fs.FileMode) error
}

// Unchecked is the Gate of a store opened without a data folder's health
// (one-shot commands, tests): every write is tried, nothing is reported.
var Unchecked Gate = unchecked{}

type unchecked struct{ OSMkdir }

func (unchecked) Check() error { return nil }
func (unchecked) Fail(error)   {}
func (unchecked) OK()          {}

// OSMkdir is the MkdirAll of a Gate without a data folder's health:
// os.MkdirAll. Unchecked and the Gates of tests embed it.
type OSMkdir struct{}

// MkdirAll is os.MkdirAll.
func (OSMkdir) MkdirAll(dir string, perm fs.FileMode) error { return os.MkdirAll(dir, perm) }

var _ Gate = (*Writer)(nil)

// Writer is one store that writes in the data folder. It reports each
// fault once (when it starts) and once more when it ends.
type Writer struct {
	h        *Health
	name     string
	degraded string

	// guarded by h.mu
	failing  bool
	err      string
	fix      string
	since    time.Time
	failures int
	note     string // Shared's
}

// Writer registers a store named name (e.g. "embedding cache") that writes
// in the folder; degraded says what the gateway does while it cannot write
// (e.g. "searches embed without storing new vectors"), for the log line of a fault.
func (h *Health) Writer(name, degraded string) *Writer {
	w := &Writer{h: h, name: name, degraded: degraded}
	h.mu.Lock()
	h.writers = append(h.writers, w)
	h.mu.Unlock()
	return w
}

// Check is Health.Check; a failure is reported as this writer's (Fail).
func (w *Writer) Check() error {
	err := w.h.Check()
	if err != nil {
		w.Fail(err)
	}
	return err
}

// Fail reports a write that failed (or a Check that refused one). The first
// failure of a fault is logged with the fix; later ones only update the
// report, so a writer that retries does not flood the log.
func (w *Writer) Fail(err error) {
	if err == nil {
		return
	}
	h := w.h
	now := h.o.Now()
	fix := Fix(h.dir, err)
	h.mu.Lock()
	first := !w.failing
	w.failures++
	w.failing, w.err, w.fix = true, err.Error(), fix
	if first {
		w.since = now
	}
	h.lastErr, h.lastErrAt = w.name+": "+err.Error(), now
	h.mu.Unlock()
	if first {
		h.log.Warn("storage fault: "+w.name+" cannot write to the data folder; "+w.degraded+" until it can",
			"dir", h.dir, "err", err, "fix", fix)
	} else {
		h.log.Debug("storage fault continues", "writer", w.name, "err", err)
	}
}

// OK reports a write that succeeded: a failing writer has recovered.
func (w *Writer) OK() {
	h := w.h
	h.mu.Lock()
	was, since := w.failing, w.since
	w.failing, w.err, w.fix, w.since = false, "", "", time.Time{}
	h.mu.Unlock()
	if was {
		h.log.Info("storage recovered: "+w.name+" writes to the data folder again", "dir", h.dir, "failing_for", h.o.Now().Sub(since).Round(time.Second))
	}
}

// Shared reports a store that another process holds by design (another
// gateway on the data folder: Badger lets one open it) while this one does
// without it, and says how (note, logged once and shown in the report).
// It is no fault: the writer stays OK and the folder healthy. An empty note
// clears it: the store is this process's now.
func (w *Writer) Shared(note string) {
	h := w.h
	h.mu.Lock()
	was := w.note
	w.note = note
	h.mu.Unlock()
	if was != note && note != "" {
		h.log.Info(w.name+": "+note, "dir", h.dir)
	}
}

// MkdirAll is Health.MkdirAll.
func (w *Writer) MkdirAll(dir string, perm fs.FileMode) error { return w.h.MkdirAll(dir, perm) }

// Failing reports whether the writer's last report was a failure.
func (w *Writer) Failing() bool {
	w.h.mu.Lock()
	defer w.h.mu.Unlock()
	return w.failing
}

// Report is the data folder's health as GET /status shows it (the
// "storage" section). Fields are only ever added.
type Report struct {
	// DataDir is the data folder; empty in what an API key that is not
	// admin reads (a path on the gateway's machine).
	DataDir string `json:"dataDir,omitempty"`
	// Writable says the folder can take a write now (Check passes).
	Writable  bool   `json:"writable"`
	FreeBytes uint64 `json:"freeBytes,omitempty"`
	// Error and Fix say why the folder cannot take writes now, and what to
	// do; Since is when toolgate first found it so (a check or a writer's
	// failure). All empty while the folder is writable and no writer fails.
	Error string    `json:"error,omitempty"`
	Fix   string    `json:"fix,omitempty"`
	Since time.Time `json:"since,omitzero"`
	// LastError is the latest failure a writer reported ("writer: error"),
	// kept after recovery; LastErrorAt says when.
	LastError   string         `json:"lastError,omitempty"`
	LastErrorAt time.Time      `json:"lastErrorAt,omitzero"`
	Writers     []WriterReport `json:"writers"`
	// Open names the data folder and stores' folders open to every user of
	// the machine, as each report finds them, and OpenFix the command
	// that closes them (Exposed); both empty when none is.
	Open    string `json:"open,omitempty"`
	OpenFix string `json:"openFix,omitempty"`
}

// WriterReport is one writer in a Report.
type WriterReport struct {
	Name string `json:"name"`
	// OK is false while the writer's last report was a failure.
	OK    bool      `json:"ok"`
	Error string    `json:"error,omitempty"`
	Fix   string    `json:"fix,omitempty"`
	Since time.Time `json:"since,omitzero"` // failing since
	// Failures counts the failed writes (and refused checks) so far.
	Failures int `json:"failures"`
	// Degraded says what the gateway does while the writer fails.
	Degraded string `json:"degraded,omitempty"`
	// Shared says that another process holds the store by design and what
	// this one does without it (Writer.Shared); the writer is OK.
	Shared string `json:"shared,omitempty"`
}

// Failing reports whether the folder cannot take writes or a writer fails.
func (r *Report) Failing() bool {
	return !r.Writable || slices.ContainsFunc(r.Writers, func(w WriterReport) bool { return !w.OK })
}

// Report checks the folder now and returns its health with each writer's.
func (h *Health) Report() Report {
	free, err := h.probe()
	h.mu.Lock()
	defer h.mu.Unlock()
	now := h.o.Now()
	r := Report{DataDir: h.dir, Writable: err == nil, FreeBytes: free, LastError: h.lastErr, LastErrorAt: h.lastErrAt.UTC(), Writers: []WriterReport{}}
	if err != nil {
		if h.downSince.IsZero() {
			h.downSince = now
		}
		r.Error, r.Fix, r.Since = err.Error(), Fix(h.dir, err), h.downSince
	} else {
		h.downSince = time.Time{}
	}
	for _, w := range h.writers {
		wr := WriterReport{Name: w.name, OK: !w.failing, Failures: w.failures, Shared: w.note}
		if w.failing {
			wr.Error, wr.Fix, wr.Since, wr.Degraded = w.err, w.fix, w.since.UTC(), w.degraded
			if r.Since.IsZero() || w.since.Before(r.Since) {
				r.Since = w.since
			}
			if r.Error == "" {
				r.Error, r.Fix = w.name+": "+w.err, w.fix
			}
		}
		r.Writers = append(r.Writers, wr)
	}
	r.Since = r.Since.UTC()
	r.Open, r.OpenFix = h.Exposed()
	return r
}

// Exposed is Exposed of the data folder and the stores Options named.
func (h *Health) Exposed() (open, fix string) { return Exposed(h.dir, h.o.Stores) }

// CommandFix says what an operator does about err, the failure of a
// one-shot command (`keys create`, `tools approve`, `index`, …) to write a
// file because of its file system: "" when err is not such a failure. The
// folder is the one of the file that failed (from err's path).
func CommandFix(err error) string {
	if ne, ok := datafile.AsNewer(err); ok {
		return ne.Fix() // a rollback: no file system's refusal
	}
	fix := WriteFix(err)
	if fix == "" {
		return ""
	}
	if errors.Is(err, os.ErrPermission) {
		fix += ", or run the command as its owner"
	}
	return fix + ", then run the command again"
}

// WriteFix is CommandFix without what comes after the fix, for a write
// that is not a command's (a management tool's edit of the config file):
// "" when err is not a file system's refusal.
func WriteFix(err error) string {
	var pe *fs.PathError
	dir := "its folder"
	if errors.As(err, &pe) {
		// The nearest folder that exists: a failed write may have
		// removed its own (an index generation's).
		dir = filepath.Dir(pe.Path)
		for _, err := os.Stat(dir); err != nil && filepath.Dir(dir) != dir; _, err = os.Stat(dir) {
			dir = filepath.Dir(dir)
		}
	}
	switch {
	case errors.Is(err, syscall.ENOSPC), errors.Is(err, syscall.EDQUOT):
		return fmt.Sprintf("free space on the file system of %s (or raise the quota)", dir)
	case errors.Is(err, syscall.EROFS):
		return fmt.Sprintf("%s is on a read-only file system: remount it read-write (or, for the data folder, pass --data-dir on a writable one)", dir)
	case errors.Is(err, os.ErrPermission):
		if p, folder := deniedPath(err); p != "" {
			if fix := AccessFix(p, folder); fix != "" {
				return fix
			}
		}
		return fmt.Sprintf("give this user access to %s (chown/chmod)", dir)
	case Shortage(err) == syscall.EFBIG:
		return ShortageFix(syscall.EFBIG)
	}
	return ""
}
