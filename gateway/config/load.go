package config

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/toolgate/toolgate/internal/dirs"
	"github.com/toolgate/toolgate/internal/typo"
)

// Load reads, expands and validates the config file at path.
func Load(path string) (*File, error) {
	data, err := readFile(path)
	if err != nil {
		return nil, err
	}
	return Parse(data, path, nil)
}

// readFile reads the config file at path. A relative path that is not
// there says from which folder it was read: an MCP client starts toolgate
// in a folder of its choosing (often /), so "--config servers.json" seldom
// means what it did in a shell.
func readFile(path string) ([]byte, error) {
	data, err := os.ReadFile(path)
	if err == nil {
		return data, nil
	}
	if fi, serr := os.Stat(path); serr == nil && fi.IsDir() {
		return nil, &DirError{Path: path}
	}
	if errors.Is(err, fs.ErrNotExist) && !filepath.IsAbs(path) {
		if wd, werr := os.Getwd(); werr == nil {
			return nil, fmt.Errorf("read config: %w (a relative path is read from toolgate's working directory, %s here (an MCP client starts toolgate in a folder of its choosing): give the file's absolute path)", err, wd)
		}
	}
	return nil, fmt.Errorf("read config: %w", err)
}

// DirError is a config path that is a folder: given so (`serve --config
// ~/.config/toolgate`), or a file replaced by a folder while the gateway
// serves. Its read said `read config: read …: is a directory`, no fix.
type DirError struct{ Path string }

func (e *DirError) Error() string {
	fix := "give the config file's path"
	if files, _ := filepath.Glob(filepath.Join(e.Path, "*.json")); len(files) > 0 && len(files) <= 3 {
		fix += " (" + strings.Join(files, ", ") + " is in it)"
		if len(files) > 1 {
			fix = strings.Replace(fix, " is in it", " are in it", 1)
		}
	}
	return fmt.Sprintf("read config: %s is a folder, not a file: %s", e.Path, fix)
}

// ReloadReadError is the words of a reload's failed read of a config file
// that was there at start and is not now: replaced by a folder, or gone
// (removed, moved away); "" for any other error. The config in effect stays
// until the file is back. A file gone read as at start: `no such file`,
// and for a relative path the hint to give an absolute one, which was not
// what went wrong.
func ReloadReadError(err error) string {
	var dir *DirError
	var pe *fs.PathError
	switch {
	case errors.As(err, &dir):
		return fmt.Sprintf("read config: %s is a folder now, not the config file: %s", dir.Path, putBack)
	case errors.Is(err, fs.ErrNotExist) && errors.As(err, &pe):
		return fmt.Sprintf("read config: %s is gone (removed or moved away): %s", pe.Path, putBack)
	}
	return ""
}

// putBack is ReloadReadError's fix.
const putBack = "put the file back (the gateway keeps the config in effect meanwhile, and reads the file again once it is back)"

// ReadOnceError is a config "file" that can be read only once: a pipe
// (`serve --config <(sops -d toolgate.enc.json)`, a FIFO), a character
// device or a socket. Reading it again blocks until something writes to it
// (a FIFO: the gateway hung at start, re-reading it for a change made
// meanwhile) or reads nothing (a process substitution: a reload rejected
// as an empty file at every start).
type ReadOnceError struct{ Path, Kind string }

func (e *ReadOnceError) Error() string {
	return fmt.Sprintf("config %s is %s, not a file (a process substitution such as <(sops -d …), or a FIFO): toolgate reads such a config once, at start, "+
		"and cannot read it again to apply a change; to change the config while the gateway runs, give it a file (with mode 0600 if it holds secrets)", e.Path, e.Kind)
}

// ReadOnce returns a *ReadOnceError for the first of paths (followed
// through symlinks) that is neither a regular file nor a folder, else nil:
// a path that cannot be stat'ed passes, its read says why. A stat never
// blocks, where an open of a FIFO with no writer does.
func ReadOnce(paths ...string) error {
	for _, path := range paths {
		fi, err := os.Stat(path)
		if err != nil || fi.Mode().IsRegular() || fi.IsDir() {
			continue
		}
		kind := "not a regular file"
		switch t := fi.Mode().Type(); {
		case t&fs.ModeNamedPipe != 0:
			kind = "a pipe"
		case t&fs.ModeCharDevice != 0:
			kind = "a character device"
		case t&fs.ModeSocket != 0:
			kind = "a socket"
		case t&fs.ModeDevice != 0:
			kind = "a device"
		}
		return &ReadOnceError{Path: path, Kind: kind}
	}
	return nil
}

