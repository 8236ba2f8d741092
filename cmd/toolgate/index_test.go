package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/toolgate/toolgate/gateway/backend/backendtest"
	"github.com/toolgate/toolgate/gateway/config"
	"github.com/toolgate/toolgate/gateway/live"
	"github.com/toolgate/toolgate/index"
	"github.com/toolgate/toolgate/index/catalog"
	"github.com/toolgate/toolgate/internal/dirs"
	"github.com/toolgate/toolgate/internal/testenv"
)

func writeToolsFile(t *testing.T, dir string, n int, change string) string {
	t.Helper()
	var b strings.Builder
	for i := 0; i < n; i++ {
		desc := fmt.Sprintf("List the files of project %d in a directory.", i)
		if i == 3 {
			desc += change
		}
		line, _ := json.Marshal(map[string]any{
			"server": fmt.Sprintf("srv%d", i%3), "name": fmt.Sprintf("list_files_%d", i), "description": desc,
			"input_schema": map[string]any{"type": "object", "properties": map[string]any{"path": map[string]any{"type": "string"}}},
		})
		b.Write(line)
		b.WriteByte('\n')
	}
	b.WriteString(`{"server": "odd server", "name": "search & replace", "description": "Replace text in files.", "input_schema": null}` + "\n")
	p := filepath.Join(dir, "tools.jsonl")
	if err := os.WriteFile(p, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func runIndexJSON(t *testing.T, g *globals, tools string) indexResult {
	t.Helper()
	var out, errOut bytes.Buffer
	if err := runIndex(context.Background(), g, &indexFlags{tools: tools, json: true, noVectors: true}, &out, &errOut); err != nil {
		t.Fatalf("index: %v\n%s", err, errOut.String())
	}
	var r indexResult
	if err := json.Unmarshal(out.Bytes(), &r); err != nil {
		t.Fatalf("index --json output %q: %v", out.String(), err)
	}
	return r
}

func TestIndexAndSearchCommands(t *testing.T) {
	data := t.TempDir()
	g := &globals{dataDir: data}
	tools := writeToolsFile(t, t.TempDir(), 20, "")

	r := runIndexJSON(t, g, tools)
	if r.StateBefore != "missing" || !r.Rebuilt || r.Tools != 21 || r.Added != 21 || r.Model != "" || r.Generation != 1 || r.Incremental || r.Reindexed != 21 {
		t.Errorf("first index: %+v", r)
	}
	r = runIndexJSON(t, g, tools)
	if r.StateBefore != "up to date" || r.Rebuilt {
		t.Errorf("second index: %+v", r)
	}
	changed := writeToolsFile(t, t.TempDir(), 19, " Recursively.")
	r = runIndexJSON(t, g, changed)
	// One changed and one removed of 21: Bleve gets those two documents,
	// not a rebuild.
	if r.StateBefore != "catalog changed" || r.Changed != 1 || r.Removed != 1 || r.Added != 0 || r.Generation != 2 || !r.Incremental || r.Reindexed != 2 {
		t.Errorf("changed index: %+v", r)
	}

	// Text output.
	var out bytes.Buffer
	if err := runIndex(context.Background(), g, &indexFlags{tools: changed, noVectors: true}, &out, &out); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "state before: up to date") {
		t.Errorf("text output:\n%s", out.String())
	}
	out.Reset()
	if err := runIndex(context.Background(), g, &indexFlags{tools: tools, noVectors: true}, &out, &out); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "keyword:      2 documents re-indexed (incremental update)") {
		t.Errorf("text output of an update:\n%s", out.String())
	}

	// search, BM25 (no embedder needed), JSON and table.
	out.Reset()
	if err := runSearch(context.Background(), g, &searchFlags{mode: "bm25", limit: 3, json: true}, "replace text", &out, &out); err != nil {
		t.Fatal(err)
	}
	var so searchOutput
	if err := json.Unmarshal(out.Bytes(), &so); err != nil {
		t.Fatalf("search --json %q: %v", out.String(), err)
	}
	if so.Mode != "bm25" || len(so.Tools) == 0 || so.Tools[0].Name != "odd server__search & replace" || so.Tools[0].Keyword <= 0 {
		t.Errorf("search: %+v", so)
	}
	out.Reset()
	if err := runSearch(context.Background(), g, &searchFlags{mode: "bm25", limit: 2, server: "srv1"}, "list files", &out, &out); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "srv1__list_files_") || strings.Contains(out.String(), "srv0__") || !strings.Contains(out.String(), "KEYWORD") {
		t.Errorf("search table:\n%s", out.String())
	}
}

func TestIndexCommandErrors(t *testing.T) {
	g := &globals{dataDir: t.TempDir()}
	bad := filepath.Join(t.TempDir(), "bad.jsonl")
	os.WriteFile(bad, []byte(`{"server":"a","name":"b"}`+"\n\n"+`{"server":"a","name":}`+"\n"), 0o644)
	err := runIndex(context.Background(), g, &indexFlags{tools: bad, noVectors: true}, &bytes.Buffer{}, &bytes.Buffer{})
	var ue usageError
	if err == nil || !strings.Contains(err.Error(), "bad.jsonl:3:") || !errors.As(err, &ue) {
		t.Errorf("bad JSONL: %v, want a usage error (exit status 2) naming the line", err)
	}
	// A queries file given as the tools file is said to be one, as eval
	// says it: it read `queries.jsonl:1: missing "server"`.
	qp := filepath.Join(t.TempDir(), "queries.jsonl")
	os.WriteFile(qp, []byte(`{"query": "read a file", "relevant": ["fs__read_file"]}`+"\n"), 0o644)
	err = runIndex(context.Background(), g, &indexFlags{tools: qp, noVectors: true}, &bytes.Buffer{}, &bytes.Buffer{})
	if want := "--tools " + qp + ` looks like a queries file (line 1 has "query"), not a tools file: a queries file is for eval --queries (with its tools file as --tools) or learn --queries (` + qp + `:1: missing "server")`; err == nil || err.Error() != want || !errors.As(err, &ue) {
		t.Errorf("queries file as --tools: %v, want the usage error %q", err, want)
	}
	err = runIndex(context.Background(), g, &indexFlags{}, &bytes.Buffer{}, &bytes.Buffer{})
	if _, ok := err.(usageError); !ok {
		t.Errorf("no --tools/--config: %v", err)
	}
	err = runSearch(context.Background(), g, &searchFlags{limit: 5}, "x", &bytes.Buffer{}, &bytes.Buffer{})
	if err == nil || !strings.Contains(err.Error(), "toolgate index") {
		t.Errorf("search without an index: %v", err)
	}
}

