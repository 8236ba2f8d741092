//go:build linux

package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/toolgate/toolgate/embed"
	"github.com/toolgate/toolgate/internal/dirs"
	"github.com/toolgate/toolgate/internal/testenv"
	"github.com/toolgate/toolgate/models"
)

// A model file this user may not read (a shared models folder fetched by
// root with umask 077, a chmod 600) is said as such, with the fix that
// gives it access, and loads once it is readable. The gateway used to take
// it for a file that loads, fail to load it (`read model: open …:
// permission denied`, no fix), and try again only once its size or mtime
// changed, which a chmod does not: searches stayed BM25-only until a
// restart. The gateway runs as nobody when the test runs as root (root
// reads anything); another user is refused by the mode alone (0000).
func TestModelFileUnreadableLoadsOnceReadable(t *testing.T) {
	srcDir := models.ModelDir(installedModels())
	ort := dirs.ORTLib("", "")
	for _, f := range []string{filepath.Join(srcDir, embed.INT8.ModelFile()), filepath.Join(srcDir, embed.TokenizerFile), ort} {
		if _, err := os.Stat(f); err != nil {
			testenv.Missing(t, "%s: %v (install it with make deps)", f, err)
		}
	}
	// A folder nobody may reach, with the binary, the runtime and a copy
	// of the model (int8, the smallest) whose mode the test changes.
	dir, err := os.MkdirTemp("", "toolgate-unreadable-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	modelDir := filepath.Join(dir, "models", embed.ModelName)
	data := filepath.Join(dir, "data")
	for _, d := range []string{dir, modelDir, data} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	bin, lib, model := filepath.Join(dir, "toolgate"), filepath.Join(dir, filepath.Base(ort)), filepath.Join(modelDir, embed.INT8.ModelFile())
	linkOrCopy(t, os.Args[0], bin, 0o755)
	linkOrCopy(t, ort, lib, 0o644)
	linkOrCopy(t, filepath.Join(srcDir, embed.TokenizerFile), filepath.Join(modelDir, embed.TokenizerFile), 0o644)
	testenv.CopyFile(t, filepath.Join(srcDir, embed.INT8.ModelFile()), model, 0o644)
	refused := os.FileMode(0o000)
	if os.Geteuid() == 0 {
		refused = 0o600 // root's
		if err := os.Chown(data, 65534, 65534); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Chmod(model, refused); err != nil {
		t.Fatal(err)
	}
	cfg := filepath.Join(dir, "toolgate.json")
	if err := os.WriteFile(cfg, []byte(`{"mcpServers": {}, "toolgate": {"embed": {"variant": "int8"}}}`), 0o644); err != nil {
		t.Fatal(err)
	}

	addr := freeAddr(t)
	cmd := exec.Command(bin, "serve", "--config", cfg, "--http", addr)
	cmd.Dir = dir
	cmd.Env = []string{"PATH=/usr/bin:/bin", "HOME=" + dir, "TOOLGATE_E2E_MAIN=1", dirs.EnvData + "=" + data,
		dirs.EnvModels + "=" + filepath.Dir(modelDir), dirs.EnvORTLib + "=" + lib}
	if os.Geteuid() == 0 {
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
	}
	cmd.Stderr = testLog(t, "toolgate: ")
	startHTTP(t, cmd, addr, time.Minute)

	rep := getStatus(t, addr)
	if s := rep.Search; s == nil || !s.BM25Only || !strings.Contains(s.Reason, "model file cannot be read by this user: "+model) || !strings.Contains(s.Reason, "mode 0") || !strings.Contains(s.Reason, "chown ") {
		t.Fatalf("search = %+v: want BM25-only, the model file named as not readable by this user, with its mode and the fix", rep.Search)
	}
	if err := os.Chmod(model, 0o644); err != nil {
		t.Fatal(err)
	}
	testenv.EventuallyWithin(t, time.Minute, "the model loaded once readable (search no longer BM25-only)", func() bool {
		s := getStatus(t, addr).Search
		return s != nil && !s.BM25Only && s.Model != ""
	})
}

// linkOrCopy makes to the file from: a hard link where it can (the test
// binary and the runtime are large), else a copy of mode.
func linkOrCopy(t *testing.T, from, to string, mode os.FileMode) {
	t.Helper()
	if os.Link(from, to) == nil {
		return
	}
	testenv.CopyFile(t, from, to, mode)
}
