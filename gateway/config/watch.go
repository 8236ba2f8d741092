package config

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/fsnotify/fsnotify"

	"github.com/toolgate/toolgate/internal/storage"
)

// DefaultDebounce is how long a Watcher waits after the last event of a
// burst (an editor's save is several events) before it reports a change.
const DefaultDebounce = 250 * time.Millisecond

// limitRetry is how often a Watcher that the kernel refused an inotify
// instance or watch (see LimitError) tries again; a variable for tests.
var limitRetry = 10 * time.Second

// recheck is how often a Watcher looks whether the directories it
// watches are still the ones at their paths: a directory removed while a
// process holds it open (Badger does the data folder) sends no event, and
// one replaced by another under its name is not the one watched. A stat a
// directory a second; a variable for tests.
var recheck = time.Second

// WatchOptions configure a Watcher. The zero value (or nil) means defaults.
type WatchOptions struct {
	Logger   *slog.Logger  // nil = discard
	Debounce time.Duration // default DefaultDebounce
	// Meanwhile says, for the log, what to do while the kernel refuses the
	// watch (e.g. "send SIGHUP to reload it").
	Meanwhile string
}

// Watcher reports that a config file may have changed. It follows every way
// a file gets saved: written in place, truncated and written, replaced by a
// rename (vim, atomic writers), deleted and created again, and a symlink
// whose target moves (a Kubernetes ConfigMap swaps its "..data" symlink).
//
// It watches directories, not the file: a watch on the file itself follows
// its inode and goes deaf once a rename replaces it. Events are kept when
// they name the file, a link on its symlink chain, the link's resolved
// target, or a directory on the way to one of them; other files in the
// directories are ignored. A burst of events is debounced into one signal
// on C. The signal says only "look again": the reader compares the content
// (a touch, or a save without change, signals too).
//
// Every Watcher of the process shares one inotify instance (see hub). When
// the kernel refuses it one (a LimitError), Watch still returns the
// Watcher: it logs the refusal with the limit to raise, tries again every
// limitRetry, and once it watches signals C (a save may have been missed).
// Every recheck it looks whether each directory it watches is still the
// one at its path; one removed or replaced (a dotfiles checkout, a volume
// mounted again, rm -rf and mkdir) counts as an event. While the folder of
// the file is gone it looks for it every recheck, and once it is there
// again watches it and signals C, so a file saved into a folder made again
// is read; it used to go deaf until a SIGHUP or a restart. When the
// kernel drops events (its queue overflowed while the process was busy),
// every Watcher signals C too, for the same reason.
type Watcher struct {
	// C receives a value when the file may have changed (capacity 1, so
	// signals that are not read yet merge).
	C <-chan struct{}

	path      string // absolute
	debounce  time.Duration
	meanwhile string
	log       *slog.Logger
	in        chan watchEvent // from the hub
	c         chan struct{}
	done      chan struct{}
	wg        sync.WaitGroup
	closing   sync.Once
	closeErr  error

	// Owned by the run goroutine (and Watch before it starts).
	joined bool                   // counted among the hub's watchers
	dirs   map[string]os.FileInfo // the directories watched, each as it was when watched
	gone   bool                   // no directory of the file could be watched (its folder removed)
	names  []string               // paths whose events matter (see relevant)
}

// watchEvent is one of the inotify instance's events or errors.
type watchEvent struct {
	ev  fsnotify.Event
	err error
}

