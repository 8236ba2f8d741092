package config

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/tidwall/gjson"
	"github.com/tidwall/pretty"
	"github.com/tidwall/sjson"

	"github.com/toolgate/toolgate/internal/datafile"
)

// Editing a config file keeps what toolgate does not own byte for byte:
// the other top-level keys (another application's settings in a shared
// claude_desktop_config.json), the toolgate section, the order of the
// servers, and the other servers' entries as they are laid out: the entry
// added or replaced is laid out indented like the file (pretty), in its
// place. Only a file whose servers do not stand each on a line of its own
// (one line, an empty object, an entry on the line of the object's brace)
// gets the mcpServers object laid out again whole.

// SetServer returns data with the mcpServers entry name set to entry (a
// JSON object): added after the others, or replacing the one of that name
// in its place.
func SetServer(data []byte, name string, entry json.RawMessage) ([]byte, error) {
	text, enc, err := editable(data)
	if err != nil {
		return nil, err
	}
	if out, ok := setInPlace(text, name, entry); ok {
		return enc.encode(out)
	}
	// ":" makes the name an object key: sjson reads "mcpServers.3" as an
	// array index when mcpServers is not there yet.
	out, err := sjson.SetRawBytes(text, "mcpServers.:"+escapePath(name), entry)
	if err != nil {
		return nil, fmt.Errorf("set mcpServers[%q]: %w", name, err)
	}
	return enc.encode(reindentServers(out))
}

// DeleteServer returns data without the mcpServers entries of name (every
// one, when the file holds the key twice), and whether there was one.
func DeleteServer(data []byte, name string) ([]byte, bool, error) {
	text, enc, err := editable(data)
	if err != nil {
		return nil, false, err
	}
	path := "mcpServers." + escapePath(name)
	if !gjson.GetBytes(text, path).Exists() {
		return data, false, nil
	}
	servers, _, inPlace := serverLines(text)
	// Each entry of the name: a file that holds its key twice (a paste,
	// "a" beside "\u0061") kept the last, which the gateway would run.
	keys := 0
	servers.ForEach(func(_, _ gjson.Result) bool { keys++; return true })
	out := text
	for range keys {
		if !gjson.GetBytes(out, path).Exists() {
			break
		}
		if out, err = sjson.DeleteBytes(out, path); err != nil {
			return nil, false, fmt.Errorf("delete mcpServers[%q]: %w", name, err)
		}
	}
	// sjson takes the entry out with its line and comma: the others stay
	// as they were laid out, unless none is left ({} again).
	if _, _, left := serverLines(out); !inPlace || !left {
		out = reindentServers(out)
	}
	out, err = enc.encode(out)
	return out, err == nil, err
}

// serverLines returns the mcpServers object of a file of several lines
// whose entries each begin a line of their own, and the indentation of
// the last entry's line; ok false for any other file (one line, no
// entry, an entry on the line of the object's brace or of another entry).
func serverLines(text []byte) (servers gjson.Result, indent string, ok bool) {
	servers = gjson.GetBytes(text, "mcpServers")
	if !servers.IsObject() || servers.Index <= 0 || !bytes.Contains(text, []byte("\n")) {
		return servers, "", false
	}
	ok = true
	servers.ForEach(func(k, _ gjson.Result) bool {
		indent, ok = lineIndent(text, k.Index)
		return ok
	})
	return servers, indent, ok && indent != ""
}

// lineIndent is the white space before at on its line, and whether only
// white space comes before it there.
func lineIndent(text []byte, at int) (string, bool) {
	before := text[bytes.LastIndexByte(text[:at], '\n')+1 : at]
	return string(before), len(bytes.TrimLeft(before, " \t")) == 0
}

