package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/spf13/cobra"

	"github.com/toolgate/toolgate/embed"
	"github.com/toolgate/toolgate/gateway/config"
)

func TestEmbedSettingsPrecedence(t *testing.T) {
	t.Setenv("TOOLGATE_ORT_LIB", "")
	t.Setenv("TOOLGATE_MODELS_DIR", "")
	models := t.TempDir()
	tests := []struct {
		name string
		args []string
		cfg  config.EmbedSettings
		want embed.Options
	}{
		{"defaults", nil, config.EmbedSettings{},
			embed.Options{ModelDir: filepath.Join(models, "data", "models", embed.ModelName), Variant: embed.FP32}},
		{"config", nil, config.EmbedSettings{Variant: "int8", ORTLib: "/c/ort.so", ModelDir: models, Threads: 3},
			embed.Options{ORTLib: "/c/ort.so", ModelDir: filepath.Join(models, embed.ModelName), Variant: embed.INT8, Threads: 3}},
		{"flags win", []string{"--model-variant", "fp32", "--ort-lib", "/f/ort.so", "--threads", "1"},
			config.EmbedSettings{Variant: "int8", ORTLib: "/c/ort.so", Threads: 3},
			embed.Options{ORTLib: "/f/ort.so", ModelDir: filepath.Join(models, "data", "models", embed.ModelName), Variant: embed.FP32, Threads: 1}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			g := &globals{dataDir: filepath.Join(models, "data")}
			cmd := &cobra.Command{Use: "x"}
			g.addEmbedFlags(cmd)
			if err := cmd.ParseFlags(tc.args); err != nil {
				t.Fatal(err)
			}
			g.applyEmbedSettings(tc.cfg)
			got, err := g.embedOptions()
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, *got); diff != "" {
				t.Errorf("options (-want +got):\n%s", diff)
			}
		})
	}
}

func TestModelDirNamingModelFolder(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, embed.TokenizerFile), []byte("{}"), 0o644); err != nil {
		t.Fatal(err)
	}
	g := &globals{}
	g.embed().modelDir = dir
	if got := g.modelFolder(); got != dir {
		t.Errorf("modelFolder = %q, want %q (the folder itself holds tokenizer.json)", got, dir)
	}
}

func TestEmbedOptionsBadVariant(t *testing.T) {
	g := &globals{}
	g.embed().variant = "fp16"
	_, err := g.embedOptions()
	var ue usageError
	if !errors.As(err, &ue) {
		t.Fatalf("err = %v, want usageError", err)
	}
}

// TestOpenEmbedderMissing: a missing runtime is an error naming the piece
// and its install command (serve then runs BM25-only).
func TestOpenEmbedderMissing(t *testing.T) {
	g := &globals{dataDir: t.TempDir()}
	g.embed().ortLib = filepath.Join(t.TempDir(), "libonnxruntime.so.1")
	_, _, err := g.openEmbedder(context.Background())
	if !errors.Is(err, embed.ErrMissing) || !strings.Contains(err.Error(), "scripts/fetch-onnxruntime.sh") {
		t.Fatalf("err = %v", err)
	}
}

func TestDoctorJSONMissing(t *testing.T) {
	data := t.TempDir()
	t.Setenv("TOOLGATE_MODELS_DIR", "")
	cmd := newRootCmd()
	var out bytes.Buffer
	cmd.SetOut(&out)
	cmd.SetErr(&bytes.Buffer{})
	cmd.SetArgs([]string{"doctor", "--json", "--data-dir", data, "--ort-lib", filepath.Join(data, "nope.so")})
	err := cmd.Execute()
	if err == nil || !strings.Contains(err.Error(), "make deps") {
		t.Errorf("doctor with pieces missing: err = %v", err)
	}
	var rep doctorReport
	if err := json.Unmarshal(out.Bytes(), &rep); err != nil {
		t.Fatalf("output is not JSON: %v\n%s", err, out.String())
	}
	status := map[string]string{}
	for _, c := range rep.Checks {
		status[c.Name] = c.Status
	}
	want := map[string]string{
		"onnxruntime":   statusMissing,
		"tokenizers":    statusOK,
		"model fp32":    statusMissing,
		"model int8":    statusOptional,
		"embedder fp32": statusMissing,
	}
	for k, v := range want {
		if status[k] != v {
			t.Errorf("%s: status %q, want %q (all: %v)", k, status[k], v, status)
		}
	}
	if rep.OK || rep.DataDir != data {
		t.Errorf("ok=%v data_dir=%q", rep.OK, rep.DataDir)
	}
}
