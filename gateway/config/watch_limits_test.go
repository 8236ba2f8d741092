package config

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/toolgate/toolgate/internal/testenv"
)

// inotifyFDs counts the process's inotify instances.
func inotifyFDs(t *testing.T) int {
	t.Helper()
	fds, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, fd := range fds {
		if l, err := os.Readlink(filepath.Join("/proc/self/fd", fd.Name())); err == nil && l == "anon_inode:inotify" {
			n++
		}
	}
	return n
}

// Three files watched (config, state, pins) take one inotify instance of
// the user's 128, and each Watcher hears only its own file.
func TestWatchersShareOneInstance(t *testing.T) {
	if n := inotifyFDs(t); n != 0 {
		t.Fatalf("%d inotify instances open before the test", n)
	}
	var ws []*Watcher
	var paths []string
	for i := range 3 {
		path := filepath.Join(t.TempDir(), fmt.Sprintf("file%d.json", i))
		w, err := Watch(path, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer w.Close()
		ws, paths = append(ws, w), append(paths, path)
	}
	if n := inotifyFDs(t); n != 1 {
		t.Fatalf("three Watchers hold %d inotify instances, want 1", n)
	}
	write(t, paths[1], "{}")
	waitContent(t, ws[1], paths[1], "{}")
	select {
	case <-ws[0].C:
		t.Error("a Watcher was signalled for another Watcher's file")
	case <-ws[2].C:
		t.Error("a Watcher was signalled for another Watcher's file")
	default:
	}
	for _, w := range ws {
		if err := w.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	}
	if n := inotifyFDs(t); n != 0 {
		t.Errorf("%d inotify instances open after every Watcher closed, want 0", n)
	}
}

// Two files in one directory: closing one Watcher keeps the directory
// watched for the other.
func TestWatchSameDirectoryTwice(t *testing.T) {
	dir := t.TempDir()
	a, b := filepath.Join(dir, "a.json"), filepath.Join(dir, "b.json")
	wa, err := Watch(a, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer wa.Close()
	wb, err := Watch(b, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer wb.Close()
	if err := wa.Close(); err != nil {
		t.Fatal(err)
	}
	write(t, b, `{"b": 1}`)
	waitContent(t, wb, b, `{"b": 1}`)
}

// Out of descriptors, EMFILE is the process's open-files limit, not the
// inotify instances: the fix says which.
func TestLimitErrWording(t *testing.T) {
	err := limitErr(fmt.Errorf("add: %w", syscall.ENOSPC), syscall.ENOSPC)
	var limit *LimitError
	if !errors.As(err, &limit) || !strings.Contains(limit.Fix, "fs.inotify.max_user_watches") || !strings.Contains(limit.Fix, "disk is not full") {
		t.Errorf("ENOSPC from inotify_add_watch: %v", err)
	}
	if !errors.Is(err, syscall.ENOSPC) {
		t.Errorf("%v does not unwrap to ENOSPC", err)
	}
	if err := limitErr(syscall.EACCES, syscall.ENOSPC); errors.As(err, &limit) {
		t.Errorf("EACCES taken for a limit: %v", err)
	}
	if err := limitErr(syscall.EMFILE, syscall.EMFILE); !errors.As(err, &limit) || !strings.Contains(limit.Fix, "fs.inotify.max_user_instances") {
		t.Errorf("EMFILE with descriptors free: %v", err)
	}
	release := testenv.FillDescriptors(t)
	err = limitErr(syscall.EMFILE, syscall.EMFILE)
	release()
	if !errors.As(err, &limit) || !strings.Contains(limit.Fix, "ulimit -n") || strings.Contains(limit.Fix, "inotify") {
		t.Errorf("EMFILE out of descriptors: %v", err)
	}
}

// The kernel's inotify limits, reached for real: the test runs itself again
// in a user namespace of its own, whose limits (/proc/sys/user/
// max_inotify_instances, max_inotify_watches) it may lower without
// touching the machine's, and holds the only instance or watch allowed.
// Watch must still return, log the limit to raise, and start hearing the
// file once the instance or watch is free.
func TestWatchInotifyLimits(t *testing.T) {
	for _, limit := range []string{"instances", "watches"} {
		t.Run(limit, func(t *testing.T) {
			cmd := exec.Command(os.Args[0], "-test.run=^$")
			cmd.Env = append(os.Environ(), inotifyChildEnv+"="+limit)
			cmd.SysProcAttr = testenv.OwnUserNamespace()
			out, err := cmd.CombinedOutput()
			var exit *exec.ExitError
			if err != nil && !errors.As(err, &exit) {
				testenv.Missing(t, testenv.NoUserNamespace, err)
			}
			if err != nil || !strings.Contains(string(out), "inotify child: ok") {
				t.Fatalf("child: %v\n%s", err, out)
			}
			t.Logf("%s", out)
		})
	}
}

const inotifyChildEnv = "TOOLGATE_TEST_INOTIFY_CHILD"

func TestMain(m *testing.M) {
	if limit := os.Getenv(inotifyChildEnv); limit != "" {
		if err := inotifyChild(limit); err != nil {
			fmt.Println("inotify child:", err)
			os.Exit(1)
		}
		fmt.Println("inotify child: ok")
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// inotifyChild is TestWatchInotifyLimits' other half, in its namespace.
func inotifyChild(limit string) error {
	limitRetry = 20 * time.Millisecond
	dir, err := os.MkdirTemp("", "toolgate-inotify")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "toolgate.json")
	setLimit := func(name string, n int) error {
		return os.WriteFile("/proc/sys/user/max_inotify_"+name, []byte(fmt.Sprint(n)), 0o644)
	}
	held, err := syscall.InotifyInit1(syscall.IN_CLOEXEC)
	if err != nil {
		return err
	}
	switch limit {
	case "instances":
		err = setLimit("instances", 1) // the one held
	case "watches":
		if _, err = syscall.InotifyAddWatch(held, os.TempDir(), syscall.IN_CREATE); err == nil {
			err = setLimit("watches", 1)
		}
	}
	if err != nil {
		return fmt.Errorf("lowering the limit: %w", err)
	}
	var log testenv.LogBuffer
	w, err := Watch(path, &WatchOptions{Logger: log.Logger(), Meanwhile: "send SIGHUP"})
	if err != nil {
		return fmt.Errorf("Watch at the limit returned an error instead of a Watcher: %w", err)
	}
	defer w.Close()
	want := map[string]string{"instances": "fs.inotify.max_user_instances", "watches": "fs.inotify.max_user_watches"}[limit]
	if s := log.String(); !strings.Contains(s, want) || !strings.Contains(s, "trying again") || !strings.Contains(s, "send SIGHUP") {
		return fmt.Errorf("the log does not name %s, the retry and what to do meanwhile:\n%s", want, s)
	}
	syscall.Close(held)
	if !testenv.Poll(20*time.Second, func() bool { return strings.Contains(log.String(), "watching the file for changes again") }) {
		return fmt.Errorf("still not watching once the %s was free:\n%s", limit, log.String())
	}
	select { // the signal for a save that may have been missed
	case <-w.C:
	case <-time.After(20 * time.Second):
		return fmt.Errorf("no signal once watching again")
	}
	if err := os.WriteFile(path, []byte("{}"), 0o600); err != nil {
		return err
	}
	select {
	case <-w.C:
	case <-time.After(20 * time.Second):
		return fmt.Errorf("a save after the recovery was not signalled:\n%s", log.String())
	}
	return nil
}
