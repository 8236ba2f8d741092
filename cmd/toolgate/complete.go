package main

import (
	"log/slog"
	"os"
	"slices"
	"sort"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/toolgate/toolgate/gateway/audit"
	"github.com/toolgate/toolgate/gateway/config"
	"github.com/toolgate/toolgate/gateway/config/importer"
	"github.com/toolgate/toolgate/gateway/keys"
	"github.com/toolgate/toolgate/gateway/quarantine"
	"github.com/toolgate/toolgate/search"
)

// completions adds Tab completion of the values a user would otherwise
// look up (cobra completes commands and flag names by itself): the server
// names of the command's --config for the verbs that take a server and
// every --server flag, the config's profiles for every --profile flag, and
// the data folder's API keys for keys revoke and update. Each reads the files as the
// command would; one it cannot read completes nothing.
func completions(root *cobra.Command, g *globals) {
	var walk func(*cobra.Command)
	walk = func(cmd *cobra.Command) {
		for _, sub := range cmd.Commands() {
			walk(sub)
		}
		switch strings.TrimPrefix(cmd.CommandPath(), root.Name()+" ") {
		case "servers disable", "servers enable", "servers restart", "servers remove":
			cmd.ValidArgsFunction = firstArg(func(cmd *cobra.Command) []string { return completeServers(cmd, false) })
		case "auth login", "auth logout":
			cmd.ValidArgsFunction = firstArg(func(cmd *cobra.Command) []string { return completeServers(cmd, true) })
		case "keys revoke", "keys update":
			cmd.ValidArgsFunction = firstArg(func(cmd *cobra.Command) []string { return keyNames(g, cmd) })
		case "tools approve":
			cmd.ValidArgsFunction = firstArg(func(cmd *cobra.Command) []string { return heldTools(g, cmd) })
		}
		if cmd.Flags().Lookup("server") != nil {
			_ = cmd.RegisterFlagCompletionFunc("server", flagValues(func(cmd *cobra.Command) []string { return completeServers(cmd, false) }))
		}
		if cmd.Flags().Lookup("profile") != nil {
			_ = cmd.RegisterFlagCompletionFunc("profile", flagValues(completeProfiles))
		}
		if f := cmd.LocalNonPersistentFlags().Lookup("mode"); f != nil {
			modes := make([]string, 0, len(search.Modes)+1)
			for _, m := range search.Modes {
				modes = append(modes, string(m))
			}
			if f.DefValue != "" && !slices.Contains(modes, f.DefValue) {
				modes = append(modes, f.DefValue) // eval's "all"
			}
			_ = cmd.RegisterFlagCompletionFunc("mode", words(modes))
		}
	}
	walk(root)
	fixed := func(cmd *cobra.Command, flag string, values []string) {
		if cmd.Flags().Lookup(flag) != nil {
			_ = cmd.RegisterFlagCompletionFunc(flag, words(values))
		}
	}
	var levels []string
	for _, l := range []slog.Level{slog.LevelDebug, slog.LevelInfo, slog.LevelWarn, slog.LevelError} {
		levels = append(levels, levelName(l))
	}
	fixed(root, "log-level", levels)
	for _, c := range root.Commands() {
		switch c.Name() {
		case "import":
			fixed(c, "format", importer.Formats)
		case "logs":
			fixed(c, "level", levels)
		case "audit":
			if tail, _, err := c.Find([]string{"tail"}); err == nil {
				fixed(tail, "decision", audit.Decisions)
				fixed(tail, "outcome", audit.Outcomes)
			}
		}
	}
}

