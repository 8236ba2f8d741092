// Command toolgate-bench measures toolgate as a client lives it and prints
// one table (the README's Performance section): search_tools latency per
// mode and catalog size, execute_tool's overhead over a direct call,
// indexing throughput, start-up time, peak memory and the tokens tools/list
// costs. It is its own binary so that the harness (synthetic catalogs,
// index/indextest) never ships in bin/toolgate: it measures a built
// bin/toolgate (--toolgate) as a real process, with this binary re-executed
// as the synthetic MCP backends (the hidden "backend" command).
//
//	make bench-report                                   # every section, every size
//	bin/toolgate-bench --sections search --sizes 10000  # one section, one size
package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/toolgate/toolgate/internal/dirs"
	"github.com/toolgate/toolgate/internal/embedflags"
)

// globals are the flags the bench shares with toolgate: the data folder
// (where the model is found by default), the log level and the embedder.
type globals struct {
	dataDir    string
	logLevel   string
	logger     *slog.Logger
	embedFlags embedflags.Flags
}

// DataDir is the data folder: --data-dir, $TOOLGATE_DATA_DIR, else the XDG
// default (internal/dirs).
func (g *globals) DataDir() string { return dirs.Data(g.dataDir, "") }

// usageError marks bad flags or arguments (exit status 2).
type usageError struct{ error }

func (u usageError) Unwrap() error { return u.error }

func newRootCmd() *cobra.Command {
	g := &globals{}
	f := benchFlags{}
	cmd := &cobra.Command{
		Use:   "toolgate-bench [--sections index,search,execute,startup,tokens,client,soak,team] [--sizes 100,1000,10000,50000]",
		Short: "Measure search latency, execute_tool overhead, indexing, start-up, memory and token economy; print one table",
		Long: `Run the performance suite on synthetic catalogs (index/indextest, fixed seed)
and print one table. Every process measured is real: the backends are this
binary's hidden "backend" MCP server, the gateway is "toolgate serve" of the
binary --toolgate names (default: toolgate beside this binary, bin/toolgate).

Sections: index (cold/warm indexing throughput), search (search_tools
latency per mode, sequential and 8 concurrent), execute (execute_tool
overhead: calls through the gateway alternating with the same calls made
directly, over stdio and streamable HTTP; and 16 concurrent callers),
startup (process start to first search_tools answer, warm index, and peak
RSS after 200 searches), tokens (tools/list size, gateway vs backends), client (issue 18's
five figures as a client lives them, on --client-tools tools served by four
stdio backends: "toolgate index --config" from an empty data folder, then
"toolgate serve" spawned --repeats times and driven over stdio: spawn to
first search_tools answer, 200 searches' p50/p99, VmHWM after them, and
execute_tool's p50 over a direct call), soak ("toolgate serve --http" with
an API key over --soak-sessions client sessions, each a search and a call
of the tool it ranked first, every tenth restarting, disabling and enabling
a backend: its goroutines, open descriptors, heap and resident memory from
its GET /metrics, its learned pairs and its data folder's stores on disk,
after a warm-up, at each fifth and at the end; its log per session; then a
restart, which must keep every learned pair), team ("toolgate serve
--http" as a team's shared gateway, on the bundled --config and on
--team-tools synthetic tools: 1, 4, 16 and 64 HTTP clients searching at
once, one API key each, every query new; search p50/p99, serve's VmHWM and
threads, and the load average, a fresh serve for each).

Real MiniLM vectors are computed for at most --embed-max tools of a catalog;
a larger catalog reuses those vectors for its other tools (the search cost
does not depend on the values) and the table says so.`,
		Args:          cobra.NoArgs,
		SilenceUsage:  true,
		SilenceErrors: true,
		PersistentPreRunE: func(cmd *cobra.Command, args []string) error {
			var lvl slog.Level
			if err := lvl.UnmarshalText([]byte(g.logLevel)); err != nil {
				return usageError{fmt.Errorf("--log-level %q: want debug, info, warn or error", g.logLevel)}
			}
			g.logger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: lvl}))
			return nil
		},
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runBench(cmd.Context(), g, f, cmd.OutOrStdout())
		},
	}
	pf := cmd.PersistentFlags()
	pf.StringVar(&g.dataDir, "data-dir", "", "data folder whose models/ holds the model (default $TOOLGATE_DATA_DIR or ~/.local/share/toolgate); the bench writes only to --work-dir")
	pf.StringVar(&g.logLevel, "log-level", "info", "log level: debug, info, warn, error (logs and progress go to stderr)")
	f.register(cmd)
	g.embedFlags.Register(cmd)
	cmd.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return usageError{err} })
	cmd.AddCommand(newBackendCmd())
	return cmd
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := newRootCmd().ExecuteContext(ctx)
	stop()
	if err != nil {
		fmt.Fprintf(os.Stderr, "toolgate-bench: %s\n", strings.TrimSpace(err.Error()))
		var ue usageError
		if errors.As(err, &ue) {
			os.Exit(2)
		}
		os.Exit(1)
	}
}

// defaultToolgate is the toolgate binary beside this one (bin/toolgate
// beside bin/toolgate-bench).
func defaultToolgate() string {
	self, err := os.Executable()
	if err != nil {
		return "toolgate"
	}
	return filepath.Join(filepath.Dir(self), "toolgate")
}