// Parse decodes, expands and validates a config file's bytes. path names the
// file in errors and anchors relative paths ("" = the working directory).
// lookupEnv resolves ${VAR} references; nil means os.LookupEnv. (It reports
// presence, unlike os.Getenv, so that a variable set to "" is not "unset".)
//
// All problems are reported at once: the error is an *Error listing each
// *FieldError in a stable order. A JSON syntax error is reported alone, with
// its line and column.
func Parse(data []byte, path string, lookupEnv func(string) (string, bool)) (*File, error) {
	if lookupEnv == nil {
		lookupEnv = os.LookupEnv
	}
	p := &parser{path: path, lookup: lookupEnv}
	if path != "" {
		if abs, err := filepath.Abs(path); err == nil {
			p.dir = filepath.Dir(abs)
		} else {
			p.dir = filepath.Dir(path)
		}
	}
	f, err := p.decode(data)
	if err != nil {
		return nil, err
	}
	if len(p.errs) == 0 {
		// Decoding succeeded; now the checks that also apply to a File built in code.
		if err := f.Validate(); err != nil {
			var ce *Error
			if errors.As(err, &ce) {
				p.errs = append(p.errs, ce.Errs...)
			}
		}
	} else {
		// Decoding failed somewhere; still report the checks on what did
		// decode, so that one run shows every problem, but skip the fields
		// that failed (their zero values would only add noise).
		for name, s := range f.MCPServers {
			p.errs = append(p.errs, validateServer(name, s, s.unsetKeys(p.failed[name]))...)
		}
		p.errs = append(p.errs, f.validateNameCase()...)
		p.errs = append(p.errs, f.Toolgate.validate()...)
		p.errs = append(p.errs, f.validateProfiles()...)
	}
	if err := p.err(); err != nil {
		return nil, err
	}
	return f, nil
}

// ParseUnexpanded decodes data like Parse but leaves ${VAR} references as
// written (except ${TOOLGATE_CONFIG_DIR}) and does not validate. It is for
// showing a config without the secrets that expansion would put into it;
// call Parse or Load first to know whether the file is valid.
func ParseUnexpanded(data []byte, path string) (*File, error) {
	lookup := func(name string) (string, bool) { return "${" + name + "}", true }
	p := &parser{path: path, lookup: lookup, raw: true}
	if path != "" {
		if abs, err := filepath.Abs(path); err == nil {
			p.dir = filepath.Dir(abs)
		}
	}
	f, err := p.decode(data)
	if err != nil {
		return nil, err
	}
	return f, p.err()
}

// decode reads the server entries and the toolgate section (unset fields
// stay zero); field errors collect in p, a JSON syntax error is returned.
func (p *parser) decode(data []byte) (*File, error) {
	data, _, err := decodeText(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", p.name(), err)
	}
	var top map[string]json.RawMessage
	if err := json.Unmarshal(data, &top); err != nil {
		return nil, p.jsonError(data, err)
	}
	f := &File{Path: p.path, MCPServers: map[string]Server{}}
	p.duplicates(data)
	p.topKeys(top)
	p.servers(top, f)
	p.settings(top["toolgate"], &f.Toolgate)
	return f, nil
}

// topKeys reports a top-level key that is a near-miss of "mcpServers" or
// "toolgate": other keys belong to other applications and are ignored, but
// a misspelt "tolgate" would drop every setting in it without a word.
func (p *parser) topKeys(top map[string]json.RawMessage) {
	ours := []string{"mcpServers", "toolgate"}
	for k := range top {
		if slices.Contains(ours, k) || k == "servers" { // "servers": VS Code's, hinted at in servers()
			continue
		}
		if want, ok := typo.Suggest(k, ours); ok {
			if _, has := top[want]; !has {
				p.errorf("", k, "unknown key: did you mean %q? (other keys are ignored, but this one looks like a typo)", want)
			}
		}
	}
}

