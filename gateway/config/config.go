// Package config owns toolgate's config file: the Claude-compatible
// "mcpServers" map (stdio, streamable HTTP and SSE backends) plus the optional
// "toolgate" section of gateway settings, ${VAR} expansion, and validation
// errors that name the server, the field, the value and the fix.
//
// A setting the file leaves out stays zero here: the library it configures
// applies its own default (gateway/backend the timeouts and restart policy,
// search the ranking mode and weights, gateway search_tools' limits and the
// HTTP body cap, embed the model variant), so each default is written once.
//
// An existing claude_desktop_config.json or Claude Code .mcp.json loads
// unchanged: unknown keys at the top level and inside server entries belong to
// other applications and are ignored. The "toolgate" section is ours, so an
// unknown key there is an error with a "did you mean" suggestion.
//
// The package only reads, checks and compares (Server.Changes), and watches
// the file for changes (Watch); it never starts a process or opens a
// connection (that is gateway/backend's job).
package config

import (
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math"
	"net/url"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/toolgate/toolgate/internal/proxyenv"
	"github.com/toolgate/toolgate/internal/tlsfiles"
)

// Transport types of a server entry, as stored in Server.Type after Parse.
const (
	TypeStdio = "stdio" // child process speaking newline-delimited JSON-RPC
	TypeHTTP  = "http"  // streamable HTTP (Claude's "streamable-http" is accepted as an alias)
	TypeSSE   = "sse"   // legacy HTTP+SSE transport
)

// BuiltinServer is the name of the server built into the gateway: its
// management tools (toolgate__list_servers, …) are catalogued, searched and
// executed like any backend's. No config entry may take the name.
const BuiltinServer = "toolgate"

// DirVar is a variable that ${...} expansion always knows: the absolute
// directory of the config file, so a config can point at files next to itself
// from any working directory (e.g. "${TOOLGATE_CONFIG_DIR}/data/memory.jsonl").
const DirVar = "TOOLGATE_CONFIG_DIR"

// MaxDescription caps a server's "description" in characters: it goes into
// search_tools' description, which every client holds in its context.
const MaxDescription = 200

// File is a parsed, expanded and validated config file.
type File struct {
	// MCPServers holds every entry, disabled ones included, keyed by name.
	// Values are normalized: Name filled in, Type inferred, ${VAR} expanded,
	// Cwd absolute when the file's path is known. Use Servers for the ones to run.
	MCPServers map[string]Server `json:"mcpServers"`
	// Toolgate is the optional "toolgate" section, as written (unset = zero).
	Toolgate Settings `json:"toolgate"`
	// Path is the file it was loaded from ("" when parsed from memory).
	// Relative paths (cwd, dataDir, modelDir, ortLib) resolve against its directory.
	Path string `json:"-"`
}

// Source names the config as the data folder's files name it (the
// quarantine pins' sources, the index's generation of each config): its
// file's absolute path, links resolved (for configs merged, the last
// file's: Path), so that a gateway and the offline commands given the
// same --config name one file alike. "" when parsed from memory.
func (f *File) Source() string {
	if f == nil || f.Path == "" {
		return ""
	}
	p := f.Path
	if abs, err := filepath.Abs(p); err == nil {
		p = abs
	}
	if real, err := filepath.EvalSymlinks(p); err == nil {
		p = real
	}
	return p
}

