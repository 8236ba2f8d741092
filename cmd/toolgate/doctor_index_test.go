package main

import (
	"context"
	"encoding/json"
	"regexp"
	"testing"

	"github.com/toolgate/toolgate/index"
	"github.com/toolgate/toolgate/index/catalog"
)

// TestDoctorIndexesOfConfigs: with gateways of two configs on one data
// folder, doctor lists every config's index kept there (its config, tools,
// generation, when built, whether it opens) and says which one the
// --config given starts from. It reported only the current index, the one
// built last, whichever config had built it: doctor --config a.json showed
// b's index and nothing of a's.
func TestDoctorIndexesOfConfigs(t *testing.T) {
	data := t.TempDir()
	a := writeConfig(t, `{"mcpServers": {"everything": {"command": "node"}, "memory": {"command": "node"}}}`)
	b := writeConfig(t, `{"mcpServers": {"memory": {"command": "node"}, "filesystem": {"command": "node"}}}`)
	build := func(cfg string, servers ...string) {
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
	build(a, "everything", "memory")
	build(b, "filesystem", "memory", "toolgate")

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
