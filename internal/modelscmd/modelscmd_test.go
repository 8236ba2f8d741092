package modelscmd_test

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/toolgate/toolgate/internal/dirs"
	"github.com/toolgate/toolgate/internal/modelscmd"
	"github.com/toolgate/toolgate/models"
)

// run runs `models ARGS…` with the data folder data and returns stdout.
func run(t *testing.T, data string, args ...string) (string, error) {
	t.Helper()
	cmd := modelscmd.New(&modelscmd.Options{DataDir: func() string { return data }, Progress: &bytes.Buffer{}})
	var out bytes.Buffer
	cmd.SetOut(&out)
	cmd.SetErr(&bytes.Buffer{})
	cmd.SetArgs(args)
	cmd.SilenceUsage, cmd.SilenceErrors = true, true
	err := cmd.ExecuteContext(context.Background())
	return out.String(), err
}

func TestPath(t *testing.T) {
	t.Setenv(dirs.EnvModels, "")
	data := t.TempDir()
	out, err := run(t, data, "path")
	if want := filepath.Join(data, "models", "all-MiniLM-L6-v2") + "\n"; err != nil || out != want {
		t.Errorf("path = %q, %v; want %q", out, err, want)
	}
	out, err = run(t, data, "path", "--file", "--variant", "int8", "--dir", "/m")
	if want := "/m/all-MiniLM-L6-v2/model_int8.onnx\n/m/all-MiniLM-L6-v2/tokenizer.json\n"; err != nil || out != want {
		t.Errorf("path --file = %q, %v; want %q", out, err, want)
	}
	t.Setenv(dirs.EnvModels, "/env-models")
	if out, _ := run(t, data, "path"); out != "/env-models/all-MiniLM-L6-v2\n" {
		t.Errorf("with $%s: path = %q", dirs.EnvModels, out)
	}
}

// Bad flag values are usage errors naming the flag.
func TestUsageErrors(t *testing.T) {
	data := t.TempDir()
	for _, args := range [][]string{
		{"path", "--variant", "fp16"},
		{"verify", "--variant", "fp16"},
		{"fetch", "--variant", "fp16"},
		{"fetch", "--source", "ftp"},
		{"fetch", "--from", filepath.Join(data, "nope")},
	} {
		_, err := run(t, data, args...)
		var ue *modelscmd.UsageError
		if !errors.As(err, &ue) || !strings.Contains(err.Error(), args[1]) {
			t.Errorf("%q: err = %v, want a usage error naming %s", args, err, args[1])
		}
	}
}

func TestVerifyMissing(t *testing.T) {
	t.Setenv(dirs.EnvModels, "")
	data := t.TempDir()
	out, err := run(t, data, "verify")
	dir := filepath.Join(data, "models")
	if err == nil || !strings.Contains(err.Error(), "toolgate models fetch --variant fp32 --dir "+dir) {
		t.Errorf("err = %v, want the fetch command for %s", err, dir)
	}
	if !strings.Contains(out, "BAD  fp32/model.onnx") {
		t.Errorf("output lacks the missing file:\n%s", out)
	}
}

// --from that does not exist says so, not "not a folder"; a file is not a
// folder.
func TestFetchFromMissing(t *testing.T) {
	data := t.TempDir()
	file := filepath.Join(data, "model.onnx")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	for from, want := range map[string]string{
		filepath.Join(data, "nope"): "--from " + filepath.Join(data, "nope") + ": the folder does not exist: name the folder of a local mirror",
		file:                        "--from " + file + ": not a folder: name the folder that holds the files, not a file",
	} {
		_, err := run(t, data, "fetch", "--from", from, "--dir", filepath.Join(data, "models"))
		var ue *modelscmd.UsageError
		if !errors.As(err, &ue) || !strings.Contains(err.Error(), want) {
			t.Errorf("--from %s: err = %v, want a usage error with %q", from, err, want)
		}
	}
}

// fetch from a local mirror (the installed model folder) into an empty
// models folder, then verify: the files are copied, checked and stamped.
func TestFetchFromMirrorThenVerify(t *testing.T) {
	t.Setenv(dirs.EnvModels, "")
	installed := dirs.ModelFolder("", "", dirs.Data("", ""))
	if _, err := models.Verify(filepath.Dir(installed), "int8"); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("installed int8 model missing on CI: %v", err)
		}
		t.Skipf("installed int8 model missing (make deps): %v", err)
	}
	data := t.TempDir()
	out, err := run(t, data, "fetch", "--variant", "int8", "--from", installed, "--source", "mirror", "--quiet")
	if err != nil {
		t.Fatalf("fetch: %v\n%s", err, out)
	}
	for _, want := range []string{"fetched  " + filepath.Join(data, "models", "all-MiniLM-L6-v2", "model_int8.onnx"), "model folder "} {
		if !strings.Contains(out, want) {
			t.Errorf("fetch output lacks %q:\n%s", want, out)
		}
	}
	out, err = run(t, data, "verify", "--variant", "int8")
	if err != nil || !strings.Contains(out, "ok   int8/model_int8.onnx") {
		t.Errorf("verify after fetch: %v\n%s", err, out)
	}
	// Again: present files are kept, not fetched.
	if out, err := run(t, data, "fetch", "--variant", "int8", "--from", installed, "--quiet"); err != nil || !strings.Contains(out, "present  ") {
		t.Errorf("second fetch: %v\n%s", err, out)
	}
}

// A fetch stopped by a signal (its context cancelled) says so, not "every
// source failed … fix: check the network".
func TestFetchStopped(t *testing.T) {
	cmd := modelscmd.New(&modelscmd.Options{DataDir: func() string { return t.TempDir() }, Progress: &bytes.Buffer{}})
	cmd.SetOut(&bytes.Buffer{})
	cmd.SetErr(&bytes.Buffer{})
	cmd.SetArgs([]string{"fetch", "--from", t.TempDir()})
	cmd.SilenceUsage, cmd.SilenceErrors = true, true
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	err := cmd.ExecuteContext(ctx)
	if err == nil || !strings.Contains(err.Error(), "stopped before the model files were all fetched") || strings.Contains(err.Error(), "network") {
		t.Errorf("fetch stopped: %v", err)
	}
}