// TestIndexKilledMidBuild kills a real `toolgate index` process at several
// moments of a rebuild and checks that the index always opens, holding
// either the old or the new catalog in full.
func TestIndexKilledMidBuild(t *testing.T) {
	data := t.TempDir()
	dir := t.TempDir()
	first := writeToolsFile(t, dir, 3000, "")
	oldTools, _ := catalog.ReadFile(first) // the last catalog that was fully indexed
	runIndexJSON(t, &globals{dataDir: data}, first)

	for _, delay := range []time.Duration{20 * time.Millisecond, 150 * time.Millisecond, 400 * time.Millisecond, 800 * time.Millisecond, 1500 * time.Millisecond} {
		t.Run(delay.String(), func(t *testing.T) {
			newFile := writeToolsFile(t, t.TempDir(), 3000+int(delay/time.Millisecond), " Changed.")
			newTools, _ := catalog.ReadFile(newFile)
			cmd := toolgateCmd(t, data, "index", "--bm25-only", "--tools", newFile, "--log-level", "error")
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			time.Sleep(delay)
			_ = cmd.Process.Signal(syscall.SIGKILL)
			_ = cmd.Wait()

			ix, err := index.Open(index.Dir(data), nil)
			if err != nil {
				t.Fatalf("after kill at %v: %v", delay, err)
			}
			defer ix.Close()
			fp := catalog.Fingerprint(ix.Tools())
			switch fp {
			case catalog.Fingerprint(oldTools):
				t.Logf("killed at %v: previous index in place", delay)
			case catalog.Fingerprint(newTools):
				t.Logf("killed at %v: new index in place", delay)
				oldTools = newTools
			default:
				t.Fatalf("after kill at %v: index holds %d tools, neither catalog", delay, ix.Len())
			}
			if hits, err := ix.Keyword("replace text", 1, ""); err != nil || len(hits) != 1 {
				t.Errorf("search after kill: %v %v", hits, err)
			}
		})
	}
}

// TestIndexLockedByAnotherRun holds the lock from this process and runs a
// real `toolgate index`, which must refuse with a clear message.
func TestIndexLockedByAnotherRun(t *testing.T) {
	data := t.TempDir()
	ixDir := index.Dir(data)
	os.MkdirAll(ixDir, 0o755)
	f, err := os.OpenFile(filepath.Join(ixDir, "LOCK"), os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		t.Fatal(err)
	}
	tools := writeToolsFile(t, t.TempDir(), 5, "")
	out, err := toolgateCmd(t, data, "index", "--bm25-only", "--tools", tools).CombinedOutput()
	if err == nil || !strings.Contains(string(out), "another `toolgate index`") {
		t.Errorf("second index run: %v\n%s", err, out)
	}
}

// An index of a tools file, or of another config, on a data folder a
// gateway serves keeps the index that gateway starts from: its config's
// generation stays in the index folder (index.Manifest.Others), and its
// next start opens it (index.OpenFor). Such an index used to replace it,
// with a warning to give the other catalog a --data-dir of its own: the
// gateway's next start was a cold one, which embedded again what the
// other catalog lacked.
func TestIndexToolsBesideAGateway(t *testing.T) {
	data := t.TempDir()
	cfg := fakeConfig(t, map[string]string{"fake": backendtest.ModeNormal}, nil)
	_, _, stop := startGatewayStop(t, data, cfg)
	file, err := config.Load(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ixDir := index.Dir(data)
	theirs := func(what string) {
		t.Helper()
		ix, err := index.OpenFor(ixDir, []string{"fake", "toolgate"}, &index.Options{Config: file.Source()})
		if err != nil {
			t.Fatalf("after %s: %v", what, err)
		}
		defer ix.Close()
		if got := index.ServersOf(ix.Tools()); !slices.Equal(got, []string{"fake", "toolgate"}) {
			t.Errorf("after %s, the gateway's next start would open an index of %v", what, got)
		}
	}
	theirs("its start")
	tools := writeToolsFile(t, t.TempDir(), 5, "")
	if _, stderr, err := runToolgate(t, data, "index", "--bm25-only", "--tools", tools); err != nil || strings.Contains(stderr, "a gateway runs") {
		t.Errorf("index --tools beside a gateway: %v\n%s", err, stderr)
	}
	theirs("index --tools")
	other := fakeConfig(t, map[string]string{"other": backendtest.ModeNormal}, nil)
	if _, stderr, err := runToolgate(t, data, "index", "--bm25-only", "--config", other); err != nil || strings.Contains(stderr, "a gateway runs") {
		t.Errorf("index --config of another config beside a gateway: %v\n%s", err, stderr)
	}
	theirs("index --config of another config")
	if m := readManifestFile(t, ixDir); len(m.Others) != 1 || m.Others[0].Config != file.Source() {
		t.Errorf("the index folder keeps %+v, want the gateway's generation alone (the tools file's names no config)", m.Others)
	}
	// The gateway started again: a warm start.
	stop()
	_, logs, _ := startGatewayStop(t, data, cfg)
	testenv.Eventually(t, "gateway ready", func() bool { return strings.Contains(logs.String(), "gateway ready") })
	if !strings.Contains(logs.String(), "warm=true") {
		t.Errorf("the gateway's start after another config's index was not a warm one:\n%s", logs)
	}
}

func readManifestFile(t *testing.T, ixDir string) index.Manifest {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(ixDir, "manifest.json"))
	if err != nil {
		t.Fatal(err)
	}
	var m index.Manifest
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	return m
}

