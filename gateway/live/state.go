package live

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/toolgate/toolgate/gateway/backend"
	"github.com/toolgate/toolgate/gateway/config"
	"github.com/toolgate/toolgate/gateway/policy"
	"github.com/toolgate/toolgate/internal/datafile"
)

// StateFile is the file of the data folder that keeps the gateway's run
// time choices across restarts (the servers disabled), apart from the
// user's config, which the gateway never rewrites for them, and carries
// `toolgate servers restart` to the gateways running on the folder.
// Deleting it enables every server again.
func StateFile(dataDir string) string { return filepath.Join(dataDir, "state.json") }

// State is the content of the state file.
type State struct {
	// Disabled are the servers disabled at run time, sorted.
	Disabled []string `json:"disabled"`
	// RestartRequests counts, by server, the restarts asked for with
	// `toolgate servers restart`. A running gateway restarts a server
	// whose count changed since it last read the file; one that starts
	// takes the counts as they are (its servers are new anyway).
	RestartRequests map[string]uint64 `json:"restartRequests,omitempty"`
	// Described is what each server said of itself at its last handshake
	// (serverInfo's description or title, or its instructions' first
	// sentence), by server: a warm start describes the servers in
	// search_tools with it until they connect, as the run before did, so
	// their handshakes change nothing a client must be told of.
	Described map[string]string `json:"described,omitempty"`

	// unknown are the file's fields this toolgate does not know, as read:
	// a newer toolgate's (met at a rollback), written back as they are.
	unknown map[string]json.RawMessage
}

// stateFields is State without its methods: its fields as the file
// spells them (json ignores unknown, which is not exported).
type stateFields State

// stateKeys are the file's fields that State reads.
var stateKeys = []string{"disabled", "restartRequests", "described"}

// UnmarshalJSON reads the fields it knows and keeps the others.
func (st *State) UnmarshalJSON(b []byte) error {
	var f stateFields
	if err := json.Unmarshal(b, &f); err != nil {
		return err
	}
	var all map[string]json.RawMessage
	if err := json.Unmarshal(b, &all); err != nil {
		return err
	}
	for _, k := range stateKeys {
		delete(all, k)
	}
	*st = State(f)
	if len(all) > 0 {
		st.unknown = all
	}
	return nil
}

// MarshalJSON writes the fields it knows and those it kept.
func (st State) MarshalJSON() ([]byte, error) {
	b, err := json.Marshal(stateFields(st))
	if err != nil || len(st.unknown) == 0 {
		return b, err
	}
	var known map[string]json.RawMessage
	if err := json.Unmarshal(b, &known); err != nil {
		return nil, err
	}
	all := maps.Clone(st.unknown)
	maps.Copy(all, known)
	return json.Marshal(all)
}

// ReadState reads the state file at path; a missing file (or path "") is
// the zero State.
func ReadState(path string) (State, error) {
	var st State
	if path == "" {
		return st, nil
	}
	data, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return st, nil
	}
	if err != nil {
		return st, fmt.Errorf("read state: %w", err)
	}
	if len(bytes.TrimSpace(data)) == 0 {
		return st, nil
	}
	if err := json.Unmarshal(data, &st); err != nil {
		return State{}, fmt.Errorf("read state %s: %w (deleting the file enables every server again)", path, err)
	}
	slices.Sort(st.Disabled)
	st.Disabled = slices.Compact(st.Disabled)
	return st, nil
}

// EditState changes the state file at path in one read-modify-write that
// no other edit interleaves with, creating the folder if need be: change
// gets the state read and returns the next one and whether to write it
// (atomically, as a config file is written: config.WriteFile). Without the
// lock a `toolgate servers disable a` and a client's
// toolgate__disable_server b at the same moment could lose one of the two.
func EditState(path string, change func(State) (State, bool, error)) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return fmt.Errorf("write state: %w", err)
	}
	return editState(path, func(cur State, err error) (State, bool, error) {
		if err != nil {
			return State{}, false, err
		}
		return change(cur)
	})
}

// WriteState replaces the state file at path with st, under its lock,
// creating the folder if need be.
func WriteState(path string, st State) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return fmt.Errorf("write state: %w", err)
	}
	return editState(path, func(State, error) (State, bool, error) { return st, true, nil })
}

// lockSuffix names the state file's lock file, beside it.
const lockSuffix = ".lock"

// stateConfirm is how long a state file deleted (its lock file still
// there) stays deleted before it enables every server: an rm -rf of the
// data folder removes the file, then maybe a whole store, then the lock.
const stateConfirm = time.Second

