package config

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/toolgate/toolgate/index/catalog"
	"github.com/toolgate/toolgate/internal/tlsfiles"
)

// The keys of the toolgate section, per level. Unknown keys are errors.
var (
	settingsKeys  = []string{"connectTimeout", "callTimeout", "keepAlive", "maxResultBytes", "maxConcurrentConnects", "restart", "search", "learn", "embed", "http", "telemetry", "dataDir", "profiles", "management", "keysFile", "security", "audit", "limits"}
	searchKeys    = []string{"mode", "keywordWeight", "vectorWeight", "defaultLimit", "maxLimit", "minConfidence", "stepWeight"}
	learnKeys     = []string{"enabled", "fromKeys"}
	embedKeys     = []string{"variant", "modelDir", "ortLib", "threads", "keepUnused"}
	httpKeys      = []string{"addr", "allowedOrigins", "allowedHosts", "maxBodyBytes", "heartbeat", "tls"}
	frontTLSKeys  = []string{"cert", "key"}
	restartKeys   = []string{"delays", "stableAfter"}
	telemetryKeys = []string{"otlpEndpoint"}
	profileKeys   = []string{"servers", "tools", "readOnly"}
	globKeys      = []string{"allow", "deny"}
	manageKeys    = []string{"allowConfigChanges"}
	securityKeys  = []string{"onDefinitionChange", "approvedTools", "maxTextLength"}
	auditKeys     = []string{"arguments", "maxFileBytes", "maxFiles", "minRetention"}
	limitsKeys    = []string{"requestsPerSecond", "burst", "maxStreams", "maxInFlight", "queueTimeout", "refusedPerMinute", "refusedBurst"}
)

// Search modes, embedding variants, reactions to a changed tool definition,
// ways of keeping arguments in the audit log and the keys that teach search
// accepted in the toolgate section.
var (
	SearchModes        = []string{"hybrid", "bm25", "vector", "rrf"}
	EmbedVariants      = []string{"fp32", "int8"}
	OnDefinitionChange = []string{"quarantine", "warn"}
	LearnFromKeys      = []string{"all", "admin", "none"}
	AuditArguments     = []string{"hash", "masked"}
)

// Limits of the toolgate section.
const (
	maxConcurrentConnects = 1024
	maxSearchLimit        = 1000
	maxThreads            = 1024
	minKeepUnused         = 24 * time.Hour    // embed.keepUnused: embed.SweepEvery
	maxKeepUnused         = 87600 * time.Hour // 10 years
	maxBodyBytesLimit     = 1 << 30
	maxResultBytesLimit   = 1 << 30
	maxRestartDelays      = 100            // entries of restart.delays
	maxRestartDelay       = time.Hour      // one restart delay
	maxStableAfter        = 24 * time.Hour // restart.stableAfter
	maxIdleTimeout        = 7 * 24 * time.Hour
	maxTextLength         = 1 << 20
	maxAuditFileBytes     = 1 << 34
	maxAuditFiles         = 1000
	maxRequestsPerSecond  = 1e6
	maxBurst              = 1 << 20
	maxInFlight           = 1 << 16
	maxQueueTimeout       = time.Hour
)