// Server is one backend MCP server entry.
type Server struct {
	Name string `json:"-"` // the map key
	// Type is "stdio", "http" or "sse". Inferred when absent: command → stdio,
	// url → http. "streamable-http"/"streamableHttp" are accepted as "http".
	Type string `json:"type,omitempty"`

	// stdio
	Command string            `json:"command,omitempty"`
	Args    []string          `json:"args,omitempty"`
	Env     map[string]string `json:"env,omitempty"`
	Cwd     string            `json:"cwd,omitempty"`

	// http, sse
	URL     string            `json:"url,omitempty"`
	Headers map[string]string `json:"headers,omitempty"`
	// OAuth gives the login to a remote server that asks for one (see
	// `toolgate auth login`): a client registered with its authorization
	// server ahead of time, and the scopes to ask for. nil: toolgate
	// registers itself (dynamic client registration) and asks for the
	// scopes the server names. A server that answers 401 with a Bearer
	// challenge needs a login either way.
	OAuth *OAuth `json:"oauth,omitempty"`
	// TLS trusts a private CA for the server's certificate and gives a
	// client certificate to a server that asks for one (mutual TLS); nil:
	// the system's trust store and no client certificate.
	TLS *TLS `json:"tls,omitempty"`

	// Disabled servers stay in MCPServers but are not started.
	Disabled bool `json:"disabled,omitempty"`

	// Description says in a few words what the server offers; search_tools'
	// description names each server with it (else with what the server
	// says of itself). At most MaxDescription characters; applied without
	// a restart.
	Description string `json:"description,omitempty"`

	// Language is the language the server names and describes its tools
	// in, by code (catalog.LanguageCodes: "de", "fr", …; "" or "en" for
	// English): the keyword index stems its tools' words with that
	// language's stop words and stemmer, and reads every query in it as
	// well as in English. Applied without a restart (the index is
	// rebuilt).
	Language string `json:"language,omitempty"`

	// Per-server overrides; 0 means the toolgate section's value
	// (Servers fills them in).
	ConnectTimeout Duration `json:"connectTimeout,omitzero"`
	CallTimeout    Duration `json:"callTimeout,omitzero"`
	// KeepAlive is how often a remote server's session is pinged while
	// up, so that a network that drops it without a word is seen (0 = the
	// toolgate section's value).
	KeepAlive Duration `json:"keepAlive,omitzero"`
	// MaxResultBytes bounds the text of an execute_tool result of the
	// server's tools (0 = the toolgate section's value); applied without
	// a restart.
	MaxResultBytes int `json:"maxResultBytes,omitzero"`

	// Lazy defers starting the server to the first execute_tool on one of
	// its tools (search uses the persisted catalog).
	Lazy bool `json:"lazy,omitempty"`
	// IdleTimeout stops a lazy server after this long without calls
	// (0 = keep it running). Only lazy servers may set it.
	IdleTimeout Duration `json:"idleTimeout,omitzero"`
	// Restart overrides the toolgate section's restart policy for this
	// server (nil = the section's). Servers fills in the fields it leaves
	// unset from the section.
	Restart *Restart `json:"restart,omitempty"`

	// Unset are the ${VAR} references of this entry (enabled) that
	// toolgate's environment does not set and that give no default; each
	// is expanded to "". The server cannot start until they are set
	// (UnsetError says so), but the file is valid: one missing secret does
	// not keep the other servers from running.
	Unset []UnsetVar `json:"-"`
}

// UnsetVar is a variable a server entry refers to that is not set: its
// name and the field that refers to it ("env.GITHUB_TOKEN").
type UnsetVar struct {
	Name, Field string
}

// UnsetError says that s cannot start for want of its Unset variables,
// and how to set them; nil when it has none.
func (s Server) UnsetError() error {
	if len(s.Unset) == 0 {
		return nil
	}
	refs := make([]string, len(s.Unset))
	for i, u := range s.Unset {
		refs[i] = fmt.Sprintf("${%s} (%s)", u.Name, u.Field)
	}
	first := s.Unset[0].Name
	verb := "variable %s is"
	if len(refs) > 1 {
		verb = "variables %s are"
	}
	return fmt.Errorf(verb+" not set in toolgate's environment: set it where toolgate starts (the client's config for a stdio gateway, the service's environment) and restart toolgate, or give a default in the config, ${%s:-value}",
		strings.Join(refs, ", "), first)
}

// bareRef is a value that is a variable written without braces, alone or
// after one word ("$GITHUB_TOKEN", "Bearer $API_KEY"): a shell's way,
// which toolgate does not expand (only ${VAR}).
var bareRef = regexp.MustCompile(`^(?:\S+ )?\$([A-Za-z_][A-Za-z0-9_]*)$`)

// BareReferences says which of s's env and header values are a variable
// written without braces, passed to the server as written: `env.GITHUB_TOKEN
// is "$GITHUB_TOKEN"`, with what to write. A value that only holds a "$"
// (a password) is not one.
func (s Server) BareReferences() []string {
	var out []string
	for _, m := range []struct {
		field string
		vals  map[string]string
	}{{"env", s.Env}, {"headers", s.Headers}} {
		for _, k := range slices.Sorted(maps.Keys(m.vals)) {
			v := m.vals[k]
			if sub := bareRef.FindStringSubmatch(v); sub != nil {
				out = append(out, fmt.Sprintf("%s%s is %q, passed as written: toolgate expands ${%s} (with braces)", m.field, mapKey(k), v, sub[1]))
			}
		}
	}
	return out
}