// editState is EditState's read-modify-write under the state file's lock
// (a ".lock" file beside it, as the data folder's other shared files
// have), in a folder that exists; change gets the state read, or the error
// reading it, to decide.
func editState(path string, change func(State, error) (State, bool, error)) error {
	unlock, err := datafile.Lock(path + lockSuffix)
	if err != nil {
		return fmt.Errorf("write state: lock %s: %w", path, err)
	}
	defer unlock()
	next, ok, err := change(ReadState(path))
	if err != nil || !ok {
		return err
	}
	return writeState(path, next)
}

// writeState writes st to the state file at path, in its folder as it is.
func writeState(path string, st State) error {
	if st.Disabled == nil {
		st.Disabled = []string{}
	}
	data, err := json.MarshalIndent(st, "", "  ")
	if err != nil {
		return fmt.Errorf("write state: %w", err)
	}
	return config.WriteFile(path, append(data, '\n'))
}

// servingFolder is the check of a running gateway before it edits the
// state file in the folder dir: a data folder that was removed meanwhile
// (an unmounted volume?) is not made again behind the operator's back
// (the lock file and the write fail if it vanishes after the check).
func servingFolder(dir string) error {
	fi, err := os.Stat(dir)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return fmt.Errorf("data folder %s does not exist (removed while toolgate runs, or an unmounted volume?)", dir)
	case err == nil && !fi.IsDir():
		return fmt.Errorf("data folder %s is not a folder (a file is in its place)", dir)
	}
	return nil
}

// With is st with server disabled (or not), and whether that changed it.
func (st State) With(server string, disabled bool) (State, bool) {
	next := slices.DeleteFunc(slices.Clone(st.Disabled), func(s string) bool { return s == server })
	if disabled {
		next = append(next, server)
		slices.Sort(next)
	}
	return State{Disabled: next, RestartRequests: maps.Clone(st.RestartRequests), Described: maps.Clone(st.Described), unknown: st.unknown}, !slices.Equal(next, st.Disabled)
}

// WithRestart is st with one more restart of server requested.
func (st State) WithRestart(server string) State {
	next := State{Disabled: slices.Clone(st.Disabled), RestartRequests: maps.Clone(st.RestartRequests), Described: maps.Clone(st.Described), unknown: st.unknown}
	if next.RestartRequests == nil {
		next.RestartRequests = map[string]uint64{}
	}
	next.RestartRequests[server]++
	return next
}

// CheckDisable says why server cannot be disabled or enabled under cfg, or
// nil: it must be an enabled server of the config (one the config file
// itself marks "disabled" is changed there), and never the built-in one.
func CheckDisable(cfg *config.File, server string) error {
	if server == config.BuiltinServer {
		// Said to `enable` too: "cannot be disabled" alone read as a
		// refusal to enable it.
		return fmt.Errorf("server %q is built into the gateway and always enabled: it cannot be disabled, as its tools are how servers are enabled again", server)
	}
	s, err := configured(cfg, server)
	if err == nil && s.Disabled {
		err = fmt.Errorf(`server %q is disabled in the config file ("disabled": true): edit its entry there to change that`, server)
	}
	return err
}

// CheckRestart says why server cannot be restarted under cfg and st, or
// nil: it must be a server of the config that runs (not disabled in the
// file or at run time), and never the built-in one. A nil cfg checks only
// what st and the name tell.
func CheckRestart(cfg *config.File, st State, server string) error {
	if server == config.BuiltinServer {
		return fmt.Errorf("server %q is built into the gateway and runs inside it: there is no process to restart", server)
	}
	if cfg != nil {
		s, err := configured(cfg, server)
		if err != nil {
			return err
		}
		if s.Disabled {
			return fmt.Errorf(`server %q is disabled in the config file ("disabled": true), so it does not run: edit its entry there to start it`, server)
		}
	}
	if slices.Contains(st.Disabled, server) {
		return Disabled(server, fmt.Sprintf("`toolgate servers enable %s`", server))
	}
	return nil
}

// Disabled is the error of a restart of server, disabled at run time:
// it does not run, and enable (a command, a management tool, a button)
// starts it. The command line, toolgate__restart_server and the console's
// restart button say it in these words.
func Disabled(server, enable string) error {
	return fmt.Errorf("server %q is disabled, so it does not run: %s starts it", server, enable)
}