func (p *parser) settings(raw json.RawMessage, s *Settings) {
	if raw == nil || isNull(raw) {
		return
	}
	d := &fields{p: p, prefix: "toolgate.", m: map[string]json.RawMessage{}}
	if err := json.Unmarshal(raw, &d.m); err != nil {
		p.errorf("", "toolgate", "got %s, want an object of settings, e.g. {\"callTimeout\": \"60s\"}", rawKind(raw))
		return
	}
	d.strict(settingsKeys)
	x := &expander{p: p, lookup: p.lookup}
	path := func(d *fields, key string) string {
		return p.resolve(x.expand(d.prefix+key, d.string(key)))
	}
	// The HTTP front's address and names are where a deployment differs
	// from machine to machine (a service's environment sets them), as
	// otlpEndpoint is: they expand too. They were taken as written:
	// "${ADDR:-127.0.0.1:8931}" was "not host:port", and an allowedHosts
	// "${PUBLIC_HOST}" a name no request has.
	expanded := func(d *fields, key string) []string {
		v := d.strings(key)
		for i := range v {
			v[i] = x.expand(fmt.Sprintf("%s%s[%d]", d.prefix, key, i), v[i])
		}
		return v
	}
	// literal is d.string(key) for a setting that takes one of a few
	// words: a variable there is refused as such, not as an unknown word
	// (`unknown mode "${MODE}"`). "" then, so that the check of the word
	// does not say it again.
	literal := func(d *fields, key string) string {
		v := d.string(key)
		if strings.Contains(v, "${") {
			d.errorf(key, "%q: variables are not expanded in this setting: write its value itself (they expand in the toolgate section's paths, http.addr, http.allowedOrigins, http.allowedHosts and telemetry.otlpEndpoint)", v)
			return ""
		}
		return v
	}

	s.ConnectTimeout = d.duration("connectTimeout")
	s.CallTimeout = d.duration("callTimeout")
	s.KeepAlive = d.duration("keepAlive")
	s.MaxResultBytes = d.resultBytes("maxResultBytes", "the default")
	s.MaxConcurrentConnects = int(d.int("maxConcurrentConnects"))
	if r := d.restart("restart"); r != nil {
		s.Restart = *r
	}
	s.DataDir = path(d, "dataDir")

	sd := d.object("search", searchKeys)
	s.Search.Mode = literal(sd, "mode")
	s.Search.KeywordWeight = sd.float("keywordWeight")
	s.Search.VectorWeight = sd.float("vectorWeight")
	kw, vw := sd.has("keywordWeight"), sd.has("vectorWeight")
	switch {
	case kw && vw && s.Search.KeywordWeight == 0 && s.Search.VectorWeight == 0:
		sd.errorf("vectorWeight", "keywordWeight and vectorWeight are both 0: make at least one positive (or leave both out for the defaults)")
	case kw && !vw && inUnit(s.Search.KeywordWeight):
		s.Search.VectorWeight = 1 - s.Search.KeywordWeight
	case vw && !kw && inUnit(s.Search.VectorWeight):
		s.Search.KeywordWeight = 1 - s.Search.VectorWeight
	}
	s.Search.DefaultLimit = int(sd.int("defaultLimit"))
	s.Search.MaxLimit = int(sd.int("maxLimit"))
	if sd.has("minConfidence") {
		v := sd.float("minConfidence")
		s.Search.MinConfidence = &v
	}
	if sd.has("stepWeight") {
		v := sd.float("stepWeight")
		s.Search.StepWeight = &v
	}

	ld := d.object("learn", learnKeys)
	if ld.has("enabled") {
		v := ld.bool("enabled")
		s.Learn.Enabled = &v
	}
	s.Learn.FromKeys = literal(ld, "fromKeys")

	ed := d.object("embed", embedKeys)
	s.Embed.Variant = literal(ed, "variant")
	s.Embed.ModelDir = path(ed, "modelDir")
	s.Embed.ORTLib = path(ed, "ortLib")
	s.Embed.Threads = int(ed.int("threads"))
	s.Embed.KeepUnused = ed.duration("keepUnused")

	hd := d.object("http", httpKeys)
	s.HTTP.Addr = x.expand(hd.prefix+"addr", hd.string("addr"))
	s.HTTP.AllowedOrigins = expanded(hd, "allowedOrigins")
	s.HTTP.AllowedHosts = expanded(hd, "allowedHosts")
	s.HTTP.MaxBodyBytes = hd.int("maxBodyBytes")
	s.HTTP.Heartbeat = hd.duration("heartbeat")
	if hd.has("tls") {
		tld := hd.object("tls", frontTLSKeys)
		s.HTTP.TLS = &FrontTLS{Cert: path(tld, "cert"), Key: path(tld, "key")}
	}

	td := d.object("telemetry", telemetryKeys)
	s.Telemetry.OTLPEndpoint = x.expand(td.prefix+"otlpEndpoint", td.string("otlpEndpoint"))

	s.Profiles = d.profiles("profiles")
	md := d.object("management", manageKeys)
	s.Management.AllowConfigChanges = md.bool("allowConfigChanges")

	s.KeysFile = path(d, "keysFile")
	sec := d.object("security", securityKeys)
	s.Security.OnDefinitionChange = literal(sec, "onDefinitionChange")
	s.Security.ApprovedTools = sec.strings("approvedTools")
	s.Security.MaxTextLength = int(sec.int("maxTextLength"))
	ad := d.object("audit", auditKeys)
	s.Audit.Arguments = literal(ad, "arguments")
	s.Audit.MaxFileBytes = ad.int("maxFileBytes")
	s.Audit.MaxFiles = int(ad.int("maxFiles"))
	s.Audit.MinRetention = ad.duration("minRetention")
	lm := d.object("limits", limitsKeys)
	s.Limits.RequestsPerSecond = lm.float("requestsPerSecond")
	s.Limits.Burst = int(lm.int("burst"))
	s.Limits.MaxStreams = int(lm.int("maxStreams"))
	s.Limits.MaxInFlight = int(lm.int("maxInFlight"))
	s.Limits.QueueTimeout = lm.duration("queueTimeout")
	s.Limits.RefusedPerMinute = lm.float("refusedPerMinute")
	s.Limits.RefusedBurst = int(lm.int("refusedBurst"))
}

