package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/toolgate/toolgate/gateway"
	"github.com/toolgate/toolgate/gateway/backend"
	"github.com/toolgate/toolgate/gateway/config"
	"github.com/toolgate/toolgate/gateway/live"
	"github.com/toolgate/toolgate/index/catalog"
	"github.com/toolgate/toolgate/internal/plural"
	"github.com/toolgate/toolgate/internal/shellword"
)

// `toolgate servers add|remove|enable|disable|restart`: the management tools'
// changes, for people who prefer a shell to an agent.

type serversAddFlags struct {
	config  string
	typ     string
	url     string
	cwd     string
	env     []string
	headers []string
	tls     config.TLS // --tls-ca, --tls-cert, --tls-key
	// The keys every kind of server shares.
	description, language string
	lazy                  bool
	settings              []setting // their words as given (config.SettingValue)
}

// setting is a flag of servers add whose word goes into the entry as the
// value of key, as the file would hold it, for the config's own check.
type setting struct {
	flag, key, usage string
	word             string
}

// settingFlags are servers add's flags of an entry's durations and bound,
// in the order the entry writes them.
func settingFlags() []setting {
	return []setting{
		{flag: "connect-timeout", key: "connectTimeout", usage: `how long the server may take to start and list its tools ("2m", or seconds; default: the toolgate section's connectTimeout)`},
		{flag: "call-timeout", key: "callTimeout", usage: `how long one call of its tools may run ("5m", or seconds; default: the toolgate section's callTimeout)`},
		{flag: "keep-alive", key: "keepAlive", usage: `a remote server's ping interval while up ("15s", or seconds; default: the toolgate section's keepAlive)`},
		{flag: "max-result-bytes", key: "maxResultBytes", usage: "bytes of text of one of its results that execute_tool hands back, longer ones trimmed (default: the toolgate section's maxResultBytes)"},
		{flag: "idle-timeout", key: "idleTimeout", usage: `with --lazy: stop it after this long without calls ("10m", or seconds)`},
	}
}

// withFlagNames is err, which the config's check says in the entry's
// keys ("add \"lazy\": true"), followed by the flags of servers add that
// write the keys it names, where the flag is not the key's own word.
func withFlagNames(err error) error {
	msg := err.Error()
	var said []string
	for _, fl := range append(settingFlags(), setting{flag: "lazy", key: "lazy"}, setting{flag: "description", key: "description"},
		setting{flag: "language", key: "language"}, setting{flag: "cwd", key: "cwd"}, setting{flag: "url", key: "url"}) {
		named := strings.Contains(msg, `"`+fl.key+`"`) || strings.Contains(msg, "."+fl.key+":")
		if named && fl.flag != fl.key || strings.Contains(msg, `"`+fl.key+`": `) { // "lazy": true is --lazy
			said = append(said, fmt.Sprintf("%q is --%s", fl.key, fl.flag))
		}
	}
	if len(said) == 0 {
		return err
	}
	return fmt.Errorf("%w (on this command line, %s)", err, strings.Join(said, ", "))
}

