package models

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"time"
)

// FetchFlags are the flags shared by `toolgate models fetch` and
// scripts/fetchmodel (which must build without cgo), so both map flags to
// FetchOptions the same way.
type FetchFlags struct {
	Variant string
	From    string
	Dir     string
	Sources string
	Quiet   bool
}

// Register adds the flags to fs (cobra commands add it with AddGoFlagSet).
func (f *FetchFlags) Register(fs *flag.FlagSet) {
	fs.StringVar(&f.Variant, "variant", "", "model variant: fp32 (default), int8, or all")
	fs.StringVar(&f.From, "from", "", "local mirror folder tried first (files by name, the Hugging Face layout, or the Maven jars)")
	fs.StringVar(&f.Dir, "dir", "", "models folder (default $TOOLGATE_MODELS_DIR or <data dir>/models)")
	fs.StringVar(&f.Sources, "source", "", "comma-separated source kinds to try: mirror, huggingface, maven (default all, in that order)")
	fs.BoolVar(&f.Quiet, "quiet", false, "no progress output")
}

// Options maps the flags onto FetchOptions. defaultDir is the models folder
// used when --dir is empty. An error means a bad flag value (a usage error).
func (f *FetchFlags) Options(defaultDir string, progress io.Writer, logger *slog.Logger) (*FetchOptions, error) {
	m := Manifest()
	variants, err := m.ParseVariants(f.Variant)
	if err != nil {
		return nil, fmt.Errorf("--variant: %w", err)
	}
	var kinds []string
	if s := strings.TrimSpace(f.Sources); s != "" {
		for _, k := range strings.Split(s, ",") {
			k = strings.TrimSpace(k)
			switch k {
			case KindMirror, KindHuggingFace, KindMaven:
				kinds = append(kinds, k)
			case "hf":
				kinds = append(kinds, KindHuggingFace)
			default:
				return nil, fmt.Errorf("--source %q: want mirror, huggingface or maven", k)
			}
		}
	}
	if f.From != "" {
		st, err := os.Stat(f.From)
		if err != nil || !st.IsDir() {
			return nil, fmt.Errorf("--from %s: not a folder", f.From)
		}
	}
	dir := f.Dir
	if dir == "" {
		dir = defaultDir
	}
	if dir == "" {
		dir = Dir("")
	}
	if f.Quiet {
		progress = nil
	}
	return &FetchOptions{
		Dir:      dir,
		Variants: variants,
		From:     f.From,
		Kinds:    kinds,
		Progress: progress,
		Logger:   logger,
	}, nil
}

// RunFetch runs Fetch and writes a summary to out: one line per file, then
// the total time.
func RunFetch(ctx context.Context, opts *FetchOptions, out io.Writer) error {
	rep, err := Fetch(ctx, opts)
	if rep != nil {
		for _, f := range rep.Files {
			switch {
			case f.Err != nil:
				fmt.Fprintf(out, "FAILED   %s\n", f.Path)
			case f.Present:
				fmt.Fprintf(out, "present  %s  sha256 %s\n", f.Path, f.SHA256)
			default:
				fmt.Fprintf(out, "fetched  %s  sha256 %s  %s in %s from %s\n", f.Path, f.SHA256, humanBytes(f.Size), f.Duration.Round(time.Millisecond), f.Source)
			}
		}
		fmt.Fprintf(out, "model folder %s (%s)\n", rep.Dir, rep.Duration.Round(time.Millisecond))
	}
	return err
}