// unsetKeys are the top-level keys of s whose values refer to unset
// variables, for validation to pass over (their "" would only add noise).
func (s Server) unsetKeys(skip map[string]bool) map[string]bool {
	if len(s.Unset) == 0 {
		return skip
	}
	out := maps.Clone(skip)
	if out == nil {
		out = map[string]bool{}
	}
	for _, u := range s.Unset {
		out[topKey(u.Field)] = true
	}
	return out
}

// StaticAuthorization reports whether s's headers hold an Authorization
// header (in any case), which a login's token would replace.
func (s Server) StaticAuthorization() bool {
	for k := range s.Headers {
		if strings.EqualFold(k, "Authorization") {
			return true
		}
	}
	return false
}

// OAuth is a remote server's "oauth" entry.
type OAuth struct {
	// ClientID is the client registered for toolgate with the server's
	// authorization server; "" means dynamic client registration (RFC 7591).
	ClientID string `json:"clientId,omitempty"`
	// ClientSecret goes with ClientID for a confidential client ("" for a
	// public one). Use ${VAR} to keep it out of the file.
	ClientSecret string `json:"clientSecret,omitempty"`
	// Scopes to ask for; none means the ones the server names in its
	// challenge or metadata.
	Scopes []string `json:"scopes,omitempty"`
	// RedirectURI is the loopback redirect URI of the login, for a
	// client registered with one (http://localhost:8765/callback): its
	// host (localhost, 127.0.0.1 or [::1]), port (none or 0: a free one)
	// and path. "" means http://127.0.0.1:<a free port>/callback.
	RedirectURI string `json:"redirectUri,omitempty"`
}

// CheckRedirectURI says what is wrong with u as an "oauth" redirectUri,
// or "" when it is fine.
func CheckRedirectURI(u string) string {
	const want = `give http://localhost:PORT/PATH, http://127.0.0.1:PORT/PATH or http://[::1]:PORT/PATH (the address the login listens on for the browser's redirect; no port or 0: a free one), e.g. "http://localhost:8765/callback"`
	pu, err := url.Parse(u)
	switch {
	case err != nil || pu.Scheme != "http" || pu.Host == "" || pu.User != nil || pu.RawQuery != "" || pu.Fragment != "":
		return fmt.Sprintf("%q is not a loopback redirect URI: %s", u, want)
	case strings.ContainsAny(pu.Path, "{}"):
		return fmt.Sprintf("%q: its path has a brace: %s", u, want)
	case pu.Hostname() != "localhost" && pu.Hostname() != "127.0.0.1" && pu.Hostname() != "::1":
		return fmt.Sprintf("%q: host %q is not this machine's loopback (the browser's redirect must reach the login here): %s", u, pu.Hostname(), want)
	}
	if p := pu.Port(); p != "" {
		if n, err := strconv.Atoi(p); err != nil || n < 0 || n > 65535 {
			return fmt.Sprintf("%q: port %q is not a port: %s", u, p, want)
		}
	}
	return ""
}

// TLS is a remote server's "tls" entry: PEM files, relative paths
// resolved against the config file's folder (internal/tlsfiles reads
// them).
type TLS struct {
	// CA holds the certificates of the authorities trusted for the
	// server's certificate, besides the system's.
	CA string `json:"ca,omitempty"`
	// Cert and Key are the client certificate presented to a server that
	// asks for one, and its private key.
	Cert string `json:"cert,omitempty"`
	Key  string `json:"key,omitempty"`
}

// Client is the TLS client config of t's files (nil for a nil t: the
// system's trust store); see internal/tlsfiles.
func (t *TLS) Client() (*tls.Config, error) {
	if t == nil {
		return nil, nil
	}
	c, err := tlsfiles.Client(t.CA, t.Cert, t.Key)
	if err != nil {
		var fe *tlsfiles.FieldError
		if errors.As(err, &fe) {
			return nil, fmt.Errorf("tls.%s: %w", fe.Field, fe.Err)
		}
		return nil, fmt.Errorf("tls: %w", err)
	}
	return c, nil
}

// Fix says what to do about err, a failed connection to the server, when
// it is a TLS one ("" otherwise): see tlsfiles.Fix.
func (t *TLS) Fix(err error) string {
	if t == nil {
		return tlsfiles.Fix(err, "", "")
	}
	return tlsfiles.Fix(err, t.CA, t.Cert)
}

