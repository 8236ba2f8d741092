package config

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/toolgate/toolgate/internal/testenv"
)

// waitContent waits for signals on w.C until, after one of them, path reads
// want: what a reloader does. The bound is for a hung test, not a speed
// assertion.
func waitContent(t *testing.T, w *Watcher, path, want string) {
	t.Helper()
	timeout := time.After(20 * time.Second)
	for {
		select {
		case <-w.C:
			if b, err := os.ReadFile(path); err == nil && string(b) == want {
				return
			}
		case <-timeout:
			b, err := os.ReadFile(path)
			t.Fatalf("no change signalled after which %s reads %q (it reads %q, %v)", path, want, b, err)
		}
	}
}

func write(t *testing.T, path, s string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(s), 0o600); err != nil {
		t.Fatal(err)
	}
}

func TestWatchEditStyles(t *testing.T) {
	tests := []struct {
		name  string
		setup func(t *testing.T, dir string) string // returns the path to watch
		save  func(t *testing.T, path, content string)
	}{
		{
			name: "in place",
			save: func(t *testing.T, path, s string) { write(t, path, s) },
		},
		{
			name: "truncate then write",
			save: func(t *testing.T, path, s string) {
				f, err := os.OpenFile(path, os.O_WRONLY|os.O_TRUNC, 0)
				if err != nil {
					t.Fatal(err)
				}
				if err := f.Sync(); err != nil {
					t.Fatal(err)
				}
				if _, err := f.WriteString(s); err != nil {
					t.Fatal(err)
				}
				f.Close()
			},
		},
		{
			name: "rename over (atomic writer)",
			save: func(t *testing.T, path, s string) {
				tmp := path + ".tmp"
				write(t, tmp, s)
				if err := os.Rename(tmp, path); err != nil {
					t.Fatal(err)
				}
			},
		},
		{
			name: "backup rename then new file (vim)",
			save: func(t *testing.T, path, s string) {
				if err := os.Rename(path, path+"~"); err != nil {
					t.Fatal(err)
				}
				write(t, path, s)
				os.Remove(path + "~")
			},
		},
		{
			name: "symlink to a file in another directory, target written",
			setup: func(t *testing.T, dir string) string {
				real := filepath.Join(dir, "real")
				if err := os.Mkdir(real, 0o755); err != nil {
					t.Fatal(err)
				}
				write(t, filepath.Join(real, "config.json"), "{}")
				link := filepath.Join(dir, "link", "toolgate.json")
				if err := os.Mkdir(filepath.Dir(link), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.Symlink("../real/config.json", link); err != nil {
					t.Fatal(err)
				}
				return link
			},
			save: func(t *testing.T, path, s string) {
				write(t, filepath.Join(filepath.Dir(path), "..", "real", "config.json"), s)
			},
		},
		{
			name: "kubernetes configmap (..data swapped)",
			setup: func(t *testing.T, dir string) string {
				gen := filepath.Join(dir, "..gen0")
				if err := os.Mkdir(gen, 0o755); err != nil {
					t.Fatal(err)
				}
				write(t, filepath.Join(gen, "toolgate.json"), "{}")
				if err := os.Symlink("..gen0", filepath.Join(dir, "..data")); err != nil {
					t.Fatal(err)
				}
				path := filepath.Join(dir, "toolgate.json")
				if err := os.Symlink("..data/toolgate.json", path); err != nil {
					t.Fatal(err)
				}
				return path
			},
			save: func() func(t *testing.T, path, s string) {
				n := 0
				return func(t *testing.T, path, s string) {
					dir := filepath.Dir(path)
					n++
					gen := fmt.Sprintf("..gen%d", n)
					if err := os.Mkdir(filepath.Join(dir, gen), 0o755); err != nil {
						t.Fatal(err)
					}
					write(t, filepath.Join(dir, gen, "toolgate.json"), s)
					if err := os.Symlink(gen, filepath.Join(dir, "..data_tmp")); err != nil {
						t.Fatal(err)
					}
					if err := os.Rename(filepath.Join(dir, "..data_tmp"), filepath.Join(dir, "..data")); err != nil {
						t.Fatal(err)
					}
					if err := os.RemoveAll(filepath.Join(dir, fmt.Sprintf("..gen%d", n-1))); err != nil {
						t.Fatal(err)
					}
				}
			}(),
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			path := filepath.Join(dir, "toolgate.json")
			if tc.setup != nil {
				path = tc.setup(t, dir)
			} else {
				write(t, path, "{}")
			}
			w, err := Watch(path, &WatchOptions{Debounce: 50 * time.Millisecond})
			if err != nil {
				t.Fatal(err)
			}
			defer w.Close()
			// Twice: the second save must be seen too (after a rename the
			// watch must still hear the new file; after a symlink swap, the
			// new target).
			for i := range 2 {
				want := fmt.Sprintf(`{"mcpServers": {}, "save": %d}`, i)
				tc.save(t, path, want)
				waitContent(t, w, path, want)
			}
		})
	}
}

