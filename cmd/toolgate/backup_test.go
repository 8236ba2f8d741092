package main

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/toolgate/toolgate/index/catalog"
	"github.com/toolgate/toolgate/internal/datafile"
	"github.com/toolgate/toolgate/internal/storage"
	"github.com/toolgate/toolgate/search/learn"
)

// TestBackup: `toolgate backup DIR` copies what cannot be made again (keys,
// revoked keys, state, pins, logins, the audit log, the learned pairs) with
// their modes into a new folder that is a data folder itself, and leaves
// out what is made again (index, cache, models, run, lock files); a folder
// that holds files is refused.
func TestBackup(t *testing.T) {
	data := t.TempDir()
	files := map[string]string{
		"keys.jsonl":           `{"name":"ops","sha256":"` + strings.Repeat("a", 64) + `","created":"2026-12-06T14:50:42Z"}` + "\n",
		"keys-revoked.jsonl":   "",
		"state.json":           `{"disabled": ["memory"]}`,
		"quarantine/pins.json": `{"version":1,"tools":{}}`,
		"auth/github.json":     `{"token":"x"}`,
		"audit/audit.jsonl":    `{"action":"search_tools"}` + "\n",
		"audit/audit.jsonl.1":  `{"action":"execute_tool"}` + "\n",
		"keys.jsonl.lock":      "",
		"index/manifest.json":  "{}",
		"cache/embeddings/x":   "",
		"models/m/model.onnx":  "",
	}
	for name, body := range files {
		p := filepath.Join(data, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	s, err := learn.Open(filepath.Join(data, "learn"), nil)
	if err != nil {
		t.Fatal(err)
	}
	s.Record("read a file", catalog.Tool{Server: "fs", Name: "read_file", Description: "Read a file."})
	s.Record("open my notes", catalog.Tool{Server: "fs", Name: "read_file", Description: "Read a file."})
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	dst := filepath.Join(t.TempDir(), "backup")
	var out bytes.Buffer
	if err := runBackup(context.Background(), &globals{dataDir: data}, dst, &out, nil); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"keys.jsonl", "keys-revoked.jsonl", "state.json", "quarantine/pins.json", "auth/github.json", "audit/audit.jsonl", "audit/audit.jsonl.1"} {
		b, err := os.ReadFile(filepath.Join(dst, name))
		if err != nil || string(b) != files[name] {
			t.Errorf("%s in the backup: %q, %v; want %q", name, b, err, files[name])
		}
		if fi, err := os.Stat(filepath.Join(dst, name)); err == nil && fi.Mode().Perm() != 0o600 {
			t.Errorf("%s in the backup: mode %04o, want 0600", name, fi.Mode().Perm())
		}
	}
	for _, name := range []string{"keys.jsonl.lock", "index", "cache", "models", "run"} {
		if _, err := os.Stat(filepath.Join(dst, name)); err == nil {
			t.Errorf("%s copied into the backup", name)
		}
	}
	copied, err := learn.Open(filepath.Join(dst, "learn"), nil)
	if err != nil {
		t.Fatal(err)
	}
	if n, _ := copied.Stats(); n != 2 {
		t.Errorf("the backup's learned pairs: %d, want 2", n)
	}
	copied.Close()
	if !strings.Contains(out.String(), "copied learn/: 2 learned pairs\n") || !strings.Contains(out.String(), "toolgate --data-dir "+dst+" keys list") {
		t.Errorf("backup said:\n%s", out.String())
	}

	var ue usageError
	if err := runBackup(context.Background(), &globals{dataDir: data}, dst, &out, nil); err == nil || !errors.As(err, &ue) {
		t.Errorf("a backup into a folder that holds one: %v, want a usage error", err)
	}
}

// The learned pairs of a running gateway come through its status socket
// (GET /learn?backup=1) as one consistent stream, with the trailer that
// says all of it went.
func TestBackupThroughHolder(t *testing.T) {
	tools := []catalog.Tool{{Server: "fs", Name: "read_file", Description: "read a file"}}
	_, held, gw, _ := serveHolder(t, tools)
	held.Record("open my notes", tools[0])
	var stream bytes.Buffer
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := backupThrough(ctx, gw, &stream); err != nil {
		t.Fatal(err)
	}
	copied, err := learn.Restore(filepath.Join(t.TempDir(), "learn"), &stream, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer copied.Close()
	if n, _ := copied.Stats(); n != 1 {
		t.Errorf("pairs through the holder: %d, want 1", n)
	}
}

// TestBackupConfig: `toolgate backup DIR -c team.json` backs up the data
// folder of the config's toolgate.dataDir, as `-c team.json` gives every
// other command of a team's gateway (keys, audit, logs, servers); it was
// an unknown flag (`unknown shorthand flag: 'c' in -c`), and without it
// backup copied the default data folder, not the gateway's.
func TestBackupConfig(t *testing.T) {
	dir := t.TempDir()
	data, xdg := filepath.Join(dir, "team"), filepath.Join(dir, "xdg")
	key := `{"name":"carol","sha256":"` + strings.Repeat("b", 64) + `","created":"2026-12-07T22:40:00Z"}` + "\n"
	if err := os.MkdirAll(data, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(data, "keys.jsonl"), []byte(key), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg := writeConfig(t, `{"mcpServers": {}, "toolgate": {"dataDir": "`+data+`"}}`)
	for _, tc := range []struct {
		name string
		env  []string
		args []string
	}{
		{"-c", nil, []string{"-c", cfg}},
		{"$TOOLGATE_CONFIG", []string{"TOOLGATE_CONFIG=" + cfg}, nil},
	} {
		dst := filepath.Join(t.TempDir(), "backup")
		out, err := configCmd(t, xdg, tc.env, append([]string{"backup", dst}, tc.args...)...)
		if err != nil || !strings.Contains(out, "backup of "+data+" in "+dst) {
			t.Errorf("backup with %s: %v\n%s\nwant the backup of the config's data folder %s", tc.name, err, out, data)
			continue
		}
		if b, err := os.ReadFile(filepath.Join(dst, "keys.jsonl")); err != nil || string(b) != key {
			t.Errorf("backup with %s: keys.jsonl %q, %v; want the team's key", tc.name, b, err)
		}
	}
}

// TestBackupFullDiskLeavesNothing: a backup whose copy fails half-way (a
// full disk: a file cut short, then ENOSPC) leaves DIR as it was, so the
// command can be run again into it, and says what to do. It left DIR with
// the files copied so far and the one cut short (keys.jsonl of 0 bytes on
// a full tmpfs), a data folder that a restore would take as having no API
// keys, and a second run was refused: "a folder that holds files".
func TestBackupFullDiskLeavesNothing(t *testing.T) {
	data := t.TempDir()
	for name, body := range map[string]string{
		"keys.jsonl":           `{"name":"ops","sha256":"` + strings.Repeat("a", 64) + `","created":"2026-12-06T14:50:42Z"}` + "\n",
		"state.json":           `{"disabled": ["memory"]}`,
		"quarantine/pins.json": `{"version":1,"tools":{}}`,
		"audit/audit.jsonl":    `{"action":"search_tools"}` + "\n",
	} {
		p := filepath.Join(data, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	// The third file written fills the disk: half of it lands.
	writes := 0
	backupWriteFile = func(name string, b []byte, perm os.FileMode) error {
		if writes++; writes == 3 {
			os.WriteFile(name, b[:len(b)/2], perm)
			return &os.PathError{Op: "write", Path: name, Err: syscall.ENOSPC}
		}
		return os.WriteFile(name, b, perm)
	}
	t.Cleanup(func() { backupWriteFile = os.WriteFile })

	parent := t.TempDir()
	empty := filepath.Join(parent, "empty")
	if err := os.Mkdir(empty, 0o700); err != nil {
		t.Fatal(err)
	}
	for _, dst := range []string{filepath.Join(parent, "new"), empty} {
		writes = 0
		var out bytes.Buffer
		err := runBackup(context.Background(), &globals{dataDir: data}, dst, &out, nil)
		if err == nil || !errors.Is(err, syscall.ENOSPC) || !strings.Contains(err.Error(), "nothing was kept there: run the command again") {
			t.Fatalf("backup into %s on a full disk: %v, want ENOSPC and what to do", dst, err)
		}
		if fix := storage.CommandFix(err); !strings.Contains(fix, "free space on the file system of "+parent) {
			t.Errorf("backup into %s on a full disk: fix %q, want free space on the file system of %s", dst, fix, parent)
		}
		entries, _ := os.ReadDir(dst)
		if _, serr := os.Stat(dst); (dst == empty) != (serr == nil) || len(entries) > 0 {
			t.Errorf("backup into %s on a full disk left %v (there: %v)", dst, entries, serr)
		}
		if out.Len() > 0 {
			t.Errorf("backup into %s on a full disk printed %q", dst, out.String())
		}
	}
	// A backup killed half-way leaves its folder inside DIR: named, with
	// how to remove it.
	left := filepath.Join(empty, backupStagePrefix+"123")
	if err := os.Mkdir(left, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := runBackup(context.Background(), &globals{dataDir: data}, empty, &bytes.Buffer{}, nil); err == nil || !strings.Contains(err.Error(), "left by a backup that was killed half-way: remove it (rm -r "+left+")") {
		t.Errorf("backup into a folder a killed backup left: %v, want the folder named", err)
	}
	os.Remove(left)
	// Space back: the same DIR takes the backup.
	backupWriteFile = os.WriteFile
	var out bytes.Buffer
	if err := runBackup(context.Background(), &globals{dataDir: data}, empty, &out, nil); err != nil {
		t.Fatal(err)
	}
	entries, _ := os.ReadDir(empty)
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	if want := []string{"audit", "keys.jsonl", "quarantine", "state.json"}; !slices.Equal(names, want) {
		t.Errorf("backup after space came back: %v, want %v", names, want)
	}
}

// TestBackupUnderWay: a second `toolgate backup DIR` while one is writing
// into DIR (its .backup-partial-… folder there) was told that folder was
// left by a backup killed half-way, with `rm -r` of it: run, it removed the
// files of the backup under way. It says now that a backup is writing into
// DIR, and leaves DIR as it is.
func TestBackupUnderWay(t *testing.T) {
	data := t.TempDir()
	if err := os.WriteFile(filepath.Join(data, "state.json"), []byte(`{"disabled": ["memory"]}`), 0o600); err != nil {
		t.Fatal(err)
	}
	dst := t.TempDir()
	stage := filepath.Join(dst, backupStagePrefix+"123")
	if err := os.Mkdir(stage, 0o700); err != nil {
		t.Fatal(err)
	}
	// The first backup holds DIR while it writes.
	unlock, ok, err := datafile.TryLockDir(dst)
	if err != nil || !ok {
		t.Fatal(ok, err)
	}
	err = runBackup(context.Background(), &globals{dataDir: data}, dst, &bytes.Buffer{}, nil)
	if err == nil || !strings.Contains(err.Error(), "another toolgate backup is writing into "+dst) || strings.Contains(err.Error(), "rm -r") {
		t.Errorf("backup into a folder another backup writes into: %v, want that said, and no rm -r", err)
	}
	if _, err := os.Stat(stage); err != nil {
		t.Errorf("the backup under way's folder: %v", err)
	}
	unlock()
	// Once it is not held, its folder is a killed backup's.
	if err := runBackup(context.Background(), &globals{dataDir: data}, dst, &bytes.Buffer{}, nil); err == nil || !strings.Contains(err.Error(), "left by a backup that was killed half-way") {
		t.Errorf("backup into a folder a killed backup left: %v", err)
	}
}

// TestBackupKilledMovingUp: a backup killed while it moved its files up
// into DIR leaves some of them there beside its .backup-partial-… folder:
// not a whole backup. The next run into DIR said only `a folder that holds
// files`, as if DIR held a backup; it names the killed backup's folder and
// says that what is beside it is not a whole backup.
func TestBackupKilledMovingUp(t *testing.T) {
	data := t.TempDir()
	dst := t.TempDir()
	left := filepath.Join(dst, backupStagePrefix+"123")
	if err := os.MkdirAll(filepath.Join(left, "audit"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dst, "keys.jsonl"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	err := runBackup(context.Background(), &globals{dataDir: data}, dst, &bytes.Buffer{}, nil)
	if err == nil || !strings.Contains(err.Error(), dst+" holds "+backupStagePrefix+"123, left by a backup that was killed half-way") ||
		!strings.Contains(err.Error(), "not a whole backup") {
		t.Errorf("backup into a folder a backup killed while moving up left: %v", err)
	}
}

// TestBackupWithoutLock: a file system that cannot lock a folder (NFS,
// where flock's exclusive lock needs a file open for writing, which a
// folder never is: EBADF; ENOLCK without a lock daemon) made every backup
// into it fail with that error, and left the DIR it had just made. The
// lock only tells a second backup apart: the backup goes on without it.
func TestBackupWithoutLock(t *testing.T) {
	data := t.TempDir()
	if err := os.WriteFile(filepath.Join(data, "state.json"), []byte(`{"disabled": ["memory"]}`), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { backupTryLock = datafile.TryLockDir })
	for _, lockErr := range []error{syscall.EBADF, syscall.ENOLCK} {
		backupTryLock = func(string) (func(), bool, error) { return nil, false, lockErr }
		dst := filepath.Join(t.TempDir(), "new")
		if err := runBackup(context.Background(), &globals{dataDir: data}, dst, &bytes.Buffer{}, nil); err != nil {
			t.Errorf("backup where DIR cannot be locked (%v): %v", lockErr, err)
		}
		if _, err := os.Stat(filepath.Join(dst, "state.json")); err != nil {
			t.Errorf("backup where DIR cannot be locked (%v): %v", lockErr, err)
		}
	}
}

// TestBackupIntoAFile: DIR that is a file (a backup's tarball, a typo) is
// said as such, with the fix, exit status 2; it read `open DIR: not a
// directory`, exit status 1, and the file was left as it was.
func TestBackupIntoAFile(t *testing.T) {
	data := t.TempDir()
	dst := filepath.Join(t.TempDir(), "backup.tar")
	if err := os.WriteFile(dst, []byte("a tarball"), 0o600); err != nil {
		t.Fatal(err)
	}
	err := runBackup(context.Background(), &globals{dataDir: data}, dst, &bytes.Buffer{}, nil)
	var usage usageError
	if err == nil || !errors.As(err, &usage) || !strings.Contains(err.Error(), dst+" is a file, not a folder: give a new folder (or an empty one) to back up into") {
		t.Errorf("backup into a file: %v, want a usage error that says so", err)
	}
	if b, err := os.ReadFile(dst); err != nil || string(b) != "a tarball" {
		t.Errorf("the file backed up into: %q, %v", b, err)
	}
}