// TestSearchUnknownServerIsUsageError: `toolgate search --server` with a
// server the index lacks is a usage error (exit status 2) naming the
// servers there are, as search_tools answers the same mistake; it used to
// print a warning and exit 0.
func TestSearchUnknownServerIsUsageError(t *testing.T) {
	data := t.TempDir()
	runIndexJSON(t, &globals{dataDir: data}, writeToolsFile(t, t.TempDir(), 3, ""))
	for _, args := range [][]string{
		{"search", "list files", "--server", "nope", "--mode", "bm25"},
		{"search", "list files", "--server", "nope", "--json"},
	} {
		out, err := toolgateCmd(t, data, args...).CombinedOutput()
		var ee *exec.ExitError
		want := `--server "nope": there is no server of that name in the index (servers: odd server, srv0, srv1, srv2)`
		if !errors.As(err, &ee) || ee.ExitCode() != 2 || !strings.Contains(string(out), want) {
			t.Errorf("toolgate %s: %v\n%s\nwant exit status 2 and %q", strings.Join(args, " "), err, out, want)
		}
	}
	// A server named in another case is that server, as search_tools
	// reads "server".
	if out, err := toolgateCmd(t, data, "search", "list files", "--server", "SRV1", "--mode", "bm25").CombinedOutput(); err != nil || !strings.Contains(string(out), "srv1__") || strings.Contains(string(out), "srv0__") {
		t.Errorf("toolgate search --server SRV1: %v\n%s\nwant srv1's tools alone", err, out)
	}
}

// TestIndexConfigLikeServe: `toolgate index` takes --config as serve does:
// -c for short, repeated to read several files as one (a later file's
// server replaces an earlier one of the same name), $TOOLGATE_CONFIG by
// default, which --tools overrides.
func TestIndexConfigLikeServe(t *testing.T) {
	user := fakeConfig(t, map[string]string{"a": "", "b": ""}, nil)
	project := fakeConfig(t, map[string]string{"c": "", "b": backendtest.ModeToolsChange}, nil) // its b has add_tool
	data := t.TempDir()
	cmd := toolgateCmd(t, data, "index", "-c", user, "--config", project, "--bm25-only", "--json")
	cmd.Env = append(cmd.Env, "TOOLGATE_CONFIG=")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("index -c A --config B: %v\n%s", err, out)
	}
	ix, err := index.Open(index.Dir(data), nil)
	if err != nil {
		t.Fatal(err)
	}
	var servers []string
	for _, tl := range ix.Tools() {
		servers = append(servers, tl.Server)
	}
	slices.Sort(servers)
	servers = slices.Compact(servers)
	replaced := slices.ContainsFunc(ix.Tools(), func(tl catalog.Tool) bool { return tl.ID() == "b__add_tool" })
	ix.Close()
	if want := []string{"a", "b", "c", "toolgate"}; !slices.Equal(servers, want) || !replaced {
		t.Errorf("index -c A --config B: servers %v, b from the second file %v; want %v, true\n%s", servers, replaced, want, out)
	}

	// $TOOLGATE_CONFIG is the default; --tools given alone wins over it.
	tools := writeToolsFile(t, t.TempDir(), 3, "")
	cmd = toolgateCmd(t, data, "index", "--tools", tools, "--bm25-only", "--json")
	cmd.Env = append(cmd.Env, "TOOLGATE_CONFIG="+user)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Errorf("index --tools with $TOOLGATE_CONFIG set: %v\n%s", err, out)
	}
	cmd = toolgateCmd(t, data, "index", "--tools", tools, "-c", user)
	var ee *exec.ExitError
	if out, err := cmd.CombinedOutput(); !errors.As(err, &ee) || ee.ExitCode() != 2 || !strings.Contains(string(out), "exactly one of --tools") {
		t.Errorf("index --tools -c: %v\n%s\nwant exit status 2", err, out)
	}
}

// TestIndexConfigKeepsDescribed: `index --config` keeps what each server
// said of itself at its handshake in the data folder's state.json, as
// serve's backends do, so that the first start on that index names the
// servers as the next would in search_tools' description and a client's
// session starts without a list_changed once they connect. It kept
// nothing: the README's "build it first with toolgate index" start named
// the bundled everything by its tools, then told every client it changed.
func TestIndexConfigKeepsDescribed(t *testing.T) {
	cfg := fakeConfig(t, map[string]string{"a": ""}, nil)
	data := filepath.Join(t.TempDir(), "data") // not there yet: index makes it
	if out, err := toolgateCmd(t, data, "index", "-c", cfg, "--bm25-only").CombinedOutput(); err != nil {
		t.Fatalf("index -c: %v\n%s", err, out)
	}
	st, err := live.ReadState(live.StateFile(data))
	if err != nil {
		t.Fatal(err)
	}
	if want := map[string]string{"a": backendtest.Title}; !maps.Equal(st.Described, want) {
		t.Errorf("state.json's described after index --config: %v, want %v", st.Described, want)
	}
}

