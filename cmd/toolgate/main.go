// Command toolgate is an MCP meta-gateway: it connects to many backend MCP
// servers and shows a client two tools, search_tools and execute_tool.
//
// main is the composition root: it maps flags and the config file onto the
// library packages and owns nothing else. One file per subcommand.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"slices"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/toolgate/toolgate/gateway/backend"
	"github.com/toolgate/toolgate/gateway/config"
	"github.com/toolgate/toolgate/internal/dirs"
	"github.com/toolgate/toolgate/internal/embedflags"
	"github.com/toolgate/toolgate/internal/linerpc"
	"github.com/toolgate/toolgate/internal/logring"
	"github.com/toolgate/toolgate/internal/mask"
	"github.com/toolgate/toolgate/internal/modelscmd"
	"github.com/toolgate/toolgate/internal/shutdown"
	"github.com/toolgate/toolgate/internal/storage"
	"github.com/toolgate/toolgate/internal/typo"
)

// globals are the flags every subcommand shares.
type globals struct {
	dataDir       string // --data-dir
	configDataDir string // the config file's toolgate.dataDir (applyConfig)
	logLevel      string
	logFormat     string // --log-format: text or json
	logger        *slog.Logger
	// levelAsked says that --log-level or $TOOLGATE_LOG_LEVEL chose the
	// level: commands that quiet their logs by default leave it.
	levelAsked bool
	// level is the logger's level: --log-level, then what `toolgate logs
	// --level` sets in a running gateway (serve's POST /loglevel).
	level *slog.LevelVar
	// stop is the process's stop (signals, budget, exit status); nil in
	// tests that call a command in process.
	stop *shutdown.Controller
	// dataHealth is the data folder's health (health()).
	dataHealth *storage.Health

	embedFlags embedflags.Flags // see native.go
	// logRing keeps the log's last lines (serve answers GET /logs from it).
	logRing *logring.Ring
}

// DataDir is the per-user data folder: --data-dir, $TOOLGATE_DATA_DIR, the
// config file's dataDir, else the XDG default (internal/dirs).
func (g *globals) DataDir() string { return dirs.Data(g.dataDir, g.configDataDir) }

func newRootCmd(stop *shutdown.Controller) (*cobra.Command, *globals) {
	g := &globals{stop: stop}
	root := &cobra.Command{
		Use:           "toolgate",
		Short:         "MCP meta-gateway: many backend servers behind search_tools and execute_tool",
		SilenceUsage:  true,
		SilenceErrors: true,
		PersistentPreRunE: func(cmd *cobra.Command, args []string) error {
			if err := expandHomeFlags(cmd); err != nil {
				return err
			}
			lvl, err := parseLogLevel(g.logLevel)
			if err != nil {
				return usageError{fmt.Errorf("--log-level %w", err)}
			}
			if _, err := parseLogFormat(g.logFormat); err != nil {
				return usageError{fmt.Errorf("--log-format %w", err)}
			}
			// Logs go to stderr only: stdout belongs to the MCP stdio transport.
			// The last lines are kept for `toolgate logs` too (first: a
			// closed stderr fails the write but not the ring's copy).
			g.logRing = logring.New(0)
			g.level = new(slog.LevelVar)
			g.level.Set(lvl)
			g.levelAsked = cmd.Flags().Changed("log-level") || os.Getenv("TOOLGATE_LOG_LEVEL") != ""
			g.logger = slog.New(g.logHandler(io.MultiWriter(g.logRing, os.Stderr), g.level))
			g.stop.SetLogger(g.logger)
			return nil
		},
	}
	root.PersistentFlags().StringVar(&g.dataDir, "data-dir", "", "data folder for the index and caches (default $TOOLGATE_DATA_DIR, the config's dataDir, or ~/.local/share/toolgate)")
	root.PersistentFlags().StringVar(&g.logLevel, "log-level", envOr("TOOLGATE_LOG_LEVEL", "info"), "log level: debug, info, warn, error (logs go to stderr; $TOOLGATE_LOG_LEVEL)")
	root.PersistentFlags().StringVar(&g.logFormat, "log-format", envOr("TOOLGATE_LOG_FORMAT", "text"), "log format: text (key=value) or json (one object a line; $TOOLGATE_LOG_FORMAT)")
	// --version (-v): the build's version and commit, as eval's "run"
	// and GET /status name them.
	rev, _ := buildCommit()
	root.Version = fmt.Sprintf("%s (commit %s)", version, rev)
	root.SetVersionTemplate("{{.Name}} {{.Version}}\n")
	for _, add := range subcommands {
		root.AddCommand(add(g))
	}
	usageErrors(root)
	completions(root, g)
	return root, g
}

