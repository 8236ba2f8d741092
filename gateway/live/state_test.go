package live

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolgate/toolgate/gateway/config"
	"github.com/toolgate/toolgate/gateway/policy"
	"github.com/toolgate/toolgate/index/catalog"
	"github.com/toolgate/toolgate/internal/storage"
	"github.com/toolgate/toolgate/internal/testenv"
	"github.com/toolgate/toolgate/search"
)

// Disabling a server hides its tools at once and stops it; the choice is
// kept in the state file across restarts; enabling brings it back; a
// change of the state file by another process applies too.
func TestSetDisabled(t *testing.T) {
	state := filepath.Join(t.TempDir(), "data", "state.json")
	dir := t.TempDir()
	pool := newFakePool("a", "b")
	pool.list("a", "apple")
	pool.list("b", "banana")
	builtin := map[string][]*mcp.Tool{config.BuiltinServer: {{Name: "list_servers", Description: "list the servers"}}}
	f := newFixture(t, dir, pool, &Options{StatePath: state, Builtin: builtin, Debounce: time.Millisecond}, "a", "b")
	f.run(t)
	if got := f.find(t, "banana apple servers", 5); !slices.Equal(got, []string{"a__apple", "b__banana", "toolgate__list_servers"}) {
		t.Fatalf("before: %v", got)
	}

	ctx := context.Background()
	changed, err := f.loop.SetDisabled(ctx, "b", true)
	if err != nil || !changed {
		t.Fatalf("SetDisabled(b): %v, %v", changed, err)
	}
	if got := f.find(t, "banana apple servers", 5); !slices.Equal(got, []string{"a__apple", "toolgate__list_servers"}) {
		t.Errorf("after disabling b: %v", got)
	}
	if diff := cmp.Diff([][]string{{"a"}}, pool.reconfigures()); diff != "" {
		t.Errorf("the pool still runs b (-want +got):\n%s", diff)
	}
	if st, err := ReadState(state); err != nil || !slices.Equal(st.Disabled, []string{"b"}) {
		t.Errorf("state file: %+v, %v", st, err)
	}
	if got := f.loop.Stats().Disabled; !slices.Equal(got, []string{"b"}) {
		t.Errorf("Stats.Disabled = %v", got)
	}
	// The counts say what search_tools ranks, and what b holds back.
	if st := f.loop.Stats(); st.CatalogTools != 2 || st.DisabledTools != 1 {
		t.Errorf("b disabled: catalogTools %d, disabledTools %d; want 2 (a__apple, toolgate__list_servers) and 1 (b__banana)", st.CatalogTools, st.DisabledTools)
	}
	// toolgate_catalog_tools reads the same counts, by server.
	if diff := cmp.Diff(map[string]int{"a": 1, "b": 0, config.BuiltinServer: 1}, f.loop.CatalogToolsByServer()); diff != "" {
		t.Errorf("CatalogToolsByServer with b disabled (-want +got):\n%s", diff)
	}
	if changed, err := f.loop.SetDisabled(ctx, "b", true); changed || err != nil {
		t.Errorf("disabling b again: %v, %v", changed, err)
	}
	// b's tools stay in the catalog (hidden) through a re-index (a's
	// listing changes: an unchanged catalog is not re-indexed at all).
	pool.list("a", "apple", "apricot")
	f.loop.ToolsChanged("a", nil)
	f.wait(t, "the re-index", func(s Stats) bool { return s.CatalogGeneration == 2 && !s.Reindexing })
	if !f.loop.Cataloged("b") {
		t.Error("a re-index dropped the disabled server's tools")
	}
	if st := f.loop.Stats(); st.CatalogTools != 3 || st.DisabledTools != 1 {
		t.Errorf("re-indexed with b disabled: catalogTools %d, disabledTools %d; want 3 and 1", st.CatalogTools, st.DisabledTools)
	}
	if diff := cmp.Diff(map[string]int{"a": 2, "b": 0, config.BuiltinServer: 1}, f.loop.CatalogToolsByServer()); diff != "" {
		t.Errorf("CatalogToolsByServer re-indexed with b disabled (-want +got):\n%s", diff)
	}
	for _, c := range []struct{ server, want string }{
		{config.BuiltinServer, "built into the gateway"},
		{"zzz", `no server named "zzz"`},
	} {
		if _, err := f.loop.SetDisabled(ctx, c.server, true); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("SetDisabled(%s): %v, want %q", c.server, err, c.want)
		}
	}
	if err := f.loop.Close(); err != nil {
		t.Fatal(err)
	}

	// The next run starts with b disabled: not run, hidden.
	pool2 := newFakePool("a")
	pool2.list("a", "apple")
	f2 := newFixture(t, dir, pool2, &Options{StatePath: state, Builtin: builtin, Debounce: time.Millisecond}, "a", "b")
	var names []string
	for _, s := range f2.loop.Servers() {
		names = append(names, s.Name)
	}
	if !slices.Equal(names, []string{"a"}) {
		t.Errorf("Servers() after a restart = %v, want a only", names)
	}
	f2.run(t)
	if got := f2.find(t, "banana", 5); slices.Contains(got, "b__banana") {
		t.Errorf("b's tools shown after a restart: %v", got)
	}
	if changed, err := f2.loop.SetDisabled(ctx, "b", false); !changed || err != nil {
		t.Fatalf("enable b: %v, %v", changed, err)
	}
	if got := f2.find(t, "banana", 5); !slices.Contains(got, "b__banana") {
		t.Errorf("b's tools not back at once after enabling: %v", got)
	}
	// (A re-index of a's listing may be under way: it counts anew.)
	f2.wait(t, "b's tools counted again, none held back", func(s Stats) bool {
		return s.DisabledTools == 0 && s.CatalogTools == len(f2.loop.IDs())
	})
	if r := pool2.reconfigures(); len(r) == 0 || !slices.Equal(r[len(r)-1], []string{"a", "b"}) {
		t.Errorf("enabling did not start b: %v", r)
	}

	// Another process (toolgate servers disable) edits the state file.
	if err := WriteState(state, State{Disabled: []string{"a"}}); err != nil {
		t.Fatal(err)
	}
	f2.wait(t, "the state file change", func(s Stats) bool { return slices.Equal(s.Disabled, []string{"a"}) })
	if got := f2.find(t, "apple banana", 5); !slices.Equal(got, []string{"b__banana"}) {
		t.Errorf("after the state file disabled a: %v", got)
	}
	if d := f2.loop.Policy().Decide(nil, toolOf("a__apple")); d.Allowed || d.Rule != policy.RuleDisabled {
		t.Errorf("Decide(a__apple) = %+v", d)
	}

	// A server disabled and then removed from the config may be enabled:
	// its name leaves the disabled ones (toolgate__remove_server does so),
	// so that one added later under the name starts. Any other name the
	// config lacks is still an error.
	if err := WriteState(state, State{Disabled: []string{"gone"}}); err != nil {
		t.Fatal(err)
	}
	if changed, err := f2.loop.SetDisabled(ctx, "gone", false); !changed || err != nil {
		t.Errorf("enabling a removed server that was disabled: %v, %v", changed, err)
	}
	if st, err := ReadState(state); err != nil || len(st.Disabled) != 0 {
		t.Errorf("state file after enabling gone: %+v, %v", st, err)
	}
	if _, err := f2.loop.SetDisabled(ctx, "zzz", false); err == nil || !strings.Contains(err.Error(), `no server named "zzz"`) {
		t.Errorf("enabling a name the config lacks: %v", err)
	}
}