// configured is server's entry in cfg, or an error (config.ErrNoServer) that
// lists the servers there are.
func configured(cfg *config.File, server string) (config.Server, error) {
	s, ok := cfg.MCPServers[server]
	if !ok {
		names := make([]string, 0, len(cfg.MCPServers))
		for _, s := range cfg.Servers() {
			names = append(names, s.Name)
		}
		return config.Server{}, config.NoServer("there is no server named %q in the config (servers: %s)", server, strings.Join(names, ", "))
	}
	return s, nil
}

// SetDisabled disables server (or enables it again): its tools leave
// search_tools and execute_tool at once (or come back: they stay in the
// catalog, marked unavailable until the server is up), the pool stops (or
// starts) it, and the state file keeps the choice across restarts. It
// reports whether anything changed; an error says why the server cannot
// be (the state file could not be written: nothing changed).
func (l *Loop) SetDisabled(ctx context.Context, server string, disabled bool) (bool, error) {
	l.reloadMu.Lock()
	defer l.reloadMu.Unlock()
	err := CheckDisable(l.applied.Load(), server)
	if err != nil && !disabled && l.opts.StatePath != "" {
		// A server the config no longer has may still be enabled when the
		// state file lists it disabled: its name leaves the file
		// (toolgate__remove_server does so), so that a server added later
		// under the name starts.
		if st, rerr := ReadState(l.opts.StatePath); rerr == nil && slices.Contains(st.Disabled, server) {
			changed := false
			werr := editState(l.opts.StatePath, func(cur State, _ error) (State, bool, error) {
				var next State
				next, changed = cur.With(server, false)
				return next, changed, nil
			})
			return changed && werr == nil, werr
		}
	}
	if err != nil {
		return false, err
	}
	// The file's restart requests are kept as they are (the watcher
	// applies those this gateway has not seen yet); one that cannot be
	// read is written anew.
	var next State
	changed := false
	edit := func(cur State, _ error) (State, bool, error) {
		cur.Disabled = l.policy.Disabled().Servers()
		next, changed = cur.With(server, disabled)
		return next, changed, nil
	}
	if l.opts.StatePath == "" {
		_, _, _ = edit(State{}, nil)
	} else if err = servingFolder(filepath.Dir(l.opts.StatePath)); err == nil {
		if err = editState(l.opts.StatePath, edit); err == nil {
			l.stateSeen = true
		}
	}
	if err != nil {
		verb := "disabled"
		if !disabled {
			verb = "enabled"
		}
		return false, fmt.Errorf("server %q is not %s, nothing changed: the state file that keeps the choice across restarts cannot be written (%w); "+
			"make the data folder writable (free space, remount it read-write, or create it again if it was removed) and try again", server, verb, err)
	}
	if !changed {
		return false, nil
	}
	l.applyDisabled(l.ctx(), next.Disabled, changedBy(ctx)) // the started server lives with the loop, not with ctx
	return true, nil
}

// byKey is the context key of ChangedBy.
type byKey struct{}

// ChangedBy is ctx saying who asks SetDisabled for the change ("the
// console", "toolgate__disable_server"): a call in flight on a server
// disabled fails saying by whom, and the log says it.
func ChangedBy(ctx context.Context, who string) context.Context {
	return context.WithValue(ctx, byKey{}, who)
}

func changedBy(ctx context.Context) string {
	who, _ := ctx.Value(byKey{}).(string)
	return who
}

// byStateFile is who disables a server through the state file, written by
// another process; enabledByStateFile who enables one so.
const (
	byStateFile        = "`toolgate servers disable`" + viaStateFile
	enabledByStateFile = "`toolgate servers enable`" + viaStateFile
	viaStateFile       = " (the data folder's state.json)"
)

// applyDisabled makes disabled the servers disabled: hidden first, then
// stopped (or started) by the pool; by says who asked (ChangedBy, "" when
// not known). reloadMu is held.
func (l *Loop) applyDisabled(ctx context.Context, disabled []string, by string) {
	before := l.policy.Disabled().Servers()
	l.policy.Put(policy.NewDisabled(disabled))
	if l.pool != nil {
		l.pool.ReconfigureWhy(ctx, l.runnable(l.applied.Load()), func(server string) error {
			if slices.Contains(disabled, server) {
				return backend.Disabled(by)
			}
			return nil
		})
	}
	now := l.policy.Disabled().Servers()
	for _, s := range now {
		if !slices.Contains(before, s) {
			l.log.Info("server disabled: its tools are hidden and it is stopped", "server", s, "by", by)
		}
	}
	if by == byStateFile {
		by = enabledByStateFile // only enables are left to log
	}
	for _, s := range before {
		if !slices.Contains(now, s) {
			l.log.Info("server enabled: starting it", "server", s, "by", by)
		}
	}
	here := l.disabledHere()
	l.update(func(st *Stats) { st.Disabled = here })
	l.changedHook() // the servers searches see changed
}

