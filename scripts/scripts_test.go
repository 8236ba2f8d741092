// Package scripts holds the shell scripts that install toolgate's native
// pieces, model and bundled servers; its test checks how they take their
// arguments.
package scripts

import (
	"crypto/sha256"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/toolgate/toolgate/search"
)

// Every install script README names answers --help with its usage and
// exit status 0, and an argument it does not take with its usage and exit
// status 2, doing nothing either way: build-tokenizers.sh,
// fetch-onnxruntime.sh and install-chromium.sh ignored their arguments,
// so --help started a cargo build, an npm download or an apt-get install.
// They run with an empty cache and a PATH of a shell, python3 and the
// text tools alone: a script that goes on to work fails for want of go,
// cargo, npm or apt-get.
func TestScriptsArguments(t *testing.T) {
	bin := t.TempDir()
	for _, tool := range []string{"bash", "python3", "dirname", "sha256sum", "cut", "sed", "cat"} {
		p, err := exec.LookPath(tool)
		if err != nil {
			t.Fatalf("%s: %v", tool, err)
		}
		if err := os.Symlink(p, filepath.Join(bin, tool)); err != nil {
			t.Fatal(err)
		}
	}
	env := append(os.Environ(), "PATH="+bin, "TOOLGATE_CACHE="+t.TempDir(), "CHROMIUM_VERSION=")
	for _, script := range []string{"build-tokenizers.sh", "fetch-onnxruntime.sh", "install-servers.sh", "install-python.sh", "install-chromium.sh"} {
		for _, tt := range []struct {
			arg    string
			status int
		}{{"--help", 0}, {"-h", 0}, {"--no-such-flag", 2}} {
			cmd := exec.Command("./"+script, tt.arg)
			cmd.Env = env
			out, err := cmd.CombinedOutput()
			status := 0
			if ee := (*exec.ExitError)(nil); errors.As(err, &ee) {
				status = ee.ExitCode()
			} else if err != nil {
				t.Fatalf("%s %s: %v", script, tt.arg, err)
			}
			if status != tt.status || !strings.Contains(string(out), "usage: scripts/"+script) {
				t.Errorf("%s %s: exit status %d, want %d with its usage:\n%s", script, tt.arg, status, tt.status, out)
			}
		}
	}
}

// make bench and make bench-report install what the benchmarks need (the
// native pieces, the model, the bundled servers: make deps-run), not the
// Python SDKs and the browser of the interop and console tests, which no
// benchmark runs: the browser's install is an apt-get as root.
func TestMakeBenchDeps(t *testing.T) {
	for _, target := range []string{"bench", "bench-report"} {
		cmd := exec.Command("make", "-n", "-C", "..", target)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("make -n %s: %v\n%s", target, err, out)
		}
		for _, want := range []string{"scripts/build-tokenizers.sh", "scripts/fetch-model.sh", "scripts/install-servers.sh"} {
			if !strings.Contains(string(out), want) {
				t.Errorf("make %s does not run %s:\n%s", target, want, out)
			}
		}
		for _, not := range []string{"scripts/install-python.sh", "scripts/install-chromium.sh"} {
			if strings.Contains(string(out), not) {
				t.Errorf("make %s runs %s, which no benchmark needs", target, not)
			}
		}
	}
}

// split-queries.py takes what eval takes: a byte-order mark, CRLF line
// ends and blank lines (a BOM stopped it: "line 1: not a query line").
// Each query lands in one half.
func TestSplitQueriesBOM(t *testing.T) {
	dir := t.TempDir()
	src := filepath.Join(dir, "q.jsonl")
	lines := []string{`{"query": "read a file", "relevant": ["fs__read_file"]}`, `{"query": "write a file", "relevant": ["fs__write_file"]}`}
	if err := os.WriteFile(src, []byte("\ufeff"+lines[0]+"\r\n\r\n"+lines[1]+"\r\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command("python3", "split-queries.py", src, dir).CombinedOutput()
	if err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	var got []string
	for _, half := range []string{"half-a.jsonl", "half-b.jsonl"} {
		b, err := os.ReadFile(filepath.Join(dir, half))
		if err != nil {
			t.Fatal(err)
		}
		for _, l := range strings.Split(string(b), "\n") {
			if l = strings.TrimSuffix(l, "\r"); l != "" {
				got = append(got, l)
			}
		}
	}
	slices.Sort(got)
	if !slices.Equal(got, lines) {
		t.Errorf("halves hold %q, want %q", got, lines)
	}
}

// split-queries.py puts a query in the half its search.QueryKey (the
// words, spacing aside: what eval's --learn-from check compares) hashes
// to, so two queries eval reads as one never land in two halves: it hashed
// the trimmed text, and "a  b" (two spaces) and "a b" could be split, and
// eval then refused the halves as sharing a query. Spacing that is not
// Go's white space (U+001C) stays part of a word, as it does for eval.
func TestSplitQueriesKey(t *testing.T) {
	dir := t.TempDir()
	src := filepath.Join(dir, "q.jsonl")
	queries := []string{
		"read a file", "read  a file", " read\ta\u00a0file\n", "read\u2003a  file",
		"find the weather in Paris", "find the  weather in\u3000Paris",
		"convert\u001ccurrency", "convert \u001c currency", "list my open issues", "what is on my calendar tomorrow",
	}
	var lines strings.Builder
	for _, q := range queries {
		b, err := json.Marshal(map[string]any{"query": q, "relevant": []string{"x__y"}})
		if err != nil {
			t.Fatal(err)
		}
		lines.Write(append(b, '\n'))
	}
	if err := os.WriteFile(src, []byte(lines.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("python3", "split-queries.py", src, dir).CombinedOutput(); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	got := map[string]string{} // query → half
	for _, half := range []string{"a", "b"} {
		qs, err := search.LoadQueries(filepath.Join(dir, "half-"+half+".jsonl"))
		if err != nil {
			t.Fatal(err)
		}
		for _, q := range qs {
			got[q.Query] = half
		}
	}
	for _, q := range queries {
		sum := sha256.Sum256([]byte(search.QueryKey(q)))
		want := "a"
		if sum[len(sum)-1]%2 == 1 {
			want = "b"
		}
		if got[q] != want {
			t.Errorf("%q (key %q) in half %q, want %q", q, search.QueryKey(q), got[q], want)
		}
	}
}
