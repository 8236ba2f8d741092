package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/toolgate/toolgate/gateway/live"
	"github.com/toolgate/toolgate/gateway/quarantine"
	"github.com/toolgate/toolgate/index"
	"github.com/toolgate/toolgate/index/indextest"
	"github.com/toolgate/toolgate/internal/dirs"
)

// hidingGateway is a data folder whose index holds srv0, srv1, srv2 with 4
// tools each and "odd server" with one, srv1 disabled at run time,
// srv0__list_files_0 quarantined (changed) and srv0__list_files_3 pinned.
func hidingGateway(t *testing.T) *globals {
	t.Helper()
	data := t.TempDir()
	g := &globals{dataDir: data}
	runIndexJSON(t, g, writeToolsFile(t, t.TempDir(), 12, ""))
	if err := live.WriteState(live.StateFile(data), live.State{Disabled: []string{"srv1"}}); err != nil {
		t.Fatal(err)
	}
	now := time.Now().UTC()
	pins := quarantine.File{Version: 1, Tools: map[string]*quarantine.Pin{
		"srv0__list_files_0": {Pinned: "a", Current: "b", FirstSeen: now, Seen: now, Hold: &quarantine.Hold{Since: now, Changed: true}},
		"srv0__list_files_3": {Pinned: "c", Current: "c", FirstSeen: now, Seen: now},
	}}
	b, _ := json.Marshal(pins)
	os.MkdirAll(filepath.Dir(dirs.Pins(data)), 0o755)
	if err := os.WriteFile(dirs.Pins(data), b, 0o644); err != nil {
		t.Fatal(err)
	}
	return g
}

// TestSearchHidesWhatSearchToolsHides: `toolgate search` leaves out the
// tools a gateway on the data folder hides from search_tools (it used to
// rank them all): servers disabled at run time, quarantined definitions,
// with --config the servers the config does not have, and with --profile
// those outside the profile; it counts what it hid, and a --server whose
// tools are hidden is a usage error that says why.
func TestSearchHidesWhatSearchToolsHides(t *testing.T) {
	g := hidingGateway(t)
	cfg := fakeConfig(t, map[string]string{"srv0": "", "srv1": "", "srv2": ""}, map[string]any{
		"profiles": map[string]any{"two": map[string]any{"servers": []string{"srv2"}}},
	})
	search := func(f searchFlags) (searchOutput, error) {
		t.Helper()
		f.mode, f.limit, f.json = "bm25", 50, true
		var out, errOut bytes.Buffer
		err := runSearch(context.Background(), g, &f, "list the files", &out, &errOut)
		var so searchOutput
		if err == nil {
			if jerr := json.Unmarshal(out.Bytes(), &so); jerr != nil {
				t.Fatalf("search --json: %v\n%s", jerr, out.String())
			}
		}
		return so, err
	}
	ids := func(so searchOutput) []string {
		var out []string
		for _, tl := range so.Tools {
			out = append(out, tl.Name)
		}
		return out
	}

	so, err := search(searchFlags{})
	if err != nil {
		t.Fatal(err)
	}
	got := ids(so)
	if slices.ContainsFunc(got, func(id string) bool { return strings.HasPrefix(id, "srv1__") }) || slices.Contains(got, "srv0__list_files_0") ||
		!slices.Contains(got, "srv0__list_files_3") || len(got) != 8 {
		t.Errorf("without a config: %v; want the 8 tools but srv1's (disabled) and srv0__list_files_0 (quarantined)", got)
	}
	if want := map[string]int{"disabled": 4, "quarantine": 1}; !maps.Equal(so.Hidden, want) {
		t.Errorf("without a config: hidden %v, want %v", so.Hidden, want)
	}

	so, err = search(searchFlags{configs: []string{cfg}})
	if err != nil {
		t.Fatal(err)
	}
	if got := ids(so); slices.Contains(got, "odd server__search & replace") || len(got) != 7 {
		t.Errorf("with the config: %v; want srv0's three and srv2's four (odd server is not in the config)", got)
	}
	if want := map[string]int{"config": 1, "disabled": 4, "quarantine": 1}; !maps.Equal(so.Hidden, want) {
		t.Errorf("with the config: hidden %v, want %v", so.Hidden, want)
	}

	so, err = search(searchFlags{configs: []string{cfg}, profile: "two"})
	if err != nil {
		t.Fatal(err)
	}
	if got := ids(so); len(got) != 4 || slices.ContainsFunc(got, func(id string) bool { return !strings.HasPrefix(id, "srv2__") }) {
		t.Errorf("--profile two: %v; want srv2's four tools only", got)
	}

	// A --server whose tools are hidden says why; a profile needs its config.
	_, err = search(searchFlags{server: "srv1"})
	var ue usageError
	if !errors.As(err, &ue) || !strings.Contains(err.Error(), `server "srv1" is disabled`) || !strings.Contains(err.Error(), "toolgate servers enable srv1") {
		t.Errorf("--server srv1 (disabled): %v; want a usage error saying it is disabled and how to enable it", err)
	}
	for _, f := range []searchFlags{{profile: "two"}, {configs: []string{cfg}, profile: "nope"}} {
		if _, err := search(f); !errors.As(err, &ue) || !strings.Contains(err.Error(), "--profile") {
			t.Errorf("%+v: %v; want a usage error about --profile", f, err)
		}
	}

	// The table says what it left out.
	var out bytes.Buffer
	if err := runSearch(context.Background(), g, &searchFlags{mode: "bm25", limit: 3}, "list the files", &out, &out); err != nil {
		t.Fatal(err)
	}
	if want := "hidden as search_tools hides them: 5 tools (4 of servers disabled at run time, 1 quarantined)"; !strings.Contains(out.String(), want) {
		t.Errorf("table:\n%s\nwant %q", out.String(), want)
	}
}

