package main

import (
	"errors"
	"flag"
	"fmt"
	"os"

	"github.com/spf13/cobra"

	"github.com/toolgate/toolgate/models"
)

func init() { register(newModelsCmd) }

func newModelsCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "models",
		Short: "Fetch, verify and locate the embedding model (all-MiniLM-L6-v2)",
		Args:  cobra.NoArgs,
	}
	cmd.AddCommand(newModelsFetchCmd(g), newModelsVerifyCmd(g), newModelsPathCmd(g))
	return cmd
}

func newModelsFetchCmd(g *globals) *cobra.Command {
	var ff models.FetchFlags
	gfs := flag.NewFlagSet("fetch", flag.ContinueOnError)
	ff.Register(gfs)
	cmd := &cobra.Command{
		Use:   "fetch",
		Short: "Download the model files, each checked against the sha256 pinned in the manifest",
		Long: `Download all-MiniLM-L6-v2 (ONNX + tokenizer.json) into <models dir>/all-MiniLM-L6-v2/.
Per file the sources are tried in order: the --from folder, Hugging Face (pinned
commits), Maven Central (langchain4j jars). An unreachable source fails over within
seconds; a file is moved into place only after its sha256 matches a pinned value.
Files already present with a pinned sha256 are kept.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			opts, err := ff.Options(models.Dir(g.DataDir()), os.Stderr, g.logger)
			if err != nil {
				return usageError{err}
			}
			return models.RunFetch(cmd.Context(), opts, cmd.OutOrStdout())
		},
	}
	cmd.Flags().AddGoFlagSet(gfs)
	return cmd
}

func newModelsVerifyCmd(g *globals) *cobra.Command {
	var variant, dir string
	var full bool
	cmd := &cobra.Command{
		Use:   "verify",
		Short: "Check the model files on disk against the manifest",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			variants, err := models.Manifest().ParseVariants(variant)
			if err != nil {
				return usageError{fmt.Errorf("--variant: %w", err)}
			}
			if dir == "" {
				dir = models.Dir(g.DataDir())
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
	cmd.Flags().StringVar(&dir, "dir", "", "models folder (default $TOOLGATE_MODELS_DIR or <data dir>/models)")
	cmd.Flags().BoolVar(&full, "full", false, "re-hash every file (default: trust a stamp matching size and mtime)")
	return cmd
}

func newModelsPathCmd(g *globals) *cobra.Command {
	var variant, dir string
	var file bool
	cmd := &cobra.Command{
		Use:   "path",
		Short: "Print the model folder (or, with --file, the variant's ONNX and tokenizer paths)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if dir == "" {
				dir = models.Dir(g.DataDir())
			}
			modelPath, tokPath, err := models.Paths(dir, variant)
			if err != nil {
				return usageError{fmt.Errorf("--variant: %w", err)}
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
	cmd.Flags().StringVar(&dir, "dir", "", "models folder (default $TOOLGATE_MODELS_DIR or <data dir>/models)")
	cmd.Flags().BoolVar(&file, "file", false, "print the ONNX file and tokenizer.json paths instead")
	return cmd
}
