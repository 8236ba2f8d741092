package embed

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/toolgate/toolgate/index"
	"github.com/toolgate/toolgate/internal/dirs"
	"github.com/toolgate/toolgate/internal/testenv"
	"github.com/toolgate/toolgate/models"
)

var _ index.Embedder = (*Embedder)(nil)
var _ index.Embedder = (*Cached)(nil)

// installed is o with the paths of the installed native pieces, found as
// the commands find them (internal/dirs: environment, then defaults).
func installed(o Options) *Options {
	o.ORTLib = dirs.ORTLib("", "")
	o.ModelDir = dirs.ModelFolder("", "", dirs.Data("", ""))
	return &o
}

var (
	sharedMu   sync.Mutex
	shared     = map[Variant]*Embedder{}
	sharedErrs = map[Variant]error{}
)

// testEmbedder returns a process-wide embedder for v (loading a model takes
// a while); TestMain closes them.
func testEmbedder(t testing.TB, v Variant) *Embedder {
	t.Helper()
	sharedMu.Lock()
	defer sharedMu.Unlock()
	if e, ok := shared[v]; ok {
		return e
	}
	if err, ok := sharedErrs[v]; ok {
		testenv.Require(t, err)
	}
	e, err := New(installed(Options{Variant: v}))
	if err != nil {
		sharedErrs[v] = err
		testenv.Require(t, err)
	}
	shared[v] = e
	return e
}

func TestMain(m *testing.M) {
	if os.Getenv(telemetryChild) != "" {
		os.Exit(runTelemetryChild())
	}
	if os.Getenv(threadsChild) != "" {
		os.Exit(runThreadsChild())
	}
	if os.Getenv(runtimeChild) != "" {
		os.Exit(runRuntimeChild())
	}
	code := m.Run()
	for _, e := range shared {
		e.Close()
	}
	os.Exit(code)
}

type tokenizerFixture struct {
	TokenizerSHA256 string   `json:"tokenizer_sha256"`
	AlsoSHA256      []string `json:"also_identical_for_sha256"`
	Items           []struct {
		Text string  `json:"text"`
		IDs  []int64 `json:"ids"`
	} `json:"items"`
}

// TestTokenizerParity checks token ids against the reference Python
// tokenizers package (embed/testdata/tokenizer_ids.json, full ids; the
// embedder truncates at 256 keeping [SEP] last).
func TestTokenizerParity(t *testing.T) {
	data, err := os.ReadFile("testdata/tokenizer_ids.json")
	if err != nil {
		t.Fatalf("fixture: %v", err)
	}
	var fx tokenizerFixture
	if err := json.Unmarshal(data, &fx); err != nil {
		t.Fatalf("fixture: %v", err)
	}
	if len(fx.Items) < 200 {
		t.Fatalf("fixture has %d items, want >= 200", len(fx.Items))
	}
	path := filepath.Join(installed(Options{}).ModelDir, TokenizerFile)
	sum, err := models.FileSHA256(path)
	testenv.Require(t, err)
	if sum != fx.TokenizerSHA256 && !contains(fx.AlsoSHA256, sum) {
		t.Fatalf("%s has sha256 %s, fixture made for %s %v", path, sum, fx.TokenizerSHA256, fx.AlsoSHA256)
	}
	tk, err := newTokenizer(path, 256, "toolgate models fetch")
	if err != nil {
		t.Fatal(err)
	}
	defer tk.close()
	bad := 0
	for i, it := range fx.Items {
		want := it.IDs
		if len(want) > 256 {
			want = append(append([]int64{}, want[:255]...), want[len(want)-1])
		}
		if diff := cmp.Diff(want, tk.encode(it.Text)); diff != "" {
			bad++
			if bad <= 10 {
				t.Errorf("item %d %q: ids differ (-want +got):\n%s", i, trunc(it.Text), diff)
			}
		}
	}
	if bad > 0 {
		t.Errorf("%d/%d strings differ", bad, len(fx.Items))
	}

	// CountTokens's tokenizer: no truncation, and none of the padding to
	// 128 that Xenova's tokenizer.json asks for.
	counter, err := newTokenizer(path, math.MaxInt32, "toolgate models fetch")
	if err != nil {
		t.Fatal(err)
	}
	defer counter.close()
	for i, it := range fx.Items {
		if got := counter.count(it.Text); got != len(it.IDs) {
			t.Fatalf("item %d %q: count %d, reference has %d tokens", i, trunc(it.Text), got, len(it.IDs))
		}
	}
}

func contains(xs []string, s string) bool {
	for _, x := range xs {
		if x == s {
			return true
		}
	}
	return false
}

func trunc(s string) string {
	if len(s) > 60 {
		return s[:60] + "…"
	}
	return s
}

