package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/toolgate/toolgate/index"
	"github.com/toolgate/toolgate/index/catalog"
)

// TestDoctorIndexesOfConfigs: with gateways of two configs on one data
// folder, doctor lists every config's index kept there (its config, tools,
// generation, when built, whether it opens) and says which one the
// --config given starts from. It reported only the current index, the one
// built last, whichever config had built it: doctor --config a.json showed
// b's index and nothing of a's.
// buildIndexFor builds the index of config cfg on the data folder data, a
// tool of each server.
func buildIndexFor(t *testing.T, data, cfg string, servers ...string) {
	t.Helper()
	var tools []catalog.Tool
	for _, s := range servers {
		tools = append(tools, catalog.Tool{Server: s, Name: "read", Description: "read what " + s + " keeps"})
	}
	ix, _, err := index.Ensure(context.Background(), index.Dir(data), tools, nil, &index.Options{Config: cfg})
	if err != nil {
		t.Fatal(err)
	}
	ix.Close()
}

// indexCheck is the index check of doctor's --json report out.
func indexCheck(t *testing.T, out bytes.Buffer) doctorCheck {
	t.Helper()
	var rep doctorReport
	if err := json.Unmarshal(out.Bytes(), &rep); err != nil {
		t.Fatalf("output is not JSON: %v\n%s", err, out.String())
	}
	for _, c := range rep.Checks {
		if c.Name == "index" {
			return c
		}
	}
	t.Fatalf("no index check in %s", out.String())
	return doctorCheck{}
}

// TestDoctorIndexLineAgreesWithStart: when the current index is of
// another format (built by another toolgate's gateway of another config)
// and the --config given starts from its own kept index, doctor's index
// line says so, not that the index is rebuilt on the next serve: it said
// "format changed: rebuilt on the next serve or index run" beside its own
// list marking the kept index "--config starts from it".
func TestDoctorIndexLineAgreesWithStart(t *testing.T) {
	data := t.TempDir()
	a := writeConfig(t, `{"mcpServers": {"everything": {"command": "node"}, "memory": {"command": "node"}}}`)
	b := writeConfig(t, `{"mcpServers": {"memory": {"command": "node"}, "filesystem": {"command": "node"}}}`)
	buildIndexFor(t, data, a, "everything", "memory")
	buildIndexFor(t, data, b, "filesystem", "memory", "toolgate")
	// b's index as another toolgate's format.
	manifest := filepath.Join(index.Dir(data), "manifest.json")
	raw, err := os.ReadFile(manifest)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(raw, &m); err != nil {
		t.Fatal(err)
	}
	m["format"] = index.FormatVersion + 1
	if raw, err = json.Marshal(m); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(manifest, raw, 0o600); err != nil {
		t.Fatal(err)
	}

	out, _ := doctorCommand(t, data, "--json", "--config", a)
	c := indexCheck(t, out)
	if len(c.Indexes) != 2 || !c.Indexes[1].StartsFrom {
		t.Fatalf("indexes: %+v, want a's kept one started from", c.Indexes)
	}
	if c.Status != statusOK || c.Fix != "" || strings.Contains(c.Detail, "rebuilt on the next serve") ||
		!strings.Contains(c.Detail, "2 tools") || !strings.Contains(c.Detail, "generation 1") || !strings.Contains(c.Detail, "kept for --config") ||
		!strings.Contains(c.Detail, "the current index, of "+b+", is format changed") {
		t.Errorf("index check of --config a: %+v, want ok naming a's kept index, generation 1, and the current one's state as b's", c)
	}
	// Without --config, or with b's: the current index is rebuilt.
	for _, args := range [][]string{{"--json"}, {"--json", "--config", b}} {
		out, _ = doctorCommand(t, data, args...)
		if c := indexCheck(t, out); c.Status == statusOK || !strings.Contains(c.Detail, "format changed: rebuilt on the next serve or index run") {
			t.Errorf("index check of doctor %v: %+v, want the current index's format changed", args, c)
		}
	}
}

