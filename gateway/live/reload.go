package live

import (
	"bytes"
	"context"
	"crypto/sha256"
	"fmt"
	"os"
	"reflect"
	"syscall"
	"time"

	"github.com/toolgate/toolgate/gateway/config"
)

// reloadLoop applies changes of the config file while serving: on a change
// the watcher reports (debounced; changed is nil when the file is not
// watched) and on each value of Options.Reload.
func (l *Loop) reloadLoop(ctx context.Context, changed <-chan struct{}) {
	defer l.wg.Done()
	for {
		select {
		case <-ctx.Done():
			return
		case <-changed:
			l.reload(ctx, "file changed", false)
		case sig := <-l.opts.Reload:
			l.reload(ctx, signalName(sig), true)
		}
	}
}

// signalName names a reload's signal for logs and Stats ("SIGHUP").
func signalName(sig os.Signal) string {
	if sig == syscall.SIGHUP {
		return "SIGHUP"
	}
	return sig.String()
}

// reload reads the config file and applies what changed. A file whose
// content did not change (same sha256) is left alone unless force (a
// signal) asks; one that cannot be read, is empty (an editor mid-save, most
// likely), or does not parse or validate is logged and changes nothing: the
// next write tries again.
func (l *Loop) reload(ctx context.Context, trigger string, force bool) {
	l.reloadMu.Lock()
	defer l.reloadMu.Unlock()
	start := time.Now()
	path := l.opts.ConfigPath
	reject := func(msg string, err error, why string) {
		l.log.Error(msg, "file", path, "trigger", trigger, "err", err)
		l.reloaded(&Reload{At: start, Trigger: trigger, Error: why})
	}
	data, err := os.ReadFile(path)
	if err != nil {
		reject("config reload failed: cannot read the file; the previous config stays in effect", err, err.Error())
		return
	}
	h := sha256.Sum256(data)
	if h == l.hash && !force {
		l.log.Debug("config file content unchanged", "file", path, "trigger", trigger)
		return
	}
	l.hash = h // a bad file is reported once, not at every touch
	if len(bytes.TrimSpace(data)) == 0 {
		l.log.Warn("config reload skipped: the file is empty (being saved?); the previous config stays in effect", "file", path, "trigger", trigger)
		l.reloaded(&Reload{At: start, Trigger: trigger, Error: fmt.Sprintf("config %s is empty", path)})
		return
	}
	cfg, err := config.Parse(data, path, nil)
	if err != nil {
		reject("config reload failed: the new config is invalid; the previous config stays in effect (fix the file and save it again)", err, err.Error())
		return
	}
	servers := cfg.Servers()
	// Hide the removed servers' tools before the pool stops them, so there
	// is no moment at which search returns a tool that cannot run any more.
	l.vis.Store(l.vis.Load().withServers(servers))
	d := l.pool.Reconfigure(ctx, servers)
	if len(d.Added)+len(d.Removed)+len(d.Changed) > 0 {
		l.refresh() // drop removed servers' tools from the index now; added ones follow as they list
	}
	later := restartOnly(l.applied.Toolgate, cfg.Toolgate)
	if len(later) > 0 {
		l.log.Warn("config settings changed; they take effect on restart", "file", path, "settings", later)
	}
	l.applied = cfg
	l.log.Info("config reloaded", "file", path, "trigger", trigger,
		"added", d.Added, "removed", d.Removed, "changed", d.Changed, "updated", d.Updated, "unchanged", d.Unchanged,
		"took", time.Since(start).Round(time.Microsecond))
	l.reloaded(&Reload{At: start, Trigger: trigger, Added: d.Added, Removed: d.Removed, Changed: d.Changed,
		Updated: d.Updated, Unchanged: d.Unchanged, RestartOnly: later})
	l.changedHook()
}

// reloaded counts a reload, after its effects and its log line.
func (l *Loop) reloaded(r *Reload) {
	l.update(func(s *Stats) {
		s.ReloadGeneration++
		s.LastReload = r
		if r.Error != "" {
			s.LastReloadError, s.LastReloadErrorAt = r.Error, r.At
		}
	})
}

// restartOnly names the settings of the toolgate section that differ and
// cannot change while serving. (connectTimeout and callTimeout are applied:
// config.File.Servers copies them into every server entry, and the pool
// takes them in place.)
func restartOnly(old, cur config.Settings) []string {
	var out []string
	for _, c := range []struct {
		name string
		a, b any
	}{
		{"toolgate.http", old.HTTP, cur.HTTP},
		{"toolgate.telemetry", old.Telemetry, cur.Telemetry},
		{"toolgate.dataDir", old.DataDir, cur.DataDir},
		{"toolgate.embed", old.Embed, cur.Embed},
		{"toolgate.search", old.Search, cur.Search},
		{"toolgate.restart", old.Restart, cur.Restart},
		{"toolgate.maxConcurrentConnects", old.MaxConcurrentConnects, cur.MaxConcurrentConnects},
	} {
		if !reflect.DeepEqual(c.a, c.b) {
			out = append(out, c.name)
		}
	}
	return out
}
