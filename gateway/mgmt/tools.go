package mgmt

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolgate/toolgate/gateway/backend"
	"github.com/toolgate/toolgate/gateway/config"
	"github.com/toolgate/toolgate/gateway/keys"
	"github.com/toolgate/toolgate/gateway/limit"
	"github.com/toolgate/toolgate/gateway/live"
	"github.com/toolgate/toolgate/gateway/policy"
	"github.com/toolgate/toolgate/index/catalog"
	"github.com/toolgate/toolgate/internal/mask"
	"github.com/toolgate/toolgate/internal/oneline"
	"github.com/toolgate/toolgate/internal/plural"
	"github.com/toolgate/toolgate/internal/shellword"
)

// Arguments of the tools. Their fields and jsonschema descriptions are the
// tools' input schemas.
type (
	noArgs     struct{}
	serverArgs struct {
		Name string `json:"name" jsonschema:"the server's name, as toolgate__list_servers shows it (e.g. \"github\")"`
	}
	profileArgs struct {
		Name string `json:"name" jsonschema:"the profile to activate, as toolgate__list_profiles shows it; \"\" goes back to every server"`
	}
	addArgs struct {
		Name    string            `json:"name" jsonschema:"the new server's name: letters, digits, _ and -; not \"toolgate\", the name of these management tools' server"`
		Command string            `json:"command,omitempty" jsonschema:"for a local server: the program to start (it speaks MCP on stdin/stdout), e.g. \"npx\""`
		Args    []string          `json:"args,omitempty" jsonschema:"the program's arguments"`
		Env     map[string]string `json:"env,omitempty" jsonschema:"environment variables for the program; ${VAR} takes one from the gateway's environment"`
		Cwd     string            `json:"cwd,omitempty" jsonschema:"the program's working directory"`
		URL     string            `json:"url,omitempty" jsonschema:"for a remote server: its streamable HTTP (or SSE) endpoint, e.g. \"https://example.com/mcp\""`
		Type    string            `json:"type,omitempty" jsonschema:"stdio, http or sse; by default command means stdio and url means http"`
		Headers map[string]string `json:"headers,omitempty" jsonschema:"HTTP headers for a remote server, e.g. {\"Authorization\": \"Bearer ${TOKEN}\"}"`
		TLS     *tlsArgs          `json:"tls,omitempty" jsonschema:"for an https server whose certificate a private CA signed, or that asks for a client certificate: PEM files on the gateway's machine (a relative path is read from the config file's folder)"`
		// The keys every kind of server shares. The durations and
		// maxResultBytes go into the entry as given (config.Setting), so
		// that the config's checks say what is wrong with them.
		Description    string      `json:"description,omitempty" jsonschema:"optional: what the server offers (filled in by addServerSchema)"`
		Language       string      `json:"language,omitempty" jsonschema:"optional: the language the server's tools are named and described in (filled in by addServerSchema)"`
		MaxResultBytes *int        `json:"maxResultBytes,omitempty" jsonschema:"optional: the most bytes of text of one of this server's results that execute_tool hands back; a longer one is trimmed, with a note. Left out, the config's toolgate.maxResultBytes applies"`
		ConnectTimeout durationArg `json:"connectTimeout,omitempty" jsonschema:"optional: how long the server may take to start and list its tools, e.g. \"2m\" for a Docker image pulled at first start; a duration such as \"30s\" or \"1m30s\", or a number of seconds; left out, the config's toolgate.connectTimeout applies"`
		CallTimeout    durationArg `json:"callTimeout,omitempty" jsonschema:"optional: how long one call of the server's tools may run before it is cancelled; a duration such as \"55s\" or \"5m\", or a number of seconds; left out, the config's toolgate.callTimeout applies"`
		KeepAlive      durationArg `json:"keepAlive,omitempty" jsonschema:"optional, remote servers (url) only: how often the session is pinged while up, so that a dropped connection is seen; a duration or a number of seconds; left out, the config's toolgate.keepAlive applies"`
		Lazy           bool        `json:"lazy,omitempty" jsonschema:"optional: true starts the server at the first execute_tool of one of its tools, not with the gateway (a server added now still starts once, to list its tools for search)"`
		IdleTimeout    durationArg `json:"idleTimeout,omitempty" jsonschema:"optional, with lazy only: stop the server after this long without calls, e.g. \"10m\" (a duration, or a number of seconds); left out, it keeps running once started"`
	}
	// durationArg is a duration as the config file writes it: a string
	// ("30s", "1m30s") or a number of seconds, kept as given.
	durationArg json.RawMessage
	tlsArgs     struct {
		CA   string `json:"ca,omitempty" jsonschema:"the certificate authorities to trust for the server's certificate, besides the system's"`
		Cert string `json:"cert,omitempty" jsonschema:"a client certificate for a server that asks for one (mutual TLS), with key"`
		Key  string `json:"key,omitempty" jsonschema:"the client certificate's private key"`
	}
)

