package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/toolgate/toolgate/embed"
	"github.com/toolgate/toolgate/gateway/config"
	"github.com/toolgate/toolgate/internal/dirs"
	"github.com/toolgate/toolgate/internal/testenv"
)

// The config file's dataDir and embed settings sit below the flags and the
// environment (internal/dirs, internal/embedflags test each rule).
func TestApplyConfig(t *testing.T) {
	t.Setenv("TOOLGATE_DATA_DIR", "")
	t.Setenv("TOOLGATE_MODELS_DIR", "")
	cfgData, envData := t.TempDir(), t.TempDir()
	g := &globals{}
	g.applyConfig(config.Settings{DataDir: cfgData, Embed: config.EmbedSettings{Variant: "int8"}})
	if got := g.DataDir(); got != cfgData {
		t.Errorf("config dataDir: DataDir = %q, want %q", got, cfgData)
	}
	o, err := g.embedOptions()
	if err != nil || o.Variant != embed.INT8 || o.ModelDir != filepath.Join(cfgData, "models", embed.ModelName) {
		t.Errorf("embed options %+v, %v: want int8 from the config, models under the config's dataDir", o, err)
	}
	t.Setenv("TOOLGATE_DATA_DIR", envData)
	if got := g.DataDir(); got != envData {
		t.Errorf("$TOOLGATE_DATA_DIR beats the config: DataDir = %q, want %q", got, envData)
	}
	g.dataDir = "/flag"
	if got := g.DataDir(); got != "/flag" {
		t.Errorf("--data-dir beats both: DataDir = %q", got)
	}
}

func TestEmbedOptionsBadVariant(t *testing.T) {
	g := &globals{}
	g.embedFlags.Variant = "fp16"
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
	g.embedFlags.ORTLib = filepath.Join(t.TempDir(), "libonnxruntime.so.1")
	_, _, err := g.openEmbedder(context.Background(), nil)
	if !errors.Is(err, embed.ErrMissing) || !strings.Contains(err.Error(), "scripts/fetch-onnxruntime.sh") {
		t.Fatalf("err = %v", err)
	}
}

