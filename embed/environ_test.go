package embed

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestEnvironmentSetBeforeMain: the variables ONNX Runtime and the
// tokenizers library read are set before main (init), and the package sets
// none anywhere else: a setenv while native code reads the environment on
// another thread can crash the process (SIGSEGV in CreateSessionFromFile,
// seen in CI when the tokenizer, loading beside the sessions, set
// TOKENIZERS_PARALLELISM).
func TestEnvironmentSetBeforeMain(t *testing.T) {
	for name, want := range map[string]string{tokenizersParallelism: "false", ortTelemetryOptOut[0]: "1", ortTelemetryOptOut[1]: "1"} {
		if got := os.Getenv(name); got != want {
			t.Errorf("%s=%q at the start of the tests, want %q (set by init)", name, got, want)
		}
	}
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		file, err := parser.ParseFile(fset, f, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range file.Decls {
			fn, ok := d.(*ast.FuncDecl)
			if !ok || fn.Recv == nil && fn.Name.Name == "init" {
				continue
			}
			ast.Inspect(fn, func(n ast.Node) bool {
				if sel, ok := n.(*ast.SelectorExpr); ok && sel.Sel.Name == "Setenv" || ok && sel.Sel.Name == "Unsetenv" {
					t.Errorf("%s: %s calls os.%s: set the environment in init only (see init in embed.go)", fset.Position(sel.Pos()), fn.Name.Name, sel.Sel.Name)
				}
				return true
			})
		}
	}
}
