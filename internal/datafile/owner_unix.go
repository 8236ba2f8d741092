//go:build unix

package datafile

import (
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
)

// GiveToOwner gives f, a file (or folder) that root is making or replacing
// at path, to the user that owns what is there: the file it replaces (a
// symlink's own owner, as a rename replaces the link), else path's folder, when that is another user than root. An operator's `sudo
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
		if fi, err := os.Lstat(p); err == nil {
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

// GiveTreesToOwner gives everything root owns in paths (files and folders,
// walked) to the owner of dir, when root runs a command on the data folder
// dir of a gateway that runs as its own user: what the index and the
// Badger stores wrote there (`sudo toolgate index`, `learn`, `search`) the
// gateway could not replace, open or remove (its embedding cache was moved
// aside as damaged, an old index generation left for good). Only paths are
// walked (toolgate's own, in dir): not whatever else a folder given as the
// data folder holds. Nothing is done for any other user, or when root owns
// dir.
func GiveTreesToOwner(dir string, paths []string) {
	if os.Geteuid() != 0 {
		return
	}
	fi, err := os.Stat(dir)
	if err != nil || !fi.IsDir() {
		return
	}
	owner, ok := fi.Sys().(*syscall.Stat_t)
	if !ok || owner.Uid == 0 {
		return
	}
	for _, root := range paths {
		_ = filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				return nil
			}
			if info, err := d.Info(); err == nil {
				if st, ok := info.Sys().(*syscall.Stat_t); ok && st.Uid == 0 {
					_ = os.Lchown(p, int(owner.Uid), int(owner.Gid))
				}
			}
			return nil
		})
	}
}