// firstArg completes a command's one argument with names, and nothing
// after it.
func firstArg(names func(*cobra.Command) []string) cobra.CompletionFunc {
	return func(cmd *cobra.Command, args []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
		if len(args) > 0 {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		return prefixed(names(cmd), toComplete), cobra.ShellCompDirectiveNoFileComp
	}
}

// flagValues completes a flag's value with names.
func flagValues(names func(*cobra.Command) []string) cobra.CompletionFunc {
	return func(cmd *cobra.Command, _ []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
		return prefixed(names(cmd), toComplete), cobra.ShellCompDirectiveNoFileComp
	}
}

// words completes a flag's value with one of a few words.
func words(values []string) cobra.CompletionFunc {
	return flagValues(func(*cobra.Command) []string { return values })
}

func prefixed(names []string, prefix string) []cobra.Completion {
	var out []cobra.Completion
	for _, n := range names {
		if strings.HasPrefix(n, prefix) {
			out = append(out, n)
		}
	}
	return out
}

// completionConfig reads the --config files of cmd (its default,
// $TOOLGATE_CONFIG, included) as the command reads them; nil when there
// is none or it does not parse.
func completionConfig(cmd *cobra.Command) *config.File {
	f := cmd.Flags().Lookup("config")
	if f == nil {
		return nil
	}
	var paths []string
	if sv, ok := f.Value.(pflag.SliceValue); ok {
		for _, p := range sv.GetSlice() {
			if !slices.Contains(paths, p) { // cobra parses the flags twice as it completes
				paths = append(paths, p)
			}
		}
	} else if p := f.Value.String(); p != "" {
		paths = []string{p}
	}
	if len(paths) == 0 {
		return nil
	}
	docs, err := config.ReadDocs(paths)
	if err != nil {
		return nil
	}
	cfg, _, _, err := config.ParseDocs(docs, nil)
	if err != nil {
		return nil
	}
	return cfg
}

// completeServers is the server names of cmd's config; remote: only the
// http and sse ones (those a login is for).
func completeServers(cmd *cobra.Command, remote bool) []string {
	cfg := completionConfig(cmd)
	if cfg == nil {
		return nil
	}
	var names []string
	for name, s := range cfg.MCPServers {
		if !remote || s.Type == config.TypeHTTP || s.Type == config.TypeSSE {
			names = append(names, name)
		}
	}
	sort.Strings(names)
	return names
}

// completeProfiles is the profile names of cmd's config.
func completeProfiles(cmd *cobra.Command) []string {
	cfg := completionConfig(cmd)
	if cfg == nil {
		return nil
	}
	var names []string
	for name := range cfg.Toolgate.Profiles {
		names = append(names, name)
	}
	sort.Strings(names)
	return names
}

// keyNames is the names of the data folder's keys in force: those keys
// revoke can revoke (a toolgate.keysFile's are deleted from that file).
func keyNames(g *globals, cmd *cobra.Command) []string {
	cfgPath := ""
	if f := cmd.Flags().Lookup("config"); f != nil {
		cfgPath = f.Value.String()
	}
	data, _, _, err := g.keysFiles(cfgPath)
	if err != nil {
		return nil
	}
	listed, err := keys.Open(data, nil).List()
	if err != nil {
		return nil
	}
	var names []string
	for _, k := range listed {
		names = append(names, k.Name)
	}
	return names
}

// heldTools is the IDs of the data folder's quarantined definitions:
// those tools approve is for.
func heldTools(g *globals, cmd *cobra.Command) []string {
	path, _, err := g.pinsPath(cmd.Flags().Lookup("config").Value.String())
	if err != nil {
		return nil
	}
	var ids []string
	if _, err := quarantine.EachPin(path, func(id string, p *quarantine.Pin) {
		if p.Hold != nil {
			ids = append(ids, id)
		}
	}); err != nil {
		return nil
	}
	sort.Strings(ids)
	return ids
}

// completing says that this process answers the shell's completion
// request (cobra's __complete), which parses the command's flags twice.
func completing() bool {
	return len(os.Args) > 1 && (os.Args[1] == cobra.ShellCompRequestCmd || os.Args[1] == cobra.ShellCompNoDescRequestCmd)
}
