package config

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/fsnotify/fsnotify"
)

// DefaultDebounce is how long a Watcher waits after the last event of a
// burst (an editor's save is several events) before it reports a change.
const DefaultDebounce = 250 * time.Millisecond

// WatchOptions configure a Watcher. The zero value (or nil) means defaults.
type WatchOptions struct {
	Logger   *slog.Logger  // nil = discard
	Debounce time.Duration // default DefaultDebounce
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
type Watcher struct {
	// C receives a value when the file may have changed (capacity 1, so
	// signals that are not read yet merge).
	C <-chan struct{}

	path     string // absolute
	debounce time.Duration
	log      *slog.Logger
	fsw      *fsnotify.Watcher
	c        chan struct{}
	done     chan struct{}
	wg       sync.WaitGroup
	closing  sync.Once
	closeErr error

	// Owned by the run goroutine (and Watch before it starts).
	dirs  []string // directories watched
	names []string // paths whose events matter (see relevant)
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
	fsw, err := fsnotify.NewWatcher()
	if err != nil {
		return nil, fmt.Errorf("watch %s: %w", path, err)
	}
	c := make(chan struct{}, 1)
	w := &Watcher{C: c, c: c, path: abs, debounce: o.Debounce, log: o.Logger, fsw: fsw, done: make(chan struct{})}
	if err := w.rewatch(); err != nil {
		fsw.Close()
		return nil, fmt.Errorf("watch %s: %w", path, err)
	}
	w.wg.Add(1)
	go w.run()
	return w, nil
}

// Close stops watching and waits for the watcher's goroutine.
func (w *Watcher) Close() error {
	w.closing.Do(func() {
		close(w.done)
		w.closeErr = w.fsw.Close()
		w.wg.Wait()
	})
	return w.closeErr
}

func (w *Watcher) run() {
	defer w.wg.Done()
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	defer timer.Stop()
	for {
		select {
		case <-w.done:
			return
		case ev, ok := <-w.fsw.Events:
			if !ok {
				return
			}
			if ev.Op == fsnotify.Chmod || !relevant(w.names, ev.Name) {
				continue // a touch changes nothing; other files do not matter
			}
			w.log.Debug("config file event", "event", ev.String())
			timer.Reset(w.debounce)
		case err, ok := <-w.fsw.Errors:
			if !ok {
				return
			}
			w.log.Warn("watching the config file", "path", w.path, "err", err)
		case <-timer.C:
			// A symlink may point elsewhere now: follow the new chain.
			if err := w.rewatch(); err != nil {
				w.log.Warn("watching the config file", "path", w.path, "err", err)
			}
			select {
			case w.c <- struct{}{}:
			default:
			}
		}
	}
}

// rewatch works out the file's symlink chain and watches the directories
// its links and target live in (dropping those no longer needed).
func (w *Watcher) rewatch() error {
	names, dirs := chain(w.path)
	var errs []error
	for _, d := range dirs {
		if !slices.Contains(w.dirs, d) {
			if err := w.fsw.Add(d); err != nil {
				errs = append(errs, fmt.Errorf("watch directory %s: %w", d, err))
				dirs = slices.DeleteFunc(dirs, func(x string) bool { return x == d })
			}
		}
	}
	for _, d := range w.dirs {
		if !slices.Contains(dirs, d) {
			_ = w.fsw.Remove(d) // gone already when the directory was deleted
		}
	}
	w.names, w.dirs = names, dirs
	if len(dirs) == 0 {
		return errors.Join(append(errs, errors.New("no directory of the config file can be watched"))...)
	}
	return errors.Join(errs...)
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