func (s *Server) definitions() []definition {
	ro := &mcp.ToolAnnotations{ReadOnlyHint: true, OpenWorldHint: boolPtr(false)}
	change := &mcp.ToolAnnotations{DestructiveHint: boolPtr(false), IdempotentHint: true, OpenWorldHint: boolPtr(false)}
	destroy := &mcp.ToolAnnotations{DestructiveHint: boolPtr(true), OpenWorldHint: boolPtr(false)}
	return []definition{
		define("list_servers", "List MCP servers and their health",
			"List every MCP server connected to this gateway and whether it is healthy: its state (up, connecting, down, idle, disabled), "+
				"transport (stdio, http, sse), number of tools, restarts and last error, and the profiles that include it. "+
				"Use it to see which servers are connected and which are down or failing.",
			ro, s.listServers),
		define("server_status", "Status and logs of one MCP server",
			"Show one MCP server in detail: state, transport, command or URL, tools, restarts, process id, protocol, its current and last error, "+
				"and its recent stderr log lines (secrets masked). Use it to find out why a server is down, failing or slow.",
			ro, s.serverStatus),
		define("restart_server", "Restart an MCP server",
			"Restart one MCP server: stop its process or connection and start it again with the same config. "+
				"Use it when a server is stuck, down or misbehaving.",
			&mcp.ToolAnnotations{DestructiveHint: boolPtr(false), OpenWorldHint: boolPtr(false)}, s.restartServer),
		define("disable_server", "Turn off an MCP server",
			"Disable (turn off) an MCP server: stop it and hide its tools from search_tools and execute_tool until it is enabled again. "+
				"The choice is kept across gateway restarts in the gateway's data folder; the config file is not changed.",
			change, s.setDisabled(true)),
		define("enable_server", "Turn on an MCP server",
			"Enable (turn on) an MCP server that was disabled with toolgate__disable_server: start it again and show its tools.",
			change, s.setDisabled(false)),
		define("list_profiles", "List tool profiles",
			"List the profiles of this gateway: named sets of servers and tools (allow and deny globs) that a client can be limited to, "+
				"and which profile is active for you.",
			ro, s.listProfiles),
		define("activate_profile", "Switch to a tool profile",
			"Activate a profile for this session only: from then on search_tools and execute_tool show just that profile's tools. "+
				"Works for a client on stdio; over HTTP, connect to /profiles/NAME/mcp instead. An empty name goes back to every server.",
			&mcp.ToolAnnotations{DestructiveHint: boolPtr(false), IdempotentHint: true, OpenWorldHint: boolPtr(false)}, s.activateProfile),
		addServerSchema(define("add_server", "Add an MCP server to the config",
			"Add a new MCP server to the gateway's config file and start it: a local program (command, args, env) or a remote server (url, headers, and tls for a private CA or a client certificate), "+
				"optionally with a description, the language its tools are written in, a bound on its results' size (maxResultBytes), its own timeouts, or a lazy start. "+
				"Refused unless the config sets toolgate.management.allowConfigChanges and the client is on stdio or uses an admin API key, "+
				"because a server's command can run any program.",
			&mcp.ToolAnnotations{DestructiveHint: boolPtr(false), OpenWorldHint: boolPtr(true)}, s.addServer)),
		define("remove_server", "Remove an MCP server from the config",
			"Remove an MCP server from the gateway's config file and stop it. "+
				"Refused unless the config sets toolgate.management.allowConfigChanges and the client is on stdio or uses an admin API key.",
			destroy, s.removeServer),
	}
}

// UnmarshalJSON keeps the value as given (a string or a number, as the
// tool's schema says), for the config's check.
func (d *durationArg) UnmarshalJSON(b []byte) error {
	*d = append((*d)[:0], b...)
	return nil
}

