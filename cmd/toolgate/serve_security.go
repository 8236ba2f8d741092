package main

import (
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/toolgate/toolgate/gateway"
	"github.com/toolgate/toolgate/gateway/audit"
	"github.com/toolgate/toolgate/gateway/backend"
	"github.com/toolgate/toolgate/gateway/config"
	"github.com/toolgate/toolgate/gateway/console"
	"github.com/toolgate/toolgate/gateway/keys"
	"github.com/toolgate/toolgate/gateway/live"
	"github.com/toolgate/toolgate/gateway/mgmt"
	"github.com/toolgate/toolgate/gateway/policy"
	"github.com/toolgate/toolgate/gateway/quarantine"
	"github.com/toolgate/toolgate/index/catalog"
	"github.com/toolgate/toolgate/internal/datafile"
	"github.com/toolgate/toolgate/internal/dirs"
	"github.com/toolgate/toolgate/internal/mask"
	"github.com/toolgate/toolgate/internal/shellword"
	"github.com/toolgate/toolgate/internal/storage"
	"github.com/toolgate/toolgate/internal/tlsfiles"
)

// security is what serve opens for keys, the audit log and quarantine.
type security struct {
	keys       *keys.Store
	requireKey bool // a non-loopback address: every request needs a key
	front      bool // serving HTTP, whose requests the keys check
	audit      *audit.Log
	// auditArguments masks the arguments an audit record keeps
	// (audit.arguments "masked"; nil: only their SHA-256).
	auditArguments func(any) any
	guard          *quarantine.Guard
	// command writes a toolgate command for the log to quote, acting on
	// this data folder (globals.command).
	command func(words ...string) string
	// stopSaving ends the loop that writes the pins the folder refused.
	stopSaving, savingDone chan struct{}
	// profiles are the profiles of the config in effect, set once the
	// runtime loop is made when serving HTTP (where keys are asked for):
	// status names the keys limited to one it lacks.
	profiles func() map[string]config.Profile
	// config is the config in effect, set once the runtime loop is made
	// (before any backend lists its tools): sourceOf reads it.
	config func() *config.File
	// warned is the keysWithoutProfile last logged.
	warnedMu sync.Mutex
	warned   string
	// policy holds the key scope and quarantine rules, checked before
	// the rules the runtime loop keeps (config, disabled, profiles), so a
	// key's denial never names a server outside its scope.
	policy *policy.Set
}

// saveUnsavedEvery is how often serve writes the quarantine decisions the
// data folder refused (as often as the index loop looks at the folder).
const saveUnsavedEvery = 10 * time.Second

// checkKeys checks the HTTP address against the keys (a non-loopback
// address needs some: refused before anything starts) and fails closed on
// keys that cannot be read.
func (g *globals) checkKeys(cfg *config.File, f serveFlags, log *slog.Logger) (*security, error) {
	sec := &security{keys: keys.Open(dirs.Keys(g.DataDir()), &keys.Options{File: cfg.Toolgate.KeysFile, Logger: log}), command: g.command}
	if f.http != "" {
		sec.front = true
		var err error
		if sec.requireKey, err = gateway.KeysNeeded(addrSetting(f.httpFromConfig), f.http, sec.keys.Any, g.command("toolgate", "keys", "create", "--name", "NAME")); err != nil {
			return nil, err
		}
		// Fail closed at start too: keys that cannot be read stop the
		// gateway here rather than refuse every request later.
		if _, err := sec.keys.List(); err != nil {
			return nil, err
		}
	}
	return sec, nil
}

// remoteReady is what the gateway of cfg has for a non-loopback address:
// API keys (in the data folder or toolgate.keysFile; keys that cannot be
// read count as none) and toolgate.http.tls.
func (g *globals) remoteReady(cfg *config.File) gateway.RemoteReady {
	any, err := keys.Open(dirs.Keys(g.DataDir()), &keys.Options{File: cfg.Toolgate.KeysFile}).Any()
	return gateway.RemoteReady{Keys: err == nil && any, TLS: cfg.Toolgate.HTTP.TLS != nil}
}

// checkPins fails closed at start on a quarantine pins file that is there
// but cannot be read or parsed: served without it, every tool it holds
// (poisoned, or changed since approved) would be pinned afresh as first
// seen, and released. A missing file is a first start (or a data folder
// deleted on purpose); a data folder that cannot be reached is the
// degraded start's (README, Reliability). What it read is the guard's
// (security.open), which does not parse it again: at 10,000 tools the file
// is 4 MB, parsed in 70 ms on a 2 GHz core.
func checkPins(path string) (datafile.Stamped[*quarantine.File], error) {
	pins, err := quarantine.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR) {
		return pins, nil
	}
	if _, ok := datafile.AsNewer(err); ok {
		// A rollback: kept as it is for the newer toolgate (the fix is
		// storage.CommandFix's).
		return pins, fmt.Errorf("%w\nThis toolgate cannot read it, and without it the tools it holds would be released, so the gateway does not start", err)
	}
	if storage.Denied(err) {
		// Another user's (a data folder copied or restored by root): the
		// fix gives it back (fail's); moved aside, the tools it holds
		// would be released.
		return pins, fmt.Errorf("the quarantine pins file %s cannot be read: %w\n"+
			"Without it the tools it holds would be released, so the gateway does not start", path, err)
	}
	if err != nil {
		return pins, fmt.Errorf("the quarantine pins file %s cannot be read: %w\n"+
			"Without it the tools it holds would be released, so the gateway does not start. Fix: restore it from a backup, "+
			"or move it aside (%s): every tool is then pinned afresh, as on a first start (a definition that changed meanwhile is not caught)",
			path, err, shellword.Join("mv", path, path+".bad"))
	}
	return pins, nil
}

