package gateway

import (
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/toolgate/toolgate/gateway/audit"
	"github.com/toolgate/toolgate/gateway/backend"
	"github.com/toolgate/toolgate/gateway/backend/oauth"
	"github.com/toolgate/toolgate/gateway/live"
	"github.com/toolgate/toolgate/gateway/policy"
	"github.com/toolgate/toolgate/gateway/quarantine"
	"github.com/toolgate/toolgate/index/catalog"
	"github.com/toolgate/toolgate/internal/oneline"
	"github.com/toolgate/toolgate/internal/storage"
	"github.com/toolgate/toolgate/internal/tlsfiles"
	"github.com/toolgate/toolgate/search"
)

// StatusSource reports every backend's state. The backend pool implements it.
type StatusSource interface {
	Status() []backend.Status
}

var _ StatusSource = (*backend.Pool)(nil)

// StatsSource reports the runtime loop's counters. The live.Loop implements
// it.
type StatsSource interface {
	Stats() live.Stats
}

var _ StatsSource = (*live.Loop)(nil)

// StatusOptions configure StatusHandler. Nil means defaults.
type StatusOptions struct {
	Version string    // default "dev"
	Started time.Time // when the gateway started; default: when StatusHandler was called
	// Now is the clock (default time.Now); tests set it.
	Now func() time.Time
	// Loop, if set, adds the runtime loop's counters (catalog and reload
	// generations, last errors) to the report.
	Loop StatsSource
	// Storage, if set, adds the data folder's health (the "storage"
	// section).
	Storage StorageSource
	// Security, if set, adds the audit log's counters and the tools
	// quarantined.
	Security func() *SecurityStatus
	// Policy and Catalog, if set, narrow the report for an API key that
	// is not admin to the servers its scope lets it see (ScopeReport).
	Policy  *policy.Set
	Catalog policy.Tools
	// Process, if set, adds what the gateway process is (the "process"
	// section).
	Process func() *ProcessInfo
	// Search, if set, adds how searches rank now (the "search" section):
	// hybrid with the model, or BM25 only and why.
	Search func() *search.State
	// Learning, if set, adds what the gateway learns from use with (the
	// "learning" section).
	Learning func() *LearningStatus
	// SchemaFlaws, if set, adds the tools whose input schema the gateway
	// cannot read (the "schemaFlaws" section): every one of the catalog
	// served, by ID (catalog.FlawLog.Flawed), and ok false while the
	// catalog has not been checked yet (a warm start before its servers
	// list), which leaves the section out.
	SchemaFlaws func() (flawed []catalog.ToolFlaw, ok bool)
	// ShownFlaws, if set with SchemaFlaws, adds to that section the tools
	// of the same catalog whose input schema is over
	// catalog.MaxSchemaShown and those whose name MCP does not recommend
	// (catalog.ShownFlaws), by ID.
	ShownFlaws func() (huge, names []catalog.ToolFlaw)
}

// SchemaFlaws is what a StatusReport says of the tools whose input schema
// the gateway cannot read (catalog.Flaws): it lets their calls through
// unchecked, and leaves the arguments it cannot read out of the index. A
// warning, not a fault: the gateway serves them.
type SchemaFlaws struct {
	// Count is how many tools of the catalog served have one (those of
	// servers disabled at run time left out).
	Count int `json:"count"`
	// Tools are the first MaxSchemaFlawsShown of them, by ID, each with
	// why.
	Tools []catalog.ToolFlaw `json:"tools"`
	// HugeSchemas are the tools whose input schema is over
	// catalog.MaxSchemaShown, each with its size: checked, but a compact
	// search_tools answer gives its arguments in its place. Names are
	// those whose name MCP does not recommend, each with what is wrong:
	// served as listed, but a client of the server itself may refuse
	// them. The log said each once, as it does a schema it cannot read.
	// Absent when there are none.
	HugeSchemas *FlawList `json:"hugeSchemas,omitempty"`
	Names       *FlawList `json:"names,omitempty"`
}