// TestSearchReadOnlyProfile: `toolgate search --profile` of a readOnly
// profile ranks only the tools that declare readOnlyHint: true (a tool
// without annotations is not read-only), as search_tools would.
func TestSearchReadOnlyProfile(t *testing.T) {
	data := t.TempDir()
	g := &globals{dataDir: data}
	tools := filepath.Join(t.TempDir(), "tools.jsonl")
	lines := `{"server": "fs", "name": "read_file", "description": "Read a file.", "annotations": {"readOnlyHint": true}}
{"server": "fs", "name": "read_later", "description": "Read a file later, and mark it read.", "annotations": {"readOnlyHint": false}}
{"server": "fs", "name": "read_aloud", "description": "Read a file aloud."}
{"server": "kv", "name": "lookup", "description": "Read a key's value.", "annotations": {"readOnlyHint": true, "openWorldHint": false}}
`
	if err := os.WriteFile(tools, []byte(lines), 0o644); err != nil {
		t.Fatal(err)
	}
	runIndexJSON(t, g, tools)
	cfg := fakeConfig(t, map[string]string{"fs": "", "kv": ""}, map[string]any{
		"profiles": map[string]any{"ro": map[string]any{"readOnly": true}},
	})
	var out, errOut bytes.Buffer
	if err := runSearch(context.Background(), g, &searchFlags{configs: []string{cfg}, profile: "ro", mode: "bm25", limit: 10, json: true}, "read a file", &out, &errOut); err != nil {
		t.Fatalf("search: %v\n%s", err, errOut.String())
	}
	var so searchOutput
	if err := json.Unmarshal(out.Bytes(), &so); err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, tl := range so.Tools {
		got = append(got, tl.Name)
	}
	if slices.Sort(got); !slices.Equal(got, []string{"fs__read_file", "kv__lookup"}) || so.Hidden["profile"] != 2 {
		t.Errorf("--profile ro: %v, hidden %v; want fs__read_file and kv__lookup, 2 hidden by the profile", got, so.Hidden)
	}
}

// TestSearchNamesHiddenToolsThatWouldRank: a tool search_tools hides that
// would have ranked in the answer is named with its rank and why it is
// hidden (a server's author whose tool went missing from a query learned
// only "1 quarantined", not which tool, nor that it was the one that
// query wanted); hidden tools that would not have ranked are only counted.
func TestSearchNamesHiddenToolsThatWouldRank(t *testing.T) {
	g := hidingGateway(t)
	var out, errOut bytes.Buffer
	if err := runSearch(context.Background(), g, &searchFlags{mode: "bm25", limit: 3, json: true}, "list_files_0", &out, &errOut); err != nil {
		t.Fatal(err)
	}
	var so searchOutput
	if err := json.Unmarshal(out.Bytes(), &so); err != nil {
		t.Fatal(err)
	}
	if len(so.HiddenHits) != 1 || so.HiddenHits[0].Name != "srv0__list_files_0" || so.HiddenHits[0].Rank != 1 ||
		so.HiddenHits[0].Rule != quarantine.RuleName || !strings.Contains(so.HiddenHits[0].Reason, "its definition changed") {
		t.Errorf("hiddenHits %+v; want srv0__list_files_0 at rank 1, quarantined because its definition changed", so.HiddenHits)
	}
	// Its approve command names this data folder, which is not the default.
	if len(so.HiddenHits) == 1 && !strings.Contains(so.HiddenHits[0].Reason, "--data-dir "+g.DataDir()) {
		t.Errorf("hiddenHits[0].reason %q: want the approve command with --data-dir %s", so.HiddenHits[0].Reason, g.DataDir())
	}
	out.Reset()
	if err := runSearch(context.Background(), g, &searchFlags{mode: "bm25", limit: 3}, "list_files_0", &out, &errOut); err != nil {
		t.Fatal(err)
	}
	if want := "srv0__list_files_0 would rank 1: srv0__list_files_0 is quarantined: its definition changed"; !strings.Contains(out.String(), want) {
		t.Errorf("table:\n%s\nwant %q", out.String(), want)
	}
	// A query the hidden tools do not answer names none of them.
	out.Reset()
	if err := runSearch(context.Background(), g, &searchFlags{mode: "bm25", limit: 1, json: true}, "list_files_5", &out, &errOut); err != nil {
		t.Fatal(err)
	}
	so = searchOutput{}
	if err := json.Unmarshal(out.Bytes(), &so); err != nil {
		t.Fatal(err)
	}
	if len(so.HiddenHits) != 0 || so.Hidden["disabled"] != 4 {
		t.Errorf("list_files_5: hiddenHits %+v, hidden %v; want none named, 4 disabled counted", so.HiddenHits, so.Hidden)
	}
}