// applyRestarts restarts each server whose count of restart requests
// (`toolgate servers restart`) is not the one last seen. A count that is
// gone (the state file deleted) restarts nothing; the next request counts
// from there. reloadMu is held.
func (l *Loop) applyRestarts(requests map[string]uint64) {
	for _, s := range slices.Sorted(maps.Keys(requests)) {
		if requests[s] == l.restartsSeen[s] {
			continue
		}
		var err error
		switch {
		case l.pool == nil:
			err = errors.New("no servers run here")
		case slices.Contains(l.policy.Disabled().Servers(), s):
			err = fmt.Errorf("it is disabled: `toolgate servers enable %s` starts it", s)
		default:
			err = l.pool.Restart(s)
		}
		if err != nil {
			l.log.Warn("restart requested by `toolgate servers restart` not done", "server", s, "err", err)
			continue
		}
		l.log.Info("server restarted: requested by `toolgate servers restart`", "server", s)
	}
	l.restartsSeen = requests
}

// stateMeanwhile is what holds while the state file is not watched.
const stateMeanwhile = "`toolgate servers enable/disable` applies on the next start"

// watchState applies changes of the state file made by another process
// (`toolgate servers disable`).
func (l *Loop) watchState(ctx context.Context) {
	path := l.opts.StatePath
	if err := l.opts.Storage.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		l.log.Warn("not watching the state file", "file", path, "err", err)
		return
	}
	w, err := config.Watch(path, &config.WatchOptions{Logger: l.log, Debounce: l.opts.Debounce, Meanwhile: stateMeanwhile})
	if err != nil {
		l.log.Warn("not watching the state file; "+stateMeanwhile, "file", path, "err", err)
		return
	}
	l.stateW = w
	var apply func()
	l.reloadMu.Lock()
	l.stateApply = func() { apply() }
	l.stateRecheck = func() {
		l.wg.Go(func() {
			t := time.NewTimer(stateConfirm)
			defer t.Stop()
			select {
			case <-ctx.Done():
			case <-t.C:
				apply()
			}
		})
	}
	l.reloadMu.Unlock()
	apply = func() {
		// Read under reloadMu, as SetDisabled edits it: a read before
		// one of its edits, applied after it, undid it.
		l.reloadMu.Lock()
		defer l.reloadMu.Unlock()
		st, err := ReadState(path)
		if l.holdState(path) { // after the read: a file removed meanwhile read as none
			return
		}
		if err != nil {
			l.log.Error("state file changed but cannot be read; the servers disabled stay as they are", "file", path, "err", err)
			return
		}
		if !slices.Equal(st.Disabled, l.policy.Disabled().Servers()) {
			l.applyDisabled(ctx, st.Disabled, byStateFile)
		}
		l.applyRestarts(st.RestartRequests)
	}
	l.wg.Go(func() {
		// What changed since New read the file, before it was watched: a
		// cold start that answers its client before its index is served
		// (ColdWait) watches it only then, and a `toolgate servers
		// restart` or `disable` meanwhile was lost (the command said the
		// server was not restarted within 10s).
		apply()
		for {
			select {
			case <-ctx.Done():
				return
			case <-w.C:
			}
			apply()
		}
	})
}