// TLSFix is TLS.Fix for a failed connection to the server, err, with the
// proxy of the environment named for a certificate from an authority this
// machine does not trust when the requests go through one
// (proxyenv.InspectedNote): a company's proxy that inspects TLS.
func (s Server) TLSFix(err error) string {
	fix := s.TLS.Fix(err)
	if p := tlsfiles.Diagnose(err); fix != "" && p != nil && p.UnknownAuthority {
		fix += proxyenv.InspectedNote(s.URL)
	}
	return fix
}

// Restart is a restart policy: the waits before each restart of a backend
// that died or failed to start; after the last one a stdio server stays
// down and a remote one is tried again at the last delay (see
// backend.Options.RestartDelays).
type Restart struct {
	// Delays are the waits before restart 1, 2, …. nil means the default
	// (backend.DefaultRestartDelays) or, in a server, the toolgate
	// section's; an empty list means never restart.
	Delays []Duration `json:"delays"`
	// StableAfter is how long a backend must stay up for its restart count
	// to start over (0 = backend.DefaultStableAfter).
	StableAfter Duration `json:"stableAfter,omitzero"`
}

// DelayDurations returns Delays as time.Durations (nil stays nil, empty
// stays empty), the shape backend.Options.RestartDelays takes.
func (r Restart) DelayDurations() []time.Duration {
	if r.Delays == nil {
		return nil
	}
	out := make([]time.Duration, len(r.Delays))
	for i, d := range r.Delays {
		out[i] = d.Duration
	}
	return out
}

// Settings is the optional "toolgate" section as the file writes it: a
// field left out is zero, and the library it configures applies its default
// (named below).
type Settings struct {
	ConnectTimeout        Duration `json:"connectTimeout,omitzero"`        // 0 = backend.DefaultConnectTimeout
	CallTimeout           Duration `json:"callTimeout,omitzero"`           // 0 = backend.DefaultCallTimeout
	KeepAlive             Duration `json:"keepAlive,omitzero"`             // 0 = backend.DefaultKeepAlive
	MaxConcurrentConnects int      `json:"maxConcurrentConnects,omitzero"` // 0 = backend.DefaultMaxConcurrentConnects
	// MaxResultBytes bounds the text of each execute_tool result handed
	// to the client: its text blocks, embedded text resources and
	// structuredContent's JSON; over it the result is trimmed, with a
	// note (0 = gateway.DefaultMaxResultBytes). A server's own overrides it.
	MaxResultBytes int `json:"maxResultBytes,omitzero"`
	// Restart is the restart policy of every server without its own
	// (unset = backend.DefaultRestartDelays and DefaultStableAfter).
	Restart Restart `json:"restart,omitzero"`

	Search SearchSettings `json:"search,omitzero"`
	Learn  LearnSettings  `json:"learn,omitzero"`
	Embed  EmbedSettings  `json:"embed,omitzero"`
	HTTP   HTTPSettings   `json:"http,omitzero"`
	// Telemetry exports traces (off unless an endpoint is set here or in
	// OTEL_EXPORTER_OTLP_ENDPOINT).
	Telemetry TelemetrySettings `json:"telemetry,omitzero"`

	// DataDir overrides the per-user data folder ("" = the default).
	DataDir string `json:"dataDir,omitempty"`

	// Profiles are named sets of tools a client can be limited to: by
	// `serve --profile NAME`, by the HTTP route /profiles/NAME/mcp, or for
	// one session by toolgate__activate_profile. Applied on reload.
	Profiles map[string]Profile `json:"profiles,omitempty"`
	// Management governs the management tools (toolgate__…). Applied on
	// reload.
	Management ManagementSettings `json:"management,omitzero"`

	// KeysFile is a file of hashed API keys shared by replicas (the
	// format of the data folder's keys.jsonl, package gateway/keys); ""
	// = only the data folder's keys.
	KeysFile string           `json:"keysFile,omitempty"`
	Security SecuritySettings `json:"security,omitzero"`
	Audit    AuditSettings    `json:"audit,omitzero"`
	Limits   LimitSettings    `json:"limits,omitzero"`
}

