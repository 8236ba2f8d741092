package config

import (
	"errors"
	"fmt"
	"maps"
	"net"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/toolgate/toolgate/index/catalog"
	"github.com/toolgate/toolgate/internal/hostport"
	"github.com/toolgate/toolgate/internal/tlsfiles"
	"golang.org/x/text/unicode/norm"
)

// Types lists the accepted values of a server's "type".
var Types = []string{TypeStdio, TypeHTTP, TypeSSE}

// maxNameLen bounds server names so that namespaced tool IDs stay readable.
const maxNameLen = 64

// Validate checks a File as Parse leaves it or as built in code: server
// names, transports, URLs, header and variable names, and the settings'
// ranges (zero settings mean "default" and pass). It returns an *Error.
func (f *File) Validate() error {
	errs := f.validate()
	if len(errs) == 0 {
		return nil
	}
	return &Error{Path: f.Path, Errs: sortErrs(errs)}
}

func (f *File) validate() []*FieldError {
	var errs []*FieldError
	for name, s := range f.MCPServers {
		errs = append(errs, validateServer(name, s, s.unsetKeys(nil))...)
	}
	errs = append(errs, f.validateNameCase()...)
	errs = append(errs, f.Toolgate.validate()...)
	return append(errs, f.validateProfiles()...)
}

// validateNameCase refuses servers whose names differ only in case
// ("everything" beside "Everything"). Tool IDs start with the server's
// name, and a name a client writes in another case is found when one
// server has it (execute_tool's "Everything__echo", the management tools'
// server arguments): beside a twin it finds neither, or the wrong one. A
// login's file in the data folder is named after the server too, and is
// one file for both on a file system that ignores case (macOS, Windows).
// Each name after the first of a set, in sorted order, gets the error.
func (f *File) validateNameCase() []*FieldError {
	var errs []*FieldError
	first := map[string]string{} // lower case → the first name so
	for _, name := range slices.Sorted(maps.Keys(f.MCPServers)) {
		low := strings.ToLower(name)
		if twin, ok := first[low]; ok {
			errs = append(errs, &FieldError{Server: name, Msg: fmt.Sprintf("%q and server %q differ only in case: %s: rename one of them", name, twin, caseTwin(name, twin))})
			continue
		}
		first[low] = name
	}
	return errs
}

// caseTwin says why server name cannot be beside twin, a name that
// differs from it only in case.
func caseTwin(name, twin string) string {
	return fmt.Sprintf("tool IDs start with the server's name and are matched in any case (%s__echo is also %s__echo), so the two servers' tools would be taken for each other", twin, name)
}

// validateProfiles checks toolgate.profiles against the servers of the file:
// names usable in a URL path, servers that exist, globs that can match.
func (f *File) validateProfiles() []*FieldError {
	var errs []*FieldError
	bad := func(field, format string, args ...any) {
		errs = append(errs, &FieldError{Field: "toolgate.profiles" + field, Msg: fmt.Sprintf(format, args...)})
	}
	known := func(server string) bool {
		_, ok := f.MCPServers[server]
		return ok || server == BuiltinServer
	}
	names := slices.Sorted(maps.Keys(f.MCPServers))
	for name, p := range f.Toolgate.Profiles {
		at := mapKey(name)
		if !ValidName(name) {
			bad(at, `invalid profile name %q: use letters, digits, "_" and "-" (it is part of the URL /profiles/NAME/mcp)`, name)
		}
		for i, s := range p.Servers {
			if !known(s) {
				bad(fmt.Sprintf("%s.servers[%d]", at, i), "no server named %q in mcpServers: %s (or %q for the management tools)", s, useOneOf(names), BuiltinServer)
			}
		}
		for _, g := range []struct {
			field string
			globs []string
		}{{"allow", p.Tools.Allow}, {"deny", p.Tools.Deny}} {
			for i, glob := range g.globs {
				field := fmt.Sprintf("%s.tools.%s[%d]", at, g.field, i)
				if msg := catalog.CheckGlob(glob); msg != "" {
					bad(field, "%s", msg)
				} else if s := catalog.GlobServer(glob); s != "" && !known(s) {
					bad(field, "%q names server %q, which is not in mcpServers: %s", glob, s, useOneOf(names))
				} else if s != "" && p.Servers != nil && !slices.Contains(p.Servers, s) {
					bad(field, "%q names server %q, which is not among the profile's servers (%s): add it there, or fix the glob", glob, s, strings.Join(p.Servers, ", "))
				}
			}
		}
	}
	return errs
}

