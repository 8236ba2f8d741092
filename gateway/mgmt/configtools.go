package mgmt

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolgate/toolgate/gateway/audit"
	"github.com/toolgate/toolgate/gateway/config"
	"github.com/toolgate/toolgate/gateway/policy"
	"github.com/toolgate/toolgate/index/catalog"
	"github.com/toolgate/toolgate/internal/storage"
)

// ChangesConfig reports whether t is a management tool that writes the
// config file (add_server, remove_server). Besides the refusal here, the
// API key scope rule hides such tools from a key that is not an admin key
// (keys.NewScope), so its search never shows a tool it cannot run.
func ChangesConfig(t catalog.Tool) bool {
	return t.Server == Name && changesConfig(t.Name)
}

func changesConfig(tool string) bool { return tool == "add_server" || tool == "remove_server" }

// deniedError is a config change refused by policy: config changes turned
// off, or a caller that may not make them. It wraps policy.ErrDenied, so
// the gateway answers it as an isError with its text and counts, shows and
// audits the call as denied, as it does a call the policy's rules refuse.
type deniedError struct{ msg string }

func (e *deniedError) Error() string { return e.msg }
func (e *deniedError) Unwrap() error { return policy.ErrDenied }

// mayChange returns the refusal of a config change by c (a deniedError),
// or nil. The refusal comes before anything is read, written or started;
// the gateway logs it with the other denied calls ("tool call denied").
func (s *Server) mayChange(c *policy.Caller, tool string) error {
	if !s.rt.Config().Toolgate.Management.AllowConfigChanges {
		return &deniedError{fmt.Sprintf("%s__%s is refused: changing the gateway's config from a client is turned off. A client that can add a server "+
			"can make the gateway run any program, so this needs \"toolgate\": {\"management\": {\"allowConfigChanges\": true}} in the config file, "+
			"and a client on stdio or with an admin API key. Ask the user to edit the config file or to run `toolgate servers add|remove`.", Name, tool)}
	}
	if !c.MayChangeConfig() {
		return &deniedError{fmt.Sprintf("%s__%s is refused for this client (%s): config changes are allowed only for a client on stdio or one with an admin API key. "+
			"Ask the user to edit the config file or to run `toolgate servers add|remove`.", Name, tool, c.String())}
	}
	return nil
}

// noConfigFile is the error of a config change when the gateway has no
// config file to write, or nil.
func (s *Server) noConfigFile(tool string) *mcp.CallToolResult {
	if len(s.opts.ConfigPaths) == 0 {
		return toolError("%s__%s: the gateway was started without a config file to write", Name, tool)
	}
	return nil
}

// edit changes the config files (config.Edit: no other edit interleaves)
// and reloads: the change is in effect when it returns.
func (s *Server) edit(ctx context.Context, tool string, change func([]config.Doc) ([]config.Doc, []int, error)) ([]config.Doc, []int, error) {
	docs, changed, err := config.Edit(s.opts.ConfigPaths, change)
	if err != nil {
		return nil, nil, err
	}
	if r := s.rt.Reload(ctx, Name+"__"+tool); r != nil && r.Error != "" {
		return nil, nil, fmt.Errorf("the config file was written but the gateway rejected it: %s", r.Error)
	}
	return docs, changed, nil
}

// editFailed answers a config change that failed. One whose config file
// its file system refused (full, read-only, not this user's) says so and
// the fix, as `toolgate servers add` and toolgate__disable_server do: it
// passed the bare write error on (`add_server: write …: no space left on
// device`), which names no fix and leaves an agent to guess whether the
// server was added.
func editFailed(tool, server, verb string, err error) *mcp.CallToolResult {
	if fix := storage.WriteFix(err); fix != "" {
		return toolError("%s: server %q is not %s: the config file cannot be written (%v); fix: %s, then call %s__%s again", tool, server, verb, err, fix, Name, tool)
	}
	return toolError("%s: %v", tool, err)
}

