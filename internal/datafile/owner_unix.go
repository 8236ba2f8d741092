//go:build unix

package datafile

import (
	"os"
	"path/filepath"
	"syscall"
)

// GiveToOwner gives f, a file (or folder) that root is making or replacing
// at path, to the user that owns what is there: the file it replaces, else
// path's folder, when that is another user than root. An operator's `sudo
// toolgate keys create` (or `tools approve`, `servers disable`, `servers
// add`) on the data folder or config of a gateway that runs as its own
// user used to leave keys.jsonl (state.json, pins.json, their .lock files,
// the config) root's and 0600, so the gateway could not read its API keys
// and refused every request with 503. A file root left in such a folder
// earlier is given back the same way. Nothing changes for any other user,
// or where root owns both.
func GiveToOwner(f *os.File, path string) {
	if os.Geteuid() != 0 {
		return
	}
	var uid, gid uint32
	for _, p := range []string{path, filepath.Dir(path)} {
		if fi, err := os.Stat(p); err == nil {
			if st, ok := fi.Sys().(*syscall.Stat_t); ok && st.Uid != 0 {
				uid, gid = st.Uid, st.Gid
				break
			}
		}
	}
	if uid == 0 {
		return
	}
	if fi, err := f.Stat(); err == nil {
		if st, ok := fi.Sys().(*syscall.Stat_t); ok && st.Uid == uid && st.Gid == gid {
			return
		}
	}
	_ = f.Chown(int(uid), int(gid))
}

// giveFolderToOwner is GiveToOwner for the folder dir (made by root with
// MkdirAll, as auth/ and quarantine/ are: 0700 and root's, the gateway could
// not even look in).
func giveFolderToOwner(dir string) {
	if os.Geteuid() != 0 {
		return
	}
	if d, err := os.Open(dir); err == nil {
		GiveToOwner(d, dir)
		d.Close()
	}
}
