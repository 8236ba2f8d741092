// Command fetchmodel fetches the all-MiniLM-L6-v2 model files into the models
// folder, checking each against the sha256 pinned in models/manifest.json. It
// is `toolgate models fetch` without the rest of toolgate: it builds without
// cgo, so the model can be fetched before the tokenizer library is built.
//
//	go run ./scripts/fetchmodel [--variant fp32|int8|all] [--from DIR] [--dir DIR] [--source mirror,huggingface,maven]
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"github.com/toolgate/toolgate/models"
)

func main() {
	var ff models.FetchFlags
	fs := flag.NewFlagSet("fetchmodel", flag.ContinueOnError)
	ff.Register(fs)
	verbose := fs.Bool("v", false, "log debug details to stderr")
	if err := fs.Parse(os.Args[1:]); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			os.Exit(0)
		}
		os.Exit(2)
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(os.Stderr, "fetchmodel: unexpected arguments %q\n", fs.Args())
		os.Exit(2)
	}
	lvl := slog.LevelWarn
	if *verbose {
		lvl = slog.LevelDebug
	}
	logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: lvl}))
	opts, err := ff.Options(models.Dir(""), os.Stderr, logger)
	if err != nil {
		fmt.Fprintf(os.Stderr, "fetchmodel: %v\n", err)
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err = models.RunFetch(ctx, opts, os.Stdout)
	stop()
	if err != nil {
		fmt.Fprintf(os.Stderr, "fetchmodel: %v\n", err)
		os.Exit(1)
	}
}