// setInPlace sets server name's entry in a file laid out as serverLines
// takes it, touching no other entry: a replaced entry in the place of the
// old one, a new one after the last, each laid out at the indentation of
// the entries' lines. ok false for a file laid out otherwise.
func setInPlace(text []byte, name string, entry json.RawMessage) ([]byte, bool) {
	servers, indent, ok := serverLines(text)
	if !ok {
		return nil, false
	}
	// The unit: what the entries' lines are indented by past the line
	// that holds the "mcpServers" key.
	line, _ := lineIndent(text, servers.Index)
	outer := line[:len(line)-len(strings.TrimLeft(line, " \t"))]
	unit, found := strings.CutPrefix(indent, outer)
	if !found || unit == "" {
		unit = "  "
	}
	nl := []byte("\n")
	if bytes.Contains(text, []byte("\r\n")) {
		nl = []byte("\r\n") // a file of Windows line ends keeps them
	}
	laidOut := pretty.PrettyOptions(entry, &pretty.Options{Width: 80, Prefix: indent, Indent: unit, SortKeys: false})
	laidOut = bytes.ReplaceAll(bytes.TrimRight(bytes.TrimPrefix(laidOut, []byte(indent)), "\n"), []byte("\n"), nl)

	var old, last gjson.Result
	servers.ForEach(func(k, v gjson.Result) bool {
		if !old.Exists() && k.String() == name {
			old = v
		}
		last = v
		return true
	})
	out := make([]byte, 0, len(text)+len(laidOut)+len(name)+len(indent)+8)
	if old.Exists() {
		out = append(out, text[:old.Index]...)
		out = append(out, laidOut...)
		return append(out, text[old.Index+len(old.Raw):]...), true
	}
	key, err := json.Marshal(name)
	if err != nil {
		return nil, false
	}
	end := last.Index + len(last.Raw)
	out = append(out, text[:end]...)
	out = append(append(append(out, ','), nl...), indent...)
	out = append(append(append(out, key...), ": "...), laidOut...)
	return append(out, text[end:]...), true
}

// editable returns a file's text to edit (decodeText) and how to store
// it again; an error when it is not valid JSON.
func editable(data []byte) ([]byte, textEncoding, error) {
	text, enc, err := editText(data)
	if err != nil {
		return nil, enc, err
	}
	if !gjson.ValidBytes(text) {
		return nil, enc, errors.New("the file is not valid JSON: fix it first")
	}
	return text, enc, nil
}

// CheckJSON says where data, the file at path, is not valid JSON, as the
// gateway says it of its config (JSONError: path:LINE:COL), or nil. The
// edits above only say that it is not: a caller that reads a file to edit
// it (import --into) checks it first.
func CheckJSON(path string, data []byte) error {
	text, _, err := editText(data)
	if err != nil {
		return fmt.Errorf("%s: %w", docName(path), err)
	}
	// An object (or null, which an edit makes one): another value is
	// said as the gateway says it (got array), not in sjson's words.
	if err := json.Unmarshal(text, new(map[string]json.RawMessage)); err != nil {
		return JSONError(docName(path), text, err)
	}
	return nil
}

// editText is decodeText for an edit: a file of nothing but white space
// (touch toolgate.json) is edited as an empty config laid out on lines.
func editText(data []byte) ([]byte, textEncoding, error) {
	text, enc, err := decodeText(data)
	if err == nil && len(bytes.TrimSpace(text)) == 0 {
		text = []byte("{\n  \"mcpServers\": {}\n}\n")
	}
	return text, enc, err
}

// HasServer reports whether the document defines server name.
func HasServer(data []byte, name string) bool {
	_, ok := ServerEntry(data, name)
	return ok
}

// ServerNames returns the names of the document's servers, as written.
func ServerNames(data []byte) []string {
	if text, _, err := decodeText(data); err == nil {
		data = text
	}
	var names []string
	gjson.GetBytes(data, "mcpServers").ForEach(func(k, _ gjson.Result) bool {
		names = append(names, k.String())
		return true
	})
	return names
}

// ServerEntry returns the document's entry for server name, as written.
func ServerEntry(data []byte, name string) (json.RawMessage, bool) {
	if text, _, err := decodeText(data); err == nil {
		data = text
	}
	r := gjson.GetBytes(data, "mcpServers."+escapePath(name))
	return json.RawMessage(r.Raw), r.Exists()
}