// TestSearchExplain: --explain says, per tool, which of the query's words
// (as the keyword ranking reads them) its name, server, description and
// parameters hold, and which it lacks: why its keyword score is what it
// is. Without it the answer is as before.
func TestSearchExplain(t *testing.T) {
	g := &globals{dataDir: t.TempDir()}
	runIndexJSON(t, g, writeToolsFile(t, t.TempDir(), 3, ""))
	var out, errOut bytes.Buffer
	if err := runSearch(context.Background(), g, &searchFlags{mode: "bm25", limit: 1, json: true, explain: true}, "list the files of project 2 by path and zip", &out, &errOut); err != nil {
		t.Fatal(err)
	}
	var so searchOutput
	if err := json.Unmarshal(out.Bytes(), &so); err != nil {
		t.Fatal(err)
	}
	if want := []string{"list", "file", "project", "2", "path", "zip"}; !slices.Equal(so.QueryTerms, want) {
		t.Errorf("queryTerms %v, want %v", so.QueryTerms, want)
	}
	if len(so.Tools) != 1 || so.Tools[0].Name != "srv2__list_files_2" ||
		!slices.Equal(so.Tools[0].Matched["name"], []string{"list", "file", "2"}) || !slices.Equal(so.Tools[0].Matched["params"], []string{"path"}) {
		t.Fatalf("tools %+v; want srv2__list_files_2, list file 2 in its name, path in its params", so.Tools)
	}
	out.Reset()
	if err := runSearch(context.Background(), g, &searchFlags{mode: "bm25", limit: 1, explain: true}, "list the files of project 2 by path and zip", &out, &errOut); err != nil {
		t.Fatal(err)
	}
	if want := "1. name: list, file, 2; server: 2; description: list, file, project, 2; params: path; in none: zip"; !strings.Contains(out.String(), want) {
		t.Errorf("table:\n%s\nwant %q", out.String(), want)
	}
	out.Reset()
	if err := runSearch(context.Background(), g, &searchFlags{mode: "bm25", limit: 1, json: true}, "list files", &out, &errOut); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(out.String(), "matched") || strings.Contains(out.String(), "queryTerms") {
		t.Errorf("without --explain: %s", out.String())
	}
}

// An index of another format (an upgrade that changed it, its gateway
// rebuilding it, or a rollback over one) is searched as it is, with a
// note on stderr: search refused it ("this toolgate reads format N:
// rebuild it with `toolgate index`") until the gateway's rebuild was done,
// a minute at 10,000 tools.
func TestSearchIndexOfAnotherFormat(t *testing.T) {
	data := t.TempDir()
	g := &globals{dataDir: data}
	runIndexJSON(t, g, writeToolsFile(t, t.TempDir(), 5, ""))
	if err := indextest.SetFormat(index.Dir(data), index.FormatVersion-1); err != nil {
		t.Fatal(err)
	}
	var out, errOut bytes.Buffer
	if err := runSearch(context.Background(), g, &searchFlags{mode: "bm25", limit: 1, json: true}, "list_files_2", &out, &errOut); err != nil {
		t.Fatalf("search of an index of format %d: %v", index.FormatVersion-1, err)
	}
	if !strings.Contains(out.String(), "list_files_2") {
		t.Errorf("search found:\n%s", out.String())
	}
	if want := fmt.Sprintf("the index in %s is of format %d, this toolgate's is %d", index.Dir(data), index.FormatVersion-1, index.FormatVersion); !strings.Contains(errOut.String(), want) {
		t.Errorf("stderr:\n%s\nwant %q", errOut.String(), want)
	}
}