const exampleProfile = `{"kg": {"servers": ["memory"], "tools": {"deny": ["memory__delete_*"]}}}`

// profiles reads toolgate.profiles: an object of profile objects.
func (d *fields) profiles(key string) map[string]Profile {
	r, ok := d.raw(key)
	if !ok {
		return nil
	}
	var entries map[string]json.RawMessage
	if err := json.Unmarshal(r, &entries); err != nil {
		d.errorf(key, "got %s, want an object of named profiles, e.g. %s", rawKind(r), exampleProfile)
		return nil
	}
	out := make(map[string]Profile, len(entries))
	for name, raw := range entries {
		pd := &fields{p: d.p, prefix: d.prefix + key + mapKey(name) + ".", m: map[string]json.RawMessage{}}
		if err := json.Unmarshal(raw, &pd.m); err != nil || pd.m == nil {
			d.errorf(key+mapKey(name), "got %s, want an object like %s", rawKind(raw), `{"servers": ["memory"], "tools": {"deny": ["memory__delete_*"]}}`)
			continue
		}
		pd.strict(profileKeys)
		var p Profile
		p.Servers = pd.strings("servers")
		if pd.has("servers") && p.Servers == nil {
			pd.errorf("servers", `is empty: list the servers the profile shows, or leave "servers" out for all of them`)
		}
		td := pd.object("tools", globKeys)
		p.Tools.Allow = td.strings("allow")
		p.Tools.Deny = td.strings("deny")
		if td.has("allow") && p.Tools.Allow == nil {
			td.errorf("allow", `is empty, so the profile would show no tool: list globs like "memory__*", or leave "allow" out`)
		}
		p.ReadOnly = pd.bool("readOnly")
		out[name] = p
	}
	return out
}

func inUnit(f float64) bool { return f >= 0 && f <= 1 }

// CheckConfidence says why c is not a confidence (toolgate.search.
// minConfidence, and the flags that set one), or "": the one range check
// of the config and the command line.
func CheckConfidence(c float64) string {
	if !inUnit(c) || math.IsNaN(c) {
		return fmt.Sprintf("%v is out of range: use a confidence from 0 to 1", c)
	}
	return ""
}

// CheckWeight says why w is not a weight (toolgate.search's keywordWeight,
// vectorWeight, stepWeight, and the flags that set one), or "".
func CheckWeight(w float64) string {
	if !inUnit(w) || math.IsNaN(w) {
		return fmt.Sprintf("%v is out of range: use a weight from 0 to 1", w)
	}
	return ""
}

// checkRestart returns the problems of a restart policy as (field, message)
// pairs, fields relative to the policy ("delays[1]", "stableAfter").
func checkRestart(r Restart) [][2]string {
	var out [][2]string
	if n := len(r.Delays); n > maxRestartDelays {
		out = append(out, [2]string{"delays", fmt.Sprintf("has %d entries: use at most %d (the last one repeats for a remote server; a stdio server stays down after it)", n, maxRestartDelays)})
	}
	for i, d := range r.Delays {
		if d.Duration < 0 || d.Duration > maxRestartDelay {
			out = append(out, [2]string{fmt.Sprintf("delays[%d]", i), fmt.Sprintf("%s is out of range: use 0s to %s, e.g. \"2s\" (an empty list means never restart)", d.Duration, maxRestartDelay)})
		}
	}
	if d := r.StableAfter.Duration; d < 0 || d > maxStableAfter {
		out = append(out, [2]string{"stableAfter", fmt.Sprintf("%s is out of range: use a duration up to %s like \"1m\" (or leave it out for the default)", d, maxStableAfter)})
	}
	return out
}