// usageErrors makes every mistake on the command line a usageError (exit
// status 2) that names the command and its usage: an unknown flag or one
// without its value, a wrong number of arguments, and an unknown verb. A
// command that only groups verbs (auth, keys, models, …) refuses an unknown
// one instead of printing its help and exiting 0, so a typo in a script
// (`toolgate keys revok ci`) fails rather than doing nothing quietly.
func usageErrors(root *cobra.Command) {
	root.SetFlagErrorFunc(func(cmd *cobra.Command, err error) error {
		// toolgate itself takes no argument: a word before the bad flag is
		// a command it does not have (`toolgate serv --config x`), the
		// mistake to name, not the command's flag.
		if !cmd.HasParent() && cmd.Flags().NArg() > 0 {
			return unknownWord(cmd, cmd.Flags().Arg(0), "command")
		}
		return usageError{fmt.Errorf("%s%w%s (see %s --help)", verb(cmd), err, flagMeant(cmd, err), cmd.CommandPath())}
	})
	// cobra adds its completion and help commands as the command line is
	// run: added now, the walk below makes `completion tcsh` a usage error
	// too (it printed the completion help and exited 0), and help refuses
	// a topic that is no command (helpTopic).
	root.InitDefaultCompletionCmd()
	root.InitDefaultHelpCmd()
	for _, c := range root.Commands() {
		if c.Name() == "help" {
			c.Run, c.RunE = nil, helpTopic
		}
	}
	var walk func(*cobra.Command)
	walk = func(cmd *cobra.Command) {
		for _, sub := range cmd.Commands() {
			walk(sub)
		}
		if cmd.HasSubCommands() && !cmd.Runnable() {
			cmd.Args = unknownVerb
			cmd.RunE = func(cmd *cobra.Command, _ []string) error { return cmd.Help() }
		}
		if check := cmd.Args; check != nil {
			cmd.Args = func(cmd *cobra.Command, args []string) error {
				if err := check(cmd, args); err != nil {
					var ue usageError
					if errors.As(err, &ue) {
						return err
					}
					if cmd.HasSubCommands() && len(args) > 0 {
						return unknownVerb(cmd, args) // a verb's typo, not an argument
					}
					if len(args) > 0 && takesNoArgs(cmd, check) {
						return noArgsError(cmd, args) // cobra.NoArgs says "unknown command"
					}
					if strings.Contains(err.Error(), cmd.CommandPath()) {
						return usageError{fmt.Errorf("%w (usage: %s)", err, cmd.UseLine())}
					}
					return usageError{fmt.Errorf("%s%w (usage: %s)", verb(cmd), err, cmd.UseLine())}
				}
				return nil
			}
		}
	}
	walk(root)
}

// flagMeant is ": did you mean --json?" for an unknown flag err of cmd
// that is close to one of its flags (--jsn, --JSON), or a run of
// shorthands that is one of its flags with a dash left out (-json): cobra
// suggests commands only. "" when none is close (typo.Suggest).
func flagMeant(cmd *cobra.Command, err error) string {
	var ne *pflag.NotExistError
	if !errors.As(err, &ne) {
		return ""
	}
	typed := ne.GetSpecifiedName()
	if short := ne.GetSpecifiedShortnames(); short != "" {
		if len(short) < 2 {
			return "" // -j: a letter is no typo of a name
		}
		typed = short
	}
	var names []string
	cmd.Flags().VisitAll(func(f *pflag.Flag) {
		if !f.Hidden && f.Deprecated == "" {
			names = append(names, f.Name)
		}
	})
	if name, ok := typo.Suggest(typed, names); ok {
		return fmt.Sprintf(": did you mean --%s?", name)
	}
	if s := argNotFlag(cmd, ne); s != "" {
		return s
	}
	return flagOfOthers(cmd, ne.GetSpecifiedName())
}

