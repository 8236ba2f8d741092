// Package mgmt owns the server built into the gateway, named "toolgate"
// (config.BuiltinServer): the management tools an agent reaches the way it
// reaches any backend's tools, through search_tools and execute_tool
// (never a third tool in tools/list). They list the servers and their
// health, show one server with its recent stderr lines, restart, disable
// and enable servers, list and activate profiles, and add and remove
// servers in the config file.
//
// A Server stands in front of the backend pool as the gateway's Caller:
// calls of toolgate__* tools run here, in the gateway's process, with the
// caller of the request in their context (the policy.Caller decides what
// a session may change and whether the config may be written); every
// other call goes on to the pool. The runtime loop catalogues Tools like a
// backend's list (live.Options.Builtin).
//
// Writing the config is refused by default: a client that can add a stdio
// server can make the gateway run any program. add_server and
// remove_server work only with toolgate.management.allowConfigChanges set,
// and only for a caller over stdio or with an admin API key; they write the
// file atomically, keeping the user's other keys, and apply it through the
// runtime loop's reload.
//
// A caller that is neither on stdio nor an admin manages only the servers
// whose tools it may see (policy.Set.MayManage): list_servers lists only
// those, and server_status, restart_server, disable_server and
// enable_server answer for any other server as for one that does not
// exist, or refuse it in the words of the key's scope, which read the same
// whether the server exists or not.
package mgmt

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"maps"
	"reflect"
	"sync/atomic"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolgate/toolgate/gateway/audit"
	"github.com/toolgate/toolgate/gateway/backend"
	"github.com/toolgate/toolgate/gateway/config"
	"github.com/toolgate/toolgate/gateway/live"
	"github.com/toolgate/toolgate/gateway/policy"
	"github.com/toolgate/toolgate/index/catalog"
	"github.com/toolgate/toolgate/internal/jsonwords"
)

// Name is the built-in server's name: its tools are toolgate__NAME.
const Name = config.BuiltinServer

// Pool is what the management tools need of the backend pool; every call
// that is not theirs goes on to it.
type Pool interface {
	CallTool(ctx context.Context, server, tool string, args map[string]any) (*mcp.CallToolResult, error)
	Status() []backend.Status
	// PastRestarts is the restarts of a server disabled at run time,
	// which it counts on from when enabled.
	PastRestarts(server string) int
	Stderr(server string) []string
	Restart(server string) error
	Unavailable(server string, forKey bool) string
	Describe(server string) string
	// CheckCommand says why a local server's command would not start.
	CheckCommand(server string) error
}

var _ Pool = (*backend.Pool)(nil)

// Runtime is what they need of the runtime loop.
type Runtime interface {
	Config() *config.File
	Policy() *policy.Set
	// Tool and IDs are the catalog, hidden tools included: which servers
	// a caller may manage depends on the tools it may see.
	policy.Tools
	SetDisabled(ctx context.Context, server string, disabled bool) (bool, error)
	Reload(ctx context.Context, trigger string) *live.Reload
}

var _ Runtime = (*live.Loop)(nil)

// Options configure a Server. A nil *Options means defaults.
type Options struct {
	Logger *slog.Logger // nil = discard
	// ConfigPaths are the config files the gateway reads, in order (the
	// last one wins): add_server writes to the last, remove_server to each
	// that defines the server. None = the config cannot be written.
	ConfigPaths []string
	// ServeCommand is the command that serves this gateway's config on its
	// address and data folder with /mcp limited to profile, for
	// toolgate__activate_profile to quote to a client without a session
	// (one it can paste); nil = the generic `toolgate serve --config FILE
	// --profile NAME`.
	ServeCommand func(profile string) string
}

// Server is the built-in management server in front of the pool.
type Server struct {
	pool   Pool
	rt     Runtime
	opts   Options
	log    *slog.Logger
	byName map[string]handler
	shown  atomic.Pointer[shownBy] // showing's, for the catalog served last
}

type handler func(ctx context.Context, c *policy.Caller, args json.RawMessage) *mcp.CallToolResult

// New returns the management server over pool and rt.
func New(pool Pool, rt Runtime, opts *Options) *Server {
	s := &Server{pool: pool, rt: rt, byName: map[string]handler{}}
	if opts != nil {
		s.opts = *opts
	}
	s.log = s.opts.Logger
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	for _, t := range s.definitions() {
		s.byName[t.tool.Name] = t.run
	}
	return s
}

// Tools are the management tools, as a backend lists them (names without
// the "toolgate__" prefix): what the runtime loop catalogues for the
// built-in server (live.Options.Builtin), before a Server exists.
func Tools() []*mcp.Tool {
	var out []*mcp.Tool
	for _, d := range (&Server{}).definitions() {
		out = append(out, d.tool)
	}
	return out
}