// checkState fails closed at start on a state file (state.json) that is
// there but cannot be read or parsed (cut short, edited by hand): served
// without it, every server disabled at run time (toolgate servers
// disable, toolgate__disable_server) would start and its tools be shown
// and run. While serving, such a file leaves the servers disabled as they
// are (live); at start there is nothing to leave, so it refuses, as
// checkPins does. A missing file is a first start; a data folder that is a
// file (ENOTDIR) is the degraded start's.
func checkState(path string) error {
	_, err := live.ReadState(path)
	if err == nil || errors.Is(err, syscall.ENOTDIR) {
		return nil
	}
	return fmt.Errorf("the state file %s cannot be read: %w\n"+
		"It keeps the servers disabled at run time; without it they would start, so the gateway does not start. Fix: restore it from a backup, "+
		"correct it by hand (%s), or move it aside (%s): every server then starts enabled",
		path, err, `{"disabled": ["NAME"]}`, shellword.Join("mv", path, path+".bad"))
}

// open opens the audit log and the quarantine's pins in the data folder,
// and the policy rules of key scopes and quarantine. A data folder that
// cannot take writes does not stop the gateway (it is never made again
// behind the user's back): the audit log counts and logs each record it
// cannot write, and the quarantine keeps its decisions in memory.
func (sec *security) open(cfg *config.File, log *slog.Logger, health *storage.Health, pins datafile.Stamped[*quarantine.File]) {
	t := cfg.Toolgate
	data := health.Dir()
	sec.audit = audit.Open(dirs.Audit(data), &audit.Options{Logger: log, MaxFileBytes: t.Audit.MaxFileBytes, MaxFiles: t.Audit.MaxFiles,
		MinRetention: t.Audit.MinRetention.Duration, Storage: health.Writer("audit log", "records are counted as lost"), Config: cfg.Source()})
	if t.Audit.Arguments == "masked" {
		// The stderr masking rules, with every configured secret.
		sec.auditArguments = mask.New(backend.Secrets(cfg.All()...)).Value
	}
	sec.policy = policy.NewSet()
	sec.policy.Put(keys.NewScope(sec.policy.Profiles, mgmt.ChangesConfig))
	sec.guard = quarantine.New(dirs.Pins(data), &quarantine.Options{
		OnChange: t.Security.OnDefinitionChange,
		Approved: t.Security.ApprovedTools,
		Scanner:  quarantine.Scanner{MaxTextLength: t.Security.MaxTextLength},
		Storage:  health.Writer("quarantine pins", "decisions are kept in memory"),
		Logger:   log,
		Read:     pins,
		Command:  sec.command,
		SourceOf: sec.sourceOf,
		// Each new set of decisions (a listing, an approval) replaces the
		// rule, so search filters are made again.
		Changed: func(s *quarantine.Snapshot) { sec.policy.Put(s.Rule()) },
	})
	sec.policy.Put(sec.guard.Snapshot().Rule())
	// Decisions the folder refused are written once it takes writes.
	sec.stopSaving = make(chan struct{})
	sec.savingDone = make(chan struct{})
	go func() {
		defer close(sec.savingDone)
		tick := time.NewTicker(saveUnsavedEvery)
		defer tick.Stop()
		for {
			select {
			case <-sec.stopSaving:
				return
			case <-tick.C:
				_ = sec.guard.SaveUnsaved() // a refusal is the writer's to report
			}
		}
	}()
	if err := sec.guard.Watch(); err != nil {
		log.Warn(quarantine.UnwatchedApprovals, "err", err)
	}
}

// sourceOf names the config in effect (quarantine.ConfigSource) when it
// has server, "" when it lacks it or before the runtime loop is made: the
// source of that server's listings in the quarantine pins (Pin.Sources).
func (s *security) sourceOf(server string) string {
	if s.config == nil {
		return ""
	}
	cfg := s.config()
	if _, ok := cfg.MCPServers[server]; !ok {
		return ""
	}
	return quarantine.ConfigSource(cfg)
}

