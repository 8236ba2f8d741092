package storage

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/toolgate/toolgate/internal/shellword"
)

// AccessFix says what to change so that this user may do what it was
// refused (EACCES, EPERM) at path, the file or folder the refused call
// named (folder: path is a folder to make or open). It names what refuses:
//
//   - a folder on the way that this user may not enter: let it in;
//   - path itself, when it is there (a config or a model file of mode 0600
//     that is root's): give it to this user, or open its mode;
//   - else the nearest folder that is there, in which this user may not
//     make what is missing: make the folder for this user; when what is
//     missing is the user's home folder (a system account's HOME, such as
//     /nonexistent, names none), that it is, and to give toolgate its
//     folders another way.
//
// The fixes used to name path's folder whatever refused ("give this user
// access to /tmp" for a config file of mode 0600, "to /" for a data folder
// under a home folder that does not exist). "" when none of these holds
// (an ACL, a security module): the caller keeps its own words.
// OwnFolders is the fix for a home folder toolgate cannot use (one that
// does not exist, is not the user's, or is the temp folder of a uid the
// password database does not know).
const OwnFolders = "give toolgate folders of its own (--data-dir or TOOLGATE_DATA_DIR; a systemd unit: StateDirectory=toolgate and Environment=TOOLGATE_DATA_DIR=%S/toolgate; a container: a volume mounted there and TOOLGATE_DATA_DIR naming it)"

func AccessFix(path string, folder bool) string {
	abs, err := filepath.Abs(path)
	if err != nil {
		return ""
	}
	who, name := thisUser()
	// The folders on the way, from the root: the first that cannot be
	// entered refuses everything below it.
	var up []string
	for p := filepath.Dir(abs); ; p = filepath.Dir(p) {
		up = append([]string{p}, up...)
		if filepath.Dir(p) == p {
			break
		}
	}
	there := "" // the nearest folder on the way that is there
	for _, p := range up {
		fi, err := os.Stat(p)
		if err != nil || !fi.IsDir() {
			break
		}
		if access(p, unix.X_OK) != nil {
			return fmt.Sprintf("this user (%s) may not enter %s (%s), on the way to %s: let it in (chmod o+x, or a group of its), or use a path it can reach", who, p, owned(fi), path)
		}
		there = p
	}
	if fi, err := os.Stat(abs); err == nil {
		want := uint32(unix.R_OK)
		if fi.IsDir() {
			want = unix.R_OK | unix.W_OK | unix.X_OK
		}
		if access(abs, want) != nil || access(abs, unix.W_OK) != nil {
			return fmt.Sprintf("%s is %s, which this user (%s) may not use: give it to this user (%s) or open its mode (chmod)", path, owned(fi), who, shellword.Join("chown", name, path))
		}
		return ""
	}
	if there == "" {
		return ""
	}
	fi, err := os.Stat(there)
	if err != nil || access(there, unix.W_OK|unix.X_OK) == nil {
		return "" // it may make what is missing there: the refusal is not the folder's
	}
	missing := abs // the first missing path below there
	for filepath.Dir(missing) != there && filepath.Dir(missing) != missing {
		missing = filepath.Dir(missing)
	}
	if missing == abs && !folder {
		return fmt.Sprintf("this user (%s) may not make files in %s (%s): give it the folder (%s)", who, there, owned(fi), shellword.Join("chown", "-R", name, there))
	}
	switch home := filepath.Clean(homeFolder()); {
	case homeFolder() == "":
	case missing == home:
		return fmt.Sprintf("the home folder of this user (%s), %s (HOME), does not exist (a system account's often names none), and it may not make it in %s (%s): %s, or make the home folder (%s)",
			who, home, there, owned(fi), OwnFolders, shellword.Join("sudo", "install", "-d", "-o", name, home))
	case there == home:
		// A home folder that is not the user's (DynamicUser's /, a
		// shared one): what toolgate puts there by default cannot be.
		return fmt.Sprintf("this user (%s) may not write in its home folder %s (HOME; %s): %s", who, home, owned(fi), OwnFolders)
	}
	target := abs
	if !folder {
		target = filepath.Dir(abs)
	}
	return fmt.Sprintf("%s does not exist, and this user (%s) may not make it in %s (%s): make it for this user (%s), or use another folder",
		missing, who, there, owned(fi), shellword.Join("sudo", "install", "-d", "-o", name, target))
}