func TestWatchMissingFileAppears(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "toolgate.json")
	w, err := Watch(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	write(t, path, "{}")
	waitContent(t, w, path, "{}")
	if err := w.Close(); err != nil {
		t.Errorf("Close: %v", err)
	}
	if err := w.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
}

// A change of the file's mode is signalled: a config that could not be
// read (chmod 000) and is readable again is a reload, which kept showing
// the rejected one until the next save.
func TestWatchModeChange(t *testing.T) {
	path := filepath.Join(t.TempDir(), "toolgate.json")
	write(t, path, "{}")
	w, err := Watch(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	if err := os.Chmod(path, 0o644); err != nil {
		t.Fatal(err)
	}
	select {
	case <-w.C:
	case <-time.After(testenv.Timeout):
		t.Fatal("a change of mode was not signalled")
	}
}

func TestWatchMissingDirectory(t *testing.T) {
	if _, err := Watch(filepath.Join(t.TempDir(), "nope", "toolgate.json"), nil); err == nil {
		t.Fatal("Watch in a missing directory: no error")
	}
}

func TestRelevant(t *testing.T) {
	dir := t.TempDir()
	gen := filepath.Join(dir, "..gen0")
	if err := os.Mkdir(gen, 0o755); err != nil {
		t.Fatal(err)
	}
	write(t, filepath.Join(gen, "toolgate.json"), "{}")
	if err := os.Symlink("..gen0", filepath.Join(dir, "..data")); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "toolgate.json")
	if err := os.Symlink("..data/toolgate.json", path); err != nil {
		t.Fatal(err)
	}
	names, dirs := chain(path)
	realDir, _ := filepath.EvalSymlinks(dir)
	for _, tc := range []struct {
		name string
		want bool
	}{
		{path, true},
		{filepath.Join(dir, "..data"), true},
		{filepath.Join(dir, "..data", "toolgate.json"), true},
		{filepath.Join(realDir, "..gen0", "toolgate.json"), true},
		{filepath.Join(dir, "..data_tmp"), false},
		{filepath.Join(dir, "..gen1"), false},
		{filepath.Join(dir, "other.json"), false},
		{filepath.Join(dir, "toolgate.json.swp"), false},
		{filepath.Join(realDir, "..gen0", "other.json"), false},
	} {
		if got := relevant(names, tc.name); got != tc.want {
			t.Errorf("relevant(%s) = %v, want %v (names %v)", tc.name, got, tc.want, names)
		}
	}
	if len(dirs) != 2 {
		t.Errorf("dirs = %v, want the link's directory and the target's", dirs)
	}
}

// holdHub holds up the hub's pump, and so fsnotify's reader behind it,
// until release: a subscriber reads one event (of a file written in dir,
// a directory watched) and then none. Events that happen meanwhile wait in
// the kernel's queue, not yet seen by fsnotify or any Watcher.
func holdHub(t *testing.T, dir string) (release func()) {
	t.Helper()
	blocker := &Watcher{in: make(chan watchEvent), done: make(chan struct{})}
	inotify.mu.Lock()
	inotify.subs[blocker] = struct{}{}
	inotify.mu.Unlock()
	release = sync.OnceFunc(func() {
		inotify.mu.Lock()
		delete(inotify.subs, blocker)
		inotify.mu.Unlock()
		close(blocker.done)
	})
	write(t, filepath.Join(dir, "noise"), "x")
	select {
	case <-blocker.in:
	case <-time.After(20 * time.Second):
		release()
		t.Fatal("no event reached the hub's subscribers")
	}
	return release
}

// TestWatchQueueOverflow: when the kernel's inotify queue overflows, the
// events it drops may include a save of the file, so the Watcher signals
// anyway. The overflow is the kernel's own: the hub's pump is held up by a
// subscriber that does not read while more events than
// fs.inotify.max_queued_events happen in the watched directory, and the
// save comes after them, so the kernel drops its event.
func TestWatchQueueOverflow(t *testing.T) {
	b, err := os.ReadFile("/proc/sys/fs/inotify/max_queued_events")
	if err != nil {
		testenv.Missing(t, "no /proc/sys/fs/inotify/max_queued_events: %v", err)
	}
	queue, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil || queue > 1<<20 {
		testenv.Missing(t, "fs.inotify.max_queued_events is %q: too many events to overflow the queue in a test", b)
	}
	dir := t.TempDir()
	path := filepath.Join(dir, "config.json")
	write(t, path, "v1")
	var log testenv.LogBuffer
	w, err := Watch(path, &WatchOptions{Debounce: 10 * time.Millisecond, Logger: log.Logger()})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()

	release := holdHub(t, dir)
	defer release()

	// Each file made and removed is at least two events; fsnotify's reader
	// takes a few thousand more off the queue before it blocks.
	for i := range queue + 8192 {
		p := filepath.Join(dir, "noise-"+strconv.Itoa(i))
		f, err := os.Create(p)
		if err != nil {
			t.Fatal(err)
		}
		f.Close()
		if err := os.Remove(p); err != nil {
			t.Fatal(err)
		}
	}
	write(t, path, "v2") // its event is dropped: the queue is full
	release()
	waitContent(t, w, path, "v2")
	if !strings.Contains(log.String(), "inotify queue overflowed") {
		t.Errorf("the overflow is not logged:\n%s", log.String())
	}
}