// Watch starts watching the config file at path. The file may be missing
// for now; its directory must exist. Close stops it.
func Watch(path string, opts *WatchOptions) (*Watcher, error) {
	var o WatchOptions
	if opts != nil {
		o = *opts
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Debounce <= 0 {
		o.Debounce = DefaultDebounce
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, fmt.Errorf("watch %s: %w", path, err)
	}
	c := make(chan struct{}, 1)
	w := &Watcher{C: c, c: c, path: abs, debounce: o.Debounce, meanwhile: o.Meanwhile, log: o.Logger,
		in: make(chan watchEvent, 16), done: make(chan struct{})}
	err = w.rewatch()
	var limit *LimitError
	refused := errors.As(err, &limit)
	if err != nil && !refused {
		w.leave()
		return nil, fmt.Errorf("watch %s: %w", path, err)
	}
	if refused {
		w.logRefusal(limit)
	}
	w.wg.Add(1)
	go w.run(refused)
	return w, nil
}

// logRefusal logs that the kernel refused the watch, with the fix.
func (w *Watcher) logRefusal(limit *LimitError) {
	msg := "cannot watch the file for changes; trying again every " + limitRetry.String()
	if w.meanwhile != "" {
		msg += "; meanwhile " + w.meanwhile
	}
	w.log.Warn(msg, "file", w.path, "err", limit.Err, "fix", limit.Fix)
}

// Close stops watching and waits for the watcher's goroutine.
func (w *Watcher) Close() error {
	w.closing.Do(func() {
		close(w.done)
		w.wg.Wait()
		w.closeErr = w.leave()
	})
	return w.closeErr
}

func (w *Watcher) run(refused bool) {
	defer w.wg.Done()
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	defer timer.Stop()
	var retry <-chan time.Time
	if refused {
		t := time.NewTicker(limitRetry)
		defer t.Stop()
		retry = t.C
	}
	check := time.NewTicker(recheck)
	defer check.Stop()
	for {
		select {
		case <-w.done:
			return
		case e := <-w.in:
			if errors.Is(e.err, fsnotify.ErrEventOverflow) {
				// The kernel's queue was full and it dropped events: one of
				// them may have been a save of this file.
				w.log.Info("file events were lost (the inotify queue overflowed); reading the file again",
					"file", w.path, "fix", "if this repeats, raise fs.inotify.max_queued_events (sysctl)")
				timer.Reset(w.debounce)
				continue
			}
			if e.err != nil {
				w.log.Warn("watching the config file", "path", w.path, "err", e.err)
				continue
			}
			if !relevant(w.names, e.ev.Name) {
				continue // other files do not matter
			}
			// A change of mode is read too: a file that could not be read
			// (chmod 000) and is readable again is a reload; a touch of a
			// file read before reads the same content, which changes
			// nothing.
			w.log.Debug("config file event", "event", e.ev.String())
			if e.ev.Has(fsnotify.Remove) || e.ev.Has(fsnotify.Rename) {
				w.forget(e.ev.Name)
			}
			timer.Reset(w.debounce)
		case <-retry:
			var limit *LimitError
			if err := w.rewatch(); errors.As(err, &limit) {
				continue // still refused (logged once, at Watch)
			} else if err != nil {
				w.log.Warn("watching the config file", "path", w.path, "err", err)
			}
			w.log.Info("watching the file for changes again", "file", w.path)
			retry = nil
			w.signal() // a save made meanwhile
		case <-check.C:
			switch {
			case retry != nil: // refused: retry looks again
			case w.gone:
				if w.rewatch(); len(w.dirs) > 0 {
					w.gone = false
					w.log.Info("watching the file for changes again", "file", w.path)
					w.signal() // the file saved into the folder made again
				}
			case w.moved():
				timer.Reset(w.debounce)
			}
		case <-timer.C:
			// A symlink may point elsewhere now: follow the new chain.
			err := w.rewatch()
			switch {
			case len(w.dirs) == 0 && !w.gone:
				w.gone = true
				msg := "the file's folder is gone; looking for it every " + recheck.String() + " to watch it again"
				if w.meanwhile != "" {
					msg += "; meanwhile " + w.meanwhile
				}
				w.log.Warn(msg, "file", w.path, "err", err)
			case err != nil && len(w.dirs) > 0:
				w.log.Warn("watching the config file", "path", w.path, "err", err)
			}
			w.signal()
		}
	}
}

// forget drops name from the directories watched when an event says it
// was removed or moved: its watch went with it (the kernel drops it on a
// removal, fsnotify on a move), so the next rewatch watches what is at
// the path afresh. moved cannot tell, nor rewatch: a folder made again
// under the name can get the old one's inode number (ext4 gives it at
// once), and one moved away and back is the same directory. The Watcher
// kept the dead watch and heard no later save.
func (w *Watcher) forget(name string) {
	name = filepath.Clean(name)
	if _, ok := w.dirs[name]; ok {
		inotify.remove(name)
		delete(w.dirs, name)
	}
}

// moved reports whether a directory watched is no longer the one at its
// path (removed, or replaced by another of the same name).
func (w *Watcher) moved() bool {
	for d, was := range w.dirs {
		fi, err := os.Stat(d)
		if err != nil || !os.SameFile(fi, was) {
			return true
		}
	}
	return false
}

func (w *Watcher) signal() {
	select {
	case w.c <- struct{}{}:
	default:
	}
}

// rewatch works out the file's symlink chain and watches the directories
// its links and target live in (dropping those no longer needed, and
// watching afresh one replaced under its name).
func (w *Watcher) rewatch() error {
	if !w.joined {
		if err := inotify.join(w); err != nil {
			return err
		}
		w.joined = true
	}
	names, want := chain(w.path)
	var errs []error
	dirs := map[string]os.FileInfo{}
	for _, d := range want {
		fi, err := os.Stat(d)
		if err != nil {
			continue // gone since chain looked
		}
		if old, ok := w.dirs[d]; ok {
			if os.SameFile(old, fi) {
				dirs[d] = old
				continue
			}
			inotify.remove(d) // the directory that was there: replaced
			delete(w.dirs, d)
		}
		if err := inotify.add(d); err != nil {
			errs = append(errs, fmt.Errorf("watch directory %s: %w", d, err))
			continue
		}
		dirs[d] = fi
	}
	for d := range w.dirs {
		if _, ok := dirs[d]; !ok {
			inotify.remove(d)
		}
	}
	w.names, w.dirs = names, dirs
	if len(dirs) == 0 {
		return errors.Join(append(errs, fmt.Errorf("%s is not there to be watched", filepath.Dir(w.path)))...)
	}
	return errors.Join(errs...)
}

// leave gives back the Watcher's directories and its place among the
// hub's watchers (once its goroutine is done).
func (w *Watcher) leave() error {
	for d := range w.dirs {
		inotify.remove(d)
	}
	w.dirs = nil
	if !w.joined {
		return nil
	}
	w.joined = false
	return inotify.leave(w)
}

// hub is the process's one inotify instance, shared by every Watcher. The
// kernel gives each user 128 instances by default
// (fs.inotify.max_user_instances), for all of its processes together, and
// every MCP client spawns its own toolgate, which follows its config files,
// its state file and the quarantine pins: with an instance each, some 40
// clients would spend them. The instance is made for the first Watcher and
// closed with the last one.
type hub struct {
	mu   sync.Mutex
	fsw  *fsnotify.Watcher
	pump chan struct{} // closed when fsw's pump has returned
	refs map[string]int
	subs map[*Watcher]struct{}
}

var inotify hub

func (h *hub) join(w *Watcher) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.fsw == nil {
		fsw, err := fsnotify.NewWatcher()
		if err != nil {
			return limitErr(err, syscall.EMFILE)
		}
		h.fsw, h.pump, h.refs, h.subs = fsw, make(chan struct{}), map[string]int{}, map[*Watcher]struct{}{}
		go h.run(fsw, h.pump)
	}
	h.subs[w] = struct{}{}
	return nil
}

