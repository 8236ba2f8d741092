// Package cgroupmem reads how much memory the memory limits of this
// process's control groups leave it (a systemd unit's MemoryMax=, a
// container's --memory, a Kubernetes pod's limit).
//
// Such a limit does not refuse an allocation as ulimit -v does: past it the
// kernel kills a process of the group, most often the largest (toolgate
// with its model), which no fallback can catch. So a large allocation that
// can be done without (the embedding model) asks first. Both cgroup
// versions are read (v2, and v1's memory controller, which a hybrid system
// mounts apart), and every group from this process's up to its
// hierarchy's root, each of which may hold a limit: the tightest counts.
package cgroupmem

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// Room is what the tightest memory limit over this process leaves.
type Room struct {
	// Group is the cgroup folder that holds the limit.
	Group string
	// Limit and Used are that group's limit and what its processes use
	// of it (the page cache that can be dropped left out, as the kernel
	// drops it before it kills: usage less inactive files).
	Limit, Used uint64
}

// Free is what the limit leaves.
func (r Room) Free() uint64 {
	if r.Used >= r.Limit {
		return 0
	}
	return r.Limit - r.Used
}

// Self returns the room the tightest memory limit over this process
// leaves; ok is false when no limit is set (or none can be read).
func Self() (Room, bool) {
	cg, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		return Room{}, false
	}
	mi, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return Room{}, false
	}
	return fromProc(cg, mi)
}

// v1Unlimited: cgroup v1 writes "no limit" as the largest page-aligned
// int64 (9223372036854771712); anything this large is none.
const v1Unlimited = 1 << 62

// fromProc is Self on the contents of /proc/self/cgroup and
// /proc/self/mountinfo.
func fromProc(cgroup, mountinfo []byte) (Room, bool) {
	var best Room
	found := false
	take := func(r Room, ok bool) {
		if ok && (!found || r.Free() < best.Free()) {
			best, found = r, true
		}
	}
	for _, line := range strings.Split(string(cgroup), "\n") {
		// hierarchy-ID:controllers:path
		parts := strings.SplitN(line, ":", 3)
		if len(parts) != 3 {
			continue
		}
		switch {
		case parts[0] == "0" && parts[1] == "":
			if dir, top, ok := groupDir(mountinfo, "cgroup2", "", parts[2]); ok {
				take(walk(dir, top, "memory.max", "memory.current", "inactive_file"))
			}
		case hasWord(parts[1], "memory"):
			if dir, top, ok := groupDir(mountinfo, "cgroup", "memory", parts[2]); ok {
				take(walk(dir, top, "memory.limit_in_bytes", "memory.usage_in_bytes", "total_inactive_file"))
			}
		}
	}
	return best, found
}

// groupDir finds where the group at path (as /proc/self/cgroup names it)
// is mounted: the folder, and the mount point of its hierarchy (the
// highest folder to read). A v1 mount is the one whose options name
// controller.
func groupDir(mountinfo []byte, fstype, controller, path string) (dir, top string, ok bool) {
	sc := bufio.NewScanner(bytes.NewReader(mountinfo))
	for sc.Scan() {
		// id parent major:minor root mountpoint options [optional…] - fstype source superoptions
		left, right, ok := strings.Cut(sc.Text(), " - ")
		if !ok {
			continue
		}
		f, r := strings.Fields(left), strings.Fields(right)
		if len(f) < 5 || len(r) < 3 || r[0] != fstype {
			continue
		}
		if controller != "" && !hasWord(r[2], controller) {
			continue
		}
		root, mnt := unescape(f[3]), unescape(f[4])
		// The mount shows the hierarchy from root down (a container's
		// group, with the host's cgroup namespace); a path outside it
		// is one a cgroup namespace names from its own root.
		rel, _ := strings.CutPrefix(path, strings.TrimSuffix(root, "/"))
		return filepath.Join(mnt, rel), mnt, true
	}
	return "", "", false
}

// walk reads the limit and the use of dir and of each folder above it up
// to top, and returns the one that leaves the least.
func walk(dir, top, limitFile, usageFile, inactiveKey string) (Room, bool) {
	var best Room
	found := false
	for {
		if r, ok := read(dir, limitFile, usageFile, inactiveKey); ok && (!found || r.Free() < best.Free()) {
			best, found = r, true
		}
		if dir == top || !strings.HasPrefix(dir, top) {
			return best, found
		}
		up := filepath.Dir(dir)
		if up == dir {
			return best, found
		}
		dir = up
	}
}

// read reads one group's limit and use; ok is false when it has no limit.
func read(dir, limitFile, usageFile, inactiveKey string) (Room, bool) {
	limit, ok := number(filepath.Join(dir, limitFile))
	if !ok || limit >= v1Unlimited {
		return Room{}, false // "max", no file (the root group), or v1's none
	}
	used, ok := number(filepath.Join(dir, usageFile))
	if !ok {
		return Room{}, false
	}
	if inactive, ok := statValue(filepath.Join(dir, "memory.stat"), inactiveKey); ok && inactive < used {
		used -= inactive
	}
	return Room{Group: dir, Limit: limit, Used: used}, true
}

// number reads a file that holds one number ("max" is none).
func number(path string) (uint64, bool) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, false
	}
	n, err := strconv.ParseUint(strings.TrimSpace(string(b)), 10, 64)
	return n, err == nil
}

// statValue reads key's value in a memory.stat file ("key value" lines).
func statValue(path, key string) (uint64, bool) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, false
	}
	for _, line := range strings.Split(string(b), "\n") {
		if k, v, ok := strings.Cut(line, " "); ok && k == key {
			n, err := strconv.ParseUint(strings.TrimSpace(v), 10, 64)
			return n, err == nil
		}
	}
	return 0, false
}

// hasWord reports whether the comma-separated list holds w.
func hasWord(list, w string) bool {
	for _, x := range strings.Split(list, ",") {
		if x == w {
			return true
		}
	}
	return false
}

// unescape undoes mountinfo's octal escapes (\040 for a space).
func unescape(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			if n, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(n))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// MiB writes n bytes in MiB, as the messages that name a limit do.
func MiB(n uint64) string { return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20)) }