// flagOfOthers is ": a flag of toolgate serve" for a flag cmd lacks that
// other commands take (search --http, status --tools): the newcomer's
// mistake of a flag read in another command's help. "" when none takes it.
func flagOfOthers(cmd *cobra.Command, name string) string {
	if name == "" {
		return "" // a shorthand: a letter says too little
	}
	var owners []string
	var walk func(*cobra.Command)
	walk = func(c *cobra.Command) {
		for _, sub := range c.Commands() {
			walk(sub)
		}
		if f := c.LocalNonPersistentFlags().Lookup(name); c != cmd && !c.Hidden && f != nil && !f.Hidden {
			owners = append(owners, c.CommandPath())
		}
	}
	walk(cmd.Root())
	if len(owners) == 0 {
		return ""
	}
	slices.Sort(owners)
	if len(owners) > 3 {
		owners = append(owners[:3], "…")
	}
	return ": a flag of " + strings.Join(owners, ", ")
}

// verb is "keys revoke: " for toolgate keys revoke, "" for toolgate itself
// (errors are printed after "toolgate: ").
func verb(cmd *cobra.Command) string {
	if !cmd.HasParent() {
		return ""
	}
	return strings.TrimPrefix(cmd.CommandPath(), cmd.Root().Name()+" ") + ": "
}

// unknownVerb is the Args of a command that only groups verbs: any argument
// is a verb it does not have.
func unknownVerb(cmd *cobra.Command, args []string) error {
	if len(args) == 0 {
		return nil
	}
	return unknownWord(cmd, args[0], "command")
}

// unknownWord is the usage error of word, given where cmd takes a verb:
// "unknown command" (or "unknown help topic") with the verb meant.
func unknownWord(cmd *cobra.Command, word, what string) error {
	msg := fmt.Sprintf("unknown %s %q for %q", what, word, cmd.CommandPath())
	if cmd.SuggestionsMinimumDistance <= 0 {
		cmd.SuggestionsMinimumDistance = 2 // cobra's own default, set only where it suggests itself
	}
	if s := cmd.SuggestionsFor(word); len(s) > 0 {
		msg += fmt.Sprintf(": did you mean %q?", s[0])
	} else if flag := argMeant(cmd, word); flag != "" && what == "command" {
		msg += fmt.Sprintf(": did you mean %s?", flag) // toolgate servers c.json
	}
	return usageError{fmt.Errorf("%s (see %s --help)", msg, cmd.CommandPath())}
}

// helpTopic runs `toolgate help TOPIC...`: the help of the command TOPIC
// names, and a usage error for a word that names no verb of its group
// (`help serv`, `help keys revok`). cobra's own help command printed
// toolgate's whole help then, and exited 0. Words after a command that
// takes arguments are its arguments (`help search list files`).
func helpTopic(c *cobra.Command, args []string) error {
	cmd, rest, err := c.Root().Find(args)
	if err != nil {
		return usageError{err}
	}
	if len(rest) > 0 && cmd.HasSubCommands() {
		return unknownWord(cmd, rest[0], "help topic")
	}
	cmd.InitDefaultHelpFlag() // its -h, --help line
	return cmd.Help()
}

// subcommands is filled by each subcommand file's init, so adding a verb
// touches only its own file.
var subcommands []func(*globals) *cobra.Command

func register(f func(*globals) *cobra.Command) { subcommands = append(subcommands, f) }

// expandHomeFlags expands a leading "~" in every path a flag of cmd holds
// (dirs.ExpandHome): an MCP client passes its "args" without a shell, so
// --config ~/servers.json arrived as written. Any flag value that starts
// with "~/" is a path; --env K=~/x and --header values do not start so.
func expandHomeFlags(cmd *cobra.Command) error {
	var err error
	cmd.Flags().VisitAll(func(f *pflag.Flag) {
		switch v := f.Value.(type) {
		case pflag.SliceValue:
			vals := v.GetSlice()
			out := make([]string, len(vals))
			changed := false
			for i, s := range vals {
				out[i] = dirs.ExpandHome(s)
				changed = changed || out[i] != s
			}
			if changed && f.Value.Type() == "stringArray" {
				err = errors.Join(err, v.Replace(out))
			}
		default:
			if f.Value.Type() == "string" {
				if s, p := f.Value.String(), dirs.ExpandHome(f.Value.String()); p != s {
					err = errors.Join(err, f.Value.Set(p))
				}
			}
		}
	})
	return err
}