// ValidName reports whether name can be a server name: it must match
// [A-Za-z0-9][A-Za-z0-9_-]* and must not contain "__", the separator of
// namespaced tool IDs, so that no two servers can shadow each other's tools.
// It must not end in "_" either: server "a_" with tool "b" would read
// "a___b", which is also server "a" with tool "_b".
func ValidName(name string) bool {
	if name == "" || len(name) > maxNameLen || strings.Contains(name, "__") || strings.HasSuffix(name, "_") {
		return false
	}
	for i, r := range name {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9':
		case (r == '_' || r == '-') && i > 0:
		default:
			return false
		}
	}
	return true
}

// NameProblem says why name cannot name a server, or "" when it can. The
// config's load, servers add, toolgate__add_server and import all ask it,
// so a name is refused (or, by import, renamed) for one reason said one
// way: "toolgate" refused as a character problem read as if the name were
// misspelt. The built-in server's name is reserved in any case, as two
// servers' names may not differ only in case (validateNameCase).
func NameProblem(name string) string {
	switch {
	case name == "":
		return `a server needs a name: use letters, digits, "_" and "-"`
	case strings.EqualFold(name, BuiltinServer):
		inCase := ""
		if name != BuiltinServer {
			inCase = fmt.Sprintf(" in any case (tool IDs are matched in any case: %s__list_servers would be taken for %s__list_servers)", name, BuiltinServer)
		}
		return fmt.Sprintf(`the name %q is reserved for the gateway's own management tools (%s__list_servers, …)%s: choose another name, e.g. %q; an entry that starts toolgate itself is not needed, remove it`,
			name, BuiltinServer, inCase, ReservedRename(name))
	case !ValidName(name) && nonASCII(name) != nil:
		// A name in the team's own language: say which characters are
		// not ASCII (é and 天 are letters), a name that is, and where the
		// words can go.
		chars := nonASCII(name)
		verb := "is"
		if len(chars) > 1 {
			verb = "are"
		}
		suggest := ""
		if s := ASCIIName(name); s != defaultServerName {
			suggest = fmt.Sprintf(`, e.g. %q`, s)
		}
		return fmt.Sprintf(`invalid server name %q: %s %s not ASCII: use ASCII letters (A-Z, a-z), digits, "_" and "-"%s (a server's name begins each of its tool IDs, server__tool, and MCP clients want those in A-Z a-z 0-9 _ - .; at most %d characters); words in any language go in the server's "description", which search_tools shows`,
			name, strings.Join(chars, ", "), verb, suggest, maxNameLen)
	case !ValidName(name):
		return fmt.Sprintf(`invalid server name %q: use letters, digits, "_" and "-" (must start with a letter or digit, must not contain "__" or end with "_", at most %d characters)`, name, maxNameLen)
	}
	return ""
}

// nonASCII is the distinct characters of name outside ASCII, quoted, the
// first three and "…".
func nonASCII(name string) []string {
	var out []string
	for _, r := range name {
		q := strconv.QuoteToGraphic(string(r))
		if r >= utf8.RuneSelf && !slices.Contains(out, q) {
			if len(out) == 3 {
				return append(out, "…")
			}
			out = append(out, q)
		}
	}
	return out
}

// defaultServerName is what ASCIIName makes of a name with nothing ASCII in
// it.
const defaultServerName = "server"