// TestSearchIndexOfOlderVersion: `toolgate search` on an index whose
// catalog snapshot is an older toolgate's (the first search after an
// upgrade to format 7, before the gateway has started) says how to
// rebuild it in a command that runs: it said `rebuild it with toolgate
// index`, which answered `index needs exactly one of --tools FILE.jsonl
// or --config FILE`.
func TestSearchIndexOfOlderVersion(t *testing.T) {
	data := t.TempDir()
	g := &globals{dataDir: data}
	runIndexJSON(t, g, writeToolsFile(t, t.TempDir(), 5, ""))
	if err := indextest.SetFormat(index.Dir(data), 6); err != nil {
		t.Fatal(err)
	}
	if err := indextest.SetSnapshotHeader(index.Dir(data), "TGC2"); err != nil {
		t.Fatal(err)
	}
	var out, errOut bytes.Buffer
	err := runSearch(context.Background(), g, &searchFlags{mode: "bm25", limit: 1}, "list files", &out, &errOut)
	for _, want := range []string{`"TGC2" is an older toolgate's`, "`toolgate index --config FILE`", "start the gateway"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("search of an older toolgate's index: %v\nwant it to say %q", err, want)
		}
	}
}

// TestNamesNotCheckedOnOlderIndex: `learn --queries` and `keys create
// --allow` on a data folder whose index an older toolgate wrote (after an
// upgrade, before the gateway's first start) say why the names were not
// checked: it said the data folder had no index yet.
func TestNamesNotCheckedOnOlderIndex(t *testing.T) {
	data := t.TempDir()
	g := &globals{dataDir: data}
	runIndexJSON(t, g, writeToolsFile(t, t.TempDir(), 5, ""))
	if err := indextest.SetSnapshotHeader(index.Dir(data), "TGC2"); err != nil {
		t.Fatal(err)
	}
	queries := filepath.Join(t.TempDir(), "q.jsonl")
	if err := os.WriteFile(queries, []byte(`{"query": "list files", "relevant": ["fs__list_files_2"]}`+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{{"learn", "--queries", queries}, {"keys", "create", "--name", "k", "--allow", "fs__*"}} {
		_, stderr, err := runToolgate(t, data, args...)
		want := "were not checked: open index in " + index.Dir(data) + `: catalog snapshot of another toolgate version: "TGC2" is an older toolgate's`
		if err != nil || !strings.Contains(stderr, want) || strings.Contains(stderr, "no index yet") {
			t.Errorf("%s on an older toolgate's index: %v\n%s\nwant %q", args[0], err, stderr, want)
		}
	}
}

// TestSearchJSONShowsOutputSchema: a tools file's output schema (MCP's
// "outputSchema", as the jq recipe that makes a tools file of a
// tools/list result keeps it) is indexed, and `toolgate search --json`
// gives it with each tool that declares one, as search_tools' full
// answers do. Both left it out: the file's key was skipped as unknown,
// and --json had no such field.
func TestSearchJSONShowsOutputSchema(t *testing.T) {
	g := &globals{dataDir: t.TempDir()}
	file := filepath.Join(t.TempDir(), "tools.jsonl")
	lines := `{"server": "w", "name": "forecast", "description": "Weather forecast for a city.", "inputSchema": {"type": "object", "properties": {"city": {"type": "string"}}}, "outputSchema": {"type": "object", "properties": {"temperature": {"type": "number"}}, "required": ["temperature"]}}
{"server": "w", "name": "alerts", "description": "Weather alerts for a city.", "inputSchema": {"type": "object"}}
`
	if err := os.WriteFile(file, []byte(lines), 0o600); err != nil {
		t.Fatal(err)
	}
	runIndexJSON(t, g, file)
	var out, errOut bytes.Buffer
	if err := runSearch(context.Background(), g, &searchFlags{mode: "bm25", limit: 2, json: true}, "weather forecast for a city", &out, &errOut); err != nil {
		t.Fatal(err)
	}
	var so struct {
		Tools []struct {
			Name         string
			OutputSchema json.RawMessage
		}
	}
	if err := json.Unmarshal(out.Bytes(), &so); err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, tl := range so.Tools {
		got[tl.Name] = string(tl.OutputSchema)
	}
	want := map[string]string{"w__forecast": `{"type":"object","properties":{"temperature":{"type":"number"}},"required":["temperature"]}`, "w__alerts": ""}
	if !maps.Equal(got, want) {
		t.Errorf("search --json's outputSchema by tool %q, want %q:\n%s", got, want, out.String())
	}
}