// FlawList is a kind of flaw of SchemaFlaws other than a schema the
// gateway cannot read: how many tools have it, and the first
// MaxSchemaFlawsShown, by ID.
type FlawList struct {
	Count int                `json:"count"`
	Tools []catalog.ToolFlaw `json:"tools"`
}

// flawList is tools, all of those with a flaw, as a report shows them
// (the first MaxSchemaFlawsShown), or nil when there are none.
func flawList(tools []catalog.ToolFlaw) *FlawList {
	if len(tools) == 0 {
		return nil
	}
	return &FlawList{Count: len(tools), Tools: slices.Clip(tools[:min(len(tools), MaxSchemaFlawsShown)])}
}

// without is l without the tools drop says, or nil when none is left.
func (l *FlawList) without(drop func(catalog.ToolFlaw) bool) *FlawList {
	if l == nil {
		return nil
	}
	return flawList(slices.DeleteFunc(slices.Clone(l.Tools), drop))
}

// MaxSchemaFlawsShown caps SchemaFlaws.Tools: a server that lists
// thousands of tools with the same fault would fill the report.
const MaxSchemaFlawsShown = 20

// ThisGateway is LearningStatus.Holder when the gateway reporting holds
// the learned pairs itself.
const ThisGateway = "this gateway"

// LearningStatus is the learned pairs a gateway ranks with: how many, and
// who holds the store (one process on a data folder; the other gateways
// there learn through it).
type LearningStatus struct {
	// Holder is ThisGateway, or the gateway that holds the store
	// ("pid 4242 (stdio, client claude-ai 0.1.0)"); empty while none can
	// be read (Error says why).
	Holder string `json:"holder,omitempty"`
	Pairs  int    `json:"pairs"`
	Tools  int    `json:"tools"`
	Error  string `json:"error,omitempty"`
}

// ProcessInfo is the gateway process in a StatusReport: a machine may run
// several gateways (each stdio client starts its own), and `toolgate
// status` shows every one on a data folder.
type ProcessInfo struct {
	PID       int    `json:"pid"`
	Transport string `json:"transport"`      // "stdio" or "http"
	Addr      string `json:"addr,omitempty"` // the HTTP front's address
	// TLS says the front serves HTTPS, and TLSCert is its certificate file
	// (absolute), which a client on this machine may pin (toolgate connect
	// and status reach it at 127.0.0.1, not at the name it is issued for).
	TLS     bool   `json:"tls,omitempty"`
	TLSCert string `json:"tlsCert,omitempty"`
	// TLSNotBefore and TLSNotAfter are the dates the certificate served
	// is valid between.
	TLSNotBefore *time.Time `json:"tlsNotBefore,omitempty"`
	TLSNotAfter  *time.Time `json:"tlsNotAfter,omitempty"`
	// TLSError says why the certificate's files, changed since the
	// certificate served was read (a renewal), cannot be read, since
	// TLSErrorSince; the certificate read before is served meanwhile.
	TLSError      string     `json:"tlsError,omitempty"`
	TLSErrorSince *time.Time `json:"tlsErrorSince,omitempty"`
	// ExitWhenIdle is serve --exit-when-idle: the gateway stops once no
	// MCP request has come for that long ("10m0s"; empty: never).
	ExitWhenIdle string `json:"exitWhenIdle,omitempty"`
	// Client is the stdio client's name and version, as it gave them in
	// its initialize request ("claude-ai 0.1.0"); empty before that.
	Client string `json:"client,omitempty"`
	// LogLevel is the level the gateway logs at now: --log-level, or what
	// `toolgate logs --level` set since.
	LogLevel string `json:"logLevel,omitempty"`
	// Config is the config files read, in order (not shown to an API
	// key that is not admin).
	Config []string `json:"config,omitempty"`
}