// `toolgate servers restart` counts a request in the state file; the
// running gateway restarts each server whose count changed, never a
// disabled or unknown one, and not the requests it found at its start.
// Disabling keeps the counts in the file.
// TestEditStateConcurrent: edits of the state file at once (a command
// disabling one server, a client another, a restart asked) lose none of
// the changes and none runs inside another.
func TestEditStateConcurrent(t *testing.T) {
	state := filepath.Join(t.TempDir(), "data", "state.json")
	var inside, overlaps atomic.Int32
	var wg sync.WaitGroup
	for i := range 20 {
		wg.Go(func() {
			err := EditState(state, func(st State) (State, bool, error) {
				if inside.Add(1) > 1 {
					overlaps.Add(1)
				}
				defer inside.Add(-1)
				for range 100 {
					runtime.Gosched()
				}
				if i%4 == 0 {
					return st.WithRestart("r"), true, nil
				}
				st, changed := st.With(fmt.Sprintf("s%02d", i), true)
				return st, changed, nil
			})
			if err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	st, err := ReadState(state)
	if err != nil {
		t.Fatal(err)
	}
	if len(st.Disabled) != 15 || st.RestartRequests["r"] != 5 || overlaps.Load() != 0 {
		t.Errorf("20 edits at once: %d disabled, %d restarts, %d inside another; want 15, 5, 0", len(st.Disabled), st.RestartRequests["r"], overlaps.Load())
	}
}

func TestRestartRequests(t *testing.T) {
	state := filepath.Join(t.TempDir(), "state.json")
	if err := WriteState(state, State{RestartRequests: map[string]uint64{"a": 3}}); err != nil {
		t.Fatal(err)
	}
	pool := newFakePool("a", "b")
	pool.list("a", "apple")
	pool.list("b", "banana")
	pool.restarted = make(chan string, 10)
	f := newFixture(t, t.TempDir(), pool, &Options{StatePath: state, Debounce: time.Millisecond}, "a", "b")
	f.run(t)
	next := func(t *testing.T, want string) {
		t.Helper()
		select {
		case got := <-pool.restarted:
			if got != want {
				t.Fatalf("restarted %s, want %s", got, want)
			}
		case <-time.After(time.Minute):
			t.Fatalf("%s not restarted", want)
		}
	}
	write := func(st State) {
		t.Helper()
		if err := WriteState(state, st); err != nil {
			t.Fatal(err)
		}
	}
	// a's 3 were asked of an earlier gateway: only b's is new.
	write(State{RestartRequests: map[string]uint64{"a": 3, "b": 1}})
	next(t, "b")
	write(State{RestartRequests: map[string]uint64{"a": 4, "b": 1}})
	next(t, "a")
	// b disabled and asked for, zzz unknown: neither is restarted (the
	// next restart is a's).
	if _, err := f.loop.SetDisabled(context.Background(), "b", true); err != nil {
		t.Fatal(err)
	}
	if st, err := ReadState(state); err != nil || st.RestartRequests["a"] != 4 {
		t.Fatalf("SetDisabled lost the restart requests: %+v, %v", st, err)
	}
	write(State{Disabled: []string{"b"}, RestartRequests: map[string]uint64{"a": 4, "b": 2, "zzz": 1}})
	write(State{Disabled: []string{"b"}, RestartRequests: map[string]uint64{"a": 5, "b": 2, "zzz": 1}})
	next(t, "a")
	// The file deleted: the counts are gone, nothing restarts (b is
	// enabled again); a request after that counts from nothing.
	if err := os.Remove(state); err != nil {
		t.Fatal(err)
	}
	f.wait(t, "b enabled by the deletion", func(s Stats) bool { return len(s.Disabled) == 0 })
	write(State{RestartRequests: map[string]uint64{"b": 1}})
	next(t, "b")
	if n := len(pool.restarted); n != 0 {
		t.Errorf("%d more restarts", n)
	}
}

// TestStateChangedBeforeWatched: a restart and a disable written to the
// state file after the loop read it and before it watches it (while a cold
// start builds its first index) are applied once it watches it; they were
// lost.
func TestStateChangedBeforeWatched(t *testing.T) {
	state := filepath.Join(t.TempDir(), "state.json")
	pool := newFakePool("a", "b")
	pool.list("a", "apple")
	pool.list("b", "banana")
	pool.restarted = make(chan string, 10)
	f := newFixture(t, t.TempDir(), pool, &Options{StatePath: state, Debounce: time.Millisecond}, "a", "b")
	if err := WriteState(state, State{Disabled: []string{"a"}, RestartRequests: map[string]uint64{"b": 1}}); err != nil {
		t.Fatal(err)
	}
	f.run(t)
	select {
	case got := <-pool.restarted:
		if got != "b" {
			t.Fatalf("restarted %s, want b", got)
		}
	case <-time.After(time.Minute):
		t.Fatal("b not restarted")
	}
	f.wait(t, "a disabled", func(s Stats) bool { return slices.Equal(s.Disabled, []string{"a"}) })
}

func toolOf(id string) catalog.Tool {
	server, name, _ := catalog.SplitID(id)
	return catalog.Tool{Server: server, Name: name}
}

// Profiles follow the config: a reload that changes them applies at once.
func TestReloadAppliesProfiles(t *testing.T) {
	pool := newFakePool("a", "b")
	pool.list("a", "apple")
	pool.list("b", "banana")
	f := newFixture(t, t.TempDir(), pool, &Options{Debounce: time.Millisecond}, "a", "b")
	f.run(t)
	if f.loop.Policy().HasProfile("p") {
		t.Fatal("profile p before it was configured")
	}
	writeFile(t, f.path, configBytes(t, map[string]any{"profiles": map[string]any{"p": map[string]any{"servers": []string{"a"}}}}, "a", "b"))
	st := f.wait(t, "the reload", func(s Stats) bool { return s.ReloadGeneration == 1 })
	if !f.loop.Policy().HasProfile("p") {
		t.Fatal("the reload did not apply profile p")
	}
	// The reload says what it applied, as it does for toolgate.search.
	if r := st.LastReload; !slices.Equal(r.Applied, []string{"toolgate.profiles"}) {
		t.Errorf("LastReload.Applied = %v, want toolgate.profiles", r.Applied)
	}
	if log := f.logs.String(); !strings.Contains(log, "applied=[toolgate.profiles]") {
		t.Errorf("the reload's log line does not say what it applied:\n%s", log)
	}
	writeFile(t, f.path, configBytes(t, map[string]any{"profiles": map[string]any{"p": map[string]any{"servers": []string{"a"}}}, "management": map[string]any{"allowConfigChanges": true}}, "a", "b"))
	st = f.wait(t, "the second reload", func(s Stats) bool { return s.ReloadGeneration == 2 })
	if r := st.LastReload; !slices.Equal(r.Applied, []string{"toolgate.management"}) {
		t.Errorf("LastReload.Applied = %v, want toolgate.management alone", r.Applied)
	}
	// The default timeouts reach every server entry in place: applied too.
	writeFile(t, f.path, configBytes(t, map[string]any{"profiles": map[string]any{"p": map[string]any{"servers": []string{"a"}}}, "management": map[string]any{"allowConfigChanges": true},
		"connectTimeout": "7s", "callTimeout": "3m"}, "a", "b"))
	st = f.wait(t, "the third reload", func(s Stats) bool { return s.ReloadGeneration == 3 })
	if r := st.LastReload; !slices.Equal(r.Applied, []string{"toolgate.connectTimeout", "toolgate.callTimeout"}) || r.RestartOnly != nil {
		t.Errorf("LastReload = %+v, want the two timeouts applied and nothing waiting for a restart", r)
	}
	c := &policy.Caller{Transport: policy.TransportHTTP, Profile: "p"}
	res, err := f.loop.Search(context.Background(), search.Query{Text: "apple banana", Filter: f.loop.Policy().Filter(c)})
	if err != nil || len(res.Hits) != 1 || res.Hits[0].Tool.ID() != "a__apple" {
		t.Errorf("profile p search: %v, %v", hitIDs(res), err)
	}
}

// Several config files are read as one, and a change to any of them is a
// reload.
func TestReloadSeveralFiles(t *testing.T) {
	pool := newFakePool("a")
	pool.list("a", "apple")
	f := newFixture(t, t.TempDir(), pool, &Options{Debounce: time.Millisecond}, "a")
	proj := filepath.Join(t.TempDir(), ".mcp.json")
	writeFile(t, proj, configBytes(t, nil, "b"))
	f.loop.opts.ConfigPaths = append(f.loop.opts.ConfigPaths, proj)
	f.run(t)
	// The start's look found the second file: b is added.
	st := f.wait(t, "the start reload", func(s Stats) bool { return s.ReloadGeneration == 1 })
	if !slices.Equal(st.LastReload.Added, []string{"b"}) {
		t.Errorf("start reload: %+v", st.LastReload)
	}
	writeFile(t, proj, configBytes(t, nil, "c"))
	st = f.wait(t, "the project file reload", func(s Stats) bool { return s.ReloadGeneration == 2 })
	if !slices.Equal(st.LastReload.Added, []string{"c"}) || !slices.Equal(st.LastReload.Removed, []string{"b"}) {
		t.Errorf("project file reload: %+v", st.LastReload)
	}
	if err := os.WriteFile(proj, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	st = f.wait(t, "the empty file", func(s Stats) bool { return s.ReloadGeneration == 3 })
	if !strings.Contains(st.LastReload.Error, proj+" is empty") {
		t.Errorf("empty project file: %+v", st.LastReload)
	}
}

// A state file that cannot be written (here its data folder was removed
// under the running gateway) changes nothing, says so with the fix, and
// does not make the removed folder again.
func TestSetDisabledStateUnwritable(t *testing.T) {
	data := filepath.Join(t.TempDir(), "data")
	if err := os.Mkdir(data, 0o755); err != nil {
		t.Fatal(err)
	}
	pool := newFakePool("a", "b")
	pool.list("a", "apple")
	pool.list("b", "banana")
	f := newFixture(t, t.TempDir(), pool, &Options{StatePath: filepath.Join(data, "state.json"), Debounce: time.Millisecond}, "a", "b")
	f.run(t)
	if err := os.Remove(data); err != nil {
		t.Fatal(err)
	}
	changed, err := f.loop.SetDisabled(context.Background(), "b", true)
	if changed || err == nil || !strings.Contains(err.Error(), `server "b" is not disabled, nothing changed`) || !strings.Contains(err.Error(), "does not exist") ||
		!strings.Contains(err.Error(), "create it again") {
		t.Errorf("SetDisabled(b) with the data folder removed: %v, %v; want an error saying nothing changed, why and the fix", changed, err)
	}
	if got := f.find(t, "banana", 5); !slices.Contains(got, "b__banana") {
		t.Errorf("b's tools hidden though disabling it failed: %v", got)
	}
	if _, err := os.Stat(data); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the removed data folder was made again (%v)", err)
	}
}

// TestDisabledHoldWhenDataFolderRemoved: a server disabled at run time
// stays disabled when the data folder is removed under the running gateway
// (rm -rf, a volume gone), and the state file is written back once the
// folder is there again (mkdir -p), so that the next start keeps it
// disabled. The state file gone with its folder read as a deletion of the
// file: every server disabled was started again (its tools searchable and
// runnable), and the file was never written back. A file deleted alone
// still enables them (TestRestartRequests).
func TestDisabledHoldWhenDataFolderRemoved(t *testing.T) {
	data := filepath.Join(t.TempDir(), "data")
	if err := os.Mkdir(data, 0o755); err != nil {
		t.Fatal(err)
	}
	state := filepath.Join(data, "state.json")
	pool := newFakePool("a", "b")
	pool.list("a", "apple")
	pool.list("b", "banana")
	gate := &switchGate{}
	f := newFixture(t, t.TempDir(), pool, &Options{StatePath: state, Debounce: time.Millisecond, Storage: gate, StorageRetry: 10 * time.Millisecond}, "a", "b")
	f.run(t)
	if _, err := f.loop.SetDisabled(context.Background(), "b", true); err != nil {
		t.Fatal(err)
	}
	f.loop.SetDescribed("a", "Apples, by the crate.")
	var enabled atomic.Int32 // changes seen with b enabled
	f.loop.OnChange(func() {
		if !slices.Contains(f.loop.Stats().Disabled, "b") {
			enabled.Add(1)
		}
	})
	// rm -rf while the gateway writes a file there fails ("directory not
	// empty", CI saw it), as it does for a person, who runs it again.
	testenv.Eventually(t, "rm -rf of the data folder", func() bool { return os.RemoveAll(data) == nil })
	if err := os.Mkdir(data, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("log:\n%s", f.logs)
		}
	})
	testenv.Eventually(t, "the state file written back", func() bool {
		st, err := ReadState(state)
		return err == nil && slices.Equal(st.Disabled, []string{"b"})
	})
	// With what the servers said of themselves, which the next warm start
	// names them by (it was written back without).
	if st, _ := ReadState(state); st.Described["a"] != "Apples, by the crate." {
		t.Errorf("the state file written back describes the servers as %q, want a's description", st.Described)
	}
	if n := enabled.Load(); n != 0 || !slices.Contains(f.loop.Stats().Disabled, "b") {
		t.Errorf("b enabled %d times while the data folder was gone; disabled now: %v", n, f.loop.Stats().Disabled)
	}
	if got := f.find(t, "banana", 5); slices.Contains(got, "b__banana") {
		t.Errorf("the disabled server's tools are searchable: %v", got)
	}

	// Made again where it cannot take writes yet (full, read-only): the
	// file is written back once it can, without waiting for a change of
	// the file to wake the watcher.
	gate.refuse.Store(true)
	if err := os.RemoveAll(data); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(data, 0o755); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, "the folder made again found unwritable", func() bool { return gate.refusals.Load() > 0 })
	gate.refuse.Store(false)
	testenv.Eventually(t, "the state file written back once the folder takes writes", func() bool {
		st, err := ReadState(state)
		return err == nil && slices.Equal(st.Disabled, []string{"b"})
	})
	if n := enabled.Load(); n != 0 {
		t.Errorf("b enabled %d times while the data folder was gone", n)
	}
}

