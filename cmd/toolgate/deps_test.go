package main

import (
	"os/exec"
	"path"
	"strings"
	"testing"

	"github.com/toolgate/toolgate/internal/testenv"
)

// The shipped binary links no test or benchmark harness: not the testing
// package, not the synthetic catalogs (index/indextest), the fake backend
// (gateway/backend/backendtest) or the test helpers (internal/testenv),
// nor any other package of this module named *test. The harness is
// cmd/toolgate-bench, a binary of its own.
func TestShippedBinaryLinksNoTestCode(t *testing.T) {
	goBin, err := exec.LookPath("go")
	if err != nil {
		testenv.Missing(t, "go toolchain not in PATH: %v", err)
	}
	out, err := exec.Command(goBin, "list", "-deps", ".").Output()
	if err != nil {
		t.Fatalf("go list -deps ./cmd/toolgate: %v", err)
	}
	const module = "github.com/toolgate/toolgate/"
	var deps int
	for p := range strings.FieldsSeq(string(out)) {
		deps++
		own := strings.HasPrefix(p, module)
		if p == "testing" || strings.HasPrefix(p, "testing/") ||
			own && (strings.HasSuffix(path.Base(p), "test") || path.Base(p) == "testenv" || strings.Contains(p, "/cmd/toolgate-bench")) {
			t.Errorf("bin/toolgate links %s: test and benchmark code belongs in _test.go files or cmd/toolgate-bench", p)
		}
	}
	if deps < 50 || !strings.Contains(string(out), module+"gateway\n") {
		t.Fatalf("go list -deps printed %d packages, without the gateway: not the package list\n%s", deps, out)
	}
}

// Only package embed imports ONNX Runtime and the tokenizer library (doctor
// asks embed for their versions).
func TestOnlyEmbedImportsNativeLibraries(t *testing.T) {
	goBin, err := exec.LookPath("go")
	if err != nil {
		testenv.Missing(t, "go toolchain not in PATH: %v", err)
	}
	out, err := exec.Command(goBin, "list", "-f", `{{.ImportPath}} {{join .Imports " "}} {{join .TestImports " "}} {{join .XTestImports " "}}`, "../../...").Output()
	if err != nil {
		t.Fatalf("go list ./...: %v", err)
	}
	native := []string{"github.com/daulet/tokenizers", "github.com/yalue/onnxruntime_go"}
	var pkgs int
	for line := range strings.SplitSeq(strings.TrimSpace(string(out)), "\n") {
		pkgs++
		f := strings.Fields(line)
		if f[0] == "github.com/toolgate/toolgate/embed" {
			continue
		}
		for _, imp := range f[1:] {
			for _, n := range native {
				if imp == n {
					t.Errorf("%s imports %s: only package embed touches the native libraries", f[0], n)
				}
			}
		}
	}
	if pkgs < 10 {
		t.Fatalf("go list printed %d packages:\n%s", pkgs, out)
	}
}
