package embed

import (
	"context"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

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
	if _, err := e.Embed(context.Background(), []string{"x"}); err == nil {
		t.Error("Embed after a failed load: no error")
	}
	if err := e.Close(); err != nil {
		t.Errorf("Close: %v", err)
	}
}
