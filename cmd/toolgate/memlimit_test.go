//go:build linux

package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/toolgate/toolgate/internal/testenv"
)

// memoryCgroup makes a memory control group of its own for the test (v2
// where the unified hierarchy has the memory controller, else v1's memory
// hierarchy) and returns its folder and a function that sets its limit.
// It needs root (or a delegated hierarchy); the group is removed at the
// test's end, once its processes are gone.
func memoryCgroup(t *testing.T) (dir string, setLimit func(bytes int64)) {
	t.Helper()
	name := "toolgate-test-" + strconv.Itoa(os.Getpid())
	for _, c := range []struct{ root, limit, probe string }{
		{"/sys/fs/cgroup", "memory.max", "cgroup.controllers"},
		{"/sys/fs/cgroup/unified", "memory.max", "cgroup.controllers"},
		{"/sys/fs/cgroup/memory", "memory.limit_in_bytes", "memory.limit_in_bytes"},
	} {
		b, err := os.ReadFile(filepath.Join(c.root, c.probe))
		if err != nil || (c.probe == "cgroup.controllers" && !strings.Contains(" "+strings.TrimSpace(string(b))+" ", " memory ")) {
			continue
		}
		dir = filepath.Join(c.root, name)
		if err := os.Mkdir(dir, 0o755); err != nil {
			testenv.Missing(t, "cannot make a memory control group (%v): the test needs root, or a delegated cgroup hierarchy", err)
		}
		t.Cleanup(func() {
			testenv.Eventually(t, "the test's memory control group emptied and removed", func() bool { return os.Remove(dir) == nil })
		})
		limitFile := filepath.Join(dir, c.limit)
		return dir, func(bytes int64) {
			t.Helper()
			if err := os.WriteFile(limitFile, []byte(strconv.FormatInt(bytes, 10)), 0o644); err != nil {
				t.Fatalf("set the memory limit: %v", err)
			}
		}
	}
	testenv.Missing(t, "no cgroup hierarchy with the memory controller is mounted under /sys/fs/cgroup")
	return "", nil
}

// TestServeUnderMemoryLimit starts a gateway in a memory control group
// whose limit (MemoryMax=, a container's --memory) cannot take the
// embedding model. Past such a limit the kernel does not refuse memory, it
// kills the largest process: toolgate was killed loading the model at
// every start (exit status 137, its log ending at "serving MCP", probed
// with 180 MiB and 150 MiB). It now serves BM25-only, GET /status says why
// with the limit, its group and the fix, and once the limit is raised the
// model loads (tried again every 10 s) and searches are hybrid again.
func TestServeUnderMemoryLimit(t *testing.T) {
	group, setLimit := memoryCgroup(t)
	setLimit(100 << 20)
	cfg := filepath.Join(t.TempDir(), "toolgate.json")
	if err := os.WriteFile(cfg, []byte(`{"mcpServers": {}}`), 0o644); err != nil {
		t.Fatal(err)
	}
	addr := freeAddr(t)
	tg := toolgateCmd(t, t.TempDir(), "serve", "--config", cfg, "--http", addr)
	cmd := exec.Command("sh", append([]string{"-c", `echo $$ > "$0/cgroup.procs" && exec "$@"`, group}, tg.Args...)...)
	cmd.Env = tg.Env
	cmd.Stderr = testLog(t, "toolgate: ")
	startHTTP(t, cmd, addr, time.Minute)

	testenv.EventuallyWithin(t, time.Minute, "the model's load refused, said in GET /status", func() bool {
		s := getStatus(t, addr).Search
		return s != nil && s.BM25Only && s.Reason != ""
	})
	s := getStatus(t, addr).Search
	for _, want := range []string{"memory limit", group, "MemoryMax="} {
		if !strings.Contains(s.Reason, want) {
			t.Errorf("search.reason %q does not say %q", s.Reason, want)
		}
	}
	setLimit(2 << 30)
	testenv.EventuallyWithin(t, time.Minute, "the model loaded once the limit was raised (search no longer BM25-only)", func() bool {
		s := getStatus(t, addr).Search
		return s != nil && !s.BM25Only && s.Model != ""
	})
}
