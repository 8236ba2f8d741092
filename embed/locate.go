package embed

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/daulet/tokenizers"

	"github.com/toolgate/toolgate/internal/shellword"
	"github.com/toolgate/toolgate/internal/storage"
	"github.com/toolgate/toolgate/models"
)

func manifestString(piece, key, def string) (v string) {
	defer func() {
		if recover() != nil { // an invalid manifest is reported by models and doctor
			v = def
		}
	}()
	if p, ok := models.Manifest().Runtime[piece]; ok {
		if v := p.String(key); v != "" {
			return v
		}
	}
	return def
}

// Pinned versions of the native pieces. The ONNX Runtime pin is read from the
// "runtime" section of models/manifest.json (as the scripts do).
// TokenizersVersion is the version of the tokenizer library linked into
// this binary: the Go module checks at start-up that libtokenizers.a is the
// version it was built for, so a binary that runs has this one (doctor
// reports it from here; only this package imports the tokenizer library).
var (
	ORTVersion        = manifestString("onnxruntime", "version", "1.30.0")
	ORTLibName        = manifestString("onnxruntime", "file", "libonnxruntime.so.1")
	ORTLibSHA256      = manifestString("onnxruntime", "sha256", "")
	TokenizersVersion = tokenizers.WANT_VERSION
)

const (
	// ModelName is the folder under the models dir holding the model files.
	ModelName = "all-MiniLM-L6-v2"
	// TokenizerFile is the Hugging Face tokenizer definition in the model folder.
	TokenizerFile = "tokenizer.json"
)

// Variant selects which ONNX file of the model runs.
type Variant string

// Model variants: fp32 is the reference; int8 is dynamically quantised,
// about 4× smaller and faster, with slightly different vectors.
const (
	FP32 Variant = "fp32"
	INT8 Variant = "int8"
)

// ModelFile is the ONNX file name for the variant inside the model folder.
func (v Variant) ModelFile() string {
	if v == INT8 {
		return "model_int8.onnx"
	}
	return "model.onnx"
}

// ParseVariant accepts "fp32" (or "") and "int8".
func ParseVariant(s string) (Variant, error) {
	switch Variant(s) {
	case "", FP32:
		return FP32, nil
	case INT8:
		return INT8, nil
	}
	return "", fmt.Errorf("model variant %q: want fp32 or int8", s)
}

// Install commands named in errors about missing pieces (the model's is
// Paths.FixModel: it names the folder). FixORT follows "install it with",
// after the path the library was looked for at ("there"): the script of a
// source checkout, and for the binary alone what the script does, from the
// npm package the README's Native pieces names.
var FixORT = "scripts/fetch-onnxruntime.sh in a source checkout (or make deps); with the binary alone, `npm pack " +
	manifestString("onnxruntime", "npm_package", "onnxruntime-node") + "@" + ORTVersion + "` (no install script runs) and copy " +
	manifestString("onnxruntime", "tarball_path", "package/bin/napi-v6/linux/x64/libonnxruntime.so.1") + " from the tarball there"

const FixTokenizer = "scripts/build-tokenizers.sh, then rebuild toolgate with scripts/native-env.sh sourced (or make deps)"

// MissingError says which native piece is missing, where it was looked for
// and the command that installs it.
type MissingError struct {
	Piece string // "ONNX Runtime library", "model file", "tokenizer file"
	Path  string
	Fix   string
	Err   error // underlying stat/open error, may be nil
}

func (e *MissingError) Error() string {
	if errors.Is(e.Err, os.ErrPermission) {
		return fmt.Sprintf("%s cannot be read by this user: %s; toolgate loads it once it can", e.Piece, e.Fix)
	}
	if errors.Is(e.Err, errFolder) {
		return fmt.Sprintf("%s at %s is a folder, not a file (a container's volume mounted at a file that was not there makes one): remove it (%s), then install it with %s",
			e.Piece, e.Path, shellword.Join("rmdir", e.Path), e.Fix)
	}
	return fmt.Sprintf("%s not found at %s: install it with %s", e.Piece, e.Path, e.Fix)
}

// errFolder is regularFile's error for a folder in the file's place.
var errFolder = errors.New("a folder, not a file")

func (e *MissingError) Unwrap() error { return e.Err }

// ErrMissing matches every *MissingError with errors.Is.
var ErrMissing = errors.New("native piece missing")

