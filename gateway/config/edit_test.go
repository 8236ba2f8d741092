package config

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
)

// Adding and removing a server keeps every other key of the file as it
// was written, and the result still parses.
func TestSetDeleteServerKeepsOtherKeys(t *testing.T) {
	in := `{
  "globalShortcut": "Ctrl+Space",
  "mcpServers": {
    "memory": {"command": "npx", "args": ["-y", "@modelcontextprotocol/server-memory"]},
    "remote": {"url": "https://a.example/mcp"}
  },
  "toolgate": {"callTimeout": "60s",   "search": {"mode": "hybrid"}}
}
`
	out, err := SetServer([]byte(in), "fs-2", json.RawMessage(`{"command":"node","args":["fs.js","/tmp"]}`))
	if err != nil {
		t.Fatal(err)
	}
	s := string(out)
	for _, keep := range []string{`"globalShortcut": "Ctrl+Space",`, `"toolgate": {"callTimeout": "60s",   "search": {"mode": "hybrid"}}`} {
		if !strings.Contains(s, keep) {
			t.Errorf("lost %s:\n%s", keep, s)
		}
	}
	if i, j, k := strings.Index(s, `"memory"`), strings.Index(s, `"remote"`), strings.Index(s, `"fs-2"`); !(i < j && j < k) {
		t.Errorf("servers out of order:\n%s", s)
	}
	if !strings.Contains(s, "\n    \"fs-2\": {") {
		t.Errorf("not indented like the file:\n%s", s)
	}
	f, err := Parse(out, "", env())
	if err != nil || len(f.Servers()) != 3 || f.MCPServers["fs-2"].Args[1] != "/tmp" || f.Toolgate.Search.Mode != "hybrid" {
		t.Fatalf("after SetServer: %v\n%s", err, s)
	}
	if !HasServer(out, "fs-2") || HasServer(out, "nope") {
		t.Error("HasServer")
	}

	out, found, err := DeleteServer(out, "memory")
	if err != nil || !found {
		t.Fatalf("DeleteServer: %v %v", found, err)
	}
	if _, found, _ := DeleteServer(out, "memory"); found {
		t.Error("deleted twice")
	}
	f, err = Parse(out, "", env())
	if err != nil || len(f.Servers()) != 2 || !strings.Contains(string(out), `"globalShortcut": "Ctrl+Space"`) {
		t.Fatalf("after DeleteServer: %v\n%s", err, out)
	}
	if _, err := SetServer([]byte(`{"mcpServers": `), "x", json.RawMessage(`{}`)); err == nil {
		t.Error("SetServer on broken JSON")
	}
}

// A server named with digits alone is a key of the mcpServers object, also
// when the file has none yet: sjson took "mcpServers.3" as an array index
// and wrote [null,null,null,{…}] (padding up to 100,000 elements, then an
// error), so `toolgate servers add 3` into {} was refused as "mcpServers:
// got an array".
func TestSetServerDigitName(t *testing.T) {
	for _, in := range []string{`{}`, `{"mcpServers": {"a": {"command": "x"}}}`} {
		for _, name := range []string{"3", "99999999", "0"} {
			out, err := SetServer([]byte(in), name, json.RawMessage(`{"command":"node"}`))
			if err != nil {
				t.Fatalf("SetServer(%s, %q): %v", in, name, err)
			}
			f, err := Parse(out, "", env())
			if err != nil || f.MCPServers[name].Command != "node" || len(out) > 200 {
				t.Fatalf("SetServer(%s, %q): %v\n%.200s", in, name, err, out)
			}
			if !HasServer(out, name) {
				t.Errorf("HasServer(%q) after SetServer into %s", name, in)
			}
			out, found, err := DeleteServer(out, name)
			if err != nil || !found || HasServer(out, name) {
				t.Errorf("DeleteServer(%q): found %v, %v\n%s", name, found, err, out)
			}
		}
	}
}

