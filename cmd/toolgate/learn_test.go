package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolgate/toolgate/gateway"
	"github.com/toolgate/toolgate/gateway/backend/backendtest"
	"github.com/toolgate/toolgate/gateway/config"
	"github.com/toolgate/toolgate/index"
	"github.com/toolgate/toolgate/index/catalog"
	"github.com/toolgate/toolgate/internal/datafile"
	"github.com/toolgate/toolgate/internal/storage"
	"github.com/toolgate/toolgate/internal/testenv"
	"github.com/toolgate/toolgate/search/learn"
)

// Through the real binary and the bundled servers: a search_tools answer
// followed by an execute_tool of one of its tools records a pair in the
// data folder; it survives the gateway's exit, `toolgate learn` shows it,
// the next serve ranks with it, and `toolgate learn --reset` forgets it.
func TestLearningFromUseEndToEnd(t *testing.T) {
	cfgPath := bundledConfig(t, nil)
	dataDir := t.TempDir()
	const query = "store a new entity in the knowledge graph"
	const tool = "memory__create_entities"

	serve := func() (context.Context, *mcp.ClientSession) {
		cmd := toolgateCmd(t, dataDir, "serve", "--config", cfgPath)
		cmd.Stderr = testLog(t, "toolgate: ")
		return connectStdio(t, cmd, 3*time.Minute)
	}
	learnCmd := func(args ...string) string {
		t.Helper()
		cmd := toolgateCmd(t, dataDir, append([]string{"learn"}, args...)...)
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		if err := cmd.Run(); err != nil {
			t.Fatalf("toolgate learn %v: %v\n%s", args, err, out.String())
		}
		return out.String()
	}

	ctx, cs := serve()
	indexServed(t, ctx, cs) // a first start past the cold-start wait answers "being built"
	searchFinds(t, ctx, cs, query, tool)
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "execute_tool", Arguments: map[string]any{
		"name": tool, "arguments": map[string]any{"entities": []any{map[string]any{"name": "Alice", "entityType": "person", "observations": []any{"works at Acme"}}}},
	}})
	if err != nil || res.IsError {
		t.Fatalf("execute_tool %s: %v %s", tool, err, resultText(res))
	}
	// A tool the search did not return records nothing.
	if res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "execute_tool", Arguments: map[string]any{
		"name": "everything__echo", "arguments": map[string]any{"message": "hi"}}}); err != nil || res.IsError {
		t.Fatalf("execute_tool everything__echo: %v %s", err, resultText(res))
	}
	cs.Close() // serve exits with its client

	if out := learnCmd(); !strings.Contains(out, "1 learned pair for 1 tool") {
		t.Fatalf("toolgate learn after one search and call: %q", out)
	}
	if _, err := os.Stat(filepath.Join(dataDir, "learn")); err != nil {
		t.Fatalf("learned pairs not in the data folder: %v", err)
	}

	// The next run reads them (and still answers).
	ctx, cs = serve()
	if ans, _ := searchTools(t, ctx, cs, query, 5); len(ans.Tools) == 0 || ans.Tools[0].Name != tool {
		t.Errorf("after restart, search_tools(%q) = %+v, want %s first", query, ans.Tools, tool)
	}
	// While it runs, it holds the store: learn asks it through its status
	// socket, and its ranking uses the change at once.
	if out := learnCmd(); !strings.Contains(out, "(from pid ") || !strings.Contains(out, "1 learned pair for 1 tool") {
		t.Errorf("toolgate learn while serve holds the store: %q", out)
	}
	// A reset that forgets nothing also makes the ranking the one of the
	// pairs held (searches rebuild it in the background otherwise).
	if out := learnCmd("--reset", "--server", "everything"); !strings.Contains(out, "forgot 0 learned pairs of server everything's tools\nservers with learned pairs: "+learnedServer(tool)+"\n") {
		t.Errorf("toolgate learn --reset --server everything while serve holds the store: %q", out)
	}
	// A server neither the index nor the pairs know: a misspelt name, a
	// usage error (it forgot nothing and said so, exit 0).
	if out, stderr, err := runToolgate(t, dataDir, "learn", "--reset", "--server", "nope"); err == nil || !strings.Contains(stderr, "the index has no server of that name") {
		t.Errorf("toolgate learn --reset --server nope while serve holds the store: %v %q %q", err, out, stderr)
	}
	const other = "show me what is stored"
	first, second, seed := seedSecond(t, ctx, cs, other)
	if out := learnCmd("--queries", seed); !strings.Contains(out, "its ranking uses the change at once") || !strings.Contains(out, "recorded 3 pairs") {
		t.Errorf("toolgate learn --queries while serve holds the store: %q", out)
	}
	if ans, _ := searchTools(t, ctx, cs, other, 5); len(ans.Tools) == 0 || ans.Tools[0].Name != second {
		t.Errorf("after seeding (%q → %s) through the gateway, search_tools = %+v, want %s first", other, second, ans.Tools, second)
	}
	// `toolgate search` ranks with the pairs the gateway holds, as
	// search_tools does.
	out, stderr, err := runToolgate(t, dataDir, "search", other, "--config", cfgPath, "--json")
	var cli searchOutput
	if jerr := json.Unmarshal([]byte(out), &cli); err != nil || jerr != nil || len(cli.Tools) == 0 || cli.Tools[0].Name != second || strings.Contains(stderr, "without the learned pairs") {
		t.Errorf("toolgate search %q while the gateway holds the pairs: %v %v, want %s first\n%s%s", other, err, jerr, second, out, stderr)
	}
	secondServer, _, _ := strings.Cut(second, "__")
	if out := learnCmd("--reset", "--server", secondServer); !strings.Contains(out, "forgot ") {
		t.Errorf("toolgate learn --reset --server %s while serve holds the store: %q", secondServer, out)
	}
	if ans, _ := searchTools(t, ctx, cs, other, 5); len(ans.Tools) == 0 || ans.Tools[0].Name != first {
		t.Errorf("after the reset through the gateway, search_tools = %+v, want %s first again", ans.Tools, first)
	}
	cs.Close()
	if secondServer == learnedServer(tool) {
		t.Fatalf("the seeded tool %s is of %s's server: pick another query", second, tool)
	}

	if out := learnCmd("--reset", "--server", "filesystem"); !strings.Contains(out, "forgot 0 learned pairs of server filesystem's tools\nservers with learned pairs: "+learnedServer(tool)+"\n") {
		t.Errorf("reset of another server: %q", out)
	}
	if out := learnCmd("--reset"); !strings.Contains(out, "forgot 1 learned pairs") {
		t.Errorf("reset: %q", out)
	}
	if out := learnCmd(); !strings.Contains(out, "0 learned pairs") {
		t.Errorf("after reset: %q", out)
	}
}

