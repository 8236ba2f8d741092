package embed

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/toolgate/toolgate/internal/testenv"
	"github.com/toolgate/toolgate/models"
)

// The manifest's inputs and output, which New trusts for a pinned file
// instead of loading the model once more to ask ONNX Runtime, are what ONNX
// Runtime says of every installed variant.
func TestManifestInterface(t *testing.T) {
	spec := models.Manifest().Model
	for _, v := range []Variant{FP32, INT8} {
		t.Run(string(v), func(t *testing.T) {
			e := testEmbedder(t, v)
			if !spec.Accepts(e.ModelSHA256()) {
				t.Skipf("%s is not a pinned file", e.Paths().Model)
			}
			fromManifest := slices.Clone(e.inputs)
			out := e.output
			asked := &Embedder{paths: e.paths}
			if err := asked.inspect(); err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(fromManifest, asked.inputs) || out != asked.output || e.useTypes != asked.useTypes {
				t.Errorf("manifest gives inputs %v output %q, ONNX Runtime %v %q", fromManifest, out, asked.inputs, asked.output)
			}
		})
	}
}

// With Options.Background New returns at once with the model's ID; Embed
// waits for the load and gives the vectors a loaded embedder gives.
func TestBackgroundLoad(t *testing.T) {
	want := testEmbedder(t, FP32)
	e, err := New(installed(Options{Sessions: 1, Background: true}))
	testenv.Require(t, err)
	defer e.Close()
	if e.ModelID() != want.ModelID() || e.Dim() != Dim {
		t.Errorf("ModelID %q Dim %d, want %q %d", e.ModelID(), e.Dim(), want.ModelID(), Dim)
	}
	texts := benchTexts(5)
	got, err := e.Embed(context.Background(), texts)
	if err != nil {
		t.Fatal(err)
	}
	if err := e.Ready(context.Background()); err != nil {
		t.Errorf("Ready after Embed: %v", err)
	}
	if err := e.LoadError(); err != nil {
		t.Errorf("LoadError once loaded: %v", err)
	}
	ref, err := want.Embed(context.Background(), texts)
	if err != nil {
		t.Fatal(err)
	}
	for i := range ref {
		for k := range ref[i] {
			if math.Float32bits(got[i][k]) != math.Float32bits(ref[i][k]) {
				t.Fatalf("text %d differs at %d", i, k)
			}
		}
	}
}

