// Package modelscmd owns the `toolgate models` commands — fetch, verify and
// path — their flags, the default models folder they use and what they
// print. Package models does the work (manifest, verification, fetching);
// scripts/fetchmodel runs the same fetch command without the rest of
// toolgate: this package builds without cgo, so the model can be fetched
// before the tokenizer library is built.
package modelscmd

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/toolgate/toolgate/internal/dirs"
	"github.com/toolgate/toolgate/internal/shutdown"
	"github.com/toolgate/toolgate/models"
)

// Options connect the commands to the program running them. Nil means
// defaults.
type Options struct {
	// DataDir returns the data folder once flags are parsed; the models
	// folder defaults to $TOOLGATE_MODELS_DIR, else <data dir>/models.
	// Default: dirs.Data("", "").
	DataDir func() string
	// Logger returns the logger once flags are parsed; default: discard.
	Logger func() *slog.Logger
	// Config returns the models folder and variant a config file names
	// (toolgate.embed.modelDir and variant; "" for none) once flags are
	// parsed: below --dir, $TOOLGATE_MODELS_DIR and --variant, above
	// <data dir>/models and the manifest's default variant. Default: none.
	Config func() (dir, variant string)
	// Progress receives fetch progress (a bar on a terminal); default
	// os.Stderr.
	Progress io.Writer
}

func (o *Options) withDefaults() Options {
	var r Options
	if o != nil {
		r = *o
	}
	if r.DataDir == nil {
		r.DataDir = func() string { return dirs.Data("", "") }
	}
	if r.Logger == nil {
		r.Logger = func() *slog.Logger { return slog.New(slog.DiscardHandler) }
	}
	if r.Config == nil {
		r.Config = func() (string, string) { return "", "" }
	}
	if r.Progress == nil {
		r.Progress = os.Stderr
	}
	return r
}

// modelsDir is the models folder: flag (--dir), $TOOLGATE_MODELS_DIR, the
// config's, else <data dir>/models (dirs.Models); and the variant: flag
// (--variant), else the config's.
func (o Options) modelsDir(flag, variant string) (string, string) {
	dir, v := o.Config()
	if variant == "" {
		variant = v
	}
	return dirs.Models(flag, dir, o.DataDir()), variant
}

// UsageError marks a bad flag value: the program exits with status 2.
type UsageError struct{ Err error }

func (e *UsageError) Error() string { return e.Err.Error() }
func (e *UsageError) Unwrap() error { return e.Err }

const dirHelp = "models folder (default $TOOLGATE_MODELS_DIR or <data dir>/models)"

// New is `models` with its subcommands fetch, verify and path.
func New(opts *Options) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "models",
		Short: "Fetch, verify and locate the embedding model (all-MiniLM-L6-v2)",
		Args:  cobra.NoArgs,
	}
	cmd.AddCommand(NewFetch(opts), newVerify(opts), newPath(opts))
	return cmd
}

// fetchFlags are fetch's flag values.
type fetchFlags struct {
	variant, from, dir, sources string
	quiet                       bool
}