func (s *Server) addServer(ctx context.Context, c *policy.Caller, a addArgs) *mcp.CallToolResult {
	if refused := s.noConfigFile("add_server"); refused != nil {
		return refused
	}
	sv := config.Server{Name: a.Name, Type: a.Type, Command: a.Command, Args: a.Args, Env: a.Env, Cwd: a.Cwd, URL: a.URL, Headers: a.Headers,
		Description: a.Description, Language: a.Language, Lazy: a.Lazy}
	if t := a.TLS; t != nil {
		sv.TLS = &config.TLS{CA: t.CA, Cert: t.Cert, Key: t.Key}
	}
	settings := []config.Setting{
		{Key: "connectTimeout", Value: json.RawMessage(a.ConnectTimeout)},
		{Key: "callTimeout", Value: json.RawMessage(a.CallTimeout)},
		{Key: "keepAlive", Value: json.RawMessage(a.KeepAlive)},
		{Key: "idleTimeout", Value: json.RawMessage(a.IdleTimeout)},
	}
	if a.MaxResultBytes != nil {
		settings = append(settings, config.Setting{Key: "maxResultBytes", Value: json.RawMessage(strconv.Itoa(*a.MaxResultBytes))})
	}
	docs, changed, err := s.edit(ctx, "add_server", func(docs []config.Doc) ([]config.Doc, []int, error) {
		docs, i, err := config.AddServer(docs, sv, nil, settings...)
		return docs, []int{i}, err
	})
	if err != nil {
		return editFailed("add_server", a.Name, "added", err)
	}
	i := changed[0]
	s.log.Info("server added to the config by a management call", "server", a.Name, "file", docs[i].Path, "caller", c.String())
	audit.Note(ctx, a.Name, fmt.Sprintf("server %q in %s", a.Name, docs[i].Path))
	if err := s.pool.CheckCommand(a.Name); err != nil {
		// Kept in the config: the server starts by itself once its
		// command is installed (a down server's command is looked at
		// every 10 s), as the same entry would after a restart.
		fix := "install the command (the gateway starts the server within 10 s of it appearing), or remove_server and add_server it with a command this gateway finds (an absolute path, or \"env\": {\"PATH\": …})"
		if len(s.rt.Config().MCPServers[a.Name].Unset) > 0 {
			fix = "see above, or remove_server and add_server it with the values written out"
		}
		return result(map[string]any{"server": a.Name, "file": docs[i].Path, "cannotStart": err.Error()},
			"Server %q is added to %s but CANNOT START: %v. It stays down until that is fixed: %s.", a.Name, docs[i].Path, err, fix)
	}
	return result(map[string]any{"server": a.Name, "file": docs[i].Path},
		"Server %q is added to %s and starting; its tools are searchable once it has listed them. %s.", a.Name, docs[i].Path, policy.StatusHint(s.rt.Policy(), c, a.Name))
}

func (s *Server) removeServer(ctx context.Context, c *policy.Caller, a serverArgs) *mcp.CallToolResult {
	if refused := s.noConfigFile("remove_server"); refused != nil {
		return refused
	}
	docs, changed, err := s.edit(ctx, "remove_server", func(docs []config.Doc) ([]config.Doc, []int, error) {
		return config.RemoveServer(docs, a.Name, nil)
	})
	if err != nil {
		return editFailed("remove_server", a.Name, "removed", err)
	}
	var files []string
	for _, i := range changed {
		files = append(files, docs[i].Path)
	}
	s.log.Info("server removed from the config by a management call", "server", a.Name, "files", files, "caller", c.String())
	audit.Note(ctx, a.Name, fmt.Sprintf("server %q in %s", a.Name, strings.Join(files, " and ")))
	// Disabled at run time, it is enabled: a server added later under the
	// name starts (toolgate servers remove does the same).
	if _, err := s.rt.SetDisabled(ctx, a.Name, false); err != nil {
		s.log.Warn("removed server stays disabled at run time", "server", a.Name, "err", err, "fix", "toolgate servers enable "+a.Name)
	}
	return result(map[string]any{"server": a.Name, "files": files},
		"Server %q is removed from %s and stopped; its tools are gone from search_tools.", a.Name, strings.Join(files, " and "))
}