// Profile is one entry of toolgate.profiles: the tools it shows are those
// of its servers that match an allow glob (when there are any) and no deny
// glob, and with ReadOnly only those that declare readOnlyHint: true.
// Globs match namespaced IDs (catalog.MatchID).
type Profile struct {
	// Servers the profile shows; nil = every server (the built-in
	// "toolgate" server, whose tools manage the gateway, only when listed).
	Servers []string  `json:"servers,omitempty"`
	Tools   ToolGlobs `json:"tools,omitzero"`
	// ReadOnly shows only the tools whose annotations declare
	// readOnlyHint: true (catalog.Tool.ReadOnly): a tool that declares
	// none is not read-only. The hint is the server's own claim; the
	// quarantine pins it (a change toward less caution holds the tool).
	ReadOnly bool `json:"readOnly,omitempty"`
}

// ToolGlobs select tools by namespaced ID ("memory__delete_*").
type ToolGlobs struct {
	Allow []string `json:"allow,omitempty"` // nil = every tool of the servers
	Deny  []string `json:"deny,omitempty"`
}

// ManagementSettings is the toolgate.management section.
type ManagementSettings struct {
	// AllowConfigChanges lets toolgate__add_server and
	// toolgate__remove_server write the config file (only for callers over
	// stdio or with an admin key). Off by default: a client that can add a
	// stdio server can run any program.
	AllowConfigChanges bool `json:"allowConfigChanges,omitempty"`
}

// SecuritySettings configure the quarantine of tool definitions.
type SecuritySettings struct {
	// OnDefinitionChange is what a changed tool definition gets:
	// "quarantine" (held until approved; "" = this) or "warn".
	OnDefinitionChange string `json:"onDefinitionChange,omitempty"`
	// ApprovedTools are globs over tool IDs that are never quarantined.
	ApprovedTools []string `json:"approvedTools,omitempty"`
	// MaxTextLength flags longer texts (0 = quarantine.DefaultMaxTextLength).
	MaxTextLength int `json:"maxTextLength,omitzero"`
}

// AuditSettings configure the audit log (audit/audit.jsonl in the data
// folder).
type AuditSettings struct {
	// Arguments is "hash" (only a SHA-256 of the arguments; "" = this) or
	// "masked" (the values too, with secrets masked).
	Arguments    string `json:"arguments,omitempty"`
	MaxFileBytes int64  `json:"maxFileBytes,omitzero"` // 0 = audit.DefaultMaxFileBytes
	MaxFiles     int    `json:"maxFiles,omitzero"`     // rotated files kept; 0 = audit.DefaultMaxFiles
	// MinRetention is how long records are counted on to stay: a
	// rotation that removes younger ones is a logged warning and counted
	// (0 = audit.DefaultMinRetention).
	MinRetention Duration `json:"minRetention,omitzero"`
}

// LimitSettings bound the load clients put on the gateway and backends.
type LimitSettings struct {
	// Per API key (0 = limit.DefaultRequestsPerSecond and DefaultBurst).
	RequestsPerSecond float64 `json:"requestsPerSecond,omitzero"`
	Burst             int     `json:"burst,omitzero"`
	// Per API key: subscriptions/listen streams open at once (0 =
	// limit.DefaultMaxStreams).
	MaxStreams int `json:"maxStreams,omitzero"`
	// Per server: calls in flight, and how long a call over that waits
	// before it is refused as busy (0 = limit.DefaultMaxInFlight and
	// DefaultQueueTimeout).
	MaxInFlight  int      `json:"maxInFlight,omitzero"`
	QueueTimeout Duration `json:"queueTimeout,omitzero"`
	// Per client address (HTTP RemoteAddr), requests refused before a
	// valid key is known (401, and 403/413 of the Host/Origin/body
	// checks): over it 429, and one summary record per minute instead of
	// one per request (0 = limit.DefaultRefusedPerMinute and
	// DefaultRefusedBurst). The same limit, per API key, bounds the
	// records of a valid key's 429s over its rate.
	RefusedPerMinute float64 `json:"refusedPerMinute,omitzero"`
	RefusedBurst     int     `json:"refusedBurst,omitzero"`
}

