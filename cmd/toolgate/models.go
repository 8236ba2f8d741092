package main

import (
	"log/slog"

	"github.com/spf13/cobra"

	"github.com/toolgate/toolgate/internal/modelscmd"
)

func init() {
	register(func(g *globals) *cobra.Command {
		cmd := modelscmd.New(&modelscmd.Options{DataDir: g.DataDir, Logger: func() *slog.Logger { return g.logger },
			Config: g.embedFlags.ConfigModels})
		// fetch, verify and path take the config of the gateway whose
		// model files they handle: its dataDir and embed settings apply
		// as serve reads them (readConfigs), below --dir and --variant.
		for _, sub := range cmd.Commands() {
			var configs []string
			configsFlag(sub, &configs)
			sub.PreRunE = func(*cobra.Command, []string) error {
				if len(configs) == 0 {
					return nil
				}
				_, _, err := g.readConfigs(configs)
				return err
			}
		}
		return cmd
	})
}