// ASCIIName is a valid server name made of name: its accents dropped (é
// as e, ß as ss), each run of other characters as one "-", "__" as "_";
// "server" when nothing is left (天気). import names a server so, and
// NameProblem suggests it.
func ASCIIName(name string) string {
	if ValidName(name) {
		return name
	}
	var b strings.Builder
	dash := false
	for _, r := range norm.NFD.String(strings.NewReplacer("ß", "ss", "ẞ", "SS").Replace(name)) {
		switch {
		case unicode.Is(unicode.Mn, r): // the accent of a letter before
		case r < utf8.RuneSelf && (unicode.IsLetter(r) || unicode.IsDigit(r)) || r == '_':
			b.WriteRune(r)
			dash = false
		case !dash && b.Len() > 0:
			b.WriteByte('-')
			dash = true
		}
	}
	out := strings.Trim(b.String(), "-_")
	for strings.Contains(out, "__") {
		out = strings.ReplaceAll(out, "__", "_")
	}
	if out == "" {
		out = defaultServerName
	}
	return out
}

// ReservedRename is the name NameProblem suggests for a server named
// after the built-in one (in any case), and the one import gives it.
func ReservedRename(name string) string { return name + "-server" }

// validateServer checks one entry; skip names keys that already failed to
// decode, whose checks would only repeat the problem.
func validateServer(name string, s Server, skip map[string]bool) []*FieldError {
	var errs []*FieldError
	bad := func(field, format string, args ...any) {
		if !skip[topKey(field)] {
			errs = append(errs, &FieldError{Server: name, Field: field, Msg: fmt.Sprintf(format, args...)})
		}
	}
	if name == "" {
		return []*FieldError{{Field: `mcpServers[""]`, Msg: NameProblem(name)}}
	}
	if msg := NameProblem(name); msg != "" {
		bad("", "%s", msg)
	}
	if skip["command"] || skip["url"] || skip["type"] {
		skip = maps.Clone(skip)
		skip[""] = true // the entry-level "needs command or url" checks
	}
	typ := NormalizeType(s.Type)
	if typ == "" {
		typ = inferType(s)
	}
	// An entry whose type is not settled (both "command" and "url",
	// neither, an unknown "type") is told so, and the rest of it is still
	// checked, so that a file is fixed in one pass: the form of every key
	// it sets (a header's name, a variable's) and the keys every type
	// shares (timeouts, description, restart). Whether a key belongs to
	// the type waits for the type: which of "command" and "url" stays is
	// the user's choice, and the message of "both" says what each choice
	// leaves to remove.
	settled := true
	switch {
	case typ == "" && s.Command != "" && s.URL != "":
		msg := `has both "command" and "url": keep "command" to start a local server (stdio) or "url" for a remote one (http/sse)`
		local, remote := typeKeys(s)
		if len(remote) > 0 {
			msg += fmt.Sprintf(`; keeping "command" means removing %s too`, quoteList(remote))
		}
		if len(local) > 0 {
			msg += fmt.Sprintf(`; keeping "url" means removing %s too`, quoteList(local))
		}
		bad("", "%s", msg)
		settled = false
	case typ == "":
		bad("", `needs "command" (a local server started as a child process, e.g. "npx") or "url" (a remote http/sse server)`)
		settled = false
	case !slices.Contains(Types, typ):
		bad("type", `unknown type %q: use %s (or leave it out: "command" means stdio, "url" means http)`, s.Type, quoteList(Types))
		settled = false
	}
	local := !settled || typ == TypeStdio  // stdio's keys are checked
	remote := !settled || typ != TypeStdio // http's and sse's keys are

	if local {
		if cmd := strings.TrimSpace(s.Command); cmd == "" && settled {
			bad("command", `type "stdio" needs a command to run, e.g. "npx" or "node"`)
		} else if cmd != "" && cmd != s.Command {
			bad("command", "%q has leading or trailing spaces: remove them (put arguments in \"args\")", s.Command)
		}
		if strings.ContainsRune(s.Command, 0) {
			bad("command", "contains a NUL byte: remove it")
		}
		for i, a := range s.Args {
			if strings.ContainsRune(a, 0) {
				bad(fmt.Sprintf("args[%d]", i), "contains a NUL byte: remove it")
			}
		}
		if strings.ContainsRune(s.Cwd, 0) {
			bad("cwd", "contains a NUL byte: remove it")
		}
		for k, v := range s.Env {
			if k == "" || strings.ContainsAny(k, "=\x00") {
				bad("env"+mapKey(k), `invalid variable name: it must not be empty or contain "="`)
			}
			if strings.ContainsRune(v, 0) {
				bad("env"+mapKey(k), "value contains a NUL byte: remove it")
			}
		}
	}
	if settled && typ == TypeStdio {
		if s.URL != "" {
			bad("url", `is only used by http and sse servers: remove it, or remove "command" and set "type": "http"`)
		}
		if len(s.Headers) > 0 {
			bad("headers", `are only sent to http and sse servers: remove them (a stdio server takes secrets through "env")`)
		}
		if s.OAuth != nil {
			bad("oauth", `is only used by http and sse servers (a login to a remote server): remove it`)
		}
		if s.TLS != nil {
			bad("tls", `is only used by http and sse servers (a connection over https): remove it`)
		}
		if s.KeepAlive.Duration != 0 {
			bad("keepAlive", `is only used by http and sse servers (a ping over the network, which a stdio server's pipe does not cross): remove it`)
		}
	}
	if remote {
		if s.URL == "" && settled {
			bad("url", `type %q needs a url, e.g. "https://example.com/mcp"`, typ)
		} else if msg := checkURL(s.URL); s.URL != "" && msg != "" && !(s.Disabled && strings.Contains(s.URL, "${")) {
			bad("url", "%q %s", s.URL, msg)
		}
		for k, v := range s.Headers {
			if !validToken(k) {
				bad("headers"+mapKey(k), "invalid header name: use letters, digits and - (e.g. \"Authorization\")")
			}
			if strings.ContainsAny(v, "\r\n\x00") {
				bad("headers"+mapKey(k), "value contains a line break or NUL byte: remove it")
			}
		}
		if o := s.OAuth; o != nil {
			if s.StaticAuthorization() {
				// Said whatever variables the entry leaves unset (what
				// skip is for: their values): an unset ${LINEAR_SECRET}
				// in "oauth" hid it, and `toolgate servers` called the
				// config valid that the gateway then refused.
				errs = append(errs, &FieldError{Server: name, Field: "oauth", Msg: `and a static "Authorization" header both authorize this server: keep "oauth" (and run toolgate auth login) or the header, not both`})
			}
			for _, p := range checkOAuth(*o) {
				bad("oauth"+p[0], "%s", p[1])
			}
		}
		if t := s.TLS; t != nil {
			for _, p := range checkTLS(*t, s.URL, s.Disabled) {
				bad("tls"+p[0], "%s", p[1])
			}
		}
	}
	if settled && typ != TypeStdio {
		why := "it has a url"
		if s.URL == "" {
			why = `its "type" says so; without "type", "command" makes a stdio server`
		}
		if s.Command != "" {
			bad("command", "is only used by stdio servers, but this one is %q (%s): remove %q", typ, why, "command")
		}
		local, _ := typeKeys(s)
		for _, field := range local {
			bad(field, "is only used by stdio servers, but this one is %q (%s): remove %q", typ, why, field)
		}
	}
	if d := s.ConnectTimeout.Duration; d < 0 {
		bad("connectTimeout", "%s is negative: use a positive duration like \"30s\" (or leave it out for the toolgate section's value)", d)
	}
	if d := s.CallTimeout.Duration; d < 0 {
		bad("callTimeout", "%s is negative: use a positive duration like \"60s\" (or leave it out for the toolgate section's value)", d)
	}
	if d := s.KeepAlive.Duration; d < 0 {
		bad("keepAlive", "%s is negative: use a positive duration like \"30s\" (or leave it out for the toolgate section's value)", d)
	}
	if msg := checkResultBytes(s.MaxResultBytes); msg != "" {
		bad("maxResultBytes", "%s (or leave it out for the toolgate section's value)", msg)
	}
	switch d := s.IdleTimeout.Duration; {
	case d < 0 || d > maxIdleTimeout:
		bad("idleTimeout", "%s is out of range: use a duration up to %s like \"10m\", or 0 to keep the server running", d, maxIdleTimeout)
	case d > 0 && !s.Lazy:
		bad("idleTimeout", `only applies to lazy servers (started by their first call): add "lazy": true, or remove "idleTimeout"`)
	}
	if n := utf8.RuneCountInString(s.Description); n > MaxDescription {
		bad("description", "is %d characters long: say in a few words (at most %d characters) what the server offers, e.g. \"issues and pull requests of our GitHub org\"", n, MaxDescription)
	}
	if strings.ContainsFunc(s.Description, func(r rune) bool { return unicode.IsControl(r) && !unicode.IsSpace(r) }) {
		bad("description", "contains a control character: use plain text")
	}
	if _, err := catalog.CanonicalLanguage(s.Language); err != nil {
		bad("language", "%v (the keyword index stems the server's tool texts with that language's rules; leave it out for English)", err)
	}
	if s.Restart != nil {
		for _, p := range checkRestart(*s.Restart) {
			bad("restart."+p[0], "%s", p[1])
		}
	}
	return errs
}