type vectorFixture struct {
	Model string `json:"model"`
	Items []struct {
		Text   string    `json:"text"`
		Vector []float32 `json:"vector"`
	} `json:"items"`
}

// TestEmbeddingParity checks fp32 vectors against sentence-transformers
// (embed/testdata/reference_vectors.json): cosine >= 0.999 for every item.
// int8 is reported, with a looser bound.
func TestEmbeddingParity(t *testing.T) {
	data, err := os.ReadFile("testdata/reference_vectors.json")
	if err != nil {
		t.Fatalf("fixture: %v", err)
	}
	var fx vectorFixture
	if err := json.Unmarshal(data, &fx); err != nil {
		t.Fatalf("fixture: %v", err)
	}
	if len(fx.Items) < 50 {
		t.Fatalf("fixture has %d items, want >= 50", len(fx.Items))
	}
	texts := make([]string, len(fx.Items))
	for i, it := range fx.Items {
		texts[i] = it.Text
	}
	for _, tc := range []struct {
		v   Variant
		min float64
	}{{FP32, 0.999}, {INT8, 0.95}} {
		t.Run(string(tc.v), func(t *testing.T) {
			e := testEmbedder(t, tc.v)
			got, err := e.Embed(context.Background(), texts)
			if err != nil {
				t.Fatal(err)
			}
			worst, sum := 1.0, 0.0
			for i, it := range fx.Items {
				c := cosine(got[i], it.Vector)
				sum += c
				worst = min(worst, c)
				if c < tc.min {
					t.Errorf("item %d %q: cosine %.5f < %.3f", i, trunc(it.Text), c, tc.min)
				}
			}
			t.Logf("%s: %d items, min cosine %.6f, mean %.6f", tc.v, len(fx.Items), worst, sum/float64(len(fx.Items)))
		})
	}
}

func cosine(a, b []float32) float64 {
	var dot, na, nb float64
	for i := range a {
		dot += float64(a[i]) * float64(b[i])
		na += float64(a[i]) * float64(a[i])
		nb += float64(b[i]) * float64(b[i])
	}
	return dot / math.Sqrt(na*nb)
}

var oddTexts = []string{
	"",
	"create_entities: Create multiple new entities in the knowledge graph",
	"Ünïcödé façade — naïve café",
	"東京の天気を調べる",
	"deploy 🚀 now!!! 🎉",
	"nul\x00inside",
	"bad utf8 \xff\xfe here",
	strings.Repeat("a long description of a tool that goes on and on ", 80), // > 256 tokens
}

// TestShapeAndNorm: every text, odd ones included, yields a finite unit
// vector of Dim floats, and batching does not change the result.
func TestShapeAndNorm(t *testing.T) {
	for _, v := range []Variant{FP32, INT8} {
		t.Run(string(v), func(t *testing.T) {
			e := testEmbedder(t, v)
			if e.Dim() != 384 {
				t.Fatalf("Dim = %d", e.Dim())
			}
			if !strings.HasPrefix(e.ModelID(), "all-MiniLM-L6-v2/"+string(v)+"@") {
				t.Errorf("ModelID = %q", e.ModelID())
			}
			got, err := e.Embed(context.Background(), oddTexts)
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != len(oddTexts) {
				t.Fatalf("%d vectors for %d texts", len(got), len(oddTexts))
			}
			for i, vec := range got {
				if len(vec) != 384 {
					t.Fatalf("text %d: len %d", i, len(vec))
				}
				var n float64
				for _, f := range vec {
					if math.IsNaN(float64(f)) || math.IsInf(float64(f), 0) {
						t.Fatalf("text %d: non-finite value", i)
					}
					n += float64(f) * float64(f)
				}
				if math.Abs(math.Sqrt(n)-1) > 1e-4 {
					t.Errorf("text %d: norm %.6f", i, math.Sqrt(n))
				}
				one, err := e.Embed(context.Background(), oddTexts[i:i+1])
				if err != nil {
					t.Fatal(err)
				}
				if c := cosine(one[0], vec); c < 0.9999 {
					t.Errorf("text %d: alone vs in a batch cosine %.6f", i, c)
				}
			}
			empty, err := e.Embed(context.Background(), nil)
			if err != nil || len(empty) != 0 {
				t.Errorf("Embed(nil) = %v, %v", empty, err)
			}
		})
	}
}