// WriteFile replaces a symlink's target, not the link, and keeps the mode.
func TestWriteFileThroughSymlink(t *testing.T) {
	dir := t.TempDir()
	target := filepath.Join(dir, "real.json")
	link := filepath.Join(dir, "link.json")
	if err := os.WriteFile(target, []byte("{}"), 0o640); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(target, link); err != nil {
		t.Fatal(err)
	}
	if err := WriteFile(link, []byte(`{"a":1}`)); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Lstat(link); err != nil || fi.Mode()&os.ModeSymlink == 0 {
		t.Errorf("the link was replaced: %v", err)
	}
	if b, _ := os.ReadFile(target); string(b) != `{"a":1}` {
		t.Errorf("target = %s", b)
	}
	if fi, _ := os.Stat(target); fi.Mode().Perm() != 0o640 {
		t.Errorf("mode = %v", fi.Mode().Perm())
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 2 {
		t.Errorf("temporary files left: %v", entries)
	}
}

// TestEditConcurrent: edits made at once, in goroutines here as in
// processes, each see the others' changes: none is lost, none runs inside
// another (each yields inside its change, to let another in if it could),
// and no lock file is left in the folder. Through a symlink too, whose
// target's folder is locked.
func TestEditConcurrent(t *testing.T) {
	dir := t.TempDir()
	target := filepath.Join(dir, "real.json")
	if err := os.WriteFile(target, []byte("{\n  \"mcpServers\": {}\n}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(t.TempDir(), "toolgate.json")
	if err := os.Symlink(target, link); err != nil {
		t.Fatal(err)
	}
	var inside, overlaps atomic.Int32
	var wg sync.WaitGroup
	for i := range 20 {
		path := target
		if i%2 == 1 {
			path = link
		}
		wg.Go(func() {
			_, _, err := Edit([]string{path}, func(docs []Doc) ([]Doc, []int, error) {
				if inside.Add(1) > 1 {
					overlaps.Add(1)
				}
				defer inside.Add(-1)
				for range 100 {
					runtime.Gosched()
				}
				docs, d, err := AddServer(docs, Server{Name: fmt.Sprintf("s%02d", i), Command: "node"}, nil)
				return docs, []int{d}, err
			})
			if err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	b, err := os.ReadFile(target)
	if err != nil {
		t.Fatal(err)
	}
	var doc struct{ MCPServers map[string]json.RawMessage }
	if err := json.Unmarshal(b, &doc); err != nil {
		t.Fatal(err)
	}
	if len(doc.MCPServers) != 20 || overlaps.Load() != 0 {
		t.Errorf("20 edits at once left %d servers, %d ran inside another:\n%s", len(doc.MCPServers), overlaps.Load(), b)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 1 {
		t.Errorf("files left beside the config: %v", entries)
	}
}

// A file of Windows line ends keeps them where the servers are laid out
// again: `servers add` wrote "\n" lines into a file of "\r\n" ones.
func TestSetServerKeepsCRLF(t *testing.T) {
	data := []byte("{\r\n\t\"mcpServers\": {\r\n\t\t\"a\": {\"command\": \"node\", \"args\": [\"x\"]}\r\n\t},\r\n\t\"other\": 1\r\n}\r\n")
	out, err := SetServer(data, "b", json.RawMessage(`{"command":"node","args":["y"]}`))
	if err != nil {
		t.Fatal(err)
	}
	if n := bytes.Count(out, []byte("\n")); n != bytes.Count(out, []byte("\r\n")) || !bytes.Contains(out, []byte(`"b"`)) {
		t.Errorf("mixed line ends (%d \\n, %d \\r\\n):\n%q", n, bytes.Count(out, []byte("\r\n")), out)
	}
	out, _, err = DeleteServer(out, "a")
	if err != nil || bytes.Count(out, []byte("\n")) != bytes.Count(out, []byte("\r\n")) {
		t.Errorf("after a delete: %v\n%q", err, out)
	}
}

// AddServer refuses a name that differs from a server's only in case, in
// any of the documents, naming both; the config would not load with both.
func TestAddServerCaseTwin(t *testing.T) {
	docs := []Doc{
		{Path: "user.json", Data: []byte(`{"mcpServers": {"everything": {"command": "npx"}}}`)},
		{Path: "project.json", Data: []byte(`{"mcpServers": {"memory": {"command": "npx"}}}`)},
	}
	for _, name := range []string{"Everything", "MEMORY"} {
		_, _, err := AddServer(docs, Server{Name: name, Command: "npx"}, env())
		twin := strings.ToLower(name)
		if err == nil || !strings.Contains(err.Error(), fmt.Sprintf(`a server named %q is in %s already, and %q differs from it only in case: tool IDs start with the server's name`, twin, map[string]string{"everything": "user.json", "memory": "project.json"}[twin], name)) || !strings.Contains(err.Error(), fmt.Sprintf("choose another name, or remove %q first", twin)) {
			t.Errorf("AddServer(%s): %v, want refused as a case twin of %s", name, err, twin)
		}
	}
	if _, _, err := AddServer(docs, Server{Name: "everything-2", Command: "npx"}, env()); err != nil {
		t.Errorf("AddServer(everything-2): %v", err)
	}
}

// TestAddServerSettings: AddServer writes settings into the entry as
// given, after the Server's keys, so that Parse reads them as it reads a
// file: a 0 maxResultBytes is refused, as the file's is (decoded into a
// Server it was the key left out). A command-line word is the JSON a file
// would hold (SettingValue): a number as written, anything else a string.
func TestAddServerSettings(t *testing.T) {
	for word, want := range map[string]string{"90": `90`, "-5": `-5`, "1.5": `1.5`, "2m": `"2m"`, "1MB": `"1MB"`, "de": `"de"`, "0x10": `"0x10"`, "": `""`} {
		if got := string(SettingValue(word)); got != want {
			t.Errorf("SettingValue(%q) = %s, want %s", word, got, want)
		}
	}
	docs := []Doc{{Path: "c.json", Data: []byte(`{"mcpServers": {}}`)}}
	out, _, err := AddServer(docs, Server{Name: "b", Command: "npx", Language: "de"}, env(),
		Setting{"callTimeout", SettingValue("90")}, Setting{"maxResultBytes", SettingValue("2000")}, Setting{"keepAlive", nil})
	var flat bytes.Buffer
	if err != nil || json.Compact(&flat, out[0].Data) != nil || !strings.Contains(flat.String(), `{"command":"npx","language":"de","callTimeout":90,"maxResultBytes":2000}`) {
		t.Fatalf("AddServer with settings: %v\n%s", err, out[0].Data)
	}
	_, _, err = AddServer(docs, Server{Name: "b", Command: "npx"}, env(), Setting{"maxResultBytes", SettingValue("0")})
	if err == nil || !strings.Contains(err.Error(), `mcpServers["b"].maxResultBytes: 0 is out of range`) {
		t.Errorf("AddServer with maxResultBytes 0: %v", err)
	}
	if _, _, err = AddServer(docs, Server{Name: "b", Command: "npx"}, env(), Setting{"callTimout", SettingValue("1")}); err == nil {
		t.Error("AddServer took a setting that is no key of an entry")
	}
}

// AddServer refuses the built-in server's name, in any case, with the
// reason the config's load gives (NameProblem), and a name to use instead;
// it read as a rule of characters ("use letters, digits …, and not
// \"toolgate\"").
func TestAddServerReservedName(t *testing.T) {
	docs := []Doc{{Path: "c.json", Data: []byte(`{"mcpServers": {}}`)}}
	for _, name := range []string{"toolgate", "Toolgate", "TOOLGATE"} {
		_, _, err := AddServer(docs, Server{Name: name, Command: "npx"}, env())
		if err == nil || err.Error() != NameProblem(name) || !strings.Contains(err.Error(), fmt.Sprintf(`the name %q is reserved for the gateway's own management tools`, name)) ||
			!strings.Contains(err.Error(), fmt.Sprintf(`choose another name, e.g. %q`, name+"-server")) || strings.Contains(err.Error(), "letters, digits") {
			t.Errorf("AddServer(%s): %v", name, err)
		}
	}
	_, _, err := AddServer(docs, Server{Name: "a b", Command: "npx"}, env())
	if _, perr := Parse([]byte(`{"mcpServers": {"a b": {"command": "npx"}}}`), "", nil); err == nil || !strings.Contains(perr.Error(), err.Error()) {
		t.Errorf("AddServer(a b): %v; the load says %v", err, perr)
	}
	if _, _, err := AddServer(docs, Server{Name: "toolgate-server", Command: "npx"}, env()); err != nil {
		t.Errorf("AddServer(toolgate-server): %v", err)
	}
}

// TestEditKeepsASaveMadeMeanwhile: a file saved by hand (an editor, a
// script: no lock) after Edit read it and before Edit wrote it keeps that
// save: Edit reads the file again before writing, and edits what it now
// holds. It wrote the document it had read, with its change, over the
// save. One saved again at every try is left as saved, and the error says
// why nothing was written.
func TestEditKeepsASaveMadeMeanwhile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "toolgate.json")
	if err := os.WriteFile(path, []byte("{\n  \"mcpServers\": {}\n}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	saves := 0
	// save is the hand edit: a setting, and a layout of its own.
	save := func() {
		saves++
		doc := fmt.Sprintf("{\n    \"mcpServers\": {},\n    \"toolgate\": {\"callTimeout\": \"%ds\"}\n}\n", saves)
		if err := os.WriteFile(path, []byte(doc), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	add := func(name string, savesWhile int) error {
		calls := 0
		_, _, err := Edit([]string{path}, func(docs []Doc) ([]Doc, []int, error) {
			if calls++; calls <= savesWhile {
				save() // saved after Edit read it
			}
			docs, i, err := AddServer(docs, Server{Name: name, Command: "node"}, nil)
			return docs, []int{i}, err
		})
		return err
	}
	if err := add("a", 1); err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(path)
	if !HasServer(b, "a") || !strings.Contains(string(b), `"callTimeout": "1s"`) || !strings.Contains(string(b), "\n    \"toolgate\"") {
		t.Errorf("the save made during the edit is lost:\n%s", b)
	}
	err := add("b", editTries)
	b, _ = os.ReadFile(path)
	if err == nil || !strings.Contains(err.Error(), "nothing was written") || HasServer(b, "b") || !strings.Contains(string(b), fmt.Sprintf(`"callTimeout": "%ds"`, saves)) {
		t.Errorf("a file saved at every try: %v\n%s", err, b)
	}
}

// TestEditKeepsOtherEntries: adding, replacing or removing a server changes
// that entry alone, the others left as the file lays them out (the bundled
// example's one-line "args" arrays, a hand-written claude_desktop_config.json).
// The whole mcpServers object was laid out again at every edit, so the first
// `toolgate servers add` on examples/toolgate.json rewrote the three other
// entries' args over several lines.
func TestEditKeepsOtherEntries(t *testing.T) {
	example, err := os.ReadFile("../../examples/toolgate.json")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ name, in string }{
		{"example", string(example)},
		{"CRLF and tabs", strings.ReplaceAll(strings.ReplaceAll(string(example), "  ", "\t"), "\n", "\r\n")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := []byte(tc.in)
			nl, indent := "\n", "    "
			if tc.name != "example" {
				nl, indent = "\r\n", "\t\t"
			}
			out, err := SetServer(in, "weather", json.RawMessage(`{"command":"node","args":["weather.js"]}`))
			if err != nil {
				t.Fatal(err)
			}
			// A short entry is laid out on one line, as pretty lays it out.
			added := "," + nl + indent + `"weather": { "command": "node", "args": ["weather.js"] }`
			if i := bytes.Index(out, []byte(added)); i < 0 || string(out[:i])+string(out[i+len(added):]) != tc.in {
				t.Errorf("SetServer of a new server: want the file with %q after the last entry, nothing else changed; got\n%s", added, out)
			}
			// Replaced: in its place, laid out at its indentation, the
			// others as they were.
			repl, err := SetServer(out, "memory", json.RawMessage(`{"command":"node","args":["m.js"],"description":"a knowledge graph of entities and their relations"}`))
			if err != nil {
				t.Fatal(err)
			}
			old, _ := ServerEntry(out, "memory")
			unit := indent[:len(indent)/2]
			want := bytes.Replace(out, old, []byte(`{`+nl+indent+unit+`"command": "node",`+nl+indent+unit+`"args": ["m.js"],`+nl+indent+unit+
				`"description": "a knowledge graph of entities and their relations"`+nl+indent+"}"), 1)
			if !bytes.Equal(repl, want) {
				t.Errorf("SetServer of a server there: got\n%s\nwant\n%s", repl, want)
			}
			// Removed: the file as it was before the add.
			back, found, err := DeleteServer(out, "weather")
			if err != nil || !found || string(back) != tc.in {
				t.Errorf("DeleteServer of the server added: %v %v; want the file as it was, got\n%s", found, err, back)
			}
			if f, err := Parse(repl, "", env()); err != nil || len(f.Servers()) != 4 || f.MCPServers["memory"].Args[0] != "m.js" {
				t.Errorf("the file edited does not read back: %v\n%s", err, repl)
			}
		})
	}
}

// TestRemoveServerDefinedTwice: a file that holds a server's key twice
// ("a", or "a" and "\u0061", which read as one name), which the gateway
// refuses to load, has every entry of the name removed. Only the first
// was: `toolgate servers remove a` said "removed server a", and the file,
// valid again, started the a it kept.
func TestRemoveServerDefinedTwice(t *testing.T) {
	for _, in := range []string{
		"{\n  \"mcpServers\": {\n    \"a\": {\"command\": \"x\"},\n    \"b\": {\"command\": \"z\"},\n    \"a\": {\"command\": \"y\"}\n  }\n}\n",
		"{\n  \"mcpServers\": {\n    \"\\u0061\": {\"command\": \"x\"},\n    \"a\": {\"command\": \"y\"},\n    \"b\": {\"command\": \"z\"}\n  }\n}\n",
		`{"mcpServers": {"a": {"command": "x"}, "a": {"command": "y"}, "b": {"command": "z"}}}`,
		`{"mcpServers": {"b": {"command": "z"}, "a": {"command": "x"}, "a": {"command": "y"}, "a": {"command": "w"}}}`,
	} {
		docs, changed, err := RemoveServer([]Doc{{Path: "c.json", Data: []byte(in)}}, "a", env())
		if err != nil || len(changed) != 1 {
			t.Fatalf("RemoveServer: %v %v\n%s", changed, err, in)
		}
		out := docs[0].Data
		f, err := Parse(out, "", env())
		if err != nil || HasServer(out, "a") || len(f.Servers()) != 1 || f.MCPServers["b"].Command != "z" {
			t.Errorf("removing a server defined twice: want only b left, got %v\n%s", err, out)
		}
	}
}

// TestEditSaysWhereNotJSON: adding or removing a server in a file that is
// not JSON (VS Code's comments, a trailing comma) says where and why, as
// `toolgate servers` and `import --into` say it of the same file. It said
// "c.json: the file is not valid JSON: fix it first", and no more.
func TestEditSaysWhereNotJSON(t *testing.T) {
	docs := []Doc{{Path: "c.json", Data: []byte("{\n  // mine\n  \"mcpServers\": {\"a\": {\"command\": \"x\"}}\n}\n")}}
	_, _, err := AddServer(docs, Server{Name: "b", Command: "node"}, env())
	if err == nil || !strings.Contains(err.Error(), "c.json:2:3") || !strings.Contains(err.Error(), "comments are not JSON") {
		t.Errorf("AddServer to a file with a comment: %v; want where (c.json:2:3) and why", err)
	}
	_, _, err = RemoveServer(docs, "a", env())
	if err == nil || !strings.Contains(err.Error(), "c.json:2:3") || !strings.Contains(err.Error(), "comments are not JSON") {
		t.Errorf("RemoveServer from a file with a comment: %v; want where (c.json:2:3) and why", err)
	}
}

// An empty config file (touch toolgate.json) takes a server as {} does; a
// file whose JSON is not an object is said as the gateway says it, where
// sjson's words ("cannot set array element for non-numeric key") were
// said before.
func TestEditEmptyOrNotObject(t *testing.T) {
	for _, data := range []string{"", " \n", "\ufeff"} {
		docs := []Doc{{Path: "c.json", Data: []byte(data)}}
		out, _, err := AddServer(docs, Server{Name: "b", Command: "node"}, env())
		if err != nil {
			t.Fatalf("AddServer to a file of %q: %v", data, err)
		}
		if names := ServerNames(out[0].Data); !slices.Equal(names, []string{"b"}) {
			t.Errorf("AddServer to a file of %q wrote %q: servers %q", data, out[0].Data, names)
		}
	}
	for data, got := range map[string]string{"[]": "got array", "\n  \"x\"": "got string", "3": "got number"} {
		docs := []Doc{{Path: "c.json", Data: []byte(data)}}
		_, _, err := AddServer(docs, Server{Name: "b", Command: "node"}, env())
		if err == nil || !strings.Contains(err.Error(), "c.json:") || !strings.Contains(err.Error(), `must be a JSON object like {"mcpServers": {...}}, `+got) {
			t.Errorf("AddServer to a file of %q: %v; want c.json:LINE:COL: the file must be a JSON object …, %s", data, err, got)
		}
	}
}