// SecurityStatus is what a StatusReport says of the audit log and the
// quarantine.
type SecurityStatus struct {
	Audit       audit.Stats `json:"audit"`       // records written, lost, failed writes
	Quarantined []string    `json:"quarantined"` // IDs of the tools held, sorted
	// PinsFault, while the quarantine pins file cannot be read or parsed
	// (corrupted, made unreadable while serving), says which file, why,
	// since when and the fix; the last decisions stand meanwhile. The
	// gateway is degraded until the file reads again.
	PinsFault *quarantine.Fault `json:"pinsFault,omitempty"`
	// KeysFault, while the HTTP front's API keys cannot be read (a key file
	// that does not parse, one every user may write, a keysFile missing),
	// says why: the front refuses every request with 503 (fail closed), and
	// the gateway is degraded until they read again. Only the status
	// socket shows it (the front lets no key in to read it).
	KeysFault string `json:"keysFault,omitempty"`
	// KeysWithoutProfile are the API keys (not expired) limited to a
	// profile the config in effect does not have, removed or renamed by an
	// edit: they reach no tool until it is back, which their callers
	// alone were told. Left out of what a key that is not admin sees.
	KeysWithoutProfile []KeyProfile `json:"keysWithoutProfile,omitempty"`
	// KeysExpiring are the API keys in force that expire within 14 days
	// (tlsfiles.RenewWithin, as a certificate due for renewal), and those
	// that expired and were never revoked, by name: their clients are cut
	// off at that time, which only keys list showed. Left out of what a
	// key that is not admin sees.
	KeysExpiring []KeyExpiry `json:"keysExpiring,omitempty"`
}

// KeyExpiry is an API key in force that expires within
// tlsfiles.RenewWithin, or one that expired and was never revoked.
type KeyExpiry struct {
	Key     string    `json:"key"`
	Expires time.Time `json:"expires"`
}

// Notice is how toolgate status and the console say k at now.
func (k KeyExpiry) Notice(now time.Time) string {
	if !now.Before(k.Expires) {
		return fmt.Sprintf("API key %s EXPIRED at %s: its clients are refused (401)", k.Key, tlsfiles.When(k.Expires))
	}
	return fmt.Sprintf("API key %s expires at %s, in %s: rotate it", k.Key, tlsfiles.When(k.Expires), tlsfiles.Days(k.Expires.Sub(now)))
}

// KeysExpiringFix is what to do about SecurityStatus.KeysExpiring (README,
// Rotating a key).
const KeysExpiringFix = "rotate a key: toolgate keys create --name NEW with the scope toolgate keys list shows for it, give its clients the new secret, then toolgate keys revoke NAME; " +
	"or extend it, its secret kept: toolgate keys update NAME --expires 90d"

// KeyProfile is an API key and the profile it is limited to.
type KeyProfile struct {
	Key     string `json:"key"`
	Profile string `json:"profile"`
}

// StorageSource reports the data folder's health. internal/storage's
// Health implements it.
type StorageSource interface {
	Report() storage.Report
}

var _ StorageSource = (*storage.Health)(nil)

// StatusReport is the JSON document served at GET /status and printed by
// `toolgate status --json`. Fields are only ever added.
type StatusReport struct {
	Version       string          `json:"version"`
	Started       time.Time       `json:"started"`
	Uptime        string          `json:"uptime"` // e.g. "1h2m3s"
	UptimeSeconds float64         `json:"uptimeSeconds"`
	Backends      []BackendStatus `json:"backends"`
	Up            int             `json:"up"`    // backends in state "up"
	Total         int             `json:"total"` // configured (enabled) backends
	// The runtime loop's counters (catalogGeneration, reloadGeneration,
	// lastReload, ...), when StatusOptions.Loop is set.
	*live.Stats
	// Storage is the data folder's health: writable or not, the last
	// error and since when, each writer's state (StatusOptions.Storage).
	Storage  *storage.Report `json:"storage,omitempty"`
	Security *SecurityStatus `json:"security,omitempty"`
	// Process is the gateway process (StatusOptions.Process).
	Process *ProcessInfo `json:"process,omitempty"`
	// Search is how searches rank now (StatusOptions.Search).
	Search *search.State `json:"search,omitempty"`
	// Learning is the learned pairs ranked with (StatusOptions.Learning);
	// absent when learning from use is off.
	Learning *LearningStatus `json:"learning,omitempty"`
	// SchemaFlaws are the tools whose input schema the gateway cannot
	// read (StatusOptions.SchemaFlaws).
	SchemaFlaws *SchemaFlaws `json:"schemaFlaws,omitempty"`
}

