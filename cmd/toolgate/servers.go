package main

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/url"
	"slices"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/toolgate/toolgate/gateway"
	"github.com/toolgate/toolgate/gateway/backend"
	"github.com/toolgate/toolgate/gateway/config"
	"github.com/toolgate/toolgate/gateway/live"
	"github.com/toolgate/toolgate/internal/mask"
	"github.com/toolgate/toolgate/internal/plural"
	"github.com/toolgate/toolgate/internal/shellword"
)

func init() { register(newServersCmd) }

func newServersCmd(g *globals) *cobra.Command {
	cmd := newServersListCmd(g, "servers --config FILE [--json]")
	cmd.Short = "List, add, remove, enable, disable or restart the servers of a config"
	// What a newcomer types to check a config file: `unknown command
	// "check"` then suggests this.
	cmd.SuggestFor = []string{"check", "validate"}
	cmd.Long += `

With a verb, it changes them:
  toolgate servers list --config FILE [--json]         the listing above (the default)
  toolgate servers add NAME --config FILE -- COMMAND [ARG...]   a local (stdio) server
  toolgate servers add NAME --config FILE --url URL    a remote (http, or --type sse) server
  toolgate servers remove NAME --config FILE
  toolgate servers disable NAME [--config FILE]        stop it and hide its tools, also in a running gateway
  toolgate servers enable NAME [--config FILE]
  toolgate servers restart NAME [--config FILE]        stop it and start it again, in a running gateway

add and remove edit the config file atomically, keeping its other keys; a
running gateway watching it applies the change. enable and disable keep the
choice in the data folder, not in the config; restart asks the gateways running
on the data folder through it.`
	cmd.AddCommand(newServersListCmd(g, "list --config FILE [--json]"), newServersAddCmd(g), newServersRemoveCmd(g),
		newServersToggleCmd(g, true), newServersToggleCmd(g, false), newServersRestartCmd(g))
	return cmd
}