// SameEntry reports whether two entries hold the same JSON (layout and
// key order aside).
func SameEntry(a, b json.RawMessage) bool { return sameJSON(a, b) }

// reindentServers lays the mcpServers object out again, indented like the
// line that holds its key; a file on one line is left as it is.
func reindentServers(data []byte) []byte {
	res := gjson.GetBytes(data, "mcpServers")
	if !res.Exists() || res.Index <= 0 || !bytes.Contains(data, []byte("\n")) {
		return data
	}
	// The indentation of the line that holds the value's key, and the unit.
	lineStart := bytes.LastIndexByte(data[:res.Index], '\n') + 1
	line := data[lineStart:res.Index]
	indent := string(line[:len(line)-len(bytes.TrimLeft(line, " \t"))])
	unit := "  "
	if strings.HasPrefix(indent, "\t") {
		unit = "\t"
	} else if indent != "" {
		unit = indent
	}
	raw := pretty.PrettyOptions([]byte(res.Raw), &pretty.Options{Width: 80, Prefix: indent, Indent: unit, SortKeys: false})
	raw = bytes.TrimRight(bytes.TrimPrefix(raw, []byte(indent)), "\n")
	if bytes.Contains(data, []byte("\r\n")) {
		// A file of Windows line ends keeps them: the object laid out
		// again had "\n" in a file of "\r\n".
		raw = bytes.ReplaceAll(raw, []byte("\n"), []byte("\r\n"))
	}
	out := make([]byte, 0, len(data)+len(raw))
	out = append(out, data[:res.Index]...)
	out = append(out, raw...)
	return append(out, data[res.Index+len(res.Raw):]...)
}

// escapePath escapes a key for an sjson/gjson path.
func escapePath(key string) string {
	var b strings.Builder
	for _, r := range key {
		if strings.ContainsRune(`.*?|#@\!=<>%:`, r) {
			b.WriteByte('\\')
		}
		b.WriteRune(r)
	}
	return b.String()
}

// Edit changes the config files at paths in one read-modify-write that no
// other edit interleaves with: it holds the locks of LockFiles, reads the
// files, lets change return the new documents and the indexes of those it
// changed, and writes those (WriteFile). Without it two edits at once (two
// `toolgate servers add`, a client's toolgate__add_server beside one) each
// read the file before the other wrote it, and one change was lost: 20
// adds run together left 16 servers.
//
// A hand edit takes no lock: a file saved (by an editor, a script) after
// Edit read it and before Edit wrote it lost that save (2 of 300 saves
// made while a client ran add_server 60 times). So before writing, Edit
// reads each file it changed again, and one that is no longer what change
// was given is edited again from what it now holds (change runs again:
// it must only compute), up to editTries times; then nothing is written
// and the error says so. What is saved in the instant between that check
// and the rename is still lost: the window is the rename's, not the
// edit's.
func Edit(paths []string, change func([]Doc) ([]Doc, []int, error)) ([]Doc, []int, error) {
	if err := ReadOnce(paths...); err != nil {
		return nil, nil, err // reading it would block (a FIFO), and writing it reach no file
	}
	unlock := LockFiles(paths)
	defer unlock()
	for try := 1; ; try++ {
		docs, err := ReadDocs(paths)
		if err != nil {
			return nil, nil, err
		}
		read := make([][]byte, len(docs))
		for i, d := range docs {
			read[i] = bytes.Clone(d.Data)
		}
		docs, changed, err := change(docs)
		if err != nil {
			return nil, nil, err
		}
		// The new files are written beside the old ones first, so that
		// only a rename follows the check.
		var pending []*pendingFile
		drop := func() {
			for _, w := range pending {
				w.drop()
			}
		}
		for _, i := range changed {
			w, err := prepareFile(docs[i].Path, docs[i].Data)
			if err != nil {
				drop()
				return nil, nil, err
			}
			pending = append(pending, w)
		}
		if p := savedMeanwhile(docs, changed, read); p != "" {
			drop()
			if try < editTries {
				continue
			}
			return nil, nil, fmt.Errorf("%s was saved again each of the %d times this edit was made (an editor or another program writing it meanwhile), so nothing was written: try again once it is not being written", p, editTries)
		}
		for k, w := range pending {
			if err := w.commit(); err != nil {
				pending = pending[k+1:]
				drop()
				return nil, nil, err
			}
		}
		return docs, changed, nil
	}
}