// configFlag adds --config/-c, defaulting to $TOOLGATE_CONFIG, for a
// command that reads one file: given twice, it is a usage error (not the
// last one silently).
func configFlag(cmd *cobra.Command, p *string) { oneConfigFlag(cmd, p, "reads") }

// editConfigFlag is configFlag for a command that edits the file.
func editConfigFlag(cmd *cobra.Command, p *string) { oneConfigFlag(cmd, p, "edits") }

func oneConfigFlag(cmd *cobra.Command, p *string, verb string) {
	*p = os.Getenv("TOOLGATE_CONFIG")
	cmd.Flags().VarP(&oneFile{p: p, cmd: cmd, verb: verb}, "config", "c", "config file (mcpServers JSON; $TOOLGATE_CONFIG)")
}

// oneFile is the value of a --config given at most once.
type oneFile struct {
	p    *string
	set  bool
	cmd  *cobra.Command
	verb string
}

func (o *oneFile) String() string { return *o.p }
func (o *oneFile) Type() string   { return "string" }

func (o *oneFile) Set(v string) error {
	if o.set && !completing() { // the completion request's second parse of the same words
		return fmt.Errorf("%s %s one config file, and --config was given twice (%s, then %s): give it once", o.cmd.CommandPath(), o.verb, *o.p, v)
	}
	*o.p, o.set = v, true
	return nil
}

// configsFlag adds --config/-c, repeatable (several files read as one),
// defaulting to $TOOLGATE_CONFIG.
func configsFlag(cmd *cobra.Command, p *[]string) {
	var def []string
	if v := os.Getenv("TOOLGATE_CONFIG"); v != "" {
		def = []string{v}
	}
	cmd.Flags().StringArrayVarP(p, "config", "c", def, "config file (mcpServers JSON; $TOOLGATE_CONFIG); repeat it to read several as one, later over earlier")
}

// readConfigs reads the --config files as one (configsFlag: later over
// earlier, servers and profiles replaced whole by name, settings key by
// key), applies the toolgate settings that commands share (applyConfig)
// and logs where the files overlap. It returns the documents too: serve
// watches them.
func (g *globals) readConfigs(paths []string) (*config.File, []config.Doc, error) {
	docs, err := config.ReadDocs(paths)
	if err != nil {
		return nil, nil, err
	}
	cfg, _, conflicts, err := config.ParseDocs(docs, nil)
	if err != nil {
		return nil, nil, err
	}
	g.applyConfig(cfg.Toolgate)
	if g.logger != nil {
		for _, c := range conflicts {
			g.logger.Info("config files overlap", "conflict", c.String())
		}
	}
	return cfg, docs, nil
}

func envOr(key, def string) string {
	if v := os.Getenv(key); v != "" {
		return v
	}
	return def
}

func main() {
	if backend.IsReaper() {
		// This process supervises one stdio backend (backend.Options.Reaper)
		// and exits with it; it is not a toolgate command.
		backend.ReaperMain()
	}
	// SIGINT/SIGTERM cancel ctx and start the stop's budget; a second one
	// exits at once (internal/shutdown documents the exit statuses).
	ctx, stop := shutdown.Start(context.Background(), &shutdown.Options{Exit: exit})
	root, g := newRootCmd(stop)
	err := root.ExecuteContext(ctx)
	code := stop.Stop()
	g.giveDataFolderBack()
	if err != nil {
		code = g.fail(os.Stderr, err)
	}
	exit(code)
}

// exit ends the process. The stdio client's pipes that serve made
// non-blocking are given back blocking first: the shell that started the
// gateway may hand them to the next command (linerpc.RestoreStdio).
func exit(code int) {
	linerpc.RestoreStdio()
	os.Exit(code)
}