// FrontExpiry is how the HTTPS front's certificate, read from file ("" in
// a report for an API key that is not admin) and valid from notBefore
// until notAfter, stands at now (tlsfiles.Expiry):
// the line toolgate status prints ("https: certificate FILE valid until
// …"), and what is wrong with it now (tlsfiles.Expired, NotYetValid).
func FrontExpiry(file string, notBefore, notAfter, now time.Time) (line, problem string) {
	return tlsfiles.Expiry(strings.TrimSpace("https: certificate "+file), "clients refuse it", notBefore, notAfter, now)
}

// FrontExpiry is FrontExpiry of the certificate p says its front serves
// (ok false when it serves none).
func (p *ProcessInfo) FrontExpiry(now time.Time) (line, problem string, ok bool) {
	if p == nil || p.TLSNotAfter == nil {
		return "", "", false
	}
	var nb time.Time
	if p.TLSNotBefore != nil {
		nb = *p.TLSNotBefore
	}
	line, problem = FrontExpiry(p.TLSCert, nb, *p.TLSNotAfter, now)
	return line, problem, true
}

// FrontUnreadable is the line said of p's certificate files when they
// changed but cannot be read ("" when they read), its time written by
// when.
func (p *ProcessInfo) FrontUnreadable(when func(time.Time) string) string {
	if p == nil || p.TLSError == "" {
		return ""
	}
	since := ""
	if p.TLSErrorSince != nil {
		since = " since " + when(*p.TLSErrorSince)
	}
	return "https: the certificate's files changed" + since + " but CANNOT BE READ: " + oneline.Cut(p.TLSError, 200) + ": the certificate read before is served; write the certificate and its key whole (PEM) over the files"
}

// FrontNotices are what the console says of the HTTPS front's
// certificate, under the backends as toolgate status says it: once it is
// due for renewal (tlsfiles.RenewWithin), expired or not valid yet, and
// while its changed files cannot be read; none while it is simply valid.
func (p *ProcessInfo) FrontNotices(now time.Time) []string {
	var out []string
	if line, problem, ok := p.FrontExpiry(now); ok && (problem != "" || p.TLSNotAfter.Sub(now) < tlsfiles.RenewWithin) {
		out = append(out, line)
	}
	if line := p.FrontUnreadable(tlsfiles.When); line != "" {
		out = append(out, line)
	}
	return out
}

// BackendStatus is one backend in a StatusReport: the pool's snapshot plus
// how long it has been in its state.
type BackendStatus struct {
	backend.Status
	// For is how long the backend has been in State (its uptime while up),
	// e.g. "4m10s".
	For        string  `json:"for"`
	ForSeconds float64 `json:"forSeconds"`
}

// CertNotice is what toolgate status and the console say of the client
// certificate b's server is reached with: a line once it is due for
// renewal (tlsfiles.RenewWithin), expired or not valid yet, or when its
// file cannot be read; "" otherwise. problem says what is wrong with it
// now (tlsfiles.Expired, tlsfiles.NotYetValid: the gateway is degraded).
func (b BackendStatus) CertNotice(now time.Time) (line, problem string) {
	if b.TLSCertError != "" { // which names the file
		return b.Name + ": client certificate CANNOT BE READ: " + b.TLSCertError + ": the server's next connect fails on it; put the certificate back (PEM)", ""
	}
	na := b.TLSCertNotAfter
	if na == nil {
		return "", ""
	}
	var nb time.Time
	if b.TLSCertNotBefore != nil {
		nb = *b.TLSCertNotBefore
	}
	line, problem = tlsfiles.Expiry(strings.TrimSpace(b.Name+": client certificate "+b.TLSCert), "the server refuses it", nb, *na, now)
	if problem == "" && na.Sub(now) >= tlsfiles.RenewWithin {
		return "", ""
	}
	return line, problem
}