// addServerSchema writes into add_server's schema the facts of the config
// that its "description" and "language" are checked against: the longest
// description (config.MaxDescription) and the codes a language may be
// (catalog.LanguageCodes), so that a model picks one rather than guessing
// "German" or "de-DE".
func addServerSchema(d definition) definition {
	// Codes alone, no language names: the schema is indexed with the
	// tool, and "German", "Danish" … or "words" made add_server the first
	// hit of a query that says them.
	var codes []string
	for _, c := range catalog.LanguageCodes() {
		codes = append(codes, strconv.Quote(c))
	}
	props := d.tool.InputSchema.(*jsonschema.Schema).Properties
	props["language"].Description = "optional: the language the server names and describes its tools in, as an ISO 639-1 code: " + strings.Join(codes, ", ") +
		". search_tools then matches them, and queries, by that language's grammar as well as English's. Leave it out for English"
	props["description"].Description = fmt.Sprintf("optional: what the server offers, briefly, as plain text (at most %d characters), "+
		"e.g. \"invoices, customers and bookings of our accounting\"; search_tools names the server with it", config.MaxDescription)
	return d
}

// ServerInfo is one server in toolgate__list_servers and
// toolgate__server_status.
type ServerInfo struct {
	Name string `json:"name"`
	// State is the pool's (up, connecting, down, idle, needs-login), or
	// "disabled" (toolgate__disable_server) or "disabled in config".
	State     string   `json:"state"`
	Transport string   `json:"transport"`
	Tools     int      `json:"tools"`
	Restarts  int      `json:"restarts"`
	Error     string   `json:"error,omitempty"`
	LastError string   `json:"lastError,omitempty"`
	Profiles  []string `json:"profiles"` // the profiles that show it
	// server_status only:
	Since    time.Time `json:"since,omitzero"`
	PID      int       `json:"pid,omitempty"`
	Protocol string    `json:"protocol,omitempty"`
	InFlight int       `json:"inFlight,omitempty"`
	Target   string    `json:"target,omitempty"` // command line or URL
	Stderr   []string  `json:"stderr,omitempty"`
}

// ServerList is toolgate__list_servers' structuredContent.
type ServerList struct {
	Servers []ServerInfo `json:"servers"`
}

// infos describes the configured servers, in name order, as c may see
// them: a scoped caller (policy.Caller.Scoped) sees no paths on the
// gateway's machine, as in GET /status (backend.Status.ForKey), so no
// command line or URL and no stderr lines (serverStatus) either. sight is
// what c sees of the catalog (nil for a caller that manages all).
func (s *Server) infos(c *policy.Caller, sight *policy.Sight) []ServerInfo {
	cfg := s.rt.Config()
	pol := s.rt.Policy()
	status := map[string]backend.Status{}
	for _, st := range s.pool.Status() {
		status[st.Name] = st
	}
	showing := s.showing(pol.Profiles())
	var out []ServerInfo
	for _, sv := range cfg.All() {
		info := ServerInfo{Name: sv.Name, Transport: sv.Type, Profiles: showing.of(sv.Name)}
		switch st, ok := status[sv.Name]; {
		case sv.Disabled:
			info.State = "disabled in config"
		case pol.Disabled().Has(sv.Name):
			// Its restarts so far, as toolgate_backend_restarts_total
			// counts on from them once it is enabled (it read 0).
			info.State, info.Restarts = "disabled", s.pool.PastRestarts(sv.Name)
		case ok:
			if c.Scoped() {
				st = st.ForKey()
			}
			info.State, info.Tools, info.Restarts = string(st.State), st.Tools, st.Restarts
			if sight != nil && c.Scoped() {
				// A key that is not admin is told the tools it sees
				// of each server, as GET /status tells it.
				info.Tools = sight.Tools(sv.Name)
			}
			st = st.Once()
			info.Error, info.LastError = st.Err, st.LastErr
			info.Since, info.PID, info.Protocol, info.InFlight = st.Since, st.PID, st.Protocol, st.InFlight
		default:
			info.State = "starting"
		}
		switch {
		case c.Scoped(): // no command line or URL
		case sv.Type == config.TypeStdio:
			info.Target = strings.Join(append([]string{sv.Command}, sv.Args...), " ")
		default:
			info.Target = sv.URL
		}
		// A URL's ?api_key=…, a token in the args: masked as in the logs.
		info.Target = mask.New(backend.Secrets(sv)).String(info.Target)
		out = append(out, info)
	}
	return out
}