// newServersListCmd is `toolgate servers` and `toolgate servers list`.
func newServersListCmd(g *globals, use string) *cobra.Command {
	var (
		paths  []string
		asJSON bool
	)
	cmd := &cobra.Command{
		Use:   use,
		Short: "Check a config file and list its servers",
		Long: `Check a config file (Claude-compatible "mcpServers" JSON plus the optional
"toolgate" section) and list each server: name, transport, command and
arguments or URL, the names of its env variables and headers, and whether it
is disabled (in the file, or at run time: toolgate servers disable). Values
of env and headers are never printed, and ${VAR} references are shown as
written, not expanded. A URL's password and query values are masked.

A bad file prints every problem found (server, field, value, fix) and exits 1.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if len(paths) == 0 {
				return usageError{errors.New("servers needs --config FILE (an mcpServers JSON file, e.g. examples/toolgate.json)")}
			}
			return runServers(cmd.OutOrStdout(), g, paths, asJSON)
		},
	}
	configsFlag(cmd, &paths)
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON instead of a table")
	return cmd
}

// serverInfo is one line of `toolgate servers` (also its --json shape).
type serverInfo struct {
	Name       string   `json:"name"`
	Type       string   `json:"type"`
	Command    string   `json:"command,omitempty"`
	Args       []string `json:"args,omitempty"`
	Cwd        string   `json:"cwd,omitempty"`
	URL        string   `json:"url,omitempty"`
	EnvKeys    []string `json:"envKeys,omitempty"`
	HeaderKeys []string `json:"headerKeys,omitempty"`
	// TLS is a remote server's "tls" entry: the paths of its files.
	TLS      *config.TLS `json:"tls,omitempty"`
	Disabled bool        `json:"disabled"`
	// DisabledAtRunTime: turned off with `toolgate servers disable` or
	// toolgate__disable_server (kept in the data folder, not the config).
	DisabledAtRunTime bool `json:"disabledAtRunTime,omitempty"`
	// CannotStart says why the server would not start with this shell's
	// environment (backend.CheckCommand: a command not in PATH or not
	// executable, no cwd, a variable of its entry not set).
	CannotStart string `json:"cannotStart,omitempty"`
	// Unexpanded are its env and header values that are a variable
	// written without braces ("$TOKEN"), passed as written
	// (config.Server.BareReferences).
	Unexpanded     []string `json:"unexpanded,omitempty"`
	ConnectTimeout string   `json:"connectTimeout"`
	CallTimeout    string   `json:"callTimeout"`
	// KeepAlive is how often a remote server's session is pinged while up
	// (absent for a stdio server).
	KeepAlive string `json:"keepAlive,omitempty"`
	// MaxResultBytes bounds the text of an execute_tool result of its
	// tools (its own, else the toolgate section's, else the gateway's
	// default).
	MaxResultBytes int `json:"maxResultBytes"`
}

type serversReport struct {
	Config  string           `json:"config"`
	Valid   bool             `json:"valid"`
	Servers []serverInfo     `json:"servers,omitempty"`
	Errors  []serversProblem `json:"errors,omitempty"`
	// CannotStart is, beside the errors of an invalid config, why each
	// of its valid servers would not start with this shell's
	// environment (a valid config says it per server instead).
	CannotStart map[string]string `json:"cannotStart,omitempty"`
	// Unexpanded is, beside the errors of an invalid config, each server's
	// env and header values that are a variable written without braces
	// (a valid config says it per server instead).
	Unexpanded map[string][]string `json:"unexpanded,omitempty"`
	Settings   *config.Settings    `json:"toolgate,omitempty"`
}

type serversProblem struct {
	Server  string `json:"server,omitempty"`
	Field   string `json:"field,omitempty"`
	Where   string `json:"where,omitempty"`
	Message string `json:"message"`
}

// runServers lists the servers of the config files at paths, read as one
// as serve reads them (later over earlier).
func runServers(w io.Writer, g *globals, paths []string, asJSON bool) error {
	docs, err := config.ReadDocs(paths)
	if err != nil {
		return err
	}
	path := strings.Join(paths, " + ")
	// Validate with the real environment, then describe the file as written
	// (data: the files merged, as ParseDocs read them) so that expanded
	// secrets never reach the output.
	loaded, data, conflicts, loadErr := config.ParseDocs(docs, nil)
	if loadErr != nil {
		// The servers that are valid are still checked for what they
		// lack to start, as import does: else one that cannot start
		// was said only once the invalid one was fixed.
		var down map[string]string
		if cfg := validServers(data, paths[len(paths)-1]); cfg != nil {
			g.applyConfig(cfg.Toolgate) // its dataDir keeps the servers disabled at run time
			state, err := live.ReadState(live.StateFile(g.DataDir()))
			if err != nil {
				return err
			}
			down = wouldStartDown(cfg, state.Disabled)
		}
		if asJSON {
			rep := serversReport{Config: path, Errors: problems(loadErr), CannotStart: down, Unexpanded: unbraced(data, paths[len(paths)-1])}
			if err := writeJSON(w, rep); err != nil {
				return err
			}
			return loadErr
		}
		var notes []string
		if len(down) > 0 {
			notes = append(notes, cannotStartLines(down))
		}
		if note := unbracedNote(data, paths[len(paths)-1]); note != "" {
			notes = append(notes, note)
		}
		if len(notes) > 0 {
			return fmt.Errorf("%w\n\n%s", loadErr, strings.Join(notes, "\n\n"))
		}
		return loadErr
	}
	f, err := config.ParseUnexpanded(data, paths[len(paths)-1])
	if err != nil {
		return err // cannot happen after Parse succeeded, but never hide it
	}
	g.applyConfig(f.Toolgate)
	state, err := live.ReadState(live.StateFile(g.DataDir()))
	if err != nil {
		return err
	}
	bad := cannotStart(loaded)
	var infos []serverInfo
	for _, s := range f.All() {
		info := describe(s)
		info.DisabledAtRunTime = slices.Contains(state.Disabled, s.Name)
		info.CannotStart = bad[s.Name]
		info.Unexpanded = s.BareReferences()
		infos = append(infos, info)
	}
	if asJSON {
		return writeJSON(w, serversReport{Config: path, Valid: true, Servers: infos, Settings: &f.Toolgate})
	}
	enabled := 0
	for _, s := range infos {
		if !s.Disabled && !s.DisabledAtRunTime {
			enabled++
		}
	}
	if len(infos) == 0 {
		_, err := fmt.Fprintf(w, "%s: valid, no servers yet: add one with %s\n", path, serversAddLine(paths[len(paths)-1]))
		return err
	}
	fmt.Fprintf(w, "%s: valid, %s (%d enabled)\n", path, plural.Of(len(infos), "server"), enabled)
	for _, c := range conflicts {
		fmt.Fprintf(w, "note: %s\n", c)
	}
	fmt.Fprintln(w)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tTYPE\tSTATUS\tCOMMAND / URL\tENV / HEADERS")
	for _, s := range infos {
		status := "enabled"
		switch {
		case s.Disabled:
			status = "disabled"
		case s.DisabledAtRunTime:
			status = "disabled (toolgate servers enable " + s.Name + ")"
		case s.CannotStart != "":
			status = "CANNOT START (below)"
		}
		target := s.URL
		if s.Type == config.TypeStdio {
			target = shellword.Join(append([]string{s.Command}, s.Args...)...)
		}
		var keys []string
		if len(s.EnvKeys) > 0 {
			keys = append(keys, "env: "+strings.Join(s.EnvKeys, ", "))
		}
		if len(s.HeaderKeys) > 0 {
			keys = append(keys, "headers: "+strings.Join(s.HeaderKeys, ", "))
		}
		if t := s.TLS; t != nil {
			var parts []string
			if t.CA != "" {
				parts = append(parts, "ca")
			}
			if t.Cert != "" {
				parts = append(parts, "client cert")
			}
			keys = append(keys, "tls: "+strings.Join(parts, ", "))
		}
		if len(keys) == 0 {
			keys = []string{"-"}
		}
		// A config imported from a repository's .mcp.json may hold anything.
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", s.Name, s.Type, status, escapeUnsafe(target), escapeUnsafe(strings.Join(keys, "; ")))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if down := wouldStartDown(loaded, state.Disabled); len(down) > 0 {
		fmt.Fprintf(w, "\n%s\n", cannotStartLines(down))
	}
	if note := unbracedNote(data, paths[len(paths)-1]); note != "" {
		fmt.Fprintf(w, "\n%s\n", note)
	}
	return nil
}

// unbracedNote names the env and header values of the servers in data that
// are a variable written without braces (config.Server.BareReferences), for
// toolgate servers (of a valid file or not) and import to say alike; "" when
// none. data is read as written, never expanded: no secret is shown.
func unbracedNote(data []byte, path string) string {
	bare := unbraced(data, path)
	var lines []string
	for _, name := range slices.Sorted(maps.Keys(bare)) {
		for _, b := range bare[name] {
			lines = append(lines, "  "+name+": "+b)
		}
	}
	if len(lines) == 0 {
		return ""
	}
	return "variables written without braces (a shell's way) reach the server as written:\n" + escapeUnsafe(strings.Join(lines, "\n"))
}

// unbraced is unbracedNote's list by server, for --json; nil when none.
func unbraced(data []byte, path string) map[string][]string {
	f, _ := config.ParseUnexpanded(data, path) // what else is wrong is said apart
	if f == nil {
		return nil
	}
	var bare map[string][]string
	for _, s := range f.All() {
		if b := s.BareReferences(); len(b) > 0 {
			if bare == nil {
				bare = map[string][]string{}
			}
			bare[s.Name] = b
		}
	}
	return bare
}

func describe(s config.Server) serverInfo {
	connect, call := backend.Timeouts(s, nil) // what the pool will use
	var keepAlive string
	if d := backend.KeepAlive(s, nil); d > 0 {
		keepAlive = d.String()
	}
	return serverInfo{
		Name:           s.Name,
		Type:           s.Type,
		Command:        s.Command,
		Args:           maskedArgs(s.Args),
		Cwd:            s.Cwd,
		URL:            maskURL(s.URL),
		EnvKeys:        sortedKeys(s.Env),
		HeaderKeys:     sortedKeys(s.Headers),
		TLS:            s.TLS,
		Disabled:       s.Disabled,
		ConnectTimeout: connect.String(),
		CallTimeout:    call.String(),
		KeepAlive:      keepAlive,
		MaxResultBytes: cmp.Or(s.MaxResultBytes, gateway.DefaultMaxResultBytes),
	}
}

// maskedArgs is args with the values of flags named like secrets as
// xxxxx (mask.Args), as maskURL shows a URL's.
func maskedArgs(args []string) []string {
	masked, _ := mask.Args(args, "xxxxx")
	return masked
}

// maskURL hides a URL's password, a user name given without one (a token:
// https://TOKEN@host/…), query values and key-like path segments
// (mask.KeyLike), which often carry API keys; a ${VAR} stays, as written.
func maskURL(raw string) string {
	u, err := url.Parse(raw)
	if err != nil || raw == "" {
		return raw
	}
	if _, has := u.User.Password(); has {
		u.User = url.UserPassword(u.User.Username(), "xxxxx")
	} else if u.User != nil && !strings.Contains(u.User.Username(), "${") {
		u.User = url.User("xxxxx")
	}
	if segs := strings.Split(u.Path, "/"); slices.ContainsFunc(segs, mask.KeyLike) {
		for i, seg := range segs {
			if mask.KeyLike(seg) {
				segs[i] = "xxxxx"
			}
		}
		u.Path, u.RawPath = strings.Join(segs, "/"), ""
	}
	if u.RawQuery != "" {
		q := u.Query()
		for k := range q {
			q[k] = []string{"xxxxx"}
		}
		u.RawQuery = q.Encode()
	}
	// url.URL.String escapes the braces of ${VAR}; put them back.
	return strings.NewReplacer("%7B", "{", "%7D", "}").Replace(u.String())
}

func sortedKeys(m map[string]string) []string {
	if len(m) == 0 {
		return nil
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// wouldStartDown is cannotStart of the servers of cfg a gateway would
// start: not disabled in the file, nor at run time (disabled, the data
// folder's state.json's).
func wouldStartDown(cfg *config.File, disabled []string) map[string]string {
	down := cannotStart(cfg)
	maps.DeleteFunc(down, func(name, _ string) bool {
		return cfg.MCPServers[name].Disabled || slices.Contains(disabled, name)
	})
	return down
}

// cannotStartLines says which servers cannot start and why (bad, by
// name), for the list of a valid config and the errors of an invalid one.
func cannotStartLines(bad map[string]string) string {
	lines := []string{"cannot start with this shell's environment (a gateway started with another environment may):"}
	for _, name := range slices.Sorted(maps.Keys(bad)) {
		lines = append(lines, "  "+name+": "+bad[name])
	}
	return strings.Join(lines, "\n")
}

func problems(err error) []serversProblem {
	var ce *config.Error
	if !errors.As(err, &ce) {
		return []serversProblem{{Message: err.Error()}}
	}
	out := make([]serversProblem, len(ce.Errs))
	for i, fe := range ce.Errs {
		out[i] = serversProblem{Server: fe.Server, Field: fe.Field, Where: fe.Where(), Message: fe.Msg}
	}
	return out
}

func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// serversAddLine is how to add a server to the config file (servers add
// writes the last --config file).
func serversAddLine(file string) string {
	return "toolgate servers add NAME --config " + shellword.Join(file) + " -- COMMAND [ARG...] (or --url URL)"
}

// addServerFix is how to add a server to a config with none yet, as serve
// logs it and the console's backends table says it: file is the last
// --config file (the one servers add and toolgate__add_server write).
func addServerFix(file string) string {
	return `add one to "mcpServers" in ` + file + ` (the gateway applies the saved file), with ` + serversAddLine(file) +
		`, or from an MCP client with toolgate__add_server (once the config says "toolgate": {"management": {"allowConfigChanges": true}})`
}

// checkProfile is nil when cfg's toolgate.profiles has name, else the usage
// error of --profile (serve, search, keys create): the profiles there are,
// or, when cfg defines none, where a profile is defined (it read
// "profiles: " and nothing). where names the config ("the config", a file).
func checkProfile(cfg *config.File, name, where string) error {
	if _, ok := cfg.Toolgate.Profiles[name]; ok {
		return nil
	}
	if len(cfg.Toolgate.Profiles) == 0 {
		return usageError{fmt.Errorf(`--profile %q: %s defines no profiles: add one to it, "toolgate": {"profiles": {%q: {"servers": ["…"]}}} (README: Profiles), or leave --profile out`, name, where, name)}
	}
	return usageError{fmt.Errorf("--profile %q: %s has no such profile in toolgate.profiles (profiles: %s)", name, where, strings.Join(slices.Sorted(maps.Keys(cfg.Toolgate.Profiles)), ", "))}
}

// noServersNote is what the console's backends table says when no server
// runs and none is disabled at run time (console.Options.NoServers): the
// config has none, and how to add one; or each of its servers is disabled
// in it. "" while some server of cfg is to run (it shows once started).
func noServersNote(cfg *config.File, file string) string {
	switch {
	case len(cfg.MCPServers) == 0:
		return "No servers are configured: " + addServerFix(file) + "."
	case len(cfg.Servers()) == 0:
		return `No server runs: each one in the config is "disabled": true there.`
	}
	return ""
}
