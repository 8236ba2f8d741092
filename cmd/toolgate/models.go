package main

import (
	"log/slog"

	"github.com/spf13/cobra"

	"github.com/toolgate/toolgate/internal/modelscmd"
)

func init() {
	register(func(g *globals) *cobra.Command {
		return modelscmd.New(&modelscmd.Options{DataDir: g.DataDir, Logger: func() *slog.Logger { return g.logger }})
	})
}