// shownBy is which profiles show each server of a catalog (profilesShowing),
// for one catalog generation and one profiles rule (both immutable).
type shownBy struct {
	gen      uint64
	profiles *policy.Profiles
	byServer map[string][]string // the servers with a tool catalogued
}

// of names the profiles that show server (a slice of the caller's own).
func (sh *shownBy) of(server string) []string {
	if names, ok := sh.byServer[server]; ok {
		return slices.Clone(names)
	}
	return profilesShowing(sh.profiles, server, nil)
}

// showing is which profiles show each server of the catalog served, kept
// while the catalog (its generation: policy.CatalogNumberer) and the
// profiles are the same: each list_servers grouped the whole catalog by
// server and asked each profile of each tool (0.15–0.2 s at 100 servers,
// ten profiles and 50,000 tools).
func (s *Server) showing(profiles *policy.Profiles) *shownBy {
	var gen uint64
	if num, ok := s.rt.(policy.CatalogNumberer); ok {
		gen = num.CatalogGeneration() // before the look, as policy.Set.Sight
	}
	if sh := s.shown.Load(); gen != 0 && sh != nil && sh.gen == gen && sh.profiles == profiles {
		return sh
	}
	byServer := map[string][]catalog.Tool{}
	for _, id := range s.rt.IDs() {
		if t, ok := s.rt.Tool(id); ok {
			byServer[t.Server] = append(byServer[t.Server], t)
		}
	}
	sh := &shownBy{gen: gen, profiles: profiles, byServer: make(map[string][]string, len(byServer))}
	for server, tools := range byServer {
		sh.byServer[server] = profilesShowing(profiles, server, tools)
	}
	if gen != 0 {
		s.shown.Store(sh)
	}
	return sh
}

// profilesShowing names the profiles that show one of tools, server's
// catalogued tools, by all their rules (servers, tools.allow, tools.deny,
// readOnly); a server with none catalogued is judged by a tool of any
// name (policy.AnyTool), as policy.Set.MayManage judges it.
func profilesShowing(profiles *policy.Profiles, server string, tools []catalog.Tool) []string {
	if len(tools) == 0 {
		tools = []catalog.Tool{policy.AnyTool(server)}
	}
	out := []string{}
	for _, name := range profiles.Names() {
		p, _ := profiles.Get(name)
		if slices.ContainsFunc(tools, func(t catalog.Tool) bool { return profiles.Shows(p, t) }) {
			out = append(out, name)
		}
	}
	return out
}

// visibleInfos are the servers c may manage (policy.Set.MayManage), in
// name order: every server for a caller that manages all. One pass over
// the catalog (policy.Sight) tells them all; MayManage of each server read
// it all again.
// Each names only the profiles c may see (profileShown).
func (s *Server) visibleInfos(c *policy.Caller) []ServerInfo {
	if c.ManagesAll() {
		return s.infos(c, nil)
	}
	sight := s.rt.Policy().Sight(c, s.rt)
	infos := slices.DeleteFunc(s.infos(c, sight), func(in ServerInfo) bool { return !sight.MayManage(in.Name) })
	for i := range infos {
		infos[i].Profiles = slices.DeleteFunc(infos[i].Profiles, func(p string) bool { return !profileShown(c, p) })
	}
	return infos
}

// profileShown reports whether c may see profile name: a caller with an
// API key that does not manage all learns nothing of what lies outside
// its scope, so of the profiles it sees only its key's and the one in
// effect; any other caller sees every profile.
func profileShown(c *policy.Caller, name string) bool {
	if !c.Scoped() {
		return true
	}
	return name == c.Key.Profile || name == c.ProfileName()
}