// SearchSettings tune the ranker behind search_tools.
type SearchSettings struct {
	Mode string `json:"mode,omitempty"` // hybrid | bm25 | vector | rrf; "" = search.Options' default
	// Fusion weights: score = KeywordWeight·bm25 + VectorWeight·cosine.
	// Each in [0,1]; when only one is given the other is 1 minus it; both
	// unset = search.DefaultKeywordWeight and DefaultVectorWeight.
	KeywordWeight float64 `json:"keywordWeight,omitzero"`
	VectorWeight  float64 `json:"vectorWeight,omitzero"`
	DefaultLimit  int     `json:"defaultLimit,omitzero"` // 0 = gateway.DefaultLimit (at most MaxLimit)
	MaxLimit      int     `json:"maxLimit,omitzero"`     // 0 = gateway.MaxLimit (at least DefaultLimit)
	// MinConfidence is the confidence (0 to 1) the best hit needs for a
	// search not to answer "noMatch"; nil = search.DefaultMinConfidence,
	// 0 = never answer noMatch.
	MinConfidence *float64 `json:"minConfidence,omitempty"`
	// StepWeight (0 to 1) weighs the ranking of each part of a request of
	// several steps against the whole query's; nil = search.DefaultStepWeight,
	// 0 = rank whole queries only.
	StepWeight *float64 `json:"stepWeight,omitempty"`
}

// LearnSettings configure learning from use (package learn).
type LearnSettings struct {
	// Enabled records (query, tool) pairs and ranks with them; nil = on.
	Enabled *bool `json:"enabled,omitempty"`
	// FromKeys says which callers with an API key teach search: "all",
	// "admin" (admin keys only) or "none"; "" = gateway's
	// DefaultLearnFromKeys. A caller without a key (stdio, a keyless
	// loopback front) always does.
	FromKeys string `json:"fromKeys,omitempty"`
}

// LearnEnabled reports whether learning from use is on (the default).
func (l LearnSettings) LearnEnabled() bool { return l.Enabled == nil || *l.Enabled }

// EmbedSettings choose the embedding model files and runtime.
type EmbedSettings struct {
	Variant  string `json:"variant,omitempty"`  // fp32 | int8; "" = embed.ParseVariant's default
	ModelDir string `json:"modelDir,omitempty"` // "" = <data dir>/models
	ORTLib   string `json:"ortLib,omitempty"`   // "" = the cached ONNX Runtime library
	Threads  int    `json:"threads,omitzero"`   // 0 = runtime default
	// KeepUnused is how long the embedding cache keeps the vector of a
	// tool text that left the catalog (0 = embed.DefaultUnused).
	KeepUnused Duration `json:"keepUnused,omitzero"`
}

// HTTPSettings configure the streamable HTTP front (toolgate serve --http).
type HTTPSettings struct {
	Addr           string   `json:"addr,omitempty"` // "" = the --http flag decides
	AllowedOrigins []string `json:"allowedOrigins,omitempty"`
	AllowedHosts   []string `json:"allowedHosts,omitempty"`
	MaxBodyBytes   int64    `json:"maxBodyBytes,omitzero"` // 0 = gateway.DefaultMaxBodyBytes
	// Heartbeat is how often an answer still being worked on sends a
	// byte of nothing, for the proxies in front (0 = gateway.DefaultHeartbeat).
	Heartbeat Duration `json:"heartbeat,omitzero"`
	// TLS serves the front over HTTPS with this certificate (nil: plain
	// HTTP).
	TLS *FrontTLS `json:"tls,omitempty"`
}

// FrontTLS is toolgate.http.tls: the HTTP front's certificate (a PEM file,
// its chain after it) and private key, read again when they change.
type FrontTLS struct {
	Cert string `json:"cert,omitempty"`
	Key  string `json:"key,omitempty"`
}

// TelemetrySettings configure OpenTelemetry traces.
type TelemetrySettings struct {
	// OTLPEndpoint is the base URL of an OTLP/HTTP collector, e.g.
	// "http://localhost:4318" (spans go to its /v1/traces); "" = traces
	// off unless the standard OTEL_EXPORTER_OTLP_ENDPOINT is set.
	OTLPEndpoint string `json:"otlpEndpoint,omitempty"`
}

// Duration is a time.Duration that reads from JSON as a Go duration string
// ("30s", "1m30s") or a number of seconds (30, 1.5), and writes as a string.
type Duration struct{ time.Duration }

// MarshalJSON writes the duration as a string such as "1m30s".
func (d Duration) MarshalJSON() ([]byte, error) { return json.Marshal(d.String()) }

// IsZero reports whether d is unset (for omitzero).
func (d Duration) IsZero() bool { return d.Duration == 0 }

