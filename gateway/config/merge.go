package config

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"reflect"
	"strings"
)

// Doc is one config document to merge: its content and the file it came
// from ("" for one made in memory, e.g. by `toolgate import`).
type Doc struct {
	Path string
	Data []byte
}

// Conflict is a server that two documents define differently: the later
// one's entry is kept whole.
type Conflict struct {
	Server string
	Kept   string // the path of the document whose entry is kept
	Over   string // the path of the one it replaces
}

func (c Conflict) String() string {
	return fmt.Sprintf("server %q is defined in %s and in %s: keeping %s's entry", c.Server, docName(c.Over), docName(c.Kept), docName(c.Kept))
}

func docName(path string) string {
	if path == "" {
		return "(input)"
	}
	return path
}

// Merge merges config documents in the order given, later over earlier (a
// project's file over a user's): servers by name, a later entry replacing
// an earlier one whole (a stdio entry over an http one must not keep its
// url); the toolgate section key by key, nested objects merged the same
// way, except that profiles, like servers, are replaced whole by name.
// Other top-level keys belong to other applications and are left out.
//
// Each document's relative paths (a server's cwd and tls files, dataDir,
// keysFile, embed.modelDir, embed.ortLib, http.tls) and its
// ${TOOLGATE_CONFIG_DIR} references are anchored at its own directory
// first, so the merged document means what each part
// meant in its own file. The result is JSON for Parse; it is not expanded
// (other ${VAR} references stay as written) and not validated.
func Merge(docs []Doc) ([]byte, []Conflict, error) {
	servers := map[string]json.RawMessage{}
	from := map[string]string{}
	section := map[string]any{}
	var conflicts []Conflict
	for _, d := range docs {
		data, _, err := decodeText(d.Data)
		if err != nil {
			return nil, nil, fmt.Errorf("%s: %w", docName(d.Path), err)
		}
		var top map[string]json.RawMessage
		if err := json.Unmarshal(data, &top); err != nil {
			p := &parser{path: d.Path}
			return nil, nil, p.jsonError(data, err)
		}
		dir := ""
		if d.Path != "" {
			if abs, err := filepath.Abs(d.Path); err == nil {
				dir = filepath.Dir(abs)
			}
		}
		if raw, ok := top["mcpServers"]; ok && !isNull(raw) {
			var entries map[string]json.RawMessage
			if err := json.Unmarshal(raw, &entries); err != nil {
				return nil, nil, fmt.Errorf("%s: mcpServers: got %s, want an object mapping server names to entries", docName(d.Path), rawKind(raw))
			}
			for name, e := range entries {
				e = anchorServer(e, dir)
				if prev, ok := servers[name]; ok && !sameJSON(prev, e) {
					conflicts = append(conflicts, Conflict{Server: name, Kept: d.Path, Over: from[name]})
				}
				servers[name], from[name] = e, d.Path
			}
		}
		if raw, ok := top["toolgate"]; ok && !isNull(raw) {
			var s map[string]any
			if err := json.Unmarshal(raw, &s); err != nil {
				return nil, nil, fmt.Errorf("%s: toolgate: got %s, want an object of settings", docName(d.Path), rawKind(raw))
			}
			anchorSettings(s, dir)
			mergeInto(section, s, "")
		}
	}
	out := map[string]any{"mcpServers": servers}
	if len(section) > 0 {
		out["toolgate"] = section
	}
	merged, err := json.MarshalIndent(out, "", "  ")
	if err != nil {
		return nil, nil, fmt.Errorf("merge configs: %w", err)
	}
	return append(merged, '\n'), conflicts, nil
}

// mergeInto merges src into dst: objects key by key, anything else (and
// each profile) replaced.
func mergeInto(dst, src map[string]any, path string) {
	for k, v := range src {
		sub, isObj := v.(map[string]any)
		cur, curObj := dst[k].(map[string]any)
		if isObj && curObj && path != "profiles" {
			mergeInto(cur, sub, k)
			continue
		}
		dst[k] = v
	}
}

// anchorServer makes a server entry's cwd absolute against dir and puts
// dir in place of ${TOOLGATE_CONFIG_DIR} (dir "" leaves it as written).
func anchorServer(e json.RawMessage, dir string) json.RawMessage {
	if dir == "" {
		return e
	}
	var m map[string]any
	if json.Unmarshal(e, &m) != nil || m == nil {
		return e // Parse reports it
	}
	replaceDirVar(m, dir)
	if cwd, ok := m["cwd"].(string); ok {
		m["cwd"] = anchorPath(cwd, dir)
	}
	anchorPaths(m["tls"], dir, "ca", "cert", "key")
	out, err := json.Marshal(m)
	if err != nil {
		return e
	}
	return out
}