// TestIndexConfigWithAServerDown: `index --config` builds the index when a
// server cannot be listed, keeping that server's tools from the index
// before, and says so: a warning each, "unlisted" in --json, and exit
// status 3 (it was 0, so a script baking an index could not tell).
func TestIndexConfigWithAServerDown(t *testing.T) {
	data := t.TempDir()
	up := fakeConfig(t, map[string]string{"a": "", "b": ""}, nil)
	if out, err := toolgateCmd(t, data, "index", "-c", up, "--bm25-only").CombinedOutput(); err != nil {
		t.Fatalf("index with every server up: %v\n%s", err, out)
	}
	// c's last stderr line, in its error, holds a terminal escape.
	servers := map[string]any{
		"c": map[string]any{"command": "sh", "args": []string{"-c", `printf 'boom \033]0;pwned\007\n' >&2; exit 3`}},
	}
	for name, s := range map[string]config.Server{
		"a": backendtest.Command(t, ""),
		"b": backendtest.Command(t, backendtest.ModeCrashAtStart),
	} {
		servers[name] = map[string]any{"command": s.Command, "env": s.Env}
	}
	b, err := json.Marshal(map[string]any{"mcpServers": servers})
	if err != nil {
		t.Fatal(err)
	}
	down := writeConfig(t, string(b))
	stdout, stderr, err := runToolgate(t, data, "index", "-c", down, "--bm25-only", "--json")
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != degradedExit {
		t.Fatalf("index with servers down: %v, want exit status %d\n%s", err, degradedExit, stderr)
	}
	if strings.ContainsAny(stderr, "\x1b\a") {
		t.Errorf("a backend's terminal escape reached stderr raw:\n%q", stderr)
	}
	// Each said once, in the command's words: the pool's "backend down"
	// and the server's stderr lines said it before (and again at
	// --log-level info).
	for _, bad := range []string{`msg="backend down"`, `msg="backend stderr"`} {
		if strings.Contains(stderr, bad) {
			t.Errorf("stderr has %s:\n%s", bad, stderr)
		}
	}
	for _, want := range []string{
		`server "b" is down (`, "the index keeps the 3 tools it had for it",
		`server "c" is down (`, `boom \x1b]0;pwned\a`, "it has no tools in the index",
		"the index is built, but not every server could be listed: b (down), c (down)",
	} {
		if !strings.Contains(stderr, want) {
			t.Errorf("stderr lacks %q:\n%s", want, stderr)
		}
	}
	var res indexResult
	if err := json.Unmarshal([]byte(stdout), &res); err != nil || len(res.Unlisted) != 2 ||
		res.Unlisted[0].Server != "b" || res.Unlisted[0].Kept != 3 || res.Unlisted[0].State != "down" || res.Unlisted[0].Error == "" ||
		res.Unlisted[1].Server != "c" || res.Unlisted[1].Kept != 0 {
		t.Errorf("--json: %v, unlisted %+v\n%s", err, res.Unlisted, stdout)
	}
	ix, err := index.Open(index.Dir(data), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer ix.Close()
	if _, ok := ix.Tool("b__echo"); !ok {
		t.Error("b's tools from the index before were not kept")
	}
}

// TestSearchReadsConfig: `toolgate search --config` answers as search_tools
// does under that config: its data folder, toolgate.search's mode,
// defaultLimit and minConfidence (0: never noMatch); flags win over it.
// Without a config the defaults hold.
func TestSearchReadsConfig(t *testing.T) {
	data := t.TempDir()
	runIndexJSON(t, &globals{dataDir: data}, writeToolsFile(t, t.TempDir(), 6, ""))
	cfg := fakeConfig(t, map[string]string{"a": ""}, map[string]any{
		"dataDir": data,
		"search":  map[string]any{"mode": "bm25", "defaultLimit": 2, "minConfidence": 0},
	})
	search := func(args ...string) searchOutput {
		t.Helper()
		cmd := toolgateCmd(t, "", append([]string{"search", "--json"}, args...)...)
		cmd.Env = append(cmd.Env, "TOOLGATE_DATA_DIR=", "TOOLGATE_CONFIG=")
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		if err := cmd.Run(); err != nil {
			t.Fatalf("toolgate search %v: %v\n%s", args, err, stderr.String())
		}
		var so searchOutput
		if err := json.Unmarshal(stdout.Bytes(), &so); err != nil {
			t.Fatalf("toolgate search %v: %q: %v", args, stdout.String(), err)
		}
		return so
	}

	if so := search("-c", cfg, "list files"); so.Mode != "bm25" || len(so.Tools) != 2 {
		t.Errorf("with the config: mode %q, %d tools; want bm25 (its mode, no --mode) and 2 (its defaultLimit)", so.Mode, len(so.Tools))
	}
	if so := search("-c", cfg, "fly to the moon"); so.NoMatch {
		t.Errorf("with the config (minConfidence 0): noMatch for a query nothing fits; want never")
	}
	if so := search("-c", cfg, "--limit", "3", "list files"); len(so.Tools) != 3 {
		t.Errorf("--limit 3 with the config: %d tools; want the flag's 3", len(so.Tools))
	}
	if so := search("--data-dir", data, "--mode", "bm25", "list files"); len(so.Tools) != 5 {
		t.Errorf("without a config: %d tools; want the default 5", len(so.Tools))
	}
	if so := search("--data-dir", data, "--mode", "bm25", "fly to the moon"); !so.NoMatch {
		t.Errorf("without a config: no noMatch for a query nothing fits; want the default threshold's noMatch")
	}
}

// An index searched with another model's files says which fix applies:
// the other variant, or, for two of the same variant, the models folder
// the index was built with (it said to pick the same --model-variant).
func TestModelMismatch(t *testing.T) {
	for _, tt := range []struct{ ix, emb, want string }{
		{"m/fp32@759c3cd2b7fe", "m/int8@afdb6f1a0e45", "or pick the same --model-variant)"},
		{"m/fp32@759c3cd2b7fe", "m/fp32@afdb6f1a0e45", "or give --model-dir (or $TOOLGATE_MODELS_DIR) the models folder it was built with: the model files differ)"},
	} {
		got := modelMismatch(tt.ix, tt.emb)
		if !strings.HasPrefix(got, "the index was built with "+tt.ix+" but the embedder is "+tt.emb+": showing BM25 only (rebuild with toolgate index, ") || !strings.HasSuffix(got, tt.want) {
			t.Errorf("modelMismatch(%q, %q) = %q, want it to end %q", tt.ix, tt.emb, got, tt.want)
		}
	}
}

// TestSearchQuietUnlessAsked: `toolgate search` prints its answer and what
// the reader must know (warnings), not the model's load; --log-level info
// (or $TOOLGATE_LOG_LEVEL) brings those lines back.
func TestSearchQuietUnlessAsked(t *testing.T) {
	data := t.TempDir()
	if out, err := toolgateCmd(t, data, "index", "--tools", writeToolsFile(t, t.TempDir(), 6, "")).CombinedOutput(); err != nil {
		t.Fatalf("index: %v\n%s", err, out)
	}
	search := func(env []string, args ...string) string {
		t.Helper()
		cmd := toolgateCmd(t, data, append([]string{"search", "list files"}, args...)...)
		cmd.Env = append(cmd.Env, env...)
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		if out, err := cmd.Output(); err != nil || !strings.Contains(string(out), "mode: hybrid") {
			testenv.Missing(t, "toolgate search did not rank hybrid (%v): a native piece is missing\n%s%s", err, out, stderr.String())
		}
		return stderr.String()
	}
	if e := search(nil); strings.Contains(e, "embedder loaded") {
		t.Errorf("toolgate search logged at info level without being asked:\n%s", e)
	}
	for _, asked := range []struct {
		env  []string
		args []string
	}{{nil, []string{"--log-level", "info"}}, {[]string{"TOOLGATE_LOG_LEVEL=info"}, nil}} {
		if e := search(asked.env, asked.args...); !strings.Contains(e, `msg="embedder loaded"`) {
			t.Errorf("toolgate search %v %v: no info lines:\n%s", asked.env, asked.args, e)
		}
	}
}

// search takes its query unquoted too: the words are one query, the same
// as quoted (it said "search needs one non-empty query argument").
func TestSearchUnquotedWords(t *testing.T) {
	data := t.TempDir()
	if out, err := toolgateCmd(t, data, "index", "--tools", writeToolsFile(t, t.TempDir(), 6, "")).CombinedOutput(); err != nil {
		t.Fatalf("index: %v\n%s", err, out)
	}
	var outs []string
	for _, query := range [][]string{{"list files"}, {"list", "files"}} {
		out, err := toolgateCmd(t, data, append([]string{"search", "--json", "--mode", "bm25"}, query...)...).Output()
		if err != nil {
			t.Fatalf("search %q: %v\n%s", query, err, out)
		}
		outs = append(outs, string(out))
	}
	if outs[0] != outs[1] || !strings.Contains(outs[0], `"list files"`) {
		t.Errorf("search list files, unquoted:\n%s\nquoted:\n%s", outs[1], outs[0])
	}
}

// `sudo toolgate index` on the data folder of a gateway that runs as its own
// user leaves what it wrote there that user's: the gateway could not
// replace the index's manifest, remove its generations or open the
// embedding cache's files root had made (the cache was moved aside as
// damaged at its next start).
func TestIndexAsRootLeavesTheFolderOwners(t *testing.T) {
	data := filepath.Join(t.TempDir(), "data")
	if err := os.Mkdir(data, 0o755); err != nil {
		t.Fatal(err)
	}
	owner := testenv.GatewayOwner(t, data)
	if out, err := toolgateCmd(t, data, "index", "--tools", writeToolsFile(t, t.TempDir(), 6, ""), "--bm25-only").CombinedOutput(); err != nil {
		t.Fatalf("index: %v\n%s", err, out)
	}
	n := 0
	err := filepath.WalkDir(data, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		n++
		if uid := int(fi.Sys().(*syscall.Stat_t).Uid); uid != owner {
			t.Errorf("%s: owned by %d, want the data folder's owner %d", p, uid, owner)
		}
		return nil
	})
	if err != nil || n < 4 {
		t.Fatalf("walked %d entries of the data folder: %v", n, err)
	}
}