func (s *Server) listServers(_ context.Context, c *policy.Caller, _ noArgs) *mcp.CallToolResult {
	infos := s.visibleInfos(c)
	var b strings.Builder
	fmt.Fprintf(&b, "%s behind this gateway:\n", plural.Of(len(infos), "MCP server"))
	up := 0
	for i := range infos {
		in := &infos[i]
		if in.State == string(backend.StateUp) || in.State == string(backend.StateIdle) {
			up++
		}
		fmt.Fprintf(&b, "- %s: %s (%s, %s, %s)", in.Name, in.State, in.Transport, plural.Of(in.Tools, "tool"), plural.Of(in.Restarts, "restart"))
		if in.Error != "" {
			fmt.Fprintf(&b, "; error: %s", oneline.Cut(in.Error, 200))
		} else if in.LastError != "" {
			fmt.Fprintf(&b, "; last error: %s", oneline.Cut(in.LastError, 200))
		}
		if len(in.Profiles) > 0 {
			fmt.Fprintf(&b, "; profiles: %s", strings.Join(in.Profiles, ", "))
		}
		b.WriteString("\n")
		// The list is the overview: server_status has the details.
		in.Since, in.PID, in.Protocol, in.InFlight, in.Target = time.Time{}, 0, "", 0, ""
	}
	fmt.Fprintf(&b, "%d of %d up (or idle until first used).", up, len(infos))
	if policy.MayAskStatus(s.rt.Policy(), c) {
		b.WriteString(" toolgate__server_status shows one server's details and recent log lines.")
	}
	return result(ServerList{Servers: infos}, "%s", b.String())
}

// find is the server named name as c may manage it, or the answer for a
// server that does not exist, which names only the servers c may manage.
func (s *Server) find(c *policy.Caller, name string) (ServerInfo, *mcp.CallToolResult) {
	infos := s.visibleInfos(c)
	for _, in := range infos {
		if in.Name == name {
			return in, nil
		}
	}
	return ServerInfo{}, noServer(name, infos)
}

// noServer is the answer for a server name that is not among infos (the
// servers the caller may manage).
func noServer(name string, infos []ServerInfo) *mcp.CallToolResult {
	return toolError("there is no server named %q (servers: %s)", oneline.Echo(name), serverNames(infos))
}

// serverNames is the names of infos, comma-separated.
func serverNames(infos []ServerInfo) string {
	names := make([]string, len(infos))
	for i, in := range infos {
		names[i] = in.Name
	}
	return strings.Join(names, ", ")
}

// namesServer reports whether the management tool acts on the server its
// "name" argument names, and so only on one its caller may manage
// (remove_server, only for callers that manage all, is not one).
func namesServer(tool string) bool {
	switch tool {
	case "server_status", "restart_server", "disable_server", "enable_server":
		return true
	}
	return false
}

// mayManage answers a call of tool on a server c may not manage (see
// policy.Set.MayManage), before anything is read or changed: as for a
// server that does not exist (a result naming the servers c may manage),
// or, when a rule of c's refuses the server by name, with a deniedError
// in that rule's words, which read the same whether the server exists or
// not (the gateway audits it as denied). Both nil: the call goes on.
func (s *Server) mayManage(c *policy.Caller, tool string, args map[string]any) (*mcp.CallToolResult, error) {
	if c.ManagesAll() {
		return nil, nil
	}
	name, _ := args["name"].(string)
	if name == "" || name == Name {
		return nil, nil // the handler's own answer names no server c may not manage
	}
	ok, why := s.rt.Policy().MayManage(c, s.rt, name)
	if _, configured := s.rt.Config().MCPServers[name]; ok && configured {
		return nil, nil
	}
	if why != "" {
		return nil, &deniedError{fmt.Sprintf("%s__%s is refused for server %q: %s. %s", Name, tool, oneline.Echo(name), why, s.managedHint(c))}
	}
	return noServer(name, s.visibleInfos(c)), nil
}

// managedHint says where c learns the servers it may manage: list_servers
// when c may run it, else their names (a key allowed restart_server alone
// was pointed to list_servers, which its globs refuse).
func (s *Server) managedHint(c *policy.Caller) string {
	if s.rt.Policy().Sees(c, catalog.Tool{Server: Name, Name: "list_servers"}) {
		return Name + "__list_servers lists the servers this client may manage."
	}
	infos := s.visibleInfos(c)
	if len(infos) == 0 {
		return "This client may manage no server."
	}
	return "The servers this client may manage: " + serverNames(infos) + "."
}