func newServersAddCmd(g *globals) *cobra.Command {
	var f serversAddFlags
	cmd := &cobra.Command{
		Use:   "add NAME --config FILE [--env K=V]... [--cwd DIR] -- COMMAND [ARG...] | add NAME --config FILE --url URL [--type sse] [--header 'K: V']... [--tls-ca FILE] [--tls-cert FILE --tls-key FILE]",
		Short: "Add a server to a config file",
		Long: `Add a server to a config file, atomically, keeping the file's other keys:
a local server started as COMMAND ARG... (write them after --), or a remote
one at --url. A running gateway watching the file starts it. The file is
checked first (${VAR} references need not be set in this shell); a name
that is taken or an entry toolgate could not read changes nothing. One
this shell's environment could not start (a command not in PATH, a variable
not set) is added with a warning that says why.

Either kind takes the keys every entry may have: --description, --language,
--max-result-bytes, --connect-timeout, --call-timeout, --lazy and
--idle-timeout (and a remote one --keep-alive). Each is written as the key of
its name and checked as the config file's is: a value the config refuses
("--language German", "--max-result-bytes 0") is said in the config's words,
and nothing is added.`,
		Args: func(cmd *cobra.Command, args []string) error {
			// `servers add --config F -- node x.js` took the command's
			// first word for NAME, and said to give the command.
			if len(args) == 0 || cmd.ArgsLenAtDash() == 0 {
				return usageError{errors.New("servers add needs the server's NAME before its command: toolgate servers add NAME --config FILE -- COMMAND [ARG...] (or --url URL for a remote server)")}
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := runServersAdd(cmd.ErrOrStderr(), args[0], args[1:], f); err != nil {
				return err
			}
			g.auditConfigChange(f.config, "servers add", args[0])
			warnDisabled(cmd.ErrOrStderr(), g.DataDir(), args[0])
			return nil
		},
	}
	editConfigFlag(cmd, &f.config)
	cmd.Flags().StringVar(&f.typ, "type", "", "stdio, http or sse (default: stdio with a command, http with --url)")
	cmd.Flags().StringVar(&f.url, "url", "", "a remote server's URL (streamable HTTP, or SSE with --type sse)")
	cmd.Flags().StringVar(&f.cwd, "cwd", "", "a local server's working directory")
	cmd.Flags().StringArrayVar(&f.env, "env", nil, "KEY=VALUE for a local server's environment (repeatable; ${VAR} reads the gateway's)")
	cmd.Flags().StringArrayVar(&f.headers, "header", nil, `"Name: value" for a remote server's requests (repeatable)`)
	cmd.Flags().StringVar(&f.tls.CA, "tls-ca", "", "a remote server's private CA: a PEM file of the CAs to trust for its certificate, besides the system's")
	cmd.Flags().StringVar(&f.tls.Cert, "tls-cert", "", "a client certificate (PEM) for a remote server that asks for one (mutual TLS); with --tls-key")
	cmd.Flags().StringVar(&f.tls.Key, "tls-key", "", "the private key (PEM) of --tls-cert")
	cmd.Flags().StringVar(&f.description, "description", "", "what the server offers, in a few words: search_tools names the server with it")
	cmd.Flags().StringVar(&f.language, "language", "", `the language its tools are written in, by code ("de", "fr" …; default English): the keyword index stems them by its rules`)
	cmd.Flags().BoolVar(&f.lazy, "lazy", false, "start the server at the first execute_tool of one of its tools, not with the gateway")
	f.settings = settingFlags()
	for i := range f.settings {
		st := &f.settings[i]
		cmd.Flags().StringVar(&st.word, st.flag, "", st.usage)
	}
	return cmd
}

func runServersAdd(stderr io.Writer, name string, command []string, f serversAddFlags) error {
	if f.config == "" {
		return usageError{errors.New("servers add needs --config FILE: the config file to add the server to")}
	}
	s := config.Server{Name: name, Type: f.typ, URL: f.url, Cwd: f.cwd, Description: f.description, Language: f.language, Lazy: f.lazy}
	var settings []config.Setting
	keepAlive := false
	for _, st := range f.settings {
		if st.word != "" {
			settings = append(settings, config.Setting{Key: st.key, Value: config.SettingValue(st.word)})
			keepAlive = keepAlive || st.key == "keepAlive"
		}
	}
	switch {
	case f.url != "" && len(command) > 0:
		return usageError{errors.New("servers add: give either a command (after --) or --url, not both")}
	case f.url == "" && len(command) == 0:
		return usageError{fmt.Errorf("servers add %s: give the command that starts it after -- (e.g. -- npx -y @modelcontextprotocol/server-memory), or --url for a remote server", name)}
	case len(command) > 0:
		s.Command, s.Args = command[0], command[1:]
	}
	// The flags' words, not the entry's keys they would make: a --type
	// that the other flags contradict.
	switch t := config.NormalizeType(f.typ); {
	case len(command) > 0 && (t == config.TypeHTTP || t == config.TypeSSE):
		return usageError{fmt.Errorf("servers add %s: --type %s needs --url; a command after -- makes a stdio server (leave --type out)", name, f.typ)}
	case f.url != "" && t == config.TypeStdio:
		return usageError{fmt.Errorf("servers add %s: --type stdio needs a command after --; --url makes an http server (or sse, with --type sse)", name)}
	}
	// Flags that only one kind of server takes, or only together, said
	// with the flags' names: the entry's checks would name the keys they
	// make ("mcpServers[…].tls.key: is missing").
	remote := f.url != ""
	for _, fl := range []struct {
		name        string
		set, remote bool
	}{
		{"--header", len(f.headers) > 0, true},
		{"--tls-ca", f.tls.CA != "", true},
		{"--tls-cert", f.tls.Cert != "", true},
		{"--tls-key", f.tls.Key != "", true},
		{"--keep-alive", keepAlive, true},
		{"--env", len(f.env) > 0, false},
		{"--cwd", f.cwd != "", false},
	} {
		switch {
		case fl.set && fl.remote && !remote:
			why := "" // a local server's pipe needs no TLS or ping
			if fl.name == "--header" {
				why = " (a local server takes secrets through --env)"
			}
			return usageError{fmt.Errorf("servers add %s: %s is for a remote server (--url), not a local one started by a command: leave it out%s", name, fl.name, why)}
		case fl.set && !fl.remote && remote:
			return usageError{fmt.Errorf("servers add %s: %s is for a local server (a command after --), not one at --url: leave it out", name, fl.name)}
		}
	}
	switch {
	case f.tls.Cert != "" && f.tls.Key == "":
		return usageError{fmt.Errorf("servers add %s: --tls-cert needs --tls-key, the private key (PEM) of the certificate", name)}
	case f.tls.Key != "" && f.tls.Cert == "":
		return usageError{fmt.Errorf("servers add %s: --tls-key needs --tls-cert, the client certificate (PEM) it is the key of", name)}
	}
	local := s
	local.Type = config.TypeStdio
	if len(command) == 1 && errors.Is(backend.CheckCommand(local, os.Environ()), backend.ErrWholeCommandLine) {
		// -- "npx -y pkg": one word, quoted, that the shell did not split.
		return usageError{fmt.Errorf("servers add %s: %q is one argument holding a whole command line: give the program and its arguments as separate words after --, unquoted: toolgate servers add %s --config %s -- %s",
			name, command[0], name, shellword.Join(f.config), shellword.Join(strings.Fields(command[0])...))}
	}
	var err error
	if s.Env, err = pairs(f.env, "=", "--env", "KEY=VALUE"); err != nil {
		return err
	}
	if s.Headers, err = pairs(f.headers, ":", "--header", `"Name: value"`); err != nil {
		return err
	}
	if f.tls != (config.TLS{}) {
		// Paths given here are the shell's: written absolute, as the
		// config reads a relative one from its own folder.
		t := f.tls
		for _, p := range []*string{&t.CA, &t.Cert, &t.Key} {
			if *p != "" && !strings.Contains(*p, "${") {
				if *p, err = filepath.Abs(*p); err != nil {
					return err
				}
			}
		}
		s.TLS = &t
	}
	// The entry alone first: what its flags make invalid (a name, --url,
	// --type) is a usage error (exit status 2); what the file holds is
	// checked with it below.
	alone := []config.Doc{{Path: f.config, Data: []byte(`{"mcpServers": {}}`)}}
	if _, _, err := config.AddServer(alone, s, nil, settings...); err != nil {
		return usageError{withFlagNames(err)}
	}
	docs, changed, err := config.Edit([]string{f.config}, func(docs []config.Doc) ([]config.Doc, []int, error) {
		docs, i, err := config.AddServer(docs, s, nil, settings...)
		return docs, []int{i}, err
	})
	if errors.Is(err, fs.ErrNotExist) {
		// A first server for a config not made yet: say how to make it.
		return fmt.Errorf("%w: check the path, or make the file first: echo '{\"mcpServers\": {}}' > %s (toolgate import CLIENT_CONFIG --into %s starts it from a client's servers instead)",
			err, shellword.Join(f.config), shellword.Join(f.config))
	}
	if err != nil {
		return err
	}
	i := changed[0]
	fmt.Fprintf(stderr, "added server %q to %s\n", name, docs[i].Path)
	if cfg, _, _, err := config.ParseDocs(docs, nil); err == nil {
		if problem := cannotStart(cfg)[name]; problem != "" {
			fmt.Fprintf(stderr, "warning: with this shell's environment it CANNOT START: %s\n"+
				"  a gateway started from here shows it down until that is fixed (one started with another\n"+
				"  environment may start it: toolgate status tells)\n", problem)
		}
	}
	return nil
}

// cannotStart says, by name, why each local server of cfg would not start
// with this process's environment (backend.CheckCommand).
func cannotStart(cfg *config.File) map[string]string {
	out := map[string]string{}
	for _, srv := range cfg.All() {
		if err := backend.CheckCommand(srv, os.Environ()); err != nil {
			out[srv.Name] = err.Error()
		}
	}
	return out
}

// warnDisabled says, after server was added, that it is disabled at run
// time in the data folder dataDir (state.json keeps the name of a server
// disabled before it was removed): a gateway does not start it until it
// is enabled.
func warnDisabled(stderr io.Writer, dataDir, server string) {
	file := live.StateFile(dataDir)
	if st, err := live.ReadState(file); err == nil && slices.Contains(st.Disabled, server) {
		fmt.Fprintf(stderr, "warning: %q is disabled at run time in the data folder (%s), so a gateway does not start it: toolgate servers enable %s starts it\n",
			server, file, server)
	}
}

// clearDisabled, after server was removed from the config, forgets that it
// was disabled at run time in the data folder dataDir, so that a server
// added under the name later starts. The gateways running on the folder
// that listed it as disabled drop it from their config first (else one
// could start it for the moment between the two changes); one that does
// not within restartWait leaves the name disabled, with how to clear it.
func clearDisabled(ctx context.Context, stderr io.Writer, dataDir, server string) error {
	file := live.StateFile(dataDir)
	st, err := live.ReadState(file)
	if err != nil || !slices.Contains(st.Disabled, server) {
		return err
	}
	for _, gw := range localGateways(ctx, dataDir, 5*time.Second) {
		if !awaitDropped(ctx, gw, server) {
			fmt.Fprintf(stderr, "warning: %q stays disabled at run time in %s: %s has not dropped it from its config within %s; toolgate servers enable %s clears it once it has\n",
				server, file, gw.name(), restartWait, server)
			return nil
		}
	}
	err = live.EditState(file, func(st live.State) (live.State, bool, error) {
		next, changed := st.With(server, false)
		return next, changed, nil
	})
	if err != nil {
		return err
	}
	fmt.Fprintf(stderr, "%q was disabled at run time (%s): cleared too, so a server added under that name later starts\n", server, file)
	return nil
}

// awaitDropped waits up to restartWait for the gateway gw to have no
// server named server, running or disabled; true when it has none, or
// stopped.
func awaitDropped(ctx context.Context, gw localGateway, server string) bool {
	has := func(rep gateway.StatusReport) bool {
		_, runs := backendNamed(rep, server)
		return runs || rep.Stats != nil && slices.Contains(rep.Stats.Disabled, server)
	}
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	deadline := time.Now().Add(restartWait)
	for now := gw; now.err != nil || has(now.rep); {
		if !time.Now().Before(deadline) {
			return false
		}
		select {
		case <-ctx.Done():
			return false
		case <-tick.C:
		}
		var gone bool
		if now, gone = askLocal(ctx, gw.sock, 5*time.Second); gone {
			return true
		}
	}
	return true
}

// pairs splits each "K<sep>V" of list into a map; flag and form name them
// in the error.
func pairs(list []string, sep, flag, form string) (map[string]string, error) {
	if len(list) == 0 {
		return nil, nil
	}
	m := map[string]string{}
	for _, kv := range list {
		k, v, ok := strings.Cut(kv, sep)
		if !ok || strings.TrimSpace(k) == "" {
			return nil, usageError{fmt.Errorf("%s %q: write %s", flag, kv, form)}
		}
		m[strings.TrimSpace(k)] = strings.TrimSpace(v)
	}
	return m, nil
}

func newServersRemoveCmd(g *globals) *cobra.Command {
	var path string
	cmd := &cobra.Command{
		Use:   "remove NAME --config FILE",
		Short: "Remove a server from a config file",
		Long: `Remove a server from a config file, atomically, keeping the file's other
keys. A running gateway watching the file stops it. A server disabled at
run time (servers disable) is enabled again in the data folder's
state.json, so that one added later under the name starts.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if path == "" {
				return usageError{errors.New("servers remove needs --config FILE: the config file to remove the server from")}
			}
			name := args[0]
			_, _, err := config.Edit([]string{path}, func(docs []config.Doc) ([]config.Doc, []int, error) {
				if f, _, _, err := config.ParseDocs(docs, nil); err == nil {
					if name, err = serverMeant(name, configServers(f)); err != nil {
						return nil, nil, err
					}
				}
				return config.RemoveServer(docs, name, nil)
			})
			if err != nil {
				return noServerUsage(err)
			}
			fmt.Fprintf(cmd.ErrOrStderr(), "removed server %q from %s\n", name, path)
			g.auditConfigChange(path, "servers remove", name)
			return clearDisabled(cmd.Context(), cmd.ErrOrStderr(), g.DataDir(), name)
		},
	}
	editConfigFlag(cmd, &path)
	return cmd
}

func newServersToggleCmd(g *globals, disable bool) *cobra.Command {
	var path string
	verb, short := "enable", "Enable a server disabled with `servers disable` (or toolgate__disable_server)"
	if disable {
		verb, short = "disable", "Disable a server: a running gateway stops it and hides its tools; kept across restarts"
	}
	cmd := &cobra.Command{
		Use:   verb + " NAME [--config FILE]",
		Short: short,
		Long: short + `.

The choice is kept in the data folder (state.json), not in the config file,
and applies to every gateway using that data folder: one that is running
applies it at once. The command waits up to 10s for each running gateway
that has the server to apply it, and says how the server stands there
(stopped; up with its tools; down with its error, which fails the command).
--config checks that NAME is one of its servers (and reads its dataDir);
without it, NAME must be a server of the gateways running on the data
folder (when one runs; when none does, NAME is taken as given, with a
warning that it could not be checked).`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return runServersToggle(cmd.Context(), cmd.ErrOrStderr(), g, path, args[0], disable)
		},
	}
	configFlag(cmd, &path)
	return cmd
}

func runServersToggle(ctx context.Context, stderr io.Writer, g *globals, path, name string, disable bool) error {
	cfg, err := dataFolderConfig(g, path)
	if err != nil {
		return err
	}
	if cfg == nil && name == config.BuiltinServer {
		cfg = &config.File{} // refused without a config
	}
	if cfg != nil {
		if name, err = serverMeant(name, append(configServers(cfg), config.BuiltinServer)); err != nil {
			return err
		}
		if err := live.CheckDisable(cfg, name); err != nil {
			return noServerUsage(err)
		}
	}
	file := live.StateFile(g.DataDir())
	verb := map[bool]string{true: "disabled", false: "enabled"}[disable]
	// The gateways running now, and whether each runs the server.
	gws := localGateways(ctx, g.DataDir(), 5*time.Second)
	if cfg == nil {
		// A server the state file has disabled may be enabled whoever
		// runs: it may be one of a config no gateway runs now.
		var disabled []string
		if !disable {
			st, err := live.ReadState(file)
			if err != nil {
				return err
			}
			disabled = st.Disabled
		}
		if name, err = checkRunning(stderr, gws, g.DataDir(), name, disabled...); err != nil {
			return err
		}
	}
	changed := false
	err = live.EditState(file, func(st live.State) (live.State, bool, error) {
		var next live.State
		next, changed = st.With(name, disable)
		return next, changed, nil
	})
	if err != nil {
		return err
	}
	if !changed {
		fmt.Fprintf(stderr, "server %q was %s already\n", name, verb)
		return nil
	}
	fmt.Fprintf(stderr, "server %q %s (%s)\n", name, verb, file)
	g.auditCommand("servers "+map[bool]string{true: "disable", false: "enable"}[disable], "", name, fmt.Sprintf("server %q", name))
	return awaitChange(ctx, stderr, gws, name, verb, func(rep gateway.StatusReport) func(*gateway.BackendStatus) bool {
		if disable {
			if _, runs := backendNamed(rep, name); !runs {
				return nil
			}
			return func(now *gateway.BackendStatus) bool { return now == nil }
		}
		// A gateway whose config has the server lists it as disabled.
		if rep.Stats == nil || !slices.Contains(rep.Stats.Disabled, name) {
			return nil
		}
		return func(now *gateway.BackendStatus) bool { return now != nil }
	})
}

// checkRunning checks NAME, for a command given no config, against the
// gateways running on the data folder, and returns the server it means
// (serverMeant, among theirs and known): when each of them answers and
// none has a server of that name (running, or disabled at run time), and
// it is not one of known, it is a usage error that says the servers they
// have. A typo was written to the state file, "disabled" or "restart
// requested", and the command ended well, while the server meant ran on.
// Without a gateway running, or with one that does not answer, there is
// nothing to check NAME against but known: a warning on stderr says so,
// and how to check it.
func checkRunning(stderr io.Writer, gws []localGateway, dataDir, name string, known ...string) (string, error) {
	unchecked := func(why string) (string, error) {
		if meant, err := serverMeant(name, known); err != nil || slices.Contains(known, meant) {
			return meant, err
		}
		fmt.Fprintf(stderr, "warning: could not check that %q is a server (%s): pass --config FILE (or set $TOOLGATE_CONFIG) to check the name against your config\n", name, why)
		return name, nil
	}
	if len(gws) == 0 {
		return unchecked("no --config given, and no gateway runs on the data folder " + dataDir)
	}
	var have []string
	for _, gw := range gws {
		if gw.err != nil {
			return unchecked("no --config given, and " + gw.name() + " on the data folder did not answer")
		}
		for _, b := range gw.rep.Backends {
			have = append(have, b.Name)
		}
		if gw.rep.Stats != nil {
			have = append(have, gw.rep.Stats.Disabled...)
		}
	}
	slices.Sort(have)
	have = slices.Compact(have)
	meant, err := serverMeant(name, slices.Concat(have, known))
	if err != nil || slices.Contains(have, meant) || slices.Contains(known, meant) {
		return meant, err
	}
	they := "they have no server"
	if len(have) > 0 {
		they = "they have " + strings.Join(have, ", ")
	}
	return name, usageError{config.NoServer("no gateway running on the data folder %s has a server %q: %s (one disabled in its config file is not listed; --config FILE checks NAME against a config instead)",
		dataDir, name, they)}
}

// serverMeant is the server of names that name means, read as the
// management tools read their "name" (catalog.ServerMeant): `servers
// disable MY-FS` is my-fs when no server is named so as written and only
// my-fs is named so in another case or with "_" for "-"; it answered that
// there was no server "MY-FS". A name that may mean several is a usage
// error that names them; one that means none is returned as written (the
// command's check says so, with the servers there are).
func serverMeant(name string, names []string) (string, error) {
	names = slices.Compact(slices.Sorted(slices.Values(names))) // the gateways' lists overlap
	meant, err := catalog.ServerMeant(name, names)
	if err != nil {
		return name, usageError{err}
	}
	return meant, nil
}

// configServers is the names of cfg's servers, those it disables too.
func configServers(cfg *config.File) []string { return slices.Sorted(maps.Keys(cfg.MCPServers)) }

// noServerUsage makes an error for a server name the config lacks
// (config.ErrNoServer) a usage error (exit status 2), as for every NAME a
// command is given that is not there; other errors stay as they are.
func noServerUsage(err error) error {
	if errors.Is(err, config.ErrNoServer) {
		return usageError{err}
	}
	return err
}

// dataFolderConfig reads the config at path for a command that works on
// its data folder (its dataDir applies), or nil for path "".
func dataFolderConfig(g *globals, path string) (*config.File, error) {
	if path == "" {
		return nil, nil
	}
	cfg, _, _, err := config.ReadFiles([]string{path}, nil)
	if err != nil {
		return nil, err
	}
	g.applyConfig(cfg.Toolgate)
	return cfg, nil
}

func newServersRestartCmd(g *globals) *cobra.Command {
	var path string
	cmd := &cobra.Command{
		Use:   "restart NAME [--config FILE]",
		Short: "Restart a server in every gateway running on the data folder",
		Long: `Restart a server in every gateway running on the data folder: each stops
it and starts it again with the same config entry (a stdio server gets a new
process), as toolgate__restart_server does. Use it when a server is stuck, or
stays down after its restart delays and what made it fail is mended.

The request goes through the data folder's state.json, which running
gateways watch; a gateway that starts later does not act on it (it starts
its servers anyway). The command waits up to 10s for each gateway running
on the data folder (toolgate status lists them) to restart it, and says
how the server stands in each once its start is over (up with its tools,
idle, still connecting, down with its error); it fails when one did not
restart it or the server is down after it. --config checks that NAME is one of
its servers (and reads its dataDir); without it, NAME must be a server of the
gateways running on the data folder (when one runs; when none does, NAME is
taken as given, with a warning that it could not be checked). A disabled
server does not run: enable it instead.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return runServersRestart(cmd.Context(), cmd.ErrOrStderr(), g, path, args[0])
		},
	}
	configFlag(cmd, &path)
	return cmd
}

// restartWait is how long `servers restart` waits for each gateway to
// count the restart (tests shorten it).
var restartWait = 10 * time.Second

func runServersRestart(ctx context.Context, stderr io.Writer, g *globals, path, name string) error {
	cfg, err := dataFolderConfig(g, path)
	if err != nil {
		return err
	}
	file := live.StateFile(g.DataDir())
	st, err := live.ReadState(file)
	if err != nil {
		return err
	}
	if cfg != nil {
		if name, err = serverMeant(name, append(configServers(cfg), config.BuiltinServer)); err != nil {
			return err
		}
	}
	if err := live.CheckRestart(cfg, st, name); err != nil {
		return noServerUsage(err)
	}
	// The gateways running now, and the restarts each counted so far.
	gws := localGateways(ctx, g.DataDir(), 5*time.Second)
	if cfg == nil {
		if name, err = checkRunning(stderr, gws, g.DataDir(), name); err != nil {
			return err
		}
	}
	err = live.EditState(file, func(st live.State) (live.State, bool, error) {
		if err := live.CheckRestart(cfg, st, name); err != nil { // again: it may have changed since
			return st, false, err
		}
		return st.WithRestart(name), true, nil
	})
	if err != nil {
		return noServerUsage(err)
	}
	g.auditCommand("servers restart", "", name, fmt.Sprintf("server %q", name))
	fmt.Fprintf(stderr, "restart of server %q requested (%s)\n", name, file)
	if len(gws) == 0 {
		fmt.Fprintf(stderr, "no gateway runs on the data folder %s: nothing to restart now (a gateway that starts starts it anyway)\n", g.DataDir())
		return nil
	}
	return awaitChange(ctx, stderr, gws, name, "restarted", func(rep gateway.StatusReport) func(*gateway.BackendStatus) bool {
		before, ok := backendNamed(rep, name)
		if !ok {
			return nil
		}
		return func(now *gateway.BackendStatus) bool { return now != nil && now.Restarts > before.Restarts }
	})
}

// awaitChange waits, up to restartWait for each gateway of gws, for it to
// apply a change of server's state that it was asked for through the
// state file (verb: "restarted", "enabled", "disabled"), and prints how
// the server stands in each once that is over: up with its tools, idle,
// still connecting, stopped, or down with its error. expect says, from a
// gateway's report before the change, what shows that it applied it: the
// server's entry now (nil: not run) passes; nil when the gateway has
// nothing to apply (it does not run the server). The error names the
// gateways that did not apply it, or where the server is down.
func awaitChange(ctx context.Context, stderr io.Writer, gws []localGateway, server, verb string, expect func(gateway.StatusReport) func(*gateway.BackendStatus) bool) error {
	var missed, down []string
	for _, gw := range gws {
		b, acted, why := awaitServer(ctx, gw, server, expect)
		switch {
		case why != "":
			fmt.Fprintf(stderr, "  %s: %s\n", gw.name(), why)
		case !acted:
			fmt.Fprintf(stderr, "  %s: not %s within %s\n", gw.name(), verb, restartWait)
			missed = append(missed, gw.name())
		case b == nil:
			fmt.Fprintf(stderr, "  %s: %s: stopped, its tools hidden\n", gw.name(), verb)
		case b.State == backend.StateDown:
			fmt.Fprintf(stderr, "  %s: %s, but DOWN: %s\n", gw.name(), verb, oneLine(b.Err, 300))
			down = append(down, gw.name())
		default:
			fmt.Fprintf(stderr, "  %s: %s: %s\n", gw.name(), verb, startedState(*b))
		}
	}
	switch {
	case len(missed) > 0:
		return fmt.Errorf("server %q was not %s by %s within %s: its log says why", server, verb, strings.Join(missed, ", "), restartWait)
	case len(down) > 0:
		return fmt.Errorf("server %q is down after it was %s by %s: fix what its error says (toolgate status shows it)", server, verb, strings.Join(down, ", "))
	}
	return nil
}

// startedState says how a server stands after its start: "up, 9 tools",
// "idle (lazy: …)", "still connecting …", "needs-login".
func startedState(b gateway.BackendStatus) string {
	switch b.State {
	case backend.StateUp:
		return "up, " + plural.Of(b.Tools, "tool")
	case backend.StateIdle:
		return "idle (lazy: it starts at its next call)"
	case backend.StateConnecting:
		return "still connecting after " + restartWait.String() + " (toolgate status tells when it is up)"
	}
	return string(b.State)
}

// awaitServer waits up to restartWait for the gateway gw to apply a change
// of server (expect, see awaitChange) and, when it runs the server then,
// for its start to end (up, down, idle …; still connecting at the end of
// the wait). b is the server's last entry (nil: not run); acted says the
// change was seen; why says why the gateway has nothing to apply (it does
// not run the server, stopped, does not answer) or applies it later (a
// cold start building its first index).
func awaitServer(ctx context.Context, gw localGateway, server string, expect func(gateway.StatusReport) func(*gateway.BackendStatus) bool) (b *gateway.BackendStatus, acted bool, why string) {
	if gw.err != nil {
		return nil, false, fmt.Sprintf("does not answer (%v)", gw.err)
	}
	applied := expect(gw.rep)
	if applied == nil {
		return nil, false, fmt.Sprintf("does not run %s", server)
	}
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	deadline := time.Now().Add(restartWait)
	building := gw.rep.Stats
	for time.Now().Before(deadline) {
		now, gone := askLocal(ctx, gw.sock, 5*time.Second)
		if gone {
			if acted {
				return b, true, ""
			}
			return nil, false, "stopped meanwhile"
		}
		if now.err == nil {
			building = now.rep.Stats
			var cur *gateway.BackendStatus
			if e, ok := backendNamed(now.rep, server); ok {
				cur = &e
			}
			if applied(cur) {
				b, acted = cur, true
				if cur == nil || cur.State != backend.StateConnecting {
					return b, true, ""
				}
			}
		}
		select {
		case <-ctx.Done():
			return b, acted, ""
		case <-tick.C:
		}
	}
	if st := building; !acted && st != nil && st.Building {
		// A cold start still building its first index reads the state
		// file once the index is served: the request is not lost, and
		// "not restarted within 10s" read as if it were.
		return b, false, fmt.Sprintf("not yet: it is building its first index (%d of %d tools embedded) and applies the request once the index is served (toolgate status tells when)", st.BuildingTools, st.BuildingTotal)
	}
	return b, acted, ""
}

// backendNamed is the backend named server in rep.
func backendNamed(rep gateway.StatusReport, server string) (gateway.BackendStatus, bool) {
	for _, b := range rep.Backends {
		if b.Name == server {
			return b, true
		}
	}
	return gateway.BackendStatus{}, false
}