// duplicates reports every key that appears twice in one object of the
// file. encoding/json keeps the last one silently, so a server pasted in
// twice under one name (or an "env" given twice) would lose the first.
func (p *parser) duplicates(data []byte) {
	dec := json.NewDecoder(bytes.NewReader(data))
	lines := func(off int64) int { l, _ := lineCol(data, off); return l }
	var walk func(path []string) error
	walk = func(path []string) error {
		tok, err := dec.Token()
		if err != nil {
			return err
		}
		switch tok {
		case json.Delim('{'):
			seen := map[string]int64{}
			for dec.More() {
				kt, err := dec.Token()
				if err != nil {
					return err
				}
				key, _ := kt.(string)
				off := dec.InputOffset()
				if first, dup := seen[key]; dup {
					p.duplicate(path, key, lines(first), lines(off))
				} else {
					seen[key] = off
				}
				if err := walk(append(path, key)); err != nil {
					return err
				}
			}
		case json.Delim('['):
			for i := 0; dec.More(); i++ {
				if err := walk(append(path, fmt.Sprintf("[%d]", i))); err != nil {
					return err
				}
			}
		default:
			return nil
		}
		_, err = dec.Token() // the closing delimiter
		return err
	}
	_ = walk(nil) // the file decoded already: no error here
}

func (p *parser) duplicate(path []string, key string, first, second int) {
	where := fmt.Sprintf("lines %d and %d", first, second)
	if first == second {
		where = fmt.Sprintf("line %d", first)
	}
	switch {
	case len(path) == 1 && path[0] == "mcpServers":
		p.errorf("", "mcpServers", "server %q is defined twice (%s): only the last would be used; rename one or remove it", key, where)
	case len(path) >= 2 && path[0] == "mcpServers":
		p.errorf(path[1], joinPath(append(path[2:len(path):len(path)], key)), "appears twice (%s): only the last would be used; remove one", where)
	default:
		p.errorf("", joinPath(append(path[:len(path):len(path)], key)), "appears twice (%s): only the last would be used; remove one", where)
	}
}

// joinPath writes a key path as errors name fields: search.mode, args[2].
func joinPath(path []string) string {
	var b strings.Builder
	for i, k := range path {
		if i > 0 && !strings.HasPrefix(k, "[") {
			b.WriteByte('.')
		}
		b.WriteString(k)
	}
	return b.String()
}

// FieldError is one problem in a config file.
type FieldError struct {
	Server string // the server's name; "" outside mcpServers (and for the invalid name "")
	Field  string // in a server: "args[2]", "env.TOKEN", "" for the entry itself; else "mcpServers", "toolgate.search.mode"
	Msg    string // what is wrong and how to fix it
	// From is the file the server's entry was taken from when that is not
	// the config's own (toolgate import merges several clients' files);
	// Error starts with it.
	From string
}

func (e *FieldError) Error() string {
	if e.From != "" {
		return e.From + ": " + e.Where() + ": " + e.Msg
	}
	return e.Where() + ": " + e.Msg
}

// Where renders the field's location, e.g. mcpServers["memory"].env.TOKEN.
func (e *FieldError) Where() string {
	if e.Server == "" {
		return e.Field
	}
	w := fmt.Sprintf("mcpServers[%q]", e.Server)
	if e.Field != "" {
		if !strings.HasPrefix(e.Field, "[") {
			w += "."
		}
		w += e.Field
	}
	return w
}

// Error lists every problem found in one config file.
type Error struct {
	Path string // the file ("" when parsed from memory)
	Errs []*FieldError
}

func (e *Error) Error() string {
	var b strings.Builder
	b.WriteString("config")
	if e.Path != "" {
		b.WriteString(" " + e.Path)
	}
	if len(e.Errs) == 1 {
		b.WriteString(": " + e.Errs[0].Error())
		return b.String()
	}
	fmt.Fprintf(&b, ": %d problems:", len(e.Errs))
	for _, fe := range e.Errs {
		b.WriteString("\n  " + fe.Error())
	}
	return b.String()
}

// Unwrap exposes each *FieldError to errors.As.
func (e *Error) Unwrap() []error {
	out := make([]error, len(e.Errs))
	for i, fe := range e.Errs {
		out[i] = fe
	}
	return out
}

