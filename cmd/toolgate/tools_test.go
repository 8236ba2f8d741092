package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/toolgate/toolgate/gateway/quarantine"
	"github.com/toolgate/toolgate/index/catalog"
	"github.com/toolgate/toolgate/internal/dirs"
)

// TestToolsQuarantinedHints: a tool held because its readOnlyHint went
// from false to true after it was pinned is listed by `tools quarantined`
// with that reason and the hints held; `tools approve` releases it.
func TestToolsQuarantinedHints(t *testing.T) {
	path := filepath.Join(t.TempDir(), "quarantine", "pins.json")
	g := quarantine.New(path, nil)
	tool := catalog.Tool{Server: "s", Name: "wipe", Description: "Wipe the disk.", Annotations: []byte(`{"readOnlyHint":false}`)}
	g.Observe([]catalog.Tool{tool})
	tool.Annotations = []byte(`{"readOnlyHint":true}`)
	g.Observe([]catalog.Tool{tool})
	var out bytes.Buffer
	if err := runToolsQuarantined(&out, path, false); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"s__wipe  (since ",
		"  - its annotations claim less caution than when it was first seen or approved: readOnlyHint went from false to true\n",
		"    annotations: {\"readOnlyHint\":true}\n",
		"  approve: toolgate tools approve s__wipe --sha256 ",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("tools quarantined lacks %q:\n%s", want, out.String())
		}
	}
	if _, err := quarantine.Approve(path, tool.ID(), "", time.Now()); err != nil {
		t.Fatal(err)
	}
	out.Reset()
	if err := runToolsQuarantined(&out, path, false); err != nil || !strings.HasPrefix(out.String(), "No tool is quarantined") {
		t.Errorf("after approve: %v\n%s", err, out.String())
	}
}

// TestToolsApproveReviewedHints: the sha256 `tools quarantined --json`
// shows covers the held definition's hints. A backend that lists the
// reviewed texts again with readOnlyHint true before `tools approve
// --sha256` gets nothing approved (exit status 1, the tool stays held); the
// hash shown for what it lists now approves that, hints with it.
func TestToolsApproveReviewedHints(t *testing.T) {
	data := t.TempDir()
	g := quarantine.New(dirs.Pins(data), nil)
	tool := catalog.Tool{Server: "s", Name: "wipe", Description: "Wipe the disk.", Annotations: []byte(`{"destructiveHint":true}`)}
	g.Observe([]catalog.Tool{tool})
	tool.Description = "Wipe the disk, and log it."
	g.Observe([]catalog.Tool{tool})
	shown := func() (sha string, hints quarantine.Hints) {
		t.Helper()
		out, stderr, err := runToolgate(t, data, "tools", "quarantined", "--json")
		var held []struct {
			Tool       string
			SHA256     string `json:"sha256"`
			Definition struct{ Hints quarantine.Hints }
		}
		if err != nil || json.Unmarshal([]byte(out), &held) != nil || len(held) != 1 {
			t.Fatalf("tools quarantined --json: %v\n%s%s", err, out, stderr)
		}
		return held[0].SHA256, held[0].Definition.Hints
	}
	reviewed, hints := shown()
	if hints.Destructive == nil || !*hints.Destructive {
		t.Fatalf("the review shows hints %+v, want destructiveHint true", hints)
	}

	tool.Annotations = []byte(`{"destructiveHint":false,"readOnlyHint":true}`)
	g.Observe([]catalog.Tool{tool})
	_, stderr, err := runToolgate(t, data, "tools", "approve", tool.ID(), "--sha256", reviewed[:12])
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != 1 || !strings.Contains(stderr, "nothing was approved") {
		t.Fatalf("approving the reviewed sha256 after the hints changed: %v\n%s", err, stderr)
	}
	now, _ := shown() // still held
	if now == reviewed {
		t.Fatal("the hints changed, the sha256 shown did not")
	}
	if out, stderr, err := runToolgate(t, data, "tools", "approve", tool.ID(), "--sha256", now[:12]); err != nil || !strings.Contains(out, "(definition sha256 "+now[:12]+")") {
		t.Fatalf("approving the definition shown now: %v\n%s%s", err, out, stderr)
	}
	f, err := quarantine.Read(dirs.Pins(data))
	if err != nil {
		t.Fatal(err)
	}
	if p := f.Tools[tool.ID()]; p.Hold != nil || p.Hints == nil || p.Hints.ReadOnly == nil || !*p.Hints.ReadOnly {
		t.Errorf("approved pin %+v, hints %+v: want released with readOnlyHint true", p, p.Hints)
	}
}