// TestWatchFolderRemovedAndMadeAgain: the config's folder replaced whole
// (rm -rf, then made again: a dotfiles checkout, a volume mounted again)
// is watched again, and the file saved into it is read; the watcher used
// to go deaf until a SIGHUP or a restart.
func TestWatchFolderRemovedAndMadeAgain(t *testing.T) {
	defer func(d time.Duration) { recheck = d }(recheck)
	recheck = 20 * time.Millisecond
	base := t.TempDir()
	dir := filepath.Join(base, "conf")
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "toolgate.json")
	write(t, path, `{"v": 1}`)
	log := &testenv.LogBuffer{}
	w, err := Watch(path, &WatchOptions{Debounce: 10 * time.Millisecond, Logger: log.Logger(), Meanwhile: "send SIGHUP to reload it"})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	if err := os.RemoveAll(dir); err != nil {
		t.Fatal(err)
	}
	// The removal signals once the watcher has looked again (and found
	// no folder to watch).
	select {
	case <-w.C:
	case <-time.After(testenv.Timeout):
		t.Fatal("the folder's removal was not signalled")
	}
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	write(t, path, `{"v": 2}`)
	waitContent(t, w, path, `{"v": 2}`)
	// Watched again, not only looked for: a later save signals too.
	write(t, path, `{"v": 3}`)
	waitContent(t, w, path, `{"v": 3}`)
	if l := log.String(); !strings.Contains(l, "the file's folder is gone; looking for it every 20ms to watch it again; meanwhile send SIGHUP to reload it") || !strings.Contains(l, "watching the file for changes again") {
		t.Errorf("log:\n%s", l)
	}
}

// TestWatchFolderMovedAwayAndBack: the config's folder moved away and back
// (or removed and made again: ext4 gives the new folder the old one's
// inode number at once) before the Watcher looked is the same directory
// by its device and inode, but its watch is gone (fsnotify drops it on
// the move, the kernel on the removal). The Watcher watches it afresh on
// the event that says so; it kept the dead watch and went deaf
// (TestWatchFolderRemovedAndMadeAgain failed so once in a -race run under
// load: the debounce ended between rm -rf's unlink and its rmdir).
func TestWatchFolderMovedAwayAndBack(t *testing.T) {
	for _, tc := range []struct {
		name  string
		again func(dir string) error
	}{
		{"moved away and back", func(dir string) error {
			if err := os.Rename(dir, dir+".away"); err != nil {
				return err
			}
			return os.Rename(dir+".away", dir)
		}},
		{"removed and made again", func(dir string) error {
			if err := os.RemoveAll(dir); err != nil {
				return err
			}
			return os.Mkdir(dir, 0o700)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "conf")
			if err := os.Mkdir(dir, 0o700); err != nil {
				t.Fatal(err)
			}
			path := filepath.Join(dir, "toolgate.json")
			write(t, path, `{"v": 1}`)
			w, err := Watch(path, &WatchOptions{Debounce: 10 * time.Millisecond})
			if err != nil {
				t.Fatal(err)
			}
			defer w.Close()
			release := holdHub(t, dir)
			defer release()
			if err := tc.again(dir); err != nil {
				t.Fatal(err)
			}
			write(t, path, `{"v": 2}`)
			release()
			// The events signal once the Watcher has looked again; a save
			// after that must signal too.
			waitContent(t, w, path, `{"v": 2}`)
			write(t, path, `{"v": 3}`)
			waitContent(t, w, path, `{"v": 3}`)
		})
	}
}

// TestWatchFolderReplacedWhileHeldOpen: a folder removed while a process
// holds it open (Badger holds the data folder) sends no event of its own,
// and one made again under its name is another directory: the watcher
// finds both by looking (recheck), so the state file written into the new
// folder is read. It used to watch the removed directory forever.
func TestWatchFolderReplacedWhileHeldOpen(t *testing.T) {
	defer func(d time.Duration) { recheck = d }(recheck)
	recheck = 20 * time.Millisecond
	dir := filepath.Join(t.TempDir(), "data")
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "state.json") // not there yet
	w, err := Watch(path, &WatchOptions{Debounce: 10 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	held, err := os.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer held.Close()
	if err := os.RemoveAll(dir); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	write(t, path, `{"disabled": ["memory"]}`)
	waitContent(t, w, path, `{"disabled": ["memory"]}`)
	write(t, path, `{"disabled": []}`)
	waitContent(t, w, path, `{"disabled": []}`)
}