func sortErrs(errs []*FieldError) []*FieldError {
	// File-level problems first, then servers by name, then the toolgate section.
	group := func(e *FieldError) int {
		switch {
		case e.Server != "" || strings.HasPrefix(e.Field, "mcpServers["):
			return 1
		case strings.HasPrefix(e.Field, "toolgate"):
			return 2
		}
		return 0
	}
	slices.SortStableFunc(errs, func(a, b *FieldError) int {
		if c := group(a) - group(b); c != 0 {
			return c
		}
		if c := strings.Compare(a.Server, b.Server); c != 0 {
			return c
		}
		if c := strings.Compare(a.Field, b.Field); c != 0 {
			return c
		}
		return strings.Compare(a.Msg, b.Msg)
	})
	return slices.CompactFunc(errs, func(a, b *FieldError) bool { return *a == *b })
}

type parser struct {
	path   string
	dir    string // absolute directory of path; "" when parsed from memory
	lookup func(string) (string, bool)
	errs   []*FieldError
	failed map[string]map[string]bool // server → keys that failed to decode or expand
	raw    bool                       // ParseUnexpanded: keep ${VAR} references
}

// topKey is the key of a server entry that field is in ("env" of
// "env.TOKEN", "args" of "args[0]").
func topKey(field string) string {
	key, _, _ := strings.Cut(field, ".")
	key, _, _ = strings.Cut(key, "[")
	return key
}

func (p *parser) errorf(server, field, format string, args ...any) {
	if server != "" {
		key := topKey(field)
		if p.failed == nil {
			p.failed = map[string]map[string]bool{}
		}
		if p.failed[server] == nil {
			p.failed[server] = map[string]bool{}
		}
		p.failed[server][key] = true
	}
	p.errs = append(p.errs, &FieldError{Server: server, Field: field, Msg: fmt.Sprintf(format, args...)})
}

func (p *parser) err() error {
	if len(p.errs) == 0 {
		return nil
	}
	return &Error{Path: p.path, Errs: sortErrs(p.errs)}
}

// name is the file's path, or "config" for content without one.
func (p *parser) name() string {
	if p.path == "" {
		return "config"
	}
	return p.path
}

// jsonError turns a decoding error of the whole file into one that points at
// the line and column (JSONError).
func (p *parser) jsonError(data []byte, err error) error { return JSONError(p.name(), data, err) }

// JSONError turns an error decoding data, the whole of file name, into one
// that points at the line and column: name:LINE:COL: invalid JSON: …. The
// column is that of the character JSON stopped at (Offset is past it), or
// past the end for a file cut short. It is how toolgate says it of a
// config, of a client's file import reads, and of the config import --into
// writes to.
func JSONError(name string, data []byte, err error) error {
	var se *json.SyntaxError
	if errors.As(err, &se) {
		at := se.Offset - 1
		if se.Offset >= int64(len(data)) && strings.HasPrefix(se.Error(), "unexpected end") {
			at = int64(len(data))
		}
		line, col := lineCol(data, at)
		return fmt.Errorf("%s:%d:%d: invalid JSON: %s%s", name, line, col, se.Error(), syntaxHint(data, se.Offset))
	}
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) {
		line, col := lineCol(data, te.Offset-1) // Offset is past the value's first byte
		return fmt.Errorf("%s:%d:%d: the file must be a JSON object like {\"mcpServers\": {...}}, got %s", name, line, col, te.Value)
	}
	return fmt.Errorf("%s: invalid JSON: %w", name, err)
}

// syntaxHint names the two JSONC habits that plain JSON refuses, a comment
// and a comma before a closing bracket (the examples in the docs are
// annotated with comments; the file itself must be JSON).
func syntaxHint(data []byte, off int64) string {
	if off <= 0 || off > int64(len(data)) {
		return ""
	}
	switch data[off-1] {
	case '/':
		return " (comments are not JSON: remove the // or /* */ comment)"
	case '}', ']':
		if before := bytes.TrimRight(data[:off-1], " \t\r\n"); bytes.HasSuffix(before, []byte(",")) {
			return fmt.Sprintf(" (remove the comma before %q)", data[off-1])
		}
	}
	return ""
}