// CallTool runs tool of the built-in server, or passes the call to the
// pool for any other server. A management tool's failure is a result with
// IsError (what went wrong and what to do); a config change refused by
// policy is an error wrapping policy.ErrDenied (the gateway answers it
// with its text and counts it as denied).
func (s *Server) CallTool(ctx context.Context, server, tool string, args map[string]any) (*mcp.CallToolResult, error) {
	if server != Name {
		return s.pool.CallTool(ctx, server, tool, args)
	}
	h, ok := s.byName[tool]
	if !ok {
		return toolError("there is no management tool %q: call search_tools to find one", tool), nil
	}
	// The audit record says which server (profile) the call acts on, or
	// was refused on, as `toolgate servers disable` and the console's
	// records do: it keeps the arguments only as a hash. add_server and
	// remove_server say it again with the files they wrote.
	note := func() {
		if name, ok := args["name"].(string); ok && name != "" {
			switch {
			case namesServer(tool) || changesConfig(tool):
				audit.Note(ctx, name, fmt.Sprintf("server %q", name))
			case tool == "activate_profile":
				audit.Note(ctx, "", fmt.Sprintf("profile %q", name))
			}
		}
	}
	note()
	if changesConfig(tool) {
		if err := s.mayChange(policy.CallerFrom(ctx), tool); err != nil {
			return nil, err
		}
	}
	if namesServer(tool) || tool == "remove_server" {
		var bad *mcp.CallToolResult
		if args, bad = s.serverMeant(policy.CallerFrom(ctx), args); bad != nil {
			return bad, nil
		}
	}
	note() // the name as meant
	if namesServer(tool) {
		if res, err := s.mayManage(policy.CallerFrom(ctx), tool, args); res != nil || err != nil {
			return res, err
		}
	}
	raw, err := json.Marshal(args)
	if err != nil {
		return toolError("%s%s: the arguments cannot be read: %v", Name+"__", tool, err), nil
	}
	return h(ctx, policy.CallerFrom(ctx), raw), nil
}

// serverMeant is args with its "name" the server it means of those c may
// manage, as execute_tool and search_tools read a server's name
// (catalog.ServerMeant): "MY-FS" or "my_fs" is my-fs, when no server is
// named so as written and one only is named so in another case or with
// "_" for "-"; they answered that there was no server "MY-FS". A name
// that may mean several is answered with all of them; one that means none
// goes on as written (the handler's answer lists the servers). Only the
// servers c may manage are looked among, so the answer names no other.
func (s *Server) serverMeant(c *policy.Caller, args map[string]any) (map[string]any, *mcp.CallToolResult) {
	name, _ := args["name"].(string)
	if name == "" || name == Name {
		return args, nil
	}
	infos := s.visibleInfos(c)
	names := make([]string, len(infos))
	for i, in := range infos {
		names[i] = in.Name
	}
	meant, err := catalog.ServerMeant(name, names)
	if err != nil {
		return args, toolError("%v.", err)
	}
	if meant != name {
		args = maps.Clone(args) // the caller's, which the audit log records as written
		args["name"] = meant
	}
	return args, nil
}

// Describe is the pool's, and for the built-in server what its tools do
// (search_tools' description names the servers with it).
func (s *Server) Describe(server string) string {
	if server == Name {
		return "this gateway's own tools: list its servers and their health, restart, enable or disable one, switch profiles"
	}
	return s.pool.Describe(server)
}

// Unavailable is the pool's, except that the built-in server is always
// available.
func (s *Server) Unavailable(server string, forKey bool) string {
	if server == Name {
		return ""
	}
	return s.pool.Unavailable(server, forKey)
}

// definition is one management tool: its definition for the catalog and
// its handler.
type definition struct {
	tool *mcp.Tool
	run  handler
}

// argSchemas are the schemas of the argument types that JSON Schema's
// inference does not know: a durationArg is a string or a number.
var argSchemas = &jsonschema.ForOptions{TypeSchemas: map[reflect.Type]*jsonschema.Schema{
	reflect.TypeFor[durationArg](): {Types: []string{"string", "number"}},
}}

// define makes a tool whose input schema is inferred from A's fields (and
// their jsonschema descriptions), whose handler gets the decoded
// arguments.
func define[A any](name, title, desc string, annotations *mcp.ToolAnnotations, run func(context.Context, *policy.Caller, A) *mcp.CallToolResult) definition {
	schema, err := jsonschema.For[A](argSchemas)
	if err != nil {
		panic(fmt.Sprintf("mgmt: schema of %s: %v", name, err)) // a programming error, caught by every test
	}
	return definition{
		tool: &mcp.Tool{Name: name, Title: title, Description: desc, InputSchema: schema, Annotations: annotations},
		run: func(ctx context.Context, c *policy.Caller, raw json.RawMessage) *mcp.CallToolResult {
			var a A
			if err := json.Unmarshal(raw, &a); err != nil {
				return toolError("%s__%s: the arguments do not fit its inputSchema: %v", Name, name, jsonwords.Explain(err, &a))
			}
			return run(ctx, c, a)
		},
	}
}

func toolError(format string, args ...any) *mcp.CallToolResult {
	return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: fmt.Sprintf(format, args...)}}}
}

// result is a tool result: a text for the model and the same facts as
// structuredContent.
func result(structured any, format string, args ...any) *mcp.CallToolResult {
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: fmt.Sprintf(format, args...)}}, StructuredContent: structured}
}

func boolPtr(b bool) *bool { return &b }
