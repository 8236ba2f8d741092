package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/toolgate/toolgate/gateway/backend/oauth"
	"github.com/toolgate/toolgate/gateway/keys"
	"github.com/toolgate/toolgate/gateway/live"
	"github.com/toolgate/toolgate/gateway/local"
	"github.com/toolgate/toolgate/internal/datafile"
	"github.com/toolgate/toolgate/internal/dirs"
	"github.com/toolgate/toolgate/internal/shellword"
	"github.com/toolgate/toolgate/internal/storage"
	"github.com/toolgate/toolgate/search/learn"
)

func init() { register(newBackupCmd) }

func newBackupCmd(g *globals) *cobra.Command {
	var path string
	cmd := &cobra.Command{
		Use:   "backup DIR [--config FILE]",
		Short: "Copy what cannot be made again of the data folder into a new folder, while gateways run",
		Long: `Copy into DIR (a new folder) what of the data folder cannot be made again:
the API keys, the quarantine pins, state.json, the logins (auth/), the audit log
and the learned pairs. The learned pairs are copied through the gateway that
holds them when one runs (a copy of their files taken meanwhile may not open);
the other files are written whole, so their copies are too. The index, the
embedding cache and the models are left out: they are made again.

The data folder is --data-dir's, else $TOOLGATE_DATA_DIR's, else the dataDir
of --config (or $TOOLGATE_CONFIG), as serve reads it, else the default one.

DIR is a data folder itself (toolgate --data-dir DIR keys list reads it). To
restore, stop the gateways on the data folder and put DIR in its place.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			// A team's gateway keeps its data folder in its config
			// (toolgate.dataDir): -c gives it, as to keys, audit, logs.
			if _, err := dataFolderConfig(g, path); err != nil {
				return err
			}
			return runBackup(cmd.Context(), g, dirs.ExpandHome(args[0]), cmd.OutOrStdout(), g.logger)
		},
	}
	configFlag(cmd, &path)
	return cmd
}

// backupTrailer is the trailer of a learned-pairs backup streamed by the
// gateway that holds them (GET /learn?backup=1): "ok" once all of it went.
const backupTrailer = "Toolgate-Backup"

// runBackup copies the data folder's files that cannot be made again into
// dst, a folder that must not exist or be empty.
func runBackup(ctx context.Context, g *globals, dst string, out io.Writer, log *slog.Logger) error {
	data := g.DataDir()
	if _, err := os.Stat(data); err != nil {
		return fmt.Errorf("data folder %s: %w", data, err)
	}
	made := false
	if fi, err := os.Stat(dst); errors.Is(err, fs.ErrNotExist) {
		made = true
		if err := storage.MkdirOwnerOnly(dst); err != nil {
			return err
		}
	} else if err == nil && !fi.IsDir() {
		// It read "open DIR: not a directory", exit status 1.
		return usageError{fmt.Errorf("%s is a file, not a folder: give a new folder (or an empty one) to back up into", dst)}
	}
	// DIR is held while the backup writes into it: a second backup into
	// it (two cron jobs, a command run twice) is told so, not that the
	// first's folder there was left by a killed backup, to remove.
	// A file system that cannot lock a folder (NFS: EBADF, ENOLCK) is
	// written without the lock, as before there was one: the lock only
	// tells a second backup apart, and a folder it cannot open is said
	// below.
	unlock, ok, err := backupTryLock(dst)
	if err == nil && !ok {
		return usageError{fmt.Errorf("another toolgate backup is writing into %s: wait for it to end, or give another folder to back up into", dst)}
	}
	if unlock != nil {
		defer unlock()
	}
	if entries, err := os.ReadDir(dst); err == nil && len(entries) > 0 {
		for _, e := range entries {
			if left := e.Name(); strings.HasPrefix(left, backupStagePrefix) {
				if len(entries) > 1 {
					// Killed while it moved its files up: some are
					// beside its folder.
					return usageError{fmt.Errorf("%s holds %s, left by a backup that was killed half-way, beside files it had moved up: they are not a whole backup. Give another folder to back up into, or empty this one",
						dst, left)}
				}
				return usageError{fmt.Errorf("%s holds %s, left by a backup that was killed half-way: remove it (%s), or give another folder to back up into",
					dst, left, shellword.Join("rm", "-r", filepath.Join(dst, left)))}
			}
		}
		return usageError{fmt.Errorf("%s is a folder that holds files: give a new folder (or an empty one) to back up into", dst)}
	} else if err != nil {
		return err // made above when it was not there
	}
	// Everything is copied into a folder of its own inside dst first, and
	// moved up only once all of it is there: a copy that fails half-way
	// (a full disk, an I/O error) leaves dst as it was, not a data folder
	// with a cut keys.jsonl that a restore would take for the keys.
	stage, err := os.MkdirTemp(dst, backupStagePrefix)
	if err != nil {
		return err
	}
	failed := func(err error) error {
		os.RemoveAll(stage)
		if made {
			os.Remove(dst) // only while empty
		}
		return fmt.Errorf("back up into %s: %w (nothing was kept there: run the command again)", dst, err)
	}
	// The small files, each written whole (a temporary file renamed over
	// it): a copy read while gateways run is one of its versions.
	var copied []string
	for _, rel := range []string{rel(data, dirs.Keys(data)), rel(data, keys.RevokedFile(dirs.Keys(data))), rel(data, live.StateFile(data)), rel(data, dirs.Pins(data))} {
		ok, err := copyDataFile(data, stage, rel)
		if err != nil {
			return failed(err)
		}
		if ok {
			copied = append(copied, rel)
		}
	}
	// The logins and the audit log (appended to: a copy taken during a
	// write may end in a cut line, which `audit tail` skips).
	for _, folder := range []string{oauth.StoreDir, rel(data, filepath.Dir(dirs.Audit(data)))} {
		entries, err := os.ReadDir(filepath.Join(data, folder))
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return failed(err)
		}
		for _, e := range entries {
			if !e.Type().IsRegular() || strings.HasSuffix(e.Name(), ".lock") {
				continue
			}
			name := filepath.Join(folder, e.Name())
			if _, err := copyDataFile(data, stage, name); err != nil {
				return failed(err)
			}
			copied = append(copied, name)
		}
	}
	pairs, from, lerr := backupLearned(ctx, g, filepath.Join(stage, "learn"), log)
	if lerr != nil {
		// The other files are whole: they are kept, without what the
		// learned pairs' copy left.
		if err := os.RemoveAll(filepath.Join(stage, "learn")); err != nil {
			return failed(err)
		}
	}
	if err := moveUp(stage, dst); err != nil {
		return failed(err)
	}
	if lerr != nil {
		return fmt.Errorf("learned pairs: %w\n(the other files are copied in %s)", lerr, dst)
	}
	for _, c := range copied {
		fmt.Fprintf(out, "copied %s\n", c)
	}
	switch {
	case pairs < 0:
		fmt.Fprintln(out, "no learned pairs (learn/ does not exist)")
	case from != "":
		fmt.Fprintf(out, "copied learn/: %d learned pairs, through %s, which holds them\n", pairs, from)
	default:
		fmt.Fprintf(out, "copied learn/: %d learned pairs\n", pairs)
	}
	fmt.Fprintf(out, "backup of %s in %s (the index, the embedding cache and the models are made again). It is a data folder: %s reads it; to restore, stop the gateways on the data folder and put it in its place\n",
		data, dst, shellword.Join("toolgate", "--data-dir", dst, "keys", "list"))
	return nil
}

// backupStagePrefix begins the name of the folder inside DIR that a backup
// is copied into before it is moved up into DIR.
const backupStagePrefix = ".backup-partial-"

// moveUp moves every entry of stage into dst, its parent folder, then
// removes stage: renames within one file system, which take no space.
func moveUp(stage, dst string) error {
	entries, err := os.ReadDir(stage)
	if err != nil {
		return err
	}
	for _, e := range entries {
		if err := os.Rename(filepath.Join(stage, e.Name()), filepath.Join(dst, e.Name())); err != nil {
			return err
		}
	}
	return os.Remove(stage)
}

func rel(base, p string) string {
	r, err := filepath.Rel(base, p)
	if err != nil {
		return p
	}
	return r
}

// backupTryLock takes the lock of DIR (datafile.TryLockDir; a test's
// fails as NFS's does).
var backupTryLock = datafile.TryLockDir

// backupWriteFile writes a copied file (os.WriteFile; a test's fails as a
// full disk does).
var backupWriteFile = os.WriteFile

// copyDataFile copies the data folder's file at rel into dst with its mode,
// making its folder owner-only; false when it is not there.
func copyDataFile(data, dst, rel string) (bool, error) {
	from := filepath.Join(data, rel)
	b, err := os.ReadFile(from)
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	fi, err := os.Stat(from)
	if err != nil {
		return false, err
	}
	to := filepath.Join(dst, rel)
	if err := storage.MkdirOwnerOnly(filepath.Dir(to)); err != nil {
		return false, err
	}
	if err := backupWriteFile(to, b, fi.Mode().Perm()); err != nil {
		return false, err
	}
	return true, os.Chmod(to, fi.Mode().Perm()) // whatever the umask
}

// backupLearned copies the learned pairs into a new store at dst: from the
// store, or through the gateway that holds it (its name in from). pairs is
// -1 when the data folder has none.
func backupLearned(ctx context.Context, g *globals, dst string, log *slog.Logger) (pairs int, from string, err error) {
	if _, err := os.Stat(learnDir(g)); errors.Is(err, fs.ErrNotExist) {
		return -1, "", nil
	}
	var stream bytes.Buffer
	store, err := openLearnStore(ctx, g, log)
	switch {
	case errors.Is(err, learn.ErrBusy):
		holder, err := learnHolder(ctx, g, err)
		if err != nil {
			return 0, "", err
		}
		if err := backupThrough(ctx, holder, &stream); err != nil {
			return 0, "", err
		}
		from = holder.name()
	case err != nil:
		return 0, "", err
	default:
		err = store.Backup(&stream)
		if cerr := store.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return 0, "", err
		}
	}
	copied, err := learn.Restore(dst, &stream, &learn.Options{Logger: log})
	if err != nil {
		return 0, "", err
	}
	pairs, _ = copied.Stats()
	return pairs, from, copied.Close()
}

// backupThrough writes the backup stream of the learned pairs that holder
// holds to w.
func backupThrough(ctx context.Context, holder *localGateway, w io.Writer) error {
	resp, err := askHolder(ctx, holder, http.MethodGet, local.LearnURL+"?backup=1", nil, 10*time.Minute)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if _, err := io.Copy(w, resp.Body); err != nil {
		return fmt.Errorf("%s, which holds the learned pairs: %w", holder.name(), err)
	}
	if t := resp.Trailer.Get(backupTrailer); t != "ok" {
		if t == "" {
			t = "no backup from it (a gateway older than this command): restart it with this toolgate, or stop it, and back up again"
		}
		return fmt.Errorf("%s, which holds the learned pairs: %s", holder.name(), t)
	}
	return nil
}