// leave removes w; the last to leave closes the instance.
func (h *hub) leave(w *Watcher) error {
	h.mu.Lock()
	delete(h.subs, w)
	if len(h.subs) > 0 || h.fsw == nil {
		h.mu.Unlock()
		return nil
	}
	fsw, pump := h.fsw, h.pump
	h.fsw, h.pump, h.refs, h.subs = nil, nil, nil, nil
	h.mu.Unlock()
	err := fsw.Close()
	<-pump
	return err
}

// add watches dir. inotify_add_watch is asked every time, so a directory
// deleted and made again under the same name is watched afresh.
func (h *hub) add(dir string) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if err := h.fsw.Add(dir); err != nil {
		return limitErr(err, syscall.ENOSPC)
	}
	h.refs[dir]++
	return nil
}

// remove stops watching dir once no Watcher needs it.
func (h *hub) remove(dir string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.refs[dir]--; h.refs[dir] <= 0 {
		delete(h.refs, dir)
		_ = h.fsw.Remove(dir) // gone already when the directory was deleted
	}
}

// run hands every event and error of fsw to every Watcher; each keeps
// those that concern its file.
func (h *hub) run(fsw *fsnotify.Watcher, done chan struct{}) {
	defer close(done)
	for {
		var e watchEvent
		var ok bool
		select {
		case e.ev, ok = <-fsw.Events:
		case e.err, ok = <-fsw.Errors:
		}
		if !ok {
			return
		}
		h.mu.Lock()
		subs := make([]*Watcher, 0, len(h.subs))
		for w := range h.subs {
			subs = append(subs, w)
		}
		h.mu.Unlock()
		for _, w := range subs {
			select {
			case w.in <- e:
			case <-w.done:
			}
		}
	}
}