// LoginNotice is what toolgate status and the console say of the OAuth
// login of b's server when its access token cannot be refreshed: when it
// expires and the login to run (oauth.ExpiryNotice); "" otherwise.
// expired says it has (the server's next call fails: the gateway is
// degraded).
func (b BackendStatus) LoginNotice(now time.Time) (line string, expired bool) {
	le := b.LoginExpiry
	if le == nil {
		return "", false
	}
	return oauth.ExpiryNotice(b.Name, le.Login, le.Expires, now), !le.Expires.After(now)
}

// StatusHandler serves GET /status: a StatusReport of src as JSON. Mount it
// beside /mcp with HTTPOptions.Extra (key "GET /status"), so that it gets the
// same Host/Origin checks.
func StatusHandler(src StatusSource, opts *StatusOptions) http.Handler {
	var o StatusOptions
	if opts != nil {
		o = *opts
	}
	if o.Version == "" {
		o.Version = "dev"
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Started.IsZero() {
		o.Started = o.Now()
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			w.Header().Set("Allow", "GET, HEAD")
			http.Error(w, "use GET /status", http.StatusMethodNotAllowed)
			return
		}
		rep := o.Report(src, policy.CallerFrom(r.Context()))
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Cache-Control", "no-store")
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		_ = enc.Encode(rep)
	})
}

// Report is the StatusReport of src and o's sources as c sees it
// (ScopeReport): what GET /status serves, and the console's state holds.
func (o *StatusOptions) Report(src StatusSource, c *policy.Caller) StatusReport {
	now, version := time.Now, o.Version
	if o.Now != nil {
		now = o.Now
	}
	if version == "" {
		version = "dev"
	}
	rep := BuildStatusReport(src.Status(), version, o.Started, now())
	if o.Loop != nil {
		st := o.Loop.Stats()
		rep.Stats = &st
	}
	// Security first: it reads the quarantine pins file again, and
	// writes back the decisions held in memory when the file went with
	// the data folder, which the storage report then shows.
	if o.Security != nil {
		rep.Security = o.Security()
		// This gateway holds the tools of its own servers only
		// (quarantine.OutsideConfig). Narrowed in a copy.
		if cfg := o.configured(); cfg != nil && rep.Security != nil {
			sec := *rep.Security
			sec.Quarantined = slices.DeleteFunc(slices.Clone(sec.Quarantined), func(id string) bool {
				return quarantine.OutsideConfig(id, cfg.Has)
			})
			rep.Security = &sec
		}
	}
	if o.Storage != nil {
		sr := o.Storage.Report()
		rep.Storage = &sr
	}
	if o.Process != nil {
		rep.Process = o.Process()
	}
	if o.Search != nil {
		rep.Search = o.Search()
	}
	if o.Learning != nil {
		rep.Learning = o.Learning()
	}
	if o.SchemaFlaws != nil {
		if all, ok := o.SchemaFlaws(); ok {
			// The index served holds the tools of the servers disabled at
			// run time too: not served, they are left out.
			var disabled []string
			if rep.Stats != nil {
				disabled = rep.Stats.Disabled
			}
			off := func(f catalog.ToolFlaw) bool {
				server, _, err := catalog.SplitID(f.Tool)
				return err == nil && slices.Contains(disabled, server)
			}
			rep.SchemaFlaws = &SchemaFlaws{Tools: slices.DeleteFunc(slices.Clone(all), off)}
			if o.ShownFlaws != nil {
				huge, names := o.ShownFlaws()
				rep.SchemaFlaws.HugeSchemas = flawList(slices.DeleteFunc(slices.Clone(huge), off))
				rep.SchemaFlaws.Names = flawList(slices.DeleteFunc(slices.Clone(names), off))
			}
		}
	}
	ScopeReport(&rep, c, o.Policy, o.Catalog)
	if f := rep.SchemaFlaws; f != nil {
		f.Count = len(f.Tools)
		f.Tools = slices.Clip(f.Tools[:min(f.Count, MaxSchemaFlawsShown)])
		if f.Tools == nil {
			f.Tools = []catalog.ToolFlaw{}
		}
	}
	return rep
}