// TestConcurrent: parallel callers get the same vectors as a serial caller
// (run with -race).
func TestConcurrent(t *testing.T) {
	e, err := New(installed(Options{Sessions: 2, Threads: 1}))
	testenv.Require(t, err)
	defer e.Close()
	texts := benchTexts(24)
	want, err := e.Embed(context.Background(), texts)
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			lo := g % 4
			got, err := e.Embed(context.Background(), texts[lo:lo+12])
			if err != nil {
				errs <- err
				return
			}
			for i := range got {
				if c := cosine(got[i], want[lo+i]); c < 0.9999 {
					errs <- fmt.Errorf("goroutine %d text %d: cosine %.6f", g, lo+i, c)
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	e.Close()
	if _, err := e.Embed(context.Background(), texts[:1]); !errors.Is(err, ErrClosed) {
		t.Errorf("Embed after Close: %v, want ErrClosed", err)
	}
}

func TestContextCanceled(t *testing.T) {
	e := testEmbedder(t, FP32)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := e.Embed(ctx, []string{"x"}); !errors.Is(err, context.Canceled) {
		t.Errorf("err = %v, want context.Canceled", err)
	}
}

// TestLocateMissing: each missing piece is named with its install command.
func TestLocateMissing(t *testing.T) {
	dir := t.TempDir()
	lib := filepath.Join(dir, "libonnxruntime.so.1")
	if err := os.WriteFile(lib, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	// The models folder is named in the fix: `toolgate models fetch`
	// alone fetches into the default one, which is not always the one
	// looked in (another --data-dir, --model-dir, TOOLGATE_MODELS_DIR).
	modelsDir := filepath.Join(dir, "models folder")
	model := filepath.Join(modelsDir, ModelName)
	if err := os.MkdirAll(model, 0o755); err != nil {
		t.Fatal(err)
	}
	fetch := "toolgate models fetch --variant fp32 --dir '" + modelsDir + "'"
	tests := []struct {
		name  string
		opts  Options
		setup func()
		want  []string
	}{
		{"ort", Options{ORTLib: filepath.Join(dir, "nope.so"), ModelDir: model},
			nil, []string{"ONNX Runtime library", "nope.so", "scripts/fetch-onnxruntime.sh", "make deps"}},
		{"model", Options{ORTLib: lib, ModelDir: model},
			nil, []string{"model file", "model.onnx", fetch}},
		{"int8", Options{ORTLib: lib, ModelDir: model, Variant: INT8},
			nil, []string{"model file", "model_int8.onnx", "toolgate models fetch --variant int8 --dir '" + modelsDir + "'"}},
		{"tokenizer", Options{ORTLib: lib, ModelDir: model},
			func() { os.WriteFile(filepath.Join(model, "model.onnx"), nil, 0o644) },
			[]string{"tokenizer file", "tokenizer.json", fetch}},
		// A container's volume mounted at a file that was not there makes
		// a folder in its place: it is there, so not "not found".
		{"tokenizer a folder", Options{ORTLib: lib, ModelDir: model},
			func() { os.Mkdir(filepath.Join(model, "tokenizer.json"), 0o755) },
			[]string{"tokenizer file at " + filepath.Join(model, "tokenizer.json") + " is a folder, not a file", "remove it (rmdir '" + filepath.Join(model, "tokenizer.json") + "'), then install it with " + fetch}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if tc.setup != nil {
				tc.setup()
			}
			_, err := Locate(&tc.opts)
			if !errors.Is(err, ErrMissing) {
				t.Fatalf("err = %v, want ErrMissing", err)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not mention %q", err, w)
				}
			}
		})
	}
	// Installed in another folder (the default data folder's, where make
	// deps put them, for a gateway given a --data-dir of its own): that
	// copy is named beside the download, once it holds the files.
	installedModels := filepath.Join(dir, "installed")
	installed := filepath.Join(installedModels, ModelName)
	empty := filepath.Join(dir, "empty", ModelName)
	if err := os.MkdirAll(empty, 0o755); err != nil {
		t.Fatal(err)
	}
	useCopy := "or, without a download, use the copy installed in " + installedModels + ": --model-dir " + installedModels + " (or $TOOLGATE_MODELS_DIR"
	for _, files := range [][]string{nil, {"model.onnx"}, {"model.onnx", "tokenizer.json"}} {
		for _, f := range files {
			if err := os.MkdirAll(installed, 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(installed, f), nil, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		_, err := Locate(&Options{ORTLib: lib, ModelDir: empty, InstalledModelDir: installed})
		if !errors.Is(err, ErrMissing) || !strings.Contains(err.Error(), "toolgate models fetch --variant fp32 --dir "+filepath.Dir(empty)) {
			t.Fatalf("with %v installed elsewhere: %v; want the download named", files, err)
		}
		if named := strings.Contains(err.Error(), useCopy); named != (len(files) == 2) {
			t.Errorf("with %v installed elsewhere: %v; want the copy there named (%q) only once it holds both files", files, err, useCopy)
		}
	}
	if _, err := Locate(&Options{Variant: "fp16"}); err == nil || !strings.Contains(err.Error(), "fp32 or int8") {
		t.Errorf("bad variant: %v", err)
	}
	// embed never guesses where the pieces are (nor reads the environment):
	// no paths is an error naming the options to set.
	t.Setenv("TOOLGATE_ORT_LIB", lib)
	if _, err := Locate(&Options{ModelDir: model}); err == nil || !strings.Contains(err.Error(), "Options.ORTLib") {
		t.Errorf("no ORTLib: %v", err)
	}
	if _, err := Locate(nil); err == nil || !strings.Contains(err.Error(), "Options.ModelDir") {
		t.Errorf("no paths: %v", err)
	}
}

// TestBadTokenizerFile: a broken tokenizer.json is an error, not an abort
// in the Rust library.
func TestBadTokenizerFile(t *testing.T) {
	p := filepath.Join(t.TempDir(), "tokenizer.json")
	if err := os.WriteFile(p, []byte(`{"not": "a tokenizer"`), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := newTokenizer(p, 256, "the fix"); err == nil || !strings.Contains(err.Error(), "re-fetch it with the fix") {
		t.Errorf("err = %v", err)
	}
}

// TestProbeTokenizer: the probe calls the library's C from_file itself (see
// probeTokenizerFile); the installed tokenizer passes every time, and broken
// files fail it without aborting the process.
func TestProbeTokenizer(t *testing.T) {
	good := filepath.Join(installed(Options{}).ModelDir, TokenizerFile)
	_, err := os.Stat(good)
	testenv.Require(t, err)
	for i := range 50 {
		if !probeTokenizerFile(good) {
			t.Fatalf("probe %d of the installed %s failed", i, good)
		}
	}
	dir := t.TempDir()
	for name, body := range map[string]string{
		"truncated": `{"not": "a tokenizer"`,
		"not-bert":  `{"version": "1.0"}`,
		"empty":     ``,
		"not-json":  "\x00\xff",
	} {
		p := filepath.Join(dir, name+".json")
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		if probeTokenizerFile(p) {
			t.Errorf("%s: probe accepted %q", name, body)
		}
	}
	if probeTokenizerFile(filepath.Join(dir, "absent.json")) {
		t.Error("probe accepted a missing file")
	}
}

func TestManifestPins(t *testing.T) {
	if ORTVersion != "1.30.0" || ORTLibName != "libonnxruntime.so.1" || len(ORTLibSHA256) != 64 {
		t.Errorf("manifest runtime pins: version %q file %q sha256 %q", ORTVersion, ORTLibName, ORTLibSHA256)
	}
	if TokenizersVersion != "1.20.2" {
		t.Errorf("TokenizersVersion = %q", TokenizersVersion)
	}
}

// CLS pooling takes each text's first token vector, at unit length.
func TestCLSNormalize(t *testing.T) {
	// Two texts, three tokens, dimension 2.
	hidden := []float32{3, 4, 9, 9, 9, 9 /* text 0 */, 0, 2, 1, 1, 1, 1 /* text 1 */}
	got := clsNormalize(hidden, 2, 3, 2)
	want := [][]float32{{0.6, 0.8}, {0, 1}}
	for i := range want {
		for k := range want[i] {
			if d := got[i][k] - want[i][k]; d > 1e-6 || d < -1e-6 {
				t.Fatalf("clsNormalize = %v, want %v", got, want)
			}
		}
	}
}

// With Lazy, New names the model without loading it; the first Embed
// loads it, with the eager embedder's vectors; Close of one never used
// loads nothing, and an Embed after says closed. eval relies on it: a run
// whose vectors are all cached loads no model.
func TestLazy(t *testing.T) {
	eager := testEmbedder(t, FP32)
	e, err := New(installed(Options{Lazy: true, Sessions: 1}))
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	if e.ModelID() != eager.ModelID() || e.ModelID() == "" {
		t.Errorf("ModelID %q, want %q", e.ModelID(), eager.ModelID())
	}
	select {
	case <-e.loaded:
		t.Fatal("New loaded the model")
	default:
	}
	if e.sessions != nil || e.tok != nil {
		t.Fatal("New loaded sessions or the tokenizer")
	}
	ctx := context.Background()
	got, err := e.Embed(ctx, []string{"read a file"})
	if err != nil {
		t.Fatal(err)
	}
	want, err := eager.Embed(ctx, []string{"read a file"})
	if err != nil {
		t.Fatal(err)
	}
	for i := range want[0] {
		if math.Abs(float64(got[0][i]-want[0][i])) > 1e-5 {
			t.Fatalf("vector[%d] = %v, eager %v", i, got[0][i], want[0][i])
		}
	}

	unused, err := New(installed(Options{Lazy: true}))
	if err != nil {
		t.Fatal(err)
	}
	if err := unused.Close(); err != nil {
		t.Fatal(err)
	}
	if unused.sessions != nil {
		t.Error("Close loaded the model")
	}
	if _, err := unused.Embed(ctx, []string{"x"}); !errors.Is(err, ErrClosed) {
		t.Errorf("Embed after Close: %v, want ErrClosed", err)
	}
}
