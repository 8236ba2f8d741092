package live

import (
	"cmp"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"os"
	"reflect"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/toolgate/toolgate/gateway/audit"
	"github.com/toolgate/toolgate/gateway/config"
	"github.com/toolgate/toolgate/gateway/policy"
	"github.com/toolgate/toolgate/gateway/quarantine"
	"github.com/toolgate/toolgate/internal/storage"
)

// reloadLoop applies changes of the config files while serving: on a
// change a watcher reports (debounced; changed is nil when no file is
// watched) and on each value of Options.Reload.
//
// A file that could not be read for want of descriptors or memory is read
// again every StorageRetry until it can (short: the read at start could
// not): the change that was missed would otherwise wait for the next save
// or SIGHUP.
func (l *Loop) reloadLoop(ctx context.Context, changed <-chan struct{}, short bool) {
	defer l.wg.Done()
	var (
		retry      *time.Timer
		retryC     <-chan time.Time
		retryForce bool
	)
	defer func() {
		if retry != nil {
			retry.Stop()
		}
	}()
	after := func(short, force bool) {
		if !short {
			retryC, retryForce = nil, false
			return
		}
		retryForce = retryForce || force
		if retry == nil {
			retry = time.NewTimer(l.opts.StorageRetry)
		} else {
			retry.Reset(l.opts.StorageRetry)
		}
		retryC = retry.C
	}
	after(short, false) // the read at start
	for {
		select {
		case <-ctx.Done():
			return
		case <-changed:
			_, short := l.reload(ctx, "file changed", "file", false)
			after(short, false)
		case sig := <-l.opts.Reload:
			_, short := l.reload(ctx, signalName(sig), "signal", true)
			after(short, true)
		case <-retryC:
			force := retryForce
			retryForce = false
			_, short := l.reload(ctx, "retry", "file", force)
			after(short, force)
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

// Reload reads the config files again and applies them now, even when
// their content did not change (what SIGHUP does), and returns the reload:
// applied, or rejected with its Error. The management tools that write the
// config go through it, so their change is in effect when they answer.
// The servers it starts live with the loop, not with ctx (a request's).
func (l *Loop) Reload(_ context.Context, trigger string) *Reload {
	r, _ := l.reload(l.ctx(), trigger, "", true)
	return r
}

// ctx is the context servers started for a change live with: Run's (the
// background before Run).
func (l *Loop) ctx() context.Context {
	if l.runCtx != nil {
		return l.runCtx
	}
	return context.Background()
}

// reload reads the config files and applies what changed, and returns the
// reload (nil when nothing was looked at again). Content that did not
// change (same sha256) is left alone unless force (a signal) asks; a file
// that cannot be read, is empty (an editor mid-save, most likely), or does
// not parse or validate is logged and changes nothing: the next write
// tries again, and is a reload even with the content in effect. short says that the files could not be read for want of
// descriptors or memory (reloadLoop reads them again). transport is the
// audit records' (auditReload): "file" or "signal" for the reloads
// reloadLoop applies, "" for none (Reload's callers record their own).
func (l *Loop) reload(ctx context.Context, trigger, transport string, force bool) (_ *Reload, short bool) {
	l.reloadMu.Lock()
	defer l.reloadMu.Unlock()
	start := time.Now()
	paths := l.opts.ConfigPaths
	file := strings.Join(paths, " + ")
	reject := func(msg string, err error, why string) (*Reload, bool) {
		l.log.Error(msg, "file", file, "trigger", trigger, "err", err)
		return l.reloaded(l.auditReload(&Reload{At: start, Trigger: trigger, Error: why}, transport)), false
	}
	// A pipe (or a file replaced by a FIFO) is not read: its read would
	// block, holding reloadMu, until something writes to it, or read
	// nothing.
	var docs []config.Doc
	err := config.ReadOnce(paths...)
	if err == nil {
		docs, err = config.ReadDocs(paths)
	}
	if err != nil {
		// The file that comes back (a mv back, a checkout, an editor that
		// replaced it) is a reload even when it says what is in effect: it
		// ends the fault that this one records.
		l.hash = [sha256.Size]byte{}
	}
	if e := storage.Shortage(err); e != 0 {
		fix := storage.ShortageFix(e) + "; the file is read again every " + l.opts.StorageRetry.String() + " until it can be"
		l.log.Error("config reload failed: cannot read the file; the previous config stays in effect", "file", file, "trigger", trigger, "err", err, "fix", fix)
		if trigger == "retry" { // one record, not one per retry
			transport = ""
		}
		return l.reloaded(l.auditReload(&Reload{At: start, Trigger: trigger, Error: err.Error() + ": " + fix}, transport)), true
	}
	if why := config.ReloadReadError(err); why != "" {
		// A file replaced by a folder, gone, or refused: the fix is to put
		// it back, or to let this user read it.
		return reject("config reload failed: cannot read the file; the previous config stays in effect", errors.New(why), why)
	}
	if err != nil {
		return reject("config reload failed: cannot read the file; the previous config stays in effect", err, err.Error())
	}
	h := docsHash(docs)
	if h == l.hash && !force {
		l.log.Debug("config file content unchanged", "file", file, "trigger", trigger)
		return nil, false
	}
	l.hash = h // a bad file is reported once, not at every touch
	cfg, _, conflicts, err := config.ParseDocs(docs, nil)
	var empty *config.EmptyError
	if errors.As(err, &empty) {
		l.log.Warn("config reload skipped: the file is empty (being saved?); the previous config stays in effect", "file", empty.Path, "trigger", trigger)
		return l.reloaded(&Reload{At: start, Trigger: trigger, Error: err.Error()}), false
	}
	if err != nil {
		return reject("config reload failed: the new config is invalid; the previous config stays in effect (fix the file and save it again)", err, err.Error())
	}
	for _, c := range conflicts {
		l.log.Info("config files overlap", "conflict", c.String())
	}
	names := l.catalogued(cfg)
	// Hide the removed servers' tools before the pool stops them, so there
	// is no moment at which search returns a tool that cannot run any more.
	l.policy.Put(l.configured().With(names))
	l.policy.PutProfiles(cfg.Toolgate.Profiles)
	d := l.pool.Reconfigure(ctx, l.runnable(cfg))
	was := l.applied.Load().Toolgate
	var hot []string // the toolgate settings that apply at once only with a hook
	if l.opts.SearchFrom != nil {
		hot = append(hot, "toolgate.search")
	}
	if l.opts.SecurityFrom != nil {
		hot = append(hot, "toolgate.security")
	}
	now, later := settingChanges(l.effective(was), l.effective(cfg.Toolgate), hot)
	if slices.Contains(now, "toolgate.search") {
		if eng := l.eng.Load(); eng != nil {
			eng.Reconfigure(l.opts.SearchFrom(cfg.Toolgate.Search))
			o := eng.Options()
			l.log.Info("search settings applied", "file", file, "mode", o.Mode, "keyword_weight", o.KeywordWeight, "vector_weight", o.VectorWeight,
				"min_confidence", o.MinConfidence, "step_weight", o.StepWeight)
			l.vectorsNeeded()
		}
	}
	if slices.Contains(now, "toolgate.security") {
		sec := cfg.Toolgate.Security
		released, held := l.opts.SecurityFrom(sec)
		// The pins file is the data folder's, shared with the gateways of
		// other configs: theirs are not this gateway's to name (GET /status
		// leaves them out too).
		theirs := func(id string) bool { return quarantine.OutsideConfig(id, l.configured().Has) }
		released, held = slices.DeleteFunc(released, theirs), slices.DeleteFunc(held, theirs)
		l.log.Info("security settings applied", "file", file, "approved_tools", sec.ApprovedTools, "on_definition_change", cmp.Or(sec.OnDefinitionChange, "quarantine"),
			"max_text_length", sec.MaxTextLength, "released", released, "quarantined", held)
	}
	if len(later) > 0 {
		l.log.Warn("config settings changed; they take effect on restart", "file", file, "settings", later)
	}
	if why := l.opts.HTTPAddrIgnored; why != "" && cfg.Toolgate.HTTP.Addr != was.HTTP.Addr {
		l.log.Info("config's toolgate.http.addr changed; this gateway does not serve it, now or after a restart: nothing to do",
			"file", file, "addr", cfg.Toolgate.HTTP.Addr, "why", why)
	}
	var warning string
	// Checked at each reload while it differs from the address served, so
	// that the warning stays until the address is free or set back.
	if addr := cfg.Toolgate.HTTP.Addr; addr != "" && addr != l.started.HTTP.Addr && l.opts.HTTPAddrCheck != nil {
		if err := l.opts.HTTPAddrCheck(addr); err != nil {
			warning = fmt.Sprintf("toolgate.http.addr %s cannot be served, so the restart that takes it would fail to start (this gateway keeps serving where it does): %v", addr, err)
			l.log.Warn("the config's new HTTP address cannot be served; this gateway keeps serving where it does", "file", file, "addr", addr, "err", err)
		}
	}
	var fresh []config.Server // added or changed: their values are new
	for _, name := range append(slices.Clone(d.Added), d.Changed...) {
		if srv, ok := cfg.MCPServers[name]; ok {
			fresh = append(fresh, srv)
		}
	}
	LogBareReferences(l.log, fresh)
	l.applied.Store(cfg)
	if len(d.Added)+len(d.Removed)+len(d.Changed)+len(d.Updated) > 0 {
		// Drop removed servers' tools from the index now; added ones
		// follow as they list. After the Store: a build keeps the tools of
		// the servers l.applied configures, and one that ran between the
		// request and the Store (debounce is short, the machine loaded)
		// kept the removed server's, found the catalog the one served and
		// was not asked again: they stayed until the next change
		// (TestReloadOnFileChange failed so in CI).
		// An updated server's language changes its tools' index entries
		// (a build finds nothing to do for a timeout).
		l.refresh()
	}
	// The servers unchanged only counted: at 100 servers the line named
	// them all for a change of one (GET /status's lastReload lists them).
	l.log.Info("config reloaded", "file", file, "trigger", trigger,
		"added", d.Added, "removed", d.Removed, "changed", d.Changed, "updated", d.Updated, "unchanged", len(d.Unchanged),
		"applied", now, "took", time.Since(start).Round(time.Microsecond))
	_, pending := settingChanges(l.effective(l.started), l.effective(cfg.Toolgate), hot)
	here := l.disabledHere() // of the servers it has now
	l.update(func(s *Stats) { s.RestartPending, s.Disabled = pending, here })
	r := l.reloaded(l.auditReload(&Reload{At: start, Trigger: trigger, Added: d.Added, Removed: d.Removed, Changed: d.Changed,
		Updated: d.Updated, Unchanged: d.Unchanged, Applied: now, RestartOnly: later, Warning: warning, Fields: d.Fields},
		transport, profileChanges(was.Profiles, cfg.Toolgate.Profiles)...))
	l.changedHook()
	return r, false
}

// auditReload writes the audit records (Options.Audit) of a reload of
// the config files that no management tool asked for: a hand edit the
// watcher saw (transport "file") or a signal (transport "signal"), and
// returns r. The management tools' own edits (transport "") are not
// recorded again: their records say what they changed, and their Reload
// took the files' content, so the watcher's look at it that follows finds
// nothing new. One record per server the reload added, removed, changed or
// updated (Record.Server set), one per profile it added, removed or
// changed (Record.Profile set) and one for the other settings it applied;
// none when it changed none of these; a rejected
// reload is one record with outcome isError and the error (a file found
// empty, being saved, is not one: the save that follows is). Written
// before the reload is counted (Stats.ReloadGeneration).
func (l *Loop) auditReload(r *Reload, transport string, profiles ...profileChange) *Reload {
	if l.opts.Audit == nil || transport == "" {
		return r
	}
	file := strings.Join(l.opts.ConfigPaths, " + ")
	rec := audit.Record{Time: r.At, Transport: transport, Action: audit.ConfigReload, Decision: audit.Allowed, Outcome: audit.OK,
		DurationMs: float64(time.Since(r.At).Microseconds()) / 1000}
	if r.Error != "" {
		rec.Outcome, rec.Reason = audit.IsError, fmt.Sprintf("%s rejected (%s); the previous config stays in effect: %s", file, r.Trigger, r.Error)
		l.opts.Audit.Write(rec)
		return r
	}
	for _, c := range []struct {
		names []string
		what  string
	}{
		{r.Added, "added to"}, {r.Removed, "removed from"}, {r.Changed, "changed (%s: restarted) in"},
		{r.Updated, "updated (%s: applied in place) in"},
	} {
		for _, name := range c.names {
			// The fields that changed, by name: it said "timeouts,
			// description, language" whichever had.
			what := c.what
			if strings.Contains(what, "%s") {
				what = fmt.Sprintf(what, cmp.Or(strings.Join(r.Fields[name], ", "), "its entry"))
			}
			rec.Server, rec.Reason = name, fmt.Sprintf("server %q %s %s (%s)", name, what, file, r.Trigger)
			l.opts.Audit.Write(rec)
		}
	}
	// Who may see what changed too: one record per profile, found by
	// `audit tail --profile NAME`, and one for the other settings applied
	// (a reload that changed no server wrote none).
	rec.Server = ""
	for _, p := range profiles {
		rec.Profile, rec.Reason = p.name, fmt.Sprintf("profile %q %s %s (%s)", p.name, p.what, file, r.Trigger)
		l.opts.Audit.Write(rec)
	}
	rec.Profile = ""
	if other := slices.DeleteFunc(slices.Clone(r.Applied), func(s string) bool { return s == "toolgate.profiles" }); len(other) > 0 {
		rec.Reason = fmt.Sprintf("settings %s applied from %s (%s)", strings.Join(other, ", "), file, r.Trigger)
		l.opts.Audit.Write(rec)
	}
	return r
}

// profileChange is a profile a reload added ("added to"), removed
// ("removed from") or changed ("changed in"): each an audit record of its
// own (auditReload).
type profileChange struct{ name, what string }

// profileChanges are the profiles cur adds to old, removes from it and
// changes, by name.
func profileChanges(old, cur map[string]config.Profile) []profileChange {
	var out []profileChange
	for _, name := range slices.Sorted(maps.Keys(cur)) {
		if was, ok := old[name]; !ok {
			out = append(out, profileChange{name, "added to"})
		} else if !same(was, cur[name]) {
			out = append(out, profileChange{name, "changed in"})
		}
	}
	for _, name := range slices.Sorted(maps.Keys(old)) {
		if _, ok := cur[name]; !ok {
			out = append(out, profileChange{name, "removed from"})
		}
	}
	return out
}

// effective is s as this gateway takes it: without toolgate.http.addr
// when it serves none (Options.HTTPAddrIgnored), so that a change of it
// waits for no restart.
func (l *Loop) effective(s config.Settings) config.Settings {
	if l.opts.HTTPAddrIgnored != "" {
		s.HTTP.Addr = ""
	}
	return s
}

// docsHash is the hash of the config files' content.
func docsHash(docs []config.Doc) [sha256.Size]byte {
	sum := sha256.New()
	for _, d := range docs {
		sum.Write(d.Data)
		sum.Write([]byte{0})
	}
	var h [sha256.Size]byte
	sum.Sum(h[:0])
	return h
}

// configured is the policy's config rule (New put one).
func (l *Loop) configured() *policy.Configured {
	if r := l.policy.Configured(); r != nil {
		return r
	}
	return policy.NewConfigured(nil)
}

// reloaded counts a reload, after its effects and its log line, and
// returns it.
func (l *Loop) reloaded(r *Reload) *Reload {
	l.update(func(s *Stats) {
		s.ReloadGeneration++
		s.LastReload = r
		if r.Error != "" {
			s.LastReloadError, s.LastReloadErrorAt = r.Error, r.At
		}
	})
	return r
}

// settingChanges names the settings of the toolgate section that differ
// between old and cur: now those a reload applies at once, later those
// that wait for a restart. Profiles and management are read where they
// are used (the policy's profile rule, the management tools); the default
// timeouts reach every server entry (config.File.Servers), which the pool
// takes in place; toolgate.search and toolgate.security apply at once when
// hot names them (a hook reconfigures the engine, the quarantine). Every
// field of config.Settings is in the table
// (TestSettingChangesCoverEveryField).
func settingChanges(old, cur config.Settings, hot []string) (now, later []string) {
	for _, c := range settingsTable(old, cur, hot) {
		if same(c.a, c.b) {
			continue
		}
		if c.atOnce {
			now = append(now, c.name)
		} else {
			later = append(later, c.name)
		}
	}
	return now, later
}

// setting is one setting of the toolgate section, its values in two
// configs, and whether a reload applies it at once.
type setting struct {
	name   string
	a, b   any
	atOnce bool
}

// settingsTable is settingChanges' table.
func settingsTable(old, cur config.Settings, hot []string) []setting {
	return []setting{
		{"toolgate.connectTimeout", old.ConnectTimeout, cur.ConnectTimeout, true},
		{"toolgate.callTimeout", old.CallTimeout, cur.CallTimeout, true},
		{"toolgate.keepAlive", old.KeepAlive, cur.KeepAlive, true},
		{"toolgate.maxResultBytes", old.MaxResultBytes, cur.MaxResultBytes, true},
		{"toolgate.maxConcurrentConnects", old.MaxConcurrentConnects, cur.MaxConcurrentConnects, false},
		{"toolgate.restart", old.Restart, cur.Restart, false},
		{"toolgate.search", old.Search, cur.Search, slices.Contains(hot, "toolgate.search")},
		{"toolgate.learn", old.Learn, cur.Learn, false},
		{"toolgate.embed", old.Embed, cur.Embed, false},
		{"toolgate.http", old.HTTP, cur.HTTP, false},
		{"toolgate.telemetry", old.Telemetry, cur.Telemetry, false},
		{"toolgate.dataDir", old.DataDir, cur.DataDir, false},
		{"toolgate.profiles", old.Profiles, cur.Profiles, true},
		{"toolgate.management", old.Management, cur.Management, true},
		{"toolgate.keysFile", old.KeysFile, cur.KeysFile, false},
		{"toolgate.security", old.Security, cur.Security, slices.Contains(hot, "toolgate.security")},
		{"toolgate.audit", old.Audit, cur.Audit, false},
		{"toolgate.limits", old.Limits, cur.Limits, false},
	}
}

// RestartOnlySettings names the settings of the toolgate section that a
// reload of serve's gateway (Options.SearchFrom and Options.SecurityFrom
// set: toolgate.search and toolgate.security apply at once) does not apply ("toolgate.embed", …), as lastReload.restartOnly
// names them: serve's help and the README list them (a test holds both to
// this).
func RestartOnlySettings() []string {
	var names []string
	for _, s := range settingsTable(config.Settings{}, config.Settings{}, []string{"toolgate.search", "toolgate.security"}) {
		if !s.atOnce {
			names = append(names, s.name)
		}
	}
	return names
}

// same reports whether two settings are equal, an empty map as none.
func same(a, b any) bool {
	va, vb := reflect.ValueOf(a), reflect.ValueOf(b)
	if va.Kind() == reflect.Map && vb.Kind() == reflect.Map && va.Len() == 0 && vb.Len() == 0 {
		return true
	}
	return reflect.DeepEqual(a, b)
}

// LogBareReferences warns of each env or header value of servers that is a
// variable written without braces (config.Server.BareReferences): serve
// at start, a reload for the servers it adds or changes.
func LogBareReferences(log *slog.Logger, servers []config.Server) {
	for _, srv := range servers {
		for _, b := range srv.BareReferences() {
			log.Warn("a variable written without braces reaches the server as written", "server", srv.Name, "value", b)
		}
	}
}
