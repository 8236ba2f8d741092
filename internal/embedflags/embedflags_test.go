package embedflags_test

import (
	"path/filepath"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/spf13/cobra"

	"github.com/toolgate/toolgate/embed"
	"github.com/toolgate/toolgate/gateway/config"
	"github.com/toolgate/toolgate/internal/dirs"
	"github.com/toolgate/toolgate/internal/embedflags"
)

// A flag beats the environment, which beats the config file, which beats
// the defaults.
func TestPrecedence(t *testing.T) {
	models := t.TempDir()
	data := filepath.Join(models, "data")
	cache := t.TempDir()
	// The default data folder's model folder, named in the fix when the
	// data folder's own lacks the files (defaults only: a folder chosen
	// by a flag, the environment or the config is the user's choice).
	xdg := t.TempDir()
	t.Setenv("XDG_DATA_HOME", xdg)
	installed := filepath.Join(xdg, "toolgate", "models", embed.ModelName)
	tests := []struct {
		name string
		args []string
		env  map[string]string
		cfg  config.EmbedSettings
		want embed.Options
	}{
		{"defaults", nil, nil, config.EmbedSettings{},
			embed.Options{ORTLib: "CACHED", ModelDir: filepath.Join(data, "models", embed.ModelName), InstalledModelDir: installed, Variant: embed.FP32}},
		{"config", nil, nil, config.EmbedSettings{Variant: "int8", ORTLib: "/c/ort.so", ModelDir: models, Threads: 3},
			embed.Options{ORTLib: "/c/ort.so", ModelDir: filepath.Join(models, embed.ModelName), Variant: embed.INT8, Threads: 3}},
		{"env beats config", nil, map[string]string{dirs.EnvORTLib: "/e/ort.so", dirs.EnvModels: "/e/models"},
			config.EmbedSettings{ORTLib: "/c/ort.so", ModelDir: models},
			embed.Options{ORTLib: "/e/ort.so", ModelDir: filepath.Join("/e/models", embed.ModelName), Variant: embed.FP32}},
		{"flags win", []string{"--model-variant", "fp32", "--ort-lib", "/f/ort.so", "--threads", "1", "--model-dir", "/f/models"},
			map[string]string{dirs.EnvORTLib: "/e/ort.so", dirs.EnvModels: "/e/models"},
			config.EmbedSettings{Variant: "int8", ORTLib: "/c/ort.so", Threads: 3},
			embed.Options{ORTLib: "/f/ort.so", ModelDir: filepath.Join("/f/models", embed.ModelName), Variant: embed.FP32, Threads: 1}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv(dirs.EnvCache, cache)
			for _, k := range []string{dirs.EnvORTLib, dirs.EnvModels} {
				t.Setenv(k, tc.env[k])
			}
			if tc.want.ORTLib == "CACHED" {
				tc.want.ORTLib = dirs.CachedORTLib()
			}
			var f embedflags.Flags
			cmd := &cobra.Command{Use: "x"}
			f.Register(cmd)
			if err := cmd.ParseFlags(tc.args); err != nil {
				t.Fatal(err)
			}
			f.ApplyConfig(tc.cfg)
			got, err := f.Options(data, nil)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, *got, cmpopts.IgnoreFields(embed.Options{}, "Logger")); diff != "" {
				t.Errorf("options (-want +got):\n%s", diff)
			}
			// A child toolgate given Args resolves the same pieces.
			var child embedflags.Flags
			ccmd := &cobra.Command{Use: "child"}
			child.Register(ccmd)
			if err := ccmd.ParseFlags(f.Args(data)); err != nil {
				t.Fatal(err)
			}
			cgot, err := child.Options(filepath.Join(t.TempDir(), "other-data"), nil)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(*got, *cgot, cmpopts.IgnoreFields(embed.Options{}, "Logger", "InstalledModelDir")); diff != "" {
				t.Errorf("child given Args %q resolves (-parent +child):\n%s", f.Args(data), diff)
			}
		})
	}
}

func TestBadValues(t *testing.T) {
	for _, f := range []embedflags.Flags{{Variant: "fp16"}, {Threads: -1}} {
		if _, err := f.Options(t.TempDir(), nil); err == nil {
			t.Errorf("%+v: no error", f)
		}
	}
	f := embedflags.Flags{}
	f.ApplyConfig(config.EmbedSettings{Variant: "fp16"})
	if _, err := f.Options(t.TempDir(), nil); err == nil {
		t.Error("config variant fp16: no error")
	}
	if a := (&embedflags.Flags{}).Args("/d"); !slices.Contains(a, "--ort-lib") || !slices.Contains(a, "--model-dir") {
		t.Errorf("Args %q: want the paths always passed", a)
	}
}