// configured is the rule of the servers in the config in effect, or nil.
func (o *StatusOptions) configured() *policy.Configured {
	if o.Policy == nil {
		return nil
	}
	return o.Policy.Configured()
}

// BuildStatusReport assembles a StatusReport as of now.
func BuildStatusReport(sts []backend.Status, version string, started, now time.Time) StatusReport {
	up := now.Sub(started)
	rep := StatusReport{
		Version:       version,
		Started:       started.UTC(),
		Uptime:        up.Round(time.Second).String(),
		UptimeSeconds: up.Seconds(),
		Backends:      make([]BackendStatus, 0, len(sts)),
		Total:         len(sts),
	}
	for _, st := range sts {
		d := time.Duration(0)
		if !st.Since.IsZero() {
			d = max(now.Sub(st.Since), 0)
		}
		if st.State == backend.StateUp {
			rep.Up++
		}
		st.Since = st.Since.UTC()
		rep.Backends = append(rep.Backends, BackendStatus{Status: st, For: d.Round(time.Second).String(), ForSeconds: d.Seconds()})
	}
	return rep
}

// HiddenFromKey stands in a report narrowed by ScopeReport for a text that
// may name servers outside the key's scope or hold paths on the gateway's
// machine.
const HiddenFromKey = backend.HiddenFromKey