// holdState reports whether the state file went with its folder (the data
// folder removed while serving, maybe made again, or another volume
// mounted in its place): the servers disabled stay as they are, held in
// memory, and the file is written back with them (and the restart
// requests seen) once the folder takes writes; a file written there
// meanwhile is read as usual. The file deleted alone (its lock file beside
// it stays) enables every server, as a deleted file does at a start. A
// file gone with its folder used to read so too: every server disabled at
// run time was started again, its tools shown and run, and the next start
// kept none of them disabled. reloadMu is held.
func (l *Loop) holdState(path string) bool {
	_, ferr := os.Stat(path)
	_, lerr := os.Stat(path + lockSuffix)
	if !errors.Is(ferr, fs.ErrNotExist) {
		if errors.Is(lerr, fs.ErrNotExist) {
			// A file without its lock file (restored from `toolgate
			// backup`, which copies none, or written by hand) gets
			// one: deleted alone, it read as gone with its folder, and
			// was written back with the servers disabled.
			if unlock, err := datafile.Lock(path + lockSuffix); err == nil {
				unlock()
			}
		}
		l.stateSeen, l.stateHeld, l.stateGoneAt = true, false, time.Time{}
		return false
	}
	if !l.stateHeld && !l.stateSeen {
		l.stateSeen = lerr == nil
		return false // never there yet
	}
	if !l.stateHeld && !errors.Is(lerr, fs.ErrNotExist) {
		// Deleted alone, or the first of the folder's files that an
		// rm -rf removes (its lock file goes next, maybe after a whole
		// store): looked at again before it counts as a deletion.
		now := time.Now()
		if l.stateGoneAt.IsZero() {
			l.stateGoneAt = now
		}
		if now.Sub(l.stateGoneAt) < stateConfirm {
			if l.stateRecheck != nil {
				l.stateRecheck()
			}
			return true
		}
		l.stateGoneAt = time.Time{}
		return false
	}
	if !l.stateHeld {
		l.stateHeld = true
		l.log.Warn("the state file went with the data folder: the servers disabled stay disabled, and the file is written back once the folder takes writes",
			"file", path, "disabled", l.policy.Disabled().Servers())
	}
	if servingFolder(filepath.Dir(path)) != nil || l.opts.Storage.Check() != nil {
		return true
	}
	written := false
	err := editState(path, func(cur State, _ error) (State, bool, error) {
		if _, err := os.Stat(path); err == nil {
			return cur, false, nil // written meanwhile: read as usual
		}
		cur.Disabled = l.policy.Disabled().Servers()
		cur.RestartRequests = maps.Clone(l.restartsSeen)
		l.descMu.Lock()
		cur.Described = maps.Clone(l.saidNow) // the next warm start names the servers by them
		l.descMu.Unlock()
		written = true
		return cur, true, nil
	})
	if err != nil {
		l.log.Debug("the state file is not written back yet", "file", path, "err", err)
		return true
	}
	l.stateHeld = false
	if written {
		l.log.Info("the state file is written back in the data folder, with the servers disabled", "file", path, "disabled", l.policy.Disabled().Servers())
	}
	return written
}

// retryHeldState writes the state file back, if it went with its folder
// and the folder takes writes now (holdState): the syncLoop's look at the
// data folder, every StorageRetry, so that a folder made again where it
// could not take writes yet gets the file without a change to wake the
// watcher.
func (l *Loop) retryHeldState() {
	l.reloadMu.Lock()
	held, apply := l.stateHeld, l.stateApply
	l.reloadMu.Unlock()
	if held && apply != nil {
		apply()
	}
}

// Described is what server said of itself at its last handshake in an
// earlier run on the data folder (State.Described, as read at New), or "".
func (l *Loop) Described(server string) string { return l.described[server] }

// SetDescribed keeps what server said of itself at its handshake ("" for
// nothing) in the state file, for the next start's Described. A file that
// cannot be read or written is left as it is (logged at debug level: the
// description is a convenience, and the data folder's health is reported
// by its stores).
func (l *Loop) SetDescribed(server, said string) {
	if l.opts.StatePath == "" {
		return
	}
	l.descMu.Lock()
	if said == "" {
		delete(l.saidNow, server)
	} else {
		if l.saidNow == nil {
			l.saidNow = map[string]string{}
		}
		l.saidNow[server] = said
	}
	l.descMu.Unlock()
	err := servingFolder(filepath.Dir(l.opts.StatePath))
	if err == nil {
		err = KeepDescribed(l.opts.StatePath, map[string]string{server: said})
	}
	if err != nil {
		l.log.Debug("what the server said of itself is not kept for the next start", "server", server, "err", err)
	}
}

// KeepDescribed writes what servers said of themselves at their handshake
// (server → text; "" for nothing) into the state file at path
// (State.Described), in a folder that exists, for the next start's
// Described: a gateway's backends keep it, and so does `toolgate index
// --config`, whose listing is a handshake too.
func KeepDescribed(path string, said map[string]string) error {
	return editState(path, func(cur State, err error) (State, bool, error) {
		if err != nil {
			return cur, false, err
		}
		next := maps.Clone(cur.Described)
		for server, text := range said {
			switch {
			case text == "":
				delete(next, server)
			case next == nil:
				next = map[string]string{server: text}
			default:
				next[server] = text
			}
		}
		if maps.Equal(next, cur.Described) {
			return cur, false, nil
		}
		cur.Described = next
		return cur, true, nil
	})
}