// validate checks the values as written; zero means "the library's
// default" and passes. The defaults themselves belong to the libraries
// (gateway/config sits before them and imports none), so messages say
// "leave it out for the default" rather than repeat a value.
func (s *Settings) validate() []*FieldError {
	var errs []*FieldError
	bad := func(field, format string, args ...any) {
		errs = append(errs, &FieldError{Field: "toolgate." + field, Msg: fmt.Sprintf(format, args...)})
	}
	for _, d := range []struct {
		field string
		v     time.Duration
	}{{"connectTimeout", s.ConnectTimeout.Duration}, {"callTimeout", s.CallTimeout.Duration}, {"keepAlive", s.KeepAlive.Duration}, {"http.heartbeat", s.HTTP.Heartbeat.Duration}} {
		if d.v < 0 {
			bad(d.field, "%s is negative: use a positive duration like \"30s\" (or leave it out for the default)", d.v)
		}
	}
	for _, p := range checkRestart(s.Restart) {
		bad("restart."+p[0], "%s", p[1])
	}
	if msg := checkResultBytes(s.MaxResultBytes); msg != "" {
		bad("maxResultBytes", "%s (or leave it out for the default)", msg)
	}
	if n := s.MaxConcurrentConnects; n < 0 || n > maxConcurrentConnects {
		bad("maxConcurrentConnects", "%d is out of range: use 1 to %d (or leave it out for the default)", n, maxConcurrentConnects)
	}
	if m := s.Search.Mode; m != "" && !contains(SearchModes, m) {
		bad("search.mode", "unknown mode %q: use one of %s", m, quoteList(SearchModes))
	}
	for _, w := range []struct {
		field string
		v     float64
	}{{"search.keywordWeight", s.Search.KeywordWeight}, {"search.vectorWeight", s.Search.VectorWeight}} {
		if msg := CheckWeight(w.v); msg != "" {
			bad(w.field, "%s", msg)
		}
	}
	if c := s.Search.MinConfidence; c != nil && CheckConfidence(*c) != "" {
		bad("search.minConfidence", "%s (0 never answers noMatch; leave it out for the default)", CheckConfidence(*c))
	}
	if w := s.Search.StepWeight; w != nil && CheckWeight(*w) != "" {
		bad("search.stepWeight", "%s (0 ranks whole queries only; leave it out for the default)", CheckWeight(*w))
	}
	if l := s.Search.MaxLimit; l < 0 || l > maxSearchLimit {
		bad("search.maxLimit", "%d is out of range: use 1 to %d (or leave it out for the default)", l, maxSearchLimit)
	}
	switch l := s.Search.DefaultLimit; {
	case s.Search.MaxLimit > 0 && (l < 0 || l > s.Search.MaxLimit):
		bad("search.defaultLimit", "%d is out of range: use 1 to search.maxLimit (%d)", l, s.Search.MaxLimit)
	case l < 0 || l > maxSearchLimit:
		// Without maxLimit, a default limit above the default maximum
		// raises the maximum to it (gateway.Options.MaxLimit).
		bad("search.defaultLimit", "%d is out of range: use 1 to %d (or leave it out for the default)", l, maxSearchLimit)
	}
	if v := s.Embed.Variant; v != "" && !contains(EmbedVariants, v) {
		bad("embed.variant", "unknown variant %q: use one of %s", v, quoteList(EmbedVariants))
	}
	if n := s.Embed.Threads; n < 0 || n > maxThreads {
		bad("embed.threads", "%d is out of range: use 1 to %d, or 0 for the runtime's default", n, maxThreads)
	}
	if d := s.Embed.KeepUnused.Duration; d != 0 && (d < minKeepUnused || d > maxKeepUnused) {
		bad("embed.keepUnused", "%s is out of range: use %s (a day: the cache is swept once a day) to %s (10 years), or leave it out for 720h (30 days)", s.Embed.KeepUnused, minKeepUnused, maxKeepUnused)
	}
	if a := s.HTTP.Addr; a != "" {
		if msg := checkAddr(a); msg != "" {
			bad("http.addr", "%q %s", a, msg)
		}
	}
	for i, o := range s.HTTP.AllowedOrigins {
		if msg := checkOrigin(o); msg != "" {
			bad(fmt.Sprintf("http.allowedOrigins[%d]", i), "%q %s", o, msg)
		}
	}
	for i, h := range s.HTTP.AllowedHosts {
		if msg := checkHost(h); msg != "" {
			bad(fmt.Sprintf("http.allowedHosts[%d]", i), "%q %s", h, msg)
		}
	}
	if n := s.HTTP.MaxBodyBytes; n < 0 || n > maxBodyBytesLimit {
		bad("http.maxBodyBytes", "%d is out of range: use 1 to %d bytes (or leave it out for the default)", n, maxBodyBytesLimit)
	}
	if t := s.HTTP.TLS; t != nil && !strings.Contains(t.Cert+t.Key, "${") {
		if _, err := tlsfiles.Server(t.Cert, t.Key); err != nil {
			var fe *tlsfiles.FieldError
			if errors.As(err, &fe) {
				bad("http.tls."+fe.Field, "%v", fe.Err)
			} else {
				bad("http.tls", "%v", err)
			}
		}
	}
	if e := s.Telemetry.OTLPEndpoint; e != "" {
		if msg := CheckOTLPEndpoint(e); msg != "" {
			bad("telemetry.otlpEndpoint", "%q %s", e, msg)
		}
	}
	errs = append(errs, s.validateSecurity()...)
	return errs
}