// NewFetch is `models fetch`.
func NewFetch(opts *Options) *cobra.Command {
	o := opts.withDefaults()
	var f fetchFlags
	cmd := &cobra.Command{
		Use:   "fetch",
		Short: "Download the model files, each checked against the sha256 pinned in the manifest",
		Long: `Download all-MiniLM-L6-v2 (ONNX + tokenizer.json) into <models dir>/all-MiniLM-L6-v2/.
Per file the sources are tried in order: the --from folder, Hugging Face (pinned
commits), Maven Central (langchain4j jars). An unreachable source fails over within
seconds; a file is moved into place only after its sha256 matches a pinned value.
Files already present with a pinned sha256 (each hashed again) are kept.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			dir, variant := o.modelsDir(f.dir, f.variant)
			f.variant = variant
			fo, err := f.options(dir, o.Progress, o.Logger())
			if err != nil {
				return &UsageError{err}
			}
			return runFetch(cmd, fo)
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&f.variant, "variant", "", "model variant: fp32 (default), int8, or all")
	fl.StringVar(&f.from, "from", "", "local mirror folder tried first (files by name, the Hugging Face layout, or the Maven jars)")
	fl.StringVar(&f.dir, "dir", "", dirHelp)
	fl.StringVar(&f.sources, "source", "", "comma-separated source kinds to try: mirror, huggingface, maven (default all, in that order)")
	fl.BoolVar(&f.quiet, "quiet", false, "no progress output")
	return cmd
}

// options maps the flags onto models.FetchOptions; an error is a bad flag.
func (f *fetchFlags) options(dir string, progress io.Writer, logger *slog.Logger) (*models.FetchOptions, error) {
	variants, err := models.Manifest().ParseVariants(f.variant)
	if err != nil {
		return nil, fmt.Errorf("--variant: %w", err)
	}
	var kinds []string
	if s := strings.TrimSpace(f.sources); s != "" {
		for k := range strings.SplitSeq(s, ",") {
			switch k = strings.TrimSpace(k); k {
			case models.KindMirror, models.KindHuggingFace, models.KindMaven:
				kinds = append(kinds, k)
			case "hf":
				kinds = append(kinds, models.KindHuggingFace)
			default:
				return nil, fmt.Errorf("--source %q: want mirror, huggingface or maven", k)
			}
		}
	}
	if f.from != "" {
		switch st, err := os.Stat(f.from); {
		case errors.Is(err, fs.ErrNotExist):
			return nil, fmt.Errorf("--from %s: the folder does not exist: name the folder of a local mirror (the model files by name, the Hugging Face layout, or the Maven jars), or leave --from out to download them", f.from)
		case err != nil:
			return nil, fmt.Errorf("--from %s: %w", f.from, err)
		case !st.IsDir():
			return nil, fmt.Errorf("--from %s: not a folder: name the folder that holds the files, not a file", f.from)
		}
	}
	if f.quiet {
		progress = nil
	}
	return &models.FetchOptions{Dir: dir, Variants: variants, From: f.from, Kinds: kinds, Progress: progress, Logger: logger}, nil
}

// runFetch runs models.Fetch and prints a summary: one line per file, then
// the model folder and the total time.
func runFetch(cmd *cobra.Command, opts *models.FetchOptions) error {
	out := cmd.OutOrStdout()
	ctx := cmd.Context()
	rep, err := models.Fetch(ctx, opts)
	stopped := err != nil && ctx.Err() != nil
	if rep != nil {
		for _, f := range rep.Files {
			switch {
			case f.Err != nil && stopped:
				fmt.Fprintf(out, "STOPPED  %s\n", f.Path)
			case f.Err != nil:
				fmt.Fprintf(out, "FAILED   %s\n", f.Path)
			case f.Present:
				fmt.Fprintf(out, "present  %s  sha256 %s\n", f.Path, f.SHA256)
			default:
				fmt.Fprintf(out, "fetched  %s  sha256 %s  %s in %s from %s\n", f.Path, f.SHA256, models.HumanBytes(f.Size), f.Duration.Round(time.Millisecond), f.Source)
			}
		}
		fmt.Fprintf(out, "model folder %s (%s)\n", rep.Dir, rep.Duration.Round(time.Millisecond))
	}
	// A signal stopped it: not the network's fault (it said "every source
	// failed: … context canceled; fix: check the network").
	return shutdown.Stopped(ctx, err, "the model files were all fetched", "the files fetched are in place, no partial file is left (run the command again to fetch the rest)")
}

func newVerify(opts *Options) *cobra.Command {
	o := opts.withDefaults()
	var variant, dir string
	var full bool
	cmd := &cobra.Command{
		Use:   "verify",
		Short: "Check the model files on disk against the manifest",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			dir, variant := o.modelsDir(dir, variant)
			variants, err := models.Manifest().ParseVariants(variant)
			if err != nil {
				return &UsageError{fmt.Errorf("--variant: %w", err)}
			}
			out := cmd.OutOrStdout()
			var errs []error
			for _, v := range variants {
				in, err := models.Manifest().Verify(dir, v, full)
				if in != nil {
					for _, f := range in.Files {
						if f.Err != nil {
							fmt.Fprintf(out, "BAD  %s/%s  %v\n", v, f.Name, f.Err)
							continue
						}
						fmt.Fprintf(out, "ok   %s/%s  %s  sha256 %s\n", v, f.Name, f.Path, f.SHA256)
					}
				}
				if err != nil {
					errs = append(errs, err)
				}
			}
			return errors.Join(errs...)
		},
	}
	cmd.Flags().StringVar(&variant, "variant", "", "model variant: fp32 (default), int8, or all")
	cmd.Flags().StringVar(&dir, "dir", "", dirHelp)
	cmd.Flags().BoolVar(&full, "full", false, "re-hash every file (default: trust a stamp the file still matches: size, mtime, ctime and inode, voided by any write)")
	return cmd
}

func newPath(opts *Options) *cobra.Command {
	o := opts.withDefaults()
	var variant, dir string
	var file bool
	cmd := &cobra.Command{
		Use:   "path",
		Short: "Print the model folder (or, with --file, the variant's ONNX and tokenizer paths)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			dir, variant := o.modelsDir(dir, variant)
			modelPath, tokPath, err := models.Paths(dir, variant)
			if err != nil {
				return &UsageError{fmt.Errorf("--variant: %w", err)}
			}
			if file {
				fmt.Fprintln(cmd.OutOrStdout(), modelPath)
				fmt.Fprintln(cmd.OutOrStdout(), tokPath)
				return nil
			}
			fmt.Fprintln(cmd.OutOrStdout(), models.ModelDir(dir))
			return nil
		},
	}
	cmd.Flags().StringVar(&variant, "variant", "", "model variant: fp32 (default) or int8")
	cmd.Flags().StringVar(&dir, "dir", "", dirHelp)
	cmd.Flags().BoolVar(&file, "file", false, "print the ONNX file and tokenizer.json paths instead")
	return cmd
}