// fail writes the error a command ended with to w and returns the exit
// status: 2 for bad flags or arguments, a command's own (exitError), else
// 1, with a second line that says the fix where the error is the file
// system's. With --log-format json it is one log record at level ERROR
// (fields "exit" and "fix"), so a log shipper reads the reason a gateway
// did not start like its other lines.
func (g *globals) fail(w io.Writer, err error) int {
	code, fix := 1, ""
	var ue usageError
	var mue *modelscmd.UsageError
	var ee exitError
	switch {
	case errors.As(err, &ue) || errors.As(err, &mue):
		code = 2
	case errors.As(err, &ee):
		code = ee.code
	default:
		if f := storage.CommandFix(err); f != "" && !strings.Contains(err.Error(), "fix") {
			fix = f
		}
	}
	msg := strings.TrimSpace(err.Error())
	if json, _ := parseLogFormat(g.logFormat); json {
		attrs := []any{"exit", code}
		if fix != "" {
			attrs = append(attrs, "fix", fix)
		}
		slog.New(g.logHandler(w, nil)).Error(msg, attrs...)
		return code
	}
	fmt.Fprintf(w, "toolgate: %s\n", escapeUnsafe(msg)) // it may quote a backend or a remote server
	if fix != "" {
		fmt.Fprintf(w, "toolgate: fix: %s\n", fix)
	}
	return code
}

// quietUnlessAsked logs warnings and errors only, for a command whose
// answer is what a person reads (toolgate search: the model's load and
// the cache's note are not news there), unless --log-level or
// $TOOLGATE_LOG_LEVEL asked for a level.
func (g *globals) quietUnlessAsked(cmd *cobra.Command) {
	if g.levelAsked || g.level.Level() > slog.LevelInfo {
		return
	}
	g.level.Set(slog.LevelWarn)
}

// loggerAt is the logger at level, for a part whose warnings a command
// says in its own words, unless --log-level or $TOOLGATE_LOG_LEVEL asked
// for a level (then it is the command's logger).
func (g *globals) loggerAt(level slog.Level) *slog.Logger {
	if g.levelAsked || g.level.Level() > level {
		return g.logger
	}
	return slog.New(g.logHandler(io.MultiWriter(g.logRing, os.Stderr), level))
}

// parseLogFormat says whether --log-format s asks for JSON.
func parseLogFormat(s string) (json bool, err error) {
	switch s {
	case "text":
		return false, nil
	case "json":
		return true, nil
	}
	return false, fmt.Errorf("%q: want text or json", s)
}

// logHandler is the handler of --log-format writing to w at level (nil:
// info).
func (g *globals) logHandler(w io.Writer, level slog.Leveler) slog.Handler {
	opts := &slog.HandlerOptions{Level: level, ReplaceAttr: maskKeys}
	if json, _ := parseLogFormat(g.logFormat); json {
		opts.ReplaceAttr = func(groups []string, a slog.Attr) slog.Attr { return durationText(groups, maskKeys(groups, a)) }
		return slog.NewJSONHandler(w, opts)
	}
	return slog.NewTextHandler(w, opts)
}

// maskKeys hides the credentials' shapes (mask.Tokens) in a log line's
// message, text and errors: a client's text reaches many lines (the tool
// name of "tool call denied", the path of a refused request, an error
// quoting either), and an API key pasted there was written as given to
// stderr and the ring `toolgate logs` reads. Other kinds pass as they are.
func maskKeys(_ []string, a slog.Attr) slog.Attr {
	switch a.Value.Kind() {
	case slog.KindString:
		if s, m := a.Value.String(), mask.Tokens(a.Value.String()); m != s {
			a.Value = slog.StringValue(m)
		}
	case slog.KindAny:
		if err, ok := a.Value.Any().(error); ok {
			if s, m := err.Error(), mask.Tokens(err.Error()); m != s {
				a.Value = slog.StringValue(m)
			}
		}
	}
	return a
}

// durationText writes a duration in a JSON record as the text format
// does ("46ms", "1m30s"), not as slog's JSON count of nanoseconds
// (46000000), which no reader of a log takes for a duration.
func durationText(_ []string, a slog.Attr) slog.Attr {
	if a.Value.Kind() == slog.KindDuration {
		a.Value = slog.StringValue(a.Value.Duration().String())
	}
	return a
}

// usageError marks bad flags or arguments (exit status 2).
type usageError struct{ error }

func (u usageError) Unwrap() error { return u.error }

// exitError is an error with its own exit status, for commands whose
// status says more than fail/succeed (e.g. `status`: 3 = degraded).
type exitError struct {
	error
	code int
}

func (e exitError) Unwrap() error { return e.error }