// TestStateWithoutLockDeletedAlone: a state file without its lock file
// beside it (a data folder restored from `toolgate backup`, which copies
// no lock file, or one written by hand) deleted alone enables every server,
// as README says; it read as the data folder removed while serving, and the
// file was written back with the servers disabled. The file is the one
// 5b1fd9a's `toolgate backup` wrote.
func TestStateWithoutLockDeletedAlone(t *testing.T) {
	data := t.TempDir()
	state := filepath.Join(data, "state.json")
	b, err := os.ReadFile(filepath.Join("testdata", "state-5b1fd9a-backup.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(state, b, 0o600); err != nil {
		t.Fatal(err)
	}
	pool := newFakePool("a", "b")
	pool.list("a", "apple")
	pool.list("b", "banana")
	f := newFixture(t, t.TempDir(), pool, &Options{StatePath: state, Debounce: time.Millisecond}, "a", "b")
	f.run(t)
	f.wait(t, "b disabled by the restored file", func(s Stats) bool { return slices.Equal(s.Disabled, []string{"b"}) })
	testenv.Eventually(t, "the restored file read by the watcher", func() bool {
		f.loop.reloadMu.Lock()
		defer f.loop.reloadMu.Unlock()
		return f.loop.stateSeen
	})
	if err := os.Remove(state); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("log:\n%s", f.logs)
		}
	})
	f.wait(t, "b enabled by the deletion", func(s Stats) bool { return len(s.Disabled) == 0 })
	if _, err := os.Stat(state); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("the deleted state file was written back (stat: %v)", err)
	}
}