// typeKeys returns the keys s sets that only one kind of server uses,
// besides "command" and "url" themselves: local for stdio, remote for
// http and sse.
func typeKeys(s Server) (local, remote []string) {
	for _, k := range []struct {
		key string
		set bool
	}{{"args", len(s.Args) > 0}, {"env", len(s.Env) > 0}, {"cwd", s.Cwd != ""}} {
		if k.set {
			local = append(local, k.key)
		}
	}
	for _, k := range []struct {
		key string
		set bool
	}{{"headers", len(s.Headers) > 0}, {"oauth", s.OAuth != nil}, {"tls", s.TLS != nil}, {"keepAlive", s.KeepAlive.Duration != 0}} {
		if k.set {
			remote = append(remote, k.key)
		}
	}
	return local, remote
}

// checkOAuth returns the problems of an "oauth" entry as (field suffix,
// message) pairs.
func checkOAuth(o OAuth) [][2]string {
	var out [][2]string
	if strings.TrimSpace(o.ClientID) != o.ClientID {
		out = append(out, [2]string{".clientId", "has leading or trailing spaces: remove them"})
	}
	if o.ClientSecret != "" && o.ClientID == "" {
		out = append(out, [2]string{".clientSecret", `needs "clientId" (the client it belongs to): add it, or remove "clientSecret" to let toolgate register itself`})
	}
	for i, sc := range o.Scopes {
		if sc == "" || strings.ContainsAny(sc, " \t\r\n\"\\") {
			out = append(out, [2]string{fmt.Sprintf(".scopes[%d]", i), fmt.Sprintf("%q is not a scope: give one scope per string, without spaces or quotes, e.g. [\"read\", \"write\"]", sc)})
		}
	}
	if o.RedirectURI != "" {
		if msg := CheckRedirectURI(o.RedirectURI); msg != "" {
			out = append(out, [2]string{".redirectUri", msg})
		}
	}
	return out
}