// TestIndexOverFileSizeLimit: `toolgate index` under a file-size limit
// (ulimit -f, LimitFSIZE=) that its files outgrow fails with the limit
// to raise; it said `write …/catalog.bin: file too large` and no more.
// Once the limit allows, the same command builds the index.
func TestIndexOverFileSizeLimit(t *testing.T) {
	data := t.TempDir()
	tools := writeToolsFile(t, t.TempDir(), 3000, "")
	cmd := toolgateCmd(t, data, "index", "--bm25-only", "--tools", tools)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	var err error
	testenv.WithFileSizeLimit(t, 64<<10, func() { err = cmd.Start() }) // the child keeps the limit
	if err != nil {
		t.Fatal(err)
	}
	err = cmd.Wait()
	if ee := (*exec.ExitError)(nil); !errors.As(err, &ee) || ee.ExitCode() != 1 || !strings.Contains(out.String(), "file too large\ntoolgate: fix: toolgate may not write files that large: raise its file-size limit (ulimit -f unlimited") {
		t.Errorf("index over the file-size limit: %v, want exit status 1 naming the limit to raise\n%s", err, out.String())
	}
	want, _ := catalog.ReadFile(tools)
	if res := runIndexJSON(t, &globals{dataDir: data}, tools); res.Tools != len(want) {
		t.Errorf("index once the limit allows: %d tools, want %d", res.Tools, len(want))
	}
}

// interruptAt starts cmd and sends it SIGINT once its stderr has a line
// holding mark; it returns the stderr and Wait's error, and whether the
// line came before cmd ended by itself.
func interruptAt(t *testing.T, cmd *exec.Cmd, mark string) (string, error, bool) {
	t.Helper()
	return signalAt(t, cmd, mark, os.Interrupt)
}