// lineCol converts a byte offset into a 1-based line and column.
func lineCol(data []byte, off int64) (line, col int) {
	off = min(max(off, 0), int64(len(data)))
	before := data[:off]
	line = bytes.Count(before, []byte("\n")) + 1
	col = int(off) - (bytes.LastIndexByte(before, '\n') + 1) + 1
	return line, col
}

const exampleServer = `"mcpServers": {"memory": {"command": "npx", "args": ["-y", "@modelcontextprotocol/server-memory"]}}`

func (p *parser) servers(top map[string]json.RawMessage, f *File) {
	raw, ok := top["mcpServers"]
	if !ok || isNull(raw) {
		hint := ""
		if _, vs := top["servers"]; vs {
			hint = ` (this file has "servers", VS Code's format: rename it to "mcpServers")`
		}
		p.errorf("", "mcpServers", "no servers configured%s: add at least one, e.g. %s", hint, exampleServer)
		return
	}
	var entries map[string]json.RawMessage
	if err := json.Unmarshal(raw, &entries); err != nil {
		p.errorf("", "mcpServers", "got %s, want an object mapping server names to entries, e.g. %s", rawKind(raw), exampleServer)
		return
	}
	// An empty object is a config with no servers yet (added later with
	// toolgate servers add or toolgate__add_server, or all removed): serve
	// says so in its log. A missing "mcpServers" is more likely a mistake.
	for name, raw := range entries {
		s, ok := p.server(name, raw)
		if ok {
			f.MCPServers[name] = s
		}
	}
}

// serverKeys are the keys of a server entry that toolgate reads. Other keys
// belong to other applications and are ignored.
var serverKeys = []string{"type", "command", "args", "env", "cwd", "url", "headers", "oauth", "tls", "disabled", "connectTimeout", "callTimeout", "keepAlive", "maxResultBytes", "lazy", "idleTimeout", "restart", "description", "language"}

// foreignKeys are other MCP clients' names for keys of a server entry,
// which a config copied by hand brings (toolgate import renames them).
var foreignKeys = map[string]struct{ want, whose, note string }{
	"serverUrl":     {"url", `"serverUrl" is Windsurf's name for "url"`, ""},
	"httpUrl":       {"url", `"httpUrl" is Gemini CLI's name for a streamable HTTP "url"`, ""},
	"transport":     {"type", `the transport is given by "type" here`, ` ("stdio", "http" or "sse"; left out, it follows from "command" or "url")`},
	"transportType": {"type", `the transport is given by "type" here`, ` ("stdio", "http" or "sse"; left out, it follows from "command" or "url")`},
}

// RenameForeign renames, in one server entry of another client's file, the
// keys foreignKeys lists to toolgate's, where the entry does not set
// toolgate's key already, for toolgate import; it returns what it renamed,
// as "old → new", in key order.
func RenameForeign(e map[string]any) []string {
	var renamed []string
	for _, k := range slices.Sorted(maps.Keys(foreignKeys)) {
		v, ok := e[k]
		if !ok {
			continue
		}
		want := foreignKeys[k].want
		if _, set := e[want]; set {
			continue // said by the config's own check, as written
		}
		e[want] = v
		delete(e, k)
		renamed = append(renamed, k+" → "+want)
	}
	return renamed
}