// editTries is how many times Edit edits a file saved by someone else while
// it was being edited before it gives up.
const editTries = 5

// savedMeanwhile is the path of the first document of changed whose file
// no longer holds what was read of it (read, by index), or "".
func savedMeanwhile(docs []Doc, changed []int, read [][]byte) string {
	for _, i := range changed {
		if i < 0 || i >= len(read) {
			continue
		}
		if now, err := readFile(docs[i].Path); err != nil || !bytes.Equal(now, read[i]) {
			return docs[i].Path
		}
	}
	return ""
}

// LockFiles takes the locks that order the edits of the config files at
// paths, between processes and within one, and returns their release: a
// flock on each folder the files are in (a symlink's target's), taken in
// order. The files themselves are replaced by rename, so a lock on one
// would be on the inode it replaces; a lock file beside them would be
// litter in the user's folder. A folder that cannot be locked (not
// readable, a file system without flock) is edited without: the lock only
// orders toolgate's own edits, and failing the edit for it would be worse.
func LockFiles(paths []string) func() {
	var dirs []string
	for _, p := range paths {
		if t, err := filepath.EvalSymlinks(p); err == nil {
			p = t
		}
		if d, err := filepath.Abs(filepath.Dir(p)); err == nil {
			dirs = append(dirs, d)
		}
	}
	slices.Sort(dirs)
	var unlocks []func()
	for _, d := range slices.Compact(dirs) {
		if unlock, err := datafile.LockDir(d); err == nil {
			unlocks = append(unlocks, unlock)
		}
	}
	return func() {
		for _, unlock := range slices.Backward(unlocks) {
			unlock()
		}
	}
}

// WriteFile replaces the file at path with data atomically: a temporary
// file in the same folder, renamed over it, so a reader (the gateway's
// watcher) sees the old content or the new, never half. It keeps the
// file's permissions (written by root, its owner: datafile.GiveToOwner) and
// writes through a symlink to its target.
func WriteFile(path string, data []byte) error {
	w, err := prepareFile(path, data)
	if err != nil {
		return err
	}
	return w.commit()
}

// pendingFile is a file's new content written to a temporary file beside
// it, for commit to rename over it (or drop to remove).
type pendingFile struct{ path, target, tmp string }

// prepareFile writes data to a temporary file beside path's target, with
// its permissions and owner.
func prepareFile(path string, data []byte) (*pendingFile, error) {
	target := path
	if t, err := filepath.EvalSymlinks(path); err == nil {
		target = t
	}
	mode := os.FileMode(0o600)
	if fi, err := os.Stat(target); err == nil {
		mode = fi.Mode().Perm()
	}
	tmp, err := os.CreateTemp(filepath.Dir(target), "."+filepath.Base(target)+".*")
	if err != nil {
		return nil, fmt.Errorf("write %s: %w", path, err)
	}
	datafile.GiveToOwner(tmp, target)
	_, err = tmp.Write(data)
	if err == nil {
		err = tmp.Chmod(mode)
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(tmp.Name())
		return nil, fmt.Errorf("write %s: %w", path, err)
	}
	return &pendingFile{path: path, target: target, tmp: tmp.Name()}, nil
}

// commit renames the new content over the file.
func (w *pendingFile) commit() error {
	if err := os.Rename(w.tmp, w.target); err != nil {
		os.Remove(w.tmp)
		return fmt.Errorf("write %s: %w", w.path, err)
	}
	return nil
}

// drop removes the new content, unused.
func (w *pendingFile) drop() { os.Remove(w.tmp) }