// anchorSettings does for the toolgate section what anchorServer does for
// a server entry, for its path settings.
func anchorSettings(s map[string]any, dir string) {
	if dir == "" {
		return
	}
	replaceDirVar(s, dir)
	anchorPaths(s, dir, "dataDir", "keysFile")
	anchorPaths(s["embed"], dir, "modelDir", "ortLib")
	if h, ok := s["http"].(map[string]any); ok {
		anchorPaths(h["tls"], dir, "cert", "key")
	}
}

// anchorPaths anchors the path settings keys of v, an object (anything
// else is left for Parse to report).
func anchorPaths(v any, dir string, keys ...string) {
	m, ok := v.(map[string]any)
	if !ok {
		return
	}
	for _, k := range keys {
		if p, ok := m[k].(string); ok {
			m[k] = anchorPath(p, dir)
		}
	}
}

// anchorPath is p made absolute against dir, unless it is empty, absolute,
// starts at the home folder ("~/", which Parse expands), or holds a ${VAR}
// that only expansion can resolve.
func anchorPath(p, dir string) string {
	if p == "" || filepath.IsAbs(p) || strings.HasPrefix(p, "~") || strings.Contains(p, "${") {
		return p
	}
	return filepath.Join(dir, p)
}

// replaceDirVar replaces ${TOOLGATE_CONFIG_DIR} in every string of v.
func replaceDirVar(v any, dir string) any {
	return MapStrings(v, func(s string) string { return strings.ReplaceAll(s, "${"+DirVar+"}", dir) })
}

// MapStrings is v (JSON decoded into any) with f applied to each string
// in it, maps and slices changed in place.
func MapStrings(v any, f func(string) string) any {
	switch t := v.(type) {
	case string:
		return f(t)
	case map[string]any:
		for k, e := range t {
			t[k] = MapStrings(e, f)
		}
	case []any:
		for i, e := range t {
			t[i] = MapStrings(e, f)
		}
	}
	return v
}

func sameJSON(a, b json.RawMessage) bool {
	var x, y any
	return json.Unmarshal(a, &x) == nil && json.Unmarshal(b, &y) == nil && reflect.DeepEqual(x, y)
}

// ReadFiles reads the config files at paths and parses them as one (see
// ParseDocs).
func ReadFiles(paths []string, lookupEnv func(string) (string, bool)) (*File, []byte, []Conflict, error) {
	docs, err := ReadDocs(paths)
	if err != nil {
		return nil, nil, nil, err
	}
	return ParseDocs(docs, lookupEnv)
}

// ReadDocs reads the files at paths.
func ReadDocs(paths []string) ([]Doc, error) {
	if len(paths) == 0 {
		return nil, errors.New("no config file given")
	}
	docs := make([]Doc, 0, len(paths))
	for _, p := range paths {
		data, err := readFile(p)
		if err != nil {
			return nil, err
		}
		docs = append(docs, Doc{Path: p, Data: data})
	}
	return docs, nil
}

// ParseDocs parses config documents as one: a single document as it is
// (errors point into it), several merged with Merge. It returns the file,
// the bytes it was parsed from, and the conflicts between the documents.
// File.Path is the last document's path: the file add_server writes to. A
// blank document is an *EmptyError.
func ParseDocs(docs []Doc, lookupEnv func(string) (string, bool)) (*File, []byte, []Conflict, error) {
	if len(docs) == 0 {
		return nil, nil, nil, errors.New("no config file given")
	}
	for _, d := range docs {
		if len(bytes.TrimSpace(d.Data)) == 0 {
			return nil, nil, nil, &EmptyError{Path: d.Path}
		}
	}
	if len(docs) == 1 {
		f, err := Parse(docs[0].Data, docs[0].Path, lookupEnv)
		return f, docs[0].Data, nil, err
	}
	merged, conflicts, err := Merge(docs)
	if err != nil {
		return nil, nil, nil, err
	}
	paths := make([]string, len(docs))
	for i, d := range docs {
		paths[i] = d.Path
	}
	f, err := Parse(merged, paths[len(paths)-1], lookupEnv)
	var ce *Error
	if errors.As(err, &ce) {
		ce.Path = strings.Join(paths, " + ")
	}
	return f, merged, conflicts, err
}

// EmptyError is a config file with nothing in it: an editor caught
// mid-save, most likely.
type EmptyError struct{ Path string }

func (e *EmptyError) Error() string {
	return fmt.Sprintf("config %s is empty: add a server to it (toolgate servers add NAME -c %s -- COMMAND [ARG...]) or write its servers in it, as {\"mcpServers\": {...}}", e.Path, e.Path)
}
