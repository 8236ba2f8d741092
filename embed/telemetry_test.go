package embed

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	ort "github.com/yalue/onnxruntime_go"

	"github.com/toolgate/toolgate/internal/testenv"
)

// telemetryChild is set in the environment of the process TestNoTelemetry
// starts: TestMain then loads the embedder from the paths given and exits.
const telemetryChild = "TOOLGATE_TEST_TELEMETRY_CHILD"

// runTelemetryChild loads ONNX Runtime and the model as a command does,
// embeds one text and reports failure on stderr. With raw=1 it loads the
// library without toolgate's opt-out (the control, run by hand).
func runTelemetryChild() int {
	if os.Getenv(telemetryChild) == "raw" {
		ort.SetSharedLibraryPath(os.Getenv("TOOLGATE_TEST_ORT"))
		if err := ort.InitializeEnvironment(); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		return 0
	}
	e, err := New(&Options{ORTLib: os.Getenv("TOOLGATE_TEST_ORT"), ModelDir: os.Getenv("TOOLGATE_TEST_MODEL")})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer e.Close()
	if _, err := e.Embed(context.Background(), []string{"list the files in a directory"}); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return 0
}

// TestNoTelemetry: a process that loads ONNX Runtime through the embedder
// and embeds a text writes nothing to its home, cache or temporary folder.
// ONNX Runtime's 1DS telemetry, on by default since 1.29, writes a device
// identifier and an offline event store under the cache folder and a debug
// log and a session file in the temporary folder, and uploads an event (see
// ortTelemetryOptOut). The control, which loads the library without the
// opt-out and shows those files, is run by hand (it would try the upload):
//
//	go test -c -o /tmp/embed.test ./embed && d=$(mktemp -d) &&
//	env TOOLGATE_TEST_TELEMETRY_CHILD=raw TOOLGATE_TEST_ORT=<libonnxruntime.so.1> \
//	  HOME=$d XDG_CACHE_HOME=$d/cache TMPDIR=$d /tmp/embed.test; find $d
func TestNoTelemetry(t *testing.T) {
	o := installed(Options{})
	if _, err := os.Stat(o.ORTLib); err != nil {
		testenv.Missing(t, "ONNX Runtime library %s: %v (install it with %s)", o.ORTLib, err, FixORT)
	}
	home := t.TempDir()
	tmp := filepath.Join(home, "tmp")
	if err := os.Mkdir(tmp, 0o700); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = []string{telemetryChild + "=1", "TOOLGATE_TEST_ORT=" + o.ORTLib, "TOOLGATE_TEST_MODEL=" + o.ModelDir,
		"HOME=" + home, "XDG_CACHE_HOME=" + filepath.Join(home, "cache"), "TMPDIR=" + tmp}
	for _, kv := range os.Environ() {
		// The library keeps quiet by itself under CI=true and in its own
		// tests (ORT_RUNNING_UNIT_TESTS): the child must not inherit either,
		// or the parent's own opt-out, or CI would pass without toolgate's.
		name, _, _ := strings.Cut(kv, "=")
		if name != "CI" && !strings.HasPrefix(name, "ORT_") && !slices.Contains([]string{"HOME", "XDG_CACHE_HOME", "TMPDIR"}, name) {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("child: %v\n%s", err, out)
	}
	var wrote []string
	filepath.WalkDir(home, func(path string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			wrote = append(wrote, path)
		}
		return nil
	})
	if len(wrote) > 0 {
		t.Errorf("loading ONNX Runtime wrote %v", wrote)
	}
}