// ScopeReport narrows rep, in place, to what c may see when c holds an API
// key that is not admin: the servers it may manage (policy.Set.MayManage,
// as toolgate__list_servers), the counts of those, the runtime lists and
// quarantined tools of those servers only, and HiddenFromKey for the
// reload and index errors, which may name any server, and no paths on the
// gateway's machine (config files, certificates: their dates stay; the
// backends' errors: backend.Status.ForKey), each server's tools and
// catalogTools count the tools its own rules let it see (policy.Set.Sees),
// catalogTools but of servers disabled at run time, disabledTools those;
// the data folder's and the quarantine pins file's paths are left out, and
// the storage, pins, search and learning errors (which quote those paths or
// the model's) and their fixes read HiddenFromKey, their state and counts kept. A key
// thus learns nothing of the servers outside its scope. Stdio, an admin key, and the
// HTTP front without keys see the whole report. The lists of rep.Stats and
// rep.Security are narrowed in copies: they may be their sources' own.
func ScopeReport(rep *StatusReport, c *policy.Caller, pol *policy.Set, tools policy.Tools) {
	if !c.Scoped() {
		return
	}
	// One pass over the catalog for every server (MayManage of each read
	// it all again: 0.4–0.8 s at 100 servers and 50,000 tools).
	sight := pol.Sight(c, tools)
	sees := sight.MayManage
	names := func(in []string) []string {
		return slices.DeleteFunc(slices.Clone(in), func(n string) bool { return !sees(n) })
	}
	// The tools of each server its own rules let it see, as search shows
	// them: a server's full count would tell it of tools it cannot see.
	count := tools != nil
	rep.Backends = slices.DeleteFunc(rep.Backends, func(b BackendStatus) bool { return !sees(b.Name) })
	rep.Total, rep.Up = len(rep.Backends), 0
	for i := range rep.Backends { // built for this report: changed in place
		b := &rep.Backends[i]
		if b.State == backend.StateUp {
			rep.Up++
		}
		b.Status = b.Status.ForKey()
		if count {
			b.Tools = sight.Tools(b.Name)
		}
	}
	if rep.Stats != nil {
		st := *rep.Stats
		st.Disabled = names(st.Disabled)
		if st.LastReload != nil {
			lr := *st.LastReload
			lr.Added, lr.Removed, lr.Changed = names(lr.Added), names(lr.Removed), names(lr.Changed)
			lr.Updated, lr.Unchanged = names(lr.Updated), names(lr.Unchanged)
			if lr.Fields != nil {
				lr.Fields = maps.Clone(lr.Fields)
				maps.DeleteFunc(lr.Fields, func(n string, _ []string) bool { return !sees(n) })
			}
			lr.Error = backend.ForKey(lr.Error)
			st.LastReload = &lr
		}
		st.LastReloadError = backend.ForKey(st.LastReloadError)
		st.LastIndexError = backend.ForKey(st.LastIndexError)
		if tools != nil {
			st.CatalogTools, st.DisabledTools = 0, 0
			for server, n := range sight.Counts() {
				if slices.Contains(rep.Stats.Disabled, server) {
					st.DisabledTools += n
				} else {
					st.CatalogTools += n
				}
			}
		}
		rep.Stats = &st
	}
	if rep.Process != nil {
		p := *rep.Process
		p.Config, p.TLSCert = nil, ""
		p.TLSError = backend.ForKey(p.TLSError)
		rep.Process = &p
	}
	if rep.Storage != nil {
		// The data folder's path, and what its writers' and checks'
		// errors and fixes quote of it; its state and counts are kept.
		st := *rep.Storage
		st.DataDir = ""
		for _, t := range []*string{&st.Error, &st.Fix, &st.LastError, &st.Open, &st.OpenFix} {
			*t = backend.ForKey(*t)
		}
		st.Writers = slices.Clone(st.Writers)
		for i := range st.Writers {
			st.Writers[i].Error, st.Writers[i].Fix = backend.ForKey(st.Writers[i].Error), backend.ForKey(st.Writers[i].Fix)
		}
		rep.Storage = &st
	}
	if rep.Search != nil {
		s := *rep.Search
		s.Reason = backend.ForKey(s.Reason) // the model's path, and its fix
		rep.Search = &s
	}
	if rep.Learning != nil {
		l := *rep.Learning
		l.Error = backend.ForKey(l.Error) // the store's path
		rep.Learning = &l
	}
	if rep.Security != nil {
		sec := *rep.Security
		sec.Quarantined = slices.DeleteFunc(slices.Clone(sec.Quarantined), func(id string) bool {
			server, _, err := catalog.SplitID(id)
			return err != nil || !sees(server)
		})
		sec.KeysWithoutProfile = nil // other keys' names and the config's profiles
		sec.KeysExpiring = nil
		sec.KeysFault = "" // names the key files (none is let in while it holds)
		if f := sec.PinsFault; f != nil {
			// The pins file's path, which its error and fix quote too.
			sec.PinsFault = &quarantine.Fault{Since: f.Since, Error: backend.ForKey(f.Error), Fix: backend.ForKey(f.Fix)}
		}
		rep.Security = &sec
	}
	if f := rep.SchemaFlaws; f != nil {
		// Those of the tools it may see, as search shows them.
		hidden := func(tf catalog.ToolFlaw) bool {
			if tools == nil {
				server, _, err := catalog.SplitID(tf.Tool)
				return err != nil || !sees(server)
			}
			t, ok := tools.Tool(tf.Tool)
			return !ok || !pol.Sees(c, t)
		}
		tools := slices.DeleteFunc(slices.Clone(f.Tools), hidden)
		rep.SchemaFlaws = &SchemaFlaws{Count: len(tools), Tools: tools, HugeSchemas: f.HugeSchemas.without(hidden), Names: f.Names.without(hidden)}
	}
}