// switchGate is a data folder's health that refuses writes while refuse
// is set, counting its refusals.
type switchGate struct {
	storage.OSMkdir
	refuse   atomic.Bool
	refusals atomic.Int32
}

func (g *switchGate) Check() error {
	if g.refuse.Load() {
		g.refusals.Add(1)
		return errors.New("data folder is on a full file system")
	}
	return nil
}
func (*switchGate) Fail(error) {}
func (*switchGate) OK()        {}

// Stats.Disabled names only the servers of this gateway's config: the
// state file, shared by every gateway on the data folder, may name one of
// another gateway's config. A reload that adds it makes it this one's.
func TestDisabledOfThisConfig(t *testing.T) {
	state := filepath.Join(t.TempDir(), "state.json")
	if err := WriteState(state, State{Disabled: []string{"a", "web"}}); err != nil {
		t.Fatal(err)
	}
	pool := newFakePool("a", "b")
	pool.list("b", "banana")
	f := newFixture(t, t.TempDir(), pool, &Options{StatePath: state, Debounce: time.Millisecond}, "a", "b")
	f.run(t)
	if got := f.loop.Stats().Disabled; !slices.Equal(got, []string{"a"}) {
		t.Errorf("Stats.Disabled = %v, want [a] (web is not in this config)", got)
	}
	writeFile(t, f.path, configBytes(t, nil, "a", "b", "web"))
	st := f.wait(t, "the reload that adds web", func(s Stats) bool { return s.ReloadGeneration == 1 })
	if !slices.Equal(st.Disabled, []string{"a", "web"}) {
		t.Errorf("after adding web: Stats.Disabled = %v, want [a web]", st.Disabled)
	}
}