// UnmarshalJSON reads a duration string ("30s") or a number of seconds.
func (d *Duration) UnmarshalJSON(b []byte) error {
	v, err := parseDuration(b)
	if err != nil {
		return err
	}
	d.Duration = v
	return nil
}

func parseDuration(b []byte) (time.Duration, error) {
	var v any
	if err := json.Unmarshal(b, &v); err != nil {
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) && strings.HasPrefix(te.Value, "number") {
			// Past a float64 (1e400): "json: cannot unmarshal number 1e400
			// into Go value of type float64", Go's words for it.
			return 0, fmt.Errorf("%s seconds is out of range", strings.TrimSpace(string(b)))
		}
		return 0, err
	}
	switch v := v.(type) {
	case string:
		d, err := time.ParseDuration(v)
		if err != nil && strings.Contains(v, "${") {
			// Variables expand in paths, commands, args, env, headers and
			// urls (README "Variables and secrets"), not here: "is not a
			// duration" alone read as a bad default.
			return 0, fmt.Errorf("%q: variables are not expanded in durations: write the duration itself, a string like \"30s\" or \"1m30s\", or a number of seconds", v)
		}
		if err != nil {
			return 0, fmt.Errorf("%q is not a duration: use a string like \"30s\" or \"1m30s\", or a number of seconds", v)
		}
		return d, nil
	case float64:
		if v > float64(math.MaxInt64)/float64(time.Second) || v < -float64(math.MaxInt64)/float64(time.Second) {
			return 0, fmt.Errorf("%v seconds is out of range", v)
		}
		return time.Duration(v * float64(time.Second)), nil
	default:
		return 0, fmt.Errorf("got %s, want a duration string like \"30s\" or a number of seconds", jsonKind(v))
	}
}

// Servers returns the enabled servers sorted by name, with the toolgate
// section's timeouts filled in where a server has none of its own (both
// unset stay 0: the pool's default applies). A server's own Restart gets the
// fields it leaves unset from the section's; a server without one keeps
// Restart nil (it follows the section's policy).
func (f *File) Servers() []Server {
	var out []Server
	for _, s := range f.All() {
		if !s.Disabled {
			out = append(out, s)
		}
	}
	return out
}

// DisabledNames names the servers the file disables ("disabled": true),
// in name order: those Servers leaves out.
func (f *File) DisabledNames() []string {
	var out []string
	for _, s := range f.All() {
		if s.Disabled {
			out = append(out, s.Name)
		}
	}
	return out
}

// All returns every server, disabled ones included, sorted by name, with
// the section's values filled in as in Servers.
func (f *File) All() []Server {
	out := make([]Server, 0, len(f.MCPServers))
	for name, s := range f.MCPServers {
		s.Name = name
		if t := NormalizeType(s.Type); t != "" {
			s.Type = t
		} else {
			s.Type = inferType(s)
		}
		if s.ConnectTimeout.Duration == 0 {
			s.ConnectTimeout = f.Toolgate.ConnectTimeout
		}
		if s.CallTimeout.Duration == 0 {
			s.CallTimeout = f.Toolgate.CallTimeout
		}
		if s.KeepAlive.Duration == 0 {
			s.KeepAlive = f.Toolgate.KeepAlive
		}
		if s.MaxResultBytes == 0 {
			s.MaxResultBytes = f.Toolgate.MaxResultBytes
		}
		if s.Restart != nil {
			r := *s.Restart
			if r.Delays == nil {
				r.Delays = slices.Clone(f.Toolgate.Restart.Delays)
			}
			if r.StableAfter.Duration == 0 {
				r.StableAfter = f.Toolgate.Restart.StableAfter
			}
			s.Restart = &r
		}
		out = append(out, s)
	}
	slices.SortFunc(out, func(a, b Server) int { return strings.Compare(a.Name, b.Name) })
	return out
}

// MaxResultBytes is the bound on the text of an execute_tool result of
// server's tools: the server's own maxResultBytes, else the toolgate
// section's (the built-in management tools' too); 0 when neither sets one
// (gateway.DefaultMaxResultBytes applies). Read at each call, it needs no
// sorted list of servers.
func (f *File) MaxResultBytes(server string) int {
	if f == nil {
		return 0
	}
	if s, ok := f.MCPServers[server]; ok && s.MaxResultBytes > 0 {
		return s.MaxResultBytes
	}
	return f.Toolgate.MaxResultBytes
}
