// Package embedflags owns the embedder flags of the commands that embed
// text (toolgate index, search, eval, serve and doctor; toolgate-bench):
// --ort-lib, --model-dir, --model-variant and --threads, and how they, the
// environment and the config file's "toolgate"."embed" section resolve into
// embed.Options. A flag beats the environment, which beats the config file
// (internal/dirs decides the paths).
package embedflags

import (
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"time"

	"github.com/spf13/cobra"

	"github.com/toolgate/toolgate/embed"
	"github.com/toolgate/toolgate/gateway/config"
	"github.com/toolgate/toolgate/internal/dirs"
)

// Flags are the embedder flags of one command line, plus the config file's
// embed section once ApplyConfig has run.
type Flags struct {
	ORTLib   string // --ort-lib
	ModelDir string // --model-dir: the models folder (or the model folder itself)
	Variant  string // --model-variant
	Threads  int    // --threads

	config config.EmbedSettings
}

// Register adds the flags to cmd.
func (f *Flags) Register(cmd *cobra.Command) {
	fl := cmd.Flags()
	fl.StringVar(&f.ORTLib, "ort-lib", "",
		"ONNX Runtime shared library (default $"+dirs.EnvORTLib+", else the copy scripts/fetch-onnxruntime.sh caches)")
	fl.StringVar(&f.ModelDir, "model-dir", "",
		"models folder holding "+embed.ModelName+"/ (default $"+dirs.EnvModels+" or <data dir>/models)")
	fl.StringVar(&f.Variant, "model-variant", "", "embedding model variant: fp32 (default) or int8")
	fl.IntVar(&f.Threads, "threads", 0, "ONNX Runtime intra-op threads per session (default: the CPUs shared out over the sessions)")
}

// ApplyConfig sets the config file's embed section: it fills what neither a
// flag nor the environment sets.
func (f *Flags) ApplyConfig(c config.EmbedSettings) { f.config = c }

// KeepUnused is the config file's embed.keepUnused (0: the cache's
// default).
func (f *Flags) KeepUnused() time.Duration { return f.config.KeepUnused.Duration }

// ConfigModels are the config file's models folder and variant
// (embed.modelDir and variant; "" where it names none), for the commands
// that fetch, verify and locate the model files it uses.
func (f *Flags) ConfigModels() (dir, variant string) { return f.config.ModelDir, f.config.Variant }

// ORTLibPath is the ONNX Runtime library: --ort-lib, $TOOLGATE_ORT_LIB,
// config embed.ortLib, else the cached pinned copy.
func (f *Flags) ORTLibPath() string { return dirs.ORTLib(f.ORTLib, f.config.ORTLib) }

// ORTLibFix is what to do about an ONNX Runtime library missing at
// ORTLibPath: when a flag, the environment or the config named the path,
// correct that or drop it for the pinned copy (installed first, if it is
// missing too); else install the pinned copy there.
func (f *Flags) ORTLibFix() string {
	var named, drop string
	switch {
	case f.ORTLib != "":
		named, drop = "--ort-lib names it", "leave --ort-lib out"
	case os.Getenv(dirs.EnvORTLib) != "":
		named, drop = "$"+dirs.EnvORTLib+" names it", "unset "+dirs.EnvORTLib
	case f.config.ORTLib != "":
		named, drop = "the config's toolgate.embed.ortLib names it", "remove ortLib from the config"
	default:
		return embed.FixORT
	}
	cached := dirs.CachedORTLib()
	fix := fmt.Sprintf("%s: correct the path, or %s to use the pinned copy at %s", named, drop, cached)
	if _, err := os.Stat(cached); err != nil {
		fix += ", which is not there either: install it with " + embed.FixORT
	}
	return fix
}

// ModelFolder is the folder holding model.onnx and tokenizer.json:
// --model-dir, $TOOLGATE_MODELS_DIR, config embed.modelDir, else
// <dataDir>/models, each naming the models folder or the model folder.
func (f *Flags) ModelFolder(dataDir string) string {
	return dirs.ModelFolder(f.ModelDir, f.config.ModelDir, dataDir)
}

func (f *Flags) variant() string {
	if f.Variant != "" {
		return f.Variant
	}
	return f.config.Variant
}

func (f *Flags) threads() int {
	if f.Threads != 0 {
		return f.Threads
	}
	return f.config.Threads
}

// Options resolves the settings into embed.Options for the data folder
// dataDir. An error names a bad flag value.
func (f *Flags) Options(dataDir string, logger *slog.Logger) (*embed.Options, error) {
	v, err := embed.ParseVariant(f.variant())
	if err != nil {
		return nil, fmt.Errorf("--model-variant: %w", err)
	}
	if n := f.threads(); n < 0 {
		return nil, fmt.Errorf("--threads %d: want 0 (default) or more", n)
	}
	o := &embed.Options{
		ORTLib:   f.ORTLibPath(),
		ModelDir: f.ModelFolder(dataDir),
		Variant:  v,
		Threads:  f.threads(),
		Logger:   logger,
	}
	if f.ModelDir == "" && os.Getenv(dirs.EnvModels) == "" && f.config.ModelDir == "" {
		// The models folder is the data folder's: with a --data-dir of
		// its own, those of the default one are named if they are there.
		o.InstalledModelDir = dirs.ModelFolder("", "", dirs.DefaultData(""))
	}
	return o, nil
}

// Args are the flags that make a child toolgate process (e.g. `toolgate
// serve` started by toolgate-bench) load the same native pieces and model.
// The paths are always passed, resolved: the child's defaults would follow
// its own --data-dir.
func (f *Flags) Args(dataDir string) []string {
	a := []string{"--model-dir", dirs.Models(f.ModelDir, f.config.ModelDir, dataDir), "--ort-lib", f.ORTLibPath()}
	if v := f.variant(); v != "" {
		a = append(a, "--model-variant", v)
	}
	if n := f.threads(); n != 0 {
		a = append(a, "--threads", strconv.Itoa(n))
	}
	return a
}
