package config

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/tidwall/sjson"
)

// Setting is a key of a server entry with its value as the user gave it
// (a tool argument's JSON, a flag's word made JSON: SettingValue), written
// into the entry as it is, so that the config's own checks read it as they
// read a file: decoded into a Server first, "maxResultBytes": 0 was the
// key left out (no error) and "callTimeout": "soon" was said without its
// key.
type Setting struct {
	Key   string
	Value json.RawMessage
}

// SettingValue is the JSON a command-line word stands for as the value of
// a setting: a number as written (a duration's seconds, a count of bytes),
// anything else a string ("30s", "de"), as a file would hold them.
func SettingValue(word string) json.RawMessage {
	if w := strings.TrimSpace(word); w != "" && strings.IndexAny(w[:1], "-0123456789") == 0 && json.Valid([]byte(w)) {
		return json.RawMessage(w)
	}
	b, _ := json.Marshal(word) // a string always marshals
	return b
}

// AddServer returns docs with s's entry, and settings after its keys,
// added to the last document (the file a project keeps over a user's),
// and that document's index. It is an error when a document defines s.Name
// already or when the config would not be valid (lookupEnv as for Parse):
// then nothing is to be written.
func AddServer(docs []Doc, s Server, lookupEnv func(string) (string, bool), settings ...Setting) ([]Doc, int, error) {
	if len(docs) == 0 {
		return nil, 0, fmt.Errorf("no config file to add %q to", s.Name)
	}
	if msg := NameProblem(s.Name); msg != "" {
		return nil, 0, errors.New(msg)
	}
	if err := checkDocs(docs); err != nil {
		return nil, 0, err
	}
	for _, d := range docs {
		if HasServer(d.Data, s.Name) {
			return nil, 0, fmt.Errorf("a server named %q is in %s already: remove it first, or choose another name", s.Name, docName(d.Path))
		}
		for _, twin := range ServerNames(d.Data) {
			if strings.EqualFold(twin, s.Name) {
				return nil, 0, fmt.Errorf("a server named %q is in %s already, and %q differs from it only in case: %s: choose another name, or remove %q first", twin, docName(d.Path), s.Name, caseTwin(s.Name, twin), twin)
			}
		}
	}
	entry, err := json.Marshal(s) // Name is not part of an entry
	if err != nil {
		return nil, 0, fmt.Errorf("add %q: %w", s.Name, err)
	}
	for _, st := range settings {
		if len(st.Value) == 0 {
			continue // not given
		}
		if !slices.Contains(serverKeys, st.Key) {
			return nil, 0, fmt.Errorf("add %q: %q is not a key of a server entry", s.Name, st.Key) // a caller's mistake
		}
		if entry, err = sjson.SetRawBytes(entry, escapePath(st.Key), st.Value); err != nil {
			return nil, 0, fmt.Errorf("add %q: %s: %w", s.Name, st.Key, err)
		}
	}
	out := append([]Doc(nil), docs...)
	last := len(out) - 1
	if out[last].Data, err = SetServer(out[last].Data, s.Name, entry); err != nil {
		return nil, 0, fmt.Errorf("%s: %w", docName(out[last].Path), err)
	}
	if _, _, _, err := ParseDocs(out, lookupEnv); err != nil {
		return nil, 0, fmt.Errorf("the config would not be valid with %q, so nothing was written: %w", s.Name, err)
	}
	return out, last, nil
}

// ErrNoServer is what the error of a server name the config does not
// have is (errors.Is): a command exits with status 2 for it.
var ErrNoServer = errors.New("no server of that name in the config")

// NoServer is an ErrNoServer error in words of its own (which say the
// servers there are, or where none was found).
func NoServer(format string, args ...any) error {
	return noServerError{fmt.Sprintf(format, args...)}
}

type noServerError struct{ msg string }

func (e noServerError) Error() string      { return e.msg }
func (noServerError) Is(target error) bool { return target == ErrNoServer }

// RemoveServer returns docs without server name in any of them, and the
// indexes of the documents that defined it. It is an error when none did,
// or when the config would not be valid without it.
func RemoveServer(docs []Doc, name string, lookupEnv func(string) (string, bool)) ([]Doc, []int, error) {
	if err := checkDocs(docs); err != nil {
		return nil, nil, err
	}
	out := append([]Doc(nil), docs...)
	var changed []int
	for i := range out {
		data, found, err := DeleteServer(out[i].Data, name)
		if err != nil {
			return nil, nil, fmt.Errorf("%s: %w", docName(out[i].Path), err)
		}
		if found {
			out[i].Data = data
			changed = append(changed, i)
		}
	}
	if len(changed) == 0 {
		var paths []string
		for _, d := range docs {
			paths = append(paths, docName(d.Path))
		}
		there := "" // the servers there are, when the config reads
		if f, _, _, err := ParseDocs(docs, lookupEnv); err == nil {
			var names []string
			for _, s := range f.Servers() {
				names = append(names, s.Name)
			}
			there = " (servers: " + strings.Join(names, ", ") + ")"
			if len(names) == 0 {
				there = " (it has none)"
			}
		}
		return nil, nil, NoServer("there is no server named %q in %s%s", name, strings.Join(paths, " or "), there)
	}
	if _, _, _, err := ParseDocs(out, lookupEnv); err != nil {
		return nil, nil, fmt.Errorf("the config would not be valid without %q, so nothing was written: %w", name, err)
	}
	return out, changed, nil
}

// checkDocs says where the first of docs that is not JSON is not (CheckJSON:
// path:LINE:COL and why, a comment's or a trailing comma's fix), as
// `toolgate servers` and `import --into` say it; the edit said only "the
// file is not valid JSON: fix it first".
func checkDocs(docs []Doc) error {
	for _, d := range docs {
		if err := CheckJSON(d.Path, d.Data); err != nil {
			return err
		}
	}
	return nil
}
