package quarantine_test

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/toolgate/toolgate/gateway/backend"
	"github.com/toolgate/toolgate/gateway/config"
	"github.com/toolgate/toolgate/gateway/quarantine"
	"github.com/toolgate/toolgate/index/catalog"
	"github.com/toolgate/toolgate/internal/testenv"
)

// None of the tools of the bundled npm servers (everything, memory,
// filesystem: the servers the tests and `make run` use) is flagged: the
// rules are tuned against false positives on real definitions, listed
// live from the real servers.
func TestBundledServersAreClean(t *testing.T) {
	examples, err := filepath.Abs(filepath.Join("..", "..", "examples"))
	if err != nil {
		t.Fatal(err)
	}
	_, statErr := os.Stat(filepath.Join(examples, "servers", "node_modules"))
	_, nodeErr := exec.LookPath("node")
	if err := errors.Join(statErr, nodeErr); err != nil {
		testenv.Missing(t, "the bundled npm servers are not installed (run scripts/install-servers.sh): %v", err)
	}
	cfg, err := config.Load(filepath.Join(examples, "toolgate.json"))
	if err != nil {
		t.Fatal(err)
	}
	// The memory server writes its graph next to the config: give it a
	// file of the test's own.
	servers := cfg.Servers()
	for i, s := range servers {
		if s.Name == "memory" {
			s.Env = map[string]string{"MEMORY_FILE_PATH": filepath.Join(t.TempDir(), "memory.jsonl")}
			servers[i] = s
		}
	}
	p := backend.New(servers, &backend.Options{RestartDelays: []time.Duration{}})
	t.Cleanup(func() { p.Close() })
	p.Start(context.Background())
	listed := p.Tools()
	for _, name := range []string{"everything", "memory", "filesystem"} {
		if len(listed[name]) == 0 {
			t.Fatalf("server %q listed no tools: %+v", name, p.Status())
		}
	}
	tools := backend.Catalog(listed)
	// An external test package (backend vets what servers say of
	// themselves with the quarantine's scan): a guard of its own.
	g := quarantine.New(filepath.Join(t.TempDir(), "quarantine", "pins.json"), nil)
	g.Observe(tools)
	s := g.Snapshot()
	for _, tool := range tools {
		if fs := (quarantine.Scanner{}).Scan(tool); len(fs) > 0 {
			t.Errorf("%s flagged: %+v", tool.ID(), fs)
		}
		if h := s.Held(tool.ID()); h != nil {
			t.Errorf("%s held: %s", tool.ID(), h.Reason())
		}
	}
	t.Logf("%d tools of %d servers scanned, none flagged", len(tools), len(listed))
}

// Nor is any of the 379 tools of the two bench catalogs (real servers'
// definitions, Azure's MCP server and MetaTool's), whose texts hold
// typographic quotes, Markdown links and base64-like names.
func TestBenchCatalogsAreClean(t *testing.T) {
	total := 0
	for _, split := range []string{"azure-mcp", "metatool"} {
		tools, err := catalog.ReadFile(filepath.Join(testenv.BenchSplit(t, split), "tools.jsonl"))
		if err != nil {
			t.Fatal(err)
		}
		for _, tool := range tools {
			if fs := (quarantine.Scanner{}).Scan(tool); len(fs) > 0 {
				t.Errorf("%s flagged: %+v", tool.ID(), fs)
			}
		}
		total += len(tools)
	}
	if total != 379 {
		t.Errorf("%d tools in the bench catalogs, want 379", total)
	}
}

// BenchmarkScanBenchCatalogs is the scan of the 379 tools of the bench
// catalogs, real servers' definitions (TOOLGATE_BENCH_DIR).
func BenchmarkScanBenchCatalogs(b *testing.B) {
	var tools []catalog.Tool
	for _, split := range []string{"azure-mcp", "metatool"} {
		t, err := catalog.ReadFile(filepath.Join(testenv.BenchSplit(b, split), "tools.jsonl"))
		if err != nil {
			b.Fatal(err)
		}
		tools = append(tools, t...)
	}
	b.ReportAllocs()
	for b.Loop() {
		for _, t := range tools {
			if fs := (quarantine.Scanner{}).Scan(t); len(fs) > 0 {
				b.Fatal(t.ID(), fs)
			}
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(tools))/1000, "µs/tool")
}
