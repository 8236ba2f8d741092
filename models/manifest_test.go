package models

import (
	"encoding/json"
	"net/url"
	"regexp"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestEmbeddedManifest(t *testing.T) {
	m, err := ParseManifest(manifestJSON)
	if err != nil {
		t.Fatal(err)
	}
	if m.Model.Name != "all-MiniLM-L6-v2" || m.Model.Dim != 384 || m.Model.MaxSeqLength != 256 {
		t.Errorf("model = %s dim %d max_seq_length %d", m.Model.Name, m.Model.Dim, m.Model.MaxSeqLength)
	}
	if diff := cmp.Diff([]string{"fp32", "int8"}, m.VariantNames()); diff != "" {
		t.Errorf("variants (-want +got):\n%s", diff)
	}
	for _, name := range []string{"model.onnx", "model_int8.onnx", "tokenizer.json"} {
		f, ok := m.Model.Files[name]
		if !ok {
			t.Errorf("no file %s", name)
			continue
		}
		var kinds []string
		for _, s := range f.Sources {
			if len(kinds) == 0 || kinds[len(kinds)-1] != s.Kind {
				kinds = append(kinds, s.Kind)
			}
		}
		if diff := cmp.Diff([]string{KindMirror, KindHuggingFace, KindMaven}, kinds); diff != "" {
			t.Errorf("%s: source kinds in order (-want +got):\n%s", name, diff)
		}
	}
	pinned := regexp.MustCompile(`^https://huggingface\.co/[^/]+/[^/]+/resolve/[0-9a-f]{40}/`)
	for name, f := range m.Model.Files {
		for _, s := range f.Sources {
			if s.Kind == KindHuggingFace && !pinned.MatchString(s.URL) {
				t.Errorf("%s: HF source %s is not pinned to a commit", name, s.URL)
			}
		}
	}
	for id, j := range m.Jars {
		u, _ := url.Parse(j.URL)
		if u.Scheme != "https" || u.Host != "repo1.maven.org" {
			t.Errorf("jar %s: url %s, want https://repo1.maven.org/...", id, j.URL)
		}
		parts := strings.Split(j.Coordinates, ":")
		if len(parts) != 3 || !strings.HasSuffix(u.Path, "/"+parts[1]+"-"+parts[2]+".jar") {
			t.Errorf("jar %s: url %s does not match coordinates %s", id, j.URL, j.Coordinates)
		}
	}
	// The embed scripts read runtime pins from the same file.
	if _, ok := m.Runtime["onnxruntime"]; ok && m.Runtime["onnxruntime"].String("version") == "" {
		t.Error(`runtime.onnxruntime has no "version"`)
	}
	if Manifest() == nil {
		t.Fatal("Manifest() = nil")
	}
}

func TestParseManifestErrors(t *testing.T) {
	base := func() map[string]any {
		var v map[string]any
		if err := json.Unmarshal(manifestJSON, &v); err != nil {
			t.Fatal(err)
		}
		return v
	}
	file := func(v map[string]any, name string) map[string]any {
		return v["model"].(map[string]any)["files"].(map[string]any)[name].(map[string]any)
	}
	tests := []struct {
		name   string
		mutate func(v map[string]any)
		want   string
	}{
		{"schema", func(v map[string]any) { v["schema"] = 2 }, "schema 2"},
		{"model name with slash", func(v map[string]any) { v["model"].(map[string]any)["name"] = "a/b" }, "model.name"},
		{"unknown pooling", func(v map[string]any) { v["model"].(map[string]any)["pooling"] = "max" }, `model.pooling "max": want "mean" or "cls"`},
		{"default variant unknown", func(v map[string]any) { v["model"].(map[string]any)["default_variant"] = "fp16" }, "model.default_variant"},
		{"variant names a missing file", func(v map[string]any) {
			v["model"].(map[string]any)["variants"].(map[string]any)["int8"] = map[string]any{"model": "nope.onnx", "tokenizer": "tokenizer.json"}
		}, `model.variants.int8: file "nope.onnx"`},
		{"bad sha256", func(v map[string]any) {
			file(v, "model.onnx")["accept"].([]any)[0].(map[string]any)["sha256"] = "ABC"
		}, "model.files.model.onnx.accept[0].sha256"},
		{"no accept", func(v map[string]any) { file(v, "tokenizer.json")["accept"] = []any{} }, "no sha256 pinned"},
		{"source sha not accepted", func(v map[string]any) {
			file(v, "model.onnx")["sources"].([]any)[1].(map[string]any)["sha256"] = strings.Repeat("0", 64)
		}, "not one of model.files.model.onnx.accept"},
		{"unknown kind", func(v map[string]any) {
			file(v, "model.onnx")["sources"].([]any)[0].(map[string]any)["kind"] = "ftp"
		}, `kind "ftp"`},
		{"mirror path escapes", func(v map[string]any) {
			file(v, "model.onnx")["sources"].([]any)[0].(map[string]any)["paths"] = []any{"../etc/passwd"}
		}, "want a relative slash path"},
		{"unknown jar", func(v map[string]any) {
			file(v, "model.onnx")["sources"].([]any)[3].(map[string]any)["jar"] = "nope"
		}, `jar "nope": not in jars`},
		{"jar url", func(v map[string]any) {
			v["jars"].(map[string]any)["all-minilm-l6-v2"].(map[string]any)["url"] = "file:///x.jar"
		}, "jars.all-minilm-l6-v2.url"},
		{"hf without sha", func(v map[string]any) {
			delete(file(v, "model.onnx")["sources"].([]any)[1].(map[string]any), "sha256")
		}, "sha256: required"},
		{"not json", nil, "parse manifest"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			data := []byte("{not json")
			if tt.mutate != nil {
				v := base()
				tt.mutate(v)
				var err error
				if data, err = json.Marshal(v); err != nil {
					t.Fatal(err)
				}
			}
			_, err := ParseManifest(data)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("ParseManifest error = %v, want it to contain %q", err, tt.want)
			}
		})
	}
}