// TestLazyBackground: with Lazy and Background (serve in bm25 mode) New
// names the model and loads nothing, looks for no missing file and says
// of none, until the first Start, Ready or Embed; then it loads in the
// background as Background does, once. serve in bm25 mode loaded the model
// at every start (about 150 MiB of RSS), though none of its searches read
// a vector.
func TestLazyBackground(t *testing.T) {
	want := testEmbedder(t, FP32)
	defer func() { loadHook = nil }()
	var loads atomic.Int32
	loadHook = func() { loads.Add(1) } // set before New: its goroutine reads it
	ctx := context.Background()

	// Never asked: Close, which waits for a background load, finds none.
	unused, err := New(installed(Options{Sessions: 1, Background: true, Lazy: true}))
	testenv.Require(t, err)
	if unused.ModelID() != want.ModelID() {
		t.Errorf("ModelID %q before any load, want %q", unused.ModelID(), want.ModelID())
	}
	if err := unused.Close(); err != nil {
		t.Fatal(err)
	}
	if n := loads.Load(); n != 0 {
		t.Fatalf("an embedder never asked for a vector loaded its model %d times", n)
	}
	if _, err := unused.Embed(ctx, []string{"x"}); !errors.Is(err, ErrClosed) {
		t.Errorf("Embed after Close: %v, want ErrClosed", err)
	}

	// Start starts the load without waiting; Ready waits for it.
	e, err := New(installed(Options{Sessions: 1, Background: true, Lazy: true}))
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	e.Start()
	if err := e.Ready(ctx); err != nil {
		t.Fatalf("Ready after Start: %v", err)
	}
	e.Start()
	texts := benchTexts(3)
	got, err := e.Embed(ctx, texts)
	if err != nil {
		t.Fatal(err)
	}
	ref, err := want.Embed(ctx, texts)
	if err != nil {
		t.Fatal(err)
	}
	for i := range ref {
		if !slices.Equal(got[i], ref[i]) {
			t.Fatalf("text %d: the lazily loaded model's vector differs from a loaded one's", i)
		}
	}
	if n := loads.Load(); n != 1 {
		t.Errorf("%d loads after Start, Ready, Start and Embed, want 1", n)
	}

	// Files not installed: said, and looked for, once asked.
	var logs testenv.LogBuffer
	missing, err := New(&Options{ORTLib: want.Paths().ORTLib, ModelDir: t.TempDir(), Sessions: 1, Background: true, Lazy: true,
		Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	if err != nil {
		t.Fatalf("New without the files: %v", err)
	}
	defer missing.Close()
	if l := logs.String(); strings.Contains(l, "semantic ranking is off") {
		t.Errorf("a lazy embedder said its files are missing before anything asked for a vector:\n%s", l)
	}
	if err := missing.Ready(ctx); !errors.Is(err, ErrMissing) {
		t.Errorf("Ready without the files: %v, want ErrMissing", err)
	}
	testenv.Eventually(t, "the missing files said once asked", func() bool {
		return strings.Contains(logs.String(), "semantic ranking is off until the embedding model is installed")
	})
}

// TestLazyLoadsNoRuntime: with Lazy (serve in bm25 mode with Background,
// eval without) New does not ask for the ONNX Runtime library: it loads
// with the model, at the first need. New loaded it at every start, and a
// gateway in bm25 mode held its mapping (about 10 MiB of RSS) for nothing.
// The library loads once a process, so what is counted is New's asking
// for it (initHook).
func TestLazyLoadsNoRuntime(t *testing.T) {
	want := testEmbedder(t, FP32)
	defer func() { initHook = nil }()
	var inits atomic.Int32
	initHook = func() { inits.Add(1) }
	for _, bg := range []bool{false, true} {
		inits.Store(0)
		e, err := New(installed(Options{Sessions: 1, Background: bg, Lazy: true}))
		testenv.Require(t, err)
		if n := inits.Load(); n != 0 {
			t.Errorf("Background %v: New with Lazy asked for the ONNX Runtime library %d times, want none before a load", bg, n)
		}
		if e.ModelID() != want.ModelID() {
			t.Errorf("Background %v: ModelID %q, want %q", bg, e.ModelID(), want.ModelID())
		}
		if err := e.Ready(context.Background()); err != nil {
			t.Fatalf("Background %v: Ready: %v", bg, err)
		}
		if inits.Load() == 0 {
			t.Errorf("Background %v: the model loaded without the runtime asked for", bg)
		}
		if err := e.Close(); err != nil {
			t.Fatal(err)
		}
	}
}

// A model folder whose tokenizer does not load: New says so; in the
// background the same error comes from Ready and Embed, and Close returns.
func TestBackgroundLoadFails(t *testing.T) {
	real := installed(Options{})
	model := filepath.Join(real.ModelDir, FP32.ModelFile())
	if _, err := os.Stat(model); err != nil {
		testenv.Require(t, err)
	}
	dir := t.TempDir()
	if err := os.Symlink(model, filepath.Join(dir, FP32.ModelFile())); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, TokenizerFile), []byte(`{"not": "a tokenizer"`), 0o644); err != nil {
		t.Fatal(err)
	}
	opts := Options{ORTLib: real.ORTLib, ModelDir: dir, Sessions: 1}
	if _, err := New(&opts); err == nil || !strings.Contains(err.Error(), "tokenizer") {
		t.Errorf("New: %v, want the tokenizer's error", err)
	}
	opts.Background = true
	e, err := New(&opts)
	if err != nil {
		t.Fatalf("New in the background: %v", err)
	}
	if err := e.Ready(context.Background()); err == nil || !strings.Contains(err.Error(), "tokenizer") {
		t.Errorf("Ready: %v, want the tokenizer's error", err)
	}
	if err := e.LoadError(); err == nil || !strings.Contains(err.Error(), "tokenizer") {
		t.Errorf("LoadError: %v, want the tokenizer's error", err)
	}
	if _, err := e.Embed(context.Background(), []string{"x"}); err == nil {
		t.Error("Embed after a failed load: no error")
	}
	if err := e.Close(); err != nil {
		t.Errorf("Close: %v", err)
	}
}