// LimitError is the kernel refusing an inotify instance or watch: Fix says
// which limit to raise. Its own words mislead ("too many open files" when
// the user's inotify instances are spent, "no space left on device" when
// its watches are).
type LimitError struct {
	Err error
	Fix string
}

func (e *LimitError) Error() string { return e.Err.Error() + " (" + e.Fix + ")" }
func (e *LimitError) Unwrap() error { return e.Err }

// limitErr returns err as a *LimitError when it is a limit: spent is the
// errno by which the kernel says that an inotify limit itself is reached
// (EMFILE from inotify_init1 for instances, ENOSPC from inotify_add_watch
// for watches).
func limitErr(err error, spent syscall.Errno) error {
	switch short := storage.Shortage(err); {
	case errors.Is(err, syscall.ENOSPC) && spent == syscall.ENOSPC:
		return &LimitError{Err: err, Fix: inotifyFix("watches", "max_user_watches", 524288) + " (the disk is not full)"}
	case errors.Is(err, syscall.EMFILE) && spent == syscall.EMFILE && descriptorFree():
		return &LimitError{Err: err, Fix: inotifyFix("instances", "max_user_instances", 1024)}
	case short != 0:
		return &LimitError{Err: err, Fix: storage.ShortageFix(short)}
	}
	return err
}

// inotifyFix words the fix for a spent inotify limit, whose value it reads
// from the machine's sysctl and, when lower, from the user namespace's
// (a container's own limit, /proc/sys/user/max_inotify_*).
func inotifyFix(what, sysctl string, raiseTo int) string {
	read := func(path string) (int, bool) {
		b, err := os.ReadFile(path)
		n, perr := strconv.Atoi(strings.TrimSpace(string(b)))
		return n, err == nil && perr == nil
	}
	now := "?"
	machine, ok := read("/proc/sys/fs/inotify/" + sysctl)
	if ok {
		now = strconv.Itoa(machine)
	}
	ns := "max_inotify_" + what
	if n, ok2 := read("/proc/sys/user/" + ns); ok2 && (!ok || n < machine) {
		now += fmt.Sprintf(", and user.%s is %d in this user namespace", ns, n)
	}
	return fmt.Sprintf("this user's inotify %s are all in use (fs.inotify.%s is %s, for all of the user's processes together): "+
		"raise it (sysctl -w fs.inotify.%s=%d, and a file in /etc/sysctl.d/ to keep it) or stop programs that watch many files",
		what, sysctl, now, sysctl, raiseTo)
}

// descriptorFree reports whether the process can still open a file: when
// it can, EMFILE from inotify_init1 is the user's instance limit.
func descriptorFree() bool {
	f, err := os.Open(os.DevNull)
	if err != nil {
		return false
	}
	f.Close()
	return true
}

// chain returns the paths whose events matter for the file at path (the
// path itself, each symlink it leads through, the final target; each also
// spelled with its directory resolved, since events name the watched
// directory) and the resolved directories to watch.
func chain(path string) (names, dirs []string) {
	add := func(p string) {
		p = filepath.Clean(p)
		dir := filepath.Dir(p)
		if r, err := filepath.EvalSymlinks(dir); err == nil {
			dir = r
		}
		for _, n := range []string{p, filepath.Join(dir, filepath.Base(p))} {
			if !slices.Contains(names, n) {
				names = append(names, n)
			}
		}
		if !slices.Contains(dirs, dir) {
			if fi, err := os.Stat(dir); err == nil && fi.IsDir() {
				dirs = append(dirs, dir)
			}
		}
	}
	p := path
	for range 40 { // the kernel's own limit on links followed
		add(p)
		fi, err := os.Lstat(p)
		if err != nil || fi.Mode()&os.ModeSymlink == 0 {
			break
		}
		target, err := os.Readlink(p)
		if err != nil {
			break
		}
		if !filepath.IsAbs(target) {
			target = filepath.Join(filepath.Dir(p), target)
		}
		p = target
	}
	if r, err := filepath.EvalSymlinks(path); err == nil {
		add(r)
	}
	return names, dirs
}

// relevant reports whether an event on name can change what the config
// path reads: name is one of names, or a directory on the way to one (a
// "..data" symlink swapped by rename, a directory replaced).
func relevant(names []string, name string) bool {
	name = filepath.Clean(name)
	for _, n := range names {
		if n == name || strings.HasPrefix(n, name+string(filepath.Separator)) {
			return true
		}
	}
	return false
}
