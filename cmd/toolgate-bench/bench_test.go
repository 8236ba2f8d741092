package main

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/toolgate/toolgate/internal/dirs"
	"github.com/toolgate/toolgate/internal/testenv"
)

// The test binary doubles as toolgate-bench: started with a command
// instead of go test's -test.* flags (the bench runs itself as the
// synthetic backends), it runs main().
func TestMain(m *testing.M) {
	if len(os.Args) > 1 && !strings.HasPrefix(os.Args[1], "-test.") {
		os.Args = append([]string{"toolgate-bench"}, os.Args[1:]...)
		main()
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// buildToolgate builds the gateway the bench measures (./cmd/toolgate)
// into a temp folder.
func buildToolgate(t *testing.T) string {
	t.Helper()
	goBin, err := exec.LookPath("go")
	if err != nil {
		testenv.Missing(t, "go toolchain not in PATH: %v", err)
	}
	bin := filepath.Join(t.TempDir(), "toolgate")
	out, err := exec.Command(goBin, "build", "-o", bin, "../toolgate").CombinedOutput()
	if err != nil {
		testenv.Missing(t, "build ./cmd/toolgate (native libraries installed? scripts/native-env.sh sourced?): %v\n%s", err, out)
	}
	return bin
}

// benchGlobals point the embedder at the installed model; the bench's own
// work folder is a temp dir.
func benchGlobals(t *testing.T) *globals {
	t.Helper()
	g := &globals{dataDir: dirs.Data("", ""), logger: slog.New(slog.DiscardHandler)}
	b := &bench{g: g}
	if _, err := b.embedOptions(); err != nil {
		t.Fatal(err)
	}
	return g
}

// A tiny bench run prints one table with the rows of the sections asked
// for. It shows the command works end to end (real child processes: this
// binary as the backends, a freshly built toolgate as the gateway); the
// figures themselves are never asserted.
func TestBenchSmoke(t *testing.T) {
	g := benchGlobals(t)
	f := benchFlags{sections: "search,execute,tokens,client,soak,team", sizes: "100", queries: 8, calls: 16, embedMax: 50, repeats: 1,
		clientTools: 40, soakSessions: 20, teamTools: 40, teamClients: "1,2", workDir: t.TempDir(), toolgate: buildToolgate(t)}
	var out bytes.Buffer
	if err := runBench(context.Background(), g, f, &out); err != nil {
		if strings.Contains(err.Error(), "needs the embedding model") {
			testenv.Missing(t, "%v", err)
		}
		t.Fatal(err)
	}
	for _, want := range []string{
		"toolgate-bench — ", "| search ", "100 tools, hybrid, sequential", "100 tools, bm25, 8 concurrent",
		"execute_tool overhead, stdio, sequential, alternating with direct calls", "through the gateway vs",
		"execute_tool overhead, streamable HTTP, sequential, alternating with direct calls",
		"execute_tool overhead, stdio through `toolgate connect` to streamable HTTP, sequential, alternating with direct calls",
		"direct (client → backend, stdio), 16 concurrent", "gateway stdio, 16 concurrent", "gateway streamable HTTP, 16 concurrent",
		"gateway through toolgate connect, 16 concurrent",
		"synthetic 100: gateway tools/list", "WordPiece",
		"| client ", "cold indexing: `toolgate index --config`, 40 tools, empty data folder", "search_tools end to end over stdio, p50 / p99",
		"warm start: spawn of `toolgate serve` → first search_tools answer", "peak RSS (VmHWM) of serve over 400 searches", "as the backends connect",
		"execute_tool added over a direct stdio call, p50",
		"| soak ", "goroutines of serve, after 50 warm-up sessions → after 20 more", "open file descriptors of serve", "heap in use of serve",
		"resident memory of serve", "2 of them also restarting a backend", "learned pairs of serve", "learn/ on disk of serve",
		"cache/ Badger files", "audit/ on disk of serve", "audit records written / lost; audit files",
		"serve's log on stderr at the default level", "learned pairs before a restart → after it → after 50 more sessions",
		"| team ", "40 synthetic tools, 1 HTTP client(s) at once: search p50 / p99; serve's VmHWM", "40 synthetic tools, 2 HTTP client(s) at once",
		"one API key a client", "serve's threads ≤ ",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("table lacks %q:\n%s", want, out.String())
		}
	}
}

func TestBenchUsage(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "toolgate")
	for _, f := range []benchFlags{
		{sections: "nope", sizes: "100", queries: 8, calls: 16, embedMax: 1, repeats: 1},
		{sections: "tokens", sizes: "ten", queries: 8, calls: 16, embedMax: 1, repeats: 1},
		{sections: "tokens", sizes: "100", queries: 1, calls: 16, embedMax: 1, repeats: 1},
		{sections: "execute", sizes: "100", queries: 8, calls: 16, embedMax: 1, repeats: 1, toolgate: missing},
		{sections: "client", sizes: "100", queries: 8, calls: 16, embedMax: 1, repeats: 1, clientTools: 0},
		{sections: "soak", sizes: "100", queries: 8, calls: 16, embedMax: 1, repeats: 1, soakSessions: 5},
		{sections: "team", sizes: "100", queries: 8, calls: 16, embedMax: 1, repeats: 1, teamTools: 0, teamClients: "1"},
		{sections: "team", sizes: "100", queries: 8, calls: 16, embedMax: 1, repeats: 1, teamTools: 40, teamClients: "1,many"},
	} {
		var ue usageError
		err := runBench(context.Background(), &globals{}, f, &bytes.Buffer{})
		if !errors.As(err, &ue) {
			t.Errorf("%+v: err = %v, want a usage error", f, err)
		}
		if f.toolgate != "" && !strings.Contains(err.Error(), "make build") {
			t.Errorf("missing toolgate binary: %v, want the fix", err)
		}
	}
}

// The command line reaches runBench: a bad flag is a usage error (exit 2).
func TestBenchFlags(t *testing.T) {
	cmd := newRootCmd()
	cmd.SetArgs([]string{"--sections", "tokens", "--nope"})
	cmd.SetOut(&bytes.Buffer{})
	cmd.SetErr(&bytes.Buffer{})
	var ue usageError
	if err := cmd.Execute(); !errors.As(err, &ue) {
		t.Errorf("unknown flag: err = %v, want a usage error", err)
	}
}