// TestBackgroundAwaitsMissingFiles: in the background, model files that
// are not installed yet are not an error: Ready and Embed say what is
// missing and ModelID is "" until the files are there, and then they load
// by themselves (a gateway started before `toolgate models fetch` used to
// stay BM25-only until a restart). Without Background they are an error.
func TestBackgroundAwaitsMissingFiles(t *testing.T) {
	want := testEmbedder(t, FP32)
	real := want.Paths()
	// Set before New: its goroutine reads them.
	defer func(d time.Duration) { filesPoll, loadHook, lookHook = d, nil, nil }(filesPoll)
	filesPoll = 20 * time.Millisecond
	var loads, looks atomic.Int32
	loadHook = func() { loads.Add(1) }
	lookHook = func() { looks.Add(1) }
	dir := t.TempDir()
	opts := Options{ORTLib: real.ORTLib, ModelDir: dir, Sessions: 1}
	if _, err := New(&opts); !errors.Is(err, ErrMissing) {
		t.Fatalf("New without the files: %v, want ErrMissing", err)
	}
	opts.Background = true
	e, err := New(&opts)
	if err != nil {
		t.Fatalf("New in the background without the files: %v", err)
	}
	defer e.Close()
	if err := e.Ready(context.Background()); !errors.Is(err, ErrMissing) || !strings.Contains(err.Error(), "toolgate models fetch") {
		t.Errorf("Ready without the files: %v, want what is missing and its fix", err)
	}
	if err := e.LoadError(); !errors.Is(err, ErrMissing) {
		t.Errorf("LoadError without the files: %v, want ErrMissing", err)
	}
	if _, err := e.Embed(context.Background(), []string{"x"}); !errors.Is(err, ErrMissing) {
		t.Errorf("Embed without the files: %v", err)
	}
	if id := e.ModelID(); id != "" {
		t.Errorf("ModelID without the files = %q", id)
	}
	// A damaged tokenizer first: tried once, said, and not again until it
	// changes.
	if err := os.WriteFile(filepath.Join(dir, TokenizerFile), []byte(`{"not": "a tokenizer"`), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(real.Model, filepath.Join(dir, FP32.ModelFile())); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, "a load of the damaged tokenizer", func() bool { return loads.Load() == 1 })
	seen := looks.Load()
	testenv.Eventually(t, "three more looks at the unchanged files", func() bool { return looks.Load() >= seen+3 })
	if err := e.Ready(context.Background()); err == nil || errors.Is(err, ErrMissing) {
		t.Fatalf("Ready with a damaged tokenizer: %v, want its load's error", err)
	}
	if err := e.LoadError(); err == nil || !strings.Contains(err.Error(), "tokenizer") {
		t.Errorf("LoadError with a damaged tokenizer: %v, want the tokenizer's error", err)
	}
	// What a fetch does: the whole file renamed into place.
	if err := os.Symlink(real.Tokenizer, filepath.Join(dir, "tokenizer.new")); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(filepath.Join(dir, "tokenizer.new"), filepath.Join(dir, TokenizerFile)); err != nil {
		t.Fatal(err)
	}
	select {
	case <-e.Installed():
		t.Error("Installed closed before the model was")
	default:
	}
	testenv.Eventually(t, "the model loaded once its files came", func() bool { return e.Ready(context.Background()) == nil })
	if err := e.LoadError(); err != nil {
		t.Errorf("LoadError once the model loaded: %v", err)
	}
	select {
	case <-e.Installed():
	default:
		t.Error("the model loaded, and Installed is not closed")
	}
	if n := loads.Load(); n != 2 {
		t.Errorf("%d loads, want 2: the damaged files once, the good ones once", n)
	}
	if e.ModelID() != want.ModelID() || e.ModelSHA256() != want.ModelSHA256() {
		t.Errorf("ModelID %q sha %q, want %q %q", e.ModelID(), e.ModelSHA256(), want.ModelID(), want.ModelSHA256())
	}
	texts := benchTexts(3)
	got, err := e.Embed(context.Background(), texts)
	if err != nil {
		t.Fatal(err)
	}
	ref, err := want.Embed(context.Background(), texts)
	if err != nil {
		t.Fatal(err)
	}
	for i := range ref {
		if !slices.Equal(got[i], ref[i]) {
			t.Fatalf("text %d: the arrived model's vector differs from a loaded one's", i)
		}
	}
}

