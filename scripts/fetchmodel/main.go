// Command fetchmodel fetches the all-MiniLM-L6-v2 model files into the models
// folder, checking each against the sha256 pinned in models/manifest.json. It
// is `toolgate models fetch` (the same command, internal/modelscmd) without
// the rest of toolgate: it builds without cgo, so the model can be fetched
// before the tokenizer library is built.
//
//	go run ./scripts/fetchmodel [--variant fp32|int8|all] [--from DIR] [--dir DIR] [--source mirror,huggingface,maven] [-v]
package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/toolgate/toolgate/internal/modelscmd"
)

func main() {
	var verbose bool
	logger := func() *slog.Logger {
		lvl := slog.LevelWarn
		if verbose {
			lvl = slog.LevelDebug
		}
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: lvl}))
	}
	cmd := modelscmd.NewFetch(&modelscmd.Options{Logger: logger})
	cmd.Use = "fetch-model.sh" // what a user runs: scripts/fetch-model.sh
	cmd.SilenceUsage, cmd.SilenceErrors = true, true
	cmd.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return &modelscmd.UsageError{Err: err} })
	cmd.Flags().BoolVarP(&verbose, "verbose", "v", false, "log debug details to stderr")
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := cmd.ExecuteContext(ctx)
	stop()
	if err != nil {
		fmt.Fprintf(os.Stderr, "fetch-model: %v\n", err)
		var ue *modelscmd.UsageError
		if errors.As(err, &ue) {
			os.Exit(2)
		}
		os.Exit(1)
	}
}