// status is the security part of GET /status.
func (s *security) status() *gateway.SecurityStatus {
	// Fault reads the pins file again first when it changed: a file
	// corrupted while serving shows here at once, and clears once mended.
	fault := s.guard.Fault()
	// The tools this gateway holds: those its servers list, not those of
	// another config's server of the same name (the pins file is shared).
	snap := s.guard.Snapshot()
	held := slices.DeleteFunc(snap.HeldIDs(), func(id string) bool {
		server, _, err := catalog.SplitID(id)
		return err == nil && !snap.ListedBy(id, s.sourceOf(server))
	})
	return &gateway.SecurityStatus{Audit: s.audit.Stats(), Quarantined: held, PinsFault: fault, KeysFault: s.keysFault(),
		KeysWithoutProfile: s.keysWithoutProfile(), KeysExpiring: s.keysExpiring(time.Now())}
}

// keysFault is why the HTTP front's API keys cannot be read, while they
// cannot (every request gets 503), else "". A gateway without an HTTP
// front reads no key. `toolgate status` said every backend up, exit 0, of
// a gateway that refused every client.
func (s *security) keysFault() string {
	if !s.front {
		return ""
	}
	if _, err := s.keys.List(); err != nil {
		return err.Error()
	}
	return ""
}

// keysExpiring are the API keys in force that expire within
// tlsfiles.RenewWithin of now, and those that expired and were never
// revoked, by name. None while the keys cannot be read (that refuses every
// request, and says so).
func (s *security) keysExpiring(now time.Time) []gateway.KeyExpiry {
	l, err := s.keys.List()
	if err != nil {
		return nil
	}
	var out []gateway.KeyExpiry
	for _, k := range l {
		if !k.Expires.IsZero() && k.Expires.Sub(now) < tlsfiles.RenewWithin {
			out = append(out, gateway.KeyExpiry{Key: k.Name, Expires: k.Expires})
		}
	}
	slices.SortFunc(out, func(a, b gateway.KeyExpiry) int { return strings.Compare(a.Key, b.Key) })
	return out
}

// keysWithoutProfile are the API keys, not expired, limited to a profile
// the config in effect lacks (an edit removed or renamed it): each reaches
// no tool, which only its callers were told. None before the runtime loop
// is made, or while the keys cannot be read (that refuses every request,
// and says so).
func (s *security) keysWithoutProfile() []gateway.KeyProfile {
	if s.profiles == nil {
		return nil
	}
	l, err := s.keys.List()
	if err != nil {
		return nil
	}
	profiles, now := s.profiles(), time.Now()
	var out []gateway.KeyProfile
	for _, k := range l {
		if _, ok := profiles[k.Profile]; k.Profile != "" && !ok && !k.Expired(now) {
			out = append(out, gateway.KeyProfile{Key: k.Name, Profile: k.Profile})
		}
	}
	return out
}

// keysWithoutProfileFix is what to do about keysWithoutProfile.
const keysWithoutProfileFix = "put the profile back in toolgate.profiles, or move the key's clients to a key of a profile the config has (toolgate keys create --profile P, then toolgate keys revoke NAME)"

// keyProfiles says keys as `alice (profile "kg")`, comma-separated.
func keyProfiles(keys []gateway.KeyProfile) string {
	s := make([]string, len(keys))
	for i, k := range keys {
		s[i] = fmt.Sprintf("%s (profile %q)", k.Key, k.Profile)
	}
	return strings.Join(s, ", ")
}

// warnKeysWithoutProfile logs keysWithoutProfile when they are not those
// it logged last: at start, and at the reload that strands them.
func (s *security) warnKeysWithoutProfile(log *slog.Logger) {
	ks := keyProfiles(s.keysWithoutProfile())
	s.warnedMu.Lock()
	defer s.warnedMu.Unlock()
	if ks == s.warned {
		return
	}
	s.warned = ks
	if ks != "" {
		log.Warn("API keys limited to a profile the config does not have reach no tool", "keys", ks, "fix", keysWithoutProfileFix)
	}
}

// Close stops following approvals and closes the audit log (after the
// gateway stopped writing to it).
func (s *security) Close() error {
	var err error
	if s.stopSaving != nil {
		close(s.stopSaving)
		<-s.savingDone
	}
	if s.guard != nil {
		err = s.guard.Close()
	}
	if s.audit != nil {
		err = errors.Join(err, s.audit.Close())
	}
	return err
}

// consoleKeys lets the console check keys against the same store.
func (s *security) consoleKeys() console.Keys { return consoleKeys{s} }

type consoleKeys struct{ s *security }

// Required: some key exists, or the address needs keys; keys that cannot
// be read count as required (no one gets in).
func (k consoleKeys) Required() bool {
	any, err := k.s.keys.Any()
	return any || err != nil || k.s.requireKey
}

func (k consoleKeys) Scope(secret string) (*policy.Key, error) {
	e, err := k.s.keys.Verify(secret)
	switch {
	case err == nil:
		return e.Caller(), nil
	case e.Name != "": // revoked or expired: named in the refusal
		return e.Caller(), err
	}
	return nil, err
}

// pinsFile is the data folder's quarantine pins file.
func (g *globals) pinsFile() string { return dirs.Pins(g.DataDir()) }