// checkTLS returns the problems of a "tls" entry as (field suffix,
// message) pairs: the files are read as a connection would read them,
// except for a disabled server (not started; its paths may name variables
// left unset) and paths still holding a ${VAR}.
func checkTLS(t TLS, u string, disabled bool) [][2]string {
	if t == (TLS{}) {
		return [][2]string{{"", `is empty: give "ca" (a PEM file of the CAs to trust) and/or "cert" and "key" (a client certificate), or remove "tls"`}}
	}
	if pu, err := url.Parse(u); err == nil && pu.Scheme == "http" {
		return [][2]string{{"", fmt.Sprintf(`applies to https only, but the url is %q: write it with https://, or remove "tls"`, u)}}
	}
	if disabled || strings.Contains(t.CA+t.Cert+t.Key, "${") {
		return nil
	}
	if _, err := tlsfiles.Client(t.CA, t.Cert, t.Key); err != nil {
		var fe *tlsfiles.FieldError
		if errors.As(err, &fe) {
			return [][2]string{{"." + fe.Field, fe.Err.Error()}}
		}
		return [][2]string{{"", err.Error()}}
	}
	return nil
}

// checkURL returns why u is not an absolute http(s) URL, or "". One
// written without its scheme ("127.0.0.1:3000/mcp", "mcp.example.com/mcp")
// is told the URL meant: http for this machine, https elsewhere.
func checkURL(u string) string {
	pu, err := url.Parse(u)
	if err == nil && pu.Host != "" && (pu.Scheme == "http" || pu.Scheme == "https") {
		return ""
	}
	if pu, err := url.Parse("http://" + u); !strings.Contains(u, "://") && err == nil && !strings.ContainsAny(u, " \t") {
		host := pu.Hostname()
		ip := net.ParseIP(host)
		switch {
		case host == "localhost" || ip != nil && ip.IsLoopback():
			return fmt.Sprintf("has no scheme: write %q", "http://"+u)
		case ip != nil || strings.Contains(host, "."):
			return fmt.Sprintf("has no scheme: write %q", "https://"+u)
		}
	}
	if scheme, rest, ok := strings.Cut(u, "://"); ok {
		auth, path, slash := strings.Cut(rest, "/")
		if slash {
			path = "/" + path
		}
		if b := hostport.Bracketed(auth); b != "" {
			return fmt.Sprintf("is not an absolute http(s) URL: an IPv6 address goes in brackets: write %q", scheme+"://"+b+path)
		}
		// [fe80::1%eth0]: a zone's % is %25 in a URL (RFC 6874).
		if z := strings.Replace(auth, "%", "%25", 1); strings.HasPrefix(auth, "[") && !strings.Contains(auth, "%25") && z != auth {
			if pu, err := url.Parse(scheme + "://" + z + path); err == nil && pu.Host != "" {
				return fmt.Sprintf("is not an absolute http(s) URL: the zone of an IPv6 address follows %%25 in a URL: write %q", pu.String())
			}
		}
	}
	return `is not an absolute http(s) URL: write it like "https://example.com/mcp" or "http://127.0.0.1:3000/mcp"`
}