// TestIndexWithoutModelNamesItsFolder: `toolgate index` with a data folder
// that has no model builds BM25-only and says how to install the model
// there; `toolgate models fetch` alone would fetch into the default
// folder and leave this one as it was.
func TestIndexWithoutModelNamesItsFolder(t *testing.T) {
	data := filepath.Join(t.TempDir(), "data")
	t.Setenv("TOOLGATE_MODELS_DIR", "")
	tools := filepath.Join(t.TempDir(), "tools.jsonl")
	if err := os.WriteFile(tools, []byte(`{"server":"s","name":"read_file","description":"Read a file"}`+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cmd, _ := newRootCmd(nil)
	var out, errOut bytes.Buffer
	cmd.SetOut(&out)
	cmd.SetErr(&errOut)
	cmd.SetArgs([]string{"index", "--data-dir", data, "--tools", tools})
	if err := cmd.Execute(); err != nil {
		t.Fatalf("index: %v\n%s", err, errOut.String())
	}
	want := "building a BM25-only index: model file not found at " + filepath.Join(data, "models", embed.ModelName, "model.onnx") +
		": install it with toolgate models fetch --variant fp32 --dir " + filepath.Join(data, "models")
	if !strings.Contains(out.String()+errOut.String(), want) {
		t.Errorf("index without a model: want %q in\n%s%s", want, out.String(), errOut.String())
	}
}

// doctorCommand runs `toolgate doctor --data-dir data args...` in this
// process, with no models folder set, and returns its output and error.
func doctorCommand(t *testing.T, data string, args ...string) (bytes.Buffer, error) {
	t.Helper()
	t.Setenv("TOOLGATE_MODELS_DIR", "")
	cmd, _ := newRootCmd(nil)
	var out bytes.Buffer
	cmd.SetOut(&out)
	cmd.SetErr(&bytes.Buffer{})
	cmd.SetArgs(append([]string{"doctor", "--data-dir", data}, args...))
	err := cmd.Execute()
	return out, err
}

func TestDoctorJSONMissing(t *testing.T) {
	data := t.TempDir()
	out, err := doctorCommand(t, data, "--json", "--ort-lib", filepath.Join(data, "nope.so"))
	if err == nil || !strings.Contains(err.Error(), "`toolgate models fetch` installs the model files with this binary (in a source checkout, `make deps` installs every piece)") {
		t.Errorf("doctor with pieces missing: err = %v", err)
	}
	var rep doctorReport
	if err := json.Unmarshal(out.Bytes(), &rep); err != nil {
		t.Fatalf("output is not JSON: %v\n%s", err, out.String())
	}
	status, fix := map[string]string{}, map[string]string{}
	for _, c := range rep.Checks {
		status[c.Name], fix[c.Name] = c.Status, c.Fix
	}
	// The fix names the models folder looked in (not the default one).
	if want := "toolgate models fetch --variant fp32 --dir " + filepath.Join(data, "models"); fix["model fp32"] != want {
		t.Errorf("model fp32: fix %q, want %q", fix["model fp32"], want)
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
		t.Errorf("ok=%v dataDir=%q", rep.OK, rep.DataDir)
	}
}

// TestDoctorOpenStores: the data folder's line is a warning (which does
// not fail doctor) when a store an earlier toolgate made 0755 is still so,
// with the chmod that closes it.
func TestDoctorOpenStores(t *testing.T) {
	data := t.TempDir()
	learn := filepath.Join(data, "learn")
	if err := os.Mkdir(learn, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(learn, 0o755); err != nil {
		t.Fatal(err)
	}
	out, _ := doctorCommand(t, data, "--json", "--ort-lib", filepath.Join(data, "nope.so"))
	var rep doctorReport
	if err := json.Unmarshal(out.Bytes(), &rep); err != nil {
		t.Fatalf("output is not JSON: %v\n%s", err, out.String())
	}
	c := rep.Checks[0]
	if c.Name != "data dir" || c.Status != statusWarning || c.Detail != "open to every user of this machine: "+learn+" (0755)" || c.Fix != "chmod -R go= "+learn {
		t.Errorf("data dir check = %+v", c)
	}
}

// An ONNX Runtime library missing where doctor looked: the fix says what
// named the path (--ort-lib, $TOOLGATE_ORT_LIB) and how to drop it for the
// pinned copy, and how to install that copy with the binary alone (the
// npm package), not only the script of a source checkout.
func TestDoctorORTLibFix(t *testing.T) {
	cache := t.TempDir() // the pinned copy is not there either
	t.Setenv(dirs.EnvCache, cache)
	cached := dirs.CachedORTLib()
	const install = "with the binary alone, `npm pack onnxruntime-node@"
	for _, c := range []struct {
		name, env string
		args      []string
		want      []string
	}{
		{"flag", "", []string{"--ort-lib", "/nope/a.so"}, []string{"--ort-lib names it: correct the path, or leave --ort-lib out to use the pinned copy at " + cached + ", which is not there either: install it with", install}},
		{"environment", "/nope/b.so", nil, []string{"$TOOLGATE_ORT_LIB names it: correct the path, or unset TOOLGATE_ORT_LIB to use the pinned copy at " + cached, install}},
		{"default", "", nil, []string{"scripts/fetch-onnxruntime.sh in a source checkout (or make deps); " + install, "package/bin/napi-v6/linux/x64/libonnxruntime.so.1 from the tarball there"}},
	} {
		t.Setenv(dirs.EnvORTLib, c.env)
		out, _ := doctorCommand(t, t.TempDir(), append([]string{"--json"}, c.args...)...)
		var rep doctorReport
		if err := json.Unmarshal(out.Bytes(), &rep); err != nil {
			t.Fatalf("%s: output is not JSON: %v\n%s", c.name, err, out.String())
		}
		for _, ck := range rep.Checks {
			if ck.Name != "onnxruntime" && ck.Name != "embedder fp32" {
				continue
			}
			for _, w := range c.want {
				if ck.Status != statusMissing || !strings.Contains(ck.Fix, w) {
					t.Errorf("%s: %s: %s, fix %q; want %q in it", c.name, ck.Name, ck.Status, ck.Fix, w)
				}
			}
		}
	}
}

// The table keeps its columns when a detail has several lines (the
// model's files each missing): every line is in the detail column.
func TestDoctorTableDetailLines(t *testing.T) {
	out, err := doctorCommand(t, t.TempDir())
	if err == nil {
		t.Fatalf("doctor without the model files succeeded:\n%s", out.String())
	}
	indent := -1 // where the first column ends
	for _, line := range strings.Split(strings.TrimSpace(out.String()), "\n") {
		if strings.HasPrefix(line, " ") {
			if n := len(line) - len(strings.TrimLeft(line, " ")); n != indent {
				t.Errorf("a detail line out of its column (at %d, not %d): %q\n%s", n, indent, line, out.String())
			}
			continue
		}
		if f := strings.Fields(line); len(f) > 0 && !strings.HasPrefix(f[0], "/") && indent < 0 {
			indent = strings.Index(line, f[len(f)-1]) // the path column
		} else if strings.HasPrefix(line, "/") {
			t.Errorf("a line in the first column that is not a check: %q", line)
		}
	}
}

// TestDoctorHealthy: with every piece installed (make deps), doctor exits 0,
// reports each check ok, and its report is all it prints: the embedder's own
// load line would only repeat the report, before it, on stderr.
func TestDoctorHealthy(t *testing.T) {
	cmd := toolgateCmd(t, t.TempDir(), "doctor")
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	if err := cmd.Run(); err != nil {
		if strings.Contains(out.String(), "missing") {
			testenv.Missing(t, "a native piece is not installed (make deps):\n%s", out.String())
		}
		t.Fatalf("doctor: %v\n%s%s", err, out.String(), errOut.String())
	}
	for _, name := range []string{"onnxruntime", "tokenizers", "model fp32", "embedder fp32"} {
		if !regexp.MustCompile(`(?m)^` + name + ` +ok `).MatchString(out.String()) {
			t.Errorf("doctor: want %q reported ok in\n%s", name, out.String())
		}
	}
	if errOut.Len() != 0 {
		t.Errorf("doctor printed on stderr beside its report:\n%s", errOut.String())
	}
}

// TestDoctorConfig: doctor --config (or $TOOLGATE_CONFIG) checks the pieces
// the config's gateway uses — its dataDir, toolgate.embed.ortLib and
// modelDir — as serve reads them. It had no --config ("unknown flag"), and
// without one checked the default paths, not those a service's config
// names.
func TestDoctorConfig(t *testing.T) {
	t.Setenv(dirs.EnvORTLib, "")
	t.Setenv(dirs.EnvModels, "")
	dir := t.TempDir()
	data := filepath.Join(dir, "data")
	cfg := writeConfig(t, `{"mcpServers": {}, "toolgate": {"dataDir": "`+data+`", "embed": {"ortLib": "`+filepath.Join(dir, "ort.so")+`", "modelDir": "`+filepath.Join(dir, "models")+`"}}}`)
	t.Setenv(dirs.EnvData, "")
	cmd, _ := newRootCmd(nil)
	var out bytes.Buffer
	cmd.SetOut(&out)
	cmd.SetErr(&bytes.Buffer{})
	cmd.SetArgs([]string{"doctor", "--json", "--config", cfg})
	_ = cmd.Execute()
	var rep doctorReport
	if err := json.Unmarshal(out.Bytes(), &rep); err != nil {
		t.Fatalf("doctor --config: output is not JSON: %v\n%s", err, out.String())
	}
	if rep.DataDir != data {
		t.Errorf("doctor --config: data folder %q, want the config's %q", rep.DataDir, data)
	}
	for _, c := range rep.Checks {
		switch c.Name {
		case "onnxruntime":
			if c.Path != filepath.Join(dir, "ort.so") || !strings.Contains(c.Fix, "the config's toolgate.embed.ortLib names it") {
				t.Errorf("onnxruntime: %+v, want the config's ortLib", c)
			}
		case "model fp32":
			if !strings.HasPrefix(c.Path, filepath.Join(dir, "models")) {
				t.Errorf("model fp32: %+v, want in the config's modelDir", c)
			}
		}
	}
}