// TestBackgroundRetriesDamagedFiles: in the background, a model file or a
// tokenizer that is there at New but does not load (cut short, damaged) is
// not given up on: it is tried again once it changes (a re-fetch renames a
// good one into place), as missing files are once they come, and not
// before. It used to stay BM25-only until a restart.
func TestBackgroundRetriesDamagedFiles(t *testing.T) {
	want := testEmbedder(t, FP32)
	real := want.Paths()
	for _, damaged := range []string{FP32.ModelFile(), TokenizerFile} {
		t.Run(damaged, func(t *testing.T) {
			// Set before New: its goroutine reads them.
			defer func(d time.Duration) { filesPoll, loadHook, lookHook = d, nil, nil }(filesPoll)
			filesPoll = 20 * time.Millisecond
			var looks atomic.Int32
			lookHook = func() { looks.Add(1) }
			dir := t.TempDir()
			for name, from := range map[string]string{FP32.ModelFile(): real.Model, TokenizerFile: real.Tokenizer} {
				if name == damaged {
					if err := os.WriteFile(filepath.Join(dir, name), []byte("cut short"), 0o644); err != nil {
						t.Fatal(err)
					}
				} else if err := os.Symlink(from, filepath.Join(dir, name)); err != nil {
					t.Fatal(err)
				}
			}
			opts := Options{ORTLib: real.ORTLib, ModelDir: dir, Sessions: 1, Background: true}
			e, err := New(&opts)
			if err != nil {
				t.Fatalf("New in the background with a damaged %s: %v", damaged, err)
			}
			defer e.Close()
			if err := e.Ready(context.Background()); err == nil {
				t.Fatalf("Ready with a damaged %s: no error", damaged)
			}
			testenv.Eventually(t, "three looks at the unchanged files", func() bool { return looks.Load() >= 3 })
			if err := e.LoadError(); err == nil {
				t.Fatal("the damaged file loaded")
			}
			// What a fetch does: the whole file renamed into place.
			good := map[string]string{FP32.ModelFile(): real.Model, TokenizerFile: real.Tokenizer}[damaged]
			if err := os.Symlink(good, filepath.Join(dir, damaged+".new")); err != nil {
				t.Fatal(err)
			}
			if err := os.Rename(filepath.Join(dir, damaged+".new"), filepath.Join(dir, damaged)); err != nil {
				t.Fatal(err)
			}
			testenv.Eventually(t, "the model loaded once the file was replaced", func() bool { return e.Ready(context.Background()) == nil })
			select {
			case <-e.Installed():
			default:
				t.Error("the model loaded, and Installed is not closed")
			}
			if e.ModelID() != want.ModelID() {
				t.Errorf("ModelID %q, want %q", e.ModelID(), want.ModelID())
			}
		})
	}
}

// runtimeChild is set in the environment of the process
// TestBackgroundAwaitsMissingRuntime starts: the runtime must not be loaded
// in the process before (the test binary's other tests load it).
const runtimeChild = "TOOLGATE_TEST_RUNTIME_ARRIVES_CHILD"