func (p *parser) server(name string, raw json.RawMessage) (Server, bool) {
	s := Server{Name: name}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(raw, &m); err != nil || m == nil {
		p.errorf(name, "", "got %s, want an object like {\"command\": \"npx\", \"args\": [...]} or {\"type\": \"http\", \"url\": \"https://...\"}", rawKind(raw))
		return s, false
	}
	d := &fields{p: p, server: name, m: m}
	s.Disabled = d.bool("disabled")
	// A disabled server is never started, so a variable it references may
	// legitimately be unset: expand what can be expanded and keep the rest.
	x := &expander{p: p, server: name, lookup: p.lookup, lenient: s.Disabled}
	if !s.Disabled {
		x.unset = &s.Unset
	}
	s.Type = NormalizeType(d.string("type"))
	s.Command = x.expand("command", d.string("command"))
	for i, a := range d.strings("args") {
		s.Args = append(s.Args, x.expand(fmt.Sprintf("args[%d]", i), a))
	}
	s.Env = x.expandMap("env", d.stringMap("env"))
	s.Cwd = p.resolve(x.expand("cwd", d.string("cwd")))
	s.URL = x.expand("url", d.string("url"))
	s.Headers = x.expandMap("headers", d.stringMap("headers"))
	s.OAuth = d.oauth("oauth", x)
	s.TLS = d.tls("tls", x)
	s.ConnectTimeout = d.duration("connectTimeout")
	s.CallTimeout = d.duration("callTimeout")
	s.KeepAlive = d.duration("keepAlive")
	s.MaxResultBytes = d.resultBytes("maxResultBytes", "the toolgate section's value")
	s.Lazy = d.bool("lazy")
	s.IdleTimeout = d.duration("idleTimeout")
	s.Restart = d.restart("restart")
	s.Description = d.string("description")
	s.Language = d.string("language")
	if s.Type == "" {
		s.Type = inferType(s)
	}
	// Env and headers are maps: the same order at every parse, so that a
	// reload does not take the entry for a changed one.
	slices.SortFunc(s.Unset, func(a, b UnsetVar) int { return strings.Compare(a.Field+"\x00"+a.Name, b.Field+"\x00"+b.Name) })
	if _, url := m["url"]; s.Type == "" && len(s.Unset) > 0 {
		// A command or url made of unset variables is "": the key says.
		if _, cmd := m["command"]; cmd != url {
			s.Type = map[bool]string{true: TypeHTTP, false: TypeStdio}[url]
		}
	}
	// Keys we do not read are tolerated, except near-misses of ours that would
	// otherwise be dropped silently ("comand", "header", "Args").
	for k := range m {
		if f, ok := foreignKeys[k]; ok {
			switch _, has := m[f.want]; {
			case rawKind(m[k]) == "an object":
				p.errorf(name, k, `unknown key: an object of settings that go in the entry itself here: its "type", "url", "command", "args" … as keys of mcpServers[%q]`, name)
			case !has:
				p.errorf(name, k, "unknown key: %s: rename it to %q%s", f.whose, f.want, f.note)
			}
			continue
		}
		if slices.Contains(serverKeys, k) || len(k) < 4 {
			continue
		}
		if want, ok := typo.Suggest(k, serverKeys); ok && len(want) >= 4 {
			if _, has := m[want]; !has {
				p.errorf(name, k, "unknown key: did you mean %q? (other keys are ignored, but this one looks like a typo)", want)
			}
		}
	}
	return s, true
}

// NormalizeType maps accepted spellings ("streamable-http", "SSE") onto the
// Type constants; an unknown value is returned as given for Validate to
// report.
func NormalizeType(t string) string {
	switch strings.ToLower(strings.TrimSpace(t)) {
	case "":
		return ""
	case "stdio":
		return TypeStdio
	case "http", "streamable-http", "streamablehttp", "streamable_http":
		return TypeHTTP
	case "sse":
		return TypeSSE
	}
	return t
}

// inferType gives the type of an entry without one: command → stdio,
// url → http; "" when ambiguous (Validate says why).
func inferType(s Server) string {
	switch {
	case s.Command != "" && s.URL == "":
		return TypeStdio
	case s.URL != "" && s.Command == "":
		return TypeHTTP
	}
	return ""
}

// resolve makes a relative path absolute against the config file's
// directory; one that starts with "~/" is the home folder's.
func (p *parser) resolve(path string) string {
	if path == "" || (p.raw && strings.Contains(path, "${")) {
		return path
	}
	if path = dirs.ExpandHome(path); filepath.IsAbs(path) || p.dir == "" {
		return path
	}
	return filepath.Join(p.dir, path)
}

// fields decodes the known keys of one JSON object, recording type errors
// under the right name.
type fields struct {
	p      *parser
	server string
	prefix string // e.g. "toolgate.search." for settings
	m      map[string]json.RawMessage
}

func (d *fields) errorf(key, format string, args ...any) {
	d.p.errorf(d.server, d.prefix+key, format, args...)
}

func (d *fields) raw(key string) (json.RawMessage, bool) {
	r, ok := d.m[key]
	if !ok || isNull(r) {
		return nil, false
	}
	return r, true
}