func TestParseVariants(t *testing.T) {
	m := Manifest()
	tests := []struct {
		in      string
		want    []string
		wantErr bool
	}{
		{"", []string{"fp32"}, false},
		{"fp32", []string{"fp32"}, false},
		{"int8", []string{"int8"}, false},
		{"all", []string{"fp32", "int8"}, false},
		{"int8, fp32,int8", []string{"int8", "fp32"}, false},
		{"fp16", nil, true},
		{"fp32,", nil, true},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, err := m.ParseVariants(tt.in)
			if (err != nil) != tt.wantErr {
				t.Fatalf("err = %v, wantErr %v", err, tt.wantErr)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

func TestFilesFor(t *testing.T) {
	got, err := Manifest().filesFor([]string{"int8", "fp32"})
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"model_int8.onnx", "model.onnx", "tokenizer.json"}, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}

func FuzzParseManifest(f *testing.F) {
	f.Add(manifestJSON)
	f.Add([]byte(`{"schema":1}`))
	f.Add([]byte(`{"schema":1,"model":{"name":"x","default_variant":"a","variants":{"a":{"model":"m","tokenizer":"t"}},"files":{"m":{"accept":[],"sources":[]}}}}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		m, err := ParseManifest(data)
		if err != nil {
			return
		}
		// A manifest that parses must be usable without panics.
		names := m.VariantNames()
		if _, err := m.filesFor(names); err != nil {
			t.Errorf("valid manifest, filesFor(%v): %v", names, err)
		}
		for _, f := range m.Model.Files {
			for _, s := range f.Sources {
				if s.SHA256 != "" && f.accepted(s.SHA256) == nil {
					t.Errorf("source sha256 %s not accepted", s.SHA256)
				}
			}
		}
	})
}