func (s *Server) serverStatus(_ context.Context, c *policy.Caller, a serverArgs) *mcp.CallToolResult {
	in, bad := s.find(c, a.Name)
	if bad != nil {
		return bad
	}
	if !c.Scoped() {
		in.Stderr = s.pool.Stderr(a.Name)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%s: %s (%s)", in.Name, in.State, in.Transport)
	if in.Target != "" {
		fmt.Fprintf(&b, " %s", in.Target)
	}
	b.WriteString("\n")
	fmt.Fprintf(&b, "tools %d, restarts %d, calls in flight %d", in.Tools, in.Restarts, in.InFlight)
	if in.PID != 0 {
		fmt.Fprintf(&b, ", pid %d", in.PID)
	}
	if in.Protocol != "" {
		fmt.Fprintf(&b, ", protocol %s", in.Protocol)
	}
	if !in.Since.IsZero() {
		fmt.Fprintf(&b, ", %s since %s", in.State, in.Since.Format(time.RFC3339))
	}
	b.WriteString("\n")
	if in.Error != "" {
		fmt.Fprintf(&b, "error: %s\n", in.Error)
	}
	if in.LastError != "" {
		fmt.Fprintf(&b, "last error: %s\n", in.LastError)
	}
	if len(in.Stderr) > 0 {
		fmt.Fprintf(&b, "recent stderr lines:\n  %s\n", strings.Join(in.Stderr, "\n  "))
	} else if c.Scoped() {
		fmt.Fprintf(&b, "command line and stderr lines: %s\n", backend.HiddenFromKey)
	} else if in.Transport == config.TypeStdio {
		b.WriteString("no stderr lines yet\n")
	}
	return result(in, "%s", strings.TrimRight(b.String(), "\n"))
}

// startWait is how long restart_server waits for the server's new start
// to end (up, down, idle, needing a login) before it answers.
var startWait = 10 * time.Second

func (s *Server) restartServer(ctx context.Context, c *policy.Caller, a serverArgs) *mcp.CallToolResult {
	in, bad := s.find(c, a.Name)
	if bad != nil {
		return bad
	}
	if strings.HasPrefix(in.State, "disabled") {
		return toolError("server %q is %s: enable it instead (toolgate__enable_server starts it)", a.Name, in.State)
	}
	if err := s.pool.Restart(a.Name); err != nil {
		if errors.Is(err, backend.ErrUnknownServer) && s.rt.Policy().Disabled().Has(a.Name) {
			return disabledMeanwhile("restart", a.Name) // the pool let it go before the call reached it
		}
		return toolError("restart %q: %v", a.Name, err)
	}
	s.log.Info("server restarted by a management call", "server", a.Name)
	return s.started(ctx, c, a.Name, map[string]any{"server": a.Name, "restarted": true}, "restarted", func(st backend.Status) bool { return st.Restarts > in.Restarts })
}

// started answers a call that started server (verb: "restarted",
// "enabled") once that start is over, up to startWait: up with its tools,
// idle, still connecting, or down (an error result with the server's
// error). begun tells the pool's status of the new start from the one
// before it. out is the structuredContent, which gains "state".
func (s *Server) started(ctx context.Context, c *policy.Caller, server string, out map[string]any, verb string, begun func(backend.Status) bool) *mcp.CallToolResult {
	s.awaitStart(ctx, server, begun)
	now, bad := s.find(c, server) // the error masked as server_status shows it
	if bad != nil {
		return bad // removed meanwhile
	}
	out["state"] = now.State
	switch now.State {
	case "disabled":
		return disabledMeanwhile(strings.TrimSuffix(verb, "ed"), server)
	case string(backend.StateUp):
		return result(out, "Server %q is %s and up, with %s.", server, verb, plural.Of(now.Tools, "tool"))
	case string(backend.StateDown):
		out["error"] = now.Error
		return &mcp.CallToolResult{IsError: true, StructuredContent: out, Content: []mcp.Content{&mcp.TextContent{Text: fmt.Sprintf(
			"Server %q was %s but is DOWN: %s\n%s.", server, verb, now.Error, policy.StatusHint(s.rt.Policy(), c, server))}}}
	case string(backend.StateConnecting):
		return result(out, "Server %q is %s and still connecting after %s. %s.", server, verb, startWait, policy.StatusHint(s.rt.Policy(), c, server))
	}
	return result(out, "Server %q is %s: %s.", server, verb, now.State)
}

// disabledMeanwhile is the answer of a call that started server (verb:
// "restart", "enable") when server was disabled at run time while the
// call waited (for its slot behind another's cold start, or for the new
// start): it does not run (live.Disabled). It answered "no such server",
// or `Server "x" is restarted: disabled.` as if all went well.
func disabledMeanwhile(verb, server string) *mcp.CallToolResult {
	return toolError("%s %q: it was disabled while this call waited: %v", verb, server, live.Disabled(server, Name+"__enable_server"))
}

// awaitStart waits, up to startWait or ctx, for the pool to run server in
// a start that begun tells from the one before, past connecting, or until
// server is disabled at run time meanwhile (it waited the whole startWait).
func (s *Server) awaitStart(ctx context.Context, server string, begun func(backend.Status) bool) {
	ctx, cancel := context.WithTimeout(ctx, startWait)
	defer cancel()
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		if s.rt.Policy().Disabled().Has(server) {
			return
		}
		for _, st := range s.pool.Status() {
			if st.Name == server && begun(st) && st.State != backend.StateConnecting {
				return
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

func (s *Server) setDisabled(disabled bool) func(context.Context, *policy.Caller, serverArgs) *mcp.CallToolResult {
	return func(ctx context.Context, c *policy.Caller, a serverArgs) *mcp.CallToolResult {
		by := Name + "__enable_server"
		if disabled {
			by = Name + "__disable_server"
		}
		changed, err := s.rt.SetDisabled(live.ChangedBy(ctx, by), a.Name, disabled)
		if err != nil {
			return toolError("%v", err)
		}
		out := map[string]any{"server": a.Name, "disabled": disabled, "changed": changed}
		switch {
		case disabled && changed:
			s.log.Info("server disabled by a management call", "server", a.Name, "caller", c.String())
			return result(out, "Server %q is disabled: it is stopped and its tools are hidden from search_tools and execute_tool. "+
				"It stays disabled across restarts until toolgate__enable_server turns it back on.", a.Name)
		case disabled:
			return result(out, "Server %q was already disabled.", a.Name)
		case changed:
			s.log.Info("server enabled by a management call", "server", a.Name, "caller", c.String())
			return s.started(ctx, c, a.Name, out, "enabled", func(backend.Status) bool { return true })
		}
		return result(out, "Server %q was not disabled.", a.Name)
	}
}

// ProfileInfo is one profile in toolgate__list_profiles.
type ProfileInfo struct {
	Name    string   `json:"name"`
	Servers []string `json:"servers,omitempty"` // none = every server
	Allow   []string `json:"allow,omitempty"`
	Deny    []string `json:"deny,omitempty"`
	// ReadOnly: only the tools that declare readOnlyHint: true.
	ReadOnly bool `json:"readOnly,omitempty"`
	Active   bool `json:"active"`
}

// ProfileList is toolgate__list_profiles' structuredContent.
type ProfileList struct {
	Profiles []ProfileInfo `json:"profiles"`
	Active   string        `json:"active"` // "" = none
}

func (s *Server) listProfiles(_ context.Context, c *policy.Caller, _ noArgs) *mcp.CallToolResult {
	ps := s.rt.Policy().Profiles()
	// The profile in effect: the session's or the route's, else the one
	// the caller's API key is limited to (both apply when both are set).
	active, keyProfile := c.ProfileName(), ""
	if c != nil && c.Key != nil {
		keyProfile = c.Key.Profile
	}
	if active == "" {
		active = keyProfile
	}
	out := ProfileList{Profiles: []ProfileInfo{}, Active: active}
	var b strings.Builder
	if len(ps.Names()) == 0 {
		b.WriteString("No profiles are configured (toolgate.profiles in the config file defines them).")
	}
	// A key that does not manage all learns nothing of what lies outside
	// its scope: of the profiles, only its own (and the one in effect).
	hidden := 0
	for _, name := range ps.Names() {
		if !profileShown(c, name) {
			hidden++
			continue
		}
		p, _ := ps.Get(name)
		out.Profiles = append(out.Profiles, ProfileInfo{Name: name, Servers: p.Servers, Allow: p.Tools.Allow, Deny: p.Tools.Deny, ReadOnly: p.ReadOnly, Active: name == active || name == keyProfile})
		fmt.Fprintf(&b, "- %s: %s", name, describeProfile(p))
		switch {
		case name == keyProfile:
			fmt.Fprintf(&b, " (active: the API key %q is limited to it)", c.Key.Name)
		case name == active:
			b.WriteString(" (active)")
		}
		b.WriteString("\n")
	}
	switch {
	case active == "":
		b.WriteString("No profile is active: every enabled server's tools are shown.")
	case keyProfile != "" && !slices.Contains(ps.Names(), keyProfile):
		fmt.Fprintf(&b, "No tool is shown: %s.", keys.ProfileGone(c.Key.Name, keyProfile))
	}
	if hidden > 0 {
		fmt.Fprintf(&b, "\nThe other profiles are not shown to the API key %q, which is limited in scope.", c.Key.Name)
	}
	return result(out, "%s", strings.TrimRight(b.String(), "\n"))
}

func describeProfile(p config.Profile) string {
	parts := []string{"servers: all"}
	if p.Servers != nil {
		parts[0] = "servers: " + strings.Join(p.Servers, ", ")
	}
	if p.Tools.Allow != nil {
		parts = append(parts, "allow: "+strings.Join(p.Tools.Allow, ", "))
	}
	if p.Tools.Deny != nil {
		parts = append(parts, "deny: "+strings.Join(p.Tools.Deny, ", "))
	}
	if p.ReadOnly {
		parts = append(parts, "read-only tools only (readOnlyHint: true)")
	}
	return strings.Join(parts, "; ")
}

// serveCommand is the command that serves this gateway with /mcp limited
// to profile ("" = NAME): the one this gateway would run
// (Options.ServeCommand), so that it can be pasted; it read `toolgate
// serve --profile NAME`, which serve refuses without --config. A key that
// is not admin learns no path of the gateway's machine: it reads the
// generic command.
func (s *Server) serveCommand(c *policy.Caller, profile string) string {
	if profile == "" {
		profile = "NAME"
	}
	if s.opts.ServeCommand == nil || c.Scoped() {
		return "toolgate serve --config FILE --profile " + shellword.Join(profile)
	}
	return s.opts.ServeCommand(profile)
}

func (s *Server) activateProfile(_ context.Context, c *policy.Caller, a profileArgs) *mcp.CallToolResult {
	ps := s.rt.Policy().Profiles()
	p, ok := ps.Get(a.Name)
	if a.Name != "" && !ok {
		names := strings.Join(ps.Names(), ", ")
		if names == "" {
			names = "none are configured"
		}
		return toolError("there is no profile named %q (profiles: %s)", a.Name, names)
	}
	if c == nil || c.Session == nil {
		// The endpoint at the address the client used, when the request
		// said it; a placeholder otherwise.
		origin, name := "http://HOST:PORT", "NAME"
		if c != nil && c.Origin != "" {
			origin = c.Origin
		}
		if a.Name != "" {
			name = url.PathEscape(a.Name)
		}
		return toolError("toolgate__activate_profile changes the profile of a session, and this client has none: over HTTP every request "+
			"stands alone (the gateway serves streamable HTTP without sessions). Connect to the profile's own endpoint instead, "+
			"%s/profiles/%s/mcp, or restart the gateway with /mcp limited to the profile: `%s`.", origin, name, s.serveCommand(c, a.Name))
	}
	if err := c.Session.Activate(a.Name); err != nil {
		return toolError("%v", err)
	}
	s.log.Info("profile activated for a session", "profile", a.Name, "caller", c.String())
	if a.Name == "" {
		return result(map[string]any{"active": ""}, "No profile is active for this session now: every enabled server's tools are shown.")
	}
	return result(map[string]any{"active": a.Name},
		"Profile %q is active for this session: search_tools and execute_tool now show only its tools (%s).", a.Name, describeProfile(p))
}

// Gate is the in-flight gate (limit.Options.Gate) of a call: a call that
// waits for a server's start, toolgate__restart_server or enable_server
// (up to 10 s), takes a slot of the management calls on that server,
// "toolgate/NAME", not of the built-in server's: two restarts of servers
// slow to start, at limits.maxInFlight 2, held up the operator's third
// restart and every caller's other management calls until the queue
// timeout refused them as busy. Calls on one server stay capped; any
// other call takes its server's slots ("": the default).
func Gate(server, tool string, args map[string]any) string {
	if server != Name || tool != "restart_server" && tool != "enable_server" {
		return ""
	}
	if name, ok := args["name"].(string); ok && name != "" {
		return Name + limit.GateSep + name
	}
	return ""
}
