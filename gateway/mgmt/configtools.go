package mgmt

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolgate/toolgate/gateway/config"
	"github.com/toolgate/toolgate/gateway/policy"
)

// mayWrite returns the refusal of a config change by c, or nil. The
// refusal comes before anything is read, written or started.
func (s *Server) mayWrite(c *policy.Caller, tool string) *mcp.CallToolResult {
	if !s.rt.Config().Toolgate.Management.AllowConfigChanges {
		s.log.Warn("config change refused: toolgate.management.allowConfigChanges is off", "tool", tool, "caller", c.String())
		return toolError("%s__%s is refused: changing the gateway's config from a client is turned off. A client that can add a server "+
			"can make the gateway run any program, so this needs \"toolgate\": {\"management\": {\"allowConfigChanges\": true}} in the config file, "+
			"and a client on stdio or with an admin API key. Ask the user to edit the config file or to run `toolgate servers add|remove`.", Name, tool)
	}
	if !c.MayChangeConfig() {
		s.log.Warn("config change refused: the caller is neither on stdio nor an admin", "tool", tool, "caller", c.String())
		return toolError("%s__%s is refused for this client (%s): config changes are allowed only for a client on stdio or one with an admin API key. "+
			"Ask the user to edit the config file or to run `toolgate servers add|remove`.", Name, tool, c.String())
	}
	if len(s.opts.ConfigPaths) == 0 {
		return toolError("%s__%s: the gateway was started without a config file to write", Name, tool)
	}
	return nil
}

// docs reads the config files as they are now.
func (s *Server) docs() ([]config.Doc, error) {
	return config.ReadDocs(s.opts.ConfigPaths)
}

// apply checks that docs make a valid config, writes the changed ones
// atomically and reloads: the change is in effect when it returns.
func (s *Server) apply(ctx context.Context, tool string, docs []config.Doc, changed map[int]bool) error {
	if _, _, _, err := config.ParseDocs(docs, nil); err != nil {
		return fmt.Errorf("the config would not be valid, so nothing was written: %w", err)
	}
	for i := range docs {
		if changed[i] {
			if err := config.WriteFile(docs[i].Path, docs[i].Data); err != nil {
				return err
			}
		}
	}
	if r := s.rt.Reload(ctx, Name+"__"+tool); r != nil && r.Error != "" {
		return fmt.Errorf("the config file was written but the gateway rejected it: %s", r.Error)
	}
	return nil
}

func (s *Server) addServer(ctx context.Context, c *policy.Caller, a addArgs) *mcp.CallToolResult {
	if refused := s.mayWrite(c, "add_server"); refused != nil {
		return refused
	}
	if !config.ValidName(a.Name) || a.Name == config.BuiltinServer {
		return toolError(`%q cannot name a server: use letters, digits, "_" and "-" (starting with a letter or digit, without "__"), and not %q`, a.Name, config.BuiltinServer)
	}
	if _, ok := s.rt.Config().MCPServers[a.Name]; ok {
		return toolError("a server named %q is in the config already: remove it first (toolgate__remove_server) or choose another name", a.Name)
	}
	entry := map[string]any{}
	set := func(k string, v any, ok bool) {
		if ok {
			entry[k] = v
		}
	}
	set("type", a.Type, a.Type != "")
	set("command", a.Command, a.Command != "")
	set("args", a.Args, len(a.Args) > 0)
	set("env", a.Env, len(a.Env) > 0)
	set("cwd", a.Cwd, a.Cwd != "")
	set("url", a.URL, a.URL != "")
	set("headers", a.Headers, len(a.Headers) > 0)
	raw, err := json.Marshal(entry)
	if err != nil {
		return toolError("add_server: %v", err)
	}
	docs, err := s.docs()
	if err != nil {
		return toolError("add_server: %v", err)
	}
	last := len(docs) - 1
	if docs[last].Data, err = config.SetServer(docs[last].Data, a.Name, raw); err != nil {
		return toolError("add_server: %s: %v", docs[last].Path, err)
	}
	if err := s.apply(ctx, "add_server", docs, map[int]bool{last: true}); err != nil {
		return toolError("add_server %q: %v", a.Name, err)
	}
	s.log.Info("server added to the config by a management call", "server", a.Name, "file", docs[last].Path, "caller", c.String())
	return result(map[string]any{"server": a.Name, "file": docs[last].Path},
		"Server %q is added to %s and starting; its tools are searchable once it has listed them (toolgate__server_status shows its state).", a.Name, docs[last].Path)
}

func (s *Server) removeServer(ctx context.Context, c *policy.Caller, a serverArgs) *mcp.CallToolResult {
	if refused := s.mayWrite(c, "remove_server"); refused != nil {
		return refused
	}
	docs, err := s.docs()
	if err != nil {
		return toolError("remove_server: %v", err)
	}
	changed := map[int]bool{}
	var files []string
	for i := range docs {
		out, found, err := config.DeleteServer(docs[i].Data, a.Name)
		if err != nil {
			return toolError("remove_server: %s: %v", docs[i].Path, err)
		}
		if found {
			docs[i].Data, changed[i] = out, true
			files = append(files, docs[i].Path)
		}
	}
	if len(files) == 0 {
		return toolError("there is no server named %q in the config (servers: %s)", a.Name, s.serverNames())
	}
	if err := s.apply(ctx, "remove_server", docs, changed); err != nil {
		return toolError("remove_server %q: %v", a.Name, err)
	}
	s.log.Info("server removed from the config by a management call", "server", a.Name, "files", files, "caller", c.String())
	return result(map[string]any{"server": a.Name, "files": files},
		"Server %q is removed from %s and stopped; its tools are gone from search_tools.", a.Name, strings.Join(files, " and "))
}