func (d *fields) has(key string) bool { _, ok := d.raw(key); return ok }

func (d *fields) string(key string) string {
	r, ok := d.raw(key)
	if !ok {
		return ""
	}
	var s string
	if err := json.Unmarshal(r, &s); err != nil {
		d.errorf(key, "got %s, want a string", rawKind(r))
	}
	return s
}

func (d *fields) bool(key string) bool {
	r, ok := d.raw(key)
	if !ok {
		return false
	}
	var b bool
	if err := json.Unmarshal(r, &b); err != nil {
		d.errorf(key, "got %s, want true or false", rawKind(r))
	}
	return b
}

func (d *fields) strings(key string) []string {
	r, ok := d.raw(key)
	if !ok {
		return nil
	}
	var items []json.RawMessage
	if err := json.Unmarshal(r, &items); err != nil {
		d.errorf(key, `got %s, want an array of strings, e.g. ["-y", "some-package"]`, rawKind(r))
		return nil
	}
	var out []string // nil when empty, so that [] and a missing key read the same
	for i, it := range items {
		var s string
		if err := json.Unmarshal(it, &s); err != nil {
			d.errorf(fmt.Sprintf("%s[%d]", key, i), "got %s, want a string (quote it)", rawKind(it))
			continue
		}
		out = append(out, s)
	}
	return out
}

// stringMap reads an object of strings. Numbers and booleans are accepted as
// their JSON text ("PORT": 3000 means "3000"), since JavaScript clients
// coerce them too. Values are never echoed in errors: they may be secrets.
func (d *fields) stringMap(key string) map[string]string {
	r, ok := d.raw(key)
	if !ok {
		return nil
	}
	var items map[string]json.RawMessage
	if err := json.Unmarshal(r, &items); err != nil {
		d.errorf(key, `got %s, want an object of strings, e.g. {"NAME": "value"}`, rawKind(r))
		return nil
	}
	if len(items) == 0 {
		return nil // {} and a missing key read the same
	}
	out := make(map[string]string, len(items))
	for k, it := range items {
		var v any
		_ = json.Unmarshal(it, &v)
		switch v := v.(type) {
		case string:
			out[k] = v
		case float64, bool:
			out[k] = string(bytes.TrimSpace(it))
		default:
			d.errorf(key+mapKey(k), "got %s, want a string", jsonKind(v))
		}
	}
	return out
}

func (d *fields) duration(key string) Duration {
	r, ok := d.raw(key)
	if !ok {
		return Duration{}
	}
	v, err := parseDuration(r)
	if err != nil {
		d.errorf(key, "%v", err)
	}
	return Duration{v}
}

// durations reads an array of durations. An empty array gives an empty,
// non-nil slice (it means something: "never restart").
func (d *fields) durations(key string) []Duration {
	r, ok := d.raw(key)
	if !ok {
		return nil
	}
	var items []json.RawMessage
	if err := json.Unmarshal(r, &items); err != nil {
		d.errorf(key, `got %s, want an array of durations, e.g. ["2s", "5s", "10s"]`, rawKind(r))
		return nil
	}
	out := make([]Duration, 0, len(items))
	for i, it := range items {
		v, err := parseDuration(it)
		if err != nil {
			d.errorf(fmt.Sprintf("%s[%d]", key, i), "%v", err)
			continue
		}
		out = append(out, Duration{v})
	}
	return out
}

// restart reads a restart policy object; nil when the key is absent.
func (d *fields) restart(key string) *Restart {
	if !d.has(key) {
		return nil
	}
	rd := d.object(key, restartKeys)
	return &Restart{Delays: rd.durations("delays"), StableAfter: rd.duration("stableAfter")}
}

// oauthKeys are the keys of a server's "oauth" object.
var oauthKeys = []string{"clientId", "clientSecret", "scopes", "redirectUri"}

// oauth reads a server's "oauth" object; nil when the key is absent.
func (d *fields) oauth(key string, x *expander) *OAuth {
	if !d.has(key) {
		return nil
	}
	od := d.object(key, oauthKeys)
	return &OAuth{
		ClientID:     x.expand(key+".clientId", od.string("clientId")),
		ClientSecret: x.expand(key+".clientSecret", od.string("clientSecret")),
		Scopes:       od.strings("scopes"),
		RedirectURI:  x.expand(key+".redirectUri", od.string("redirectUri")),
	}
}