// validateSecurity checks keysFile, security, audit and limits.
func (s *Settings) validateSecurity() []*FieldError {
	var errs []*FieldError
	bad := func(field, format string, args ...any) {
		errs = append(errs, &FieldError{Field: "toolgate." + field, Msg: fmt.Sprintf(format, args...)})
	}
	if v := s.Learn.FromKeys; v != "" && !contains(LearnFromKeys, v) {
		bad("learn.fromKeys", "unknown value %q: use one of %s", v, quoteList(LearnFromKeys))
	}
	if v := s.Security.OnDefinitionChange; v != "" && !contains(OnDefinitionChange, v) {
		bad("security.onDefinitionChange", "unknown value %q: use one of %s", v, quoteList(OnDefinitionChange))
	}
	for i, g := range s.Security.ApprovedTools {
		if msg := catalog.CheckGlob(g); msg != "" {
			bad(fmt.Sprintf("security.approvedTools[%d]", i), "%s", msg)
		}
	}
	if n := s.Security.MaxTextLength; n < 0 || n > maxTextLength {
		bad("security.maxTextLength", "%d is out of range: use 1 to %d characters (or leave it out for the default)", n, maxTextLength)
	}
	if v := s.Audit.Arguments; v != "" && !contains(AuditArguments, v) {
		bad("audit.arguments", "unknown value %q: use %s (a SHA-256 only, the default) or %q (the values, secrets masked)", v, quoteList(AuditArguments[:1]), "masked")
	}
	if n := s.Audit.MaxFileBytes; n < 0 || n > maxAuditFileBytes {
		bad("audit.maxFileBytes", "%d is out of range: use 1 to %d bytes (or leave it out for the default)", n, int64(maxAuditFileBytes))
	}
	if n := s.Audit.MaxFiles; n < 0 || n > maxAuditFiles {
		bad("audit.maxFiles", "%d is out of range: use 1 to %d (or leave it out for the default)", n, maxAuditFiles)
	}
	if d := s.Audit.MinRetention.Duration; d < 0 {
		bad("audit.minRetention", "%s is negative: use how long records should stay at least, like \"24h\" or \"168h\" (or leave it out for the default)", d)
	}
	if v := s.Limits.RequestsPerSecond; v < 0 || v > maxRequestsPerSecond || math.IsNaN(v) {
		bad("limits.requestsPerSecond", "%v is out of range: use a positive number up to %g (or leave it out for the default)", v, float64(maxRequestsPerSecond))
	}
	if n := s.Limits.Burst; n < 0 || n > maxBurst {
		bad("limits.burst", "%d is out of range: use 1 to %d (or leave it out for the default)", n, maxBurst)
	}
	if n := s.Limits.MaxStreams; n < 0 || n > maxBurst {
		bad("limits.maxStreams", "%d is out of range: use 1 to %d subscriptions/listen streams per API key (or leave it out for the default)", n, maxBurst)
	}
	if n := s.Limits.MaxInFlight; n < 0 || n > maxInFlight {
		bad("limits.maxInFlight", "%d is out of range: use 1 to %d calls per server (or leave it out for the default)", n, maxInFlight)
	}
	if d := s.Limits.QueueTimeout.Duration; d < 0 || d > maxQueueTimeout {
		bad("limits.queueTimeout", "%s is out of range: use a duration up to %s like \"10s\" (or leave it out for the default)", d, maxQueueTimeout)
	}
	if v := s.Limits.RefusedPerMinute; v < 0 || v > maxRequestsPerSecond || math.IsNaN(v) {
		bad("limits.refusedPerMinute", "%v is out of range: use a positive number up to %g refused requests per minute per client address (or leave it out for the default)", v, float64(maxRequestsPerSecond))
	}
	if n := s.Limits.RefusedBurst; n < 0 || n > maxBurst {
		bad("limits.refusedBurst", "%d is out of range: use 1 to %d (or leave it out for the default)", n, maxBurst)
	}
	return errs
}

// checkResultBytes says what is wrong with n as a maxResultBytes ("" when
// it is fine; 0 is the key left out: the default).
func checkResultBytes(n int) string {
	if n < 0 || n > maxResultBytesLimit {
		return fmt.Sprintf("%d is out of range: use 1 to %d bytes of text", n, maxResultBytesLimit)
	}
	return ""
}