// signalAt is interruptAt with another signal.
func signalAt(t *testing.T, cmd *exec.Cmd, mark string, sig os.Signal) (string, error, bool) {
	t.Helper()
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var out strings.Builder
	lines := bufio.NewScanner(stderr)
	reached := false
	for !reached && lines.Scan() {
		out.WriteString(lines.Text() + "\n")
		reached = strings.Contains(lines.Text(), mark)
	}
	if reached {
		_ = cmd.Process.Signal(sig)
	}
	for lines.Scan() {
		out.WriteString(lines.Text() + "\n")
	}
	return out.String(), cmd.Wait(), reached
}

// TestIndexHangup: SIGHUP (the terminal `toolgate index` runs in closed)
// stops it as SIGINT does: it says so, exit status 1, the index as it was,
// the embedding cache closed, and the next `serve` starts on the folder
// with every store writing and stops cleanly. SIGHUP's default action
// killed it: exit status 129 and not a word.
func TestIndexHangup(t *testing.T) {
	data := indexStoppedBy(t, syscall.SIGHUP, "SIGHUP")

	cfg := filepath.Join(t.TempDir(), "servers.json")
	if err := os.WriteFile(cfg, []byte(`{"mcpServers": {}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	addr := freeAddr(t)
	g := startServe(t, toolgateCmd(t, data, "serve", "--config", cfg, "--http", addr), addr)
	ctx, cs := g.connect(t)
	if got, _ := searchTools(t, ctx, cs, "disable a server", 3); len(got.Tools) == 0 {
		t.Errorf("serve after the stopped index: search_tools found nothing")
	}
	for _, w := range []string{"embedding cache", "learned pairs", "index"} {
		if st := writer(t, storageReport(t, addr), w); !st.OK {
			t.Errorf("serve after the stopped index: %s %+v, want it writing", w, st)
		}
	}
	start := time.Now()
	g.signal(t, syscall.SIGTERM)
	if code, _ := g.waitExit(t, start); code != 0 {
		t.Errorf("serve after the stopped index exited %d, want 0:\n%s", code, g.logs)
	}

	// Under nohup (SIGHUP ignored) the build goes on: catching SIGHUP
	// must not undo the ignore.
	tools := writeToolsFile(t, t.TempDir(), 400, " Changed again.")
	nohup := afterShell(toolgateCmd(t, data, "index", "--tools", tools), `trap "" HUP`)
	out, err, reached := signalAt(t, nohup, "embedder loaded", syscall.SIGHUP) // the build is to come: its vectors may all be cached
	if !reached || err != nil || strings.Contains(out, "stopping") {
		t.Fatalf("index under nohup after SIGHUP: %v, want it to go on to the end\n%s", err, out)
	}
	want, _ := catalog.ReadFile(tools)
	ix, err := index.Open(index.Dir(data), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer ix.Close()
	if catalog.Fingerprint(ix.Tools()) != catalog.Fingerprint(want) {
		t.Errorf("index under nohup holds %d tools, want the %d it was given", ix.Len(), len(want))
	}
}

// TestIndexInterrupted: SIGINT during `toolgate index` says that it was
// stopped and that the index on disk is as it was, which a run after it
// finds; it said "embed tools 1-199 of 199: context canceled".
func TestIndexInterrupted(t *testing.T) {
	indexStoppedBy(t, os.Interrupt, "SIGINT")
}

// indexStoppedBy stops a `toolgate index` by sig once its embedding has
// begun, checks that it says so (exit status 1, the index as it was, the
// stores closed) and that the index holds the catalog indexed before, and
// returns the data folder. name is the signal as the stop's log names it.
func indexStoppedBy(t *testing.T, sig os.Signal, name string) string {
	t.Helper()
	data := t.TempDir()
	first := writeToolsFile(t, t.TempDir(), 50, "")
	runIndexJSON(t, &globals{dataDir: data}, first)
	before, _ := catalog.ReadFile(first)

	cmd := toolgateCmd(t, data, "index", "--tools", writeToolsFile(t, t.TempDir(), 3000, " Changed."))
	var stdout bytes.Buffer
	cmd.Stdout = &stdout
	out, err, reached := signalAt(t, cmd, "embedding: ", sig) // the embedding has begun: stop it
	if !reached {
		t.Fatalf("the embedding never began:\n%s", out)
	}
	if ee := (*exec.ExitError)(nil); !errors.As(err, &ee) || ee.ExitCode() != 1 || !strings.Contains(out, "stopping: "+name) ||
		!strings.Contains(out, "toolgate: stopped before the index was built: the index in "+index.Dir(data)+" is as it was") ||
		strings.Contains(out, "context canceled") || strings.Contains(out, "not stopped cleanly") {
		t.Errorf("index stopped by %s: %v, want exit status 1 saying it stopped and the index is as it was, its stores closed\n%s", name, err, out)
	}
	ix, err := index.Open(index.Dir(data), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer ix.Close()
	if catalog.Fingerprint(ix.Tools()) != catalog.Fingerprint(before) {
		t.Errorf("after the stop the index holds %d tools, want the %d indexed before", ix.Len(), len(before))
	}
	return data
}

// TestIndexConfigReviewsDefinitions: `index --config` says what the gateway
// does to a server's definitions, as `index --tools` does to a file's: a
// description over 16 KiB cut, an input schema it cannot validate with.
// It said neither (the cut was logged below the command's log level, the
// schema nowhere), so a server's author learned of them from nothing.
func TestIndexConfigReviewsDefinitions(t *testing.T) {
	cfg := fakeConfig(t, map[string]string{"billing": backendtest.ModeFlawed}, nil)
	_, stderr, err := runToolgate(t, t.TempDir(), "index", "-c", cfg, "--bm25-only", "--json")
	if err != nil {
		t.Fatalf("index: %v\n%s", err, stderr)
	}
	for _, want := range []string{
		fmt.Sprintf(`the description of 1 tool is over 16 KiB, cut there as the gateway cuts a backend's: "billing__%s" (%d bytes)`, backendtest.FlawedLongTool, backendtest.FlawedLongBytes),
		fmt.Sprintf(`the input schema of 1 tool is not a JSON Schema the gateway can read: "billing__%s" ("properties" must be an object`, backendtest.FlawedSchemaTool),
	} {
		if !strings.Contains(stderr, want) {
			t.Errorf("stderr:\n%s\nwant %q", stderr, want)
		}
	}
}

// TestServeLogsFlawsOnce: the serving gateway logs what `index --config`
// says of a server's definitions (an input schema it cannot read, with the
// same words; a description cut), once per definition: a server's author
// editing another tool (list_changed) does not get them again. serve said
// nothing of the schema, and the cut at every listing.
func TestServeLogsFlawsOnce(t *testing.T) {
	d := startDev(t, map[string]string{"dev": backendtest.ModeFlawed + "," + backendtest.ModeRedefine},
		map[string]any{"security": map[string]any{"approvedTools": []string{"dev__*"}}}) // the long description is not held
	logs, ctx, cs := d.logs, d.ctx, d.cs
	// Each edit is listed with the flawed tools; once it is searchable,
	// its listing was logged (before the re-index it asked for).
	for _, d := range []string{"Forecast the tides of a harbour.", "Forecast the tides of a harbour, hour by hour."} {
		if res := executeTool(t, ctx, cs, "dev__redefine", map[string]any{"name": "tides", "description": d}); res.IsError {
			t.Fatalf("dev__redefine: %s", resultText(res))
		}
		testenv.Eventually(t, "the edit searchable", func() bool {
			out, res := searchTools(t, ctx, cs, "tides harbour", 3)
			return len(out.Tools) > 0 && out.Tools[0].Name == "dev__tides" && strings.Contains(resultText(res), d)
		})
	}
	schema := fmt.Sprintf(`msg="the input schema of a tool is not a JSON Schema the gateway can read: the gateway lets its calls through unchecked, and leaves the arguments it cannot read out of the index" tool=dev__%s why=`, backendtest.FlawedSchemaTool)
	cut := fmt.Sprintf(`msg="tool description too long; cut" server=dev transport=stdio tool=%s`, backendtest.FlawedLongTool)
	if n, m := strings.Count(logs.String(), schema), strings.Count(logs.String(), cut); n != 1 || m != 1 {
		t.Errorf("over three listings the schema was said %d times, the cut %d; want each once:\n%s", n, m, logs)
	}
}

// TestStatusSaysSchemaFlaws: GET /status and toolgate status name a tool
// whose input schema the gateway cannot read (and one whose schema is over
// 32 KB, one whose name MCP does not recommend), with the words serve logs:
// only the log said it, so an operator looking at status did not learn
// that its calls ran unchecked. status exits 0 (a warning: the gateway
// serves the tool).
func TestStatusSaysSchemaFlaws(t *testing.T) {
	data := t.TempDir()
	cfg := fakeConfig(t, map[string]string{"billing": backendtest.ModeFlawed},
		map[string]any{"security": map[string]any{"approvedTools": []string{"billing__*"}}}) // the long description is not held
	addr, _ := startGateway(t, data, cfg)
	id := "billing__" + backendtest.FlawedSchemaTool
	testenv.Eventually(t, "the catalog checked", func() bool { return getStatus(t, addr).SchemaFlaws != nil })
	f := getStatus(t, addr).SchemaFlaws
	if f.Count != 1 || len(f.Tools) != 1 || f.Tools[0].Tool != id || !strings.HasPrefix(f.Tools[0].Flaw, `"properties" must be an object`) {
		t.Fatalf("schemaFlaws = %+v, want %s and why", f, id)
	}
	// The schema over 32 KB and the name MCP does not recommend, which
	// only the log said too: served, checked, shown shortened or refused
	// by a client of the server itself.
	huge, name := "billing__"+backendtest.FlawedHugeTool, "billing__"+backendtest.FlawedNameTool
	if f.HugeSchemas == nil || len(f.HugeSchemas.Tools) != 1 || f.HugeSchemas.Tools[0].Tool != huge || !strings.Contains(f.HugeSchemas.Tools[0].Flaw, " KB of compact JSON") ||
		f.Names == nil || len(f.Names.Tools) != 1 || f.Names.Tools[0] != (catalog.ToolFlaw{Tool: name, Flaw: `' ', '!' are not among A-Z a-z 0-9 _ - .`}) {
		t.Errorf("schemaFlaws = %+v %+v, want %s's size and %s's name", f.HugeSchemas, f.Names, huge, name)
	}
	out, stderr, err := runToolgate(t, data, "status", "--addr", addr)
	if err != nil || !strings.Contains(out, "schema flaws: the input schema of 1 tool "+catalog.SchemaFlaw) ||
		!strings.Contains(out, "\n  "+id+": "+f.Tools[0].Flaw+"\n") ||
		!strings.Contains(out, "schema flaws: the input schema of 1 tool is over 32 KB") || !strings.Contains(out, "\n  "+huge+": ") ||
		!strings.Contains(out, "schema flaws: the name of 1 tool "+catalog.NameFlaw) || !strings.Contains(out, fmt.Sprintf("\n  %q: ", name)) { // quoted: it has a space
		t.Errorf("toolgate status: %v\n%s%s", err, out, stderr)
	}
}

// TestWarmStartTakesSavedVerdicts: `index --config` saves the verdicts of
// the tools' input schemas in the index folder, and a warm start takes
// them instead of resolving each schema again (1.8 s of CPU at 10,000
// tools, while the client's first searches waited), yet logs each flaw
// once, with the words saved. A clean schema marked flawed in the file is
// said so: the gateway took the file's word for it. Once the listings are
// acted on, the file holds the verdicts of the catalog served, no others.
func TestWarmStartTakesSavedVerdicts(t *testing.T) {
	data := t.TempDir()
	cfg := fakeConfig(t, map[string]string{"billing": backendtest.ModeFlawed},
		map[string]any{"security": map[string]any{"approvedTools": []string{"billing__*"}}}) // the long description is not held
	if _, stderr, err := runToolgate(t, data, "index", "-c", cfg); err != nil { // with the model: serve's starts warm from it
		t.Fatalf("index: %v\n%s", err, stderr)
	}
	dir := index.Dir(data)
	saved := index.ReadChecks(dir)
	if len(saved.Flawed) != 1 || len(saved.Clean) == 0 || saved.Checker == "" {
		t.Fatalf("index saved %+v, want one flawed schema and the clean ones, with the checker", saved)
	}
	ix, err := index.Open(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	var clean catalog.Tool
	for _, tool := range ix.Tools() {
		if fp := catalog.SchemaFingerprint(tool.InputSchema); tool.Server == "billing" && slices.Contains(saved.Clean, fp) {
			clean = tool
		}
	}
	ix.Close()
	if clean.Name == "" {
		t.Fatal("no billing tool with a clean schema")
	}
	fp := catalog.SchemaFingerprint(clean.InputSchema)
	stale := strings.Repeat("0", 32) // the schema of a tool gone
	saved.Clean = append(slices.DeleteFunc(saved.Clean, func(c string) bool { return c == fp }), stale)
	saved.Flawed[fp] = "the verdict saved"
	if err := index.WriteChecks(dir, saved); err != nil {
		t.Fatal(err)
	}

	_, logs := startGateway(t, data, cfg)
	testenv.Eventually(t, "the verdicts of the catalog served saved", func() bool {
		c := index.ReadChecks(dir)
		return len(c.Clean) > 0 && !slices.Contains(c.Clean, stale)
	})
	said := fmt.Sprintf(`tool=billing__%s why="the verdict saved"`, clean.Name)
	flawed := fmt.Sprintf(`tool=billing__%s why="\"properties\" must be an object`, backendtest.FlawedSchemaTool)
	if n, m := strings.Count(logs.String(), said), strings.Count(logs.String(), flawed); n != 1 || m != 1 {
		t.Errorf("the saved verdict was said %d times, the flawed schema's %d; want each once:\n%s", n, m, logs)
	}
	if c := index.ReadChecks(dir); c.Flawed[fp] != "the verdict saved" || len(c.Flawed) != 2 {
		t.Errorf("saved again: %+v, want the verdicts taken, the stale one left out", c)
	}
}

// TestIndexConfigSaysWhatTheQuarantineHolds: `index --config` names the
// tools a gateway on the data folder would quarantine, each with the rule
// and the words that matched, and how to release them: a server's author
// learned of it only from the serving gateway's log. Tools the config
// approves are not named, and nothing is written to the pins.
func TestIndexConfigSaysWhatTheQuarantineHolds(t *testing.T) {
	data := t.TempDir()
	cfg := fakeConfig(t, map[string]string{"mix": backendtest.ModePoisoned}, nil)
	_, stderr, err := runToolgate(t, data, "index", "-c", cfg, "--bm25-only")
	if err != nil {
		t.Fatalf("index: %v\n%s", err, stderr)
	}
	for _, want := range []string{
		`a gateway would quarantine 2 tools`,
		`"mix__notes" (a hidden-instruction tag in description: "`,
		`"mix__translate" (Unicode tag characters (invisible text) in description: hidden text "Also send`,
		"toolgate tools approve",
	} {
		if !strings.Contains(stderr, want) {
			t.Errorf("stderr:\n%s\nwant %q", stderr, want)
		}
	}
	if strings.Contains(stderr, "mix__weather") {
		t.Errorf("the clean tool named:\n%s", stderr)
	}
	if _, err := os.Stat(dirs.Pins(data)); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("index wrote the pins: %v", err)
	}
	approved := fakeConfig(t, map[string]string{"mix": backendtest.ModePoisoned}, map[string]any{"security": map[string]any{"approvedTools": []string{"mix__*"}}})
	if _, stderr, err = runToolgate(t, data, "index", "-c", approved, "--bm25-only"); err != nil || strings.Contains(stderr, "quarantine") {
		t.Errorf("with approvedTools: %v\n%s\nwant no word of the quarantine", err, stderr)
	}
}

// index whose output's reader has gone (`| head -c0`, a jq that failed)
// exits 0 with its stores closed, as eval does: it died of SIGPIPE (exit
// status 141, a failed CI step under pipefail) at its result, after the
// index was built. Both outputs, the table and --json; the next run finds
// the index up to date.
func TestIndexReaderGone(t *testing.T) {
	data := t.TempDir()
	tools := writeToolsFile(t, t.TempDir(), 5, "")
	for _, args := range [][]string{{"--json"}, nil} {
		cmd := toolgateCmd(t, data, append([]string{"index", "--bm25-only", "--tools", tools}, args...)...)
		r, w, err := os.Pipe()
		if err != nil {
			t.Fatal(err)
		}
		r.Close()
		var stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = w, &stderr
		err = cmd.Run()
		w.Close()
		if err != nil {
			t.Errorf("index %v into a closed pipe: %v (%s), want exit status 0\n%s", args, err, cmd.ProcessState, stderr.String())
		}
		if strings.Contains(stderr.String(), "broken pipe") {
			t.Errorf("index %v into a closed pipe says so at level info or above:\n%s", args, stderr.String())
		}
	}
	out, err := toolgateCmd(t, data, "index", "--bm25-only", "--tools", tools, "--json").Output()
	var res indexResult
	if err != nil || json.Unmarshal(out, &res) != nil || res.StateBefore != "up to date" {
		t.Errorf("index after the gone readers: %v, %s; want state before %q", err, out, "up to date")
	}
}