// A store held by a process that is no gateway (a toolgate index, eval or
// learn, a gateway older than the status sockets; here the test itself):
// learn says who holds it, with its command line, and what to do.
func TestLearnStoreHeldByAnotherCommand(t *testing.T) {
	data := t.TempDir()
	store, err := learn.Open(filepath.Join(data, "learn"), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	_, stderr, err := runToolgate(t, data, "learn", "--reset")
	if err == nil || !strings.Contains(stderr, fmt.Sprintf("another toolgate process (pid %d) holds it and is not a gateway", os.Getpid())) ||
		!strings.Contains(stderr, "run this again") || !strings.Contains(stderr, fmt.Sprintf("(pid %d: %s", os.Getpid(), os.Args[0])) {
		// The command line names an older gateway's --http address.
		t.Errorf("learn --reset on a store another command holds: %v\n%s", err, stderr)
	}
}

// seedSecond writes a log in the eval format that leads query, three
// times, to the tool search_tools ranks second for it on cs (learning it
// lifts that tool first), and returns the first tool, the second and the
// log's path.
func seedSecond(t *testing.T, ctx context.Context, cs *mcp.ClientSession, query string) (first, second, seed string) {
	t.Helper()
	before, _ := searchTools(t, ctx, cs, query, 5)
	if len(before.Tools) < 2 {
		t.Fatalf("search_tools(%q) = %+v", query, before.Tools)
	}
	first, second = before.Tools[0].Name, before.Tools[1].Name
	seed = filepath.Join(t.TempDir(), "seed.jsonl")
	line := `{"query": "` + query + `", "relevant": ["` + second + `"]}` + "\n"
	if err := os.WriteFile(seed, []byte(strings.Repeat(line, 3)), 0o644); err != nil {
		t.Fatal(err)
	}
	return first, second, seed
}

// learnedServer is the server of the tool ID id.
func learnedServer(id string) string {
	server, _, _ := strings.Cut(id, "__")
	return server
}

// learn --queries seeds pairs from an eval-format log; the flags that do
// not go together are usage errors.
func TestLearnCommand(t *testing.T) {
	g := evalGlobals(t)
	log := filepath.Join(t.TempDir(), "log.jsonl")
	if err := os.WriteFile(log, []byte(`{"query": "read my notes", "relevant": ["fs__read_file"]}
{"query": "plan a trip", "relevant": ["m__a", "m__b"]}
`), 0o644); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if err := runLearn(context.Background(), g, &learnFlags{queries: log}, &out, io.Discard); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "recorded 3 pairs") || !strings.Contains(out.String(), "3 pairs for 3 tools") {
		t.Errorf("output %q", out.String())
	}
	out.Reset()
	if err := runLearn(context.Background(), g, &learnFlags{reset: true, server: "m"}, &out, io.Discard); err != nil || !strings.Contains(out.String(), "forgot 2 learned pairs of server m's tools") {
		t.Errorf("reset m: %v %q", err, out.String())
	}
	// A queries file that cannot be read is the flag's wrong value.
	arr := filepath.Join(t.TempDir(), "log.json")
	if err := os.WriteFile(arr, []byte(`[{"query": "read my notes", "relevant": ["fs__read_file"]}]`), 0o644); err != nil {
		t.Fatal(err)
	}
	// A bare tool name is refused, said by line, before anything is
	// recorded: the store refused it after the warning that it was
	// recorded, exit status 1.
	bare := filepath.Join(t.TempDir(), "bare.jsonl")
	if err := os.WriteFile(bare, []byte(`{"query": "read my notes", "relevant": ["fs__read_file"]}`+"\n"+`{"query": "open the notes", "relevant": ["read_file"]}`+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	var ue usageError
	if err := runLearn(context.Background(), g, &learnFlags{queries: bare}, &out, io.Discard); !errors.As(err, &ue) ||
		err.Error() != bare+`:2: relevant "read_file" is not a tool ID: write it server__tool, as search_tools names tools` {
		t.Errorf("bare name: %v, want the usage error naming line 2", err)
	}
	// A tools file given as the queries is said to be one: it read
	// `tools.jsonl:1: empty "query"`.
	tp := filepath.Join(t.TempDir(), "tools.jsonl")
	if err := os.WriteFile(tp, []byte(`{"server": "fs", "name": "read_file", "description": "Read a file"}`+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := runLearn(context.Background(), g, &learnFlags{queries: tp}, &out, io.Discard); !errors.As(err, &ue) ||
		err.Error() != "--queries "+tp+` looks like a tools file (line 1 has "server"), not a queries file: a tools file is for index --tools or eval --tools (`+tp+`:1: empty "query")` {
		t.Errorf("tools file as --queries: %v, want the usage error saying it is a tools file", err)
	}
	for _, f := range []learnFlags{{reset: true, queries: log}, {server: "m"}, {queries: arr}} {
		var ue usageError
		if err := runLearn(context.Background(), g, &f, &out, io.Discard); err == nil || !errors.As(err, &ue) {
			t.Errorf("%+v: err = %v, want a usage error", f, err)
		}
	}
}

// TestLearnedPairsShortOfMemoryNotDamaged: learned pairs that Badger cannot
// map for want of memory (seen under ulimit -v 2.2 GB) or cannot open for
// want of descriptors are not called damaged, and the fix is the limit,
// not moving the store aside (which would lose what was learned).
func TestLearnedPairsShortOfMemoryNotDamaged(t *testing.T) {
	for _, tc := range []struct{ err, want string }{
		{"During db.vlog.open err: while opening file: /d/learn/000001.vlog err: cannot allocate memory\nwhile mmapping /d/learn/000001.vlog with size: 33554432", "ulimit -v"},
		{"open /d/learn/MANIFEST: too many open files", "open-files limit"},
	} {
		err := damagedError("/d", "/d/learn", errors.New(tc.err))
		fix := storage.Fix("/d", err)
		if strings.Contains(err.Error(), "damaged") || strings.Contains(fix, "mv ") || !strings.Contains(fix, tc.want) {
			t.Errorf("%q: %v, fix %q; want no damage, and the fix to name %q", tc.err, err, fix, tc.want)
		}
	}
	if fix := storage.Fix("/d", damagedError("/d", "/d/learn", errors.New("Value log truncate required"))); !strings.Contains(fix, "mv /d/learn /d/learn.bad") {
		t.Errorf("a damaged store: fix %q, want it moved aside", fix)
	}
}

// TestLearnedPairsOfNewerToolgateNotDamaged: learned pairs a newer
// toolgate wrote (a rollback) are not called damaged: the fix is that
// toolgate, or moving them aside to keep them for it, never restoring a
// backup over them.
func TestLearnedPairsOfNewerToolgateNotDamaged(t *testing.T) {
	newer := fmt.Errorf("open: %w", &datafile.NewerError{What: "learned pairs", Path: "/d/learn", Found: 2, Reads: 1, Then: "learning starts afresh"})
	err := damagedError("/d", "/d/learn", newer)
	fix := storage.Fix("/d", err)
	if strings.Contains(err.Error(), "damaged") || !strings.Contains(err.Error(), "written by a newer toolgate (format 2; this one reads format 1)") ||
		!strings.Contains(fix, "run the newer toolgate again") || !strings.Contains(fix, "mv /d/learn /d/learn.newer") || strings.Contains(fix, "backup") {
		t.Errorf("newer store: %v, fix %q", err, fix)
	}
}

// serve's learned pairs, their data folder removed and made again while
// serving (the fix its fault names): the next record moves what was
// learned to a new store there and records to it, the writer is OK again,
// and the stop is clean and keeps every pair. It used to record nothing
// until a restart, which found the store empty.
func TestLearnedPairsReopenedAfterDataFolderRemoved(t *testing.T) {
	g, health, l, tool := learningOnRemadeFolder(t)
	l.Record("show the file", tool)
	if n := len(l.Pairs()); n != 2 {
		t.Errorf("%d pairs after the folder was made again, want 2", n)
	}
	if w := writer(t, health.Report(), "learned pairs"); !w.OK {
		t.Errorf("learned pairs writer after the folder was made again: %+v", w)
	}
	if err := l.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if n := storedPairs(t, g); n != 2 {
		t.Errorf("%d pairs after the stop, want 2", n)
	}
}

// The same, with no record or search between the folder's return and the
// stop (an idle gateway): the stop moves the pairs to a new store there and
// closes it cleanly. It left the store unclosed (exit status 4) and the
// restart found none of them.
func TestLearnedPairsMovedAtStopAfterDataFolderRemoved(t *testing.T) {
	g, _, l, _ := learningOnRemadeFolder(t)
	if err := l.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if n := storedPairs(t, g); n != 1 {
		t.Errorf("%d pairs after the stop, want 1", n)
	}
}

// learningOnRemadeFolder is serve's learned pairs holding one pair (of
// tool), their data folder then removed and made again.
func learningOnRemadeFolder(t *testing.T) (*globals, *storage.Health, *lazyLearning, catalog.Tool) {
	t.Helper()
	data := filepath.Join(t.TempDir(), "data")
	g := &globals{dataDir: data}
	health := storage.New(data, nil)
	if err := health.Prepare(); err != nil {
		t.Fatal(err)
	}
	l := g.openLearning(&config.File{}, health)
	if l.store.Load() == nil {
		t.Fatal("the learned pairs did not open")
	}
	tool := catalog.Tool{Server: "fs", Name: "read_file", Description: "Read the complete contents of a file."}
	l.Record("read my notes", tool)
	if err := os.RemoveAll(data); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(data, 0o755); err != nil {
		t.Fatal(err)
	}
	return g, health, l, tool
}

// storedPairs counts the pairs in g's data folder's store.
func storedPairs(t *testing.T, g *globals) int {
	t.Helper()
	s, err := learn.Open(learnDir(g), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	return len(s.Pairs())
}

// learn checks names against the data folder's index: a tool it lacks is
// recorded with a warning (a misspelt ID ranks nothing), and a reset of a
// server it lacks that forgot nothing is a usage error naming its servers
// (it printed "forgot 0 learned pairs of server memroy's tools", exit 0).
func TestLearnChecksNamesAgainstTheIndex(t *testing.T) {
	data := t.TempDir()
	if out, err := toolgateCmd(t, data, "index", "--tools", writeToolsFile(t, t.TempDir(), 3, ""), "--bm25-only").CombinedOutput(); err != nil {
		t.Fatalf("index: %v\n%s", err, out)
	}
	log := filepath.Join(t.TempDir(), "log.jsonl")
	if err := os.WriteFile(log, []byte(`{"query": "list my files", "relevant": ["srv0__list_files_0", "srv0__list_filez_0"]}`+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := toolgateCmd(t, data, "learn", "--queries", log)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil || !strings.Contains(stdout.String(), "recorded 2 pairs") ||
		!strings.Contains(stderr.String(), `warning: the index has no tool named srv0__list_filez_0 (did you mean "srv0__list_files_0"?): their pairs are recorded`) {
		t.Errorf("learn --queries with an unknown tool: %v\n%s%s", err, stdout.String(), stderr.String())
	}
	out, err := toolgateCmd(t, data, "learn", "--reset", "--server", "srv9").CombinedOutput()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 2 || !strings.Contains(string(out), "learn --reset --server srv9: the index has no server of that name (servers: odd server, srv0, srv1, srv2), and no pair of it was learned") {
		t.Errorf("learn --reset of a server the index lacks: %v\n%s", err, out)
	}
	if out, err := toolgateCmd(t, data, "learn", "--reset", "--server", "srv1").CombinedOutput(); err != nil || !strings.Contains(string(out), "forgot 0 learned pairs of server srv1's tools") {
		t.Errorf("learn --reset of an indexed server with no pairs: %v\n%s", err, out)
	}
	// A server named in another case is that server.
	if out, err := toolgateCmd(t, data, "learn", "--reset", "--server", "SRV0").CombinedOutput(); err != nil || !strings.Contains(string(out), "of server srv0's tools") || strings.Contains(string(out), "forgot 0") {
		t.Errorf("learn --reset --server SRV0: %v\n%s\nwant srv0's pairs forgotten", err, out)
	}
}

// Learned pairs whose files this user may not open (the data folder copied,
// or a command run, by root) are not called damaged: the fix gives the
// files back, instead of moving the store aside (`mv …/learn …/learn.bad`),
// which lost what was learned for nothing.
func TestLearnedPairsOfAnotherUserNotDamaged(t *testing.T) {
	data := t.TempDir()
	store := filepath.Join(data, "learn")
	err := damagedError(data, store, fmt.Errorf("open learned pairs %s: Cannot write pid file %q err: open %s: permission denied", store, store+"/LOCK", store+"/LOCK"))
	fix := storage.Fix(data, err)
	if strings.Contains(err.Error(), "damaged") || strings.Contains(fix, "learn.bad") || !strings.Contains(fix, "chown -R ") || !strings.Contains(fix, store) {
		t.Errorf("error %q, fix %q: want the files given back, not the store moved aside", err, fix)
	}
}

// The searches' look whether the learned pairs' folder was replaced runs
// at most every retryEvery, timed on the monotonic clock: kept as wall
// nanoseconds, a clock set back an hour held every look back for that hour
// (the next record still looked).
func TestLearnedPairsLookOnMonotonicClock(t *testing.T) {
	store, err := learn.Open(t.TempDir(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	l := &lazyLearning{retryEvery: time.Hour, reopen: func(s *learn.Store) (*learn.Store, error) { return s, nil }}
	l.renewed(store, false)
	first := l.lastLook.Load()
	if first == nil || !strings.Contains(first.String(), " m=") {
		t.Fatalf("the look's time %v has no monotonic reading: a wall clock set back would hold the next look back", first)
	}
	if l.renewed(store, false); l.lastLook.Load() != first {
		t.Error("a search within retryEvery looked again")
	}
	before := first.Add(-time.Hour)
	l.lastLook.Store(&before)
	if l.renewed(store, false); l.lastLook.Load() == &before {
		t.Error("a search retryEvery after the last look did not look")
	}
}

// configCmd is toolgateCmd for a command that finds its folders through a
// config file: no $TOOLGATE_DATA_DIR or $TOOLGATE_MODELS_DIR (each beats
// the config), and the default data folder under xdg, to see it left alone.
func configCmd(t *testing.T, xdg string, env []string, args ...string) (string, error) {
	t.Helper()
	cmd := toolgateCmd(t, "", args...)
	cmd.Env = append(append(cmd.Env, "TOOLGATE_DATA_DIR=", "TOOLGATE_MODELS_DIR=", "TOOLGATE_CONFIG=", "XDG_DATA_HOME="+xdg), env...)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// TestLearnConfig: learn --config (or $TOOLGATE_CONFIG) works on the
// learned pairs of the config's data folder, and checks --reset --server
// against the config's servers, as search --config does. It took no
// --config ("unknown flag"), and with $TOOLGATE_CONFIG set seeded and
// forgot the pairs of the default data folder: an operator whose gateway
// serves /srv/tg reset another folder's pairs, and was told it worked.
func TestLearnConfig(t *testing.T) {
	dir := t.TempDir()
	data, xdg := filepath.Join(dir, "data"), filepath.Join(dir, "xdg")
	if out, err := toolgateCmd(t, data, "index", "--tools", writeToolsFile(t, dir, 3, ""), "--bm25-only").CombinedOutput(); err != nil {
		t.Fatalf("index: %v\n%s", err, out)
	}
	cfg := writeConfig(t, `{"mcpServers": {"srv0": {"command": "true"}, "srv1": {"command": "true"}, "gh": {"command": "true"}},
		"toolgate": {"dataDir": "`+data+`"}}`)
	log := filepath.Join(dir, "log.jsonl")
	if err := os.WriteFile(log, []byte(`{"query": "list my files", "relevant": ["srv0__list_files_0", "srv1__list_files_1"]}`+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := configCmd(t, xdg, nil, "learn", "--config", cfg, "--queries", log); err != nil || !strings.Contains(out, "recorded 2 pairs") || strings.Contains(out, "warning") {
		t.Fatalf("learn --config --queries: %v\n%s", err, out)
	}
	want := "2 learned pairs for 2 tools in " + filepath.Join(data, "learn")
	if out, err := configCmd(t, xdg, []string{"TOOLGATE_CONFIG=" + cfg}, "learn"); err != nil || !strings.Contains(out, want) {
		t.Errorf("learn with $TOOLGATE_CONFIG: %v\n%s\nwant %q", err, out, want)
	}
	// --data-dir wins over the config's dataDir, as elsewhere.
	other := filepath.Join(dir, "other")
	if out, err := configCmd(t, xdg, nil, "learn", "--config", cfg, "--data-dir", other); err != nil || !strings.Contains(out, "0 learned pairs for 0 tools in "+filepath.Join(other, "learn")) {
		t.Errorf("learn --config --data-dir: %v\n%s", err, out)
	}
	// A server the config lacks, with no pairs: a usage error naming the
	// config's servers, as search --server names the index's.
	out, err := configCmd(t, xdg, nil, "learn", "--config", cfg, "--reset", "--server", "nope")
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 2 || !strings.Contains(out, `--server "nope": there is no server of that name in the config (servers: gh, srv0, srv1), and no pair of it was learned; leave --server out to forget every server's pairs`) {
		t.Errorf("learn --reset --server nope: %v\n%s", err, out)
	}
	// One the config has, not indexed yet: nothing to forget, no mistake.
	if out, err := configCmd(t, xdg, nil, "learn", "--config", cfg, "--reset", "--server", "gh"); err != nil || !strings.Contains(out, "forgot 0 learned pairs of server gh's tools") {
		t.Errorf("learn --reset --server gh (the config's): %v\n%s", err, out)
	}
	if out, err := configCmd(t, xdg, nil, "learn", "--config", cfg, "--reset", "--server", "SRV1"); err != nil || !strings.Contains(out, "forgot 1 learned pairs of server srv1's tools") {
		t.Errorf("learn --reset --server SRV1: %v\n%s", err, out)
	}
	if out, err := configCmd(t, xdg, nil, "learn", "--config", cfg, "--reset"); err != nil || !strings.Contains(out, "forgot 1 learned pairs of every tool") {
		t.Errorf("learn --config --reset: %v\n%s", err, out)
	}
	if _, err := os.Stat(filepath.Join(xdg, "toolgate")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the default data folder %s was written: %v", filepath.Join(xdg, "toolgate"), err)
	}
}

// TestLearnOnFullDataFolder: `toolgate learn` on a data folder whose file
// system is full said only Badger's words (`Cannot write pid file …: no
// space left on device`), with no fix; it says what the data folder's
// check says (a full file system, toolgate's 64 MiB floor) and the fix,
// once. A tmpfs in a mount namespace of the test's own is the full disk.
func TestLearnOnFullDataFolder(t *testing.T) {
	if out, err := exec.Command("unshare", "-rm", "sh", "-c", `mount -t tmpfs tmpfs "$1"`, "sh", t.TempDir()).CombinedOutput(); err != nil {
		testenv.Missing(t, "this machine does not let a test mount inside `unshare -rm` (%v: %s); the full-disk test needs it", err, bytes.TrimSpace(out))
	}
	queries := filepath.Join(t.TempDir(), "q.jsonl")
	if err := os.WriteFile(queries, []byte(`{"query":"echo a message back","relevant":["fake__echo"]}`+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	base := t.TempDir()
	tg := toolgateCmd(t, filepath.Join(base, "data"))
	// Seeds the store, fills the file system, then asks for the store.
	script := `mount -t tmpfs -o size=96m tmpfs "$1" && mkdir "$1/data" || exit 9
"$2" learn --queries "$3" >/dev/null 2>&1 || exit 8
dd if=/dev/zero of="$1/filler" bs=1M 2>/dev/null
exec "$2" learn`
	cmd := exec.Command("unshare", "-rm", "sh", "-c", script, "sh", base, tg.Path, queries)
	cmd.Env = tg.Env
	out, err := cmd.CombinedOutput()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 1 {
		t.Fatalf("toolgate learn on a full data folder: %v, want exit status 1:\n%s", err, out)
	}
	for _, want := range []string{"full file system", "fix: free space on the file system of " + filepath.Join(base, "data")} {
		if !strings.Contains(string(out), want) {
			t.Errorf("toolgate learn on a full data folder does not say %q:\n%s", want, out)
		}
	}
	// Its error says the fault once (it said the data folder's check
	// twice: the store's and the command's).
	for _, line := range strings.Split(string(out), "\n") {
		if strings.HasPrefix(line, "toolgate: ") && strings.Count(line, "full file system") != 1 {
			t.Errorf("the error does not say the fault once: %s", line)
		}
	}
}

// holderOnFullDisk is the setting of the tests of a full data folder under
// a gateway that holds the learned pairs: a shell script's start (in a
// mount namespace of the test's own: unshare -rm sh -c prologue+… "sh"
// base toolgate config addr queries …) mounts a tmpfs at base, serves the
// fake server's config there at addr ($4) until it is ready with its status
// socket, records one pair through it ("repeat my words to me" → fake__echo,
// which BM25 alone does not find) and fills the file system. $a is the
// gateway's PID.
func holderOnFullDisk(t *testing.T) (base, cfg, addr, queries string, tg *exec.Cmd) {
	t.Helper()
	if out, err := exec.Command("unshare", "-rm", "sh", "-c", `mount -t tmpfs tmpfs "$1"`, "sh", t.TempDir()).CombinedOutput(); err != nil {
		testenv.Missing(t, "this machine does not let a test mount inside `unshare -rm` (%v: %s); the full-disk test needs it", err, bytes.TrimSpace(out))
	}
	queries = filepath.Join(t.TempDir(), "q.jsonl")
	if err := os.WriteFile(queries, []byte(`{"query":"repeat my words to me","relevant":["fake__echo"]}`+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	base = t.TempDir()
	return base, fakeConfig(t, map[string]string{"fake": backendtest.ModeNormal}, nil), freeAddr(t), queries, toolgateCmd(t, filepath.Join(base, "data"))
}

// holderPrologue is holderOnFullDisk's script start.
const holderPrologue = `mount -t tmpfs -o size=96m tmpfs "$1" && mkdir "$1/data" || exit 9
tg=$2
"$tg" serve --config "$3" --http "$4" --mode bm25 2>/dev/null & a=$!
until "$tg" health --ready --addr "$4" >/dev/null 2>&1 && [ -n "$(ls "$1/data/run")" ]; do kill -0 $a || exit 7; sleep 0.05; done
"$tg" learn --queries "$5" >/dev/null 2>&1 || exit 8
dd if=/dev/zero of="$1/filler" bs=1M 2>/dev/null
`

// TestLearnedPairsOfFullDataFolderThroughGateway: with a gateway serving
// on the data folder (it holds the learned pairs since before the fault),
// the file system fills. `toolgate learn` shows the pairs, `toolgate
// search` ranks with them and `toolgate backup` copies them, each through
// that gateway, as on a healthy folder: the store's check refused them
// before its lock was looked at, so learn failed (its fault said twice),
// search ranked without the pairs and backup left them out (exit 1), when
// an operator backs up first of all. A change (`learn --reset`) the
// gateway cannot write says the fault and its fix, as the command did on
// its own. Real processes in a mount namespace
// of the test's own, whose tmpfs is the full disk.
func TestLearnedPairsOfFullDataFolderThroughGateway(t *testing.T) {
	base, cfg, addr, queries, tg := holderOnFullDisk(t)
	backup := filepath.Join(t.TempDir(), "backup")
	// The commands run once the file system is full; each command's exit
	// status is echoed after its output.
	script := holderPrologue + `echo "== learn"; "$tg" learn 2>&1; echo "== exit $?"
echo "== search"; "$tg" search --mode bm25 repeat my words to me 2>&1; echo "== exit $?"
echo "== backup"; "$tg" backup "$6" 2>&1; echo "== exit $?"
echo "== reset"; "$tg" learn --reset 2>&1; echo "== exit $? (reset)"
kill -TERM $a; wait $a`
	ctx, cancel := context.WithTimeout(context.Background(), testenv.Timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, "unshare", "-rm", "sh", "-c", script, "sh", base, tg.Path, cfg, addr, queries, backup)
	cmd.Env = tg.Env
	out, err := cmd.CombinedOutput()
	if ctx.Err() != nil || err != nil && !strings.Contains(string(out), "== backup") {
		t.Fatalf("the script did not run to its end (%v):\n%s", err, out)
	}
	parts := map[string]string{}
	for _, part := range strings.Split(string(out), "== ")[1:] {
		name, text, _ := strings.Cut(part, "\n")
		if name == "exit 0" || name == "exit 1 (reset)" {
			continue
		}
		if strings.HasPrefix(name, "exit ") {
			t.Errorf("a command ended with %s:\n%s", name, out)
			continue
		}
		parts[name] = text
	}
	if l := parts["learn"]; !strings.Contains(l, "1 learned pair") || !strings.Contains(l, "pid") || strings.Contains(l, "full file system") {
		t.Errorf("toolgate learn on a full data folder, a gateway holding the pairs: want its pair, through the gateway:\n%s", l)
	}
	if s := parts["search"]; !strings.Contains(s, "fake__echo") || strings.Contains(s, "ranking without the learned pairs") {
		t.Errorf("toolgate search on a full data folder:\n%s", s)
	}
	if b := parts["backup"]; !strings.Contains(b, "learn/") || strings.Contains(b, "full file system") {
		t.Errorf("toolgate backup on a full data folder, a gateway holding the pairs:\n%s", b)
	}
	// A change the gateway cannot write says the fault's fix, as the
	// command said it on its own.
	if r := parts["reset"]; !strings.Contains(r, "full file system") || !strings.Contains(r, "fix: free space on the file system of "+filepath.Join(base, "data")) {
		t.Errorf("toolgate learn --reset on a full data folder, through the gateway: want exit 1 with the fault and its fix:\n%s", r)
	}
	copied, err := learn.Open(filepath.Join(backup, "learn"), nil)
	if err != nil {
		t.Fatalf("the backup's learned pairs: %v\n%s", err, out)
	}
	defer copied.Close()
	if n, _ := copied.Stats(); n != 1 {
		t.Errorf("pairs in the backup: %d, want 1", n)
	}
}

// TestSecondGatewayOnFullDataFolderLearnsThroughHolder: a gateway started
// beside one that holds the learned pairs (MCP clients each start their
// own) on a data folder that is full ranks with the holder's pairs, as on
// a healthy folder: the store's check refused it before its lock was
// looked at, so it ranked without them ("learning from use is off"). A
// query that only the learned pair matches (BM25) finds its tool. Real
// processes in a mount namespace of the test's own, whose tmpfs is the
// full disk; the test speaks to the second gateway over HTTP.
func TestSecondGatewayOnFullDataFolderLearnsThroughHolder(t *testing.T) {
	base, cfg, addrA, queries, tg := holderOnFullDisk(t)
	addrB := freeAddr(t)
	// B up on the full disk; "ready" then, and both stopped once the test
	// closes stdin.
	script := holderPrologue + `"$tg" serve --config "$3" --http "$6" --mode bm25 & b=$!
until "$tg" health --ready --addr "$6" >/dev/null 2>&1; do kill -0 $b || exit 6; sleep 0.05; done
echo ready
read -r _
kill -TERM $b $a; wait $b; wait $a`
	cmd := exec.Command("unshare", "-rm", "sh", "-c", script, "sh", base, tg.Path, cfg, addrA, queries, addrB)
	cmd.Env = tg.Env
	in, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	lines := startLines(t, cmd, "gateway B: ")
	select {
	case l, ok := <-lines:
		if !ok || l != "ready" {
			in.Close()
			t.Fatalf("the script did not start both gateways (%q, %v): %v", l, ok, cmd.Wait())
		}
	case <-time.After(testenv.Timeout):
		t.Fatal("the gateways did not start")
	}
	defer func() {
		in.Close()
		for range lines {
		}
		_ = cmd.Wait()
	}()
	g := &gatewayProc{addr: addrB}
	ctx, cs := g.connect(t)
	testenv.Eventually(t, "B ranks with A's learned pair", func() bool {
		out, _ := searchTools(t, ctx, cs, "repeat my words to me", 3)
		return len(out.Tools) > 0 && out.Tools[0].Name == "fake__echo"
	})
	rep := getStatus(t, addrB)
	if rep.Learning == nil || rep.Learning.Holder == "" || rep.Learning.Holder == gateway.ThisGateway || rep.Learning.Pairs != 1 {
		t.Errorf("B's learning: %+v, want A's one pair, through A", rep.Learning)
	}
	if rep.Storage == nil || rep.Storage.Writable || !strings.Contains(rep.Storage.Error, "full file system") {
		t.Errorf("B's storage: %+v, want the full file system", rep.Storage)
	}
}

// TestLearnDataFolderFillsMidRun: the data folder's file system fills while
// `toolgate learn --queries` writes a long log. The command checks the data
// folder before each write, as serve does, and stops with the fault and its
// fix (exit 1). It had no check: Badger wrote on into its memory maps (a
// SIGBUS crash) or failed a memtable, and then a read panicked and the
// store's Close retried the flush for good (the command hung).
func TestLearnDataFolderFillsMidRun(t *testing.T) {
	if out, err := exec.Command("unshare", "-rm", "sh", "-c", `mount -t tmpfs tmpfs "$1"`, "sh", t.TempDir()).CombinedOutput(); err != nil {
		testenv.Missing(t, "this machine does not let a test mount inside `unshare -rm` (%v: %s); the full-disk test needs it", err, bytes.TrimSpace(out))
	}
	queries := filepath.Join(t.TempDir(), "q.jsonl")
	var log bytes.Buffer
	for i := range 100_000 {
		fmt.Fprintf(&log, `{"query":"echo the message of meeting number %d back","relevant":["fake__echo","fake__add"]}`+"\n", i)
	}
	if err := os.WriteFile(queries, log.Bytes(), 0o600); err != nil {
		t.Fatal(err)
	}
	base := t.TempDir()
	tg := toolgateCmd(t, filepath.Join(base, "data"))
	// The file system fills once the command has opened the store (its
	// LOCK file is there), while it writes the log's pairs: to 24 MiB
	// free, under toolgate's 64 MiB floor (storage.DefaultMinFree), so
	// that the next write's check refuses it. Not to the last byte: a
	// write already past its check goes into Badger's memory maps, and on
	// a file system with no page left that is SIGBUS (the race the README
	// says no check can close, "Why 64 MiB free"); with dd filling it all,
	// the command died so once in several runs on a loaded machine.
	script := `mount -t tmpfs -o size=96m tmpfs "$1" && mkdir "$1/data" || exit 9
"$2" learn --queries "$3" 2>&1 & pid=$!
while [ ! -e "$1/data/learn/LOCK" ] && kill -0 $pid 2>/dev/null; do sleep 0.01; done
avail=$(df -Pk "$1" | awk 'NR==2 {print $4}')
dd if=/dev/zero of="$1/filler" bs=1k count=$((avail - 24576)) 2>/dev/null
wait $pid`
	ctx, cancel := context.WithTimeout(context.Background(), testenv.Timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, "unshare", "-rm", "sh", "-c", script, "sh", base, tg.Path, queries)
	cmd.Env = tg.Env
	out, err := cmd.CombinedOutput()
	if ctx.Err() != nil {
		t.Fatalf("toolgate learn --queries did not end after the data folder filled:\n%s", out)
	}
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 1 || !strings.Contains(string(out), "full file system") {
		t.Fatalf("toolgate learn --queries on a data folder that fills: %v, want exit status 1 naming the full file system:\n%s", err, out)
	}
}

// `learn --config b.json --queries` checks its tools' names against the
// index b's gateway starts from: the one kept for b when a.json's was
// built since (index.OpenFor). It checked them against a's, and warned of
// b's tools as unknown ones.
func TestLearnConfigChecksNamesAgainstItsIndex(t *testing.T) {
	data := t.TempDir()
	cfgA := writeConfig(t, `{"mcpServers": {"calc": {"command": "sh"}}}`)
	cfgB := writeConfig(t, `{"mcpServers": {"fs": {"command": "sh"}}}`)
	build := func(path, server, name string) {
		t.Helper()
		f, err := config.Load(path)
		if err != nil {
			t.Fatal(err)
		}
		tools := []catalog.Tool{{Server: server, Name: name, Description: "A tool of " + server + "."}}
		ix, _, err := index.Ensure(context.Background(), index.Dir(data), tools, nil, &index.Options{Config: f.Source()})
		if err != nil {
			t.Fatal(err)
		}
		ix.Close()
	}
	build(cfgB, "fs", "read_file")
	build(cfgA, "calc", "add")
	log := filepath.Join(t.TempDir(), "log.jsonl")
	if err := os.WriteFile(log, []byte(`{"query": "read my notes", "relevant": ["fs__read_file"]}`+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := toolgateCmd(t, data, "learn", "--config", cfgB, "--queries", log).CombinedOutput()
	if err != nil || !strings.Contains(string(out), "recorded 1 pair") || strings.Contains(string(out), "no tool named") {
		t.Errorf("learn --config b.json --queries after a.json's index: %v\n%s", err, out)
	}
}