func TestDoctorIndexesOfConfigs(t *testing.T) {
	data := t.TempDir()
	a := writeConfig(t, `{"mcpServers": {"everything": {"command": "node"}, "memory": {"command": "node"}}}`)
	b := writeConfig(t, `{"mcpServers": {"memory": {"command": "node"}, "filesystem": {"command": "node"}}}`)
	buildIndexFor(t, data, a, "everything", "memory")
	buildIndexFor(t, data, b, "filesystem", "memory", "toolgate")

	out, _ := doctorCommand(t, data, "--json", "--config", a) // native pieces may be missing: not what is checked
	var rep doctorReport
	if err := json.Unmarshal(out.Bytes(), &rep); err != nil {
		t.Fatalf("output is not JSON: %v\n%s", err, out.String())
	}
	var c *doctorCheck
	for i := range rep.Checks {
		if rep.Checks[i].Name == "index" {
			c = &rep.Checks[i]
		}
	}
	if c == nil {
		t.Fatalf("no index check in %s", out.String())
	}
	if c.Status != statusOK || c.Detail == "" {
		t.Errorf("index check: %+v (its line as before: the current index)", c)
	}
	if len(c.Indexes) != 2 {
		t.Fatalf("indexes: %+v, want b's (current) and a's (kept)", c.Indexes)
	}
	cur, kept := c.Indexes[0], c.Indexes[1]
	if !cur.Current || cur.Config != b || cur.Tools != 3 || !cur.Opens || cur.StartsFrom || cur.Generation != 2 {
		t.Errorf("current index: %+v, want b's, 3 tools, generation 2, opens, not a's start", cur)
	}
	if kept.Current || kept.Config != a || kept.Tools != 2 || !kept.Opens || !kept.StartsFrom || kept.Generation != 1 || kept.Created.IsZero() {
		t.Errorf("kept index: %+v, want a's, 2 tools, generation 1, opens, a's start", kept)
	}

	out, _ = doctorCommand(t, data, "--config", a)
	for _, want := range []string{
		`(?m)^ +current: ` + regexp.QuoteMeta(b) + `, 3 tools \(filesystem, memory, toolgate\), generation 2, built .* ago, opens$`,
		`(?m)^ +kept: ` + regexp.QuoteMeta(a) + `, 2 tools \(everything, memory\), generation 1, built .* ago, opens; --config starts from it$`,
	} {
		if !regexp.MustCompile(want).MatchString(out.String()) {
			t.Errorf("doctor --config: want %s in\n%s", want, out.String())
		}
	}
	// Without --config: both listed, no start named.
	out, _ = doctorCommand(t, data, "--json")
	rep = doctorReport{}
	if err := json.Unmarshal(out.Bytes(), &rep); err != nil {
		t.Fatal(err)
	}
	for _, ch := range rep.Checks {
		if ch.Name == "index" && (len(ch.Indexes) != 2 || ch.Indexes[0].StartsFrom || ch.Indexes[1].StartsFrom) {
			t.Errorf("doctor without --config: %+v", ch.Indexes)
		}
	}
}

// TestDoctorIndexBuiltAheadOfClock: an index whose build time is ahead of
// this machine's clock (the clock set back since, or a data folder from a
// machine whose clock ran ahead) is said so; doctor printed `built -1h0m0s
// ago`.
func TestDoctorIndexBuiltAheadOfClock(t *testing.T) {
	created := time.Now().Add(time.Hour).UTC()
	got := doctorIndexEntry{Config: "/etc/toolgate.json", Tools: 3, Generation: 2, Created: created, Format: index.FormatVersion, Opens: true}.String()
	want := ", generation 2, built at " + created.Format(time.RFC3339) + ", ahead of this machine's clock (set back since?)"
	if !strings.Contains(got, want) || strings.Contains(got, "-1h") {
		t.Errorf("doctor's index line = %q\nwant it to hold %q", got, want)
	}
	past := doctorIndexEntry{Tools: 3, Generation: 2, Created: time.Now().Add(-time.Hour), Format: index.FormatVersion, Opens: true}.String()
	if !strings.Contains(past, ", built 1h0m0s ago") {
		t.Errorf("doctor's index line = %q, want built 1h0m0s ago", past)
	}
}
