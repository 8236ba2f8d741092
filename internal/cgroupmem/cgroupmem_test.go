package cgroupmem

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// tree writes files (path relative to root → content) under root.
func tree(t *testing.T, root string, files map[string]string) {
	t.Helper()
	for p, c := range files {
		p = filepath.Join(root, p)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(c), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// TestFromProc reads the tightest limit over a process from fake cgroup
// trees: v1 (a hybrid system: the memory controller on v1, v2 without
// it), v2, a limit on a parent group, none, and a v2 group seen through a
// container with the host's cgroup namespace (its mount's root not /).
func TestFromProc(t *testing.T) {
	const mib = 1 << 20
	for _, tc := range []struct {
		name      string
		cgroup    string
		mounts    string // with ROOT for the test's folder
		files     map[string]string
		wantOK    bool
		wantGroup string
		wantFree  uint64
	}{
		{
			name:   "v1 hybrid",
			cgroup: "4:memory:/svc/tg\n0::/\n",
			mounts: "35 31 0:32 / ROOT/memory rw,relatime - cgroup cgroup rw,memory\n41 31 0:38 / ROOT/unified rw,relatime - cgroup2 cgroup2 rw\n",
			files: map[string]string{
				"memory/memory.limit_in_bytes":        "9223372036854771712\n",
				"memory/memory.usage_in_bytes":        "900000000\n",
				"memory/svc/memory.limit_in_bytes":    "9223372036854771712\n",
				"memory/svc/memory.usage_in_bytes":    "1000\n",
				"memory/svc/tg/memory.limit_in_bytes": "188743680\n", // 180 MiB
				"memory/svc/tg/memory.usage_in_bytes": "94371840\n",  // 90 MiB
				"memory/svc/tg/memory.stat":           "cache 31457280\nrss 62914560\ntotal_inactive_file 10485760\n",
			},
			wantOK: true, wantGroup: "memory/svc/tg", wantFree: 100 * mib,
		},
		{
			name:   "v2 limit on the parent",
			cgroup: "0::/system.slice/toolgate.service\n",
			mounts: "30 24 0:26 / ROOT rw,nosuid - cgroup2 cgroup2 rw,nsdelegate\n",
			files: map[string]string{
				"system.slice/memory.max":                      "268435456\n", // 256 MiB
				"system.slice/memory.current":                  "209715200\n", // 200 MiB
				"system.slice/memory.stat":                     "anon 100\ninactive_file 0\n",
				"system.slice/toolgate.service/memory.max":     "max\n",
				"system.slice/toolgate.service/memory.current": "52428800\n",
			},
			wantOK: true, wantGroup: "system.slice", wantFree: 56 * mib,
		},
		{
			name:   "v2 no limit",
			cgroup: "0::/user.slice\n",
			mounts: "30 24 0:26 / ROOT rw - cgroup2 cgroup2 rw\n",
			files: map[string]string{
				"user.slice/memory.max":     "max\n",
				"user.slice/memory.current": "52428800\n",
			},
		},
		{
			name:   "v2 of a container, the host's cgroup namespace",
			cgroup: "0::/docker/abc\n",
			mounts: "30 24 0:26 /docker/abc ROOT rw - cgroup2 cgroup2 rw\n",
			files: map[string]string{
				"memory.max":     "134217728\n",
				"memory.current": "33554432\n",
			},
			wantOK: true, wantGroup: "", wantFree: 96 * mib,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			root := t.TempDir()
			tree(t, root, tc.files)
			r, ok := fromProc([]byte(tc.cgroup), []byte(strings.ReplaceAll(tc.mounts, "ROOT", root)))
			if ok != tc.wantOK {
				t.Fatalf("ok = %v, want %v (%+v)", ok, tc.wantOK, r)
			}
			if !ok {
				return
			}
			if want := filepath.Join(root, tc.wantGroup); r.Group != want || r.Free() != tc.wantFree {
				t.Errorf("got %s with %s free, want %s with %s free", r.Group, MiB(r.Free()), want, MiB(tc.wantFree))
			}
		})
	}
}

func TestUnescape(t *testing.T) {
	if got := unescape(`/mnt/my\040cgroups`); got != "/mnt/my cgroups" {
		t.Errorf("got %q", got)
	}
}