// Is makes errors.Is(err, ErrMissing) true for a MissingError.
func (e *MissingError) Is(target error) bool { return target == ErrMissing }

// Paths are the resolved locations of the files an Embedder loads.
type Paths struct {
	ORTLib    string
	ModelDir  string
	Model     string
	Tokenizer string
	Variant   Variant
	// Installed is Options.InstalledModelDir when it holds the variant's
	// files: FixModel names it first.
	Installed string
}

// Locate resolves the files an Embedder loads from opts.ORTLib and
// opts.ModelDir (both required: the caller decides where things are, see
// internal/dirs) and checks that each exists. A missing file is a
// *MissingError naming the piece and its install command.
func Locate(opts *Options) (Paths, error) {
	var o Options
	if opts != nil {
		o = *opts
	}
	v, err := ParseVariant(string(o.Variant))
	if err != nil {
		return Paths{}, err
	}
	if o.ORTLib == "" || o.ModelDir == "" {
		return Paths{}, errors.New("embed: Options.ORTLib and Options.ModelDir are required (the ONNX Runtime library and the folder holding model.onnx and tokenizer.json)")
	}
	p := Paths{ORTLib: o.ORTLib, ModelDir: o.ModelDir, Variant: v}
	p.Model = filepath.Join(p.ModelDir, v.ModelFile())
	p.Tokenizer = filepath.Join(p.ModelDir, TokenizerFile)
	if d := o.InstalledModelDir; d != "" && filepath.Clean(d) != filepath.Clean(p.ModelDir) &&
		regularFile(filepath.Join(d, v.ModelFile())) == nil && regularFile(filepath.Join(d, TokenizerFile)) == nil {
		p.Installed = d
	}

	if err := regularFile(p.ORTLib); err != nil {
		return p, missing("ONNX Runtime library", p.ORTLib, FixORT, err)
	}
	if err := regularFile(p.Model); err != nil {
		return p, missing("model file", p.Model, p.FixModel(), err)
	}
	if err := regularFile(p.Tokenizer); err != nil {
		return p, missing("tokenizer file", p.Tokenizer, p.FixModel(), err)
	}
	return p, nil
}

// missing is the MissingError of piece at path: its fix is install, or,
// for a file there that this user may not read (a shared models folder
// fetched by root with umask 077, a chmod 600), what gives it access:
// fetching it again would download 90 MiB in vain.
func missing(piece, path, install string, err error) *MissingError {
	fix := install
	if errors.Is(err, os.ErrPermission) {
		fix = storage.ReadFix(path)
	}
	return &MissingError{Piece: piece, Path: path, Fix: fix, Err: err}
}

// FixModel is the command that installs the model's files (the variant's
// and the tokenizer) where p looks for them: `toolgate models fetch` with
// the models folder named, so it fixes this install whatever data folder,
// flag or environment variable chose it. (Without --dir it would fetch
// into the default folder, and a command run with another --data-dir
// would go on failing.)
func (p Paths) FixModel() string {
	dir := p.ModelDir
	if filepath.Base(dir) == ModelName {
		dir = filepath.Dir(dir) // the models folder above the model's
	}
	fetch := models.FetchCommand(string(p.Variant), dir)
	if p.Installed == "" {
		return fetch
	}
	// The files are installed elsewhere: pointing at them spares a
	// download of 90 MiB.
	installed := p.Installed
	if filepath.Base(installed) == ModelName {
		installed = filepath.Dir(installed)
	}
	return fmt.Sprintf("%s; or, without a download, use the copy installed in %s: --model-dir %s (or $TOOLGATE_MODELS_DIR, or toolgate.embed.modelDir)",
		fetch, installed, shellword.Join(installed))
}

func regularFile(path string) error {
	fi, err := os.Stat(path)
	if err != nil {
		return err
	}
	if fi.IsDir() {
		return fmt.Errorf("%s is %w", path, errFolder)
	}
	if !fi.Mode().IsRegular() {
		return fmt.Errorf("%s is not a regular file", path)
	}
	// Readable by this user: a file there but refused was taken for one
	// that loads, failed to load, and was tried again only once its size
	// or mtime changed, which a chmod or chown does not change.
	// (Other failures of the open, as no descriptor left, are the
	// load's to report.)
	f, err := os.Open(path)
	if errors.Is(err, os.ErrPermission) {
		return err
	}
	if err == nil {
		f.Close()
	}
	return nil
}