// tlsKeys are the keys of a server's "tls" object.
var tlsKeys = []string{"ca", "cert", "key"}

// tls reads a server's "tls" object, its paths expanded and resolved
// against the file's folder; nil when the key is absent.
func (d *fields) tls(key string, x *expander) *TLS {
	if !d.has(key) {
		return nil
	}
	td := d.object(key, tlsKeys)
	path := func(k string) string { return d.p.resolve(x.expand(key+"."+k, td.string(k))) }
	return &TLS{CA: path("ca"), Cert: path("cert"), Key: path("key")}
}

func (d *fields) int(key string) int64 {
	r, ok := d.raw(key)
	if !ok {
		return 0
	}
	var f float64
	if err := json.Unmarshal(r, &f); err != nil || f != math.Trunc(f) {
		d.errorf(key, "got %s, want a whole number", strings.TrimSpace(string(r)))
		return 0
	}
	if math.Abs(f) > 1<<53 {
		// A whole number still (1e20 is one), only far past every range.
		d.errorf(key, "%s is out of range: no setting takes a number that large (examples/README.md gives each one's range)", strings.TrimSpace(string(r)))
		return 0
	}
	return int64(f)
}

// resultBytes decodes a maxResultBytes. A 0 written is out of range,
// said here since a 0 decoded is the key left out (orElse applies): one
// who writes it may mean no bound, which a bound at the range's top is.
func (d *fields) resultBytes(key, orElse string) int {
	n := int(d.int(key))
	if r, ok := d.raw(key); ok && n == 0 {
		if f, err := strconv.ParseFloat(strings.TrimSpace(string(r)), 64); err == nil && f == 0 {
			d.errorf(key, "0 is out of range (it does not turn trimming off: a bound at the top of the range does): use 1 to %d bytes of text (or leave it out for %s)",
				maxResultBytesLimit, orElse)
		}
	}
	return n
}

func (d *fields) float(key string) float64 {
	r, ok := d.raw(key)
	if !ok {
		return 0
	}
	var f float64
	if err := json.Unmarshal(r, &f); err != nil {
		d.errorf(key, "got %s, want a number", rawKind(r))
	}
	return f
}

// object decodes a nested object of settings, rejecting unknown keys.
func (d *fields) object(key string, known []string) *fields {
	sub := &fields{p: d.p, server: d.server, prefix: d.prefix + key + ".", m: map[string]json.RawMessage{}}
	r, ok := d.raw(key)
	if !ok {
		return sub
	}
	if err := json.Unmarshal(r, &sub.m); err != nil {
		d.errorf(key, "got %s, want an object", rawKind(r))
		return sub
	}
	sub.strict(known)
	return sub
}

// strict reports keys outside known, suggesting the closest known one.
func (d *fields) strict(known []string) {
	for k := range d.m {
		if slices.Contains(known, k) {
			continue
		}
		if want, ok := typo.Suggest(k, known); ok {
			d.errorf(k, "unknown setting: did you mean %q?", want)
		} else {
			d.errorf(k, "unknown setting: valid keys here are %s", strings.Join(known, ", "))
		}
	}
}

func isNull(r json.RawMessage) bool { return string(bytes.TrimSpace(r)) == "null" }

func rawKind(r json.RawMessage) string {
	var v any
	if err := json.Unmarshal(r, &v); err != nil {
		return "invalid JSON"
	}
	return jsonKind(v)
}

func jsonKind(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case bool:
		return "a boolean"
	case float64:
		return "a number"
	case string:
		return "a string"
	case []any:
		return "an array"
	case map[string]any:
		return "an object"
	}
	return fmt.Sprintf("%T", v)
}

// mapKey renders a map key as part of a field path: .NAME or ["odd name"].
func mapKey(k string) string {
	if k != "" && strings.IndexFunc(k, func(r rune) bool {
		return !(r == '_' || r == '-' || r >= '0' && r <= '9' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z')
	}) < 0 {
		return "." + k
	}
	return fmt.Sprintf("[%q]", k)
}