// What a server said of itself is kept in the state file beside the
// servers disabled, and read by the next loop on the folder (Described);
// a same text is not written again, "" removes the server's, and a state
// file that does not read is left as it is.
func TestSetDescribed(t *testing.T) {
	state := filepath.Join(t.TempDir(), "state.json")
	if err := WriteState(state, State{Disabled: []string{"b"}}); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	f := newFixture(t, dir, newFakePool("a", "b"), &Options{StatePath: state}, "a", "b")
	f.loop.SetDescribed("a", "An apple server")
	f.loop.SetDescribed("b", "A banana server")
	f.loop.SetDescribed("b", "")
	st, err := ReadState(state)
	if err != nil || !slices.Equal(st.Disabled, []string{"b"}) || !maps.Equal(st.Described, map[string]string{"a": "An apple server"}) {
		t.Fatalf("state file: %+v, %v", st, err)
	}
	fi, _ := os.Stat(state)
	f.loop.SetDescribed("a", "An apple server")
	if fi2, _ := os.Stat(state); !fi2.ModTime().Equal(fi.ModTime()) || fi2.Size() != fi.Size() {
		t.Errorf("the same text was written again")
	}
	next := New(dir, f.loop.Config(), &Options{StatePath: state, Search: &search.Options{Mode: search.ModeBM25}})
	t.Cleanup(func() { next.Close() })
	if got := next.Described("a"); got != "An apple server" {
		t.Errorf("the next start's Described(a) = %q", got)
	}
	if err := os.WriteFile(state, []byte("{not json"), 0o600); err != nil {
		t.Fatal(err)
	}
	next.SetDescribed("a", "another text")
	if b, _ := os.ReadFile(state); string(b) != "{not json" {
		t.Errorf("a state file that does not read was rewritten: %s", b)
	}
}