func checkAddr(a string) string {
	_, port, err := net.SplitHostPort(a)
	if err != nil {
		if fix := hostport.IPv6Fix(a); fix != "" {
			return "is not host:port: " + fix
		}
		return `is not host:port: write it like "127.0.0.1:8080"`
	}
	if n, err := strconv.Atoi(port); err != nil || n < 0 || n > 65535 {
		return "has an invalid port: use 0 to 65535"
	}
	return ""
}

func checkOrigin(o string) string {
	if o == "*" {
		return ""
	}
	pu, err := url.Parse(o)
	if err != nil || pu.Scheme == "" || pu.Host == "" || (pu.Path != "" && pu.Path != "/") || pu.RawQuery != "" {
		return `is not an origin: write scheme://host[:port], e.g. "http://localhost:3000", or "*"`
	}
	return ""
}

// CheckOTLPEndpoint returns "" when e is an OTLP/HTTP base URL, else what
// is wrong with it (for the config's toolgate.telemetry.otlpEndpoint and
// the OTEL_EXPORTER_OTLP_ENDPOINT variable alike).
func CheckOTLPEndpoint(e string) string {
	u, err := url.Parse(e)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.RawQuery != "" || u.Fragment != "" {
		return `is not an OTLP/HTTP endpoint: write the collector's base URL, e.g. "http://localhost:4318" (spans go to its /v1/traces)`
	}
	return ""
}

func checkHost(h string) string {
	if h == "" || strings.ContainsAny(h, "/ \t@") || strings.Contains(h, "://") {
		return `is not a host: write host or host:port, e.g. "localhost:8080" (no scheme or path)`
	}
	return ""
}

// validToken reports whether s is an HTTP token (a valid header name).
func validToken(s string) bool {
	if s == "" {
		return false
	}
	for _, r := range s {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9':
		case strings.ContainsRune("!#$%&'*+-.^_`|~", r):
		default:
			return false
		}
	}
	return true
}

func contains(list []string, s string) bool { return slices.Contains(list, s) }

func quoteList(list []string) string {
	q := make([]string, len(list))
	for i, s := range list {
		q[i] = strconv.Quote(s)
	}
	return strings.Join(q, ", ")
}

// useOneOf says which of names (the config's servers) to use, or that
// there are none yet.
func useOneOf(names []string) string {
	if len(names) == 0 {
		return "mcpServers has no server yet: add it there first"
	}
	return "use one of " + quoteList(names)
}