// ReadFix is what lets this user read path, a file it was refused (a
// model file, a config): AccessFix, else to make it readable.
func ReadFix(path string) string {
	if fix := AccessFix(path, false); fix != "" {
		return fix
	}
	return fmt.Sprintf("make it readable by this user (%s)", shellword.Join("chmod", "a+r", path))
}

// access reports whether this process may reach p in mode (unix.R_OK …)
// with its effective IDs: those that the kernel checks at an open.
func access(p string, mode uint32) error {
	return unix.Faccessat(unix.AT_FDCWD, p, mode, unix.AT_EACCESS)
}

// thisUser is how messages name the user toolgate runs as ("nobody, uid
// 65534") and how a command names it (its name, else its uid).
func thisUser() (who, name string) {
	uid := strconv.Itoa(os.Geteuid())
	if u, err := user.LookupId(uid); err == nil {
		return u.Username + ", uid " + uid, u.Username
	}
	return "uid " + uid, uid
}

// owned says whose fi is and its mode: "root's, mode 0700".
func owned(fi fs.FileInfo) string {
	mode := fmt.Sprintf("mode %04o", fi.Mode().Perm())
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return mode
	}
	owner := strconv.Itoa(int(st.Uid))
	if u, err := user.LookupId(owner); err == nil {
		owner = u.Username
	} else {
		owner = "uid " + owner
	}
	return owner + "'s, " + mode
}

// homeFolder is this user's home folder as toolgate's default folders take
// it ($HOME, else the password database's), "" when it has none.
func homeFolder() string {
	if h, err := os.UserHomeDir(); err == nil {
		return h
	}
	if u, err := user.Current(); err == nil {
		return u.HomeDir
	}
	return ""
}

// deniedPath is the path of a refused call that err carries, if any.
func deniedPath(err error) (path string, folder bool) {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Path, pe.Op == "mkdir"
	}
	return "", false
}

// maxUnusable is how many entries Unusable names before it counts the rest.
const maxUnusable = 5

// Unusable lists what of the data folder dir this user may not use — the
// folder itself, a folder in it it may not enter, list or write in, a file
// it may not read and write — with each one's owner and mode, and the one
// fix that gives the folder back: ("", "") when all of it is usable. A data
// folder copied, restored or moved by another user (root) is so: each
// store and file used to be refused on its own, one start at a time
// (keys.jsonl, then the pins, each with a chown of that file alone).
// models/ (it may be shared, read-only) and run/ (each running gateway's
// sockets) are left out; a folder refused is not looked into.
func Unusable(dir string) (names, fix string) {
	var found []string
	n := 0
	filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error { //nolint:errcheck // a walk error is an entry not looked at
		if err != nil {
			return nil
		}
		rel, _ := filepath.Rel(dir, p)
		if d.IsDir() && (rel == "models" || rel == "run") {
			return filepath.SkipDir
		}
		var want uint32
		switch {
		case d.IsDir():
			want = unix.R_OK | unix.W_OK | unix.X_OK
		case d.Type().IsRegular():
			want = unix.R_OK | unix.W_OK
		default:
			return nil // a socket, a link: not toolgate's to use
		}
		if err := access(p, want); err == nil || errors.Is(err, unix.EROFS) {
			return nil // a read-only file system is the start's fault to say, not an owner's
		}
		if n++; len(found) < maxUnusable {
			if fi, err := d.Info(); err == nil {
				found = append(found, fmt.Sprintf("%s (%s)", p, owned(fi)))
			} else {
				found = append(found, p)
			}
		}
		if d.IsDir() {
			return filepath.SkipDir
		}
		return nil
	})
	if n == 0 {
		return "", ""
	}
	names = strings.Join(found, ", ")
	if n > len(found) {
		names += fmt.Sprintf(" and %d more", n-len(found))
	}
	_, name := thisUser()
	return names, fmt.Sprintf("give the data folder to this user (%s; copied, restored or written by another user?), or run toolgate as its owner",
		shellword.Join("chown", "-R", name, dir))
}
