package live

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/toolgate/toolgate/gateway/config"
	"github.com/toolgate/toolgate/gateway/policy"
)

// StateFile is the file of the data folder that keeps the gateway's run
// time choices across restarts (the servers disabled), apart from the
// user's config, which the gateway never rewrites for them. Deleting it
// enables every server again.
func StateFile(dataDir string) string { return filepath.Join(dataDir, "state.json") }

// State is the content of the state file.
type State struct {
	// Disabled are the servers disabled at run time, sorted.
	Disabled []string `json:"disabled"`
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

// WriteState writes st to the state file at path atomically (as a config
// file is written: config.WriteFile), creating the folder if need be.
func WriteState(path string, st State) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return fmt.Errorf("write state: %w", err)
	}
	return writeState(path, st)
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

// writeStateServing is WriteState from a running gateway: a data folder
// that was removed meanwhile (an unmounted volume?) is not made again
// behind the operator's back (the write, into a temporary file in the
// folder, fails if it vanishes after the check).
func writeStateServing(path string, st State) error {
	dir := filepath.Dir(path)
	fi, err := os.Stat(dir)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return fmt.Errorf("data folder %s does not exist (removed while toolgate runs, or an unmounted volume?)", dir)
	case err == nil && !fi.IsDir():
		return fmt.Errorf("data folder %s is not a folder (a file is in its place)", dir)
	}
	return writeState(path, st)
}

// With is st with server disabled (or not), and whether that changed it.
func (st State) With(server string, disabled bool) (State, bool) {
	next := slices.DeleteFunc(slices.Clone(st.Disabled), func(s string) bool { return s == server })
	if disabled {
		next = append(next, server)
		slices.Sort(next)
	}
	return State{Disabled: next}, !slices.Equal(next, st.Disabled)
}

// CheckDisable says why server cannot be disabled or enabled under cfg, or
// nil: it must be an enabled server of the config (one the config file
// itself marks "disabled" is changed there), and never the built-in one.
func CheckDisable(cfg *config.File, server string) error {
	if server == config.BuiltinServer {
		return fmt.Errorf("server %q is built into the gateway and cannot be disabled: its tools are how servers are enabled again", server)
	}
	s, ok := cfg.MCPServers[server]
	if !ok {
		names := make([]string, 0, len(cfg.MCPServers))
		for _, s := range cfg.Servers() {
			names = append(names, s.Name)
		}
		return fmt.Errorf("there is no server named %q in the config (servers: %s)", server, strings.Join(names, ", "))
	}
	if s.Disabled {
		return fmt.Errorf(`server %q is disabled in the config file ("disabled": true): edit its entry there to change that`, server)
	}
	return nil
}

// SetDisabled disables server (or enables it again): its tools leave
// search_tools and execute_tool at once (or come back: they stay in the
// catalog, marked unavailable until the server is up), the pool stops (or
// starts) it, and the state file keeps the choice across restarts. It
// reports whether anything changed; an error says why the server cannot
// be (the state file could not be written: nothing changed).
func (l *Loop) SetDisabled(_ context.Context, server string, disabled bool) (bool, error) {
	l.reloadMu.Lock()
	defer l.reloadMu.Unlock()
	if err := CheckDisable(l.applied.Load(), server); err != nil {
		return false, err
	}
	next, changed := State{Disabled: l.policy.Disabled().Servers()}.With(server, disabled)
	if !changed {
		return false, nil
	}
	if l.opts.StatePath != "" {
		if err := writeStateServing(l.opts.StatePath, next); err != nil {
			verb := "disabled"
			if !disabled {
				verb = "enabled"
			}
			return false, fmt.Errorf("server %q is not %s, nothing changed: the state file that keeps the choice across restarts cannot be written (%w); "+
				"make the data folder writable (free space, remount it read-write, or create it again if it was removed) and try again", server, verb, err)
		}
	}
	l.applyDisabled(l.ctx(), next.Disabled, "toolgate") // the started server lives with the loop, not with ctx
	return true, nil
}

// applyDisabled makes disabled the servers disabled: hidden first, then
// stopped (or started) by the pool. reloadMu is held.
func (l *Loop) applyDisabled(ctx context.Context, disabled []string, by string) {
	before := l.policy.Disabled().Servers()
	l.policy.Put(policy.NewDisabled(disabled))
	if l.pool != nil {
		l.pool.Reconfigure(ctx, l.runnable(l.applied.Load()))
	}
	now := l.policy.Disabled().Servers()
	for _, s := range now {
		if !slices.Contains(before, s) {
			l.log.Info("server disabled: its tools are hidden and it is stopped", "server", s, "by", by)
		}
	}
	for _, s := range before {
		if !slices.Contains(now, s) {
			l.log.Info("server enabled: starting it", "server", s, "by", by)
		}
	}
	l.update(func(st *Stats) { st.Disabled = now })
	l.changedHook() // the servers searches see changed
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
	l.wg.Go(func() {
		for {
			select {
			case <-ctx.Done():
				return
			case <-w.C:
			}
			st, err := ReadState(path)
			if err != nil {
				l.log.Error("state file changed but cannot be read; the servers disabled stay as they are", "file", path, "err", err)
				continue
			}
			l.reloadMu.Lock()
			if !slices.Equal(st.Disabled, l.policy.Disabled().Servers()) {
				l.applyDisabled(ctx, st.Disabled, "state file")
			}
			l.reloadMu.Unlock()
		}
	})
}
