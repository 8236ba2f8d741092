//go:build unix

package datafile

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/toolgate/toolgate/internal/testenv"
)

// Root (an operator's sudo toolgate keys create, tools approve, servers
// disable) writing in the data folder of a gateway that runs as its own
// user leaves every file and folder it makes or replaces there that user's:
// they were root's and 0600, so the gateway could not read its API keys
// and refused every request with 503. A file root left there earlier is
// given back at the next write. Any other user's files are its own anyway.
func TestRootWritesAsFolderOwner(t *testing.T) {
	data := filepath.Join(t.TempDir(), "data")
	if err := os.Mkdir(data, 0o755); err != nil {
		t.Fatal(err)
	}
	owner := testenv.GatewayOwner(t, data)
	keys := filepath.Join(data, "keys.jsonl")
	if os.Geteuid() == 0 {
		if err := os.WriteFile(keys, []byte("old\n"), 0o600); err != nil { // root's, from an earlier command
			t.Fatal(err)
		}
	}
	pins := filepath.Join(data, "quarantine", "pins.json")
	for _, p := range []string{keys, pins} {
		if err := Update(p, func([]byte) ([]byte, error) { return []byte("new\n"), nil }); err != nil {
			t.Fatal(err)
		}
	}
	// A folder the caller made itself (the logins' auth/, 0700), then a
	// file written in it.
	login := filepath.Join(data, "auth", "remote.json")
	if err := os.MkdirAll(filepath.Dir(login), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := WriteFile(login, []byte("{}\n")); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{keys, keys + ".lock", filepath.Dir(pins), pins, pins + ".lock", filepath.Dir(login), login} {
		fi, err := os.Stat(p)
		if err != nil {
			t.Fatal(err)
		}
		st := fi.Sys().(*syscall.Stat_t)
		if int(st.Uid) != owner || os.Geteuid() == 0 && int(st.Gid) != owner {
			t.Errorf("%s: owned by %d:%d, want the data folder's owner %d", p, st.Uid, st.Gid, owner)
		}
	}
}

// What root wrote in toolgate's own files and folders of a data folder
// another user owns (`sudo toolgate index`: an index generation, Badger's
// files) is given to that user; anything else in the folder is left as it
// is.
func TestGiveTreesToOwner(t *testing.T) {
	data := t.TempDir()
	owner := testenv.GatewayOwner(t, data)
	ix, other := filepath.Join(data, "index"), filepath.Join(data, "notes")
	for _, p := range []string{filepath.Join(ix, "gen-2", "bleve", "store"), other} {
		if err := os.MkdirAll(p, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for _, p := range []string{filepath.Join(ix, "manifest.json"), filepath.Join(ix, "gen-2", "bleve", "store", "root.bolt"), filepath.Join(other, "mine.txt")} {
		if err := os.WriteFile(p, nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	GiveTreesToOwner(data, []string{ix, filepath.Join(data, "keys.jsonl")}) // keys.jsonl: not there
	uid := func(p string) int {
		t.Helper()
		fi, err := os.Lstat(p)
		if err != nil {
			t.Fatal(err)
		}
		return int(fi.Sys().(*syscall.Stat_t).Uid)
	}
	for _, p := range []string{ix, filepath.Join(ix, "gen-2"), filepath.Join(ix, "gen-2", "bleve", "store", "root.bolt"), filepath.Join(ix, "manifest.json")} {
		if got := uid(p); got != owner {
			t.Errorf("%s: owned by %d, want the data folder's owner %d", p, got, owner)
		}
	}
	if got := uid(filepath.Join(other, "mine.txt")); got != os.Geteuid() {
		t.Errorf("a file outside toolgate's own was given away: owned by %d", got)
	}
}