// Disabling a server or asking for a restart keeps what the servers said
// of themselves (State.Described): With and WithRestart dropped it.
func TestStateEditsKeepDescribed(t *testing.T) {
	st := State{Disabled: []string{"a"}, Described: map[string]string{"a": "An apple server"}}
	next, _ := st.With("b", true)
	if !maps.Equal(next.Described, st.Described) {
		t.Errorf("With: described %v, want %v", next.Described, st.Described)
	}
	if next := st.WithRestart("a"); !maps.Equal(next.Described, st.Described) {
		t.Errorf("WithRestart: described %v, want %v", next.Described, st.Described)
	}
}

// A state file a newer toolgate wrote may hold fields this one does not
// know (met at a rollback): an edit by this one (disable, enable, restart,
// what a server said of itself) keeps them as they are. They were dropped
// at its first write.
func TestStateEditsKeepUnknownFields(t *testing.T) {
	path := filepath.Join(t.TempDir(), "state.json")
	newer := `{"disabled": ["a"], "paused": {"b": "2026-12-06T15:00:00Z"}, "version": 3}`
	if err := os.WriteFile(path, []byte(newer), 0o600); err != nil {
		t.Fatal(err)
	}
	edits := []func(State) State{
		func(st State) State { next, _ := st.With("c", true); return next },
		func(st State) State { return st.WithRestart("c") },
		func(st State) State { next, _ := st.With("a", false); return next },
	}
	for _, edit := range edits {
		if err := EditState(path, func(st State) (State, bool, error) { return edit(st), true, nil }); err != nil {
			t.Fatal(err)
		}
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var got map[string]any
	if err := json.Unmarshal(b, &got); err != nil {
		t.Fatal(err)
	}
	if got["version"] != 3.0 || fmt.Sprint(got["paused"]) != "map[b:2026-12-06T15:00:00Z]" {
		t.Errorf("the newer toolgate's fields are gone or changed:\n%s", b)
	}
	st, err := ReadState(path)
	if err != nil || !slices.Equal(st.Disabled, []string{"c"}) || st.RestartRequests["c"] != 1 {
		t.Errorf("state %+v, %v; want c disabled and restarted once", st, err)
	}
}

// A server enabled through the state file (`toolgate servers enable` in
// another process, or an older toolgate's on the same data folder) is
// logged as enabled by that command: the line named `toolgate servers
// disable` for an enable.
func TestStateFileEnableSaysEnable(t *testing.T) {
	state := filepath.Join(t.TempDir(), "state.json")
	pool := newFakePool("a", "b")
	pool.list("a", "apple")
	pool.list("b", "banana")
	f := newFixture(t, t.TempDir(), pool, &Options{StatePath: state, Debounce: time.Millisecond}, "a", "b")
	f.run(t)
	if err := WriteState(state, State{Disabled: []string{"a"}}); err != nil {
		t.Fatal(err)
	}
	f.wait(t, "a disabled", func(s Stats) bool { return slices.Equal(s.Disabled, []string{"a"}) })
	if err := WriteState(state, State{}); err != nil {
		t.Fatal(err)
	}
	f.wait(t, "a enabled", func(s Stats) bool { return len(s.Disabled) == 0 })
	var disabled, enabled string
	for line := range strings.Lines(f.logs.String()) {
		switch {
		case strings.Contains(line, "server disabled:"):
			disabled = line
		case strings.Contains(line, "server enabled:"):
			enabled = line
		}
	}
	if !strings.Contains(disabled, "by=\"`toolgate servers disable` (the data folder's state.json)\"") {
		t.Errorf("the disable's line: %q", disabled)
	}
	if !strings.Contains(enabled, "by=\"`toolgate servers enable` (the data folder's state.json)\"") {
		t.Errorf("the enable's line: %q", enabled)
	}
}