// runRuntimeChild starts a background embedder whose ONNX Runtime library
// (at $TOOLGATE_TEST_RUNTIME_ARRIVES_CHILD) is not there yet, puts a damaged
// one there, then the real one ($TOOLGATE_TEST_ORT), renamed into place as
// scripts/fetch-onnxruntime.sh does, and reports on stderr what went wrong.
func runRuntimeChild() int {
	filesPoll = 20 * time.Millisecond
	lib, real := os.Getenv(runtimeChild), os.Getenv("TOOLGATE_TEST_ORT")
	fail := func(format string, args ...any) int {
		fmt.Fprintf(os.Stderr, format+"\n", args...)
		return 1
	}
	within := func(what string, cond func() bool) bool {
		if testenv.Poll(time.Minute, cond) {
			return true
		}
		fmt.Fprintln(os.Stderr, "timed out waiting for", what)
		return false
	}
	put := func(write func(tmp string) error) error {
		tmp := lib + ".new"
		if err := write(tmp); err != nil {
			return err
		}
		return os.Rename(tmp, lib)
	}
	opts := Options{ORTLib: lib, ModelDir: os.Getenv("TOOLGATE_TEST_MODEL"), Sessions: 1}
	if _, err := New(&opts); !errors.Is(err, ErrMissing) {
		return fail("New without the runtime: %v, want ErrMissing", err)
	}
	opts.Background = true
	e, err := New(&opts)
	if err != nil {
		return fail("New in the background without the runtime: %v", err)
	}
	defer e.Close()
	if err := e.LoadError(); !errors.Is(err, ErrMissing) || !strings.Contains(err.Error(), "ONNX Runtime library") || !strings.Contains(err.Error(), FixORT) {
		return fail("LoadError without the runtime: %v, want the piece and its fix", err)
	}
	if err := put(func(tmp string) error { return os.WriteFile(tmp, []byte("not a shared library"), 0o644) }); err != nil {
		return fail("%v", err)
	}
	if !within("the damaged library's load", func() bool {
		err := e.LoadError()
		return err != nil && strings.Contains(err.Error(), "load ONNX Runtime")
	}) {
		return 1
	}
	// Said again without another try while the file is as it was.
	if err1, err2 := initORT(lib), initORT(lib); err1 == nil || err1 != err2 {
		return fail("initORT of the unchanged damaged library: %v then %v, want the same error twice", err1, err2)
	}
	if err := put(func(tmp string) error { return os.Symlink(real, tmp) }); err != nil {
		return fail("%v", err)
	}
	if !within("the runtime's load", func() bool { return e.Ready(context.Background()) == nil }) {
		return fail("last load error: %v", e.LoadError())
	}
	if v, err := e.Embed(context.Background(), []string{"list the files in a directory"}); err != nil || len(v) != 1 || len(v[0]) != Dim {
		return fail("Embed once the runtime came: %v", err)
	}
	if err := initORT(real); err == nil || !strings.Contains(err.Error(), "already loaded from "+lib) {
		return fail("initORT of another library once one is loaded: %v, want a refusal", err)
	}
	return 0
}

// TestBackgroundAwaitsMissingRuntime: in the background, a missing ONNX
// Runtime library is awaited like the model's files (a gateway started
// before scripts/fetch-onnxruntime.sh used to stay BM25-only until a
// restart); a damaged one is tried once, and again once it changes. Run in
// a process of its own: the runtime loads once a process.
func TestBackgroundAwaitsMissingRuntime(t *testing.T) {
	o := installed(Options{})
	if _, err := os.Stat(o.ORTLib); err != nil {
		testenv.Missing(t, "ONNX Runtime library %s: %v (install it with %s)", o.ORTLib, err, FixORT)
	}
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), runtimeChild+"="+filepath.Join(t.TempDir(), "libonnxruntime.so.1"),
		"TOOLGATE_TEST_ORT="+o.ORTLib, "TOOLGATE_TEST_MODEL="+o.ModelDir)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
}
